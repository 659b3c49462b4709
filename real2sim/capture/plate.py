"""Background plate: the scene without the robot (or anything else that moves), from many frames.

Algorithm (``make_plate``):

1. **Exposure**: webcams change gain while a dark robot moves (up to 13 % in ``bridge_real_1.mp4``).
   Every frame gets a per-channel gain that maps its background to the reference frame's
   (robust median of ratios, refined on pixels that agree).
2. **Moving foreground** (when no masks are given): at reduced resolution, a per-pixel *mode*
   background (the largest set of frames whose colours agree within ``mode_tolerance``; the
   static background agrees with itself, a moving robot's colours spread) is more robust than
   the median when the robot covers a pixel in more than half of the frames. Each frame's
   deviation from it, thresholded, opened, closed, hole-filled, small blobs dropped, upsampled
   and dilated (``dilate_px``, for motion blur and shadows) is the frame's foreground.
3. **Masked temporal median**: per pixel, the median (by luminance, colours from the same
   frame) over the frames where the pixel is background, then averaged with those background
   samples within ``average_tolerance`` of it (a trimmed mean: less noise, same robustness).
4. Pixels that no frame saw are **inpainted** (Telea by default, ``"patchmatch"``, or a callable).

Confidence codes (``plate_confidence.png``, uint8):

====  ===================================================================
255   seen as background in >= ``many_frames`` frames
128   seen in 1 .. ``many_frames`` - 1 frames (less noise averaging; a robot part that sat still may leak)
0     no frame saw it: inpainted
====  ===================================================================
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Callable, Union

import numpy as np

from real2sim.capture.init import load_frames
from real2sim.capture.inpaint import PatchMatchConfig, inpaint
from real2sim.core.bundle import hash_jsonable
from real2sim.core.errors import CaptureError
from real2sim.core.imaging import read_mask, to_uint8, write_gray, write_rgb
from real2sim.core.pictures import overlay, tiles
from real2sim.core.stages import files_hash, run_stage

log = logging.getLogger(__name__)

CONF_MANY, CONF_FEW, CONF_INPAINTED = 255, 128, 0


@dataclass
class PlateConfig:
    """How the background plate is made."""

    reference_frame: int = 0
    """Frame whose exposure (and, where seen, content) the plate matches; the sim is overlaid on it."""
    exposure_compensation: bool = True
    """Estimate a per-frame per-channel gain to the reference frame before combining frames."""
    max_frames: int = 64
    """Use at most this many frames (evenly spaced, always including the reference)."""
    detect_scale: float = 0.25
    """Resolution factor at which the moving foreground is detected (speed; masks are upsampled)."""
    mode_tolerance: float = 0.07
    """Colour distance (max over channels, [0, 1] units) within which frames count as agreeing."""
    fg_threshold: float = 0.09
    """A pixel deviating from the mode background by more than this (max channel) is foreground."""
    open_px: int = 1
    """Opening radius (detection resolution) that removes speckle noise from the foreground."""
    close_px: int = 3
    """Closing radius (detection resolution) that joins broken foreground parts."""
    fill_holes: bool = True
    """Fill enclosed holes of foreground blobs (a robot part matching the background colour)."""
    min_blob_frac: float = 0.0004
    """Foreground blobs smaller than this fraction of the image are dropped (noise, flicker)."""
    ghost_ratio: float = 1.5
    """A foreground blob whose outline is this many times stronger an edge in the background estimate than in
    the frame is a ghost (an object that sat still most of the time); 0 disables ghost suppression."""
    dilate_px: int = 6
    """Foreground is grown by this many full-resolution pixels (motion blur, shadows, edges)."""
    average_tolerance: float = 0.05
    """Background samples within this of the per-pixel median are averaged into the plate."""
    detect_with_masks: bool = False
    """With masks given, also detect the moving foreground and exclude the union (the bundle stage sets this)."""
    many_frames: int = 5
    """Pixels seen in at least this many frames get confidence 255, fewer 128."""
    inpaint: str = "telea"
    """'telea', 'ns' or 'patchmatch' for pixels no frame saw (``make_plate(inpainter=fn)`` overrides)."""
    inpaint_radius: int = 5
    """Neighbourhood radius of the OpenCV inpainting methods."""
    seed: int = 0
    """Seed of the randomised parts (PatchMatch)."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PlateResult:
    """Everything ``make_plate`` computed; ``plate``/``confidence`` are also returned directly."""

    plate: np.ndarray
    confidence: np.ndarray
    foreground: np.ndarray = field(repr=False)
    """``(n, h, w) bool`` foreground per frame used (detected or given)."""
    seen_count: np.ndarray = field(repr=False)
    """``(h, w) int`` number of frames in which each pixel was background."""
    gains: np.ndarray = field(repr=False)
    """``(n, 3)`` exposure gains applied."""
    report: dict = field(default_factory=dict)


