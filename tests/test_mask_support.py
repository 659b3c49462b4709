"""One click on an object that stands on something (a pot on its towel, an apple on a dish): the mask is the object,
not the object with its support. Ground truth: procedural cases (``procedural_case(support=...)``) and a real
photo outlined by hand (``real2sim.demos.hand_outlines``), never the function under test."""
from __future__ import annotations

import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import SUPPORTS, procedural_case
from real2sim.segmentation import Prompt, segment_result
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result
from real2sim.segmentation.support import SupportConfig, is_support


def _ellipse(shape, cx, cy, rx, ry):
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    return ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1


def test_a_support_is_wider_flat_and_not_over_the_object():
    """The rule that tells a support from the rest of an object or from a container: a towel under a pot reaches past
    it on both sides and lies under it; a can's body under its lid is as wide and reaches far down; a bin's walls
    around its contents reach over them."""
    shape = (200, 200)
    cfg = SupportConfig()
    pot = _ellipse(shape, 100, 90, 30, 25)
    towel = np.zeros(shape, bool)
    towel[95:135, 55:150] = True
    assert is_support(pot, towel & ~pot, cfg)[0]
    lid = _ellipse(shape, 100, 40, 20, 8)
    body = np.zeros(shape, bool)
    body[40:120, 80:121] = True
    assert not is_support(lid, body & ~lid, cfg)[0]
    content = _ellipse(shape, 100, 100, 20, 15)
    bin_ = np.zeros(shape, bool)
    bin_[60:140, 60:140] = True
    assert not is_support(content, bin_ & ~content, cfg)[0]


def test_one_click_on_an_object_on_a_support_gives_the_object():
    """Eight cylinders on towels, cloths, wood and dishes: without the split GrabCut takes the support along in four
    of them (mean IoU 0.78); with it 0.92 (above 0.88 asserted), and every mask it cut got better."""
    before, after = [], []
    for seed in range(8):
        case = procedural_case(seed, support=SUPPORTS[seed % len(SUPPORTS)], shadow=0.3)
        a = iou(grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(support_split=False)).mask,
                case.mask)
        res = segment_result(case.image, Prompt([case.click]))
        b = iou(res.mask, case.mask)
        if "removed_px" in res.details.get("support", {}):
            assert b > a, (seed, a, b, res.details["support"])
        else:
            assert b == pytest.approx(a), (seed, a, b)
        before.append(a)
        after.append(b)
    assert np.mean(after) > 0.88 and np.mean(after) > np.mean(before) + 0.1, (before, after)


def test_the_glass_pot_on_its_towel(shared_data):
    """The Bridge clip's first frame: one click on the glass pot (outlined by hand) gave the pot with its blue towel
    (IoU 0.55); the towel is cut off (0.86)."""
    from real2sim.demos.mask_cases import hand_cases

    case = {c.name: c for c in hand_cases(shared_data)}.get("hand/bridge_real_1#0/pot")
    if case is None:
        pytest.skip("bridge/bridge_real_1.mp4 is not in the shared data")
    res = segment_result(case.image, Prompt([case.click]))
    assert iou(res.mask, case.mask) > 0.8, res.details
    assert res.details["support"]["removed_px"] > 3000


def test_clicks_on_the_object_and_its_support_keep_both():
    """A person who clicks the cloth as well as the cylinder on it means both: nothing is cut."""
    import cv2

    case = procedural_case(2, support="dots", shadow=0.3)
    one = segment_result(case.image, Prompt([case.click]))
    assert one.details["support"].get("removed_px", 0) > 0  # one click: the towel was cut off
    cut = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(support_split=False)).mask & ~one.mask
    inner = cv2.distanceTransform(np.pad(cut, 1).astype(np.uint8), cv2.DIST_L2, 5)[1:-1, 1:-1]
    y, x = np.unravel_index(int(np.argmax(inner)), inner.shape)  # the towel's pixel farthest from its edges
    towel_click = (float(x), float(y))
    both = segment_result(case.image, Prompt([case.click, towel_click]))
    assert "removed_px" not in both.details.get("support", {}), both.details


def test_the_support_family_is_seeded_and_puts_the_support_under_the_object():
    """The benchmark's ``support`` cases measure what they say: the same seed gives the same case, and the support
    (in the plate: background to a plate difference) lies under the object and reaches past it on both sides."""
    a = procedural_case(4, support="dish", shadow=0.3)
    b = procedural_case(4, support="dish", shadow=0.3)
    bare = procedural_case(4, shadow=0.3)
    assert np.array_equal(a.image, b.image) and np.array_equal(a.plate, b.plate)
    support = np.abs(a.plate.astype(int) - bare.plate.astype(int)).max(-1) > 10
    ys, xs = np.nonzero(a.mask)
    base_rows = support[ys.max() - 2:ys.max() + 1]
    assert base_rows[:, :xs.min()].any() and base_rows[:, xs.max() + 1:].any()
    cols = np.nonzero(support.any(axis=0))[0]
    assert cols.max() - cols.min() > 1.3 * (xs.max() - xs.min())  # wider than the object it carries
