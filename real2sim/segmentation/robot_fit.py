"""The ``robot_fit`` stage: a frame's robot joints fitted to the robot's pixels (frame minus plate).

For clips without recorded joint states. The robot's pixels are where the frame differs
from the background plate near the robot's silhouette, objects' masks excluded; the arm
joints are fitted by rendering the robot's silhouette (see
:func:`real2sim.demos.bridge.fit_robot_joints`). Writes the joints into the frame (and the
robot's start pose when it is frame 0) and ``masks/<frame>/robot.png``.
"""
from __future__ import annotations

import io
import logging

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes, hash_jsonable
from real2sim.core.errors import BundleError
from real2sim.core.stages import files_hash, run_stage

log = logging.getLogger(__name__)


def _read_rgb(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"), np.uint8).copy()


def robot_fit_stage(bundle: Bundle, frame: int = 0, force: bool = False):
    """Fit the robot's joints in ``frame``; returns (record, ran)."""
    from real2sim.demos.bridge import fit_robot_joints

    m = bundle.manifest
    if m.robot is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; create it with 'real2sim init DIR --robot widowx'")
    if not 0 <= frame < len(m.capture.frames):
        raise BundleError(f"{bundle.root}: no frame {frame} (the bundle has {len(m.capture.frames)}); "
                          "add frames with 'real2sim init DIR --frames PATH'")
    if not m.capture.plate:
        raise BundleError(f"{bundle.root}: no background plate; run 'real2sim build {bundle.root}' first "
                          "(the robot's pixels are where the frame differs from the plate)")
    fr = m.capture.frames[frame]
    key = f"{frame:06d}"
    objects = {e: p for e, p in m.capture.masks.get(key, {}).items() if e in m.objects}
    q0 = fr.joint_positions or m.robot.joint_positions or None
    inputs = [fr.image, m.capture.plate, *objects.values()]
    input_hash = hash_jsonable([files_hash(bundle, inputs), q0, m.robot.name, m.cameras[fr.camera].T_world_camera])

    def work():
        from PIL import Image

        from real2sim.render.robot import load_robot_model

        model = load_robot_model(m.robot)
        q_start = np.asarray(q0 if q0 is not None else model.default_q, float)
        img, plate = _read_rgb(bundle.path(fr.image)), _read_rgb(bundle.path(m.capture.plate))
        exclude = np.zeros(img.shape[:2], bool)
        for rel in objects.values():
            exclude |= np.asarray(Image.open(bundle.path(rel)).convert("L")) > 127
        q, mask, rep = fit_robot_joints(model, m.cameras[fr.camera].camera(), img, plate, exclude, q_start)
        fr.joint_positions = [round(float(v), 6) for v in q]
        if frame == 0:
            m.robot.joint_positions = list(fr.joint_positions)
        rel = f"masks/{key}/robot.png"
        buf = io.BytesIO()
        Image.fromarray(np.where(mask, 255, 0).astype(np.uint8)).save(buf, format="PNG")
        atomic_write_bytes(bundle.path(rel), buf.getvalue())
        m.capture.masks.setdefault(key, {})["robot"] = rel
        bundle.mark_stale("robot_masks", "camera_refine", "robot_appearance", "plate", "export")
        report = bundle.write_report("robot_fit", {"frame": frame, **rep})
        msg = "" if rep["iou_fitted"] > rep["iou_default"] else "the fit did not beat the start pose; check the plate and the camera"
        return [rel, report], {"iou_start": rep["iou_default"], "iou_fitted": rep["iou_fitted"]}, msg

    return run_stage(bundle, "robot_fit", input_hash, {"frame": frame}, work, force)
