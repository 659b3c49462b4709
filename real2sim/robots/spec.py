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

from real2sim.core.errors import DependencyMissing, Real2SimError, RobotError
from real2sim.core.geometry import make_pose

log = logging.getLogger(__name__)
RESOLVER_VERSION = 8  # bump when _expand/_clean change their output (it is part of the cache key)
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
    mesh_materials: bool = True
    """Keep the visual meshes' own materials (textures, diffuse colours; ``real2sim.robots.materials``); False: every
    link in its flat ``appearance`` colour (e.g. when colours fitted from the frames should show, or for speed: a
    textured robot costs llvmpipe ~10% more render time)."""

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

    def mounted_cameras(self) -> dict:
        """``{name: (link, Camera)}`` of the camera mounts that give intrinsics (``width, height, fx, fy, cx, cy``):
        the cameras every export adds on the robot. The Camera's ``T_world_camera`` is its OpenCV pose **in the
        link frame**. Mounts without intrinsics are frames only (``camera_mount_pose``), not exported cameras."""
        from real2sim.core.camera import Camera

        out = {}
        for name, m in sorted(self.camera_mounts.items()):
            if "fx" not in m:
                continue
            K = np.array([[m["fx"], 0.0, m["cx"]], [0.0, m["fy"], m["cy"]], [0.0, 0.0, 1.0]], float)
            out[name] = (m["link"], Camera(int(m["width"]), int(m["height"]), K,
                                           make_pose(m["position"], m["quaternion_wxyz"]),
                                           near=float(m.get("near", 0.01)), far=float(m.get("far", 10.0))))
        return out

    def fingerprint(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=list)


