"""A one-click mask cut straight by its box, continued past the cut.

One click's candidate masks come from square boxes around the click (:mod:`real2sim.segmentation.grabcut`). A long,
thin object (a spoon, a carrot, a pen lying on the table) crosses every box that is not much larger than the object:
its mask then ends in a straight, axis-aligned cut where the box's side was. The box-touch test does not see it (a
thin object covers a few percent of the box's border), so the cut mask can be the one taken.

:func:`continue_past_cuts` finds such cuts on the mask taken (a side of the mask's bounding box covered at least
half as densely on its extreme row or column as three pixels inside: a rounded or pointed end is not) where the pixels just
past the cut look like the mask there rather than like the table around the mask, and cuts again with GrabCut in a
box grown past them, the mask as (sure, inside) foreground. Only what lies past the cut, within a band around it, is
added: the rest of the mask does not change. Repeated while the grown mask is still cut, up to ``steps`` times.
"""
from __future__ import annotations

import numpy as np

from real2sim.core.imaging import border_run, component_at, erode, fill_holes, mask_box

SIDES = ("left", "right", "top", "bottom")


def _extreme_lines(mask: np.ndarray, box) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per side of the mask's box ``(y0, y1, x0, x1)``: its extreme row or column and the one 3 px inside."""
    y0, y1, x0, x1 = box
    return {"left": (mask[:, x0], mask[:, min(x0 + 3, x1)]), "right": (mask[:, x1], mask[:, max(x1 - 3, x0)]),
            "top": (mask[y0], mask[min(y0 + 3, y1)]), "bottom": (mask[y1], mask[max(y1 - 3, y0)])}


def _bounds(mask: np.ndarray) -> tuple[int, int, int, int]:
    """``(y0, y1, x0, x1)`` inclusive bounds of a non-empty ``(h, w) bool`` mask."""
    rows, cols = mask_box(mask)
    return rows.start, rows.stop - 1, cols.start, cols.stop - 1


def cut_sides(mask: np.ndarray, ratio: float = 0.5, min_px: int = 3) -> list[str]:
    """Sides of ``mask``'s bounding box (of :data:`SIDES`) where it ends straight, as a cut does: at least ``min_px``
    pixels on the extreme row or column and at least ``ratio`` times as many as 3 px inside; sides on the image's
    border are not cuts (the object leaves the image there). An object's own straight edge along a side (a bar
    lying along it, a box's face) is one too: :func:`continues` tells them apart."""
    if np.count_nonzero(mask) < 20:
        return []
    h, w = mask.shape
    box = _bounds(mask)
    y0, y1, x0, x1 = box
    on_border = {"left": x0 == 0, "right": x1 == w - 1, "top": y0 == 0, "bottom": y1 == h - 1}
    out = []
    for side, (line, inside) in _extreme_lines(mask, box).items():
        n, n_in = int(np.count_nonzero(line)), int(np.count_nonzero(inside))
        if not on_border[side] and n >= min_px and n >= ratio * n_in:
            out.append(side)
    return out


