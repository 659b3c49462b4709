"""Hull quality numbers: occupancy IoU, volume ratio, relative Hausdorff distance.

Inside-mesh tests use ray parity along +Z over seeded random columns (exact for a
watertight mesh, fast for any face count); inside-hull tests use the hulls' plane
equations; primitives are tested analytically.
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

N_COLUMNS = 8192        # random (x, y) columns in the bounding box ...
PER_COLUMN = 4          # ... with this many random z samples each (32,768 points)
SURFACE_SAMPLES = 20000  # per surface, for the Hausdorff distance (resolution ~ sample spacing)


# ---------------------------------------------------------------- sampling
def sample_columns(bounds, seed: int, n_columns: int = N_COLUMNS, per_column: int = PER_COLUMN):
    """Seeded points in ``bounds`` grouped in vertical columns: ``xy (C, 2)``, ``z (C, K)``."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(bounds, float)
    xy = lo[:2] + rng.random((n_columns, 2)) * (hi[:2] - lo[:2])
    z = lo[2] + rng.random((n_columns, per_column)) * (hi[2] - lo[2])
    return xy, z


def columns_to_points(xy, z) -> np.ndarray:
    k = z.shape[1]
    return np.column_stack([np.repeat(xy, k, axis=0), z.reshape(-1)])


