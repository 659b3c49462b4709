"""Default segmentation per frame (target < 0.5 s) against plain thresholding, same run.

Default without a plate = GrabCut from one click; with a plate = differencing. Plain thresholding = one
global threshold of |frame - plate| (no morphology, no component selection). Propagation over the real Bridge
clip (3 objects, shared colour images and flow) per object and frame, against segmenting each frame afresh with
GrabCut from the same click (what a user without propagation would do, and wrong once the object moves).

    .venv/bin/python benchmarks/bench_segmentation.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402  (this folder)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bridge"


def images():
    import cv2

    if (DATA / "stack_cube_first_frame.png").is_file():
        img = cv2.cvtColor(cv2.imread(str(DATA / "stack_cube_first_frame.png")), cv2.COLOR_BGR2RGB)
        plate = cv2.cvtColor(cv2.imread(str(DATA / "stack_cube_plate.png")), cv2.COLOR_BGR2RGB)
        return img, plate, (170, 245), "stack_cube_first_frame.png"
    rng = np.random.default_rng(0)
    plate = rng.integers(100, 160, (480, 640, 3), dtype=np.uint8)
    img = plate.copy()
    img[200:260, 150:200] = (40, 160, 60)
    return img, plate, (175, 230), "synthetic"


if __name__ == "__main__":
    from real2sim.segmentation import Prompt, segment

    img, plate, click, what = images()
    p = Prompt([click])
    t_thr, _ = best_of(lambda: np.abs(img.astype(np.int16) - plate).max(-1) > 40, 5)
    t_gc, _ = best_of(lambda: segment(img, p), 5)
    t_diff, _ = best_of(lambda: segment(img, p, plate=plate), 5)
    print(f"segmentation per frame, {img.shape[1]}x{img.shape[0]} ({what})")
    print(f"  plain threshold         {t_thr * 1000:8.1f} ms")
    print(f"  default, no plate (grabcut, 1 click) {t_gc * 1000:8.1f} ms  (target < 500 ms)  ratio {t_gc / t_thr:6.1f}x")
    print(f"  default, plate (difference)          {t_diff * 1000:8.1f} ms                       ratio {t_diff / t_thr:6.1f}x")

    clip = DATA / "bridge_real_1.mp4"
    if clip.is_file():
        from real2sim.capture.frames import read_frames
        from real2sim.segmentation import propagate_many

        frames = read_frames(clip).frames
        clicks = {"can": (240, 300), "pot": (300, 150), "eggplant": (410, 230)}
        prompts = {k: segment(frames[0], Prompt([c])) for k, c in clicks.items()}
        t0 = time.perf_counter()
        propagate_many(frames, prompts, 0)
        t_prop = (time.perf_counter() - t0) / (len(clicks) * (len(frames) - 1))
        t_each, _ = best_of(lambda: segment(frames[5], Prompt([clicks["pot"]])), 3)
        print(f"propagation, {len(frames)} frames x {len(clicks)} objects (bridge_real_1.mp4)")
        print(f"  per object and frame    {t_prop * 1000:8.1f} ms  vs GrabCut per frame {t_each * 1000:8.1f} ms  "
              f"ratio {t_prop / t_each:6.2f}x")
