"""One click (or a box) without a plate: GrabCut over object-size hypotheses, scale-aware, with shadow removal.

A noisy or JPEG-compressed frame is first smoothed edge-preservingly, by how much the frame itself says
(:func:`noise_sigma`, :func:`blockiness`; clean frames are left as they are).

From a click, the object's size is unknown. Square boxes of growing half-size around the click (``scales``, as
fractions of ``sqrt(h * w)``) are tried, smallest first. Each is cut out with a margin as wide as the box and
resampled to ``crop_px`` pixels, so every length below is in that normalised crop, whatever the resolution of
the frame (320x256 or 1280x720) and the size of the object:

- **Colour models from the click**: pixels of the box whose colour is nearer the click's colours (a small disk
  around it) than the margin's are GrabCut's probable foreground, the others probable background; the disk
  at the click is sure foreground, negative clicks sure background.
- **Automatic background seeds**: the margin outside the box is sure background.
- **Edges**: GrabCut's contrast-sensitive smoothness term; the chosen mask is refined along its outline by
  colour at full resolution.
- **Size selection**: a mask that runs along its box's border was cut by the box; one that changes when the box
  grows or shrinks was a part of the object or leaked into the background. The largest size whose mask is whole in
  its box and agrees with a neighbouring size's mask (IoU >= ``stable_iou``) is taken, or a larger such mask that
  holds it, is compact and at most ``max_growth`` times its area (a can, not its lid); else the most stable whole
  one.
- **Shadow removal**: pixels of the mask that are a darker version of the background next to them (same chroma,
  lower lightness) and reach the mask's outline are a cast shadow: removed (returned as ``shadow``).

Confidence = agreement of the chosen mask with a neighbouring size's mask (stable objects do not change when
the box grows) times how clearly its outline separates colours (colour difference across the outline relative to
the spread inside), halved when a larger compact mask of another size holds it (it may be a part: a lid, a label),
see :func:`grabcut_result`.

From a box: main@02b6871's GrabCut in the box (unchanged; the robot's box of ``real2sim init`` relies on it), with
its stability under a 5 % looser box as the confidence.

Other cues (clicks), :func:`_pick_cue`: main@02b6871's GrabCut from a colour region grown at the click
(:mod:`segmentation.grabcut_legacy`), and plain GrabCut from boxes of ``context_scales`` x the image's smaller side
around the click with a wide context as background and no sure foreground at the click (a click on a lid does not
make the lid's colour the object's). Every candidate (the chosen size's mask and the cues' masks) is scored from the
image alone as support (IoU with the best-agreeing other candidate) x solidity^3 x sqrt(0.1 + outline edge: 1 - 1 /
(the median colour gradient on the outline over the median in a band around it, on both sides: a board's squares or
a cloth's pattern raise that reference, so an outline that follows the texture reads as no edge)) x (0.05 + colour
separation: 1 - Bhattacharyya coefficient of the Lab histograms inside and in a ring outside), halved when it is a
part: held by a larger (``part_growth`` to ``max_growth`` times), compact candidate with an outline
(``whole_contrast``) that another generator's outlined mask confirms (``part_support``). The best-scored is taken;
a part is replaced by the best whole holding it (the can, not its lid); a confirmed whole from the sizes is never
replaced by one of its parts. The taken mask is then the vote of the candidates that agree with it (IoU >=
``consensus_iou``, each weighted by that IoU to the ``consensus_power``): independent cues err at different pixels
of the outline. A mask left unsure (confidence under ``large_below``) and without an outline (a speck around a
click on a large plain surface: a cabinet's top filling half the image) is replaced by the best of the
``large_scales`` context boxes' masks that has a clear outline and is not the image (``details["picked"]`` "large
surface", confidence kept under the review threshold); a speck no larger cue replaced gives way to the best-scored
size whose mask grew past the clicks' disks (``grown_over_speck``, "sizes, over a speck", unsure). A sure mask large in the image (``whole_min_frac``) may be a part
of an object in front of the camera that every usual box cut (a can's lid or label): the mask of a wide context box
(``whole_scales``) replaces it when it holds it (at most ``whole_max_growth`` times its area: not the table a sure
apple lies on), is compact, outlined and separates from its ring nearly as well
(``details["picked"]`` "whole around"); an unsure mask of any size is tried too, and replaced only when its
outline lies on the wide box mask's (``whole_shared_outline``: a cube's face, not a box on a board), or when it has
no outline of its own and the region around it reaches the wide box mask's outline (``whole_plain_edge``,
``whole_plain_reach``: an apple's lit half, not a speck of a can standing on a board). A mask of an object's top (a lid, a cube's top face) is continued down
to the side the camera sees under it, or a mask of its side up to the top over it, else a mask that left a part of
its object out (a shaded foot, a rim) is completed by a cut that adds a little, convex, no wider
(:mod:`segmentation.below`; ``details["below_px"]``, ``details["above_px"]``, ``details["completed_px"]``). Then a mask that took along what the object stands on
(a pot and its towel) is cut to the object under the click (:mod:`segmentation.support`; ``details["support"]``).
Then a mask cut straight by a box's side (a spoon, a carrot or a pen longer than the box) is continued past the
cut (:mod:`segmentation.continuation`; ``details["continued_past"]``), a spoon's bowl along the handle a cut attaches
(:mod:`segmentation.handle`; ``details["handle_px"]``), and a mask that lies on a thin line continuing it (a click
on a spoon's 2 px handle: :mod:`segmentation.line`; ``details["line_px"]``). The cues' masks are cut in a second thread beside the sizes (``parallel_cues``; the same masks)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from real2sim.core.imaging import (
    MaskOverlaps,
    border_run,
    component_at,
    dilate,
    disk,
    erode,
    fill_holes,
    iou,
    mask_box,
    median_rows,
    solidity,
)
from real2sim.segmentation.below import BelowConfig, whole_around
from real2sim.segmentation.colour import refine_edges
from real2sim.segmentation.continuation import continue_past_cuts
from real2sim.segmentation.core import (
    LOW_CONFIDENCE,
    MaskResult,
    Prompt,
    SegmentationError,
    upsample_mask,
    work_size_prompt,
)
from real2sim.segmentation.grabcut_legacy import LegacyConfig, legacy_grabcut
from real2sim.segmentation.handle import HandleConfig, with_handle
from real2sim.segmentation.line import with_line
from real2sim.segmentation.support import SupportConfig, without_support

log = logging.getLogger(__name__)


@dataclass
class GrabCutConfig:
    """One-click parameters; lengths in pixels of the normalised crop (``crop_px`` wide) unless said."""

    scales: tuple[float, ...] = (0.03, 0.05, 0.08, 0.13, 0.21, 0.34)
    """Half-sizes of the box hypotheses around a click, fractions of ``sqrt(h * w)``."""
    crop_px: int = 128
    """Side of the normalised crop (box plus margin) GrabCut runs on."""
    iterations: int = 3
    """GrabCut EM iterations."""
    click_radius: float = 0.06
    """Sure-foreground disk at each click, fraction of the box half-size."""
    stable_iou: float = 0.85
    """A size whose mask agrees this well with the next size's is taken (the object does not change when the box
    grows; a part of it or a leak does)."""
    max_growth: float = 5.0
    """A larger candidate holding a mask is the whole it is a part of when at most this many times its area (a lid
    or a label is a fifth of a can or more; a mask many times larger is the background around the object) ..."""
    min_solidity: float = 0.8
    """... and at least this convex (area / convex hull): an object holding its coloured part, not a leak."""
    max_box_fill: float = 0.6
    """A mask filling more of its box (inside the image) than this is background, not an object in it."""
    max_border_run: float = 0.35
    """A mask running along more than this fraction of an image side is background (a table, a wall)."""
    touch_frac: float = 0.12
    """A mask on more than this fraction of the box's border (inside the image) was cut by the box."""
    shadow_ab: float = 4.0
    """Chroma (Lab a, b) distance under which a darker pixel is the background in shadow (plus the background's
    chroma spread)."""
    max_shadow_frac: float = 0.35
    """Shadow-like parts larger than this fraction of the mask are the object's dark side: nothing is removed."""
    shadow_l: tuple[float, float] = (0.35, 0.88)
    """Lightness ratio to the background of a shadow pixel (darker than this fraction: an object)."""
    remove_shadow: bool = True
    """Remove the cast shadow from the mask."""
    cues: bool = True
    """Compare the chosen size's mask with the other cues' masks (below) and take the best-scored whole one."""
    legacy: bool = True
    """Cue: main@02b6871's colour-region GrabCut (grown from the click's colour)."""
    context_scales: tuple[float, ...] = (0.1, 0.16, 0.25)
    """Cue: plain GrabCut from a box of these half-sizes (fractions of the image's smaller side) around the click,
    without the click's colour as sure foreground (a click on a lid does not make the lid the object), with a
    wide context (``context_margin`` box half-sizes) as background."""
    context_margin: float = 3.0
    """Context around the box of a context cue, in box half-sizes."""
    context_side: int = 200
    """A context cue's GrabCut runs on its crop resampled to at most this many pixels a side (speed)."""
    context_iterations: int = 5
    """A context cue's GrabCut EM iterations."""
    part_growth: float = 1.8
    """A mask is a part (a lid, a label) of another candidate that holds it and is at least this many times larger."""
    whole_contrast: float = 0.25
    """... and has an outline (:func:`_contrast` at least this): a box's leak into the table around the object has
    none ..."""
    part_support: float = 0.75
    """... and agrees this well with another candidate (a whole found twice, not one box's leak)."""
    early_exit: int = 2
    """Stop growing the box once this many consecutive larger boxes gave the same whole mask (0: try all sizes)."""
    legacy_side: int | None = 160
    """The second cue's GrabCut runs on its region resampled to at most this many pixels a side (speed)."""
    legacy_iterations: int = 5
    """The second cue's GrabCut EM iterations."""
    refine: bool = True
    """Reassign the outline's pixels by colour at full resolution."""
    consensus_iou: float = 0.6
    """The taken mask is replaced by the weighted pixel-wise majority of the candidates (cues and sizes) that agree
    with it at least this well (IoU; 0: off), when there are three or more: independent cues err at different
    pixels of the outline, so their vote is nearer the object than any one of them."""
    consensus_power: float = 4.0
    """Each candidate's vote is weighted by its IoU with the taken mask to this power (the taken mask weighs 1; a
    candidate that differs from it counts less)."""
    denoise_above: float = 3.0
    """Frames whose estimated sensor noise (grey sigma, 8-bit levels, :func:`noise_sigma`) is above this are smoothed
    edge-preservingly first (bilateral filter, colour range ``denoise_k`` sigmas): GrabCut's edge term and colour
    models then see the objects, not the grain. 0: never."""
    denoise_k: float = 3.0
    """Colour range of the bilateral filter in noise sigmas."""
    deblock_above: float = 1.4
    """Frames with JPEG blocks (:func:`blockiness` ratio above this) are smoothed the same way, over ``deblock_px``
    (the blocks are 8 px whatever the image size). 0: never."""
    deblock_k: float = 3.0
    """Colour range of the deblocking filter in units of the blocks' step (:func:`blockiness`)."""
    deblock_px: float = 2.0
    """Spatial sigma (px) of the deblocking filter."""
    pick_score: str = "image"
    """How :func:`_pick_cue` scores a candidate: ``"image"``, from the image alone: support ** ``support_power`` x
    solidity ** ``solidity_power`` x (``edge_floor`` + outline edge) ** ``edge_power`` x (``separation_floor`` +
    colour separation) ** ``separation_power`` (:func:`_outline_edge`, :func:`_separation`); or ``"contrast"``
    (main@008fafa's support x (0.5 + outline contrast) x solidity). Tuned on the mask benchmark's seed-0 cases
    (textured family included) and the one-click scan's board photos, checked on seed 1."""
    support_power: float = 1.0
    """See ``pick_score``."""
    solidity_power: float = 3.0
    """See ``pick_score``."""
    edge_power: float = 0.5
    """See ``pick_score``."""
    separation_power: float = 1.0
    """See ``pick_score``."""
    edge_floor: float = 0.1
    """Added to the outline edge before its power (an outline on no edge is not ruled out alone)."""
    separation_floor: float = 0.05
    """Added to the colour separation before its power."""
    edge_ref: str = "local"
    """What an outline's gradient is measured against: ``"local"`` the gradient in a band around the outline (on
    both sides, ``edge_band`` x the mask's equivalent side wide: a board's squares or a cloth's pattern raise it, so
    an outline that follows the texture reads as no edge) or ``"global"`` the image's median gradient."""
    edge_band: float = 0.15
    """Width of the ``"local"`` band, fraction of the mask's equivalent side (sqrt of its area), at least 3 px."""
    whole_separation: float = 0.6
    """A part is replaced by a whole holding it only when the whole's colour separation from its ring is at least
    this fraction of the part's (a can stands apart from the table as its lid does from the can; clutter around a
    clicked object does not). 0: no such condition (``pick_score="image"`` only)."""
    part_separation: bool = True
    """Count a mask as a part only of a holder that passes that condition too (otherwise a cube next to a
    neighbour of another colour is "a part" of the two together, and its score is halved)."""
    found_by_all_iou: float = 0.9
    """A candidate that every generator found (the sizes, the colour region and a context box each gave a mask within
    this IoU of it) is never a part of a larger one: a green cube beside a can's label, found three times, lost to
    the context boxes' cube-and-label (0.45 -> 0.97). 0 = off."""
    handles: bool = True
    """Continue the mask along a thin handle it holds (a spoon's bowl clicked: :mod:`.handle`)."""
    lines: bool = True
    """Last, join the thin line the mask lies on and that continues it (a spoon clicked on its handle, or a bowl
    whose handle the cut did not attach: :mod:`.line`)."""
    grown_over_speck: bool = True
    """When every cue left the chosen size's speck (a mask no larger than the clicks' sure-foreground disks: a click
    on a face or a half of an object larger than the usual boxes) in place, the best-scored size whose mask grew
    past the disks is taken instead (a part or a leak; its confidence under the review threshold)."""
    large_scales: tuple[float, ...] = (0.4, 0.6)
    """Context boxes (half-size, fraction of the image's smaller side) tried only when the mask found is unsure
    (confidence under ``large_below``) and has no outline (outline edge, :func:`_outline_edge`, under
    ``large_max_edge``): a click on a large plain surface (a cabinet's top, filling half the image) finds only a
    speck at the usual sizes. A large box's mask is taken when it has a clear outline (``large_min_edge``), is
    compact, leaves ``1 - large_max_frac`` of the image and separates from its ring better than the speck. Empty:
    never."""
    large_below: float = 0.5
    """Confidence under which ``large_scales`` may be tried."""
    large_max_edge: float = 0.2
    """Outline edge under which the mask found is a speck on a surface (an object's outline stands on an edge)."""
    large_min_edge: float = 0.5
    """Outline edge (:func:`_outline_edge`) a large box's mask needs (``large_scales``, ``whole_scales``)."""
    large_max_frac: float = 0.75
    """Largest fraction of the image a large box's mask may cover."""
    whole_scales: tuple[float, ...] = (0.6,)
    """Context boxes (half-size, fraction of the image's smaller side) tried when the mask found is large in the
    image (``whole_min_frac``): it may be a part of an object in front of the camera (a can's lid or label, a
    cube's face) that every usual box cut. A box's mask replaces it when it holds it and is ``whole_min_growth``
    times larger, compact (``whole_min_solidity``: a box that took the object's support or the table along is
    not), has a clear outline (``large_min_edge``), is not along an image side and separates from its ring nearly
    as well as the mask does (``whole_min_separation``). Empty: never."""
    whole_min_frac: float = 0.02
    """Fraction of the image a sure mask (confidence at least ``large_below``) must cover for ``whole_scales`` to be
    tried. An unsure one may be a whole object on something compact (a box on a calibration board, at 0.35, took
    the board): it is tried only under ``whole_shared_outline``."""
    whole_shared_outline: float = 0.4
    """An unsure mask (confidence under ``large_below``), of any size, is also tried against the
    ``whole_scales`` boxes, and a box's mask then replaces it only when at least this fraction of the mask's outline
    lies on the box mask's outline (within 1 % of the image's size): a part of an object meets the object's outline
    (a cube's face: 0.57, a can's lid), a thing lying on a support lies inside the support's (the scan tests' box on
    its board: 0.32, a can on it: 0; a small sure mask is not tried: a can beside a bag shares its outline). 0 =
    sure, large masks only."""
    whole_scales_unsure: tuple[float, ...] = (0.4, 0.6)
    """The ``whole_scales`` an unsure mask is tried against: an object in front of the camera whose part the usual
    boxes found unsure (a close-up pepsi can's lid) may fit the 0.4 box when the 0.6 box's cut finds nothing."""
    whole_plain_edge: float = 0.5
    """An unsure mask whose own outline edge (:func:`_outline_edge`) is under this has no outline of its own (a
    highlight on an apple, a speck of a can's label): it is a part wherever it lies in the whole, so the box's mask
    may replace it without ``whole_shared_outline`` (an object on a support has an outline: the scan tests' box on
    its board, 0.85). The same bar as the whole's own outline (``large_min_edge``). Such a mask is replaced only
    when the region it lies in reaches the whole's outline (``whole_plain_reach``)."""
    whole_plain_reach: float = 0.4
    """Share of the box mask's outline that the region around an unsure mask without an outline must reach
    (:func:`_reach`: the mask and the box mask's pixels joined to it without crossing an edge half as strong as the
    box mask's outline): a highlight spreads over its apple to the apple's outline (0.99), a speck of a label over
    its can to half of it (0.54), while a speck on a can standing on a scanning board meets the can's outline first
    (0.20 of the board's)."""
    whole_min_growth: float = 1.3
    """See ``whole_scales``."""
    whole_max_growth: float = 10.0
    """A sure mask's whole is at most this many times its area: a can's lid seen close up is a sixth or seventh of
    the can, a cube's face a third; a sure object many more times smaller than the box's mask lies on it (an apple
    on a table top, 20x; an unsure mask has no such bound: a highlight may be a speck of its object)."""
    whole_min_solidity: float = 0.9
    """See ``whole_scales``."""
    whole_min_separation: float = 0.8
    """See ``whole_scales``: the box's mask's colour separation from its ring (:func:`_separation`) over the mask's
    at least this (a grey lid on a red can stands apart from the can a little better than the can from the table;
    a whole pepsi can's 0.6 box took the table along at 0.7)."""
    parallel_cues: bool = True
    """Cut the cues' masks (:func:`_cue_masks`) in a second thread beside the box sizes, the large boxes' masks
    (:func:`_large_masks`) two at a time, and run the steps after the pick (:func:`_steps_in_order`) ahead on the
    mask as it is: the same masks (OpenCV's random state is per thread and seeded before every GrabCut), about a
    third less wall time on two free cores; the CPU time is the same (more where a step changes the mask)."""
    support_split: bool = True
    """A mask that took along what the object stands on (a pot and its towel) is cut to the object under the click
    (:func:`real2sim.segmentation.support.without_support`)."""
    below: bool = True
    """A mask of an object's top (a lid, a cube's top face, a cabinet's top found as a large surface) is continued
    down to the side the camera sees under it (:func:`real2sim.segmentation.below.whole_below`); else a mask of its
    side up to the top over it (:func:`~real2sim.segmentation.below.whole_above`); else one of their cuts that
    completes the mask (:func:`~real2sim.segmentation.below.whole_around`)."""
    continue_cuts: bool = True
    """A mask taken that ends in a straight cut where a box's side was (a spoon, a carrot or a pen longer than the
    box) is continued past the cut (:func:`real2sim.segmentation.continuation.continue_past_cuts`)."""
    cut_ratio: float = 0.5
    """A side of the mask's box is a cut when its extreme row or column holds at least this fraction of the pixels
    3 px inside (a rounded end holds far fewer)."""
    continue_steps: int = 3
    """At most this many continuations (each grows the box by the mask's longer side)."""
    work_px: int = 640 * 512
    """Frames with more pixels are segmented at this many (resampled by area: the size the method was tuned at;
    its lengths are fractions of the image) and the mask's outline is placed again against the full-size frame;
    0 = always at full size."""
    seed: int = 0
    """OpenCV RNG seed (GrabCut's GMM initialisation uses k-means): same input, same mask."""