def cache_dir() -> Path:
    root = os.environ.get("REAL2SIM_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "real2sim"
    return base / "robots"


def is_file_robot(robot: RobotDef) -> bool:
    """True for a robot read from a definition file (``real2sim.robots.robotfile``), not shipped in a package."""
    return robot.source.get("kind") == "file"


def expand_path_vars(robot: RobotDef, value: str, field_name: str) -> str:
    """``value`` with ``$VAR``/``${VAR}`` replaced from the environment (a definition that points at data the user
    keeps elsewhere, e.g. the Google Robot's description); an unset variable is refused naming it."""
    out = os.path.expandvars(value)
    left = re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", out)
    if left:
        raise RobotError(f"{_where(robot)}: field '{field_name}' ({value}) needs the environment variable {left.group(1)}, "
                         f"which is not set. Fix: export {left.group(1)}=<folder> (see the comments in the definition "
                         "file)")
    return out


def _package_root(robot: RobotDef) -> Path:
    src = robot.source
    if is_file_robot(robot):
        return Path(src["definition"]).parent
    try:
        mod = importlib.import_module(src["package"])
    except ImportError as exc:
        raise DependencyMissing(f"robot '{robot.name}' needs the '{src['pip']}' package for its URDF and meshes "
                                f"({exc}). Install it with: pip install 'real2sim[robots]' (or pip install {src['pip']})") from exc
    paths = list(getattr(mod, "__path__", [])) or [os.path.dirname(mod.__file__)]
    return Path(paths[0])


def _where(robot: RobotDef) -> str:
    """The file a robot comes from, for error messages."""
    return robot.source.get("definition") or f"robot '{robot.name}' (package {robot.source.get('pip')})"


def _source_fix(robot: RobotDef) -> str:
    if is_file_robot(robot):
        return f"correct the path in the URDF or put the file there (definition {robot.source['definition']})"
    return f"pip install --force-reinstall {robot.source['pip']}"


def source_urdf(robot: RobotDef) -> Path:
    """The URDF (or xacro) file the robot is read from."""
    return _package_root(robot) / expand_path_vars(robot, robot.source["file"], "urdf")


def _expand(robot: RobotDef, root: Path) -> str:
    src = robot.source
    path = source_urdf(robot)
    if not path.is_file():
        if is_file_robot(robot):
            raise RobotError(f"{src['definition']}: field 'urdf' names {path}, which does not exist. Fix: give the "
                             "URDF's path relative to the definition file (or absolute)")
        raise Real2SimError(f"{path}: URDF source of robot '{robot.name}' is missing from package '{src['pip']}'. "
                            f"Fix: pip install --force-reinstall {src['pip']}")
    text = path.read_text()
    pkgs = {k: str((root / expand_path_vars(robot, v, f"packages.{k}")).resolve())
            for k, v in src.get("packages", {}).items()}
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
    if "package://" in text and is_file_robot(robot):
        pkg = re.search(r"package://([^/\"]*)", text).group(1)
        raise RobotError(f"{path}: a mesh is named 'package://{pkg}/...' but the definition {src['definition']} does "
                         f"not say where package '{pkg}' is. Fix: add  packages = {{ {pkg} = \"<folder of {pkg}>\" }}  "
                         "to the definition (relative to it)")
    return text


MESH_SUFFIXES = (".stl", ".obj")
"""Mesh formats every engine here reads (MuJoCo reads neither Collada nor glTF)."""


CONVERTIBLE_SUFFIXES = (".glb", ".gltf", ".dae", ".ply", ".off")


def _converted_mesh(p: Path, link: str, urdf: Path) -> Path:
    """An OBJ copy (in the robot cache, named by the source's hash) of a mesh in a format not every engine reads.

    glTF/GLB scenes are flattened with their node transforms, as SAPIEN's loader (assimp) reads them; colours and
    textures are dropped (robot colours come from the definition's ``appearance``)."""
    if p.suffix.lower() not in CONVERTIBLE_SUFFIXES:
        raise RobotError(f"{urdf}: mesh {p.name} of link '{link}' is {p.suffix or 'of no known format'}; the engines "
                         f"here read {', '.join(MESH_SUFFIXES)} (and {', '.join(CONVERTIBLE_SUFFIXES)} are converted). "
                         f"Fix: convert it to OBJ or STL and point the URDF at the copy")
    data = p.read_bytes()
    out = cache_dir() / "meshes" / f"{hashlib.sha256(data).hexdigest()[:16]}_{p.stem}.obj"
    if out.is_file():
        return out
    try:
        import trimesh

        m = trimesh.load(str(p), force="mesh", process=False)
        if not len(getattr(m, "faces", [])):
            raise ValueError("no triangles")
        text = trimesh.exchange.obj.export_obj(m, include_normals=False, include_color=False, include_texture=False)
    except Exception as exc:  # trimesh raises many types for a file it cannot read
        raise RobotError(f"{urdf}: mesh {p} of link '{link}' cannot be read ({type(exc).__name__}: {exc}). "
                         "Fix: repair or re-export the mesh (OBJ or STL)") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(out.parent), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    return out


def _parse_urdf_text(robot: RobotDef, text: str, path: Path):
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise RobotError(f"{path}: not a readable URDF ({exc}). Fix: repair the XML") from exc


def _check_tree(robot: RobotDef, root, path: Path) -> None:
    """One root link, every joint between known links, no link the child of two joints (no kinematic loops)."""
    links = [l.get("name") for l in root.findall("link")]
    known = set(links)
    child_of: dict[str, str] = {}
    for joint in root.findall("joint"):
        jn = joint.get("name")
        for tag in ("parent", "child"):
            el = joint.find(tag)
            if el is None or el.get("link") not in known:
                raise RobotError(f"{path}: joint '{jn}' names {tag} link "
                                 f"'{None if el is None else el.get('link')}', which the URDF does not define. "
                                 "Fix: correct the link name or add the <link>")
        child = joint.find("child").get("link")
        if child in child_of:
            raise RobotError(f"{path}: link '{child}' is the child of two joints ('{child_of[child]}' and '{jn}'): a "
                             "kinematic loop, which URDF and the engines' articulations cannot hold. Fix: remove one of "
                             "the two joints (keep the tree; a closed chain needs an engine-side constraint)")
        child_of[child] = jn
        if joint.get("type") in ("floating", "planar"):
            raise RobotError(f"{path}: joint '{jn}' is of type '{joint.get('type')}', which no engine here drives. "
                             "Fix: make it revolute, prismatic or fixed")
    roots = [l for l in links if l not in child_of]
    if len(roots) != 1:
        raise RobotError(f"{path}: the URDF has {len(roots)} root links ({', '.join(roots) or 'none: a kinematic loop'}); "
                         "a robot is one tree with one root. Fix: join the parts with fixed joints, or break the loop")


def _check_names(robot: RobotDef, root, path: Path) -> None:
    """Every joint and link the definition names exists in the URDF (close matches suggested)."""
    import difflib

    movable = [j.get("name") for j in root.findall("joint") if j.get("type") != "fixed"]
    links = [l.get("name") for l in root.findall("link")]
    where = _where(robot)

    def close(name, pool):
        c = difflib.get_close_matches(name, pool, n=1)
        return f"did you mean '{c[0]}'? " if c else ""

    for fld in ("arm_joints", "gripper_joints"):
        for j in getattr(robot, fld):
            if j not in movable:
                raise RobotError(f"{where}: field '{fld}' names joint '{j}', which is not a movable joint of {path}. "
                                 f"Fix: {close(j, movable)}movable joints: {', '.join(movable)}")
    for fld in ("base_link", "ee_link"):
        ln = getattr(robot, fld)
        if ln not in links:
            raise RobotError(f"{where}: field '{fld}' names link '{ln}', which {path} does not define. "
                             f"Fix: {close(ln, links)}links: {', '.join(links)}")
    for cam, m in robot.camera_mounts.items():
        if m["link"] not in links:
            raise RobotError(f"{where}: camera mount '{cam}' is on link '{m['link']}', which {path} does not define. "
                             f"Fix: {close(m['link'], links)}mount it on one of: {', '.join(links)}")


def _balance_inertia(I) -> bool:
    """Make the ``<inertia>`` element physically valid (principal moments satisfy the triangle inequality) by raising
    the two smaller moments equally; True when it had to change."""
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    v = {k: float(I.get(k, "0")) for k in keys}
    M = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]])
    w, V = np.linalg.eigh(M)  # ascending
    gap = w[2] - w[0] - w[1]
    if gap < -1e-4 * w[2]:  # valid, with a margin for the digits the engines keep
        return False
    w = w + (max(gap, 0.0) / 2 + 1e-4 * w[2]) * np.array([1.0, 1.0, 0.0])  # > the 6 digits MJCF keeps
    M = V @ np.diag(w) @ V.T
    for k, (i, j) in zip(keys, [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]):
        I.set(k, repr(float(M[i, j])))
    return True


