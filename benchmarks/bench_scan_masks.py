"""Scan masks from one click (``real2sim scan DIR --point X,Y``) against the true masks, on the synthetic captures
(mug, can, box, banana; 24 views 640x480 on a ChArUco board): per-frame mask IoU against the exact masks (mean,
min), the mask confidence the scan reports, and the scan's Chamfer / volume IoU from the one-click masks against the
scan from the true masks. The click is where a person would put it: the point deepest inside the object in the first
photo. Prints numbers; asserts nothing.

Run: ``python benchmarks/bench_scan_masks.py [CAPTURES_DIR [SHAPE,...]]`` (captures are rendered there when missing, ~1 min
each; default a temporary folder).
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    import cv2

    from real2sim.scan.o3d import open3d

    open3d()
    from real2sim.core.imaging import iou, read_mask
    from real2sim.pipeline.scan import ScanConfig, scan_object
    from real2sim.pipeline.scan_masks import ClickPrompt
    from real2sim.scan.synthetic import SyntheticScanConfig, write_synthetic_scan

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="r2s_bench_scan_masks_"))
    rows = []
    shapes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["can", "box", "banana", "mug"]
    for shape in shapes:
        cap = root / shape
        if not (cap / "truth" / "masks").is_dir():
            write_synthetic_scan(cap, SyntheticScanConfig(shape=shape, heldout=0))
        ref = cap / "truth" / ("reference_filled.obj" if shape == "mug" else "reference.obj")
        names = sorted(p.stem for p in (cap / "frames").glob("*.png"))
        truth = {n: read_mask(cap / "truth" / "masks" / f"{n}.png") for n in names}
        d = cv2.distanceTransform(truth[names[0]].astype(np.uint8), cv2.DIST_L2, 5)
        y, x = np.unravel_index(np.argmax(d), d.shape)
        work = root / "runs" / shape
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        shutil.copytree(cap / "frames", work / "cap" / "frames")  # a capture without masks/
        for f in ("camera.json", "board.json"):
            shutil.copy(cap / f, work / "cap" / f)
        exact = work / "exact"
        shutil.copytree(work / "cap", exact)
        shutil.copytree(cap / "truth" / "masks", exact / "masks")
        cfg = ScanConfig(reference=str(ref), collision=False, texture_size=256)
        one = scan_object(work / "cap", work / "obj_click", cfg, prompt=ClickPrompt((float(x), float(y)), frame=names[0]))
        base = scan_object(exact, work / "obj_exact", cfg)
        r = one.report
        ious = {n: iou(read_mask(work / "obj_click" / "masks" / f"{n}.png"), truth[n]) for n in names}
        conf = r["mask_confidence"]
        worst = min(ious, key=ious.get)
        row = {"shape": shape, "click_px": [int(x), int(y)], "picked": [t for t in r["one_click"]["first_tries"]],
               "mask_iou_mean": round(float(np.mean(list(ious.values()))), 4),
               "mask_iou_min": round(float(ious[worst]), 4), "worst_frame": worst,
               "confidence_mean": r["mask_confidence_mean"], "confidence_of_worst": conf.get(worst),
               "corr_conf_iou": round(float(np.corrcoef([conf[n] for n in names], [ious[n] for n in names])[0, 1]), 3),
               "left_out": r["frames_low_confidence"], "masks_s": r["one_click"]["seconds"],
               "click": {"chamfer_mm": r["grade"]["chamfer_mm"], "volume_iou": r["grade"]["volume_iou"]},
               "exact": {"chamfer_mm": base.report["grade"]["chamfer_mm"],
                         "volume_iou": base.report["grade"]["volume_iou"]},
               "scan_s": r["timing"]["total_s"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\nshape  | mask IoU mean / min | confidence mean | left out | Chamfer click / exact | vol IoU click / exact")
    for r in rows:
        print(f"{r['shape']:6s} | {r['mask_iou_mean']:.3f} / {r['mask_iou_min']:.3f} | {r['confidence_mean']:.3f} | "
              f"{len(r['left_out'])} | {r['click']['chamfer_mm']:.2f} / {r['exact']['chamfer_mm']:.2f} mm | "
              f"{r['click']['volume_iou']:.3f} / {r['exact']['volume_iou']:.3f}")


if __name__ == "__main__":
    main()