def _lab(img: np.ndarray) -> np.ndarray:
    """``(h, w, 3) uint8`` RGB -> float Lab (OpenCV 8-bit scaling), lightly smoothed."""
    import cv2

    return cv2.cvtColor(cv2.GaussianBlur(img, (3, 3), 0), cv2.COLOR_RGB2LAB).astype(np.float32)


class _Frame:
    """The whole frame's colour measures, each computed once when first asked (the cues' scores and the large
    surface's test share them): :func:`_lab`, its :func:`_gradient` and every pixel's bin of :func:`_separation`'s
    histogram; and the areas and overlaps of the candidate masks (``overlaps``)."""

    def __init__(self, image: np.ndarray):
        self.image = image
        self.overlaps = MaskOverlaps()
        self._cuts: dict[tuple[float, float, float], np.ndarray] = {}

    def context_cut(self, click, r: float, cfg: GrabCutConfig) -> np.ndarray:
        """:func:`_context_grabcut` of the frame (a copy): each box is cut once (the large surface's test and the
        whole around an unsure mask ask for the same boxes)."""
        key = (float(click[0]), float(click[1]), float(r))
        if key not in self._cuts:
            self._cuts[key] = _context_grabcut(self.image, click, r, cfg)
        return self._cuts[key].copy()

    @cached_property
    def lab(self) -> np.ndarray:
        return _lab(self.image)

    @cached_property
    def gradient(self) -> tuple[np.ndarray, float]:
        return _gradient(self.lab)

    @cached_property
    def bins(self) -> np.ndarray:
        return _hist_bins(self.lab)


