"""Meshes with UVs for texturing: loading, xatlas unwrapping, writing."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.errors import UVError
from real2sim.core.meshes import load_mesh
from real2sim.core.objio import mesh_uv, write_obj

log = logging.getLogger(__name__)


@dataclass
class TexMesh:
    """A triangle mesh in its object frame, optionally with a UV layout."""

    vertices: np.ndarray
    """``(V, 3) float`` positions (object frame, m)."""
    faces: np.ndarray
    """``(F, 3) int`` triangles into ``vertices``."""
    uv: np.ndarray | None = None
    """``(Vt, 2) float`` texture coordinates (OBJ convention, v up), or None."""
    face_uv: np.ndarray | None = None
    """``(F, 3) int`` triangles into ``uv``."""
    base_rgba: tuple[float, float, float, float] | None = None
    """Flat material colour found in the file (e.g. a Collada diffuse), if any."""

    @property
    def has_uv(self) -> bool:
        return self.uv is not None and self.face_uv is not None


def _material_rgba(mesh):
    mat = getattr(getattr(mesh, "visual", None), "material", None)
    for attr in ("baseColorFactor", "diffuse", "main_color"):
        c = getattr(mat, attr, None)
        if c is not None:
            c = np.asarray(c, float).ravel()
            if len(c) >= 3:
                c = c / 255.0 if c.max() > 1.0 else c
                return tuple(float(x) for x in (list(c[:3]) + [c[3] if len(c) > 3 else 1.0]))
    return None


def load_texmesh(path: Path) -> TexMesh:
    """Load a mesh file (OBJ, DAE, GLB, ...) with its per-vertex UVs when it has them."""
    m = load_mesh(Path(path))
    uv = mesh_uv(m)
    faces = np.asarray(m.faces, np.int64)
    return TexMesh(np.asarray(m.vertices, float), faces, uv, faces.copy() if uv is not None else None, _material_rgba(m))


def unwrap(mesh: TexMesh, seed: int = 0) -> TexMesh:
    """UV-unwrap with xatlas; vertices are split along seams. Raises :class:`UVError` when xatlas fails."""
    try:
        import xatlas
    except ImportError as exc:
        raise UVError(f"the mesh has no UVs and xatlas is not installed ({exc}); pip install xatlas, "
                      "or give the mesh a UV layout in your modelling tool") from exc
    try:
        vmap, idx, uvs = xatlas.parametrize(np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32))
    except Exception as exc:  # xatlas raises RuntimeError / ValueError on bad meshes
        raise UVError(f"xatlas could not unwrap the mesh ({type(exc).__name__}: {exc}); "
                      "repair it (remove degenerate faces) or give it UVs in your modelling tool") from exc
    if len(idx) != len(mesh.faces) or not np.isfinite(uvs).all():
        raise UVError(f"xatlas returned {len(idx)} faces for {len(mesh.faces)} input faces; repair the mesh or add UVs")
    v = np.asarray(mesh.vertices)[vmap]
    idx = np.asarray(idx, np.int64)
    return TexMesh(v, idx, np.asarray(uvs, float), idx.copy(), mesh.base_rgba)


def ensure_uv(mesh: TexMesh) -> tuple[TexMesh, bool]:
    """(mesh with UVs, whether it was unwrapped here)."""
    if mesh.has_uv:
        return mesh, False
    log.info("mesh has no UVs: unwrapping with xatlas (%d faces)", len(mesh.faces))
    return unwrap(mesh), True


def write_texmesh(path: Path, mesh: TexMesh, texture_file: str | None = None) -> None:
    """Write an OBJ with UVs; with ``texture_file`` also a ``.mtl`` next to it that names it (map_Kd)."""
    path = Path(path)
    mtl = None
    if texture_file:
        mtl = path.with_suffix(".mtl").name
        path.with_suffix(".mtl").write_text(f"newmtl material_0\nKa 1 1 1\nKd 1 1 1\nKs 0 0 0\nmap_Kd {texture_file}\n")
    write_obj(path, mesh.vertices, mesh.faces, mesh.uv, mesh.face_uv, mtl=mtl, material="material_0" if mtl else None)
