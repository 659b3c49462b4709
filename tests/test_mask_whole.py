"""One click on an object in front of the camera (a can filling 55-70 % of the image's height): every usual box is
smaller than the object, so the mask found is a part of it (the lid, confidently); a wide context box's mask that
holds it, is compact and outlined replaces it. Ground truth: the drawn shapes of a data-free scene and the rendered
silhouette of a benchmark case, never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_case
from real2sim.segmentation import Prompt, segment_result
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result

NO_WHOLE = GrabCutConfig(whole_scales=(), below=False)  # (the step below would find the can from the lid too)


def _can_in_front(seed: int, h: int = 256, w: int = 320):
    """A red can 55-70 % of the image's height on a mottled floor, its grey lid an ellipse on top; the click on the
    lid's middle. Returns (image, can mask, click)."""
    rng = np.random.default_rng(seed)
    mottle = cv2.resize(rng.normal(0, 1, (h // 8, w // 8, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    floor = mottle * 14 + np.array([150, 140, 125]) * rng.uniform(0.8, 1.1) + rng.normal(0, 3, (h, w, 3))
    ch = rng.uniform(0.55, 0.7) * h
    cw = ch * rng.uniform(0.5, 0.6)
    cx, top = w * rng.uniform(0.4, 0.6), h * rng.uniform(0.12, 0.2)
    lid_h = cw * 0.35
    can = np.zeros((h, w), np.uint8)
    cv2.rectangle(can, (int(cx - cw / 2), int(top + lid_h / 2)), (int(cx + cw / 2), int(top + ch - lid_h / 2)), 1, -1)
    cv2.ellipse(can, (int(cx), int(top + ch - lid_h / 2)), (int(cw / 2), int(lid_h / 2)), 0, 0, 360, 1, -1)
    lid = np.zeros((h, w), np.uint8)
    cv2.ellipse(lid, (int(cx), int(top + lid_h / 2)), (int(cw / 2), int(lid_h / 2)), 0, 0, 360, 1, -1)
    xx = np.mgrid[0:h, 0:w][1]
    shade = (1 - 0.35 * ((xx - cx) / (cw / 2)) ** 2)[..., None]
    body = np.array([170, 30, 35]) * rng.uniform(0.8, 1.1) * shade + rng.normal(0, 3, (h, w, 3))
    grey = np.array([185, 185, 190]) * rng.uniform(0.85, 1.05) + rng.normal(0, 4, (h, w, 3))
    image = np.where(lid[..., None] > 0, grey, np.where(can[..., None] > 0, body, floor))
    return np.clip(image, 0, 255).astype(np.uint8), (can | lid) > 0, (cx, top + lid_h / 2)


def _scaled(image: np.ndarray, truth: np.ndarray, click, f: float):
    """The scene resampled by ``f`` (a camera of another resolution)."""
    if f == 1.0:
        return image, truth, click
    h, w = int(image.shape[0] * f), int(image.shape[1] * f)
    image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA if f < 1 else cv2.INTER_CUBIC)
    return image, cv2.resize(truth.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0, (click[0] * f, click[1] * f)


@pytest.mark.parametrize("seed, scale", [(0, 1.0), (1, 1.0), (4, 0.5), (6, 2.0)])
def test_a_click_on_the_lid_of_a_can_in_front_of_the_camera_gives_the_can(seed, scale):
    """Without the wide box the mask is the lid (IoU < 0.25, most at confidence >= 0.9); with it the can (> 0.95),
    ``details["picked"]`` saying so; at 160x128, 320x256 and 640x512 alike."""
    image, truth, click = _scaled(*_can_in_front(seed), scale)
    lid = grabcut_result(image, Prompt([click]), config=NO_WHOLE)
    assert iou(lid.mask, truth) < 0.25, lid.details
    res = segment_result(image, Prompt([click]))
    assert iou(res.mask, truth) > 0.95, res.details
    assert res.details["picked"] == "whole around"
    assert res.details["part_px"] == int(lid.mask.sum())


def test_a_whole_object_is_never_replaced():
    """Cans standing alone, large enough in the image that the wide box is tried: the mask is the one found without
    it, pixel for pixel (the box's mask is the same can: it does not hold the mask as a whole holds a part)."""
    tried = 0
    for seed in range(4):
        case = procedural_case(seed)
        res = grabcut_result(case.image, Prompt([case.click]))
        plain = grabcut_result(case.image, Prompt([case.click]), config=NO_WHOLE)
        tried += plain.mask.mean() >= GrabCutConfig().whole_min_frac
        assert res.details["picked"] != "whole around", (seed, res.details)
        assert np.array_equal(res.mask, plain.mask), seed
    assert tried >= 3  # the wide box was tried, not skipped


def test_a_can_on_its_support_is_no_worse_with_the_wide_box():
    """Cans on a towel, a plaid or a dotted cloth (12 scenes): where the wide box takes the can with its support the
    support split cuts the support off again, so the masks are as good as without the box on the whole (measured
    before the step was kept to sure masks: mean 0.851 -> 0.870, one towel 0.94 -> 0.89, one dotted cloth
    0.61 -> 0.89; since then none of the 12 changes)."""
    with_box, without = [], []
    for seed in range(4):
        for support in ("towel", "plaid", "dots"):
            case = procedural_case(seed, support=support)
            with_box.append(iou(grabcut_result(case.image, Prompt([case.click])).mask, case.mask))
            without.append(iou(grabcut_result(case.image, Prompt([case.click]), config=NO_WHOLE).mask, case.mask))
    assert np.mean(with_box) >= np.mean(without) - 0.005, (with_box, without)
    assert min(a - b for a, b in zip(with_box, without)) > -0.06, (with_box, without)


@pytest.mark.parametrize("plate, name, before", [("open_drawer_b0", "7up_can", 0.38)])
def test_a_rendered_object_close_to_a_real_camera(shared_data, plate, name, before):
    """Benchmark cases (``closeup`` family, seed 0): an object rendered into a real plate, 45-75 % of the image's
    height. A 7up can clicked on its side: the usual boxes give its green label (IoU 0.38), confidently; the wide box
    gives the can."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, "closeup", plate, seed=0)
    if c is None:
        pytest.skip(f"the {plate} plate or a benchmark mesh is missing from the shared data")
    assert c.name == f"closeup/{plate}/{name}"
    assert iou(grabcut_result(c.image, Prompt([c.click]), config=NO_WHOLE).mask, c.mask) < before + 0.05
    res = segment_result(c.image, Prompt([c.click]))
    assert iou(res.mask, c.mask) > 0.9, res.details


def test_an_object_beside_a_neighbour_is_not_a_part_of_the_two(shared_data):
    """A case of the mask benchmark where the object and the neighbour beside it (a yellow cube and a tile of a
    board) made one compact mask that held the object's: the object counted as its part and lost to it (0.17),
    though the two together tell themselves from their ring far less than the object does. A part needs a holder
    that stands apart as a whole does (``GrabCutConfig.part_separation``)."""
    from real2sim.demos.mask_cases import mask_cases

    for seed, family, name in ((0, "textured", "textured/open_drawer_a1/yellow_cube"),):
        case = {c.name: c for c in mask_cases(shared_data, [family], seed=seed)}.get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        res = grabcut_result(case.image, Prompt([case.click]))
        before = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(part_separation=False))
        assert iou(before.mask, case.mask) < 0.5, "the case no longer shows the failure"
        assert iou(res.mask, case.mask) > 0.9, (name, res.details)


def test_an_object_every_generator_found_is_not_a_part(shared_data):
    """A case of the mask benchmark where the boxes' sizes, the colour region and the smallest context box all found
    a green cube standing beside a can, and the larger context boxes' cube with the can's label beside it held
    them: the cube counted as its part and lost to it (0.45). A candidate every generator found is never a part
    (``GrabCutConfig.found_by_all_iou``)."""
    from real2sim.demos.mask_cases import mask_cases

    name = "base/bridge_real_1_cleanup/green_cube"
    case = {c.name: c for c in mask_cases(shared_data, ["base"], seed=2)}.get(name)
    if case is None:
        pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
    before = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(found_by_all_iou=0.0))
    assert iou(before.mask, case.mask) < 0.6, "the case no longer shows the failure"
    res = grabcut_result(case.image, Prompt([case.click]))
    assert iou(res.mask, case.mask) > 0.9, res.details


def _fixed_by_the_rule(case, without: GrabCutConfig, before_under: float, now_over: float):
    """A benchmark ``case`` fails with the rule off (``without``: IoU under ``before_under``) and holds with the
    defaults (over ``now_over``); returns the defaults' result."""
    before = grabcut_result(case.image, Prompt([case.click]), config=without)
    assert iou(before.mask, case.mask) < before_under, "the case no longer shows the failure"
    res = segment_result(case.image, Prompt([case.click]))
    assert iou(res.mask, case.mask) > now_over, res.details
    return res


def test_an_unsure_face_of_a_cube_in_front_of_the_camera_gives_the_cube(shared_data):
    """A benchmark case (``closeup``, seed 2) where the usual boxes found one face of a green cube, unsure (0.47):
    the wide box is then tried too, and its cube replaces the face because the face's outline lies on the cube's
    (a part meets its object's outline; a box lying on a scanning board, also unsure, lies inside the board's: the
    scan tests keep that one). Without the rule the face stays (0.43)."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, "closeup", "open_drawer_a0", seed=2)
    if c is None:
        pytest.skip("the open_drawer_a0 plate or a benchmark mesh is missing from the shared data")
    assert c.name == "closeup/open_drawer_a0/green_cube"
    res = _fixed_by_the_rule(c, GrabCutConfig(whole_shared_outline=0.0), before_under=0.5, now_over=0.95)
    assert res.details["picked"] == "whole around"


@pytest.mark.parametrize("plate,seed", [("open_drawer_a2", 0), ("open_drawer_b0", 2)])
def test_a_click_on_a_highlight_of_a_close_up_object_gives_the_object(shared_data, plate, seed):
    """Benchmark cases (``closeup``) where the usual boxes found an unsure part with no outline of its own (the lit
    patch of an apple, a speck of a 7up can's label) whose outline does not lie on the object's: the part spreads
    over the object to its outline without crossing an edge, so the wide box's mask (the 0.4 box, or the 0.6 one)
    replaces it. A speck on a can standing on a scanning board meets the can's outline first, so the board does
    not replace it (the scan tests keep that). Without the rule the part stays (0.09 and 0.01)."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, "closeup", plate, seed=seed)
    if c is None:
        pytest.skip(f"the {plate} plate or a benchmark mesh is missing from the shared data")
    res = _fixed_by_the_rule(c, GrabCutConfig(whole_plain_edge=0.0), before_under=0.3, now_over=0.75)
    assert res.details["picked"] == "whole around" and res.confidence < 0.5


def test_a_sure_object_on_a_table_is_not_a_part_of_the_table(shared_data):
    """A benchmark case (``camera``, seed 2: the Google overlay recorded with another camera's white balance and
    tone) where the apple's mask is sure and just over ``whole_min_frac`` of the image, so the wide box is tried;
    its mask is the table top the apple lies on, 20x the apple, compact, outlined and holding it. A sure mask is a
    whole or a large part of one (a lid, a label, a face: a fifth of it or more, ``max_growth``); one many times
    smaller is an object on what the box found (before: the table, IoU 0.05)."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, "camera", "google_move_near_real_eval_1", seed=2)
    if c is None:
        pytest.skip("the google_move_near_real_eval_1 plate or a benchmark mesh is missing from the shared data")
    assert c.name == "camera/google_move_near_real_eval_1/apple"
    res = segment_result(c.image, Prompt([c.click]))
    assert iou(res.mask, c.mask) > 0.95, res.details
    assert res.details["picked"] != "whole around"
