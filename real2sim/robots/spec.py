"""The declarative robot definition and the resolution of its URDF (cached, deterministic).

A resolved URDF is self-contained: absolute mesh paths, link names without ROS prefixes,
frozen cosmetic joints, no ``<transmission>``/``<gazebo>``/``<dynamics>`` elements (passive joint
damping would be counted twice next to the drive damping), and every link with a positive
mass (PhysX refuses massless articulation links). It is written to
``$REAL2SIM_CACHE/robots`` (default ``~/.cache/real2sim/robots``) under a name that hashes the
source bytes and the definition, so the same inputs give the same file.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.errors import DependencyMissing, Real2SimError
from real2sim.core.geometry import make_pose

log = logging.getLogger(__name__)
RESOLVER_VERSION = 2  # bump when _expand/_clean change their output (it is part of the cache key)
MIN_MASS = 1e-3
MIN_INERTIA = 1e-6


@dataclass(frozen=True)
class RobotDef:
    """One robot: where its URDF comes from and how it is driven.

    Joint vectors are ordered ``arm_joints + gripper_joints`` ("actuated joints");
    ``ee_offset`` is (position, quaternion wxyz) of the end-effector frame in ``ee_link``.
    """

    name: str
    source: dict
    base_link: str
    arm_joints: tuple
    gripper_joints: tuple
    gripper_open: tuple
    gripper_closed: tuple
    default_qpos: tuple
    ee_link: str
    ee_offset: tuple = ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    arm_stiffness: tuple = ()
    arm_damping: tuple = ()
    gripper_stiffness: float = 1000.0
    gripper_damping: float = 100.0
    arm_force_limit: tuple = ()  # N or N m per arm joint; () = unlimited
    gripper_force_limit: float = float("inf")
    armature: float = 0.01
    control_hz: float = 5.0
    physics_hz: float = 500.0
    aliases: tuple = ()
    description: str = ""
    strip_link_prefix: str = ""
    fixed_joints: tuple = ()
    negate_joints: tuple = ()
    """Joints whose axis is reversed (limits negated and swapped) to match the real robot's sign convention."""
    camera_mounts: dict = field(default_factory=dict)
    appearance_default: tuple = (0.7, 0.7, 0.7, 1.0)
    appearance: dict = field(default_factory=dict)

    @property
    def joint_names(self) -> list[str]:
        return list(self.arm_joints) + list(self.gripper_joints)

    @property
    def n_arm(self) -> int:
        return len(self.arm_joints)

    @property
    def dof(self) -> int:
        return len(self.arm_joints) + len(self.gripper_joints)

    def default_stiffness(self) -> list[float]:
        return [float(x) for x in self.arm_stiffness] + [float(self.gripper_stiffness)] * len(self.gripper_joints)

    def default_damping(self) -> list[float]:
        return [float(x) for x in self.arm_damping] + [float(self.gripper_damping)] * len(self.gripper_joints)

    def default_force_limit(self) -> list[float]:
        """Drive force/torque limit per actuated joint (``inf`` where the definition gives none)."""
        arm = [float(x) for x in self.arm_force_limit] or [float("inf")] * len(self.arm_joints)
        return arm + [float(self.gripper_force_limit)] * len(self.gripper_joints)

    def ee_offset_matrix(self) -> np.ndarray:

        return make_pose(self.ee_offset[0], self.ee_offset[1])

    def gripper_targets(self, opening: float) -> np.ndarray:
        """Gripper joint targets for ``opening`` in [0 (closed), 1 (open)]."""
        o = float(np.clip(opening, 0.0, 1.0))
        return np.asarray(self.gripper_closed, float) * (1 - o) + np.asarray(self.gripper_open, float) * o

    def link_rgba(self, link: str, overrides: dict | None = None) -> tuple:
        if overrides and link in overrides:
            return tuple(overrides[link])
        return tuple(self.appearance.get(link, self.appearance_default))

    def fingerprint(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=list)