def mesh_contains_columns(mesh, xy, z, chunk_pairs: int = 2_000_000) -> np.ndarray:
    """Inside-mesh flags ``(C*K,)`` for column samples (ray parity along +Z; mesh must be watertight)."""
    v = np.asarray(mesh.vertices, float)
    tri = v[np.asarray(mesh.faces)]
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    scale = float(np.ptp(v[:, :2], axis=0).max()) or 1.0
    keep = np.abs(det) > 1e-14 * scale * scale  # faces parallel to the ray never cross it
    a, b, c, det = a[keep], b[keep], c[keep], det[keep]
    lo_xy, hi_xy = tri[keep, :, :2].min(1), tri[keep, :, :2].max(1)
    cols, zs = [], []
    step = max(1, chunk_pairs // max(1, len(det)))
    for s in range(0, len(xy), step):
        p = xy[s:s + step]
        px, py = p[:, 0:1], p[:, 1:2]
        near = (px >= lo_xy[:, 0]) & (px <= hi_xy[:, 0]) & (py >= lo_xy[:, 1]) & (py <= hi_xy[:, 1])
        ci, fi = np.nonzero(near)
        if len(ci) == 0:
            continue
        qx, qy = xy[s + ci, 0], xy[s + ci, 1]
        A, B, C, D = a[fi], b[fi], c[fi], det[fi]
        w1 = ((qx - A[:, 0]) * (C[:, 1] - A[:, 1]) - (C[:, 0] - A[:, 0]) * (qy - A[:, 1])) / D
        w2 = ((B[:, 0] - A[:, 0]) * (qy - A[:, 1]) - (qx - A[:, 0]) * (B[:, 1] - A[:, 1])) / D
        w0 = 1.0 - w1 - w2
        hit = (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
        cols.append(s + ci[hit])
        zs.append(w0[hit] * A[hit, 2] + w1[hit] * B[hit, 2] + w2[hit] * C[hit, 2])
    n_col, k = z.shape
    if not cols:
        return np.zeros(n_col * k, bool)
    hc, hz = np.concatenate(cols), np.concatenate(zs)
    z0, span = min(hz.min(), z.min()), (max(hz.max(), z.max()) - min(hz.min(), z.min())) or 1.0
    keys = np.sort(hc * 4.0 + (hz - z0) / span)               # column-major, z within [0, 1]
    pc = np.repeat(np.arange(n_col), k)
    pk = pc * 4.0 + (z.reshape(-1) - z0) / span
    above = np.searchsorted(keys, pc * 4.0 + 2.0) - np.searchsorted(keys, pk, side="right")
    return (above % 2) == 1


def hull_equations(hull) -> np.ndarray:
    """Outward plane equations ``(n, 4)`` of a convex piece (``n . x + d <= 0`` inside), coplanar facets merged."""
    from scipy.spatial import ConvexHull

    eq = ConvexHull(np.asarray(hull.vertices, float)).equations
    return np.unique(np.round(eq, 12), axis=0)


def inside_hulls(hulls, points, tol: float = 0.0, block: int = 32) -> np.ndarray:
    """Whether each point lies inside any of the convex ``hulls``."""
    points = np.asarray(points, float)
    inside = np.zeros(len(points), bool)
    for h in hulls:
        lo, hi = np.asarray(h.bounds)
        cand = np.nonzero(~inside & np.all((points >= lo - tol) & (points <= hi + tol), axis=1))[0]
        if len(cand) == 0:
            continue
        eq = hull_equations(h)
        for s in range(0, len(eq), block):  # planes in blocks: outside points drop out early
            e = eq[s:s + block]
            cand = cand[np.all(points[cand] @ e[:, :3].T + e[:, 3] <= tol, axis=1)]
            if len(cand) == 0:
                break
        inside[cand] = True
    return inside


def inside_primitive(kind: str, size, pose, points, tol: float = 0.0) -> np.ndarray:
    pose = np.asarray(pose, float)
    p = (np.asarray(points, float) - pose[:3, 3]) @ pose[:3, :3]  # into the primitive frame
    size = np.asarray(size, float)
    if kind == "box":
        return np.all(np.abs(p) <= size + tol, axis=1)
    if kind == "cylinder":
        r, hh = size
        return (p[:, 0] ** 2 + p[:, 1] ** 2 <= (r + tol) ** 2) & (np.abs(p[:, 2]) <= hh + tol)
    if kind == "sphere":
        return np.einsum("ij,ij->i", p, p) <= (size[0] + tol) ** 2
    raise ValueError(f"unknown primitive kind '{kind}'")


def primitive_volume(kind: str, size) -> float:
    s = [float(x) for x in size]
    if kind == "box":
        return 8.0 * s[0] * s[1] * s[2]
    if kind == "cylinder":
        return np.pi * s[0] ** 2 * 2.0 * s[1]
    if kind == "sphere":
        return 4.0 / 3.0 * np.pi * s[0] ** 3
    raise ValueError(f"unknown primitive kind '{kind}'")


def primitive_mesh(kind: str, size, pose):
    """A triangle mesh of a primitive (for pictures and surface sampling)."""
    import trimesh

    s = [float(x) for x in size]
    if kind == "box":
        m = trimesh.creation.box(extents=2.0 * np.asarray(s))
    elif kind == "cylinder":
        m = trimesh.creation.cylinder(radius=s[0], height=2.0 * s[1], sections=64)
    elif kind == "sphere":
        m = trimesh.creation.icosphere(subdivisions=3, radius=s[0])
    else:
        raise ValueError(f"unknown primitive kind '{kind}'")
    m.apply_transform(np.asarray(pose, float))
    return m


# ---------------------------------------------------------------- quality
def _pieces(result_or_hulls):
    """(kind, hulls, size, pose) of a CollisionResult or a list of hull meshes."""
    if hasattr(result_or_hulls, "kind"):
        r = result_or_hulls
        return r.kind, list(r.hulls), list(r.size), np.asarray(r.pose, float)
    return "hulls", list(result_or_hulls), [], np.eye(4)


def solid_bounds(result_or_hulls) -> np.ndarray:
    kind, hulls, size, pose = _pieces(result_or_hulls)
    if kind == "hulls":
        return np.array([np.min([h.bounds[0] for h in hulls], 0), np.max([h.bounds[1] for h in hulls], 0)])
    return np.asarray(primitive_mesh(kind, size, pose).bounds)


def solid_contains(result_or_hulls, points, tol: float = 0.0) -> np.ndarray:
    kind, hulls, size, pose = _pieces(result_or_hulls)
    if kind == "hulls":
        return inside_hulls(hulls, points, tol)
    return inside_primitive(kind, size, pose, points, tol)


def _union_surface_samples(hulls, n: int, seed: int, diag: float) -> np.ndarray:
    """Surface samples of the union of hulls (faces buried inside another hull are dropped)."""
    import trimesh

    pts, nrm = [], []
    areas = np.array([h.area for h in hulls])
    counts = np.maximum(1, np.round(n * areas / max(areas.sum(), 1e-30)).astype(int))
    for i, (h, k) in enumerate(zip(hulls, counts)):
        p, fi = trimesh.sample.sample_surface(h, int(k), seed=seed + i)
        pts.append(p)
        nrm.append(h.face_normals[fi])
    pts, nrm = np.concatenate(pts), np.concatenate(nrm)
    if len(hulls) > 1:
        buried = inside_hulls(hulls, pts + 1e-4 * diag * nrm)
        if buried.all():  # cannot happen for a closed union; keep something to measure
            return pts
        pts = pts[~buried]
    return pts


def hull_quality(mesh, result_or_hulls, seed: int = 0, n_columns: int = N_COLUMNS,
                 per_column: int = PER_COLUMN, surface_samples: int = SURFACE_SAMPLES) -> dict:
    """Quality of collision geometry against a watertight ``mesh``.

    ``result_or_hulls`` is a :class:`collision.CollisionResult` (hulls or primitive)
    or a list of convex ``trimesh.Trimesh``. Returns ``hull_count``, ``volume_ratio``
    (collision volume / mesh volume; hull overlaps count twice), ``occupancy_iou``
    (seeded points in the joint bounding box, inside-mesh vs inside-collision) and
    ``hausdorff_rel`` (symmetric Hausdorff distance between surface samples over the
    mesh's bounding-box diagonal).
    """
    import trimesh
    from scipy.spatial import cKDTree

    kind, hulls, size, pose = _pieces(result_or_hulls)
    if kind == "hulls" and not hulls:
        raise ValueError("hull_quality needs at least one hull")
    mb = np.asarray(mesh.bounds, float)
    sb = solid_bounds(result_or_hulls)
    bounds = np.array([np.minimum(mb[0], sb[0]), np.maximum(mb[1], sb[1])])
    diag = float(np.linalg.norm(mb[1] - mb[0]))

    xy, z = sample_columns(bounds, seed, n_columns, per_column)
    in_mesh = mesh_contains_columns(mesh, xy, z)
    in_col = solid_contains(result_or_hulls, columns_to_points(xy, z))
    union = np.count_nonzero(in_mesh | in_col)
    iou = float(np.count_nonzero(in_mesh & in_col) / union) if union else 0.0

    mesh_vol = float(abs(mesh.volume))
    col_vol = float(sum(abs(h.volume) for h in hulls)) if kind == "hulls" else primitive_volume(kind, size)

    a, _ = trimesh.sample.sample_surface(mesh, surface_samples, seed=seed)
    if kind == "hulls":
        b = _union_surface_samples(hulls, surface_samples, seed + 1, diag)
    else:
        b, _ = trimesh.sample.sample_surface(primitive_mesh(kind, size, pose), surface_samples, seed=seed + 1)
    d_ab = cKDTree(b).query(a)[0].max()
    d_ba = cKDTree(a).query(b)[0].max()
    return {
        "hull_count": len(hulls) if kind == "hulls" else 1,
        "volume_ratio": round(col_vol / mesh_vol, 6) if mesh_vol > 0 else float("inf"),
        "occupancy_iou": round(iou, 6),
        "hausdorff_rel": round(float(max(d_ab, d_ba)) / diag, 6) if diag > 0 else 0.0,
    }