def _clean(robot: RobotDef, text: str, base_dir: Path, fixes: list | None = None, path: Path | None = None,
           keep_materials: bool = True) -> str:
    """The self-contained URDF (see the module docstring); what had to be changed is appended to ``fixes``.
    ``keep_materials``: split visual meshes by their own materials (``real2sim.robots.materials``)."""
    from real2sim.robots.materials import split_visuals

    fixes = [] if fixes is None else fixes
    path = path or base_dir
    root = _parse_urdf_text(robot, text, path)
    for tag in ("transmission", "gazebo"):
        for el in root.findall(tag):
            root.remove(el)
    pre = robot.strip_link_prefix

    def strip(name: str) -> str:
        return name[len(pre):] if pre and name.startswith(pre) else name

    for link in root.findall("link"):
        link.set("name", strip(link.get("name")))
    for joint in root.findall("joint"):
        for tag in ("parent", "child"):
            el = joint.find(tag)
            if el is not None:
                el.set("link", strip(el.get("link")))
    _check_tree(robot, root, path)
    fixed_now = set(robot.fixed_joints)
    moving_children = {j.find("child").get("link") for j in root.findall("joint")
                       if j.get("type") != "fixed" and j.get("name") not in fixed_now}
    with_inertial = {l.get("name") for l in root.findall("link") if l.find("inertial") is not None}
    if moving_children and not moving_children & with_inertial:
        raise RobotError(f"{path}: no moving link has an <inertial> (mass and inertia); the engines need them to "
                         "simulate the arm. Fix: add <inertial> to each link (from the CAD model, or a rough box "
                         "estimate)")
    for link in root.findall("link"):
        ln = link.get("name")
        inertial = link.find("inertial")
        if inertial is None:
            inertial = ET.SubElement(link, "inertial")
            ET.SubElement(inertial, "mass", value=str(MIN_MASS))
            ET.SubElement(inertial, "inertia", ixx=str(MIN_INERTIA), iyy=str(MIN_INERTIA), izz=str(MIN_INERTIA),
                          ixy="0", ixz="0", iyz="0")
            if ln in moving_children:
                fixes.append(f"link '{ln}' has no <inertial>: given {MIN_MASS * 1e3:g} g and {MIN_INERTIA:g} kg m^2")
        mass = inertial.find("mass")
        if mass is None:
            mass = ET.SubElement(inertial, "mass", value="0")
        if float(mass.get("value", "0")) <= 0:
            mass.set("value", str(MIN_MASS))
            if ln in moving_children:
                fixes.append(f"link '{ln}' is massless: given {MIN_MASS * 1e3:g} g")
        I = inertial.find("inertia")
        if I is None:
            I = ET.SubElement(inertial, "inertia", ixy="0", ixz="0", iyz="0")
        bad = [k for k in ("ixx", "iyy", "izz") if float(I.get(k, "0")) <= 0]
        for k in bad:
            I.set(k, str(MIN_INERTIA))
        if bad and ln in moving_children and float(mass.get("value")) > MIN_MASS:
            fixes.append(f"link '{ln}' has a zero inertia ({', '.join(bad)}): set to {MIN_INERTIA:g} kg m^2")
        if _balance_inertia(I) and ln in moving_children:
            fixes.append(f"link '{ln}' has principal inertias at or past what a rigid body can have (A + B <= C): "
                         "the two smaller ones raised by half the gap + 1e-4 C (MuJoCo refuses A + B < C)")
        for mat in link.iter("material"):  # flat colours come from the robot def / bundle appearance
            for t in list(mat):
                if t.tag == "texture":
                    mat.remove(t)
        if keep_materials:  # the meshes' own materials: one visual per material part (robots.materials)
            split_visuals(link, path, base_dir)
        for mesh in link.iter("mesh"):
            fn = mesh.get("filename") or ""
            if fn.startswith("file://"):
                fn = fn[len("file://"):]
            p = Path(fn) if os.path.isabs(fn) else (base_dir / fn)
            if not p.is_file():
                raise RobotError(f"{path}: mesh '{mesh.get('filename')}' of link '{ln}' is missing (looked at {p}). "
                                 f"Fix: {_source_fix(robot)}")
            if p.stat().st_size == 0:
                raise RobotError(f"{path}: mesh {p} of link '{ln}' is an empty file. Fix: {_source_fix(robot)}")
            if p.suffix.lower() not in MESH_SUFFIXES:
                converted = _converted_mesh(p, ln, path)
                fixes.append(f"mesh {p.name} of link '{ln}' converted to OBJ (MuJoCo reads only "
                             f"{', '.join(MESH_SUFFIXES)}): {converted.name}")
                p = converted
            mesh.set("filename", str(p.resolve()))
    for mat in root.findall("material"):
        root.remove(mat)
    actuated = set(robot.joint_names)
    for joint in root.findall("joint"):
        jn = joint.get("name")
        for tag in ("dynamics", "safety_controller", "calibration"):
            for el in joint.findall(tag):
                joint.remove(el)
        mimic = joint.find("mimic")
        if mimic is not None and jn not in fixed_now:
            if jn in actuated:
                fixes.append(f"joint '{jn}' mimics '{mimic.get('joint')}': no engine here follows mimic joints, so it "
                             "is driven to its own target (gripper_open/gripper_closed)")
            else:
                raise RobotError(f"{path}: joint '{jn}' mimics '{mimic.get('joint')}', and no engine here follows mimic "
                                 f"joints. Fix: list '{jn}' in gripper_joints (driven to its own target, with its own "
                                 f"open/closed values) or in fixed_joints of {_where(robot)}")
        if jn in fixed_now:
            joint.set("type", "fixed")
        if joint.get("type") == "fixed":  # limits/axes on a fixed joint mean nothing (and 'inf' breaks urdfdom)
            for tag in ("limit", "axis", "mimic"):
                for el in joint.findall(tag):
                    joint.remove(el)
        if jn in robot.negate_joints:
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
            fixes.append(f"joint '{jn}' is continuous: limited to [-pi, pi] (engines disagree on unlimited joints)")
        if joint.get("type") in ("revolute", "prismatic"):
            lim = joint.find("limit")
            if lim is None or lim.get("lower") is None or lim.get("upper") is None:
                raise RobotError(f"{path}: {joint.get('type')} joint '{jn}' has no <limit lower=.. upper=..>. Fix: add "
                                 "the joint's range to the URDF")
        for el in joint.findall("mimic"):
            joint.remove(el)
        if jn in actuated and joint.find("axis") is None:
            ET.SubElement(joint, "axis", xyz="1 0 0")
    _check_names(robot, root, path)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def urdf_fixes(robot: RobotDef) -> list[str]:
    """What resolving the robot's URDF had to change (massless links, mimic joints, ...), one line each."""
    p = resolve_urdf(robot)
    f = p.with_suffix(".fixes.json")
    return json.loads(f.read_text()) if f.is_file() else []