def _luma(x: np.ndarray) -> np.ndarray:
    return x[..., 0] * 0.299 + x[..., 1] * 0.587 + x[..., 2] * 0.114


def estimate_gains(frames: np.ndarray, ref: int, fg: np.ndarray | None = None) -> np.ndarray:
    """``(n, 3)`` per-channel gains mapping each uint8 frame onto frame ``ref`` (robust to a moving robot)."""
    n = frames.shape[0]
    step = max(1, int(np.sqrt(frames.shape[1] * frames.shape[2] / 20000)))
    sub = frames[:, ::step, ::step].astype(np.float32) / 255.0
    R = sub[ref]
    gains = np.ones((n, 3), np.float32)
    for t in range(n):
        if t == ref:
            continue
        F = sub[t]
        ok = (F > 0.06).all(-1) & (F < 0.94).all(-1) & (R > 0.06).all(-1) & (R < 0.94).all(-1)
        if fg is not None:
            ok &= ~fg[t, ::step, ::step] & ~fg[ref, ::step, ::step]
        if ok.sum() < 100:
            continue
        g = np.median(R[ok] / F[ok], axis=0)
        for _ in range(2):  # refine on pixels that agree after the gain (background in both)
            agree = ok & (np.abs(F * g - R).max(-1) < 0.05)
            if agree.sum() < 100:
                break
            g = np.median(R[agree] / F[agree], axis=0)
        gains[t] = g
    return gains


