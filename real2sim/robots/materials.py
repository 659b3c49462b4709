"""A robot's own mesh materials: each URDF visual mesh split into one part per material (diffuse texture with UVs,
or the material's diffuse colour), so that every engine draws the robot as its meshes look.

An OBJ with an ``.mtl`` (``map_Kd`` textures, ``Kd`` colours; several ``usemtl`` groups become several parts) and a
glTF/GLB/Collada file with materials are read with trimesh. Each part is written to the robot cache
(``$REAL2SIM_CACHE/robots/materials``) under a content-addressed name: an OBJ in the visual's frame (positions, UVs
when textured, no material library) and, when textured, a PNG. The resolved URDF then holds one ``<visual>`` per part
with a ``<material>``: ``<color rgba>`` and, when textured, ``<texture filename>`` (absolute path of the PNG).

Conventions, the same in every engine and export:

- a textured part shows its texture; a ``Kd``/``baseColorFactor`` other than white multiplies it and is **baked into
  the PNG** (MuJoCo multiplies a material's rgba into its texture, SAPIEN ignores the colour under a texture: baked,
  both agree). A ``Kd`` of exactly 0 0 0 next to a ``map_Kd`` (an exporter's artefact seen in the Google Robot's
  wheel) is read as white.
- precedence per link: a texture back-projected from the frames (``robot.textures``) replaces the link's visuals; else
  the mesh's own materials; else the flat colour (``robot.appearance`` / the definition's ``appearance``).
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.objio import obj_text

log = logging.getLogger(__name__)

MATERIAL_PREFIX = "real2sim_mesh_material_"
"""Name prefix of the ``<material>`` elements the resolver writes for mesh parts (the exporters look for it)."""


@dataclass(frozen=True)
class MeshPart:
    """One material of a visual mesh: its triangles (OBJ, visual frame), colour and texture (PNG or None)."""

    mesh: Path
    rgba: tuple
    texture: Path | None


def _material_dir() -> Path:
    from real2sim.robots.spec import cache_dir

    return cache_dir() / "materials"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _colour(mat) -> tuple | None:
    for attr in ("baseColorFactor", "diffuse"):  # not trimesh's made-up main_color of a material-less mesh
        c = getattr(mat, attr, None) if mat is not None else None
        if c is not None:
            c = np.asarray(c, float).ravel()
            if len(c) >= 3:
                c = c / 255.0 if (c.dtype.kind in "iu" or c.max() > 1.0) else c
                return tuple(float(x) for x in (list(c[:3]) + [c[3] if len(c) > 3 else 1.0]))
    return None


def _image(mat):
    img = getattr(mat, "image", None) if mat is not None else None
    if img is None and mat is not None:
        img = getattr(mat, "baseColorTexture", None)
    return img


_PNG_MEMO: dict = {}


def _texture_file(img, tint: tuple) -> Path:
    """The content-addressed PNG of ``img`` (PIL) times ``tint`` (rgb); memoised by the pixels' hash."""
    from real2sim.core.imaging import png_bytes

    arr = np.asarray(img.convert("RGB"), np.uint8)
    key = (hashlib.sha256(arr.tobytes()).hexdigest(), arr.shape, tint)
    hit = _PNG_MEMO.get(key)
    if hit is not None and hit.is_file():
        return hit
    if tint != (1.0, 1.0, 1.0):
        arr = np.clip(arr.astype(np.float32) * np.asarray(tint, np.float32) + 0.5, 0, 255).astype(np.uint8)
    data = png_bytes(arr)
    out = _material_dir() / f"{hashlib.sha256(data).hexdigest()[:16]}.png"
    if not out.is_file():
        _atomic_write(out, data)
    _PNG_MEMO[key] = out
    return out


def _has_material_info(path: Path) -> bool:
    """Whether the file can carry materials at all (an OBJ without ``mtllib`` and an STL cannot)."""
    suf = path.suffix.lower()
    if suf == ".obj":
        with open(path, "rb") as f:
            return any(line.lstrip().startswith(b"mtllib") for line in f)
    return suf in (".glb", ".gltf", ".dae")


