"""The plate around a clicked object that never moves, against the background without it.

The one command takes every prompted object out of the plate (it is simulated) and inpaints its place, grown by
``PlateConfig.inpaint_margin`` so the rim its mask misses does not smear into the fill. The clips of the other
benchmarks keep their objects in the truth, so they cannot judge that margin. Here the mask benchmark's pasted
objects (``real2sim.demos.mask_cases``: meshes with their cast shadows pasted into every real plate of
../shared/data, the true plate without them) are each clicked once (the default one-click backend, as the command
does), the frame repeated with fresh sensor noise (1.5 levels) as a still clip of 6 frames, and the plate made with
the click's mask in every frame. Score: PSNR against the true plate near the object (the object, its shadow and the
click's mask, grown by 3 % of ``sqrt(h * w)``), per margin, and each margin against the first.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_capture_still_objects.py [--families base,support]
        [--margins 0.15,0.05] [--seed 0]
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def near_object(case, mask: np.ndarray) -> np.ndarray:
    """``(h, w) bool``: the object, its shadow and ``mask``, grown by 3 % of ``sqrt(h * w)``."""
    from real2sim.core.imaging import dilate

    h, w = mask.shape
    return dilate(case.mask | case.shadow | mask, max(3, int(0.03 * np.sqrt(h * w))))


def score_case(case, margins: list[float], rng: np.random.Generator) -> list[float]:
    """PSNR near the object of the plates made with each margin."""
    from real2sim.capture import PlateConfig, make_plate
    from real2sim.core.imaging import psnr
    from real2sim.segmentation import Prompt, segment_result

    mask = segment_result(case.image, Prompt([case.click]), name=case.name).mask
    frames = np.stack([np.clip(case.image + rng.normal(0, 1.5, case.image.shape), 0, 255).astype(np.uint8)
                       for _ in range(6)])
    masks = np.repeat(mask[None], len(frames), 0)
    near = near_object(case, mask)
    return [psnr(make_plate(frames, masks, PlateConfig(inpaint_margin=m))[0], case.plate, near) for m in margins]


def main() -> None:
    from real2sim.demos.mask_cases import mask_cases

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="base,support,closeup,lowcontrast,textured,thin,camera,jpeg",
                    help="mask benchmark families (comma-separated)")
    ap.add_argument("--margins", default="0.15,0.05", help="inpaint_margin values; the first is the reference")
    ap.add_argument("--seed", type=int, default=0)
    args, _ = ap.parse_known_args()  # (run_all.py passes its own filters)
    if not DATA.is_dir():
        print(f"skipped: {DATA} is not there (the pasted objects need its plates and meshes)")
        return
    logging.getLogger("real2sim").setLevel(logging.ERROR)
    margins = [float(m) for m in args.margins.split(",")]
    cases = [c for c in mask_cases(DATA, args.families.split(","), seed=args.seed) if c.plate is not None]
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    scores = np.array([score_case(c, margins, rng) for c in cases])  # (cases, margins)
    print(f"{len(cases)} objects, families {args.families}, seed {args.seed}, {time.perf_counter() - t0:.0f} s")
    print("| inpaint_margin | PSNR near the object: mean | min | vs the first: mean | better > 1 dB | worse > 1 dB |")
    print("|---|---|---|---|---|---|")
    for k, m in enumerate(margins):
        d = scores[:, k] - scores[:, 0]
        print(f"| {m:g} | {scores[:, k].mean():.2f} | {scores[:, k].min():.2f} | {d.mean():+.2f} | "
              f"{int((d > 1).sum())} | {int((d < -1).sum())} |")


if __name__ == "__main__":
    main()
