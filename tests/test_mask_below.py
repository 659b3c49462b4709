"""One click on an object's top (a can's lid) gives the object: the top's mask is continued down to the side the
camera sees under it (:mod:`real2sim.segmentation.below`). Ground truth: the drawn shapes of a data-free scene and
the mask benchmark's rendered cans, never the function under test."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.demos.mask_cases import procedural_case
from real2sim.segmentation import Prompt, segment_result
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut_result


def _table_and_can_place(seed: int, h: int, w: int):
    """A mottled table ``(h, w, 3) float`` and where a can stands on it: ``(rng, image, (cx, top, width, body
    height, half width, lid's half height))``, the generator left where the scenes go on drawing from it."""
    rng = np.random.default_rng(seed)
    mottle = cv2.resize(rng.normal(0, 1, (h // 8, w // 8, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    img = mottle * 10 + np.array([150, 135, 115]) * rng.uniform(0.8, 1.1) + rng.normal(0, 2, (h, w, 3))
    cw = int(rng.uniform(0.08, 0.14) * w)
    ch, ew = int(cw * rng.uniform(1.2, 1.6)), cw / 2
    eh = ew * rng.uniform(0.35, 0.6)
    cx, top = int(rng.uniform(0.3, 0.7) * w), int(rng.uniform(0.25, 0.45) * h)
    return rng, img, (cx, top, cw, ch, ew, eh)


def _can_scene(seed: int, h: int = 256, w: int = 320):
    """A can seen from above at an angle on a mottled table: a pale elliptic lid over a shaded, saturated body with
    a round bottom, a soft shadow beside it. Returns the image, the can's mask, the lid's mask and a click on the
    lid."""
    rng, img, (cx, top, cw, ch, ew, eh) = _table_and_can_place(seed, h, w)
    body, lid, shadow = np.zeros((h, w), np.uint8), np.zeros((h, w), np.uint8), np.zeros((h, w), np.float32)
    cv2.rectangle(body, (int(cx - ew), top), (int(cx + ew), top + ch), 1, -1)
    cv2.ellipse(body, (cx, top + ch), (int(ew), int(eh)), 0, 0, 360, 1, -1)
    cv2.ellipse(lid, (cx, top), (int(ew), int(eh)), 0, 0, 360, 1, -1)
    cv2.ellipse(shadow, (int(cx + 0.6 * cw), int(top + ch + 0.3 * eh)), (int(1.1 * ew), int(1.2 * eh)), 0, 0, 360, 1, -1)
    img = img * (1 - 0.4 * cv2.GaussianBlur(shadow, (0, 0), 3)[..., None])
    colour = np.array([rng.uniform(120, 200), rng.uniform(10, 40), rng.uniform(20, 50)])[rng.permutation(3)]
    shade = np.clip(1.1 - 0.6 * np.abs((np.arange(w)[None, :, None] - cx + 0.3 * ew) / ew), 0.4, 1.1)
    img = np.where(body[..., None] > 0, colour * shade + rng.normal(0, 2, (h, w, 3)), img)
    img = np.where(lid[..., None] > 0, np.array([200, 200, 205]) * rng.uniform(0.85, 1.0) + rng.normal(0, 3, (h, w, 3)),
                   img)
    click = (cx + rng.uniform(-0.3, 0.3) * ew, float(top))
    return np.clip(img, 0, 255).astype(np.uint8), (body | lid) > 0, lid > 0, click


LID_ONLY = (0, 1, 3, 5, 6, 7)  # the scenes where one click found the lid alone before


def test_a_click_on_a_cans_lid_gives_the_can():
    """Without the step the mask of these six cans is the lid (IoU with the lid > 0.9, with the can < 0.3); with it
    the can (> 0.95), and the details say how much was added below."""
    for seed in LID_ONLY:
        image, can, lid, click = _can_scene(seed)
        top = grabcut_result(image, Prompt([click]), config=GrabCutConfig(below=False))
        assert iou(top.mask, lid) > 0.9 and iou(top.mask, can) < 0.3, seed
        res = grabcut_result(image, Prompt([click]))
        assert iou(res.mask, can) > 0.95, (seed, res.details)
        assert res.details["below_px"] > 0


def test_a_whole_object_is_not_continued_into_its_shadow_or_the_table():
    """Masks that already are the object (the procedural cylinders with a cast shadow beside and below them) are left
    as they are, pixel for pixel; a can clicked on its body is not taken into the table (at least as close to the
    can as without the step: seed 2's body mask, 0.92 of the can, is completed to 0.997)."""
    for seed in range(6):
        case = procedural_case(seed)
        off = grabcut_result(case.image, Prompt([case.click]), config=GrabCutConfig(below=False))
        on = grabcut_result(case.image, Prompt([case.click]))
        assert np.array_equal(on.mask, off.mask) and "below_px" not in on.details, seed
    for seed in (2, 4):  # clicks on the body
        image, can, _, click = _can_scene(seed)
        ys, xs = np.nonzero(can)
        body_click = (float(np.median(xs)), float(np.percentile(ys, 70)))
        off = grabcut_result(image, Prompt([body_click]), config=GrabCutConfig(below=False))
        on = grabcut_result(image, Prompt([body_click]))
        added_outside = np.count_nonzero(on.mask & ~off.mask & ~can)
        assert iou(on.mask, can) >= iou(off.mask, can) and added_outside <= 0.02 * can.sum(), seed


def test_rendered_cans_clicked_on_the_lid(shared_data):
    """Two cases of the mask benchmark where the click fell on the lid (seed 0: a coke can before a Google Robot's
    drawer, 0.21 before; seed 1: a 7up can, 0.36 before): now the can."""
    from real2sim.demos.mask_cases import mask_cases

    for seed, name in ((0, "base/open_drawer_a2/coke_can"), (1, "base/open_drawer_c0/7up_can")):
        case = {c.name: c for c in mask_cases(shared_data, ["base"], seed=seed)}.get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        res = segment_result(case.image, Prompt([case.click]))
        assert iou(res.mask, case.mask) > 0.9, (name, res.details)


def test_rendered_cans_clicked_on_the_body_take_their_lid(shared_data):
    """The other way round (:func:`real2sim.segmentation.below.whole_above`): a click on the body found the body
    without the lid over it (seed 1: a pepsi can at low contrast 0.58, a close coke can 0.61); now the can."""
    from real2sim.demos.mask_cases import mask_cases

    for family, name in (("lowcontrast", "lowcontrast/google_coke_can_real_eval_1/pepsi_can"),
                         ("closeup", "closeup/google_move_near_real_eval_1/coke_can")):
        case = {c.name: c for c in mask_cases(shared_data, [family], seed=1)}.get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        res = segment_result(case.image, Prompt([case.click]))
        assert iou(res.mask, case.mask) > 0.9, (name, res.details)
        assert res.details.get("above_px", 0) > 0


def _can_with_shaded_foot(seed: int, towel: bool = False, h: int = 256, w: int = 320):
    """A can on a mottled table whose lowest tenth is in shade (0.55 of its colour), and the mask a first cut
    would give of it: the lit part alone. ``towel``: the can stands on a towel of the shade's colour, wider than
    the can. Returns the image, the can's mask, the lit part's mask and a click on it."""
    rng, img, (cx, top, cw, ch, ew, eh) = _table_and_can_place(seed, h, w)
    can = np.zeros((h, w), np.uint8)
    cv2.rectangle(can, (int(cx - ew), top), (int(cx + ew), top + ch), 1, -1)
    for y in (top, top + ch):
        cv2.ellipse(can, (cx, y), (int(ew), int(eh)), 0, 0, 360, 1, -1)
    colour = np.array([rng.uniform(140, 200), rng.uniform(10, 40), rng.uniform(20, 50)])[rng.permutation(3)]
    rows = np.arange(h)[:, None]
    lit = rows <= top + int(0.9 * ch)
    if towel:
        cloth = np.zeros((h, w), np.uint8)
        cv2.rectangle(cloth, (int(cx - 2.5 * ew), top + int(0.8 * ch)), (int(cx + 2.5 * ew), top + ch + int(3 * eh)), 1, -1)
        img = np.where(cloth[..., None] > 0, colour * 0.55 + rng.normal(0, 2, (h, w, 3)), img)
    body = colour * np.where(lit, 1.0, 0.55)[..., None] + rng.normal(0, 2, (h, w, 3))
    img = np.where(can[..., None] > 0, body, img)
    return np.clip(img, 0, 255).astype(np.uint8), can > 0, (can > 0) & lit, (float(cx), float(top + 0.3 * ch))


def test_a_mask_that_left_a_shaded_foot_out_is_completed_but_not_into_a_towel():
    """:func:`real2sim.segmentation.below.whole_around`: the lit part of a can (0.80-0.83 of it) is completed to the
    can (> 0.98) where no side was found, and named so; standing on a towel of the shade's colour, wider than the
    can, the cut's whole is no completion (wider, not convex) and nothing is added."""
    from real2sim.segmentation.below import whole_around

    for seed in range(4):
        image, can, lit, click = _can_with_shaded_foot(seed)
        assert iou(lit, can) < 0.85
        whole, key = whole_around(image, lit, [click])
        assert key == "completed_px" and iou(whole, can) > 0.98, seed
        image, can, lit, click = _can_with_shaded_foot(seed, towel=True)
        whole, _ = whole_around(image, lit, [click])
        assert whole is None, seed


def test_rendered_objects_whose_first_mask_left_a_part_out_are_completed(shared_data):
    """Two cases of the mask benchmark where the picked mask left a shaded part out and no side was found (seed 0:
    a lit apple, 0.86 before; seed 1: a 7up can at 320x256, 0.91 before): now the object, completed."""
    from real2sim.demos.mask_cases import mask_cases

    for seed, family, name in ((0, "exposure", "exposure/open_drawer_c2/apple"),
                               (1, "lowres", "lowres/bridge_real_1_cleanup/7up_can")):
        case = {c.name: c for c in mask_cases(shared_data, [family], seed=seed)}.get(name)
        if case is None:
            pytest.skip(f"{name} needs plates and meshes that are not in the shared data")
        res = segment_result(case.image, Prompt([case.click]))
        assert iou(res.mask, case.mask) > 0.95, (name, res.details)
        assert res.details.get("completed_px", 0) > 0
