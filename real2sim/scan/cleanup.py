"""open3d mesh cleanup of a reconstruction: largest component, hole filling, smoothing, quadric decimation to a face
budget, outward normals, the bottom cut at the table plane, and a watertight check."""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np

from real2sim.scan.o3d import open3d

log = logging.getLogger(__name__)


@dataclass
class CleanupConfig:
    """Settings of :func:`clean_mesh`."""

    face_budget: int = 10000
    """Quadric decimation down to at most this many triangles."""
    smooth_iterations: int = 5
    """Taubin smoothing iterations (volume-preserving; 0 = off)."""
    hole_size_m: float = 0.2
    """Holes with a boundary shorter than this (m) are filled."""
    table_z: float | None = 0.0
    """Nothing below this plane (m); vertices below are moved onto it after smoothing."""


@dataclass
class CleanupReport:
    """What :func:`clean_mesh` did."""

    components: int
    kept_fraction: float
    """Triangles of the largest component / all triangles."""
    faces_in: int
    faces_out: int
    holes_filled: bool
    watertight: bool
    volume_m3: float | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def to_o3d(vertices, faces):
    o3d = open3d()
    m = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(np.asarray(vertices, np.float64)),
                                  o3d.utility.Vector3iVector(np.asarray(faces, np.int32)))
    return m


def _arrays(m) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(m.vertices, np.float64).copy(), np.asarray(m.triangles, np.int64).copy()


def largest_component(m) -> tuple[object, int, float]:
    """The largest connected piece (by triangles), the number of pieces and the kept fraction."""
    ids, counts, _ = m.cluster_connected_triangles()
    ids, counts = np.asarray(ids), np.asarray(counts)
    if len(counts) <= 1:
        return m, len(counts), 1.0
    keep = int(np.argmax(counts))
    m.remove_triangles_by_mask(ids != keep)
    m.remove_unreferenced_vertices()
    return m, len(counts), float(counts[keep] / counts.sum())


def fill_holes(m, hole_size: float):
    """Fill boundary loops shorter than ``hole_size`` (open3d's tensor API)."""
    o3d = open3d()
    t = o3d.t.geometry.TriangleMesh.from_legacy(m)
    return t.fill_holes(hole_size=float(hole_size)).to_legacy()


def orient_outward(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Faces wound so normals point outwards (consistent winding, positive volume)."""
    import trimesh

    tm = trimesh.Trimesh(vertices, faces, process=False)
    trimesh.repair.fix_normals(tm, multibody=False)
    return np.asarray(tm.faces, np.int64)


def clean_mesh(vertices, faces, config: CleanupConfig | None = None):
    """Clean a reconstruction; returns ``(vertices (V, 3), faces (F, 3), CleanupReport)``."""
    import time

    import trimesh

    cfg = config or CleanupConfig()
    notes = []
    t0 = time.perf_counter()
    m = to_o3d(vertices, faces)
    m.remove_duplicated_vertices()
    m.remove_degenerate_triangles()
    m.remove_duplicated_triangles()
    m.remove_unreferenced_vertices()
    faces_in = len(m.triangles)
    m, ncomp, kept = largest_component(m)
    if ncomp > 1:
        notes.append(f"kept the largest of {ncomp} pieces ({kept:.1%} of the triangles); the rest was noise or "
                     "a second object")
    filled = False
    if not (m.is_edge_manifold(allow_boundary_edges=False) and m.is_vertex_manifold()):
        m = fill_holes(m, cfg.hole_size_m)
        filled = True
    if cfg.smooth_iterations > 0:
        m = m.filter_smooth_taubin(number_of_iterations=int(cfg.smooth_iterations))
    if len(m.triangles) > cfg.face_budget:
        m = m.simplify_quadric_decimation(target_number_of_triangles=int(cfg.face_budget))
        m.remove_degenerate_triangles()
        m.remove_unreferenced_vertices()
    for _ in range(3):  # decimation and hole filling can leave an edge shared by 3 triangles: cut it out and refill
        if m.is_edge_manifold(allow_boundary_edges=False) and m.is_vertex_manifold():
            break
        m.remove_non_manifold_edges()
        m.remove_unreferenced_vertices()
        m = fill_holes(m, cfg.hole_size_m)
        filled = True
    log.debug("cleanup o3d steps %.2f s", time.perf_counter() - t0)
    v, f = _arrays(m)
    if cfg.table_z is not None:
        below = v[:, 2] < cfg.table_z
        v[below, 2] = cfg.table_z
    f = orient_outward(v, f)
    tm = trimesh.Trimesh(v, f, process=False)
    watertight = bool(tm.is_watertight)
    if not watertight:
        notes.append("the mesh is not watertight after cleanup: its volume and mass are approximate, and the "
                     "collision stage repairs it")
    vol = float(tm.volume) if watertight else None
    rep = CleanupReport(ncomp, round(kept, 4), faces_in, len(f), filled, watertight, vol, notes)
    log.info("cleanup: %d -> %d faces, %d component(s), watertight %s", faces_in, len(f), ncomp, watertight)
    return v, f, rep
