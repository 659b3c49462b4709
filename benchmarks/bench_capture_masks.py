"""Mask quality and speed on every real photo with a reference mask plus synthetic cases made from every real plate.

Cases: :mod:`real2sim.demos.mask_cases` (the Bridge cubes photo with reference masks; object meshes rendered into
the 13 real plates with cast shadows, per family: base, exposure, noise, blur, jpeg, lowres 320x256, highres
1280x720, lowcontrast, misreg: the plate handed over misregistered by 0.5-2 px, rotated, scaled, locally displaced,
at another exposure; textured: the object on a procedural ChArUco board, checkerboard, plaid or dotted cloth
or wood grain laid on the plate's table; support: the object on a towel, cloth, board or dish; closeup: the object
45-75 % of the image's height; thin: a procedural spoon, carrot or pen lying on the table). Per family and
overall: mean / min IoU with the ground truth of

- ``plate: adaptive``: :func:`real2sim.segmentation.difference_layers` with the case's plate (perfect, but for the
  real photo's person-made plate and the misreg family; the default with a plate);
- ``plate: fixed Lab``: the fixed Lab threshold of main@02b6871 (distance 30, lightness x0.5, blur 3, open 1, close 2);
- ``plate: plain``: one global threshold, max |frame - plate| over channels > 40, the component at the click;
- ``click: ours``: :func:`real2sim.segmentation.segment_result` from the click, no plate (the default without one);
- ``click: main``: main@02b6871's GrabCut from one click (read from git; skipped outside a git checkout);
- ``click: plain``: cv2.grabCut from a box of 0.2 x the image's smaller side around the click.

Also: shadow IoU of the adaptive shadow mask, how each default's confidence ranks its masks (Spearman with IoU, AUROC
for the masks under 0.8 IoU; for one click also the confidence the segment stage gives, from two moved clicks), and the
mean time per mask on the cases at 640x512 or less (and how many took over the 0.5 s bar), with its ratio to the plain
alternative measured in the same run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_capture_masks.py [--families base,lowres] [--json out.json] [--seed 1]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
BASE_COMMIT = "02b6871"
BAR_S = 0.5  # issue #13: a mask in at most this many seconds (wall, one at a time)


def fixed_lab_difference(image, plate, click):
    """main@02b6871's difference backend: fixed Lab threshold, morphology, the component at the click."""
    import cv2

    from real2sim.core.imaging import component_at, disk, fill_holes
    from real2sim.segmentation.colour import lab_image

    im, pl = cv2.GaussianBlur(image, (3, 3), 0), cv2.GaussianBlur(plate, (3, 3), 0)
    d = np.linalg.norm(lab_image(im, 0.5) - lab_image(pl, 0.5), axis=-1)
    m = (d > 30).astype(np.uint8)
    m = cv2.morphologyEx(m, cv2.MORPH_OPEN, disk(1))
    m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, disk(2))
    return fill_holes(component_at(m > 0, [click]))


def plain_threshold(image, plate, click):
    """One global threshold of the largest channel difference; the component at the click."""
    from real2sim.core.imaging import component_at

    return component_at(np.abs(image.astype(np.int16) - plate).max(-1) > 40, [click])


def plain_grabcut(image, click):
    """cv2.grabCut from a box of 0.2 x the smaller image side centred on the click (5 iterations)."""
    import cv2

    h, w = image.shape[:2]
    r = 0.1 * min(h, w)
    x0, y0 = int(max(0, click[0] - r)), int(max(0, click[1] - r))
    x1, y1 = int(min(w - 1, click[0] + r)), int(min(h - 1, click[1] + r))
    mask = np.zeros((h, w), np.uint8)
    cv2.setRNGSeed(0)
    bgd, fgd = np.zeros((1, 65)), np.zeros((1, 65))
    cv2.grabCut(cv2.cvtColor(image, cv2.COLOR_RGB2BGR), mask, (x0, y0, x1 - x0, y1 - y0), bgd, fgd, 5,
                cv2.GC_INIT_WITH_RECT)
    return (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)


