"""A long, thin object with a perfect plate: the difference backend keeps a pen's shaded sides (the outline's
unmixing decides only next to parts of the object wide enough for their interior to be their colour; the specks'
opening spares what is thinner than itself) and a spoon's handle 1-2 px wide. Ground truth: the drawn pens and
spoons of a data-free scene."""
from __future__ import annotations

import cv2
import numpy as np
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_plate
from real2sim.segmentation import Prompt, difference_layers


def _pen_on_table(seed: int, h: int = 256, w: int = 320):
    """A pen 4-6 px wide, 35-50 % of the image's width long, at any angle: a saturated colour with a highlight down
    its middle and dark sides (a lit cylinder). Returns (frame, plate, pen mask, click)."""
    rng = np.random.default_rng(seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    width, length, ang = rng.uniform(4, 6), rng.uniform(0.35, 0.5) * w, rng.uniform(0, np.pi)
    c = np.array([w * rng.uniform(0.4, 0.6), h * rng.uniform(0.4, 0.6)])
    d = np.array([np.cos(ang), np.sin(ang)])
    pen = np.zeros((h, w), np.uint8)
    cv2.line(pen, tuple(np.round(c - d * length / 2).astype(int)), tuple(np.round(c + d * length / 2).astype(int)),
             1, int(round(width)))
    yy, xx = np.mgrid[0:h, 0:w]
    across = np.clip(np.abs((xx - c[0]) * -d[1] + (yy - c[1]) * d[0]) / (width / 2), 0, 1)
    colour = np.array([[60, 200, 150], [40, 90, 210], [220, 200, 60]], np.float32)[seed % 3]
    body = colour * (1.15 - 0.75 * across ** 2)[..., None]
    frame = np.where(pen[..., None] > 0, body, plate) + rng.normal(0, 1.2, (h, w, 3))
    return (np.clip(frame, 0, 255).astype(np.uint8), np.clip(plate, 0, 255).astype(np.uint8), pen > 0,
            (float(c[0]), float(c[1])))


def test_a_shaded_pen_with_its_plate_keeps_its_dark_sides():
    scores = []
    for seed in range(6):
        frame, plate, pen, click = _pen_on_table(seed)
        res = difference_layers(frame, Prompt(points=[click]), plate)
        scores.append(iou(res.mask, pen))
    assert min(scores) > 0.8 and np.mean(scores) > 0.85, f"pens with a perfect plate: IoU {np.round(scores, 3)}"


def _spoon_on_table(seed: int, h: int = 256, w: int = 320):
    """A spoon: an oval bowl 14-18 px long and a handle 1-2 px wide, 3-4 times the bowl's length, at any angle, a
    flat colour with a darker rim. Returns (frame, plate, spoon mask, click on the bowl)."""
    rng = np.random.default_rng(100 + seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    bowl_len, ang = rng.uniform(14, 18), rng.uniform(0, np.pi)
    handle_len, handle_w = rng.uniform(3, 4) * bowl_len, int(rng.integers(1, 3))
    c = np.array([w * rng.uniform(0.35, 0.65), h * rng.uniform(0.35, 0.65)])
    d = np.array([np.cos(ang), np.sin(ang)])
    spoon = np.zeros((h, w), np.uint8)
    cv2.ellipse(spoon, (tuple(c), (bowl_len, 0.6 * bowl_len), float(np.degrees(ang))), 1, -1)
    start = c + d * bowl_len * 0.45
    cv2.line(spoon, tuple(np.round(start).astype(int)), tuple(np.round(start + d * handle_len).astype(int)), 1,
             handle_w)
    colour = np.array([[70, 110, 200], [200, 80, 60], [60, 170, 90]], np.float32)[seed % 3]
    rim = spoon.astype(bool) & ~(cv2.erode(spoon, np.ones((3, 3), np.uint8)) > 0)
    body = np.where(rim[..., None], 0.8 * colour, colour)
    frame = np.where(spoon[..., None] > 0, body, plate) + rng.normal(0, 1.2, (h, w, 3))
    return (np.clip(frame, 0, 255).astype(np.uint8), np.clip(plate, 0, 255).astype(np.uint8), spoon > 0,
            (float(c[0]), float(c[1])))


def test_a_spoon_clicked_on_its_bowl_keeps_its_handle():
    """The cleanup's appendage cut takes a 1-2 px handle off its bowl; the handle step puts back the line the
    change shows (at the line's own width: the comparison's blur would make it 3-5 px)."""
    from real2sim.segmentation.difference import DifferenceConfig

    scores, without = [], []
    for seed in range(6):
        frame, plate, spoon, click = _spoon_on_table(seed)
        scores.append(iou(difference_layers(frame, Prompt(points=[click]), plate).mask, spoon))
        without.append(iou(difference_layers(frame, Prompt(points=[click]), plate,
                                             DifferenceConfig(handles=False)).mask, spoon))
    assert min(scores) > 0.85 and np.mean(scores) > 0.93, f"spoons with a perfect plate: IoU {np.round(scores, 3)}"
    assert np.mean(without) < 0.9, f"the scene no longer cuts handles without the step: {np.round(without, 3)}"
    assert all(a >= b - 0.01 for a, b in zip(scores, without)), f"{np.round(scores, 3)} vs {np.round(without, 3)}"


def test_a_dark_spoon_that_reads_as_shade_is_not_reduced_to_a_speck(shared_data):
    """A steel spoon darker than the wood it lies on (the mask benchmark's thin case on open_drawer_c2, seed 0):
    pixel by pixel it is the table under a shadow, and its object evidence is a few pixels of the bowl's highlight
    and of the handle. The outline refinement kept 1 px of the 74 the region held (IoU 0.003); a refinement that
    would keep under half of the mask leaves it as it was."""
    from real2sim.demos.mask_cases import mask_cases
    from real2sim.segmentation.difference import DifferenceConfig

    case = {c.name: c for c in mask_cases(shared_data, ["thin"], seed=0)}.get("thin/open_drawer_c2/spoon")
    assert case is not None, "the benchmark's thin cases changed: pick the dark spoon again"
    res = difference_layers(case.image, Prompt(points=[case.click]), case.plate)
    collapsed = difference_layers(case.image, Prompt(points=[case.click]), case.plate, DifferenceConfig(refine_keep=0))
    assert np.count_nonzero(collapsed.mask) < 10, "the refinement no longer collapses this mask: the test is moot"
    assert np.count_nonzero(res.mask) >= 50 and iou(res.mask, case.mask) > 0.2, iou(res.mask, case.mask)
