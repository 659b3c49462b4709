"""The one-command capture (``real2sim init --frames --camera --robot --prompts``) with a box on the robot and a
click on each object, on the real Bridge clip: its plate against the person-made cleanup, next to the plain
per-pixel median of the same frames, and the command's time against computing that median.

Two camera files, one run each by default: ``--pose readme`` gives the README's camera pose (the stack_cube
frame's; this clip's own pose was never measured), ``--pose none`` the intrinsics only, as a user with a calibrated
camera in a new kitchen has it: the robot is then found by motion segmentation instead of the fitted model.

The cleanup is frame 0 with the robot and the can edited out; the pot and the eggplant, which never move, are in it,
while the command removes every prompted object from the plate by design (they become simulated objects and the
plate under them is inpainted). So the plate is scored twice: over every pixel the clip confirms
(``plate_cases.bridge_real_case``: ``valid``, and ``occluded``, what the robot passed over), and over those pixels
less the prompted objects that never moved (their frame-0 masks, dilated by 7 px).

``--framing NAME``: the clip, its cleanup, the camera's intrinsics and the prompts through one of
``plate_cases.REFRAMINGS`` first (a close-up crop, another size, sensor noise; not the portrait one, which turns the
camera's pose as well): the same command as another camera would have framed the scene. ``--camera SEED``: the
clip and its cleanup through another camera's look first (``plate_cases.through_another_camera``: white balance,
saturation, tone curve, vignetting, one look per seed): the same scene as another sensor records its colours.
``--shake PX``: the clip from a camera that shook, every frame after the first moved by up to +-PX px
(``plate_cases.through_a_shaking_camera``; the cleanup is frame 0's view).

    PYTHONPATH=$PWD MUJOCO_GL=egl .venv/bin/python benchmarks/bench_capture_init.py [--pose readme|none|both] [--keep DIR]
        [--framing NAME] [--camera SEED] [--shake PX]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
INTRINSICS = {"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545}
README_POSE = {"position": [0.0, -0.16, 0.336], "quaternion_wxyz": [0.909182, -0.0819809, 0.347277, 0.214629],
               "convention": "sapien"}
PROMPTS = {"robot": {"box": [430, 0, 640, 275]}, "can": {"points": [[240, 300]]}, "pot": {"points": [[300, 150]]},
           "eggplant": {"points": [[410, 230]]}}
STILL = ("pot", "eggplant")


def objects_place(root: Path, entities, px: float, outlines=()) -> np.ndarray:
    """``(h, w) bool``: where the bundle ``root``'s frame-0 masks of ``entities`` (and any ``outlines``, ``(h, w)
    bool``) lie, grown by 7 of the clip's pixels (``px``: one clip pixel's length in the image): the objects the
    command takes out of the plate by design, left out of the scores."""
    import cv2

    from real2sim.core.imaging import read_rgb

    places = list(outlines)
    for e in entities:
        m = read_rgb(root / "masks" / "000000" / f"{e}.png")
        places.append((m.max(-1) if m.ndim == 3 else m) > 127)
    k = 2 * max(1, int(round(7 * px))) + 1
    return cv2.dilate(np.any(places, axis=0).astype(np.uint8), np.ones((k, k), np.uint8)) > 0


def psnr(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> float:
    return float(10 * np.log10(255.0 ** 2 / np.mean((a[m].astype(float) - b[m]) ** 2)))


def main() -> None:
    from real2sim.demos.plate_cases import bridge_real_case

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="write the bundle here (default: a temporary folder)")
    ap.add_argument("--pose", choices=("readme", "none", "both"), default="both",
                    help="camera file with the README's pose, or intrinsics only (the robot by motion), or one run "
                         "of each (default)")
    ap.add_argument("--framing", help="one of plate_cases.REFRAMINGS (not 'portrait'): the clip as another camera "
                                      "would have framed it")
    ap.add_argument("--camera", type=int, metavar="SEED",
                    help="the clip and its cleanup through another camera's look first (one look per seed)")
    ap.add_argument("--shake", type=float, metavar="PX",
                    help="the clip from a camera that shook by up to +-PX px (frames after the first)")
    args, _ = ap.parse_known_args()  # (run_all.py passes its own filters)
    case = bridge_real_case(DATA)
    if case is None:
        print(f"skipped: {DATA}/bridge/bridge_real_1.mp4 or its cleanup is not there")
        return
    logging.getLogger("real2sim").setLevel(logging.ERROR)
    for pose in (("readme", "none") if args.pose == "both" else (args.pose,)):
        keep = None if args.keep is None else (args.keep if args.pose != "both" else args.keep / pose)
        run(case, pose, keep, args.framing, args.camera, args.shake)


def framed_inputs(case, framing_name: str | None):
    """(case, intrinsics, prompts, px): the clip's case, camera intrinsics and prompts through the framing (as
    they are without one), and the length of one of the clip's pixels in the framed image."""
    if framing_name is None:
        return case, dict(INTRINSICS), PROMPTS, 1.0
    from real2sim.demos.plate_cases import REFRAMINGS, framing_map, reframed, reframed_intrinsics

    framings = dict(REFRAMINGS)
    if framing_name not in framings:
        sys.exit(f"--framing {framing_name}: not one of {sorted(framings)}")
    framing = framings[framing_name]
    size = (INTRINSICS["width"], INTRINSICS["height"])
    K = [[INTRINSICS["fx"], 0.0, INTRINSICS["cx"]], [0.0, INTRINSICS["fy"], INTRINSICS["cy"]], [0.0, 0.0, 1.0]]
    K2, (w, h) = reframed_intrinsics(framing, K, size)
    M, _ = framing_map(framing, size)

    def at(x, y):
        return [float(M[0, 0] * x + M[0, 2]), float(M[1, 1] * y + M[1, 2])]

    prompts = {}
    for name, p in PROMPTS.items():
        if "box" in p:
            (x0, y0), (x1, y1) = at(*p["box"][:2]), at(*p["box"][2:])
            prompts[name] = {"box": [max(0.0, x0), max(0.0, y0), min(w - 1.0, x1), min(h - 1.0, y1)]}
        else:
            prompts[name] = {"points": [at(*q) for q in p["points"]]}
    intrinsics = {"width": w, "height": h, "fx": K2[0, 0], "fy": K2[1, 1], "cx": K2[0, 2], "cy": K2[1, 2]}
    return reframed(case, framing_name, framing), intrinsics, prompts, float(M[0, 0])


