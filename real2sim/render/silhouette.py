"""A tiny exact CPU rasteriser for silhouettes (tests, reports): pixel centres in the OpenCV convention."""
from __future__ import annotations

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.geometry import transform_points


def silhouette(camera: Camera, vertices_world, faces) -> np.ndarray:
    """``(h, w) bool`` mask of pixels whose centre falls inside any projected triangle in front of the camera.

    ``vertices_world`` ``(n, 3)``, ``faces`` ``(m, 3) int``. No occlusion (a silhouette is a union).
    """
    v = np.asarray(vertices_world, float)
    z = transform_points(np.linalg.inv(camera.T_world_camera), v)[:, 2]
    uv = camera.project(v)
    mask = np.zeros((camera.height, camera.width), bool)
    for f in np.asarray(faces, int):
        if (z[f] <= camera.near).any():
            continue
        a, b, c = uv[f]
        lo = np.maximum(np.floor(np.minimum(np.minimum(a, b), c)).astype(int), 0)
        hi = np.minimum(np.ceil(np.maximum(np.maximum(a, b), c)).astype(int), [camera.width - 1, camera.height - 1])
        if (hi < lo).any():
            continue
        ys, xs = np.mgrid[lo[1]:hi[1] + 1, lo[0]:hi[0] + 1]
        p = np.stack([xs.ravel(), ys.ravel()], 1).astype(float)
        d = (b[1] - c[1]) * (a[0] - c[0]) + (c[0] - b[0]) * (a[1] - c[1])
        if abs(d) < 1e-12:
            continue
        l1 = ((b[1] - c[1]) * (p[:, 0] - c[0]) + (c[0] - b[0]) * (p[:, 1] - c[1])) / d
        l2 = ((c[1] - a[1]) * (p[:, 0] - c[0]) + (a[0] - c[0]) * (p[:, 1] - c[1])) / d
        inside = (l1 >= 0) & (l2 >= 0) & (1 - l1 - l2 >= 0)
        mask[ys.ravel()[inside], xs.ravel()[inside]] = True
    return mask


def mask_centroid(mask) -> np.ndarray:
    """``(2,)`` (x, y) centroid of a boolean mask in OpenCV pixel coordinates."""
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        raise ValueError("empty mask has no centroid")
    return np.array([xs.mean(), ys.mean()])

