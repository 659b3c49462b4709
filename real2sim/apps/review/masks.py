"""The Masks tab without Gradio: frame keys, click prompts (points and box corners), re-segmentation, the picture.

A click adds an object point, a background point or a box corner (:func:`add_click`); the clicks of one
prompt go to :func:`real2sim.segmentation.segment` (:func:`resegment`); :func:`mask_picture` draws the
frame with the saved mask (blue), the proposal (orange) and the clicks.
"""
from __future__ import annotations

import json

import numpy as np

from real2sim import segmentation
from real2sim.apps.review.preview import read_rgb, real_image
from real2sim.apps.review.versions import EditError
from real2sim.core.bundle import Bundle
from real2sim.core.manifest import MASK_STATES_AT_POSE
from real2sim.segmentation.stage import bundle_plate, stored_prompts_on_frame, with_others_as_negatives

CLICK_MODES = ["object point", "background point", "box corner"]


def frame_key(bundle: Bundle, frame: int) -> str:
    """Key of ``capture.masks`` for frame index ``frame`` (``"000000"``, as segmentation.segment_stage writes)."""
    frames = bundle.manifest.capture.frames
    return f"{int(np.clip(frame, 0, max(len(frames) - 1, 0))):06d}"


# -- segmentation -----------------------------------------------------------------------------
def seg_module():
    """``real2sim.segmentation`` when it offers ``segment`` (click re-segmentation), else None."""
    return segmentation if hasattr(segmentation, "segment") else None


def seg_backends() -> list[str]:
    seg = seg_module()
    names = list(getattr(seg, "BACKENDS", [])) if seg else []
    return ["auto"] + [n for n in names if n != "auto"]


def seg_status() -> str:
    if seg_module() is None:
        return ("Re-segmentation is unavailable: the segmentation package (`real2sim.segmentation.segment`) is not in this "
                "build yet.")
    return "Click on the object to re-segment it."


def resegment(bundle: Bundle, frame: int, oid: str, clicks: dict, backend: str) -> np.ndarray:
    """``(h, w) bool`` mask of ``oid`` in frame ``frame`` from the clicks; :class:`EditError` when it comes out empty."""
    seg = seg_module()
    if seg is None:
        raise EditError(seg_status())
    real, note = real_image(bundle, frame)
    if real is None:
        raise EditError(note)
    plate, known = bundle_plate(bundle)
    prompt = seg.Prompt(points=[tuple(p) for p in clicks["points"]], labels=list(clicks["labels"]), box=click_box(clicks))
    prompt = with_others_as_negatives(prompt, stored_prompts_on_frame(bundle, frame, oid))  # touching objects part
    out = seg.segment(real, prompt, plate=plate, backend=backend or "auto", plate_known=known)
    mask = np.asarray(getattr(out, "mask", out)).astype(bool)
    if mask.shape != real.shape[:2] or not mask.any():
        raise EditError(f"the '{backend}' backend returned an empty mask for {describe_clicks(clicks)}; click inside "
                        "the object, draw a box, or try another backend")
    return mask


# -- clicks -----------------------------------------------------------------------------------
def add_click(clicks: dict | None, mode: str, xy) -> dict:
    """Accumulate the clicks of one prompt: positive/negative points and up to two box corners."""
    c = {"points": [], "labels": [], "corners": []} if not clicks else {k: list(v) for k, v in clicks.items()}
    if mode == "box corner":
        c["corners"] = (c["corners"] if len(c["corners"]) < 2 else [])[-1:] + [list(xy)]
    else:
        c["points"].append(list(xy))
        c["labels"].append(0 if mode == "background point" else 1)
    return c


def click_box(clicks: dict):
    """``(x0, y0, x1, y1)`` once two box corners are clicked, else None."""
    if len(clicks.get("corners", [])) == 2:
        (x0, y0), (x1, y1) = clicks["corners"]
        return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
    return None


