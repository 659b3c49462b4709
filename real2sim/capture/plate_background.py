"""Per-pixel background estimate of a fixed camera's frames, anchored on the temporal median.

The plain per-pixel median is the floor: it is right wherever the background shows in more than half of the
frames. This module improves on it where it can tell, and says where it cannot:

1. **Anchor**: the temporal median of the (exposure-compensated) frames, or of the frames a given mask leaves.
2. **Noise**: the frames' noise (sigma, 8-bit levels) from the lower quartile of |frame - anchor| (robust to the
   moving foreground); every threshold below is a multiple of it (plus the anchor's local gradient at full
   resolution, where sub-pixel jitter and compression make edges noisier).
3. **Deviations**, at a reduced resolution (about ``detect_pixels`` pixels, whatever the input size): per frame,
   the connected regions that differ from the anchor by more than ``k`` sigma.
4. **Which side of each region is the background** (region level, no ground truth): a region is a moving thing
   in the frame, or the place where the anchor itself holds something that lingered (a robot arm that sat still
   in most frames) and the frame shows what is behind it. The two differ at the region's outline: the thing in
   front has its own outline, the background continues across it. So the mean colour just inside the outline is
   compared with the mean just outside, in the frame and in the anchor ("seam"). The frame's region is the
   background (the anchor is a *ghost* there) when the anchor's seam is ``ghost_ratio`` times the frame's and
   clearly above the noise; foreground when the frame's seam dominates; undecided otherwise. A region undecided as a
   whole (it merged a thing in front with the place a lingering thing left) is split where the set of frames that
   agree with the frame changes (:func:`split_by_agreement`), and each piece is judged on its outline towards the
   unchanged pixels.
5. **Plate**: where some frames were found to show the background behind a ghost, the anchor becomes the median
   of those frames. This is repeated (``passes``) against the anchor with the ghosts replaced, next to the ghosts
   found before only: a ghost is peeled piece by piece. Then every frame within the noise-adapted tolerance of the
   anchor is averaged (a trimmed mean: less noise than the median, same robustness). Where a later pass replaced
   colours by ones more like the things seen in front, the colours before it come back (:func:`foreign_passes`).

Confidence per pixel: the number of frames averaged, whether regions over it stayed undecided, and whether most
frames disagree with the plate there (see :func:`confidence_map`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from real2sim.core.imaging import by_quantile_bins, channel_max, clean_mask, disk, grow_parts, mask_box

Q25_HALF_NORMAL = 0.3186
"""25th percentile of |N(0, 1)|: sigma = q25(|x|) / this."""


@dataclass
class BackgroundEstimate:
    """What :func:`estimate_background` found (arrays at full resolution unless said)."""

    plate: np.ndarray
    """``(h, w, 3) uint8``."""
    count: np.ndarray
    """``(h, w) int32`` frames averaged into each pixel (0: none agreed with the anchor)."""
    used: np.ndarray
    """``(n, h, w) bool`` the samples averaged (True = this frame showed the background here)."""
    ghost: np.ndarray
    """``(h, w) bool`` where the anchor held a lingering object and frames behind it were used instead."""
    undecided: np.ndarray
    """``(h, w) bool`` pixels covered by regions whose side could not be told (reported, not guessed)."""
    sigma: float
    """Noise of the frames (8-bit levels)."""
    report: dict


def temporal_median(frames: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Per-pixel per-channel median of ``(n, h, w, 3) uint8`` frames -> ``(h, w, 3) uint8`` (the mean of the two
    middle values, rounded up, for even ``n``).

    ``valid``: optional ``(n, h, w) bool`` samples to use (a masked median, by luminance order); pixels with no valid
    sample get the unmasked median. Unmasked: a selection network (:func:`median_network`) of elementwise min/max
    over blocks of pixels that stay in cache, the same values as ``np.median(frames, 0)`` about 10x faster."""
    n, h, w, _ = frames.shape
    if valid is None or valid.all():
        flat = np.ascontiguousarray(frames).reshape(n, -1)
        lo, hi = (n - 1) // 2, n // 2
        ops = median_network(n)
        out = np.empty(flat.shape[1], np.uint8)
        step = max(4096, (1 << 20) // n)  # n wires of a block stay in cache
        for a in range(0, flat.shape[1], step):
            wires = run_network([flat[t, a:a + step] for t in range(n)], ops)
            out[a:a + step] = wires[lo] if lo == hi else (wires[lo].astype(np.uint16) + wires[hi] + 1) // 2
        return out.reshape(h, w, 3)
    return _masked_median(frames, valid)


def run_network(columns: list[np.ndarray], ops) -> list[np.ndarray | None]:
    """Apply a pruned sorting network (:func:`median_network`, :func:`rank_network`) to ``n`` equal-length
    arrays: elementwise min/max per comparator, swaps as relabelling, outputs nobody reads left unset. Returns the
    ``2 n + 1`` wires (the first ``n`` sorted where the network needs them)."""
    wires: list[np.ndarray | None] = list(columns) + [None] * (len(columns) + 1)
    for swap, i, j, need_i, need_j in ops:
        x, y = wires[i], wires[j]
        if swap:
            wires[i], wires[j] = y, x
            continue
        if need_i:
            wires[i] = np.minimum(x, y)
        if need_j:
            wires[j] = np.maximum(x, y)
    return wires


def median_network(n: int) -> tuple[tuple[bool, int, int, bool, bool], ...]:
    """The comparators of Batcher's odd-even merge sort of ``n`` wires (padded to a power of two with wires that
    hold +inf) that the two middle outputs depend on: ``(swap, i, j, need_min, need_max)``. ``swap``: wire ``i``
    holds a pad and ``j`` data (the comparator only exchanges them); otherwise the min goes to ``i`` (if needed) and
    the max to ``j`` (if needed)."""
    return rank_network(n, ((n - 1) // 2, n // 2))


@lru_cache(maxsize=None)
def rank_network(n: int, outputs: tuple[int, ...]) -> tuple[tuple[bool, int, int, bool, bool], ...]:
    """Like :func:`median_network`, for the sorted outputs ``outputs`` (ranks from 0)."""
    size = 1
    while size < n:
        size *= 2
    comps, p = [], 1
    while p < size:  # Batcher's odd-even merge sort
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        comps.append((i + j, i + j + k))
            k //= 2
        p *= 2
    pad = [w >= n for w in range(size)]
    ops = []
    for i, j in comps:  # comparators with a pad on the max side do nothing; a pad on the min side moves up
        if pad[j]:
            continue
        ops.append((pad[i], i, j))
        if pad[i]:
            pad[i], pad[j] = False, True
    need, keep = set(outputs), []
    for swap, i, j in reversed(ops):  # only what the middle outputs depend on
        ni, nj = i in need, j in need
        if not (ni or nj):
            continue
        if swap:
            need -= {i, j}
            need |= ({j} if ni else set()) | ({i} if nj else set())
        else:
            need |= {i, j}
        keep.append((swap, i, j, ni, nj))
    return tuple(keep[::-1])


def masked_rows(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``x[mask]`` for an ``(h, w, c)`` array and an ``(h, w) bool`` mask: the same rows in the same order, by
    ``np.compress`` on the pixels as rows (about 3x faster than the boolean index, which copies pixel by pixel)."""
    return np.compress(mask.ravel(), x.reshape(-1, x.shape[-1]), axis=0)


def _nonzero(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D mask (the same row and column index arrays, in raster order) by one flat scan and a
    divmod: about 3x faster than ``np.nonzero``'s 2-D path."""
    return np.divmod(np.flatnonzero(mask), mask.shape[1])


def _masked_median(frames: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Median over the valid samples per pixel, ordered by luminance (colours from one frame)."""
    import cv2

    n, h, w, _ = frames.shape
    count = valid.sum(0, dtype=np.int32)
    key = np.empty((n, h, w), np.int16)
    for t in range(n):  # luminance * 64 + frame index; invalid samples sort last
        y = cv2.cvtColor(frames[t], cv2.COLOR_RGB2GRAY).astype(np.int16)
        key[t] = np.where(valid[t], y * 64 + t, 32767)
    key.sort(axis=0, kind="stable")
    mid = np.take_along_axis(key, ((np.maximum(count, 1) - 1) // 2)[None].astype(np.int64), 0)[0]
    idx = (mid & 63).astype(np.int64)
    med = temporal_median(frames)
    for t in np.unique(idx[count > 0]):
        sel = (idx == t) & (count > 0)
        med[sel] = frames[t][sel]
    return med


def noise_sigma(frames: np.ndarray, anchor: np.ndarray, valid: np.ndarray | None = None, samples: int = 200000,
                interpolate: bool = True) -> float:
    """Noise std (8-bit levels) of ``(n, h, w, 3) uint8`` frames around ``anchor`` ``(h, w, 3)``: lower quartile of
    the absolute differences / 0.3186 (a moving foreground only fills the upper tail). At least 0.5."""
    return noise_sigmas(frames, anchor, valid, samples)[0 if interpolate else 1]


def noise_sigmas(frames: np.ndarray, anchor: np.ndarray, valid: np.ndarray | None = None, samples: int = 200000
                 ) -> tuple[float, float]:
    """:func:`noise_sigma` with and without ``interpolate`` from one pass over the samples: the levels'
    interpolated quartile (:func:`level_quantile`) and ``np.percentile``'s (linear between the two order statistics
    around ``0.25 * (m - 1)``; read from the same histogram: the same float)."""
    d, _, ok = _deviation_samples(frames, anchor, valid, samples)
    d = (d if ok is None else d[ok]).ravel()
    if d.size == 0:
        return 2.0, 2.0
    hist = np.bincount(d)
    at = 0.25 * (d.size - 1)  # whole multiples of 0.25: exact, as are the order statistics and their lerp
    lo = int(np.floor(at))
    a, b = np.searchsorted(np.cumsum(hist), [lo, min(lo + 1, d.size - 1)], side="right")
    whole = float(a) + (float(b) - float(a)) * (at - lo)
    return max(0.5, level_quantile(d, 0.25, hist) / Q25_HALF_NORMAL), max(0.5, whole / Q25_HALF_NORMAL)


def _deviation_samples(frames: np.ndarray, anchor: np.ndarray, valid: np.ndarray | None, samples: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """About ``samples`` samples of ``(n, h, w, 3) uint8`` frames on a regular grid: ``(|frame - anchor|
    (n, hs, ws, 3) int16, the anchor there (hs, ws, 3), the valid samples (n, hs, ws) bool or None)``."""
    n, h, w, _ = frames.shape
    step = max(1, int(np.sqrt(n * h * w / samples)))
    a = anchor[::step, ::step]
    d = np.abs(frames[:, ::step, ::step].astype(np.int16) - a.astype(np.int16))
    return d, a, None if valid is None else valid[:, ::step, ::step]


def noise_levels(frames: np.ndarray, anchor: np.ndarray, valid: np.ndarray | None = None, samples: int = 200000,
                 bins: int = 16, lo: float = 0.25, hi: float = 4.0) -> np.ndarray:
    """``(3, 256) float32``: per channel, the frames' noise at each of the anchor's levels over their noise overall
    (all channels), between ``lo`` and ``hi``. Per quantile bin of the anchor's level, the interpolated lower
    quartile of the samples' deviations (:func:`level_quantile`), interpolated over the levels.

    A sensor's noise grows with the light and a camera's tone curve stretches some levels and crushes others: in a
    dark scene the floor's mid-tones can be three times as noisy as the crushed black of an arm. One tolerance for
    every level then splits the floor's frames and keeps the arm's together."""
    d, a, ok = _deviation_samples(frames, anchor, valid, samples)
    every = d if ok is None else d[ok]
    out = np.ones((3, 256), np.float32)
    if every.size == 0:
        return out
    overall = max(level_quantile(every.ravel(), 0.25), 0.1)
    levels = np.arange(256) + 0.5
    for c in range(3):
        dc = d[..., c]

        def ratio(sel, dc=dc):
            s = dc[:, sel] if ok is None else dc[:, sel][ok[:, sel]]
            return max(level_quantile(s.ravel(), 0.25), 0.1) / overall if s.size else 1.0
        centres, ks = by_quantile_bins(a[..., c], ratio, bins, 20)
        if centres:
            out[c] = np.clip(np.interp(levels, centres, ks), lo, hi)
    return out


def level_scale(noise: np.ndarray) -> np.ndarray:
    """``(3, 256) float32`` per channel, each level's place on a scale where the noise is the same at every level
    (the sum of ``1 / noise`` below it; ``noise`` from :func:`noise_levels`): one tolerance compares colours alike
    at every level."""
    return np.concatenate([np.zeros((3, 1), np.float32), np.cumsum(1.0 / noise[:, :-1], axis=1)], 1).astype(np.float32)


def level_quantile(d: np.ndarray, q: float, hist: np.ndarray | None = None) -> float:
    """Quantile ``q`` of whole-level absolute differences ``d`` (ints >= 0), each level read as the interval it was
    rounded from (0: [0, 0.5], k: [k - 0.5, k + 0.5]) and interpolated inside it. ``np.percentile`` of the levels
    is a whole number: noise of 1-2.5 levels all read as one level (sigma 3.14), a 5-frame clip as 0 (sigma 0.5)."""
    hist = np.bincount(d.astype(np.int64).ravel()) if hist is None else hist  # (``hist``: that, if the caller has it)
    cum = np.cumsum(hist) / d.size
    k = int(np.searchsorted(cum, q))
    before = float(cum[k - 1]) if k > 0 else 0.0
    lo, width = (0.0, 0.5) if k == 0 else (k - 0.5, 1.0)
    return lo + width * (q - before) / max(float(cum[k]) - before, 1e-12)


def gradient_magnitude(image: np.ndarray) -> np.ndarray:
    """``(h, w) float32`` max over channels of the Sobel gradient magnitude / 8 (levels per pixel)."""
    import cv2

    f = image if image.dtype == np.uint8 else image.astype(np.float32)
    depth = cv2.CV_16S if image.dtype == np.uint8 else cv2.CV_32F  # whole numbers from uint8: exact in int16
    gx = channel_max(np.abs(cv2.Sobel(f, depth, 1, 0, ksize=3)))
    gy = channel_max(np.abs(cv2.Sobel(f, depth, 0, 1, ksize=3)))
    return np.maximum(gx, gy).astype(np.float32) / 8.0


def shrink(frames: np.ndarray, size: tuple[int, int], luts: np.ndarray | None = None) -> np.ndarray:
    """``(n, h, w, 3) uint8`` -> ``(n, hs, ws, 3) float32`` resized to ``size`` (ws, hs) by area averaging.
    ``luts``: ``(n, 256, 3) uint8`` level maps to apply to each frame first (as float32, no uint8 pass)."""
    import cv2

    def levels(t):  # the frame's levels (through its map) as float32
        return frames[t].astype(np.float32) if luts is None else cv2.LUT(frames[t], luts[t].astype(np.float32)[None])

    return np.stack([cv2.resize(levels(t), size, interpolation=cv2.INTER_AREA) for t in range(len(frames))])


def detect_size(h: int, w: int, pixels: int) -> tuple[int, int]:
    """(ws, hs) with about ``pixels`` pixels and the frames' aspect (never larger than the frames)."""
    s = min(1.0, float(np.sqrt(pixels / float(h * w))))
    return max(16, int(round(w * s))), max(16, int(round(h * s)))


def region_seams(frame: np.ndarray, anchor: np.ndarray, regions: np.ndarray, band: int = 2,
                 labels: np.ndarray | None = None, both: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Contrast across the outline of each region, in the frame and in the anchor.

    ``frame``, ``anchor``: ``(h, w, 3) float32``; ``regions``: ``(h, w) bool``. For every pixel in the band just
    inside a region's outline, the mean colour of the inside band and of the outside band within a window of
    ``4 * band + 1`` px; the seam is the largest channel difference. Returns (labels ``(h, w) int32``, mean frame
    seam per label ``(k,)``, mean anchor seam per label ``(k,)``, number of labels k, label 0 = outside).
    ``labels``: regions given as a label image instead (0 = outside); the outline of each region is then only
    where it meets the outside, not where it meets another region (that is the outline of what is in front).
    ``both``: ``_with_ones(frame, anchor)`` if the caller has it (several calls on one frame)."""
    import cv2

    if labels is not None:
        return _label_seams(frame, anchor, labels, band, None if regions is None else ~regions, both)
    m = regions.astype(np.uint8)
    k, lab = cv2.connectedComponents(m, connectivity=8)
    if k <= 1:
        z = np.zeros(k, np.float32)
        return lab, z, z, k
    box = mask_box(m, _seam_margin(band))  # only the regions' box (+ the window) matters
    both = _with_ones(frame, anchor) if both is None else both
    sub = m[box]
    return (lab,) + _seams(None, None, sub, sub == 0, lab[box], k, band, both[box]) + (k,)


def _seams(frame: np.ndarray, anchor: np.ndarray, m: np.ndarray, outside: np.ndarray, lab: np.ndarray, k: int,
           band: int, both: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean frame and anchor seam per label of ``lab`` over the inner band of ``m`` (uint8 0/1) next to
    ``outside`` (bool). ``both``: the frame, the anchor and ones as one ``(h, w, 7)`` image, if the caller has it."""
    import cv2

    ker = _square(2 * band + 1)
    # the bands as 0/1 images by OpenCV (m is 0/1: m - erode(m) is its inner band; dilate(m) is 0/1 too)
    inner = cv2.subtract(m, cv2.erode(m, ker))
    outer = cv2.bitwise_and(cv2.dilate(m, ker), outside.view(np.uint8))
    win = (4 * band + 1, 4 * band + 1)
    if both is None:
        both = _with_ones(frame, anchor)
    # box sums of [frame, anchor, 1] over each band: colours and pixel counts at once
    sums = [cv2.boxFilter(_times_known(both, side), -1, win, normalize=False)
            for side in (inner, outer)]
    ok = inner.view(bool) & (sums[1][..., 6] > 0)  # (an inner pixel's own window holds it: its inner count is > 0)
    at = ok.ravel()
    if not at.any():
        z = np.zeros(k, np.float32)
        return z, z.copy()
    # the sums at those pixels as rows, in raster order (np.compress: cheaper than indexing by coordinates)
    s_in, s_out = (np.compress(at, x.reshape(-1, x.shape[-1]), axis=0) for x in sums)
    d = np.abs(s_in[:, :6] / np.maximum(s_in[:, 6:], 1) - s_out[:, :6] / np.maximum(s_out[:, 6:], 1))
    ll = lab[ok]
    cnt = np.maximum(np.bincount(ll, minlength=k), 1)
    return tuple((np.bincount(ll, channel_max(d[:, c:c + 3]), k) / cnt).astype(np.float32) for c in (0, 3))


def _seam_margin(band: int) -> int:
    """Margin (px) around regions that :func:`_seams` needs: the window around their inner band (``2 * band``) and
    one more. Every window read then lies inside the crop (or meets the image's border where the crop does), and
    OpenCV's box sums of float32 colours are exact in double precision whatever the crop (as the pieces' groups
    rely on too): the seams over the whole image, bit for bit (tests/test_plate.py)."""
    return 2 * band + 1


@lru_cache(maxsize=None)
def _square(size: int) -> np.ndarray:
    """``(size, size) uint8`` ones (a structuring element)."""
    return np.ones((size, size), np.uint8)


def _with_ones(frame: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """``(h, w, 7) float32``: frame, anchor, 1."""
    return np.concatenate([frame, anchor, np.ones(frame.shape[:2] + (1,), np.float32)], -1, dtype=np.float32)


def _label_seams(frame: np.ndarray, anchor: np.ndarray, lab: np.ndarray, band: int, outside: np.ndarray | None = None,
                 both: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`region_seams` of the regions of a label image, each against ``outside`` only (default: label 0).

    Regions at least ``3 * band + 1`` px apart do not meet in each other's bands or windows: they are measured
    together, over the box of the group (:func:`_far_groups`; the same values as one by one, bit for bit)."""
    k = int(lab.max()) + 1
    s_f, s_a = np.zeros(k, np.float32), np.zeros(k, np.float32)
    if k <= 1:
        return lab, s_f, s_a, k
    h, w = lab.shape
    m = _seam_margin(band)
    both = _with_ones(frame, anchor) if both is None else both
    for ids, (y0, y1, x0, x1) in _far_groups(_label_boxes(lab, k - 1), 3 * band + 1):
        a, b, c, d = max(0, y0 - m), min(h, y1 + m), max(0, x0 - m), min(w, x1 + m)
        sub = lab[a:b, c:d]
        out = (sub == 0) if outside is None else outside[a:b, c:d]
        if len(ids) == 1:
            mi = (sub == ids[0]).view(np.uint8)
            sf, sa = _seams(None, None, mi, out, mi.astype(np.int32), 2, band, both[a:b, c:d])
            s_f[ids[0]], s_a[ids[0]] = sf[1], sa[1]
            continue
        member = np.zeros(k, bool)
        member[ids] = True
        mi = np.take(member, sub)
        sf, sa = _seams(None, None, mi.view(np.uint8), out, np.where(mi, sub, 0), k, band, both[a:b, c:d])
        s_f[ids], s_a[ids] = sf[ids], sa[ids]
    return lab, s_f, s_a, k


def _label_boxes(lab: np.ndarray, k: int) -> list[tuple[slice, slice] | None]:
    """Per label ``1..k`` of ``lab`` ``(h, w) int``, its box ``(rows, cols)`` (``None`` where it has no pixel): the
    boxes ``scipy.ndimage.find_objects`` gives, without importing scipy (a third of a second on a plate's first
    call)."""
    flat = np.flatnonzero(lab)
    boxes: list[tuple[slice, slice] | None] = [None] * k
    if not len(flat):
        return boxes
    ids = lab.ravel()[flat]
    order = np.argsort(ids, kind="stable")  # by label, raster order within each
    ids, flat = ids[order], flat[order]
    ys, xs = np.divmod(flat, lab.shape[1])
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)] - 1
    x0, x1 = np.minimum.reduceat(xs, starts), np.maximum.reduceat(xs, starts)
    for i, a, b, c, d in zip(ids[starts].tolist(), ys[starts].tolist(), ys[ends].tolist(), x0.tolist(), x1.tolist()):
        boxes[i - 1] = (slice(a, b + 1), slice(c, d + 1))
    return boxes


def _far_groups(boxes: list, gap: int, slack: int = 2000) -> list[tuple[list[int], tuple[int, int, int, int]]]:
    """Labels (1-based, ``boxes`` from :func:`_label_boxes`) in groups whose members' boxes are at least ``gap`` px apart
    (Chebyshev), each with the group's box (y0, y1, x0, x1); a label joins a group only when the group's box grows by
    at most its own area plus ``slack`` px (one call per group is cheaper than one per label, a much larger box is
    not)."""
    groups: list[tuple[list[int], list[tuple[int, int, int, int]], list[int]]] = []
    for i, box in enumerate(boxes, 1):
        if box is None:
            continue
        bx = (box[0].start, box[0].stop, box[1].start, box[1].stop)
        area = (bx[1] - bx[0]) * (bx[3] - bx[2])
        for ids, members, g in groups:
            u = (min(g[0], bx[0]), max(g[1], bx[1]), min(g[2], bx[2]), max(g[3], bx[3]))
            if (u[1] - u[0]) * (u[3] - u[2]) > (g[1] - g[0]) * (g[3] - g[2]) + area + slack:
                continue
            if all(max(o[0] - bx[1], bx[0] - o[1], o[2] - bx[3], bx[2] - o[3]) + 1 >= gap for o in members):
                ids.append(i)
                members.append(bx)
                g[:] = u
                break
        else:
            groups.append(([i], [bx], list(bx)))
    return [(ids, tuple(g)) for ids, _, g in groups]


def agreement_links(small: np.ndarray, t: int, tau: np.ndarray, valid_s: np.ndarray | None, jaccard: float,
                    box: tuple[int, int, int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Whether neighbouring pixels of frame ``t`` are shown alike by the other frames: at each pixel the set of frames
    whose colour is within the pair's threshold of frame ``t``'s; neighbours are linked when their sets overlap by
    at least ``jaccard`` (intersection over union). Returns (links to the right ``(hs, ws - 1)``, links down
    ``(hs - 1, ws)``) bool; they do not depend on the anchor (cached across passes). ``box``: (y0, y1, x0, x1)
    pairs within these rows and columns only (False elsewhere)."""
    if box is not None:
        y0, y1, x0, x1 = box
        hs, ws = small.shape[1:3]
        right, down = np.zeros((hs, ws - 1), bool), np.zeros((hs - 1, ws), bool)
        r, d = agreement_links(small[:, y0:y1, x0:x1], t, tau, None if valid_s is None else valid_s[:, y0:y1, x0:x1],
                               jaccard)
        right[y0:y1, x0:x1 - 1], down[y0:y1 - 1, x0:x1] = r, d
        return right, down
    import cv2

    th = np.maximum(tau, tau[t])
    ref = small[t]
    agree = np.empty(small.shape[:3], np.uint8)
    diff = np.empty(ref.shape, np.float32)
    for i in range(len(small)):  # every channel within the pair's threshold (the max channel's test, cheaper)
        lim = float(th[i])  # (a float32: cv2.inRange compares with it exactly)
        cv2.inRange(cv2.absdiff(small[i], ref, dst=diff), (0.0, 0.0, 0.0), (lim, lim, lim), dst=agree[i])
    agree &= 1  # (255 -> 1: counts below)
    if valid_s is not None:
        agree &= valid_s.view(np.uint8)
    count = np.uint8 if len(agree) < 256 else np.int32
    out = []
    for p, q in (((slice(None), slice(None), slice(None, -1)), (slice(None), slice(None), slice(1, None))),
                 ((slice(None), slice(None, -1), slice(None)), (slice(None), slice(1, None), slice(None)))):
        a, b = agree[p], agree[q]
        inter = np.add.reduce(a & b, axis=0, dtype=count)
        union = np.add.reduce(a | b, axis=0, dtype=count)
        out.append(inter >= jaccard * np.maximum(union, 1))
    return out[0], out[1]


def _links_over(have, box: tuple[int, int, int, int], small: np.ndarray, t: int, tau: np.ndarray,
                valid_s: np.ndarray | None, jaccard: float):
    """``(box, links)``: :func:`agreement_links` of frame ``t`` over ``box`` grown to hold ``have`` (the box and
    links computed before, or None). A link depends on its two pixels only: the links already computed are kept
    and only the strips the box grew by (with the row or column next to them, for the links across) are added."""
    if have is None:
        return box, agreement_links(small, t, tau, valid_s, jaccard, box)
    (oy0, oy1, ox0, ox1), (right, down) = have
    y0, y1, x0, x1 = min(box[0], oy0), max(box[1], oy1), min(box[2], ox0), max(box[3], ox1)
    if (y0, y1, x0, x1) == (oy0, oy1, ox0, ox1):
        return have
    strips = [(y0, oy0 + 1, x0, x1)] if y0 < oy0 else []  # above; below; left and right of the old rows
    strips += [(oy1 - 1, y1, x0, x1)] if oy1 < y1 else []
    strips += [(oy0, oy1, x0, ox0 + 1)] if x0 < ox0 else []
    strips += [(oy0, oy1, ox1 - 1, x1)] if ox1 < x1 else []
    for a, b, c, d in strips:
        r, dn = agreement_links(small[:, a:b, c:d], t, tau, None if valid_s is None else valid_s[:, a:b, c:d], jaccard)
        right[a:b, c:d - 1], down[a:b - 1, c:d] = r, dn
    return (y0, y1, x0, x1), (right, down)


def split_by_agreement(links: tuple[np.ndarray, np.ndarray], dev: np.ndarray, min_area: int) -> np.ndarray:
    """``(hs, ws) int32`` labels of a frame's deviating pixels ``dev``, split where the set of frames that agree with
    the frame changes (:func:`agreement_links`). A thing in front and the place a lingering thing left are shown by
    different frames, so a region that merged them is split. Pieces under ``min_area`` are grown over by the
    neighbouring pieces (or stay alone)."""
    import cv2

    rows, cols = np.flatnonzero(dev.any(1)), np.flatnonzero(dev.any(0))
    full = np.zeros(dev.shape, np.int32)
    if not len(rows):
        return full
    # only dev's box: the pieces, their raster order and the growth over small ones are the same there
    y0, y1, x0, x1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    dev = dev[y0:y1, x0:x1]
    hs, ws = dev.shape
    # the pixels on the even cells of a grid twice as fine, each link on the cell between its two pixels: the
    # 4-connected components of that grid are the linked pieces
    grid = np.zeros((2 * hs - 1, 2 * ws - 1), np.uint8)
    grid[::2, ::2] = dev
    grid[::2, 1::2] = dev[:, :-1] & dev[:, 1:] & links[0][y0:y1, x0:x1 - 1]
    grid[1::2, ::2] = dev[:-1] & dev[1:] & links[1][y0:y1 - 1, x0:x1]
    k, lab = cv2.connectedComponents(grid, connectivity=4, ltype=cv2.CV_32S)
    lab = lab[::2, ::2]
    # numbered in raster order of their first pixel (each label's first position by np.minimum.at: what
    # np.unique(return_index=True) gives, without its sort)
    vals = lab[dev]
    at = np.full(k, len(vals), np.intp)
    np.minimum.at(at, vals, np.arange(len(vals)))
    first = np.flatnonzero(at < len(vals))
    order = np.zeros(k, np.int32)
    order[first[np.argsort(at[first])]] = np.arange(1, len(first) + 1, dtype=np.int32)
    lab = np.take(order, lab)  # (np.take: a table read by a label image, cheaper than indexing)
    area = np.bincount(lab.ravel())
    small_lab = area < min_area
    small_lab[0] = False
    if small_lab.any() and (~small_lab[1:]).any():
        big = np.where(np.take(small_lab, lab), 0, lab).astype(np.float32)
        for _ in range(3):  # grow the big pieces over the small ones
            grown = cv2.dilate(big, np.ones((3, 3), np.uint8))
            fill = (big == 0) & (lab > 0) & (grown > 0)
            big[fill] = grown[fill]
        lab = np.where(big > 0, big, lab).astype(np.int32)
    used = np.zeros(lab.max() + 1, bool)
    used[lab.ravel()] = True
    used[0] = True
    full[y0:y1, x0:x1] = np.take((np.cumsum(used) - 1).astype(np.int32), lab)
    return full


def local_background(image: np.ndarray, known: np.ndarray, scales=(2.0, 6.0, 18.0), need: np.ndarray | None = None,
                     crop: bool = False, read: np.ndarray | None = None, fill: np.ndarray | None = None) -> np.ndarray:
    """``(h, w, 3) float32``: at every pixel the mean colour of the nearby ``known`` pixels (normalised Gaussian
    convolution, the finest of ``scales`` (px) that reaches known pixels): the surroundings spread into a region.
    ``need``: optional ``(h, w) bool`` pixels the caller reads; coarser scales are skipped once they are all reached
    (the other pixels may then hold anything). ``crop``: each scale's blurs only over the box of the pixels read
    (``read``, default ``need``; it holds ``need``) it has not reached yet plus the kernel's reach, and only the
    pixels read are set (the same values there; the others hold anything). ``fill``: the mean colour of the known
    pixels (what no scale reaches takes), if the caller has it."""
    import cv2

    if crop and need is not None:
        return _local_background_at(image, known, scales, need, need if read is None else read)
    k = known.astype(np.float32)
    ik = _times_known(image, known)
    out = np.zeros(image.shape, np.float32)
    done = np.zeros(known.shape, bool)
    for s in scales:
        wsum = cv2.GaussianBlur(k, (0, 0), s)
        ok = ~done & (wsum > 0.05)
        # where ok, wsum > 0.05: the same quotient as dividing by wsum
        blur = cv2.GaussianBlur(ik, (0, 0), s)
        cv2.copyTo(blur / np.maximum(wsum, 0.05)[..., None], ok.view(np.uint8), out)
        done |= ok
        if need is not None and done[need].all():
            return out
    if not done.all():
        out[~done] = fill if fill is not None else masked_rows(image, known).mean(0) if known.any() else image.reshape(-1, 3).mean(0)
    return out


def _local_background_at(image: np.ndarray, known: np.ndarray, scales, need: np.ndarray, read: np.ndarray
                         ) -> np.ndarray:
    """:func:`local_background` with ``crop``: the values at the ``read`` pixels only (each an elementwise quotient
    of the blurs, which are those over the whole image inside :func:`_blur_box`)."""
    out = np.zeros(image.shape, np.float32)
    ry, rx = _nonzero(read)
    if not len(ry):
        return out
    h, w = known.shape
    wait = np.ones(len(ry), bool)  # not reached yet
    needed = None if read is need else np.take(need.ravel(), ry * w + rx)
    flat = out.reshape(-1, 3)  # (pixels gathered and set by flat index: cheaper than by two index arrays)
    for s in scales:
        py, px = ry[wait], rx[wait]
        r = (int(round(s * 8 + 1)) | 1) // 2  # see _blur_box
        b0, b1 = int(py[0]), int(py[-1]) + 1  # the pixels' rows (in raster order) and columns
        p0, p1 = int(px.min()), int(px.max()) + 1
        y0, y1 = max(0, b0 - r), min(h, b1 + r)
        x0, x1 = max(0, p0 - r) // 16 * 16, min(w, p1 + r)
        k = known[y0:y1, x0:x1].astype(np.float32)
        # the outputs over the pixels' own box only (its rows; columns from a multiple of 16, a multiple of 16 wide
        # or to the crop's end), the input around it read from the crop (an ROI of it: the same values as the blur
        # of the whole crop there, bit for bit, tests/test_plate.py)
        c0 = p0 // 16 * 16
        c1 = min(x1, c0 + -(-(p1 - c0) // 16) * 16)
        roi = (b0 - y0, b1 - y0), (c0 - x0, c1 - x0)
        at = (py - b0) * (c1 - c0) + (px - c0)  # the pixels in the blurs' output (rows b0:b1, columns c0:c1)
        wsum = np.take(_roi_blur(k, roi, s).ravel(), at)
        ok = wsum > 0.05
        blur = _roi_blur(_times_known(image[y0:y1, x0:x1], known[y0:y1, x0:x1]), roi, s)
        flat[py[ok] * w + px[ok]] = np.take(blur.reshape(-1, 3), at[ok], axis=0) / wsum[ok][:, None]
        wait[np.flatnonzero(wait)[ok]] = False
        if not (wait if needed is None else wait & needed).any():
            return out
    if wait.any():
        out[ry[wait], rx[wait]] = masked_rows(image, known).mean(0) if known.any() else image.reshape(-1, 3).mean(0)
    return out


def _times_known(image: np.ndarray, known: np.ndarray) -> np.ndarray:
    """``image * known[..., None]`` (colours >= 0: the same bits, +0.0 where unknown) by a masked copy, cheaper."""
    import cv2

    return cv2.copyTo(image, known.view(np.uint8))  # (a new image: OpenCV fills it with zeros first)


def _roi_blur(image: np.ndarray, roi: tuple[tuple[int, int], tuple[int, int]], sigma: float) -> np.ndarray:
    """``cv2.GaussianBlur(image, (0, 0), sigma)`` over the rows and columns ``roi`` only, reading the pixels around
    them from ``image`` (a ``cv2.UMat`` region: OpenCV's border is then the image's, not the region's)."""
    import cv2

    (a, b), (c, d) = roi
    if (a, b, c, d) == (0, image.shape[0], 0, image.shape[1]):
        return cv2.GaussianBlur(image, (0, 0), sigma)
    ocl = cv2.ocl.useOpenCL()  # the CPU's code, as for a numpy array (an OpenCL device rounds otherwise)
    if ocl:
        cv2.ocl.setUseOpenCL(False)
    try:
        return cv2.GaussianBlur(cv2.UMat(cv2.UMat(image), (a, b), (c, d)), (0, 0), sigma).get()
    finally:
        if ocl:
            cv2.ocl.setUseOpenCL(True)


def spread_near(image: np.ndarray, known: np.ndarray, scales=(2.0, 6.0)) -> np.ndarray:
    """:func:`local_background` (every pixel) with the blurs only near the ``known`` pixels: farther than the
    largest kernel's reach from all of them no scale reaches a pixel, which then takes the mean of the known pixels
    either way (the same values, bit for bit: see :func:`_blur_box`)."""
    import cv2

    h, w = known.shape
    box = _blur_box(known, max(scales))
    if box is None or image[box].shape[:2] == (h, w):
        return local_background(image, known, scales)
    inside = np.zeros((h, w), bool)
    inside[box] = True
    wide = _blur_box(inside, max(scales))  # the blurs there are those over the whole image inside the box
    fill = masked_rows(image, known).mean(0)  # (the known pixels all lie in the box: the same mean there)
    # the blurs output only the box (columns a multiple of 16 wide or to the wide crop's end: see _roi_blur)
    y0, y1, x0 = box[0].start - wide[0].start, box[0].stop - wide[0].start, box[1].start - wide[1].start
    bw = box[1].stop - box[1].start
    x1 = min(wide[1].stop - wide[1].start, x0 + -(-bw // 16) * 16)
    im, kn = image[wide], known[wide]
    k = kn.astype(np.float32)
    ik = _times_known(im, kn)
    part = np.zeros((y1 - y0, x1 - x0, 3), np.float32)
    done = np.zeros(part.shape[:2], bool)
    for s in scales:  # local_background's steps without ``need``, over the box
        wsum = _roi_blur(k, ((y0, y1), (x0, x1)), s)
        ok = ~done & (wsum > 0.05)
        blur = _roi_blur(ik, ((y0, y1), (x0, x1)), s)
        cv2.copyTo(blur / np.maximum(wsum, 0.05)[..., None], ok.view(np.uint8), part)
        done |= ok
    part[~done] = fill
    out = np.empty(image.shape, np.float32)
    out[:] = fill
    out[box] = part[:, :bw]
    return out


def _blur_box(pixels: np.ndarray, sigma: float) -> tuple[slice, slice] | None:
    """The box of ``pixels`` plus the reach of ``cv2.GaussianBlur(float32, (0, 0), sigma)``, whose values inside
    the box are then those over the whole image bit for bit: it starts on a multiple of 16 columns (so OpenCV's
    vector loops split each row alike) and ends on the image border or past the reach. None: no pixels."""
    h, w = pixels.shape
    rows, cols = np.flatnonzero(pixels.any(1)), np.flatnonzero(pixels.any(0))
    if not len(rows):
        return None
    r = (int(round(sigma * 8 + 1)) | 1) // 2
    x0 = max(0, int(cols[0]) - r) // 16 * 16
    return slice(max(0, int(rows[0]) - r), min(h, int(rows[-1]) + r + 1)), slice(x0, min(w, int(cols[-1]) + r + 1))


def attached_static(frame: np.ndarray, anchor: np.ndarray, fg: np.ndarray, tau: float) -> np.ndarray:
    """``(h, w) bool`` anchor pixels that continue a foreground region of this frame without an edge: the still
    part of a thing whose other part moves (a robot's base, the arm that lingers while its gripper turns). No frame
    needs to show the background there, so they cannot be told from it by motion; they are reported, not trusted.

    Seeds: pixels just outside ``fg`` whose anchor colour is within ``tau`` of the frame's colour just inside (no
    edge across the outline in the frame). Grown over the anchor pixels that look like the foreground nearby
    (:func:`local_background` of the frame's foreground spread outwards), outside ``fg``."""
    import cv2

    m = fg.astype(np.uint8)
    ker = np.ones((3, 3), np.uint8)
    inner = (m > 0) & (cv2.erode(m, ker) == 0)
    outer = (cv2.dilate(m, ker) > 0) & (m == 0)
    n_in = cv2.boxFilter(inner.astype(np.float32), -1, (5, 5), normalize=False)
    f_in = cv2.boxFilter(_times_known(frame, inner), -1, (5, 5), normalize=False) / np.maximum(n_in, 1)[..., None]
    seeds = outer & (n_in > 0) & (channel_max(np.abs(f_in - anchor)) < tau)
    if not seeds.any():
        return np.zeros(fg.shape, bool)
    looks = spread_near(frame, fg, scales=(2.0, 6.0))
    similar = (channel_max(np.abs(anchor - looks)) < tau) & ~fg
    k, lab = cv2.connectedComponents(similar.astype(np.uint8), connectivity=8)
    hit = np.zeros(k, bool)
    hit[lab[seeds & similar]] = True  # (repeated labels: the same True)
    hit[0] = False
    return np.take(hit, lab)


def classify_regions(small: np.ndarray, anchor_s: np.ndarray, valid_s: np.ndarray | None, tau: np.ndarray,
                     ratio: float, open_px: int, close_px: int, min_area: int, holes: bool = True,
                     split: float = 0.0, links: dict | None = None, attached: bool = True,
                     level_floor: float = 1.0, dark_seam: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame, the pixels that deviate from the anchor, each called background / foreground / undecided.

    ``small``: ``(n, hs, ws, 3) float32`` frames; ``anchor_s`` ``(hs, ws, 3)``; ``valid_s`` optional ``(n, hs, ws)``
    samples not under a given mask; ``tau`` ``(n,)`` each frame's threshold (levels). Per pixel of a deviating region, the frame's and the anchor's colours are
    compared with the surroundings' (:func:`local_background` of the anchor outside the region): the one that
    continues its surroundings is the background. A component called background must also be one at its outline
    (the anchor's contrast across it above the frame's, :func:`region_seams`). Returns ``(n, hs, ws) bool`` each:
    ``bg`` (the frame shows the background behind a ghost of the anchor), ``fg`` (something in front), ``undecided``.
    ``links``: a dict kept across passes (per frame: the agreement links over a box, which do not depend on the
    anchor).
    ``attached``: add the still parts attached to the foreground (:func:`attached_static`) to ``undecided``.
    ``level_floor``: under 1, a pixel deviates by more than ``tau`` times the noise at its level
    (:func:`noise_by_level`, at least this fraction). ``dark_seam``: see :func:`_dark_parts_joined` (0: off)."""
    import cv2

    n = small.shape[0]
    links = {} if links is None else links
    bg = np.zeros(small.shape[:3], bool)
    fg = np.zeros_like(bg)
    und = np.zeros_like(bg)
    both = _with_ones(anchor_s, anchor_s)  # frame, anchor, 1: the anchor and the ones are set once
    deviation = np.stack([channel_max(cv2.absdiff(small[t], anchor_s)) for t in range(n)])
    by_level = noise_by_level(deviation, channel_max(anchor_s), level_floor) if level_floor < 1 else 1.0
    for t in range(n):
        dev = deviation[t] > tau[t] * by_level
        if valid_s is not None:
            dev &= valid_s[t]
        dev = clean_in_box(dev, open_px, close_px, holes, min_area)
        if not dev.any():
            continue
        def pieces(part, t=t):
            rows, cols = mask_box(part)
            box = (rows.start, rows.stop, cols.start, cols.stop)
            links[t] = _links_over(links.get(t), box, small, t, tau, valid_s, split)
            return split_by_agreement(links[t][1], part, min_area)

        both[..., :3] = small[t]
        bg[t], fg[t], und[t] = _classify_frame(small[t], anchor_s, dev, float(tau[t]), ratio, open_px, min_area,
                                               pieces if split > 0 else None, both, dark_seam)
        if attached and fg[t].any():
            und[t] |= attached_static(small[t], anchor_s, fg[t], float(tau[t]))
    return bg, fg, und


def clean_in_box(m: np.ndarray, open_px: int, close_px: int, fill: bool, min_area: int) -> np.ndarray:
    """:func:`clean_mask` over the box of ``m`` with a margin of empty pixels (or the image's border): opening and
    closing reach no farther than their radii, the holes and the components lie inside; the same mask."""
    box = mask_box(m, 2 * (open_px + close_px) + 2)
    if box is None:
        return np.zeros(m.shape, bool)
    out = np.zeros(m.shape, bool)
    out[box] = clean_mask(m[box], open_px, close_px, fill, min_area)
    return out


def _classify_frame(frame: np.ndarray, anchor: np.ndarray, dev: np.ndarray, tau: float, ratio: float, open_px: int,
                    min_area: int, pieces=None, both: np.ndarray | None = None, dark_seam: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bg, fg, undecided) ``(h, w) bool`` of one frame's deviating regions ``dev``: whole regions by their outline
    (:func:`region_seams`); regions that are neither (a thing that moved next to where it lingered) pixel by
    pixel against their surroundings (:func:`local_background`), background parts re-checked at their outline
    (and, near black, at their border with the rest of their region: :func:`_dark_parts_joined`).
    ``both``: ``_with_ones(frame, anchor)`` if the caller has it."""
    import cv2

    both = _with_ones(frame, anchor) if both is None else both
    lab, s_f, s_a, k = region_seams(frame, anchor, dev, both=both)
    r_bg = (s_a > ratio * s_f) & (s_a > 2 * tau)
    r_fg = (s_f > ratio * s_a) & (s_f > tau)
    r_bg[0] = r_fg[0] = False
    call = np.take(_calls(r_bg, r_fg), lab)  # per pixel: 1 its region is background, 2 foreground, 0 neither
    und_r = dev & (call == 0)
    whole = np.ones(dev.shape, bool)
    labels = pieces(und_r) if pieces is not None and und_r.any() else None
    if labels is not None:
        # regions decided whole keep their call; the others take the calls of their pieces (split where the frames
        # that agree with this one change), each judged on its outline towards the unchanged pixels
        lab_p, sf_p, sa_p, _ = region_seams(frame, anchor, dev, labels=labels, both=both)
        p_bg = (sa_p > ratio * sf_p) & (sa_p > 2 * tau)
        p_fg = (sf_p > ratio * sa_p) & (sf_p > tau)
        p_bg[0] = p_fg[0] = False
        lab = np.where(und_r, lab_p + k, lab)
        whole = ~und_r
        call = np.take(_calls(np.concatenate([r_bg, p_bg]), np.concatenate([r_fg, p_fg])), lab)
    around = local_background(anchor, ~dev, need=dev, crop=True)
    rows, cols = np.flatnonzero(dev.any(1)), np.flatnonzero(dev.any(0))
    box = slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)  # (only dev's box is read)
    e_f = channel_max(cv2.absdiff(frame[box], around[box]))
    e_a = channel_max(cv2.absdiff(anchor[box], around[box]))
    px_bg, px_fg = np.zeros_like(dev), np.zeros_like(dev)
    px_bg[box] = dev[box] & (e_a > ratio * e_f) & (e_a > 2 * tau) & (e_f < 3 * tau)  # the frame looks like its surroundings
    px_fg[box] = dev[box] & (e_f > ratio * e_a) & (e_f > tau)
    # a region's call holds for its pixels unless they say the opposite (a region that merged a thing in front
    # with the place it left): those stay undecided
    is_bg, is_fg = (call & 1).view(bool) & ~px_fg, (call >> 1).view(bool) & ~px_bg
    mixed = dev & (call == 0)
    if mixed.any():
        p_bg = clean_in_box(mixed & px_bg, open_px, 0, False, min_area)
        if p_bg.any():
            lab2, s_f2, s_a2, _ = region_seams(frame, anchor, p_bg, both=both)
            keep = s_a2 > s_f2
            keep[0] = False
            if dark_seam > 0 and keep.any():
                keep &= ~_dark_parts_joined(frame, anchor, dev & ~p_bg, lab2, keep, dark_seam * tau, both)
            p_bg = np.take(keep, lab2)
        is_bg |= p_bg
        is_fg |= mixed & ~p_bg & px_fg
    # a piece called foreground in a region undecided as a whole stays undecided for the confidence map
    return is_bg, is_fg, dev & ~is_bg & (~is_fg | ~whole)


def _dark_parts_joined(frame: np.ndarray, anchor: np.ndarray, rest: np.ndarray, lab: np.ndarray, keep: np.ndarray,
                       level: float, both: np.ndarray) -> np.ndarray:
    """``(k,) bool`` per label of ``lab`` (a frame's parts called background pixel by pixel, ``keep`` the ones kept
    so far): the kept parts whose frame colours are near black (their brightest channel's mean under ``level``)
    that border ``rest`` (``(h, w) bool``, the other pixels of their regions) without a seam over ``level`` there,
    in the frame or in the anchor.

    Such a part was called background because the frame continues its surroundings; near black that says little
    (a black arm continues a black post beside it as well as the post's own pixels would, and a camera's crushed
    blacks make them one level). A part that is the place a lingering thing left is set apart from the thing in
    front beside it in the frame, or from the lingering thing's rest in the anchor; a part that is more of the thing
    in front is set apart in neither."""
    import cv2

    k = len(keep)
    flat = lab.ravel()
    count = np.maximum(np.bincount(flat, minlength=k), 1)
    brightest = np.max([np.bincount(flat, frame[..., c].ravel(), k) for c in range(3)], axis=0) / count
    dark = keep & (brightest < level)
    if not dark.any():
        return dark
    _, s_f, s_a, _ = region_seams(frame, anchor, ~rest, labels=np.where(np.take(dark, lab), lab, 0), both=both)
    seam = np.zeros(k, np.float32)
    seam[:len(s_f)] = np.maximum(s_f, s_a)
    borders = np.zeros(k, bool)
    borders[lab[(cv2.dilate(rest.view(np.uint8), _square(3)) > 0) & (lab > 0)]] = True
    return dark & borders & (seam <= level)


def _calls(r_bg: np.ndarray, r_fg: np.ndarray) -> np.ndarray:
    """``(k,) uint8`` per label: bit 0 called background, bit 1 called foreground (one lookup per pixel for both)."""
    return r_bg.view(np.uint8) | (r_fg.view(np.uint8) << 1)


def tone_curves(small: np.ndarray, anchor_s: np.ndarray, valid_s: np.ndarray | None, tol: float = 20.0,
                bins: int = 16) -> np.ndarray:
    """``(n, 256, 3) float32`` per-frame per-channel monotone tone curves mapping each frame's levels onto the
    anchor's (auto-exposure and tone mapping of webcams are not a pure gain). Fitted on the pixels that agree
    within ``tol`` levels: the mean difference per level bin, interpolated, made monotone."""
    n = small.shape[0]
    levels = np.arange(256, dtype=np.float32)
    centres = (np.arange(bins) + 0.5) * 256.0 / bins
    out = np.empty((n, 256, 3), np.float32)
    for t in range(n):
        d = anchor_s - small[t]
        ok = channel_max(np.abs(d)) < tol
        if valid_s is not None:
            ok &= valid_s[t]
        v_ok, d_ok = masked_rows(small[t], ok), masked_rows(d, ok)  # (k, 3): all channels gathered at once
        b_ok = np.minimum((v_ok * bins / 256.0).astype(np.int64), bins - 1)
        for c in range(3):
            b = b_ok[:, c]
            cnt = np.bincount(b, minlength=bins)
            mean = np.bincount(b, d_ok[:, c], minlength=bins) / np.maximum(cnt, 1)
            have = cnt >= 20
            off = np.interp(levels, centres[have], mean[have]) if have.sum() >= 2 else np.full(256, float(mean[have].mean()) if have.any() else 0.0)
            out[t, :, c] = np.maximum.accumulate(np.clip(levels + off, 0, 255))
    return out


def apply_tone(frames: np.ndarray, curves: np.ndarray | None, luts: np.ndarray | None = None) -> np.ndarray:
    """``(n, h, w, 3) uint8`` frames through their ``(n, 256, 3)`` tone curves (``cv2.LUT``). ``luts``: ``(n, 256,
    3) uint8`` level maps applied before the curves (the exposure gains), composed with them into one lookup;
    ``curves`` None: those maps only; both None: a copy of the frames."""
    import cv2

    if curves is None and luts is None:
        return frames.copy()
    out = np.empty_like(frames)
    for t in range(len(frames)):
        lut = None if curves is None else np.clip(curves[t] + 0.5, 0, 255).astype(np.uint8)
        if luts is not None:
            lut = luts[t] if lut is None else np.take_along_axis(lut, luts[t].astype(np.intp), 0)
        cv2.LUT(frames[t], lut.reshape(1, 256, 3), dst=out[t])
    return out


def invert_tone(image: np.ndarray, curve: np.ndarray) -> np.ndarray:
    """``(h, w, 3) uint8`` from the anchor's tone back to one frame's (the inverse of its ``(256, 3)`` curve)."""
    import cv2

    levels = np.arange(256, dtype=np.float32)
    inv = np.stack([np.interp(levels, curve[:, c] + 1e-4 * levels, levels) for c in range(3)], -1)
    return cv2.LUT(image, np.clip(inv + 0.5, 0, 255).astype(np.uint8).reshape(1, 256, 3))


def to_frame_tone(plate: np.ndarray, frame: np.ndarray, shown: np.ndarray, curve: np.ndarray, bins: int = 16,
                  min_count: int = 50) -> np.ndarray:
    """``(h, w, 3) uint8`` plate (in the anchor's tone) in ``frame``'s tone: per channel and level bin, the median of
    frame minus plate over the pixels where ``frame`` showed the background (``shown``, ``(h, w) bool``), interpolated
    and made monotone. The frame's own tone curve was fitted at the detection resolution over every pixel that
    roughly agreed (foreground edges, few bright pixels): its error would go into every pixel of the plate; where
    too few pixels show the background, its inverse (``curve``, ``(256, 3)``) is used."""
    import cv2

    if shown.sum() < 4 * min_count:
        return invert_tone(plate, curve)
    levels = np.arange(256, dtype=np.float32)
    centres = (np.arange(bins) + 0.5) * 256.0 / bins
    p_ok, f_ok = masked_rows(plate, shown), masked_rows(frame, shown)
    b_ok = (p_ok.astype(np.int64) * bins) >> 8
    lut = np.empty((256, 3), np.float32)
    for c in range(3):
        # the differences are whole levels: each bin's median from its histogram of them (no sort)
        hist = np.bincount(b_ok[:, c] * 511 + (f_ok[:, c].astype(np.int64) - p_ok[:, c] + 255),
                           minlength=bins * 511).reshape(bins, 511)
        cnt = hist.sum(1)
        have = cnt >= min_count
        med = (np.argmax(np.cumsum(hist, 1) > (cnt // 2)[:, None], 1) - 255).astype(np.float32)
        if have.sum() >= 2:
            off = np.interp(levels, centres[have], med[have])
        else:
            off = np.full(256, float(med[have].mean()) if have.any() else 0.0)
        lut[:, c] = np.maximum.accumulate(np.clip(levels + off, 0, 255))
    return cv2.LUT(plate, np.clip(lut + 0.5, 0, 255).astype(np.uint8).reshape(1, 256, 3))


def noise_by_level(d: np.ndarray, level: np.ndarray, floor: float, bins: int = 8) -> np.ndarray:
    """``(hs, ws) float32``: the frames' noise at each pixel's level over their noise overall, between ``floor``
    and 1. ``d``: ``(n, hs, ws)`` the frames' deviation from the anchor (brightest channel); ``level``: ``(hs, ws)``
    the anchor's brightest channel. Per quantile bin of the level, the lower quartile of the deviations over that of
    every pixel, interpolated. A camera's tone curve compresses the noise and the contrast of its dark levels (or of
    its bright ones) alike: one threshold for every level, set by the levels most pixels have, misses a black arm
    over a dark wall."""
    q_all = float(np.percentile(d, 25))
    centres, ks = by_quantile_bins(level, lambda sel: float(np.percentile(d[:, sel], 25)) / max(q_all, 1e-6), bins, 20)
    if not centres:
        return np.ones(level.shape, np.float32)
    return np.clip(np.interp(level, centres, ks), floor, 1.0).astype(np.float32)


def frame_sigmas(small: np.ndarray, anchor_s: np.ndarray) -> np.ndarray:
    """``(n,)`` each frame's noise around the anchor at the detection resolution (lower quartile / 0.3186)."""
    d = np.abs(small - anchor_s[None]).reshape(len(small), -1)
    return np.maximum(0.5, lower_quartile(d) / Q25_HALF_NORMAL)


def lower_quartile(d: np.ndarray) -> np.ndarray:
    """``np.percentile(d, 25, axis=1)`` of a 2-D array by partial sorting (the same value, several times faster)."""
    m = d.shape[1]
    k = 0.25 * (m - 1)
    lo, hi = int(np.floor(k)), int(np.ceil(k))
    part = np.partition(d, sorted({lo, hi}), axis=1)
    return part[:, lo] + (k - lo) * (part[:, hi] - part[:, lo])


def mode_members(small: np.ndarray, anchor_s: np.ndarray, tau: np.ndarray, valid_s: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Where the median is not backed by a majority, the largest set of frames that agree with each other.

    A static background agrees with itself; a robot that moves spreads its colours, so where it covers a pixel in
    more than half of the frames the median is the robot but the largest agreeing set is still the background.
    ``small`` ``(n, hs, ws, 3)``, ``anchor_s`` ``(hs, ws, 3)``, ``tau`` ``(n,)`` levels. Returns (members
    ``(n, hs, ws) bool`` (all False where the median is kept), pixels where the mode replaces it ``(hs, ws)``)."""
    n = small.shape[0]
    th = tau[:, None, None]
    ok = np.ones(small.shape[:3], bool) if valid_s is None else valid_s
    support = ((channel_max(np.abs(small - anchor_s[None])) <= th) & ok).sum(0)
    avail = ok.sum(0)
    sus = (support < 0.5 * avail) & (avail >= 3)
    members = np.zeros(small.shape[:3], bool)
    if not sus.any():
        return members, sus
    ys, xs = _nonzero(sus)
    vals = small[:, ys, xs]  # (n, k, 3)
    okk = ok[:, ys, xs]
    tk = tau[:, None]
    best = np.full(len(ys), -1)
    best_i = np.zeros(len(ys), np.int64)
    for i in range(n):
        agree = (channel_max(np.abs(vals - vals[i][None])) <= np.maximum(tk, tk[i])) & okk
        cnt = np.where(okk[i], agree.sum(0), -1)
        better = cnt > best
        best, best_i = np.where(better, cnt, best), np.where(better, i, best_i)
    centre = vals[best_i, np.arange(len(ys))]
    agree = (channel_max(np.abs(vals - centre[None])) <= tk) & okk
    use = (best > support[ys, xs]) & (agree.sum(0) >= 2)
    members[:, ys[use], xs[use]] = agree[:, use]
    sus[:] = False
    sus[ys[use], xs[use]] = True
    return members, sus


def upsample(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(hs, ws) bool`` -> ``(h, w) bool`` (size = (w, h)), bilinear then > 0.5."""
    import cv2

    if not mask.any():
        return np.zeros(size[::-1], bool)
    return cv2.resize(mask.astype(np.uint8) * 255, size, interpolation=cv2.INTER_LINEAR) > 127


def upsample_all(masks: np.ndarray, size: tuple[int, int], grow: np.ndarray | None = None) -> np.ndarray:
    """``(n, hs, ws) bool`` -> ``(n, h, w) bool``: :func:`upsample` of each (dilated by ``grow`` first, if given),
    written in place (no stack of copies)."""
    import cv2

    out = np.zeros((len(masks),) + size[::-1], bool)
    for t, m in enumerate(masks):
        if m.any():
            m8 = cv2.dilate(m.view(np.uint8), grow) if grow is not None else m.view(np.uint8)
            np.greater(cv2.resize((m8 > 0).view(np.uint8) * np.uint8(255), size, interpolation=cv2.INTER_LINEAR), 127,
                       out=out[t])
    return out


def ghost_anchor(frames: np.ndarray, anchor: np.ndarray, votes_bg: np.ndarray, votes_fg: np.ndarray, tol: float,
                 min_agree: int = 2, shade: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``anchor`` with each pixel that frames show *behind* a ghost replaced by the median of those frames.

    ``votes_bg`` / ``votes_fg``: ``(n, h, w) bool`` frames called background behind a ghost / foreground at each
    pixel. A pixel is replaced when at least ``min_agree`` frames called background agree within ``tol`` (levels)
    with that median (the background is static; one frame could be anything) and, among all frames showing that
    colour, more were called background than foreground. ``shade`` > 0: a median that is the anchor darkened alike
    in every channel (each channel's ratio under 1 - ``shade``, the ratios within ``shade`` of each other) is a
    shadow over the anchor, not what a ghost hid: the anchor is kept there (a candidate not replaced). Returns
    (anchor, replaced ``(h, w) bool``, candidates not replaced ``(h, w) bool``)."""
    pix = votes_bg.any(0)
    none = np.zeros(pix.shape, bool)
    if not pix.any():
        return anchor, none, none
    n, h, w = votes_bg.shape
    ys, xs = _nonzero(pix)
    at = ys * w + xs
    vals = np.take(frames.reshape(n, h * w, 3), at, axis=1)  # (n, k, 3) uint8 (np.take: cheaper than [:, at])
    b = np.take(votes_bg.reshape(n, h * w), at, axis=1)
    k = b.sum(0)
    two = _two_medians(np.where(b[..., None], vals, np.uint8(255)).reshape(n, -1), np.repeat(k, 3)).reshape(-1, 3)
    med = two.astype(np.float32) / 2
    same = channel_max(np.abs(2 * vals.astype(np.int16) - two[None])) <= 2 * tol
    n_bg = (same & b).sum(0)
    n_fg = (same & np.take(votes_fg.reshape(n, h * w), at, axis=1)).sum(0)
    ok = (n_bg >= min_agree) & (n_bg > n_fg)
    if shade > 0 and ok.any():
        ok &= ~_shadow_parts(ys, xs, ok, med, anchor, shade)
    out = anchor.copy()
    out[ys[ok], xs[ok]] = np.clip(med[ok] + 0.5, 0, 255).astype(np.uint8)
    replaced, weak = none.copy(), none.copy()
    replaced[ys[ok], xs[ok]] = True
    weak[ys[~ok], xs[~ok]] = True
    return out, replaced, weak


def _shadow_parts(ys: np.ndarray, xs: np.ndarray, ok: np.ndarray, med: np.ndarray, anchor: np.ndarray,
                  shade: float) -> np.ndarray:
    """``(k,) bool``: the candidates (at ``ys, xs``; ``ok`` the ones to replace, ``med`` ``(k, 3)`` their new
    colours) in a connected part of the replaced pixels whose new colours are the anchor's darkened alike in every
    channel (per channel the part's median ratio new / anchor under ``1 - shade``, the three within ``shade``) with
    the anchor's texture showing through (the grey levels of old and new correlate at 0.5 or more over the part: a
    shadow keeps the texture, an object that left had its own; a flat part cannot tell and is not a shadow)."""
    import cv2

    h, w = anchor.shape[:2]
    img = np.zeros((h, w), np.uint8)
    img[ys[ok], xs[ok]] = 1
    k, lab = cv2.connectedComponents(img, connectivity=8)
    part = lab[ys, xs]
    old = anchor[ys, xs].astype(np.float32)
    shadow = np.zeros(k, bool)
    sel = np.flatnonzero(ok)
    sel = sel[np.argsort(part[sel], kind="stable")]  # the candidates grouped by part: one pass over them all
    for at in np.split(sel, np.flatnonzero(np.diff(part[sel])) + 1):
        if len(at) >= 3:
            shadow[part[at[0]]] = _shaded_alike(med[at], old[at], shade)
    return shadow[part] & ok


def _shaded_alike(dark: np.ndarray, lit: np.ndarray, shade: float, max_lift: float = np.inf,
                  flat: float = 0.0) -> bool:
    """Whether the colours ``dark`` ``(k, 3)`` are ``lit`` ``(k, 3)`` under a shadow: per channel the median ratio
    dark / lit under ``1 - shade``, the three within ``shade`` of each other and none under ``1 / max_lift``, and
    the grey levels correlating at 0.5 or more (each varying by more than ``flat``, standard deviation: a shadow
    keeps the texture, an object has its own; a flat part cannot tell)."""
    r = np.median((dark + 1.0) / (lit + 1.0), axis=0)
    if not (r.max() < 1.0 - shade and r.max() - r.min() < shade and r.min() >= 1.0 / max_lift):
        return False
    g_dark, g_lit = dark.sum(1), lit.sum(1)
    return bool(g_dark.std() > flat and g_lit.std() > flat and np.corrcoef(g_dark, g_lit)[0, 1] >= 0.5)


def _two_medians(keys: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``(m,) int16`` twice the median of the first ``k`` ``(m,)`` (>= 1) sorted values of each column of ``(n, m)
    uint8`` ``keys`` (the sum of the values of rank ``(k - 1) // 2`` and ``k // 2``): the samples not counted hold
    255, so they sort after the others (a counted 255 is the same value). A sorting network of elementwise min/max
    over blocks of columns (:func:`rank_network`), the same values as a sort, several times faster."""
    n, m = keys.shape
    top = n // 2
    ops = rank_network(n, tuple(range(top + 1)))
    lo, hi = ((k - 1) // 2)[None], (k // 2)[None]
    out = np.empty(m, np.int16)
    step = max(4096, (1 << 20) // n)
    for a in range(0, m, step):
        wires = run_network([keys[t, a:a + step] for t in range(n)], ops)
        ranked = np.stack(wires[:top + 1])
        out[a:a + step] = (np.take_along_axis(ranked, lo[:, a:a + step], 0)[0].astype(np.int16)
                           + np.take_along_axis(ranked, hi[:, a:a + step], 0)[0])
    return out


def trimmed_mean(frames: np.ndarray, anchor: np.ndarray, tol: np.ndarray, valid: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean of the samples within ``tol`` ``(h, w)`` (max channel) of ``anchor``; the anchor where none is.

    Returns (plate ``(h, w, 3) uint8``, count ``(h, w) int32``, used ``(n, h, w) bool``)."""
    import cv2

    n, h, w, _ = frames.shape
    acc = np.zeros((h, w, 3), np.float32)
    used = np.empty((n, h, w), bool)
    tol8 = np.clip(np.floor(tol), 0, 255).astype(np.uint8)  # the differences are whole levels
    tol3 = cv2.merge([tol8, tol8, tol8])
    # |frame - anchor| <= tol8 in every channel <=> frame in [anchor - tol8, anchor + tol8], the bounds saturated to
    # [0, 255] (which every level lies in): one cv2.inRange per frame (255 where all three channels are within)
    lo, hi = cv2.subtract(anchor, tol3), cv2.add(anchor, tol3)
    for t in range(n):
        within = cv2.inRange(frames[t], lo, hi)
        u = used[t]  # (written in place, as 0/1 bytes: 255 & 1, or 255 & valid)
        if valid is None:
            np.bitwise_and(within, 1, out=u.view(np.uint8))
        else:
            cv2.bitwise_and(within, valid[t].view(np.uint8), dst=u.view(np.uint8))
        cv2.accumulate(frames[t], acc, mask=within if valid is None else u.view(np.uint8))
    count = used.sum(0, dtype=np.int32)
    # float32 rounds the same: sums of whole levels over at most 2^14 frames are exact and the fraction of the mean
    # is a multiple of 1 / count, at least 1 / (2 count) from 0.5 unless it is 0.5 (exact)
    mean = acc / np.maximum(count, 1).astype(np.float32)[..., None]
    plate = (mean + np.float32(0.5)).astype(np.uint8)  # (a mean of levels lies in [0, 255]: nothing to clip)
    none = count == 0
    np.copyto(plate, anchor, where=none[..., None])
    return plate, count, used


def retrim(frames: np.ndarray, anchor: np.ndarray, tol: np.ndarray, valid: np.ndarray | None, where: np.ndarray,
           plate: np.ndarray, count: np.ndarray, used: np.ndarray) -> None:
    """:func:`trimmed_mean` again where the anchor changed (``where``, ``(h, w) bool``), over that box only:
    ``plate``, ``count`` and ``used`` updated in place there."""
    box = mask_box(where)
    sub = (slice(None),) + box
    p, c, u = trimmed_mean(frames[sub], anchor[box], tol[box], None if valid is None else valid[sub])
    at = where[box]
    plate[box][at], count[box][at] = p[at], c[at]
    used[sub][:, at] = u[:, at]


def estimate_background(frames: np.ndarray, valid: np.ndarray | None, cfg, detect: bool = True, ref: int = 0,
                        luts: np.ndarray | None = None) -> BackgroundEstimate:
    """The background of ``(n, h, w, 3) uint8`` exposure-compensated frames (see the module docstring).

    ``valid``: optional ``(n, h, w) bool`` samples not covered by a given mask. ``cfg``: a ``PlateConfig``.
    ``detect``: tell regions apart (False: the masked median and the trimmed mean only). ``ref``: the frame whose
    tone the plate takes. ``luts``: optional ``(n, 256, 3) uint8`` per-frame per-channel level maps (the exposure
    gains, :func:`real2sim.capture.plate.gain_luts`) the frames are to go through first: they are composed with
    the tone curves (the frames then go through one lookup, not two)."""
    import cv2

    n, h, w, _ = frames.shape
    size = (detect_size(h, w, min(cfg.detect_pixels, max(4000, int(cfg.detect_fraction * h * w)))) if not cfg.detect_scale else
            (max(16, int(round(w * cfg.detect_scale))), max(16, int(round(h * cfg.detect_scale)))))
    small = shrink(frames, size, luts)
    valid_s = None if valid is None else shrink(valid.astype(np.uint8)[..., None].repeat(3, -1) * 255, size)[..., 0] > 127
    curves = None
    if n >= 2 and cfg.tone_curves:
        curves = tone_curves(small, temporal_median(small.astype(np.uint8), valid_s), valid_s)
        if np.abs(curves - np.arange(256, dtype=np.float32)[None, :, None]).max() < 0.5:
            curves = None  # every curve rounds to the identity: nothing to map (and nothing to map back)
        else:
            ref_frame = apply_tone(frames[ref:ref + 1], None, None if luts is None else luts[ref:ref + 1])[0]
            frames = apply_tone(frames, curves, luts)
            small = shrink(frames, size)
    if luts is not None and curves is None:
        frames = apply_tone(frames, None, luts)  # the exposure gains alone
    anchor = temporal_median(frames, valid)
    median = anchor
    sigma, s_ghost = noise_sigmas(frames, anchor, valid)
    tol_ghost = 3 * s_ghost + cfg.fg_threshold * 255  # frames behind a ghost within this of each other agree
    # the trimmed mean's tolerance takes the interpolated quartile; the tolerance that groups the frames behind a
    # ghost and the arbiter's margin keep the whole-level one they were tuned with (the interpolated one there:
    # google_c2 -2.8 dB, its lingering robot's frames fall into more groups; docs/capture.md)
    anchor_s = shrink(anchor[None], size)[0]
    sig_t = frame_sigmas(small, anchor_s)
    tau_t = np.maximum(cfg.fg_sigmas * sig_t, cfg.fg_threshold * 255)
    tau_s = float(np.median(tau_t))
    min_area = max(4, int(cfg.min_blob_frac * size[0] * size[1]))
    ghost = np.zeros((h, w), bool)
    undecided = np.zeros((h, w), bool)
    one = None
    steps = []  # (pass's replaced pixels, anchor before it) of the passes after the first
    report = {"noise_sigma": round(sigma, 3), "detect_size": list(size), "threshold_levels": round(tau_s, 2)}
    if n >= 3 and detect and cfg.mode_anchor:
        members, moded = mode_members(small, anchor_s, tau_t, valid_s)
        if moded.any():
            mem = np.stack([upsample(m, (w, h)) for m in members])
            anchor, _, _ = ghost_anchor(frames, anchor, mem & (True if valid is None else valid),
                                        np.zeros_like(mem), tol_ghost)
            anchor_s = shrink(anchor[None], size)[0]
        report["mode_fraction"] = round(float(moded.mean()), 6)
    if n >= 2 and detect:
        peel = disk(max(1, int(round(cfg.peel_reach * np.sqrt(h * w)))))
        grow = np.ones((3, 3), np.uint8)
        und_n = np.zeros(size[::-1], np.int64)
        links = {}
        for it in range(max(1, cfg.passes)):
            # the still parts attached to the foreground only feed the confidence: found once, after the last pass
            bg_s, fg_s, und_s = classify_regions(small, anchor_s, valid_s, tau_t, cfg.ghost_ratio, cfg.open_px,
                                                 cfg.close_px, min_area, cfg.fill_holes, cfg.split_jaccard, links,
                                                 attached=False, level_floor=cfg.level_noise_floor,
                                                 dark_seam=cfg.dark_part_seam)
            anchor_c = anchor_s
            und_n = np.maximum(und_n, und_s.sum(0))  # undecided in any pass
            if not bg_s.any():
                break
            behind = upsample_all(bg_s, (w, h), grow)
            front = upsample_all(fg_s, (w, h))
            if valid is not None:
                behind &= valid
            if it > 0:  # later passes peel what is left of a ghost found before: only next to it
                near = cv2.dilate(ghost.view(np.uint8), peel) > 0
                if cfg.peel_reach_ghost > 0:
                    near |= grow_parts(ghost, cfg.peel_reach_ghost)
                behind &= near[None]  # (the candidates that stay weak are reported by the first pass)
            new, rep, weak = ghost_anchor(frames, anchor, behind, front, tol_ghost, shade=cfg.ghost_shade)
            if it == 0 and cfg.ghost_one_frame > 0 and weak.any():  # what one frame alone shows: judged below
                one_new, one = ghost_anchor(frames, anchor, behind & weak, front, tol_ghost, min_agree=1,
                                            shade=cfg.ghost_shade)[:2]
            if it > 0:
                rep &= near
                k2, lab2 = cv2.connectedComponents(rep.view(np.uint8), connectivity=8)
                hit = np.zeros(k2, bool)
                hit[lab2[(cv2.dilate(ghost.view(np.uint8), grow) > 0) & rep]] = True
                hit[0] = False
                rep &= hit[lab2]
                new = np.where(rep[..., None], new, anchor)
            if not rep.any():
                break
            if it > 0:
                steps.append((rep, anchor))
            anchor = new
            ghost |= rep
            undecided |= weak
            anchor_s = shrink(anchor[None], size)[0]
            if it == 0:
                anchor_1, ghost_1 = anchor.copy(), ghost.copy()
        report["passes"] = it + 1
        peeled = ghost & ~ghost_1 if it > 0 else None
        if peeled is not None and peeled.any() and cfg.peel_support > 0:
            # what the later passes peeled, kept only where enough frames show it (not a cascade into a thing passing)
            back = peeled & ~peel_supported(frames, valid, anchor_1, anchor, peeled,
                                            tol_ghost, cfg.peel_support, cfg.peel_majority)
            anchor = np.where(back[..., None], anchor_1, anchor)
            ghost &= ~back
            undecided |= back
            report["peel_reverted_fraction"] = round(float(back.mean()), 6)
        for t in range(n):  # against the anchor of the last pass's calls
            if fg_s[t].any():
                und_s[t] |= attached_static(small[t], anchor_c, fg_s[t], float(tau_t[t]))
        und_n = np.maximum(und_n, und_s.sum(0))
        # undecided: regions of unknown side over this pixel in enough frames that the plate could be either
        need = max(2, int(np.ceil(cfg.undecided_fraction * n)))
        undecided |= upsample(und_n >= need, (w, h))
        report.update(ghost_fraction=round(float(ghost.mean()), 6), undecided_fraction=round(float(undecided.mean()), 6),
                      regions_background=int(bg_s.any((1, 2)).sum()), frames_with_foreground=int(fg_s.any((1, 2)).sum()))
    grad = gradient_magnitude(anchor)
    tol = np.maximum(cfg.average_sigmas * np.sqrt(sigma ** 2 + (cfg.jitter_px * grad) ** 2), cfg.average_tolerance * 255)
    plate, count, used = trimmed_mean(frames, anchor, tol, valid)
    n_avail = n if valid is None else valid.sum(0)
    if detect and cfg.ghost_foreign > 0 and ghost.any():
        back = foreign_ghosts(frames, plate, used, ghost, valid, median, anchor, cfg.ghost_foreign,
                              cfg.foreign_fine_dark)
        if back.any():  # the median back there, reported
            anchor = np.where(back[..., None], median, anchor)
            ghost &= ~back
            undecided |= back
            retrim(frames, anchor, tol, valid, back, plate, count, used)
        report["ghost_foreign_fraction"] = round(float(back.mean()), 6)
    if detect and cfg.ghost_pass_foreign > 0 and steps and ghost.any():
        anchor, back = foreign_passes(foreground_likelihood(frames, plate, used, ghost, valid), anchor, ghost, steps,
                                      cfg.ghost_pass_foreign, max(1.0, cfg.ghost_pass_window * np.sqrt(h * w)),
                                      max(4, int(cfg.min_blob_frac * h * w)))
        if back.any():  # the colours before the pass back there, reported
            undecided |= back
            retrim(frames, anchor, tol, valid, back, plate, count, used)
        report["ghost_pass_foreign_fraction"] = round(float(back.mean()), 6)
    if one is not None and (one & ~ghost).any():
        taken = one_frame_ghosts(frames, plate, count, used, valid, n_avail, anchor, one_new, one & ~ghost,
                                 cfg.ghost_one_frame, cfg.foreign_fine_dark)
        if taken.any():  # one frame decided them: reported
            anchor = np.where(taken[..., None], one_new, anchor)
            ghost |= taken
            undecided |= taken
            retrim(frames, anchor, tol, valid, taken, plate, count, used)
        report["ghost_one_frame_fraction"] = round(float(taken.mean()), 6)
    # where the frames agreeing with the median are no majority (and no ghost was resolved) the samples are a mix:
    # the median itself hedges better than any subset's mean
    mixed = ~ghost & (count < 0.5 * n_avail)
    np.copyto(plate, anchor, where=mixed[..., None])  # (plate[mixed] = anchor[mixed], cheaper)
    spatial = np.zeros((h, w), bool)
    if detect and n >= 2 and cfg.arbiter_ratio > 0:
        spatial = arbitrate(frames, plate, mixed, count, used, valid, n_avail, s_ghost, tol, cfg)
        undecided |= spatial
        report["spatial_fraction"] = round(float(spatial.mean()), 6)
    moded = np.zeros((h, w), bool)
    if detect and cfg.mixed_mode > 0:
        # after the arbiter: where space decided, it stays decided (before it, the mode moved the arbiter's calls)
        scale = None
        if cfg.mixed_mode_levels and (mixed & ~spatial).any():
            scale = level_scale(noise_levels(frames, anchor, valid))
        moded = mixed_mode(frames, plate, mixed & ~spatial, count, used, valid, tol, cfg.mixed_mode, scale)
        undecided |= moded  # a plurality decided them, not a majority: reported
        report["mixed_mode_fraction"] = round(float(moded.mean()), 6)
    if detect and n >= 3 and cfg.foreign_majority > 0 and (valid is None or cfg.foreign_majority_with_masks):
        # the pixels left undecided (a ghost's too: the frames behind a lingering arm can be the arm passing) or mixed
        # after the arbiter and the mode (what they decided stays); a minority decided these: reported. Not with given
        # masks of the things in front: what they leave of them (edges, shadows) reads as their colours (the
        # one-command clips with the robot's masks lost up to 4.8 dB); masks of still objects only may be given
        left = (undecided | mixed) & ~spatial & ~moded
        taken = foreign_majority(frames, plate, left, count, used, valid, tol,
                                 cfg.foreign_majority, cfg.foreign_majority_ratio,
                                 max(4, int(cfg.min_blob_frac * h * w)))
        undecided |= taken
        report["foreign_majority_fraction"] = round(float(taken.mean()), 6)
    if detect and n >= 2 and cfg.shadow_lift > 1:
        core = ShadowCore(cfg.shadow_lift_core, cfg.shadow_lift_foreign, cfg.shadow_lift_core_area,
                          lambda: agreed_likelihood(frames, plate, count, used, mixed, valid, n_avail))
        plate, lifted = lift_shadows(frames, small, plate, valid, valid_s, tol, min_area, cfg.ghost_shade,
                                     cfg.shadow_lift, core if cfg.shadow_lift_core > 0 else None)
        undecided |= lifted  # a minority of the frames decided them: reported
        report["shadow_lifted_fraction"] = round(float(lifted.mean()), 6)
    if curves is not None:  # back to the reference frame's tone
        plate = to_frame_tone(plate, ref_frame, used[ref], curves[ref])
    return BackgroundEstimate(plate, count, used, ghost, undecided, sigma, report)


@dataclass(frozen=True)
class ShadowCore:
    """When :func:`lift_shadows` lifts a shadow's core (see ``PlateConfig.shadow_lift_core``)."""

    step: float
    """The lit colours' step at the part's outline, at most this times the plate's."""
    foreign: float
    """Their mean log likelihood ratio, things in front over the background, under this."""
    area: float
    """The part at least this fraction of the image."""
    likelihood: object
    """Makes the likelihood function (colours ``(k, 3)`` -> ``(k,)``; :func:`agreed_likelihood`): called once,
    for the first part that needs it."""


def lift_shadows(frames: np.ndarray, small: np.ndarray, plate: np.ndarray, valid: np.ndarray | None,
                 valid_s: np.ndarray | None, tol: np.ndarray, min_area: int, shade: float, max_lift: float,
                 core: ShadowCore | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``plate`` with the cast shadows that lingered in most frames lifted, and the pixels lifted ``(h, w) bool``.

    The median keeps a shadow that covers a place in most frames (a robot's, where its arm stays); the frames
    that show the place lit show it brighter alike in every channel with the same texture. Found on ``small``
    (the frames shrunk, ``(n, hs, ws, 3) float32``; ``valid_s`` their valid samples): parts of at least ``min_area`` pixels that 2 or more frames show lit (:func:`_lit`), taken when
    the part as a whole is the plate lifted alike in every channel by at most ``max_lift``, its grey levels
    correlate with the plate's at 0.5 or more (a flat part cannot tell a shadow from an object) and its lit colours
    continue the surroundings across its outline (a step at most half the plate's there: a shadow's edge is in the
    plate, a lighter thing's own outline would be in the frames). Then at full size, in the parts grown by 2 px
    (the penumbra), each pixel takes the mean of its lit samples. ``frames``: ``(n, h, w, 3) uint8`` in the
    plate's tone; ``tol``: ``(h, w)`` the noise tolerance (levels); ``valid``: optional ``(n, h, w) bool``.

    ``core``: optional :class:`ShadowCore`: a part of at least ``area`` of the image whose lit colours step at
    its outline up to ``step`` times the plate's is lifted too when their mean log likelihood ratio, things in
    front over the background, is under ``foreign``: the core of a soft shadow, its penumbra still in the plate
    around it, continues no surroundings the plate has, and a lighter link over a darker one has the colours of
    the things in front."""
    import cv2

    n, h, w, _ = frames.shape
    size = (small.shape[2], small.shape[1])
    plate_s = shrink(plate[None], size)[0]
    tol_s = cv2.resize(tol.astype(np.float32), size, interpolation=cv2.INTER_AREA)
    lit = _lit(small, plate_s, tol_s, shade, max_lift)
    if valid_s is not None:
        lit &= valid_s
    k, lab, st, _ = cv2.connectedComponentsWithStats((lit.sum(0) >= 2).view(np.uint8), connectivity=8)
    keep = np.zeros(k, bool)
    like = None  # made for the first shadow core that needs it
    for i in np.flatnonzero(st[1:, cv2.CC_STAT_AREA] >= min_area) + 1:
        part = lab == i
        on = lit[:, part]
        mean = (small[:, part] * on[..., None]).sum(0) / on.sum(0)[:, None]
        step = _shadow_step(part, mean, plate_s, shade, max_lift)
        keep[i] = step < 0.5
        if not keep[i] and core is not None and step < core.step and st[i, cv2.CC_STAT_AREA] >= core.area * part.size:
            like = like or core.likelihood()
            keep[i] = float(np.mean(like(mean))) < core.foreign
    lifted = np.zeros((h, w), bool)
    if not keep.any():
        return plate, lifted
    region = cv2.resize(keep[lab].view(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST)
    ys, xs = _nonzero(cv2.dilate(region, np.ones((5, 5), np.uint8)) > 0)
    vals = frames[:, ys, xs].astype(np.float32)
    on = _lit(vals, plate[ys, xs].astype(np.float32), tol[ys, xs], shade, max_lift)
    if valid is not None:
        on &= valid[:, ys, xs]
    c = on.sum(0)
    ok = c > 0
    out = plate.copy()
    out[ys[ok], xs[ok]] = ((vals[:, ok] * on[:, ok, None]).sum(0) / c[ok, None] + 0.5).astype(np.uint8)
    lifted[ys[ok], xs[ok]] = True
    return out, lifted


def _lit(vals: np.ndarray, old: np.ndarray, tol: np.ndarray, shade: float, max_lift: float) -> np.ndarray:
    """``(n, ...) bool``: samples ``vals`` ``(n, ..., 3)`` that show ``old`` ``(..., 3)`` lit: brighter by more
    than ``tol`` (mean over channels), ``old`` their colour darkened by more than ``shade`` and at most ``max_lift``
    times, alike in every channel (the darkenings within ``2 shade``: one sample is noisy)."""
    out = vals.sum(-1) - old.sum(-1)[None] > 3 * tol[None]  # the cheap test first: few samples pass it
    at = np.nonzero(out)
    dark = (np.broadcast_to(old[None], vals.shape)[at] + 1.0) / (vals[at] + 1.0)
    lo, hi = dark.min(-1), dark.max(-1)
    out[at] = (hi < 1.0 - shade) & (lo >= 1.0 / max_lift) & (hi - lo < 2 * shade)
    return out


def _shadow_step(part: np.ndarray, mean: np.ndarray, plate_s: np.ndarray, shade: float, max_lift: float) -> float:
    """How well the lit colours ``mean`` ``(k, 3)`` of ``part`` ``(hs, ws) bool`` are ``plate_s`` there with a
    shadow taken off (see :func:`lift_shadows`): ``inf`` unless darkened alike (the part's median per channel within
    ``shade``) and textured alike; else their step at the part's outline over the plate's (under 0.5: they continue
    the surroundings)."""
    import cv2

    if not _shaded_alike(plate_s[part], mean, shade, max_lift, flat=0.5):
        return np.inf
    p8 = part.view(np.uint8)
    outside = (cv2.dilate(p8, np.ones((3, 3), np.uint8)) > 0) & ~part
    ring = part & ~(cv2.erode(p8, np.ones((3, 3), np.uint8)) > 0)
    k = np.ones((5, 5), np.float32)
    weight = cv2.filter2D(outside.astype(np.float32), -1, k, borderType=cv2.BORDER_CONSTANT)
    around = cv2.filter2D(plate_s * outside[..., None], -1, k, borderType=cv2.BORDER_CONSTANT)
    at = ring & (weight > 0)
    if np.count_nonzero(at) < 3:
        return np.inf
    around = around[at] / weight[at][:, None]
    lit = plate_s.copy()
    lit[part] = mean
    step_lit = np.median(np.abs(lit[at] - around).mean(-1))
    step_plate = np.median(np.abs(plate_s[at] - around).mean(-1))
    return float(step_lit / step_plate) if step_plate > 0 else np.inf


def foreign_ghosts(frames: np.ndarray, plate: np.ndarray, used: np.ndarray, ghost: np.ndarray,
                   valid: np.ndarray | None, median: np.ndarray, anchor: np.ndarray, margin: float,
                   fine_dark: bool) -> np.ndarray:
    """``(h, w) bool``: the connected parts of ``ghost`` whose new colours (``anchor``) are on average more than
    ``margin`` (natural log of the likelihood ratio) more like the things seen in front than the ``median``'s
    colours they replaced (:func:`foreground_likelihood`, the ghosts left out of both its histograms).

    A ghost's frames show what a lingering thing hid: the background, whose colours the well-decided plate has. A
    region merged from the place a lingering arm left and the place it moved to can be called a ghost as a whole;
    its frames then show the arm over background the median had right, and that part's new colours are the arm's,
    seen in front all over the clip. ``fine_dark``: see :func:`foreground_likelihood`."""
    like = foreground_likelihood(frames, plate, used, ghost, valid, fine_dark=fine_dark)
    ys, xs = _nonzero(ghost)
    return parts_more_foreign(ghost, like, anchor[ys, xs], median[ys, xs], margin)


def one_frame_ghosts(frames: np.ndarray, plate: np.ndarray, count: np.ndarray, used: np.ndarray,
                     valid: np.ndarray | None, n_avail, anchor: np.ndarray, new: np.ndarray, candidates: np.ndarray,
                     margin: float, fine_dark: bool) -> np.ndarray:
    """``(h, w) bool``: the connected parts of ``candidates`` (pixels that only one frame showed behind a ghost;
    ``new`` ``(h, w, 3)`` that frame's colours there) where the ``anchor`` agrees with a majority of the frames
    and its colours are on average more than ``margin`` more like the things seen in front than the new ones
    (:func:`agreed_likelihood`). ``n_avail``: ``(h, w)`` the usable frames (or their number).

    An arm still in 6 of 7 frames is the median, and the one frame that shows the wall behind it is outvoted; one
    frame could be anything, so it is trusted only where what it would remove has the colours of the things that
    move. Where the median is no majority the arbiter and the mixed mode decide. ``fine_dark``: see
    :func:`foreground_likelihood`."""
    cand = candidates & (count >= 0.5 * n_avail)
    if not cand.any():
        return cand
    like = agreed_likelihood(frames, plate, count, used, np.zeros(cand.shape, bool), valid, n_avail, fine_dark)
    ys, xs = _nonzero(cand)
    return parts_more_foreign(cand, like, anchor[ys, xs], new[ys, xs], margin)


def parts_more_foreign(mask: np.ndarray, like, new: np.ndarray, old: np.ndarray, margin: float) -> np.ndarray:
    """``(h, w) bool``: the connected parts (8-connected) of ``mask`` whose colours ``new`` are on average more than
    ``margin`` more like the things in front than ``old`` by ``like`` (:func:`foreground_likelihood`). ``new``,
    ``old``: ``(k, 3)`` the colours at ``mask``'s pixels in row-major order."""
    import cv2

    k, lab = cv2.connectedComponents(mask.view(np.uint8), connectivity=8)
    ys, xs = _nonzero(mask)
    part = lab[ys, xs]
    shift = like(new) - like(old)
    mean = np.bincount(part, shift, minlength=k) / np.maximum(np.bincount(part, minlength=k), 1)
    foreign = mean > margin
    foreign[0] = False
    return foreign[lab]


def foreign_passes(like, anchor: np.ndarray, ghost: np.ndarray, steps: list[tuple[np.ndarray, np.ndarray]],
                   margin: float, sigma: float, min_area: int) -> tuple[np.ndarray, np.ndarray]:
    """``anchor`` ``(h, w, 3)`` with the places where a pass after the first replaced colours by ones more like the
    things seen in front put back (:func:`places_more_foreign` by ``like``, :func:`foreground_likelihood`), the
    last pass first; and those places, ``(h, w) bool``. ``steps``: per pass after the first, in order, the ``(h, w)
    bool`` pixels it replaced and the ``(h, w, 3)`` anchor before it; only pixels still in ``ghost`` are judged.

    A later pass tells regions apart against an anchor that is part replaced already. Where what is left of a
    lingering arm borders the background the pass before had right, the arm's frames match the anchor there
    without a seam and read as the background behind a ghost, and the pass puts the arm back (the real clip's 2x
    top-left crop: 71 % of these pixels right after the second pass, 0.3 % after the third)."""
    back = np.zeros(ghost.shape, bool)
    for rep, before in steps[::-1]:
        rep = rep & ghost
        if not rep.any():
            continue
        ys, xs = _nonzero(rep)
        part = places_more_foreign(rep, like, anchor[ys, xs], before[ys, xs], margin, sigma, min_area)
        anchor = np.where(part[..., None], before, anchor)
        back |= part
    return anchor, back


def places_more_foreign(mask: np.ndarray, like, new: np.ndarray, old: np.ndarray, margin: float, sigma: float,
                        min_area: int) -> np.ndarray:
    """``(h, w) bool``: the pixels of ``mask`` where the colours ``new`` are more than ``margin`` more like the
    things in front than ``old`` by ``like`` (:func:`foreground_likelihood`), averaged over ``mask``'s pixels in a
    Gaussian window of ``sigma`` pixels; kept in connected parts of at least ``min_area`` pixels. ``new``, ``old``:
    ``(k, 3)`` the colours at ``mask``'s pixels in row-major order.

    :func:`parts_more_foreign` averages over a whole connected part; one replacement can hold the background
    found right and an arm's colours side by side, and its average then hides the arm."""
    import cv2

    ys, xs = _nonzero(mask)
    shift = np.zeros(mask.shape, np.float32)
    shift[ys, xs] = like(new) - like(old)
    k = 2 * int(np.ceil(3 * sigma)) + 1
    weight = cv2.GaussianBlur(mask.astype(np.float32), (k, k), sigma)
    mean = cv2.GaussianBlur(shift, (k, k), sigma) / np.maximum(weight, 1e-6)
    return clean_mask(mask & (mean > margin), 0, 0, False, min_area)


def foreground_likelihood(frames: np.ndarray, plate: np.ndarray, used: np.ndarray, mixed: np.ndarray,
                          valid: np.ndarray | None, bins: int = 16, samples: int = 200000,
                          background: np.ndarray | None = None, fine_dark: bool = False):
    """A function colour ``(k, 3)`` -> ``(k,)`` log(p_fg / p_bg): colour histograms of the samples in front of the
    well-decided plate (not used there) and of the well-decided plate itself (only where ``background``, optional
    ``(h, w) bool``, holds). The things in front (a robot, a hand) have their own colours; a colour that is common
    in front and rare in the background is more likely a thing that stayed than the background.

    ``fine_dark``: a channel's ``bins`` spaced by the square root of the level (:func:`level_bins`) instead of
    evenly: bins 16 levels wide put a dark scene's grey arm and its brown desk in one bin, where the arm stays
    and the frames disagree. For decisions averaged over whole parts (:func:`parts_more_foreign`): one pixel's
    ratio from the fine dark bins is noisy (a black arm's samples spread over several; a close-up WidowX's ratio
    2.35 -> 0.42), a part's mean is not (docs/capture.md *Dark colours told apart*)."""
    n, h, w, _ = frames.shape
    step = max(1, int(np.sqrt(n * h * w / samples)))
    dec = ~mixed[::step, ::step]
    q = level_bins(bins, fine_dark)
    sub = q[frames[:, ::step, ::step][:, dec]]  # (n, k, 3)
    fg = ~used[:, ::step, ::step][:, dec]
    if valid is not None:
        fg &= valid[:, ::step, ::step][:, dec]
    h_fg = np.bincount(_colour_bin(sub, bins)[fg], minlength=bins ** 3).astype(np.float64) + 1.0
    if background is not None:
        dec &= background[::step, ::step]
    h_bg = np.bincount(_colour_bin(q[plate[::step, ::step][dec]], bins), minlength=bins ** 3) + 1.0
    lr = np.log(h_fg / h_fg.sum()) - np.log(h_bg / h_bg.sum())
    return lambda c: lr[_colour_bin(q[np.clip(c, 0, 255).astype(np.int64)], bins)]


def agreed_likelihood(frames: np.ndarray, plate: np.ndarray, count: np.ndarray, used: np.ndarray,
                      mixed: np.ndarray, valid: np.ndarray | None, n_avail, fine_dark: bool = False):
    """:func:`foreground_likelihood` with the background histogram taken where every usable frame (``n_avail``,
    ``(h, w)`` or a number) agrees with the plate (``count`` ``(h, w)`` the frames that do): a thing that lingers in
    most frames, which some frames do not show, drops out of it, so its colours read as the things in front.
    ``fine_dark``: see :func:`foreground_likelihood`."""
    return foreground_likelihood(frames, plate, used, mixed, valid, background=count >= n_avail, fine_dark=fine_dark)


def level_bins(bins: int, fine_dark: bool = True) -> np.ndarray:
    """``(256,) int64``: each level's bin of ``bins``, spaced by the square root of the level (with 16 bins the
    bin is ``floor(sqrt(level))``: 0, 1-3, 4-8, ..., 225-255): dark colours told apart as finely, relative to
    their level, as bright ones. ``fine_dark`` False: even bins, ``256 // bins`` levels wide."""
    if not fine_dark:
        return np.arange(256) // (256 // bins)
    return np.minimum(bins - 1, np.floor(np.sqrt(np.arange(256) * (bins * bins / 256.0)))).astype(np.int64)


def _colour_bin(c: np.ndarray, bins: int) -> np.ndarray:
    """Histogram bin of quantised colours ``(..., 3)`` (each channel in ``[0, bins)``) -> ``(...)`` int64."""
    c = c.astype(np.int64)
    return (c[..., 0] * bins + c[..., 1]) * bins + c[..., 2]


def mixed_mode(frames: np.ndarray, plate: np.ndarray, mixed: np.ndarray, count: np.ndarray, used: np.ndarray,
               valid: np.ndarray | None, tol: np.ndarray, margin: int, scale: np.ndarray | None = None) -> np.ndarray:
    """Where no majority agrees with the median (``mixed``), the mean of the largest set of frames that agree with
    each other (within ``tol`` ``(h, w)``, max channel), when it has at least ``margin`` frames more than the set
    that agrees with the plate (and at least 2) and its colour is less like the things in front than the plate's
    (:func:`foreground_likelihood`).

    A thing that moves spreads its colours over the frames, the background agrees with itself: where the median is
    a mix, the largest agreeing set is the background more often than the median is. But a thing that stays (an
    arm that lingers, a resting object) is an agreeing set too; it has the colours of the things seen in front
    elsewhere in the clip, which the background rarely has. ``scale``: optional ``(3, 256)`` :func:`level_scale`:
    the frames agree on it (a sensor's noise grows with the light: on the levels themselves a lit floor's frames
    fall into small sets where a black arm's agree as one). Updates ``plate``, ``count``, ``used`` in place;
    returns the ``(h, w) bool`` pixels changed."""
    n = frames.shape[0]
    out = np.zeros(mixed.shape, bool)
    ys, xs = _nonzero(mixed)
    if n < 3 or not len(ys):
        return out
    vals = np.ascontiguousarray(frames[:, ys, xs].transpose(0, 2, 1))  # (n, 3, k) uint8
    ok = np.ones((n, len(ys)), bool) if valid is None else valid[:, ys, xs]
    agree, m, mean = _largest_agreeing(vals, ok, tol[ys, xs], scale)
    use = (m >= count[ys, xs] + margin) & (m >= 2)
    if not use.any():
        return out
    ys, xs, agree, m, mean = ys[use], xs[use], agree[:, use], m[use], mean[use]
    like = foreground_likelihood(frames, plate, used, mixed, valid)
    keep = like(mean) < like(plate[ys, xs])
    if not keep.any():
        return out
    _take_sets(plate, count, used, ys[keep], xs[keep], agree[:, keep], m[keep], mean[keep])
    out[ys[keep], xs[keep]] = True
    return out


def _take_sets(plate: np.ndarray, count: np.ndarray, used: np.ndarray, ys: np.ndarray, xs: np.ndarray,
               agree: np.ndarray, m: np.ndarray, mean: np.ndarray) -> None:
    """Pixels ``(ys, xs)`` take the mean ``(k, 3)`` of the frames ``agree`` ``(n, k)`` (``m`` ``(k,)`` of them)."""
    plate[ys, xs] = np.clip(mean + 0.5, 0, 255).astype(np.uint8)
    count[ys, xs] = m
    used[:, ys, xs] = agree


def foreign_majority(frames: np.ndarray, plate: np.ndarray, where: np.ndarray, count: np.ndarray, used: np.ndarray,
                     valid: np.ndarray | None, tol: np.ndarray, min_share: float, min_ratio: float, min_area: int
                     ) -> np.ndarray:
    """Where the regions could not be told apart (a ghost's pixels too) or no majority agrees with the median, and
    neither the arbiter nor the mode decided (``where``, ``(h, w) bool``), and the plate's colour is that of the
    things seen in front (:func:`foreground_likelihood`: log(p_fg / p_bg) over ``min_ratio``), the mean of the
    largest set of the other frames that agree with each other (within ``tol``, max channel; at least
    ``min_share`` of the frames and 2), when its colour is more like the background than the things in front, and
    by a margin: its log ratio under the plate's by at least ``2 * min_ratio`` (a set that is the background's by
    no more than the plate's colour is the things' in front is a coin toss: the Bridge plate through a saturating
    camera look, its orange table at +1.27 beside a can, took the black gripper at -0.10 that stood there in
    several frames; the wall a Google Robot's lingering arm hid: +2.8 -> -0.9).

    A dark arm close to the camera covers a corner in most frames: its frames agree with each other there (dark is
    dark), so the median and the plate are the arm, and its moving outline leaves the regions undecided. The frames
    that show the wall agree with each other too and have the background's colours, which the arm's frames have
    not. Kept only in parts of at least ``min_area`` pixels. Updates ``plate``, ``count`` and ``used`` in place;
    returns the ``(h, w) bool`` pixels changed."""
    n = frames.shape[0]
    out = np.zeros(where.shape, bool)
    ys, xs = _nonzero(where)
    if n < 3 or not len(ys):
        return out
    like = foreground_likelihood(frames, plate, used, where, valid)
    lr = like(plate[ys, xs])
    foreign = lr > min_ratio
    ys, xs, lr = ys[foreign], xs[foreign], lr[foreign]
    if not len(ys):
        return out
    vals = np.ascontiguousarray(frames[:, ys, xs].transpose(0, 2, 1))  # (n, 3, k) uint8
    ok = ~used[:, ys, xs]  # the frames the plate did not take here
    if valid is not None:
        ok &= valid[:, ys, xs]
    agree, m, mean = _largest_agreeing(vals, ok, tol[ys, xs])
    take = (m >= max(2, int(np.ceil(min_share * n)))) & (like(mean) < np.minimum(0.0, lr - 2 * min_ratio))
    out[ys[take], xs[take]] = True
    out = clean_mask(out, 0, 0, False, min_area)
    k = np.flatnonzero(out[ys, xs])
    if not len(k):
        return out
    _take_sets(plate, count, used, ys[k], xs[k], agree[:, k], m[k], mean[k])
    return out


def _largest_agreeing(vals: np.ndarray, ok: np.ndarray, tol: np.ndarray, scale: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pixel, the largest set of frames that agree with one of them: ``vals`` ``(n, 3, k) uint8``, ``ok``
    ``(n, k) bool`` the frames that may take part, ``tol`` ``(k,)`` the tolerance (max channel, whole levels).
    ``scale``: optional ``(3, 256)`` :func:`level_scale`: the colours are compared on it (``tol`` then in the
    noise's units at every level), the mean taken of the colours. Returns (``(n, k) bool`` the set, ``(k,) int32``
    its size, ``(k, 3) float32`` its mean)."""
    n = vals.shape[0]
    if scale is None:
        key, tk = vals, np.clip(np.floor(tol), 0, 255).astype(np.uint8)
    else:
        key, tk = np.stack([scale[c][vals[:, c]] for c in range(3)], 1), np.floor(tol).astype(np.float32)
    cnt = ok.astype(np.int32)  # every frame agrees with itself; each pair is compared once
    for i in range(n - 1):
        agree = _within(key[i + 1:], key[i], tk) & ok[i + 1:] & ok[i]
        cnt[i] += agree.sum(0, dtype=np.int32)
        cnt[i + 1:] += agree
    cnt[~ok] = -1
    best_i = cnt.argmax(0)
    agree = _within(key, key[best_i, :, np.arange(key.shape[2])].T, tk) & ok
    m = agree.sum(0, dtype=np.int32)
    mean = (vals * agree[:, None]).sum(0, dtype=np.float32).T / np.maximum(m, 1)[:, None]
    return agree, m, mean


def _within(a: np.ndarray, b: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """``(m, k) bool``: colours ``a`` ``(m, 3, k)`` within ``tol`` ``(k,)`` of ``b`` ``(3, k)`` in every channel
    (uint8 levels, or float32 places on a :func:`level_scale`)."""
    out = None
    for c in range(3):
        x, y = a[:, c], b[c]
        d = np.maximum(x, y) - np.minimum(x, y)  # |x - y| without leaving uint8
        out = d <= tol if out is None else out & (d <= tol)
    return out


def peel_supported(frames: np.ndarray, valid: np.ndarray | None, before: np.ndarray, after: np.ndarray,
                   peeled: np.ndarray, tol: float, ratio: float, majority: float) -> np.ndarray:
    """``(h, w) bool``: the connected parts of ``peeled`` (what the later passes replaced, ``before`` -> ``after``)
    that stand: the colour they replace is shown by less than ``majority`` of the frames that could show it, or
    their new colour by at least ``ratio`` times as many frames as the old one (within ``tol`` levels, summed over
    the part).

    A later pass peels what is left of a thing that lingered; a colour that most frames (70 %) show is the
    background, and a part that replaces it with a colour a few frames show is a cascade of calls into a thing
    that passed (google_b2: the robot's links replaced the wall the median had right)."""
    import cv2

    k, lab = cv2.connectedComponents(peeled.view(np.uint8), connectivity=8)
    ys, xs = _nonzero(peeled)
    vals = frames[:, ys, xs].astype(np.int16)
    ok = np.ones(vals.shape[:2], bool) if valid is None else valid[:, ys, xs]
    s_new = ((np.abs(vals - after[ys, xs]).max(-1) <= tol) & ok).sum(0)
    s_old = ((np.abs(vals - before[ys, xs]).max(-1) <= tol) & ok).sum(0)
    part = lab[ys, xs]
    n_new, n_old, n_ok = (np.bincount(part, v, k) for v in (s_new, s_old, ok.sum(0)))
    keep = (n_new >= ratio * n_old) | (n_old < majority * n_ok)
    keep[0] = False
    return keep[lab]


def arbitrate(frames: np.ndarray, plate: np.ndarray, mixed: np.ndarray, count: np.ndarray, used: np.ndarray,
              valid: np.ndarray | None, n_avail, sigma: float, tol: np.ndarray, cfg) -> np.ndarray:
    """Where the frames that agree with the median are no majority (``mixed``), the frame that continues the
    surroundings best, when one does clearly better than the plate: the colour of the background is then decided
    by space, not by a vote over time.

    With few frames a thing that stays in most of them (an arm that moves little, 3 of 5 frames) is the median, and
    the one or two frames that show the background behind it are outvoted. Here the surroundings decide: the plate's
    well-decided pixels spread into ``mixed`` (:func:`local_background`, normalised Gaussian convolution) predict
    the background; each frame's distance to that prediction, averaged over a window of ``arbiter_window`` times
    ``sqrt(h * w)`` (a region's colour, not a pixel's), is compared with the plate's. A pixel takes the frame with
    the smallest distance when it is under ``arbiter_ratio`` times the plate's and ``arbiter_margin`` noise sigmas
    below it, when the chosen colour is backed by at least ``arbiter_support`` times the frames that back the plate
    (a colour one frame of many shows is more likely a thing passing than the background) and by
    ``arbiter_min_support`` of the usable frames, and when the pixels so decided form regions of at least
    ``min_blob_frac`` of the image. The pixel becomes the mean of the frames within ``tol`` of the chosen colour.

    ``n_avail``: ``(h, w)`` the usable frames per pixel (or their number). Updates ``plate``, ``count`` and ``used``
    in place; returns the ``(h, w) bool`` pixels decided this way (they are reported as undecided: space, not the
    frames, decided them)."""
    import cv2

    n, h, w, _ = frames.shape
    none = np.zeros((h, w), bool)
    if not mixed.any() or cfg.arbiter_ratio <= 0:
        return none
    r = max(1, int(round(cfg.arbiter_window * np.sqrt(h * w))))
    unknown = cv2.dilate(mixed.view(np.uint8), np.ones((3, 3), np.uint8)) > 0  # its rim: blur of what is in front
    ys, xs = _nonzero(unknown)
    m = 3 * r + 40  # the box of the unknown pixels with room for the window and the spread of the surroundings
    y0, y1, x0, x1 = max(0, ys.min() - m), min(h, ys.max() + m + 1), max(0, xs.min() - m), min(w, xs.max() + m + 1)
    box = (slice(y0, y1), slice(x0, x1))
    unk, mix = unknown[box], mixed[box]
    win = (2 * r + 1, 2 * r + 1)
    # the distances below read the prediction within the window around the mixed pixels only
    read = cv2.dilate(mix.view(np.uint8), _square(2 * r + 1)) > 0
    around = plate[box].astype(np.float32)
    pred = local_background(around, ~unk, need=mix, crop=True, read=read)

    # the distances are read at the mixed pixels only: computed over their box plus the window (the box filter's
    # sums are exact in double precision, so the values there are the same as over the whole box)
    my, mx = _nonzero(mix)
    hb, wb = mix.shape
    c0, c1 = max(0, my.min() - r - 1), min(hb, my.max() + r + 2)
    c2, c3 = max(0, mx.min() - r - 1), min(wb, mx.max() + r + 2)
    pred_c = pred[c0:c1, c2:c3]
    my, mx = my - c0, mx - c2

    read_at = my * (c3 - c2) + mx  # (read by flat index: cheaper than by two index arrays)

    def distance(img):
        return np.take(cv2.boxFilter(channel_max(cv2.absdiff(img[c0:c1, c2:c3].astype(np.float32), pred_c)), -1,
                                     win).ravel(), read_at)

    d_plate = distance(plate[box])
    best = np.full(d_plate.shape, np.inf, np.float32)
    arg = np.zeros(d_plate.shape, np.int64)
    for t in range(n):
        d = distance(frames[t][box])
        if valid is not None:
            d[~valid[t][box][c0:c1, c2:c3][my, mx]] = np.inf
        b = d < best
        best[b], arg[b] = d[b], t
    pick = (best < cfg.arbiter_ratio * d_plate) & (d_plate - best > cfg.arbiter_margin * sigma)
    if pick.any() and cfg.arbiter_spread > 0:
        # the surroundings' spread under the prediction's own weights (the same known pixels, needs and reads: the
        # same scale at each pixel)
        square = local_background(around * around, ~unk, need=mix, crop=True, read=read)
        spread = np.sqrt(np.maximum(square[c0:c1, c2:c3] - pred_c * pred_c, 0).max(-1))
        pick &= d_plate - best > cfg.arbiter_spread * np.take(cv2.boxFilter(spread, -1, win).ravel(), read_at)
    if not pick.any():
        return none
    # what follows is read at the picked pixels only (every later test narrows them)
    ty, tx, arg = my[pick] + c0, mx[pick] + c2, arg[pick]
    take = np.zeros(mix.shape, bool)
    take[ty, tx] = True
    sub = frames[:, box[0], box[1]]
    vals = sub[:, ty, tx]  # (n, k, 3)
    chosen = vals[arg, np.arange(len(arg))]
    tol8 = np.clip(np.floor(tol[box][ty, tx]), 0, 255).astype(np.uint8)
    agree_k = channel_max(np.abs(vals.astype(np.int16) - chosen.astype(np.int16))) <= tol8
    if valid is not None:
        agree_k &= valid[:, box[0], box[1]][:, ty, tx]
    acc = (vals * agree_k[..., None]).sum(0, dtype=np.float32)  # whole levels: exact in any order
    cnt = agree_k.sum(0, dtype=np.int32)
    n_here = n if valid is None else n_avail[box][ty, tx]
    keep = (cnt >= cfg.arbiter_support * count[box][ty, tx]) & (cnt >= np.maximum(1, np.ceil(cfg.arbiter_min_support * n_here)))
    take[ty[~keep], tx[~keep]] = False
    take = clean_mask(take, 0, 0, False, max(4, int(cfg.min_blob_frac * h * w)))
    agree = np.zeros((n,) + take.shape, bool)
    agree[:, ty, tx] = agree_k
    if take.any() and cfg.arbiter_surround > 0:
        ok = valid[:, box[0], box[1]] if valid is not None else None
        take &= ~surround_disagrees(sub, plate[box], tol[box], ok, unk, take, agree, used[:, box[0], box[1]],
                                    (2 * r + 3, 6 * r + 3), cfg.arbiter_surround)
    if not take.any():
        return none
    at = np.full(take.shape, -1, np.int64)
    at[ty, tx] = np.arange(len(ty))
    fy, fx = _nonzero(take)
    k = at[fy, fx]
    mean = np.clip(acc[k] / np.maximum(cnt[k], 1)[..., None] + 0.5, 0, 255).astype(np.uint8)
    if cfg.arbiter_foreign > 0:
        like = agreed_likelihood(frames, plate, count, used, mixed, valid, n_avail, cfg.foreign_fine_dark)
        foreign = parts_more_foreign(take, like, mean, plate[box][fy, fx], cfg.arbiter_foreign)[fy, fx]
        if foreign.all():
            return none
        take[fy[foreign], fx[foreign]] = False
        fy, fx, k, mean = fy[~foreign], fx[~foreign], k[~foreign], mean[~foreign]
    plate[box][fy, fx] = mean
    count[box][fy, fx] = cnt[k]
    used[:, box[0], box[1]][:, fy, fx] = agree_k[:, k]
    out = none
    out[box] = take
    return out


def surround_disagrees(frames: np.ndarray, plate: np.ndarray, tol: np.ndarray, valid: np.ndarray | None,
                       unknown: np.ndarray, take: np.ndarray, agree: np.ndarray, used: np.ndarray,
                       widths: tuple[int, ...], ratio: float) -> np.ndarray:
    """``(h, w) bool``: the connected parts of ``take`` (the arbiter's picks) whose backing frames (``agree``) show
    the part's surroundings as ``plate`` has them (within ``tol``) less than ``ratio`` times as often as the frames
    that back the plate there (``used``), weighting each frame by the share of the part it backs.

    The surroundings are the pixels outside ``unknown`` within the first of ``widths`` (pixels) that holds any. A
    frame that shows the background in a part shows the well-decided pixels around it as the plate does; a frame
    whose colour there is a thing in front (a robot link lingering along the table's edge, held_noisy_640) usually
    covers the surroundings too. Needs no truth: only the frames and the plate."""
    import cv2

    out = np.zeros(take.shape, bool)
    k, lab = cv2.connectedComponents(take.view(np.uint8), connectivity=8)
    hh, ww = take.shape
    for i in range(1, k):
        ys, xs = _nonzero(lab == i)
        for rw in widths:
            y0, y1 = max(0, ys.min() - rw), min(hh, ys.max() + rw + 1)
            x0, x1 = max(0, xs.min() - rw), min(ww, xs.max() + rw + 1)
            part = (lab[y0:y1, x0:x1] == i).view(np.uint8)
            ring = (cv2.dilate(part, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * rw + 1, 2 * rw + 1))) > 0)
            ring &= ~unknown[y0:y1, x0:x1]
            if ring.any():
                break
        else:
            continue  # nothing well-decided near the part: no evidence against it
        ry, rx = _nonzero(ring)
        ry, rx = ry + y0, rx + x0
        same = channel_max(np.abs(frames[:, ry, rx].astype(np.int16) - plate[ry, rx].astype(np.int16))) <= tol[ry, rx]
        if valid is not None:
            n_ok = valid[:, ry, rx].sum(1)
            shown = np.where(n_ok > 0, (same & valid[:, ry, rx]).sum(1) / np.maximum(n_ok, 1), 0.0)
        else:
            shown = same.mean(1)
        w_new, w_old = agree[:, ys, xs].mean(1), used[:, ys, xs].mean(1)
        if w_new.sum() <= 0 or w_old.sum() <= 0:
            continue
        a = float((w_new * shown).sum() / w_new.sum())
        b = float((w_old * shown).sum() / w_old.sum())
        if a < ratio * b:
            out[ys, xs] = True
    return out


def confidence_map(count: np.ndarray, undecided: np.ndarray, n_avail: np.ndarray, many: int, majority: float
                   ) -> np.ndarray:
    """``(h, w) uint8`` 255 / 128 / 0 (see ``plate.py``): 0 where no frame could show the background
    (``n_avail`` == 0), 128 where fewer than ``many`` frames agreed, where regions stayed undecided, or where less
    than ``majority`` of the available frames agree with the plate; 255 elsewhere."""
    few = (count < many) | undecided | (count < majority * n_avail)
    return np.where(n_avail == 0, 0, np.where(few, 128, 255)).astype(np.uint8)
