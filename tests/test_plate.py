"""Background plate: synthetic moving occluder, given masks, bad masks, bundle stage, real Bridge data."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from reference import ref_psnr as psnr

from real2sim.capture import CaptureError, PlateConfig, make_plate, plain_median
from real2sim.demos.plate_cases import gain_to


def textured_background(h=120, w=160, seed=0):
    import cv2

    rng = np.random.default_rng(seed)
    base = rng.uniform(60, 200, (h // 8, w // 8, 3)).astype(np.float32)
    img = cv2.resize(base, (w, h), interpolation=cv2.INTER_CUBIC)
    img += rng.normal(0, 6, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def moving_occluder_frames(n=9, seed=0):
    bg = textured_background(seed=seed)
    frames, masks = [], []
    for i in range(n):
        f = bg.copy()
        m = np.zeros(bg.shape[:2], bool)
        x = 10 + 14 * i
        m[30:100, x:x + 30] = True
        f[m] = (20, 20, 25)
        frames.append(f)
        masks.append(m)
    return bg, np.stack(frames), np.stack(masks)


def test_plate_removes_moving_occluder():
    bg, frames, masks = moving_occluder_frames()
    plate, conf, rep = make_plate(frames)
    assert plate.shape == bg.shape and plate.dtype == np.uint8 and conf.dtype == np.uint8
    assert set(np.unique(conf)) <= {0, 128, 255}
    assert psnr(plate, bg) > 35
    assert psnr(plate, bg) > psnr(frames[0], bg) + 10
    assert rep["inpainted_fraction"] < 0.05


def test_a_plate_without_exposure_compensation_still_follows_a_tone_change():
    """``PlateConfig(exposure_compensation=False)`` on a clip whose tone changes: the tone curves alone map the
    frames (it raised AttributeError: no level maps and a curve to take back to the first frame's tone)."""
    bg, frames, _ = moving_occluder_frames()
    lifted = frames.copy()
    lifted[4:] = np.clip(255.0 * (frames[4:] / 255.0) ** 0.8, 0, 255).astype(np.uint8)
    plate, _, rep = make_plate(lifted, config=PlateConfig(exposure_compensation=False))
    assert rep["exposure_gain_range"] == [1.0, 1.0]
    assert psnr(plate, bg) > 35


def test_plate_with_masks_and_unseen_pixels_are_inpainted():
    bg, frames, masks = moving_occluder_frames()
    masks = masks.copy()
    masks[:, 50:60, 70:80] = True  # never seen: must be inpainted and marked 0
    frames = frames.copy()
    frames[:, 50:60, 70:80] = (255, 0, 255)  # what covers the hole in every frame: must not leak into the plate
    hole = np.zeros(bg.shape[:2], bool)
    hole[50:60, 70:80] = True
    plate, conf, rep = make_plate(frames, masks, PlateConfig(inpaint="patchmatch", dilate_px=0, inpaint_margin=0))
    assert (conf[hole] == 0).all() and (conf[~masks.all(0)] > 0).all()
    assert rep["inpainted_fraction"] == pytest.approx(hole.mean(), abs=1e-6)
    assert psnr(plate, bg, ~masks.all(0)) > 35
    # the inpainted pixels against the true background: far better than what covered them in every frame
    assert psnr(plate, bg, hole) > psnr(frames[0], bg, hole) + 12
    assert psnr(plate, bg, hole) > 18
    # the default ('auto': it picks Telea on this smooth background, where PatchMatch, which copies texture, is
    # worse: 19.8 dB vs 23.1 Telea, 20.2 flat) beats a flat fill with the image's mean colour by 2 dB
    telea, conf_t, _ = make_plate(frames, masks, PlateConfig(dilate_px=0, inpaint_margin=0))
    flat = np.full_like(bg, bg[~hole].mean(0).round().astype(np.uint8))
    assert psnr(telea, bg, hole) > psnr(flat, bg, hole) + 2
    assert (conf_t[hole] == 0).all()


def test_never_moving_object_rim_outside_its_mask_does_not_leak_into_the_fill():
    """A still object whose mask misses its 3 px rim (a mask rarely covers the halo): the fill of its place is grown
    by a margin scaled to its size, so the rim's colour does not smear into it."""
    import cv2

    bg, frames, masks = moving_occluder_frames()
    yy, xx = np.mgrid[:bg.shape[0], :bg.shape[1]]
    obj = (yy - 60) ** 2 + (xx - 120) ** 2 <= 15 ** 2
    given = (yy - 60) ** 2 + (xx - 120) ** 2 <= 12 ** 2
    frames = frames.copy()
    frames[:, obj] = (230, 30, 200)
    masks = masks | given[None]
    cfg = PlateConfig(dilate_px=0)
    plate, conf, rep = make_plate(frames, masks, cfg)
    plate0, _, _ = make_plate(frames, masks, PlateConfig(dilate_px=0, inpaint_margin=0))
    assert (conf[obj] == 0).all() and rep["inpainted_fraction"] > obj.mean()
    assert psnr(plate, bg, obj) > psnr(plate0, bg, obj) + 6  # measured 17.3 vs 8.8 dB
    ring = cv2.dilate(obj.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool) & ~obj
    assert (conf[ring] > 0).mean() > 0.5  # the margin stays near the object


def test_plate_inpainter_hook_and_bad_masks():
    bg, frames, masks = moving_occluder_frames()
    calls = []

    def grey(img, hole):
        calls.append(hole.sum())
        out = img.copy()
        out[hole] = 128
        return out

    m = masks.copy()
    m[:, :10, :10] = True
    plate, conf, _ = make_plate(frames, m, inpainter=grey)
    assert calls and (plate[:8, :8] == 128).all()
    with pytest.raises(CaptureError, match="cover everything"):
        make_plate(frames, np.ones_like(masks))
    with pytest.raises(CaptureError, match="one per frame"):
        make_plate(frames, masks[:3])


def test_plate_stage_writes_outputs(tmp_path):
    from real2sim.capture import init_bundle, plate_stage
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import read_rgb, write_rgb

    bg, frames, _ = moving_occluder_frames()
    for i, f in enumerate(frames):
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", f)
    b = init_bundle(tmp_path / "scene", tmp_path / "frames")
    rec, ran = plate_stage(b)
    assert ran
    assert rec.status == "done"
    b = Bundle.load(b.root)
    assert b.manifest.capture.plate == "background/plate.png"
    plate = read_rgb(b.path("background/plate.png"))  # the file the bundle names holds the background
    assert psnr(plate, bg) > 35 and psnr(plate, bg) > psnr(frames[0], bg) + 10
    for rel in ("background/plate_confidence.png", "reports/plate.json", "reports/plate.png"):
        assert b.path(rel).is_file(), rel
    mtime = b.path("background/plate.png").stat().st_mtime_ns
    rec2, ran2 = plate_stage(b)  # unchanged: skipped, the plate file not rewritten
    assert not ran2 and b.path("background/plate.png").stat().st_mtime_ns == mtime


def _bridge(shared_data):
    import cv2

    cap = cv2.VideoCapture(str(shared_data / "bridge" / "bridge_real_1.mp4"))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))
    clean = cv2.cvtColor(cv2.imread(str(shared_data / "bridge" / "bridge_real_1_cleanup.png")), cv2.COLOR_BGR2RGB)
    return np.stack(frames), clean


