"""One click on a large plain surface (a cabinet's top filling half the image): the usual box sizes find only a speck
around the click; the mask is the surface, flagged for review. Ground truth: the drawn polygon of a data-free scene
and a real overlay outlined by hand (``real2sim.demos.hand_outlines``), never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_case
from real2sim.segmentation import Prompt, segment_result
from real2sim.segmentation.core import LOW_CONFIDENCE
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result

# without the large boxes, nor the whole around an outline-less part (which finds the surface from the speck too)
NO_LARGE = GrabCutConfig(large_scales=(), whole_plain_edge=0.0)
SPECK = GrabCutConfig(large_scales=(), grown_over_speck=False, whole_plain_edge=0.0)  # nor the grown size


def _cabinet_scene(seed: int, h: int = 256, w: int = 320):
    """A plain, slightly shaded quadrilateral over 40-50 % of a mottled floor; the click near its middle."""
    rng = np.random.default_rng(seed)
    mottle = cv2.resize(rng.normal(0, 1, (h // 8, w // 8, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    floor = mottle * 18 + np.array([120, 100, 80]) * rng.uniform(0.7, 1.1) + rng.normal(0, 3, (h, w, 3))
    corners = np.array([[0.18, 0.15], [0.82, 0.15], [0.9, 0.75], [0.1, 0.75]]) * [w, h] + rng.uniform(-10, 10, (4, 2))
    top = np.zeros((h, w), np.uint8)
    cv2.fillPoly(top, [corners.astype(np.int32)], 1)
    xx = np.mgrid[0:h, 0:w][1]
    colour = np.array([175, 165, 150]) * rng.uniform(0.8, 1.05) + (xx / w * 12)[..., None] + rng.normal(0, 3, (h, w, 3))
    image = np.clip(np.where(top[..., None] > 0, colour, floor), 0, 255).astype(np.uint8)
    return image, top > 0, (0.5 * w, 0.45 * h)


def test_one_click_on_a_large_plain_surface_gives_the_surface_flagged():
    """Without the large boxes (and the unsure part's whole around it, which finds the surface too) every scene gives
    a speck (IoU < 0.05); with them the surface (> 0.95), marked as found by one cue (picked "large surface") with a
    confidence under the review threshold."""
    for seed in range(4):
        image, truth, click = _cabinet_scene(seed)
        speck = grabcut_result(image, Prompt([click]), config=SPECK)
        assert iou(speck.mask, truth) < 0.05, seed
        res = segment_result(image, Prompt([click]))
        assert iou(res.mask, truth) > 0.95, (seed, res.details)
        assert res.details["picked"] == "large surface"
        assert res.confidence < LOW_CONFIDENCE


def test_a_speck_gives_way_to_a_size_that_grew():
    """Without the large boxes, a click on the surface of scenes 0 and 5 left the 8-px speck of the smallest box
    although a larger box had found the surface: that size is taken (IoU > 0.95), flagged for review. Where no size
    grew past the clicks' disks (scene 1) the speck stays: there is nothing better to give."""
    for seed, grows in ((0, True), (5, True), (1, False)):
        image, truth, click = _cabinet_scene(seed)
        off = grabcut_result(image, Prompt([click]), config=SPECK)
        res = grabcut_result(image, Prompt([click]), config=NO_LARGE)
        assert off.mask.sum() < 20, seed
        if grows:
            assert iou(res.mask, truth) > 0.95, (seed, res.details)
            assert res.details["picked"] == "sizes, over a speck" and res.confidence < LOW_CONFIDENCE
        else:
            assert np.array_equal(res.mask, off.mask), seed


def test_a_close_object_is_more_than_a_speck(shared_data):
    """Two close-up objects of the mask benchmark (seed 1's apple on the Bridge table, seed 2's yellow cube before a
    Google Robot): one click gave 3-4 px (IoU 0.000); now the part a box size found (0.50, 0.28), flagged."""
    from real2sim.demos.mask_cases import mask_cases

    for seed, name, floor in ((1, "closeup/stack_cube_plate/apple", 0.4), (2, "closeup/open_drawer_a1/yellow_cube", 0.2)):
        case = {c.name: c for c in mask_cases(shared_data, ["closeup"], seed=seed)}.get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        res = segment_result(case.image, Prompt([case.click]))
        assert iou(res.mask, case.mask) > floor, (name, res.details)
        assert res.confidence < LOW_CONFIDENCE, name


def test_an_object_with_an_outline_never_takes_the_large_boxes():
    """A click on a small object, at full and at half contrast: the mask is the one found without the large boxes
    and without the whole around an outline-less part, pixel for pixel, even where its confidence is low."""
    for seed in range(3):
        for contrast in (1.0, 0.5):
            case = procedural_case(seed, contrast=contrast)
            res = grabcut_result(case.image, Prompt([case.click]))
            plain = grabcut_result(case.image, Prompt([case.click]), config=NO_LARGE)
            assert res.details["picked"] != "large surface", (seed, contrast, res.details)
            assert np.array_equal(res.mask, plain.mask), (seed, contrast)


def test_the_real_cabinet(shared_data):
    """The Google Robot coke-can overlay: one click on the cabinet's top gave 189 px (IoU 0.004 with the hand
    outline, which has the drawers too); then the top (0.73), flagged for review; now the top and the drawers'
    front under it (:mod:`real2sim.segmentation.below`, 0.84)."""
    from real2sim.demos.mask_cases import hand_cases

    case = {c.name: c for c in hand_cases(shared_data)}.get("hand/google_coke_can_real_eval_1/cabinet")
    if case is None:
        pytest.skip("the Google Robot coke-can overlay is not in the shared data")
    res = segment_result(case.image, Prompt([case.click]))
    assert iou(res.mask, case.mask) > 0.8, res.details
    assert res.details["below_px"] > 0
    assert res.confidence < LOW_CONFIDENCE


def _same_in_threads(case):
    a = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(parallel_cues=True))
    b = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(parallel_cues=False))
    assert np.array_equal(a.mask, b.mask) and a.confidence == b.confidence, case.name
    assert a.details == b.details, case.name
    return a