def main_grabcut():
    """main@02b6871's GrabCut backend, loaded from git (None when this is not a git checkout)."""
    try:
        src = subprocess.run(["git", "show", f"{BASE_COMMIT}:real2sim/segmentation/grabcut.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path("/tmp") / f"real2sim_grabcut_{BASE_COMMIT}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("grabcut_main", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["grabcut_main"] = mod
    spec.loader.exec_module(mod)
    return mod.grabcut


def spearman(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return float("nan")
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def plate_methods(c, p, r: dict, difference_layers, iou) -> None:
    """The with-a-plate columns of case ``c`` into row ``r``."""
    res, r["t_plate_ours"] = timed(lambda: difference_layers(c.image, p, c.plate))
    r["plate_ours"], r["conf_plate"] = iou(res.mask, c.mask), res.confidence
    r["shadow"] = iou(res.shadow, c.shadow) if c.shadow.any() else None
    r["shadow_in_object"] = float((res.mask & c.shadow).sum() / max(1, c.shadow.sum())) if c.shadow.any() else None
    m, r["t_plate_fixed"] = timed(lambda: fixed_lab_difference(c.image, c.plate, c.click))
    r["plate_fixed"] = iou(m, c.mask)
    m, r["t_plate_plain"] = timed(lambda: plain_threshold(c.image, c.plate, c.click))
    r["plate_plain"] = iou(m, c.mask)


def moved_confidence(image, p, mask, segment_result) -> float:
    """The confidence the segment stage gives a one-click mask (``segment_result(..., moved_clicks=True)``) from the
    mask already made: the masks of its moved clicks."""
    from real2sim.segmentation.core import MOVED_CLICKS, moved_click_confidence

    return moved_click_confidence(mask, p, MOVED_CLICKS["grabcut"], lambda q: segment_result(image, q).mask)


def auroc(conf, ious, below: float) -> float:
    """How well ``conf`` finds the masks under ``below`` IoU: the chance that such a mask has a lower confidence
    than one at or over it (ties half; 0.5: no better than chance; nan without both kinds)."""
    conf, ious = np.asarray(conf, float), np.asarray(ious, float)
    bad, good = conf[ious < below], conf[ious >= below]
    if not len(bad) or not len(good):
        return float("nan")
    return float(((bad[:, None] < good[None]).sum() + 0.5 * (bad[:, None] == good[None]).sum()) / (len(bad) * len(good)))


def confidence_lines(rows) -> list[str]:
    """Per default: how its confidence ranks its masks (Spearman with IoU, AUROC for masks under 0.8) and what the
    review threshold flags."""
    out = []
    for k, ck in (("plate_ours", "conf_plate"), ("click_ours", "conf_click"), ("click_ours", "conf_click_moved")):
        rs = [r for r in rows if k in r and ck in r]
        c, v = [r[ck] for r in rs], [r[k] for r in rs]
        low = [r for r in rs if r[ck] < 0.5]
        out.append(f"confidence vs IoU ({ck}): Spearman {spearman(c, v):.2f}, AUROC for IoU < 0.8 {auroc(c, v, 0.8):.2f}; "
                   f"under 0.5: {len(low)} masks, {sum(r[k] < 0.8 for r in low)} of the {sum(x < 0.8 for x in v)} "
                   f"under 0.8 IoU; IoU of masks with confidence < 0.5: {np.mean([r[k] for r in low] or [np.nan]):.3f}, "
                   f">= 0.5: {np.mean([r[k] for r in rs if r[ck] >= 0.5] or [np.nan]):.3f}")
    return out


def run(cases, methods=None):
    from real2sim.core.imaging import iou
    from real2sim.segmentation import Prompt, difference_layers, segment_result

    old_gc = main_grabcut()
    rows = []
    for c in cases:
        p = Prompt([c.click])
        r = {"name": c.name, "family": c.family, "size": c.image.shape[1::-1], "shadow": None}
        if c.plate is not None:
            plate_methods(c, p, r, difference_layers, iou)
        res, r["t_click_ours"] = timed(lambda: segment_result(c.image, p, name=c.name))
        r["click_ours"], r["conf_click"] = iou(res.mask, c.mask), res.confidence
        r["conf_click_moved"] = moved_confidence(c.image, p, res.mask, segment_result)
        if old_gc is not None:
            m, r["t_click_main"] = timed(lambda: old_gc(c.image, p))
            r["click_main"] = iou(m, c.mask)
        m, r["t_click_plain"] = timed(lambda: plain_grabcut(c.image, c.click))
        r["click_plain"] = iou(m, c.mask)
        rows.append(r)
    return rows


COLUMNS = [("plate_ours", "plate: adaptive"), ("plate_fixed", "plate: fixed Lab"), ("plate_plain", "plate: plain"),
           ("click_ours", "click: ours"), ("click_main", "click: main"), ("click_plain", "click: plain")]


def table(rows) -> str:
    fams = list(dict.fromkeys(r["family"] for r in rows))
    cols = [(k, t) for k, t in COLUMNS if any(k in r for r in rows)]
    head = "| family | n | " + " | ".join(f"{t} mean / min" for _, t in cols) + " | shadow IoU |"
    out = [head, "|" + "---|" * (len(cols) + 3)]
    for fam in fams + ["all"]:
        rs = [r for r in rows if fam == "all" or r["family"] == fam]
        cells = []
        for k, _ in cols:
            v = [r[k] for r in rs if k in r]
            cells.append(f"{np.mean(v):.3f} / {np.min(v):.3f}" if v else "-")
        sh = [r["shadow"] for r in rs if r["shadow"] is not None]
        out.append(f"| {'**all**' if fam == 'all' else fam} | {len(rs)} | " + " | ".join(cells)
                   + f" | {np.mean(sh):.3f} |" if sh else f"| {fam} | {len(rs)} | " + " | ".join(cells) + " | - |")
    return "\n".join(out)


def timing(rows) -> str:
    small = [r for r in rows if r["size"][0] * r["size"][1] <= 640 * 512]
    lines = [f"time per mask, {len(small)} cases at 640x512 or less (mean, s):"]
    pairs = [("t_plate_ours", "t_plate_plain", "plate: adaptive", "plain threshold"),
             ("t_plate_fixed", "t_plate_plain", "plate: fixed Lab", "plain threshold"),
             ("t_click_ours", "t_click_plain", "click: ours", "plain grabCut"),
             ("t_click_main", "t_click_plain", "click: main", "plain grabCut")]
    for k, base, name, bname in pairs:
        v = [r[k] for r in small if k in r]
        b = [r[base] for r in small if base in r]
        if v:
            lines.append(f"  {name:18s} {np.mean(v):7.3f} s (max {np.max(v):.3f}, {sum(t > BAR_S for t in v)} over "
                         f"{BAR_S} s)  ratio {np.mean(v) / np.mean(b):6.1f}x vs {bname} ({np.mean(b):.3f} s)")
    large = [r for r in rows if r["size"][0] * r["size"][1] > 640 * 512]
    if large:  # segmented at the working size (DifferenceConfig.work_px), the outline at full size
        lines.append(f"time per mask, {len(large)} cases over 640x512 (mean, s):")
        for k, name in (("t_plate_ours", "plate: adaptive"), ("t_click_ours", "click: ours")):
            v = [r[k] for r in large if k in r]
            if v:
                lines.append(f"  {name:18s} {np.mean(v):7.3f} s (max {np.max(v):.3f}, {sum(t > BAR_S for t in v)} "
                             f"over {BAR_S} s)")
    return "\n".join(lines)


if __name__ == "__main__":
    import logging

    from real2sim.demos.mask_cases import FAMILIES, mask_cases

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="", help="comma-separated subset of real,hand," + ",".join(FAMILIES))
    ap.add_argument("--json", default="", help="write per-case rows here")
    ap.add_argument("--worst", type=int, default=8, help="list this many worst cases per default")
    ap.add_argument("--seed", type=int, default=0, help="another seed draws other synthetic cases (held-out check)")
    args, _ = ap.parse_known_args()  # run_all.py passes its own filters
    logging.basicConfig(level=logging.ERROR)
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent")
        sys.exit(0)
    fams = [f for f in args.families.split(",") if f] or None
    t0 = time.perf_counter()
    cases = mask_cases(DATA, fams, seed=args.seed)
    print(f"{len(cases)} cases generated in {time.perf_counter() - t0:.1f} s")
    rows = run(cases)
    print(table(rows))
    print(timing(rows))
    print("\n".join(confidence_lines(rows)))
    for k, ck in (("plate_ours", "conf_plate"), ("click_ours", "conf_click")):
        rs = [r for r in rows if k in r]
        worst = sorted(rs, key=lambda r: r[k])[:args.worst]
        print(f"worst {k}: " + ", ".join(f"{r['name']} {r[k]:.2f} (conf {r[ck]:.2f})" for r in worst))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
