"""From one photo's mask to where the object is in 3-D, and back into the other photos.

The board gives every photo its pose, so one mask of the object (from one click in one photo) says where the object
can be: inside the cone of rays through the mask. The object also stands on the table (``z = 0``): the rays through
the mask's pixels meet the table behind the object, and the nearest of those points (seen from the camera) is the
object's front foot. The object lies behind its front foot by about as much as it is wide, which bounds the cone in
depth: :func:`lift_mask` returns that bounded cone as a mesh, and :func:`silhouette` projects any mesh (the cone,
or a rough visual hull later) into another photo.
"""
from __future__ import annotations

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import require
from real2sim.scan.carve import ScanError, _grid, _sample, signed_mask_distance


def silhouette(vertices: np.ndarray, faces: np.ndarray, camera: Camera) -> np.ndarray:
    """``(h, w) bool``: the pixels a closed mesh (world vertices) covers in ``camera``. Only the triangles facing the
    camera are filled: on a closed mesh they cover the same pixels as all of them, at half the cost."""
    import cv2

    out = np.zeros((camera.height, camera.width), np.uint8)
    Tcw = np.linalg.inv(camera.T_world_camera)
    pc = vertices @ Tcw[:3, :3].T + Tcw[:3, 3]
    front = pc[:, 2] > 1e-3
    uv = pc[:, :2] / np.maximum(pc[:, 2:3], 1e-3) * [camera.fx, camera.fy] + [camera.cx, camera.cy]
    a, b, c = (pc[faces[:, i]] for i in range(3))
    n = np.cross(b - a, c - a)
    outward = 1.0 if float((a * n).sum()) >= 0 else -1.0  # the mesh's winding (sign of its volume)
    facing = outward * (n * a).sum(1) <= 0  # the camera is at the origin of these coordinates
    ok = front[faces].all(1) & facing
    tris = np.rint(uv[faces[ok]] * 16).astype(np.int32)  # 4 bits of sub-pixel precision
    if len(tris):
        cv2.fillPoly(out, list(tris), 1, lineType=cv2.LINE_8, shift=4)
    return out.astype(bool)


def _ground_hits(mask: np.ndarray, camera: Camera, table_z: float, stride: int = 2) -> np.ndarray:
    """World points where the rays through ``mask``'s pixels meet the table plane (rays that reach it)."""
    ys, xs = np.nonzero(mask[::stride, ::stride])
    ys, xs = ys * stride, xs * stride
    rays = np.stack([(xs - camera.cx) / camera.fx, (ys - camera.cy) / camera.fy, np.ones(len(xs))], 1)
    R, o = camera.T_world_camera[:3, :3], camera.T_world_camera[:3, 3]
    d = rays @ R.T
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (table_z - o[2]) / d[:, 2]
    ok = np.isfinite(t) & (t > 0)
    return o[None] + t[ok, None] * d[ok]


def lift_mask(mask: np.ndarray, camera: Camera, region: np.ndarray, table_z: float = 0.0, resolution: int = 64,
              depth_factor: float = 1.6, margin: float = 0.25) -> tuple[np.ndarray, np.ndarray, dict]:
    """Where the object of ``mask`` (``(h, w) bool`` in ``camera``) can be: the cone of its pixels inside ``region``
    (``(2, 3)`` world box) above the table, cut to the object's depth when the camera looks at the object from the
    side (optical axis at least ~17 degrees off vertical): from ``margin`` widths in front of its front foot to
    ``depth_factor`` + ``margin`` widths behind it (width: the mask's width at the foot's distance). Returns the
    region's mesh (world vertices, faces) and what was estimated (foot, width, cut)."""
    measure = require("skimage.measure", "scan", "scikit-image")
    mask = np.asarray(mask, bool)
    if mask.sum() < 20:
        raise ScanError("the clicked photo's mask is empty: click inside the object (or give --box around it)")
    region = np.asarray(region, float).copy()
    region[0, 2] = max(region[0, 2], table_z)
    pts, vox, shape = _grid(region, resolution)
    dist = signed_mask_distance(mask)
    Tcw = np.linalg.inv(camera.T_world_camera)
    pc = pts @ Tcw[:3, :3].T.astype(np.float32) + Tcw[:3, 3].astype(np.float32)
    z = np.maximum(pc[:, 2], 1e-4)
    u = pc[:, 0] / z * camera.fx + camera.cx
    v = pc[:, 1] / z * camera.fy + camera.cy
    # inside the mask, with half a voxel's footprint of slack
    field = _sample(dist, u, v, -1e3) * z / camera.fx + 0.5 * vox
    field = np.where(pc[:, 2] > 1e-3, field, -1.0).astype(np.float32)
    axis = camera.T_world_camera[:3, 2]
    info = {"voxel_mm": round(vox * 1e3, 2), "depth_cut": False}
    hor = np.linalg.norm(axis[:2])
    hits = _ground_hits(mask, camera, table_z)
    if hor > 0.3 and len(hits) >= 10:
        hdir = axis[:2] / hor
        s_hits = hits[:, :2] @ hdir
        s_foot = float(np.percentile(s_hits, 1))
        foot = hits[int(np.argmin(np.abs(s_hits - s_foot)))]
        d_foot = float(camera.depth_of(foot[None])[0])
        ys, xs = np.nonzero(mask)
        width = float(np.percentile(xs, 99.5) - np.percentile(xs, 0.5) + 1) / camera.fx * d_foot
        s = pts[:, :2] @ hdir
        lo, hi = s_foot - margin * width, s_foot + (depth_factor + margin) * width
        field = np.minimum(field, np.minimum(s - lo, hi - s).astype(np.float32))
        info.update(depth_cut=True, foot=[round(float(x), 4) for x in foot], width_m=round(width, 4),
                    behind_foot_m=[round(lo - s_foot, 4), round(hi - s_foot, 4)])
    f = np.pad(field.reshape(shape), 1, constant_values=-1.0)
    if f.max() <= 0:
        raise ScanError("the clicked photo's mask lifts to nothing on the board: is the object on the board, and the "
                        "click on the object?")
    verts, faces, _, _ = measure.marching_cubes(f, level=0.0, spacing=(vox, vox, vox))
    return verts + (region[0] - vox), faces.astype(np.int64), info
