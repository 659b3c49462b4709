"""The robot found in every frame: a synthetic clip with a known robot (the WidowX rendered along a joint trajectory
over a table, with shadow, noise and exposure drift), tracked by its model from a box prompt; the error for a robot
prompt without a robot; recovery after occlusion and leaving the view; the fallbacks (recorded joints, unknown
camera pose)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from real2sim.core.bundle import Bundle
from real2sim.core.errors import SegmentationError
from real2sim.core.imaging import read_mask, write_rgb

# Mask IoU every tracked frame must reach against the rendered truth. On the synthetic clips of
# benchmarks/bench_robot_track.py tracked frames measure 0.90-0.99 (640x480, noise 3, exposure drift 4 %, shadow);
# 0.85 leaves room for the one-pixel-wide gripper edges and GL rasterisation differences between machines while
# still failing a mask that misses the forearm (~15 % of the arm's pixels) or a rigid box that stays behind.
BAR = 0.85
# A mask the tracker does not flag (lost / out of view) must at least be roughly right: just after a disturbance
# (an occluder, leaving the view) the fit is off by a few degrees for a frame or two and measures 0.83-0.89 on
# these clips; a mask on the wrong part of the image, or a rigid one left behind, scores under 0.6.
NOT_WRONG = 0.75


def _iou(a, b) -> float:
    u = (a | b).sum()
    return 1.0 if u == 0 else float((a & b).sum() / u)


@pytest.fixture(scope="module")
def robot_model():
    from real2sim.core.manifest import RobotSpec
    from real2sim.render.robot import load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation.robot_track import joint_space

    rdef = get_robot("widowx")
    model = load_robot_model(RobotSpec(rdef.name))
    return rdef, model, joint_space(rdef, model)


def _clip(**kw):
    from real2sim.demos.robot_clips import make_robot_clip, procedural_plate

    return make_robot_clip(procedural_plate(seed=kw.pop("plate_seed", 0)), **kw)


def _box(mask) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())]


def _capture(tmp_path, clip, prompts, robot="widowx", pose=True, plate=False):
    """A bundle made by the one-command capture from the clip's frames (camera of the clip, no --points)."""
    from real2sim.capture.camera_file import camera_to_dict
    from real2sim.pipeline.capture import capture_scene

    frames = tmp_path / "frames"
    frames.mkdir(exist_ok=True)
    for i, f in enumerate(clip.frames):
        write_rgb(frames / f"{i:06d}.png", f)
    cam = camera_to_dict(clip.camera)
    if not pose:
        del cam["T_world_camera"]
    (tmp_path / "camera.json").write_text(json.dumps(cam))
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))
    capture_scene(tmp_path / "scene", frames, camera=tmp_path / "camera.json", prompts=tmp_path / "prompts.json",
                  robot=robot, plate=plate)
    return Bundle.load(tmp_path / "scene")


def _track_with_a_box(tmp_path, robot_model, seed: int, n_frames: int = 10):
    """One command with a box on the robot over a synthetic clip: the bundle, each frame's mask IoU with the
    rendered truth and the arm joints' errors (deg, ``(n_frames, n_arm)``)."""
    _, _, space = robot_model
    clip = _clip(n_frames=n_frames, seed=seed)
    b = _capture(tmp_path, clip, {"robot": {"box": _box(clip.masks[0])}})
    cap = b.manifest.capture
    ious = [_iou(read_mask(b.path(cap.masks[f"{i:06d}"]["robot"])), clip.masks[i]) for i in range(n_frames)]
    q = np.array([f.joint_positions for f in cap.frames])
    return b, ious, np.degrees(np.abs(q - clip.joints)[:, space.arm])


