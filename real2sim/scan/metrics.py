"""How good a scan is: Chamfer distance and volume IoU against a reference mesh, how much of the object the views saw,
and a turntable picture."""
from __future__ import annotations

import numpy as np

from real2sim.core.camera import Camera
from real2sim.scan.o3d import open3d


def surface_samples(vertices, faces, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(n, 3)`` points uniformly on the surface and their ``(n, 3)`` face normals."""
    import trimesh

    tm = trimesh.Trimesh(np.asarray(vertices), np.asarray(faces), process=False)
    pts, fid = trimesh.sample.sample_surface(tm, n, seed=seed)
    return np.asarray(pts), np.asarray(tm.face_normals)[fid]


def chamfer(a_vertices, a_faces, b_vertices, b_faces, n: int = 30000, seed: int = 0) -> dict:
    """Symmetric Chamfer distance between two surfaces (m): ``mean`` = (mean a->b + mean b->a) / 2, also each
    direction, and the 95th percentile of both (where the worst part is)."""
    from scipy.spatial import cKDTree

    pa, _ = surface_samples(a_vertices, a_faces, n, seed)
    pb, _ = surface_samples(b_vertices, b_faces, n, seed + 1)
    dab = cKDTree(pb).query(pa)[0]
    dba = cKDTree(pa).query(pb)[0]
    return {"mean_m": float((dab.mean() + dba.mean()) / 2), "scan_to_ref_m": float(dab.mean()),
            "ref_to_scan_m": float(dba.mean()), "p95_m": float(np.percentile(np.concatenate([dab, dba]), 95))}


def _occupancy(vertices, faces, pts: np.ndarray) -> np.ndarray:
    o3d = open3d()
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(np.asarray(vertices, np.float32)),
                        o3d.core.Tensor(np.asarray(faces, np.uint32)))
    return scene.compute_occupancy(o3d.core.Tensor(pts.astype(np.float32)), nsamples=3).numpy() > 0.5


def volume_iou(a_vertices, a_faces, b_vertices, b_faces, resolution: int = 96) -> float:
    """Volume IoU of two closed meshes on a ``resolution``-per-longest-side grid over both boxes (open3d ray
    casting, 3 rays per point vote)."""
    va, vb = np.asarray(a_vertices), np.asarray(b_vertices)
    lo = np.minimum(va.min(0), vb.min(0))
    hi = np.maximum(va.max(0), vb.max(0))
    step = (hi - lo).max() / resolution
    axes = [np.arange(lo[i] + step / 2, hi[i], step) for i in range(3)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    ia, ib = _occupancy(va, a_faces, pts), _occupancy(vb, b_faces, pts)
    union = (ia | ib).sum()
    return float((ia & ib).sum() / union) if union else 0.0


def seen_fraction(vertices, faces, cameras: list[Camera], n: int = 4000, min_cos: float = 0.15, seed: int = 0,
                  table_z: float | None = None) -> tuple[float, np.ndarray]:
    """Fraction of the surface (``n`` samples) that some view sees face-on (cos > ``min_cos``), unoccluded (open3d
    ray casting) and inside the image; and the per-sample count of views. With ``table_z`` the bottom resting on the
    table (within 1 mm of it, facing down) is left out: no view can see it."""
    o3d = open3d()
    pts, nrm = surface_samples(vertices, faces, n, seed)
    if table_z is not None:
        keep = ~((pts[:, 2] < table_z + 1e-3) & (nrm[:, 2] < -0.9))
        pts, nrm = pts[keep], nrm[keep]
        n = len(pts)
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(np.asarray(vertices, np.float32)),
                        o3d.core.Tensor(np.asarray(faces, np.uint32)))
    count = np.zeros(n, int)
    for cam in cameras:
        eye = cam.T_world_camera[:3, 3]
        ray = eye - pts
        dist = np.linalg.norm(ray, axis=1)
        d = ray / dist[:, None]
        facing = np.einsum("nd,nd->n", nrm, d) > min_cos
        uv = cam.project(pts)
        inside = (uv[:, 0] >= 0) & (uv[:, 1] >= 0) & (uv[:, 0] < cam.width) & (uv[:, 1] < cam.height)
        origin = pts + d * 1e-4
        rays = o3d.core.Tensor(np.hstack([origin, d]).astype(np.float32))
        hit = scene.cast_rays(rays)["t_hit"].numpy()
        free = hit >= dist - 2e-4
        count += facing & inside & free
    return float((count > 0).mean()), count


def azimuth_gap_deg(cameras: list[Camera], centre: np.ndarray) -> float:
    """Largest gap (deg) between the cameras' azimuths around ``centre`` (360 for one view)."""
    az = np.sort([np.degrees(np.arctan2(*(c.T_world_camera[:3, 3] - centre)[[1, 0]])) % 360 for c in cameras])
    if len(az) < 2:
        return 360.0
    gaps = np.diff(np.concatenate([az, [az[0] + 360]]))
    return float(gaps.max())


def turntable_cameras(vertices, n: int = 8, width: int = 320, height: int = 240, elevation_deg: float = 30.0):
    """``n`` cameras around the object's box centre, far enough to frame it."""
    from real2sim.core.geometry import look_at_opencv

    v = np.asarray(vertices)
    centre = (v.min(0) + v.max(0)) / 2
    radius = float(np.linalg.norm(v.max(0) - v.min(0))) / 2
    f = 0.9 * height
    dist = radius / np.tan(np.arctan(height / 2 / f)) * 1.15
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1.0]])
    el = np.radians(elevation_deg)
    cams = []
    for k in range(n):
        az = 2 * np.pi * k / n
        eye = centre + dist * np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        cams.append(Camera(width, height, K, look_at_opencv(eye, centre), np.zeros(5), 0.01, 10.0))
    return cams
