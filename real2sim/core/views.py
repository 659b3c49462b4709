"""What a bundle's frames show of an object: one :class:`View` (camera, mask, image) per frame.

Alignment, texturing, the table stage and camera refinement all read frames and masks through here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.camera import Camera
from real2sim.core.errors import MaskError
from real2sim.core.imaging import read_mask, read_rgb_float
from real2sim.core.manifest import MASK_STATES_AT_POSE


@dataclass
class View:
    """One observation of an object: a camera and the object's mask in its image (optionally the image)."""

    camera: Camera
    mask: np.ndarray
    """``(h, w) bool`` object pixels."""
    image: np.ndarray | None = None
    """``(h, w, 3) float32`` RGB in [0, 1] (used by texturing and reports, not by alignment)."""
    name: str = ""
    """Frame key, for messages."""


def frame_key(i: int) -> str:
    """Key of ``capture.masks`` for frame index ``i`` (as segmentation writes it)."""
    return f"{i:06d}"


def object_views(bundle: Bundle, oid: str, with_images: bool = True) -> list[View]:
    """Every frame with a mask of ``oid`` taken at its scene pose: camera, mask (and image).

    Frames where mask propagation found the object carried away or mostly hidden (``capture.mask_states``
    not in ``MASK_STATES_AT_POSE``) are left out: their silhouettes are not of the pose being aligned.
    """
    cap = bundle.manifest.capture
    views = []
    for i, fr in enumerate(cap.frames):
        key = frame_key(i)
        rel = cap.masks.get(key, {}).get(oid)
        if not rel or cap.mask_state(key, oid) not in MASK_STATES_AT_POSE:
            continue
        if fr.camera not in bundle.manifest.cameras:
            raise MaskError(f"frame {key} names camera '{fr.camera}' which scene.json does not define")
        cam = bundle.manifest.cameras[fr.camera].camera()
        img = read_rgb_float(bundle.path(fr.image)) if with_images else None
        views.append(View(cam, read_mask(bundle.path(rel)), img, key))
    return views
