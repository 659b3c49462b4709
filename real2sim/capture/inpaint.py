"""Single-image inpainting: OpenCV Telea / Navier-Stokes, a numpy PatchMatch completion, or a user hook.

``inpaint(image, hole, method)`` fills the ``True`` pixels of ``hole``. Methods:

- ``"telea"`` (default): ``cv2.INPAINT_TELEA``; smooth, fast, blurs texture.
- ``"ns"``: ``cv2.INPAINT_NS`` (Navier-Stokes).
- ``"patchmatch"``: exemplar-based completion (Wexler et al. 2007 with the PatchMatch nearest-neighbour
  search of Barnes et al. 2009), coarse to fine, own numpy implementation, seeded. It copies texture
  (wood grain) from the rest of the image instead of blurring it. Bounded: a fixed number of scales and
  iterations, and the search runs only over a window around the hole.
- ``"auto"``: per connected part of the hole, the method that best fills a band of known pixels around it cut
  out with it: PatchMatch where the surroundings have structure (a table's grain), Telea where they are smooth
  or the part is thinner than a patch. See ``benchmarks/bench_inpaint.py`` (object-shaped holes cut into the 13
  real plates of ../shared/data) and docs/capture.md for the numbers.
- a callable ``fn(image_uint8 (h,w,3), hole_bool (h,w)) -> (h,w,3) uint8``: a learned inpainter (e.g. LaMa
  with the user's weights) plugged in without this package knowing about it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Union

import numpy as np

from real2sim.core.errors import UnknownNameError

log = logging.getLogger(__name__)

Inpainter = Callable[[np.ndarray, np.ndarray], np.ndarray]
METHODS = ("telea", "ns", "patchmatch", "auto")


@dataclass
class PatchMatchConfig:
    """Parameters of the PatchMatch completion."""

    patch: int = 7
    """Patch side in pixels (odd)."""
    iterations: int = 4
    """PatchMatch + voting iterations per scale."""
    scales: int = 3
    """Pyramid levels (coarsest first); the coarsest level is initialised with Telea."""
    propagation_steps: tuple[int, ...] = (1, 4, 1)
    """Neighbour distances used by the (vectorised) propagation passes of each iteration."""
    search_step: int = 2
    """Patch sampling step of the nearest-neighbour search (2 = every other pixel: 4x faster)."""
    search_margin: int = 96
    """Source patches are taken from a window this many pixels (at full resolution) around the hole."""
    seed: int = 0
    """Random seed of the search: same inputs give the same output."""
    max_hole_pixels: int = 16000
    """A hole with more pixels than this is completed on its neighbourhood shrunk until it has this many (then
    enlarged back): the work grows with the hole's area, and a robot-sized hole (60000 px of a 640x480 frame) took
    60 s at full resolution for 0.3 dB over Telea. 0: no bound."""


def inpaint(image: np.ndarray, hole: np.ndarray, method: Union[str, Inpainter] = "telea", radius: int = 5,
            patchmatch: PatchMatchConfig | None = None) -> np.ndarray:
    """Fill ``hole`` (``(h, w) bool``) of ``image`` (``(h, w, 3) uint8``); returns a new uint8 image."""
    import cv2

    image = np.ascontiguousarray(image, dtype=np.uint8)
    hole = np.asarray(hole, bool)
    if not hole.any():
        return image.copy()
    if hole.all():
        raise ValueError("inpaint: the hole covers the whole image; there is nothing to fill it from")
    if callable(method):
        out = np.asarray(method(image.copy(), hole.copy()))
        if out.shape != image.shape:
            raise ValueError(f"inpainter {method!r} returned shape {out.shape}, expected {image.shape}")
        out = out.astype(np.uint8)
        res = image.copy()
        res[hole] = out[hole]
        return res
    m8 = hole.astype(np.uint8) * 255
    if method == "telea":
        return cv2.inpaint(image, m8, radius, cv2.INPAINT_TELEA)
    if method == "ns":
        return cv2.inpaint(image, m8, radius, cv2.INPAINT_NS)
    if method == "patchmatch":
        return patchmatch_inpaint(image, hole, patchmatch or PatchMatchConfig())
    if method == "auto":
        return auto_inpaint(image, hole, radius, patchmatch or PatchMatchConfig())
    raise UnknownNameError("inpainting method", str(method), METHODS)


def auto_inpaint(image: np.ndarray, hole: np.ndarray, radius: int = 5, cfg: PatchMatchConfig | None = None,
                 band: float = 0.25) -> np.ndarray:
    """Telea everywhere, then, for each connected part of ``hole`` at least a patch wide, the method that fills
    best the known pixels around it: a band ``band`` times the part's width wide is cut out with the part and
    filled by Telea and by PatchMatch; the one nearer the band's true pixels fills the part (a wood grain goes to
    PatchMatch, a smooth gradient to Telea)."""
    import cv2

    cfg = cfg or PatchMatchConfig()
    m8 = hole.astype(np.uint8)
    out = cv2.inpaint(image, m8 * 255, radius, cv2.INPAINT_TELEA)
    k, lab = cv2.connectedComponents(m8, connectivity=8)
    if k <= 1:
        return out
    width = np.zeros(k)
    np.maximum.at(width, lab.ravel(), 2 * cv2.distanceTransform(m8, cv2.DIST_L2, 5).ravel())
    for i in range(1, k):
        if width[i] < cfg.patch:
            continue
        part = lab == i
        r = max(2, int(round(band * width[i])))
        ring = (cv2.dilate(part.view(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
                > 0) & ~hole
        test = part | ring
        if ring.sum() < cfg.patch ** 2 or test.all():
            continue
        err_t, err_p = _band_errors(image, test, ring, radius, cfg)
        if err_p < err_t:
            out[part] = patchmatch_inpaint(image, part, cfg)[part]
    return out


def _band_errors(image: np.ndarray, test: np.ndarray, ring: np.ndarray, radius: int, cfg: PatchMatchConfig
                 ) -> tuple[float, float]:
    """Mean absolute error of Telea and of PatchMatch over the known ``ring`` when ``test`` (the part and its ring)
    is cut out. A test larger than ``cfg.max_hole_pixels`` is run on its neighbourhood shrunk to that many pixels
    (the choice between the two needs their difference, not full-resolution fills: a robot-sized part took 100 s)."""
    import cv2

    scale = np.sqrt(cfg.max_hole_pixels / test.sum()) if cfg.max_hole_pixels > 0 else 1.0
    if scale < 1.0:
        ys, xs = np.nonzero(test)
        m = cfg.search_margin
        y0, y1 = max(0, ys.min() - m), min(test.shape[0], ys.max() + 1 + m)
        x0, x1 = max(0, xs.min() - m), min(test.shape[1], xs.max() + 1 + m)
        size = (max(8, int(round((x1 - x0) * scale))), max(8, int(round((y1 - y0) * scale))))
        image = cv2.resize(np.ascontiguousarray(image[y0:y1, x0:x1]), size, interpolation=cv2.INTER_AREA)
        test = cv2.resize(test[y0:y1, x0:x1].view(np.uint8), size, interpolation=cv2.INTER_AREA) > 0
        ring = (cv2.resize(ring[y0:y1, x0:x1].view(np.uint8), size, interpolation=cv2.INTER_AREA) > 0) & test
        radius = max(1, int(round(radius * scale)))
        cfg = replace(cfg, max_hole_pixels=0, search_margin=max(cfg.patch, int(round(cfg.search_margin * scale))))
        if test.all() or not ring.any():
            return 0.0, np.inf
    err_t = np.abs(cv2.inpaint(image, test.view(np.uint8) * 255, radius, cv2.INPAINT_TELEA)[ring].astype(np.float32)
                   - image[ring]).mean()
    err_p = np.abs(patchmatch_inpaint(image, test, cfg)[ring].astype(np.float32) - image[ring]).mean()
    return float(err_t), float(err_p)


# ---------------------------------------------------------------------------------------------
# PatchMatch completion
# ---------------------------------------------------------------------------------------------

def _patch_cost(img: np.ndarray, ty: np.ndarray, tx: np.ndarray, sy: np.ndarray, sx: np.ndarray, r: int,
                step: int = 1) -> np.ndarray:
    """Sum of squared differences between patches centred at (ty, tx) and (sy, sx) (all in-bounds).

    ``step`` > 1 samples the patch on a sparser grid (faster search, same ranking in practice)."""
    h, w, _ = img.shape
    flat = img.reshape(-1, 3)
    o = np.arange(-r, r + 1, step)
    offs = (o[:, None] * w + o[None, :]).ravel()
    a = flat[(ty * w + tx)[:, None] + offs[None, :]]
    b = flat[(sy * w + sx)[:, None] + offs[None, :]]
    d = (a - b).reshape(len(ty), -1)
    return np.einsum("ij,ij->i", d, d)


def _pm_level(img: np.ndarray, hole: np.ndarray, src_ok: np.ndarray, ty, tx, nny, nnx, cfg: PatchMatchConfig,
              rng: np.random.Generator, window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run PatchMatch iterations + voting at one level. Returns (image, nny, nnx)."""
    r = cfg.patch // 2
    h, w = hole.shape
    y0, y1, x0, x1 = window
    index = -np.ones((h, w), np.int64)
    index[ty, tx] = np.arange(ty.size)
    cost = _patch_cost(img, ty, tx, nny, nnx, r, cfg.search_step)

    def try_candidates(cy, cx):
        nonlocal cost, nny, nnx
        cy = np.clip(cy, y0, y1 - 1)
        cx = np.clip(cx, x0, x1 - 1)
        ok = src_ok[cy, cx]
        if not ok.any():
            return
        c = np.full(cost.shape, np.inf, np.float32)
        c[ok] = _patch_cost(img, ty[ok], tx[ok], cy[ok], cx[ok], r, cfg.search_step)
        better = c < cost
        cost = np.where(better, c, cost)
        nny = np.where(better, cy, nny)
        nnx = np.where(better, cx, nnx)

    for it in range(cfg.iterations):
        # propagation (vectorised, 'jump flood' style): neighbours' offsets shifted back
        for step in cfg.propagation_steps:
            for dy, dx in ((0, step), (0, -step), (step, 0), (-step, 0)):
                ny, nx = ty + dy, tx + dx
                inside = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
                j = np.where(inside, index[np.clip(ny, 0, h - 1), np.clip(nx, 0, w - 1)], -1)
                have = j >= 0
                cy = np.where(have, nny[np.maximum(j, 0)] - dy, nny)
                cx = np.where(have, nnx[np.maximum(j, 0)] - dx, nnx)
                try_candidates(cy, cx)
        # random search at shrinking radii
        rad = max(y1 - y0, x1 - x0)
        while rad >= 1:
            cy = nny + rng.integers(-rad, rad + 1, size=nny.shape)
            cx = nnx + rng.integers(-rad, rad + 1, size=nnx.shape)
            try_candidates(cy, cx)
            rad //= 2
        # voting: every hole pixel = mean of the source pixels its overlapping patches point at,
        # weighted by patch similarity
        acc = np.zeros((h, w, 3), np.float32)
        wsum = np.zeros((h, w), np.float32)
        sigma2 = max(float(np.percentile(cost, 75)), 1e-6)
        wt = np.exp(-cost / (2 * sigma2)).astype(np.float32) + 1e-6
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                py, px = ty + dy, tx + dx
                # (py, px) are distinct for a fixed offset: plain fancy-index accumulation is exact
                acc[py, px] += img[nny + dy, nnx + dx] * wt[:, None]
                wsum[py, px] += wt
        fill = hole & (wsum > 0)
        img = img.copy()
        img[fill] = acc[fill] / wsum[fill, None]
        cost = _patch_cost(img, ty, tx, nny, nnx, r, cfg.search_step)
    return img, nny, nnx


