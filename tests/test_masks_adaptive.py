"""Masks that adapt to the image: noise-estimated thresholds, shadow split, hysteresis from the click, one click
without a plate, confidences and warnings, bad frames. Ground truth: procedural cases whose object, shadow and
plate are generated (``real2sim.demos.mask_cases.procedural_case``), never the function under test."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.core.imaging import write_rgb
from real2sim.demos.mask_cases import procedural_case, procedural_plate
from real2sim.segmentation import (
    BACKENDS,
    Prompt,
    SegmentationError,
    change_maps,
    difference_layers,
    segment,
    segment_result,
)
from real2sim.segmentation.core import resolve_backend


def test_threshold_follows_the_frame_noise_and_the_mask_stays():
    clean = procedural_case(3, noise=1.0)
    noisy = procedural_case(3, noise=8.0)
    assert (clean.mask == noisy.mask).all()  # same object, same plate; only the sensor noise differs
    s_clean = change_maps(clean.image, clean.plate).sigma
    s_noisy = change_maps(noisy.image, noisy.plate).sigma
    assert s_noisy > 1.5 * s_clean, (s_clean, s_noisy)  # the threshold (k sigma) follows the noise
    m_clean = difference_layers(clean.image, Prompt([clean.click]), clean.plate).mask
    m_noisy = difference_layers(noisy.image, Prompt([noisy.click]), noisy.plate).mask
    assert iou(m_clean, clean.mask) > 0.9 and iou(m_noisy, noisy.mask) > 0.85
    assert iou(m_clean, m_noisy) > 0.85


def test_low_contrast_half_joins_the_high_contrast_half():
    rng = np.random.default_rng(5)
    plate = procedural_plate(240, 320, rng)
    img = plate.astype(np.float32)
    gt = np.zeros((240, 320), bool)
    gt[80:170, 120:200] = True
    left, right = gt.copy(), gt.copy()
    left[:, 160:] = False
    right[:, :160] = False
    img[left] = (200, 40, 40)  # strong red half
    img[right] = plate[right].mean(0) + (14, -8, -8)  # the same object's half in the table's colour, slightly red
    img = np.clip(img + rng.normal(0, 1.5, img.shape), 0, 255).astype(np.uint8)
    m = difference_layers(img, Prompt([(140, 120)]), plate).mask  # clicked on the strong half
    assert (m & right).sum() > 0.85 * right.sum(), (m & right).sum() / right.sum()
    assert iou(m, gt) > 0.9, iou(m, gt)
    # the old fixed Lab threshold (30) misses that half: the improvement is real
    from real2sim.segmentation.colour import lab_image

    d = np.linalg.norm(lab_image(img) - lab_image(plate), axis=-1)
    assert (d[right] > 30).mean() < 0.2


def test_shadow_goes_to_the_shadow_mask_not_the_object():
    for seed, colour in ((0, (0.8, 0.15, 0.1)), (1, (0.1, 0.3, 0.8)), (2, (0.85, 0.75, 0.1))):
        c = procedural_case(seed, shadow=0.5, colour=colour)
        assert c.shadow.sum() > 100
        res = difference_layers(c.image, Prompt([c.click]), c.plate)
        assert iou(res.mask, c.mask) > 0.9, (seed, iou(res.mask, c.mask))
        assert (res.mask & c.shadow).sum() < 0.1 * c.shadow.sum(), seed  # at most the contact line
        assert (res.shadow & c.shadow).sum() > 0.6 * c.shadow.sum(), seed
        assert not (res.shadow & res.mask).any()


def _can_lit_from_the_left(seed: int):
    """A red can on a brown table lit from the left: its right half in the table's own colour, darker (it reads
    as shadow pixel by pixel), its shadow cast to the right. ``(image, plate, can mask)``."""
    import cv2

    rng = np.random.default_rng(seed)
    h, w = 256, 320
    yy, xx = np.mgrid[0:h, 0:w]
    plate = np.array([150, 112, 84], float) * (1 + 0.06 * np.sin(xx / 9.0 + 0.3 * np.sin(yy / 13.0))
                                               + 0.03 * np.sin(yy / 5.0))[..., None]
    can = np.zeros((h, w), np.uint8)
    cv2.ellipse(can, (160, 100), (22, 8), 0, 0, 360, 1, -1)
    cv2.ellipse(can, (160, 190), (22, 8), 0, 0, 360, 1, -1)
    can[100:190, 138:183] = 1
    can = can > 0
    cast = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(cast, np.array([[160, 196], [182, 196], [240, 225], [205, 225]], np.int32), 1)
    img = plate.copy()
    img[(cast > 0) & ~can] *= 0.6
    lit = np.array([140.0, 60.0, 50.0]) * (0.5 + 0.5 * np.clip((183 - xx) / 45.0, 0, 1))[..., None]
    turn = np.clip((xx - 150) / 15.0, 0, 1)[..., None]  # past the middle: the table's colour at 55 %
    img[can] = (lit * (1 - 0.9 * turn) + 0.9 * turn * 0.55 * plate)[can]
    img = cv2.GaussianBlur(img, (0, 0), 0.7) + rng.normal(0, 3.0, img.shape)
    noisy_plate = plate + rng.normal(0, 3.0, plate.shape)
    return (np.clip(img, 0, 255).astype(np.uint8), np.clip(noisy_plate, 0, 255).astype(np.uint8), can)


def test_the_dark_side_of_an_object_joins_by_its_colour():
    from real2sim.segmentation.difference import DifferenceConfig

    ious, without = [], []
    for seed in range(3):
        img, plate, can = _can_lit_from_the_left(seed)
        click = Prompt([(148, 150)])  # on the lit half
        ious.append(iou(difference_layers(img, click, plate).mask, can))
        without.append(iou(difference_layers(img, click, plate, DifferenceConfig(colour_iterations=0, one_click_share=0.0)).mask, can))
    # the change maps alone take the lit half (the dark half is darkening at the table's colour, as a shadow is)
    assert max(without) < 0.6, without
    assert np.mean(ious) > 0.9 and min(ious) > 0.8, ious


def _plate_edited_by_hand(c, margin: int) -> np.ndarray:
    """The frame of case ``c`` with its object and shadow cloned over from beside them, ``margin`` px around (as
    a person removes an object from a photo): identical to the frame everywhere else."""
    from real2sim.core.imaging import dilate

    edit = dilate(c.mask | c.shadow, margin)
    xs = np.nonzero(edit)[1]
    span = xs.max() - xs.min() + 8
    shift = span if xs.max() + span < c.image.shape[1] else -span
    plate = c.image.copy()
    plate[edit] = np.roll(c.image, -shift, axis=1)[edit]
    return plate


def test_a_plate_made_from_the_frame_by_hand_gives_the_object_not_the_edit():
    ious, notes = [], []
    for seed in range(4):
        for surface in (None, "wood"):
            c = procedural_case(seed, noise=2.0, surface=surface)
            res = difference_layers(c.image, Prompt([c.click]), _plate_edited_by_hand(c, 6))
            ious.append(iou(res.mask, c.mask))
            notes.append(res.details.get("note", ""))
            assert (res.mask & c.shadow).sum() < 0.05 * c.shadow.sum(), (seed, surface)  # the shadow stays out
            assert iou(res.shadow, c.shadow) > 0.3, (seed, surface, iou(res.shadow, c.shadow))
    # before: the cloned margin differs from the frame as much as the object does (IoU 0.53-0.67)
    assert np.mean(ious) > 0.95 and min(ious) > 0.85, np.round(ious, 3)
    assert all("removed by hand" in n for n in notes), notes


def _clipped_beside(c, value: int):
    """Frame and plate of case ``c`` with the half of the image away from the object and its shadow clipped to
    ``value`` in both (a black cabinet, a blown-out window): identical there without any copy."""
    xs = np.nonzero(c.mask | c.shadow)[1]
    w = c.mask.shape[1]
    side = np.zeros(c.mask.shape, bool)
    if xs.min() > w - xs.max():
        side[:, : xs.min() - 10] = True
    else:
        side[:, xs.max() + 10:] = True
    image, plate = c.image.copy(), c.plate.copy()
    image[side] = value
    plate[side] = value
    return image, plate


@pytest.mark.parametrize("value", [0, 255])
def test_clipped_pixels_are_neither_a_copy_nor_the_noise(value):
    """Half the frame black (or white) in frame and plate alike: not taken for a plate made from the frame by hand
    (0.55-0.64 of the pixels are identical), and its zero difference does not set the noise, the shadow's texture
    or its pooled statistics (before: the shadow IoU fell from 0.85-0.90 to 0.10-0.75 and joined the mask)."""
    for seed in range(4):
        c = procedural_case(seed, noise=2.0)
        image, plate = _clipped_beside(c, value)
        assert change_maps(image, plate).copied is None, seed
        res = difference_layers(image, Prompt([c.click]), plate)
        assert "removed by hand" not in res.details.get("note", ""), seed
        assert iou(res.mask, c.mask) > 0.97, (seed, iou(res.mask, c.mask))
        assert iou(res.shadow, c.shadow) > 0.8, (seed, iou(res.shadow, c.shadow))
        # the same frame with its object removed by hand is still known as such
        c.image[:] = image
        res = difference_layers(image, Prompt([c.click]), _plate_edited_by_hand(c, 6))
        assert "removed by hand" in res.details.get("note", ""), seed


def _lit_beside(c) -> np.ndarray:
    """``(h, w) bool``: the table of case ``c`` from the object's middle rightwards, from a little over its top to
    its foot, less the object and its shadow (a lit patch the object stands against)."""
    h, w = c.mask.shape
    ys, xs = np.nonzero(c.mask)
    lit = np.zeros((h, w), bool)
    lit[max(0, ys.min() - h // 8): ys.max(), (xs.min() + xs.max()) // 2:] = True
    return lit & ~c.mask & ~c.shadow


def _lit_patch_scene(c, rng, light, spread: float, gain: float):
    """Frame and plate of case ``c`` with the patch :func:`_lit_beside` at the level ``light`` (``(3,)``, may pass
    255: a window) with a texture of ``spread`` levels in both, the frame (its own sensor noise there) then taken
    at ``gain`` times the exposure; both clipped to 0-255 as a sensor would."""
    h, w = c.mask.shape
    lit = _lit_beside(c)
    patch = np.asarray(light, np.float64) + rng.normal(0, spread, (h, w, 1))
    plate, image = c.plate.astype(np.float64), c.image.astype(np.float64)
    plate[lit] = patch[lit]
    image[lit] = patch[lit] + rng.normal(0, 1.5, (int(lit.sum()), 3))
    frame = np.clip(image * gain, 0, 255).round().astype(np.uint8)
    return frame, np.clip(plate, 0, 255).round().astype(np.uint8), lit


def test_a_brighter_frame_whose_table_clips_is_not_a_change_there():
    """The plate brought to a brighter frame's exposure predicts more than 255 on a bright table; the frame reads
    255 there (the sensor clips). Read as 255, the prediction matches; read beyond it, the clipped red was a change
    joined to the object (before: IoU 0.12-0.35 at confidence 0.86-0.90 on half these scenes, found on the mask
    benchmark's held-out seed 5: a 7up can by the Bridge table 0.35)."""
    scores = []
    for seed in range(6):
        c = procedural_case(seed)  # a warm, bright table (R about 214): its red clips in the frame only
        frame, plate, _ = _lit_patch_scene(c, np.random.default_rng(100 + seed), (214.0, 150.0, 108.0), 4, 1.25)
        assert (frame == 255).any(-1).mean() > 0.1, seed  # the scene does clip
        res = difference_layers(frame, Prompt([c.click]), plate)
        scores.append(iou(res.mask, c.mask))
        assert scores[-1] > 0.85 and res.confidence > 0.5, (seed, scores[-1], res.confidence)
    assert np.mean(scores) > 0.95, scores


def test_a_darker_frame_shows_what_the_plate_clipped_and_that_is_no_change():
    """A window (beyond the sensor's range) beside the object clips at 255 in the plate; a frame taken at 0.75x the
    light shows it at about 210-225. The plate there says only "at least 255": brought to the frame's exposure it
    predicts 191, and read as that, the window was a change joined to the object (before: IoU 0.12-0.35 at
    confidence 0.97-0.98 on all six scenes)."""
    scores = []
    for seed in range(6):
        c = procedural_case(seed)
        frame, plate, lit = _lit_patch_scene(c, np.random.default_rng(200 + seed), (300.0, 285.0, 270.0), 6, 0.75)
        assert (plate == 255).any(-1).mean() > 0.1 and (frame[lit] < 250).all(-1).mean() > 0.9, seed
        res = difference_layers(frame, Prompt([c.click]), plate)
        scores.append(iou(res.mask, c.mask))
        assert scores[-1] > 0.85, (seed, scores[-1], res.confidence)
    assert np.mean(scores) > 0.95, scores


def test_one_click_without_plate_small_synthetic_set():
    scores = []
    for seed, size in ((0, (240, 320)), (1, (256, 320)), (2, (480, 640)), (4, (720, 1280))):
        c = procedural_case(seed, size=size)
        scores.append(iou(segment(c.image, Prompt([c.click])), c.mask))
    assert np.mean(scores) >= 0.85 and min(scores) > 0.7, scores


def _edge_click(mask):
    ys, xs = np.nonzero(mask)
    i = int(np.argmin(ys))  # the topmost pixel of the object: on its outline
    return float(xs[i]), float(ys[i]) - 3.0  # just above it, on the table


def test_confidence_is_lower_for_a_bad_click():
    for seed in (0, 2):
        c = procedural_case(seed)
        good = segment_result(c.image, Prompt([c.click]))
        bad = segment_result(c.image, Prompt([_edge_click(c.mask)]))
        assert good.confidence > bad.confidence, (seed, good.confidence, bad.confidence)
        assert iou(good.mask, c.mask) > iou(bad.mask, c.mask)


def test_click_on_background_warns(caplog):
    c = procedural_case(1)
    ys, xs = np.nonzero(~c.mask & ~c.shadow)
    far = np.argmax(np.abs(xs - c.click[0]) + np.abs(ys - c.click[1]))
    with caplog.at_level(logging.WARNING, logger="real2sim.segmentation.core"):
        segment(c.image, Prompt([(xs[far], ys[far])]), plate=c.plate, name="frame 7, entity 'can'")
    text = caplog.text
    assert "background" in text and "frame 7" in text, text


def test_black_and_saturated_frames_are_refused_naming_the_frame():
    img = np.zeros((120, 160, 3), np.uint8)
    with pytest.raises(SegmentationError, match="frame 3.*all black"):
        segment(img, Prompt([(50, 50)]), name="frame 3")
    with pytest.raises(SegmentationError, match="frame 4.*saturated"):
        segment(np.full((120, 160, 3), 255, np.uint8), Prompt([(50, 50)]), name="frame 4")


def test_stage_records_confidence_and_shadow_and_refuses_mixed_sizes(tmp_path, caplog):
    from real2sim.capture import init_bundle
    from real2sim.core.bundle import Bundle
    from real2sim.segmentation.stage import segment_stage

    c = procedural_case(0, shadow=0.5)
    for i in range(2):
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", c.image)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    write_rgb(b.path("capture/plate.png"), c.plate)
    b.manifest.capture.plate = "capture/plate.png"
    b.save()
    bad = (c.click[0], 2.0)  # on the table, far above the object
    with caplog.at_level(logging.WARNING):
        segment_stage(b, {"can": {"frame": 0, "prompt": Prompt([c.click])},
                          "table": {"frame": 0, "prompt": Prompt([bad]), "propagate": False}})
    rep = json.loads((b.root / "reports" / "segment.json").read_text())
    can = rep["entities"]["can"]
    assert can["confidence"] > 0.5 and not can["low_confidence"]
    assert rep["entities"]["table"]["low_confidence"] and rep["low_confidence"] == ["table"]
    assert "entity 'table'" in caplog.text and "frame 0" in caplog.text
    from real2sim.core.imaging import read_mask

    b = Bundle.load(b.root)
    m = read_mask(b.path(b.manifest.capture.masks["000000"]["can"]))
    assert iou(m, c.mask) > 0.9
    sh = read_mask(b.path(can["shadow_mask"]))
    assert (sh & c.shadow).sum() > 0.5 * c.shadow.sum() and not (sh & m).any()
    # a frame of another size: an error naming it; the masks already there stay
    write_rgb(b.path(b.manifest.capture.frames[1].image), c.image[:200])
    with pytest.raises(SegmentationError, match="frame 1.*same size"):
        segment_stage(b, {"can": {"frame": 0, "prompt": Prompt([c.click])}}, force=True)
    assert b.path(b.manifest.capture.masks["000000"]["can"]).is_file()


def test_auto_uses_sam_when_a_checkpoint_is_configured(tmp_path, monkeypatch):
    pytest.importorskip("segment_anything")
    from test_segmentation import tiny_sam

    from real2sim.segmentation import SamBackend

    monkeypatch.delenv("REAL2SIM_SAM_CHECKPOINT", raising=False)
    assert resolve_backend("auto", None) == "grabcut"
    ck = tmp_path / "sam.pth"
    ck.write_bytes(b"weights")
    monkeypatch.setenv("REAL2SIM_SAM_CHECKPOINT", str(ck))
    assert resolve_backend("auto", None) == "sam"
    assert resolve_backend("auto", np.zeros((2, 2, 3), np.uint8)) == "difference"  # a plate still wins
    c = procedural_case(0)
    model = tiny_sam()
    monkeypatch.setitem(BACKENDS, "sam", SamBackend(model=model))
    res = segment_result(c.image, Prompt([c.click]))
    assert res.backend == "sam"
    assert (res.mask == SamBackend(model=model)(c.image, Prompt([c.click]))).all()  # SAM's mask, not another's


def test_misregistered_plate_band_along_an_edge_stays_out_of_the_mask():
    """A person-made plate whose table edge is 10 px off (the Bridge cube photo's plate is): the band of table the
    frame shows where the plate has wall must not join an object that touches the edge; a sub-pixel misregistration
    of the whole plate must not change the mask either."""
    rng = np.random.default_rng(11)
    h, w = 240, 320
    table = procedural_plate(h, w, rng).astype(np.float32) * [1.1, 0.7, 0.45]  # orange wood
    wall = np.full((h, w, 3), 105.0) + rng.normal(0, 3, (h, w, 3))  # grey wall
    rows = np.arange(h)[:, None, None]
    plate = np.where(rows < 90, wall, table)
    frame = np.where(rows < 80, wall, table)  # the frame's table edge is 10 px higher: a band of table over wall
    gt = np.zeros((h, w), bool)
    gt[82:130, 140:190] = True  # a yellow cube touching the band
    frame[gt] = (225, 200, 80)
    plate = np.clip(plate, 0, 255).astype(np.uint8)
    frame = np.clip(frame + rng.normal(0, 1.5, frame.shape), 0, 255).astype(np.uint8)
    m = difference_layers(frame, Prompt([(165.0, 110.0)]), plate).mask
    band = np.zeros((h, w), bool)
    band[80:90] = True
    band[:, 130:200] = False
    assert iou(m, gt) > 0.9, iou(m, gt)
    assert (m & band).sum() < 0.05 * band.sum(), (m & band).sum()
    shifted = np.roll(plate, (1, 1), axis=(0, 1))  # and the whole plate 1 px off too
    m2 = difference_layers(frame, Prompt([(165.0, 110.0)]), shifted).mask
    assert iou(m2, gt) > 0.85 and (m2 & band).sum() < 0.05 * band.sum(), (iou(m2, gt), (m2 & band).sum())


def test_outline_of_a_blurred_frame_is_at_half_contrast():
    """A frame blurred by sigma 1.8 px (motion, focus) against a sharp plate: change starts a blur's width outside
    the object; the outline must still be where the object covers half the pixel (the generated ground truth)."""
    import cv2

    from real2sim.segmentation import DifferenceConfig

    ours, plain = [], []
    for seed in (0, 1, 3):
        c = procedural_case(seed, size=(240, 320))
        img = cv2.GaussianBlur(c.image, (0, 0), 1.8)
        ours.append(iou(difference_layers(img, Prompt([c.click]), c.plate).mask, c.mask))
        plain.append(iou(difference_layers(img, Prompt([c.click]), c.plate, DifferenceConfig(refine=False)).mask,
                         c.mask))
    assert min(ours) > 0.92, ours
    assert np.mean(ours) > np.mean(plain) + 0.05, (ours, plain)  # the threshold alone puts it outside


def _can_with_lid(seed: int, size=(240, 320)):
    """A can seen from above at an angle on a procedural table: a shaded dark-red body under a bright grey elliptical
    lid. Returns (image, whole-can truth, lid truth, a click at the lid's centre)."""
    import cv2

    rng = np.random.default_rng(seed)
    h, w = size
    img = procedural_plate(h, w, rng).astype(np.float32)
    cw = int(rng.uniform(0.09, 0.12) * w)
    ch, lid_h = int(rng.uniform(1.5, 1.8) * cw), int(0.6 * cw)
    x0, y0 = int(rng.uniform(0.3, 0.6) * w), int(rng.uniform(0.3, 0.5) * h)
    can = np.zeros((h, w), np.uint8)
    cv2.rectangle(can, (x0, y0 + lid_h // 2), (x0 + cw, y0 + ch), 1, -1)
    cv2.ellipse(can, (x0 + cw // 2, y0 + ch), (cw // 2, lid_h // 2), 0, 0, 180, 1, -1)
    lid = np.zeros((h, w), np.uint8)
    cv2.ellipse(lid, (x0 + cw // 2, y0 + lid_h // 2), (cw // 2, lid_h // 2), 0, 0, 360, 1, -1)
    lid = lid.astype(bool)
    body = can.astype(bool) & ~lid
    u = (np.arange(w) - x0) / cw
    shade = np.clip(0.6 + 0.5 * np.cos(np.clip(u * 2.5 - 0.8, -np.pi / 2, np.pi / 2)), 0.3, 1.1)[None, :, None]
    img = np.where(body[..., None], np.array([150, 25, 30], np.float32) * shade, img)
    img[lid] = [185, 185, 190]
    img = np.clip(img + rng.normal(0, 1.5, img.shape), 0, 255).astype(np.uint8)
    ys, xs = np.nonzero(lid)
    return img, body | lid, lid, (float(xs.mean()), float(ys.mean()))


@pytest.mark.parametrize("size", [(240, 320), (480, 640)])
def test_click_on_a_lid_gives_the_can_not_the_lid(size):
    for seed in (0, 1, 2):
        img, can, lid, click = _can_with_lid(seed, size)
        res = segment_result(img, Prompt([click]), backend="grabcut")
        assert iou(res.mask, can) > 0.85, (seed, iou(res.mask, can), iou(res.mask, lid), res.details)


@pytest.mark.parametrize("kind", ["jpeg", "blur"])
def test_outline_by_unmixing_holds_under_compression_and_blur(kind):
    """JPEG ringing and blur widen the change band beyond the blur the frame's noise estimate sees: the outline is
    put where the object covers half the pixel by unmixing object and plate colours (``_refine_unmix``), not where
    change starts. Ground truth: the generated coverage (>= 0.5)."""
    import cv2

    from real2sim.segmentation import DifferenceConfig

    ours, without = [], []
    for seed in (0, 1, 2):
        c = procedural_case(seed, size=(256, 320))
        if kind == "jpeg":
            _, enc = cv2.imencode(".jpg", c.image, [cv2.IMWRITE_JPEG_QUALITY, 30])
            img = cv2.imdecode(enc, cv2.IMREAD_UNCHANGED)
        else:
            img = cv2.GaussianBlur(c.image, (0, 0), 2.0)
        ours.append(iou(difference_layers(img, Prompt([c.click]), c.plate).mask, c.mask))
        without.append(iou(difference_layers(img, Prompt([c.click]), c.plate, DifferenceConfig(unmix=False)).mask,
                           c.mask))
    assert min(ours) > 0.95, ours
    assert np.mean(ours) > np.mean(without) + 0.03, (ours, without)


def test_a_large_frame_is_segmented_at_the_working_size_with_its_outline_at_full_size():
    """A 1280x960 frame has 3.75x the pixels of the working size (640x512): the evidence is computed there and the
    mask's outline placed again against the full-size frame, so the mask is as good as the one computed at full
    size (the generated coverage >= 0.5 is the truth), and a blurred frame's outline is still at half contrast."""
    import cv2

    from real2sim.segmentation import DifferenceConfig

    for seed, blur in ((0, 0.0), (1, 2.5), (3, 0.0)):
        c = procedural_case(seed, size=(960, 1280))
        img = cv2.GaussianBlur(c.image, (0, 0), blur) if blur else c.image
        res = difference_layers(img, Prompt([c.click]), c.plate)
        w, h = res.details["work_size"]
        assert w * h <= 1.01 * DifferenceConfig().work_px and abs(w / h - 1280 / 960) < 0.01, res.details
        assert res.mask.shape == c.mask.shape and res.shadow.shape == c.mask.shape
        full = difference_layers(img, Prompt([c.click]), c.plate, DifferenceConfig(work_px=0))
        assert "work_size" not in full.details
        assert iou(res.mask, c.mask) > 0.95, (seed, iou(res.mask, c.mask), iou(full.mask, c.mask))
        # resampled alone the mask loses 0.003-0.006 here: the outline step puts it back
        assert iou(res.mask, c.mask) > iou(full.mask, c.mask) - 0.003, (seed, iou(res.mask, c.mask),
                                                                       iou(full.mask, c.mask))
        assert not (res.mask & res.shadow).any()


def test_one_click_on_a_large_frame_is_found_at_the_working_size_with_its_outline_at_full_size():
    """One click on a 1280x960 frame: the object is found at the working size (640x512 pixels) and its outline
    placed again against the full-size frame, as good as the mask found at full size (about a third of its time
    here, a third at 1920x1440), and better than the working-size mask only resampled."""
    import cv2

    from real2sim.segmentation import GrabCutConfig, grabcut_result
    from real2sim.segmentation.core import upsample_mask, work_size_prompt

    for seed, blur in ((0, 0.0), (3, 0.0), (4, 1.5)):
        c = procedural_case(seed, size=(960, 1280))
        img = cv2.GaussianBlur(c.image, (0, 0), blur) if blur else c.image
        res = grabcut_result(img, Prompt([c.click]))
        w, h = res.details["work_size"]
        assert w * h <= 1.01 * GrabCutConfig().work_px and abs(w / h - 1280 / 960) < 0.01, res.details
        assert res.mask.shape == c.mask.shape and res.shadow.shape == c.mask.shape
        full = grabcut_result(img, Prompt([c.click]), config=GrabCutConfig(work_px=0))
        assert "work_size" not in full.details
        size, small, _ = work_size_prompt(img.shape[:2], GrabCutConfig().work_px, Prompt([c.click]))
        resampled = upsample_mask(grabcut_result(cv2.resize(img, size, interpolation=cv2.INTER_AREA), small).mask,
                                  img.shape[:2])
        got = (iou(res.mask, c.mask), iou(full.mask, c.mask), iou(resampled, c.mask))
        assert got[0] > 0.98 and got[0] > got[1] - 0.003, (seed, got)
        assert got[0] > got[2] + 0.003, (seed, got)  # resampled alone it loses 0.007-0.008 here
        assert not (res.mask & res.shadow).any()


def test_one_click_noise_and_jpeg_are_measured_from_the_frame():
    """The one-click pre-filter reads the frame's own noise and JPEG blocks: sensor grain of sigma 8 per channel
    reads as ~5.4 in grey (0.67 x 8; a clean frame under 2), JPEG quality 30 has 8-px blocks, an uncompressed frame has none."""
    import cv2

    from real2sim.segmentation.grabcut import blockiness, noise_sigma

    plate = procedural_plate(240, 320, np.random.default_rng(2)).astype(np.float32)
    rng = np.random.default_rng(3)
    clean = np.clip(plate + rng.normal(0, 1.5, plate.shape), 0, 255).astype(np.uint8)
    grainy = np.clip(plate + rng.normal(0, 8.0, plate.shape), 0, 255).astype(np.uint8)
    s_clean, s_grainy = noise_sigma(clean), noise_sigma(grainy)
    assert s_clean < 2.0 and 4.3 < s_grainy < 6.5, (s_clean, s_grainy)
    _, enc = cv2.imencode(".jpg", clean, [cv2.IMWRITE_JPEG_QUALITY, 30])
    jpeg = cv2.imdecode(enc, cv2.IMREAD_COLOR)
    assert blockiness(clean)[0] < 1.2 and blockiness(jpeg)[0] > 1.4, (blockiness(clean), blockiness(jpeg))


def test_one_click_on_a_grainy_frame_of_a_real_plate(shared_data):
    """A weak case of bench_capture_masks.py fixed (second seed, ``noise`` family, sensor noise sigma 6-10): a
    yellow cube rendered into the real open_drawer_b1 plate. The grain made GrabCut's edges and colour models
    see speckle: IoU 0.85 before the noise-adaptive pre-filter and the candidates' vote, 0.94 after."""
    from real2sim.demos.mask_cases import family_case

    c = family_case(shared_data, "noise", "open_drawer_b1", seed=1)
    if c is None:
        pytest.skip("the open_drawer_b1 plate or a benchmark mesh is missing from the shared data")
    assert c.name == "noise/open_drawer_b1/yellow_cube"
    res = segment_result(c.image, Prompt([c.click]))
    assert res.details["noise_sigma"] > 3.0  # the grain was measured, and filtered
    assert iou(res.mask, c.mask) > 0.9, iou(res.mask, c.mask)


def test_a_click_among_clutter_gives_the_object_not_the_clutter(shared_data):
    """The toy carrot on a cluttered shelf (a real Google Robot overlay, outlined by hand): three cues find the carrot
    alone, a context box finds the clutter around it with an outline; the clutter is no 'whole' of the carrot (its
    colour stands apart from its ring far less than the carrot's does), so the carrot stays (0.26 before: the
    clutter)."""
    from real2sim.demos.mask_cases import hand_cases
    from real2sim.segmentation import Prompt, segment_result

    case = {c.name: c for c in hand_cases(shared_data)}.get("hand/open_drawer_c0/carrot")
    if case is None:
        pytest.skip("google_robot/overlays/open_drawer_c0.png is not in the shared data")
    res = segment_result(case.image, Prompt([case.click]))
    assert iou(res.mask, case.mask) > 0.75, res.details


def _plate_with_a_wrong_inpainted_patch(case):
    """The case's plate with a wrongly inpainted patch touching the object's top (a flat grey the frame does not
    show there), and where the plate is known (False on the patch), as a bundle's plate_confidence.png says."""
    plate = case.plate.copy()
    ys, xs = np.nonzero(case.mask)
    top, x0, x1 = ys.min(), xs.min(), xs.max()
    patch = np.zeros(case.mask.shape, bool)
    patch[max(0, top - 40):top + 6, max(0, x0 - 20):x1 + 20] = True
    patch &= ~case.mask
    plate[patch] = (128, 128, 128)
    return plate, ~patch, patch


def test_a_plate_mask_stops_where_the_plate_was_inpainted():
    """A bundle plate is a guess where no frame showed the background (plate_confidence 0): the difference to it
    there is no evidence. Without that map the mask grows into the wrongly inpainted patch next to the object;
    with it the mask is the object."""
    case = procedural_case(4)
    plate, known, patch = _plate_with_a_wrong_inpainted_patch(case)
    blind = segment_result(case.image, Prompt([case.click]), plate=plate)
    assert (blind.mask & patch).sum() > 0.5 * patch.sum()  # the leak the map prevents
    res = segment_result(case.image, Prompt([case.click]), plate=plate, plate_known=known)
    assert not (res.mask & patch).any() and iou(res.mask, case.mask) > 0.9, iou(res.mask, case.mask)
    assert res.details["cut_where_plate_inpainted_px"] > 0


def test_a_click_where_the_plate_was_inpainted_segments_without_the_plate():
    """An object that never moved in the clip: the plate under it is inpainted, so `auto` segments it from the
    frame alone (as without a plate) instead of differencing against a guess; an explicit `difference` keeps the
    plate (and is cut at the unknown pixels: nothing is left to say)."""
    case = procedural_case(6)
    unknown = np.zeros(case.mask.shape, bool)
    ys, xs = np.nonzero(case.mask)
    unknown[ys.min():ys.max() + 1, xs.min():xs.max() + 1] = True
    plate = case.plate.copy()
    plate[unknown] = case.image[unknown]  # inpainted from the frame: the object is 'in' the plate
    res = segment_result(case.image, Prompt([case.click]), plate=plate, plate_known=~unknown)
    assert res.details.get("fallback") == "the plate is inpainted at the prompt" and res.backend == "grabcut"
    assert iou(res.mask, case.mask) > 0.8, iou(res.mask, case.mask)
    with pytest.raises(SegmentationError, match="plate_known"):
        segment_result(case.image, Prompt([case.click]), plate=None, plate_known=~unknown)


def test_segment_stage_reads_the_bundle_plate_confidence(tmp_path):
    """The stage (and the review page's click) hand the bundle's plate_confidence.png to the masks."""
    from real2sim.capture import init_bundle
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import read_mask
    from real2sim.segmentation.stage import segment_stage

    case = procedural_case(4)
    plate, known, patch = _plate_with_a_wrong_inpainted_patch(case)
    write_rgb(tmp_path / "frames" / "000.png", case.image)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    write_rgb(b.path("background/plate.png"), plate)
    write_rgb(b.path("background/plate_confidence.png"), np.repeat(np.where(known, 255, 0).astype(np.uint8)[..., None], 3, -1))
    b.manifest.capture.plate, b.manifest.capture.plate_confidence = "background/plate.png", "background/plate_confidence.png"
    b.save()
    segment_stage(b, {"obj": {"frame": 0, "prompt": Prompt([case.click]), "propagate": False}})
    b = Bundle.load(b.root)
    m = read_mask(b.path(b.manifest.capture.masks["000000"]["obj"]))
    assert not (m & patch).any() and iou(m, case.mask) > 0.9


def _touching_pair(seed: int = 3):
    """A procedural can and a blue box standing against its side (in front of it), neither in the plate: the image,
    the plate, each object's visible pixels and a click on each."""
    c = procedural_case(seed, shadow=0.3)
    ys, xs = np.nonzero(c.mask)
    h = ys.max() - ys.min()
    y0, y1, x0 = ys.min() + int(0.35 * h), ys.max() + 2, xs.max() - 3
    x1 = x0 + int(0.6 * (xs.max() - xs.min()))
    box = np.zeros_like(c.mask)
    box[y0:y1, x0:x1] = True
    image = c.image.copy()
    rng = np.random.default_rng(seed)
    shade = np.linspace(1.0, 0.7, x1 - x0)[None, :, None]
    image[y0:y1, x0:x1] = np.clip(np.array([40, 70, 170]) * shade + rng.normal(0, 1.5, (y1 - y0, x1 - x0, 3)), 0, 255)
    can = c.mask & ~box
    return image, c.plate, can, box, c.click, ((x0 + x1) / 2, (y0 + y1) / 2)


def test_two_touching_objects_are_cut_apart_by_the_other_click():
    image, plate, can, box, on_can, on_box = _touching_pair()
    alone = segment(image, Prompt([on_can]), plate=plate, backend="difference")
    assert alone[int(on_box[1]), int(on_box[0])], "premise: the change of both objects is one region"
    for mine, other, truth in ((on_can, on_box, can), (on_box, on_can, box)):
        m = segment(image, Prompt([mine, other], [1, 0]), plate=plate, backend="difference")
        assert iou(m, truth) > 0.9 and not m[int(other[1]), int(other[0])], (mine, iou(m, truth))


def test_stage_cuts_each_prompted_object_from_the_others_on_its_frame(tmp_path):
    from real2sim.capture import init_bundle
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import read_mask
    from real2sim.segmentation.stage import segment_stage

    image, plate, can, box, on_can, on_box = _touching_pair()
    write_rgb(tmp_path / "frames" / "000.png", image)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    write_rgb(b.path("capture/plate.png"), plate)
    b.manifest.capture.plate = "capture/plate.png"
    b.save()
    segment_stage(b, {"can": {"frame": 0, "prompt": Prompt([on_can])}, "box": {"frame": 0, "prompt": Prompt([on_box])}})
    b = Bundle.load(b.root)
    masks = {e: read_mask(b.path(p)) for e, p in b.manifest.capture.masks["000000"].items()}
    assert iou(masks["can"], can) > 0.9 and iou(masks["box"], box) > 0.9
    assert not (masks["can"] & masks["box"]).any()
    prompts = json.loads((b.root / "masks" / "prompts.json").read_text())
    assert prompts["can"]["prompt"]["labels"] == [1], "the prompt is recorded as given"
    rep = json.loads((b.root / "reports" / "segment.json").read_text())
    assert rep["entities"]["can"]["cut_from"] == ["box"] and rep["entities"]["box"]["cut_from"] == ["can"]


@pytest.mark.parametrize("scale", [1, 4])
def test_a_one_click_mask_reaching_the_other_click_is_cut_there(scale):
    """Without a plate (GrabCut keeps only a disk at a negative click out), also on a frame over the working size."""
    import cv2

    from real2sim.segmentation import segment_result

    image, _, can, box, on_can, on_box = _touching_pair()
    image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    can, box = (cv2.resize(m.astype(np.uint8), None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST) > 0
                for m in (can, box))
    mine, other = (on_can[0] * scale, on_can[1] * scale), (on_box[0] * scale, on_box[1] * scale)
    alone = segment_result(image, Prompt([mine]), backend="grabcut").mask
    assert (alone & box).sum() > 0.9 * box.sum(), "premise: one click alone takes the box too"
    res = segment_result(image, Prompt([mine, other], [1, 0]), backend="grabcut")
    assert res.details["negatives_cut"] and iou(res.mask, can) > 0.95 and not (res.mask & box).sum() > 0.02 * box.sum()


def test_a_box_prompt_keeps_its_mask_when_another_entity_is_clicked_inside_it():
    from real2sim.segmentation.stage import with_others_as_negatives

    box_only = Prompt(box=(10.0, 10.0, 90.0, 90.0))
    assert with_others_as_negatives(box_only, [Prompt([(50.0, 50.0)])]) is box_only
    clicked = with_others_as_negatives(Prompt([(20.0, 20.0)]), [Prompt([(50.0, 50.0)]), Prompt([(20.0, 20.0)])])
    assert clicked.points == [(20.0, 20.0), (50.0, 50.0)] and clicked.labels == [1, 0]


def test_a_click_on_an_object_that_reads_as_shadow_takes_the_darkening_it_is_on(shared_data):
    """A benchmark case (``lowcontrast``, seed 2): a pepsi can at half contrast on a dark drawer reads, pixel by
    pixel, mostly as darkening at the plate's own colour, and the click lies on that darkening with only a speck of
    object evidence beside it. The speck was the mask (0.09); now the darkening the click is on joins the region,
    as it does when the click has no object evidence at all."""
    from real2sim.demos.mask_cases import family_case
    from real2sim.segmentation.difference import DifferenceConfig

    c = family_case(shared_data, "lowcontrast", "open_drawer_b1", seed=2)
    if c is None:
        pytest.skip("the open_drawer_b1 plate or a benchmark mesh is missing from the shared data")
    assert c.name == "lowcontrast/open_drawer_b1/pepsi_can"
    before = difference_layers(c.image, Prompt([c.click]), c.plate, DifferenceConfig(dark_click_share=0.0))
    assert iou(before.mask, c.mask) < 0.3, "the case no longer shows the failure"
    res = difference_layers(c.image, Prompt([c.click]), c.plate)
    assert iou(res.mask, c.mask) > 0.8, res.details
    assert res.details["note"].startswith("the click is on darkening at the plate's own colour")
