"""One segmentation interface, several backends.

``segment(image, prompt, plate=None, backend="auto") -> (h, w) bool``

Backends (``BACKENDS``; add one with :func:`register_backend`):

- ``"difference"``: frame minus background plate with morphology; the connected component at the prompt.
  The strongest when a plate exists (needs ``plate``).
- ``"grabcut"``: OpenCV GrabCut from a box, or from clicks (a click first grows a colour-similar region that
  gives GrabCut its initial box and seeds). The default without a plate and without weights.
- ``"sam"``: segment-anything's ``SamPredictor`` with a checkpoint the user supplies
  (``SamBackend(checkpoint=..., model_type="vit_b")``, or env ``REAL2SIM_SAM_CHECKPOINT``).
- ``"auto"``: ``difference`` when a plate is given; else ``sam`` when ``REAL2SIM_SAM_CHECKPOINT`` names a checkpoint
  (and segment-anything is installed); else ``grabcut``. Also the no-plate choice when nothing differs from the
  plate at the prompt (an object that never moved is part of a multi-frame plate).

:func:`segment_result` gives the mask with a confidence in [0, 1] (and the cast shadow where the backend tells it
apart); low-confidence masks and masks that look like the background are warned about, naming the frame.

Images are ``(h, w, 3) uint8`` RGB; points are pixel (x, y) in OpenCV convention (top-left pixel centre (0, 0)).
"""
from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from real2sim.core.errors import SegmentationError, UnknownNameError
from real2sim.core.imaging import component_at, erode, fill_holes, inside_distance, iou, mask_box

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


@dataclass
class MaskResult:
    """A mask with what a person needs to judge it."""

    mask: np.ndarray
    """``(h, w) bool`` the object."""
    confidence: float
    """In [0, 1]: how much the mask is to be trusted (backend-specific evidence, see each backend); masks under
    :data:`LOW_CONFIDENCE` are warned about."""
    shadow: np.ndarray | None = None
    """``(h, w) bool`` the object's cast shadow, where the backend tells shadows apart (else None)."""
    backend: str = ""
    """The backend that made the mask."""
    details: dict = field(default_factory=dict)
    """Backend numbers (noise sigma, chosen scale, ...) and warnings, JSON-serialisable."""


LOW_CONFIDENCE = 0.5
"""Masks whose confidence is below this are warned about (and flagged in reports)."""


def work_size_prompt(shape: tuple[int, int], work_px: int, prompt: Prompt
                     ) -> tuple[tuple[int, int], Prompt, float]:
    """The ``(width, height)`` of an ``(h, w)`` frame resampled to about ``work_px`` pixels, ``prompt`` in its
    pixels (OpenCV pixel centres: x' = (x + 0.5) f - 0.5) and the length of a working pixel in frame pixels."""
    h, w = shape
    f = float(np.sqrt(work_px / (h * w)))
    size = (max(8, int(round(w * f))), max(8, int(round(h * f))))
    fx, fy = size[0] / w, size[1] / h

    def to_work(x: float, y: float) -> tuple[float, float]:
        return (x + 0.5) * fx - 0.5, (y + 0.5) * fy - 0.5

    box = None
    if prompt.box is not None:
        (x0, y0), (x1, y1) = to_work(*prompt.box[:2]), to_work(*prompt.box[2:])
        box = (x0, y0, x1, y1)
    return size, Prompt([to_work(x, y) for x, y in prompt.points], list(prompt.labels), box), 1.0 / np.sqrt(fx * fy)


