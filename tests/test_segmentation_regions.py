"""The colour region a one-click cue grows (main@02b6871's GrabCut, segmentation.grabcut_legacy): the pixels whose
Lab colour is within the threshold of the clicked colour and that connect (8-connected) to the click, ties at the
threshold excluded, however it is computed."""
from __future__ import annotations

import numpy as np
import pytest


def _reference(image: np.ndarray, x: int, y: int, t: float) -> np.ndarray:
    """The region by its definition: Euclidean Lab distance (lightness half-weighted) of the 5x5-blurred image to
    the clicked pixel's colour below ``t``, the connected component at the click."""
    import cv2

    from real2sim.segmentation.colour import lab_image

    lab = lab_image(cv2.GaussianBlur(image, (5, 5), 0))
    near = (np.linalg.norm(lab - lab[y, x], axis=-1) < t).astype(np.uint8)
    _, labels = cv2.connectedComponents(near, connectivity=8)
    return labels == labels[y, x]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_region_is_the_connected_colour_set_at_the_click(seed):
    import cv2

    from real2sim.segmentation.grabcut_legacy import LegacyConfig, grow_from_click

    rng = np.random.default_rng(seed)
    small = rng.uniform(40, 220, (6, 8, 3)).astype(np.float32)
    image = cv2.resize(small, (96, 72), interpolation=cv2.INTER_CUBIC)
    image = np.clip(image + rng.normal(0, 4, image.shape), 0, 255).astype(np.uint8)
    for _ in range(4):
        x, y = int(rng.integers(0, 96)), int(rng.integers(0, 72))
        for t in (3, 5, 6, 10, 13, 25):  # 5, 13, 25: integer Lab steps reach them exactly (a tie is outside)
            cfg = LegacyConfig(thresholds=(t,), seed_spacing=0, max_region_frac=1.0)
            got = grow_from_click(image, x, y, cfg)
            assert np.array_equal(got, _reference(image, x, y, t)), (x, y, t)
