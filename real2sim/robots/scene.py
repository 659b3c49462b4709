"""What the exporters need from a bundle's robot section, resolved against the registry (engine-neutral)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.errors import ExportError
from real2sim.robots import robot_for_spec, robot_urdf
from real2sim.robots.kinematics import so3_exp
from real2sim.robots.materials import visual_material
from real2sim.robots.spec import RobotDef

ROBOT_PREFIX = "robot/"
"""Engine names (MJCF bodies/joints/geoms) of the robot carry this prefix so they never clash with object ids."""


@dataclass
class RobotSetup:
    robot: RobotDef
    urdf: Path
    base: np.ndarray  # (4, 4) world pose of the base link
    qpos: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    appearance: dict
    force_limit: np.ndarray  # (dof,) drive force/torque limits, inf = unlimited
    textures: dict = dataclasses.field(default_factory=dict)
    """link -> (textured visual mesh OBJ in the link frame, texture PNG): absolute paths of ``robot.textures``."""


def robot_setup(spec, root: Path | None = None) -> RobotSetup:
    """Resolve a manifest ``RobotSpec``: registry robot (or the definition packaged in the bundle folder ``root``),
    URDF, base pose, initial joints and gains (defaults filled)."""
    r = robot_for_spec(spec, root)
    n = r.dof

    def vec(v, default, what):
        if v is None or len(v) == 0:
            return np.asarray(default, float)
        if len(v) != n:
            raise ExportError(f"scene.json: robot.{what} has {len(v)} values but robot '{r.name}' has {n} actuated "
                              f"joints ({', '.join(r.joint_names)}). Fix: give one value per joint")
        return np.asarray(v, float)

    return RobotSetup(r, robot_urdf(r), spec.base_pose.matrix(), vec(spec.joint_positions, r.default_qpos, "joint_positions"),
                      vec(spec.stiffness, r.default_stiffness(), "stiffness"),
                      vec(spec.damping, r.default_damping(), "damping"), dict(spec.appearance),
                      np.asarray(r.default_force_limit(), float), _link_textures(spec, root))


def _link_textures(spec, root: Path | None) -> dict:
    """``robot.textures`` resolved against the bundle folder ``root``: link -> (mesh, texture) paths, both checked."""
    tex = getattr(spec, "textures", None) or {}
    if not tex or root is None:
        return {}
    out = {}
    for link, d in sorted(tex.items()):
        paths = tuple(Path(root) / d[k] for k in ("mesh", "texture"))
        for k, p in zip(("mesh", "texture"), paths):
            if not p.is_file():
                raise ExportError(f"scene.json: robot.textures.{link}.{k} names {p}, which is missing. Fix: re-run "
                                  "'real2sim robot-appearance DIR', or remove robot.textures to use the flat colours")
        out[link] = paths
    return out


def robot_cameras(rs: RobotSetup, bundle_cameras) -> dict:
    """``{name: (link, Camera)}`` of the robot-mounted cameras an export adds (``RobotDef.mounted_cameras``: pose
    in the link frame, OpenCV axes); a name that a bundle camera already uses is refused."""
    cams = rs.robot.mounted_cameras()
    clash = sorted(set(cams) & set(bundle_cameras))
    if clash:
        raise ExportError(f"scene.json: camera(s) {', '.join(clash)} share a name with camera mounts of robot "
                          f"'{rs.robot.name}'. Fix: rename the bundle camera (cameras.{clash[0]}) or the mount")
    return cams


# ---------------------------------------------------------------------------------------------
# a minimal URDF tree (for exporters that build the articulation themselves, e.g. USD)
# ---------------------------------------------------------------------------------------------
def _origin(el) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    T = np.eye(4)
    if el is None:
        return T
    T[:3, 3] = [float(v) for v in el.get("xyz", "0 0 0").split()]
    T[:3, :3] = Rotation.from_euler("xyz", [float(v) for v in el.get("rpy", "0 0 0").split()]).as_matrix()
    return T


@dataclass
class UrdfJoint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    lower: float
    upper: float


@dataclass
class UrdfLink:
    name: str
    visuals: list  # (T (4,4), geometry element)
    collisions: list
    mass: float
    com: np.ndarray  # (4, 4) inertial frame
    inertia: np.ndarray  # (3, 3) in the inertial frame
    visual_materials: list = dataclasses.field(default_factory=list)
    """Per visual: (rgba, texture PNG path or None) of the mesh's own material, or (None, None) (flat colour)."""


