"""Default segmentation per frame (target < 0.5 s) against plain thresholding, same run.

Default without a plate = GrabCut from one click; with a plate = differencing. Plain thresholding = one
global threshold of |frame - plate| (no morphology, no component selection).

    .venv/bin/python benchmarks/bench_segmentation.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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


def best_of(fn, n=5):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


if __name__ == "__main__":
    from segmentation import Prompt, segment

    img, plate, click, what = images()
    p = Prompt([click])
    t_thr = best_of(lambda: np.abs(img.astype(np.int16) - plate).max(-1) > 40)
    t_gc = best_of(lambda: segment(img, p))
    t_diff = best_of(lambda: segment(img, p, plate=plate))
    print(f"segmentation per frame, {img.shape[1]}x{img.shape[0]} ({what})")
    print(f"  plain threshold         {t_thr * 1000:8.1f} ms")
    print(f"  default, no plate (grabcut, 1 click) {t_gc * 1000:8.1f} ms  (target < 500 ms)  ratio {t_gc / t_thr:6.1f}x")
    print(f"  default, plate (difference)          {t_diff * 1000:8.1f} ms                       ratio {t_diff / t_thr:6.1f}x")