def cache_dir() -> Path:
    root = os.environ.get("REAL2SIM_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "real2sim"
    return base / "robots"


def _package_root(robot: RobotDef) -> Path:
    src = robot.source
    try:
        mod = importlib.import_module(src["package"])
    except ImportError as exc:
        raise DependencyMissing(f"robot '{robot.name}' needs the '{src['pip']}' package for its URDF and meshes "
                                f"({exc}). Install it with: pip install 'real2sim[robots]' (or pip install {src['pip']})") from exc
    paths = list(getattr(mod, "__path__", [])) or [os.path.dirname(mod.__file__)]
    return Path(paths[0])


def _expand(robot: RobotDef, root: Path) -> str:
    src = robot.source
    path = root / src["file"]
    if not path.is_file():
        raise Real2SimError(f"{path}: URDF source of robot '{robot.name}' is missing from package '{src['pip']}'. "
                            f"Fix: pip install --force-reinstall {src['pip']}")
    text = path.read_text()
    pkgs = {k: str((root / v).resolve()) for k, v in src.get("packages", {}).items()}
    if src["kind"] == "xacro":
        try:
            import xacro
        except ImportError as exc:
            raise DependencyMissing(f"robot '{robot.name}' is a xacro file; install 'xacro' (pip install xacro)") from exc
        for inc in src.get("drop_includes", []):
            text = re.sub(r'<xacro:include\s+filename="\$\(find %s\)[^"]*"\s*/>' % re.escape(inc), "", text)
        for k, v in pkgs.items():
            text = text.replace(f"$(find {k})", v)
        try:  # beside the source, so that relative includes resolve; else a temp dir (read-only installs)
            fd, tmp = tempfile.mkstemp(suffix=".xacro", dir=str(path.parent))
        except OSError:
            fd, tmp = tempfile.mkstemp(suffix=".xacro")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            doc = xacro.process_file(tmp, mappings={k: str(v) for k, v in src.get("args", {}).items()})
        finally:
            os.unlink(tmp)
        text = doc.toxml()
    for k, v in pkgs.items():
        text = text.replace(f"package://{k}/" if k else "package://", v + "/")
    return text


def _clean(robot: RobotDef, text: str, base_dir: Path) -> str:
    root = ET.fromstring(text)
    for tag in ("transmission", "gazebo"):
        for el in root.findall(tag):
            root.remove(el)
    pre = robot.strip_link_prefix

    def strip(name: str) -> str:
        return name[len(pre):] if pre and name.startswith(pre) else name

    for link in root.findall("link"):
        link.set("name", strip(link.get("name")))
        inertial = link.find("inertial")
        if inertial is None:
            inertial = ET.SubElement(link, "inertial")
            ET.SubElement(inertial, "mass", value=str(MIN_MASS))
            ET.SubElement(inertial, "inertia", ixx=str(MIN_INERTIA), iyy=str(MIN_INERTIA), izz=str(MIN_INERTIA),
                          ixy="0", ixz="0", iyz="0")
        mass = inertial.find("mass")
        if float(mass.get("value")) <= 0:
            mass.set("value", str(MIN_MASS))
        I = inertial.find("inertia")
        for k in ("ixx", "iyy", "izz"):
            if float(I.get(k, "0")) <= 0:
                I.set(k, str(MIN_INERTIA))
        for mat in link.iter("material"):  # colours come from the robot def / bundle appearance
            for t in list(mat):
                if t.tag == "texture":
                    mat.remove(t)
        for mesh in link.iter("mesh"):
            fn = mesh.get("filename")
            p = Path(fn) if os.path.isabs(fn) else (base_dir / fn)
            if not p.is_file():
                raise Real2SimError(f"{p}: mesh of robot '{robot.name}' (link '{link.get('name')}') is missing. "
                                    f"Fix: pip install --force-reinstall {robot.source['pip']}")
            mesh.set("filename", str(p.resolve()))
    for mat in root.findall("material"):
        root.remove(mat)
    for joint in root.findall("joint"):
        for tag in ("parent", "child"):
            el = joint.find(tag)
            el.set("link", strip(el.get("link")))
        for tag in ("dynamics", "safety_controller", "calibration"):
            for el in joint.findall(tag):
                joint.remove(el)
        if joint.get("name") in robot.fixed_joints:
            joint.set("type", "fixed")
            for tag in ("limit", "axis", "mimic"):
                for el in joint.findall(tag):
                    joint.remove(el)
        if joint.get("name") in robot.negate_joints:
            ax = joint.find("axis")
            ax.set("xyz", " ".join(repr(-float(v) + 0.0) for v in ax.get("xyz").split()))
            lim = joint.find("limit")
            lo, hi = float(lim.get("lower")), float(lim.get("upper"))
            lim.set("lower", repr(-hi))
            lim.set("upper", repr(-lo))
        if joint.get("type") == "continuous":  # engines disagree on unlimited joints: give explicit limits
            joint.set("type", "revolute")
            lim = joint.find("limit")
            if lim is None:
                lim = ET.SubElement(joint, "limit", effort="100", velocity="10")
            lim.set("lower", str(-np.pi))
            lim.set("upper", str(np.pi))
        for el in joint.findall("mimic"):
            joint.remove(el)
    names = {j.get("name") for j in root.findall("joint") if j.get("type") != "fixed"}
    missing = [j for j in robot.joint_names if j not in names]
    links = {l.get("name") for l in root.findall("link")}
    if missing or robot.ee_link not in links or robot.base_link not in links:
        raise Real2SimError(f"robot '{robot.name}': the URDF lacks joints {missing} or links "
                            f"{[l for l in (robot.ee_link, robot.base_link) if l not in links]}; fix the robot file")
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def resolve_urdf(robot: RobotDef) -> Path:
    """The robot's self-contained URDF in the cache (built on first use; same inputs -> same file)."""
    root = _package_root(robot)
    src_file = root / robot.source["file"]
    h = hashlib.sha256()
    h.update(f"v{RESOLVER_VERSION}".encode())
    h.update(robot.fingerprint().encode())
    h.update(str(root.resolve()).encode())
    if src_file.is_file():
        h.update(src_file.read_bytes())
    out = cache_dir() / f"{robot.name}-{h.hexdigest()[:16]}.urdf"
    if out.is_file():
        return out
    text = _clean(robot, _expand(robot, root), src_file.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(out.parent), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    log.info("robot %s: resolved URDF written to %s", robot.name, out)
    return out