@pytest.mark.parametrize("seed", [1, 4])
def test_robot_found_in_every_frame_of_a_synthetic_clip(tmp_path, robot_model, seed):
    """One command with a box on the robot: a mask and fitted joints in every frame, against the rendered truth.
    Of six trajectories measured (seeds 0-5), five keep every frame >= 0.85 (seed 0 since the velocity seed, see
    the next test); seed 2 does not (0.61 on its prompt frame, 0.71 on its last: without a plate the clip median
    keeps the arm where it lingers, docs/capture.md "The robot in every frame")."""
    b, ious, err = _track_with_a_box(tmp_path, robot_model, seed)
    cap = b.manifest.capture
    assert min(ious) >= BAR, np.round(ious, 3)
    assert np.median(err) < 5.0 and err[:, :3].max() < 15.0, np.round(err, 1)  # base yaw, shoulder, elbow
    rep = json.loads((b.root / "reports" / "robot_fit.json").read_text())
    assert rep["method"] == "model" and rep["lost_frames"] == [] and len(rep["per_frame"]) == 10
    assert all(p["iou"] > 0.8 for p in rep["per_frame"])  # the fit quality the report gives a person
    assert rep["motion_explained"] >= 0.45 and not any("fit may be stuck" in n for n in rep["notes"])
    assert (b.root / rep["picture"]).is_file()
    assert {cap.mask_state(f"{i:06d}", "robot") for i in range(10)} <= {"prompt", "moved"}
    assert np.allclose(b.manifest.robot.joint_positions, cap.frames[0].joint_positions)
    # the plate's robot extent: the fitted silhouette covers the robot pixels its masks miss
    from real2sim.capture.plate import fitted_robot_extent

    truth = _clip(n_frames=10, seed=seed).masks
    masks = np.stack([read_mask(b.path(cap.masks[f"{i:06d}"]["robot"])) for i in range(10)])
    extent = fitted_robot_extent(b, 10, masks.shape[1:])
    covered = [(t & m).sum() / t.sum() for t, m in zip(truth, masks | extent)]
    by_masks = [(t & m).sum() / t.sum() for t, m in zip(truth, masks)]
    assert min(covered) >= 0.97 and all(c >= m for c, m in zip(covered, by_masks)), np.round(covered, 3)


def test_wrist_does_not_drift_at_the_end_of_a_trajectory(tmp_path, robot_model):
    """Seed 0's last frames drifted in the wrist joints (shoulder, wrist angle and wrist rotate trade off in a
    silhouette seen from above) to mask IoU 0.65-0.75, until each frame was also started from the previous frame's
    joints moved on at their last velocity: every frame's mask >= 0.85 (measured 0.90 at worst) and the wrist
    within 15 deg. (The fit IoU its report gives is 0.78 on the last frame: the clip-median evidence there is
    partial; the mask is what is graded here.)"""
    _, ious, err = _track_with_a_box(tmp_path, robot_model, seed=0)
    assert min(ious) >= BAR, np.round(ious, 3)
    assert np.median(err) < 5.0 and err[-3:].max() < 15.0, np.round(err, 1)


def test_a_rigid_mask_does_not_follow_the_arm(robot_model):
    """What the capture did before (the box's mask propagated as a rigid object) fails the same bar: the test
    above measures something the old way did not give."""
    from real2sim.segmentation.propagate import propagate_many

    clip = _clip(n_frames=10, seed=0)
    masks = propagate_many(clip.frames, {"robot": clip.masks[0]}, 0)["robot"].masks
    assert min(_iou(m, t) for m, t in zip(masks, clip.masks)) < BAR


def test_robot_prompt_without_a_robot_names_the_entity_and_the_fix(tmp_path):
    from real2sim.pipeline.capture import PromptFileError
    from real2sim.segmentation.stage import segment_stage

    clip = _clip(n_frames=2, seed=1)
    with pytest.raises(PromptFileError, match=r"entity 'robot'.*--robot NAME"):
        _capture(tmp_path, clip, {"robot": {"box": _box(clip.masks[0])}}, robot=None)
    assert not (tmp_path / "scene").exists()  # refused before anything was written
    b = _capture(tmp_path, clip, {"can": {"points": [[100, 400]]}}, robot=None)
    before = (b.root / "scene.json").read_bytes()
    with pytest.raises(SegmentationError, match=r"entity 'widowx' names the robot.*--robot NAME"):
        segment_stage(b, {"widowx": {"prompt": {"box": _box(clip.masks[0])}}})
    assert (b.root / "scene.json").read_bytes() == before  # nothing in the bundle lost


def test_tracker_recovers_after_occlusion_and_leaving_the_view(robot_model):
    """A grey block over half of the arm in frame 4, the arm lifted out of view in frames 8-10: no frame has a
    confident wrong mask (it is roughly right or says lost / out of view), and tracking is back after both."""
    from real2sim.segmentation.robot_track import track_robot

    rdef, model, space = robot_model
    clip = _clip(n_frames=16, seed=3, occlude=(4,), out_of_view=(8, 10))
    assert clip.occluded == [4] and clip.out_of_view
    tr = track_robot(clip.frames, clip.camera, model, space, rdef.default_qpos, 0, clip.plate)
    ious = [_iou(m, t) for m, t in zip(tr.masks, clip.masks)]
    for i, (v, st) in enumerate(zip(ious, tr.states)):  # no confident wrong mask
        assert v >= NOT_WRONG or st in ("lost", "out_of_view"), (i, v, st, tr.states)
    after = range(max(clip.out_of_view) + 2, 16)
    assert all(tr.states[i] == "tracked" and ious[i] >= BAR for i in after), (tr.states, np.round(ious, 3))
    assert any(tr.states[i] == "out_of_view" for i in clip.out_of_view)  # said, not guessed


