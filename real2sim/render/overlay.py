"""Report pictures: real | render | difference, cropped around the object."""
from __future__ import annotations

import numpy as np


def _crop_box(masks, shape, pad: int):
    m = np.zeros(shape, bool)
    for x in masks:
        m |= np.asarray(x, bool)
    if not m.any():
        return 0, shape[0], 0, shape[1]
    ys, xs = np.nonzero(m)
    y0, y1 = max(ys.min() - pad, 0), min(ys.max() + pad + 1, shape[0])
    x0, x1 = max(xs.min() - pad, 0), min(xs.max() + pad + 1, shape[1])
    return y0, y1, x0, x1


def _u8(img) -> np.ndarray:
    return (np.clip(np.asarray(img, np.float32), 0, 1) * 255 + 0.5).astype(np.uint8)


PANEL_LEGENDS = ("photo", "render over the photo (yellow: the photo's mask)",
                 "|difference| x4; red: photo only, blue: render only")


def overlay_panels(real, render, real_mask, render_mask, pad: int = 24, min_height: int = 320,
                   title: str | None = None) -> np.ndarray:
    """``(h, 3w, 3) uint8``: the real crop | the render composited over the real crop (object outline drawn) |
    the difference (|real - render| x 4 inside the render; mask agreement outside: green both, red real only,
    blue render only). Scaled up to ``min_height`` px; with ``title`` (the stage's numbers), a title band on top
    and a legend under each panel."""
    import cv2

    real = np.asarray(real, np.float32)
    if real.ndim == 2:
        real = np.repeat(real[..., None], 3, -1)
    real_mask, render_mask = np.asarray(real_mask, bool), np.asarray(render_mask, bool)
    y0, y1, x0, x1 = _crop_box([real_mask, render_mask], real.shape[:2], pad)
    r = real[y0:y1, x0:x1, :3]
    rm, sm = real_mask[y0:y1, x0:x1], render_mask[y0:y1, x0:x1]
    comp = r.copy()
    rend = np.asarray(render, np.float32)[y0:y1, x0:x1, :3]
    comp[sm] = rend[sm]
    comp_u8 = _u8(comp)
    cnt, _ = cv2.findContours(rm.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(comp_u8, cnt, -1, (255, 255, 0), 1)
    diff = np.zeros_like(r)
    both = rm & sm
    diff[both] = np.clip(np.abs(r[both] - rend[both]) * 4, 0, 1)
    diff[rm & ~sm] = [1.0, 0.0, 0.0]
    diff[sm & ~rm] = [0.0, 0.3, 1.0]
    panels = np.concatenate([_u8(r), comp_u8, _u8(diff)], 1)
    if panels.shape[0] < min_height:
        s = min_height / panels.shape[0]
        panels = cv2.resize(panels, (int(round(panels.shape[1] * s)), min_height), interpolation=cv2.INTER_NEAREST)
    if title is None:
        return panels
    return titled(panels, title, PANEL_LEGENDS)


def titled(picture: np.ndarray, title: str, legends=()) -> np.ndarray:
    """``picture`` with a dark title band on top (``title``: the numbers it shows) and, when given, one legend
    line per equal-width column under it."""
    import cv2

    w = picture.shape[1]
    font, scale = cv2.FONT_HERSHEY_SIMPLEX, 0.55
    top = np.full((30, w, 3), 32, np.uint8)
    cv2.putText(top, _fit(title, w - 16, scale), (8, 21), font, scale, (255, 255, 255), 1, cv2.LINE_AA)
    rows = [top, picture]
    if legends:
        col = w // len(legends)
        band = np.full((24, w, 3), 32, np.uint8)
        for i, text in enumerate(legends):
            cv2.putText(band, _fit(text, col - 12, 0.42), (i * col + 6, 16), font, 0.42, (220, 220, 220), 1, cv2.LINE_AA)
        rows.append(band)
    return np.concatenate(rows, 0)


def _fit(text: str, width_px: int, scale: float) -> str:
    """``text`` shortened (with '...') to fit ``width_px`` at ``scale``."""
    import cv2

    while len(text) > 4 and cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0] > width_px:
        text = text[:-4] + "..."
    return text