def describe_clicks(clicks: dict) -> str:
    parts = []
    pos, neg = sum(clicks["labels"]), len(clicks["labels"]) - sum(clicks["labels"])
    if pos or neg:
        parts.append(f"{pos} object / {neg} background click(s)")
    if click_box(clicks):
        parts.append(f"box {click_box(clicks)}")
    return " + ".join(parts)


def draw_clicks(img: np.ndarray, clicks: dict) -> np.ndarray:
    """Object points green, background points red, the box (or its first corner) yellow."""
    from PIL import Image, ImageDraw

    pil = Image.fromarray(img)
    d = ImageDraw.Draw(pil)
    for (x, y), lab in zip(clicks.get("points", []), clicks.get("labels", [])):
        d.ellipse([x - 4, y - 4, x + 4, y + 4], outline=(0, 0, 0), fill=(40, 220, 40) if lab else (230, 30, 30))
    box = click_box(clicks)
    if box:
        d.rectangle(box, outline=(255, 230, 0), width=2)
    for x, y in clicks.get("corners", [])[:1] if not box else []:
        d.rectangle([x - 3, y - 3, x + 3, y + 3], outline=(255, 230, 0), width=2)
    return np.asarray(pil)


# -- the picture ------------------------------------------------------------------------------
def mask_picture(bundle: Bundle, oid: str | None, frame, proposal: np.ndarray | None = None,
                 clicks: dict | None = None) -> tuple[np.ndarray | None, str]:
    """(frame with the saved mask, the proposal and the clicks drawn, note) for the Masks tab."""
    seg_note = seg_status()
    real, note = real_image(bundle, int(frame or 0))
    if real is None:
        return None, f"{note}. Masks need real frames. {seg_note}"
    key = frame_key(bundle, int(frame or 0))
    shown = real.astype(np.float32)
    parts = [f"frame `{key}`, object `{oid}`.", _saved_mask(bundle, key, oid, shown)]
    if proposal is not None and proposal.shape == shown.shape[:2]:
        shown[proposal] = shown[proposal] * 0.4 + np.array([255, 60, 0]) * 0.6
        parts.append(f"Proposal: {int(proposal.sum())} px (orange) — Accept or Reject.")
    parts.append(seg_note)
    img = shown.round().astype(np.uint8)
    if clicks:
        img = draw_clicks(img, clicks)
        if len(clicks.get("corners", [])) == 1:
            parts.append("Box: click the opposite corner.")
    return img, " ".join(parts)


def _saved_mask(bundle: Bundle, key: str, oid: str | None, shown: np.ndarray) -> str:
    """Tint the saved mask of ``oid`` blue in ``shown`` (in place); say what it is."""
    rel = bundle.manifest.capture.masks.get(key, {}).get(oid) if oid else None
    if not (rel and bundle.path(rel).is_file()):
        return f"No saved mask for this object: run `real2sim build {bundle.root}` (segment stage) or click it."
    m = read_rgb(bundle.path(rel))[..., 0] > 127
    if m.shape == shown.shape[:2]:
        shown[m] = shown[m] * 0.5 + np.array([0, 120, 255]) * 0.5
    state = bundle.manifest.capture.mask_state(key, oid)
    conf = mask_confidence(bundle, oid) if state == "prompt" else None
    return (f"Saved mask: `{rel}` (blue), state `{state}`"
            + (" (not used for alignment/texture: the object is not at its scene pose or mostly "
               "hidden here)." if state not in MASK_STATES_AT_POSE else ".")
            + ("" if conf is None else f" Confidence {conf:.2f}"
               + (" (low: check this mask, add a click or a box)." if conf < 0.5 else ".")))


def mask_confidence(bundle: Bundle, oid: str) -> float | None:
    """The prompted mask's confidence from ``reports/segment.json`` (None when not recorded)."""
    try:
        return float(json.loads(bundle.path("reports/segment.json").read_text())["entities"][oid]["confidence"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
