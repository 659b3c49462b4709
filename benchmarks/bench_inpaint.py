"""Inpainting of never-seen places (objects that never moved) against truth: object-shaped holes cut into every real
plate in ../shared/data, filled by each method, compared with the plate.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_inpaint.py [--json out.json] [--markdown]

Holes: per plate (the Bridge cleanup and stack-cube plate, 640x480; the 11 Google Robot overlays, 320x256) three
blobs (an ellipse with a bump, random pose, seeded) of 5, 9 and 15 % of ``sqrt(h * w)`` across, each on its own.
Per method and hole size: PSNR (dB) and SSIM inside the hole against the plate, the texture ratio (mean gradient
magnitude inside the filled hole / inside the true one: 1 = as much structure as the truth, a diffusion fill is
well under 1) and the time. ``auto`` is the plate's default (:func:`real2sim.capture.inpaint.inpaint` with
``"auto"``); the naive baseline is Telea.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SIZES = (0.05, 0.09, 0.15)
METHODS = ("telea", "ns", "patchmatch", "auto")


def blob(h: int, w: int, size: float, rng) -> np.ndarray:
    """``(h, w) bool`` an object-like hole ``size * sqrt(h * w)`` across, away from the border."""
    import cv2

    d = size * np.sqrt(h * w)
    m = np.zeros((h, w), np.uint8)
    cx = int(rng.uniform(0.15 * w + d, 0.85 * w - d))
    cy = int(rng.uniform(0.15 * h + d, 0.85 * h - d))
    ax = (max(2, int(d / 2)), max(2, int(d / 2 * rng.uniform(0.55, 0.9))))
    cv2.ellipse(m, (cx, cy), ax, float(rng.uniform(0, 180)), 0, 360, 1, -1)
    a = rng.uniform(0, 2 * np.pi)
    cv2.circle(m, (int(cx + 0.45 * d * np.cos(a)), int(cy + 0.45 * d * np.sin(a))), max(1, int(d / 5)), 1, -1)
    return m > 0


def texture(img: np.ndarray, hole: np.ndarray) -> float:
    from real2sim.capture.plate_background import gradient_magnitude

    return float(gradient_magnitude(img)[hole].mean())


def run(data: Path) -> list[dict]:
    from real2sim.capture.inpaint import inpaint
    from real2sim.core.imaging import psnr, ssim
    from real2sim.demos.plate_cases import real_plates

    rows = []
    for i, (name, plate) in enumerate(real_plates(data).items()):
        h, w = plate.shape[:2]
        rng = np.random.default_rng(7 + i)
        for size in SIZES:
            hole = blob(h, w, size, rng)
            cut = plate.copy()
            cut[hole] = (255, 0, 255)  # what covered it must not leak
            t_true = texture(plate, hole)
            for method in METHODS:
                t0 = time.perf_counter()
                out = inpaint(cut, hole, method)
                dt = time.perf_counter() - t0
                rows.append({"plate": name, "size": size, "method": method, "hole_px": int(hole.sum()),
                             "psnr": round(psnr(out, plate, hole), 2), "ssim": round(ssim(out, plate, hole), 3),
                             "texture": round(texture(out, hole) / max(t_true, 1e-6), 3), "seconds": round(dt, 3)})
    return rows


def table(rows: list[dict]) -> list[dict]:
    out = []
    for size in SIZES:
        for method in METHODS:
            r = [x for x in rows if x["size"] == size and x["method"] == method]
            out.append({"size": size, "method": method, "holes": len(r),
                        "psnr": round(float(np.mean([x["psnr"] for x in r])), 2),
                        "psnr_min": round(float(np.min([x["psnr"] for x in r])), 2),
                        "ssim": round(float(np.mean([x["ssim"] for x in r])), 3),
                        "texture": round(float(np.mean([x["texture"] for x in r])), 2),
                        "seconds": round(float(np.mean([x["seconds"] for x in r])), 3)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows and the table to this file")
    ap.add_argument("--markdown", action="store_true", help="print the docs table")
    ap.add_argument("--data", default=str(DATA))
    a, _ = ap.parse_known_args(argv)
    rows = run(Path(a.data))
    if not rows:
        print(f"no plates in {a.data}")
        return 0
    tab = table(rows)
    print(f"{'hole':>5s} {'method':>10s} {'n':>3s}  psnr (min)      ssim  texture  seconds")
    for r in tab:
        print(f"{r['size']:5.2f} {r['method']:>10s} {r['holes']:3d}  {r['psnr']:5.2f} ({r['psnr_min']:5.2f})  "
              f"{r['ssim']:.3f}  {r['texture']:7.2f}  {r['seconds']:7.3f}")
    if a.markdown:
        print("| hole (of sqrt(h*w)) | method | PSNR mean (min) | SSIM | texture ratio | s |\n|---|---|---|---|---|---|")
        for r in tab:
            print(f"| {r['size']:.2f} | {r['method']} | {r['psnr']:.2f} ({r['psnr_min']:.2f}) | {r['ssim']:.3f} | "
                  f"{r['texture']:.2f} | {r['seconds']:.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "table": tab}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