@dataclass
class _Crop:
    x0: int
    y0: int
    x1: int
    y1: int
    scale: float  # crop pixels per image pixel

    def to_crop(self, x: float, y: float) -> tuple[float, float]:
        return (x - self.x0) * self.scale, (y - self.y0) * self.scale


def _make_crop(w: int, h: int, box: tuple[float, float, float, float], margin: float, side: int) -> _Crop:
    """Crop around ``box`` (x0, y0, x1, y1) with ``margin`` pixels on every side, clipped to the image; its longer
    side resampled to ``side``."""
    x0, y0 = max(0, int(np.floor(box[0] - margin))), max(0, int(np.floor(box[1] - margin)))
    x1, y1 = min(w, int(np.ceil(box[2] + margin)) + 1), min(h, int(np.ceil(box[3] + margin)) + 1)
    return _Crop(x0, y0, x1, y1, side / max(x1 - x0, y1 - y0))


def _resample(img: np.ndarray, c: _Crop) -> np.ndarray:
    import cv2

    sub = img[c.y0:c.y1, c.x0:c.x1]
    size = (max(2, int(round((c.x1 - c.x0) * c.scale))), max(2, int(round((c.y1 - c.y0) * c.scale))))
    interp = cv2.INTER_AREA if c.scale < 1 else cv2.INTER_LINEAR
    return np.ascontiguousarray(cv2.resize(sub, size, interpolation=interp))


def _rect_in_crop(c: _Crop, box, shape) -> tuple[int, int, int, int]:
    hh, ww = shape
    ax, ay = c.to_crop(box[0], box[1])
    bx, by = c.to_crop(box[2], box[3])
    return (max(0, int(round(ax))), max(0, int(round(ay))), min(ww - 1, int(round(bx))), min(hh - 1, int(round(by))))


def _init_mask(lab: np.ndarray, rect, clicks, negatives, r_click: int, colour_init: bool = False) -> np.ndarray:
    """GrabCut's initial labels in the crop: outside the rectangle sure background; inside, probable foreground
    where the colour is nearer the clicks' colours than the margin's, else probable background; disks at the
    clicks sure foreground, at negative clicks sure background. ``lab``: ``(h, w, 3)`` float."""
    import cv2

    h, w = lab.shape[:2]
    x0, y0, x1, y1 = rect
    m = np.full((h, w), cv2.GC_BGD, np.uint8)
    inside = np.zeros((h, w), bool)
    inside[y0:y1 + 1, x0:x1 + 1] = True
    fg_seed = np.zeros((h, w), np.uint8)
    for x, y in clicks:
        cv2.circle(fg_seed, (int(round(x)), int(round(y))), max(1, r_click), 1, -1)
    fg_seed = fg_seed.astype(bool) & inside
    out = ~inside
    if colour_init and fg_seed.any() and out.any():
        rng = np.random.default_rng(0)
        fcol = lab[fg_seed].reshape(-1, 3)
        bcol = lab[out].reshape(-1, 3)
        fcol = fcol[rng.permutation(len(fcol))[:16]]
        bcol = bcol[rng.permutation(len(bcol))[:64]]
        px = lab[inside]
        df = np.sqrt(np.min(((px[:, None, :] - fcol[None]) ** 2).sum(-1), axis=1))
        db = np.sqrt(np.min(((px[:, None, :] - bcol[None]) ** 2).sum(-1), axis=1))
        m[inside] = np.where(df <= db, cv2.GC_PR_FGD, cv2.GC_PR_BGD)
    else:
        m[inside] = cv2.GC_PR_FGD
    m[fg_seed] = cv2.GC_FGD
    for x, y in negatives:
        cv2.circle(m, (int(round(x)), int(round(y))), max(1, r_click), int(cv2.GC_BGD), -1)
    return m


def _grabcut(img_rgb: np.ndarray, init: np.ndarray, cfg: GrabCutConfig) -> np.ndarray:
    import cv2

    m = init.copy()
    if not ((m == cv2.GC_BGD) | (m == cv2.GC_PR_BGD)).any() or not ((m == cv2.GC_FGD) | (m == cv2.GC_PR_FGD)).any():
        return (m == cv2.GC_FGD) | (m == cv2.GC_PR_FGD)
    cv2.setRNGSeed(cfg.seed)
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(np.ascontiguousarray(img_rgb[..., ::-1]), m, None, bgd, fgd, cfg.iterations, cv2.GC_INIT_WITH_MASK)
    except cv2.error as exc:
        raise SegmentationError(f"grabcut failed ({exc.err}); give a box around the object or more clicks") from exc
    return (m == cv2.GC_FGD) | (m == cv2.GC_PR_FGD)


def _touch(mask: np.ndarray, rect, crop: _Crop, w: int, h: int) -> float:
    """Fraction of the rectangle's border (the sides not on the image border) covered by ``mask``."""
    x0, y0, x1, y1 = rect
    sides = []
    if crop.x0 > 0 or x0 > 1:
        sides.append(mask[y0:y1 + 1, min(x0 + 1, x1)])
    if crop.x1 < w or x1 < mask.shape[1] - 2:
        sides.append(mask[y0:y1 + 1, max(x1 - 1, x0)])
    if crop.y0 > 0 or y0 > 1:
        sides.append(mask[min(y0 + 1, y1), x0:x1 + 1])
    if crop.y1 < h or y1 < mask.shape[0] - 2:
        sides.append(mask[max(y1 - 1, y0), x0:x1 + 1])
    if not sides:
        return 0.0
    return float(np.concatenate(sides).mean())