def mesh_parts(path: Path, link: str = "", urdf: Path | None = None) -> list[MeshPart] | None:
    """The visual mesh ``path`` as one :class:`MeshPart` per material, or None when it carries no material (then the
    link's flat colour applies). Raises :class:`~real2sim.core.errors.RobotError` naming the file when it cannot be
    read."""
    import trimesh

    from real2sim.core.errors import RobotError

    path = Path(path)
    if not _has_material_info(path):
        return None
    try:
        loaded = trimesh.load(str(path), process=False)
    except Exception as exc:  # trimesh raises many types for a file it cannot read
        raise RobotError(f"{urdf or path}: mesh {path} of link '{link}' cannot be read ({type(exc).__name__}: {exc}). "
                         "Fix: repair or re-export the mesh (OBJ with its .mtl, or GLB)") from exc
    geoms = loaded.dump() if isinstance(loaded, trimesh.Scene) else [loaded]
    geoms = [g for g in geoms if isinstance(g, trimesh.Trimesh) and len(g.faces)]
    parts: list[MeshPart] = []
    found = False
    for k, g in enumerate(geoms):
        vis = g.visual
        mat = getattr(vis, "material", None)
        rgba = _colour(mat)
        img = _image(mat)
        uv = getattr(vis, "uv", None)
        textured = img is not None and uv is not None and len(uv) == len(g.vertices)
        if img is not None and not textured:
            log.info("%s: material of part %d has a texture but the mesh has no UVs for it: its colour is used", path, k)
        found = found or textured or rgba is not None
        rgba = rgba or (1.0, 1.0, 1.0, 1.0)
        tex = None
        if textured:
            tint = tuple(round(float(c), 4) for c in rgba[:3])
            if tint == (0.0, 0.0, 0.0):  # black times a texture: an exporter's artefact (see the module docstring)
                tint = (1.0, 1.0, 1.0)
            tex = _texture_file(img, tint)
            rgba = (1.0, 1.0, 1.0, rgba[3])
        data = obj_text(np.asarray(g.vertices, float), np.asarray(g.faces, np.int64),
                        np.asarray(uv, float) if textured else None).encode()
        h = hashlib.sha256(data).hexdigest()[:16]
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in path.stem)[:60]
        out = _material_dir() / f"{h}_{stem}_{k}.obj"
        if not out.is_file():
            _atomic_write(out, data)
        parts.append(MeshPart(out, tuple(float(c) for c in rgba), tex))
    if not found or not parts:
        return None
    return parts


def material_element(part: MeshPart):
    """The URDF ``<material>`` of a part (``<color rgba>``, ``<texture filename>`` when textured)."""
    import xml.etree.ElementTree as ET

    key = hashlib.sha256(f"{part.rgba}{part.texture}".encode()).hexdigest()[:12]
    el = ET.Element("material", name=f"{MATERIAL_PREFIX}{key}")
    ET.SubElement(el, "color", rgba=" ".join(f"{c:.6g}" for c in part.rgba))
    if part.texture is not None:
        ET.SubElement(el, "texture", filename=str(part.texture))
    return el


def visual_material(visual) -> tuple[tuple | None, Path | None]:
    """``(rgba, texture path)`` of a resolved URDF ``<visual>`` whose material the resolver wrote from the mesh (see
    the module docstring), else ``(None, None)``: the link's flat colour applies."""
    mat = visual.find("material")
    if mat is None or not (mat.get("name") or "").startswith(MATERIAL_PREFIX):
        return None, None
    c = mat.find("color")
    rgba = tuple(float(x) for x in c.get("rgba").split()) if c is not None else (1.0, 1.0, 1.0, 1.0)
    t = mat.find("texture")
    return rgba, (Path(t.get("filename")) if t is not None and t.get("filename") else None)


def split_visuals(link, path: Path, base_dir: Path) -> None:
    """Replace each ``<visual>`` of ``link`` (a URDF element) whose mesh carries materials by one visual per part."""
    import copy

    ln = link.get("name")
    children = list(link)
    for vis in [v for v in children if v.tag == "visual"]:
        mesh = vis.find("geometry/mesh")
        if mesh is None:
            continue
        fn = mesh.get("filename") or ""
        if fn.startswith("file://"):
            fn = fn[len("file://"):]
        p = Path(fn) if os.path.isabs(fn) else (base_dir / fn)
        if not p.is_file() or p.stat().st_size == 0:
            continue  # the caller names the missing file
        parts = mesh_parts(p, ln, path)
        if parts is None:
            continue
        at = list(link).index(vis)
        link.remove(vis)
        for k, part in enumerate(parts):
            new = copy.deepcopy(vis)
            if len(parts) > 1 and new.get("name"):
                new.set("name", f"{new.get('name')}_{k}")
            for m in new.findall("material"):
                new.remove(m)
            new.find("geometry/mesh").set("filename", str(part.mesh))
            new.append(material_element(part))
            link.insert(at + k, new)
        n_tex = sum(p_.texture is not None for p_ in parts)
        log.info("mesh %s of link '%s': its materials kept (%d part(s), %d textured)", p.name, ln, len(parts), n_tex)