@pytest.mark.realdata
def test_bridge_plate_beats_median_and_first_frame(shared_data, record_property):
    """Evaluation regions (the cleanup is a person's edit of frame 0, so it is ground truth only where some real
    frame confirms it):

    - ``occluded``: pixels where some frame (exposure-matched to the cleanup) differs strongly (> 40) from the
      cleanup, i.e. the robot (or the carried can) covered them at some time, AND at least 2 frames agree with
      the cleanup there (< 20): the true background is observed and the cleanup shows it. Where no frame agrees
      the cleanup was hallucinated by the person (e.g. the right pillar painted over) or the object moved.
    - ``frame0``: the subset the robot covers in the first frame.

    The can's place in frame 0 is kept in ``occluded`` (the cleanup shows the can there, the clip mostly the
    table: both plates pay for it alike).
    """
    import cv2

    frames, clean = _bridge(shared_data)
    plate, conf, rep = make_plate(frames)
    G = gain_to(frames, clean)
    d = np.abs(G.astype(int) - clean).max(-1)
    confirmed = (d < 20).sum(0) >= 2
    k = np.ones((5, 5), np.uint8)
    occluded = cv2.morphologyEx((d > 40).any(0).astype(np.uint8), cv2.MORPH_OPEN, k).astype(bool) & confirmed
    frame0 = cv2.morphologyEx((np.abs(frames[0].astype(int) - clean).max(-1) > 40).astype(np.uint8),
                              cv2.MORPH_OPEN, k).astype(bool) & confirmed
    med = plain_median(frames)
    res = {}
    for name, m in (("occluded", occluded), ("frame0", frame0)):
        res[name] = {"ours": psnr(plate, clean, m), "median": psnr(med, clean, m), "first": psnr(frames[0], clean, m),
                     "pixels": int(m.sum())}
        for kk, v in res[name].items():
            record_property(f"bridge_plate_{name}_{kk}", round(v, 3) if isinstance(v, float) else v)
    print("bridge plate PSNR (dB):", res, "plate seconds", rep["seconds"])
    # measured: occluded 21.2 dB (median 18.7, first frame 17.0), frame0 27.3 (median 25.3)
    assert res["occluded"]["ours"] >= res["occluded"]["median"] + 2.0
    assert res["occluded"]["ours"] >= res["occluded"]["first"] + 2.0
    assert res["frame0"]["ours"] >= res["frame0"]["median"] + 1.5
    assert res["frame0"]["ours"] >= res["frame0"]["first"] + 2.0