def test_with_a_plate_a_frame_is_fitted_from_every_seed_when_its_best_looking_one_falls_short(robot_model,
                                                                                               shared_data):
    """The WidowX over the Bridge clip's person-made plate, 16 frames (bench_robot_track.py's clip): the seed that
    overlapped best at the start (the joints moved on at their last velocity) led frame 3 into a worse local fit,
    and every later frame drifted from it (mask IoU 0.85-0.91 from frame 5 on, joint errors 25-45 deg). Fitting
    from the other seed too when the fit falls short of the clip's typical IoU keeps every frame >= 0.9 (0.92 at
    worst measured)."""
    from real2sim.core.imaging import read_rgb
    from real2sim.demos.robot_clips import make_robot_clip
    from real2sim.segmentation.robot_track import track_robot

    rdef, model, space = robot_model
    clip = make_robot_clip(read_rgb(shared_data / "bridge" / "bridge_real_1_cleanup.png"), n_frames=16, seed=2)
    tr = track_robot(clip.frames, clip.camera, model, space, rdef.default_qpos, 0, clip.plate)
    ious = [_iou(m, t) for m, t in zip(tr.masks, clip.masks)]
    assert min(ious) >= 0.9 and tr.states.count("tracked") == 15, (np.round(ious, 3), tr.states)


def test_recorded_joints_render_the_masks(tmp_path, robot_model):
    """Frames that carry their joints (a LeRobot episode): the robot is rendered at them, nothing is fitted."""
    from real2sim.segmentation.robot_fit import robot_fit_stage

    clip = _clip(n_frames=4, seed=4)
    b = _capture(tmp_path, clip, {"can": {"points": [[60, 420]]}})
    for f, q in zip(b.manifest.capture.frames, clip.joints):
        f.joint_positions = [float(v) for v in q]
    b.manifest.stages["capture"].metrics["joint_states"] = True  # what init records for a LeRobot episode
    b.save()
    rec, _ = robot_fit_stage(b)
    assert rec.metrics["method"] == "recorded"
    b = Bundle.load(b.root)
    for i in range(4):
        m = read_mask(b.path(b.manifest.capture.masks[f"{i:06d}"]["robot"]))
        assert _iou(m, clip.masks[i]) >= BAR
        assert np.allclose(b.manifest.capture.frames[i].joint_positions, clip.joints[i])  # kept, not refitted


@pytest.mark.slow
def test_a_prompted_frame_without_the_robot_says_so_instead_of_a_nan_iou(tmp_path):
    """The camera's pose is known but the prompted frame shows only the background (the robot out of view, or as
    dark as what is behind it through a camera's tone curve): the fallback to motion said "best silhouette IoU nan;
    its pose is probably wrong"; it now says the frame shows too few pixels that differ from the background."""
    from dataclasses import replace

    clip = _clip(n_frames=8, seed=5)
    frames = clip.frames.copy()
    frames[0] = clip.plate
    b = _capture(tmp_path, replace(clip, frames=frames), {"robot": {"box": _box(clip.masks[1])}})
    rep = json.loads((b.root / "reports" / "robot_fit.json").read_text())
    assert rep["method"] == "motion", rep
    assert "too few pixels that differ from the background" in rep["camera_pose"], rep["camera_pose"]
    assert "nan" not in rep["camera_pose"]


@pytest.mark.slow
def test_unknown_camera_pose_falls_back_to_motion(tmp_path):
    """A camera file without a pose: no joints can be fitted; the robot's masks come from motion and the report
    says why."""
    clip = _clip(n_frames=8, seed=5)
    b = _capture(tmp_path, clip, {"robot": {"box": _box(clip.masks[0])}}, pose=False)
    rep = json.loads((b.root / "reports" / "robot_fit.json").read_text())
    assert rep["method"] == "motion" and rep["camera_pose"].startswith("unknown")
    assert "motion segmentation" in " ".join(rep["notes"])
    assert all(f.joint_positions is None for f in b.manifest.capture.frames)
    ious = [_iou(read_mask(b.path(b.manifest.capture.masks[f"{i:06d}"]["robot"])), clip.masks[i]) for i in range(8)]
    assert np.mean(ious) > 0.6, np.round(ious, 3)  # measured 0.8-0.9: motion finds the moving arm, not its still parts


@pytest.fixture
def robot_gate_past_every_fit(monkeypatch):
    """The robot fit's quality gate raised to 0.999, past any fit of these clips: every fit is one under it."""
    from dataclasses import replace

    import real2sim.core.gates as gates

    monkeypatch.setattr(gates, "GATES", tuple(replace(g, bar=0.999) if g.stage == "robot_fit" else g
                                              for g in gates.GATES))