def upsample_mask(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A working-size ``mask`` at the frame's ``(h, w)``: linear resampling, ``>= 0.5``."""
    import cv2

    return cv2.resize(mask.astype(np.float32), (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR) >= 0.5


class Backend(Protocol):
    def __call__(self, image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None) -> np.ndarray: ...


BACKENDS: dict[str, Callable[..., np.ndarray]] = {}
RESULT_BACKENDS: dict[str, Callable[..., MaskResult]] = {}
"""Backends that also give a confidence (and maybe a shadow): ``fn(image, prompt, plate=None) -> MaskResult``."""


MOVED_CLICKS: dict[str, int] = {}
"""Backends whose own confidence ranks their masks poorly, and how many moved clicks :func:`segment_result` runs
with ``moved_clicks=True`` to measure it instead (:func:`moved_click_confidence`)."""


def register_backend(name: str, fn: Callable[..., np.ndarray],
                     result_fn: Callable[..., MaskResult] | None = None, moved_clicks: int = 0) -> None:
    """Add or replace a backend ``fn(image, prompt, plate=None) -> (h, w) bool``; ``result_fn`` (optional) gives
    the same mask as a :class:`MaskResult` with a confidence. Without one, the confidence of a mask is its stability
    under jittered clicks (:func:`jitter_confidence`). ``moved_clicks``: see :data:`MOVED_CLICKS` (0: its own
    confidence is kept)."""
    BACKENDS[name] = fn
    if result_fn is not None:
        RESULT_BACKENDS[name] = result_fn
    else:
        RESULT_BACKENDS.pop(name, None)
    if moved_clicks > 0:
        MOVED_CLICKS[name] = moved_clicks
    else:
        MOVED_CLICKS.pop(name, None)


def _as_rgb_u8(image, what: str) -> np.ndarray:
    a = np.asarray(image)
    if a.ndim != 3 or a.shape[2] != 3:
        raise SegmentationError(f"{what} must be (h, w, 3) RGB, got shape {a.shape}")
    if a.dtype != np.uint8:
        a = np.clip(np.rint(a.astype(np.float32) * 255), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(a)


def check_exposure(image: np.ndarray, what: str) -> None:
    """Refuse an all-black, all-white or flat frame ``(h, w, 3) uint8`` (nothing can be segmented in it)."""
    small = image[::4, ::4]
    lum = small.astype(np.float32).mean(-1)
    if float(lum.max()) <= 8:
        raise SegmentationError(f"{what} is all black (brightest pixel {lum.max():.0f}/255): a covered lens or a "
                                "dropped frame; prompt another frame")
    if float((small.min(-1) >= 250).mean()) > 0.95:
        raise SegmentationError(f"{what} is saturated (over 95 % of it white): the exposure is far too high; "
                                "prompt another frame or re-capture with a lower exposure")
    if float(lum.std()) < 0.5:
        raise SegmentationError(f"{what} is flat (one colour): nothing can be segmented in it; prompt another frame")


def sam_configured() -> bool:
    """True when ``REAL2SIM_SAM_CHECKPOINT`` names a file and segment-anything is installed (``auto`` uses SAM)."""
    ck = os.environ.get("REAL2SIM_SAM_CHECKPOINT")
    return bool(ck) and Path(ck).is_file() and importlib.util.find_spec("segment_anything") is not None


def resolve_backend(backend: str, plate) -> str:
    """``auto`` -> ``difference`` with a plate, else ``sam`` when a checkpoint is configured, else ``grabcut``."""
    if backend == "auto":
        if plate is not None:
            return "difference"
        return "sam" if sam_configured() and "sam" in BACKENDS else "grabcut"
    if backend not in BACKENDS:
        raise UnknownNameError("segmentation backend", backend, list(BACKENDS) + ["auto"])
    return backend


def outline_iou(mask: np.ndarray, width: float = 1.0) -> float:
    """The IoU a ``(h, w) bool`` mask keeps when its outline is only known to within ``width`` pixels: that of the
    mask shrunk by half of it against the mask grown by half of it, ``(A - P w / 2) / (A + P w / 2)`` (area ``A``,
    outline pixels ``P``). Small and thin masks lose most: a 1 px error is a third of a 6 px wide spoon's handle,
    so such a mask is not to be trusted as much as a large one the same method found as surely. 0 for an empty mask."""
    a = int(np.count_nonzero(mask))
    if a == 0:
        return 0.0
    m = mask[mask_box(mask, 1)]  # the outline on the mask's box only (a zero pixel around, or the image's edge)
    p = int(np.count_nonzero(m & ~erode(m, 1)))
    return float(max(0.0, (a - 0.5 * width * p) / (a + 0.5 * width * p)))


def jitter_clicks(mask: np.ndarray, prompt: Prompt, n: int = 2, seed: int = 0, reach: float = 0.25) -> list[Prompt]:
    """``n`` prompts like ``prompt`` with each positive click moved by ``reach`` times the mask's inner radius
    (boxes moved by 5 % of their size): what another person clicking the same object would give."""

    rng = np.random.default_rng(seed)
    out = []
    r = 3.0
    if mask.any():
        r = max(2.0, reach * float(inside_distance(mask).max()))
    h, w = mask.shape
    for k in range(n):
        ang = 2 * np.pi * (k + rng.uniform(0, 1)) / n
        pts = [(min(max(x + r * np.cos(ang), 0), w - 1), min(max(y + r * np.sin(ang), 0), h - 1)) if lab == 1 else (x, y)
               for (x, y), lab in zip(prompt.points, prompt.labels)]
        box = prompt.box
        if box is not None:
            bw, bh = box[2] - box[0], box[3] - box[1]
            d = rng.uniform(-0.05, 0.05, 4) * [bw, bh, bw, bh]
            box = tuple(float(v) for v in np.array(box) + d)
        out.append(Prompt(pts, list(prompt.labels), box))
    return out


def jitter_confidence(fn, image, prompt: Prompt, plate, mask: np.ndarray, n: int = 2) -> float:
    """Mean IoU of ``mask`` with the masks ``fn`` gives for jittered prompts (:func:`jitter_clicks`)."""
    return _agreement(mask, jitter_clicks(mask, prompt, n), lambda p: np.asarray(fn(image, p, plate=plate), bool))


def moved_click_confidence(mask: np.ndarray, prompt: Prompt, n: int,
                           segment_mask: Callable[[Prompt], np.ndarray]) -> float:
    """How a ``(h, w) bool`` mask holds when the clicks of ``prompt`` move by half its inner radius (``n`` moved
    prompts, :func:`jitter_clicks`): the mean IoU with the masks ``segment_mask(moved prompt)`` gives, times the IoU
    it keeps with its outline known to a pixel (:func:`outline_iou`). Over the mask benchmark's one-click cases
    (seeds 0-2) it finds the masks under 0.8 IoU with an AUROC of 0.84 where one run's own confidence (the grabcut
    backend's) has 0.69 (docs/capture.md, *Which masks to check*)."""
    return _agreement(mask, jitter_clicks(mask, prompt, n, reach=0.5), segment_mask) * outline_iou(mask)


def _agreement(mask: np.ndarray, prompts: list[Prompt], segment_mask) -> float:
    """Mean IoU of ``mask`` with ``segment_mask(p)`` over ``prompts`` (0 for an empty mask)."""
    if not mask.any() or not prompts:
        return 0.0
    return float(np.mean([iou(segment_mask(p), mask) for p in prompts]))


def _run(name: str, image, prompt: Prompt, plate) -> MaskResult:
    if name in RESULT_BACKENDS:
        res = RESULT_BACKENDS[name](image, prompt, plate=plate)
    else:
        m = np.asarray(BACKENDS[name](image, prompt, plate=plate), bool)
        res = MaskResult(m, jitter_confidence(BACKENDS[name], image, prompt, plate, m), details={"confidence": "jitter"})
    res.backend = name
    res.mask = np.asarray(res.mask, bool)
    return res


def background_reason(mask: np.ndarray) -> str | None:
    """Why ``mask`` looks like the background rather than an object (None when it does not)."""
    h, w = mask.shape
    frac = float(mask.mean())
    borders = int(mask[0].mean() > 0.2) + int(mask[-1].mean() > 0.2) + int(mask[:, 0].mean() > 0.2) + int(mask[:, -1].mean() > 0.2)
    if frac > 0.35 or (borders >= 2 and frac > 0.05) or borders >= 3:
        return f"it covers {100 * frac:.0f}% of the image and runs along {borders} of its borders"
    return None


def segment_result(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None, backend: str = "auto",
                   name: str = "the image", plate_known: np.ndarray | None = None,
                   moved_clicks: bool = False) -> MaskResult:
    """:func:`segment` with the mask's confidence, shadow and notes. ``name`` (e.g. ``"frame 3, entity 'can'"``)
    names the frame in errors and warnings.

    ``plate_known``: optional ``(h, w) bool``, where some frame showed the plate's background (False where the
    plate was inpainted: a guess, so a difference to it says nothing). A plate mask is cut at the unknown pixels
    (it leaked there into whatever the inpainting got wrong); a prompt on them (an object that never moved: its
    place was never seen) is segmented without the plate under ``auto``. A mask that holds or reaches a negative
    click is cut between it and the positive ones (:mod:`segmentation.touching`: two objects touching; the
    ``difference`` backend does it on its change region itself); ``details["negatives_cut"]`` says whether it did.

    ``moved_clicks``: a backend in :data:`MOVED_CLICKS` gets its confidence from masks of moved clicks instead
    (:func:`moved_click_confidence`; that many more masks' time), but where the plate showed no change at the click
    (the mask was made without it: maybe the background, which moved clicks find again): the segment stage asks
    for it, as its masks are the ones a person reviews."""
    image = _as_rgb_u8(image, "image")
    check_exposure(image, name)
    if plate is not None:
        plate = _as_rgb_u8(plate, "plate")
        if plate.shape != image.shape:
            raise SegmentationError(f"plate is {plate.shape[1]}x{plate.shape[0]} but {name} is "
                                    f"{image.shape[1]}x{image.shape[0]}; use the plate made from this camera's frames")
    if plate_known is not None and (plate is None or np.shape(plate_known) != image.shape[:2]):
        raise SegmentationError(f"plate_known must be a {image.shape[1]}x{image.shape[0]} mask with a plate; got "
                                f"{'no plate' if plate is None else np.shape(plate_known)}")
    h, w = image.shape[:2]
    prompt.check_inside(w, h)
    res, unchanged = _segment(image, prompt, plate, backend, name, plate_known)
    # a click where nothing differs from the plate may be on the background: moved clicks would find it again
    if moved_clicks and MOVED_CLICKS.get(res.backend) and prompt.positives and res.mask.any() and not unchanged:
        res.details["own_confidence"] = round(res.confidence, 3)
        res.confidence = moved_click_confidence(res.mask, prompt, MOVED_CLICKS[res.backend], lambda q: _segment(
            image, q, plate, backend, name, plate_known, warn=False)[0].mask)
        res.details["confidence_from"] = "moved clicks"
    return _checked(res, image, prompt, name, unchanged)


def _segment(image: np.ndarray, prompt: Prompt, plate, backend: str, name: str, plate_known, warn: bool = True
             ) -> tuple[MaskResult, bool]:
    """:func:`segment_result`'s mask before its checks and warnings, and whether the plate showed no change at the
    prompt (the mask was made without it; warned about unless ``warn`` is False)."""
    used = resolve_backend(backend, plate)
    if backend == "auto" and used == "difference" and plate_known is not None and _on_unknown(prompt, plate_known):
        log.info("segment(auto): the plate at the prompt in %s was never seen (inpainted: the object never moved); "
                 "segmenting it without the plate", name)
        res = _run(resolve_backend("auto", None), image, prompt, None)
        res.details["fallback"] = "the plate is inpainted at the prompt"
        return res, False
    res = _run(used, image, prompt, plate)
    if used == "difference" and plate_known is not None:
        res = _cut_at_unknown(res, prompt, np.asarray(plate_known, bool))
    unchanged = False
    if backend == "auto" and used == "difference" and res.mask.sum() < 20:
        # the object is part of the plate (it never moved in the clip), or the click is on the background
        where0 = ", ".join(f"({x:g}, {y:g})" for x, y in prompt.positives) or f"box {prompt.box}"
        (log.warning if warn else log.debug)(
            "segment(auto): nothing differs from the plate at %s in %s: the click is on the background, or the object "
            "is part of the plate (it never moved); segmenting it without the plate", where0, name)
        unchanged = True
        res = _run(resolve_backend("auto", None), image, prompt, plate)
        res.details["fallback"] = "nothing differs from the plate at the prompt"
    if prompt.negatives and not res.details.get("negatives_handled"):
        from real2sim.segmentation.touching import cut_at_negatives  # it builds on this module

        res.mask, cut = cut_at_negatives(image, res.mask, prompt.positives, prompt.negatives)
        res.details["negatives_cut"] = cut
    return res, unchanged


def _on_unknown(prompt: Prompt, known: np.ndarray) -> bool:
    """Every positive click (or the box's centre) is on a pixel no frame showed."""
    h, w = known.shape
    pts = prompt.positives or ([(0.5 * (prompt.box[0] + prompt.box[2]), 0.5 * (prompt.box[1] + prompt.box[3]))]
                               if prompt.box is not None else [])
    return bool(pts) and all(not known[min(h - 1, max(0, int(round(y)))), min(w - 1, max(0, int(round(x))))]
                             for x, y in pts)


def _cut_at_unknown(res: MaskResult, prompt: Prompt, known: np.ndarray) -> MaskResult:
    """``res`` without the pixels where the plate is a guess: the part connected to the clicks (a box: all of it
    inside the box), holes filled."""
    if not (res.mask & ~known).any():
        return res
    kept = res.mask & known
    kept = fill_holes(component_at(kept, prompt.positives, radius=3) if prompt.positives else kept)  # a box bounds it
    res.details["cut_where_plate_inpainted_px"] = int((res.mask & ~kept).sum())
    res.mask = kept
    if res.shadow is not None:
        res.shadow = res.shadow & known
    return res


def _checked(res: MaskResult, image: np.ndarray, prompt: Prompt, name: str, unchanged: bool) -> MaskResult:
    """Shape check, the empty/background warnings and the low-confidence warning of :func:`segment_result`."""
    h, w = image.shape[:2]
    if res.mask.shape != (h, w):
        raise SegmentationError(f"backend {res.backend!r} returned a mask of shape {res.mask.shape}, expected {(h, w)}")
    where = ", ".join(f"({x:g}, {y:g})" for x, y in prompt.positives) or f"box {prompt.box}"
    if not res.mask.any():
        log.warning("segment(%s): empty mask in %s at %s; try another click, a box, or another backend",
                    res.backend, name, where)
    else:
        why = background_reason(res.mask)
        if why:
            extra = " (nothing there differs from the plate)" if unchanged else ""
            log.warning("segment(%s): the mask in %s at %s looks like the background%s: %s; click inside the object "
                        "or give a box", res.backend, name, where, extra, why)
            res.details["background"] = why
            res.confidence = min(res.confidence, 0.2)
    res.confidence = float(np.clip(res.confidence, 0.0, 1.0))
    if res.confidence < LOW_CONFIDENCE:
        log.warning("segment(%s): low confidence %.2f for the mask in %s at %s; check it (reports/segment.png) and "
                    "fix it with another click, a negative click or a box", res.backend, res.confidence, name, where)
    return res


def segment(image: np.ndarray, prompt: Prompt, plate: np.ndarray | None = None, backend: str = "auto",
            name: str = "the image", plate_known: np.ndarray | None = None) -> np.ndarray:
    """Mask ``(h, w) bool`` of the object the prompt points at (see module docstring and :func:`segment_result`)."""
    return segment_result(image, prompt, plate, backend, name, plate_known).mask
