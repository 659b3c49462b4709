"""Plates never below the plain per-pixel median: real clips against person-made plates, synthetic clips (with exact
plates) over the real plates; honest confidence; bad input (frames of other sizes, black or saturated frames)."""
from __future__ import annotations

import numpy as np
import pytest

from real2sim.capture import CaptureError, PlateConfig, make_plate, plain_median
from real2sim.core.imaging import psnr
from real2sim.demos.plate_cases import (
    ClipSpec,
    Framing,
    PlateCase,
    bridge_real_case,
    motion_blurred,
    real_plates,
    reframed,
    reframed_cases,
    synth_clip,
    through_motion_blur,
)


def _plates_or_skip(shared_data, *names):
    plates = real_plates(shared_data)
    missing = [n for n in names if n not in plates]
    if missing:
        pytest.skip(f"real plates {missing} not in {shared_data}")
    return plates


@pytest.mark.realdata
def test_plate_beats_median_on_every_real_clip(shared_data, record_property):
    """Every real clip with a person-made plate (today: bridge_real_1.mp4), scored where the clip confirms it."""
    case = bridge_real_case(shared_data)
    if case is None:
        pytest.skip(f"bridge/bridge_real_1.mp4 or its cleanup not in {shared_data}")
    plate, conf, rep = make_plate(case.frames)
    med = plain_median(case.frames)
    ours, base = psnr(plate, case.truth, case.valid), psnr(med, case.truth, case.valid)
    ours_o, base_o = psnr(plate, case.truth, case.occluded), psnr(med, case.truth, case.occluded)
    record_property("bridge_plate_all", round(ours, 2))
    record_property("bridge_median_all", round(base, 2))
    assert ours >= base + 1.0, (ours, base)
    assert ours_o >= base_o + 1.0, (ours_o, base_o)
    assert set(np.unique(conf)) <= {0, 128, 255}


@pytest.mark.realdata
@pytest.mark.parametrize("plate_name,spec,min_gain", [
    # the hard case: a robot-arm-like shape holds still over a region for 70 % of the frames (the median keeps it)
    ("open_drawer_b0", ClipSpec("arm2d", 24, linger=0.7, seed=12), 5.0),
    # a person's hand, low contrast and exposure drift, few frames
    ("open_drawer_a1", ClipSpec("hand", 24, seed=10), 3.0),
    ("open_drawer_c0", ClipSpec("arm2d", 24, contrast=0.5, drift=0.1, seed=15), 1.0),
    ("open_drawer_c1", ClipSpec("hand", 5, seed=16), 0.5),
    # an object carried from one place to another by the arm, and a hand passing
    ("open_drawer_b1", ClipSpec("arm2d", 24, moved_object=True, hand=True, seed=13), 0.0),
])
def test_plate_not_below_median_on_synthetic_clips(shared_data, plate_name, spec, min_gain):
    plates = _plates_or_skip(shared_data, plate_name)
    case = synth_clip(plate_name, plates[plate_name], spec, shared_data)
    plate, conf, _ = make_plate(case.frames)
    med = plain_median(case.frames)
    gain = psnr(plate, case.truth) - psnr(med, case.truth)
    gain_o = psnr(plate, case.truth, case.occluded) - psnr(med, case.truth, case.occluded)
    assert gain >= min_gain, (gain, min_gain)
    assert gain_o >= min_gain, (gain_o, min_gain)


@pytest.mark.realdata
def test_rendered_widowx_lingering_over_most_frames_is_removed(shared_data):
    """The real WidowX (registry model) rendered over the Bridge plate, holding still for 70 % of the clip."""
    plates = _plates_or_skip(shared_data, "bridge_real_1_cleanup")
    case = synth_clip("widowx_linger", plates["bridge_real_1_cleanup"],
                      ClipSpec("widowx", 30, linger=0.7, noise=2.0, jpeg=85, seed=2), shared_data)
    plate, conf, rep = make_plate(case.frames)
    med = plain_median(case.frames)
    assert psnr(med, case.truth, case.occluded) < 20  # the median keeps the arm
    assert psnr(plate, case.truth, case.occluded) > psnr(med, case.truth, case.occluded) + 10
    assert rep["ghost_fraction"] > 0