def test_a_fit_under_its_gate_still_keeps_the_robot_out_of_the_plate(tmp_path, robot_gate_past_every_fit):
    """A fit that misses its quality gate applies neither joints nor masks, but its silhouettes (from its report)
    in the frames it fitted well are the robot's extent for the plate: before, the plate was made as if there were
    no robot (over the robot's pixels 19.2 dB on this clip, the plain median 17.2; with the silhouettes 41.6). The
    gate's bar is raised past the fit's 0.90 to make this fit a poor one (the frames' floor stays at 0.7)."""
    from real2sim.capture.plate import PlateConfig, make_plate, plain_median, plate_stage
    from real2sim.core.imaging import psnr, read_rgb
    from real2sim.demos.plate_cases import gain_to

    clip = _clip(n_frames=10, seed=1)
    b = _capture(tmp_path, clip, {"robot": {"box": _box(clip.masks[0])}})
    assert b.manifest.stages["robot_fit"].metrics["applied"] is False
    assert all(f.joint_positions is None for f in b.manifest.capture.frames)  # the gate still holds the joints
    assert not any("robot" in ents for ents in b.manifest.capture.masks.values())  # ... and the masks
    plate_stage(b)
    rep = json.loads((b.root / "reports" / "plate.json").read_text())
    assert "quality gate" in rep["fitted_robot_extent"]
    truth = gain_to(clip.plate[None], clip.frames[0])[0]
    robot = clip.masks.any(0)
    plate = psnr(read_rgb(b.path(b.manifest.capture.plate)), truth, robot)
    without = psnr(make_plate(clip.frames, None, PlateConfig())[0], truth, robot)
    assert plate > without + 10 and plate > psnr(plain_median(clip.frames), truth, robot) + 10, (plate, without)


@pytest.mark.slow
def test_a_fit_that_stays_under_its_gate_lets_the_build_settle(tmp_path, robot_gate_past_every_fit):
    """The one command whose robot fit misses its gate before and after the plate (the bar raised past the fit's
    0.90): the plate takes the second fit's silhouettes, and 'real2sim build' then settles: every build re-ran the
    plate and the fit before (the plate's silhouettes came from the last fit's report, the fit from the last
    plate), until a fit under the gate that repeats the last one's silhouettes keeps it."""
    from real2sim.pipeline import build

    clip = _clip(n_frames=10, seed=1)
    b = _capture(tmp_path, clip, {"robot": {"box": _box(clip.masks[0])}}, plate=True)
    rep = json.loads((b.root / "reports" / "plate.json").read_text())
    assert b.manifest.stages["robot_fit"].metrics["applied"] is False and "quality gate" in rep["fitted_robot_extent"]
    ran = [build(Bundle.load(b.root)) for _ in range(3)]
    assert not any(ran[-1].values()), ran
    assert Bundle.load(b.root).manifest.stages["plate"].status == "done"


def _capture_plate_case(tmp_path, shared_data, name: str, camera, prompts):
    """The one-command capture (robot: the WidowX) on the plate benchmark's clip ``name``; ``camera`` and
    ``prompts`` are functions of (case, w, h) giving the camera-file and prompts dicts. Returns (case, bundle
    root, plate PSNR, plain median PSNR) against the clip's true background."""
    from real2sim.core.imaging import read_rgb
    from real2sim.demos.plate_cases import plate_cases
    from real2sim.pipeline.capture import capture_scene

    case = plate_cases(shared_data, [name])[0]
    frames = tmp_path / "frames"
    frames.mkdir()
    for i, f in enumerate(case.frames):
        write_rgb(frames / f"{i:06d}.png", f)
    h, w = case.truth.shape[:2]
    (tmp_path / "camera.json").write_text(json.dumps(camera(case, w, h)))
    (tmp_path / "prompts.json").write_text(json.dumps(prompts(case, w, h)))
    capture_scene(tmp_path / "scene", frames, camera=tmp_path / "camera.json", prompts=tmp_path / "prompts.json",
                  robot="widowx")
    b = Bundle.load(tmp_path / "scene")
    plate = read_rgb(b.path(b.manifest.capture.plate)).astype(float)
    median = np.median(case.frames, axis=0).round()

    def psnr(img):
        return 10 * np.log10(255.0 ** 2 / np.mean((img - case.truth) ** 2))

    return case, tmp_path / "scene", psnr(plate), psnr(median)


