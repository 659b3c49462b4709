"""Frames and masks as other cameras and tools write them: unpadded frame numbers, phone photos with an EXIF
rotation, 16-bit grey frames, 0/1 masks."""
from __future__ import annotations

import numpy as np
from PIL import Image

from real2sim.capture.frames import read_image_folder
from real2sim.core.imaging import read_mask, read_rgb


def _frame(value: int) -> np.ndarray:
    return np.full((12, 16, 3), value, np.uint8)


def test_frames_numbered_without_padding_are_read_in_number_order(tmp_path):
    for i in (1, 2, 9, 10, 11, 100):
        Image.fromarray(_frame(i)).save(tmp_path / f"frame_{i}.png")
    src = read_image_folder(tmp_path)
    assert src.names == ["frame_1.png", "frame_2.png", "frame_9.png", "frame_10.png", "frame_11.png", "frame_100.png"]
    assert [int(f[0, 0, 0]) for f in src.frames] == [1, 2, 9, 10, 11, 100]


def test_a_phone_photo_is_read_upright_by_its_exif_orientation(tmp_path):
    """A phone stores the sensor's landscape pixels and an orientation tag; every viewer shows the photo turned."""
    img = np.zeros((20, 40, 3), np.uint8)
    img[:, :10] = (255, 0, 0)  # red on the left of the sensor's image
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to view
    Image.fromarray(img).save(tmp_path / "photo.jpg", exif=exif, quality=95)
    got = read_rgb(tmp_path / "photo.jpg")
    assert got.shape == (40, 20, 3)  # portrait, as shown
    assert got[:10, :, 0].mean() > 200 and got[-10:, :, 0].mean() < 60  # the sensor's left is the top


def test_a_16_bit_grey_frame_keeps_its_range(tmp_path):
    ramp = np.linspace(0, 65535, 16 * 12).reshape(12, 16).astype(np.uint16)
    Image.fromarray(ramp).save(tmp_path / "mono16.png")
    got = read_rgb(tmp_path / "mono16.png")
    assert got.shape == (12, 16, 3)
    assert np.abs(got[..., 1].astype(int) - ramp / 257.0).max() <= 1  # not clipped to white


def test_masks_of_0_1_and_of_16_bits_are_read_as_drawn(tmp_path):
    want = np.zeros((12, 16), bool)
    want[3:8, 4:11] = True
    Image.fromarray(want.astype(np.uint8)).save(tmp_path / "m01.png")
    Image.fromarray(want.astype(np.uint16) * 65535).save(tmp_path / "m16.png")
    Image.fromarray(want.astype(np.uint8) * 255).save(tmp_path / "m255.png")
    for name in ("m01.png", "m16.png", "m255.png"):
        assert np.array_equal(read_mask(tmp_path / name), want), name
