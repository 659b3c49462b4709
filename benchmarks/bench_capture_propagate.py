"""Mask propagation over robot clips with a known truth: an object of the mask benchmark (compact or thin) pasted
into each real plate in ../shared/data, the WidowX rendered moving over it (its cast shadow, sensor noise, exposure
drift; ``real2sim.demos.robot_clips``), the object's visible mask propagated from the true frame-0 mask
(``real2sim.segmentation.propagate``) and scored in every later frame against the truth (the object less the robot
in that frame).

Columns: the propagation as shipped; the same without the shade step (``PropagateConfig.shade_ratio=0``: a pixel
lit differently from the prompt frame is an occluder); and the naive baseline, the prompt mask held still in every
frame (no occlusion reasoning). "covered" rows are the frames where the robot covers over 5 % of the object: there
the held mask must lose, and propagation must win. The ``carried`` rows: the object pasted into each plate frame by
frame, still for three frames and then moving 3 px right and 1 px down a frame under the rendered arm (as a grasped
object is carried; the arm drawn over it), so that the held mask must lose everywhere.

    PYTHONPATH=$PWD MUJOCO_GL=egl .venv/bin/python benchmarks/bench_capture_propagate.py [--quick]
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from itertools import chain
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
COVERED = 0.05


def main(argv: list[str] | None = None) -> None:
    from real2sim.core.imaging import iou
    from real2sim.demos.propagate_cases import FAMILIES, carried_clips, still_clips
    from real2sim.segmentation.propagate import PropagateConfig, propagate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two plates, one seed")
    args, _ = ap.parse_known_args(argv)  # (run_all.py passes its own filters)
    if not DATA.is_dir():
        print(f"skipped: {DATA} is not there (the plates and meshes come from it)")
        return
    logging.getLogger("real2sim").setLevel(logging.ERROR)
    rows: dict[str, list] = {"propagate": [], "shade off": [], "held still": []}
    fams, covered, carried, seconds, frames_done = [], [], [], 0.0, 0
    for name, family, frames, objs, robot in chain(still_clips(DATA, args.quick), carried_clips(DATA, args.quick)):
        prompt = objs[0] & ~robot[0]
        if prompt.sum() < 20:
            continue
        t0 = time.process_time()
        shipped = propagate(frames, prompt, 0)[0]
        seconds += time.process_time() - t0
        frames_done += len(frames)
        off = propagate(frames, prompt, 0, config=PropagateConfig(shade_ratio=0))[0]
        for i in range(1, len(frames)):
            truth = objs[i] & ~robot[i]
            rows["propagate"].append(iou(shipped[i], truth))
            rows["shade off"].append(iou(off[i], truth))
            rows["held still"].append(iou(prompt, truth))
            fams.append(family)
            covered.append((objs[i] & robot[i]).sum() > COVERED * objs[i].sum())
            carried.append(name.startswith("carried/"))
    fams, covered, carried = np.array(fams), np.array(covered), np.array(carried)
    print("| frames | n | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    still = ~carried
    for label, sel in [("all", still), (f"robot covers > {COVERED:.0%}", still & covered)] + [
            (f, still & (fams == f)) for f in FAMILIES] + [
            ("carried", carried), (f"carried, robot covers > {COVERED:.0%}", carried & covered)]:
        if sel.any():
            print(f"| {label} | {int(sel.sum())} | " + " | ".join(f"{np.mean(np.array(v)[sel]):.4f}" for v in rows.values())
                  + " |")
    print(f"propagation CPU time: {seconds / max(1, frames_done):.3f} s a frame of one object")


if __name__ == "__main__":
    main()
