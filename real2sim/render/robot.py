"""The robot as the camera sees it: its visual meshes posed by forward kinematics and rasterised to a link-id image.

:func:`load_robot_model` reads a bundle robot (registry URDF, base pose); :func:`link_id_image` gives, for a
camera and joint positions, the link each pixel shows (depth-tested, so links hide each other);
:func:`render_links` paints those links with flat colours. Robot fitting, robot masks, camera refinement and robot
colour matching all render the robot through here.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.geometry import transform_points
from real2sim.core.meshes import load_mesh
from real2sim.render.raster import camera_clip, coverage_clip, rasterize
from real2sim.robots.scene import PoseChain, link_poses, parse_urdf, robot_setup

log = logging.getLogger(__name__)


@dataclass
class RobotModel:
    """The robot's visual meshes per link (link frame) and what poses them."""

    links: dict
    """link name -> (vertices (n, 3), faces (m, 3)) in the link frame."""
    joints: list
    root: str
    base: np.ndarray
    joint_names: list
    default_q: np.ndarray
    materials: dict = dataclasses.field(default_factory=dict)
    """link -> :class:`LinkMaterials` of links whose meshes carry their own materials (``robots.materials``)."""
    bounds: dict = dataclasses.field(init=False, repr=False)
    """link -> (``(3,)`` min, ``(3,)`` max) of its vertices in the link frame (from ``links``)."""

    def __post_init__(self):
        self.bounds = {name: (v.min(0), v.max(0)) for name, (v, _) in self.links.items() if len(v)}


@dataclass
class LinkMaterials:
    """A link's own mesh materials, indexed like its (vertices, faces) in :attr:`RobotModel.links`."""

    face_part: np.ndarray
    """``(m,) int`` part of each face (-1: a visual without a material: the link's flat colour)."""
    uv: np.ndarray
    """``(n, 2) float`` per-vertex UVs (OBJ convention, v up; 0 where the part is untextured)."""
    parts: list
    """Per part: (rgba (4,), texture ``(h, w, 3) float32`` or None)."""


def _geometry_mesh(T, geom, want_uv: bool = False):
    import trimesh

    from real2sim.core.objio import mesh_uv

    tag = geom.tag
    uv = None
    if tag == "mesh":
        m = load_mesh(Path(geom.get("filename")))
        v = np.asarray(m.vertices, float) * np.array([float(s) for s in (geom.get("scale") or "1 1 1").split()])
        f = np.asarray(m.faces)
        uv = mesh_uv(m) if want_uv else None
    elif tag == "box":
        m = trimesh.creation.box([float(s) for s in geom.get("size").split()])
        v, f = m.vertices, m.faces
    elif tag == "cylinder":
        m = trimesh.creation.cylinder(float(geom.get("radius")), float(geom.get("length")), sections=24)
        v, f = m.vertices, m.faces
    elif tag == "sphere":
        m = trimesh.creation.icosphere(2, float(geom.get("radius")))
        v, f = m.vertices, m.faces
    else:
        return None
    if want_uv:
        return transform_points(T, v), np.asarray(f, np.int64), uv
    return transform_points(T, v), np.asarray(f, np.int64)


def _texture_image(path: Path, cache: dict) -> np.ndarray:
    from real2sim.core.imaging import read_rgb_float

    key = str(path)
    if key not in cache:
        cache[key] = read_rgb_float(Path(path)).astype(np.float32)
    return cache[key]


def load_robot_model(spec, root: Path | None = None) -> RobotModel:
    """Visual meshes of the bundle's robot (``manifest.robot``), from the registry's resolved URDF (or, for a robot
    from a definition file, the definition packaged in the bundle folder ``root``)."""

    rs = robot_setup(spec, root)
    links, joints, root = parse_urdf(rs.urdf)
    meshes, materials, images = {}, {}, {}
    for name, link in links.items():
        mats = link.visual_materials or [(None, None)] * len(link.visuals)
        own = any(rgba is not None for rgba, _ in mats)
        parts, kinds = [], []
        for (T, g), (rgba, tex) in zip(link.visuals, mats):
            p = _geometry_mesh(T, g, want_uv=True)
            if p is not None:
                parts.append(p)
                kinds.append((rgba, tex))
        if parts:
            off = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            meshes[name] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] + o for p, o in zip(parts, off)]))
        if parts and own:
            face_part, uv, plist = [], [], []
            for (v, f, puv), (rgba, tex) in zip(parts, kinds):
                textured = tex is not None and puv is not None
                if rgba is None:
                    face_part.append(np.full(len(f), -1))
                else:
                    plist.append((np.asarray(rgba, np.float32), _texture_image(tex, images) if textured else None))
                    face_part.append(np.full(len(f), len(plist) - 1))
                uv.append(np.asarray(puv, float) if textured else np.zeros((len(v), 2)))
            materials[name] = LinkMaterials(np.concatenate(face_part), np.concatenate(uv), plist)
    return RobotModel(meshes, joints, root, rs.base, list(rs.robot.joint_names), np.asarray(rs.qpos, float), materials)


