"""A one-click mask continued along the thin line it lies on (a spoon's handle, a pen, a marker, a cable).

GrabCut's smoothness term makes a structure one to four pixels wide expensive to keep: a click on a spoon's handle
gives a speck, a click on its bowl can give the bowl alone, and the handle step (:mod:`.handle`) needs a cut that
attaches the handle. A thin structure is what a median filter wider than twice its width removes: :func:`line_at`
takes each pixel's colour distance from the median of its window (a top-hat in colour), thresholds it at
multiples of its own noise (the distance's median absolute deviation over the crop: a noisy or JPEG image raises
the bar) with hysteresis, keeps the pixels nearer the object's own colour than their surroundings' (not its cast
shadow or the floor's grain beside it), and takes the component at the click when it is a line: long, narrow,
ending inside the crop. A solid object wider than half the window is not found (its inside equals its window's
median), so :func:`with_line` only changes masks that are themselves thin, and only by joining the line they lie
along.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import component_at, fill_holes
from real2sim.segmentation.colour import lab_image


@dataclass(frozen=True)
class LineConfig:
    """The bounds of :func:`line_at` and :func:`with_line` (docs/capture.md *A click on a thin line*)."""

    window: float = 0.05
    """The median filter's side, as a fraction of ``sqrt(h * w)`` (15 px at 320x256): twice the widest handle."""
    reach: float = 0.35
    """The crop around the click: this fraction of ``sqrt(h * w)`` on every side (a spoon's length and more)."""
    high: float = 5.0
    """A pixel surely stands out of its surroundings at this many noise deviations ..."""
    low: float = 2.5
    """... and joins a sure one it touches at this many (hysteresis)."""
    floor: float = 6.0
    """The sure threshold is at least this (Lab units, lightness halved; the joining one at least half of it): a
    clean image's noise is near zero."""
    shade_weight: float = 0.5
    """Lightness (already halved) weighs this much in telling the object's colour from its surroundings' (a shadow
    changes the lightness, an object the chroma)."""
    min_elongation: float = 4.0
    """The line's longer principal spread is at least this many times its shorter one ..."""
    min_length: float = 0.08
    """... its longer spread (4 standard deviations) at least this fraction of ``sqrt(h * w)`` ..."""
    max_touch: float = 0.0
    """... and at most this fraction of its pixels lie on the crop's sides inside the image (it ends inside)."""
    min_overlap: float = 0.6
    """:func:`with_line`: at least this fraction of the mask lies on the line (the line continues the mask) ..."""
    min_growth: float = 1.3
    """... and the mask with the line is at least this many times the mask."""


def line_at(image: np.ndarray, click, config: LineConfig | None = None) -> np.ndarray | None:
    """``(h, w) bool`` the thin line at ``click`` (x, y) of ``image`` ``(h, w, 3) uint8`` RGB, or None when what is
    there is not one (see the module docstring). The line's colour is the median of the pixels that stand out
    within 2 px of the click (not the mask found so far's: where that took a cast shadow along, so would the line)."""
    import cv2

    cfg = config or LineConfig()
    h, w = image.shape[:2]
    S = float(np.sqrt(h * w))
    k = max(7, int(round(cfg.window * S)) | 1)
    r = int(round(cfg.reach * S))
    cx, cy = min(max(int(round(click[0])), 0), w - 1), min(max(int(round(click[1])), 0), h - 1)
    x0, x1, y0, y1 = max(0, cx - r), min(w, cx + r + 1), max(0, cy - r), min(h, cy + r + 1)
    crop = np.ascontiguousarray(image[y0:y1, x0:x1])
    if min(crop.shape[:2]) < k:
        return None
    lab, around = lab_image(crop), lab_image(cv2.medianBlur(crop, k))  # (lightness halved: a shade changes it most)
    d = np.linalg.norm(lab - around, axis=-1)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d))))
    sure = d > max(cfg.high * sigma, cfg.floor)
    px, py = cx - x0, cy - y0
    own = np.zeros(d.shape, bool)  # the pixels that stand out around the click: the object's colour
    own[max(0, py - 2):py + 3, max(0, px - 2):px + 3] = True
    own &= sure
    ref = np.median(lab[own], axis=0) if own.any() else lab[py, px]
    # nearer the object's colour than the surroundings', lightness weighed less: a cast shadow beside the object is
    # its surroundings darker, at their chroma
    tone = np.array([cfg.shade_weight, 1.0, 1.0], np.float32)
    joins = (d > max(cfg.low * sigma, cfg.floor / 2)) & (
        np.linalg.norm((lab - ref) * tone, axis=-1) < np.linalg.norm((lab - around) * tone, axis=-1))
    line = component_at(joins, [(px, py)], radius=2)
    if not (line & sure).any():
        return None
    line = fill_holes(line)
    if not _is_line(line, cfg.min_elongation, cfg.min_length * S):
        return None
    sides = _inner_sides(line.shape, (y0, x0), (h, w))
    if np.count_nonzero(line & sides) > cfg.max_touch * np.count_nonzero(line):
        return None
    out = np.zeros((h, w), bool)
    out[y0:y1, x0:x1] = line
    return out


def _is_line(m: np.ndarray, min_elongation: float, min_length: float) -> bool:
    """Whether ``m``'s pixels spread along one axis: at least ``min_elongation`` times as far as across it (principal
    standard deviations) and 4 deviations at least ``min_length`` px."""
    ys, xs = np.nonzero(m)
    if len(ys) < 10:
        return False
    small, large = np.maximum(np.linalg.eigvalsh(np.cov(np.stack([xs, ys]).astype(np.float64))), 0.0)
    return large >= min_elongation ** 2 * small and 4 * np.sqrt(large) >= min_length  # (small 0: a straight 1 px line)


def _inner_sides(shape: tuple[int, int], origin: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    """``shape`` bool: the crop's outermost rows and columns that are not on the image's own border (a line may leave
    the image, not the crop)."""
    (ch, cw), (oy, ox), (h, w) = shape, origin, size
    out = np.zeros((ch, cw), bool)
    out[[0, -1], :] = True
    out[:, [0, -1]] = True
    if oy == 0:
        out[0] = False
    if ox == 0:
        out[:, 0] = False
    if oy + ch == h:
        out[-1] = False
    if ox + cw == w:
        out[:, -1] = False
    return out


def with_line(image: np.ndarray, mask: np.ndarray, click, config: LineConfig | None = None) -> np.ndarray | None:
    """``mask`` (``(h, w) bool``) joined with the thin line at ``click`` when the mask lies on it and the line
    continues it (a spoon's bowl and its handle, a speck on a handle), else None."""
    cfg = config or LineConfig()
    line = line_at(image, click, cfg)
    if line is None:
        return None
    n = int(np.count_nonzero(mask))
    if n and np.count_nonzero(mask & line) < cfg.min_overlap * n:
        return None
    out = fill_holes(mask | line)
    if np.count_nonzero(out) < cfg.min_growth * max(n, 1):
        return None
    return out
