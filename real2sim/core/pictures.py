"""Pictures for the capture reports: labelled tiles, frame contact sheets, mask overlays."""
from __future__ import annotations

import numpy as np


def _label(img: np.ndarray, text: str) -> np.ndarray:
    import cv2

    img = img.copy()
    cv2.rectangle(img, (0, 0), (min(img.shape[1], 10 + 9 * len(text)), 22), (0, 0, 0), -1)
    cv2.putText(img, text, (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1, cv2.LINE_AA)
    return img


def as_rgb(img: np.ndarray) -> np.ndarray:
    """bool/grey/RGB -> uint8 RGB."""
    img = np.asarray(img)
    if img.dtype == bool:
        img = img.astype(np.uint8) * 255
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, -1)
    return img.astype(np.uint8)


def tiles(images, labels=None, cols: int | None = None, tile_width: int = 320) -> np.ndarray:
    """Grid of images (each resized to ``tile_width``) with optional labels; uint8 RGB."""
    import cv2

    images = [as_rgb(i) for i in images]
    labels = labels or [""] * len(images)
    cols = cols or len(images)
    h0, w0 = images[0].shape[:2]
    th = max(1, int(round(tile_width * h0 / w0)))
    out = []
    for img, lab in zip(images, labels):
        t = cv2.resize(img, (tile_width, th), interpolation=cv2.INTER_AREA)
        out.append(_label(t, lab) if lab else t)
    while len(out) % cols:
        out.append(np.zeros_like(out[0]))
    rows = [np.hstack(out[i:i + cols]) for i in range(0, len(out), cols)]
    return np.vstack(rows)


def overlay(image: np.ndarray, mask: np.ndarray, color=(255, 0, 255), alpha: float = 0.45) -> np.ndarray:
    """Image with a mask tinted and outlined."""
    import cv2

    img = as_rgb(image).astype(np.float32)
    m = np.asarray(mask, bool)
    img[m] = img[m] * (1 - alpha) + np.asarray(color, np.float32) * alpha
    out = img.astype(np.uint8)
    cnts, _ = cv2.findContours(m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(out, cnts, -1, tuple(int(c) for c in color), 1)
    return out
