"""One click on a spoon's bowl gives the spoon: the handle the boxes around the click leave out is added
(:mod:`real2sim.segmentation.handle`); compact objects are left as they were. Ground truth: the drawn spoons and
cylinders of a data-free scene, never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_case, procedural_plate
from real2sim.segmentation import Prompt
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result
from real2sim.segmentation.handle import HandleConfig, with_handle


def _spoon_on_table(seed: int, h: int = 256, w: int = 320):
    """A spoon of a saturated colour, lit from one side: an oval bowl 16-22 px long and a handle 2-3 px wide,
    4-5 times as long, at any angle. Returns (image, spoon mask, handle mask, click on the bowl)."""
    rng = np.random.default_rng(seed)
    plate = procedural_plate(h, w, rng).astype(np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    d = np.array([np.cos(ang), np.sin(ang)])
    half = rng.uniform(8, 11)
    bowl_c = np.array([w / 2, h / 2]) - d * half * 2 + rng.uniform(-10, 10, 2)
    bowl = np.zeros((h, w), np.uint8)
    cv2.ellipse(bowl, (tuple(map(float, bowl_c)), (2 * half, 1.4 * half), float(np.degrees(ang))), 1, -1)
    handle = np.zeros((h, w), np.uint8)
    end = bowl_c + d * half * rng.uniform(4.5, 5.5)
    cv2.line(handle, tuple(np.round(bowl_c).astype(int)), tuple(np.round(end).astype(int)), 1,
             int(rng.integers(2, 4)))
    spoon = (bowl | handle) > 0
    colour = np.array([[40, 70, 200], [200, 60, 50], [60, 160, 70]], np.float32)[seed % 3]
    yy, xx = np.mgrid[0:h, 0:w]
    light = 1.0 + 0.15 * ((xx - bowl_c[0]) * 0.6 + (yy - bowl_c[1]) * 0.8) / (2 * half)
    image = np.where(spoon[..., None], colour * np.clip(light, 0.75, 1.2)[..., None], plate)
    image = image + rng.normal(0, 1.5, (h, w, 3))
    return np.clip(image, 0, 255).astype(np.uint8), spoon, (handle > 0) & (bowl == 0), (float(bowl_c[0]),
                                                                                     float(bowl_c[1]))


def test_a_click_on_a_spoons_bowl_gives_the_spoon_with_its_handle():
    found, before, after = 0, [], []
    for seed in range(8):
        image, spoon, handle, click = _spoon_on_table(seed)
        off = grabcut_result(image, Prompt([click]), config=GrabCutConfig(handles=False, lines=False))
        on = grabcut_result(image, Prompt([click]))
        before.append(iou(off.mask, spoon))
        after.append(iou(on.mask, spoon))
        if (off.mask & handle).sum() < 0.5 * handle.sum():  # the boxes left the handle out
            found += 1
            assert (on.mask & handle).sum() > 0.8 * handle.sum(), (seed, on.details)
            assert on.details.get("handle_px", 0) > 0
    assert found >= 3, f"the scenes must show the failure: the handle was left out in only {found} of 8"
    assert np.mean(after) > np.mean(before) + 0.1, (np.round(before, 3), np.round(after, 3))


def test_compact_objects_are_left_as_they_were():
    for seed in range(6):
        case = procedural_case(seed)
        off = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(handles=False))
        on = grabcut_result(case.image, Prompt([case.click]))
        assert np.array_equal(on.mask, off.mask), seed
        assert "handle_px" not in on.details


def test_a_thicker_piece_that_continues_the_mask_is_added_and_one_across_it_is_not(shared_data):
    """Benchmark cases where the click's mask is half of a carrot, or a spoon's bowl cut by the image's side: the
    piece the cut attaches is more than half as wide as the mask (``max_width``) but continues it (along the
    half's long axis; a handle pointing at the bowl), so it is added (``max_width_along``); a dark cable running
    behind a blurred can is as wide and as long, and of the can's dark colour, but leaves the can across its axis
    and passes beside its centre: it stays out."""
    from real2sim.demos.mask_cases import mask_cases

    made = {}
    for seed, family, name, gain in ((0, "thin", "thin/open_drawer_b0/carrot", True),
                                     (0, "thin", "thin/open_drawer_b2/spoon", True),
                                     (1, "thin", "thin/open_drawer_b2/carrot", True),
                                     (1, "blur", "blur/open_drawer_b2/coke_can", False)):
        if (seed, family) not in made:
            made[seed, family] = {c.name: c for c in mask_cases(shared_data, [family], seed=seed)}
        case = made[seed, family].get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        mask = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(handles=False, lines=False)).mask
        on, off = (with_handle(case.image, mask, HandleConfig(max_width_along=a)) for a in (0.7, 0.0))
        on, off = (mask if m is None else m for m in (on, off))
        if gain:
            assert iou(off, case.mask) < 0.75, f"{name} no longer shows the failure"
            assert iou(on, case.mask) > max(0.8, iou(off, case.mask) + 0.15), name
        else:
            assert iou(on, case.mask) > 0.8, name
            assert np.array_equal(on, off), name


def test_a_handle_longer_than_twice_the_part_of_the_bowl_found_is_added(shared_data):
    """A wooden spoon on the Bridge cube table at 640x480 seen at a slant: the boxes find part of its bowl (129 px)
    and the handle the cut attaches is 2.5 times that (319 px, 95 % of it the spoon's): under the old bound of
    twice the mask's area it was left out (IoU 0.27); the bound is three times."""
    from real2sim.demos.mask_cases import plates, synthetic_case

    plate = plates(shared_data).get("stack_cube_plate")
    if plate is None:
        pytest.skip("stack_cube_plate.png is not in the shared data")
    case = synthetic_case(shared_data, "stack_cube_plate", plate, "thin", "spoon", 6)
    mask = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(handles=False, lines=False)).mask
    assert iou(mask, case.mask) < 0.4, "the boxes now find the whole spoon: the case no longer shows the failure"
    assert with_handle(case.image, mask, HandleConfig(max_growth=2.0)) is None
    with_it = with_handle(case.image, mask)
    assert with_it is not None and iou(with_it, case.mask) > 0.85
    full = grabcut_result(case.image, Prompt([case.click]))
    assert iou(full.mask, case.mask) > 0.85 and full.details.get("handle_px", 0) > 250, full.details
