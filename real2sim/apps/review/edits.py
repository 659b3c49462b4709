"""Review-time edits of a scene bundle (everything the review page changes goes through here).

The same edits are scriptable and unit-tested without a browser:
:func:`set_object_pose`, :func:`set_camera_pose`, :func:`set_robot_base_pose`, :func:`set_mask`,
:func:`remove_mask`, :func:`rerun_object_stage` and :func:`undo` each take the bundle directory and
the *version* of ``scene.json`` the caller last saw (:func:`manifest_version`); a stale version is
refused with :class:`ConcurrentEditError` (see :mod:`.versions` for versions, the lock and the undo
history). Values are validated (finite, positions within :data:`MAX_POSITION_M` of the origin,
angles within +-pi) before anything is written; ``scene.json`` is written atomically and the stages
whose outputs depend on the edited value are marked stale.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

import real2sim.texture.stage as ts
from real2sim.apps.review.versions import (
    HISTORY_DIR,
    ConcurrentEditError,
    EditError,
    EditResult,
    apply_edit,
    history,
    locked,
    manifest_version,
    record_writer,
    snapshot,
)
from real2sim.apps.review.versions import undo as _undo
from real2sim.core import imaging
from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.errors import UnknownNameError
from real2sim.core.geometry import euler_xyz_to_matrix, matrix_to_quat_wxyz
from real2sim.core.manifest import Pose
from real2sim.core.stages import downstream

__all__ = ["HISTORY_DIR", "MAX_POSITION_M", "RERUNNABLE", "ConcurrentEditError", "EditError", "EditResult",
           "camera_xyz_rpy", "history", "manifest_version", "matrix_to_rpy", "pose_to_xyz_rpy", "remove_mask",
           "rerun_object_stage", "rpy_to_quat_wxyz", "set_camera_pose", "set_mask", "set_object_pose",
           "set_object_joints", "set_robot_base_pose", "set_robot_joints", "undo", "validate_position", "validate_rpy"]

log = logging.getLogger(__name__)

MAX_POSITION_M = 5.0
MAX_ANGLE_RAD = math.pi + 1e-6

# what each kind of edit changes (artifacts of real2sim.core.stages.ARTIFACTS); the stages reading them go stale
POSE_CHANGES = ("object_poses",)
CAMERA_CHANGES = ("camera",)
ROBOT_CHANGES = ("robot",)


# -- validation -------------------------------------------------------------------------------
def _finite(values, what: str, n: int) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise EditError(f"{what} must be {n} numbers, got {values!r}") from None
    if a.size != n:
        raise EditError(f"{what} must be {n} numbers, got {a.size}")
    if not np.isfinite(a).all():
        raise EditError(f"{what} must be finite numbers, got {a.tolist()}")
    return a


def validate_position(position, what: str = "position") -> np.ndarray:
    p = _finite(position, f"{what} (m)", 3)
    if np.abs(p).max() > MAX_POSITION_M:
        raise EditError(f"{what} {np.round(p, 4).tolist()} m is out of range: each coordinate must be within "
                        f"+-{MAX_POSITION_M:g} m of the world origin")
    return p


def validate_rpy(rpy, what: str = "roll/pitch/yaw") -> np.ndarray:
    """Angles in radians (the library's unit); the page's messages speak degrees, the unit on its controls."""
    a = _finite(rpy, f"{what} (deg)", 3)
    if np.abs(a).max() > MAX_ANGLE_RAD:
        raise EditError(f"{what} {np.round(np.degrees(a), 2).tolist()} deg is out of range: each angle must be "
                        "within +-180 deg")
    return a


# -- pose conversions -------------------------------------------------------------------------
def rpy_to_quat_wxyz(rpy) -> list[float]:
    return [round(float(x), 9) for x in matrix_to_quat_wxyz(euler_xyz_to_matrix(*rpy))]


def matrix_to_rpy(R) -> np.ndarray:
    """``(3, 3)`` rotation -> extrinsic x-y-z angles (rad), the inverse of ``euler_xyz_to_matrix``."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(np.asarray(R, float)).as_euler("xyz")


def pose_to_xyz_rpy(pose: Pose) -> tuple[list[float], list[float]]:
    """A manifest pose as position (m) and roll/pitch/yaw (rad, extrinsic xyz)."""
    return [float(x) for x in pose.position], [float(x) for x in matrix_to_rpy(pose.matrix()[:3, :3])]


def camera_xyz_rpy(T_world_camera) -> tuple[list[float], list[float]]:
    """Camera position (m) and roll/pitch/yaw (rad, extrinsic xyz) of its OpenCV frame in the world."""
    T = np.asarray(T_world_camera, float)
    return [float(x) for x in T[:3, 3]], [float(x) for x in matrix_to_rpy(T[:3, :3])]


# -- poses ------------------------------------------------------------------------------------
def set_object_pose(root: Path, oid: str, position, rpy=None, quaternion_wxyz=None,
                    expected_version: str | None = None, writer: str | None = None) -> EditResult:
    """Move object ``oid`` to ``position`` (m) with orientation ``rpy`` (rad, extrinsic xyz) or a wxyz quaternion."""
    p = validate_position(position, f"object '{oid}' position")
    if quaternion_wxyz is not None:
        q = _finite(quaternion_wxyz, f"object '{oid}' quaternion_wxyz", 4)
        if not 0.5 < np.linalg.norm(q) < 2.0:
            raise EditError(f"object '{oid}' quaternion_wxyz {q.tolist()} is not close to unit length; order is w, x, y, z")
        q = [round(float(x), 9) for x in q / np.linalg.norm(q)]
    else:
        q = rpy_to_quat_wxyz(validate_rpy(rpy if rpy is not None else (0, 0, 0), f"object '{oid}' roll/pitch/yaw"))

    def change(bundle: Bundle):
        if oid not in bundle.manifest.objects:
            raise EditError(str(UnknownNameError("object", oid, bundle.manifest.objects)))
        bundle.manifest.objects[oid].pose = Pose([round(float(x), 9) for x in p], q)

    desc = f"object {oid}: position {np.round(p, 4).tolist()} m, quaternion_wxyz {np.round(q, 4).tolist()}"
    return apply_edit(root, expected_version, desc, f"object:{oid}", POSE_CHANGES, change, writer)


def set_camera_pose(root: Path, camera: str, position, rpy, expected_version: str | None = None,
                    writer: str | None = None) -> EditResult:
    """Set the extrinsics of ``camera``: its OpenCV frame (+Z forward, +Y down) at ``position`` with ``rpy`` (rad)."""
    p = validate_position(position, f"camera '{camera}' position")
    a = validate_rpy(rpy, f"camera '{camera}' roll/pitch/yaw")
    T = np.eye(4)
    T[:3, :3] = euler_xyz_to_matrix(*a)
    T[:3, 3] = p

    def change(bundle: Bundle):
        if camera not in bundle.manifest.cameras:
            raise EditError(str(UnknownNameError("camera", camera, bundle.manifest.cameras)))
        bundle.manifest.cameras[camera].T_world_camera = np.round(T, 9).tolist()

    desc = f"camera {camera}: position {np.round(p, 4).tolist()} m, roll/pitch/yaw {np.round(np.degrees(a), 2).tolist()} deg"
    return apply_edit(root, expected_version, desc, f"camera:{camera}", CAMERA_CHANGES, change, writer)


def set_robot_base_pose(root: Path, position, rpy, expected_version: str | None = None,
                        writer: str | None = None) -> EditResult:
    """Set the robot base pose (m, rad)."""
    p = validate_position(position, "robot base position")
    q = rpy_to_quat_wxyz(validate_rpy(rpy, "robot base roll/pitch/yaw"))

    def change(bundle: Bundle):
        if bundle.manifest.robot is None:
            raise EditError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --frames ... --robot NAME'")
        bundle.manifest.robot.base_pose = Pose([round(float(x), 9) for x in p], q)

    desc = f"robot base: position {np.round(p, 4).tolist()} m, quaternion_wxyz {np.round(q, 4).tolist()}"
    return apply_edit(root, expected_version, desc, "robot:base", ROBOT_CHANGES, change, writer)


# -- joints -----------------------------------------------------------------------------------
JOINT_CHANGES = ("object_meshes",)
ROBOT_JOINT_CHANGES = ("robot_joints",)


def _describe_joints(values: dict, ranges) -> str:
    """``name=value unit`` for each joint (revolute in rad and deg); plain numbers when the ranges cannot be read (the
    edit then fails with the reason)."""
    try:
        by_name = {j.name: j for j in ranges()}
    except Exception:  # noqa: BLE001 - the edit itself reports what is wrong
        by_name = {}
    parts = []
    for k, v in values.items():
        try:
            parts.append(f"{k}={by_name[k].describe(float(v)) if k in by_name else f'{float(v):.6g}'}")
        except (TypeError, ValueError):
            parts.append(f"{k}={v!r}")
    return ", ".join(parts)


def set_object_joints(root: Path, oid: str, values: dict, expected_version: str | None = None,
                      writer: str | None = None) -> EditResult:
    """Set joint positions ``{joint: m or rad}`` of articulated object ``oid``: the same code as ``real2sim
    set-joints`` (:func:`real2sim.pipeline.articulated.apply_object_joints`: limits checked, the posed mesh
    rewritten); undoable (:func:`undo` re-poses the mesh)."""
    from real2sim.pipeline.articulated import apply_object_joints, object_joint_ranges

    vals = {str(k): v for k, v in dict(values).items()}

    def change(bundle: Bundle):
        if oid not in bundle.manifest.objects:
            raise EditError(str(UnknownNameError("object", oid, bundle.manifest.objects)))
        apply_object_joints(bundle, oid, vals)

    desc = f"object {oid} joints: " + _describe_joints(vals, lambda: object_joint_ranges(Bundle.load(root), oid))
    return apply_edit(root, expected_version, desc, f"joints:{oid}:{','.join(sorted(vals))}", JOINT_CHANGES, change,
                      writer)


def set_robot_joints(root: Path, values: dict, expected_version: str | None = None,
                     writer: str | None = None) -> EditResult:
    """Set the robot's start joints ``{joint: m or rad}`` (others unchanged): the same code as ``real2sim set-joints DIR
    robot ...`` (:func:`real2sim.pipeline.articulated.apply_robot_joints`, limits checked); undoable."""
    from real2sim.pipeline.articulated import apply_robot_joints, robot_joint_ranges

    vals = {str(k): v for k, v in dict(values).items()}

    def change(bundle: Bundle):
        if bundle.manifest.robot is None:
            raise EditError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --frames ... --robot NAME'")
        apply_robot_joints(bundle, vals)

    desc = "robot joints: " + _describe_joints(vals, lambda: robot_joint_ranges(Bundle.load(root)))
    return apply_edit(root, expected_version, desc, f"robot-joints:{','.join(sorted(vals))}", ROBOT_JOINT_CHANGES,
                      change, writer)


def _repose_articulated(bundle: Bundle, before: dict) -> None:
    """After an undo: rewrite the posed mesh of each articulated object whose joints the undo changed."""
    from real2sim.pipeline.articulated import repose_object

    for oid, obj in bundle.manifest.objects.items():
        if obj.articulation is None:
            continue
        old = ((before.get("objects") or {}).get(oid) or {}).get("articulation") or {}
        if old.get("joint_positions") != obj.articulation.joint_positions:
            repose_object(bundle, oid)


def undo(root: Path, expected_version: str | None = None, writer: str | None = None) -> EditResult:
    """Restore the newest snapshot of ``scene.json`` (:func:`real2sim.apps.review.versions.undo`); an articulated
    object whose joints it changes gets its posed mesh back at the restored joints."""
    return _undo(root, expected_version, writer, after=_repose_articulated)


# -- masks ------------------------------------------------------------------------------------
def _mask_changes(entity: str) -> tuple[str, ...]:
    return ("robot_masks",) if entity == "robot" else ("object_masks",)


def set_mask(root: Path, frame_key: str, entity: str, mask: np.ndarray, expected_version: str | None = None,
             source: str = "review", writer: str | None = None) -> EditResult:
    """Store ``mask`` (``(h, w) bool``) as ``masks/<frame_key>/<entity>.png`` and record it in the manifest."""
    m = np.asarray(mask).astype(bool)
    if m.ndim != 2 or not m.any():
        raise EditError(f"mask for '{entity}' in frame {frame_key} is empty or not 2-D; nothing was saved")
    if not frame_key.isalnum() or not entity.replace("_", "").replace("-", "").isalnum():
        raise EditError(f"frame key {frame_key!r} / entity {entity!r} must be alphanumeric ([A-Za-z0-9_-])")
    rel = f"masks/{frame_key}/{entity}.png"
    png = imaging.png_bytes(m)

    def change(bundle: Bundle):
        atomic_write_bytes(bundle.path(rel), png)
        cap = bundle.manifest.capture
        cap.masks.setdefault(frame_key, {})[entity] = rel
        if entity in cap.mask_states.get(frame_key, {}):
            cap.mask_states[frame_key][entity] = "prompt"  # a mask a person accepted is taken as at the scene pose

    return apply_edit(root, expected_version, f"mask {frame_key}/{entity} ({source}, {int(m.sum())} px)", "",
                      _mask_changes(entity), change, writer)


def remove_mask(root: Path, frame_key: str, entity: str, expected_version: str | None = None,
                writer: str | None = None) -> EditResult:
    """Reject a mask: drop it from the manifest (the PNG stays on disk so that undo can bring it back)."""
    def change(bundle: Bundle):
        masks = bundle.manifest.capture.masks
        if entity not in masks.get(frame_key, {}):
            raise EditError(f"frame {frame_key} has no mask for '{entity}'")
        del masks[frame_key][entity]
        if not masks[frame_key]:
            del masks[frame_key]
        states = bundle.manifest.capture.mask_states
        states.get(frame_key, {}).pop(entity, None)
        if frame_key in states and not states[frame_key]:
            del states[frame_key]

    return apply_edit(root, expected_version, f"rejected mask {frame_key}/{entity}", "", _mask_changes(entity), change,
                      writer)


# -- re-running stages for one object -----------------------------------------------------------
RERUNNABLE = ("alignment", "texture")


def rerun_object_stage(root: Path, stage: str, oid: str, expected_version: str | None = None,
                       writer: str | None = None) -> EditResult:
    """Re-run alignment or texturing for one object (forced), undoable like an edit.

    The stage keeps the previous pose/texture when it fails (its report says why).
    """
    if stage not in RERUNNABLE:
        raise EditError(f"cannot re-run '{stage}' from the review page (can: {', '.join(RERUNNABLE)})")
    root = Path(root)
    with locked(root, expected_version, writer):
        bundle = Bundle.load(root)
        if oid not in bundle.manifest.objects:
            raise EditError(f"object '{oid}' is not in the bundle")
        if not any(oid in m for m in bundle.manifest.capture.masks.values()):
            raise EditError(f"object '{oid}' has no mask in any frame: draw one in the Masks tab "
                            f"or run 'real2sim masks {root} --entity {oid} --point X,Y'")
        snapshot(root, f"re-run {stage} for {oid}", f"rerun-{stage}-{oid}")
        fn = ts.align_stage if stage == "alignment" else ts.texture_stage
        rec, _ = fn(bundle, [oid], force=True)
        log.info("review: re-ran %s for %s: %s", stage, oid, rec.message)
        return EditResult(record_writer(root, writer), f"{stage} for {oid}: {rec.message or rec.status} {rec.metrics}",
                          downstream(stage))
