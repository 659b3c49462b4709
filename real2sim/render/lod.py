"""Textured level of detail for rendered object visuals: a decimated copy of a visual mesh that keeps its texture,
used where the mesh has far more triangles than its size on the bundle's cameras can show.

Why: a scanned/downloaded object mesh (SIMPLER's coke can: 25,000 triangles, 6.6 cm across) seen from 0.6 m at
640x512 covers ~4,000 pixels; on CPU rasterisers (llvmpipe, lavapipe) its vertex work dominated the composited
step. The exports the env renders (MJCF, SAPIEN) therefore carry this copy; the bundle's ``visual.obj`` stays the
full mesh (USD, texture, pose and mask stages read it).

How much (scale-aware, no constant face count): for each fixed camera of the bundle the object's bounding sphere at
its pose gives a metres-per-pixel scale at its *closest approach* (the sphere's near side brought ``approach``
times closer, so an object lifted towards the camera still holds the bound). The geometric tolerance is
``pixel_error`` pixels at that scale; Garland-Heckbert quadric decimation (open3d, on the mesh welded by position)
is searched for the fewest faces whose deviation from the original (both ways, 99.9th percentile over sampled
surface points) stays within it. The copy is made only when the mesh has more faces than ``faces_per_pixel`` x its
bounding sphere's projected area in pixels, and used only when it has at most ``1/min_reduction`` of the faces;
other meshes (boxes, the demo scene's objects) render as they are.

Texture: the decimated triangles get face-varying UVs from the original surface. Each new triangle belongs to the
UV chart (mesh welded by position *and* UV, split at seams) of the original surface nearest its centroid; each of
its corners takes the UV of its closest point within that chart, so no triangle samples another chart's part of the
atlas (one crossing a seam stretches its chart's edge texels instead). A chart that meets itself (a cylinder's side
unwrapped once) would send a corner past that seam to the chart's far side: a corner whose UV lies further from the
affine xyz->uv map of the centroid's original face (extended to the corner) than half the triangle's UV size takes
that extension instead. Normals: the original surface's smooth normals (area-weighted over the position-welded
mesh) at each corner's closest point.

Cached in the bundle, content-addressed: ``objects/<id>/lod/<key>.obj`` (+ ``.json``: faces, tolerance, measured
deviation), ``key`` = hash of the source mesh bytes, the (quantised) tolerance and the method version. Deterministic
(open3d's decimation is sequential). Needs open3d (the ``scan`` extra); without it the full mesh is used (logged).
``REAL2SIM_VISUAL_LOD=off`` turns the copy off for an export (e.g. for a close-up mounted camera).
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from real2sim.core.bundle import atomic_write_bytes, atomic_write_json, hash_bytes, hash_file
from real2sim.core.errors import DependencyMissing, MeshError

log = logging.getLogger(__name__)
METHOD_VERSION = 1
ENV_SWITCH = "REAL2SIM_VISUAL_LOD"


@dataclass(frozen=True)
class LodConfig:
    """``pixel_error``: largest surface deviation allowed, in pixels at the closest approach; ``approach``: the
    object may come this many times closer to a camera than its exported pose (1.25: to 80 % of the distance);
    ``faces_per_pixel``: a mesh with at most this many faces per pixel of its bounding sphere's projected area at
    its pose is left alone (0.5: about one face per covered pixel, half of a closed mesh facing away);
    ``min_reduction``: a copy that does not divide the face count by at least this much is not used."""

    pixel_error: float = 0.25
    approach: float = 1.25
    faces_per_pixel: float = 0.5
    min_reduction: float = 2.0


@dataclass
class LodResult:
    path: Path | None          # the copy to render, or None: render the full mesh
    reason: str
    faces: int = 0
    source_faces: int = 0
    tolerance_m: float = 0.0
    deviation_m: float = 0.0


def _open3d():
    if "open3d" not in sys.modules and "coacd" in sys.modules:
        raise DependencyMissing("open3d cannot be imported after coacd in one process")
    import open3d  # noqa: F401  (optional: the 'scan' extra)

    return sys.modules["open3d"]


def screen_scale(bounds_centre_world: np.ndarray, radius: float, cameras, approach: float) -> tuple[float, float]:
    """(pixels per metre at the closest approach, projected area in pixels at the pose) of a sphere seen by ``cameras``
    (:class:`real2sim.core.camera.Camera`); (0, 0) when no camera sees it in front of itself."""
    ppm, area = 0.0, 0.0
    for cam in cameras:
        z = float(cam.depth_of(np.asarray(bounds_centre_world, float)[None])[0])
        if z + radius <= 0:  # behind the camera
            continue
        near = (z - radius) / approach
        f = max(cam.fx, cam.fy)
        if near <= 1e-6:  # the camera is inside the sphere's closest approach: no bound, full detail
            return math.inf, math.inf
        ppm = max(ppm, f / near)
        area = max(area, math.pi * (f * radius / max(z, radius)) ** 2)
    return ppm, area


def quantised_tolerance(tol: float) -> float:
    """The tolerance rounded down to a quarter octave (2^(k/4)): a camera moved a little reuses the cached copy."""
    return float(2.0 ** (math.floor(4.0 * math.log2(tol)) / 4.0))


def _face_normals_areas(v, f):
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    a = np.linalg.norm(n, axis=1)
    return n / np.maximum(a, 1e-30)[:, None], 0.5 * a


def _weld(v, f):
    """Vertices merged by position (to 1e-9 of the bounding diagonal): seams split positions, decimation needs them
    joined."""
    diag = float(np.linalg.norm(np.ptp(v, 0))) or 1.0
    q = np.round(v / (diag * 1e-9)).astype(np.int64)
    _, first, inv = np.unique(q, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # keep first-appearance order (deterministic, close to the file's)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return v[first[order]], rank[inv.ravel()][f]


def _deviation(o3d, v0, f0, v1, f1, quantile: float = 99.9) -> float:
    """The larger of the two one-sided distances between two surfaces, each the ``quantile`` percentile over
    deterministic samples (vertices and face centroids): the maximum is set by a handful of samples on slivers and
    open edges that no pixel shows, the 99.9th percentile by the surface."""
    def dist(v, f, pts):
        sc = o3d.t.geometry.RaycastingScene()
        sc.add_triangles(o3d.core.Tensor(v.astype(np.float32)), o3d.core.Tensor(f.astype(np.uint32)))
        return sc.compute_distance(o3d.core.Tensor(pts.astype(np.float32))).numpy()

    d01 = dist(v1, f1, np.concatenate([v0, v0[f0].mean(1)]))
    d10 = dist(v0, f0, np.concatenate([v1, v1[f1].mean(1)]))
    return float(max(np.percentile(d01, quantile), np.percentile(d10, quantile)))


def _decimate_to(o3d, v0, f0, wv, wf, tolerance: float, steps: int = 4):
    """The fewest-faces quadric decimation of the welded mesh (``wv``, ``wf``) whose measured deviation from the
    original stays within ``tolerance``: halve the face count until the deviation exceeds it, then bisect (in log
    faces, ``steps`` times: within ~4 %) between the last pass and the first failure. Each attempt decimates the
    last passing mesh further (progressive, so the search costs about one full decimation); the deviation is
    always measured against the original. Returns (vertices, faces, deviation); the welded original (deviation 0)
    when even half the faces deviates too much."""
    def attempt(start, target: int):
        v, f = start
        mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(v), o3d.utility.Vector3iVector(f.astype(np.int32)))
        dec = mesh.simplify_quadric_decimation(target_number_of_triangles=int(target))
        dec.remove_degenerate_triangles()
        dec.remove_unreferenced_vertices()
        v, f = np.asarray(dec.vertices, float), np.asarray(dec.triangles, np.int64)
        return v, f, (_deviation(o3d, v0, f0, v, f) if len(f) else math.inf)

    best = (wv, wf, 0.0)
    hi, lo = len(wf), None  # the smallest face count known to pass, the largest known to fail
    target = hi // 2
    while target >= 4:
        v, f, dev = attempt(best[:2], target)
        if dev > tolerance:
            lo = target
            break
        best, hi = (v, f, dev), len(f)
        target = hi // 2
    if lo is None or hi == len(wf):
        return best
    for _ in range(steps):
        mid = int(round(math.sqrt(lo * hi)))
        if mid <= lo or mid >= hi:
            break
        v, f, dev = attempt(best[:2], mid)
        if dev > tolerance:
            lo = mid
        else:
            best, hi = (v, f, dev), len(f)
    return best


def decimate_textured(vertices, faces, uv, face_uv, tolerance: float):
    """Decimate to ``tolerance`` (metres) and transfer UVs and shading normals. Returns a dict: ``vertices (n, 3)``,
    ``faces (m, 3)``, ``uv (3m, 2)``, ``face_uv (m, 3)``, ``normals (3m, 3)`` (face-varying), ``deviation`` (metres,
    the larger of the two one-sided 99.9th-percentile distances over sampled points), ``straddling`` (fraction of
    triangles with a corner nearer another chart) and ``seam_corners`` (fraction of corners that took the affine
    extension)."""
    o3d = _open3d()
    v0, f0 = np.asarray(vertices, float), np.asarray(faces, np.int64)
    uv0, fuv0 = np.asarray(uv, float), np.asarray(face_uv, np.int64)
    wv, wf = _weld(v0, f0)
    v1, f1, deviation = _decimate_to(o3d, v0, f0, wv, wf, float(tolerance))

    out = transfer_attributes(o3d, v0, f0, uv0, fuv0, v1, f1)
    out["deviation"] = deviation
    return out


def uv_charts(v0, f0, uv0, fuv0) -> np.ndarray:
    """``(F,)`` chart id of each face: connected components of the mesh welded by position *and* UV (faces joined
    across an edge only where both ends keep their UVs; seams and open edges separate charts)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    diag = float(np.linalg.norm(np.ptp(v0, 0))) or 1.0
    key = np.concatenate([np.round(v0[f0].reshape(-1, 3) / (diag * 1e-9)),
                          np.round(uv0[fuv0].reshape(-1, 2) * 1e7)], 1).astype(np.int64)
    _, corner = np.unique(key, axis=0, return_inverse=True)
    corner = corner.ravel().reshape(-1, 3)
    m = len(f0)
    edges = np.sort(np.stack([corner[:, [0, 1]], corner[:, [1, 2]], corner[:, [2, 0]]], 1).reshape(-1, 2), 1)
    face = np.repeat(np.arange(m), 3)
    _, eid = np.unique(edges, axis=0, return_inverse=True)
    order = np.argsort(eid.ravel(), kind="stable")
    e_sorted, f_sorted = eid.ravel()[order], face[order]
    same = e_sorted[1:] == e_sorted[:-1]  # consecutive faces on one (position, uv) edge are joined
    a, b = f_sorted[:-1][same], f_sorted[1:][same]
    adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(m, m))
    return connected_components(adj, directed=False)[1]


