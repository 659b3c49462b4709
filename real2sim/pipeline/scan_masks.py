"""The object's mask in every photo of a scan from one click in one photo (``real2sim scan DIR --point X,Y``).

The segmentation stage makes the clicked photo's mask (one-click GrabCut, or SAM / another backend); the board's
poses lift it to 3-D (the scan stage's :func:`real2sim.scan.lift.lift_mask`: the cone of the mask, cut to the depth
behind the object's front foot on the table) and project it into every other photo, where the segmentation stage's
:func:`real2sim.segmentation.prior.prior_grabcut` cuts the object out (seeded with the clicked photo's colours).
Then a rough visual hull is carved from those masks, with a tolerance so that a few bad masks do not cut it, and
every photo is segmented again with the hull's projection as its prior: the hull is consistent across views, so a
mask that leaked into the board or lost a piece is corrected. ``passes`` such rounds.

Each photo's **mask confidence** is the IoU of its final mask with the projection of the hull carved from all the
final masks (tolerance 1: no single mask cuts it): a mask that disagrees with what the other views say about the
object's outline scores low. Frames under ``min_confidence`` are dropped from the scan and named in a warning.

This composition lives in the pipeline because it uses two stage packages (segmentation, scan), which must not import
each other.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import CaptureError
from real2sim.core.imaging import iou

log = logging.getLogger(__name__)


@dataclass
class ClickPrompt:
    """One prompt on one photo of a scan."""

    point: tuple[float, float] | None = None
    """Pixel (x, y) on the object."""
    box: tuple[float, float, float, float] | None = None
    """Box (x0, y0, x1, y1) around the object (with or instead of the point)."""
    frame: str | int | None = None
    """The photo: its name (file stem) or its index in the sorted frames; default the first."""

    def to_dict(self) -> dict:
        return {"point": None if self.point is None else list(self.point),
                "box": None if self.box is None else list(self.box), "frame": self.frame}


@dataclass
class OneClickConfig:
    """:func:`one_click_masks` settings."""

    backend: str = "auto"
    """Segmentation backend of the clicked photo (``auto``: SAM when configured, else one-click GrabCut)."""
    fallback_boxes: tuple[float, ...] = (0.12, 0.18, 0.25)
    """Besides the click's own mask, the clicked photo is segmented in boxes of these half-sizes around the click
    (fractions of the photo's smaller side); the candidate mask the photos agree on best is taken ..."""
    probe_views: int = 4
    """... tracked into this many other photos (spread through the capture) and carved there; the prompt's own mask
    is kept unless a box's mask agrees better by more than ``prefer_prompt`` (IoU; the 4-view agreement is rough)."""
    prefer_prompt: float = 0.1
    workers: int = 2
    """Photos segmented at once (threads)."""
    passes: int = 2
    """Rounds of re-segmenting every photo with the rough hull's projection as its prior."""
    hull_resolution: int = 48
    """Voxels along the object's longest side of the rough hulls (~2 mm for a 10 cm object) ..."""
    check_resolution: int = 64
    """... and of the hull the final masks are checked against (the confidence)."""
    hull_tolerance: float = 0.15
    """The rough hulls keep a voxel outside at most this fraction of the masks (bad first masks do not cut them)."""
    min_confidence: float = 0.85
    """Frames whose mask agrees less than this (IoU) with the hull of the other views are dropped."""


def _each(fn, items, workers: int) -> list:
    """``[fn(i) for i in items]``, on ``workers`` threads (OpenCV's GrabCut releases the GIL; each call seeds its
    own thread's RNG, so the result does not depend on the threads)."""
    items = list(items)
    if workers <= 1 or len(items) < 2:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(fn, items))