def _shadow_part(lab: np.ndarray, mask: np.ndarray, clicks, cfg: GrabCutConfig) -> np.ndarray:
    """Pixels of ``mask`` that are the background next to it in shadow: within the chroma of one of the
    background's colours (k-means of a ring outside the mask), darker by ``shadow_l``, connected to the outline,
    not at a click. ``lab``: ``(h, w, 3)`` float; returns ``(h, w) bool``."""
    import cv2

    if mask.sum() < 30:
        return np.zeros_like(mask)
    ring = (cv2.dilate(mask.astype(np.uint8), disk(6)) > 0) & ~(cv2.dilate(mask.astype(np.uint8), disk(2)) > 0)
    if ring.sum() < 20:
        return np.zeros_like(mask)
    samples = lab[ring].astype(np.float32)
    k = min(4, len(samples) // 10)
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 0.5)
    cv2.setRNGSeed(cfg.seed)
    _, lbl, centres = cv2.kmeans(samples, k, None, crit, 2, cv2.KMEANS_PP_CENTERS)
    lbl = lbl.ravel()
    ys, xs = np.nonzero(mask)
    px = lab[ys, xs]
    cand = np.zeros(len(px), bool)
    for j in range(k):
        grp = samples[lbl == j]
        if len(grp) < 5:
            continue
        ab_spread = float(np.sqrt(grp[:, 1:].var(0).sum()))
        d_ab = np.linalg.norm(px[:, 1:] - centres[j, 1:], axis=1)
        ratio = px[:, 0] / max(centres[j, 0], 1.0)
        cand |= (d_ab < cfg.shadow_ab + ab_spread) & (ratio > cfg.shadow_l[0]) & (ratio < cfg.shadow_l[1])
    sh = np.zeros_like(mask)
    sh[ys[cand], xs[cand]] = True
    sh = cv2.morphologyEx(sh.astype(np.uint8), cv2.MORPH_OPEN, disk(1)) > 0
    outline = mask & ~(cv2.erode(mask.astype(np.uint8), disk(1)) > 0)
    n, lab_cc = cv2.connectedComponents(sh.astype(np.uint8))
    keep = np.zeros(n, bool)
    keep[lab_cc[outline & sh]] = True  # the components that reach the outline
    for x, y in clicks:
        yi, xi = min(max(int(round(y)), 0), mask.shape[0] - 1), min(max(int(round(x)), 0), mask.shape[1] - 1)
        keep[lab_cc[yi, xi]] = False
    keep[0] = False
    out = keep[lab_cc]
    if out.sum() > cfg.max_shadow_frac * mask.sum():  # that much of it is the object's own dark side, not a shadow
        return np.zeros_like(mask)
    return out


def _contrast(lab: np.ndarray, mask: np.ndarray) -> float:
    """How clearly the outline separates colours, in [0, 1]: Lab difference between a band just inside and just
    outside the mask, relative to the colour spread inside plus a noise allowance."""
    import cv2

    if not mask.any():
        return 0.0
    ys, xs = mask_box(mask, 4)  # the mask's box and the disk's reach: the same numbers as on the whole image
    mask, lab = mask[ys, xs], lab[ys, xs]
    m8 = mask.astype(np.uint8)
    inner = mask & ~(cv2.erode(m8, disk(3)) > 0)
    outer = (cv2.dilate(m8, disk(3)) > 0) & ~mask
    if np.count_nonzero(inner) < 10 or np.count_nonzero(outer) < 10:
        return 0.0
    d = float(np.linalg.norm(median_rows(lab[inner]) - median_rows(lab[outer])))
    spread = float(np.sqrt(lab[mask].var(0).sum()))
    return float(np.clip(d / (0.5 * spread + 8.0) / 2.0, 0, 1))


def _gradient(lab: np.ndarray) -> tuple[np.ndarray, float]:
    """Colour gradient magnitude of a Lab image (Sobel of the image smoothed by 1 px, over the three channels) and
    the image's own typical gradient (its median, at least 0.5): the noise and texture an edge must stand out of."""
    import cv2

    sm = cv2.GaussianBlur(lab, (0, 0), 1.0)
    gx, gy = cv2.Sobel(sm, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(sm, cv2.CV_32F, 0, 1, ksize=3)
    gx *= gx
    gy *= gy
    gx += gy
    grad = cv2.transform(gx, np.ones((1, 3), np.float32))  # the channels' sum in numpy's order, in one pass
    np.sqrt(grad, out=grad)
    grad /= 8.0
    return grad, max(float(np.median(grad)), 0.5)


def _outline_edge(grad: np.ndarray, typical: float, mask: np.ndarray, cfg: GrabCutConfig) -> float:
    """How much the outline of ``mask`` stands on an edge, in [0, 1): 1 - 1 / ratio, ratio = the median colour
    gradient on the outline over the reference gradient (``edge_ref``: the median in a band around the outline on
    both sides, at least the image's typical gradient; or the typical gradient alone). An outline through a flat
    table or one that follows a board's squares as much as the squares around it reads ~0."""
    import cv2

    a = int(mask.sum())
    if a < 10:
        return 0.0
    r = max(3, int(round(cfg.edge_band * np.sqrt(a))))
    ys, xs = mask_box(mask, r + 2)
    m8 = mask[ys, xs].astype(np.uint8)
    g = grad[ys, xs]
    outline = m8.astype(bool) & ~(cv2.erode(m8, disk(1)) > 0)
    if outline.sum() < 5:
        return 0.0
    ref = typical
    if cfg.edge_ref == "local":
        band = (cv2.dilate(m8, disk(r)) > 0) & ~(cv2.erode(m8, disk(r)) > 0)
        band &= ~(cv2.dilate(outline.astype(np.uint8), disk(2)) > 0)
        if band.sum() >= 10:
            ref = max(ref, float(median_rows(g[band])))
    ratio = float(median_rows(g[outline])) / ref
    return float(np.clip(1.0 - 1.0 / max(ratio, 1e-6), 0.0, 1.0))


def _hist_bins(lab: np.ndarray) -> np.ndarray:
    """Every pixel's bin of an 8 x 12 x 12 Lab histogram, ``(h, w) int32``. ``lab``: :func:`_lab`'s whole numbers
    0-255, whose bins floor(L * 8 / 256) and floor(a * 12 / 256) are L >> 5 and 3a >> 6 exactly."""
    q = lab.astype(np.int32)
    return (q[..., 0] >> 5) * 144 + ((3 * q[..., 1]) >> 6) * 12 + ((3 * q[..., 2]) >> 6)


def _separation(bins: np.ndarray, mask: np.ndarray) -> float:
    """How well the colours inside ``mask`` are told from those of a ring around it (a quarter of the mask's
    equivalent side wide), in [0, 1]: 1 - Bhattacharyya coefficient of their Lab histograms (8 x 12 x 12 bins,
    ``bins``: :func:`_hist_bins`). A mask that stops inside the object or leaks into the table shares colours with
    its ring."""
    import cv2

    a = int(np.count_nonzero(mask))
    r = max(3, int(round(0.25 * np.sqrt(a))))
    if a < 10:
        return 0.0
    ys, xs = mask_box(mask, r + 1)
    m, idx = mask[ys, xs], bins[ys, xs]
    ring = (cv2.dilate(m.astype(np.uint8), disk(r)) > 0) & ~m
    if np.count_nonzero(ring) < 10:
        return 0.0
    hi = np.bincount(idx[m], minlength=1152) / a
    ho = np.bincount(idx[ring], minlength=1152) / np.count_nonzero(ring)
    return float(1.0 - np.sqrt(hi * ho).sum())


def _finish(mask_c: np.ndarray, clicks_c, lab_c, cfg: GrabCutConfig):
    """Open, keep the component at the clicks, remove the shadow, fill holes (all in the crop)."""
    import cv2

    m = cv2.morphologyEx(mask_c.astype(np.uint8), cv2.MORPH_OPEN, disk(1)) > 0
    m = component_at(m, clicks_c, radius=4) if clicks_c else _largest(m)
    sh = _shadow_part(lab_c, m, clicks_c, cfg)
    if cfg.remove_shadow and sh.any() and (m & ~sh).sum() > 0.3 * m.sum():
        m2 = m & ~sh
        m2 = cv2.morphologyEx(m2.astype(np.uint8), cv2.MORPH_OPEN, disk(2)) > 0
        m2 = component_at(m2, clicks_c, radius=4) if clicks_c else _largest(m2)
        if m2.any():
            m = m2
    return fill_holes(m), sh & ~m


def legacy_too_big(m: np.ndarray) -> bool:
    """A legacy mask over a third of the image or along an image side is the background."""
    return float(m.mean()) > 0.33 or border_run(m) > 0.35


def _largest(m: np.ndarray) -> np.ndarray:
    import cv2

    n, lab, st, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8))
    return lab == 1 + int(np.argmax(st[1:, cv2.CC_STAT_AREA])) if n > 1 else m


