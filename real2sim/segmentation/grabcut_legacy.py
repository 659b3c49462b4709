"""The one-click GrabCut of main@02b6871, kept as one candidate of :mod:`segmentation.grabcut`.

From clicks (no box): each positive click grows a colour-similar region (Lab distance to the clicked colour,
lightness down-weighted, threshold raised until the region would leak into the background); its bounding box,
enlarged by ``box_grow``, is GrabCut's region of interest, the grown region its probable foreground and an
eroded core its sure foreground. It was tuned on the Bridge scenes (cubes, the can and pot of the clip); the
multi-size candidate holds better elsewhere, and the better-scored of the two is taken.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import component_at, disk, fill_holes
from real2sim.segmentation.colour import lab_image, refine_edges
from real2sim.segmentation.core import Prompt, SegmentationError


@dataclass
class LegacyConfig:
    """GrabCut parameters."""

    iterations: int = 5
    """GrabCut EM iterations."""
    thresholds: tuple[float, ...] = (6, 9, 12, 16, 20, 25, 30)
    """Lab distances tried when growing a region from a click (smallest first)."""
    leak_factor: float = 2.2
    """Growth stops when the next threshold multiplies the region's area by more than this."""
    max_region_frac: float = 0.15
    """A grown region never exceeds this fraction of the image."""
    core_erode_px: int = 4
    """The grown region eroded by this is sure foreground (the rest only probable: edges are blurred)."""
    seed_spacing: int = 4
    """Spacing (pixels) of the 3x3 grid of seeds around a click."""
    box_grow: float = 0.6
    """The grown region's box is enlarged by this fraction of its size on every side."""
    min_box_px: int = 24
    """Minimum half-size (pixels) of the box around a click."""
    margin_px: int = 8
    """Extra margin (pixels) around boxes."""
    max_side: int | None = None
    """When set, GrabCut runs on the region of interest resampled so that its longer side is at most this many
    pixels (speed; the outline is then refined by colour at full resolution). None: full resolution (main@02b6871)."""
    refine_edges: bool = True
    """Reassign boundary pixels by colour (removes the halo GrabCut leaves on blurred edges)."""
    seed: int = 0
    """OpenCV RNG seed (GrabCut's GMM initialisation uses k-means): same input, same mask."""


def _closeness(lab_sq: np.ndarray, seed: np.ndarray) -> tuple[np.ndarray, float]:
    """(g, |seed|^2) with g = 2 lab . seed - |lab|^2 per pixel, so that the squared Lab distance to ``seed`` is
    ``|seed|^2 - g``. ``lab_sq``: ``(h, w, 4)`` Lab and |Lab|^2 of :func:`lab_image` of a uint8 image (multiples of
    0.5): every product and sum is exact in float32, so ``g > |seed|^2 - t * t`` is exactly ``distance < t`` for the
    integer thresholds (one pass instead of a norm)."""
    import cv2

    seed = seed.astype(np.float64)
    row = np.array([[2 * seed[0], 2 * seed[1], 2 * seed[2], -1.0]], np.float32)
    return cv2.transform(lab_sq, row), float((seed * seed).sum())


def _region(g: np.ndarray, ns: float, xi: int, yi: int, t: float) -> tuple[np.ndarray, int]:
    """The 8-connected region of distance < ``t`` (:func:`_closeness`) holding (xi, yi) (empty when that pixel is
    not in it) and its area."""
    import cv2

    m = (g > ns - t * t).view(np.uint8)
    if not m[yi, xi]:
        return np.zeros(g.shape, bool), 0
    area = cv2.floodFill(m, None, (xi, yi), 2, flags=8)[0]
    return m == 2, int(area)


def _grow_one(g: np.ndarray, ns: float, xi: int, yi: int, cfg: LegacyConfig, image_area: int) -> np.ndarray | None:
    best, prev_area = None, 0
    for t in cfg.thresholds:
        reg, area = _region(g, ns, xi, yi, t)
        if area > cfg.max_region_frac * image_area:
            break
        if best is not None and prev_area > 30 and area > cfg.leak_factor * prev_area:
            break
        best, prev_area = reg, area
    return best


def grow_from_click(image: np.ndarray, x: float, y: float, cfg: LegacyConfig, lab: np.ndarray | None = None) -> np.ndarray:
    """Colour-similar connected region around a click (see module docstring).

    Seeds on a small grid around the click (``seed_spacing``), each with its own colour, so that a click on the
    edge between two faces of an object still grows both faces; the union is returned. Work is bounded to a window
    around the click as large as the biggest region allowed. ``lab``, when given: :func:`lab_image` of the 5x5-blurred
    uint8 image (its steps of 0.5 make :func:`_closeness` exact).
    """
    import cv2

    h, w = image.shape[:2]
    xi, yi = int(round(x)), int(round(y))
    s = cfg.seed_spacing
    r = int(np.sqrt(cfg.max_region_frac * h * w))
    # every seed's window lies in this one (the seeds are within s of the click)
    oy0, oy1, ox0, ox1 = max(0, yi - s - r), min(h, yi + s + r), max(0, xi - s - r), min(w, xi + s + r)
    if lab is None:
        m = 2  # the 5x5 blur's reach: the window's colours are those of the blurred full image
        by0, by1, bx0, bx1 = max(0, oy0 - m), min(h, oy1 + m), max(0, ox0 - m), min(w, ox1 + m)
        lab = np.full((h, w, 3), 0, np.float32)
        blur = cv2.GaussianBlur(np.ascontiguousarray(image[by0:by1, bx0:bx1]), (5, 5), 0)
        lab[by0:by1, bx0:bx1] = lab_image(blur)
    win = lab[oy0:oy1, ox0:ox1]
    lab_sq = np.dstack([win, (win * win).sum(-1)])
    out = np.zeros((h, w), bool)
    for dy in (-s, 0, s):
        for dx in (-s, 0, s):
            sx, sy = min(max(xi + dx, 0), w - 1), min(max(yi + dy, 0), h - 1)
            y0, y1, x0, x1 = max(0, sy - r), min(h, sy + r), max(0, sx - r), min(w, sx + r)
            g, ns = _closeness(lab_sq[y0 - oy0:y1 - oy0, x0 - ox0:x1 - ox0], lab[sy, sx])
            reg = _grow_one(g, ns, sx - x0, sy - y0, cfg, h * w)
            if reg is not None:  # the seed's window: pixels outside it were never reached
                out[y0:y1, x0:x1] |= reg
    if not out.any():
        out[yi, xi] = True
    return out


