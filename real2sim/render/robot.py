"""The robot as the camera sees it: its visual meshes posed by forward kinematics and rasterised to a link-id image.

:func:`load_robot_model` reads a bundle robot (registry URDF, base pose); :func:`link_id_image` gives, for a
camera and joint positions, the link each pixel shows (depth-tested, so links hide each other);
:func:`render_links` paints those links with flat colours. Robot fitting, robot masks, camera refinement and robot
colour matching all render the robot through here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.geometry import transform_points
from real2sim.core.meshes import load_mesh
from real2sim.render.raster import rasterize
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


def load_robot_model(spec) -> RobotModel:
    """Visual meshes of the bundle's robot (``manifest.robot``), from the registry's resolved URDF."""

    rs = robot_setup(spec)
    links, joints, root = parse_urdf(rs.urdf)
    meshes = {}
    for name, link in links.items():
        parts = [p for p in (_geometry_mesh(T, g) for T, g in link.visuals) if p is not None]
        if parts:
            off = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            meshes[name] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] + o for p, o in zip(parts, off)]))
    return RobotModel(meshes, joints, root, rs.base, list(rs.robot.joint_names), np.asarray(rs.qpos, float))


def link_id_image(model: RobotModel, camera, q) -> tuple[np.ndarray, list[str]]:
    """``(h, w) int`` index into the returned link names (-1: no robot) for joint vector ``q``."""

    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))
    names, verts, faces, owner = [], [], [], []
    off = 0
    for i, (name, (v, f)) in enumerate(sorted(model.links.items())):
        if name not in poses:
            continue
        names.append(name)
        verts.append(transform_points(model.base @ poses[name], v))
        faces.append(f + off)
        owner.append(np.full(len(f), len(names) - 1))
        off += len(v)
    fr = rasterize(camera, np.concatenate(verts), np.concatenate(faces))
    owner = np.concatenate(owner)
    return np.where(fr.mask, owner[np.maximum(fr.face_id, 0)], -1), names


def render_links(model: RobotModel, camera, q, colours: dict, default=(0.7, 0.7, 0.7, 1.0)):
    """(``(h, w, 3)`` flat-coloured render, ``(h, w) bool`` robot pixels) with ``colours`` link -> rgba."""
    ids, names = link_id_image(model, camera, q)
    lut = np.array([list(colours.get(n) or default)[:3] for n in names] + [[0, 0, 0]], np.float32)
    img = lut[np.where(ids >= 0, ids, len(names))]
    return img, ids >= 0
