"""The ``robot_masks`` stage: masks of the robot rendered from the simulator at each frame's joint state.

A frame's recorded ``joint_positions`` (from a LeRobot episode, say) pose the robot;
frames without them use the bundle robot's joint positions. The robot is rendered
from the frame's camera through the MJCF export, so the mask is exactly what the
simulator will draw over the plate.
"""
from __future__ import annotations

import io
import logging

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes, hash_jsonable
from real2sim.core.errors import BundleError
from real2sim.core.stages import files_hash, run_stage
from real2sim.engines import engine_for, get_exporter

log = logging.getLogger(__name__)


def robot_masks_stage(bundle: Bundle, force: bool = False):
    """Write ``masks/<frame>/robot.png`` for every frame; returns (record, ran)."""

    m = bundle.manifest
    if m.robot is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --robot widowx'")
    if not m.capture.frames:
        raise BundleError(f"{bundle.root}: no frames; run 'real2sim init DIR --frames PATH' first")
    engine = engine_for("segmentation")
    exp = get_exporter(engine.name)
    main = exp.main_file(bundle)
    if not main.is_file():
        raise BundleError(f"{bundle.root}: no {engine.title} export to render the robot from; "
                          f"run 'real2sim export {bundle.root} --engine {engine.name}'")
    frames = [(f.camera, f.joint_positions or m.robot.joint_positions or None) for f in m.capture.frames]
    input_hash = hash_jsonable([files_hash(bundle, [bundle.rel(main)]), frames,
                                {k: c.T_world_camera for k, c in m.cameras.items()}])

    def work():
        from PIL import Image

        outputs, areas = [], []
        with exp.load(exp.out_dir(bundle)) as scene:
            for i, (camera, q) in enumerate(frames):
                if q is not None:
                    if len(q) != len(scene.robot_joint_names()):
                        raise BundleError(f"frame {i}: {len(q)} joint positions for a robot with "
                                          f"{len(scene.robot_joint_names())} joints ({', '.join(scene.robot_joint_names())})")
                    scene.set_robot_qpos(np.asarray(q, float))
                mask = scene.robot_mask(camera)
                rel = f"masks/{i:06d}/robot.png"
                buf = io.BytesIO()
                Image.fromarray(np.where(mask, 255, 0).astype(np.uint8)).save(buf, format="PNG")
                atomic_write_bytes(bundle.path(rel), buf.getvalue())
                m.capture.masks.setdefault(f"{i:06d}", {})["robot"] = rel
                outputs.append(rel)
                areas.append(float(mask.mean()))
        if max(areas) == 0:
            log.warning("robot_masks: the robot is not visible in any frame; check the camera pose and the robot base")
        return outputs, {"frames": len(frames), "mean_area_fraction": round(float(np.mean(areas)), 5),
                         "frames_without_robot": int(sum(a == 0 for a in areas))}, ""

    return run_stage(bundle, "robot_masks", input_hash, {}, work, force)