@pytest.mark.slow
def test_a_robot_box_over_the_whole_image_is_a_hint_not_a_crash(tmp_path, shared_data, caplog):
    """A robot that fills the view gets a box over the whole image; GrabCut cannot cut that box (no background
    outside it), which stopped the whole one-command capture with a traceback. The box is a hint: the robot is
    tracked without it (posed camera: the model path), a warning names the frame, and the plate is made
    (plate benchmark clip ``widowx_few_5``: at least 1 dB over the plain median)."""
    from real2sim.capture.camera_file import camera_to_dict
    from real2sim.demos.plate_cases import robot_camera, widowx_model

    with caplog.at_level("WARNING", logger="real2sim"):
        _, root, plate, median = _capture_plate_case(
            tmp_path, shared_data, "widowx_few_5",
            lambda case, w, h: camera_to_dict(robot_camera("widowx", widowx_model(), (w, h))),
            lambda case, w, h: {"robot": {"box": [0, 0, w, h]}})
    assert "robot's prompt on frame 0 gives no mask" in caplog.text and "box covers the whole image" in caplog.text
    assert json.loads((root / "reports" / "robot_fit.json").read_text())["method"] == "model"
    assert plate >= median + 1.0, (plate, median)


@pytest.mark.slow
def test_without_a_camera_pose_a_lingering_robot_stays_out_of_the_plate(tmp_path, shared_data):
    """The one-command capture with a box on the robot and a camera file without a pose, on a clip where the WidowX
    lingers over most frames (the plate benchmark's ``widowx_lowres_linger``): the robot's motion masks, made
    against a median that is the robot where it lingers, are left out of the plate, which is then at least 1 dB
    over the plain median (with them as given foreground it fell under it: 21.12 vs 21.31 dB)."""
    def robot0_box(case, w, h):  # the robot in frame 0, roughly
        return {"robot": {"box": _box(np.abs(case.frames[0].astype(int) - case.truth).max(-1) > 40)}}

    case, root, plate, median = _capture_plate_case(
        tmp_path, shared_data, "widowx_lowres_linger",
        lambda case, w, h: {"width": w, "height": h, "fx": 0.9 * w, "fy": 0.9 * w, "cx": w / 2, "cy": h / 2},
        robot0_box)
    assert json.loads((root / "reports" / "robot_fit.json").read_text())["method"] == "motion"
    assert "robot" in json.loads((root / "reports" / "plate.json").read_text())["masks_left_out"]
    assert plate >= median + 1.0, (plate, median)
    b = Bundle.load(root)
    robot = [read_mask(b.path(b.manifest.capture.masks[f"{i:06d}"]["robot"])) for i in range(len(case.frames))]
    assert sum(m.any() for m in robot) >= len(robot) // 2  # the refitted motion masks are written for the review


def test_a_large_robot_standing_in_the_clip_median_is_fitted_from_its_prompt():
    """The Panda (a robot the tracker was never tuned on), large in a 320x240 view and moving little over 6 frames:
    the clip's median holds it, so against the median its start frame fits nowhere. Before, the capture fell back
    to motion segmentation ("the camera pose is probably wrong"; masks IoU 0.05-0.2 with the truth on the same clip
    at 640x480). The start frame is fitted to the box prompt's mask, and the background is taken, outside where the
    robot stood, from the frames that look there as the start frame does, and inside from the frames where the
    robot moved off. Before that background (the median outside) the later frames stood still where the median
    held the white arm (masks 0.46-0.94, the motion check warned); now measured 0.79-0.93, mean 0.88. The clip is
    not first tracked against the median that holds the robot, then again against that median without the failed
    track (two rounds that never rescued the start frame: the same masks at two thirds of the work)."""
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import RobotSpec
    from real2sim.demos.robot_clips import make_robot_clip, procedural_plate
    from real2sim.render.robot import load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation import segment
    from real2sim.segmentation.core import Prompt
    from real2sim.segmentation.robot_track import joint_space, track_robot

    K = np.array([[260.0, 0, 160], [0, 260, 120], [0, 0, 1]])
    cam = Camera(320, 240, K, look_at_opencv(np.array([1.3, 0.0, 0.9]), np.array([0.4, 0.0, 0.3])), np.zeros(5), 0.01, 10.0)
    clip = make_robot_clip(procedural_plate(320, 240, seed=0), cam, n_frames=6, robot="panda", seed=1)
    rdef = get_robot("panda")
    model = load_robot_model(RobotSpec(rdef.name))
    prompt = segment(clip.frames[0], Prompt([], [], tuple(_box(clip.masks[0]))))
    track = track_robot(clip.frames, cam, model, joint_space(rdef, model), model.default_q, 0, None, None, prompt)
    ious = [_iou(m, t) for m, t in zip(track.masks, clip.masks)]
    assert track.method == "model" and "fitted to the prompt's mask" in " ".join(track.notes), track.notes
    assert sum("without the tracked robot" in n for n in track.notes) == 1, track.notes  # the prompt's round only
    assert ious[0] >= 0.9 and min(ious) >= 0.7 and np.mean(ious) >= 0.8, np.round(ious, 3)
    assert track.motion_explained_clip >= 0.45 and not any("fit may be stuck" in n for n in track.notes), (
        track.motion_explained_clip, track.notes)


