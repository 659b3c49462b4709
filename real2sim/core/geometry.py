"""Rigid transforms and quaternions.

Inside the library poses are ``(4, 4) float`` homogeneous matrices. On disk and at
API boundaries a pose is ``position (3,)`` plus ``quaternion (4,)`` in **wxyz** order.
"""
from __future__ import annotations

import numpy as np


def quat_wxyz_to_matrix(q) -> np.ndarray:
    """``(4,)`` wxyz quaternion (need not be unit) -> ``(3, 3)`` rotation."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat_wxyz(R) -> np.ndarray:
    """``(3, 3)`` rotation -> ``(4,)`` unit wxyz quaternion with w >= 0."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(np.asarray(R, dtype=float)).as_quat()
    q = np.array([w, x, y, z])
    return q if q[0] >= 0 else -q


def make_pose(position=(0.0, 0.0, 0.0), quat_wxyz=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """Position + wxyz quaternion -> ``(4, 4)`` transform."""
    T = np.eye(4)
    T[:3, :3] = quat_wxyz_to_matrix(quat_wxyz)
    T[:3, 3] = position
    return T


def split_pose(T) -> tuple[np.ndarray, np.ndarray]:
    """``(4, 4)`` transform -> (position ``(3,)``, wxyz quaternion ``(4,)``)."""
    T = np.asarray(T, dtype=float)
    return T[:3, 3].copy(), matrix_to_quat_wxyz(T[:3, :3])


def euler_xyz_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Extrinsic roll (x), pitch (y), yaw (z) in radians -> ``(3, 3)``: R = Rz Ry Rx."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_euler("xyz", [roll, pitch, yaw]).as_matrix()


def rotation_angle_between(Ra, Rb) -> float:
    """Angle in radians of the relative rotation Ra^T Rb."""
    c = (np.trace(np.asarray(Ra).T @ np.asarray(Rb)) - 1.0) / 2.0
    return float(np.arccos(np.clip(c, -1.0, 1.0)))


def transform_points(T, points) -> np.ndarray:
    """Apply ``(4, 4)`` T to ``(n, 3)`` points."""
    p = np.asarray(points, dtype=float)
    return p @ np.asarray(T)[:3, :3].T + np.asarray(T)[:3, 3]


def look_at_opencv(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """T_world_camera for an OpenCV camera (+Z forward, +Y down) at ``eye`` looking at ``target``."""
    eye, target, up = (np.asarray(v, dtype=float) for v in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-9:
        raise ValueError("look_at_opencv: viewing direction is parallel to 'up'; choose another up vector")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, y, z, eye
    return T


# Fixed rotations between camera conventions (camera-local axes).
# OpenCV: +X right, +Y down, +Z forward. OpenGL/USD/MuJoCo: +X right, +Y up, -Z forward.
# SAPIEN: +X forward, +Y left, +Z up.
R_OPENCV_FROM_OPENGL = np.diag([1.0, -1.0, -1.0])
R_OPENCV_FROM_SAPIEN = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])


def camera_pose_to_convention(T_world_cv, convention: str) -> np.ndarray:
    """Re-express an OpenCV camera pose in another camera convention ('opengl' or 'sapien')."""
    R = {"opencv": np.eye(3), "opengl": R_OPENCV_FROM_OPENGL, "sapien": R_OPENCV_FROM_SAPIEN}[convention]
    T = np.array(T_world_cv, dtype=float, copy=True)
    T[:3, :3] = T[:3, :3] @ R
    return T


def camera_pose_from_convention(T_world_other, convention: str) -> np.ndarray:
    """Inverse of :func:`camera_pose_to_convention`: get the OpenCV camera pose back."""
    R = {"opencv": np.eye(3), "opengl": R_OPENCV_FROM_OPENGL, "sapien": R_OPENCV_FROM_SAPIEN}[convention]
    T = np.array(T_world_other, dtype=float, copy=True)
    T[:3, :3] = T[:3, :3] @ R.T
    return T


def rotations_to_quats_wxyz(R) -> np.ndarray:
    """``(..., 3, 3)`` proper rotation matrices -> ``(..., 4)`` unit wxyz quaternions with w >= 0.

    Shepperd's method in numpy (no per-matrix Python call): the same quaternions as :func:`matrix_to_quat_wxyz` for
    orthonormal input, at a fraction of its cost (the env computes several per step). Input must be a rotation
    (engine poses are); use :func:`matrix_to_quat_wxyz` for matrices that need orthonormalising."""
    R = np.asarray(R, dtype=float)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    cand = np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    k = np.argmax(cand, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(cand, k[..., None], -1)[..., 0], 1e-300)) * 2  # 4 * |component k|
    d21, d02, d10 = R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]
    s01, s02, s12 = R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1]
    q = np.stack([
        np.stack([s / 4, d21 / s, d02 / s, d10 / s], -1),
        np.stack([d21 / s, s / 4, s01 / s, s02 / s], -1),
        np.stack([d02 / s, s01 / s, s / 4, s12 / s], -1),
        np.stack([d10 / s, s02 / s, s12 / s, s / 4], -1),
    ], -2)
    q = np.take_along_axis(q, k[..., None, None], -2)[..., 0, :]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)