def run(case, pose: str, keep: Path | None, framing: str | None = None, look: int | None = None,
        shake: float | None = None) -> None:
    """One ``init`` on the clip with the camera file ``pose`` names, scored against the cleanup and the median
    (the clip through the framing ``framing``, the camera look of seed ``look`` and a shake of ``shake`` px first,
    where given)."""
    from real2sim.apps.cli import main as cli
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import read_rgb, write_rgb
    from real2sim.demos.plate_cases import through_a_shaking_camera, through_another_camera

    case, intrinsics, prompts, px = framed_inputs(case, framing)
    if look is not None:
        case = through_another_camera(case, look)
    if shake is not None:
        case = through_a_shaking_camera(case, shake)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = keep or tmp / "clip"
        camera = {**intrinsics, **({"pose": README_POSE} if pose == "readme" else {})}
        (tmp / "camera.json").write_text(json.dumps(camera))
        (tmp / "prompts.json").write_text(json.dumps(prompts))
        clip = DATA / "bridge" / "bridge_real_1.mp4"
        if (framing, look, shake) != (None, None, None):  # as lossless images (a video codec would add its own loss)
            clip = tmp / "frames"
            clip.mkdir()
            for i, f in enumerate(case.frames):
                write_rgb(clip / f"{i:06d}.png", f)
        t0 = time.perf_counter()
        code = cli(["init", str(root), "--frames", str(clip), "--camera",
                    str(tmp / "camera.json"), "--robot", "widowx", "--prompts", str(tmp / "prompts.json")])
        seconds = time.perf_counter() - t0
        if code != 0:
            sys.exit(f"real2sim init failed with exit code {code}")
        b = Bundle.load(root)
        robot_method = json.loads((root / "reports" / "robot_fit.json").read_text()).get("method")
        plate = read_rgb(b.path(b.manifest.capture.plate))
        still = objects_place(root, STILL, px)
    t0 = time.perf_counter()
    median = np.median(case.frames, axis=0).round().astype(np.uint8)
    t_median = time.perf_counter() - t0
    print("| pixels | n | init plate dB | plain median dB | gain |")
    print("|---|---|---|---|---|")
    rows = {}
    for name, m in (("confirmed by the clip", case.valid), ("  the robot passed over", case.occluded),
                    ("confirmed, less the still prompted objects", case.valid & ~still),
                    ("  the robot passed over, less them", case.occluded & ~still)):
        p, q = psnr(plate, case.truth, m), psnr(median, case.truth, m)
        rows[name.strip()] = round(p - q, 2)
        print(f"| {name} | {int(m.sum())} | {p:.2f} | {q:.2f} | {p - q:+.2f} |")
    print(f"time: init {seconds:.1f} s (masks, robot fit, plate) vs plain median {t_median:.2f} s: "
          f"ratio {seconds / max(t_median, 1e-9):.0f}x")
    print(f"camera pose: {pose}; robot masks by: {robot_method}; framing: {framing or 'as recorded'}; "
          f"camera look: {'as recorded' if look is None else look}; shake: {shake or 0} px")
    print("summary:", json.dumps({"pose": pose, "framing": framing, "look": look, "shake": shake,
                                  "robot_method": robot_method,
                                  "gain_db": rows, "init_s": round(seconds, 1)}))


if __name__ == "__main__":
    main()
