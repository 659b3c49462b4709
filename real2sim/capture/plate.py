"""Background plate: the scene without the robot (or anything else that moves), from many frames.

Algorithm (``make_plate``; the estimator is :mod:`real2sim.capture.plate_background`):

1. **Checks**: frames of one size (else an error naming the frame), a fixed camera (else refused with the
   evidence), no all-black or saturated frames (warned about by index and left out).
   A camera that shook by a fraction of a pixel or more (on a tripod beside the robot, on the robot's head) has
   its frames moved back onto the reference frame's view (:mod:`real2sim.capture.shake`; the masks with them).
2. **Exposure**: webcams change gain while a dark robot moves (up to 13 % in ``bridge_real_1.mp4``).
   Every frame gets a per-channel gain that maps its background to the reference frame's
   (robust median of ratios, refined on pixels that agree).
3. **Background**: the per-pixel temporal median is the anchor (the naive baseline is the floor). Regions where a
   frame deviates from it by more than the noise allows are told apart region by region: a thing in front of the
   background (its outline is an edge in the frame), or a *ghost*: the anchor itself holds a thing that lingered
   in most frames (its outline is an edge in the anchor) and the frame shows what is behind it. Behind ghosts the
   anchor becomes the median of the frames that show the background. Then the frames within the noise-adapted
   tolerance of the anchor are averaged.
4. **Given masks** (objects, the robot) are honoured: their pixels are never background samples; pixels that no
   frame shows are **inpainted** (Telea by default, ``"patchmatch"``, or a callable).

Confidence codes (``plate_confidence.png``, uint8):

====  ===================================================================
255   seen as background in >= ``many_frames`` frames, agreeing with most of the frames that could show it
128   undecided: seen in fewer frames, or most frames disagree, or regions over it could not be told apart
      (foreground or background): look at it, give a mask or more frames
0     no frame saw it: inpainted
====  ===================================================================
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Union

import numpy as np

from real2sim.capture.init import load_frames
from real2sim.capture.inpaint import PatchMatchConfig, inpaint
from real2sim.capture.plate_background import confidence_map, estimate_background, masked_rows
from real2sim.capture.shake import camera_shake, shift_frames
from real2sim.core.bundle import hash_jsonable
from real2sim.core.errors import CaptureError
from real2sim.core.imaging import (
    channel_max,
    channel_min,
    disk,
    grow_parts,
    median_rows,
    read_mask,
    to_uint8,
    write_gray,
    write_rgb,
)
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
    tone_curves: bool = True
    """After the gains, map every frame's levels onto the median's by a per-channel monotone curve (webcam tone
    mapping is not a pure gain); the plate is mapped back to the reference frame's tone."""
    max_frames: int = 64
    """Use at most this many frames (evenly spaced, always including the reference)."""
    detect_pixels: int = 20000
    """Regions are found and told apart at a resolution of about this many pixels (any input size)."""
    detect_fraction: float = 0.125
    """... and at most this fraction of the frames' pixels (at least 4000): small frames stay fast."""
    detect_scale: float = 0.0
    """Fixed resolution factor for that instead (0: from ``detect_pixels``)."""
    fg_sigmas: float = 4.0
    """A pixel deviating from the anchor by more than this many noise sigmas (max channel) is part of a region."""
    fg_threshold: float = 0.02
    """... and by at least this much ([0, 1] units): the floor of the noise-adapted threshold."""
    level_noise_floor: float = 0.5
    """The threshold follows the frames' noise at each pixel's level (the anchor's brightest channel; a camera's
    tone curve compresses the dark levels' noise and contrast, or the bright ones'), down to this fraction of the
    frame's (:func:`~real2sim.capture.plate_background.noise_by_level`); 1: one threshold at every level."""
    open_px: int = 1
    """Opening radius (detection resolution) that removes speckle noise from the regions."""
    close_px: int = 1
    """Closing radius (detection resolution) that joins broken parts of a region."""
    fill_holes: bool = True
    """Fill enclosed holes of regions (a robot part matching the background colour)."""
    min_blob_frac: float = 0.0004
    """Regions smaller than this fraction of the image are dropped (noise, flicker)."""
    mode_anchor: bool = False
    """Where the median is not backed by a majority of frames, anchor on the largest set of frames that agree with
    each other instead (a moving robot spreads its colours; the background agrees with itself). Off by default:
    +0.75 dB on the real Bridge clip but up to -1.4 dB on synthetic clips where a thing rests for a while
    (benchmarks/bench_capture_plates.py)."""
    ghost_ratio: float = 2.0
    """A region is background behind a ghost when the anchor's contrast across its outline is this many times the
    frame's (and foreground the other way round); between the two it is undecided."""
    ghost_shade: float = 0.05
    """A part of a ghost's replacement that is the anchor darkened alike in every channel (by more than this
    fraction, the channels' ratios within it of each other), its texture kept, is a shadow cast over the background
    (a robot's, over part of the clip), not the background a ghost hid: the anchor is kept there
    (:func:`~real2sim.capture.plate_background.ghost_anchor`). 0 = off."""
    ghost_foreign: float = 1.0
    """A ghost's replacement (a connected part) whose new colours are on average more than this (natural log of a
    likelihood ratio: colour histograms of the things seen in front and of the plate) more like the things in front
    than the median's colours it replaced is put back to the median and marked undecided: its frames showed a thing
    passing, not what a lingering thing hid (:func:`~real2sim.capture.plate_background.foreign_ghosts`). 0: off."""
    ghost_pass_foreign: float = 1.0
    """Where a pass after the first replaced the anchor's colours (pixels still called a ghost after
    ``ghost_foreign``) with colours on average more than this (natural log of a likelihood ratio, the histograms of
    ``ghost_foreign``) more like the things in front than the ones it replaced, averaged over a window of
    ``ghost_pass_window`` around each pixel, the colours before that pass are put back (last pass first) and marked
    undecided (:func:`~real2sim.capture.plate_background.foreign_passes`). 0: off."""
    ghost_pass_window: float = 0.01
    """The Gaussian window's sigma, as a fraction of ``sqrt(h * w)``."""
    ghost_one_frame: float = 2.0
    """Where only one frame shows what a ghost hides (an arm still in 6 of 7 frames is the median) and the median
    agrees with a majority of the frames, that frame's colours replace the median's in a connected part whose
    median colours are on average more than this (natural log of a likelihood ratio, the histograms of
    ``arbiter_foreign``) more like the things seen in front than the frame's; marked undecided
    (:func:`~real2sim.capture.plate_background.one_frame_ghosts`). 0: off (a ghost needs 2 frames)."""
    split_jaccard: float = 0.5
    """A frame's deviating region that is neither foreground nor background as a whole is split where the set of
    frames agreeing with it changes (neighbours whose sets overlap by less than this, intersection over union: a
    thing in front and the place a lingering thing left are shown by different frames); the pieces are judged on
    their own outline. 0: no split."""
    dark_part_seam: float = 2.0
    """A part of such a region that its pixels call background (the frame continues the surroundings there) whose
    frame colours are near black (their brightest channel's mean under this many thresholds) is kept only where a
    seam of more than this many thresholds, in the frame or in the anchor, sets it apart from the rest of its
    region: near black any dark thing continues dark surroundings (a black arm beside a black post, crushed
    blacks). 0: no check."""
    passes: int = 3
    """Regions are told apart again against the anchor with the ghosts found so far replaced, this many times in
    all: a ghost merged with something in front is peeled piece by piece."""
    peel_reach: float = 0.02
    """Passes after the first replace only pixels connected to, and within this fraction of the image size
    (``sqrt(h * w)``) of, a ghost found before."""
    peel_reach_ghost: float = 0.5
    """... and also within this fraction of the width of the ghost part they touch (the diameter of a disk of its
    area): a large ghost (an arm close to the camera, or smeared by its motion over a long exposure) leaves a
    wider rim to peel than the image's size says. The real clip's close-up framings +34.5 -> +48.7 dB summed over
    10; 0: the image's fraction alone (docs/capture.md, *A blurred or close arm*)."""
    peel_support: float = 0.5
    """What the later passes replaced (a connected part) is put back to the first pass's anchor, and marked
    undecided, where the colour it replaced is shown by at least ``peel_majority`` of the frames and the new colour
    by fewer than this times as many: a cascade of calls into a thing that passed, not a ghost. 0: no check."""
    peel_majority: float = 0.7
    """... (the fraction of the frames that could show the pixel)."""
    arbiter_ratio: float = 0.5
    """Where the frames agreeing with the median are no majority, a pixel takes the frame that continues the
    well-decided surroundings best when its distance to them (over a window) is under this times the plate's (few
    frames: the one frame that shows the table behind an arm that stays in 3 of 5 frames). 0: off."""
    arbiter_window: float = 0.01
    """Half-width of that window, as a fraction of ``sqrt(h * w)``."""
    arbiter_margin: float = 2.0
    """... and at least this many noise sigmas closer than the plate."""
    arbiter_support: float = 0.5
    """... and backed by at least this fraction of the number of frames that back the plate there ..."""
    arbiter_min_support: float = 0.1
    """... and by at least this fraction of the usable frames (one frame of 60 is more likely a thing passing)."""
    arbiter_spread: float = 1.0
    """... and closer than the plate by more than this times the spread of the surroundings that predict the
    background there (their colours' standard deviation under the prediction's Gaussian weights, averaged over the
    window): surroundings of more than one region predict their mix, which a thing in front can continue better
    than the background does. 0: no check."""
    arbiter_surround: float = 0.6
    """... and (each connected part) when the frames that back its new colour show the part's well-decided
    surroundings as the plate has them at least this times as often as the frames that back the plate there: frames
    whose surroundings are covered show the thing in front, not the background. 0: no check."""
    arbiter_foreign: float = 2.0
    """... and (each connected part) unless its new colours are on average more than this (natural log of a
    likelihood ratio) more like the things seen in front than the plate's: colour histograms of the samples the
    plate rejected and of the plate where every frame agrees with it (a lingering arm, which some frames do not
    show, drops out of the latter). Around a lingering arm the well-decided surroundings are the arm, and the frames
    that show it again continue them best (:func:`~real2sim.capture.plate_background.arbitrate`). 0: no check."""
    foreign_fine_dark: bool = True
    """The likelihood ratios that decide over whole parts (``arbiter_foreign``, ``ghost_foreign``,
    ``ghost_one_frame``) bin each channel by the square root of its level (0, 1-3, 4-8, ..., 225-255), not in even
    bins 16 levels wide, which put a dark scene's grey arm and its brown desk in one bin
    (:func:`~real2sim.capture.plate_background.level_bins`). The per-pixel decisions keep the even bins: one
    pixel's ratio from the fine dark bins is noisy. False: even bins everywhere."""
    mixed_mode: int = 1
    """Where the frames agreeing with the median are no majority and the spatial arbiter left the pixel, the mean of
    the largest set of frames that agree with each other replaces the median when that set has at least this many
    frames more, and its colour is less like the things seen in front elsewhere in the clip (a colour histogram of
    the samples the plate rejected, against one of the plate) than the median's. 0: off."""
    mixed_mode_levels: bool = True
    """``mixed_mode`` groups the frames on a scale where their noise is the same at every level
    (:func:`~real2sim.capture.plate_background.noise_levels`, measured on the clip): a sensor's noise grows with the
    light and a tone curve stretches some levels and crushes others, so on the levels themselves a lit floor's
    frames fall into small sets where a black arm's agree as one, and the arm won. False: on the levels."""
    foreign_majority: float = 0.15
    """Where the regions could not be told apart (a ghost's pixels too: the frames behind a lingering arm can be the
    arm passing) or no majority agrees with the median (and neither the arbiter nor ``mixed_mode`` decided) and the
    plate's colour is that of the things seen in front (more
    than ``foreign_majority_ratio`` in log likelihood ratio), the largest set of the other frames that agree with each
    other, when it holds at least this share of the frames and its colour is more like the background's (by twice
    ``foreign_majority_ratio`` more than the plate's: see ``plate_background.foreign_majority``): a dark arm
    close to the camera that covers a corner in most frames (its frames agree: the median is the arm) gives way to
    the frames that show the wall. Marked undecided. Only without given masks (what they leave of the things in
    front, edges and shadows, is no measure of their colours) unless ``foreign_majority_with_masks``. 0: off."""
    foreign_majority_with_masks: bool = False
    """Take ``foreign_majority`` with masks given as well. The bundle stage sets it when the masks are the prompted
    objects' only (the robot, found by motion with no camera pose, is left to the plate, as without masks): the
    real clip's one command through a 2x close-up crop, intrinsics only, +1.58 -> +3.37 dB over the median less
    the still objects (docs/capture.md, *The real clip through other framings*)."""
    foreign_majority_ratio: float = 1.0
    """See ``foreign_majority``: the plate's colour at least e times as common in front as in the background (at 0,
    a dark Google scene through a crushing tone curve lost 2.6 dB)."""
    shadow_lift: float = 2.5
    """A cast shadow in most frames (a robot's, where the arm lingers) is lifted: a connected part of the plate that
    at least 2 frames show brighter alike in every channel (the plate their colour darkened by more than
    ``ghost_shade``, the channels within it of each other), by at most this factor (a shadow at 40 % of the light),
    with the plate's texture (grey levels correlating at 0.5) and continuing the surroundings across its outline
    (at most half the plate's step there) takes the mean of those frames; marked like ``mixed_mode``'s pixels
    (:func:`~real2sim.capture.plate_background.lift_shadows`). 0: off."""
    shadow_lift_core: float = 3.0
    """... or, the core of a soft shadow whose penumbra lingers around it too (a close-up arm's), stepping at its
    outline up to this times the plate's, when its lit colours are not the things seen in front's (see
    ``shadow_lift_foreign``). 0: only the outline test above."""
    shadow_lift_foreign: float = 2.5
    """See ``shadow_lift_core``: the lit colours' mean natural log likelihood ratio, things in front over the
    background (the histograms of ``arbiter_foreign``), under this (a lighter robot link over a darker one scores
    over 3)."""
    shadow_lift_core_area: float = 0.005
    """See ``shadow_lift_core``: only parts of at least this fraction of the image (small ones along a robot's
    fitted outline took its lighter edge and sank the fit that reads the plate: a close-up clip 13.8 -> 1.2 dB)."""
    undecided_fraction: float = 0.15
    """Pixels covered by undecided regions in at least this fraction of the frames (and 2) get confidence 128."""
    average_sigmas: float = 3.0
    """Samples within this many noise sigmas of the anchor (edges: plus ``jitter_px`` times the gradient) are averaged."""
    jitter_px: float = 0.3
    """Sub-pixel jitter (px) allowed for at edges when deciding which samples agree."""
    shake_px: float = 0.4
    """A camera that shook (the frames' median shift against the reference frame, measured on the still
    background, :mod:`real2sim.capture.shake`) by at least this many px has its frames moved back before the plate
    is made (and the masks with them); 0: never. A still camera's frames are used as they are."""
    shake_frame_px: float = 0.2
    """... each frame whose own shift is at least this many px and explains it (see ``shake_fit``)."""
    shake_fit: float = 0.02
    """... where moving the frame takes away at least this fraction of its decorrelation from the clip's median
    and lowers the difference in at least 3/4 of the image's 3 x 3 tiles (a camera moves every part alike; a
    thing passing only its own)."""
    average_tolerance: float = 0.02
    """... and at least this much ([0, 1] units)."""
    majority: float = 0.3
    """Pixels where fewer than this fraction of the usable frames agree with the plate get confidence 128."""
    dark_level: int = 12
    """A frame whose 99th-percentile level is below this is 'all black' (warned about and left out)."""
    saturated_fraction: float = 0.9
    """A frame with more than this fraction of pixels at 250+ in every channel is saturated (left out)."""
    dilate_px: int = 6
    """Given masks are grown by ``dilate_px // 3`` pixels (their edges, motion blur)."""
    detect_with_masks: bool = False
    """With masks given, also tell regions apart in what the masks leave (the bundle stage sets this)."""
    unapplied_fit_frame_iou: float = 0.7
    """The bundle stage, after a robot fit that missed its quality gate (not applied): the fit's silhouettes in the
    frames it fitted at least this well (silhouette IoU) are the robot's extent all the same (the gate's bar on the
    mean, ``core.gates`` ``robot_fit``, here per frame)."""
    many_frames: int = 5
    """Pixels seen in at least this many frames can get confidence 255."""
    inpaint: str = "auto"
    """'auto' (PatchMatch where a hole is at least a patch wide, Telea in slivers), 'telea', 'ns' or 'patchmatch'
    for pixels no frame saw (``make_plate(inpainter=fn)`` overrides)."""
    inpaint_margin: float = 0.15
    """Each part no frame saw (an object that never moved) is grown by this fraction of its width (the diameter of
    a disk of its area, at least 1 px) before it is filled: its rim and halo, which a mask rarely covers, must not
    leak into the fill. The grown pixels are inpainted too (confidence 0)."""
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
    """``(n, h, w) bool`` per frame: not used as background (foreground, given mask, or a left-out frame)."""
    seen_count: np.ndarray = field(repr=False)
    """``(h, w) int`` number of frames averaged into each pixel."""
    gains: np.ndarray = field(repr=False)
    """``(n, 3)`` exposure gains applied (frames used)."""
    report: dict = field(default_factory=dict)


