"""Regenerate the tabletop demo's meshes and textures (deterministic; committed outputs).

    python scenes/tabletop/make_assets.py

Each object gets ``assets/<id>/visual.obj`` (with UVs) and ``texture.png``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh
from PIL import Image

from real2sim.core.objio import box_project_uv, write_obj

HERE = Path(__file__).parent / "assets"
RNG = np.random.default_rng(7)


def texture(base, accent, kind: str, size=128) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size] / size
    if kind == "checker":
        m = ((x * 8).astype(int) + (y * 8).astype(int)) % 2
    elif kind == "stripes":
        m = (np.sin(y * 2 * np.pi * 6) > 0).astype(int)
    elif kind == "wood":
        m = (np.sin((x * 40 + np.sin(y * 6) * 3)) * 0.5 + 0.5)
    else:
        m = np.zeros_like(x)
    img = np.asarray(base)[None, None] * (1 - m[..., None]) + np.asarray(accent)[None, None] * m[..., None]
    img = img + RNG.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def cylinder_uv_mesh(radius, height, sections=32):
    """A capped cylinder (axis Z, centred) with a wrap-around UV on the side."""
    ang = np.linspace(0, 2 * np.pi, sections + 1)
    z0, z1 = -height / 2, height / 2
    verts, uvs, faces = [], [], []
    for i, a in enumerate(ang):  # side: duplicated seam column
        verts += [[radius * np.cos(a), radius * np.sin(a), z0], [radius * np.cos(a), radius * np.sin(a), z1]]
        uvs += [[i / sections, 0.0], [i / sections, 1.0]]
    for i in range(sections):
        a, b, c, d = 2 * i, 2 * i + 1, 2 * i + 2, 2 * i + 3
        faces += [[a, c, d], [a, d, b]]
    for z, flip in ((z0, True), (z1, False)):
        centre = len(verts)
        verts.append([0, 0, z])
        uvs.append([0.5, 0.5])
        ring = len(verts)
        for a in ang[:-1]:
            verts.append([radius * np.cos(a), radius * np.sin(a), z])
            uvs.append([0.5 + 0.5 * np.cos(a), 0.5 + 0.5 * np.sin(a)])
        for i in range(sections):
            j = (i + 1) % sections
            faces.append([centre, ring + j, ring + i] if flip else [centre, ring + i, ring + j])
    return np.array(verts), np.array(faces), np.array(uvs)


def save(oid, vertices, faces, uv, tex):
    d = HERE / oid
    d.mkdir(parents=True, exist_ok=True)
    write_obj(d / "visual.obj", vertices, faces, uv)
    Image.fromarray(tex).save(d / "texture.png", optimize=True)


def mug_mesh():
    """A mug: a hollow cylinder with a bottom and a handle (non-convex: needs CoACD)."""
    outer = trimesh.creation.cylinder(radius=0.04, height=0.09, sections=32)
    inner = trimesh.creation.cylinder(radius=0.034, height=0.09, sections=32)
    inner.apply_translation([0, 0, 0.008])
    handle = trimesh.creation.annulus(r_min=0.016, r_max=0.024, height=0.012, sections=24)
    handle.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
    handle.apply_translation([0.048, 0, 0])
    body = trimesh.boolean.difference([outer, inner], engine="manifold")
    body = trimesh.boolean.union([body, handle], engine="manifold")
    body.apply_translation([0, 0, 0.045])  # origin at the base
    return body


def bracket_mesh():
    """An L-shaped bracket lying on the table (non-convex)."""
    a = trimesh.creation.box([0.10, 0.03, 0.02])
    b = trimesh.creation.box([0.03, 0.08, 0.02])
    b.apply_translation([-0.035, 0.025, 0])
    m = trimesh.boolean.union([a, b], engine="manifold")
    m.apply_translation([0, 0, 0.01])
    return m


def main():
    tab = trimesh.creation.box([0.9, 0.7, 0.04])
    tab.apply_translation([0, 0, -0.02])
    save("table", *box_project_uv(tab), texture([150, 110, 70], [120, 85, 50], "wood", 256))
    cube = trimesh.creation.box([0.045, 0.045, 0.045])
    save("cube", *box_project_uv(cube), texture([200, 40, 40], [240, 220, 220], "checker"))
    save("can", *cylinder_uv_mesh(0.033, 0.122), texture([200, 20, 30], [240, 240, 240], "stripes"))
    save("mug", *box_project_uv(mug_mesh()), texture([40, 90, 200], [230, 230, 240], "stripes"))
    save("bracket", *box_project_uv(bracket_mesh()), texture([60, 160, 70], [30, 90, 40], "checker"))
    domino = trimesh.creation.box([0.02, 0.06, 0.10])
    save("domino", *box_project_uv(domino), texture([235, 225, 200], [30, 30, 30], "checker"))


if __name__ == "__main__":
    main()