def transfer_attributes(o3d, v0, f0, uv0, fuv0, v1, f1) -> dict:
    """Face-varying UVs and shading normals for the decimated mesh (``v1``, ``f1``) from the original (``v0``,
    ``f0``, ``uv0`` indexed by ``fuv0``): each new triangle belongs to the UV chart of the original surface nearest
    its centroid, and each of its corners takes the UV of its closest point *within that chart*, so a triangle
    never samples another chart's part of the atlas (one that crosses a seam stretches its chart's edge instead).
    Returns ``vertices``, ``faces``, ``uv (3m, 2)``, ``face_uv (m, 3)``, ``normals (3m, 3)``, ``straddling`` (the
    fraction of triangles with a corner closer to another chart than to its own, i.e. across a seam)."""
    def scene_of(faces):
        sc = o3d.t.geometry.RaycastingScene()
        sc.add_triangles(o3d.core.Tensor(v0.astype(np.float32)), o3d.core.Tensor(faces.astype(np.uint32)))
        return sc

    def closest(sc, points):
        r = sc.compute_closest_points(o3d.core.Tensor(np.asarray(points, np.float32)))
        b = r["primitive_ids"].numpy().astype(np.int64), r["primitive_uvs"].numpy().astype(float)
        return b[0], np.stack([1.0 - b[1][:, 0] - b[1][:, 1], b[1][:, 0], b[1][:, 1]], 1)  # p = sum bary_k P_k

    m = len(f1)
    corners = v1[f1].reshape(-1, 3)
    charts = uv_charts(v0, f0, uv0, fuv0)
    area0_all = _face_normals_areas(v0, f0)[1]
    ok = np.flatnonzero(area0_all > 1e-3 * np.median(area0_all))  # anchors need an invertible affine map
    anchor, _ = closest(scene_of(f0[ok]), v1[f1].mean(1))
    anchor = ok[anchor]
    chart = charts[anchor]                             # (m,)
    any_fid, _ = closest(scene_of(f0), corners)
    straddle = (charts[any_fid].reshape(m, 3) != chart[:, None]).any(1)
    cfid = np.empty(3 * m, np.int64)
    cbary = np.empty((3 * m, 3))
    corner_chart = np.repeat(chart, 3)
    for c in np.unique(chart):
        ids = np.flatnonzero(charts == c)
        sel = np.flatnonzero(corner_chart == c)
        fid, bary = closest(scene_of(f0[ids]), corners[sel])
        cfid[sel], cbary[sel] = ids[fid], bary
    uv_cp = np.einsum("nk,nkd->nd", cbary, uv0[fuv0[cfid]]).reshape(m, 3, 2)
    # a chart can meet itself at a seam (a cylinder's side unwrapped once): a corner past that seam finds its
    # closest point on the far side of the chart (u ~ 1 where its neighbours have u ~ 0). The anchor face's affine
    # xyz->uv map, extended to the corners, says which side is meant; a corner whose closest-point UV is further
    # from it than half the triangle's UV size takes the extension (a texture repeat wraps it as the seam does)
    fn0, area0 = _face_normals_areas(v0, f0)
    P, U = v0[f0[anchor]], uv0[fuv0[anchor]]           # (m, 3, 3), (m, 3, 2)
    e1, e2 = P[:, 1] - P[:, 0], P[:, 2] - P[:, 0]
    g11, g12, g22 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    det = g11 * g22 - g12 ** 2
    usable = det > 1e-12 * np.maximum(g11 * g22, 1e-300)
    det = np.where(usable, det, 1.0)
    w = v1[f1] - P[:, None, 0]
    r1, r2 = (w * e1[:, None]).sum(2), (w * e2[:, None]).sum(2)
    b1 = (g22[:, None] * r1 - g12[:, None] * r2) / det[:, None]
    b2 = (g11[:, None] * r2 - g12[:, None] * r1) / det[:, None]
    uv_ext = U[:, None, 0] + b1[..., None] * (U[:, None, 1] - U[:, None, 0]) + b2[..., None] * (U[:, None, 2] - U[:, None, 0])
    size = np.linalg.norm(uv_ext - np.roll(uv_ext, 1, axis=1), axis=2).max(1)
    far = (np.linalg.norm(uv_cp - uv_ext, axis=2) > 0.5 * size[:, None] + 1e-4) & usable[:, None]
    uv1 = np.where(far[..., None], uv_ext, uv_cp).reshape(-1, 2)

    # shading normals of the original (area-weighted vertex normals of the welded mesh) at the corners
    wv, wf = _weld(v0, f0)
    vn = np.zeros_like(wv)
    for k in range(3):
        np.add.at(vn, wf[:, k], fn0 * area0[:, None])
    vn /= np.maximum(np.linalg.norm(vn, axis=1), 1e-30)[:, None]
    nrm = np.einsum("nk,nkd->nd", cbary, vn[wf[cfid]])
    nrm /= np.maximum(np.linalg.norm(nrm, axis=1), 1e-30)[:, None]

    return {"vertices": v1, "faces": f1, "uv": uv1, "face_uv": np.arange(3 * m).reshape(m, 3),
            "normals": nrm, "straddling": float(straddle.mean()), "seam_corners": float(far.mean())}


