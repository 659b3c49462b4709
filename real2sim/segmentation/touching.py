"""Two objects touching: a mask cut between its positive clicks and negative ones.

A negative click on the change (or the one-click mask) that a positive click is on says that change holds two
objects (a can in a bowl, a carrot on a dish, two cans side by side: both absent from the plate, so the frame minus
the plate is one region). The segment stage adds every other entity's click on the frame as a negative one, so a
cluttered table's objects come apart without the person clicking twice. Measured on
``benchmarks/bench_capture_touching.py``.
"""
from __future__ import annotations

import numpy as np

from real2sim.core.imaging import component_at, dilate
from real2sim.segmentation.core import Prompt, upsample_mask, work_size_prompt

NEAR_FRAC = 0.02
"""A mask that comes this close to a negative click (fraction of ``sqrt(h * w)``, twice over) reaches the object
clicked there (:func:`cut_at_negatives`)."""
WORK_PX = 640 * 512
"""Larger frames are cut at this many pixels (as the backends segment them)."""


def split_at_negatives(image: np.ndarray, mask: np.ndarray, positives, negatives, radius: int,
                       iterations: int = 3) -> np.ndarray:
    """``mask`` (``(h, w) bool``) less what the negative clicks are on. Change under a negative click that holds no
    positive one goes whole. Change holding both (two objects touching, both absent from the plate: a can in a
    bowl, a carrot on a dish) is cut between them: a watershed on the image's colour edges from disks of
    ``radius`` at the clicks gives the first cut, then ``iterations`` of GrabCut inside that change (outside it:
    background) move it to where the two objects' colours part; the piece at the positive clicks is kept."""
    on = [p for p in negatives if _at(mask, p)]
    if not on or not mask.any():
        return mask
    joint = component_at(mask, positives, radius=0) if positives else np.zeros_like(mask)
    shared = [p for p in on if _at(joint, p)]
    alone = [p for p in on if p not in shared]
    if alone:
        mask = mask & ~component_at(mask, alone, radius=0)
    if not shared:
        return mask
    if iterations <= 0:
        return mask & ~joint
    gap = min(np.hypot(px - nx, py - ny) for px, py in positives for nx, ny in shared)
    r = int(max(1, min(radius, 0.4 * gap)))
    part = _split_between(image, joint, positives, shared, r, iterations)
    return (mask & ~joint) | component_at(part, positives, radius=r)


def _at(mask: np.ndarray, point) -> bool:
    """``mask`` at the pixel of ``point`` (x, y), clamped into the image."""
    h, w = mask.shape
    return bool(mask[min(max(int(round(point[1])), 0), h - 1), min(max(int(round(point[0])), 0), w - 1)])


def disks(shape: tuple[int, int], points, r: int) -> np.ndarray:
    """``(h, w) bool``: disks of radius ``r`` at the points (x, y)."""
    import cv2

    m = np.zeros(shape, np.uint8)
    for x, y in points:
        cv2.circle(m, (int(round(x)), int(round(y))), r, 1, -1)
    return m > 0


def _split_between(image: np.ndarray, region: np.ndarray, positives, negatives, r: int, iterations: int) -> np.ndarray:
    """The part of ``region`` that goes with the positive clicks (see :func:`split_at_negatives`)."""
    import cv2

    ys, xs = np.nonzero(region)
    m = 2 * r + 2
    y0, y1, x0, x1 = max(0, ys.min() - m), min(region.shape[0], ys.max() + m + 1), max(0, xs.min() - m), \
        min(region.shape[1], xs.max() + m + 1)
    reg = region[y0:y1, x0:x1]
    shift = [(x - x0, y - y0) for x, y in positives], [(x - x0, y - y0) for x, y in negatives]
    pos_d, neg_d = disks(reg.shape, shift[0], r) & reg, disks(reg.shape, shift[1], r) & reg
    bgr = np.ascontiguousarray(image[y0:y1, x0:x1, ::-1])
    markers = np.zeros(reg.shape, np.int32)
    markers[~dilate(reg, 2)] = 3
    markers[neg_d] = 2
    markers[pos_d] = 1
    cv2.watershed(bgr, markers)
    gc = np.full(reg.shape, cv2.GC_BGD, np.uint8)
    gc[reg] = cv2.GC_PR_BGD
    gc[(markers != 2) & reg] = cv2.GC_PR_FGD  # what the outside's flood took (a lid past an edge) stays a candidate
    gc[neg_d] = cv2.GC_BGD
    gc[pos_d] = cv2.GC_FGD
    cv2.setRNGSeed(0)
    try:
        cv2.grabCut(bgr, gc, None, np.zeros((1, 65)), np.zeros((1, 65)), iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error:  # one of the two models has too few pixels: the watershed's cut stands
        gc = np.where((markers == 1) & reg, cv2.GC_FGD, cv2.GC_BGD).astype(np.uint8)
    out = np.zeros_like(region)
    out[y0:y1, x0:x1] = ((gc == cv2.GC_FGD) | (gc == cv2.GC_PR_FGD)) & reg
    return out


def cut_at_negatives(image: np.ndarray, mask: np.ndarray, positives, negatives,
                     work_px: int = WORK_PX) -> tuple[np.ndarray, bool]:
    """Any backend's mask (``(h, w) bool``) cut at the negative clicks it holds or comes within twice
    :data:`NEAR_FRAC` of (GrabCut keeps a disk at a negative click out, not the rest of that object): the disk put
    back and the whole cut by :func:`split_at_negatives`. Frames over ``work_px`` pixels are cut at that many (the
    mask's own outline stays at full resolution; only the cut between the objects is the working size's).
    Returns the mask and whether it was cut."""
    import cv2

    h, w = mask.shape
    r = max(2, int(round(NEAR_FRAC * np.sqrt(h * w))))
    near = [p for p in negatives if (disks(mask.shape, [p], 2 * r) & mask).any()]
    if not near or not positives or not mask.any():
        return mask, False
    whole = mask | disks(mask.shape, near, r)
    if work_px and h * w > work_px:
        size, small, scale = work_size_prompt((h, w), work_px, Prompt([*positives, *near], [1] * len(positives) + [0] * len(near)))
        cut = split_at_negatives(cv2.resize(image, size, interpolation=cv2.INTER_AREA),
                                 cv2.resize(whole.astype(np.float32), size, interpolation=cv2.INTER_AREA) >= 0.5,
                                 small.positives, small.negatives, max(2, int(round(r / scale))))
        out = component_at(mask & upsample_mask(cut, (h, w)), positives, radius=r)
    else:
        out = split_at_negatives(image, whole, positives, near, r) & mask
    return out, not np.array_equal(out, mask)