@pytest.mark.realdata
def test_stack_cube_gripper_inpainting_vs_telea(shared_data, record_property):
    """Single-frame inpainting of the gripper (found by differencing with the person-made plate)."""
    import cv2

    from real2sim.capture.inpaint import inpaint
    from real2sim.core.imaging import component_at, fill_holes
    from real2sim.segmentation import difference_mask

    img = cv2.cvtColor(cv2.imread(str(shared_data / "bridge" / "stack_cube_first_frame.png")), cv2.COLOR_BGR2RGB)
    ref = cv2.cvtColor(cv2.imread(str(shared_data / "bridge" / "stack_cube_plate.png")), cv2.COLOR_BGR2RGB)
    win = np.zeros(img.shape[:2], bool)
    win[:200, 270:480] = True  # the gripper; the table-edge band of the plate's misalignment is outside
    grip = fill_holes(component_at(difference_mask(img, ref) & win, [(380, 60)]))
    hole = cv2.dilate(grip.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
    assert 15000 < hole.sum() < 40000
    p_telea = psnr(inpaint(img, hole, "telea"), ref, hole)
    p_pm = psnr(inpaint(img, hole, "patchmatch"), ref, hole)
    best = max(p_pm, p_telea)
    record_property("gripper_psnr_telea", round(p_telea, 3))
    record_property("gripper_psnr_patchmatch", round(p_pm, 3))
    print(f"gripper inpainting PSNR: patchmatch {p_pm:.2f} dB, telea {p_telea:.2f} dB")
    assert p_pm >= p_telea - 0.25
    assert best > 17


def test_moving_camera_is_refused_with_the_evidence():
    from real2sim.capture.plate import make_plate
    from real2sim.core.errors import CaptureError

    _, frames, _ = moving_occluder_frames()
    panned = np.stack([np.roll(f, 6 * i, axis=1) for i, f in enumerate(frames)])  # the camera pans 6 px a frame
    with pytest.raises(CaptureError, match=r"not static: frames shift by \d+\.\d px"):
        make_plate(panned)
    _, _, rep = make_plate(frames)  # a fixed camera with a moving occluder passes
    assert rep["camera_shift_px_median"] < 1.0


def test_plate_command_names_the_mask_files_that_cover_everything_or_nothing(tmp_path, capsys):
    from real2sim.apps.cli import main
    from real2sim.core.imaging import write_rgb

    _, frames, masks = moving_occluder_frames()
    for i, (f, m) in enumerate(zip(frames, masks)):
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", f)
        mm = np.ones_like(m) if i == 1 else (np.zeros_like(m) if i == 2 else m)  # frame 1 inverted, frame 2 black
        from PIL import Image

        (tmp_path / "masks").mkdir(exist_ok=True)
        Image.fromarray(np.where(mm, 255, 0).astype(np.uint8)).save(tmp_path / "masks" / f"{i:03d}.png")
    assert main(["plate", "--frames", str(tmp_path / "frames"), "--masks", str(tmp_path / "masks"),
                 "--out", str(tmp_path / "plate.png")]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert "001.png covers 100% of the image" in out and "inverted" in out
    assert "002.png is empty" in out


def few_frames_arm_that_stays():
    """5 frames: a dark arm from the top border stays over one place in frames 1-4 (moving a little, its shade
    changing with its pose) and is elsewhere in frame 0. Where its four poses overlap the median is the arm, no two
    frames agree, and only frame 0 shows the table (the per-frame region calls need two frames that agree)."""
    yy, xx = np.mgrid[0:120, 0:160].astype(np.float32)
    bg = np.stack([150 + 0.3 * xx, 110 + 0.2 * yy, 80 + 0.1 * (xx + yy)], -1)  # a table in smooth light
    bg = np.clip(bg + np.random.default_rng(3).normal(0, 3, bg.shape), 0, 255).astype(np.uint8)
    frames = np.repeat(bg[None], 5, 0)
    for t, (x, shade) in enumerate(((118, 30), (40, 25), (46, 45), (52, 65), (44, 85))):
        frames[t, :80, x:x + 34] = shade
    overlap = np.zeros(bg.shape[:2], bool)
    overlap[:80, 52:74] = True
    rng = np.random.default_rng(0)
    frames = np.clip(frames + rng.normal(0, 1.5, frames.shape), 0, 255).astype(np.uint8)
    return bg, frames, overlap


def test_few_frames_the_frames_that_continue_the_surroundings_win():
    bg, frames, overlap = few_frames_arm_that_stays()
    med = plain_median(frames)
    plate, conf, rep = make_plate(frames)
    off, _, _ = make_plate(frames, config=PlateConfig(arbiter_ratio=0))
    # the median (and the plate without the spatial decision) keeps the arm where its poses overlap
    assert psnr(med, bg, overlap) < 20 and psnr(off, bg, overlap) < psnr(med, bg, overlap) + 1
    # the frames that show the table there continue its surroundings: they win, and the whole plate gains
    assert psnr(plate, bg, overlap) > psnr(med, bg, overlap) + 10
    assert psnr(plate, bg) > psnr(med, bg) + 3
    # decided by space, not by a majority of frames: reported as undecided, never as sure
    assert rep["spatial_fraction"] > 0.5 * overlap.mean()
    assert (conf[overlap] == 128).mean() > 0.9


@pytest.mark.parametrize("true_sigma", [0.8, 1.5, 2.5, 4.0])
def test_noise_sigma_is_read_between_whole_levels(true_sigma):
    """Noise of 1-2.5 levels used to read as one whole level (sigma 3.14) and a 5-frame clip as 0.5: now the
    quartile is interpolated inside the levels: within 15 % of the true sigma with 24 frames. (With 5 frames one
    residual in five is 0 by construction, the median is one of the frames: it reads 0.35-0.5 of the noise; a known
    limit, see docs/capture.md.)"""
    from real2sim.capture.plate_background import noise_sigma, temporal_median

    rng = np.random.default_rng(3)
    bg = textured_background(seed=4).astype(np.float32)
    for n in (24,):
        frames = np.clip(bg[None] + rng.normal(0, true_sigma, (n,) + bg.shape) + 0.5, 0, 255).astype(np.uint8)
        anchor = temporal_median(frames)
        est = noise_sigma(frames, anchor)
        old = noise_sigma(frames, anchor, interpolate=False)
        assert 0.85 * true_sigma <= est <= 1.15 * true_sigma, (n, true_sigma, est)
        assert abs(est - true_sigma) < abs(old - true_sigma) or abs(old - true_sigma) < 0.1 * true_sigma


def test_a_later_pass_that_peels_what_most_frames_show_is_put_back():
    """The peel check: a part whose old colour >= 70 % of the frames show and whose new colour fewer than half as
    many is put back; a part that replaces a colour 60 % of the frames show (a thing that lingered) stands."""
    from real2sim.capture.plate_background import peel_supported

    n, h, w = 20, 30, 60
    wall, robot = np.array([150, 120, 90], np.uint8), np.array([40, 40, 45], np.uint8)
    frames = np.empty((n, h, w, 3), np.uint8)
    frames[:] = wall
    frames[:15, :, :20] = wall      # left part: the wall in 15 of 20 frames (75 %), the robot in 5 (25 %)
    frames[15:, :, :20] = robot
    frames[:12, :, 40:] = robot     # right part: the robot lingers in 12 of 20 frames (60 %), the wall in 8
    before = np.full((h, w, 3), wall, np.uint8)
    before[:, 40:] = robot
    after = before.copy()
    after[:, :20] = robot           # a cascade: the wall most frames show peeled into the robot
    after[:, 40:] = wall            # a true peel: the lingering robot's place shows the wall
    peeled = np.zeros((h, w), bool)
    peeled[:, :20] = peeled[:, 40:] = True
    keep = peel_supported(frames, None, before, after, peeled, tol=10.0, ratio=0.5, majority=0.7)
    assert not keep[:, :20].any() and keep[:, 40:].all()



def test_a_dark_grey_arm_is_told_from_the_dark_brown_desk_it_stays_over():
    """A dark scene: the plate a brown desk at levels (30, 22, 17), a grey arm (20, 22, 20) seen in front of it.
    Bins 16 levels wide put both colours in one bin: the arm reads as likely as the desk. With the bins spaced by
    the square root of the level (``fine_dark``), the arm's colours are the things' in front, and a part that
    would replace the desk by the arm is more foreign (held_b2_seed21 through darker camera looks: the arbiter
    put a lingering arm over its desk, -2.97 dB under the median; -1.14 now)."""
    from real2sim.capture.plate_background import foreground_likelihood, level_bins, parts_more_foreign

    rng = np.random.default_rng(5)
    n, h, w = 6, 40, 40
    desk, arm = np.array([30, 22, 17]), np.array([20, 22, 20])
    plate = np.clip(desk + rng.normal(0, 0.7, (h, w, 3)), 0, 255).round().astype(np.uint8)
    frames = np.repeat(plate[None], n, 0)
    used = np.ones((n, h, w), bool)
    for t in range(n):  # the arm over a different band of the desk in each frame
        band = (slice(None), slice(6 * t, 6 * t + 6))
        frames[t][band] = np.clip(arm + rng.normal(0, 0.7, (h, 6, 3)), 0, 255).round()
        used[t][band] = False
    none = np.zeros((h, w), bool)
    even = foreground_likelihood(frames, plate, used, none, None)
    fine = foreground_likelihood(frames, plate, used, none, None, fine_dark=True)
    colours = np.stack([arm, desk])
    assert even(colours)[0] == even(colours)[1]  # one bin: nothing tells them apart
    assert fine(colours)[0] > fine(colours)[1] + 3.0
    part = np.zeros((h, w), bool)
    part[10:20, 10:20] = True
    k = int(part.sum())
    new, old = np.repeat(arm[None], k, 0), np.repeat(desk[None], k, 0)
    assert parts_more_foreign(part, fine, new, old, 2.0)[part].all()
    assert not parts_more_foreign(part, even, new, old, 2.0).any()
    assert list(level_bins(16)[[0, 1, 3, 4, 8, 9, 224, 225, 255]]) == [0, 1, 1, 2, 2, 3, 14, 15, 15]


def test_a_later_pass_that_puts_the_arm_back_is_undone_where_it_did_so():
    """One connected replacement by a later pass: its left half turned the wall the pass before had found into the
    arm's colours, its right half the arm into the wall. Averaged over the whole part the likelihood hides the arm
    (the part stands); averaged place by place, the left half goes back to the colours before the pass and the
    right half stays."""
    from real2sim.capture.plate_background import foreign_passes, parts_more_foreign

    h, w = 40, 80
    wall, arm = np.array([150, 120, 90], np.uint8), np.array([40, 40, 45], np.uint8)

    def like(c):  # the arm's colour 3 nats more like the things in front; anything else neutral
        return np.where((np.abs(c.astype(int) - arm).max(-1) < 10), 3.0, 0.0)

    before = np.full((h, w, 3), wall, np.uint8)
    before[:, 40:] = arm                     # right: the arm the pass before had left there
    after = np.full((h, w, 3), wall, np.uint8)
    after[:, :40] = arm                      # left: the pass put the arm over the wall found before
    rep = np.zeros((h, w), bool)
    rep[5:35, 10:70] = True
    ys, xs = np.nonzero(rep)
    assert not parts_more_foreign(rep, like, after[ys, xs], before[ys, xs], 1.0).any()  # the whole part: +0 on average
    anchor, back = foreign_passes(like, after, rep, [(rep, before)], 1.0, 2.0, 4)
    inner = np.zeros((h, w), bool)
    inner[5:35, 10:34] = True                # the left half, less the window's reach over the halves' border
    assert back[inner].all() and not back[:, 46:].any()
    assert (anchor[inner] == wall).all() and (anchor[:, 46:] == after[:, 46:]).all()


def test_arbiter_drops_a_pick_whose_frames_cover_its_surroundings():
    """The arbiter's pick for a part stands when the frames backing it show the part's well-decided surroundings
    as the plate has them; when those frames cover the surroundings too (a robot link along an edge), the pick is
    the thing in front and is dropped. Decided from the frames alone."""
    from real2sim.capture.plate_background import surround_disagrees

    n, h, w = 6, 60, 80
    rng = np.random.default_rng(1)
    plate = np.full((h, w, 3), 120, np.uint8)
    frames = np.clip(plate[None] + rng.normal(0, 1.5, (n, h, w, 3)), 0, 255).astype(np.uint8)
    unknown = np.zeros((h, w), bool)
    unknown[20:40, 10:30] = unknown[20:40, 50:70] = True  # two mixed places
    take = np.zeros((h, w), bool)
    take[24:36, 14:26] = take[24:36, 54:66] = True  # the arbiter's picks inside them
    agree = np.zeros((n, h, w), bool)
    used = np.zeros((n, h, w), bool)
    agree[0] = agree[1] = take  # frames 0-1 back both picks
    used[2:] = take[None]  # frames 2-5 backed the plate there
    frames[1, 10:50, 40:80] = 30  # frame 1's dark thing covers the right place and its surroundings
    frames[0, 10:50, 40:80] = 30  # ... and frame 0's
    tol = np.full((h, w), 8.0, np.float32)
    out = surround_disagrees(frames, plate, tol, None, unknown, take, agree, used, (5, 15), 0.6)
    assert out[24:36, 54:66].all()  # the right pick: its frames show no surroundings: dropped
    assert not out[24:36, 14:26].any()  # the left pick: its frames show the surroundings: kept
    # masked samples (valid False) do not show the surroundings either: the right pick is still dropped
    valid = np.ones((n, h, w), bool)
    valid[:2, 10:50, 40:80] = False
    out = surround_disagrees(frames, plate, tol, valid, unknown, take, agree, used, (5, 15), 0.6)
    assert out[24:36, 54:66].all() and not out[24:36, 14:26].any()


@pytest.mark.parametrize("seed", [17, 23])
def test_where_the_median_is_a_mix_the_largest_agreeing_set_that_does_not_look_like_the_arm_wins(seed):
    """9 frames: an arm from the top border and an object carried from one place to another (resting at each for
    a while). Where the frames that agree with the median are no majority, the largest set of frames that agree with
    each other replaces it unless its colour looks like the things seen in front: the plate is at least 1 dB above
    the plain median (issue #13's bar), and those pixels are reported (confidence 128) and closer to the truth."""
    from real2sim.demos.plate_cases import ClipSpec, synth_clip

    case = synth_clip("mix", textured_background(seed=seed), ClipSpec("arm2d", 9, moved_object=True, seed=seed))
    med = plain_median(case.frames)
    assert psnr(make_plate(case.frames)[0], case.truth) >= psnr(med, case.truth) + 1.0
    # the mode's own pixels: against the plate without it, both without the foreign majority (which takes what
    # the mode leaves, and without the mode some of what it takes)
    res_plate, conf, rep = make_plate(case.frames, config=PlateConfig(foreign_majority=0))
    off, _, _ = make_plate(case.frames, config=PlateConfig(mixed_mode=0, foreign_majority=0))
    moded = np.any(res_plate != off, -1)
    assert rep["mixed_mode_fraction"] > 0 and moded.any()
    assert (conf[moded] == 128).all()
    err = lambda p: np.abs(p[moded].astype(float) - case.truth[moded]).mean()  # noqa: E731
    assert err(res_plate) < err(off)


def test_the_cropped_blurs_give_the_values_of_the_whole_image_bit_for_bit():
    """The speed-ups of ``local_background`` (blurs over the box of the pixels still needed, columns from a multiple
    of 16) and ``spread_near`` (blurs only near the known pixels) must not change a plate: the pixels read hold the
    same float32 values as with the blurs over the whole image, for regions anywhere (borders included)."""
    from real2sim.capture.plate_background import local_background, spread_near

    rng = np.random.default_rng(5)
    image = (rng.random((122, 163, 3)) * 255).astype(np.float32)
    for _ in range(40):
        y0, x0 = int(rng.integers(0, 110)), int(rng.integers(0, 150))
        dev = np.zeros(image.shape[:2], bool)
        dev[y0:y0 + int(rng.integers(2, 60)), x0:x0 + int(rng.integers(2, 80))] = True
        dev &= rng.random(dev.shape) < 0.9
        full = local_background(image, ~dev, need=dev)
        crop = local_background(image, ~dev, need=dev, crop=True)
        assert np.array_equal(full[dev], crop[dev])
        assert np.array_equal(local_background(image, dev, scales=(2.0, 6.0)), spread_near(image, dev, (2.0, 6.0)))


def test_the_regions_boxes_are_scipys_boxes():
    """The seams group regions by their boxes (``_label_boxes``, made without scipy): the boxes must be those of
    ``scipy.ndimage.find_objects`` (labels missing in between, single pixels, regions along the borders), or plates
    change."""
    from scipy.ndimage import find_objects

    from real2sim.capture.plate_background import _label_boxes

    rng = np.random.default_rng(3)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 50, 2))
        lab = rng.integers(0, int(rng.integers(1, 12)), (h, w)).astype(np.int32)
        lab[rng.random((h, w)) < rng.random()] = 0
        assert _label_boxes(lab, int(lab.max())) == find_objects(lab)