def estimate_gains(frames: np.ndarray, ref: int, fg: np.ndarray | None = None, samples: int = 2500) -> np.ndarray:
    """``(n, 3)`` per-channel gains mapping each uint8 frame onto frame ``ref`` (robust to a moving robot), from
    about ``samples`` pixels per frame (a median of ratios: more pixels change the gain by < 0.1 %)."""
    n = frames.shape[0]
    step = max(1, int(np.sqrt(frames.shape[1] * frames.shape[2] / samples)))
    sub = frames[:, ::step, ::step].astype(np.float32) / 255.0
    R = sub[ref]
    gains = np.ones((n, 3), np.float32)
    mid = ((sub > 0.06) & (sub < 0.94)).all(-1)  # (n, h', w') neither dark nor bright in any channel
    for t in range(n):
        if t == ref:
            continue
        F = sub[t]
        ok = mid[t] & mid[ref]
        if fg is not None:
            ok &= ~fg[t, ::step, ::step] & ~fg[ref, ::step, ::step]
        if ok.sum() < 100:
            continue
        g = median_rows(masked_rows(R, ok) / masked_rows(F, ok))
        for _ in range(2):  # refine on pixels that agree after the gain (background in both)
            d = np.abs(F * g - R)
            agree = ok & (channel_max(d) < 0.05)
            if agree.sum() < 100:
                break
            g = median_rows(masked_rows(R, agree) / masked_rows(F, agree))
        gains[t] = g
    return gains