def test_cues_cut_in_a_second_thread_give_the_same_masks():
    """The cues' GrabCuts run beside the box sizes' and the steps after the pick ahead of their turn
    (``parallel_cues``): OpenCV's random state is per thread and seeded before every cut, so masks, confidences
    and picks are those of the serial run, bit for bit."""
    for seed in range(4):
        _same_in_threads(procedural_case(seed, support=None if seed % 2 else "towel"))


def test_a_step_that_changes_the_mask_in_threads_gives_the_serial_mask(shared_data):
    """The real cabinet's top: a large surface continued down its side, so a step after the pick changes the mask
    and the steps after it run again on the new one: the serial run's mask, bit for bit."""
    from real2sim.demos.mask_cases import hand_cases

    case = {c.name: c for c in hand_cases(shared_data)}.get("hand/google_coke_can_real_eval_1/cabinet")
    if case is None:
        pytest.skip("the Google Robot coke-can overlay is not in the shared data")
    assert _same_in_threads(case).details["below_px"] > 0


def test_steps_after_the_pick_see_the_mask_the_ones_before_left():
    """Run ahead in threads, every step still gets the mask the steps before it left: a step that changes the mask
    has the ones after it run again on the new one, as in the serial order."""
    from real2sim.segmentation.grabcut import _steps_in_order

    def grow(m):  # changes the mask while it is small
        return (np.pad(m, 1)[:-2, 1:-1] | m if m.sum() < 4 else None), int(m.sum())

    def area(m):
        return None, int(m.sum())

    steps = [area, grow, area, grow, area, area]
    start = np.zeros((8, 8), bool)
    start[3, 3] = True
    serial = _steps_in_order(steps, start, parallel=False)
    ahead = _steps_in_order(steps, start, parallel=True)
    assert [info for _, info in serial] == [1, 1, 2, 2, 3, 3]
    assert [info for _, info in ahead] == [info for _, info in serial]
    assert all((a is None) == (b is None) and (a is None or np.array_equal(a, b))
               for (a, _), (b, _) in zip(ahead, serial))