def test_a_robot_that_stops_is_found_in_the_frames_it_holds_still(robot_model):
    """Without a plate, a WidowX that holds still over half of a 16-frame clip (320x240, from a box on frame 0): the
    clip's median was the robot where it stood, nothing differed in those frames and they were called out of view
    with empty masks (4 trajectory seeds: masks 0.00 in the 9 held frames; means 0.19-0.78). The median now counts
    each distinct view once (a still stretch is one view): the held frames are tracked, measured 0.83-0.99 (seed 2:
    0.95-0.96, the clip's mean 0.93)."""
    from real2sim.demos.plate_cases import ClipSpec, robot_camera, synth_clip
    from real2sim.demos.robot_clips import procedural_plate
    from real2sim.segmentation import segment
    from real2sim.segmentation.core import Prompt
    from real2sim.segmentation.robot_track import track_robot

    _, model, space = robot_model
    case = synth_clip("held", procedural_plate(320, 240, seed=2), ClipSpec("widowx", 16, linger=0.5, seed=2))
    truth = case.occluder_masks
    held = [i for i in range(1, 16) if (truth[i] == truth[i - 1]).all()]
    assert len(held) >= 7, held  # the clip holds the robot still
    prompt = segment(case.frames[0], Prompt([], [], tuple(_box(truth[0]))))
    track = track_robot(case.frames, robot_camera("widowx", model, (320, 240)), model, space, model.default_q, 0,
                        None, None, prompt)
    ious = np.array([_iou(m, t) for m, t in zip(track.masks, truth)])
    assert "out_of_view" not in track.states, track.states
    assert ious[held].min() >= BAR and ious.mean() >= BAR, np.round(ious, 3)


def test_a_start_frame_far_from_the_seed_pose_is_fitted_from_the_grids_best_few(robot_model, shared_data):
    """The start frame's seed (the robot's default joints) is far from the arm's pose: the fit from the grid
    search's single best pose ended in a wrong local fit (silhouette IoU 0.41 with the truth on the plate benchmark's
    ``widowx_moving`` frame 0, with its true plate). Fitted from the grid's four best distinct poses, the best fit
    kept: measured 0.95. (Over the 18 robot clips' first and middle frames: mean 0.81 -> 0.86, below 0.8 13 -> 7 of
    36.)"""
    from real2sim.demos.plate_cases import plate_cases, robot_camera
    from real2sim.segmentation import segment
    from real2sim.segmentation.core import Prompt
    from real2sim.segmentation.robot_track import track_robot

    rdef, model, space = robot_model
    case = plate_cases(shared_data, ["widowx_moving"])[0]
    truth = case.occluder_masks[0]
    prompt = segment(case.frames[0], Prompt([], [], tuple(_box(truth))))
    track = track_robot(case.frames[:1], robot_camera("widowx", model, truth.shape[::-1]), model, space,
                        np.asarray(rdef.default_qpos, float), 0, case.truth, None, prompt)
    assert _iou(track.silhouettes[0], truth) >= BAR, _iou(track.silhouettes[0], truth)


def test_a_fit_that_stands_still_while_the_arm_moves_is_flagged(robot_model):
    """A fit can agree with evidence that misses the arm (a background that holds it) and stand still while the arm
    moves: its IoU says nothing, the share of the image's frame-to-frame change its motion explains does. The true
    silhouettes explain most of it; the start frame's silhouette held over the clip explains none."""
    from real2sim.segmentation.robot_track import TrackConfig, motion_explained

    clip = _clip(n_frames=6, seed=1)
    n = len(clip.frames)
    excl = np.zeros(clip.frames.shape[:3], bool)
    states = ["prompt"] + ["tracked"] * (n - 1)
    cfg = TrackConfig()
    _, followed = motion_explained(clip.frames, list(clip.masks), states, excl, 8.0, 10, 0, cfg)
    per_frame, still = motion_explained(clip.frames, [clip.masks[0]] * n, states, excl, 8.0, 10, 0, cfg)
    assert followed >= cfg.min_motion_explained > still, (followed, still)
    assert per_frame[0] is None  # the start frame has no neighbour towards the start


