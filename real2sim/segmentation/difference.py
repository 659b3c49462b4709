"""Frame-minus-plate differencing: the strongest backend when a clean plate exists."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.imaging import component_at, disk, fill_holes
from real2sim.segmentation.colour import lab_image
from real2sim.segmentation.core import Prompt, SegmentationError


@dataclass
class DifferenceConfig:
    """Differencing parameters."""

    threshold: float = 30.0
    """Lab distance (lightness weighted by ``l_weight``; OpenCV 8-bit Lab units) above which a pixel differs."""
    l_weight: float = 0.5
    """Weight of lightness: shadows and exposure change lightness more than hue."""
    blur: int = 3
    """Gaussian blur kernel (odd) applied to both images first (compression noise); 0 = none."""
    open_px: int = 1
    """Opening radius (speckle removal)."""
    close_px: int = 2
    """Closing radius (joins parts split by colours that happen to match the plate)."""


def difference_mask(image: np.ndarray, plate: np.ndarray, cfg: DifferenceConfig | None = None) -> np.ndarray:
    """Every pixel that differs from the plate (all objects), cleaned by morphology."""
    import cv2

    cfg = cfg or DifferenceConfig()
    if cfg.blur:
        image = cv2.GaussianBlur(image, (cfg.blur, cfg.blur), 0)
        plate = cv2.GaussianBlur(plate, (cfg.blur, cfg.blur), 0)
    d = np.linalg.norm(lab_image(image, cfg.l_weight) - lab_image(plate, cfg.l_weight), axis=-1)
    m = (d > cfg.threshold).astype(np.uint8)
    if cfg.open_px:
        m = cv2.morphologyEx(m, cv2.MORPH_OPEN, disk(cfg.open_px))
    if cfg.close_px:
        m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, disk(cfg.close_px))
    return m > 0


def difference(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None,
               config: DifferenceConfig | None = None) -> np.ndarray:
    """The connected component(s) of the plate difference at the prompt (inside the box, if one is given)."""
    if plate is None:
        raise SegmentationError("the 'difference' backend needs a background plate: pass plate=..., use --plate PLATE, "
                                "or use --backend grabcut")
    m = difference_mask(image, plate, config)
    h, w = m.shape
    if prompt.box is not None:
        x0, y0, x1, y1 = prompt.box
        box = np.zeros((h, w), bool)
        box[max(0, int(np.floor(y0))):int(np.ceil(y1)) + 1, max(0, int(np.floor(x0))):int(np.ceil(x1)) + 1] = True
        m &= box
    pos = prompt.positives
    if pos:
        m = component_at(m, pos)
    elif prompt.box is not None:
        import cv2

        n, lab, st, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8))
        if n > 1:
            m = lab == 1 + int(np.argmax(st[1:, cv2.CC_STAT_AREA]))
    for x, y in prompt.negatives:  # a negative click removes the component under it
        m &= ~component_at(m, [(x, y)], radius=0)
    return fill_holes(m)
