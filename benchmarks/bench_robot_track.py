"""Robot tracking through a clip (target <= 1 s per 640x480 frame on 2 cores), against the simplest alternatives.

Synthetic clips with a known robot (real2sim.demos.robot_clips: the WidowX rendered dark grey along a joint
trajectory over every real Bridge plate in ../shared/data, and a procedural one; shadow, noise, exposure drift),
tracked with the plate and without (background from the clip). Per frame: mask IoU with the rendered truth, arm
joint error. Baselines in the same run: the robot's box mask on frame 0 propagated as a rigid object (what the
capture did before), and a fit of every frame from the default pose (no seeding by the previous frame).

The real Bridge clip (bridge_real_1.mp4): reference robot mask per frame = frame minus the person-made plate
(threshold 40, the carried can's propagated mask and specks removed, the arm's connected parts kept). The README's
camera pose belongs to another frame; the tracker lays silhouettes on the arm with it, with wrong joints.

    .venv/bin/python benchmarks/bench_robot_track.py [--quick]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bridge"
BAR = 0.85


def _iou(a, b) -> float:
    u = (a | b).sum()
    return 1.0 if u == 0 else float((a & b).sum() / u)


def rigid_baseline(frames, box_mask):
    """The robot's frame-0 mask propagated as a rigid object (segmentation.propagate)."""
    from real2sim.segmentation.propagate import propagate_many

    return propagate_many(frames, {"robot": box_mask}, 0)["robot"].masks


def refit_baseline(clip, model, space, q0):
    """Every frame fitted on its own from the default pose (coarse search + fit), no previous-frame seed."""
    from real2sim.segmentation.robot_track import track_robot

    masks, qs = [], []
    for i in range(len(clip.frames)):
        tr = track_robot(clip.frames[i:i + 1], clip.camera, model, space, q0, 0, clip.plate)
        masks.append(tr.masks[0])
        qs.append(tr.joints[0])
    return masks, np.array(qs)


def score(masks, clip, joints=None, space=None) -> dict:
    ious = np.array([_iou(m, t) for m, t in zip(masks, clip.masks)])
    out = {"iou_min": ious.min(), "iou_mean": ious.mean(), "frames_at_bar": float((ious >= BAR).mean())}
    if joints is not None:
        vis = np.array([t.sum() > 2000 for t in clip.masks])
        err = np.degrees(np.abs(joints - clip.joints)[vis][:, space.arm])
        out.update({"joint_err_median_deg": float(np.median(err)), "joint_err_p90_deg": float(np.percentile(err, 90))})
    return out


