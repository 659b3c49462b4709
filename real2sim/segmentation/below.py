"""A one-click mask of an object's top, continued down to the side the camera sees below it (and a side, up to its top).

A camera looking down at a table sees an object's top (a can's lid, a cube's top face, a bin's contents, a
cabinet's top) above its side (the can's label, the cube's front faces, the bin's front, the drawers) in the image.
A click on the top finds the top: its colour and outline are the clearest in the box around the click. The person
meant the object.

:func:`whole_below` cuts again with GrabCut in a box grown down from the mask (``reach`` times its width, a quarter of
it to each side), the mask as sure foreground, and keeps what it adds when the result looks like one
object standing under its top: it adds ``min_growth`` to ``max_growth`` times the mask's area, the new pixels lie
below the top's middle, no wider than ``max_widen`` times the top, the whole is compact (``min_solidity``) and ends
inside the grown box (a mask reaching the box's bottom or sides ran into the table, not down an object's side).

:func:`whole_above` is the other way round: a click on a can's body finds the body, and the lid over it is left
out. The box grows up by ``up_reach`` times the mask's width, and the whole must add ``up_min_growth`` to
``up_max_growth`` times the mask's area above its middle, no wider than ``up_max_widen`` times the mask, under the
same bounds on solidity and the box.

:func:`whole_around` runs both and, where neither finds a side, keeps a cut's whole that completes the mask: it adds
less than a side would (up to ``complete_max_growth`` times the mask's area, on any side), is convex
(``complete_min_solidity``), no wider than ``complete_max_widen`` times the mask and ends inside the box: the part of
the object the first cut left out (a shaded flank, a rim), not the table.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import component_at, dilate, fill_holes, mask_box, solidity
from real2sim.segmentation.continuation import grow_in_box


@dataclass(frozen=True)
class BelowConfig:
    """The bounds of :func:`whole_below` and :func:`whole_above` (chosen on the mask benchmark's three seeds, see
    docs/capture.md *A click on an object's top*). Both assume the image's rows run along gravity, the top of an
    object above its side: a camera rolled by more than about 45 degrees breaks that (the bounds then mostly
    reject what the cut adds)."""

    reach: float = 2.5
    """The box grows down by this many times the mask's width (or height, the larger: a can's body is 1.5-2 times
    its lid's width under it, a bottle's more)."""
    side: float = 0.25
    """... and to each side by this fraction of the mask's width."""
    min_growth: float = 1.5
    """The whole is at least this many times the mask's area ..."""
    max_growth: float = 7.0
    """... and at most this many."""
    max_widen: float = 1.4
    """The whole's width over the mask's at most (a side under its top, not the table)."""
    min_solidity: float = 0.97
    """The whole's area over its convex hull's at least (one object)."""
    max_touch: float = 0.05
    """Fraction of the whole's outline on the grown box's bottom or sides at most (it ended inside the box)."""
    work_px: int = 30000
    """The cut runs on its crop resampled to at most about this many pixels (a close object's crop is large)."""
    up_reach: float = 0.8
    """Upwards (a can's body clicked, its lid above it): the box grows up by this many times the mask's width ..."""
    up_min_growth: float = 1.1
    """... the whole is at least this many times the mask's area (a lid adds a tenth or more) ..."""
    up_max_growth: float = 2.0
    """... and at most this many (a top is smaller than the side it stands on) ..."""
    up_max_widen: float = 1.1
    """... and no wider than this many times the mask (a can's lid is as wide as its body; what widens more is
    something else above it)."""
    complete_max_growth: float = 1.5
    """:func:`whole_around`, where neither cut found a side: a cut's whole that adds less than this many times the
    mask's area (at least ``complete_min_growth``) completes the mask ..."""
    complete_min_growth: float = 1.03
    """... (less is the outline's own jitter) ..."""
    complete_min_solidity: float = 0.99
    """... when it is convex (a part of the object the first cut left out fills the mask's outline out; a leak into
    the table or a neighbour dents it) ..."""
    complete_max_widen: float = 1.1
    """... no wider than this many times the mask ..."""
    complete_own_hue: bool = True
    """... and what it adds has the mask's hue rather than the table's around it (a shaded part of the object keeps
    the object's chromaticity; a cast shadow keeps the table's)."""
    seed: int = 0
    """OpenCV's random state before the cut."""


