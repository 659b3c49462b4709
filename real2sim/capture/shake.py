"""Camera shake: each frame's sub-pixel shift against the clip's still background, and the frames moved back.

A camera on a tripod beside a robot, or on the robot's head, shakes by a fraction of a pixel to a pixel while the
robot moves. Every edge of the background then lies at a slightly different place in each frame: the temporal median
blurs it, and a plate that tells things in front from the background sees the edges as change (through a shake of
+-1 px the plate benchmark's gains over the median fell from +1.5..+28 dB to +0.2..+15, see docs/capture.md).

:func:`camera_shake` measures each frame's translation against the temporal median of the clip (ECC on grey
images at ``scale``, only on the pixels that agree with the median when both are blurred: the robot and the things
it moves are left out). A frame's shift is kept only where it is at least ``min_px``, moving the frame by it takes
away part of its decorrelation from the median (``min_fit``) and lowers the difference in most of the image's
tiles (``min_tiles``: a camera moves every part of the image alike, an arm passing only its own), and only in a
clip whose frames moved by ``min_clip_px`` (median) or more: a still camera's frames keep their pixels, bit for
bit, after a few fits on a sample of frames. :func:`shift_frames` moves the frames back (bicubic).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ShakeEstimate:
    """Per frame: the shift found and how much it explains."""

    shifts: np.ndarray
    """``(n, 2) float``: (dx, dy) px at full size of each frame against the reference frame; zeros where the
    frame is left as it is (the shift is under ``min_px`` or does not explain the frame, or the reference's)."""
    found: np.ndarray
    """``(n, 2) float``: the shift found against the clip's median (before those tests)."""
    fit: np.ndarray
    """``(n,) float``: ``(1 - rho_0) / (1 - rho) - 1``, the decorrelation from the median the shift takes away
    (``rho``: ECC's correlation coefficient on the still pixels, ``rho_0`` without the shift)."""

    def report(self) -> dict:
        m = np.hypot(*self.shifts.T)
        return {"camera_shake_px_median": round(float(np.median(m)), 3),
                "camera_shake_px_max": round(float(m.max()), 3), "camera_shake_frames_moved": int((m > 0).sum())}


def camera_shake(frames: np.ndarray, ref: int = 0, scale: float = 0.5, min_px: float = 0.2, min_fit: float = 0.02,
                 min_clip_px: float = 0.4, min_tiles: float = 0.75, rounds: int = 2, blur: float = 4.0,
                 sample: int = 8) -> ShakeEstimate:
    """Each frame's shift against the reference frame ``ref`` of ``(n, h, w, 3) uint8`` frames (see the module
    docstring). ``scale``: the grey images' size for the fit (0.5: a tenth of a pixel at full size is enough to
    undo); ``rounds``: fits, each against the median of the frames moved by the last; ``blur`` (px at full size):
    the blur under which a shift of a pixel is no change (the still pixels are those within three noise sigmas of
    the median there); ``sample``: the first fit is made on this many frames spread over the clip, and the others
    are fitted only when one of them shook (a still camera costs a few fits)."""
    import cv2

    n = len(frames)
    zero = np.zeros((n, 2))
    if n < 3:
        return ShakeEstimate(zero, zero.copy(), np.zeros(n))
    sigma = blur * scale
    grays: dict[int, np.ndarray] = {}
    blurred: dict[int, np.ndarray] = {}
    found = np.zeros((n, 2), np.float32)
    fit = np.zeros(n)

    def template(idx, shifted=False):
        for i in idx:
            if i not in grays:
                grays[i] = _gray(frames[i], scale)
                blurred[i] = cv2.GaussianBlur(grays[i], (0, 0), sigma)
        m = np.median(np.stack([_moved(grays[i], found[i]) if shifted else grays[i] for i in idx]), 0)
        m = m.astype(np.float32)
        return m, cv2.GaussianBlur(m, (0, 0), sigma)

    def fit_frames(idx, median, median_b):
        for i in idx:
            found[i], fit[i] = _fit(median, grays[i], _still(blurred[i], median_b), found[i], min_tiles)

    # a few frames against their own median first: a still camera stops here
    first = sorted(set(np.linspace(0, n - 1, min(n, sample)).round().astype(int).tolist()) | {ref})
    fit_frames(first, *template(first))
    if not _kept(found / scale, fit, min_px, min_fit).any():
        return ShakeEstimate(zero, found.astype(float) / scale, fit)
    every = list(range(n))
    for r in range(rounds):
        fit_frames(every, *template(every, shifted=r > 0))
    shifts = found.astype(float) / scale
    keep = _kept(shifts, fit, min_px, min_fit)
    if np.median(np.hypot(*(shifts - shifts[ref]).T)) < min_clip_px:
        return ShakeEstimate(zero, shifts, fit)
    kept = np.where(keep[:, None], shifts, 0.0)
    moved = kept - kept[ref]
    moved[np.hypot(*moved.T) < 0.5 * min_px] = 0.0
    return ShakeEstimate(moved, shifts, fit)


def _kept(shifts: np.ndarray, fit: np.ndarray, min_px: float, min_fit: float) -> np.ndarray:
    return (fit >= min_fit) & (np.hypot(*np.asarray(shifts, float).T) >= min_px)


def shift_frames(frames: np.ndarray, shifts: np.ndarray, back: bool = True, border: int | None = None) -> np.ndarray:
    """``frames`` ``(n, h, w[, c])`` each moved by ``-shift`` (``back``: undo the shake; else by ``+shift``), bicubic
    for images, nearest for bool masks; frames with a zero shift are kept as they are (the same array where none
    moves). ``border``: an OpenCV border mode (default: replicated)."""
    import cv2

    if not np.any(shifts):
        return frames
    out = frames.copy()
    is_mask = frames.dtype == bool
    interp = cv2.INTER_NEAREST if is_mask else cv2.INTER_CUBIC
    for i, s in enumerate(shifts):
        if np.any(s):
            moved = _moved(frames[i].view(np.uint8) if is_mask else frames[i], s, interp, back, border)
            out[i] = moved.view(bool) if is_mask else moved
    return out


def _gray(frame: np.ndarray, scale: float) -> np.ndarray:
    import cv2

    g = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)
    if scale != 1:
        g = cv2.resize(g, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    return g.astype(np.float32)


def _moved(image: np.ndarray, shift, interp: int | None = None, back: bool = True, border: int | None = None
           ) -> np.ndarray:
    """``image`` ``(h, w[, c])`` moved by ``-shift`` (``back``) or ``+shift`` (bicubic unless ``interp``; the border
    replicated unless ``border``)."""
    import cv2

    m = np.float32([[1, 0, shift[0]], [0, 1, shift[1]]])
    flags = (cv2.INTER_CUBIC if interp is None else interp) | (cv2.WARP_INVERSE_MAP if back else 0)
    return cv2.warpAffine(image, m, image.shape[1::-1], flags=flags,
                          borderMode=cv2.BORDER_REPLICATE if border is None else border)


def _still(blurred: np.ndarray, median_b: np.ndarray) -> np.ndarray:
    """``(h, w) uint8`` the pixels within three robust sigmas of the blurred median (at least 2 levels)."""
    d = np.abs(blurred - median_b)
    return (d < max(3.0 * 1.4826 * float(np.median(d)), 2.0)).astype(np.uint8)


def _fit(template: np.ndarray, gray: np.ndarray, still: np.ndarray, start: np.ndarray, min_tiles: float
         ) -> tuple[np.ndarray, float]:
    """(shift, fit) of ``gray`` against ``template`` on the ``still`` pixels, from ``start`` (see
    :class:`ShakeEstimate`); no shift and no fit where ECC does not converge or there are too few still pixels."""
    import cv2

    if still.sum() < 0.05 * still.size:
        return np.zeros(2, np.float32), 0.0
    warp = np.eye(2, 3, dtype=np.float32)
    warp[:, 2] = start
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 50, 1e-4)
    try:
        _, warp = cv2.findTransformECC(template, gray, warp, cv2.MOTION_TRANSLATION, criteria, still, 3)
    except cv2.error:  # (no convergence: the frame has too little texture where it is still)
        return np.zeros(2, np.float32), 0.0
    moved = _moved(gray, warp[:, 2])
    if _tiles_better(template, gray, moved, still) < min_tiles:
        return warp[:, 2].copy(), 0.0  # (a thing that moved, not the camera: no fit)
    rho_0 = cv2.computeECC(template, gray, still)
    rho = cv2.computeECC(template, moved, still)
    return warp[:, 2].copy(), float((1.0 - rho_0) / max(1.0 - rho, 1e-12) - 1.0)


def _tiles_better(template, gray, moved, still, grid: int = 3) -> float:
    """The fraction of the ``grid x grid`` tiles (those at least a fifth still) where the shift lowers the still
    pixels' squared difference to the template (each image normalised on the still pixels): a camera that shook
    moves every part of the image alike, a thing that moved only its own part."""
    m = still.astype(bool)

    def norm(x):
        v = x[m]
        return (x - v.mean()) / max(float(v.std()), 1e-6)

    t = norm(template)
    gain = ((t - norm(gray)) ** 2 - (t - norm(moved)) ** 2) * m
    h, w = m.shape
    sums, counts = [], []
    for a in range(grid):
        for b in range(grid):
            sl = slice(a * h // grid, (a + 1) * h // grid), slice(b * w // grid, (b + 1) * w // grid)
            counts.append(int(m[sl].sum()))
            sums.append(float(gain[sl].sum()))
    use = [g for g, c in zip(sums, counts) if c >= 0.2 * (h // grid) * (w // grid)]
    return sum(g > 0 for g in use) / max(len(use), 1)