def test_a_blur_over_a_region_of_the_image_gives_the_whole_images_values_bit_for_bit():
    """``_roi_blur`` (OpenCV's blur over a region, the pixels around it read from the image) gives the values of the
    blur of the whole image there when the region's columns start on a multiple of 16 and span a multiple of 16 or
    end at the image's border; ``local_background``'s crops rely on it (the plates must not change)."""
    import cv2

    from real2sim.capture.plate_background import _roi_blur

    rng = np.random.default_rng(7)
    for channels, sigma in ((1, 2.0), (3, 6.0), (3, 18.0)):
        image = (rng.random((122, 163, channels)) * 255).astype(np.float32).squeeze()
        full = cv2.GaussianBlur(image, (0, 0), sigma)
        for _ in range(30):
            a, c = int(rng.integers(0, 120)), int(rng.integers(0, 160)) // 16 * 16
            b, d = min(122, a + int(rng.integers(1, 60))), min(163, c + 16 * int(rng.integers(1, 5)))
            assert np.array_equal(_roi_blur(image, ((a, b), (c, d)), sigma), full[a:b, c:d])


def test_the_seams_over_the_regions_box_are_those_over_the_whole_image_bit_for_bit():
    """``region_seams`` measures over the regions' box plus a small margin (a piece image's pieces in groups, each
    over its group's box): the same float32 seams as over the whole image, for regions anywhere (borders included)
    and frames as the plate sees them (area-averaged 8-bit levels); the plates must not change."""
    import cv2

    from real2sim.capture.plate_background import _seams, region_seams

    rng = np.random.default_rng(11)
    frame, anchor = (cv2.resize(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8).astype(np.float32), (163, 122),
                                interpolation=cv2.INTER_AREA) for _ in range(2))
    for _ in range(30):
        regions = np.zeros(frame.shape[:2], bool)
        for _ in range(int(rng.integers(1, 4))):
            y0, x0 = int(rng.integers(0, 118)), int(rng.integers(0, 159))
            regions[y0:y0 + int(rng.integers(3, 40)), x0:x0 + int(rng.integers(3, 50))] = True
        regions &= rng.random(regions.shape) < 0.95
        m = regions.astype(np.uint8)
        lab, s_f, s_a, k = region_seams(frame, anchor, regions)
        whole = _seams(frame, anchor, m, m == 0, lab, k, 2)
        assert np.array_equal(s_f, whole[0]) and np.array_equal(s_a, whole[1])
        _, p_f, p_a, _ = region_seams(frame, anchor, regions, labels=lab)  # each against the outside only
        for i in range(1, k):
            one = (lab == i).astype(np.uint8)
            f1, a1 = _seams(frame, anchor, one, ~regions, one.astype(np.int32), 2, 2)
            assert p_f[i] == f1[1] and p_a[i] == a1[1]


