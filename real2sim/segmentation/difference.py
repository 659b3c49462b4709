"""Frame-minus-plate differencing that adapts to the image: the strongest backend when a clean plate exists.

Steps (all thresholds come from the frame itself, every length scales with the image size):

1. **Exposure**: the plate is mapped to the frame's exposure by a robust per-channel gain and offset (an
   iteratively re-weighted fit over all pixels; the object is the minority, so it is rejected as outliers).
2. **Shading model**: a cast shadow multiplies the plate by a smooth factor ``s < 1`` (near-constant chroma, the
   plate's texture kept). Per pixel, ``s`` is the local least-squares ratio of frame to plate (a window of about
   1 % of the image), and the **residual** ``frame - s * plate`` is what shading cannot explain: colour
   (chroma) change and texture that is not the plate's. Lightness change is scored apart: a frame much brighter
   than the plate (``s > 1``), or darker than a shadow can make it (``s < min_shade``), is an object too.
3. **Noise**: the residuals' noise is estimated from the frame itself: robust (median-based) spread of the
   residual over all pixels, binned by the plate's local gradient, so compression, blur and sub-pixel
   misalignment at the plate's edges raise the threshold only where they act. Scores are residuals in units of
   that noise.
4. **Object evidence** ``O`` (residual beyond what a shadow's colour shift allows, brightening, deep darkening)
   and **shadow evidence** ``S`` (darkening explained by shading) per pixel.
5. **Hysteresis from the click**: strong change (``O > k_high``) near the click seeds the region, which grows
   through connected weak change (``O > k_low``), so a low-contrast half of an object joins its high-contrast half;
   shadow-only pixels never join. Holes are filled, speckles opened away (radius scaled with the object).
   **Misregistration**: a person-made plate is never pixel-perfect; strong change whose neighbourhood the plate
   shows a few pixels away (:func:`_explained`, up to ``explain_frac`` of the image size: a table's edge that is
   off) neither seeds nor is grown into.
   **Outline**: put at half contrast between the object's interior colours and the plate's
   (:func:`_refine_outline`), in a band as wide as the blur.
6. **Shadow mask**: shadow evidence with the same hysteresis, touching the object, outside it: returned as its own
   mask (:func:`difference_layers`), never part of the object.

**Large frames** (over ``DifferenceConfig.work_px`` pixels) are segmented resampled to that many pixels, the
size the method was tuned at, and the object's outline is placed again against the full-size frame.

:func:`difference_mask` keeps the old meaning (every pixel that differs from the plate, shadows included unless
``shadows=False``); :func:`difference` is the registered backend (the object mask at the prompt).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import numpy as np

from real2sim.core.imaging import (
    by_quantile_bins,
    channel_max,
    channel_mean,
    channel_min,
    channel_norm,
    channel_sum,
    component_at,
    dilate,
    disk,
    erode,
    fill_holes,
    inside_distance,
    iou,
    mask_box,
)
from real2sim.segmentation.core import (
    LOW_CONFIDENCE,
    MaskResult,
    Prompt,
    SegmentationError,
    outline_iou,
    upsample_mask,
    work_size_prompt,
)
from real2sim.segmentation.grabcut import noise_sigma
from real2sim.segmentation.touching import split_at_negatives

log = logging.getLogger(__name__)


@dataclass
class DifferenceConfig:
    """Differencing parameters. Thresholds are in units of the frame's own residual noise; lengths are fractions
    of the image size (``sqrt(h * w)``), so one configuration serves 320x256 and 1280x720 alike."""

    k_low: float = 4.0
    """Weak change: object evidence above this many noise sigmas (the region grows through it)."""
    k_high: float = 9.0
    """Strong change: object evidence above this many noise sigmas (seeds the region)."""
    min_shade: float = 0.35
    """A pixel darker than this fraction of the plate is an object, not a shadow."""
    shadow_half: float = 0.5
    """The shadow mask keeps the darkening at least this fraction of the shadow's depth (0: all of it)."""
    shadow_hue_shift: float = 0.12
    """Colour residual a shadow may have, as a fraction of its darkening or of its brightness, whichever is less
    (shadows are lit by bluer ambient light)."""
    blur_frac: float = 0.0015
    """Least Gaussian blur sigma applied to both images first (compression, demosaicing), fraction of ``sqrt(h * w)``."""
    target_noise: float = 2.0
    """The blur grows with the frame's noise so that the blurred difference's noise is about this (8-bit levels)."""
    max_blur_frac: float = 0.005
    """Most blur (fraction of ``sqrt(h * w)``): boundaries must stay sharp."""
    click_radius_frac: float = 0.02
    """A click this close to change (fraction of ``sqrt(h * w)``) counts as on it."""
    seed_frac: float = 0.1
    """Strong change within this distance of the click (fraction of ``sqrt(h * w)``), in the weak region at the
    click, seeds the region."""
    explain_frac: float = 0.06
    """A frame colour is explained by the plate when the plate shows it within this distance (fraction of
    ``sqrt(h * w)``; 33 px at 640x480): a person-made plate is never pixel-perfect, and at a table's or wall's edge
    it can be off by that much."""
    reach_frac: float = 0.6
    """Weak change joins the strong core up to this many times the core's size (``sqrt(area)``) away from it."""
    leak_open_frac: float = 0.06
    """Opening radius (fraction of the core's size) that removes thin leaks of the weak growth."""
    appendage_frac: float = 0.2
    """Parts of the mask thinner than this fraction of its inner radius (twice) are cut off."""
    refine_keep: float = 0.1
    """An outline refinement that keeps under this share of the mask (a speck) found no outline to move to (an object
    that reads as shade pixel by pixel, its few pixels of object evidence all edge): the mask stays as it was. A
    spoon's 1-2 px handle, whose change the blur spreads 3 px wide, legitimately keeps 0.3 of it."""
    close_frac: float = 0.03
    """Closing radius as a fraction of the object's size."""
    noise_floor: float = 0.6
    """Lowest noise sigma (8-bit levels): a synthetic noise-free frame must not make every quantisation step an object."""
    copied_share: float = 0.2
    """When at least this share of the unclipped pixels is identical in frame and plate, the plate is the frame
    itself with the object removed by hand (retouched, inpainted): the difference is zero there and says nothing
    about its noise where the plate was edited, so the frame's own sensor noise (measured on the frame alone) is the
    noise floor."""
    refine: bool = True
    """Put the outline at half contrast between the object's and the plate's colours (:func:`_refine_outline`)."""
    unmix: bool = True
    """Then put the outline at coverage 0.5 by unmixing object and plate colours (:func:`_refine_unmix`)."""
    unmix_band: float = 1.0
    """Band of the unmixing, in units of the blur width (``1 + blur_px + sharpness_px``)."""
    unmix_band_out: float = 1.5
    """Band of the unmixing outside the mask, in units of the blur width."""
    unmix_sigma: float = 1.5
    """Gaussian window of the object's and the shade's local means, in units of the inner band."""
    unmix_min_contrast: float = 6.0
    """Object and plate colours closer than this many noise sigmas are not unmixed."""
    work_px: int = 640 * 512
    """Frames with more pixels are segmented at this many (resampled by area; every length is a fraction of the
    image size, so the evidence is the same at that size: 640x512, the largest size of the benchmark the method
    was tuned on) and the mask's outline is placed again at full resolution against the frame itself; 0 = always
    at full resolution."""
    texture: bool = True
    """Darkening whose texture is not the plate's under a smooth shade is an object, not a shadow
    (:func:`_texture_evidence`)."""
    tex_fit_frac: float = 0.003
    """Gaussian window of the local shade fit (fraction of ``sqrt(h * w)``) for the texture test."""
    tex_ratio: float = 4.0
    """The texture test's residual energy at this many times its image median counts as weak change (``k_low``)."""
    tex_window_frac: float = 0.008
    """Gaussian window over which the texture test's residual energy is averaged (fraction of ``sqrt(h * w)``)."""
    exposure: bool = True
    """Match the plate to the frame's exposure first (robust per-channel gain and offset)."""
    dark_click_share: float = 0.25
    """A click on strong darkening at the plate's own colour (shadow evidence over ``k_high``: a brown spoon on a
    brown floor, a dark can's side on a dark drawer) whose object evidence is under this share of that darkening's
    component is on the darkening, not a speck of object beside it: the darkening joins the region (as it does when
    there is no object evidence at the click at all). 0 = only then."""
    colour_iterations: int = 4
    """GrabCut iterations of :func:`_colour_completion` (the object's parts that read as shadow or no change,
    found by their colour in the frame); 0 = off."""
    edit_iterations: int = 5
    """GrabCut iterations of :func:`_within_the_edit` (a plate that is the frame with the object removed by hand: the
    object is found inside the edited region by its colours against the table's around it); 0 = off."""
    handles: bool = True
    """Add the handles the cleanup and the outline refinements cut off (:func:`_with_handles`: a spoon's handle
    1-3 px wide at 320x256 is an appendage to them)."""
    handle_strong_share: float = 0.5
    """A handle is kept when at least this share of its pixels is strong change (``k_high``; a misregistered edge's
    strip or a neighbour's sliver reached through weak change is mostly weak)."""
    handle_min_elongation: float = 3.0
    """... and its longer principal spread is at least this many times the shorter."""
    handle_max_radius: float = 0.7
    """... its inscribed radius at most this many times the mask's, its mean width (area / length) at most the
    mask's inscribed radius."""
    whole_share: float = 0.8
    """The object under (or over) the mask that one click's :func:`segmentation.below.whole_below` and
    :func:`~segmentation.below.whole_above` cut finds is taken when at least this share of what it adds is change
    (:func:`_whole_along`: a dark can's body under its lit top reads as shadow pixel by pixel); 0 = off."""
    one_click_share: float = 0.8
    """A mask the confidence calls unsure (under :data:`segmentation.core.LOW_CONFIDENCE`) that the object under it
    did not complete (``whole_share``) takes the parts of one click's mask (the ``grabcut`` backend, no plate) that
    are change and not its shadow layer, when that mask holds at least this share of the plate mask and at least
    this share of it is change (:func:`_with_one_click`); 0 = off."""
    split_iterations: int = 3
    """GrabCut iterations of :func:`segmentation.touching.split_at_negatives` (a negative click on the change the positive one is on: two
    objects touching, both absent from the plate); 0 = remove that change whole, as a negative click off it does."""
    extra: dict = field(default_factory=dict)


