"""Synthetic captures: render a bundle's ground-truth scene into camera frames and masks.

Used by the demo and tests: a capture generated from a scene we keep, so every
recovered quantity (pose, texture, plate) can be compared with the truth.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.imaging import png_bytes
from real2sim.core.manifest import FrameSpec
from real2sim.engines import engine_for, get_exporter

log = logging.getLogger(__name__)


@dataclass
class SyntheticCaptureConfig:
    """How the synthetic capture is made."""

    camera: str = "main"
    """Bundle camera to render from."""
    noise_std: float = 2.0
    """Gaussian sensor noise (8-bit levels)."""
    gain: float = 1.0
    """Exposure gain applied to the render (a lighting change)."""
    masked: tuple[str, ...] | None = None
    """Objects that get masks (default: every dynamic object)."""
    seed: int = 0
    extra: dict = field(default_factory=dict)


def synthesize_capture(bundle: Bundle, truth: Bundle, config: SyntheticCaptureConfig | None = None) -> dict:
    """Render ``truth`` (an exported bundle with the true poses) into ``bundle``'s capture.

    Writes ``capture/frames/000000.png`` and ``masks/000000/<id>.png`` for the masked
    objects (and ``robot`` when the truth has one); records them in
    ``bundle.manifest.capture``. The plate stage then makes the background from them.
    Returns {"frame": rel, "masks": {id: rel}}.
    """

    cfg = config or SyntheticCaptureConfig()
    rng = np.random.default_rng(cfg.seed)
    engine = engine_for("segmentation")
    exp = get_exporter(engine.name)
    with exp.load(exp.out_dir(truth)) as scene:
        rgb = scene.render(cfg.camera).astype(np.float64)
        ids = cfg.masked or tuple(truth.dynamic_objects())
        masks = {oid: scene.object_mask(cfg.camera, oid) for oid in ids}
        if truth.manifest.robot is not None and "robot" in scene.capabilities:
            masks["robot"] = scene.robot_mask(cfg.camera)
    rgb = np.clip(rgb * cfg.gain + rng.normal(0, cfg.noise_std, rgb.shape), 0, 255).astype(np.uint8)
    frame_rel = "capture/frames/000000.png"
    atomic_write_bytes(bundle.path(frame_rel), png_bytes(rgb))
    cap = bundle.manifest.capture
    cap.source = f"synthetic render of '{truth.manifest.name}' ({engine.title}, noise {cfg.noise_std}, gain {cfg.gain})"
    # the render posed the robot at the truth's joints: a recorded joint state, as a LeRobot episode would have
    q = list(truth.manifest.robot.joint_positions or []) if truth.manifest.robot is not None else []
    cap.frames = [FrameSpec(frame_rel, 0.0, cfg.camera, q or None)]
    out = {}
    for oid, m in masks.items():
        rel = f"masks/000000/{oid}.png"
        atomic_write_bytes(bundle.path(rel), png_bytes(np.where(m, 255, 0).astype(np.uint8)))
        cap.masks.setdefault("000000", {})[oid] = rel
        out[oid] = rel
    bundle.save()
    return {"frame": frame_rel, "masks": out}