def test_one_sided_silhouettes_draw_the_faces_towards_the_camera_and_only_for_closed_meshes(robot_model):
    """The fit's silhouettes draw only the faces turned towards the camera (about 30 % cheaper): a closed mesh's
    silhouette is theirs alone. A face turned away is not drawn that way, so meshes that are not closed (a plate
    of single-sided faces) keep both sides, and the robot's closed meshes give the same silhouettes either way."""
    import dataclasses

    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.render.raster import camera_clip, coverage_clip
    from real2sim.render.robot import RobotSilhouette

    cam = Camera(64, 48, np.array([[50.0, 0, 32], [0, 50, 24], [0, 0, 1]]), np.eye(4), np.zeros(5), 0.01, 10.0)
    tri = camera_clip(cam, np.array([[0, 0, 1.0], [0.2, 0, 1.0], [0, 0.2, 1.0]]))  # its normal +z: away
    assert coverage_clip(tri, np.array([[0, 2, 1]]), 64, 48, one_side=True).sum() > 40  # turned towards
    assert coverage_clip(tri, np.array([[0, 1, 2]]), 64, 48, one_side=True).sum() == 0
    assert coverage_clip(tri, np.array([[0, 1, 2]]), 64, 48).sum() > 40

    _, model, space = robot_model
    view = Camera(160, 120, np.array([[130.0, 0, 80], [0, 130, 60], [0, 0, 1]]),
                  look_at_opencv(np.array([0.7, 0.0, 0.6]), np.array([0.3, 0.0, 0.2])), np.zeros(5), 0.01, 10.0)
    closed = RobotSilhouette(model, view, one_side=True)
    assert closed.one_side
    q = np.array(model.default_q, float)
    q[space.arm[:3]] += [0.3, -0.2, 0.4]
    assert _iou(closed(q), closed(q, one_side=False)) > 0.99
    square = (np.array([[-0.05, -0.05, 0], [0.05, -0.05, 0], [0.05, 0.05, 0], [-0.05, 0.05, 0]]),
              np.array([[0, 1, 2], [0, 2, 3]]))
    plates = dataclasses.replace(model, links={name: square for name in model.links})
    assert not RobotSilhouette(plates, view, one_side=True).one_side


def test_a_finely_tessellated_robot_is_fitted_from_coarser_silhouettes():
    """The Panda's meshes hold 103k triangles; the fit renders hundreds of silhouettes a frame, and a render's cost
    is its faces (3.1 ms a silhouette at 160x120 from meshes at 2 faces per pixel, 1.3 ms at 0.5). The fit's
    silhouettes come from meshes coarsened to ``fit_faces_per_pixel`` (not below ``fit_min_faces``): they still
    agree with the full meshes', and the track with a plate finds the robot in every frame (here masks 0.839 /
    0.871 min / mean, 0.833 / 0.868 with the finer meshes; at 640x480 0.827 / 0.862 and 0.826 / 0.863)."""
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import RobotSpec
    from real2sim.demos.robot_clips import make_robot_clip, procedural_plate
    from real2sim.render.robot import RobotSilhouette, load_robot_model
    from real2sim.robots import get_robot
    from real2sim.segmentation import segment
    from real2sim.segmentation.core import Prompt
    from real2sim.segmentation.robot_track import Fitter, TrackConfig, joint_space, track_robot

    K = np.array([[260.0, 0, 160], [0, 260, 120], [0, 0, 1]])
    cam = Camera(320, 240, K, look_at_opencv(np.array([1.3, 0.0, 0.9]), np.array([0.4, 0.0, 0.3])), np.zeros(5), 0.01, 10.0)
    clip = make_robot_clip(procedural_plate(320, 240, seed=0), cam, n_frames=6, robot="panda", seed=1)
    rdef = get_robot("panda")
    model = load_robot_model(RobotSpec(rdef.name))
    space = joint_space(rdef, model)
    cfg = TrackConfig()
    fitter = Fitter(model, cam, space, cfg)
    small = fitter.small
    exact = RobotSilhouette(model, small, pixel_frac=0.0)  # every triangle
    budget = max(cfg.fit_faces_per_pixel * small.width * small.height, cfg.fit_min_faces)
    assert len(fitter.sil_small.faces) <= budget < len(exact.faces) / 4
    for q in clip.joints:  # 80x60 pixels: measured 0.97-0.99
        assert _iou(fitter.sil_small(q), exact(q)) >= 0.95
    prompt = segment(clip.frames[0], Prompt([], [], tuple(_box(clip.masks[0]))))
    track = track_robot(clip.frames, cam, model, space, model.default_q, 0, clip.plate, None, prompt, cfg)
    ious = [_iou(m, t) for m, t in zip(track.masks, clip.masks)]
    assert min(ious) >= 0.8 and np.mean(ious) >= 0.84, np.round(ious, 3)  # measured 0.839 / 0.871