def parse_urdf(path: Path) -> tuple[dict, list, str]:
    """(links by name, joints in file order, root link name) of a resolved URDF."""
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    links = {}
    for l in root.findall("link"):
        inn = l.find("inertial")
        I = inn.find("inertia")
        inertia = np.array([[float(I.get("ixx")), float(I.get("ixy", 0)), float(I.get("ixz", 0))],
                            [float(I.get("ixy", 0)), float(I.get("iyy")), float(I.get("iyz", 0))],
                            [float(I.get("ixz", 0)), float(I.get("iyz", 0)), float(I.get("izz"))]])
        links[l.get("name")] = UrdfLink(
            l.get("name"), [(_origin(v.find("origin")), v.find("geometry")[0]) for v in l.findall("visual")],
            [(_origin(c.find("origin")), c.find("geometry")[0]) for c in l.findall("collision")],
            float(inn.find("mass").get("value")), _origin(inn.find("origin")), inertia,
            [visual_material(v) for v in l.findall("visual")])
    joints = []
    for j in root.findall("joint"):
        ax = j.find("axis")
        lim = j.find("limit")
        joints.append(UrdfJoint(j.get("name"), j.get("type"), j.find("parent").get("link"), j.find("child").get("link"),
                                _origin(j.find("origin")),
                                np.array([float(v) for v in (ax.get("xyz") if ax is not None else "1 0 0").split()]),
                                float(lim.get("lower", 0)) if lim is not None else 0.0,
                                float(lim.get("upper", 0)) if lim is not None else 0.0))
    children = {j.child for j in joints}
    roots = [n for n in links if n not in children]
    return links, joints, roots[0]


def joint_motion(j: UrdfJoint, q: float) -> np.ndarray:
    """Transform of the child w.r.t. the joint frame at joint value ``q``."""

    T = np.eye(4)
    if j.type == "fixed" or np.linalg.norm(j.axis) < 1e-12:
        return T
    a = j.axis / np.linalg.norm(j.axis)
    if j.type in ("revolute", "continuous"):
        T[:3, :3] = so3_exp(a * q)
    elif j.type == "prismatic":
        T[:3, 3] = a * q
    return T


def parent_first(joints: list, root: str) -> list:
    """The joints reachable from link ``root``, each after the joint that poses its parent link."""
    posed, pending, out = {root}, list(joints), []
    while pending:
        rest = [j for j in pending if j.parent not in posed]
        for j in pending:
            if j.parent in posed:
                out.append(j)
                posed.add(j.child)
        if len(rest) == len(pending):
            break
        pending = rest
    return out


def link_poses(joints: list, root: str, q: dict) -> dict:
    """Poses of every link in the root-link frame for joint values ``q`` (name -> value; missing = 0)."""
    poses = {root: np.eye(4)}
    for j in parent_first(joints, root):
        poses[j.child] = poses[j.parent] @ j.origin @ joint_motion(j, q.get(j.name, 0.0))
    return poses


class PoseChain:
    """:func:`link_poses` of one tree, prepared for loops that pose it many times: the joints in parent-first order,
    each as its origin times the constant, ``sin`` and ``1 - cos`` parts of its motion (Rodrigues; a prismatic
    joint's, linear in its value), so a pose costs one 4x4 sum and product per joint. ``joint_names``: the order of
    the joint vectors it is called with (joints not in it stay at 0)."""

    def __init__(self, joints: list, root: str, joint_names: list):
        self.root = root
        index = {name: i for i, name in enumerate(joint_names)}
        self.steps = [(j.parent, j.child, index.get(j.name), *self._parts(j)) for j in parent_first(joints, root)]

    @staticmethod
    def _parts(j: UrdfJoint) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
        origin = np.asarray(j.origin, float)
        norm = float(np.linalg.norm(j.axis))
        if j.type not in ("revolute", "continuous", "prismatic") or norm < 1e-12:
            return "fixed", origin, origin, origin
        a = np.asarray(j.axis, float) / norm
        E = np.zeros((4, 4))
        if j.type == "prismatic":
            E[:3, 3] = a
            return "prismatic", origin, origin @ E, origin
        E[:3, :3] = [[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]]
        return "revolute", origin, origin @ E, origin @ E @ E

    def __call__(self, q) -> dict[str, np.ndarray]:
        """Link name -> ``(4, 4)`` pose in the root link's frame at joint vector ``q``."""
        q = np.asarray(q, float)
        poses = {self.root: np.eye(4)}
        for parent, child, i, kind, A, B, C in self.steps:
            x = 0.0 if i is None else float(q[i])
            if kind == "revolute":
                M = A + math.sin(x) * B + (1.0 - math.cos(x)) * C
            elif kind == "prismatic":
                M = A + x * B
            else:
                M = A
            poses[child] = poses[parent] @ M
        return poses


def moved_links(joints: list, joint: str) -> set[str]:
    """The links whose pose joint ``joint`` changes: its child link and everything below it in the tree."""
    below: dict[str, list[str]] = {}
    for j in joints:
        below.setdefault(j.parent, []).append(j.child)
    todo = [j.child for j in joints if j.name == joint]
    out: set[str] = set()
    while todo:
        link = todo.pop()
        if link not in out:
            out.add(link)
            todo.extend(below.get(link, []))
    return out
