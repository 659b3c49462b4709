"""A dark can with a perfect plate, clicked on its lit label: its body under the label is the table's colour
darkened (a shadow pixel by pixel), so the change region is the lid and the label; the object under the mask
(one click's whole-below cut) is taken because what it adds is change. Its cast shadow beside it stays out.
Ground truth: the drawn cans of a data-free scene. An unsure plate mask takes what one click finds that is change
(benchmark cases from the shared data)."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_plate
from real2sim.segmentation import Prompt, difference_layers
from real2sim.segmentation.difference import DifferenceConfig


def _dark_can(seed: int, h: int = 256, w: int = 320):
    """A can 22-30 px wide standing on a procedural table: a lit metal lid, a red label band, and below it a body
    of the table's own colour darkened to 40-50 %, with a cast shadow to its right. Returns (frame, plate, can
    mask, cast shadow mask, click on the label)."""
    rng = np.random.default_rng(200 + seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    cw, ch = rng.uniform(22, 30), rng.uniform(40, 55)
    cx, top = w * rng.uniform(0.35, 0.65), h * rng.uniform(0.25, 0.4)
    can, lid, cast = (np.zeros((h, w), np.uint8) for _ in range(3))
    cv2.rectangle(can, (int(cx - cw / 2), int(top)), (int(cx + cw / 2), int(top + ch)), 1, -1)
    cv2.ellipse(can, ((cx, top + ch), (cw, 0.35 * cw), 0), 1, -1)
    cv2.ellipse(lid, ((cx, top), (cw, 0.35 * cw), 0), 1, -1)
    base = top + ch
    cv2.fillConvexPoly(cast, np.array([[cx - cw / 2, base], [cx + cw / 2, base], [cx + cw / 2 + 1.2 * ch, base - 0.3 * ch],
                                       [cx - cw / 2 + 1.2 * ch, base - 0.3 * ch]], np.int32), 1)
    shade = cv2.GaussianBlur(cast.astype(np.float32), (0, 0), 2.0)
    frame = plate * (1 - 0.45 * shade[..., None])
    body = (can > 0) & (lid == 0)
    frame[body] = plate[body] * rng.uniform(0.4, 0.5)
    frame[body & (np.arange(h)[:, None] < top + 0.35 * ch)] = (170, 40, 40)
    frame[lid > 0] = (200, 200, 205)
    frame += rng.normal(0, 1.2, frame.shape)
    obj = (can > 0) | (lid > 0)
    return (np.clip(frame, 0, 255).astype(np.uint8), np.clip(plate, 0, 255).astype(np.uint8), obj,
            (cast > 0) & ~obj, (float(cx), float(top + 0.3 * ch)))


def test_a_dark_body_under_a_lit_label_is_the_object():
    scores, without = [], []
    for seed in range(4):
        frame, plate, can, cast, click = _dark_can(seed)
        res = difference_layers(frame, Prompt(points=[click]), plate)
        scores.append(iou(res.mask, can))
        assert np.count_nonzero(res.mask & cast) < 0.02 * can.sum(), f"seed {seed}: the cast shadow joined the can"
        assert res.details.get("whole_px", 0) > 0
        without.append(iou(difference_layers(frame, Prompt(points=[click]), plate,
                                             DifferenceConfig(whole_share=0.0, one_click_share=0.0)).mask, can))
    assert min(scores) > 0.95, f"dark cans with a perfect plate: IoU {np.round(scores, 3)}"
    assert max(without) < 0.6, f"the scene no longer needs the step: {np.round(without, 3)}"


@pytest.mark.parametrize("family, plate, name, before, after", [("misreg", "open_drawer_c2", "coke_can", 0.36, 0.75)])
def test_an_unsure_plate_mask_takes_what_one_click_finds_that_changed(shared_data, family, plate, name, before, after):
    """A benchmark case (seed 1): a can against a plate handed over misregistered. The plate mask is a part, and its
    confidence says so; one click from the same click finds the can, and what it adds is change, not shadow."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, family, plate, seed=1)
    if c is None:
        pytest.skip(f"the {plate} plate or a benchmark mesh is missing from the shared data")
    assert c.name == f"{family}/{plate}/{name}"
    alone = difference_layers(c.image, Prompt([c.click]), c.plate, DifferenceConfig(one_click_share=0.0))
    assert iou(alone.mask, c.mask) < before + 0.05 and alone.confidence < 0.5
    res = difference_layers(c.image, Prompt([c.click]), c.plate)
    assert iou(res.mask, c.mask) > after and res.details.get("one_click_px", 0) > 0, res.details