def test_the_exposure_gains_as_lookup_tables_give_the_frames_the_gains_give():
    """The gains are applied inside the estimator as per-level tables, composed with the tone curves (one lookup
    per frame instead of a product and a lookup): the same frames as ``apply_gains`` and then the curves, for any
    gains (every level at many positions of the image, unit gains left as they are)."""
    from real2sim.capture.plate import apply_gains, gain_luts
    from real2sim.capture.plate_background import apply_tone

    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (6, 37, 61, 3), dtype=np.uint8)
    frames[:, 0, :, :] = np.arange(61)[None, :, None] * 4  # the levels 0..240 and 255 in every channel
    frames[:, 1, :, :] = 255
    gains = rng.uniform(0.6, 1.6, (6, 3)).astype(np.float32)
    gains[0] = 1.0
    gains[1, 0] = 1.000001  # within apply_gains' tolerance of 1
    curves = np.clip(np.arange(256, dtype=np.float32)[None, :, None] * rng.uniform(0.8, 1.2, (6, 1, 3)) + 3, 0, 255)
    gained = apply_gains(frames, gains)
    luts = gain_luts(gains)
    assert np.array_equal(apply_tone(frames, None, luts), gained)
    assert np.array_equal(apply_tone(frames, curves, luts), apply_tone(gained, curves))


@pytest.mark.parametrize("plate, seed", [("open_drawer_a0", 103), ("open_drawer_b0", 106)])
def test_a_robot_shadow_over_part_of_the_clip_is_not_taken_for_the_background(shared_data, plate, seed):
    """A WidowX rendered over a real plate, its cast shadow over a textured bin for seven of 16 frames; the plate
    made as the bundle stage makes it (the robot's masks given, regions told apart in the rest). The lit bin, the
    median's, was taken for a ghost and replaced by the shadowed frames' median: the plate was no better than the
    plain median (-0.04 and +0.16 dB; +0.56 and +0.09 since the way back to frame 0's tone is fitted on the pixels
    that frame shows the background in: still short of the issue's 1 dB). A replacement that is the anchor darkened
    alike in every channel with its texture kept is a shadow (``PlateConfig.ghost_shade``): the anchor stays, and
    the plate beats the median by 4.3-5.5 dB."""
    import cv2

    from real2sim.demos.plate_cases import real_plates
    from real2sim.demos.robot_clips import make_robot_clip

    plates = real_plates(shared_data)
    if plate not in plates:
        pytest.skip(f"the {plate} plate is not in the shared data")
    clip = make_robot_clip(plates[plate], n_frames=16, seed=seed)
    masks = np.stack([cv2.dilate(m.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0 for m in clip.masks])
    truth = gain_to(clip.plate[None], clip.frames[0])[0]  # at frame 0's exposure (the plate's)
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, masks, PlateConfig(detect_with_masks=True, ghost_shade=0.0))[0], truth)
    now = psnr(make_plate(clip.frames, masks, PlateConfig(detect_with_masks=True))[0], truth)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert now > median + 3.0, (now, median, before)


def _table(rng, h: int = 96, w: int = 128) -> np.ndarray:
    """A brown table with grain: ``(h, w, 3) float32`` levels."""
    import cv2

    grain = cv2.GaussianBlur(rng.normal(0, 1, (h, w)).astype(np.float32), (0, 0), 1.5)
    grain *= 18 / grain.std()
    return np.clip(np.array([170, 130, 95], np.float32) + grain[..., None], 0, 255)


def _soft_ellipse(h: int, w: int, centre, axes) -> np.ndarray:
    """``(h, w) float32`` in [0, 1]: an ellipse with a blurred (penumbra) edge."""
    import cv2

    m = np.zeros((h, w), np.uint8)
    cv2.ellipse(m, centre, axes, 20, 0, 360, 1, -1)
    return cv2.GaussianBlur(m.astype(np.float32), (0, 0), 1.5)


def _clip(rng, table: np.ndarray, over: np.ndarray, n: int = 12, covered: int = 9) -> np.ndarray:
    """``n`` noisy frames of ``table``; ``over`` ``(h, w, 3)`` (what lingers) in the first ``covered`` of them, and a
    bright square passing elsewhere in every frame."""
    frames = np.repeat(table[None], n, 0)
    frames[:covered] = over
    for t in range(n):
        frames[t, 70:84, 4 + 9 * t:18 + 9 * t] = [235, 235, 230]
    return np.clip(frames + rng.normal(0, 2, frames.shape), 0, 255).round().astype(np.uint8)


def test_a_cast_shadow_in_most_frames_is_lifted_from_the_plate():
    """A shadow over the table (60 % of the light, alike in every channel, a soft edge) in 9 of 12 frames, as a
    robot's where its arm stays; in the other 3 it lies next to that place (the arm moved on). The frames showing
    the place lit differ from the median there and where the shadow went, one region whose side the plate could
    not tell: it kept the shadow (within 3 dB of the median there). Those frames show the place brighter alike in
    every channel with the table's grain, continuing the table around it: the plate takes them
    (``PlateConfig.shadow_lift``) and marks the pixels for review. (The foreign majority alone takes them too: the
    shadow's darker brown is a colour seen in front; and the later ghost passes' undoing takes part of them: the
    "before" state has none of the three, the lift is checked alone.)"""
    rng = np.random.default_rng(5)
    table = _table(rng)
    shades = [1.0 - 0.4 * _soft_ellipse(96, 128, (50 if t < 9 else 95, 35), (30, 14)) for t in range(12)]
    frames = np.clip(table[None] * np.stack(shades)[..., None] + rng.normal(0, 2, (12, 96, 128, 3)), 0, 255)
    frames = frames.round().astype(np.uint8)
    truth = table.round().astype(np.uint8)
    region = shades[0] < 0.95
    median = psnr(plain_median(frames), truth, region)
    alone = {"foreign_majority": 0, "ghost_pass_foreign": 0, "peel_reach_ghost": 0.0}
    before = psnr(make_plate(frames, None, PlateConfig(shadow_lift=0, **alone))[0], truth, region)
    plate, conf, report = make_plate(frames, None, PlateConfig(**alone))  # the lift alone
    assert before < median + 3.0, "the case no longer shows the failure"
    assert psnr(plate, truth, region) > before + 8.0, (psnr(plate, truth, region), median, before)
    assert psnr(make_plate(frames)[0], truth, region) > before + 8.0
    # (a few of those pixels, where one frame alone showed them lit, the one-frame ghost step takes first)
    taken = report["shadow_lifted_fraction"] + report.get("ghost_one_frame_fraction", 0.0)
    assert taken > 0.5 * (region & (shades[-1] > 0.95)).mean()
    lifted = (shades[0] < 0.7) & (shades[-1] > 0.99)
    assert (conf[lifted] == 128).mean() > 0.9  # decided by a minority of the frames: reported


def test_a_lighter_thing_over_a_lingering_one_is_not_a_lifted_shadow():
    """A dark grey thing with its own shading lingers in 9 of 12 frames; in the other 3 a lighter grey thing with
    the same shading covers the same place (one robot link after another). Brighter alike in every channel,
    textured alike, but with its own outline: it does not continue the table around it, so it is no shadow taken
    off, and the plate stays the one made without the lift."""
    rng = np.random.default_rng(6)
    table = _table(rng)
    inside = (_soft_ellipse(96, 128, (60, 35), (30, 14)) > 0.5)[..., None]
    ramp = np.linspace(0.8, 1.2, 128, dtype=np.float32)[None, :, None]
    dark = table * (1 - inside) + inside * 70 * ramp
    light = table * (1 - inside) + inside * 95 * ramp
    frames = _clip(rng, table, dark)
    frames[9:] = np.clip(light + rng.normal(0, 2, light.shape), 0, 255).round().astype(np.uint8)
    frames[9:, 70:84] = _clip(rng, table, dark)[9:, 70:84]
    off = make_plate(frames, None, PlateConfig(shadow_lift=0))[0]
    plate, conf, report = make_plate(frames)
    assert report["shadow_lifted_fraction"] == 0.0
    assert np.array_equal(plate, off)


