"""Deterministic OBJ writing with UVs (what every exporter and engine reads)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

_MATERIAL_LINE = re.compile(rb"(?m)^[ \t]*(?:mtllib|usemtl)\b[^\n]*\n?")


def strip_obj_materials(data: bytes) -> bytes:
    """OBJ bytes without ``mtllib``/``usemtl`` lines: a bundle never ships an OBJ's material library (textures are
    named in scene.json), and an ``mtllib /abs/path`` would make every reader open a file outside the bundle."""
    return _MATERIAL_LINE.sub(b"", data)


def write_obj(path: Path, vertices, faces, uv=None, face_uv=None, mtl: str | None = None, material: str | None = None) -> None:
    """Write an OBJ file (the text of :func:`obj_text`)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(obj_text(vertices, faces, uv, face_uv, mtl, material))


def obj_text(vertices, faces, uv=None, face_uv=None, mtl: str | None = None, material: str | None = None) -> str:
    """An OBJ file's text.

    ``vertices`` ``(n, 3)``, ``faces`` ``(m, 3) int``; optional ``uv`` ``(k, 2)`` with
    ``face_uv`` ``(m, 3) int`` indices into it (defaults to ``faces`` when ``uv`` has one
    row per vertex). Numbers are written with fixed precision so output is byte-stable.
    """
    v = np.asarray(vertices, float)
    f = np.asarray(faces, int) + 1
    lines = []
    if mtl:
        lines.append(f"mtllib {mtl}")
    lines += [f"v {a:.7f} {b:.7f} {c:.7f}" for a, b, c in v]
    if uv is not None:
        uv = np.asarray(uv, float)
        fu = (np.asarray(face_uv, int) if face_uv is not None else np.asarray(faces, int)) + 1
        lines += [f"vt {a:.7f} {b:.7f}" for a, b in uv]
        if material:
            lines.append(f"usemtl {material}")
        lines += [f"f {a}/{ua} {b}/{ub} {c}/{uc}" for (a, b, c), (ua, ub, uc) in zip(f, fu)]
    else:
        if material:
            lines.append(f"usemtl {material}")
        lines += [f"f {a} {b} {c}" for a, b, c in f]
    return "\n".join(lines) + "\n"


def mesh_uv(mesh):
    """Per-vertex UVs of a trimesh mesh, or None."""
    uv = getattr(getattr(mesh, "visual", None), "uv", None)
    return None if uv is None or len(uv) != len(mesh.vertices) else np.asarray(uv, float)


def box_project_uv(mesh):
    """Split vertices per face and give each face planar UVs along its dominant normal axis.

    Returns ``(vertices (3m, 3), faces (m, 3), uv (3m, 2))``: a simple, seam-tolerant
    mapping for untextured primitives.
    """
    v = np.asarray(mesh.vertices)[np.asarray(mesh.faces)].reshape(-1, 3)
    n = np.repeat(np.asarray(mesh.face_normals), 3, axis=0)
    axis = np.abs(n).argmax(1)
    lo, span = v.min(0), np.ptp(v, 0).max() or 1.0
    p = (v - lo) / span
    uv = np.where(axis[:, None] == 0, p[:, [1, 2]], np.where(axis[:, None] == 1, p[:, [0, 2]], p[:, [0, 1]]))
    return v, np.arange(len(v)).reshape(-1, 3), uv