def obj_text(d: dict) -> str:
    """Byte-stable OBJ text (positions, face-varying UVs and normals)."""
    lines = [f"v {a:.7f} {b:.7f} {c:.7f}" for a, b, c in d["vertices"]]
    lines += [f"vt {a:.7f} {b:.7f}" for a, b in d["uv"]]
    lines += [f"vn {a:.6f} {b:.6f} {c:.6f}" for a, b, c in d["normals"]]
    f, fu = np.asarray(d["faces"]) + 1, np.asarray(d["face_uv"]) + 1
    lines += [f"f {a}/{ua}/{ua} {b}/{ub}/{ub} {c}/{uc}/{uc}" for (a, b, c), (ua, ub, uc) in zip(f, fu)]
    return "\n".join(lines).replace("-0.0000000 ", "0.0000000 ") + "\n"


def _face_uv_of(mesh) -> tuple[np.ndarray, np.ndarray] | None:
    uv = getattr(getattr(mesh, "visual", None), "uv", None)
    if uv is None or len(uv) != len(mesh.vertices):
        return None
    return np.asarray(uv, float), np.asarray(mesh.faces, np.int64)


def object_lod(bundle, oid: str, config: LodConfig | None = None) -> LodResult:
    """The level-of-detail copy of object ``oid``'s visual mesh for the bundle's fixed cameras (made and cached in
    ``objects/<oid>/lod/`` on first use), or a result with ``path=None`` and the reason the full mesh is kept."""
    from real2sim.core.geometry import transform_points
    from real2sim.core.meshes import load_mesh

    cfg = config or LodConfig()
    if not enabled():
        return LodResult(None, f"{ENV_SWITCH}=off")
    obj = bundle.object(oid)
    if obj.articulation is not None:
        return LodResult(None, "articulated object (link meshes come from its URDF)")
    src = bundle.path(obj.visual.mesh)
    try:
        mesh = load_mesh(src)
    except MeshError as exc:  # the exporter reports the missing/broken mesh with its own fix
        return LodResult(None, f"visual mesh unreadable ({exc})")
    n = len(mesh.faces)
    lo, hi = np.asarray(mesh.bounds, float)
    centre_local, radius = 0.5 * (lo + hi), 0.5 * float(np.linalg.norm(hi - lo))
    centre = transform_points(obj.pose.matrix(), centre_local[None])[0]
    cams = [c.camera() for c in bundle.manifest.cameras.values()]
    ppm, area = screen_scale(centre, radius, cams, cfg.approach)
    if not cams or ppm == 0.0:
        return LodResult(None, "no camera of the bundle sees the object", source_faces=n)
    if not math.isfinite(ppm) or n <= cfg.faces_per_pixel * area:
        return LodResult(None, f"{n} faces for ~{area:.0f} px on screen: not more than it can show", source_faces=n)
    if _face_uv_of(mesh) is None and obj.visual.texture:
        return LodResult(None, "textured mesh without per-vertex UVs", source_faces=n)
    try:
        _open3d()
    except (ImportError, DependencyMissing) as exc:
        log.info("object '%s': %d faces, no level-of-detail copy (open3d missing: %s)", oid, n, exc)
        return LodResult(None, f"open3d unavailable ({exc})", source_faces=n)
    tol = quantised_tolerance(cfg.pixel_error / ppm)
    params = {"version": METHOD_VERSION, "tolerance": tol, "source": hash_file(src)}
    key = hash_bytes(json.dumps(params, sort_keys=True).encode())
    out_dir = bundle.object_dir(oid) / "lod"
    path, meta_path = out_dir / f"{key}.obj", out_dir / f"{key}.json"
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
    else:
        uvs = _face_uv_of(mesh)
        uv, fuv = uvs if uvs is not None else (np.zeros((len(mesh.vertices), 2)), np.asarray(mesh.faces, np.int64))
        try:
            d = decimate_textured(mesh.vertices, mesh.faces, uv, fuv, tol)
        except (RuntimeError, ValueError, IndexError) as exc:  # an optimisation: never fail the export for it
            log.warning("object '%s': no level-of-detail copy, decimation failed (%s); the full mesh is rendered",
                        oid, exc)
            return LodResult(None, f"decimation failed ({exc})", source_faces=n)
        meta = {**params, "config": asdict(cfg), "source_mesh": obj.visual.mesh, "source_faces": n,
                "faces": int(len(d["faces"])), "deviation_m": d["deviation"], "straddling": d["straddling"],
                "pixels_per_metre": ppm, "projected_area_px": area}
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, obj_text(d).encode())
        atomic_write_json(meta_path, meta)
        for old in out_dir.iterdir():  # copies for an earlier camera or mesh (exports hold their own copies)
            if old.is_file() and old.stem != key and old.suffix in (".obj", ".json"):
                old.unlink()
    if meta["faces"] * cfg.min_reduction > n:
        return LodResult(None, f"decimation kept {meta['faces']} of {n} faces (less than {cfg.min_reduction:g}x "
                         "fewer)", source_faces=n)
    log.info("object '%s': rendered from a level-of-detail copy, %d of %d faces (tolerance %.2f mm, measured %.2f mm)",
             oid, meta["faces"], n, 1e3 * tol, 1e3 * meta["deviation_m"])
    return LodResult(path, "decimated", meta["faces"], n, tol, meta["deviation_m"])


def enabled() -> bool:
    """False when ``REAL2SIM_VISUAL_LOD`` is off/0/false/no."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "off", "false", "no")


def settings_key() -> dict:
    """What besides the scene and its files decides the render meshes an export writes (for the export stage's
    input hash: switching the copy on or off, or a new method, exports again)."""
    return {"visual_lod": METHOD_VERSION, "config": asdict(LodConfig())} if enabled() else {"visual_lod": "off"}


def render_mesh_path(bundle, oid: str) -> Path:
    """The mesh file an engine that renders the env's fixed cameras should load for object ``oid``'s visual: its
    level-of-detail copy when it has one, else ``objects/<oid>/visual.*``."""
    res = object_lod(bundle, oid)
    return res.path if res.path is not None else bundle.path(bundle.object(oid).visual.mesh)


__all__ = ["ENV_SWITCH", "LodConfig", "LodResult", "decimate_textured", "enabled", "object_lod", "obj_text",
           "quantised_tolerance", "render_mesh_path", "screen_scale", "settings_key", "transfer_attributes",
           "uv_charts"]
