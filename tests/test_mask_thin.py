"""One click on a long, thin object (a pen, a carrot, a spoon's handle lying on the table): every usual box around the
click is shorter than the object, so the mask taken can end in a straight cut where the box's side was; it is
continued past the cut. Ground truth: the drawn bar of a data-free scene, never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_plate
from real2sim.segmentation import Prompt
from real2sim.segmentation.continuation import cut_sides
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result


def _bar_on_table(seed: int, h: int = 256, w: int = 320):
    """A 6-9 px wide bar 45-60 % of the image's height long, nearly horizontal (even seeds) or vertical (odd), of a
    darker, redder shade of the table's own colour, shaded across its width; the click a fifth of the way along it.
    Returns (image, bar mask, click)."""
    rng = np.random.default_rng(seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    length, width = rng.uniform(0.45, 0.6) * h, rng.uniform(6, 9)
    ang = rng.uniform(-0.15, 0.15) + (np.pi / 2 if seed % 2 else 0)
    cx, cy = w * rng.uniform(0.4, 0.6), h * rng.uniform(0.45, 0.6)
    d = np.array([np.cos(ang), np.sin(ang)])
    p0, p1 = np.array([cx, cy]) - d * length / 2, np.array([cx, cy]) + d * length / 2
    bar = np.zeros((h, w), np.uint8)
    cv2.line(bar, tuple(np.round(p0).astype(int)), tuple(np.round(p1).astype(int)), 1, int(round(width)))
    yy, xx = np.mgrid[0:h, 0:w]
    across = ((xx - cx) * -d[1] + (yy - cy) * d[0]) / (width / 2)
    colour = plate.reshape(-1, 3).mean(0) * [1.25, 0.8, 0.55] * rng.uniform(0.7, 0.9)
    body = colour * (1 - 0.3 * np.clip(np.abs(across), 0, 1) ** 2)[..., None] + rng.normal(0, 3, (h, w, 3))
    image = np.where(bar[..., None] > 0, body, plate + rng.normal(0, 1.5, (h, w, 3)))
    click = p0 + d * length * rng.uniform(0.15, 0.3)
    return np.clip(image, 0, 255).astype(np.uint8), bar > 0, (float(click[0]), float(click[1]))


def test_a_click_on_a_long_thin_object_gives_all_of_it_not_the_box_around_the_click():
    cut, fixed, unchanged = 0, 0, 0
    for seed in range(12):
        image, bar, click = _bar_on_table(seed)
        # (the thin-line step, which runs after this one, off in both: this is the continuation's own test)
        before = grabcut_result(image, Prompt(points=[click]), config=GrabCutConfig(continue_cuts=False, lines=False))
        after = grabcut_result(image, Prompt(points=[click]), config=GrabCutConfig(lines=False))
        if iou(before.mask, bar) < 0.8:
            cut += 1
            fixed += iou(after.mask, bar) > 0.9
            if iou(after.mask, bar) > 0.9:
                assert after.details["continued_past"], "the report names the sides the mask was continued past"
        else:  # found whole already: left as it was
            unchanged += np.array_equal(before.mask, after.mask)
            assert "continued_past" not in after.details
    assert cut >= 4, f"the scenes must show the failure: only {cut} of 12 bars were cut by the box"
    assert fixed >= cut - 1, f"only {fixed} of the {cut} bars cut by the box were continued to the whole bar"
    assert unchanged == 12 - cut


def test_a_straight_cut_is_told_from_a_rounded_end():
    h, w = 120, 160
    bar = np.zeros((h, w), np.uint8)
    cv2.line(bar, (30, 60), (110, 60), 1, 9)  # rounded ends (cv2.line's round caps)
    ends = {"left", "right"}  # the bar's long sides are straight too: whether the object goes on past a straight
    assert not ends & set(cut_sides(bar > 0))  # side is continues()'s question (the table's colour past them)
    box_cut = (bar > 0) & (np.arange(w)[None, :] <= 90)  # the same bar cut by a box side at x = 90
    assert ends & set(cut_sides(box_cut)) == {"right"}
    at_border = (bar > 0) & (np.arange(w)[None, :] >= 0)
    at_border[:, :35] = False
    at_border = np.roll(at_border, -35, axis=1)  # leaves the image at its left side: not a cut
    assert "left" not in cut_sides(at_border)
