"""One segmentation interface, several backends.

``segment(image, prompt, plate=None, backend="auto") -> (h, w) bool``

Backends (``BACKENDS``; add one with :func:`register_backend`):

- ``"difference"``: frame minus background plate with morphology; the connected component at the prompt.
  The strongest when a plate exists (needs ``plate``).
- ``"grabcut"``: OpenCV GrabCut from a box, or from clicks (a click first grows a colour-similar region that
  gives GrabCut its initial box and seeds). The default without a plate and without weights.
- ``"sam"``: segment-anything's ``SamPredictor`` with a checkpoint the user supplies
  (``SamBackend(checkpoint=..., model_type="vit_b")``, or env ``REAL2SIM_SAM_CHECKPOINT``).
- ``"auto"``: ``difference`` when a plate is given, else ``grabcut``; also ``grabcut`` when nothing differs from
  the plate at the prompt (an object that never moved is part of a multi-frame plate).

Images are ``(h, w, 3) uint8`` RGB; points are pixel (x, y) in OpenCV convention (top-left pixel centre (0, 0)).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from real2sim.core.errors import SegmentationError, UnknownNameError

log = logging.getLogger(__name__)



@dataclass
class Prompt:
    """What to segment: clicks and/or a box, in pixels."""

    points: list[tuple[float, float]] = field(default_factory=list)
    """Clicked pixels (x, y)."""
    labels: list[int] = field(default_factory=list)
    """1 = on the object, 0 = background; defaults to all 1."""
    box: tuple[float, float, float, float] | None = None
    """Box (x0, y0, x1, y1), inclusive pixel coordinates."""

    def __post_init__(self):
        self.points = [(float(x), float(y)) for x, y in self.points]
        if not self.labels:
            self.labels = [1] * len(self.points)
        self.labels = [int(v) for v in self.labels]
        if len(self.labels) != len(self.points):
            raise SegmentationError(f"Prompt: {len(self.points)} points but {len(self.labels)} labels")
        if any(v not in (0, 1) for v in self.labels):
            raise SegmentationError(f"Prompt: labels must be 1 (object) or 0 (background), got {self.labels}")
        if self.box is not None:
            x0, y0, x1, y1 = (float(v) for v in self.box)
            if x1 <= x0 or y1 <= y0:
                raise SegmentationError(f"Prompt: box {self.box} must be x0,y0,x1,y1 with x1 > x0 and y1 > y0")
            self.box = (x0, y0, x1, y1)
        if not self.points and self.box is None:
            raise SegmentationError("Prompt: give at least one point or a box")

    @property
    def positives(self) -> list[tuple[float, float]]:
        return [p for p, l in zip(self.points, self.labels) if l == 1]

    @property
    def negatives(self) -> list[tuple[float, float]]:
        return [p for p, l in zip(self.points, self.labels) if l == 0]

    def check_inside(self, w: int, h: int) -> None:
        for x, y in self.points:
            if not (-0.5 <= x < w - 0.5 and -0.5 <= y < h - 0.5):
                raise SegmentationError(f"prompt point ({x:g}, {y:g}) is outside the {w}x{h} image")
        if self.box is not None:
            x0, y0, x1, y1 = self.box
            if x1 < 0 or y1 < 0 or x0 > w - 1 or y0 > h - 1:
                raise SegmentationError(f"prompt box {self.box} does not overlap the {w}x{h} image")

    def to_dict(self) -> dict:
        return {"points": [list(p) for p in self.points], "labels": list(self.labels),
                "box": None if self.box is None else list(self.box)}

    @classmethod
    def from_dict(cls, d: dict) -> "Prompt":
        return cls([tuple(p) for p in d.get("points", [])], list(d.get("labels", [])),
                   None if d.get("box") is None else tuple(d["box"]))


class Backend(Protocol):
    def __call__(self, image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None) -> np.ndarray: ...


BACKENDS: dict[str, Callable[..., np.ndarray]] = {}


def register_backend(name: str, fn: Callable[..., np.ndarray]) -> None:
    """Add or replace a backend ``fn(image, prompt, plate=None) -> (h, w) bool``."""
    BACKENDS[name] = fn


def _as_rgb_u8(image, what: str) -> np.ndarray:
    a = np.asarray(image)
    if a.ndim != 3 or a.shape[2] != 3:
        raise SegmentationError(f"{what} must be (h, w, 3) RGB, got shape {a.shape}")
    if a.dtype != np.uint8:
        a = np.clip(np.rint(a.astype(np.float32) * 255), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(a)


def resolve_backend(backend: str, plate) -> str:
    if backend == "auto":
        return "difference" if plate is not None else "grabcut"
    if backend not in BACKENDS:
        raise UnknownNameError("segmentation backend", backend, list(BACKENDS) + ["auto"])
    return backend


def segment(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None, backend: str = "auto") -> np.ndarray:
    """Mask ``(h, w) bool`` of the object the prompt points at (see module docstring)."""
    image = _as_rgb_u8(image, "image")
    if plate is not None:
        plate = _as_rgb_u8(plate, "plate")
        if plate.shape != image.shape:
            raise SegmentationError(f"plate is {plate.shape[1]}x{plate.shape[0]} but the image is "
                                    f"{image.shape[1]}x{image.shape[0]}; use the plate made from this camera's frames")
    h, w = image.shape[:2]
    prompt.check_inside(w, h)
    name = resolve_backend(backend, plate)
    mask = np.asarray(BACKENDS[name](image, prompt, plate=plate), bool)
    if backend == "auto" and name == "difference" and mask.sum() < 20:
        # the object is part of the plate (it never moved in the clip): segment it by its own colours
        log.info("segment(auto): nothing differs from the plate at the prompt; falling back to grabcut")
        name = "grabcut"
        mask = np.asarray(BACKENDS[name](image, prompt, plate=plate), bool)
    if mask.shape != (h, w):
        raise SegmentationError(f"backend {name!r} returned a mask of shape {mask.shape}, expected {(h, w)}")
    frac = float(mask.mean())
    if frac == 0.0:
        log.warning("segment(%s): empty mask; try another click, a box, or another backend", name)
    elif frac > 0.9:
        log.warning("segment(%s): the mask covers %.0f%% of the image; the prompt probably missed the object", name, 100 * frac)
    return mask