class Clock:
    """Wall and CPU time of a block (the machine is shared: CPU seconds are what the work costs on a free core)."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c


def line(name, s, clock, n, ref=None):
    secs = clock.cpu
    extra = f"  ratio {secs / ref.cpu:5.2f}x" if ref else ""
    je = (f"  joint err median {s['joint_err_median_deg']:4.1f} deg, p90 {s['joint_err_p90_deg']:5.1f}"
          if "joint_err_median_deg" in s else "")
    me = f"  motion explained {s['motion']:.2f}" if s.get("motion") is not None else ""
    print(f"  {name:34s} IoU min {s['iou_min']:.3f} mean {s['iou_mean']:.3f} >= {BAR}: {100 * s['frames_at_bar']:5.1f}%"
          f"{je}{me}  {secs / n:5.2f} CPU s/frame ({clock.wall / n:5.2f} wall){extra}", flush=True)


def plates(quick: bool):
    from real2sim.core.imaging import read_rgb
    from real2sim.demos.robot_clips import procedural_plate

    out = [("procedural", procedural_plate())]
    for name in ("stack_cube_plate.png", "bridge_real_1_cleanup.png"):
        if (DATA / name).is_file():
            out.append((name, read_rgb(DATA / name)))
    return out[:2] if quick else out


def synthetic(quick: bool):
    import cv2

    from real2sim.core.manifest import RobotSpec
    from real2sim.demos.robot_clips import bridge_camera, make_robot_clip
    from real2sim.render.robot import load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation.robot_track import joint_space, track_robot

    rdef = get_robot("widowx")
    model = load_robot_model(RobotSpec(rdef.name))
    space = joint_space(rdef, model)
    n = 12 if quick else 16
    cases = []
    for k, (name, plate) in enumerate(plates(quick)):
        cases.append((f"{name}", dict(plate=plate, seed=k)))
    if not quick:
        name, plate = plates(quick)[-1]
        cases.append((f"{name} noise 8 exposure 8%", dict(plate=plate, seed=7, noise=8.0, exposure=0.08)))
        small = cv2.resize(plate, (320, 240), interpolation=cv2.INTER_AREA)
        cases.append((f"{name} 320x240", dict(plate=small, seed=5, camera=bridge_camera(320, 240))))
        big = cv2.resize(plate, (1280, 960), interpolation=cv2.INTER_LINEAR)
        cases.append((f"{name} 1280x960", dict(plate=big, seed=6, camera=bridge_camera(1280, 960))))
        cases.append((f"{name} occluder + out of view", dict(plate=plate, seed=3, occlude=(5,), out_of_view=(9, 12))))
    print(f"synthetic clips: WidowX on real plates, {n} frames each (truth known)")
    totals = []
    for name, kw in cases:
        clip = make_robot_clip(n_frames=n, **kw)
        print(f" {name} ({clip.frames.shape[2]}x{clip.frames.shape[1]})")
        with Clock() as t_rigid:
            box = rigid_baseline(clip.frames, clip.masks[0])  # best case: the true mask on frame 0
        line("rigid box propagation (before)", score(box, clip), t_rigid, n)
        for with_plate in (True, False):
            with Clock() as secs:
                tr = track_robot(clip.frames, clip.camera, model, space, rdef.default_qpos, 0,
                                 clip.plate if with_plate else None)
            s = score(tr.masks, clip, tr.joints, space)
            s["motion"] = tr.motion_explained_clip
            lost = [i for i, st in enumerate(tr.states) if st in ("lost", "out_of_view")]
            line("tracker, " + ("plate" if with_plate else "no plate (clip median)"), s, secs, n, t_rigid)
            if lost:
                print(f"  {'':34s} frames lost / out of view: {lost}")
            totals.append(s)
        if not quick and name == cases[0][0]:
            with Clock() as secs:
                masks, qs = refit_baseline(clip, model, space, rdef.default_qpos)
            line("fit every frame from default pose", score(masks, clip, qs, space), secs, n, t_rigid)
    return totals


def other_robot(quick: bool):
    """A robot the tracker was not tuned on: the Panda, large in a posed view, moving little, with a box prompt."""
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import RobotSpec
    from real2sim.demos.robot_clips import make_robot_clip, procedural_plate
    from real2sim.render.robot import load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation import segment
    from real2sim.segmentation.core import Prompt
    from real2sim.segmentation.robot_track import TrackConfig, joint_space, motion_masks, track_robot

    w, h, n = (320, 240, 6) if quick else (640, 480, 10)
    K = np.array([[0.8125 * w, 0, w / 2], [0, 0.8125 * w, h / 2], [0, 0, 1]])
    cam = Camera(w, h, K, look_at_opencv(np.array([1.3, 0.0, 0.9]), np.array([0.4, 0.0, 0.3])), np.zeros(5), 0.01, 10.0)
    clip = make_robot_clip(procedural_plate(w, h, seed=0), cam, n_frames=n, robot="panda", seed=1)
    rdef = get_robot("panda")
    model = load_robot_model(RobotSpec(rdef.name))
    space = joint_space(rdef, model)
    ys, xs = np.nonzero(clip.masks[0])
    prompt = segment(clip.frames[0], Prompt([], [], (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))))
    print(f"other robot: the Panda (103k-triangle meshes), {n} frames at {w}x{h}, box prompt (truth known)")
    with Clock() as t_rigid:
        box = rigid_baseline(clip.frames, prompt)
    line("rigid box propagation", score(box, clip), t_rigid, n)
    with Clock() as secs:
        mo = motion_masks(clip.frames, None, None)
    line("motion segmentation (the fallback)", score(mo.masks, clip), secs, n, t_rigid)
    runs = [("plate", True, TrackConfig()), ("no plate (clip median)", False, TrackConfig())]
    if not quick:  # the fit's silhouettes from the meshes the masks use (before fit_faces_per_pixel): the ratio
        runs.append(("plate, fit meshes at 2 faces/px", True, TrackConfig(fit_faces_per_pixel=2.0)))
    for name, with_plate, cfg in runs:
        with Clock() as secs:
            tr = track_robot(clip.frames, cam, model, space, model.default_q, 0, clip.plate if with_plate else None,
                             None, prompt, cfg)
        s = score(tr.masks, clip, tr.joints, space)
        s["motion"] = tr.motion_explained_clip
        line("tracker, " + name, s, secs, n, t_rigid)


def real_clip():
    from real2sim.capture.frames import read_frames
    from real2sim.core.imaging import clean_mask, dilate, read_rgb
    from real2sim.core.manifest import RobotSpec
    from real2sim.demos.robot_clips import bridge_camera
    from real2sim.render.robot import load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation import Prompt, propagate_many, segment
    from real2sim.segmentation.robot_track import joint_space, motion_masks, track_robot

    clip = DATA / "bridge_real_1.mp4"
    if not clip.is_file():
        print("real clip: ../shared/data absent, skipped")
        return
    frames = read_frames(clip).frames
    plate = read_rgb(DATA / "bridge_real_1_cleanup.png")
    n = len(frames)
    can = propagate_many(frames, {"can": segment(frames[0], Prompt([(240, 300)]), plate=plate)}, 0)["can"].masks
    diff = np.stack([np.abs(f.astype(int) - plate).max(-1) > 40 for f in frames])
    static = diff.mean(0) > 0.95  # differs from the plate in every frame: the can's old spot, the lit wall; not the arm
    can_any = dilate(np.any(can, 0), 5)
    refs = [clean_mask(d & ~can_any & ~static, 2, 3, True, 1500) for d in diff]
    print(f"real clip bridge_real_1.mp4 ({n} frames): reference = frame minus person-made plate > 40, without the "
          "carried can (all its places) and what differs in every frame")
    with Clock() as c:
        motion = motion_masks(frames, None, np.stack(can))
    secs = c.cpu
    ious = np.array([_iou(m, r) for m, r in zip(motion.masks, refs)])
    print(f"  motion fallback (no plate, no pose)  IoU min {ious.min():.3f} mean {ious.mean():.3f} median "
          f"{np.median(ious):.3f}  {secs / n:.2f} CPU s/frame")
    with Clock() as c:
        motion_p = motion_masks(frames, plate, np.stack(can))
    secs = c.cpu
    ious = np.array([_iou(m, r) for m, r in zip(motion_p.masks, refs)])
    print(f"  motion fallback (person plate)       IoU min {ious.min():.3f} mean {ious.mean():.3f}  {secs / n:.2f} CPU s/frame")
    box = propagate_many(frames, {"robot": refs[0]}, 0)["robot"].masks
    ious = np.array([_iou(m, r) for m, r in zip(box, refs)])
    print(f"  rigid propagation of frame 0's mask  IoU min {ious.min():.3f} mean {ious.mean():.3f}")
    rdef = get_robot("widowx")
    model = load_robot_model(RobotSpec(rdef.name))
    for name, bg in (("person plate", plate), ("no plate", None)):
        with Clock() as c:
            tr = track_robot(frames, bridge_camera(), model, joint_space(rdef, model), rdef.default_qpos, 0, bg,
                             exclude=np.stack(can))
        ious = np.array([_iou(m, r) for m, r in zip(tr.masks, refs)])
        print(f"  model tracker, README camera, {name:12s} IoU min {ious.min():.3f} mean {ious.mean():.3f}; fit IoU "
              f"median {np.nanmedian(tr.iou):.3f}; motion explained {tr.motion_explained_clip or float('nan'):.2f}; "
              f"lost {tr.states.count('lost')}  {c.cpu / n:.2f} CPU s/frame "
              f"({c.wall / n:.2f} wall)")
    print("  (the README camera pose is the stack_cube frame's: the joints fitted here are not this arm's, the "
          "silhouettes are)")


def main() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    quick = "--quick" in sys.argv
    t0 = time.perf_counter()
    synthetic(quick)
    other_robot(quick)
    real_clip()
    print(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