def legacy_grabcut(image: np.ndarray, prompt: Prompt, config: LegacyConfig | None = None) -> np.ndarray:
    """main@02b6871's one-click GrabCut (the candidate that grows a colour region first)."""
    import cv2

    cfg = config or LegacyConfig()
    h, w = image.shape[:2]
    mask = np.full((h, w), cv2.GC_BGD, np.uint8)
    pos = prompt.positives
    if prompt.box is not None:
        x0, y0, x1, y1 = prompt.box
        x0, y0 = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
        x1, y1 = min(w - 1, int(np.ceil(x1))), min(h - 1, int(np.ceil(y1)))
        mask[y0:y1 + 1, x0:x1 + 1] = cv2.GC_PR_FGD
    if pos:
        lab = lab_image(cv2.GaussianBlur(image, (5, 5), 0)) if len(pos) > 1 else None
        for x, y in pos:
            reg = grow_from_click(image, x, y, cfg, lab)
            ys, xs = np.nonzero(reg)
            bw, bh = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
            gx = max(int(cfg.box_grow * bw) + cfg.margin_px, cfg.min_box_px - bw // 2)
            gy = max(int(cfg.box_grow * bh) + cfg.margin_px, cfg.min_box_px - bh // 2)
            bx0, bx1 = max(0, xs.min() - gx), min(w - 1, xs.max() + gx)
            by0, by1 = max(0, ys.min() - gy), min(h - 1, ys.max() + gy)
            if prompt.box is None:
                roi = mask[by0:by1 + 1, bx0:bx1 + 1]
                roi[roi == cv2.GC_BGD] = cv2.GC_PR_BGD
            mask[reg & (mask != cv2.GC_FGD)] = cv2.GC_PR_FGD
            core = cv2.erode(reg.astype(np.uint8), disk(cfg.core_erode_px)) > 0
            mask[core] = cv2.GC_FGD
            mask[max(0, int(y) - 1):int(y) + 2, max(0, int(x) - 1):int(x) + 2] = cv2.GC_FGD
    for x, y in prompt.negatives:
        cv2.circle(mask, (int(round(x)), int(round(y))), 3, int(cv2.GC_BGD), -1)
    if not ((mask == cv2.GC_BGD) | (mask == cv2.GC_PR_BGD)).any():
        raise SegmentationError("grabcut: the box covers the whole image; GrabCut needs some background outside it")
    if not ((mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)).any():
        raise SegmentationError("grabcut: the prompt marks no foreground")
    # GrabCut works on the region of interest only (speed): crop with a margin
    fg_any = (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD) | (mask == cv2.GC_PR_BGD)
    ys, xs = np.nonzero(fg_any)
    m = 2 * cfg.margin_px + 16
    cy0, cy1 = max(0, ys.min() - m), min(h, ys.max() + 1 + m)
    cx0, cx1 = max(0, xs.min() - m), min(w, xs.max() + 1 + m)
    sub = np.ascontiguousarray(mask[cy0:cy1, cx0:cx1])
    img = np.ascontiguousarray(cv2.cvtColor(image[cy0:cy1, cx0:cx1], cv2.COLOR_RGB2BGR))
    f = 1.0 if cfg.max_side is None else min(1.0, cfg.max_side / max(sub.shape))
    if f < 1.0:  # resample the region of interest (labels by nearest neighbour, the disks of sure labels kept)
        size = (max(2, int(round(sub.shape[1] * f))), max(2, int(round(sub.shape[0] * f))))
        img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
        sub = np.ascontiguousarray(cv2.resize(sub, size, interpolation=cv2.INTER_NEAREST))
    cv2.setRNGSeed(cfg.seed)
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(img, sub, None, bgd, fgd, cfg.iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error as exc:
        raise SegmentationError(f"grabcut failed ({exc.err}); give a box around the object or more clicks") from exc
    res = ((sub == cv2.GC_FGD) | (sub == cv2.GC_PR_FGD)).astype(np.float32)
    if f < 1.0:
        res = cv2.resize(res, (cx1 - cx0, cy1 - cy0), interpolation=cv2.INTER_LINEAR)
    fg = np.zeros((h, w), bool)
    fg[cy0:cy1, cx0:cx1] = res >= 0.5
    fg = cv2.morphologyEx(fg.astype(np.uint8), cv2.MORPH_OPEN, disk(1)) > 0
    if cfg.refine_edges:
        fg = refine_edges(image, fg)
    if pos:
        fg = component_at(fg, pos)
    elif prompt.box is not None:  # largest component inside the box
        n, lab_, st, _ = cv2.connectedComponentsWithStats(fg.astype(np.uint8))
        if n > 1:
            fg = lab_ == 1 + int(np.argmax(st[1:, cv2.CC_STAT_AREA]))
    return fill_holes(fg)