def posed_mesh(model: RobotModel, q, eye=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The robot's visual meshes posed at joint vector ``q``, in the world; with ``eye`` ``(3,)`` (a camera centre),
    less the links whose mesh encloses it (:func:`links_around`).

    Returns (vertices ``(n, 3)``, faces ``(m, 3)``, owner ``(m,)`` index into the link names, link names).
    """
    poses = _poses(model, q)
    leave_out = () if eye is None else _links_around(model, eye, poses)
    names, verts, faces, owner = [], [], [], []
    off = 0
    for name, (v, f) in sorted(model.links.items()):
        if name not in poses or name in leave_out:
            continue
        names.append(name)
        verts.append(transform_points(model.base @ poses[name], v))
        faces.append(f + off)
        owner.append(np.full(len(f), len(names) - 1))
        off += len(v)
    return np.concatenate(verts), np.concatenate(faces), np.concatenate(owner), names


_RAYS = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
                 + [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)


def _ray_hits(origin: np.ndarray, direction: np.ndarray, tri: np.ndarray) -> bool:
    """Whether the ray ``origin + t direction`` (t > 0) meets any of the triangles ``(m, 3, 3)`` (Moller-Trumbore)."""
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    p = np.cross(direction, e2)
    det = np.einsum("ij,ij->i", e1, p)
    ok = np.abs(det) > 1e-12
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = origin - tri[:, 0]
    u = np.einsum("ij,ij->i", s, p) * inv
    qv = np.cross(s, e1)
    v = (qv @ direction) * inv
    t = np.einsum("ij,ij->i", e2, qv) * inv
    return bool(np.any(ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 1e-6)))


def links_around(model: RobotModel, eye, q=None) -> set[str]:
    """Links whose mesh encloses the point ``eye`` ``(3,)`` (world) at joints ``q`` (default: the model's): a
    camera mounted inside the robot's head. Every ray of 14 from the point meets the link's mesh. A renderer
    that culls back faces (the engines) never shows such a link from that camera; the rasterizer here draws both
    sides, so it would cover the image, and is told to leave them out."""
    return _links_around(model, eye, _poses(model, model.default_q if q is None else q))


def _poses(model: RobotModel, q) -> dict:
    return link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))


def _links_around(model: RobotModel, eye, poses: dict) -> set[str]:
    out = set()
    for name, (v, f) in model.links.items():
        if name not in poses or not len(f):
            continue
        lo, hi = model.bounds[name]
        local = np.linalg.inv(model.base @ poses[name]) @ np.r_[np.asarray(eye, float), 1.0]
        if np.any(local[:3] < lo) or np.any(local[:3] > hi):
            continue
        tri = v[f]
        if all(_ray_hits(local[:3], d / np.linalg.norm(d), tri) for d in _RAYS):
            out.add(name)
    return out


def _eye(camera) -> np.ndarray:
    return np.asarray(camera.T_world_camera, float)[:3, 3]


def link_id_image(model: RobotModel, camera, q) -> tuple[np.ndarray, list[str]]:
    """``(h, w) int`` index into the returned link names (-1: no robot) for joint vector ``q``."""

    verts, faces, owner, names = posed_mesh(model, q, _eye(camera))
    fr = rasterize(camera, verts, faces)
    return np.where(fr.mask, owner[np.maximum(fr.face_id, 0)], -1), names


def render_links(model: RobotModel, camera, q, colours: dict, default=(0.7, 0.7, 0.7, 1.0)):
    """(``(h, w, 3)`` flat-coloured render, ``(h, w) bool`` robot pixels) with ``colours`` link -> rgba."""
    ids, names = link_id_image(model, camera, q)
    lut = np.array([list(colours.get(n) or default)[:3] for n in names] + [[0, 0, 0]], np.float32)
    img = lut[np.where(ids >= 0, ids, len(names))]
    return img, ids >= 0


def sample_wrapped(tex: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Bilinear lookup of ``tex (h, w, 3)`` (row 0 = v 1) at OBJ UVs ``(n, 2)``, repeating outside [0, 1] (as the
    engines' default texture wrap): ``(n, 3)``."""
    h, w = tex.shape[:2]
    x = np.mod(np.asarray(uv[:, 0], float), 1.0) * w - 0.5
    y = np.mod(1.0 - np.asarray(uv[:, 1], float), 1.0) * h - 0.5
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x0, x1 = np.mod(x0, w), np.mod(x0 + 1, w)
    y0, y1 = np.mod(y0, h), np.mod(y0 + 1, h)
    return (tex[y0, x0] * (1 - fx) + tex[y0, x1] * fx) * (1 - fy) + (tex[y1, x0] * (1 - fx) + tex[y1, x1] * fx) * fy


def material_colours(model: RobotModel, link: str, local_face: np.ndarray, bary: np.ndarray, flat) -> np.ndarray:
    """``(n, 3)`` colours of pixels on ``link`` (its faces ``local_face``, barycentrics ``bary``) from the link's own
    mesh materials; faces of a visual without one get ``flat`` (rgb)."""
    lm = model.materials[link]
    _, f = model.links[link]
    out = np.tile(np.asarray(flat, np.float32)[:3], (len(local_face), 1))
    part = lm.face_part[local_face]
    for k, (rgba, tex) in enumerate(lm.parts):
        sel = part == k
        if not sel.any():
            continue
        if tex is None:
            out[sel] = rgba[:3]
            continue
        uv = np.einsum("nk,nkd->nd", np.asarray(bary[sel], float), lm.uv[f[local_face[sel]]])
        out[sel] = sample_wrapped(tex, uv) * rgba[:3]
    return out


def render_appearance(model: RobotModel, camera, q, colours: dict, default=(0.7, 0.7, 0.7, 1.0),
                      backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(``(h, w, 3) float32`` unlit render, ``(h, w) bool`` robot pixels): each link in its meshes' own materials
    (textures, diffuse colours) where it has them, else its flat colour in ``colours`` (link -> rgba)."""
    verts, faces, owner, names = posed_mesh(model, q, _eye(camera))
    fr = rasterize(camera, verts, faces, backend)
    ids = np.where(fr.mask, owner[np.maximum(fr.face_id, 0)], -1)
    lut = np.array([list(colours.get(n) or default)[:3] for n in names] + [[0, 0, 0]], np.float32)
    img = lut[np.where(ids >= 0, ids, len(names))]
    starts = np.cumsum([0] + [len(model.links[n][1]) for n in names[:-1]])
    for k, name in enumerate(names):
        if name not in model.materials:
            continue
        ys, xs = np.nonzero(ids == k)
        if len(ys):
            img[ys, xs] = material_colours(model, name, fr.face_id[ys, xs] - starts[k], fr.bary[ys, xs], lut[k])
    return img, ids >= 0


def cluster_mesh(vertices: np.ndarray, faces: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """A coarser mesh by vertex clustering: vertices ``(n, 3)`` snapped to a ``cell``-sized grid and merged
    (their mean), faces ``(m, 3)`` that collapse dropped. For low-resolution silhouettes, where a cell is under a
    pixel. Returns (vertices ``(n', 3)``, faces ``(m', 3)``)."""
    key = np.floor(np.asarray(vertices, float) / cell).astype(np.int64)
    key -= key.min(axis=0)
    dims = key.max(axis=0) + 1
    # one integer per cell, in the row order of np.unique(key, axis=0) (same clusters, same order; ~10x faster)
    _, inv = np.unique((key[:, 0] * dims[1] + key[:, 1]) * dims[2] + key[:, 2], return_inverse=True)
    inv = inv.ravel()
    n = int(inv.max()) + 1
    v = np.zeros((n, 3))
    np.add.at(v, inv, vertices)
    v /= np.bincount(inv, minlength=n)[:, None]
    f = inv[np.asarray(faces)]
    keep = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    return v, f[keep]


class RobotSilhouette:
    """Fast robot silhouettes for one camera: ``sil(q) -> (h, w) bool``.

    For fitting loops that render the same robot hundreds of times: the link meshes are clustered to cells of
    ``pixel_frac`` of a pixel at the robot's distance (``pixel_frac``), coarser (x1.5 at a time) while they hold more
    than ``faces_per_pixel`` faces per image pixel (and more than ``min_faces`` in all), and each link's vertices go
    to clip space with one 4x4 product (link pose, base, camera and projection together). ``one_side``: draw the
    faces turned towards the camera only (:func:`raster.coverage_clip`; about 30 % faster) if that gives the same
    silhouettes as both sides at a few poses (:func:`closed_enough`), as closed meshes do."""

    def __init__(self, model: RobotModel, camera, pixel_frac: float = 0.7, faces_per_pixel: float = 2.0,
                 min_faces: int = 0, one_side: bool = False):
        self.model, self.camera = model, camera
        eye = np.asarray(camera.T_world_camera, float)[:3, 3]
        dist = max(0.05, float(np.linalg.norm(eye - model.base[:3, 3])) * 0.5)  # the nearest part of an arm
        cell = pixel_frac * dist / max(camera.fx, 1e-9)
        self.around = links_around(model, eye)  # a camera inside the head: the head is left out (links_around)
        links = [(name, vf) for name, vf in sorted(model.links.items()) if name not in self.around]
        budget = max(faces_per_pixel * camera.width * camera.height, min_faces)
        for _ in range(8):  # finely tessellated meshes (the Panda's) coarser until they cost about the image's pixels
            meshes = [cluster_mesh(v, f, cell) if cell > 0 else (v, f) for _, (v, f) in links]
            if cell <= 0 or sum(len(f) for _, f in meshes) <= budget:
                break
            cell *= 1.5
        self.names, self.links, faces, off = [], [], [], 0
        for (name, _), (cv, cf) in zip(links, meshes):
            self.names.append(name)
            self.links.append(np.c_[cv, np.ones(len(cv))].astype(np.float32))
            faces.append(cf + off)
            off += len(cv)
        self.faces = np.concatenate(faces)
        # clip = P @ [X, Y, Z, 1] in the camera frame (raster.camera_clip's matrix, read off its action on a basis)
        basis = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
        ident = dataclasses.replace(camera, T_world_camera=np.eye(4))
        c = camera_clip(ident, basis)
        self.P = np.c_[(c[1:] - c[0]).T, c[0]]
        self.world_to_clip = self.P @ np.linalg.inv(np.asarray(camera.T_world_camera, float))
        self.chain = PoseChain(model.joints, model.root, model.joint_names)
        self.one_side = one_side and closed_enough(self, _check_poses(model))

    def clip(self, q) -> np.ndarray:
        """``(n, 4)`` clip coordinates of the clustered meshes at joints ``q``."""
        poses = self.chain(q)
        M0 = self.world_to_clip @ self.model.base
        parts = []
        for name, v in zip(self.names, self.links):
            M = (M0 @ poses[name]) if name in poses else np.zeros((4, 4))
            parts.append(v @ M.T.astype(np.float32))
        return np.concatenate(parts)

    def __call__(self, q, one_side: bool | None = None) -> np.ndarray:
        c = self.clip(q)
        one_side = self.one_side if one_side is None else one_side
        return coverage_clip(c, self.faces, self.camera.width, self.camera.height, one_side=one_side)


def _check_poses(model: RobotModel, count: int = 5, spread: float = 0.5) -> list[np.ndarray]:
    """The model's default joints and ``count - 1`` seeded moves of every joint by up to ``spread``."""
    rng = np.random.default_rng(0)
    q0 = np.asarray(model.default_q, float)
    return [q0] + [q0 + rng.uniform(-spread, spread, len(q0)) for _ in range(count - 1)]


def closed_enough(sil: RobotSilhouette, poses: list, tolerance: float = 0.01) -> bool:
    """Whether ``sil``'s one-sided silhouettes at ``poses`` (joint vectors) differ from its two-sided ones in at
    most ``tolerance`` of their pixels (pooled): a mesh that is not closed (a single-sided plate) shows holes."""
    both = [sil(q, one_side=False) for q in poses]
    differ = sum(int((b ^ sil(q, one_side=True)).sum()) for q, b in zip(poses, both))
    return differ <= tolerance * max(1, sum(int(b.sum()) for b in both))
