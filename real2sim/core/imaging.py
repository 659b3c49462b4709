"""Image I/O in the project convention: uint8 RGB PNG on disk, float32 [0, 1] in compute.

Masks are single-channel PNG with values 0/255 on disk and ``bool`` arrays in memory.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from real2sim.core.errors import CaptureError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def read_rgb(path) -> np.ndarray:
    """Read an image file as ``(h, w, 3) uint8`` RGB (alpha dropped, grey expanded)."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such image file; check the path") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise CaptureError(f"{path}: cannot be read as an image ({exc}); re-export it as PNG or JPEG") from exc


def write_rgb(path, image: np.ndarray) -> None:
    """Write ``(h, w, 3)`` uint8 RGB (or float in [0, 1]) as PNG, atomically."""
    import io

    from PIL import Image

    from real2sim.core.bundle import atomic_write_bytes

    img = to_uint8(image)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    atomic_write_bytes(Path(path), buf.getvalue())


def read_mask(path, shape: tuple[int, int] | None = None) -> np.ndarray:
    """Read a single-channel mask PNG as ``(h, w) bool`` (> 127 is inside)."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as im:
            m = np.asarray(im.convert("L")) > 127
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such mask file; check the path") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise CaptureError(f"{path}: cannot be read as a mask image ({exc}); masks are single-channel PNG 0/255") from exc
    if shape is not None and m.shape != tuple(shape):
        raise CaptureError(f"{path}: mask is {m.shape[1]}x{m.shape[0]} but the frames are {shape[1]}x{shape[0]}; "
                           "masks must have the frame size")
    return m


def write_mask(path, mask: np.ndarray) -> None:
    """Write a ``(h, w) bool`` mask as a single-channel PNG 0/255, atomically."""
    import io

    from PIL import Image

    from real2sim.core.bundle import atomic_write_bytes

    buf = io.BytesIO()
    Image.fromarray(np.where(np.asarray(mask, bool), 255, 0).astype(np.uint8), mode="L").save(buf, format="PNG")
    atomic_write_bytes(Path(path), buf.getvalue())


def write_gray(path, image: np.ndarray) -> None:
    """Write a ``(h, w) uint8`` single-channel PNG atomically."""
    import io

    from PIL import Image

    from real2sim.core.bundle import atomic_write_bytes

    buf = io.BytesIO()
    Image.fromarray(np.asarray(image, np.uint8), mode="L").save(buf, format="PNG")
    atomic_write_bytes(Path(path), buf.getvalue())


def to_float(image: np.ndarray) -> np.ndarray:
    """uint8 -> float32 in [0, 1] (float input is passed through as float32)."""
    image = np.asarray(image)
    if image.dtype == np.uint8:
        return image.astype(np.float32) / 255.0
    return image.astype(np.float32, copy=False)


def to_uint8(image: np.ndarray) -> np.ndarray:
    """float in [0, 1] -> uint8 (rounded); uint8 passes through."""
    image = np.asarray(image)
    if image.dtype == np.uint8:
        return image
    return np.clip(np.rint(image.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> float:
    """PSNR in dB between two uint8 (or [0, 1] float) images, optionally over a ``(h, w)`` mask."""
    a, b = to_float(a).astype(np.float64), to_float(b).astype(np.float64)
    diff = (a - b) ** 2
    if mask is not None:
        m = np.asarray(mask, bool)
        if not m.any():
            raise ValueError("psnr: empty mask")
        diff = diff[m]
    mse = float(diff.mean())
    return float("inf") if mse == 0 else float(10.0 * np.log10(1.0 / mse))