def test_a_widowx_shadow_lingering_over_the_floor_is_lifted(shared_data):
    """The one-command benchmark's WidowX clip over open_drawer_b2 (16 frames; made as with a calibrated camera
    whose pose is unknown: no robot masks): the arm's cast shadow lies on the floor in 12 of the frames, and the
    plate held it (+0.86 dB over the median, under the +1 dB bar, before the lift and the per-level threshold;
    +1.03 with the per-level threshold alone; the foreign majority alone clears it too: off in the "before"
    state); lifted, it is well over the bar."""
    from real2sim.demos.plate_cases import real_plates
    from real2sim.demos.robot_clips import make_robot_clip

    plates = real_plates(shared_data)
    if "open_drawer_b2" not in plates:
        pytest.skip("the open_drawer_b2 plate is not in the shared data")
    clip = make_robot_clip(plates["open_drawer_b2"], seed=100 + sorted(plates).index("open_drawer_b2"))
    truth = gain_to(clip.plate[None], clip.frames[0])[0]
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, None, PlateConfig(shadow_lift=0, level_noise_floor=1.0,
                                                            foreign_majority=0))[0], truth)
    now = psnr(make_plate(clip.frames)[0], truth)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert now > median + 2.5, (now, median, before)


def test_the_core_of_a_close_up_arms_soft_shadow_is_lifted(shared_data):
    """The WidowX close to the camera (the Bridge camera at twice its focal length) over open_drawer_b0, 16 frames,
    no masks: the arm's soft cast shadow lies on the bright floor in about half the frames, its penumbra around it
    in most of the rest, so the lit core steps against the plate's still-shaded surroundings (2.3 times the plate's
    own step at its outline, where a shadow that continues them steps under half of it): kept, the plate was 0.4 dB
    under the median. Lifted when its lit colours are not the things seen in front's (``shadow_lift_core``,
    ``shadow_lift_foreign``), the plate is well over the median."""
    from real2sim.core.camera import Camera
    from real2sim.demos.plate_cases import real_plates
    from real2sim.demos.robot_clips import bridge_camera, make_robot_clip

    plates = real_plates(shared_data)
    if "open_drawer_b0" not in plates:
        pytest.skip("the open_drawer_b0 plate is not in the shared data")
    h, w = plates["open_drawer_b0"].shape[:2]
    cam = bridge_camera(w, h)
    K = np.array(cam.K, float)
    K[0, 0] *= 2.0
    K[1, 1] *= 2.0
    clip = make_robot_clip(plates["open_drawer_b0"], camera=Camera(w, h, K, cam.T_world_camera), seed=302)
    truth = gain_to(clip.plate[None], clip.frames[0])[0]
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, None, PlateConfig(shadow_lift_core=0))[0], truth)
    plate, _, report = make_plate(clip.frames)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert psnr(plate, truth) > median + 3.0, (psnr(plate, truth), median, before)
    assert report["shadow_lifted_fraction"] > 0.01


def _google_head_clip(shared_data, plate: str, seed: int):
    """The one-command benchmark's clip of the Google Robot seen from its head camera over ``plate`` (16 frames)
    and the true background at frame 0's exposure; skips when the plate is not in the shared data."""
    from real2sim.demos.plate_cases import real_plates
    from real2sim.demos.robot_clips import make_robot_clip, mounted_camera

    plates = real_plates(shared_data)
    if plate not in plates:
        pytest.skip(f"the {plate} plate is not in the shared data")
    h, w = plates[plate].shape[:2]
    clip = make_robot_clip(plates[plate], seed=seed, robot="google_robot", camera=mounted_camera("google_robot", w, h))
    return clip, gain_to(clip.plate[None], clip.frames[0])[0]


def test_a_ghost_whose_frames_show_the_arm_passing_is_put_back(shared_data, google_robot_description):
    """The Google Robot from its head camera over open_drawer_c2 (the one-command benchmark's clip, 16 frames, made
    without masks as with a camera whose pose is unknown): the arm lingers at the image's top right. The place it
    left and the place it moved to were one region called a ghost, and 1050 pixels the median had right (the
    laptop) took the arm's white from the frames that showed it there: +0.55 dB over the median. Those new colours
    are far more like the things seen in front than the median's (``PlateConfig.ghost_foreign``): put back. (The
    foreign majority alone clears the bar here too, and the later passes' undoing takes it to +1.17: off in the
    "before" state.)"""
    clip, truth = _google_head_clip(shared_data, "open_drawer_c2", 143)
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, None, PlateConfig(ghost_foreign=0, foreign_majority=0,
                                                            ghost_pass_foreign=0))[0], truth)
    plate, conf, report = make_plate(clip.frames)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert psnr(plate, truth) > median + 5.0, (psnr(plate, truth), median, before)
    assert report["ghost_foreign_fraction"] > 0.005


def test_the_arbiter_does_not_continue_a_lingering_arm(shared_data, google_robot_description):
    """The Google Robot from its head camera over open_drawer_a0 (the one-command benchmark's clip, 16 frames, made
    without masks as with a camera whose pose is unknown): the arm lingers at the image's top right in most frames,
    so the well-decided plate beside the dark table edge is the arm's grey, and the spatial arbiter, picking the
    frames that continue the surroundings, took the grey arm there (7 frames) over the edge (6 frames): +0.90 dB
    over the median, under the bar of 1 (before the per-level threshold too, which alone gives +1.43, and the
    foreign majority, which alone gives +2.49, and the arbiter's spread check, which alone gives +1.06). Those
    colours are far more like the things seen in front than the plate where every frame agrees with it
    (``PlateConfig.arbiter_foreign``): not taken."""
    clip, truth = _google_head_clip(shared_data, "open_drawer_a0", 141)
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, None, PlateConfig(arbiter_foreign=0, level_noise_floor=1.0,
                                                            foreign_majority=0, arbiter_spread=0,
                                                            peel_reach_ghost=0.0))[0], truth)
    plate = make_plate(clip.frames)[0]
    assert before < median + 1.0, "the case no longer shows the failure"
    assert psnr(plate, truth) > median + 1.2, (psnr(plate, truth), median, before)


def test_an_arbiter_pick_must_beat_the_plate_by_more_than_its_surroundings_spread(shared_data):
    """google_a0_many_60 (60 frames of the Google Robot over open_drawer_a0) through camera look 0 (a tone curve
    ``x ** 1.68`` that crushes the shadows, saturation 0.58): where the frames agreeing with the median are no
    majority, the spatial arbiter took the robot's dark grey (about (64, 55, 50)) in parts whose background is
    (108, 92, 85), because the prediction spread from the plate around them is as dark, (65, 54, 48): -0.37 dB
    against the median. A pick must now beat the plate by more than the spread of the colours that make the
    prediction (``PlateConfig.arbiter_spread``): +1.8. (The mode on the noise's scale, ``mixed_mode_levels``, takes
    the "before" from -0.37 to +0.16; it is turned off there too.)"""
    from real2sim.demos.plate_cases import plate_cases, through_another_camera

    cases = plate_cases(shared_data, ["google_a0_many_60"])
    if not cases:
        pytest.skip("the open_drawer_a0 overlay (google_a0_many_60's plate) is not in the shared data")
    c = through_another_camera(cases[0], 0)
    median = psnr(plain_median(c.frames), c.truth, c.valid)
    before = psnr(make_plate(c.frames, None, PlateConfig(arbiter_spread=0, mixed_mode_levels=False))[0], c.truth, c.valid)
    assert before < median, "the case no longer shows the failure"
    assert psnr(make_plate(c.frames)[0], c.truth, c.valid) > median + 1.0


