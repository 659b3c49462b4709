"""Background plate from 40 frames at 640x480 (target < 2 s) against the plain per-pixel median, same run.

    .venv/bin/python benchmarks/bench_capture.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402  (this folder)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bridge" / "bridge_real_1.mp4"


def frames40() -> tuple[np.ndarray, str]:
    if DATA.is_file():
        from real2sim.capture.frames import read_video

        f = read_video(DATA).frames
        return np.concatenate([f, f[-(40 - len(f)):]]) if len(f) < 40 else f[:40], "bridge_real_1.mp4 (+ repeats)"
    rng = np.random.default_rng(0)
    bg = rng.integers(60, 200, (480, 640, 3), dtype=np.uint8)
    out = np.repeat(bg[None], 40, 0)
    for i in range(40):
        out[i, 100:300, 10 + 14 * i:110 + 14 * i] = 20
    return out, "synthetic"


if __name__ == "__main__":
    from real2sim.capture.plate import make_plate, plain_median

    F, what = frames40()
    t_med, _ = best_of(lambda: plain_median(F))
    t_plate, _ = best_of(lambda: make_plate(F))
    print(f"plate, 40 frames {F.shape[2]}x{F.shape[1]} ({what})")
    print(f"  plain median      {t_med:7.3f} s")
    print(f"  make_plate        {t_plate:7.3f} s   (target < 2 s)   ratio {t_plate / t_med:5.2f}x the median")