@dataclass
class ChangeMaps:
    """Per-pixel change evidence of a frame against a plate (all ``(h, w) float32`` unless said)."""

    object: np.ndarray
    """Object evidence in noise sigmas."""
    shadow: np.ndarray
    """Shadow evidence (darkening explained by shading) in noise sigmas; 0 where the pixel is object-like."""
    shade: np.ndarray
    """Per-pixel frame/plate brightness ratio ``s``."""
    sigma: float
    """Median residual noise sigma (8-bit levels) over the image."""
    gains: np.ndarray
    """``(3, 2)`` per-channel gain and offset that map the plate to the frame's exposure."""
    info: dict = field(default_factory=dict)
    """Blur applied (``blur_px``) and sharpness matching (``sharpness_px``: plate blurred by it, negative: frame)."""
    frame: np.ndarray | None = None
    """``(h, w, 3) float32`` the frame as compared (blurred as the plate)."""
    plate: np.ndarray | None = None
    """``(h, w, 3) float32`` the plate as compared (at the frame's exposure and sharpness)."""
    sig_c: np.ndarray | None = None
    """``(h, w) float32`` chroma noise sigma per pixel."""
    shadow_pooled: np.ndarray | None = None
    """``(h, w) float32`` shadow evidence pooled over a window (local median; z-scores), 0 on object evidence."""
    copied: np.ndarray | None = None
    """``(h, w) bool`` where frame and plate are identical, when the plate is the frame with the object removed by
    hand (:func:`_copied`); None for a plate of its own."""


def _scale(shape) -> float:
    return float(np.sqrt(shape[0] * shape[1]))


def exposure_fit(image: np.ndarray, plate: np.ndarray, iterations: int = 4) -> np.ndarray:
    """``(3, 2)`` robust per-channel (gain, offset) with ``image ~ gain * plate + offset`` (float ``(h, w, 3)``
    inputs; fitted on a subsample, outliers beyond 3 robust sigmas re-weighted away, starting from no exposure
    change: a first fit over every pixel is pulled by a large object, and on a plain table's narrow cluster of colours
    it stays there, the object's pixels kept as inliers)."""
    step = max(1, int(np.sqrt(image.shape[0] * image.shape[1] / 40000)))
    a = image[::step, ::step].reshape(-1, 3).astype(np.float64)
    b = plate[::step, ::step].reshape(-1, 3).astype(np.float64)
    ok = (channel_max(b) < 250) & (channel_max(a) < 250) & (channel_min(b) > 3)  # clipped pixels tell nothing about the gain
    a, b = a[ok], b[ok]
    out = np.tile([1.0, 0.0], (3, 1))
    if len(a) < 100:
        return out
    w = _inliers(a - b - np.median(a - b, axis=0))  # the start: no exposure change (the common case) but an offset
    for _ in range(iterations):
        res = np.empty_like(a)
        for c in range(3):
            A = np.stack([b[w, c], np.ones(w.sum())], 1)
            g, o = np.linalg.lstsq(A, a[w, c], rcond=None)[0]
            out[c] = (g, o)
            res[:, c] = a[:, c] - (g * b[:, c] + o)
        w = _inliers(res)
        if w.sum() < 50:
            break
    g = out[:, 0]
    if np.any(g < 0.3) or np.any(g > 3):  # not an exposure change: keep the plate as it is
        return np.tile([1.0, 0.0], (3, 1))
    return out


def _inliers(res: np.ndarray) -> np.ndarray:
    """``(n,) bool``: the ``(n, 3)`` residuals within 3 robust sigmas (+2 levels) of the fit."""
    r = channel_norm(res)
    return r < 3 * max(1.4826 * np.median(r) / 1.5, 0.5) + 2


def _raw_noise(I: np.ndarray, P: np.ndarray, measured: np.ndarray | None = None) -> float:
    """Robust noise sigma (8-bit levels) of ``I - P`` (float ``(h, w, 3)``): the spread of the difference of
    horizontal neighbours' differences (texture and smooth change cancel), median over channels; over the pixel
    pairs both ``measured`` (``(h, w) bool``, None: all) when there are any."""
    step = max(1, int(np.sqrt(I.shape[0] * I.shape[1] / 60000)))
    d = (I - P)[::step]
    dd = d[:, 1:] - d[:, :-1]
    if measured is not None:
        m = measured[::step]
        pairs = m[:, 1:] & m[:, :-1]
        if pairs.any():
            dd = dd[pairs]
    dd = dd.reshape(-1, 3)
    mad = np.median(np.abs(dd - np.median(dd, axis=0)), axis=0)
    return float(np.median(1.4826 * mad / np.sqrt(2)))


def _copied(image: np.ndarray, plate: np.ndarray, unclipped: np.ndarray, cfg: DifferenceConfig) -> np.ndarray | None:
    """``(h, w) bool`` where frame and plate (``(h, w, 3) uint8``) are identical, when that is at least
    ``copied_share`` of the ``unclipped`` pixels (:func:`_unclipped`; the plate is the frame with the object removed
    by hand); else None. Clipped pixels are left out of the share: black is black, white white, in any two frames,
    and a dark frame's crushed shadows are identical without any copy."""
    same = (image == plate).all(-1)
    n = np.count_nonzero(unclipped)
    return same if n and np.count_nonzero(same & unclipped) >= cfg.copied_share * n else None


def _unclipped(image: np.ndarray, plate: np.ndarray) -> np.ndarray:
    """``(h, w) bool``: pixels with no channel at 0 or 255 in frame or plate (``(h, w, 3) uint8``). A clipped
    pixel reads the same in any two frames: its difference says nothing about the noise or a copy."""
    return (channel_min(image) > 0) & (channel_max(image) < 255) & (channel_min(plate) > 0) & (channel_max(plate) < 255)


def _noise_floor(image: np.ndarray, copied: np.ndarray | None, cfg: DifferenceConfig) -> float:
    """The least noise sigma (8-bit levels, per channel) of frame (``(h, w, 3) uint8``) minus plate:
    ``noise_floor``, or, when the plate is a copy of the frame outside an edited region (``copied``, from
    :func:`_copied`), the frame's own sensor noise."""
    if copied is None:
        return cfg.noise_floor
    return max(cfg.noise_floor, noise_sigma(image) / 0.67)  # grey noise reads as 0.67 x the per-channel noise


def _blur_gain(sigma: float) -> float:
    """How much a Gaussian blur of ``sigma`` px leaves of white noise's sigma (1 / (2 sqrt(pi) sigma), at most 1)."""
    return float(min(1.0, 1.0 / (2 * np.sqrt(np.pi) * sigma))) if sigma > 0 else 1.0


def _binned_sigma(values: np.ndarray, key: np.ndarray, floor: float, factor: float, bins: int = 12,
                  measured: np.ndarray | None = None) -> np.ndarray:
    """Noise sigma per pixel: robust spread (median of ``|values|`` / ``factor``) in quantile bins of ``key``,
    non-decreasing in ``key``, interpolated per pixel. ``values``, ``key``: ``(h, w)``; the statistics over the
    ``measured`` pixels (``(h, w) bool``, None: all) when there are any."""
    step = max(1, int(np.sqrt(values.size / 60000)))
    v, k = _sampled(values, key, step, measured)
    v = np.abs(v)
    centres, sig = by_quantile_bins(k, lambda sel: float(np.median(v[sel]) / factor), bins, 30)
    if not centres:
        return np.full(values.shape, max(floor, float(np.median(v) / factor)), np.float32)
    sig = np.maximum.accumulate(np.maximum(np.array(sig), floor))
    return np.interp(key, centres, sig).astype(np.float32)