def _run_box(image: np.ndarray, box, prompt: Prompt, margin: float, cfg: GrabCutConfig):
    """GrabCut with ``box`` as the rectangle in a normalised crop; returns (mask, shadow, touch, crop, lab) in crop
    coordinates."""
    h, w = image.shape[:2]
    crop = _make_crop(w, h, box, margin, cfg.crop_px)
    sub = _resample(image, crop)
    lab = _lab(sub)
    rect = _rect_in_crop(crop, box, sub.shape[:2])
    clicks = [crop.to_crop(x, y) for x, y in prompt.positives]
    neg = [crop.to_crop(x, y) for x, y in prompt.negatives]
    half = 0.5 * max(rect[2] - rect[0], rect[3] - rect[1])
    init = _init_mask(lab, rect, clicks, neg, int(round(cfg.click_radius * half)) + 1)
    raw = _grabcut(sub, init, cfg)
    mask, shadow = _finish(raw, clicks, lab, cfg)
    found = mask.sum() > 3 * max(1, (init == 1).sum())  # more than the sure-foreground disks: an object
    return mask, shadow, _touch(mask, rect, crop, w, h), crop, lab, found


def _to_image(m_c: np.ndarray, crop: _Crop, shape) -> np.ndarray:
    """A crop mask back to a full-image ``(h, w) bool`` (linear resampling of the 0/1 mask, >= 0.5)."""
    import cv2

    out = np.zeros(shape, bool)
    size = (crop.x1 - crop.x0, crop.y1 - crop.y0)
    up = cv2.resize(m_c.astype(np.float32), size, interpolation=cv2.INTER_LINEAR)
    out[crop.y0:crop.y1, crop.x0:crop.x1] = up >= 0.5
    return out


def grabcut_result(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None,
                   config: GrabCutConfig | None = None) -> MaskResult:
    """One click / a box -> :class:`MaskResult` (mask, the removed cast shadow, confidence); see the module
    docstring. ``image``: ``(h, w, 3) uint8``; the plate is not used."""
    import cv2

    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)  # the crops are small: OpenCV's thread pool costs more than it saves
    try:
        return _grabcut_result(image, prompt, config or GrabCutConfig())
    finally:
        cv2.setNumThreads(threads)


