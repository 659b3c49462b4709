"""Propagation of object masks across the frames of a fixed camera, with occlusion reasoning.

A mask drawn on one frame (the prompt frame) is carried to every other frame, forwards and backwards. Per-pixel
flow warping drags a mask along with whatever passes over the object (a robot arm crossing a pot takes the
pot's mask with it), so objects are tracked as wholes instead:

- Each object keeps its **extent** (its silhouette, occluded parts included) and a **reference appearance**
  (blurred Lab colours of the frame where the extent was last set).
- Frame ``i`` is compared with the previous frame ``j`` over the object's visible pixels. When most of them
  kept their colour, the object has not moved: the extent stays and the **visible** mask is the part of the
  extent whose colours still match the reference; the rest is occluded (state ``"rest"``, or ``"occluded"``
  when less than ``min_visible`` of it is seen).
- When they changed, one similarity transform (rotation + scale + shift) is fitted to the dense optical flow of
  the visible pixels (RANSAC). If that transform explains the colours better than "nothing moved" (and, for
  an object at rest, also where the two hypotheses part: the pixels whose carried colour differs from what was
  there; an object of the floor's colour "explains" any floor it is carried over), the object moved (a grasped
  can): extent and reference are carried by the transform (state ``"moved"``). Else what changed is an occluder
  and the object stays.
- An extent that leaves the image or a moved object with no visible pixel is ``"lost"`` (the extent is kept).

Frames are first matched in exposure to the prompt frame (per-channel gains over the whole image).
``propagate`` returns the visible masks and per-frame info (state, visible fraction, transform).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import channel_norm, dilate, disk, mask_box
from real2sim.core.manifest import (
    MASK_STATES as STATES,  # prompt, rest, occluded, moved, lost
)
from real2sim.segmentation.colour import lab_image

log = logging.getLogger(__name__)

AT_PROMPTED_POSE = ("prompt", "rest", "occluded")
"""States in which the object is where it was prompted (seen whole or in part)."""


@dataclass
class PropagateConfig:
    """Propagation parameters."""

    color_tolerance: float = 18.0
    """Lab distance (lightness weighted 0.5, OpenCV 8-bit units, after a 5 px blur) under which a pixel keeps its colour."""
    min_visible: float = 0.5
    """Below this visible fraction of its extent an object at rest is reported ``occluded``."""
    min_motion_px: float = 1.5
    """A fitted transform that moves no extent pixel farther than this is no motion."""
    motion_margin: float = 0.1
    """The moved hypothesis must explain this much more of the visible pixels than the static one, or
    ``motion_margin_share`` of the pixels the static one leaves unexplained where that is less ..."""
    motion_margin_share: float = 0.3
    """... (an object of low contrast keeps most of its pixels' colours within ``color_tolerance`` when it moves a
    few pixels: 86 % for a coke can on a red-brown floor moved 3 px, which the moved hypothesis took to 94 %; with
    the plain margin it never started moving and was left behind; 0 = the plain margin always) ..."""
    motion_share_visible: float = 0.9
    """... the share only for an object with at least this fraction of its extent visible: next to an arm in
    front of it, the flow of its visible pixels is the arm's, and with the share such a flow moved still cans and
    a spoon off with the arm (the propagation benchmark's still clips) ..."""
    motion_where_told: bool = True
    """... and, for an object at rest to start moving, more of the pixels where the two predict different colours
    (:meth:`_Track._told_apart`: the flow next to an arm passing over an object of the floor's colour is the arm's,
    and carried by it the object still matches the floor: without this it was "moved" off with the arm; an object
    already carried needs no more than the visible pixels). False = the visible pixels alone."""
    align_carried: bool = True
    """A carried object's motion: the flow's transform refined by ECC (:func:`_aligned`, on the blurred lightness),
    kept when it carries more of the visible pixels onto their colours (for an object at rest, after the flow's
    transform has decided that it starts moving). The flow, at ``flow_scale``, underestimates a
    small object's shift by a fraction of a pixel, and the error adds up from frame to frame until the extent has
    left the object (carried objects of the propagation benchmark)."""
    check_motion_below: float = 1.0
    """Motion is tested only when fewer than this fraction of the visible pixels kept their colour from the previous
    frame (1: whenever one did not). A plain-coloured object carried a few pixels a frame keeps most of its pixels'
    colours from frame to frame (its inside is one colour; only its edges change): at 0.9 a blue can moved 3 px a
    frame (91-99 % kept) was never tested and was left behind, while its colours slid out of its extent."""
    flow_scale: float = 0.5
    """Image scale at which optical flow is computed (1 = full resolution)."""
    min_visible_for_motion: float = 0.15
    """Motion is not tested when less than this fraction of the extent is visible (too little of the object to
    tell its motion from the occluder's)."""
    back_at_rest: float = 0.8
    """A moved object whose prompted extent is seen again with its prompted colours over this fraction is back at
    rest (the 'motion' was an occluder's)."""
    shade_ratio: float = 0.4
    """A pixel of an object at rest whose colour is its reference's times one factor per channel between this and
    its inverse is the object under a shadow that came or went (the arm's cast shadow on it in the prompt frame,
    gone later), not an occluder: it stays visible. 0 = off."""
    shade_spread: float = 1.25
    """... the three channels' factors within this ratio of each other (a shadow scales them alike; an occluder
    has its own colour) ..."""
    shade_noise: float = 2.0
    """... each channel's factor known to this many levels over the channel's value (in the blurred 8-bit frames:
    quantisation and what noise the blur leaves; a channel a few levels from black, a yellow cube's blue, does not
    veto the others) ..."""
    shade_clear_px: int = 3
    """... and the pixel at least this far from the pixels of the object that match neither (an occluder's edge,
    mixed with the object by the blur, reads as a shade of it)."""


def _gains(frames: np.ndarray, ref: int) -> np.ndarray:
    """``(n, 3)`` per-channel gains that match each frame's exposure to frame ``ref`` (median ratio, robust to motion)."""
    small = frames[:, ::4, ::4].astype(np.float32) + 1.0
    ratio = small[ref][None] / small
    return np.median(ratio.reshape(len(frames), -1, 3), axis=1)


class _Frames:
    """Exposure-matched, blurred Lab images and grey images, computed on demand and cached."""

    def __init__(self, frames: np.ndarray, ref: int, flow_scale: float):
        self.frames = frames
        self.gains = _gains(frames, ref)
        self.flow_scale = flow_scale
        self._lab: dict[int, np.ndarray] = {}
        self._rgb: dict[int, np.ndarray] = {}
        self._gray: dict[int, np.ndarray] = {}
        self._flow: dict[tuple[int, int], np.ndarray] = {}

    def matched(self, i: int, box: tuple[slice, slice] = (slice(None), slice(None))) -> np.ndarray:
        """Frame ``i`` (its ``box`` only, when given) at the prompt frame's exposure, ``uint8``."""
        return np.clip(self.frames[i][box].astype(np.float32) * self.gains[i], 0, 255).astype(np.uint8)

    def lab(self, i: int) -> np.ndarray:
        import cv2

        if i not in self._lab:
            self._lab[i] = lab_image(cv2.GaussianBlur(self.matched(i), (5, 5), 0), 0.5)
        return self._lab[i]

    def rgb(self, i: int, box: tuple[slice, slice] | None = None) -> np.ndarray:
        """``(h, w, 3) uint8`` the exposure-matched frame, blurred as :meth:`lab`; only its ``box`` when given
        (computed there from the frame's pixels 2 px around it: the same values, at the cost of the box)."""
        import cv2

        if box is not None:
            h, w = self.frames.shape[1:3]
            y0, x0 = max(0, box[0].start - 2), max(0, box[1].start - 2)
            y1, x1 = min(h, box[0].stop + 2), min(w, box[1].stop + 2)
            blurred = cv2.GaussianBlur(self.matched(i, (slice(y0, y1), slice(x0, x1))), (5, 5), 0)
            return blurred[box[0].start - y0:box[0].stop - y0, box[1].start - x0:box[1].stop - x0]
        if i not in self._rgb:
            self._rgb[i] = cv2.GaussianBlur(self.matched(i), (5, 5), 0)
        return self._rgb[i]

    def gray(self, i: int) -> np.ndarray:
        import cv2

        if i not in self._gray:
            g = cv2.cvtColor(self.matched(i), cv2.COLOR_RGB2GRAY)
            if self.flow_scale != 1.0:
                g = cv2.resize(g, None, fx=self.flow_scale, fy=self.flow_scale, interpolation=cv2.INTER_AREA)
            self._gray[i] = g
        return self._gray[i]

    def flow(self, j: int, i: int) -> np.ndarray:
        """``(h, w, 2)`` flow at full resolution: pixel ``p`` of frame ``j`` is at ``p + flow[p]`` in frame ``i``."""
        import cv2

        if (j, i) not in self._flow:
            f = cv2.calcOpticalFlowFarneback(self.gray(j), self.gray(i), None, 0.5, 5, 21, 3, 7, 1.5, 0)
            if self.flow_scale != 1.0:
                h, w = self.frames.shape[1:3]
                f = cv2.resize(f, (w, h), interpolation=cv2.INTER_LINEAR) / self.flow_scale
            self._flow[(j, i)] = f
        return self._flow[(j, i)]


def _color_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return channel_norm(a - b)


def shaded(rgb: np.ndarray, reference: np.ndarray, ratio: float, spread: float, noise: float = 0.0) -> np.ndarray:
    """``(h, w) bool``: where ``rgb`` is ``reference`` (both ``(h, w, 3) uint8``) lit differently: each channel
    scaled by a factor in ``[ratio, 1 / ratio]``, the three factors within ``spread`` of each other. Each channel's
    factor is known to ``noise`` levels over its value (in log terms ``noise / level``): a channel a few levels
    from black (a yellow cube's blue) says next to nothing about the factor and does not veto the others."""
    a = rgb.astype(np.float32) + 1.0
    b = reference.astype(np.float32) + 1.0
    lf = np.log(a / b)
    tol = noise / np.minimum(a, b)
    in_range = (np.abs(lf) - tol).max(-1) <= -np.log(ratio)
    return in_range & ((lf - tol).max(-1) <= (lf + tol).min(-1) + np.log(spread))


def _clean(m: np.ndarray, within: np.ndarray, keep_thin: bool = False) -> np.ndarray:
    """``m`` opened (specks out) and closed (pinholes in), inside ``within``; ``keep_thin``: the opening spares the
    parts of ``within`` as thin as its disk (a spoon's 1-2 px handle is the object, not a speck)."""
    import cv2

    m8 = m.astype(np.uint8)
    opened = cv2.morphologyEx(m8, cv2.MORPH_OPEN, disk(1))
    if keep_thin:
        thin = cv2.morphologyEx(within.astype(np.uint8), cv2.MORPH_OPEN, disk(1)) == 0
        opened[thin & m] = 1
    m8 = cv2.morphologyEx(opened, cv2.MORPH_CLOSE, disk(2))
    return (m8 > 0) & within


def fit_motion(points: np.ndarray, flow_at_points: np.ndarray, seed: int = 0) -> tuple[np.ndarray | None, float]:
    """Similarity transform ``(2, 3)`` fitted (RANSAC) to ``points`` ``(n, 2)`` moved by their flow ``(n, 2)``.

    Returns (transform or None, inlier fraction).
    """
    import cv2

    if len(points) < 6:
        return None, 0.0
    cv2.setRNGSeed(seed)
    A, inl = cv2.estimateAffinePartial2D(points.astype(np.float32), (points + flow_at_points).astype(np.float32),
                                         method=cv2.RANSAC, ransacReprojThreshold=2.0, maxIters=500, confidence=0.99)
    if A is None:
        return None, 0.0
    return A, float(inl.mean())


def _warp(img: np.ndarray, A: np.ndarray, nearest: bool) -> np.ndarray:
    import cv2

    h, w = img.shape[:2]
    interp = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
    src = img.astype(np.uint8) if img.dtype == bool else img
    out = cv2.warpAffine(src, A.astype(np.float64), (w, h), flags=interp, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return out.astype(bool) if img.dtype == bool else out


def _aligned(gj: np.ndarray, gi: np.ndarray, vis: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The transform ``A`` ``(2, 3)`` (frame ``j`` to frame ``i``) refined to a rotation and shift that align the
    two frames' ``(h, w)`` float images ``gj``, ``gi`` best over ``vis`` (``(h, w) bool`` in frame ``j``): OpenCV's
    ECC in the box of ``vis`` grown by ``A``'s largest displacement; ``A`` itself where ECC does not converge."""
    import cv2

    box = mask_box(vis, int(np.ceil(_max_displacement(A, vis))) + 4)
    if box is None:
        return A
    o = np.array([box[1].start, box[0].start], np.float64)
    W = A.astype(np.float64).copy()
    W[:, 2] = A[:, :2] @ o + A[:, 2] - o
    try:
        _, W = cv2.findTransformECC(np.ascontiguousarray(gj[box], np.float32), np.ascontiguousarray(gi[box], np.float32),
                                    W.astype(np.float32), cv2.MOTION_EUCLIDEAN,
                                    (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 50, 1e-4),
                                    vis[box].astype(np.uint8), 1)
    except cv2.error:
        return A
    out = W.astype(np.float64)
    out[:, 2] = W[:, 2] - W[:, :2] @ o + o
    return out


def _max_displacement(A: np.ndarray, mask: np.ndarray) -> float:
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return 0.0
    corners = np.array([[xs.min(), ys.min()], [xs.max(), ys.min()], [xs.min(), ys.max()], [xs.max(), ys.max()]], float)
    moved = corners @ A[:, :2].T + A[:, 2]
    return float(np.linalg.norm(moved - corners, axis=1).max())


class _Track:
    """One object's extent, reference appearance and visible mask while it is carried from frame to frame."""

    def __init__(self, mask: np.ndarray, lab: np.ndarray, rgb: np.ndarray, cfg: PropagateConfig):
        self.cfg = cfg
        self.extent = np.asarray(mask, bool).copy()
        self.reference = lab.copy()
        self.reference_rgb = rgb.copy()
        self.visible = self.extent.copy()
        self.same_colour = self.extent.copy()  # the visible pixels that kept their colour (no shade allowed)
        self.moved = False
        self.prompted = (self.extent.copy(), lab.copy(), rgb.copy())

    def step(self, fr: _Frames, j: int, i: int, seed: int) -> dict:
        cfg = self.cfg
        lab_i, lab_j = fr.lab(i), fr.lab(j)
        if self.moved and self._back_at_rest(lab_i):
            self.moved = False
        # the motion test reads the pixels that kept their colour: a shade's pixels would lend it the shadow's motion
        vis = self.same_colour if self.same_colour.any() else self.extent
        kept = _color_dist(lab_i[vis], lab_j[vis]) < cfg.color_tolerance
        info: dict = {"kept_colour": round(float(kept.mean()), 3) if len(kept) else 0.0}
        enough = vis.sum() >= cfg.min_visible_for_motion * max(1, self.extent.sum())
        if enough and len(kept) and kept.mean() < cfg.check_motion_below:
            motion = self._motion(fr, j, i, vis, kept.mean(), seed)
            info.update(motion.pop("info"))
            if motion["A"] is not None:
                self._apply(motion["A"], lab_i, fr.rgb(i))
                info["transform"] = [[round(float(v), 4) for v in row] for row in motion["A"]]
                return self._finish(info, "moved")
        match = _color_dist(lab_i, self.reference) < cfg.color_tolerance
        self.same_colour = self.visible = _clean(match & self.extent, self.extent)
        if not self.moved:
            self.visible = self._visible_at_rest(fr, i, match)
        return self._finish(info, "moved" if self.moved else None)

    def _visible_at_rest(self, fr: _Frames, i: int, match: np.ndarray) -> np.ndarray:
        """The visible mask of an object at rest: the extent's pixels that kept their colour (``match``), those that
        are the reference under another light (:func:`shaded`) away from an occluder's edge (which the blur mixes
        with the object into a shade of it), cleaned sparing the object's own thin parts (:func:`_clean`'s
        ``keep_thin``). Worked out in the extent's box, with room for the clearance and :func:`_clean`'s reach. The
        motion test reads neither addition (``same_colour``)."""
        cfg = self.cfg
        box = mask_box(self.extent, cfg.shade_clear_px + 8)
        if box is None:
            return self.same_colour
        ext, m = self.extent[box], match[box]
        if cfg.shade_ratio > 0:
            lit = shaded(fr.rgb(i, box), self.reference_rgb[box], cfg.shade_ratio, cfg.shade_spread, cfg.shade_noise)
            m = m | (lit & ~dilate(ext & ~m & ~lit, cfg.shade_clear_px))
        out = np.zeros_like(self.extent)
        out[box] = _clean(m & ext, ext, keep_thin=True)
        return out

    def _back_at_rest(self, lab_i: np.ndarray) -> bool:
        extent0, reference0, rgb0 = self.prompted
        seen = (_color_dist(lab_i, reference0) < self.cfg.color_tolerance) & extent0
        if seen.sum() < self.cfg.back_at_rest * extent0.sum():
            return False
        self.extent, self.reference, self.reference_rgb = extent0.copy(), reference0.copy(), rgb0.copy()
        return True

    def _motion(self, fr: _Frames, j: int, i: int, vis: np.ndarray, static_support: float, seed: int) -> dict:
        cfg = self.cfg
        flow = fr.flow(j, i)
        ys, xs = np.nonzero(vis)
        step = max(1, len(xs) // 4000)
        pts = np.stack([xs[::step], ys[::step]], 1).astype(np.float32)
        A, inliers = fit_motion(pts, flow[ys[::step], xs[::step]], seed)
        out = {"A": None, "info": {"motion_inliers": round(inliers, 3)}}
        if A is None or _max_displacement(A, self.extent) < cfg.min_motion_px:
            return out
        lab_i, lab_j = fr.lab(i), fr.lab(j)
        carried = self._carried(lab_i, lab_j, vis, A)
        if cfg.align_carried and self.moved:
            A, carried = self._better_aligned(lab_i, lab_j, vis, A, carried)
        support, moved_lab, moved_vis = carried
        out["info"]["moved_support"] = round(support, 3)
        out["info"]["static_support"] = round(float(static_support), 3)
        if support - static_support <= self._margin(static_support):
            return out
        if cfg.motion_where_told and not self.moved:
            told = self._told_apart(lab_i, lab_j, moved_lab, moved_vis)
            out["info"]["told_apart"] = told and [told[0], round(told[1], 3), round(told[2], 3)]
            if told is None or told[1] <= told[2]:
                return out
        if cfg.align_carried and not self.moved:  # the start decided on the flow's transform, applied aligned
            A = self._better_aligned(lab_i, lab_j, vis, A, carried)[0]
        out["A"] = A
        return out

    def _margin(self, static_support: float) -> float:
        """How much more of the visible pixels a motion must explain than the static hypothesis (``motion_margin``,
        ``motion_margin_share`` for an object seen whole)."""
        cfg = self.cfg
        if cfg.motion_margin_share <= 0 or self.visible.sum() < cfg.motion_share_visible * self.extent.sum():
            return cfg.motion_margin
        return min(cfg.motion_margin, cfg.motion_margin_share * (1.0 - static_support))

    def _better_aligned(self, lab_i: np.ndarray, lab_j: np.ndarray, vis: np.ndarray, A: np.ndarray, carried: tuple):
        """``A`` aligned by ECC (:func:`_aligned`) where that carries more of the visible pixels onto their colours
        (a plain-coloured object gives ECC nothing to hold on to inside it), else ``A``; with what :meth:`_carried`
        gives for the transform returned (``carried``: that for ``A``)."""
        B = _aligned(lab_j[..., 0], lab_i[..., 0], vis, A)
        aligned = self._carried(lab_i, lab_j, vis, B)
        return (B, aligned) if aligned[0] > carried[0] else (A, carried)

    def _carried(self, lab_i: np.ndarray, lab_j: np.ndarray, vis: np.ndarray, A: np.ndarray):
        """Frame ``j``'s colours and visible pixels carried by ``A`` into frame ``i``, and the share of those pixels
        whose colour frame ``i`` shows there: (support, carried Lab ``(h, w, 3)``, carried visible ``(h, w) bool``)."""
        moved_lab = _warp(lab_j, A, nearest=False)
        moved_vis = _warp(vis, A, nearest=True)
        support = float((_color_dist(lab_i[moved_vis], moved_lab[moved_vis]) < self.cfg.color_tolerance).mean()) \
            if moved_vis.any() else 0.0
        return support, moved_lab, moved_vis

    def _told_apart(self, lab_i: np.ndarray, lab_j: np.ndarray, moved_lab: np.ndarray,
                    moved_vis: np.ndarray) -> tuple[int, float, float] | None:
        """Where the object carried (``moved_lab`` over ``moved_vis``) shows other colours than frame ``j`` had
        there (by ``color_tolerance``): (that many pixels, the share frame ``i`` matches carried, the share it
        matches unchanged); None where there is no such pixel (the motion says nothing the colours can check)."""
        tol = self.cfg.color_tolerance
        carried, before, now = moved_lab[moved_vis], lab_j[moved_vis], lab_i[moved_vis]
        told = _color_dist(carried, before) >= tol
        if not told.any():
            return None
        now = now[told]
        return (int(told.sum()), float((_color_dist(now, carried[told]) < tol).mean()),
                float((_color_dist(now, before[told]) < tol).mean()))

    def _apply(self, A: np.ndarray, lab_i: np.ndarray, rgb_i: np.ndarray) -> None:
        cfg = self.cfg
        self.extent = _warp(self.extent, A, nearest=True)
        self.reference = _warp(self.reference, A, nearest=False)
        self.reference_rgb = _warp(self.reference_rgb, A, nearest=False)
        match = _color_dist(lab_i, self.reference) < cfg.color_tolerance
        self.visible = _clean(match & self.extent, self.extent)
        self.same_colour = self.visible
        # what is seen now is the reference for the next frames (the object may turn as it is carried)
        self.reference[self.visible] = lab_i[self.visible]
        self.reference_rgb[self.visible] = rgb_i[self.visible]
        self.moved = True

    def _finish(self, info: dict, state: str | None) -> dict:
        area = int(self.extent.sum())
        frac = float(self.visible.sum()) / area if area else 0.0
        if area == 0 or (state == "moved" and frac == 0.0):
            state = "lost"
        elif state is None:
            state = "rest" if frac >= self.cfg.min_visible else "occluded"
        info.update({"state": state, "visible_fraction": round(frac, 3), "extent_px": area})
        return info


@dataclass
class Propagation:
    """One object's masks over a clip."""

    masks: list[np.ndarray]
    """Visible mask per frame, ``(h, w) bool``: the object's pixels that are seen (occluders excluded)."""
    extents: list[np.ndarray]
    """Extent per frame, ``(h, w) bool``: where the whole object is, occluded parts included."""
    info: list[dict]
    """Per frame: ``state`` (:data:`STATES`), ``visible_fraction``, ``extent_px`` and the motion test's numbers."""

    def states(self) -> list[str]:
        return [inf["state"] for inf in self.info]


def propagate(frames: np.ndarray, mask: np.ndarray, start: int = 0, plate: np.ndarray | None = None,
              config: PropagateConfig | None = None) -> tuple[list[np.ndarray], list[dict]]:
    """Visible masks ``(h, w) bool`` of one object in every frame, from ``mask`` on frame ``start``.

    ``frames``: ``(n, h, w, 3) uint8``. ``plate`` is accepted for interface compatibility and not needed (a fixed
    camera's own frames are the reference). Returns (masks, info) with ``info[i]["state"]`` in :data:`STATES`
    and ``info[i]["visible_fraction"]`` (visible pixels / extent).
    """
    p = propagate_many(frames, {"_": mask}, start, config)["_"]
    return p.masks, p.info


def propagate_many(frames: np.ndarray, masks: dict[str, np.ndarray], start: int | dict[str, int] = 0,
                   config: PropagateConfig | None = None) -> dict[str, Propagation]:
    """:func:`propagate` for several objects, sharing exposure gains, colour images and flow between them.

    ``start``: one prompt frame for all, or ``{entity: frame}``.
    """
    cfg = config or PropagateConfig()
    frames = np.asarray(frames)
    n = len(frames)
    starts = start if isinstance(start, dict) else {e: int(start) for e in masks}
    ref = next(iter(starts.values())) if starts else 0
    fr = _Frames(frames, ref, cfg.flow_scale)
    out = {}
    for seed, (ent, m0) in enumerate(masks.items()):
        s = starts[ent]
        result: list[np.ndarray | None] = [None] * n
        extents: list[np.ndarray | None] = [None] * n
        info: list[dict] = [{} for _ in range(n)]
        m0 = np.asarray(m0, bool)
        result[s], extents[s] = m0.copy(), m0.copy()
        info[s] = {"state": "prompt", "visible_fraction": 1.0, "extent_px": int(m0.sum())}
        for order in (range(s + 1, n), range(s - 1, -1, -1)):
            track = _Track(m0, fr.lab(s), fr.rgb(s), cfg)
            for i in order:
                j = i - 1 if i > s else i + 1
                info[i] = track.step(fr, j, i, seed)
                result[i], extents[i] = track.visible.copy(), track.extent.copy()
        out[ent] = Propagation(result, extents, info)
        states = out[ent].states()
        log.info("propagate %s: %s", ent, {k: states.count(k) for k in STATES if k in states})
    return out