def _cut_along(image: np.ndarray, mask: np.ndarray, box, grow: int, up: bool, cfg: BelowConfig):
    """:func:`~real2sim.segmentation.continuation.grow_in_box` with the box ``(y0, y1, x0, x1)`` grown ``grow`` px
    down (``up``: up) and sideways as probable foreground (its pixels unlike the context around it, the table, are
    the object). Returns the full-image foreground and the grown box, or None."""
    import cv2

    h, w = mask.shape
    y0, y1, x0, x1 = box
    pad = max(2, int(round(cfg.side * (x1 - x0 + 1))))
    by0, by1 = (max(0, y0 - grow), min(h - 1, y1 + 2)) if up else (max(0, y0 - 2), min(h - 1, y1 + grow))
    grown = (by0, by1, max(0, x0 - pad), min(w - 1, x1 + pad))
    fg = grow_in_box(image, mask, grown, max(4, pad, grow // 4), cv2.GC_PR_FGD, cfg.seed, cfg.work_px)
    return None if fg is None else (fg, grown)


def _touches(whole: np.ndarray, grown, shape, up: bool = False) -> float:
    """Fraction of ``whole``'s outline on the grown box's far side (bottom; ``up``: top) or sides (not where they
    are the image's)."""
    import cv2

    h, w = shape
    by0, by1, bx0, bx1 = grown
    m8 = whole.astype(np.uint8)
    outline = whole & ~(cv2.erode(m8, np.ones((3, 3), np.uint8)) > 0)
    n = int(np.count_nonzero(outline))
    if n == 0:
        return 0.0
    on = np.zeros_like(outline)
    if up and by0 > 0:
        on[by0] = True
    if not up and by1 < h - 1:
        on[by1] = True
    if bx0 > 0:
        on[:, bx0] = True
    if bx1 < w - 1:
        on[:, bx1] = True
    return float(np.count_nonzero(outline & on)) / n


def whole_below(image: np.ndarray, mask: np.ndarray, clicks, config: BelowConfig | None = None) -> np.ndarray | None:
    """The object under the top ``mask`` (``(h, w) bool`` of ``image`` ``(h, w, 3) uint8`` RGB; see the module
    docstring), or None when what the cut adds does not look like the object's side."""
    return _side_found(image, mask, clicks, False, config or BelowConfig())


def whole_above(image: np.ndarray, mask: np.ndarray, clicks, config: BelowConfig | None = None) -> np.ndarray | None:
    """The object whose side ``mask`` is, with the top the camera sees over it (a can's body clicked: its lid),
    or None when what the cut adds does not look like the object's top (see the module docstring)."""
    return _side_found(image, mask, clicks, True, config or BelowConfig())


def _side_found(image, mask, clicks, up: bool, cfg: BelowConfig) -> np.ndarray | None:
    """The cut's whole down (``up``: up) from ``mask`` when it is the object's side (top), else None."""
    whole = _cut_whole(image, mask, clicks, up, cfg)
    return whole.mask if whole is not None and _is_side(whole, mask, cfg) else None


def whole_around(image: np.ndarray, mask: np.ndarray, clicks, config: BelowConfig | None = None
                 ) -> tuple[np.ndarray | None, str]:
    """:func:`whole_below`, else :func:`whole_above`, else the first of their cuts' wholes that completes ``mask``
    (see the module docstring): ``(whole, "below_px" | "above_px" | "completed_px")``, the key naming which (the
    details' key for the pixels added), or ``(None, "")``."""
    cfg = config or BelowConfig()
    down = _cut_whole(image, mask, clicks, False, cfg)
    if down is not None and _is_side(down, mask, cfg):
        return down.mask, "below_px"
    up = _cut_whole(image, mask, clicks, True, cfg)
    if up is not None and _is_side(up, mask, cfg):
        return up.mask, "above_px"
    for whole in (down, up):
        if whole is not None and _completes(image, whole, mask, cfg):
            return whole.mask, "completed_px"
    return None, ""


@dataclass(frozen=True)
class _Whole:
    """A cut's whole (``mask``: the component at the clicks, holes filled) and the box it was cut in."""

    mask: np.ndarray
    grown: tuple[int, int, int, int]
    up: bool


def _cut_whole(image, mask, clicks, up: bool, cfg: BelowConfig) -> _Whole | None:
    """GrabCut in the box grown from ``mask`` down (``up``: up) by ``reach`` (``up_reach``): the whole at the clicks,
    or None (a mask under 20 px, or the cut found nothing)."""
    if np.count_nonzero(mask) < 20:
        return None
    rows, cols = mask_box(mask)
    box = (rows.start, rows.stop - 1, cols.start, cols.stop - 1)
    mh, mw = box[1] - box[0] + 1, box[3] - box[2] + 1
    reach = cfg.up_reach * mw if up else cfg.reach * max(mh, mw)
    cut = _cut_along(image, mask, box, int(round(reach)), up, cfg)
    if cut is None:
        return None
    fg, grown = cut
    return _Whole(fill_holes(component_at(mask | fg, clicks, radius=3)), grown, up)


def _grows_within(whole: _Whole, mask: np.ndarray, min_growth: float, max_growth: float, max_widen: float,
                  min_solidity: float, cfg: BelowConfig) -> bool:
    """The whole holds the mask, adds ``min_growth`` to ``max_growth`` times its area, widens at most
    ``max_widen`` times, is at least ``min_solidity`` compact and ends inside its box."""
    n, a = int(np.count_nonzero(mask)), int(np.count_nonzero(whole.mask))
    if not (min_growth * n <= a <= max_growth * n) or np.count_nonzero(whole.mask & mask) < 0.95 * n:
        return False
    _, mc = mask_box(mask)
    _, wc = mask_box(whole.mask)
    if (wc.stop - wc.start) > max_widen * (mc.stop - mc.start):
        return False
    return (solidity(whole.mask) >= min_solidity
            and _touches(whole.mask, whole.grown, mask.shape, whole.up) <= cfg.max_touch)


def _is_side(whole: _Whole, mask: np.ndarray, cfg: BelowConfig) -> bool:
    """The whole is the object's side under the top ``mask`` (cut upwards: its top over the side ``mask``): the
    bounds of the module docstring, the new pixels on the far side of the mask's middle."""
    up = whole.up
    grow = (cfg.up_min_growth, cfg.up_max_growth, cfg.up_max_widen) if up else (cfg.min_growth, cfg.max_growth,
                                                                                cfg.max_widen)
    if not _grows_within(whole, mask, *grow, cfg.min_solidity, cfg):
        return False
    rows, _ = mask_box(mask)
    ys, _ = np.nonzero(whole.mask & ~mask)
    y_mid = 0.5 * (rows.start + rows.stop - 1)
    return bool(len(ys)) and float(np.mean(ys < y_mid if up else ys > y_mid)) >= 0.8


def _completes(image: np.ndarray, whole: _Whole, mask: np.ndarray, cfg: BelowConfig) -> bool:
    """The whole completes the mask (see the module docstring): a little more on any side, convex, in the mask's
    hue (``complete_own_hue``)."""
    return (_grows_within(whole, mask, cfg.complete_min_growth, cfg.complete_max_growth, cfg.complete_max_widen,
                          cfg.complete_min_solidity, cfg)
            and (not cfg.complete_own_hue or _in_own_hue(image, whole.mask & ~mask, mask, whole.mask)))


def _in_own_hue(image: np.ndarray, added: np.ndarray, mask: np.ndarray, whole: np.ndarray) -> bool:
    """The median chromaticity (``rgb / sum``) of the ``added`` pixels is nearer the ``mask``'s than that of the
    surroundings just outside the ``whole`` next to them (a ring as wide as a tenth of the whole's size)."""
    if not added.any():
        return False
    r = max(2, int(round(0.1 * np.sqrt(np.count_nonzero(whole)))))
    rows, cols = mask_box(whole)  # the ring lies within r of the whole: the box r + 1 wider holds it
    h, w = whole.shape
    box = (slice(max(0, rows.start - r - 1), min(h, rows.stop + r + 1)),
           slice(max(0, cols.start - r - 1), min(w, cols.stop + r + 1)))
    near = dilate(added[box], 2 * r) & dilate(whole[box], r) & ~whole[box]
    if not near.any():
        return False

    def hue(region, crop):
        rgb = crop[region].astype(np.float32)
        return np.median(rgb[:, :2] / np.maximum(rgb.sum(-1, keepdims=True), 1.0), axis=0)
    here = hue(added[box], image[box])
    return bool(np.linalg.norm(here - hue(mask, image)) <= np.linalg.norm(here - hue(near, image[box])))