def apply_gains(frames: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """uint8 frames times per-frame per-channel gains, saturated to uint8."""
    import cv2

    out = np.empty_like(frames)
    for t, g in enumerate(gains):
        out[t] = frames[t] if np.allclose(g, 1.0) else cv2.multiply(frames[t], (float(g[0]), float(g[1]), float(g[2]), 0.0))
    return out


def _chanmax(d: np.ndarray) -> np.ndarray:
    """Max over the leading channel axis of a planar ``(3, ...)`` array."""
    return np.maximum(np.maximum(d[0], d[1]), d[2])


def mode_background(planar: np.ndarray, tolerance: float, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel mode of planar frames ``(3, n, h, w)`` float32: the mean of the largest set of frames agreeing
    within ``tolerance`` (max channel distance). ``allowed`` ``(n, h, w) bool`` restricts the frames per pixel.
    Returns (background ``(3, h, w)``, size of the agreeing set ``(h, w)``)."""
    n = planar.shape[1]
    best = np.full(planar.shape[2:], -1, np.int32)
    best_i = np.zeros(planar.shape[2:], np.int64)
    for i in range(n):
        agree = _chanmax(np.abs(planar - planar[:, i:i + 1])) < tolerance
        if allowed is not None:
            agree &= allowed
        cnt = agree.sum(0, dtype=np.int32)
        if allowed is not None:
            cnt = np.where(allowed[i], cnt, -1)
        better = cnt > best
        best = np.where(better, cnt, best)
        best_i = np.where(better, i, best_i)
    centre = np.take_along_axis(planar, np.broadcast_to(best_i[None, None], (3, 1) + best_i.shape), 1)[:, 0]
    agree = _chanmax(np.abs(planar - centre[:, None])) < tolerance
    if allowed is not None:
        agree &= allowed
    bg = (planar * agree[None]).sum(1) / np.maximum(agree.sum(0), 1)[None]
    return bg.astype(np.float32), best


def _disk(r: int):
    import cv2

    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def _fill_holes(m: np.ndarray) -> np.ndarray:
    import cv2

    h, w = m.shape
    pad = np.zeros((h + 2, w + 2), np.uint8)
    pad[1:-1, 1:-1] = m
    flood = pad.copy()
    ff = np.zeros((h + 4, w + 4), np.uint8)
    cv2.floodFill(flood, ff, (0, 0), 1)
    return (m > 0) | (flood[1:-1, 1:-1] == 0)


def clean_mask(m: np.ndarray, open_px: int, close_px: int, fill_holes: bool, min_area: int) -> np.ndarray:
    """Morphological clean-up of a binary mask: open, close, fill holes, drop small components."""
    import cv2

    m8 = np.asarray(m, np.uint8)
    if open_px > 0:
        m8 = cv2.morphologyEx(m8, cv2.MORPH_OPEN, _disk(open_px))
    if close_px > 0:
        m8 = cv2.morphologyEx(m8, cv2.MORPH_CLOSE, _disk(close_px))
    if fill_holes:
        m8 = _fill_holes(m8).astype(np.uint8)
    if min_area > 0:
        n, lab, stats, _ = cv2.connectedComponentsWithStats(m8, connectivity=8)
        keep = np.zeros(n, bool)
        keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= min_area
        m8 = keep[lab].astype(np.uint8)
    return m8 > 0


def _grad(img_hw3: np.ndarray) -> np.ndarray:
    import cv2

    g = cv2.cvtColor(np.ascontiguousarray(img_hw3), cv2.COLOR_RGB2GRAY)
    return np.hypot(cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3))


def find_ghosts(small: np.ndarray, bg: np.ndarray, masks: np.ndarray, ratio: float) -> np.ndarray:
    """``(h, w) bool`` pixels where the background estimate shows an object that other frames do not.

    A foreground blob whose outline is a strong edge in the background estimate but not in the frame is a
    *ghost*: the object sat there in most frames (so the mode picked it) and this frame shows what is behind it.
    """
    import cv2

    gb = _grad(bg)
    ghost = np.zeros(bg.shape[:2], bool)
    k = _disk(1)
    for t in range(small.shape[0]):
        n, lab = cv2.connectedComponents(masks[t].astype(np.uint8), connectivity=8)
        if n <= 1:
            continue
        gf = _grad(small[t])
        for c in range(1, n):
            comp = (lab == c).astype(np.uint8)
            ring = (cv2.dilate(comp, k) - cv2.erode(comp, k)) > 0
            if ring.sum() < 8:
                continue
            eb, ef = float(gb[ring].mean()), float(gf[ring].mean())
            if eb > ratio * max(ef, 1e-6):
                ghost |= comp > 0
    return ghost


def detect_foreground(frames: np.ndarray, cfg: PlateConfig) -> tuple[np.ndarray, dict]:
    """``(n, h, w) bool`` moving foreground of uint8 frames (exposure already compensated), and a small report."""
    import cv2

    n, h, w, _ = frames.shape
    s = float(cfg.detect_scale)
    sw, sh = max(8, int(round(w * s))), max(8, int(round(h * s)))
    small = np.stack([cv2.GaussianBlur(cv2.resize(f, (sw, sh), interpolation=cv2.INTER_AREA), (3, 3), 0) for f in frames])
    planar = np.ascontiguousarray(small.transpose(3, 0, 1, 2), dtype=np.float32) / 255.0
    bg, _ = mode_background(planar, cfg.mode_tolerance)
    min_area = int(cfg.min_blob_frac * sw * sh)

    def masks_for(bgp):
        dev = _chanmax(np.abs(planar - bgp[:, None]))
        raw = dev > cfg.fg_threshold
        return raw, np.stack([clean_mask(r, cfg.open_px, cfg.close_px, cfg.fill_holes, min_area) for r in raw])

    raw, m = masks_for(bg)
    ghost_frac = 0.0
    if cfg.ghost_ratio > 0:
        bg_u8 = np.clip(bg.transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)
        ghost = find_ghosts(small, bg_u8, m, cfg.ghost_ratio)
        ghost_frac = float(ghost.mean())
        if ghost.any():
            # behind a ghost the background is what the *deviating* frames show: mode over those frames only
            bg2, cnt2 = mode_background(planar, cfg.mode_tolerance, allowed=raw)
            use = ghost & (cnt2 > 0)
            bg = np.where(use[None], bg2, bg)
            raw, m = masks_for(bg)
    out = np.zeros((n, h, w), bool)
    grow = _disk(cfg.dilate_px) if cfg.dilate_px > 0 else None
    for t in range(n):
        big = cv2.resize(m[t].astype(np.uint8), (w, h), interpolation=cv2.INTER_LINEAR) > 0
        if grow is not None:
            big = cv2.dilate(big.astype(np.uint8), grow) > 0
        out[t] = big
    return out, {"ghost_fraction": round(ghost_frac, 6)}


def masked_median(frames: np.ndarray, background: np.ndarray, average_tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel median over the uint8 frames where ``background`` is True (ordered by luminance, colour taken
    from that frame), then the mean of the background samples within ``average_tolerance`` ([0, 1] units) of it.
    Returns (plate ``(h, w, 3) uint8``, background count ``(h, w)``)."""
    import cv2

    n, h, w, _ = frames.shape
    if n > 64:
        raise ValueError("masked_median: at most 64 frames (PlateConfig.max_frames)")
    count = background.sum(0, dtype=np.int32)
    key = np.empty((n, h, w), np.int16)
    for t in range(n):  # sort key: luminance * 64 + frame index; non-background sorts last
        y = cv2.cvtColor(frames[t], cv2.COLOR_RGB2GRAY).astype(np.int16)
        key[t] = np.where(background[t], y * 64 + t, 32767)
    key.sort(axis=0, kind="stable")
    k = np.maximum(count, 1)
    mid = np.take_along_axis(key, ((k - 1) // 2)[None].astype(np.int64), 0)[0]
    idx = np.where(count > 0, mid & 63, 0).astype(np.int64)
    med = np.zeros((h, w, 3), np.uint8)
    for t in np.unique(idx):
        sel = idx == t
        med[sel] = frames[t][sel]
    if average_tolerance <= 0:
        return med, count
    tol = int(round(average_tolerance * 255))
    acc = np.zeros((h, w, 3), np.float32)
    cnt = np.zeros((h, w), np.float32)
    for t in range(n):
        d = cv2.absdiff(frames[t], med)
        near = (np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2]) < tol) & background[t]
        nf = near.astype(np.float32)
        acc += frames[t] * nf[..., None]
        cnt += nf
    mean = acc / np.maximum(cnt, 1)[..., None]
    out = np.where((cnt > 0)[..., None], np.clip(mean + 0.5, 0, 255), med).astype(np.uint8)
    return out, count


def _select(n: int, ref: int, max_frames: int) -> np.ndarray:
    if n <= max_frames:
        return np.arange(n)
    idx = set(np.linspace(0, n - 1, max_frames - 1).round().astype(int).tolist()) | {ref}
    return np.array(sorted(idx))


def _gray_small(f, scale: float):
    import cv2

    g = cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2GRAY).astype(np.float32)
    return cv2.resize(g, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)


def camera_motion_px(frames: np.ndarray, ref: int = 0, scale: float = 0.5) -> np.ndarray:
    """``(n,)`` image shift (px) of each frame against frame ``ref`` by phase correlation."""
    import cv2

    g0 = _gray_small(frames[ref], scale)
    win = cv2.createHanningWindow(g0.shape[::-1], cv2.CV_32F)
    out = []
    for f in frames:
        (dx, dy), _ = cv2.phaseCorrelate(g0, _gray_small(f, scale), win)
        out.append(float(np.hypot(dx, dy)) / scale)
    return np.array(out)


def static_fraction(frames: np.ndarray, ref: int = 0, scale: float = 0.5, tol: float = 15.0) -> np.ndarray:
    """``(n,)`` fraction of pixels that keep their (exposure-normalised) grey level from frame ``ref``."""
    g0 = _gray_small(frames[ref], scale)
    out = []
    for f in frames:
        g = _gray_small(f, scale)
        g *= np.median(g0) / max(float(np.median(g)), 1e-6)
        out.append(float((np.abs(g - g0) < tol).mean()))
    return np.array(out)


def check_static_camera(frames: np.ndarray, ref: int = 0, max_shift_px: float = 3.0, min_static: float = 0.5) -> dict:
    """Refuse clips whose camera moved (a plate needs a fixed camera), with the evidence.

    Two signs together: most of the image changes (a moving robot changes only part of
    it), and the frames are shifted against the reference (phase correlation). Either
    alone is not enough: a large moving object can pull the correlation, and a textureless
    wall changes little under a pan (its plate is then fine anyway).
    """
    if len(frames) < 2:
        return {"camera_shift_px_median": 0.0, "camera_shift_px_max": 0.0, "static_fraction_median": 1.0}
    shift = camera_motion_px(frames, ref)
    static = static_fraction(frames, ref)
    rep = {"camera_shift_px_median": round(float(np.median(shift)), 3), "camera_shift_px_max": round(float(shift.max()), 3),
           "static_fraction_median": round(float(np.median(static)), 3)}
    if np.median(shift) > max_shift_px and np.median(static) < min_static:
        worst = int(shift.argmax())
        raise CaptureError(
            f"the background is not static: frames shift by {np.median(shift):.1f} px (median; frame {worst}: "
            f"{shift[worst]:.1f} px) against frame {ref} and only {np.median(static):.0%} of the pixels keep their "
            "value, so the camera moved. A background plate needs a fixed camera: use a clip from a fixed camera, "
            "or cut the clip to the part where it did not move (real2sim init --max-frames / --stride)")
    return rep


def make_plate(frames: np.ndarray, masks: np.ndarray | None = None, config: PlateConfig | None = None,
               inpainter: Union[str, Callable, None] = None, mask_names: list[str] | None = None
               ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Background plate from ``(n, h, w, 3) uint8`` frames of a fixed camera.

    ``masks``: optional ``(n, h, w) bool`` foreground (True = not background) per frame; when absent the moving
    foreground is detected. ``inpainter``: overrides ``config.inpaint`` (a method name or a callable
    ``fn(image uint8, hole bool) -> image uint8``). ``mask_names``: the masks' file names, for the warnings about
    masks that cover everything or nothing. Returns ``(plate uint8 (h,w,3), confidence uint8 (h,w), report)``.
    """
    res = make_plate_full(frames, masks, config, inpainter, mask_names)
    return res.plate, res.confidence, res.report


def make_plate_full(frames: np.ndarray, masks: np.ndarray | None = None, config: PlateConfig | None = None,
                    inpainter: Union[str, Callable, None] = None, mask_names: list[str] | None = None) -> PlateResult:
    """Like :func:`make_plate` but returns a :class:`PlateResult` with the foreground and counts."""
    import time

    cfg = config or PlateConfig()
    t0 = time.perf_counter()
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.shape[0] < 1:
        raise CaptureError(f"make_plate: frames must be (n, h, w, 3) uint8 with n >= 1, got shape {frames.shape}")
    n, h, w, _ = frames.shape
    if not 0 <= cfg.reference_frame < n:
        raise CaptureError(f"PlateConfig.reference_frame={cfg.reference_frame} but there are {n} frames; use 0..{n - 1}")
    sel = _select(n, cfg.reference_frame, cfg.max_frames)
    ref = int(np.nonzero(sel == cfg.reference_frame)[0][0])
    if frames.dtype != np.uint8:
        frames = to_uint8(frames)
    F = np.ascontiguousarray(frames[sel])
    motion = check_static_camera(F, ref)
    given = masks is not None
    det: dict = {}
    if given:
        masks = np.asarray(masks, bool)
        if masks.shape != (n, h, w):
            raise CaptureError(f"make_plate: masks have shape {masks.shape}, expected {(n, h, w)} (one per frame)")
        fg = masks[sel]
        if cfg.dilate_px > 0:
            import cv2

            k = _disk(max(1, cfg.dilate_px // 3))
            fg = np.stack([cv2.dilate(m.astype(np.uint8), k) > 0 for m in fg])
    warnings = []
    gains = np.ones((len(sel), 3), np.float32)
    if cfg.exposure_compensation and len(sel) > 1:
        gains = estimate_gains(F, ref, fg if given else None)
        F = apply_gains(F, gains)
    if not given or cfg.detect_with_masks:
        given_fg = fg if given else None
        if len(sel) > 1:
            fg, det = detect_foreground(F, cfg)
        else:
            fg, det = np.zeros((1, h, w), bool), {}
        if given_fg is not None:
            fg = fg | given_fg
    fg_frac = fg.reshape(len(sel), -1).mean(1)
    if given:
        def name(i):
            return mask_names[i] if mask_names and i < len(mask_names) else f"the mask of frame {i}"

        for i, f in zip(sel, fg_frac):
            if f > 0.98:
                warnings.append(f"{name(i)} covers {f:.0%} of the image: that frame contributes nothing "
                                "(white = foreground; is the mask inverted?)")
        empty = [name(i) for i in sel if not masks[i].any()]
        if len(empty) == len(sel):
            warnings.append("the masks are empty (all black): " + ("the plate comes from the detected motion only"
                                                                    if cfg.detect_with_masks else
                                                                    "the plate is a plain temporal median"))
        elif empty and len(empty) <= 3:
            warnings.append(f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty (all black)")
    bgm = ~fg
    plate, count = masked_median(F, bgm, cfg.average_tolerance)
    unseen = count == 0
    fallback = np.zeros((h, w), bool)
    if given and unseen.any():
        # where a given mask sat in some frames and not in others (a carried-away object's place) but the detector
        # found no stable background (shadows kept changing): the median of the frames free of the masks,
        # marked as seen in few frames
        free = ~(masks[sel])
        fallback = unseen & free.any(0) & masks[sel].any(0)
        if fallback.any():
            alt, alt_count = masked_median(F, free & fallback[None], cfg.average_tolerance)
            plate[fallback] = alt[fallback]
            count = np.where(fallback, np.minimum(alt_count, max(1, cfg.many_frames - 1)), count)
            unseen = count == 0
    method = inpainter if inpainter is not None else cfg.inpaint
    if unseen.all():
        raise CaptureError("make_plate: every pixel is foreground in every frame; the masks cover everything. "
                           "Check the masks (True/255 = foreground) or give frames where the background shows")
    if unseen.any():

        plate = inpaint(plate, unseen, method, radius=cfg.inpaint_radius, patchmatch=PatchMatchConfig(seed=cfg.seed))
    conf = np.where(count >= cfg.many_frames, CONF_MANY, np.where(count > 0, CONF_FEW, CONF_INPAINTED)).astype(np.uint8)
    for msg in warnings:
        log.warning("plate: %s", msg)
    report = {
        "frames_total": int(n),
        "frames_used": int(len(sel)),
        "reference_frame": int(cfg.reference_frame),
        "foreground": "given masks" if given else "detected (mode background + morphology)",
        "ghost_fraction": (det if not given else {}).get("ghost_fraction", 0.0),
        "coverage_many": round(float((conf == CONF_MANY).mean()), 6),
        "coverage_few": round(float((conf == CONF_FEW).mean()), 6),
        "inpainted_fraction": round(float(unseen.mean()), 6),
        "unstable_background_fraction": round(float(fallback.mean()), 6),
        "inpaint_method": method if isinstance(method, str) else getattr(method, "__name__", "callable"),
        "foreground_fraction_mean": round(float(fg_frac.mean()), 6),
        "foreground_fraction_max": round(float(fg_frac.max()), 6),
        "exposure_gain_range": [round(float(gains.min()), 4), round(float(gains.max()), 4)],
        "confidence_codes": {"255": f"seen in >= {cfg.many_frames} frames", "128": "seen in fewer frames", "0": "inpainted"},
        "warnings": warnings,
        **motion,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    full_fg = np.zeros((n, h, w), bool)
    full_fg[sel] = fg
    return PlateResult(plate, conf, full_fg, count, gains, report)


def plain_median(frames: np.ndarray) -> np.ndarray:
    """The simplest plate: per-pixel per-channel median of ``(n, h, w, 3) uint8`` frames (baseline)."""
    return np.median(np.asarray(frames), axis=0).round().astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# bundle stage
# ---------------------------------------------------------------------------------------------

def bundle_foreground_masks(bundle, n: int, shape: tuple[int, int]) -> tuple[np.ndarray | None, list[str]]:
    """Union of the entity masks recorded for each frame (``manifest.capture.masks``), or None if there are none."""

    cap = bundle.manifest.capture
    masks = cap.masks
    if not masks:
        return None, []
    out = np.zeros((n,) + tuple(shape), bool)
    used = []
    prompted = {}  # entity -> its mask on the prompted frame (its whole extent where it rests)
    for key, ents in masks.items():
        for ent, rel in ents.items():
            if cap.mask_state(key, ent) == "prompt" and ent not in prompted:
                prompted[ent] = read_mask(bundle.path(rel), shape)
    for i in range(n):
        key = f"{i:06d}"
        for ent, rel in masks.get(key, {}).items():
            out[i] |= read_mask(bundle.path(rel), shape)
            used.append(rel)
            if cap.mask_state(key, ent) in ("rest", "occluded") and ent in prompted:
                out[i] |= prompted[ent]  # the hidden part of an object at rest is still not background
    return out, used


def plate_picture(first: np.ndarray, foreground: np.ndarray, plate: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """first frame | its foreground mask | plate | confidence, one row (uint8 RGB)."""

    return tiles([first, overlay(first, foreground), plate, confidence],
                 ["first frame", "foreground", "plate", "confidence (255 many/128 few/0 inpainted)"], cols=4)


def plate_stage(bundle, config: PlateConfig | None = None, inpainter: Callable | None = None, force: bool = False):
    """Stage ``plate``: ``background/plate.png`` + ``plate_confidence.png`` + ``reports/plate.json`` + ``reports/plate.png``.

    Uses the bundle's entity masks (union per frame, plus the detected moving foreground) when there are any.
    Returns ``(stage record, ran)`` like every stage.
    """

    cfg = config or PlateConfig()
    cap = bundle.manifest.capture
    if not cap.frames:
        raise CaptureError(f"{bundle.root}: no frames in the bundle; run 'real2sim init DIR --frames PATH' first")
    rels = [f.image for f in cap.frames] + [p for d in cap.masks.values() for p in d.values()]
    conf_dict = cfg.to_dict()
    if inpainter is not None:
        conf_dict["inpainter"] = getattr(inpainter, "__name__", "callable")
    input_hash = hash_jsonable([files_hash(bundle, rels), conf_dict])

    def run():
        frames = load_frames(bundle)
        masks, used = bundle_foreground_masks(bundle, len(frames), frames.shape[1:3])
        run_cfg = cfg
        if masks is not None:
            from dataclasses import replace

            run_cfg = replace(cfg, detect_with_masks=True)
        res = make_plate_full(frames, masks, run_cfg, inpainter)
        plate_p, conf_p = bundle.path("background/plate.png"), bundle.path("background/plate_confidence.png")
        write_rgb(plate_p, res.plate)
        write_gray(conf_p, res.confidence)
        pic = bundle.reports_dir() / "plate.png"
        ref = cfg.reference_frame
        write_rgb(pic, plate_picture(frames[ref], res.foreground[ref], res.plate, res.confidence))
        report = {**res.report, "masks_used": len(used), "plate": "background/plate.png",
                  "confidence": "background/plate_confidence.png", "picture": bundle.rel(pic)}
        rep = bundle.write_report("plate", report)
        cap.plate, cap.plate_confidence = bundle.rel(plate_p), bundle.rel(conf_p)
        metrics = {k: res.report[k] for k in ("coverage_many", "coverage_few", "inpainted_fraction", "foreground_fraction_mean")}
        msg = (f"plate from {res.report['frames_used']} frames: {metrics['coverage_many']:.1%} seen often, "
               f"{metrics['inpainted_fraction']:.1%} inpainted")
        return [bundle.rel(plate_p), bundle.rel(conf_p), rep, bundle.rel(pic)], metrics, msg

    return run_stage(bundle, "plate", input_hash, conf_dict, run, force=force)