def patchmatch_inpaint(image: np.ndarray, hole: np.ndarray, cfg: PatchMatchConfig | None = None) -> np.ndarray:
    """Exemplar-based completion of ``hole`` (see module docstring). ``image`` uint8 RGB."""
    import cv2

    cfg = cfg or PatchMatchConfig()
    if cfg.patch % 2 == 0 or cfg.patch < 3:
        raise ValueError(f"PatchMatchConfig.patch must be odd and >= 3, got {cfg.patch}")
    rng = np.random.default_rng(cfg.seed)
    r = cfg.patch // 2
    H, W = hole.shape
    # crop to the hole's neighbourhood: bounded work whatever the image size
    ys, xs = np.nonzero(hole)
    m = cfg.search_margin
    cy0, cy1 = max(0, ys.min() - m), min(H, ys.max() + 1 + m)
    cx0, cx1 = max(0, xs.min() - m), min(W, xs.max() + 1 + m)
    crop = image[cy0:cy1, cx0:cx1]
    chole = hole[cy0:cy1, cx0:cx1]
    scale = np.sqrt(cfg.max_hole_pixels / ys.size) if cfg.max_hole_pixels > 0 else 1.0
    if scale < 1.0:  # bounded work: complete the shrunk neighbourhood, enlarge the fill back
        size = (max(8, int(round(crop.shape[1] * scale))), max(8, int(round(crop.shape[0] * scale))))
        small = cv2.resize(np.ascontiguousarray(crop), size, interpolation=cv2.INTER_AREA)
        shole = cv2.resize(chole.astype(np.uint8), size, interpolation=cv2.INTER_AREA) > 0
        sub_cfg = replace(cfg, max_hole_pixels=0, search_margin=max(cfg.patch, int(round(m * scale))))
        filled = cv2.resize(patchmatch_inpaint(small, shole, sub_cfg), (crop.shape[1], crop.shape[0]),
                            interpolation=cv2.INTER_CUBIC)
        result = image.copy()
        result[cy0:cy1, cx0:cx1][chole] = filled[chole]
        return result
    init = cv2.inpaint(np.ascontiguousarray(crop), chole.astype(np.uint8) * 255, 5, cv2.INPAINT_TELEA)
    # pyramid (coarsest last)
    levels = [(init.astype(np.float32) / 255.0, chole)]
    for _ in range(cfg.scales - 1):
        im, ho = levels[-1]
        if min(ho.shape) < 4 * cfg.patch:
            break
        im2 = cv2.pyrDown(im)
        ho2 = cv2.resize(ho.astype(np.uint8), (im2.shape[1], im2.shape[0]), interpolation=cv2.INTER_AREA) > 0
        levels.append((im2, ho2))
    nn = None
    out = None
    for li in range(len(levels) - 1, -1, -1):
        im, ho = levels[li]
        h, w = ho.shape
        if out is not None:  # upsample the previous level's fill into this level's hole
            up = cv2.resize(out, (w, h), interpolation=cv2.INTER_LINEAR)
            im = im.copy()
            im[ho] = up[ho]
        # targets: every pixel whose patch overlaps the hole (patch centres kept r from the border)
        near = cv2.dilate(ho.astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8)) > 0
        border = np.zeros_like(near)
        border[r:h - r, r:w - r] = True
        tmask = near & border
        ty, tx = np.nonzero(tmask)
        # sources: patch centres whose whole patch is known
        src_ok = (cv2.dilate(ho.astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8)) == 0) & border
        if not src_ok.any() or ty.size == 0:
            out = im
            continue
        sy, sx = np.nonzero(src_ok)
        window = (int(sy.min()), int(sy.max()) + 1, int(sx.min()), int(sx.max()) + 1)
        if nn is None:
            k = rng.integers(0, sy.size, size=ty.size)
            nny, nnx = sy[k], sx[k]
        else:  # upsample the previous field
            py, px, pny, pnx, (ph, pw) = nn
            field_y = np.zeros((ph, pw), np.int64)
            field_x = np.zeros((ph, pw), np.int64)
            field_y[py, px], field_x[py, px] = pny - py, pnx - px
            sy_ = h / ph
            oy = np.round(field_y[np.clip((ty / sy_).astype(int), 0, ph - 1), np.clip((tx / sy_).astype(int), 0, pw - 1)] * sy_)
            ox = np.round(field_x[np.clip((ty / sy_).astype(int), 0, ph - 1), np.clip((tx / sy_).astype(int), 0, pw - 1)] * sy_)
            nny = np.clip(ty + oy.astype(np.int64), window[0], window[1] - 1)
            nnx = np.clip(tx + ox.astype(np.int64), window[2], window[3] - 1)
            bad = ~src_ok[nny, nnx]
            k = rng.integers(0, sy.size, size=int(bad.sum()))
            nny[bad], nnx[bad] = sy[k], sx[k]
        im, nny, nnx = _pm_level(im, ho, src_ok, ty, tx, nny, nnx, cfg, rng, window)
        nn = (ty, tx, nny, nnx, (h, w))
        out = im
    result = image.copy()
    filled = np.clip(np.rint(out * 255.0), 0, 255).astype(np.uint8)
    sub = result[cy0:cy1, cx0:cx1]
    sub[chole] = filled[chole]
    return result
