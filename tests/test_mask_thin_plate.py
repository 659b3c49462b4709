"""A long, thin object with a perfect plate: the difference backend keeps a pen's shaded sides (the outline's
unmixing decides only next to parts of the object wide enough for their interior to be their colour; the specks'
opening spares what is thinner than itself). Ground truth: the drawn pens of a data-free scene."""
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