def match_sharpness(I: np.ndarray, P: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Blur whichever of frame and plate (float ``(h, w, 3)``) is sharper so that both have the same blur (motion,
    focus, a median plate): the Gaussian sigma (px, negative = the frame was blurred) that minimises the median
    difference at the plate's edges (the 20 % of pixels with the strongest gradient)."""
    import cv2

    step = max(1, int(scale / 300))
    gray = channel_mean(P[::step, ::step])
    g = np.abs(np.diff(gray, axis=1, prepend=gray[:, :1])) + np.abs(np.diff(gray, axis=0, prepend=gray[:1]))
    edges = g >= np.quantile(g, 0.8)
    if not edges.any():
        return I, P, 0.0
    unit = scale / 550.0
    ey, ex = np.nonzero(edges)
    at_edges = (ey * step) * I.shape[1] + ex * step

    def edge_px(x):
        return np.take(np.ascontiguousarray(x).reshape(-1, 3), at_edges, axis=0)

    def err(a, b):
        return float(np.median(channel_sum(np.abs(a - b))))

    I_e, P_e = edge_px(I), edge_px(P)
    best, best_b, out = err(I_e, P_e), 0.0, (I, P)
    for b in (0.6, 1.0, 1.5, 2.2, 3.2):
        sig = b * unit
        Pb = cv2.GaussianBlur(P, (0, 0), sig)
        e = err(I_e, edge_px(Pb))
        if e < 0.97 * best:
            best, best_b, out = e, sig, (I, Pb)
        Ib = cv2.GaussianBlur(I, (0, 0), sig)
        e = err(edge_px(Ib), P_e)
        if e < 0.97 * best:
            best, best_b, out = e, -sig, (Ib, P)
    return out[0], out[1], best_b


def _sampled(values: np.ndarray, key: np.ndarray, step: int, measured: np.ndarray | None):
    """``values`` and ``key`` (``(h, w)``) at every ``step``-th row and column, flat, where ``measured`` (None: all)
    when it holds any of them."""
    v, k = values[::step, ::step], key[::step, ::step]
    m = measured[::step, ::step] if measured is not None else None
    return (v[m], k[m]) if m is not None and m.any() else (v.ravel(), k.ravel())


def _binned_stats(values: np.ndarray, key: np.ndarray, bins: int = 10,
                  measured: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel robust centre (median) and spread (1.4826 MAD) of ``values`` in quantile bins of ``key``
    (``(h, w)`` each), interpolated; the spread is non-decreasing in ``key``. The statistics over the ``measured``
    pixels (``(h, w) bool``, None: all) when there are any."""
    step = max(1, int(np.sqrt(values.size / 60000)))
    v, k = _sampled(values, key, step, measured)

    def centre_and_spread(sel):
        m = float(np.median(v[sel]))
        return m, 1.4826 * float(np.median(np.abs(v[sel] - m)))

    centres, stats = by_quantile_bins(k, centre_and_spread, bins, 30)
    med, mad = [m for m, _ in stats], [a for _, a in stats]
    if not centres:
        m = float(np.median(v))
        return np.full(values.shape, m, np.float32), np.full(values.shape, 1.4826 * float(np.median(np.abs(v - m))) + 1e-6, np.float32)
    med, mad = np.maximum.accumulate(np.array(med)), np.maximum.accumulate(np.maximum(np.array(mad), 1e-6))
    return np.interp(key, centres, med).astype(np.float32), np.interp(key, centres, mad).astype(np.float32)


def _local_median(x: np.ndarray, k: int, lo: float, hi: float) -> np.ndarray:
    """Median of ``x`` (``(h, w)`` float) over a ``k x k`` window, quantised to 255 levels between ``lo`` and ``hi``
    (cv2's median is fast for any window on 8-bit images only). A median, not a mean: an object's change does not
    spill into the shadow beside it."""
    import cv2

    q = np.clip(np.rint((x - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)
    return (lo + cv2.medianBlur(q, k).astype(np.float32) * ((hi - lo) / 255.0)).astype(np.float32)


def _texture_evidence(I: np.ndarray, P: np.ndarray, chroma_excess: np.ndarray, key: np.ndarray, S: float,
                      cfg: "DifferenceConfig", cand: np.ndarray | None = None,
                      measured: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Evidence, pooled over a window, that darkening is not a shadow; ``(h, w)`` float32 z-scores (robust, against
    the same statistic over the whole image binned by ``key``, the plate's texture: the change is the minority).

    - **texture**: a cast shadow keeps the plate's texture (``I ~ s * P`` with ``s`` smooth), a dark object of the
      plate's colour replaces it with its own. ``s`` is the median of the per-pixel ratio in a small window (it
      keeps a shadow's edge); the residual along the plate's colour (and across it, less its local median: a real
      shadow's light is bluer) is the texture the shade cannot explain. Its energy's local median, as a ratio to
      the image's median energy there, in z-scores (only ratios above 1 count).
    - **pooled colour**: the per-pixel colour change beyond what a shadow's colour shift allows
      (``chroma_excess``, in noise sigmas), median over the window: noise a pixel cannot see above, a window can.
    """
    import cv2

    kw = max(3, 2 * int(round(cfg.tex_window_frac * S)) + 1)
    k = 5 if S >= 400 else 3
    PP = np.maximum(channel_sum(P * P), 1.0)
    s_px = (channel_sum(I * P) / PP).astype(np.float32)
    d = (I - cv2.medianBlur(s_px, k)[..., None] * P).astype(np.float32)
    ph = P / np.sqrt(PP)[..., None]
    along = channel_sum(d * ph)
    perp = (d - along[..., None] * ph).astype(np.float32)
    e = along ** 2 + channel_sum((perp - cv2.medianBlur(perp, k)) ** 2)
    e0 = max(float(np.median(e if measured is None else e[measured])), 1e-3)
    le = np.log2(e / e0 + 1e-6)
    E, med, spread = _pooled(le, cand, key, kw, -8.0, 8.0, measured)
    tex = np.minimum((E - med) / spread, cfg.k_low * np.maximum(np.exp2(E - med) - 1, 0) / (cfg.tex_ratio - 1))
    C, med, spread = _pooled(chroma_excess, cand, key, kw, -16.0, 48.0, measured)
    return tex.astype(np.float32), ((C - med) / spread).astype(np.float32)


def _pooled(x: np.ndarray, cand: np.ndarray | None, key: np.ndarray, kw: int, lo: float, hi: float,
            measured: np.ndarray | None = None):
    """Local median of ``x`` over ``kw x kw`` (pixels outside ``cand``, the clear change, count as 0: neutral) and
    its robust per-pixel centre and spread over the (``measured``) image, binned by ``key``:
    ``(pooled, centre, spread)``."""
    if cand is not None:
        x = np.where(cand, x, 0.0)
    X = _local_median(x, kw, lo, hi)
    med, spread = _binned_stats(X, key, measured=measured)
    return X, med, spread


def _blur_both(I: np.ndarray, P: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Frame and plate (float ``(h, w, 3)``) blurred alike by ``sigma`` px against the noise (not under 0.4 px)."""
    import cv2

    if sigma < 0.4:
        return I, P
    return cv2.GaussianBlur(I, (0, 0), sigma), cv2.GaussianBlur(P, (0, 0), sigma)


def _at_exposure(P: np.ndarray, gains: np.ndarray, I: np.ndarray, plate: np.ndarray) -> np.ndarray:
    """The plate ``P`` (float ``(h, w, 3)``: ``plate`` as float, blurred as the frame was) at the frame's
    exposure (``(3, 2)`` per-channel gain and offset) as the frame ``I`` (float ``(h, w, 3)``) would read it: at
    least 1 and at most 255
    (a brighter frame clips where the plate brought to its exposure passes 255: read beyond it, the clipped channel
    is a change there), and raised to the frame where ``plate`` (``(h, w, 3) uint8``) clipped at 255 and the frame
    is brighter than the prediction (the plate says only "at least 255" there: a window, a lamp, which a darker frame
    shows at a level the plate could not)."""
    P = np.clip(P * gains[:, 0].astype(np.float32) + gains[:, 1].astype(np.float32), 1.0, 255.0)
    clipped = plate >= 255
    if not clipped.any():
        return P
    return np.where(clipped & (I > P), I, P).astype(np.float32)


def change_maps(image: np.ndarray, plate: np.ndarray, cfg: DifferenceConfig | None = None) -> ChangeMaps:
    """Object and shadow evidence of ``image`` against ``plate`` (both ``(h, w, 3) uint8``): see the module
    docstring, steps 1-4."""
    import cv2

    cfg = cfg or DifferenceConfig()
    S = _scale(image.shape)
    measured = _unclipped(image, plate)
    copied = _copied(image, plate, measured, cfg)
    floor = _noise_floor(image, copied, cfg)
    measured = None if measured.all() else measured  # (None: the statistics over every pixel, as they always were)
    I = image.astype(np.float32)
    P = plate.astype(np.float32)
    I, P, sharp = match_sharpness(I, P, S)
    raw = max(_raw_noise(I, P, measured), floor)
    sb = max(cfg.blur_frac * S, min(raw / (2 * np.sqrt(np.pi) * cfg.target_noise), cfg.max_blur_frac * S))
    I, P = _blur_both(I, P, sb)
    gains = exposure_fit(I, P) if cfg.exposure else np.tile([1.0, 0.0], (3, 1))
    P = _at_exposure(P, gains, I, plate)
    norm_p = channel_norm(P)
    ph = P / norm_p[..., None]
    along = channel_sum(I * ph)
    lum_change = along - norm_p  # signed brightness change along the plate's colour (8-bit levels)
    s_px = along / norm_p  # brightness ratio frame / plate
    chroma = channel_norm(I - along[..., None] * ph)  # colour change (2-d, across the plate's colour)
    # noise, binned by the plate's gradient (edges: blur, compression, misalignment)
    gray = channel_mean(P)
    gx, gy = cv2.Sobel(gray, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(gray, cv2.CV_32F, 0, 1, ksize=3)
    grad = cv2.GaussianBlur(np.sqrt(gx * gx + gy * gy), (0, 0), 1.0)
    floor = floor * _blur_gain(sb)  # the frame's own noise after the blur both are given
    # |2-d gaussian| has median 1.18 sigma
    sig_c = _binned_sigma(chroma, grad, max(cfg.noise_floor, floor), 1.1774, measured=measured)
    sig_l = _binned_sigma(lum_change, grad, max(cfg.noise_floor, floor), 0.6745, measured=measured)
    darkening = np.maximum(-lum_change, 0)
    allowed = cfg.shadow_hue_shift * np.minimum(channel_norm(I), darkening)
    colour = np.maximum(chroma - allowed, 0) / sig_c
    bright = np.maximum(lum_change, 0) / sig_l
    deep = np.maximum(cfg.min_shade - s_px, 0) * norm_p / sig_l
    obj = np.maximum(np.maximum(colour, bright), deep).astype(np.float32)
    dark_z = darkening / sig_l
    # the texture tests weigh change against the same statistics over the image: on a copied plate the image is
    # unchanged but for the edit, and those statistics are zero
    texture = cfg.texture and copied is None
    if texture:
        # darkening whose texture or pooled colour is not a shadow's is an object (the strong change is neutral in
        # the pooling: it must not spill into the shadow beside it)
        tex, col = _texture_evidence(I, P, (chroma - allowed) / sig_c, grad, S, cfg, obj < cfg.k_high, measured)
        obj = np.where(dark_z > cfg.k_low, np.maximum(obj, np.maximum(tex, col)), obj).astype(np.float32)
    shadow = np.where(obj < cfg.k_low, dark_z, 0).astype(np.float32)
    pooled = None
    if texture:  # a faint shadow on a dark table in a noisy frame: a window sees it where a pixel cannot
        kw = max(3, 2 * int(round(cfg.tex_window_frac * S)) + 1)
        X, med, spread = _pooled(np.clip(dark_z, -16, 48), obj < cfg.k_low, grad, kw, -16.0, 48.0, measured)
        pooled = np.where(obj < cfg.k_low, np.maximum((X - med) / spread, 0), 0).astype(np.float32)
    return ChangeMaps(obj, shadow, s_px.astype(np.float32), float(np.median(sig_c)), gains,
                      {"blur_px": round(float(sb), 2), "sharpness_px": round(sharp, 2)},
                      frame=I, plate=P, sig_c=sig_c, shadow_pooled=pooled, copied=copied)


def _hysteresis(weak: np.ndarray, strong: np.ndarray) -> np.ndarray:
    """Components of ``weak`` that contain a ``strong`` pixel (``(h, w) bool`` -> ``(h, w) bool``)."""
    import cv2

    n, lab = cv2.connectedComponents(weak.astype(np.uint8), connectivity=8)
    keep = np.zeros(n, bool)
    keep[np.unique(lab[strong & weak])] = True
    keep[0] = False
    return keep[lab]


def difference_mask(image: np.ndarray, plate: np.ndarray, cfg: DifferenceConfig | None = None,
                    shadows: bool = True) -> np.ndarray:
    """Every pixel that differs from the plate (all objects; their shadows too unless ``shadows=False``), with
    hysteresis on the frame's own noise and a light opening. ``(h, w, 3) uint8`` x2 -> ``(h, w) bool``."""
    cfg = cfg or DifferenceConfig()
    image, plate = np.asarray(image), np.asarray(plate)
    if image.dtype != np.uint8:
        image = np.clip(np.rint(image * 255), 0, 255).astype(np.uint8)
    if plate.dtype != np.uint8:
        plate = np.clip(np.rint(plate * 255), 0, 255).astype(np.uint8)
    ch = change_maps(image, plate, cfg)
    score = np.maximum(ch.object, ch.shadow) if shadows else ch.object
    m = _hysteresis(score > cfg.k_low, score > cfg.k_high)
    return _opened_by(m, max(1, int(round(0.002 * _scale(image.shape)))))


def _box_mask(shape, box) -> np.ndarray:
    h, w = shape
    out = np.zeros((h, w), bool)
    x0, y0, x1, y1 = box
    out[max(0, int(np.floor(y0))):int(np.ceil(y1)) + 1, max(0, int(np.floor(x0))):int(np.ceil(x1)) + 1] = True
    return out


def _geodesic_grow(seed: np.ndarray, allowed: np.ndarray, reach: int) -> np.ndarray:
    """Pixels of ``allowed`` within ``reach`` 8-connected steps of ``seed`` inside ``allowed`` (``(h, w) bool``)."""
    import cv2

    if not seed.any():
        return seed
    ys, xs = np.nonzero(allowed | seed)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    a = (allowed | seed)[y0:y1, x0:x1].astype(np.uint8)
    cur = seed[y0:y1, x0:x1].astype(np.uint8)
    k = np.ones((3, 3), np.uint8)
    for _ in range(reach):
        nxt = cv2.dilate(cur, k) & a
        if np.array_equal(nxt, cur):
            break
        cur = nxt
    out = np.zeros_like(seed)
    out[y0:y1, x0:x1] = cur > 0
    return out


def _explained(ch: ChangeMaps, region: np.ndarray, cfg: DifferenceConfig) -> np.ndarray:
    """Pixels of ``region`` (``(h, w) bool``) whose neighbourhood (a patch of about 1 % of the image size) the plate
    shows, with the same shading, within ``explain_frac`` of the image size: a misregistered plate (a table's edge
    a few pixels off), not an object. Patches, not single colours, so that an object in the plate's colours is not
    explained by some pixel of a textured plate. Computed at half resolution on a grid of shifts; ``(h, w) bool``."""
    import cv2

    h, w = region.shape
    ys, xs = np.nonzero(region)
    if not len(ys):
        return region.copy()
    S = _scale((h, w))
    D = cfg.explain_frac * S
    f = 2 if S >= 200 else 1
    Dq = int(np.ceil(D / f))
    y0, y1 = max(0, ys.min() - 2), min(h, ys.max() + 3)
    x0, x1 = max(0, xs.min() - 2), min(w, xs.max() + 3)
    hq, wq = max(1, (y1 - y0) // f), max(1, (x1 - x0) // f)
    I = cv2.resize(ch.frame[y0:y1, x0:x1], (wq, hq), interpolation=cv2.INTER_AREA)
    py0, py1, px0, px1 = max(0, y0 - Dq * f), min(h, y1 + Dq * f), max(0, x0 - Dq * f), min(w, x1 + Dq * f)
    P = cv2.resize(ch.plate[py0:py1, px0:px1], (max(1, (px1 - px0) // f), max(1, (py1 - py0) // f)),
                   interpolation=cv2.INTER_AREA)
    P = cv2.copyMakeBorder(P, Dq, Dq, Dq, Dq, cv2.BORDER_REFLECT)
    oy, ox = Dq + (y0 - py0) // f, Dq + (x0 - px0) // f  # where the crop's origin lies in P
    sig = float(np.median(ch.sig_c[ys, xs]))
    tol2 = (cfg.k_low * sig) ** 2
    k = max(3, int(round(0.01 * S / f)) | 1)
    step = max(1, int(round(Dq / 8)))
    best = np.full((hq, wq), np.inf, np.float32)
    for dy in range(-Dq, Dq + 1, step):
        for dx in range(-Dq, Dq + 1, step):
            if dx * dx + dy * dy > Dq * Dq:
                continue
            Pd = P[oy + dy:oy + dy + hq, ox + dx:ox + dx + wq]
            if Pd.shape[:2] != (hq, wq):
                continue
            np.minimum(best, cv2.blur(channel_sum((I - Pd) ** 2), (k, k)), out=best)
    out = np.zeros((h, w), bool)
    out[y0:y0 + hq * f, x0:x0 + wq * f] = np.repeat(np.repeat(best < tol2, f, 0), f, 1)
    return out & region


def _component_near(m: np.ndarray, points, radius: int) -> np.ndarray:
    """Union of the components of ``m`` (``(h, w) bool``) under the points; for a point off ``m``, the component
    that covers most of the disk of ``radius`` around it (the change the click is on, not the nearest speck)."""
    import cv2

    n, lab = cv2.connectedComponents(m.astype(np.uint8), connectivity=8)
    h, w = m.shape
    keep = set()
    for x, y in points:
        xi, yi = min(max(int(round(x)), 0), w - 1), min(max(int(round(y)), 0), h - 1)
        if lab[yi, xi]:
            keep.add(int(lab[yi, xi]))
            continue
        y0, y1, x0, x1 = max(0, yi - radius), min(h, yi + radius + 1), max(0, xi - radius), min(w, xi + radius + 1)
        yy, xx = np.mgrid[y0:y1, x0:x1]
        win = lab[y0:y1, x0:x1][(yy - yi) ** 2 + (xx - xi) ** 2 <= radius * radius]
        win = win[win > 0]
        if len(win):
            keep.add(int(np.bincount(win).argmax()))
    return np.isin(lab, list(keep)) if keep else np.zeros((h, w), bool)


def _grow_from_prompt(weak: np.ndarray, strong: np.ndarray, prompt: Prompt, radius: int,
                      cfg: DifferenceConfig, ch: ChangeMaps | None = None) -> np.ndarray:
    """Hysteresis from the prompt: the strong change near the clicks (within ``seed_frac`` of the image size,
    inside the weak region at the click) and the strong regions it touches, grown through weak change by at most
    ``reach_frac`` of its size; thin leaks of that growth (a neighbour) are opened away. Strong change whose colour the
    plate shows nearby (:func:`_explained`: a misregistered plate's band along a table edge) neither seeds nor is
    grown into. Box only: the largest strong region in the box, grown the same way. ``(h, w) bool`` in and out."""
    import cv2

    h, w = weak.shape
    pos = prompt.positives
    band = np.zeros((h, w), bool)
    if pos:
        near = np.zeros((h, w), np.uint8)
        r0 = max(radius, int(round(cfg.seed_frac * _scale((h, w)))))
        for x, y in pos:
            cv2.circle(near, (int(round(x)), int(round(y))), r0, 1, -1)
        comp = _component_near(weak, pos, radius)
        on_weak = any(weak[min(max(int(round(y)), 0), h - 1), min(max(int(round(x)), 0), w - 1)] for x, y in pos)
        if ch is not None and not on_weak:
            # a click on darkening at the plate's colour (the dark face of a cube): the object is the change that
            # darkening touches near the click
            sh_at = component_at(ch.shadow > cfg.k_low, pos, radius=radius) & (near > 0)
            if sh_at.any():
                comp |= _hysteresis(weak, dilate(sh_at, 1))
        if ch is not None and ch.frame is not None:
            band = _explained(ch, strong & comp, cfg)
            strong = strong & ~band
        seed = strong & comp & (near > 0)
        core = _hysteresis(strong, seed)
        if not core.any():
            core = comp & (near > 0)
    else:
        n, lab, st, _ = cv2.connectedComponentsWithStats(strong.astype(np.uint8))
        core = lab == 1 + int(np.argmax(st[1:, cv2.CC_STAT_AREA])) if n > 1 else np.zeros((h, w), bool)
    if not core.any():
        return core
    size = np.sqrt(core.sum())
    grown = _geodesic_grow(core, weak, max(2, int(round(cfg.reach_frac * size))))
    ro = max(1, int(round(cfg.leak_open_frac * size)))
    opened = _opened_by(grown & ~band, ro)
    return core | opened


def _hull(m: np.ndarray) -> np.ndarray:
    """Convex hull of a ``(h, w) bool`` mask, filled."""
    import cv2

    pts = cv2.findNonZero(m.astype(np.uint8))
    out = np.zeros(m.shape, np.uint8)
    if pts is not None:
        cv2.fillConvexPoly(out, cv2.convexHull(pts), 1)
    return out > 0


def _clean(m: np.ndarray, cfg: DifferenceConfig, points, dark: np.ndarray | None = None) -> np.ndarray:
    """Close (radius scaled to the object), take in the darkening inside the object's convex hull (the dark,
    plate-coloured parts of an object look like shadow pixel by pixel; a cast shadow reaches out of the hull), fill
    holes, cut thin appendages (thinner than 0.4 x the object's inner radius: a plate's misaligned edge, a
    neighbour's sliver) and keep the component(s) at the clicks."""
    import cv2

    if not m.any():
        return m
    size = np.sqrt(m.sum())
    rc = int(round(cfg.close_frac * size))
    m8 = m.astype(np.uint8)
    if rc > 0:
        m8 = cv2.morphologyEx(m8, cv2.MORPH_CLOSE, disk(rc))
    m2 = m8 > 0
    if dark is not None:
        at = np.zeros_like(m2)
        for x, y in points or []:
            at[min(max(int(round(y)), 0), m2.shape[0] - 1), min(max(int(round(x)), 0), m2.shape[1] - 1)] = True
        m2 |= dark & _hull(m2 | at)
    m2 = fill_holes(m2)
    if points:
        m2 = component_at(m2, points, radius=3)
    if not m2.any():
        return m2
    rho = float(inside_distance(m2).max())
    ro = int(round(cfg.appendage_frac * rho))
    if ro >= 1:
        body = _opened_by(m2, ro)
        body = component_at(body, points, radius=ro + 3) if points else body
        if body.any():
            m2 &= dilate(body, ro + 1)
    return component_at(m2, points, radius=3) if points else m2


def _thin_part(m: np.ndarray) -> np.ndarray:
    """The pixels of ``m`` in parts thinner than a radius-1 disk (a spoon's handle 1-2 px wide at 320x256)."""
    return m & ~_opened_by(m, 1)


def _open_specks(out: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``out`` opened by a radius-1 disk (the specks and 1 px spurs a per-pixel decision leaves), except in the
    thin parts of the mask ``m`` it refines (:func:`_thin_part`: the opening would take all of them): there ``out``
    stays as decided. ``(h, w) bool`` in and out."""
    return _opened_by(out, 1) | (out & _thin_part(m))


def _refine_outline(m: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, points) -> np.ndarray:
    """Put the outline where an edge pixel is nearer the object's colour than the plate's (coverage >= 0.5): a
    threshold on change in noise units puts it where the change starts, a blur's width outside a high-contrast
    object. In a band as wide as the blur (``blur_px`` + sharpness matching + 1 px) each pixel's distance to the
    nearest colour of the object's interior within twice that is compared with its distance to the plate's colour
    under any shade a shadow can make (``min_shade`` .. 1). ``(h, w) bool`` in and out."""

    if ch.frame is None or m.sum() < 30:
        return m
    b = int(round(_blur_width(ch)))
    inner = erode(m, b)
    if inner.sum() < 10:
        return m
    band = dilate(m, b) & ~inner
    ys, xs = np.nonzero(band)
    h, w = m.shape
    I = ch.frame[ys, xs]
    P = ch.plate[ys, xs]
    # distance to the plate's colour under shading s in [min_shade, 1]
    pn2 = np.maximum(channel_sum(P * P), 1e-6)
    s = np.clip(channel_sum(I * P) / pn2, cfg.min_shade, 1.0)
    d_bg = channel_norm(I - s[:, None] * P)
    d_fg = np.full(len(ys), np.inf, np.float32)
    R = 2 * b
    for dy in range(-R, R + 1):
        yy = np.clip(ys + dy, 0, h - 1)
        for dx in range(-R, R + 1):
            if dx * dx + dy * dy > R * R:
                continue
            xx = np.clip(xs + dx, 0, w - 1)
            d = channel_norm(I - ch.frame[yy, xx])
            np.minimum(d_fg, np.where(inner[yy, xx], d, np.inf), out=d_fg)
    out = m & ~band
    # a band pixel with no interior within reach (along a handle 1-2 px wide) has nothing to compare: it stays
    keep = np.where(np.isfinite(d_fg), d_fg < d_bg, m[ys, xs])
    out[ys[keep], xs[keep]] = True
    return _refined(out, m, inner, cfg, points)


def _refined(out: np.ndarray, m: np.ndarray, inner: np.ndarray, cfg: DifferenceConfig, points) -> np.ndarray:
    """An outline refinement's per-pixel decisions ``out`` for the mask ``m`` settled: specks opened away (not in
    ``m``'s thin parts), the ``inner`` band kept, holes filled, the component at the clicks; ``m`` itself when that
    keeps under ``refine_keep`` of it. ``(h, w) bool`` in and out."""
    out = fill_holes(_open_specks(out, m) | inner)
    out = component_at(out, points, radius=3) if points else out
    return out if np.count_nonzero(out) >= cfg.refine_keep * np.count_nonzero(m) else m


def _local_mean(x: np.ndarray, w: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian-weighted mean of ``x`` (``(h, w)`` or ``(h, w, c)``) over the pixels where ``w`` (``(h, w) bool``),
    and the weights' sum (0 where no such pixel is near)."""
    import cv2

    wf = w.astype(np.float32)
    ws = cv2.GaussianBlur(wf, (0, 0), sigma)
    xs = cv2.GaussianBlur(x * (wf[..., None] if x.ndim == 3 else wf), (0, 0), sigma)
    den = np.maximum(ws, 1e-6)
    return xs / (den[..., None] if x.ndim == 3 else den), ws


def _refine_unmix(m: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, points) -> np.ndarray:
    """Outline at coverage 0.5 by linear unmixing: an edge pixel is ``a * F + (1 - a) * B`` with ``F`` the object's
    colour next to it (the mean of its interior nearby) and ``B`` the plate's colour there under the local shade
    (the frame/plate ratio just outside the object: a cast shadow next to it); the pixel is the object's when
    ``a >= 0.5``. In a band of ``unmix_band`` x the blur around the outline (compression ringing and blur widen the
    change beyond the blur's own width). Where object and plate colours are too close to unmix (under
    ``unmix_min_contrast`` noise sigmas apart) the outline stays. ``(h, w) bool`` in and out."""
    import cv2

    if ch.frame is None or m.sum() < 30:
        return m
    b = _blur_width(ch)
    bi = max(1, int(round(cfg.unmix_band * b)))
    bo = max(1, int(round(cfg.unmix_band_out * b)))
    inner = erode(m, bi)
    if inner.sum() < 10:
        return m
    outer = ~dilate(m, bo)
    band = ~inner & ~outer
    sig = max(1.0, cfg.unmix_sigma * bi)
    I, P = ch.frame, ch.plate
    F, wf = _local_mean(I, inner, sig)
    pp = np.maximum(channel_sum(P * P), 1.0)
    ratio = np.clip(channel_sum(I * P) / pp, cfg.min_shade, 1.5).astype(np.float32)
    s, wb = _local_mean(ratio, outer, sig)
    s = np.where(wb > 1e-3, s, 1.0)
    B = P * s[..., None]
    # only the outline of the parts a few bands wide: a thin part's interior (a pen's highlight down its middle)
    # is not its colour at the edge (the shaded sides), and a part thinner than the specks' opening (a spoon's
    # handle 2 px wide, blurred to the plate's sharpness) reads as half-covered: unmixed, the pen loses its sides
    # and the spoon its handle
    thick = 2 * bi + 1  # half-width: the interior band and as much again
    half = inside_distance(m, precise=False)
    reach = 2 * (bo + 2 * thick) + 1
    wide = (cv2.dilate(half, np.ones((reach, reach), np.uint8)) > thick) & ~_thin_part(m)
    ys, xs = np.nonzero(band & (wf > 1e-3) & wide)
    d = (F - B)[ys, xs]
    d2 = channel_sum(d * d)
    a = channel_sum((I[ys, xs] - B[ys, xs]) * d) / np.maximum(d2, 1e-6)
    ok = d2 > (cfg.unmix_min_contrast * ch.sigma) ** 2 * 3
    out = m.copy()
    out[ys[ok], xs[ok]] = a[ok] >= 0.5
    return _refined(out, m, inner, cfg, points)


def difference_layers(image: np.ndarray, prompt: Prompt, plate: np.ndarray,
                      config: DifferenceConfig | None = None) -> MaskResult:
    """Object mask, its shadow mask and a confidence from frame-minus-plate change (see the module docstring).

    ``image``, ``plate``: ``(h, w, 3) uint8``. Returns a :class:`MaskResult` (``mask``, ``shadow``: ``(h, w) bool``;
    ``confidence`` in [0, 1]: how far the mask is from changing when both thresholds move by a third, times the IoU
    it keeps with its outline known to a pixel, see :func:`_confidence`)."""
    cfg = config or DifferenceConfig()
    h, w = image.shape[:2]
    if cfg.work_px and h * w > cfg.work_px:
        return _layers_at_work_size(image, prompt, plate, cfg)
    ch = change_maps(image, plate, cfg)
    area = np.ones((h, w), bool) if prompt.box is None else _box_mask((h, w), prompt.box)
    pos = prompt.positives
    rad = max(2, int(round(cfg.click_radius_frac * _scale((h, w)))))

    joined: list[bool] = []  # per region grown: the darkening at the click joined it

    def region(k_low: float, k_high: float) -> np.ndarray:
        weak, strong = (ch.object > k_low) & area, (ch.object > k_high) & area
        grown = _grow_from_prompt(weak, strong, prompt, rad, cfg, ch)
        dark = component_at((ch.shadow > k_high) & area, pos, radius=rad) if grown.any() and pos else None
        joined.append(dark is not None and np.count_nonzero(grown) < cfg.dark_click_share * np.count_nonzero(dark))
        return _with_darkening(grown | dark, ch, k_low, area) if joined[-1] else grown

    raw = region(cfg.k_low, cfg.k_high)
    note = DARK_CLICK_NOTE if joined[0] else ""
    if pos and not raw.any():
        sh_at = component_at((ch.shadow > cfg.k_high) & area, pos, radius=rad)
        if sh_at.any():  # a dark object of the table's own colour, or a click on a shadow
            note = DARK_CLICK_NOTE
            raw = _with_darkening(sh_at, ch, cfg.k_low, area)
    mask = _clean(raw, cfg, pos, ch.shadow > cfg.k_low)
    if cfg.refine:
        mask = _refine_outline(mask, ch, cfg, pos)
        if cfg.unmix:
            mask = _refine_unmix(mask, ch, cfg, pos)
    mask = _colour_completion(image, mask, ch, cfg, pos, area)
    if cfg.handles:
        mask = _with_handles(image, plate, mask, ch, cfg, area)
    whole_px = 0
    if cfg.whole_share > 0:
        mask, whole_px = _whole_along(image, mask, ch, cfg, pos, area)
    if ch.copied is not None:
        mask = _within_the_edit(image, mask, ~ch.copied, cfg, pos, area)
        note = note or "the plate is the frame with the object removed by hand: the object found inside the edit"
    before = mask
    mask = split_at_negatives(image, mask, pos, prompt.negatives, rad, cfg.split_iterations)
    # shadow: darkening explained by shading, touching the object, outside it
    near = dilate(mask, max(2, int(round(0.15 * np.sqrt(max(1, mask.sum())))))) & ~mask
    # seeds: per-pixel or pooled shadow evidence (a faint shadow in a noisy frame); growth: per-pixel only
    seeds = ch.shadow if ch.shadow_pooled is None else np.maximum(ch.shadow, ch.shadow_pooled)
    sh = _hysteresis((ch.shadow > cfg.k_low) & ~mask, (seeds > cfg.k_high) & near)
    sh = _shadow_core(sh, ch, cfg, mask, near)
    conf = _confidence(mask, cfg, lambda a, b: split_at_negatives(
        image, _clean(region(a, b), cfg, pos, ch.shadow > a), pos, prompt.negatives, rad, cfg.split_iterations))
    click_px = 0
    if cfg.one_click_share > 0 and conf < LOW_CONFIDENCE and pos and not whole_px:  # a last resort
        clicks = Prompt(prompt.points, prompt.labels)  # without the box: one click's mask from the clicks alone
        mask, click_px = _with_one_click(image, mask, ch, cfg, clicks, area & ~sh)
    details = {"noise_sigma": round(ch.sigma, 3), "gains": np.round(ch.gains, 4).tolist(), **ch.info}
    if note:
        details["note"] = note
    if whole_px:
        details["whole_px"] = whole_px
    if click_px:
        details["one_click_px"] = click_px
    if prompt.negatives:  # cut here, on the change region (segment_result leaves it)
        details.update(negatives_handled=True, negatives_cut=not np.array_equal(mask, before))
    return MaskResult(mask, conf, shadow=sh, details=details)


DARK_CLICK_NOTE = "the click is on darkening at the plate's own colour (a shadow, or a dark object of that colour)"


def _blur_width(ch: ChangeMaps) -> float:
    """The width (px) over which an outline's change spreads: 1 + the blur applied + the sharpness matching."""
    return 1 + ch.info.get("blur_px", 0) + abs(ch.info.get("sharpness_px", 0))


def _changed(ch: ChangeMaps, k: float, area: np.ndarray) -> np.ndarray:
    """``(h, w) bool``: object or shadow evidence over ``k`` noise sigmas, inside ``area``."""
    return ((ch.object > k) | (ch.shadow > k)) & area


def _with_darkening(seed: np.ndarray, ch: ChangeMaps, k_low: float, area: np.ndarray) -> np.ndarray:
    """The change (object or shadow evidence over ``k_low``, inside ``area``) connected to ``seed``: a region that
    takes the darkening at the plate's own colour along (``(h, w) bool`` in and out)."""
    return _hysteresis(_changed(ch, k_low, area), seed)


def _colour_completion(image: np.ndarray, mask: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, points,
                       area: np.ndarray) -> np.ndarray:
    """``mask`` plus what GrabCut over the frame calls the object, with the change maps as its priors: the parts of
    an object that read as shadow pixel by pixel (its dark side, a dark can on a brown table, a blurred edge) or
    as no change (a low-contrast half) join when their colours are the object's, not the table's under a shadow.
    Priors: the mask's interior on strong change is object, the mask probably object, every pixel more than 1 px
    from any change (object or shadow evidence over ``k_low``) background, the rest (shadows, other change)
    probably background. In a crop around the mask and the darkening that touches it; the result is added to
    ``mask`` (never taken from it: the outline the refinements placed stays), holes filled, the component at the
    clicks kept. ``(h, w) bool`` in and out; outside ``area`` (a box prompt) nothing is added."""
    import cv2

    if cfg.colour_iterations <= 0 or not mask.any() or not points:
        return mask
    dark = ch.shadow > cfg.k_low
    crop = _crop_around(mask | _hysteresis(dark & ~mask, dilate(mask, 1) & dark), 4)
    m = mask[crop]
    changed = ((ch.object[crop] > cfg.k_low) | dark[crop]) & area[crop]
    labels = np.full(m.shape, cv2.GC_PR_BGD, np.uint8)
    labels[~dilate(changed, 1)] = cv2.GC_BGD
    labels[m] = cv2.GC_PR_FGD
    labels[erode(m, 1) & (ch.object[crop] > cfg.k_high)] = cv2.GC_FGD
    if not (labels == cv2.GC_FGD).any() or not (labels == cv2.GC_BGD).any():
        return mask
    out = mask.copy()
    out[crop] |= _grabcut_object(image[crop], labels, cfg.colour_iterations) & area[crop]
    return component_at(fill_holes(out), points, radius=3)


def _with_handles(image: np.ndarray, plate: np.ndarray, mask: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig,
                  area: np.ndarray) -> np.ndarray:
    """``mask`` plus each piece of change connected to it that is a handle. The cleanup's appendage cut and the
    outline's per-pixel decisions at a 1 px neck take a spoon's handle off its bowl; the hysteresis had found it.
    Candidates: the weak change (``object > k_low``, inside ``area``) connected to the mask, each pixel kept where it
    is at least half covered by the line (:func:`_line_coverage`: blur widens the change around a 1 px handle).
    A piece is a handle when it touches the mask, is off the image's border, is a line (:func:`handle.is_long_line`,
    elongated by ``handle_min_elongation``) reaching at least the mask's inscribed diameter away, narrower than the
    mask (``handle_max_radius``; its mean width at most the mask's inscribed radius) and mostly strong change
    (``handle_strong_share``). ``(h, w) bool`` in and out."""
    import cv2

    from real2sim.segmentation.handle import is_long_line, principal_axis

    if not mask.any():
        return mask
    cand = _hysteresis((ch.object > cfg.k_low) & area, mask) & ~mask
    box = mask_box(mask | cand, pad=1)
    if not cand[box].any():
        return mask
    m = mask[box]
    r_blur = int(round(_blur_width(ch)))
    expected = _at_exposure(plate[box].astype(np.float32), ch.gains, image[box].astype(np.float32), plate[box])
    c = cand[box] & _line_coverage(image[box], expected, m, r_blur)
    strong = ch.object[box] > cfg.k_high
    r_mask = float(inside_distance(m, precise=False).max())
    far = cv2.distanceTransform((~m).view(np.uint8), cv2.DIST_L2, 3)
    _, lab, stats, _ = cv2.connectedComponentsWithStats(c.view(np.uint8), connectivity=8)
    h, w = mask.shape
    out = mask.copy()
    near, c_all = dilate(m, 1), cand[box]
    for i in np.unique(lab[dilate(m, 2) & (lab > 0)]):
        x, y, bw, bh, n_px = stats[i]
        y, x = y + box[0].start, x + box[1].start
        if n_px < 2 * r_mask or y == 0 or x == 0 or y + bh == h or x + bw == w:
            continue
        piece = lab == i
        r_piece = float(inside_distance(piece, precise=False).max())
        length = float(far[piece].max())
        if (r_piece <= cfg.handle_max_radius * r_mask and n_px <= r_mask * length
                and is_long_line(int(n_px), r_piece, length, r_mask)
                and principal_axis(piece)[2] >= cfg.handle_min_elongation
                and np.count_nonzero(strong & piece) >= cfg.handle_strong_share * n_px):
            out[box] |= piece | (c_all & near & dilate(piece, 1))  # and the pixel that joins it to the mask
    return out


def _whole_along(image: np.ndarray, mask: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, points,
                 area: np.ndarray) -> tuple[np.ndarray, int]:
    """``mask`` with the object's side under it and its top over it, as one click finds them
    (:func:`segmentation.below.whole_below`, then :func:`~segmentation.below.whole_above`: GrabCut in a box grown
    down or up, kept when the whole looks like one object standing under its top), each kept when ``whole_share``
    or more of what it adds is change (object or shadow evidence over ``k_low``; a cut that ran into the unchanged
    table is not), and then only its changed pixels, holes filled. The mask of a dark can whose body reads as
    shadow pixel by pixel (JPEG's chroma, a brown floor) is its lit top; its body is under it. Assumes the image's
    rows run along gravity, as one click's steps do. Returns the mask and the pixels added."""
    from real2sim.segmentation.below import whole_above, whole_below

    if not points or not mask.any():
        return mask, 0
    changed = _changed(ch, cfg.k_low, area)
    n0 = np.count_nonzero(mask)
    for step in (whole_below, whole_above):
        whole = step(image, mask, points)
        if whole is None:
            continue
        add = whole & ~mask
        if np.count_nonzero(add & changed) >= cfg.whole_share * np.count_nonzero(add):
            mask = fill_holes(mask | (add & changed))
    return mask, int(np.count_nonzero(mask)) - n0


def _with_one_click(image: np.ndarray, mask: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, prompt: Prompt,
                    area: np.ndarray) -> tuple[np.ndarray, int]:
    """An unsure ``mask`` with the parts one click finds (the ``grabcut`` backend from the same clicks, no plate)
    that are change (object or shadow evidence over ``k_low``, inside ``area``, which the caller gives without the
    mask's own shadow layer: one click takes cast shadows): other evidence on an object whose change reads partly
    as the plate's (a plate handed over misregistered explains part of it away).
    Taken when one click's mask holds ``one_click_share`` of ``mask``, that share of it is change and it holds no
    negative click (a touching neighbour the person said is not the object); only its parts
    wider than the blur (opened by the blur's width: one click's outline lies elsewhere than the plate's by a pixel
    or two, which is no gain), holes filled. Skipped (no GrabCut) when no change beside the mask is that wide.
    Returns the mask and the pixels added."""
    from real2sim.segmentation.grabcut import grabcut_result

    changed = _changed(ch, cfg.k_low, area)
    b = int(round(_blur_width(ch)))
    if not _opened_by((_hysteresis(changed, mask) & ~mask), b).any():
        return mask, 0  # no change beside the mask wider than the blur: nothing one click could add
    other = grabcut_result(image, prompt).mask
    n = np.count_nonzero(other)
    h, w = mask.shape
    on_negative = any(other[min(max(int(round(y)), 0), h - 1), min(max(int(round(x)), 0), w - 1)]
                      for x, y in prompt.negatives)
    if (not n or on_negative or np.count_nonzero(other & changed) < cfg.one_click_share * n
            or np.count_nonzero(other & mask) < cfg.one_click_share * np.count_nonzero(mask)):
        return mask, 0
    out = fill_holes(mask | _opened_by(other & changed & ~mask, b))
    return out, int(np.count_nonzero(out)) - int(np.count_nonzero(mask))


def _opened_by(m: np.ndarray, r: int) -> np.ndarray:
    """``m`` (``(h, w) bool``) opened by a disk of radius ``r`` (at least 1): its parts wider than ``2 r`` (at 1:
    without its specks and 1 px spurs)."""
    import cv2

    return cv2.morphologyEx(m.astype(np.uint8), cv2.MORPH_OPEN, disk(r)) > 0


def _line_coverage(image: np.ndarray, plate: np.ndarray, mask: np.ndarray, r: int) -> np.ndarray:
    """``(h, w) bool``: the pixels at least half covered by the most different pixel within ``r`` px off ``mask``
    (``(h, w) bool``): each pixel of ``image`` (``(h, w, 3)``, as taken: the comparison's blur spreads a 1 px line
    over 3) unmixed as ``a * F + (1 - a) * B``, ``F`` the colour of the pixel within ``r`` farthest from the plate's
    (the line's own colour), ``B`` the ``plate``'s (``(h, w, 3) float``, at the image's exposure); ``a >= 0.5``."""
    I, P = image.astype(np.float32), plate
    ev = np.where(mask, -1.0, channel_norm(I - P)).astype(np.float32)
    bh, bw = ev.shape
    evp = np.pad(ev, r, constant_values=-1.0)
    Ip = np.pad(I, ((r, r), (r, r), (0, 0)))
    best, F = ev.copy(), I.copy()
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            if dx * dx + dy * dy > r * r:
                continue
            e = evp[r + dy:r + dy + bh, r + dx:r + dx + bw]
            better = e > best
            best[better] = e[better]
            F[better] = Ip[r + dy:r + dy + bh, r + dx:r + dx + bw][better]
    d = F - P
    a = channel_sum((I - P) * d) / np.maximum(channel_sum(d * d), 1e-6)
    return a >= 0.5


def _crop_around(region: np.ndarray, extra: int) -> tuple[slice, slice]:
    """Slices of a box around ``region`` (``(h, w) bool``, not empty), padded by a quarter of its larger side plus
    ``extra`` px and clipped to the image: room for GrabCut's background model."""
    ys, xs = np.nonzero(region)
    h, w = region.shape
    pad = int(0.25 * max(np.ptp(ys), np.ptp(xs))) + extra
    return (slice(max(0, ys.min() - pad), min(h, ys.max() + pad + 1)),
            slice(max(0, xs.min() - pad), min(w, xs.max() + pad + 1)))


def _grabcut_object(image: np.ndarray, labels: np.ndarray, iterations: int) -> np.ndarray:
    """GrabCut (seeded: the same inputs give the same mask) of ``image`` (``(h, w, 3) uint8``) from ``labels``
    (``(h, w) uint8`` of ``cv2.GC_*``); ``(h, w) bool`` object (sure or probable)."""
    import cv2

    labels = labels.copy()
    cv2.setRNGSeed(0)
    cv2.grabCut(np.ascontiguousarray(image), labels, None, np.zeros((1, 65)), np.zeros((1, 65)), iterations,
                cv2.GC_INIT_WITH_MASK)
    return (labels == cv2.GC_FGD) | (labels == cv2.GC_PR_FGD)


def _within_the_edit(image: np.ndarray, mask: np.ndarray, edit: np.ndarray, cfg: DifferenceConfig, points,
                     area: np.ndarray) -> np.ndarray:
    """The object inside a hand-edited plate's edit (``edit``: ``(h, w) bool``, where the plate differs from the
    frame). A person removing an object paints or clones over it and a margin around it, so all of the edit
    differs from the frame, the margin by the table's texture against its copy, and the change maps take the
    margin too. There the frame shows the table as it is all around the edit, so GrabCut over the frame tells the
    object from it by colour: outside the edit background, the difference ``mask`` probably object, the rest of the
    edit probably background, the clicks object. ``(h, w) bool``; ``mask`` when GrabCut finds nothing at the clicks,
    and when the mask has no pixel in the edit or a click lies off it."""
    import cv2

    h, w = mask.shape
    near = dilate(edit, 2)
    if cfg.edit_iterations <= 0 or not points or not (mask & edit).any() or not all(
            near[min(max(int(round(y)), 0), h - 1), min(max(int(round(x)), 0), w - 1)] for x, y in points):
        # no change at the clicks, or a click where the plate shows what the frame does: the object is in the plate
        # (a clip's own median plate of noise-free frames), not edited out of it
        return mask
    crop = _crop_around(edit | mask, 6)
    labels = np.full(mask[crop].shape, cv2.GC_PR_BGD, np.uint8)
    labels[~dilate(edit, 1)[crop] | ~area[crop]] = cv2.GC_BGD
    labels[(mask & edit & area)[crop]] = cv2.GC_PR_FGD
    for x, y in points:
        cv2.circle(labels, (int(round(x)) - crop[1].start, int(round(y)) - crop[0].start), 2, cv2.GC_FGD, -1)
    if not (labels == cv2.GC_BGD).any():
        return mask
    out = np.zeros_like(mask)
    out[crop] = _grabcut_object(image[crop], labels, cfg.edit_iterations)
    out = component_at(fill_holes(out), points, radius=3)
    return out if out.any() else mask


def _layers_at_work_size(image: np.ndarray, prompt: Prompt, plate: np.ndarray, cfg: DifferenceConfig) -> MaskResult:
    """:func:`difference_layers` of a large frame: segmented at ``cfg.work_px`` pixels, the masks resampled back,
    the object's outline placed again at full resolution (:func:`_outline_full_size`)."""
    import cv2

    h, w = image.shape[:2]
    size, small, scale = work_size_prompt((h, w), cfg.work_px, prompt)
    res = difference_layers(cv2.resize(image, size, interpolation=cv2.INTER_AREA), small,
                            cv2.resize(plate, size, interpolation=cv2.INTER_AREA), replace(cfg, work_px=0))
    mask = upsample_mask(res.mask, (h, w))
    if cfg.refine and mask.any():
        mask = _outline_full_size(mask, image, plate, res.details, cfg, prompt.positives, scale)
    shadow = upsample_mask(res.shadow, (h, w)) & ~mask if res.shadow is not None else None
    details = {**res.details, "work_size": list(size)}
    return MaskResult(mask, res.confidence, shadow=shadow, details=details)


def _outline_full_size(mask: np.ndarray, image: np.ndarray, plate: np.ndarray, details: dict, cfg: DifferenceConfig,
                       points, scale: float) -> np.ndarray:
    """The outline of a resampled ``mask`` placed again against the full-size frame (:func:`_refine_outline`, then
    :func:`_refine_unmix`): the plate at the exposure, blur and sharpness found at the working size (lengths times
    ``scale``, the full size over the working size), in a crop around the mask (both steps are local)."""
    import cv2

    blur = details.get("blur_px", 0.0) * scale
    sharp = details.get("sharpness_px", 0.0) * scale
    b = 1 + blur + abs(sharp)
    # the crop holds the refinement's band, its Gaussian windows' reach and the blurs' kernels around the mask
    margin = int(np.ceil(3 * max(cfg.unmix_band, cfg.unmix_band_out) * b + 4 * max(1.0, cfg.unmix_sigma * b)
                         + 3 * (blur + abs(sharp)))) + 2
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    y0, y1 = max(0, ys.min() - margin), min(h, ys.max() + margin + 1)
    x0, x1 = max(0, xs.min() - margin), min(w, xs.max() + margin + 1)
    I = image[y0:y1, x0:x1].astype(np.float32)
    P = plate[y0:y1, x0:x1].astype(np.float32)
    if sharp:  # as match_sharpness blurred at the working size: the plate (> 0) or the frame (< 0)
        P, I = (cv2.GaussianBlur(P, (0, 0), sharp), I) if sharp > 0 else (P, cv2.GaussianBlur(I, (0, 0), -sharp))
    I, P = _blur_both(I, P, blur)
    gains = np.asarray(details.get("gains", [[1.0, 0.0]] * 3))
    P = _at_exposure(P, gains, I, plate[y0:y1, x0:x1])
    ch = ChangeMaps(np.zeros(I.shape[:2], np.float32), np.zeros(I.shape[:2], np.float32), None,
                    float(details.get("noise_sigma", 1.0)), gains, {"blur_px": blur, "sharpness_px": sharp},
                    frame=I, plate=P)
    crop_points = [(x - x0, y - y0) for x, y in points if x0 <= x < x1 and y0 <= y < y1]
    m = _refine_outline(mask[y0:y1, x0:x1], ch, cfg, crop_points)
    out = mask.copy()
    out[y0:y1, x0:x1] = _refine_unmix(m, ch, cfg, crop_points) if cfg.unmix else m
    return out


def _shadow_core(sh: np.ndarray, ch: ChangeMaps, cfg: DifferenceConfig, mask: np.ndarray,
                 near: np.ndarray) -> np.ndarray:
    """The shadow's outline at half its depth, as the object's is at half contrast: of the darkening ``sh``
    (``(h, w) bool``), the pixels darkened by at least ``shadow_half`` of the shadow's depth (the 90th percentile of
    ``1 - s``, ``s`` smoothed over the blur), in the components that touch ``near`` (the object's surround)."""
    import cv2

    if not sh.any() or cfg.shadow_half <= 0:
        return sh
    sig = max(0.7, ch.info.get("blur_px", 0))
    depth = 1 - cv2.GaussianBlur(ch.shade, (0, 0), sig)
    b = int(round(_blur_width(ch)))
    body = dilate(mask, b) if mask.any() else np.zeros_like(sh)
    sh = sh & ~body  # the object's blurred edge is darker than any shadow: neither shadow nor its depth
    if not sh.any():
        return sh
    peak = float(np.percentile(depth[sh], 90))
    core = sh & (depth >= cfg.shadow_half * peak)
    return _hysteresis(core, core & dilate(near, b))


def _confidence(mask: np.ndarray, cfg: DifferenceConfig, region) -> float:
    """Threshold stability (IoU of the masks at thresholds x0.67 and x1.5) times the IoU the mask keeps with its
    outline known to a pixel (:func:`~real2sim.segmentation.core.outline_iou`: a small or thin mask is less sure)."""
    if not mask.any():
        return 0.0
    lo = region(cfg.k_low / 1.5, cfg.k_high / 1.5)
    hi = region(cfg.k_low * 1.5, cfg.k_high * 1.5)
    return float(np.clip(min(iou(lo, mask), iou(hi, mask)) * outline_iou(mask), 0, 1))


def difference(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None,
               config: DifferenceConfig | None = None) -> np.ndarray:
    """The object at the prompt from frame-minus-plate change (registered backend; ``(h, w) bool``)."""
    if plate is None:
        raise SegmentationError("the 'difference' backend needs a background plate: pass plate=..., use --plate PLATE, "
                                "or use --backend grabcut")
    return difference_layers(image, prompt, plate, config).mask


def difference_result(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None,
                      config: DifferenceConfig | None = None) -> MaskResult:
    """:func:`difference_layers` as a result backend (mask, shadow, confidence)."""
    if plate is None:
        raise SegmentationError("the 'difference' backend needs a background plate: pass plate=..., use --plate PLATE, "
                                "or use --backend grabcut")
    return difference_layers(image, prompt, plate, config)