def _box_result(image: np.ndarray, prompt: Prompt) -> MaskResult:
    """A box (with or without clicks): main@02b6871's GrabCut in the box (the robot's box in ``real2sim init``);
    confidence = IoU with the mask from the box grown by 5 % on every side (a person draws boxes loosely)."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = prompt.box
    if x0 <= 0 and y0 <= 0 and x1 >= w - 1 and y1 >= h - 1:
        raise SegmentationError("grabcut: the box covers the whole image; GrabCut needs some background outside it")
    mask = np.asarray(legacy_grabcut(image, prompt), bool)
    g = 0.05 * max(x1 - x0, y1 - y0)
    loose = Prompt(list(prompt.points), list(prompt.labels),
                   (max(0.0, x0 - g), max(0.0, y0 - g), min(w - 1.0, x1 + g), min(h - 1.0, y1 + g)))
    stab = iou(mask, np.asarray(legacy_grabcut(image, loose), bool))
    return MaskResult(mask, float(stab), shadow=None, details={"picked": "box", "box_stability": round(stab, 3)})


def noise_sigma(image: np.ndarray) -> float:
    """Sensor noise sigma (8-bit levels, of the grey image: independent per-channel noise ``s`` reads as about
    ``0.67 s``) of a ``(h, w, 3) uint8`` frame, from the frame alone: the robust (median) spread of a
    second-difference filter that cancels flat areas and linear ramps (Immerkaer's mask); edges and texture are the
    minority and do not move the median. The filter's responses are whole numbers (at most 16 x 255), so they are
    filtered in 16-bit integers and their median is read off their histogram, in float32 as ``np.median`` of them."""
    import cv2

    g = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    k = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32)
    r = np.abs(cv2.filter2D(g, cv2.CV_16S, k)[1:-1, 1:-1])
    if r.size == 0:
        return float("nan")  # under 3 px a side: no response (np.median's answer)
    return float(np.float32(_median_of_counts(np.bincount(r.ravel()))) / (0.6745 * 6.0))


def _median_of_counts(counts: np.ndarray) -> float:
    """The median of the whole numbers whose histogram is ``counts`` (``counts[v]``: how many equal ``v``): the
    middle one, or the mean of the two middle ones."""
    n = int(counts.sum())
    cum = np.cumsum(counts)
    hi = int(np.searchsorted(cum, n // 2, side="right"))  # the value at sorted index n // 2
    if n % 2:
        return float(hi)
    return 0.5 * (int(np.searchsorted(cum, n // 2 - 1, side="right")) + hi)


def blockiness(image: np.ndarray) -> tuple[float, float]:
    """JPEG block artefacts of a ``(h, w, 3) uint8`` frame: (ratio, step). ``ratio``: mean absolute neighbour
    difference across the 8-pixel block boundaries over that inside the blocks (about 1 for an uncompressed frame,
    1.6-2.4 at JPEG quality 25-45); ``step``: the excess difference at the boundaries (8-bit levels)."""
    import cv2

    g = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    dx, dy = np.abs(np.diff(g, axis=1)), np.abs(np.diff(g, axis=0))
    if dx.shape[1] < 16 or dy.shape[0] < 16:
        return 1.0, 0.0
    at = np.concatenate([dx[:, 7::8].ravel(), dy[7::8].ravel()])
    inside = np.concatenate([np.delete(dx, np.s_[7::8], axis=1).ravel(), np.delete(dy, np.s_[7::8], axis=0).ravel()])
    a, b = float(at.mean()), float(inside.mean())
    return a / max(b, 1e-6), max(a - b, 0.0)


def _denoised(image: np.ndarray, cfg: GrabCutConfig) -> tuple[np.ndarray, dict]:
    """The frame smoothed edge-preservingly when its noise is above ``denoise_above`` or it has JPEG blocks
    (:func:`blockiness` above ``deblock_above``): a bilateral filter whose colour range is ``denoise_k`` times the
    noise (or the blocks' step) and whose reach is scale-aware (the noise) or 2 px (the 8-px blocks). Returns
    (image, numbers for the details)."""
    import cv2

    sig = noise_sigma(image)
    ratio, step = blockiness(image) if cfg.deblock_above > 0 else (1.0, 0.0)
    info = {"noise_sigma": round(sig, 2), "blockiness": round(ratio, 2)}
    S = float(np.sqrt(image.shape[0] * image.shape[1]))
    if cfg.deblock_above > 0 and ratio > cfg.deblock_above:
        out = cv2.bilateralFilter(image, 0, cfg.deblock_k * max(sig, step), cfg.deblock_px)
    elif cfg.denoise_above > 0 and sig > cfg.denoise_above:
        out = cv2.bilateralFilter(image, 0, cfg.denoise_k * sig, max(1.0, 0.003 * S))
    else:
        return image, info
    return np.ascontiguousarray(out), info


def _grabcut_result(image: np.ndarray, prompt: Prompt, cfg: GrabCutConfig) -> MaskResult:
    if prompt.box is not None:
        return _box_result(image, prompt)
    h, w = image.shape[:2]
    if cfg.work_px and h * w > cfg.work_px:
        return _clicks_at_work_size(image, prompt, cfg)
    image, pre = _denoised(image, cfg)  # clicks only: the box path stays main@02b6871's
    if not (cfg.cues and cfg.parallel_cues and prompt.positives):
        return _from_clicks(image, prompt, pre, cfg, None)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        cues = pool.submit(_cue_masks, image, prompt, cfg)
        return _from_clicks(image, prompt, pre, cfg, cues)


def _clicks_at_work_size(image: np.ndarray, prompt: Prompt, cfg: GrabCutConfig) -> MaskResult:
    """One click's mask of a large frame: found at ``cfg.work_px`` pixels, resampled back, its outline placed again
    against the full-size frame (:func:`refine_edges` in a band as wide as a working pixel and a half)."""
    import cv2

    h, w = image.shape[:2]
    size, small, scale = work_size_prompt((h, w), cfg.work_px, prompt)
    res = _grabcut_result(cv2.resize(image, size, interpolation=cv2.INTER_AREA), small, replace(cfg, work_px=0))
    mask = upsample_mask(res.mask, (h, w))
    if cfg.refine and np.count_nonzero(mask) >= 20:
        band = max(1, int(round(1.5 * scale)))
        mask = refine_edges(image, mask, band=band, ring=2 * band)
        at = component_at(mask, prompt.positives, radius=max(3, int(round(2 * scale))))
        mask = fill_holes(at if at.any() else mask)  # (the support split may have left the click outside)
    shadow = upsample_mask(res.shadow, (h, w)) & ~mask if res.shadow is not None else None
    return MaskResult(mask, res.confidence, shadow=shadow, details={**res.details, "work_size": list(size)})


def _from_clicks(image: np.ndarray, prompt: Prompt, pre: dict, cfg: GrabCutConfig, cues) -> MaskResult:
    """One click's mask (see the module docstring); ``cues``: a future of :func:`_cue_masks` or ``None``."""
    h, w = image.shape[:2]
    S = float(np.sqrt(h * w))
    pos = prompt.positives
    tried = []
    ambiguous = False
    frame = _Frame(image)
    ov = frame.overlaps
    if pos:
        cx, cy = np.mean([p[0] for p in pos]), np.mean([p[1] for p in pos])
        spread = max([abs(p[0] - cx) for p in pos] + [abs(p[1] - cy) for p in pos])
        full, ok, pair, grew = [], [], [], []  # pair[i]: IoU of sizes i and i + 1
        for s in cfg.scales:
            r = s * S + spread
            box = (cx - r, cy - r, cx + r, cy + r)
            m, sh, touch, crop, lab, found = _run_box(image, box, prompt, r, cfg)
            tried.append((m, sh, touch, crop, lab, r))
            full.append(_to_image(m, crop, (h, w)))
            ok.append(found and touch <= cfg.touch_frac)
            grew.append(found)
            if len(full) > 1:
                pair.append(ov.iou(full[-1], full[-2]))
            k = cfg.early_exit
            if k and len(full) > k and all(ok[-k - 1:]) and all(p >= cfg.stable_iou for p in pair[-k:]):
                break  # the same whole mask in k + 1 growing boxes: larger boxes add nothing but time
        stabs = [max(pair[i - 1] if i > 0 else 0.0, pair[i] if i < len(pair) else 0.0) for i in range(len(full))]
        for i, (m, sh, touch, crop, lab, r) in enumerate(tried):  # a mask filling its box, or the image's
            inside = (min(w, cx + r) - max(0, cx - r)) * (min(h, cy + r) - max(0, cy - r))  # edges, is background
            if ov.area(full[i]) > cfg.max_box_fill * max(inside, 1.0) or border_run(full[i]) > cfg.max_border_run:
                ok[i] = False
        sol = [solidity(f) for f in full]
        con = [_contrast(t[4], t[0]) for t in tried]
        score = [stabs[i] * (0.5 + con[i]) * sol[i] for i in range(len(tried))]
        cand = [i for i in range(len(full)) if ok[i]] or list(range(len(full)))
        chosen = max(cand, key=lambda i: (score[i], i))
        stab = stabs[chosen]
        a = full[chosen]
        for j in range(len(full)):  # a larger compact whole mask holding this one: it may be a part (a lid)
            if (j != chosen and ok[j] and ov.area(full[j]) > 1.8 * ov.area(a)
                    and ov.inter(full[j], a) >= 0.85 * ov.area(a)
                    and sol[j] >= cfg.min_solidity):
                ambiguous = True
    else:
        raise SegmentationError("grabcut: the prompt marks no foreground")
    m_c, sh_c, touch, crop, lab, r = tried[chosen]
    mask = full[chosen]
    shadow = _to_image(sh_c, crop, (h, w)) & ~mask
    if cfg.refine and mask.sum() >= 20:
        band = max(1, int(round(1.5 / crop.scale)))
        mask = refine_edges(image, mask, band=band, ring=2 * band)
    mask = component_at(mask, pos, radius=max(3, int(round(2 / crop.scale)))) if pos else _largest(mask)
    mask = fill_holes(mask)
    picked = "sizes"
    conf = float(np.clip(stab, 0, 1) * (0.4 + 0.6 * con[chosen])) * (0.5 if ambiguous else 1.0)
    if cfg.cues:
        names, masks = cues.result() if cues is not None else _cue_masks(image, prompt, cfg)
        whole = [i for i in range(len(full)) if ok[i]]
        mask, shadow, picked, conf, ambiguous = _pick_cue(frame, prompt, mask, shadow, stab, ambiguous, conf,
                                                          [full[i] for i in whole], [sol[i] for i in whole],
                                                          full[chosen], cfg, names, masks)
    if conf < cfg.large_below and cfg.large_scales:
        large = _large_object(frame, (cx, cy), mask, cfg)
        if large is not None:
            mask, shadow, picked = large, np.zeros_like(large), "large surface"
            conf = min(conf * 2.0, LOW_CONFIDENCE - 0.01)  # one cue found it: better than the speck, still checked
    if cfg.grown_over_speck and picked == "sizes" and not grew[chosen] and any(grew):
        best = max((i for i in range(len(full)) if grew[i]), key=lambda i: (score[i], i))
        mask = fill_holes(component_at(full[best], pos, radius=max(3, int(round(2 / tried[best][3].scale)))))
        shadow = shadow & ~mask
        conf = min(conf, LOW_CONFIDENCE - 0.01)
        picked = "sizes, over a speck"
    steps = _finishing_steps(frame, (cx, cy), pos, conf, cfg, around=picked != "large surface")
    part_px, grew, support, continued = None, {}, {}, []
    for name, (new, info) in zip(steps, _steps_in_order(list(steps.values()), mask, cfg.parallel_cues)):
        if name == "whole around" and new is not None:
            part_px = int(np.count_nonzero(mask))  # what the usual boxes found: kept in the details for review
            mask, shadow, picked = new, np.zeros_like(new), "whole around"
        elif name in ("below", "handle", "line"):
            mask, shadow = _grown(mask, shadow, new, info, grew)
        elif name == "support":
            support = info
            if new is not None:
                support["removed_px"] = int((mask & ~new).sum())
                mask = new
        elif name == "continued":
            mask, continued = (mask if new is None else new), info
            shadow = shadow & ~mask if shadow is not None else None
    details = {"picked": picked, "part_of_larger": ambiguous, "box_half_px": round(float(r), 1), "touch": round(touch, 3), "scale_stability": round(float(stab), 3),
               "sizes_tried": len(tried), **pre, **({"support": support} if support else {}),
               **({"part_px": part_px} if part_px is not None else {}),
               **({"continued_past": continued} if continued else {}),
               **grew}
    return MaskResult(mask, conf, shadow=shadow, details=details)


def _finishing_steps(frame: _Frame, click, pos, conf: float, cfg: GrabCutConfig, around: bool) -> dict:
    """The steps after the pick, in order, by name: each ``fn(mask) -> (new mask or None when it leaves the mask
    as it is, info)``: the whole around a part, the side below a top (or the top above a side, or the mask
    completed: info is the details' key), the support taken along cut off, the cuts continued past, the handles,
    the thin line."""
    image, seed = frame.image, cfg.seed
    steps = {}
    if around:
        steps["whole around"] = lambda m: (_whole_around(frame, click, m, conf, cfg), None)
    if cfg.below:
        steps["below"] = lambda m: whole_around(image, m, pos, BelowConfig(seed=seed))  # (whole or None, its key)
    if cfg.support_split:
        steps["support"] = lambda m: without_support(image, m, pos, SupportConfig(seed=seed))
    if cfg.continue_cuts:
        def continued(m):
            out, sides = continue_past_cuts(image, m, pos, cfg.cut_ratio, cfg.continue_steps,
                                            max_border_run=cfg.max_border_run, seed=seed)
            return (out if sides else None), sides
        steps["continued"] = continued
    if cfg.handles:
        steps["handle"] = lambda m: (with_handle(image, m, HandleConfig(seed=seed)), "handle_px")
    if cfg.lines:
        # at a click itself (the clicks' mean can lie off a thin object)
        steps["line"] = lambda m: (with_line(image, m, pos[0]), "line_px")
    return steps


def _steps_in_order(steps: list, mask: np.ndarray, parallel: bool) -> list[tuple]:
    """``[fn(mask'), ...]`` of ``steps`` (each ``fn(mask) -> (new mask or None, info)``), each on the mask ``mask'``
    the ones before it left. ``parallel``: the steps still to run are started together, two threads at a time, on
    the mask as it is, and the ones after a step that changed it are started again on the new mask: the same
    results (the steps rarely change the mask; OpenCV's random state is per thread and seeded before every
    GrabCut) in about half the wall time on two free cores."""
    out = []
    if not parallel:
        for step in steps:
            out.append(step(mask))
            mask = mask if out[-1][0] is None else out[-1][0]
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        while len(out) < len(steps):
            ahead = [pool.submit(step, mask) for step in steps[len(out):]]
            for future in ahead:
                out.append(future.result())
                if out[-1][0] is not None:  # the mask changed: what was started after this step is stale
                    mask = out[-1][0]
                    for stale in ahead:
                        stale.cancel()
                    break
    return out


def _grown(mask: np.ndarray, shadow: np.ndarray | None, whole: np.ndarray | None, key: str, grew: dict):
    """``(mask, shadow)`` after a step that may grow the mask: ``whole`` (None: the step found nothing) replaces it,
    the shadow loses what the mask took, and ``grew[key]`` counts the pixels added (for the details)."""
    if whole is None:
        return mask, shadow
    grew[key] = int(np.count_nonzero(whole & ~mask))
    return whole, (shadow & ~whole if shadow is not None else None)


def _context_grabcut(image: np.ndarray, click, r: float, cfg: GrabCutConfig) -> np.ndarray:
    """Plain GrabCut from a square box of half-size ``r`` around ``click`` (everything in it probable foreground,
    no sure-foreground disk), the box plus ``context_margin * r`` of context around it (background) resampled to
    at most ``context_side`` pixels; the component at the click, holes filled, as a full-image ``(h, w) bool``;
    empty when the mask runs along more than ``touch_frac`` of the box's sides (the box cut a larger object)."""
    import cv2

    h, w = image.shape[:2]
    cx, cy = click
    g = r * (1.0 + cfg.context_margin)
    x0, y0 = int(max(0, np.floor(cx - g))), int(max(0, np.floor(cy - g)))
    x1, y1 = int(min(w, np.ceil(cx + g) + 1)), int(min(h, np.ceil(cy + g) + 1))
    f = min(1.0, cfg.context_side / max(x1 - x0, y1 - y0))
    size = (max(2, int(round((x1 - x0) * f))), max(2, int(round((y1 - y0) * f))))
    sub = image[y0:y1, x0:x1]
    sub = cv2.resize(sub, size, interpolation=cv2.INTER_AREA) if f < 1 else sub
    rx0, ry0 = int(max(0, (cx - r - x0) * f)), int(max(0, (cy - r - y0) * f))
    rx1, ry1 = int(min(size[0] - 1, (cx + r - x0) * f)), int(min(size[1] - 1, (cy + r - y0) * f))
    if rx1 - rx0 < 2 or ry1 - ry0 < 2 or (rx0 == 0 and ry0 == 0 and rx1 == size[0] - 1 and ry1 == size[1] - 1):
        return np.zeros((h, w), bool)
    m = np.zeros(sub.shape[:2], np.uint8)
    cv2.setRNGSeed(cfg.seed)
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    try:
        cv2.grabCut(np.ascontiguousarray(sub[..., ::-1]), m, (rx0, ry0, rx1 - rx0, ry1 - ry0), bgd, fgd,
                    cfg.context_iterations, cv2.GC_INIT_WITH_RECT)
    except cv2.error:
        return np.zeros((h, w), bool)
    fg = (m == cv2.GC_FGD) | (m == cv2.GC_PR_FGD)
    sides = []  # the box's sides inside the image: a mask along them was cut by the box (the object is larger)
    if cx - r > 0:
        sides.append(fg[ry0:ry1 + 1, min(rx0 + 1, rx1)])
    if cx + r < w - 1:
        sides.append(fg[ry0:ry1 + 1, max(rx1 - 1, rx0)])
    if cy - r > 0:
        sides.append(fg[min(ry0 + 1, ry1), rx0:rx1 + 1])
    if cy + r < h - 1:
        sides.append(fg[max(ry1 - 1, ry0), rx0:rx1 + 1])
    if sides and float(np.concatenate(sides).mean()) > cfg.touch_frac:
        return np.zeros((h, w), bool)
    up = cv2.resize(fg.astype(np.float32), (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR) >= 0.5
    out = np.zeros((h, w), bool)
    out[y0:y1, x0:x1] = up
    out = cv2.morphologyEx(out.astype(np.uint8), cv2.MORPH_OPEN, disk(1)) > 0
    return fill_holes(component_at(out, [click], radius=max(2, int(round(1 / f)))))


def _large_masks(frame: _Frame, click, scales, min_solidity: float, cfg: GrabCutConfig) -> list[np.ndarray]:
    """The masks of context boxes of half-size ``scales`` x the image's smaller side around ``click`` that may be
    an object: not empty, at most ``large_max_frac`` of the image, not along an image side, at least
    ``min_solidity`` compact."""
    h, w = frame.image.shape[:2]

    def cut(s: float) -> np.ndarray:
        return frame.context_cut(click, s * min(h, w), cfg)

    if cfg.parallel_cues and len(scales) > 1:  # the same masks (seeded per GrabCut, per thread), in less wall time
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:
            masks = list(pool.map(cut, scales))
    else:
        masks = [cut(s) for s in scales]
    out = []
    for m in masks:
        if not (m.sum() < 20 or m.mean() > cfg.large_max_frac or border_run(m) > cfg.max_border_run
                or solidity(m) < min_solidity):
            out.append(m)
    return out


def _best_outlined(frame: _Frame, masks, floor: float, min_edge: float, cfg: GrabCutConfig) -> np.ndarray | None:
    """Of ``masks``, the one with the largest outline edge x colour separation among those with an edge of at
    least ``min_edge`` and a separation above ``floor``; ``None`` if none."""
    grad, typical = frame.gradient
    best, best_score = None, 0.0
    for m in masks:
        edge, sep = _outline_edge(grad, typical, m, cfg), _separation(frame.bins, m)
        if edge >= min_edge and sep > floor and edge * sep > best_score:
            best, best_score = m, edge * sep
    return best


def _large_object(frame: _Frame, click, mask: np.ndarray, cfg: GrabCutConfig) -> np.ndarray | None:
    """When ``mask`` has no outline, the best mask of the ``large_scales`` context boxes around ``click`` that has a
    clear outline, is compact, not the image and tells its colours from its ring better than ``mask`` does;
    ``None`` when ``mask`` has an outline or none qualifies."""
    grad, typical = frame.gradient
    if mask.sum() >= 20 and _outline_edge(grad, typical, mask, cfg) >= cfg.large_max_edge:
        return None
    return _best_outlined(frame, _large_masks(frame, click, cfg.large_scales, cfg.min_solidity, cfg),
                          _separation(frame.bins, mask), cfg.large_min_edge, cfg)


def _whole_around(frame: _Frame, click, mask: np.ndarray, conf: float, cfg: GrabCutConfig) -> np.ndarray | None:
    """When ``mask`` (confidence ``conf``) is sure and large in the image, or unsure, the best mask of the
    ``whole_scales`` context boxes around ``click`` that holds it as a whole holds its part (see
    ``GrabCutConfig.whole_scales``; an unsure mask is tried against ``whole_scales_unsure``, and its outline must
    also lie on the box mask's, see ``whole_shared_outline``, unless it has none, see ``whole_plain_edge``);
    ``None`` if none does."""
    sure = conf >= cfg.large_below
    if not cfg.whole_scales or not mask.any():
        return None
    if (np.count_nonzero(mask) < cfg.whole_min_frac * mask.size) if sure else cfg.whole_shared_outline <= 0:
        return None
    grad, typical = frame.gradient
    plain = not sure and _outline_edge(grad, typical, mask, cfg) < cfg.whole_plain_edge
    scales = cfg.whole_scales if sure else cfg.whole_scales_unsure
    wholes = [m for m in _large_masks(frame, click, scales, cfg.whole_min_solidity, cfg)
              if _holds(frame.overlaps, m, mask, cfg.whole_min_growth, cfg.whole_max_growth if sure else np.inf)
              and (sure or _shared_outline(mask, m) >= cfg.whole_shared_outline
                   or (plain and _reach(grad, mask, m) >= cfg.whole_plain_reach))]
    floor = cfg.whole_min_separation * _separation(frame.bins, mask) - 1e-9
    return _best_outlined(frame, wholes, floor, cfg.large_min_edge, cfg) if wholes else None


def _reach(grad: np.ndarray, part: np.ndarray, whole: np.ndarray) -> float:
    """Fraction of the outline of ``whole`` within 1 % of the image's size (at least 2 px) of the region around
    ``part``: ``part`` and the pixels of ``whole`` 4-connected to it whose colour gradient ``grad`` is at most half
    the median on the outline of ``whole`` (``(h, w) bool`` masks; the region stops at an edge inside ``whole``)."""
    import cv2

    reach = max(2, int(round(0.01 * np.sqrt(part.size))))
    box = mask_box(part | whole, reach + 1)
    p, w, g = part[box], whole[box], grad[box]
    outline = w & ~erode(w, 1)
    if not outline.any():
        return 0.0
    free = w & (g <= 0.5 * float(np.median(g[outline])))
    _, labels = cv2.connectedComponents(free.astype(np.uint8), connectivity=4)
    touched = np.unique(labels[p & free])
    region = p | np.isin(labels, touched[touched > 0])
    return float(np.count_nonzero(outline & dilate(region, reach))) / float(np.count_nonzero(outline))


def _shared_outline(part: np.ndarray, whole: np.ndarray) -> float:
    """Fraction of the outline of ``part`` that lies within 1 % of the image's size (at least 2 px) of the
    outline of ``whole`` (both ``(h, w) bool``)."""
    reach = max(2, int(round(0.01 * np.sqrt(part.size))))
    box = mask_box(part | whole, reach + 1)
    p, w = part[box], whole[box]
    outline_p = p & ~erode(p, 1)
    near = dilate(w & ~erode(w, 1), reach)
    return float(np.count_nonzero(outline_p & near)) / max(1, int(np.count_nonzero(outline_p)))


def _holds(ov: MaskOverlaps, big: np.ndarray, small: np.ndarray, growth: float, max_growth: float = np.inf) -> bool:
    """``big`` holds ``small`` (85 % of it) and is ``growth`` to ``max_growth`` times its area."""
    a = ov.area(small)
    return bool(a > 0 and growth * a < ov.area(big) <= max_growth * a and ov.inter(big, small) >= 0.85 * a)


def _vote(near: list[tuple[np.ndarray, float]], ov: MaskOverlaps) -> np.ndarray:
    """The weighted pixel-wise majority of ``(mask, weight)`` pairs (weights > 0), ``(h, w) bool``: summed on the
    masks' common box (outside it no mask votes)."""
    out = np.zeros(near[0][0].shape, bool)
    boxes = [b for b in (ov.box(m) for m, _ in near) if b is not None]
    if boxes:
        box = (slice(min(b[0].start for b in boxes), max(b[0].stop for b in boxes)),
               slice(min(b[1].start for b in boxes), max(b[1].stop for b in boxes)))
        out[box] = np.sum([m[box] * a for m, a in near], axis=0) > 0.5 * sum(a for _, a in near)
    return out


def _cue_masks(image: np.ndarray, prompt: Prompt, cfg: GrabCutConfig) -> tuple[list[str], list[np.ndarray]]:
    """The other cues' names and ``(h, w) bool`` masks: the colour region (``legacy``) and the context boxes. They
    do not depend on the box sizes, so they can be cut beside them."""
    h, w = image.shape[:2]
    pos = prompt.positives
    cx, cy = np.mean([p[0] for p in pos]), np.mean([p[1] for p in pos])
    names, masks = [], []
    if cfg.legacy:
        names.append("colour region")
        masks.append(np.asarray(legacy_grabcut(image, prompt, LegacyConfig(max_side=cfg.legacy_side,
                                                                          iterations=cfg.legacy_iterations)), bool))
    for s in cfg.context_scales:
        names.append(f"context {s:g}")
        masks.append(_context_grabcut(image, (cx, cy), s * min(h, w), cfg))
    return names, masks


def _pick_cue(frame: _Frame, prompt: Prompt, mask, shadow, stab, ambiguous, conf, whole_sizes, whole_sol,
              chosen_full, cfg: GrabCutConfig, cue_names: list[str], cue_masks: list[np.ndarray]):
    """The chosen size's mask against the other cues' masks (colour region, context boxes).

    Every candidate is scored as support (IoU with the best-agreeing other candidate: an object is found by
    independent hypotheses, a leak or a fragment by one) x solidity x outline edge against the texture around it
    (:func:`_outline_edge`) x colour separation from a ring around it (:func:`_separation`), with
    ``GrabCutConfig``'s powers (``pick_score``), halved when a larger compact candidate holds it (a part: a lid, a label). The best-scored is taken; a part is replaced by the
    best-scored larger compact candidate holding it when that one is supported (a can, not its lid), and a whole
    is never replaced by one of its parts. ``whole_sizes``: the sizes' whole masks, ``whole_sol`` their solidities.
    Returns (mask, shadow, picked, confidence, part)."""
    pos = prompt.positives
    names, masks = ["sizes", *cue_names], [mask, *cue_masks]
    lab_full, ov = frame.lab, frame.overlaps
    valid = [i == 0 or (ov.area(m) >= 20 and not legacy_too_big(m)) for i, m in enumerate(masks)]
    n = len(masks)
    sup = [0.0] * n
    for i in range(n):
        others = [masks[j] for j in range(n) if j != i and valid[j]]
        others += [f for f in whole_sizes if i != 0 or f is not chosen_full]
        sup[i] = float(stab) if i == 0 else max([ov.iou(masks[i], o) for o in others] or [0.0])
    sol = [solidity(m) if valid[i] else 0.0 for i, m in enumerate(masks)]
    con = [_contrast(lab_full, m) if valid[i] else 0.0 for i, m in enumerate(masks)]
    kind = [nm.split()[0] for nm in names]  # sizes, colour, context: the generators
    sizes_con = [_contrast(lab_full, f) for f in whole_sizes]
    outlined = [(masks[k], kind[k]) for k in range(1, n) if valid[k] and con[k] >= cfg.whole_contrast]
    outlined += [(f, "sizes") for f, c in zip(whole_sizes, sizes_con) if c >= cfg.whole_contrast]

    def confirmed(m, k):  # agreement with another generator's mask that has an outline (a whole found twice, by
        return max([ov.iou(m, o) for o, ko in outlined if ko != k] or [0.0])  # independent cues, not one box's leak)

    pool = [(m, sol[i], confirmed(m, kind[i])) for i, m in enumerate(masks)
            if valid[i] and i > 0 and con[i] >= cfg.whole_contrast]
    pool += [(f, sf, confirmed(f, "sizes")) for f, sf, c in zip(whole_sizes, whole_sol, sizes_con)
             if c >= cfg.whole_contrast]
    by_colour = cfg.pick_score != "contrast"
    sep = [_separation(frame.bins, m) if valid[i] and by_colour else 0.0 for i, m in enumerate(masks)]

    by_sep = cfg.part_separation and by_colour
    pool_sep = [_separation(frame.bins, b) if by_sep else 0.0 for b, _, _ in pool]
    # a holder tells itself from its ring as a whole does (not the object and a neighbour beside it)
    part = [(i == 0 and ambiguous) or any(_holds(ov, b, masks[i], cfg.part_growth, cfg.max_growth)
                                          and bs >= cfg.min_solidity and bsup >= cfg.part_support
                                          and (not by_sep or bsep >= cfg.whole_separation * sep[i])
                                          for (b, bs, bsup), bsep in zip(pool, pool_sep)) for i in range(n)]

    def found_by_all(i):  # every generator gave a mask within found_by_all_iou of candidate i
        found = {kind[j] for j in range(n) if valid[j] and (j == i or ov.iou(masks[i], masks[j]) >= cfg.found_by_all_iou)}
        return len(found) == len(set(kind))

    if cfg.found_by_all_iou > 0:  # an object every generator found is not a part
        part = [p and not (valid[i] and found_by_all(i)) for i, p in enumerate(part)]
    if not by_colour:
        edge = con
        score = [sup[i] * (0.5 + con[i]) * sol[i] * (0.5 if part[i] else 1.0) if valid[i] else -1.0 for i in range(n)]
    else:
        grad, typical = frame.gradient
        edge = [_outline_edge(grad, typical, m, cfg) if valid[i] else 0.0 for i, m in enumerate(masks)]
        score = [sup[i] ** cfg.support_power * sol[i] ** cfg.solidity_power * (cfg.edge_floor + edge[i]) ** cfg.edge_power
                 * (cfg.separation_floor + sep[i]) ** cfg.separation_power * (0.5 if part[i] else 1.0)
                 if valid[i] else -1.0 for i in range(n)]
    best = max(range(n), key=lambda i: (score[i], -i))
    log.debug("cues %s", [(names[i], round(sup[i], 2), round(con[i], 2), round(edge[i], 2), round(sep[i], 2),
                           round(sol[i], 2), part[i], round(score[i], 2), int(masks[i].sum())) for i in range(n)])
    if part[best]:  # a part: the best-supported larger compact candidate holding it
        wholes = [i for i in range(n) if i != best and valid[i] and sup[i] >= cfg.stable_iou and con[i] >= cfg.whole_contrast
                  and sol[i] >= cfg.min_solidity and _holds(ov, masks[i], masks[best], cfg.part_growth, cfg.max_growth)
                  and sep[i] >= cfg.whole_separation * sep[best]]
        if wholes:
            best = max(wholes, key=lambda i: score[i] / (0.5 if part[i] else 1.0))
    if best != 0 and _holds(ov, masks[0], masks[best], cfg.part_growth, cfg.max_growth) and sol[0] >= cfg.min_solidity and not part[0] \
            and con[0] >= cfg.whole_contrast and confirmed(masks[0], "sizes") >= cfg.part_support:
        best = 0  # never a part of the whole the sizes found
    if cfg.consensus_iou > 0:
        pool_m = [masks[i] for i in range(n) if valid[i]] + [f for f in whole_sizes if f is not chosen_full]
        near = [(m, ov.iou(m, masks[best])) for m in pool_m]
        near = [(m, a ** cfg.consensus_power) for m, a in near if a >= cfg.consensus_iou]
        if len(near) >= 3:
            vote = fill_holes(component_at(_vote(near, ov), pos, radius=3))
            if vote.sum() >= 20:
                masks[best] = vote
                if best == 0:
                    mask, shadow = vote, shadow & ~vote
    if best == 0:  # the sizes' confidence (``conf``), halved when it is a part
        return mask, shadow, "sizes", conf * (0.5 if part[0] and not ambiguous else 1.0), part[0]
    conf = float(np.clip(sup[best], 0, 1) * (0.4 + 0.6 * con[best])) * (0.5 if part[best] else 1.0)
    return masks[best], np.zeros_like(masks[best]), names[best], conf, part[best]


def grabcut(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None,
            config: GrabCutConfig | None = None) -> np.ndarray:
    """GrabCut segmentation from clicks or a box (registered backend; the plate is not used): ``(h, w) bool``."""
    return grabcut_result(image, prompt, plate, config).mask
