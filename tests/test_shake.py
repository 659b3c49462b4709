"""A camera that shook by a fraction of a pixel to a pixel: its frames are measured and moved back before the plate
(real2sim.capture.shake); a still camera's frames are used as they are."""
import numpy as np
import pytest

from real2sim.capture.plate import PlateConfig, make_plate_full, plain_median
from real2sim.capture.shake import camera_shake, shift_frames
from real2sim.core.imaging import psnr


def _textured_room(h: int = 240, w: int = 320, seed: int = 0) -> np.ndarray:
    """``(h, w, 3) uint8``: a background with edges at every scale (planks, tiles, blotches), like a kitchen."""
    import cv2

    rng = np.random.default_rng(seed)
    base = rng.uniform(40, 210, (h // 8 + 1, w // 8 + 1, 3)).astype(np.float32)
    img = cv2.resize(base, (w, h), interpolation=cv2.INTER_NEAREST)  # tiles
    img += cv2.GaussianBlur(rng.normal(0, 25, (h, w, 3)).astype(np.float32), (0, 0), 3)  # blotches
    img = cv2.GaussianBlur(img, (0, 0), 0.8)  # through a lens: edges a pixel or two wide
    return np.clip(img, 0, 255).astype(np.uint8)


def _clip(n: int, amplitude: float, seed: int = 0, arm_width: int = 40):
    """``(frames, truth, shifts)``: a dark arm sweeping across the room, each frame after the first moved by up to
    +-``amplitude`` px (bicubic), with sensor noise."""
    import cv2

    rng = np.random.default_rng(seed + 1)
    room = _textured_room(seed=seed)
    h, w = room.shape[:2]
    shifts = np.zeros((n, 2))
    shifts[1:] = rng.uniform(-amplitude, amplitude, (n - 1, 2))
    frames = []
    for t, (dx, dy) in enumerate(shifts):
        f = room.copy()
        x0 = int(20 + (w - 40 - arm_width) * t / (n - 1))
        f[40:220, x0:x0 + arm_width] = (30, 32, 35)
        f = cv2.warpAffine(f, np.float32([[1, 0, dx], [0, 1, dy]]), (w, h), flags=cv2.INTER_CUBIC,
                           borderMode=cv2.BORDER_REFLECT)
        frames.append(np.clip(f + rng.normal(0, 2, f.shape), 0, 255).astype(np.uint8))
    return np.stack(frames), room, shifts


def _inner(shape, b: int = 3) -> np.ndarray:
    m = np.zeros(shape[:2], bool)
    m[b:-b, b:-b] = True
    return m


def test_a_shaking_camera_is_measured_to_a_tenth_of_a_pixel():
    frames, _, shifts = _clip(16, 1.0)
    est = camera_shake(frames, 0)
    moved = np.hypot(*est.shifts.T) > 0
    assert moved.sum() >= 10, est.report()
    err = np.hypot(*(est.shifts - shifts)[moved].T)
    assert np.median(err) < 0.1 and err.max() < 0.3, err


def test_the_plate_of_a_shaking_camera_is_the_first_frames_view_not_a_blur():
    frames, room, _ = _clip(16, 1.0)
    inner = _inner(room.shape)
    res = make_plate_full(frames)
    before = make_plate_full(frames, config=PlateConfig(shake_px=0)).plate
    assert res.report["camera_shake_frames_moved"] >= 10
    p_now, p_before = psnr(res.plate, room, inner), psnr(before, room, inner)
    p_median = psnr(plain_median(frames), room, inner)
    assert p_now > p_before + 3 and p_now > p_median + 3, (p_now, p_before, p_median)
    # the foreground of each frame is in that frame's own pixels: the arm's place in the last frame
    arm = np.zeros(room.shape[:2], bool)
    arm[40:220, 20 + (320 - 40 - 40):320 - 20] = True
    fg = res.foreground[-1]
    assert (fg & arm).sum() / arm.sum() > 0.8 and (fg & ~arm).sum() < 0.1 * arm.sum()


def test_a_still_camera_keeps_its_frames_bit_for_bit():
    frames, _, _ = _clip(16, 0.0)
    est = camera_shake(frames, 0)
    assert not est.shifts.any(), est.report()
    a = make_plate_full(frames)
    b = make_plate_full(frames, config=PlateConfig(shake_px=0))
    assert a.report["camera_shake_frames_moved"] == 0
    assert np.array_equal(a.plate, b.plate) and np.array_equal(a.confidence, b.confidence)


def test_a_wide_thing_moving_before_a_still_camera_is_not_taken_for_a_shake():
    frames, _, _ = _clip(12, 0.0, seed=3, arm_width=110)  # a third of the image sweeps across
    assert not camera_shake(frames, 0).shifts.any()


def test_masks_move_with_their_frames():
    m = np.zeros((3, 20, 30), bool)
    m[:, 5:10, 5:10] = True
    shifts = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, -3.0]])
    back = shift_frames(m, shifts)
    assert back[0].sum() == 25 and back[1][5:10, 3:8].all() and back[2][8:13, 5:10].all()
    assert np.array_equal(shift_frames(back, shifts, back=False)[1][5:10, 5:10], m[1][5:10, 5:10])


def test_the_real_bridge_clip_is_from_a_still_camera(shared_data):
    from real2sim.demos.plate_cases import plate_cases

    case = plate_cases(shared_data, ["bridge_real_1"])
    if not case:
        pytest.skip(f"{shared_data}: no bridge_real_1.mp4 with its cleanup")
    assert not camera_shake(case[0].frames, 0).shifts.any()