def gain_luts(gains: np.ndarray) -> np.ndarray:
    """``(n, 256, 3) uint8``: each level through :func:`apply_gains` (its product is a function of the level and
    the channel only), for ``cv2.LUT``."""
    levels = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, 1)[None]  # a one-row image of the 256 levels
    return apply_gains(np.repeat(levels[None], len(gains), 0), gains)[:, 0]


def apply_gains(frames: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """uint8 frames times per-frame per-channel gains, saturated to uint8."""
    import cv2

    out = np.empty_like(frames)
    # np.allclose(g, 1.0), written out (the same test, without its per-call overhead)
    unit = (np.abs(gains.astype(np.float64) - 1.0) <= 1e-8 + 1e-5).all(1)
    for t, g in enumerate(gains):
        out[t] = frames[t] if unit[t] else cv2.multiply(frames[t], (float(g[0]), float(g[1]), float(g[2]), 0.0))
    return out


def bad_frames(frames: np.ndarray, dark_level: int, saturated_fraction: float) -> dict[int, str]:
    """Frames that show nothing: index -> 'all black' / 'saturated' for ``(n, h, w, 3) uint8`` frames."""
    n, h, w, _ = frames.shape
    step = max(1, int(np.sqrt(h * w / 5000)))
    f = frames[:, ::step, ::step]  # (counted in place: the same fractions as the means, without a copy)
    k = f.shape[1] * f.shape[2]
    lit = np.count_nonzero(f >= dark_level, axis=(1, 2, 3)) / (3 * k)
    sat = np.count_nonzero(channel_min(f) >= 250, axis=(1, 2)) / k
    return {t: "all black" if lit[t] < 0.01 else "saturated" for t in range(n)
            if lit[t] < 0.01 or sat[t] > saturated_fraction}


def stack_frames(frames, names: list[str] | None = None) -> np.ndarray:
    """``(n, h, w, 3) uint8`` from an array or a list of ``(h, w, 3)`` images; frames of another size are an error
    naming the frame."""
    if isinstance(frames, (list, tuple)):
        if not frames:
            raise CaptureError("make_plate: no frames")
        s0 = np.shape(frames[0])
        for i, f in enumerate(frames):
            if np.shape(f) != s0:
                nm = names[i] if names and i < len(names) else f"frame {i}"
                raise CaptureError(f"make_plate: {nm} has shape {np.shape(f)} but frame 0 has {s0}; all frames of a "
                                   "fixed camera must have one size. Remove or resize the odd frames")
        frames = np.stack([np.asarray(f) for f in frames])
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.shape[0] < 1:
        raise CaptureError(f"make_plate: frames must be (n, h, w, 3) uint8 with n >= 1, got shape {frames.shape}")
    return frames if frames.dtype == np.uint8 else to_uint8(frames)


def _select(n: int, ref: int, max_frames: int) -> np.ndarray:
    if n <= max_frames:
        return np.arange(n)
    idx = set(np.linspace(0, n - 1, max_frames - 1).round().astype(int).tolist()) | {ref}
    return np.array(sorted(idx))


def _gray_small(f, scale: float):
    import cv2

    g = cv2.cvtColor(np.ascontiguousarray(f), cv2.COLOR_RGB2GRAY).astype(np.float32)
    return cv2.resize(g, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)


def camera_motion_px(frames: np.ndarray, ref: int = 0, scale: float = 0.5, grays: list | None = None) -> np.ndarray:
    """``(n,)`` image shift (px) of each frame against frame ``ref`` by phase correlation (``grays``: the frames
    already through :func:`_gray_small` at ``scale``)."""
    import cv2

    grays = grays if grays is not None else [_gray_small(f, scale) for f in frames]
    win = cv2.createHanningWindow(grays[ref].shape[::-1], cv2.CV_32F)
    # copies: cv2.phaseCorrelate (OpenCV 5.0) multiplies its inputs by the window in place
    return np.array([float(np.hypot(*cv2.phaseCorrelate(grays[ref].copy(), g.copy(), win)[0])) / scale
                     for g in grays])


def static_fraction(frames: np.ndarray, ref: int = 0, scale: float = 0.5, tol: float = 15.0,
                    grays: list | None = None) -> np.ndarray:
    """``(n,)`` fraction of pixels that keep their (exposure-normalised) grey level from frame ``ref``."""
    grays = grays if grays is not None else [_gray_small(f, scale) for f in frames]
    g0 = grays[ref]
    m0 = _gray_median(g0)
    out = []
    for g in grays:
        g = g * (m0 / max(float(_gray_median(g)), 1e-6))
        out.append(float((np.abs(g - g0) < tol).mean()))
    return np.array(out)


def _gray_median(g: np.ndarray) -> np.floating:
    """``np.median(g)`` of a float32 image; from a histogram when every value is a whole multiple of 1/4 (grey
    levels halved by area averaging: the two middle values and their mean are then exact, the same float32)."""
    q = g * np.float32(4)
    qi = q.astype(np.int32)
    if g.size == 0 or qi.min() < 0 or not np.array_equal(qi, q):
        return np.median(g)
    cum = np.cumsum(np.bincount(qi.ravel()))
    a, b = np.searchsorted(cum, [(g.size - 1) // 2, g.size // 2], side="right")
    return np.float32((int(a) + int(b)) / 8)


def check_static_camera(frames: np.ndarray, ref: int = 0, max_shift_px: float = 3.0, min_static: float = 0.5) -> dict:
    """Refuse clips whose camera moved (a plate needs a fixed camera), with the evidence.

    Two signs together: most of the image changes (a moving robot changes only part of
    it), and the frames are shifted against the reference (phase correlation). Either
    alone is not enough: a large moving object can pull the correlation, and a textureless
    wall changes little under a pan (its plate is then fine anyway).
    """
    if len(frames) < 2:
        return {"camera_shift_px_median": 0.0, "camera_shift_px_max": 0.0, "static_fraction_median": 1.0}
    grays = [_gray_small(f, 0.5) for f in frames]
    static = static_fraction(frames, ref, 0.5, grays=grays)
    shift = camera_motion_px(frames, ref, 0.5, grays)
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
               inpainter: Union[str, Callable, None] = None, mask_names: list[str] | None = None,
               frame_names: list[str] | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Background plate from ``(n, h, w, 3) uint8`` frames of a fixed camera (or a list of ``(h, w, 3)`` images).

    ``masks``: optional ``(n, h, w) bool`` foreground (True = not background) per frame; when absent the moving
    foreground is detected. ``inpainter``: overrides ``config.inpaint`` (a method name or a callable
    ``fn(image uint8, hole bool) -> image uint8``). ``mask_names`` / ``frame_names``: file names for the warnings and
    errors (masks that cover everything or nothing, black or saturated frames, a frame of another size).
    Returns ``(plate uint8 (h,w,3), confidence uint8 (h,w), report)``.
    """
    res = make_plate_full(frames, masks, config, inpainter, mask_names, frame_names)
    return res.plate, res.confidence, res.report


def _usable_frames(frames: np.ndarray, sel: np.ndarray, cfg: PlateConfig, frame_names: list[str] | None
                   ) -> tuple[np.ndarray, int, list[str], list[int]]:
    """``sel`` without all-black / saturated frames, the reference frame's index in it, warnings, frames left out."""
    def name(i):
        return frame_names[i] if frame_names and i < len(frame_names) else f"frame {i}"

    every = np.array_equal(sel, np.arange(len(frames)))  # (then no copy of the frames)
    bad = {int(sel[k]): why for k, why in bad_frames(frames if every else frames[sel], cfg.dark_level,
                                                     cfg.saturated_fraction).items()}
    warnings = [f"{name(i)} is {why}: left out of the plate (a camera that was covered, off or blinded; "
                "remove it from the clip)" for i, why in sorted(bad.items())]
    good = np.array([i for i in sel if int(i) not in bad], int)
    if good.size == 0:
        raise CaptureError(f"make_plate: every frame is all black or saturated ({', '.join(name(i) for i in bad)}); "
                           "check the camera's exposure and lens cap and capture again")
    ref = cfg.reference_frame
    if ref in bad:
        new = int(good[np.argmin(np.abs(good - ref))])
        warnings.append(f"the reference frame {name(ref)} is {bad[ref]}: {name(new)} is the reference instead "
                        "(set PlateConfig.reference_frame / --reference-frame to a good frame)")
        ref = new
    return good, int(np.nonzero(good == ref)[0][0]), warnings, sorted(bad)


def _given_foreground(masks, n: int, h: int, w: int, sel: np.ndarray, cfg: PlateConfig) -> tuple[np.ndarray, np.ndarray]:
    """(``(n, h, w) bool`` given masks checked, ``(len(sel), h, w) bool`` the selected ones grown by dilate_px // 3)."""
    import cv2

    masks = np.asarray(masks, bool)
    if masks.shape != (n, h, w):
        raise CaptureError(f"make_plate: masks have shape {masks.shape}, expected {(n, h, w)} (one per frame)")
    fg = masks[sel]
    if cfg.dilate_px > 0:
        k = disk(max(1, cfg.dilate_px // 3))
        fg = np.stack([cv2.dilate(m.astype(np.uint8), k) > 0 for m in fg])
    return masks, fg


def _mask_warnings(masks: np.ndarray, sel: np.ndarray, fg_frac: np.ndarray, mask_names, detect: bool) -> list[str]:
    """Given masks that cover (almost) everything or nothing, by name."""
    def name(i):
        return mask_names[i] if mask_names and i < len(mask_names) else f"the mask of frame {i}"

    out = [f"{name(i)} covers {f:.0%} of the image: that frame contributes nothing (white = foreground; is the mask "
           "inverted?)" for i, f in zip(sel, fg_frac) if f > 0.98]
    empty = [name(i) for i in sel if not masks[i].any()]
    if len(empty) == len(sel):
        out.append("the masks are empty (all black): " + ("the plate comes from the detected motion only" if detect
                                                          else "the plate is a plain temporal median"))
    elif empty and len(empty) <= 3:
        out.append(f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty (all black)")
    return out


def make_plate_full(frames: np.ndarray, masks: np.ndarray | None = None, config: PlateConfig | None = None,
                    inpainter: Union[str, Callable, None] = None, mask_names: list[str] | None = None,
                    frame_names: list[str] | None = None) -> PlateResult:
    """Like :func:`make_plate` but returns a :class:`PlateResult` with the foreground and counts.

    OpenCV runs single-threaded meanwhile: the regions are told apart at about ``detect_pixels`` pixels, where
    handing each call to a thread pool costs more than it saves (same results, about 10 % less CPU time)."""
    import cv2

    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        return _make_plate_full(frames, masks, config, inpainter, mask_names, frame_names)
    finally:
        cv2.setNumThreads(threads)


def _make_plate_full(frames, masks, config, inpainter, mask_names, frame_names) -> PlateResult:
    import time

    cfg = config or PlateConfig()
    t0 = time.perf_counter()
    frames = stack_frames(frames, frame_names)
    n, h, w, _ = frames.shape
    if not 0 <= cfg.reference_frame < n:
        raise CaptureError(f"PlateConfig.reference_frame={cfg.reference_frame} but there are {n} frames; use 0..{n - 1}")
    sel, ref, warnings, left_out = _usable_frames(frames, _select(n, cfg.reference_frame, cfg.max_frames), cfg,
                                                  frame_names)
    # every frame, in order: no copy (nothing below writes into the frames)
    F = np.ascontiguousarray(frames if np.array_equal(sel, np.arange(n)) else frames[sel])
    motion = check_static_camera(F, ref)
    shake = camera_shake(F, ref, min_px=cfg.shake_frame_px, min_fit=cfg.shake_fit,
                         min_clip_px=cfg.shake_px) if cfg.shake_px > 0 else None
    moved = shake is not None and bool(shake.shifts.any())
    if moved:
        F = shift_frames(F, shake.shifts)
    given = masks is not None
    fg_given = None
    if given:
        masks, fg_given = _given_foreground(masks, n, h, w, sel, cfg)
        if moved:
            fg_given = shift_frames(fg_given, shake.shifts)
    gains, luts = np.ones((len(sel), 3), np.float32), None
    if cfg.exposure_compensation and len(sel) > 1:
        gains = estimate_gains(F, ref, fg_given)
        luts = gain_luts(gains)  # (applied inside, with the tone curves: the same frames as apply_gains)
    valid = None if fg_given is None else ~fg_given
    est = estimate_background(F, valid, cfg, detect=not given or cfg.detect_with_masks, ref=ref, luts=luts)
    n_avail = np.full((h, w), len(sel), np.int32) if valid is None else valid.sum(0, dtype=np.int32)
    unseen = n_avail == 0
    if unseen.all():
        raise CaptureError("make_plate: every pixel is foreground in every frame; the masks cover everything. "
                           "Check the masks (True/255 = foreground) or give frames where the background shows")
    fg = ~est.used
    fg_frac = fg.reshape(len(sel), -1).mean(1)
    if given:
        warnings += _mask_warnings(masks, sel, fg_given.reshape(len(sel), -1).mean(1), mask_names, cfg.detect_with_masks)
    method = inpainter if inpainter is not None else cfg.inpaint
    plate = est.plate
    if unseen.any() and cfg.inpaint_margin > 0:
        unseen = grow_parts(unseen, cfg.inpaint_margin)
        n_avail = np.where(unseen, 0, n_avail)
    if unseen.any():
        plate = inpaint(plate, unseen, method, radius=cfg.inpaint_radius, patchmatch=PatchMatchConfig(seed=cfg.seed))
    conf = confidence_map(est.count, est.undecided, n_avail, cfg.many_frames, cfg.majority)
    for msg in warnings:
        log.warning("plate: %s", msg)
    report = {
        "frames_total": int(n),
        "frames_used": int(len(sel)),
        "frames_left_out": left_out,
        "reference_frame": int(sel[ref]),
        "foreground": ("given masks" + (" + regions told apart" if cfg.detect_with_masks else "") if given
                       else "regions told apart against the temporal median"),
        **est.report,
        "coverage_many": round(float((conf == CONF_MANY).mean()), 6),
        "coverage_few": round(float((conf == CONF_FEW).mean()), 6),
        "inpainted_fraction": round(float(unseen.mean()), 6),
        "inpaint_method": method if isinstance(method, str) else getattr(method, "__name__", "callable"),
        "foreground_fraction_mean": round(float(fg_frac.mean()), 6),
        "foreground_fraction_max": round(float(fg_frac.max()), 6),
        "exposure_gain_range": [round(float(gains.min()), 4), round(float(gains.max()), 4)],
        "confidence_codes": {"255": f"seen in >= {cfg.many_frames} frames, agreeing with >= {cfg.majority:.0%} of them",
                             "128": "undecided: seen in fewer frames, most frames disagree, or regions over it could "
                                    "not be told apart (foreground or background)",
                             "0": "no frame saw it: inpainted"},
        "warnings": warnings,
        **motion,
        **(shake.report() if shake is not None else {}),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    full_fg = np.zeros((n, h, w), bool)
    full_fg[left_out] = True
    full_fg[sel] = shift_frames(fg, shake.shifts, back=False) if moved else fg  # (each frame's own pixels)
    return PlateResult(plate, conf, full_fg, est.count, gains, report)


def plain_median(frames: np.ndarray) -> np.ndarray:
    """The simplest plate: per-pixel per-channel median of ``(n, h, w, 3) uint8`` frames (baseline)."""
    return np.median(np.asarray(frames), axis=0).round().astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# bundle stage
# ---------------------------------------------------------------------------------------------

ROBOT = "robot"
"""The robot's entity name in the bundle's masks."""


def motion_only_entities(bundle) -> set[str]:
    """Entities whose masks are motion evidence, not masks: the robot when ``robot_fit`` found it by motion
    segmentation (no camera pose). Against a clip median that is the robot itself where it lingers, those masks
    cover the background where the robot is away and leave the robot where it stays; handed to the plate as
    foreground they undo what the plate tells apart on its own (18 synthetic clips of the plate benchmark: 9 fell
    under the plain median with them, none without; docs/capture.md)."""
    return {ROBOT} if _robot_method(bundle) == "motion" else set()


def _robot_method(bundle) -> str | None:
    rec = bundle.manifest.stages.get("robot_fit")
    return None if rec is None else rec.metrics.get("method")


def fitted_robot_extent(bundle, n: int, shape: tuple[int, int],
                        frame_iou: float = PlateConfig.unapplied_fit_frame_iou,
                        joints: dict[int, list[float]] | None = None) -> np.ndarray | None:
    """``(n, h, w) bool`` the robot model rendered at each frame's fitted joints, grown by a pixel, when
    ``robot_fit`` fitted them (``model``) in a clip; else None. The joints are ``capture.frames[i].joint_positions``,
    or, for a fit that missed its quality gate and was not applied, the report's joints of the frames it fitted at
    least ``frame_iou`` well (:func:`unapplied_fit_joints`; ``joints``: those of :func:`extent_joints`, when the
    caller has them). The stage's input hash holds the robot's mask files, which change with the fit (and the
    joints of a fit not applied), so the 'build' loop of plate and robot fit still ends when the fit settles.

    The fitted robot's masks are the frame's foreground near its silhouette: where the robot barely differs from
    the background they miss it, and a plate that takes them as the robot's extent counts those robot pixels as
    background (a 60-frame Google Robot clip: 7.6 dB under the plate made without them, 1.4 dB under the plain
    median). The fit's silhouette covers them. Grown further (0.3-0.6 % of the diagonal) it cost a 1280x720 WidowX
    clip 11-12 dB (docs/capture.md, *Fitted silhouettes and the plate*). A fit under the gate is still near the
    robot: its joints are not the scene's, but its silhouettes keep the robot out of the plate (docs/capture.md,
    *A fit under its gate and the plate*)."""
    import cv2

    from real2sim.render.robot import link_id_image, load_robot_model

    m = bundle.manifest
    frames = m.capture.frames
    if _robot_method(bundle) != "model" or m.robot is None or len(frames) != n or n < 2:
        return None  # one frame: the plate is that frame, nothing to tell apart; a silhouette only grows its hole
    if joints is None:
        joints, _ = extent_joints(bundle, frame_iou)
    model = load_robot_model(m.robot, bundle.root)
    kernel = np.ones((3, 3), np.uint8)  # a pixel around the silhouette: its rasterized edge
    out = np.zeros((n,) + tuple(shape), bool)
    for i, f in enumerate(frames):
        q = joints.get(i)
        if q is None or len(q) != len(model.joint_names) or f.camera not in m.cameras:
            continue
        cam = m.cameras[f.camera].camera()
        if (cam.height, cam.width) != tuple(shape):
            continue
        sil = (link_id_image(model, cam, np.asarray(q, float))[0] >= 0).astype(np.uint8)
        out[i] = cv2.dilate(sil, kernel) > 0
    return out if out.any() else None


UNAPPLIED_NOTE = (" (the fit missed its quality gate: its joints are not applied to the scene, its silhouettes keep "
                  "the robot out of the plate)")


def extent_joints(bundle, frame_iou: float = PlateConfig.unapplied_fit_frame_iou
                  ) -> tuple[dict[int, list[float]], bool]:
    """(``{frame index: joints}`` the robot's extent is rendered at, whether they come from the report of a fit
    not applied): the bundle's fitted joints when it holds any (a fit applied before stays the bundle's result),
    else those of :func:`unapplied_fit_joints`."""
    applied = {i: f.joint_positions for i, f in enumerate(bundle.manifest.capture.frames) if f.joint_positions}
    if applied:
        return applied, False
    unapplied = unapplied_fit_joints(bundle, frame_iou)
    return (unapplied, True) if unapplied else ({}, False)


def unapplied_fit_joints(bundle, frame_iou: float = PlateConfig.unapplied_fit_frame_iou
                         ) -> dict[int, list[float]] | None:
    """``{frame index: joints}`` of the frames a model fit tracked (state ``prompt``, ``tracked`` or ``recorded``:
    not ``lost``) with a silhouette IoU of at least ``frame_iou``, when
    ``robot_fit`` missed its quality gate and was not applied (its joints are in its report only); else None.

    Per frame, because a poor fit is poor in some frames: the silhouettes of every tracked frame cost a rendered
    WidowX clip 3.3 dB (its first frames twice the robot's size), those at the bar's 0.7 gained it 1.2 dB."""
    rec = bundle.manifest.stages.get("robot_fit")
    report = bundle.read_report("robot_fit") if rec is not None and rec.metrics.get("applied", True) is False else None
    if report is None:
        return None
    per_frame = report.get("per_frame", [])
    return {p["frame"]: p["joints"] for p in per_frame if p.get("state") in ("prompt", "tracked", "recorded")
            and p.get("joints") and p.get("iou") is not None and p["iou"] >= frame_iou} or None


def bundle_foreground_masks(bundle, n: int, shape: tuple[int, int], leave_out=()
                            ) -> tuple[np.ndarray | None, list[str]]:
    """Union of the entity masks recorded for each frame (``manifest.capture.masks``), less the entities in
    ``leave_out`` (:func:`motion_only_entities`), or None if there are none."""

    cap = bundle.manifest.capture
    masks = {key: {e: rel for e, rel in ents.items() if e not in leave_out} for key, ents in cap.masks.items()}
    masks = {key: ents for key, ents in masks.items() if ents}
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
                 ["first frame", "foreground", "plate", "confidence (255 sure/128 undecided/0 inpainted)"], cols=4)


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
    joints, from_report = extent_joints(bundle, cfg.unapplied_fit_frame_iou)
    conf_dict = cfg.to_dict()
    if inpainter is not None:
        conf_dict["inpainter"] = getattr(inpainter, "__name__", "callable")
    skip = sorted(motion_only_entities(bundle))
    # the silhouettes of a fit under its gate come from its report: its joints (not the file, which holds timings)
    input_hash = hash_jsonable([files_hash(bundle, rels), conf_dict] + ([{"masks_left_out": skip}] if skip else [])
                               + ([{"unapplied_fit_joints": sorted(joints.items())}] if from_report else []))

    def run():
        frames = load_frames(bundle)
        masks, used = bundle_foreground_masks(bundle, len(frames), frames.shape[1:3], skip)
        extent = fitted_robot_extent(bundle, len(frames), frames.shape[1:3], joints=joints)
        if extent is not None:
            masks = extent if masks is None else masks | extent
        robot_masked = extent is not None or (ROBOT not in skip and any(ROBOT in ents for ents in cap.masks.values()))
        run_cfg = cfg if masks is None else replace(cfg, detect_with_masks=True,
                                                    foreign_majority_with_masks=not robot_masked)
        res = make_plate_full(frames, masks, run_cfg, inpainter, frame_names=[f.image for f in cap.frames])
        plate_p, conf_p = bundle.path("background/plate.png"), bundle.path("background/plate_confidence.png")
        write_rgb(plate_p, res.plate)
        write_gray(conf_p, res.confidence)
        pic = bundle.reports_dir() / "plate.png"
        ref = cfg.reference_frame
        write_rgb(pic, plate_picture(frames[ref], res.foreground[ref], res.plate, res.confidence))
        left_out = [e for e in skip if any(e in ents for ents in cap.masks.values())]
        report = {**res.report, "masks_used": len(used),
                  **({"masks_left_out": {e: "motion segmentation (no camera pose): the plate tells moving things "
                                            "apart itself" for e in left_out}} if left_out else {}),
                  **({"fitted_robot_extent": "the robot model at each frame's fitted joints (grown by a pixel) is "
                                             "foreground too" + (UNAPPLIED_NOTE if from_report else "")}
                     if extent is not None else {}),
                  "plate": "background/plate.png",
                  "confidence": "background/plate_confidence.png", "picture": bundle.rel(pic)}
        rep = bundle.write_report("plate", report)
        cap.plate, cap.plate_confidence = bundle.rel(plate_p), bundle.rel(conf_p)
        metrics = {k: res.report[k] for k in ("coverage_many", "coverage_few", "inpainted_fraction", "foreground_fraction_mean")}
        msg = (f"plate from {res.report['frames_used']} frames: {metrics['coverage_many']:.1%} seen often, "
               f"{metrics['inpainted_fraction']:.1%} inpainted")
        return [bundle.rel(plate_p), bundle.rel(conf_p), rep, bundle.rel(pic)], metrics, msg

    return run_stage(bundle, "plate", input_hash, conf_dict, run, force=force)
