"""Segmentation from a shape prior: where the object is expected in this image (a region projected from a 3-D
estimate, e.g. a rough visual hull seen from this camera), refined to the image's edges by GrabCut.

This is how one prompt is tracked through the photos of a scan: the object's 3-D estimate is projected into each
photo and :func:`prior_grabcut` cuts the object out there. The prior need not be exact: its inside (``core``) seeds
the object's colours, a band around its outline is left to GrabCut, and only what is far outside it is fixed as
background. Lengths scale with the prior's size, so the same settings work at 320x240 and at 1920x1080.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.errors import SegmentationError
from real2sim.core.imaging import component_at, disk, fill_holes, iou
from real2sim.segmentation.colour import refine_edges
from real2sim.segmentation.core import MaskResult


@dataclass
class PriorConfig:
    """:func:`prior_grabcut` settings; fractions are of the prior's equivalent radius ``sqrt(area / pi)``."""

    reach: float = 0.6
    """How far outside the prior GrabCut may still put the object (probable background there, probable object inside
    the prior); beyond is sure background."""
    core: float = 0.35
    """The prior eroded by this is sure object (unless ``core`` is given)."""
    side: int = 160
    """GrabCut runs on the crop resampled to at most this many pixels a side (speed); the outline is then refined by
    colour at full resolution."""
    iterations: int = 3
    max_hole: float = 0.003
    """Holes under this fraction of the mask's area are filled; larger ones (a handle's loop) are kept."""
    seed: int = 0


def _fill_small_holes(mask: np.ndarray, max_frac: float) -> np.ndarray:
    """Holes of ``mask`` smaller than ``max_frac`` of its area filled (GrabCut's speckle); larger ones are real (the
    board seen through a mug's handle) and stay."""
    import cv2

    filled = fill_holes(mask)
    holes = (filled & ~mask).astype(np.uint8)
    if not holes.any():
        return mask
    n, lab, stats, _ = cv2.connectedComponentsWithStats(holes, connectivity=4)
    small = np.zeros(n, bool)
    small[1:] = stats[1:, cv2.CC_STAT_AREA] < max_frac * max(int(mask.sum()), 1)
    return mask | small[lab]


class ColourModel:
    """The object's colours against its surroundings', learnt from one mask (e.g. the clicked photo's): Lab
    histograms (lightness coarse: shading changes between views, hue does not) of the mask and of a ring around it.
    :meth:`probability` gives each pixel's probability of being the object in another photo of it."""

    def __init__(self, image: np.ndarray, mask: np.ndarray, bins: tuple[int, int, int] = (6, 24, 24)):
        import cv2

        mask = np.asarray(mask, bool)
        if mask.sum() < 20:
            raise SegmentationError("ColourModel: the mask is (nearly) empty; nothing to learn the object's colours from")
        r = max(3, int(round(0.5 * np.sqrt(mask.sum() / np.pi))))
        ring = (cv2.dilate(mask.astype(np.uint8), disk(r)) > 0) & ~(cv2.dilate(mask.astype(np.uint8), disk(2)) > 0)
        self.bins = bins
        lab = cv2.cvtColor(np.asarray(image, np.uint8), cv2.COLOR_RGB2LAB)
        self.fg = self._hist(lab, cv2.erode(mask.astype(np.uint8), disk(1)) > 0)
        self.bg = self._hist(lab, ring)

    def _index(self, lab: np.ndarray) -> np.ndarray:
        b = self.bins
        q = [(lab[..., c].astype(np.int32) * b[c]) >> 8 for c in range(3)]
        return (q[0] * b[1] + q[1]) * b[2] + q[2]

    def _hist(self, lab: np.ndarray, sel: np.ndarray) -> np.ndarray:
        import cv2

        n = int(np.prod(self.bins))
        hist = np.bincount(self._index(lab[sel]).ravel(), minlength=n).astype(np.float32).reshape(self.bins)
        hist = cv2.GaussianBlur(hist.reshape(self.bins[0], -1), (0, 0), 0.7).reshape(self.bins)  # neighbouring hues
        return hist.ravel() / max(hist.sum(), 1.0) + 1e-6

    def probability(self, image: np.ndarray) -> np.ndarray:
        """``(h, w) float32`` P(object | colour) with equal priors."""
        import cv2

        idx = self._index(cv2.cvtColor(np.asarray(image, np.uint8), cv2.COLOR_RGB2LAB))
        f, b = self.fg[idx], self.bg[idx]
        return (f / (f + b)).astype(np.float32)


