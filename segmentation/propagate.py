"""Propagation of an object mask across frames: optical-flow warp, then re-segmentation around the warp.

For each next frame: dense Farneback flow (next -> previous) warps the previous mask; the warped mask then
seeds the re-segmentation: plate differencing restricted to the warped mask's neighbourhood when a plate
exists, else GrabCut initialised from it (eroded = sure object, dilated ring = probable background). When the
re-segmented mask disagrees with the warp (IoU < ``min_iou``) the warp is kept and the frame is flagged.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .core import iou
from .morph import component_at, disk, fill_holes, refine_edges

log = logging.getLogger(__name__)


@dataclass
class PropagateConfig:
    """Propagation parameters."""

    refine: str = "auto"
    """'difference' (needs a plate), 'grabcut', 'none' (flow warp only) or 'auto' (difference with a plate)."""
    search_px: int = 12
    """How far (pixels) beyond the warped mask the re-segmentation may reach."""
    min_iou: float = 0.5
    """Below this IoU with the warp, the re-segmentation is rejected and the warp kept."""
    grabcut_iterations: int = 3
    """GrabCut iterations per frame."""


def flow_warp(prev: np.ndarray, nxt: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Warp ``mask`` (on ``prev``) onto ``nxt`` with dense optical flow."""
    import cv2

    g0 = cv2.cvtColor(prev, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(nxt, cv2.COLOR_RGB2GRAY)
    flow = cv2.calcOpticalFlowFarneback(g1, g0, None, 0.5, 4, 21, 3, 5, 1.1, 0)  # next -> prev
    h, w = mask.shape
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    warped = cv2.remap(mask.astype(np.float32), gx + flow[..., 0], gy + flow[..., 1], cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return warped > 0.5


def grabcut_from_mask(image: np.ndarray, mask: np.ndarray, search_px: int, iterations: int = 3, seed: int = 0) -> np.ndarray:
    """GrabCut seeded by a rough mask: eroded = sure object, the rest and a ring around it = probable."""
    import cv2

    h, w = mask.shape
    m8 = mask.astype(np.uint8)
    gc = np.full((h, w), cv2.GC_BGD, np.uint8)
    gc[cv2.dilate(m8, disk(search_px)) > 0] = cv2.GC_PR_BGD
    gc[m8 > 0] = cv2.GC_PR_FGD
    gc[cv2.erode(m8, disk(max(2, search_px // 3))) > 0] = cv2.GC_FGD
    if not (gc == cv2.GC_FGD).any() and not (gc == cv2.GC_PR_FGD).any():
        return mask.copy()
    ys, xs = np.nonzero(gc != cv2.GC_BGD)
    m = search_px + 8
    y0, y1, x0, x1 = max(0, ys.min() - m), min(h, ys.max() + 1 + m), max(0, xs.min() - m), min(w, xs.max() + 1 + m)
    sub = np.ascontiguousarray(gc[y0:y1, x0:x1])
    cv2.setRNGSeed(seed)
    try:
        cv2.grabCut(np.ascontiguousarray(cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_RGB2BGR)), sub, None,
                    np.zeros((1, 65)), np.zeros((1, 65)), iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error:
        return mask.copy()
    out = np.zeros((h, w), bool)
    out[y0:y1, x0:x1] = (sub == cv2.GC_FGD) | (sub == cv2.GC_PR_FGD)
    return fill_holes(refine_edges(image, out))


def propagate(frames: np.ndarray, mask: np.ndarray, start: int = 0, plate: np.ndarray | None = None,
              config: PropagateConfig | None = None) -> tuple[list[np.ndarray], list[dict]]:
    """Masks for every frame from ``mask`` on frame ``start`` (forwards and backwards). Returns (masks, per-frame info)."""
    import cv2

    from .difference import difference_mask

    cfg = config or PropagateConfig()
    refine = cfg.refine if cfg.refine != "auto" else ("difference" if plate is not None else "grabcut")
    n = len(frames)
    out: list[np.ndarray | None] = [None] * n
    info: list[dict] = [{} for _ in range(n)]
    out[start] = np.asarray(mask, bool)
    info[start] = {"method": "prompt"}
    for order in (range(start + 1, n), range(start - 1, -1, -1)):
        for i in order:
            j = i - 1 if i > start else i + 1
            warped = flow_warp(frames[j], frames[i], out[j])
            if not warped.any():
                out[i], info[i] = warped, {"method": "flow", "lost": True}
                continue
            if refine == "difference":
                near = cv2.dilate(warped.astype(np.uint8), disk(cfg.search_px)) > 0
                d = difference_mask(frames[i], plate) & near
                ys, xs = np.nonzero(warped)
                cand = fill_holes(component_at(d, list(zip(xs[:: max(1, len(xs) // 20)], ys[:: max(1, len(ys) // 20)])), 0))
                if cand.sum() < 0.2 * warped.sum():  # the object is part of the plate here: use its colours
                    cand = grabcut_from_mask(frames[i], warped, cfg.search_px, cfg.grabcut_iterations)
            elif refine == "grabcut":
                cand = grabcut_from_mask(frames[i], warped, cfg.search_px, cfg.grabcut_iterations)
            else:
                cand = warped
            score = iou(cand, warped)
            if score < cfg.min_iou:
                out[i], info[i] = warped, {"method": "flow", "rejected_refine_iou": round(score, 3)}
            else:
                out[i], info[i] = cand, {"method": f"flow+{refine}", "iou_with_warp": round(score, 3)}
    return [np.asarray(m, bool) for m in out], info
