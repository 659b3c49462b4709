"""Images in the project convention: I/O, conversions, measures (IoU, PSNR, SSIM) and mask morphology.

uint8 RGB PNG on disk, float32 [0, 1] in compute. Masks are single-channel PNG with values 0/255 on disk and
``(h, w) bool`` arrays in memory. This is the one place that reads and writes images and compares them; stages
call it instead of keeping their own copies.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from real2sim.core.bundle import atomic_write_bytes
from real2sim.core.errors import ImageError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def natural_key(name: str) -> tuple:
    """Sort key that orders the digit runs of ``name`` by value: ``frame_2.png`` before ``frame_10.png``."""
    return tuple((0, int(t), t) if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name))


def image_files(folder) -> list[Path]:
    """The image files of ``folder`` (:data:`IMAGE_SUFFIXES`, dot-files left out) in natural name order (a camera's
    ``frame_9.png`` comes before its ``frame_10.png``; zero-padded names keep their order)."""
    files = [p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")]
    return sorted(files, key=lambda p: natural_key(p.name))


def _to_8bit(im):
    """A PIL image of 16-bit or float samples (``I;16``, ``I``, ``F``: a machine-vision camera's grey frames) as 8-bit
    ``L`` by its range (16-bit full scale, float [0, 1]); other modes unchanged."""
    from PIL import Image

    if im.mode not in ("I", "F") and not im.mode.startswith("I;16"):
        return im
    a = np.asarray(im)
    if a.dtype.kind == "f":
        a = np.nan_to_num(a.astype(np.float64)) * (255.0 if np.nanmax(a, initial=0.0) <= 1.0 else 1.0)
    elif im.mode.startswith("I;16") or a.max(initial=0) > 255:  # 32-bit "I" of 8-bit values stays
        a = a.astype(np.float64) * (255.0 / 65535.0)
    return Image.fromarray(np.clip(np.round(a), 0, 255).astype(np.uint8), "L")


def _read(path, mode: str) -> np.ndarray:
    """An image file converted to PIL ``mode`` as a ``uint8`` array, turned upright by its EXIF orientation (as every
    viewer shows a phone's photo); errors name the file and the fix."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            return np.asarray(_to_8bit(ImageOps.exif_transpose(im)).convert(mode), dtype=np.uint8).copy()
    except FileNotFoundError:
        raise ImageError(f"{path}: no such image file; check the path") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageError(f"{path}: cannot be read as an image ({exc}); re-export it as PNG or JPEG") from exc


def read_rgb(path) -> np.ndarray:
    """Read an image file as ``(h, w, 3) uint8`` RGB (alpha dropped, grey expanded)."""
    return _read(path, "RGB")


def write_rgb(path, image: np.ndarray) -> None:
    """Write ``(h, w, 3)`` uint8 RGB (or float in [0, 1]) as PNG, atomically."""

    atomic_write_bytes(Path(path), png_bytes(image))


def read_mask(path, shape: tuple[int, int] | None = None) -> np.ndarray:
    """Read a single-channel mask PNG as ``(h, w) bool``: > 127 is inside (> 32767 in a 16-bit one; 1 in a 0/1 one)."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            a = np.asarray(im if im.mode in ("I", "F") or im.mode.startswith("I;16") else im.convert("L"))
        top = a.max(initial=0)  # 0/255, 0/65535, or another tool's 0/1
        m = a > 0 if top <= 1 else a > (127 if top <= 255 else 32767)
    except FileNotFoundError:
        raise ImageError(f"{path}: no such mask file; check the path") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageError(f"{path}: cannot be read as a mask image ({exc}); masks are single-channel PNG 0/255") from exc
    if shape is not None and m.shape != tuple(shape):
        raise ImageError(f"{path}: mask is {m.shape[1]}x{m.shape[0]} but the frames are {shape[1]}x{shape[0]}; "
                           "masks must have the frame size")
    return m


def write_mask(path, mask: np.ndarray) -> None:
    """Write a ``(h, w) bool`` mask as a single-channel PNG 0/255, atomically."""

    atomic_write_bytes(Path(path), png_bytes(np.asarray(mask, bool)))


def read_gray(path) -> np.ndarray:
    """Read a single-channel image (a confidence map) as ``(h, w) uint8``."""
    return _read(path, "L")


def write_gray(path, image: np.ndarray) -> None:
    """Write a ``(h, w) uint8`` single-channel PNG atomically."""

    atomic_write_bytes(Path(path), png_bytes(np.asarray(image, np.uint8)))


def to_float(image: np.ndarray) -> np.ndarray:
    """uint8 -> float32 in [0, 1] (float input is passed through as float32)."""
    image = np.asarray(image)
    if image.dtype == np.uint8:
        return image.astype(np.float32) / 255.0
    return image.astype(np.float32, copy=False)


def to_uint8(image: np.ndarray) -> np.ndarray:
    """float in [0, 1] -> uint8 (rounded); uint8 passes through."""
    image = np.asarray(image)
    if image.dtype == np.uint8:
        return image
    return np.clip(np.rint(image.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)


def png_bytes(image: np.ndarray) -> bytes:
    """PNG bytes of ``(h, w, 3)`` / ``(h, w, 4)`` RGB(A) or ``(h, w)`` grey (uint8, or float in [0, 1]; bool masks -> 0/255)."""
    import io

    from PIL import Image

    a = np.asarray(image)
    if a.dtype == bool:
        a = np.where(a, 255, 0).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(to_uint8(a)).save(buf, format="PNG")
    return buf.getvalue()


def read_rgb_float(path) -> np.ndarray:
    """:func:`read_rgb` as ``(h, w, 3) float32`` in [0, 1]."""
    return to_float(read_rgb(path))


# -- measures ------------------------------------------------------------------------------------------------
def mask_box(mask: np.ndarray, pad: int = 0) -> tuple[slice, slice] | None:
    """(rows, cols) slices of the ``(h, w)`` mask's bounding box grown by ``pad`` px on each side (clipped to the
    image); ``None`` for an empty mask. Work on a mask's neighbourhood only: ``out[box] = f(mask[box])``."""
    rows = np.flatnonzero(mask.any(1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask[rows[0]:rows[-1] + 1].any(0))  # the columns of the rows that hold the mask
    h, w = mask.shape[:2]
    return (slice(max(0, int(rows[0]) - pad), min(h, int(rows[-1]) + pad + 1)),
            slice(max(0, int(cols[0]) - pad), min(w, int(cols[-1]) + pad + 1)))


def border_run(m: np.ndarray) -> float:
    """Largest fraction of one image side that the ``(h, w) bool`` mask ``m`` runs along."""
    return float(max(m[0].mean(), m[-1].mean(), m[:, 0].mean(), m[:, -1].mean()))


def median_rows(x: np.ndarray) -> np.ndarray:
    """``np.median(x, axis=0)`` of an ``(n,)`` or ``(n, c)`` array without NaN, n >= 1: the same values (the
    middle order statistic, or the mean of the two middle ones) by one ``np.partition`` per channel, contiguous:
    about twice as fast."""
    y = np.ascontiguousarray(x.T)
    n = y.shape[-1]
    if n % 2:
        return np.partition(y, n // 2, axis=-1)[..., n // 2]
    part = np.partition(y, (n // 2 - 1, n // 2), axis=-1)
    return np.mean(part[..., n // 2 - 1:n // 2 + 1], axis=-1)


def channel_max(x: np.ndarray) -> np.ndarray:
    """``x.max(-1)`` of an ``(..., 3)`` array, the same values: numpy's reduction over a 3-long last axis is about
    30x slower than two elementwise maxima of the channel views."""
    return np.maximum(np.maximum(x[..., 0], x[..., 1]), x[..., 2])


def channel_min(x: np.ndarray) -> np.ndarray:
    """``x.min(-1)`` of an ``(..., 3)`` array (see :func:`channel_max`)."""
    return np.minimum(np.minimum(x[..., 0], x[..., 1]), x[..., 2])


def channel_sum(x: np.ndarray) -> np.ndarray:
    """``x.sum(-1)`` of an ``(..., 3)`` array, the same values (summed in the same order; see :func:`channel_max`)."""
    return x[..., 0] + x[..., 1] + x[..., 2]


def channel_norm(x: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(x, axis=-1)`` of an ``(..., 3)`` float array, the same values (see :func:`channel_max`)."""
    return np.sqrt(channel_sum(x * x))


def channel_mean(x: np.ndarray) -> np.ndarray:
    """``x.mean(-1)`` of an ``(..., 3)`` float array, the same values (summed in the same order; see
    :func:`channel_max`)."""
    return channel_sum(x) / x.dtype.type(3)


def by_quantile_bins(key: np.ndarray, stat, bins: int, min_count: int) -> tuple[list[float], list]:
    """A statistic per quantile bin of ``key`` (any shape): for each of ``bins`` bins between its quantiles (edges
    inclusive) holding at least ``min_count`` samples, the key's median in it and ``stat(sel)`` of its selection
    (``bool``, ``key``'s shape). Returns (medians, statistics), for ``np.interp`` over the key."""
    edges = np.quantile(key, np.linspace(0, 1, bins + 1))
    centres, stats = [], []
    for i in range(bins):
        sel = (key >= edges[i]) & (key <= edges[i + 1])
        if sel.sum() < min_count:
            continue
        centres.append(float(np.median(key[sel])))
        stats.append(stat(sel))
    return centres, stats


def solidity(mask: np.ndarray) -> float:
    """Area over convex-hull area of a ``(h, w) bool`` mask (1 = convex; 0 for an empty mask)."""
    import cv2

    m = np.asarray(mask, bool)
    box = mask_box(m)
    if box is None:
        return 0.0
    m = m[box]  # the mask's box: the hull's area does not move with it
    hull = cv2.convexHull(cv2.findNonZero(m.astype(np.uint8)))
    return float(np.count_nonzero(m) / max(cv2.contourArea(hull), 1.0))


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boolean masks; 1.0 when both are empty (they agree)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else float(np.count_nonzero(a & b) / union)


class MaskOverlaps:
    """Areas and overlaps of ``(h, w) bool`` masks compared with each other many times (a mask is known by its
    identity, so it must not change in place while compared): each mask's area and bounding box are found once,
    each pair's overlap once, counted where the two boxes meet. :meth:`iou` is :func:`iou`'s number."""

    def __init__(self):
        self._masks: dict[int, tuple[np.ndarray, tuple[slice, slice] | None, int]] = {}
        self._inter: dict[tuple[int, int], int] = {}

    def _entry(self, m: np.ndarray) -> tuple[np.ndarray, tuple[slice, slice] | None, int]:
        e = self._masks.get(id(m))
        if e is None:  # the mask is kept with its numbers: its id is not reused while this lives
            e = self._masks[id(m)] = (m, mask_box(m), int(np.count_nonzero(m)))
        return e

    def area(self, m: np.ndarray) -> int:
        """Pixels in ``m``."""
        return self._entry(m)[2]

    def box(self, m: np.ndarray) -> tuple[slice, slice] | None:
        """:func:`mask_box` of ``m`` (no padding)."""
        return self._entry(m)[1]

    def inter(self, a: np.ndarray, b: np.ndarray) -> int:
        """Pixels in both ``a`` and ``b``."""
        key = (min(id(a), id(b)), max(id(a), id(b)))
        if key not in self._inter:
            ba, bb = self._entry(a)[1], self._entry(b)[1]
            n = 0
            if ba is not None and bb is not None:
                ys = slice(max(ba[0].start, bb[0].start), min(ba[0].stop, bb[0].stop))
                xs = slice(max(ba[1].start, bb[1].start), min(ba[1].stop, bb[1].stop))
                if ys.start < ys.stop and xs.start < xs.stop:
                    n = int(np.count_nonzero(a[ys, xs] & b[ys, xs]))
            self._inter[key] = n
        return self._inter[key]

    def iou(self, a: np.ndarray, b: np.ndarray) -> float:
        """Intersection over union of ``a`` and ``b`` (1.0 when both are empty), as :func:`iou`."""
        inter = self.inter(a, b)
        union = self.area(a) + self.area(b) - inter
        return 1.0 if union == 0 else float(inter / union)


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> float:
    """PSNR in dB between two uint8 (or [0, 1] float) images, optionally over a ``(h, w)`` mask.

    ``inf`` for identical images; ``nan`` for an empty mask (there is nothing to compare)."""
    a, b = to_float(a).astype(np.float64), to_float(b).astype(np.float64)
    diff = (a - b) ** 2
    if mask is not None:
        diff = diff[np.asarray(mask, bool)]
    if diff.size == 0:
        return float("nan")
    mse = float(diff.mean())
    return float("inf") if mse == 0 else float(10.0 * np.log10(1.0 / mse))


def ssim(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None, sigma: float = 1.5) -> float:
    """Mean SSIM (Wang et al. 2004: Gaussian window sigma 1.5, K1 0.01, K2 0.03) of the grey images, over ``mask``."""
    from scipy.ndimage import gaussian_filter

    w = np.array([0.299, 0.587, 0.114])
    x, y = to_float(a).astype(np.float64) @ w, to_float(b).astype(np.float64) @ w

    def blur(z):
        return gaussian_filter(z, sigma, truncate=3.5)  # 11x11 window as in the paper

    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s[np.asarray(mask, bool)].mean() if mask is not None else s.mean())


# -- morphology ----------------------------------------------------------------------------------------------
def disk(r: int):
    import cv2

    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))


def grow_parts(mask: np.ndarray, frac: float) -> np.ndarray:
    """``(h, w) bool``: each connected part of ``mask`` dilated by ``frac`` times its width (the diameter of a disk
    of its area; at least 1 px): a margin that scales with each part, not with the image."""
    import cv2

    k, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    out = mask.copy()
    for i in range(1, k):
        r = max(1, int(round(frac * 2 * np.sqrt(stats[i, cv2.CC_STAT_AREA] / np.pi))))
        x, y, w, h = (int(v) for v in stats[i, :4])
        x0, y0, x1, y1 = max(0, x - r), max(0, y - r), min(mask.shape[1], x + w + r), min(mask.shape[0], y + h + r)
        part = (lab[y0:y1, x0:x1] == i).astype(np.uint8)
        out[y0:y1, x0:x1] |= cv2.dilate(part, disk(r)) > 0
    return out


def fill_holes(m: np.ndarray) -> np.ndarray:
    """``(h, w) bool``: ``m`` with the holes (background 4-connected to no image side) filled. The work is done on
    the mask's box grown by 1 px: its background frame reaches the image sides around the box."""
    import cv2

    m = np.asarray(m, np.uint8)
    out = m > 0
    box = mask_box(m, 1)
    if box is None:
        return out
    sub = m[box]
    h, w = sub.shape
    flood = np.zeros((h + 2, w + 2), np.uint8)
    flood[1:-1, 1:-1] = sub
    cv2.floodFill(flood, np.zeros((h + 4, w + 4), np.uint8), (0, 0), 1)
    out[box] |= flood[1:-1, 1:-1] == 0
    return out


def component_at(m: np.ndarray, points, radius: int = 6) -> np.ndarray:
    """Union of the connected components of ``m`` containing (or nearest within ``radius`` of) the points. The
    components are labelled on the mask's box (nothing of ``m`` lies outside it)."""
    import cv2

    m = np.asarray(m, np.uint8)
    out = np.zeros(m.shape, bool)
    box = mask_box(m)
    if box is None:
        return out
    n, lab = cv2.connectedComponents(np.ascontiguousarray(m[box]), connectivity=8)
    oy, ox = box[0].start, box[1].start
    keep = set()
    h, w = m.shape
    for x, y in points:
        xi, yi = int(round(x)), int(round(y))
        xi, yi = min(max(xi, 0), w - 1) - ox, min(max(yi, 0), h - 1) - oy  # in the box
        if 0 <= yi < lab.shape[0] and 0 <= xi < lab.shape[1] and lab[yi, xi]:
            keep.add(int(lab[yi, xi]))
            continue
        y0, y1 = max(0, yi - radius), max(0, min(lab.shape[0], yi + radius + 1))  # the window within the box
        x0, x1 = max(0, xi - radius), max(0, min(lab.shape[1], xi + radius + 1))
        win = lab[y0:y1, x0:x1]
        if win.any():  # the nearest labelled pixel, the first in row order among the nearest
            yy, xx = np.nonzero(win)
            j = np.argmin((yy + y0 - yi) ** 2 + (xx + x0 - xi) ** 2)
            keep.add(int(win[yy[j], xx[j]]))
    if keep:
        lut = np.zeros(n, bool)
        lut[list(keep)] = True
        out[box] = lut[lab]
    return out


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """``(h, w) bool`` mask dilated by a disk of ``radius`` pixels."""
    import cv2

    if radius <= 0:
        return np.asarray(mask, bool).copy()
    return cv2.dilate(np.asarray(mask, np.uint8), disk(radius)) > 0


def inside_distance(mask: np.ndarray, precise: bool = True) -> np.ndarray:
    """``(h, w) float32``: each pixel's distance (px, L2) to the nearest pixel outside ``mask`` (``(h, w) bool``),
    the image's border counting as outside; 0 off the mask. Its maximum is the radius of the largest disk inside.
    ``precise``: OpenCV's 5x5 distance mask (else 3x3, faster)."""
    import cv2

    return cv2.distanceTransform(np.pad(mask, 1).astype(np.uint8), cv2.DIST_L2, 5 if precise else 3)[1:-1, 1:-1]


def erode(mask: np.ndarray, radius: int) -> np.ndarray:
    """``(h, w) bool`` mask eroded by a disk of ``radius`` pixels."""
    import cv2

    if radius <= 0:
        return np.asarray(mask, bool).copy()
    return cv2.erode(np.asarray(mask, np.uint8), disk(radius)) > 0


def clean_mask(m: np.ndarray, open_px: int, close_px: int, fill: bool, min_area: int) -> np.ndarray:
    """Morphological clean-up of a binary mask: open, close, fill holes, drop components under ``min_area`` px."""
    import cv2

    m8 = np.asarray(m, np.uint8)
    if open_px > 0:
        m8 = cv2.morphologyEx(m8, cv2.MORPH_OPEN, disk(open_px))
    if close_px > 0:
        m8 = cv2.morphologyEx(m8, cv2.MORPH_CLOSE, disk(close_px))
    if fill:
        m8 = fill_holes(m8).astype(np.uint8)
    if min_area > 0:
        n, lab, stats, _ = cv2.connectedComponentsWithStats(m8, connectivity=8)
        keep = np.zeros(n, bool)
        keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= min_area
        m8 = np.take(keep, lab).astype(np.uint8)  # (np.take: cheaper than indexing by the label image)
    return m8 > 0
