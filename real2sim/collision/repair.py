"""Mesh repair before decomposition: merge, clean, orient, close (manifold3d)."""
from __future__ import annotations

import logging

import numpy as np

from real2sim.core.errors import MeshError, require

log = logging.getLogger(__name__)

_FIX = ("fix it in a modelling tool (close holes, remove self-overlapping shells) or use "
        "CollisionConfig(method='convex') for a single convex hull")


def repair_mesh(mesh, name: str = "mesh", allow_hull_fallback: bool = False):
    """Return ``(watertight trimesh.Trimesh, notes)`` ready for decomposition.

    Merges vertices (visual meshes are split per face for UVs), drops degenerate
    and duplicate faces, orients normals outward, fills simple holes and, when the
    mesh is still open, rebuilds it through manifold3d. With ``allow_hull_fallback``
    an unrepairable mesh is replaced by its convex hull (noted); otherwise it raises
    :class:`MeshError` naming ``name`` and the fix. Degenerate meshes (NaN, fewer
    than 4 faces, no volume) always raise.
    """
    import trimesh

    notes: list[str] = []
    v = np.asarray(getattr(mesh, "vertices", None) if mesh is not None else None, dtype=float)
    f = np.asarray(getattr(mesh, "faces", None) if mesh is not None else None)
    if v.ndim != 2 or v.shape[-1:] != (3,) or f.ndim != 2 or f.shape[-1:] != (3,) or len(f) == 0:
        raise MeshError(f"{name}: not a triangle mesh (vertices {v.shape}, faces {f.shape}); export it as OBJ/STL/PLY with triangles")
    if not np.isfinite(v).all():
        raise MeshError(f"{name}: vertices contain NaN or inf; fix the mesh in your modelling tool")
    if f.min() < 0 or f.max() >= len(v):
        raise MeshError(f"{name}: face indices out of range (vertex count {len(v)}); the file is corrupt, re-export it")
    if len(f) < 4:
        raise MeshError(f"{name}: degenerate mesh with {len(f)} face(s); a solid needs at least 4 — give the object a closed mesh or a primitive collision shape")

    m = trimesh.Trimesh(vertices=v.copy(), faces=np.asarray(f, dtype=np.int64).copy(), process=False)
    n_v = len(m.vertices)
    m.merge_vertices()
    if len(m.vertices) != n_v:
        notes.append(f"merged {n_v - len(m.vertices)} duplicate vertices")
    n_f = len(m.faces)
    m.update_faces(m.nondegenerate_faces())
    if len(m.faces) != n_f:
        notes.append(f"removed {n_f - len(m.faces)} degenerate faces")
    n_f = len(m.faces)
    m.update_faces(m.unique_faces())
    if len(m.faces) != n_f:
        notes.append(f"removed {n_f - len(m.faces)} duplicate faces")
    m.remove_unreferenced_vertices()
    if len(m.faces) < 4:
        raise MeshError(f"{name}: degenerate mesh ({len(m.faces)} usable faces after cleaning); give the object a closed mesh or a primitive collision shape")
    extent = np.ptp(m.vertices, axis=0)
    diag = float(np.linalg.norm(extent))
    if diag <= 0 or extent.min() <= 1e-9 * diag:
        raise MeshError(f"{name}: mesh is flat (extents {np.round(extent, 9).tolist()}) and encloses no volume; give it thickness or a primitive collision shape")

    if not m.is_watertight:
        trimesh.repair.fill_holes(m)
        if m.is_watertight:
            notes.append("filled holes")
    if not m.is_watertight:
        closed = _via_manifold(m)
        if closed is not None:
            m = closed
            notes.append("rebuilt as a manifold with manifold3d")
    if not m.is_watertight:
        if allow_hull_fallback:
            notes.append("mesh is open and could not be closed; used its convex hull")
            log.warning("%s: mesh is open and could not be closed; using its convex hull", name)
            m = m.convex_hull
        else:
            raise MeshError(f"{name}: mesh is not watertight ({_open_edges(m)} open edges) and could not be closed "
                            f"automatically; {_FIX}")
    before = m.faces.copy()
    trimesh.repair.fix_normals(m)
    if not np.array_equal(before, m.faces):
        notes.append("fixed face winding / normals")
    vol = float(m.volume)
    if not np.isfinite(vol) or vol <= 1e-9 * diag**3:
        raise MeshError(f"{name}: mesh encloses no volume ({vol:.3g} m^3); {_FIX}")
    if not notes:
        notes.append("none needed")
    return m, notes


def _open_edges(m) -> int:
    import trimesh

    return int(len(trimesh.grouping.group_rows(m.edges_sorted, require_count=1)))


def _via_manifold(m):
    """Close ``m`` with manifold3d (merging near-coincident vertices); None when it cannot."""
    import trimesh

    manifold3d = require("manifold3d", extra="collision")
    try:
        mm = manifold3d.Mesh64(vert_properties=np.asarray(m.vertices, np.float64), tri_verts=np.asarray(m.faces, np.uint64))
        mm.merge()
        solid = manifold3d.Manifold(mm)
        if solid.status() != manifold3d.Error.NoError or solid.is_empty():
            return None
        out = solid.to_mesh64()
        res = trimesh.Trimesh(np.asarray(out.vert_properties)[:, :3], np.asarray(out.tri_verts, np.int64), process=True)
        return res if res.is_watertight else None
    except Exception as exc:  # manifold3d raises on many malformed inputs
        log.debug("manifold3d could not close the mesh: %s", exc)
        return None