def _past(lab: np.ndarray, mask: np.ndarray, box, side: str, step: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Lab colours ``(n, 3)`` of the mask's pixels on the cut line and of the pixels ``step`` px past them."""
    h, w = mask.shape
    y0, y1, x0, x1 = box
    if side in ("left", "right"):
        x = x0 if side == "left" else x1
        rows = np.nonzero(mask[:, x])[0]
        xo = max(0, x - step) if side == "left" else min(w - 1, x + step)
        return lab[rows, x], lab[rows, xo]
    y = y0 if side == "top" else y1
    cols = np.nonzero(mask[y])[0]
    yo = max(0, y - step) if side == "top" else min(h - 1, y + step)
    return lab[y, cols], lab[yo, cols]


def continues(lab: np.ndarray, mask: np.ndarray, side: str) -> bool:
    """Whether the object goes on past ``side``'s cut: most pixels just past it are nearer (Lab) the mask's mean
    colour on the cut line than the mean colour of a ring 3-4 px around the mask (the table)."""
    import cv2

    box = _bounds(mask)
    inside, past = _past(lab, mask, box, side)
    k = np.ones((5, 5), np.uint8)
    m8 = mask.astype(np.uint8)
    ring = (cv2.dilate(m8, k, iterations=2) > 0) & ~(cv2.dilate(m8, k) > 0)
    if not ring.any():
        return False
    d_obj = np.linalg.norm(past - inside.mean(0), axis=1)
    d_table = np.linalg.norm(past - lab[ring].mean(0), axis=1)
    return float(np.mean(d_obj < d_table)) >= 0.5


def _band_past(mask: np.ndarray, box, sides: list[str]) -> np.ndarray:
    """``(h, w) bool``: past each cut side (outside the mask's box), within the cut's extent plus its own length
    to both sides."""
    y0, y1, x0, x1 = box
    allow = np.zeros(mask.shape, bool)
    for side in sides:
        if side in ("left", "right"):
            rows = np.nonzero(mask[:, x0 if side == "left" else x1])[0]
            a, b = int(rows.min()), int(rows.max())
            span = slice(max(0, 2 * a - b - 1), 2 * b - a + 2)
            if side == "left":
                allow[span, :x0] = True
            else:
                allow[span, x1 + 1:] = True
        else:
            cols = np.nonzero(mask[y0 if side == "top" else y1])[0]
            a, b = int(cols.min()), int(cols.max())
            span = slice(max(0, 2 * a - b - 1), 2 * b - a + 2)
            if side == "top":
                allow[:y0, span] = True
            else:
                allow[y1 + 1:, span] = True
    return allow


def grow_in_box(image: np.ndarray, mask: np.ndarray, grown: tuple[int, int, int, int], margin: int, box_label: int,
                seed: int, work_px: int = 0) -> np.ndarray | None:
    """GrabCut of ``image`` (``(h, w, 3) uint8`` RGB) around ``mask`` (``(h, w) bool``): the box ``grown`` ``(y0, y1,
    x0, x1)`` (inclusive; may reach past the image) labelled ``box_label`` (``cv2.GC_PR_BGD`` or ``cv2.GC_PR_FGD``),
    ``margin`` px of context around it background, the mask probable foreground and its inside (eroded by 1 px)
    sure foreground; 3 iterations, OpenCV's random state seeded. ``work_px``: a crop larger than this many pixels is
    cut resampled to about that many and its result resampled back (0: never). The full-image foreground, or None
    (no background sample, or a model with one colour only)."""
    import cv2

    h, w = mask.shape
    by0, by1, bx0, bx1 = grown
    cy0, cy1, cx0, cx1 = max(0, by0 - margin), min(h, by1 + margin + 1), max(0, bx0 - margin), min(w, bx1 + margin + 1)
    sub = np.ascontiguousarray(image[cy0:cy1, cx0:cx1][..., ::-1])
    init = np.full(sub.shape[:2], cv2.GC_BGD, np.uint8)
    init[max(0, by0 - cy0):by1 - cy0 + 1, max(0, bx0 - cx0):bx1 - cx0 + 1] = box_label
    mc = mask[cy0:cy1, cx0:cx1]
    init[mc] = cv2.GC_PR_FGD
    init[erode(mc, 1)] = cv2.GC_FGD
    if not ((init == cv2.GC_BGD) | (init == cv2.GC_PR_BGD)).any():
        return None
    ch, cw = sub.shape[:2]
    f = min(1.0, float(np.sqrt(work_px / (ch * cw)))) if work_px else 1.0
    if f < 1.0:
        size = (max(8, int(round(cw * f))), max(8, int(round(ch * f))))
        sub = cv2.resize(sub, size, interpolation=cv2.INTER_AREA)
        init = cv2.resize(init, size, interpolation=cv2.INTER_NEAREST)
    cv2.setRNGSeed(seed)
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(sub, init, None, bgd, fgd, 3, cv2.GC_INIT_WITH_MASK)
    except cv2.error:  # a model with one colour only (a flat crop)
        return None
    fg = (init == cv2.GC_FGD) | (init == cv2.GC_PR_FGD)
    if f < 1.0:
        fg = cv2.resize(fg.astype(np.float32), (cw, ch), interpolation=cv2.INTER_LINEAR) >= 0.5
    out = np.zeros((h, w), bool)
    out[cy0:cy1, cx0:cx1] = fg
    return out


def _grabcut_past(image: np.ndarray, mask: np.ndarray, box, sides: list[str], seed: int) -> np.ndarray | None:
    """:func:`grow_in_box` in the mask's box grown by its longer side past each cut side (2 px elsewhere) as probable
    background, with half that again of context. The full-image foreground, or None."""
    import cv2

    y0, y1, x0, x1 = box
    L = max(x1 - x0, y1 - y0) + 1
    grown = (y0 - (L if "top" in sides else 2), y1 + (L if "bottom" in sides else 2),
             x0 - (L if "left" in sides else 2), x1 + (L if "right" in sides else 2))
    return grow_in_box(image, mask, grown, max(4, L // 2), cv2.GC_PR_BGD, seed)


def continue_past_cuts(image: np.ndarray, mask: np.ndarray, clicks, ratio: float = 0.5, steps: int = 3,
                       max_growth: float = 4.0, max_border_run: float = 0.35, seed: int = 0
                       ) -> tuple[np.ndarray, list[str]]:
    """``mask`` (``(h, w) bool``, of ``image`` ``(h, w, 3) uint8`` RGB) continued past its straight cuts (see the
    module docstring). A step is kept when it adds at least 10 % to the mask and at most ``max_growth`` times its
    size, keeps the mask's pixels and does not run along an image side (``max_border_run``: a table).
    Returns the mask and the sides it was continued past (empty: unchanged)."""
    import cv2

    lab = None  # only where a side ends straight
    done: list[str] = []
    for _ in range(steps):
        straight = cut_sides(mask, ratio)
        if straight and lab is None:
            lab = cv2.cvtColor(image, cv2.COLOR_RGB2LAB).astype(np.float32)
        sides = [s for s in straight if continues(lab, mask, s)]
        if not sides:
            break
        box = _bounds(mask)
        fg = _grabcut_past(image, mask, box, sides, seed)
        if fg is None:
            break
        grown = fill_holes(component_at(mask | (fg & _band_past(mask, box, sides)), clicks, radius=3))
        n, n_new = int(np.count_nonzero(mask)), int(np.count_nonzero(grown))
        if n_new < 1.1 * n or n_new > max_growth * n or np.count_nonzero(grown & mask) < 0.9 * n:
            break
        if border_run(grown) > max_border_run:
            break
        mask = grown
        done += sides
    return mask, done
