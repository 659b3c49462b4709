"""Two touching objects, both clicked, neither in the plate (``real2sim.demos.mask_cases.touching_cases``: a pair
of object meshes rendered side by side, touching or overlapping, into every real plate in ../shared/data).

Per object, IoU with its visible pixels for

- ``plate, alone``: the default with a plate (difference, grown from the click) given only this object's click:
  what ``segment`` / ``init --prompts`` did before; the change of both objects is one region;
- ``plate, others negative``: the same with the other object's click as a negative one (what the segment stage
  now adds for every other entity prompted on the frame; :func:`real2sim.segmentation.difference.split_at_negatives`
  cuts the shared change between the clicks);
- ``click, alone`` / ``click, others negative``: the default without a plate (one-click GrabCut), likewise.

Also how many plate masks held both objects (the other's click inside), mean seconds a mask (each column measured
in the same run), and the mean confidence of the merged masks against the split ones (a merged mask should not be
confident).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_capture_touching.py [--seeds 0,1] [--json out.json]
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
COLUMNS = ("plate_alone", "plate_neg", "click_alone", "click_neg")


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    u = (a | b).sum()
    return 1.0 if u == 0 else float((a & b).sum() / u)


def rows_of(case) -> list[dict]:
    """One row per object of ``case``: IoU, seconds and confidence per column."""
    from real2sim.segmentation.core import Prompt, segment_result

    out = []
    for k in (0, 1):
        click, other = case.clicks[k], case.clicks[1 - k]
        row = {"case": f"{case.name}#{k}"}
        for col in COLUMNS:
            prompt = Prompt([click]) if col.endswith("alone") else Prompt([click, other], [1, 0])
            t0 = time.perf_counter()
            res = segment_result(case.image, prompt, plate=case.plate if col.startswith("plate") else None)
            row[f"t_{col}"] = time.perf_counter() - t0
            row[col] = round(_iou(res.mask, case.masks[k]), 3)
            row[f"conf_{col}"] = round(res.confidence, 3)
            if col == "plate_alone":
                h, w = res.mask.shape
                row["merged"] = bool(res.mask[min(h - 1, max(0, round(other[1]))), min(w - 1, max(0, round(other[0])))])
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from real2sim.demos.mask_cases import touching_cases

    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for case in touching_cases(DATA, seed):
            rows += rows_of(case)
    if not rows:
        print(f"skipped: no real plates or object meshes under {DATA}")
        return 0
    merged = [r for r in rows if r["merged"]]
    print(f"{len(rows)} objects ({len(rows) // 2} touching pairs), seeds {args.seeds}; the plate mask held both objects "
          f"for {len(merged)}")
    print("| column | mean IoU | min IoU | IoU >= 0.85 | s a mask |")
    print("|---|---|---|---|---|")
    for col in COLUMNS:
        v = np.array([r[col] for r in rows])
        t = np.mean([r[f"t_{col}"] for r in rows])
        print(f"| {col.replace('_neg', ', others negative').replace('_alone', ', alone')} | {v.mean():.3f} | {v.min():.3f} "
              f"| {int((v >= 0.85).sum())}/{len(v)} | {t:.2f} |")
    if merged:
        print(f"confidence of the merged plate masks {np.mean([r['conf_plate_alone'] for r in merged]):.3f} (IoU "
              f"{np.mean([r['plate_alone'] for r in merged]):.3f}); the same objects split: "
              f"{np.mean([r['conf_plate_neg'] for r in merged]):.3f} (IoU {np.mean([r['plate_neg'] for r in merged]):.3f})")
    base = np.mean([r["t_plate_alone"] for r in rows])
    print(f"time ratio, plate mask with the others' clicks / alone: {np.mean([r['t_plate_neg'] for r in rows]) / base:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