def test_a_black_arm_beside_a_black_post_is_not_taken_for_the_post(shared_data):
    """The one-command benchmark's WidowX clip over open_drawer_a0 (16 frames, no robot masks) through camera look 1
    (a tone curve that crushes the blacks: the post is (0, 0, 0), the arm mostly 1-4 levels): where the arm passes the
    post in 3 of the frames, strips of it beside the post continue the post, were called the background behind a
    ghost pixel by pixel and replaced the wall that 13 frames show: -2.7 dB against the median. Near black such a
    part must also be set apart from the rest of its region (``PlateConfig.dark_part_seam``); the strips are not.
    The checks over whole parts with fine dark bins (``PlateConfig.foreign_fine_dark``) turn the strips down too:
    each of the two alone holds the case."""
    from real2sim.demos.plate_cases import real_plates, robot_clip_through_another_camera
    from real2sim.demos.robot_clips import make_robot_clip

    plates = real_plates(shared_data)
    if "open_drawer_a0" not in plates:
        pytest.skip("the open_drawer_a0 plate is not in the shared data")
    clip = make_robot_clip(plates["open_drawer_a0"], n_frames=16, seed=100 + sorted(plates).index("open_drawer_a0"))
    clip = robot_clip_through_another_camera(clip, "open_drawer_a0, 1 objects", 1)
    truth = gain_to(clip.plate[None], clip.frames[0])[0]
    median = psnr(plain_median(clip.frames), truth)
    before = psnr(make_plate(clip.frames, None, PlateConfig(dark_part_seam=0, foreign_fine_dark=False))[0], truth)
    assert before < median, "the case no longer shows the failure"
    assert psnr(make_plate(clip.frames)[0], truth) > median + 1.0, (median, before)
    for alone in (PlateConfig(dark_part_seam=0), PlateConfig(foreign_fine_dark=False)):
        assert psnr(make_plate(clip.frames, None, alone)[0], truth) > median + 1.0, alone


def test_what_one_frame_shows_behind_an_arm_still_in_the_others_is_taken(shared_data):
    """held2_arm_top_few_7 (the plate benchmark's second held-out list, never tuned on): an arm from the top
    border still in 6 of 7 frames is the median; only frame 0 shows the wall behind it, and a ghost needed 2
    frames: +0.34 dB over the median. The median's colours there are far more like the things seen in front than
    frame 0's (``PlateConfig.ghost_one_frame``): frame 0's are taken, and reported as undecided."""
    from real2sim.demos.plate_cases import plate_cases

    cases = plate_cases(shared_data, ["held2_arm_top_few_7"], held_out=2)
    if not cases:
        pytest.skip("the open_drawer_a0 plate (held2_arm_top_few_7's) is not in the shared data")
    c = cases[0]
    median = psnr(plain_median(c.frames), c.truth, c.valid)
    before = psnr(make_plate(c.frames, None, PlateConfig(ghost_one_frame=0))[0], c.truth, c.valid)
    plate, conf, report = make_plate(c.frames)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert psnr(plate, c.truth, c.valid) > median + 1.3, (psnr(plate, c.truth, c.valid), median, before)
    assert report["ghost_one_frame_fraction"] > 0.005


def test_the_threshold_follows_the_noise_at_each_level_through_a_crushing_tone_curve(shared_data):
    """The real Bridge clip and its truth through a camera whose tone curve crushes the shadows (``x ** 1.5``):
    the dark levels' noise and contrast shrink alike, and one threshold for every level, set by the bright table's
    noise, left the black arm over the dark wall in the plate (0.00 dB over the median, 4.18 as recorded). The
    threshold follows the noise at each pixel's level (``PlateConfig.level_noise_floor``): +3.5 dB. (The check of
    dark parts, ``dark_part_seam``, alone gives +1.2 here; the "before" turns it off too.)"""
    from real2sim.demos.plate_cases import plate_cases

    cases = plate_cases(shared_data, ["bridge_real_1"])
    if not cases:
        pytest.skip("bridge_real_1.mp4 or its cleanup is not in the shared data")
    c = cases[0]

    def crushed(x: np.ndarray) -> np.ndarray:
        return np.clip(np.round(255.0 * (x.astype(np.float32) / 255.0) ** 1.5), 0, 255).astype(np.uint8)

    frames, truth = crushed(c.frames), crushed(c.truth)
    median = psnr(plain_median(frames), truth, c.valid)
    before = psnr(make_plate(frames, None, PlateConfig(level_noise_floor=1.0, dark_part_seam=0))[0], truth, c.valid)
    assert before < median + 1.0, "the case no longer shows the failure"
    assert psnr(make_plate(frames)[0], truth, c.valid) > median + 3.0


@pytest.mark.realdata
def test_the_plate_takes_the_reference_frames_tone_from_the_pixels_it_shows_the_background_in(shared_data):
    """A low-contrast clip whose exposure drifts (``google_c0_low_contrast``): the frames go through tone curves onto
    their median's tone and the plate comes back to the first frame's. That way back is fitted on the pixels where
    the first frame shows the background, at full resolution: the first frame's own curve (every roughly agreeing
    pixel at the detection resolution, foreground edges included) put its error into every pixel of the plate,
    0.96 levels RMS against the truth over the pixels no frame occludes."""
    from real2sim.demos.plate_cases import plate_cases

    cases = plate_cases(shared_data, ["google_c0_low_contrast"])
    if not cases:
        pytest.skip(f"google_robot/overlays/open_drawer_c0 not in {shared_data}")
    case = cases[0]
    truth = case.truth.astype(float)
    clean = (np.abs(case.frames.astype(float) - truth).mean(-1) < 12).all(0)
    plate = make_plate(case.frames, case.masks)[0].astype(float)
    err = (plate - truth)[clean]
    assert clean.mean() > 0.3
    assert np.sqrt((err ** 2).mean()) < 0.75, np.sqrt((err ** 2).mean())
    assert abs(err.mean()) < 0.2, err.mean()


def _closeup_clip(shared_data):
    """The WidowX close to the camera (``ClipSpec.zoom`` 2.6, up to a third of the image), 12 frames over the real
    cubes plate; skips when the plate is not in the shared data."""
    from real2sim.demos.plate_cases import ClipSpec, real_plates, synth_clip

    plates = real_plates(shared_data)
    if "stack_cube_plate" not in plates:
        pytest.skip(f"bridge/stack_cube_plate.png not in {shared_data}")
    return synth_clip("closeup", plates["stack_cube_plate"], ClipSpec("widowx", 12, noise=3.0, zoom=2.6, seed=63))


@pytest.mark.realdata
def test_a_dark_arm_close_to_the_camera_gives_way_to_the_frames_that_show_the_wall(shared_data):
    """The WidowX close to the camera (``ClipSpec.zoom`` 2.6, up to a third of the image), 12 frames over the real
    cubes plate: its black upper arm covers the top corner in most frames. Those frames agree with each other
    there, so the median and the plate were the arm and its moving outline left the regions undecided (the plate
    no better than the median: -0.08 dB). Where the plate's colour is the things seen in front and the frames that
    show the background agree with each other (``PlateConfig.foreign_majority``), they win: +4.31 dB."""
    case = _closeup_clip(shared_data)
    assert case.occluder_masks.mean((1, 2)).max() > 0.25
    median = psnr(plain_median(case.frames), case.truth)
    without = make_plate(case.frames, None, PlateConfig(foreign_majority=0))[0]
    # (the later passes' reach to the ghost's width peels part of the arm too: off for the failure)
    before = psnr(make_plate(case.frames, None, PlateConfig(foreign_majority=0, peel_reach_ghost=0.0))[0], case.truth)
    now, conf = make_plate(case.frames)[:2]
    assert before < median + 0.3, "the case no longer shows the failure"
    assert psnr(now, case.truth) > median + 3.0, (psnr(now, case.truth), median, before)
    # what the step replaced (more than 10 levels: the way back to the first frame's tone moves every pixel a level)
    changed = np.abs(now.astype(int) - without).max(-1) > 10
    assert changed.mean() > 0.05
    assert (conf[changed] == 128).all()  # a minority of the frames decided them: reported, not confident