def test_a_frame_whose_fit_fell_short_is_fitted_again_from_the_other_neighbour(robot_model):
    """Tracking reaches a frame from one side only; a frame it fitted badly (here: left at a pose far off, as a
    fit that slid into a wrong minimum) is fitted again from its well-fitted neighbours and recovers the arm; the
    well-fitted frames are not touched."""
    from real2sim.segmentation.robot_track import Fitter, TrackConfig, _repair_from_neighbours, make_evidence

    _, model, space = robot_model
    clip = _clip(n_frames=6, seed=2)
    fitter = Fitter(model, clip.camera, space, TrackConfig())
    evs = [make_evidence(m, np.zeros_like(m), fitter.small) for m in clip.masks]
    Q = clip.joints.astype(float).copy()
    bad = 3
    Q[bad, space.arm[:3]] += (0.5, -0.35, 0.4)
    iou = np.array([fitter.iou(q, ev) for q, ev in zip(Q, evs)])
    assert iou[bad] < 0.6 < 0.9 < iou[np.arange(6) != bad].min()
    states = ["prompt"] + ["tracked"] * 5
    states[bad] = "lost"
    before = Q.copy()
    nev = _repair_from_neighbours(fitter, evs, Q, iou, states, [0] * 6, start=0)
    assert iou[bad] > 0.9 and states[bad] == "tracked" and nev[bad] > 0
    assert _iou(fitter.sil_full(Q[bad]), clip.masks[bad]) > BAR
    assert np.array_equal(np.delete(Q, bad, 0), np.delete(before, bad, 0)) and sum(np.delete(nev, bad)) == 0


@pytest.mark.parametrize("robot", ["widowx250s", "panda"])
def test_the_silhouettes_prepared_pose_chain_poses_every_link_as_the_urdf_does(robot):
    """The fit's silhouettes pose the links with a chain prepared once (each joint's origin times the parts of its
    motion: revolute and prismatic) instead of walking the URDF per render: the same pose of every link, at the
    rest pose, at random poses and beyond the joint limits."""
    from real2sim.core.manifest import RobotSpec
    from real2sim.render.robot import load_robot_model
    from real2sim.robots.scene import PoseChain, link_poses

    model = load_robot_model(RobotSpec(robot))
    chain = PoseChain(model.joints, model.root, model.joint_names)
    assert {j.type for j in model.joints} & {"revolute", "prismatic"}
    rng = np.random.default_rng(0)
    for q in [model.default_q] + [model.default_q + rng.uniform(-3, 3, len(model.default_q)) for _ in range(20)]:
        want = link_poses(model.joints, model.root, dict(zip(model.joint_names, q)))
        got = chain(q)
        assert set(got) == set(want)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], atol=1e-12, err_msg=name)


def test_a_clip_without_any_evidence_of_the_robot_is_reported_not_a_numpy_error(robot_model):
    """No plate and nothing moves: no frame holds evidence of the robot, so none can be graded. Every frame is
    reported (out of view, no IoU) instead of the log line's median over no graded frame raising numpy's
    RuntimeWarning (an error under this suite's settings, a stray warning for a user)."""
    from real2sim.segmentation.robot_track import track_robot

    rdef, model, space = robot_model
    clip = _clip(n_frames=1, seed=0, noise=0.0, exposure=0.0)
    frames = np.repeat(clip.frames, 4, axis=0)
    track = track_robot(frames, clip.camera, model, space, rdef.default_qpos, 0, None)
    assert track.states == ["out_of_view"] * 4
    assert np.isnan(track.iou).all()


def test_a_threshold_that_leaves_no_evidence_of_the_robot_is_not_chosen_for_the_start_frame(robot_model):
    """A black arm on a dark brown table (it differs by about 40 grey levels; the noise threshold is 8): the start
    frame's highest threshold (8x the noise) leaves no evidence, and the fit moved the robot out of the image, an
    empty silhouette on empty evidence, IoU 1.0, which beat every real fit: the start frame was then graded out of
    view and the whole clip went to motion segmentation (the WidowX rendered over open_drawer_a2's real plate
    through another camera's look, `bench_capture_init_clips.py --camera 0`).
    A level without evidence is never chosen over one with it."""
    from real2sim.demos.robot_clips import bridge_camera, make_robot_clip
    from real2sim.segmentation.robot_track import track_robot

    rdef, model, space = robot_model
    rng = np.random.default_rng(0)
    plate = np.clip(np.array([60, 48, 36]) + rng.normal(0, 3, (240, 320, 3)), 0, 255).astype(np.uint8)
    clip = make_robot_clip(plate, n_frames=2, seed=0, camera=bridge_camera(320, 240))
    tr = track_robot(clip.frames, clip.camera, model, space, rdef.default_qpos, 0, clip.plate)
    assert tr.states == ["prompt", "tracked"], tr.states
    assert min(_iou(m, t) for m, t in zip(tr.masks, clip.masks)) >= BAR