def prior_grabcut(image: np.ndarray, prior: np.ndarray, core: np.ndarray | None = None,
                  config: PriorConfig | None = None, name: str = "the image",
                  colour: ColourModel | None = None) -> MaskResult:
    """The object's mask in ``image`` (``(h, w, 3) uint8`` RGB) near ``prior`` (``(h, w) bool``: where it is
    expected). ``core`` (``(h, w) bool``, optional): pixels known to be the object (default: the prior eroded by
    ``config.core``; an all-False core: none known). ``colour`` (optional, the object's colours from another photo):
    inside the prior, pixels of clearly the object's colours become sure object, pixels clearly not probable
    background. Returns a :class:`MaskResult` whose confidence is the outline's colour contrast times the mask's
    agreement with the prior (IoU), both in ``details``."""
    import cv2

    cfg = config or PriorConfig()
    image = np.asarray(image)
    prior = np.asarray(prior, bool)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise SegmentationError(f"prior_grabcut: {name} must be (h, w, 3) uint8 RGB, got {image.dtype} {image.shape}")
    if prior.shape != image.shape[:2]:
        raise SegmentationError(f"prior_grabcut: the prior is {prior.shape} but {name} is {image.shape[:2]}")
    h, w = prior.shape
    area = int(prior.sum())
    if area < 20:
        raise SegmentationError(f"prior_grabcut: the prior is empty in {name} (the object is not expected in view)")
    r_eq = float(np.sqrt(area / np.pi))
    reach = max(4, int(round(cfg.reach * r_eq)))
    ys, xs = np.nonzero(prior)
    pad = reach + 4
    x0, x1 = max(0, xs.min() - pad), min(w, xs.max() + pad + 1)
    y0, y1 = max(0, ys.min() - pad), min(h, ys.max() + pad + 1)
    s = min(1.0, cfg.side / max(x1 - x0, y1 - y0))
    img_c = image[y0:y1, x0:x1]
    pr_c = prior[y0:y1, x0:x1].astype(np.uint8)
    size = (max(2, int(round((x1 - x0) * s))), max(2, int(round((y1 - y0) * s))))
    small = cv2.resize(img_c, size, interpolation=cv2.INTER_AREA)
    pr_s = cv2.resize(pr_c, size, interpolation=cv2.INTER_NEAREST)
    r_s = max(2, int(round(reach * s)))
    if core is None:
        core_s = cv2.erode(pr_s, disk(max(1, int(round(cfg.core * r_eq * s))))) > 0
    else:
        core_s = cv2.resize(np.asarray(core, np.uint8)[y0:y1, x0:x1], size, interpolation=cv2.INTER_NEAREST) > 0
    tri = np.full(pr_s.shape, cv2.GC_BGD, np.uint8)
    tri[cv2.dilate(pr_s, disk(r_s)) > 0] = cv2.GC_PR_BGD
    tri[pr_s > 0] = cv2.GC_PR_FGD
    tri[core_s] = cv2.GC_FGD
    if colour is not None:
        p = cv2.resize(colour.probability(img_c), size, interpolation=cv2.INTER_AREA)
        sure = cv2.morphologyEx(((p > 0.85) & (pr_s > 0)).astype(np.uint8), cv2.MORPH_OPEN, disk(2)) > 0
        tri[(p < 0.15) & (pr_s > 0) & ~core_s] = cv2.GC_PR_BGD
        tri[sure] = cv2.GC_FGD
        core_s = core_s | sure
    if not (tri == cv2.GC_BGD).any():  # the prior fills the crop: the image's own border is background
        tri[[0, -1], :] = cv2.GC_BGD
        tri[:, [0, -1]] = cv2.GC_BGD
    try:  # (thread-safe: the RNG seeded is this thread's)
        cv2.setRNGSeed(cfg.seed)
        bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
        cv2.grabCut(np.ascontiguousarray(small[..., ::-1]), tri, None, bgd, fgd, cfg.iterations,
                    cv2.GC_INIT_WITH_MASK)
    except cv2.error as exc:
        raise SegmentationError(f"prior_grabcut failed on {name} ({exc.err})") from exc
    m_s = ((tri == cv2.GC_FGD) | (tri == cv2.GC_PR_FGD)).astype(np.float32)
    m_c = cv2.resize(m_s, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR) >= 0.5
    mask = np.zeros((h, w), bool)
    mask[y0:y1, x0:x1] = m_c
    if mask.sum() >= 20:
        rb = max(1, int(round(1.0 / s)))
        mask = refine_edges(image, mask, band=rb, ring=2 * rb + 1)
    seeds = np.argwhere(core_s)
    if len(seeds):  # the component(s) at the object's known pixels
        pts = [(x0 + (j + 0.5) / s - 0.5, y0 + (i + 0.5) / s - 0.5) for i, j in seeds[:: max(1, len(seeds) // 50)]]
        mask = component_at(mask, pts, radius=max(2, int(round(2 / s))))
    mask = _fill_small_holes(mask, cfg.max_hole)
    from real2sim.segmentation.grabcut import _contrast, _lab

    agree = iou(mask, prior)
    con = _contrast(_lab(img_c), mask[y0:y1, x0:x1]) if mask.any() else 0.0
    conf = float(np.clip(agree * (0.4 + 0.6 * con), 0, 1))
    return MaskResult(mask, conf, backend="prior_grabcut",
                      details={"prior_iou": round(agree, 4), "contrast": round(con, 3), "scale": round(s, 3)})
