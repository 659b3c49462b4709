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
from real2sim.robots.scene import link_poses, parse_urdf, robot_setup

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


def _geometry_mesh(T, geom):
    import trimesh

    tag = geom.tag
    if tag == "mesh":
        m = load_mesh(Path(geom.get("filename")))
        v = np.asarray(m.vertices, float) * np.array([float(s) for s in (geom.get("scale") or "1 1 1").split()])
        f = np.asarray(m.faces)
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
    return transform_points(T, v), np.asarray(f, np.int64)


def load_robot_model(spec, root: Path | None = None) -> RobotModel:
    """Visual meshes of the bundle's robot (``manifest.robot``), from the registry's resolved URDF (or, for a robot
    from a definition file, the definition packaged in the bundle folder ``root``)."""

    rs = robot_setup(spec, root)
    links, joints, root = parse_urdf(rs.urdf)
    meshes = {}
    for name, link in links.items():
        parts = [p for p in (_geometry_mesh(T, g) for T, g in link.visuals) if p is not None]
        if parts:
            off = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            meshes[name] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] + o for p, o in zip(parts, off)]))
    return RobotModel(meshes, joints, root, rs.base, list(rs.robot.joint_names), np.asarray(rs.qpos, float))


def posed_mesh(model: RobotModel, q) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The robot's visual meshes posed at joint vector ``q``, in the world.

    Returns (vertices ``(n, 3)``, faces ``(m, 3)``, owner ``(m,)`` index into the link names, link names).
    """
    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))
    names, verts, faces, owner = [], [], [], []
    off = 0
    for name, (v, f) in sorted(model.links.items()):
        if name not in poses:
            continue
        names.append(name)
        verts.append(transform_points(model.base @ poses[name], v))
        faces.append(f + off)
        owner.append(np.full(len(f), len(names) - 1))
        off += len(v)
    return np.concatenate(verts), np.concatenate(faces), np.concatenate(owner), names


def link_id_image(model: RobotModel, camera, q) -> tuple[np.ndarray, list[str]]:
    """``(h, w) int`` index into the returned link names (-1: no robot) for joint vector ``q``."""

    verts, faces, owner, names = posed_mesh(model, q)
    fr = rasterize(camera, verts, faces)
    return np.where(fr.mask, owner[np.maximum(fr.face_id, 0)], -1), names


def render_links(model: RobotModel, camera, q, colours: dict, default=(0.7, 0.7, 0.7, 1.0)):
    """(``(h, w, 3)`` flat-coloured render, ``(h, w) bool`` robot pixels) with ``colours`` link -> rgba."""
    ids, names = link_id_image(model, camera, q)
    lut = np.array([list(colours.get(n) or default)[:3] for n in names] + [[0, 0, 0]], np.float32)
    img = lut[np.where(ids >= 0, ids, len(names))]
    return img, ids >= 0


def cluster_mesh(vertices: np.ndarray, faces: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """A coarser mesh by vertex clustering: vertices ``(n, 3)`` snapped to a ``cell``-sized grid and merged
    (their mean), faces ``(m, 3)`` that collapse dropped. For low-resolution silhouettes, where a cell is under a
    pixel. Returns (vertices ``(n', 3)``, faces ``(m', 3)``)."""
    key = np.floor(np.asarray(vertices, float) / cell).astype(np.int64)
    _, inv = np.unique(key, axis=0, return_inverse=True)
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
    ``pixel_frac`` of a pixel at the robot's distance (``pixel_frac``), and each link's vertices go to clip space with one
    4x4 product (link pose, base, camera and projection together)."""

    def __init__(self, model: RobotModel, camera, pixel_frac: float = 0.7):
        self.model, self.camera = model, camera
        eye = np.asarray(camera.T_world_camera, float)[:3, 3]
        dist = max(0.05, float(np.linalg.norm(eye - model.base[:3, 3])) * 0.5)  # the nearest part of an arm
        cell = pixel_frac * dist / max(camera.fx, 1e-9)
        self.names, self.links, faces, off = [], [], [], 0
        for name, (v, f) in sorted(model.links.items()):
            cv, cf = cluster_mesh(v, f, cell) if cell > 0 else (v, f)
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

    def clip(self, q) -> np.ndarray:
        """``(n, 4)`` clip coordinates of the clustered meshes at joints ``q``."""
        poses = link_poses(self.model.joints, self.model.root, dict(zip(self.model.joint_names, np.asarray(q, float))))
        M0 = self.world_to_clip @ self.model.base
        parts = []
        for name, v in zip(self.names, self.links):
            M = (M0 @ poses[name]) if name in poses else np.zeros((4, 4))
            parts.append(v @ M.T.astype(np.float32))
        return np.concatenate(parts)

    def __call__(self, q) -> np.ndarray:
        c = self.clip(q)
        return coverage_clip(c, self.faces, self.camera.width, self.camera.height)
