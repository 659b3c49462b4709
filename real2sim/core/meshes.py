"""Mesh loading and mass properties (trimesh), shared by every stage."""
from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path

import numpy as np

from real2sim.core.errors import MeshError

log = logging.getLogger(__name__)


def load_mesh(path: Path):
    """Load a mesh file as one ``trimesh.Trimesh`` (scenes are flattened into world frame).

    Raises :class:`MeshError` naming the file when it is unreadable or empty.
    """
    import trimesh

    path = Path(path)
    if not path.is_file():
        raise MeshError(f"{path}: mesh file not found")
    try:
        loaded = trimesh.load(path, process=False)
    except Exception as exc:  # trimesh raises many types for bad files
        raise MeshError(f"{path}: cannot read mesh ({type(exc).__name__}: {exc}); export it as OBJ, STL, PLY, GLB or DAE") from exc
    if isinstance(loaded, trimesh.Scene):
        geoms = loaded.dump() if hasattr(loaded, "dump") else list(loaded.geometry.values())
        geoms = [g for g in geoms if isinstance(g, trimesh.Trimesh)]
        if not geoms:
            raise MeshError(f"{path}: file holds no triangle meshes")
        loaded = geoms[0] if len(geoms) == 1 else trimesh.util.concatenate(geoms)
    if not isinstance(loaded, trimesh.Trimesh) or len(loaded.faces) == 0:
        raise MeshError(f"{path}: no triangles found (point clouds and lines cannot be simulated)")
    if not np.isfinite(loaded.vertices).all():
        raise MeshError(f"{path}: vertices contain NaN or inf; fix the mesh in your modelling tool")
    return loaded


def geometry_hash(path: Path) -> str:
    """Hash of a mesh file's triangles (positions to 1 um), blind to vertex order, UV seams and materials.

    A mesh rewritten with UVs (the texture stage's ``visual_uv.obj``: seams split vertices) hashes the same as the
    mesh it came from, so stages that depend on the shape only are not re-run by texturing."""
    p = Path(path)
    st = p.stat()
    return _geometry_hash(str(p.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _geometry_hash(path: str, mtime_ns: int, size: int) -> str:
    mesh = load_mesh(Path(path))
    tri = np.round(np.asarray(mesh.vertices, np.float64)[np.asarray(mesh.faces)] * 1e6).astype(np.int64)  # (n, 3, 3)
    n = len(tri)
    verts = tri.reshape(-1, 3)
    rank = np.empty(len(verts), np.int64)
    rank[np.lexsort(verts.T[::-1])] = np.arange(len(verts))
    start = rank.reshape(n, 3).argmin(1)  # each triangle starts at its smallest vertex; the winding is kept
    idx = (start[:, None] + np.arange(3)[None]) % 3
    flat = tri[np.arange(n)[:, None], idx].reshape(n, 9)
    flat = flat[np.lexsort(flat.T[::-1])]
    return hashlib.sha256(flat.tobytes()).hexdigest()[:16]


def mass_properties(mesh, density: float, mass: float | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass (kg), COM ``(3,)`` and inertia about the COM ``(3, 3)`` in the mesh frame.

    Uses the closed mesh when it is watertight, else its convex hull (logged).
    ``mass`` overrides the density-derived mass (inertia scales with it).
    """
    solid = mesh.copy()
    solid.merge_vertices(merge_tex=True, merge_norm=True)  # UV seams split vertices
    if not solid.is_watertight or solid.volume <= 0:
        log.info("mesh is not watertight; mass properties from its convex hull")
        solid = mesh.convex_hull
    if solid.volume <= 1e-12:
        raise MeshError("mesh encloses no volume (flat or degenerate); give the object a 'mass' and a solid collision shape")
    m = density * solid.volume
    inertia = np.array(solid.moment_inertia) * density  # trimesh: about COM, unit density
    if mass is not None:
        inertia *= mass / m
        m = mass
    return float(m), np.array(solid.center_mass, dtype=float), inertia


def primitive_mass_properties(kind: str, size, density: float, mass: float | None = None):
    """Mass, COM (origin) and inertia of a box (half extents), cylinder (radius, half height, Z axis) or sphere."""
    if kind == "box":
        a, b, c = (2 * np.asarray(size, float))
        vol = a * b * c
        diag = np.array([b * b + c * c, a * a + c * c, a * a + b * b]) / 12.0
    elif kind == "cylinder":
        r, hh = size
        h = 2 * hh
        vol = np.pi * r * r * h
        diag = np.array([(3 * r * r + h * h) / 12.0, (3 * r * r + h * h) / 12.0, r * r / 2.0])
    elif kind == "sphere":
        (r,) = size
        vol = 4.0 / 3.0 * np.pi * r**3
        diag = np.full(3, 2.0 / 5.0 * r * r)
    else:
        raise MeshError(f"no closed-form mass properties for '{kind}'")
    m = mass if mass is not None else density * vol
    return float(m), np.zeros(3), np.diag(diag * m)


def embedded_appearance(mesh) -> tuple[np.ndarray | None, tuple[float, float, float, float] | None]:
    """What a loaded mesh carries about its look: ``(texture image (h, w, 3) uint8 RGB or None, flat rgba or None)``.

    The texture is the material's image (Collada/OBJ ``image``, glTF ``baseColorTexture``) when the mesh has
    per-vertex UVs for it; the colour is the material's diffuse / base colour factor."""
    vis = getattr(mesh, "visual", None)
    mat = getattr(vis, "material", None)
    image = None
    if mat is not None and getattr(vis, "uv", None) is not None and len(vis.uv) == len(mesh.vertices):
        img = getattr(mat, "image", None)
        if img is None:
            img = getattr(mat, "baseColorTexture", None)
        if img is not None:
            image = np.asarray(img.convert("RGB"), np.uint8)
    rgba = None
    for attr in ("baseColorFactor", "diffuse", "main_color"):
        c = getattr(mat, attr, None) if mat is not None else None
        if c is not None:
            c = np.asarray(c, float).ravel()
            if len(c) >= 3:
                c = c / 255.0 if c.max() > 1.0 else c
                rgba = tuple(float(x) for x in (list(c[:3]) + [c[3] if len(c) > 3 else 1.0]))
                break
    return image, rgba


def canonical_visual(src: Path, obj_path: Path, texture_path: Path | None) -> dict:
    """Write the bundle's canonical visual mesh for any mesh file trimesh reads (OBJ, DAE, GLB/GLTF, PLY, STL):
    ``obj_path`` (positions, UVs when the file has them, no material library) and, when the file embeds a texture,
    ``texture_path`` (PNG). Every exporter and stage then reads the same two files.

    Returns ``{"texture": bool, "uv": bool, "rgba": (4,) | None, "faces": int}``. Multi-part files are flattened
    (their textures packed into one atlas by trimesh)."""
    from PIL import Image

    from real2sim.core.objio import mesh_uv, write_obj

    mesh = load_mesh(src)
    image, rgba = embedded_appearance(mesh)
    uv = mesh_uv(mesh)
    tmp = obj_path.with_name(f".{obj_path.name}.tmp")
    write_obj(tmp, mesh.vertices, mesh.faces, uv, None)
    tmp.replace(obj_path)
    wrote_texture = False
    if image is not None and uv is not None and texture_path is not None:
        tmp = texture_path.with_name(f".{texture_path.name}.tmp.png")
        Image.fromarray(image).save(tmp)
        tmp.replace(texture_path)
        wrote_texture = True
    return {"texture": wrote_texture, "uv": uv is not None, "rgba": rgba, "faces": int(len(mesh.faces))}