def test_confidence_marks_pixels_no_frame_shows():
    """An arm whose base never leaves one spot (covered in every frame, by different parts): those pixels are not
    reported as confidently seen."""
    rng = np.random.default_rng(0)
    import cv2

    base = cv2.resize(rng.uniform(60, 200, (12, 16, 3)).astype(np.float32), (160, 120), interpolation=cv2.INTER_CUBIC)
    case = synth_clip("arm_base", np.clip(base, 0, 255).astype(np.uint8), ClipSpec("arm2d", 16, shadow=0.0, seed=3))
    assert case.unseen.sum() > 50
    plate, conf, _ = make_plate(case.frames)
    assert (conf[case.unseen] < 255).mean() > 0.5  # 53 %: the base where it meets the image border stays 255
    seen_often = ~case.occluded
    assert (conf[seen_often] == 255).mean() > 0.9


def _scene(n=8, h=96, w=128, seed=0):
    rng = np.random.default_rng(seed)
    import cv2

    bg = np.clip(cv2.resize(rng.uniform(60, 200, (h // 8, w // 8, 3)).astype(np.float32), (w, h),
                            interpolation=cv2.INTER_CUBIC), 0, 255).astype(np.uint8)
    frames = np.repeat(bg[None], n, 0).copy()
    for i in range(n):
        frames[i, 20:70, 8 + 12 * i:30 + 12 * i] = (25, 25, 30)
    return bg, frames


def test_frames_of_another_size_are_named():
    _, frames = _scene()
    lst = list(frames)
    lst[3] = lst[3][:-2]
    with pytest.raises(CaptureError, match=r"frame 3 has shape \(94, 128, 3\)"):
        make_plate(lst)
    with pytest.raises(CaptureError, match="f003.png has shape"):
        make_plate(lst, frame_names=[f"f{i:03d}.png" for i in range(len(lst))])


@pytest.mark.parametrize("kind,value", [("all black", 0), ("saturated", 255)])
def test_black_or_saturated_frames_are_named_and_left_out(kind, value, caplog):
    bg, frames = _scene()
    frames = frames.copy()
    frames[2] = value
    frames[5] = value
    without, _, _ = make_plate(np.delete(frames, [2, 5], 0))
    plate, conf, rep = make_plate(frames, frame_names=[f"{i:03d}.png" for i in range(len(frames))])
    assert rep["frames_left_out"] == [2, 5]
    assert rep["frames_used"] == len(frames) - 2
    assert any(f"002.png is {kind}" in w for w in rep["warnings"])
    assert any("005.png" in r.getMessage() for r in caplog.records)
    assert psnr(plate, without) > 45  # as if they were not there
    # the reference frame itself black: the nearest good frame becomes the reference, and the report says so
    frames[0] = 0
    _, _, rep = make_plate(frames)
    assert rep["reference_frame"] == 1 and any("reference frame" in w for w in rep["warnings"])
    with pytest.raises(CaptureError, match="every frame is all black or saturated"):
        make_plate(np.zeros_like(frames))


@pytest.mark.realdata
@pytest.mark.parametrize("framing", ["portrait", "half_320x240", "upscaled_1280x960", "closeup_2_centre",
                                     "closeup_2_top_left", "closeup_1.5_at_1280x960"])
def test_plate_beats_median_on_the_real_clip_through_another_framing(shared_data, framing):
    """The real clip as another camera would have framed it (turned upright, a quarter of the pixels, four times
    the pixels with sensor noise, 2x close-up crops, a 1.5x one at 1280x960): the plate stays over the median by
    the issue's 1 dB, so no length in the method is tied to the clip's 640x480 framing. The two corner close-ups
    are where the arm lingers nearest the camera (+0.82 and +0.96 dB until a later pass's replacement with the
    arm's colours was undone: ``PlateConfig.ghost_pass_foreign``)."""
    cases = reframed_cases(shared_data, [framing])
    if not cases:
        pytest.skip(f"bridge/bridge_real_1.mp4 or its cleanup not in {shared_data}")
    case = cases[0]
    plate, conf, _ = make_plate(case.frames)
    med = plain_median(case.frames)
    assert plate.shape == case.truth.shape and conf.shape == case.truth.shape[:2]
    for region in (case.valid, case.occluded):
        assert psnr(plate, case.truth, region) >= psnr(med, case.truth, region) + 1.0


@pytest.mark.realdata
def test_a_close_arm_is_peeled_as_far_as_its_ghost_is_wide(shared_data):
    """The real clip's 2x close-up of its top-left corner: the arm is large there and its ghost's rim, merged with
    the arm passing, wider than 2 % of the image; the later passes reach a fraction of the ghost's own width
    (``PlateConfig.peel_reach_ghost``) and peel it (+5.9 dB over the median with the image's reach alone)."""
    cases = reframed_cases(shared_data, ["closeup_2_top_left"])
    if not cases:
        pytest.skip(f"bridge/bridge_real_1.mp4 or its cleanup not in {shared_data}")
    case = cases[0]
    med = psnr(plain_median(case.frames), case.truth, case.valid)
    wide = psnr(make_plate(case.frames)[0], case.truth, case.valid)
    image_only = psnr(make_plate(case.frames, config=PlateConfig(peel_reach_ghost=0.0))[0],
                      case.truth, case.valid)
    assert wide >= image_only + 2.0 and wide >= med + 1.0, (wide, image_only, med)


@pytest.mark.realdata
def test_an_arm_smeared_by_a_long_exposure_is_taken_out(shared_data):
    """The rendered WidowX lingering over the Bridge plate at 320x240, smeared along its motion over a whole frame
    interval: its ghost's soft rim is peeled and the plate stays far over the median (+10.6 dB with the image's
    reach alone)."""
    plates = _plates_or_skip(shared_data, "bridge_real_1_cleanup")
    case = synth_clip("widowx_lowres_linger", plates["bridge_real_1_cleanup"],
                      ClipSpec("widowx", 24, linger=0.5, size=(320, 240), seed=5), shared_data)
    blurred = through_motion_blur(case, 1.0)
    assert not np.array_equal(blurred.frames, case.frames) and np.array_equal(blurred.truth, case.truth)
    gain = psnr(make_plate(blurred.frames)[0], blurred.truth) - psnr(plain_median(blurred.frames), blurred.truth)
    assert gain >= 15.0, gain


def test_motion_blur_smears_only_what_moves():
    """``motion_blurred``: a square moving right by 8 px a frame is smeared along x over ``exposure`` of that (each
    of its left and right edges ramps over about 4 px at exposure 0.5), up and down it stays sharp, and pixels away
    from it are untouched."""
    h, w, n = 40, 80, 3
    bg = np.full((h, w, 3), 200, np.uint8)
    frames = np.repeat(bg[None], n, 0)
    occ = np.zeros((n, h, w), bool)
    for t in range(n):
        occ[t, 15:25, 20 + 8 * t:30 + 8 * t] = True
        frames[t][occ[t]] = 40
    out = motion_blurred(frames, occ, bg, 0.5, "toy", noise=0.0)
    row = out[1, 20, :, 0].astype(int)
    ramp = np.flatnonzero((row > 45) & (row < 195))
    left, right = ramp[ramp < 33], ramp[ramp >= 33]  # the square spans columns 28-37 in frame 1
    assert 3 <= len(left) <= 5 and 3 <= len(right) <= 5 and left.min() >= 24 and right.max() <= 41, row
    assert (out[1, :13, :, :] == 200).all() and (out[1, 27:, :, :] == 200).all()  # not smeared across the motion
    assert np.array_equal(out[1, :, 60:], frames[1, :, 60:])


def test_a_framing_keeps_frames_truth_and_regions_registered():
    """``reframed``: the whole frame at its own size is the clip itself; a 2x crop of the top-left quarter puts the
    quarter's pixels (frames, truth and regions alike) over the whole image."""
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (3, 48, 64, 3), dtype=np.uint8)
    truth = frames[0].copy()
    valid = np.zeros((48, 64), bool)
    valid[:24, :32] = True
    case = PlateCase("toy", frames, truth, valid, valid.copy())
    same = reframed(case, "same", Framing())
    assert np.array_equal(same.frames, frames) and np.array_equal(same.truth, truth)
    assert np.array_equal(same.valid, valid)
    quarter = reframed(case, "quarter", Framing(2.0, (0.0, 0.0)))
    assert quarter.frames.shape == frames.shape and quarter.valid.all()
    up = reframed(case, "up", Framing(size=(128, 96), portrait=True))
    assert up.frames.shape == (3, 128, 96, 3) and up.valid.shape == (128, 96)
    assert np.array_equal(up.valid, np.rot90(np.kron(valid, np.ones((2, 2), bool))))
