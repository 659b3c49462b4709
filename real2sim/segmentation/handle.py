"""A one-click mask of a spoon's bowl (a pan's body, a brush's head), continued along the thin handle it holds.

A click on a spoon lands on its bowl, the widest part; the boxes around the click find the bowl, whose outline is
clear, and stop at the neck where the handle leaves it (a handle 1-3 px wide at 320x256 is a sliver to GrabCut's
colour model of the box). :func:`with_handle` cuts again in a box grown around the mask by ``reach`` times its
longer side, the mask sure foreground and the rest of the box probable background (only what looks like the mask
turns foreground), and adds each piece the cut attaches to the mask that looks like a handle: of the mask's colour
more than of the ring around it, narrower than the mask (its inscribed radius at most ``max_width`` times the
mask's, or ``max_width_along`` times when it continues the mask: along the mask's long axis, or a line pointing at
its centre), long (reaching ``min_length`` times the mask's inscribed diameter away from it), line-like (its area at
most ``max_fill`` times its length times its width), not too large (``max_growth``) and ending inside the box.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import dilate, inside_distance, mask_box
from real2sim.segmentation.continuation import grow_in_box


@dataclass(frozen=True)
class HandleConfig:
    """The bounds of :func:`with_handle` (chosen on the mask benchmark's three seeds, see docs/capture.md *A
    spoon's handle*)."""

    reach: float = 3.0
    """The box grows on every side by this many times the mask's longer side (a handle is 3-5 times its bowl)."""
    max_width: float = 0.5
    """A handle's inscribed radius is at most this fraction of the mask's (a handle, not a second object) ..."""
    max_width_along: float = 0.7
    """... or of this fraction when the piece continues the mask (:func:`_continues`: a carrot's far half along
    the long axis of the half the click found, a handle pointing at a bowl the image's side cut); 0 = off."""
    max_axis_deg: float = 30.0
    """The angle between the mask's long axis and the line from its centre to the piece's centre (degrees)."""
    min_elongation: float = 1.3
    """The mask has a long axis when its longer principal spread is at least this many times the shorter."""
    min_piece_elongation: float = 3.0
    """A piece is a line when its longer principal spread is at least this many times the shorter ..."""
    max_axis_offset: float = 0.9
    """... and it points at the mask when its axis passes this many times the mask's inscribed radius from the
    mask's centre or nearer (the dark cable behind the blurred can of the benchmark: 1.27)."""
    min_length: float = 1.0
    """... it reaches at least this many times the mask's inscribed diameter away from the mask ..."""
    max_fill: float = 1.6
    """... its area is at most this many times its length times its width (a line, not a blob) ..."""
    max_growth: float = 3.0
    """... all handles together add at most this many times the mask's area ..."""
    max_touch: float = 0.05
    """... and at most this fraction of a handle's pixels lie on the grown box's border (it ended inside)."""
    work_px: int = 30000
    """The cut runs on its crop resampled to at most about this many pixels (at 15000 two of the benchmark's
    spoons lose their handle again)."""
    seed: int = 0
    """OpenCV's random state for GrabCut."""


def with_handle(image: np.ndarray, mask: np.ndarray, cfg: HandleConfig = HandleConfig()) -> np.ndarray | None:
    """``mask`` (``(h, w) bool``) with the handles a cut around it attaches (see the module docstring), or None
    when it finds none. ``image``: ``(h, w, 3) uint8`` RGB."""
    import cv2

    box = mask_box(mask)
    if box is None or mask.sum() < 20:
        return None
    h, w = mask.shape
    (y0, y1), (x0, x1) = (box[0].start, box[0].stop - 1), (box[1].start, box[1].stop - 1)
    side = max(y1 - y0, x1 - x0) + 1
    r = int(round(cfg.reach * side))
    grown = (y0 - r, y1 + r, x0 - r, x1 + r)
    cut = grow_in_box(image, mask, grown, max(4, side // 2), cv2.GC_PR_BGD, cfg.seed, cfg.work_px)
    if cut is None:
        return None
    r_mask = _inscribed(mask)
    mask_axis = principal_axis(mask)
    rim = np.zeros((h, w), bool)
    rim[max(0, grown[0]):min(h, grown[1] + 1), max(0, grown[2]):min(w, grown[3] + 1)] = True
    rim &= ~cv2.erode(rim.view(np.uint8), np.ones((3, 3), np.uint8)).view(bool)
    far = cv2.distanceTransform((~mask).view(np.uint8), cv2.DIST_L2, 3)
    _, lab = cv2.connectedComponents((cut & ~mask).view(np.uint8), connectivity=8)
    touching = np.unique(lab[dilate(mask, 1) & (lab > 0)])
    lab_img = cv2.cvtColor(image, cv2.COLOR_RGB2LAB).astype(np.float32)
    mask_colour = lab_img[mask].mean(0)
    out = mask.copy()
    added = 0
    for i in touching:
        piece = lab == i
        if not _looks_like(lab_img, piece, mask, mask_colour):
            continue
        area = int(piece.sum())
        r_piece = _inscribed(piece)
        narrow = r_piece <= cfg.max_width * r_mask or (
            r_piece <= cfg.max_width_along * r_mask and _continues(mask_axis, r_mask, piece, cfg))
        if narrow and is_long_line(area, r_piece, float(far[piece].max()), r_mask, cfg) and (
                piece & rim).sum() <= cfg.max_touch * area:
            out |= piece
            added += area
    if not added or added > cfg.max_growth * mask.sum():
        return None
    return out


def is_long_line(area: int, radius: float, length: float, r_mask: float, cfg: HandleConfig = HandleConfig()) -> bool:
    """A piece of ``area`` px and inscribed ``radius`` whose farthest pixel is ``length`` px from a mask of inscribed
    radius ``r_mask`` reaches ``min_length`` times that mask's inscribed diameter away and is a line, not a blob
    (its area at most ``max_fill`` times its length times its width)."""
    return length >= cfg.min_length * 2 * r_mask and area <= cfg.max_fill * length * (2 * radius + 1)


def _looks_like(lab: np.ndarray, piece: np.ndarray, mask: np.ndarray, mask_colour: np.ndarray) -> bool:
    """The piece's mean colour (Lab) is nearer the mask's than the ring around the piece (a handle of the bowl's
    material on the table; not a strip of a silhouette's edge, which has the colour of what it runs along)."""
    ring = dilate(piece, 2) & ~piece & ~mask
    if not ring.any():
        return True
    c = lab[piece].mean(0)
    return bool(np.linalg.norm(c - mask_colour) < np.linalg.norm(c - lab[ring].mean(0)))


def _inscribed(m: np.ndarray) -> float:
    """The radius (px) of the largest disk inside ``m``."""
    return float(inside_distance(m, precise=False).max())


def principal_axis(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The centre ``(2,) float`` (x, y), the unit long axis ``(2,) float`` and the elongation (the ratio of the
    principal spreads, inf for a line) of the ``(h, w) bool`` mask ``m``."""
    ys, xs = np.nonzero(m)
    if len(xs) < 3:
        return np.array([xs.mean(), ys.mean()]), np.array([1.0, 0.0]), 1.0
    evals, evecs = np.linalg.eigh(np.cov(np.stack([xs, ys]).astype(np.float64)))
    elong = float(np.sqrt(evals[1] / evals[0])) if evals[0] > 0 else np.inf
    return np.array([xs.mean(), ys.mean()]), evecs[:, 1], elong


def _continues(mask_axis: tuple[np.ndarray, np.ndarray, float], r_mask: float, piece: np.ndarray,
               cfg: HandleConfig) -> bool:
    """The piece continues the mask (``mask_axis``: its :func:`principal_axis`; ``r_mask``: its inscribed radius):
    the mask is elongated (:attr:`HandleConfig.min_elongation`) and the piece lies along its long axis, within
    ``max_axis_deg`` of it seen from the mask's centre; or the piece is a line (``min_piece_elongation``) that points
    at the mask's centre (its axis passes within ``max_axis_offset`` times ``r_mask`` of it: a handle leaving a bowl
    the image's side cut)."""
    c, axis, elong = mask_axis
    pc, p_axis, p_elong = principal_axis(piece)
    d = pc - c
    n = float(np.linalg.norm(d))
    if elong >= cfg.min_elongation and n > 0 and abs(float(d @ axis)) / n >= np.cos(np.radians(cfg.max_axis_deg)):
        return True
    offset = abs(float(d[0] * p_axis[1] - d[1] * p_axis[0]))
    return p_elong >= cfg.min_piece_elongation and offset <= cfg.max_axis_offset * r_mask
