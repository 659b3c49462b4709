"""Mask confidences that tell a person which masks to check: the IoU a mask keeps with its outline known to a pixel,
a plate mask's threshold stability times it, and one click's confidence from moved clicks (what the segment stage
reports). Benchmark cases from the shared data (docs/capture.md, *Which masks to check*)."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.core.imaging import write_rgb
from real2sim.demos.mask_cases import procedural_case
from real2sim.segmentation import LOW_CONFIDENCE, Prompt, difference_layers, segment_result
from real2sim.segmentation.core import outline_iou


def test_outline_iou_is_what_a_one_pixel_outline_costs():
    """A 10 x 10 square: 100 px, 36 on its outline: (100 - 18) / (100 + 18). A line of the same area loses more than
    the square, a large square almost nothing; an empty mask is not to be trusted."""
    sq = np.zeros((40, 200), bool)
    sq[5:15, 5:15] = True
    assert outline_iou(sq) == pytest.approx(82 / 118)
    line = np.zeros((40, 200), bool)
    line[5:7, 5:55] = True  # 2 x 50: every pixel on its outline
    assert outline_iou(line) < 0.4 < outline_iou(sq)
    big = np.zeros((120, 120), bool)
    big[10:110, 10:110] = True
    assert outline_iou(big) > 0.96
    assert outline_iou(np.zeros((8, 8), bool)) == 0.0


def _case(shared_data, family: str, plate: str, seed: int, name: str):
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, family, plate, seed=seed)
    if c is None:
        pytest.skip(f"the {plate} plate or a benchmark mesh is missing from the shared data")
    assert c.name == f"{family}/{plate}/{name}"
    return c


@pytest.mark.parametrize("family, plate, seed, name", [("blur", "open_drawer_a1", 1, "yellow_cube"),
                                                       ("jpeg", "bridge_real_1_cleanup", 1, "green_cube")])
def test_a_good_plate_mask_in_a_soft_frame_is_not_flagged(shared_data, family, plate, seed, name):
    """A blurred or JPEG frame spreads the object's change past its outline; that is not a leak. These masks (IoU
    over 0.94) were flagged (0.48, 0.44) while the confidence counted the change outside the outline."""
    c = _case(shared_data, family, plate, seed, name)
    res = difference_layers(c.image, Prompt([c.click]), c.plate)
    assert iou(res.mask, c.mask) > 0.9 and res.confidence >= LOW_CONFIDENCE, res.confidence


def test_a_bad_thin_plate_mask_stays_flagged(shared_data):
    """A spoon (a thin blue handle, 131 px) whose plate mask runs on past its end (171 px, IoU 0.76): thin, so a
    pixel of its outline is much of it; flagged (0.02). (The spoon this test held first, seed 1 on open_drawer_c1,
    IoU 0.75 and flagged at 0.19, has a good mask since the clipped pixels left the noise statistics: 0.82.)"""
    c = _case(shared_data, "thin", "open_drawer_a2", 0, "spoon")
    res = difference_layers(c.image, Prompt([c.click]), c.plate)
    assert iou(res.mask, c.mask) < 0.8 and res.confidence < LOW_CONFIDENCE


@pytest.mark.parametrize("family, plate, name, bad", [("thin", "open_drawer_b1", "marker", True),
                                                      ("closeup", "open_drawer_a2", "apple", False)])
def test_one_click_confidence_from_moved_clicks(shared_data, family, plate, name, bad):
    """One click (seed 0): a marker whose mask is a piece of the table beside it (IoU 0.15) that one run calls sure
    (0.86), and an apple filling much of the image found whole (IoU 0.98) that one run calls unsure (0.09). Moved
    clicks find other masks for the first and the same for the second: the confidence says which to check."""
    c = _case(shared_data, family, plate, 0, name)
    own = segment_result(c.image, Prompt([c.click]))
    res = segment_result(c.image, Prompt([c.click]), moved_clicks=True)
    assert np.array_equal(res.mask, own.mask) and res.details["confidence_from"] == "moved clicks"
    assert res.details["own_confidence"] == round(own.confidence, 3)
    if bad:
        assert iou(res.mask, c.mask) < 0.5 and own.confidence >= LOW_CONFIDENCE > res.confidence
    else:
        assert iou(res.mask, c.mask) > 0.9 and own.confidence < LOW_CONFIDENCE <= res.confidence


def test_the_segment_stage_reports_the_moved_click_confidence(tmp_path, caplog):
    """Without a plate the stage's one-click masks get the moved clicks' confidence (and keep the backend's own in
    their details); a click where nothing differs from a plate (the background) keeps its own, unsure one."""
    from real2sim.capture import init_bundle
    from real2sim.segmentation.stage import segment_stage

    c = procedural_case(0, shadow=0.5)
    write_rgb(tmp_path / "frames" / "000.png", c.image)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    segment_stage(b, {"can": {"frame": 0, "prompt": Prompt([c.click])}})
    can = json.loads((b.root / "reports" / "segment.json").read_text())["entities"]["can"]
    assert can["mask_details"]["confidence_from"] == "moved clicks" and "own_confidence" in can["mask_details"]
    assert can["confidence"] >= LOW_CONFIDENCE
    write_rgb(b.path("capture/plate.png"), c.plate)
    b.manifest.capture.plate = "capture/plate.png"
    b.save()
    with caplog.at_level(logging.WARNING):
        segment_stage(b, {"table": {"frame": 0, "prompt": Prompt([(c.click[0], 2.0)]), "propagate": False}}, force=True)
    table = json.loads((b.root / "reports" / "segment.json").read_text())["entities"]["table"]
    assert "confidence_from" not in table["mask_details"] and table["low_confidence"]
    assert caplog.text.count("nothing differs from the plate") == 1