def _cached_files_present(urdf: Path) -> bool:
    """Whether every file a cached resolved URDF names (meshes, material parts and textures in the cache) is there
    (a partly wiped cache resolves again)."""
    return all(Path(f).is_file() for f in re.findall(r'filename="([^"]+)"', urdf.read_text()))


def resolve_urdf(robot: RobotDef) -> Path:
    """The robot's self-contained URDF in the cache (built on first use; same inputs -> same file)."""
    root = _package_root(robot)
    src_file = source_urdf(robot)
    h = hashlib.sha256()
    h.update(f"v{RESOLVER_VERSION}".encode())
    h.update(robot.fingerprint().encode())
    h.update(str(root.resolve()).encode())
    if src_file.is_file():
        h.update(src_file.read_bytes())
    out = cache_dir() / f"{robot.name}-{h.hexdigest()[:16]}.urdf"
    if out.is_file() and _cached_files_present(out):
        return out
    fixes: list[str] = []
    text = _clean(robot, _expand(robot, root), src_file.parent, fixes, src_file, keep_materials=robot.mesh_materials)
    fixes = list(dict.fromkeys(fixes))  # a mesh used twice is converted once
    for line in fixes:
        log.info("robot %s: %s", robot.name, line)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(out.parent), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(fixes, indent=1) + "\n")
    os.replace(tmp, out.with_suffix(".fixes.json"))
    fd, tmp = tempfile.mkstemp(dir=str(out.parent), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    log.info("robot %s: resolved URDF written to %s", robot.name, out)
    return out
