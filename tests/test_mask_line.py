"""One click on a thin object's 2 px handle (or on a spoon whose handle the cut does not attach): the mask joins the
thin line it lies on (:mod:`real2sim.segmentation.line`); solid objects, noise and plain tables are left alone.
Ground truth: the drawn spoons and cylinders of a data-free scene, never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_case, procedural_plate
from real2sim.segmentation import Prompt
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result
from real2sim.segmentation.line import line_at, with_line


def _spoon_clicked_on_its_handle(seed: int, h: int = 256, w: int = 320, shadow: bool = False):
    """A spoon lying on a grained table (with a hard cast shadow beside it if ``shadow``): an oval bowl 14-18 px
    long, a handle 2 px wide and 4-5 bowls long, at any angle, of a saturated colour; the click on the handle
    55-70 % of the way from the bowl. Returns (image, spoon mask, click)."""
    rng = np.random.default_rng(seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    d = np.array([np.cos(ang), np.sin(ang)])
    half = rng.uniform(7, 9)
    length = 2 * half * rng.uniform(4, 5)
    bowl_c = np.array([w / 2, h / 2]) - d * length / 2 + rng.uniform(-8, 8, 2)
    end = bowl_c + d * length
    spoon = np.zeros((h, w), np.uint8)
    cv2.ellipse(spoon, (tuple(map(float, bowl_c)), (2 * half, 1.3 * half), float(np.degrees(ang))), 1, -1)
    cv2.line(spoon, tuple(np.round(bowl_c).astype(int)), tuple(np.round(end).astype(int)), 1, 2)
    spoon = spoon > 0
    shade = np.roll(spoon, (4, 3), axis=(0, 1)) & ~spoon & shadow
    colour = np.array([[40, 70, 200], [200, 60, 50], [60, 150, 70], [90, 60, 40]], np.float32)[seed % 4]
    image = np.where(shade[..., None], plate * 0.6, plate)
    image = np.where(spoon[..., None], colour, image) + rng.normal(0, 2.0, (h, w, 3))
    click = bowl_c + d * length * rng.uniform(0.55, 0.7)
    on = np.argwhere(spoon)  # the click on the handle's nearest drawn pixel (a 2 px line's rounding)
    y, x = on[np.argmin(np.hypot(on[:, 0] - click[1], on[:, 1] - click[0]))]
    return np.clip(image, 0, 255).astype(np.uint8), spoon, (float(x), float(y))


def test_a_click_on_a_spoons_thin_handle_gives_the_spoon():
    lost, found = 0, 0
    for seed in range(8):
        image, spoon, click = _spoon_clicked_on_its_handle(seed)
        before = grabcut_result(image, Prompt(points=[click]), config=GrabCutConfig(lines=False))
        after = grabcut_result(image, Prompt(points=[click]))
        if iou(before.mask, spoon) < 0.6:
            lost += 1
            found += iou(after.mask, spoon) >= 0.7
            if iou(after.mask, spoon) >= 0.7:
                assert after.details["line_px"] > 0, "the report counts the pixels the line added"
        else:
            assert iou(after.mask, spoon) >= iou(before.mask, spoon) - 0.02
    assert lost >= 3, f"the scenes must show the failure: the handle clicks lost only {lost} of 8 spoons"
    assert found >= lost - 1, f"only {found} of the {lost} spoons lost without the step were found with it"


def test_the_line_leaves_its_cast_shadow_out():
    for seed in range(8):
        image, spoon, click = _spoon_clicked_on_its_handle(seed, shadow=True)
        line = line_at(image, click)
        assert line is not None
        shadow = np.roll(spoon, (4, 3), axis=(0, 1)) & ~spoon
        # the shadow is the table's colour, darker: beside a saturated spoon it is left out; beside the dark brown
        # one (every fourth seed), whose colour is near a dark table's, most of it
        share = 0.1 if seed % 4 != 3 else 0.3
        assert (line & shadow).sum() <= share * shadow.sum(), f"seed {seed}: the line took the cast shadow along"
        assert iou(line, spoon) >= 0.75


def test_solid_objects_are_left_as_they_were():
    for seed in range(4):
        case = procedural_case(seed=seed)
        on = grabcut_result(case.image, Prompt(points=[case.click]))
        off = grabcut_result(case.image, Prompt(points=[case.click]), config=GrabCutConfig(lines=False))
        assert np.array_equal(on.mask, off.mask) and "line_px" not in on.details
        assert with_line(case.image, case.mask, case.click) is None


def test_no_line_in_noise_or_on_a_plain_table():
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (200, 260, 3), dtype=np.uint8)
    plain = np.full((200, 260, 3), 128, np.uint8)
    table = procedural_plate(200, 260, rng)
    for image in (noise, plain, table):
        assert line_at(image, (130, 100)) is None
        assert with_line(image, np.zeros((200, 260), bool), (130, 100)) is None


def test_clicks_on_the_image_border_and_tiny_images_give_no_error():
    rng = np.random.default_rng(1)
    for h, w in ((2, 2), (8, 8), (20, 300), (300, 20), (31, 47)):
        image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for click in ((0, 0), (w - 1, h - 1), (w - 0.5, h - 0.5), (w / 2, h / 2)):
            line = line_at(image, click)
            assert line is None or line.shape == (h, w)
            assert with_line(image, np.zeros((h, w), bool), click) is None or line is not None


def test_a_straight_one_pixel_line_is_a_line():
    rng = np.random.default_rng(2)
    image = procedural_plate(200, 260, rng)
    cable = np.zeros((200, 260), bool)
    cable[100, 80:180] = True  # along a row: no spread across it at all
    image[cable] = (20, 20, 25)
    line = line_at(image, (130, 100))
    assert line is not None and iou(line, cable) >= 0.8
    longer = procedural_plate(200, 260, np.random.default_rng(2))
    longer[100, 20:240] = (20, 20, 25)  # running past the crop around the click: where it ends is not seen
    assert line_at(longer, (130, 100)) is None
