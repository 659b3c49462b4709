"""Pinhole camera in the OpenCV convention (+X right, +Y down, +Z forward).

Pixel coordinates follow OpenCV: the centre of the top-left pixel is (0, 0), so the
image spans [-0.5, width - 0.5]. Renderers that put pixel centres at (i + 0.5) are
converted inside their backend, never here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from real2sim.core.geometry import camera_pose_to_convention, transform_points


@dataclass
class Camera:
    """A calibrated camera."""

    width: int
    """Image width in pixels."""
    height: int
    """Image height in pixels."""
    K: np.ndarray
    """``(3, 3) float`` intrinsics [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (OpenCV pixel centres)."""
    T_world_camera: np.ndarray
    """``(4, 4) float`` pose of the OpenCV camera frame in the world."""
    distortion: np.ndarray = field(default_factory=lambda: np.zeros(5))
    """``(5,) float`` OpenCV k1, k2, p1, p2, k3."""
    near: float = 0.01
    """Near clipping distance (m) for renderers."""
    far: float = 10.0
    """Far clipping distance (m) for renderers."""

    @property
    def fx(self) -> float:
        return float(self.K[0, 0])

    @property
    def fy(self) -> float:
        return float(self.K[1, 1])

    @property
    def cx(self) -> float:
        return float(self.K[0, 2])

    @property
    def cy(self) -> float:
        return float(self.K[1, 2])

    @property
    def fovy(self) -> float:
        """Vertical field of view in radians (ignores the principal point offset)."""
        return float(2.0 * np.arctan(self.height / (2.0 * self.fy)))

    def project(self, points_world) -> np.ndarray:
        """``(n, 3)`` world points -> ``(n, 2)`` pixel coordinates (no distortion)."""
        pc = transform_points(np.linalg.inv(self.T_world_camera), points_world)
        uv = pc[:, :2] / pc[:, 2:3]
        return uv * [self.fx, self.fy] + [self.cx, self.cy]

    def depth_of(self, points_world) -> np.ndarray:
        """``(n,)`` depth (camera +Z) of world points."""
        return transform_points(np.linalg.inv(self.T_world_camera), points_world)[:, 2]

    def pose_in(self, convention: str) -> np.ndarray:
        """Camera pose in 'opencv', 'opengl' (USD, MuJoCo) or 'sapien' axes."""
        return camera_pose_to_convention(self.T_world_camera, convention)

    def scaled(self, s: float) -> "Camera":
        """The same camera for images ``s`` times the size (same pose; OpenCV pixel centres kept consistent:
        pixel edges scale, centres follow)."""
        w, h = max(1, int(round(self.width * s))), max(1, int(round(self.height * s)))
        sx, sy = w / self.width, h / self.height
        K = np.array(self.K, float)
        K[0, 0] *= sx
        K[1, 1] *= sy
        K[0, 2] = (self.cx + 0.5) * sx - 0.5
        K[1, 2] = (self.cy + 0.5) * sy - 0.5
        return Camera(w, h, K, np.array(self.T_world_camera, float), np.array(self.distortion, float), self.near,
                      self.far)

    def with_pose(self, T_world_camera) -> "Camera":
        """The same intrinsics at another ``(4, 4)`` pose."""
        return Camera(self.width, self.height, np.array(self.K, float), np.array(T_world_camera, float),
                      np.array(self.distortion, float), self.near, self.far)

    def principal_offset_px(self) -> tuple[float, float]:
        """Principal point offset from the image centre, in pixels (+x right, +y down)."""
        return self.cx - (self.width - 1) / 2.0, self.cy - (self.height - 1) / 2.0