def _closeup_clip_with_a_still_object(shared_data):
    """The close-up WidowX clip above with a still object's mask in every frame (a prompted object that never
    moves, away from the arm): ``(case, masks, outside)``, ``outside`` the pixels the plate is scored on (the
    object's place and its inpainting margin left out)."""
    case = _closeup_clip(shared_data)
    n, h, w = case.frames.shape[:3]
    still = np.zeros((h, w), bool)
    still[h - 40:h - 10, 10:40] = True  # bottom left: the arm covers the top corner
    assert not (case.occluder_masks[:, still]).any()
    outside = np.ones((h, w), bool)
    outside[h - 50:, :50] = False
    return case, np.repeat(still[None], n, 0), outside


@pytest.mark.realdata
def test_the_dark_arm_gives_way_with_the_still_objects_masks_given(shared_data):
    """The same close-up clip with a prompted object that never moves (its masks given, as the one-command capture
    gives them when the camera pose is unknown and the robot is left to the plate): the foreign majority runs
    with those masks too (``foreign_majority_with_masks``); without it the plate was no better than the median
    (the real clip through a 2x close-up crop, intrinsics only: +1.58 -> +3.37 dB over the median, less the still
    objects)."""
    case, masks, outside = _closeup_clip_with_a_still_object(shared_data)
    median = psnr(plain_median(case.frames), case.truth, outside)
    cfg = PlateConfig(detect_with_masks=True)
    before = psnr(make_plate(case.frames, masks, replace(cfg, peel_reach_ghost=0.0))[0], case.truth, outside)
    now = psnr(make_plate(case.frames, masks, replace(cfg, foreign_majority_with_masks=True))[0], case.truth, outside)
    assert before < median + 0.5, "the case no longer shows the failure"
    assert now > median + 3.0, (now, median, before)


@pytest.mark.realdata
def test_the_plate_stage_takes_the_foreign_majority_only_when_the_robot_is_left_to_it(shared_data, tmp_path):
    """The bundle stage sets ``foreign_majority_with_masks`` when the masks it gives are the objects' only: with a
    mask of the robot among them (what the masks leave of a thing in front, its edges and shadow, is no measure
    of its colours) it does not."""
    from real2sim.capture import init_bundle, plate_stage
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_mask, write_rgb

    case, masks, _ = _closeup_clip_with_a_still_object(shared_data)
    for i, f in enumerate(case.frames):
        write_rgb(tmp_path / "frames" / f"{i:03d}.png", f)

    def stage_report(entities):
        b = init_bundle(tmp_path / "-".join(entities), tmp_path / "frames")
        for i in range(len(case.frames)):
            key = f"{i:06d}"
            for ent in entities:
                m = masks[i] if ent == "cube" else case.occluder_masks[i]
                write_mask(b.path(f"masks/{key}/{ent}.png"), m)
                b.manifest.capture.masks.setdefault(key, {})[ent] = f"masks/{key}/{ent}.png"
                b.manifest.capture.mask_states.setdefault(key, {})[ent] = "rest" if ent == "cube" else "moved"
        b.save()
        plate_stage(Bundle.load(b.root))
        return json.loads(b.path("reports/plate.json").read_text())

    assert "foreign_majority_fraction" in stage_report(["cube"])
    assert "foreign_majority_fraction" not in stage_report(["cube", "robot"])


def _black_arm_over_a_lit_floor(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """30 frames 160x120: a dark wall beside a lit, grainy floor; a black arm over the floor in 13 frames (shifted by
    up to 3 px), and sensor noise that grows with the light (0.3 + 0.05 x the level: about 8 levels on the floor,
    1 on the arm). Returns (frames, truth, the pixels the arm covers in every frame it is in)."""
    rng = np.random.default_rng(seed)
    h, w, n = 120, 160, 30
    bg = np.empty((h, w, 3), np.float32)
    bg[:] = (22, 20, 18)
    bg[:, 60:] = (150, 100, 50)
    bg[:, 60:] += rng.normal(0, 6, (h, w - 60, 1)).astype(np.float32)
    linger = set(rng.permutation(n)[:13].tolist())
    frames = []
    for t in range(n):
        f = bg.copy()
        if t in linger:
            dy = int(rng.integers(-3, 4))
            f[30 + dy:90 + dy, 95:145] = (10, 10, 9)
        f = f + rng.normal(0, 1, f.shape) * (0.3 + 0.05 * f)
        frames.append(np.clip(f, 0, 255).round().astype(np.uint8))
    region = np.zeros((h, w), bool)
    region[33:87, 98:142] = True
    return np.stack(frames), np.clip(bg, 0, 255).round().astype(np.uint8), region


@pytest.mark.parametrize("seed", [0, 1])
def test_a_black_arm_over_a_noisy_lit_floor_is_not_the_plate_where_the_median_is_a_mix(seed):
    """A sensor's noise grows with the light: the floor's frames (17 of 30) spread over +-20 levels where the black
    arm's (13) agree within 2, so the frames that agree with the median are no majority. On the levels themselves
    the largest set of frames that agree with each other was the arm's (the floor's fall into small sets): the plate
    was speckled with the arm over the floor (150-210 px, mean error 16-19 levels there; the plain median 9.5).
    The set is now found on a scale where the noise is the same at every level
    (``PlateConfig.mixed_mode_levels``): not one pixel of the arm, under the median's error."""
    frames, truth, region = _black_arm_over_a_lit_floor(seed)

    def err(p: np.ndarray) -> float:
        return float(np.abs(p.astype(int) - truth.astype(int)).max(-1)[region].mean())

    median = err(plain_median(frames))
    before = make_plate(frames, None, PlateConfig(mixed_mode_levels=False))[0]
    assert err(before) > median and (before[region].max(-1) < 60).sum() > 100, "the case no longer shows the failure"
    plate = make_plate(frames)[0]
    assert err(plate) < 0.7 * median
    assert (plate[region].max(-1) >= 60).all()


def test_the_noise_is_measured_at_each_level():
    """A grey ramp under noise that grows with the light (1 + 0.04 x the level) and under an even noise: the noise
    measured at one level over that at another follows the true ratio within 20 % (the plate's tolerances lean on
    it), and the scale built on it keeps the levels' order."""
    from real2sim.capture.plate_background import level_scale, noise_levels

    rng = np.random.default_rng(5)
    ramp = np.repeat(np.linspace(20, 230, 320, dtype=np.float32)[None, :, None], 240, 0).repeat(3, -1)
    for growth in (0.04, 0.0):
        sd = 1.0 + growth * ramp
        frames = np.clip(ramp + rng.normal(0, 1, (12,) + ramp.shape) * sd, 0, 255).round().astype(np.uint8)
        noise = noise_levels(frames, np.clip(ramp.round(), 0, 255).astype(np.uint8))
        for lo, hi in ((40, 120), (40, 200), (120, 200)):
            want = (1.0 + growth * hi) / (1.0 + growth * lo)
            for c in range(3):
                assert abs(noise[c, hi] / noise[c, lo] / want - 1) < 0.2, (growth, c, lo, hi, noise[c, [lo, hi]])
        assert (np.diff(level_scale(noise), axis=1) > 0).all()