def pick_frame(names: list[str], all_names: list[str], frame) -> int:
    """Index (into ``names``, the frames with a board pose) of the prompted photo ``frame`` (a name, or an index
    into ``all_names``, every frame of the capture)."""
    if frame is None:
        return 0
    name = str(frame)
    if name not in all_names:
        try:
            i = int(name)
        except ValueError:
            i = None
        if i is None or not 0 <= i < len(all_names):
            raise CaptureError(f"--frame {frame}: no such frame; give a frame's name ({', '.join(all_names[:4])}, ...) "
                               f"or its index 0..{len(all_names) - 1}")
        name = all_names[i]
    if name not in names:
        raise CaptureError(f"--frame {frame}: frame {name} has no board pose (the board was not found in it), so the "
                           "click cannot be lifted to 3-D; click in another photo")
    return names.index(name)


def _carve_mesh(cameras, masks, region, resolution, tolerance):
    from real2sim.scan.carve import carve

    res = carve(cameras, masks, region, resolution, tolerance)
    return res.vertices, res.faces


def one_click_masks(names: list[str], images: list[np.ndarray], cameras: list[Camera], prompt: ClickPrompt,
                    region: np.ndarray, config: OneClickConfig | None = None,
                    all_names: list[str] | None = None) -> tuple[list[np.ndarray], dict]:
    """Masks of the object in every photo (``images``: ``(h, w, 3) uint8``, seen by ``cameras`` with board poses)
    from ``prompt`` on one of them. ``region``: ``(2, 3)`` world box the object stands in (the board). Returns the
    masks (in order) and a report: the clicked frame, per-frame ``confidence`` and the first segmentation's,
    ``low_confidence`` frames, the 3-D lift, seconds."""
    from real2sim.scan.lift import lift_mask, silhouette
    from real2sim.segmentation import Prompt, segment_result
    from real2sim.segmentation.prior import ColourModel, prior_grabcut

    cfg = config or OneClickConfig()
    t0 = time.perf_counter()
    k = pick_frame(names, all_names or names, prompt.frame)
    if prompt.point is None and prompt.box is None:
        raise CaptureError("one-click masks: give --point X,Y on the object (or --box X0,Y0,X1,Y1 around it)")
    pts = [tuple(prompt.point)] if prompt.point is not None else []
    first = segment_result(images[k], Prompt(pts, box=prompt.box), backend=cfg.backend, name=f"frame {names[k]}")
    from real2sim.scan.carve import ScanError

    n = len(names)
    none = np.zeros(images[0].shape[:2], bool)
    probe = [(k + round(i * n / (cfg.probe_views + 1))) % n for i in range(1, cfg.probe_views + 1)]
    probe = [j for j in dict.fromkeys(probe) if j != k]

    def agreement(res):
        """Lift a candidate mask of the clicked photo, track it into a few other photos, carve them: how well the
        photos agree (mean IoU of each mask with the little hull's silhouette); None when it does not lift."""
        if res.mask.sum() < 20:
            return None, None
        try:
            lifted = lift_mask(res.mask, cameras[k], region)
        except ScanError:
            return None, None
        col = ColourModel(images[k], res.mask)

        def track(j):
            pr = silhouette(lifted[0], lifted[1], cameras[j])
            return prior_grabcut(images[j], pr, core=none, colour=col).mask if pr.sum() >= 20 else none

        ms = [res.mask] + _each(track, probe, cfg.workers)
        cs = [cameras[k]] + [cameras[j] for j in probe]
        try:
            hv, hf = _carve_mesh(cs, ms, region, 32, 0)
        except ScanError:
            return 0.0, lifted
        return float(np.mean([iou(m, silhouette(hv, hf, c)) for m, c in zip(ms, cs)])), lifted

    cands = [("click" if prompt.box is None else "box", first)]
    if prompt.box is None and prompt.point is not None:
        # a click on a stripe or a label gives that part, one near an edge may take in the board: boxes of growing
        # size around the click are candidates too, and the photos decide (the whole object is the mask they agree on)
        h, w = images[k].shape[:2]
        x, y = prompt.point
        for frac in cfg.fallback_boxes:
            r = frac * min(h, w)
            box = (max(0.0, x - r), max(0.0, y - r), min(w - 1.0, x + r), min(h - 1.0, y + r))
            cands.append((f"box {frac:g}", segment_result(images[k], Prompt(pts, box=box), backend=cfg.backend,
                                                          name=f"frame {names[k]}")))
    tried, best = [], None
    for i, (label, res) in enumerate(cands):
        agree, lifted = agreement(res)
        tried.append({"prompt": label, "confidence": round(float(res.confidence), 3),
                      "agreement": None if agree is None else round(agree, 4)})
        bonus = cfg.prefer_prompt if i == 0 else 0.0  # what the person asked for, unless the photos clearly disagree
        if agree is not None and (best is None or agree + bonus > best[0] + 1e-9):
            best = (agree + bonus, res, lifted)
    if best is None:
        raise CaptureError(f"frame {names[k]}: the mask from the prompt does not stand on the board (its rays meet "
                           "the table outside it): click on the object's middle, or give --box around the object")
    _, first, lifted = best
    colour = ColourModel(images[k], first.mask)
    cone_v, cone_f, lift = lifted
    def from_cone(j):
        if j == k:
            return first.mask
        prior = silhouette(cone_v, cone_f, cameras[j])
        if prior.sum() < 20:
            return none.copy()
        return prior_grabcut(images[j], prior, core=none, colour=colour, name=f"frame {names[j]}").mask

    masks = _each(from_cone, range(n), cfg.workers)
    rounds = []
    tol = max(1, int(np.ceil(cfg.hull_tolerance * n)))
    for p in range(cfg.passes):
        hv, hf = _carve_mesh(cameras, masks, region, cfg.hull_resolution, tol)

        def from_hull(j, hv=hv, hf=hf):
            prior = silhouette(hv, hf, cameras[j])
            if prior.sum() < 20:
                return masks[j], iou(masks[j], prior)
            return prior_grabcut(images[j], prior, colour=colour, name=f"frame {names[j]}").mask, iou(masks[j], prior)

        out = _each(from_hull, range(n), cfg.workers)
        rounds.append({"tolerance": tol, "mean_iou_with_hull": round(float(np.mean([a for _, a in out])), 4)})
        masks = [m for m, _ in out]
        tol = max(1, tol // 2)
    hv, hf = _carve_mesh(cameras, masks, region, cfg.check_resolution, 1)
    conf = {names[j]: round(iou(masks[j], silhouette(hv, hf, cameras[j])), 4) for j in range(n)}
    low = sorted(nm for nm, c in conf.items() if c < cfg.min_confidence)
    report = {"frame": names[k], "prompt": prompt.to_dict(), "backend": first.backend,
              "first_confidence": round(float(first.confidence), 4), "first_tries": tried, "lift": lift, "passes": rounds,
              "confidence": conf, "mean_confidence": round(float(np.mean(list(conf.values()))), 4),
              "min_confidence": round(float(min(conf.values())), 4), "low_confidence": low,
              "threshold": cfg.min_confidence, "seconds": round(time.perf_counter() - t0, 3)}
    log.info("one-click masks from frame %s: mean confidence %.3f, %d low, %.1f s", names[k],
             report["mean_confidence"], len(low), report["seconds"])
    return masks, report


def mask_consistency(names: list[str], cameras: list[Camera], masks: list[np.ndarray], region: np.ndarray,
                     resolution: int = 64) -> dict[str, float]:
    """Per frame, the IoU of its mask with the projection of the hull carved from all masks (tolerance 1): the
    confidence of given masks (how well each agrees with what the other views say)."""
    from real2sim.scan.lift import silhouette

    hv, hf = _carve_mesh(cameras, masks, region, resolution, 1)
    return {nm: round(iou(m, silhouette(hv, hf, c)), 4) for nm, m, c in zip(names, masks, cameras)}
