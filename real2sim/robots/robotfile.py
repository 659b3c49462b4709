"""Robot definition files: a robot from its URDF without writing Python.

A definition is a TOML, JSON or YAML file whose fields mirror :class:`~real2sim.robots.spec.RobotDef` (docs/robots.md
lists them)::

    name = "my_arm"
    urdf = "urdf/my_arm.urdf"              # relative to this file (or absolute)
    base_link = "base"
    arm_joints = ["j1", "j2"]
    gripper_joints = ["finger_l", "finger_r"]
    gripper_open = [0.02, 0.02]
    gripper_closed = [0.0, 0.0]
    default_qpos = [0.0, 0.5, 0.02, 0.02]
    ee_link = "hand"

:func:`load_robot_file` reads and checks it (every field, then the URDF: joints, links, camera links, meshes,
inertials, loops, mimic joints), :func:`package_robot_files` turns it into a self-contained folder (definition,
URDF, meshes) that a bundle or an export carries, so that the robot loads anywhere without the user's original
files.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from real2sim.core.errors import ManifestError, RobotError, require
from real2sim.core.manifest import FieldReader
from real2sim.robots.spec import RobotDef, _clean, _expand, _package_root, is_file_robot, source_urdf

log = logging.getLogger(__name__)

SUFFIXES = (".toml", ".json", ".yaml", ".yml")
PACKAGE_DEFINITION = "robot.json"
"""Name of the definition inside a packaged robot folder (bundle ``robot/``, export ``robot/``)."""
PACKAGE_URDF = "robot.urdf"
BUNDLE_ROBOT_DIR = "robot"
"""Folder of a bundle that holds its file robot's package."""
EXPORT_ROBOT_DIR = "robot_def"
"""Folder of an export that holds its file robot's package (``robot/`` is the SAPIEN export's own URDF)."""

_REQUIRED = {"name", "urdf", "base_link", "arm_joints", "gripper_joints", "gripper_open", "gripper_closed",
             "default_qpos", "ee_link"}
_OPTIONAL = {"ee_offset", "arm_stiffness", "arm_damping", "gripper_stiffness", "gripper_damping", "arm_force_limit",
             "gripper_force_limit", "armature", "control_hz", "physics_hz", "aliases", "description",
             "strip_link_prefix", "fixed_joints", "negate_joints", "packages", "camera_mounts", "appearance_default",
             "mesh_materials",
             "appearance", "format"}
DEFAULT_ARM_STIFFNESS = 1000.0
DEFAULT_ARM_DAMPING = 100.0


def looks_like_robot_file(name) -> bool:
    """True when ``name`` (str or Path) is the path of a definition file rather than a registry name."""
    s = str(name)
    has_dir = os.sep in s or "/" in s
    return (s.lower().endswith(SUFFIXES) and (has_dir or Path(s).is_file())) or (has_dir and Path(s).is_file())


def read_definition_dict(path: Path) -> dict:
    """The raw contents of a definition file (TOML, JSON or YAML)."""
    path = Path(path)
    if not path.is_file():
        raise RobotError(f"{path}: robot definition file not found. Fix: give the path of a .toml, .json or .yaml "
                         "robot definition (docs/robots.md)")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise RobotError(f"{path}: a robot definition must be a .toml, .json or .yaml file. Fix: rename or convert it")
    text = path.read_text(encoding="utf-8", errors="replace")
    kind = {".toml": "TOML", ".json": "JSON"}.get(suffix, "YAML")
    try:
        if kind == "TOML":
            import tomllib

            data = tomllib.loads(text)
        elif kind == "JSON":
            data = json.loads(text)
        else:
            yaml = require("yaml", "robots", "pyyaml")
            data = yaml.safe_load(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
        raise RobotError(f"{path}: not valid {kind} ({exc}). Fix: repair the syntax") from exc
    except Exception as exc:  # yaml.YAMLError (not a ValueError)
        if type(exc).__module__.split(".")[0] != "yaml":
            raise
        raise RobotError(f"{path}: not valid YAML ({' '.join(str(exc).split())}). Fix: repair the syntax") from exc
    if not isinstance(data, dict):
        raise RobotError(f"{path}: the {kind} document is a {type(data).__name__}, not a table of fields. Fix: write "
                         "the fields (name, urdf, base_link, ...) at the top level (docs/robots.md)")
    return data


def _pose(r: FieldReader, d, where: str) -> tuple:
    r.obj(d, where, {"position", "quaternion_wxyz"}, {"position"})
    p = r.vector(d["position"], f"{where}.position", 3, limit=100.0)
    q = r.vector(d.get("quaternion_wxyz", [1.0, 0.0, 0.0, 0.0]), f"{where}.quaternion_wxyz", 4)
    n = math.sqrt(sum(x * x for x in q))
    if n < 1e-6:
        r.fail(f"{where}.quaternion_wxyz", "is a zero quaternion", "give a unit quaternion (w, x, y, z)")
    return tuple(p), tuple(x / n for x in q)


def _names(r: FieldReader, v, where: str) -> tuple:
    r.array(v, where, "joint or link names")
    return tuple(r.text(x, f"{where}[{i}]", 200) for i, x in enumerate(v))


def _camera_mount(r: FieldReader, d, where: str) -> dict:
    intr = ("width", "height", "fx", "fy", "cx", "cy")
    r.obj(d, where, {"link", "position", "quaternion_wxyz", "near", "far", *intr}, {"link", "position"})
    p, q = _pose(r, {k: d[k] for k in ("position", "quaternion_wxyz") if k in d}, where)
    out = {"link": r.text(d["link"], f"{where}.link", 200), "position": p, "quaternion_wxyz": q}
    given = [k for k in intr if k in d]
    if given and len(given) != len(intr):
        r.fail(where, f"gives {', '.join(given)} but not {', '.join(k for k in intr if k not in d)}",
               "give all of width, height, fx, fy, cx, cy (pixels), or none")
    if given:
        out["width"] = r.integer(d["width"], f"{where}.width", 1, 16384)
        out["height"] = r.integer(d["height"], f"{where}.height", 1, 16384)
        for k in ("fx", "fy", "cx", "cy"):
            out[k] = r.number(d[k], f"{where}.{k}", 0.0, strict_lo=k in ("fx", "fy"))
    for k in ("near", "far"):
        if k in d:
            out[k] = r.number(d[k], f"{where}.{k}", 0.0, strict_lo=True)
    return out


def parse_definition(d: dict, path: Path) -> RobotDef:
    """A :class:`RobotDef` from a definition's contents (fields checked; the URDF is not read here)."""
    path = Path(path).resolve()
    r = FieldReader(str(path))
    r.obj(d, "", _REQUIRED | _OPTIONAL, _REQUIRED)
    if d.get("format", 1) != 1:
        r.fail("format", f"is {d.get('format')!r}; this version reads format 1", "upgrade real2sim")
    name = r.ident(d["name"], "name")
    arm = _names(r, d["arm_joints"], "arm_joints")
    grip = _names(r, d["gripper_joints"], "gripper_joints")
    if not arm:
        r.fail("arm_joints", "is empty", "list the arm's joints, base to tip")
    dup = sorted({j for j in arm + grip if (arm + grip).count(j) > 1})
    if dup:
        r.fail("gripper_joints", f"repeats joint(s) {', '.join(dup)}", "name each actuated joint once")
    n, g = len(arm), len(grip)

    def vec(key, count, default=None, lo=None):
        if key not in d:
            return default
        return tuple(r.vector(d[key], key, count, lo))

    def num(key, default, lo=0.0, strict=False):
        return r.number(d[key], key, lo, strict_lo=strict) if key in d else default

    urdf = r.text(d["urdf"], "urdf", 4096)
    packages = {}
    for k, v in r.mapping(d.get("packages", {}), "packages", keys="name").items():
        packages[k] = r.text(v, f"packages.{k}", 4096)
    mounts = {k: _camera_mount(r, v, f"camera_mounts.{k}")
              for k, v in r.mapping(d.get("camera_mounts", {}), "camera_mounts").items()}
    appearance = {k: tuple(r.vector(v, f"appearance.{k}", 4, 0.0))
                  for k, v in r.mapping(d.get("appearance", {}), "appearance", keys="name").items()}
    force = d.get("gripper_force_limit")
    control_hz = num("control_hz", 5.0, strict=True)
    physics_hz = num("physics_hz", 500.0, strict=True)
    ratio = physics_hz / control_hz
    if abs(ratio - round(ratio)) > 1e-9:
        r.fail("physics_hz", f"({physics_hz:g}) is not a whole multiple of control_hz ({control_hz:g})",
               "choose rates whose ratio is a whole number of physics steps per control step")
    robot = RobotDef(
        name=name,
        source={"kind": "file", "definition": str(path), "file": urdf, "packages": packages},
        base_link=r.text(d["base_link"], "base_link", 200),
        arm_joints=arm,
        gripper_joints=grip,
        gripper_open=vec("gripper_open", g),
        gripper_closed=vec("gripper_closed", g),
        default_qpos=vec("default_qpos", n + g),
        ee_link=r.text(d["ee_link"], "ee_link", 200),
        ee_offset=_pose(r, d["ee_offset"], "ee_offset") if "ee_offset" in d else ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)),
        arm_stiffness=vec("arm_stiffness", n, (DEFAULT_ARM_STIFFNESS,) * n, 0.0),
        arm_damping=vec("arm_damping", n, (DEFAULT_ARM_DAMPING,) * n, 0.0),
        gripper_stiffness=num("gripper_stiffness", 1000.0),
        gripper_damping=num("gripper_damping", 100.0),
        arm_force_limit=vec("arm_force_limit", n, (), 0.0),
        gripper_force_limit=float("inf") if force is None else r.number(force, "gripper_force_limit", 0.0, strict_lo=True),
        armature=num("armature", 0.01),
        control_hz=control_hz,
        physics_hz=physics_hz,
        aliases=_names(r, d.get("aliases", []), "aliases"),
        description=r.text(d.get("description", ""), "description", 500, allow_empty=True),
        strip_link_prefix=r.text(d.get("strip_link_prefix", ""), "strip_link_prefix", 200, allow_empty=True),
        fixed_joints=_names(r, d.get("fixed_joints", []), "fixed_joints"),
        negate_joints=_names(r, d.get("negate_joints", []), "negate_joints"),
        camera_mounts=mounts,
        appearance_default=tuple(r.vector(d.get("appearance_default", [0.7, 0.7, 0.7, 1.0]), "appearance_default", 4, 0.0)),
        appearance=appearance,
        mesh_materials=r.boolean(d.get("mesh_materials", True), "mesh_materials"),
    )
    clash = set(robot.joint_names) & set(robot.fixed_joints)
    if clash:
        r.fail("fixed_joints", f"freezes actuated joint(s) {', '.join(sorted(clash))}",
               "remove them from fixed_joints or from arm_joints/gripper_joints")
    return robot


def load_robot_file(path, check_urdf: bool = True) -> RobotDef:
    """Read and check a definition file; with ``check_urdf`` the URDF is resolved too (names, meshes, tree), so a
    bad robot is refused here, naming the file, link or joint, before anything is written."""
    from real2sim.robots.spec import resolve_urdf

    path = Path(path)
    try:
        robot = parse_definition(read_definition_dict(path), path)
    except ManifestError as exc:
        raise RobotError(str(exc)) from exc
    if check_urdf:
        resolve_urdf(robot)
    return robot


def definition_dict(robot: RobotDef, urdf: str, packages: dict | None = None) -> dict:
    """The definition-file form of ``robot`` (JSON-able), its URDF given as ``urdf``."""
    def lst(v):
        return [float(x) for x in v]

    d = {"format": 1, "name": robot.name, "urdf": urdf, "description": robot.description,
         "aliases": list(robot.aliases), "base_link": robot.base_link, "arm_joints": list(robot.arm_joints),
         "gripper_joints": list(robot.gripper_joints), "gripper_open": lst(robot.gripper_open),
         "gripper_closed": lst(robot.gripper_closed), "default_qpos": lst(robot.default_qpos),
         "ee_link": robot.ee_link,
         "ee_offset": {"position": lst(robot.ee_offset[0]), "quaternion_wxyz": lst(robot.ee_offset[1])},
         "arm_stiffness": lst(robot.arm_stiffness), "arm_damping": lst(robot.arm_damping),
         "gripper_stiffness": float(robot.gripper_stiffness), "gripper_damping": float(robot.gripper_damping),
         "armature": float(robot.armature), "control_hz": float(robot.control_hz), "physics_hz": float(robot.physics_hz),
         "strip_link_prefix": robot.strip_link_prefix, "fixed_joints": list(robot.fixed_joints),
         "negate_joints": list(robot.negate_joints),
         "camera_mounts": {k: {**v, "position": lst(v["position"]), "quaternion_wxyz": lst(v["quaternion_wxyz"])}
                           for k, v in robot.camera_mounts.items()},
         "appearance_default": lst(robot.appearance_default),
         "appearance": {k: lst(v) for k, v in robot.appearance.items()},
         "mesh_materials": bool(robot.mesh_materials)}
    if robot.arm_force_limit:
        d["arm_force_limit"] = lst(robot.arm_force_limit)
    if math.isfinite(robot.gripper_force_limit):
        d["gripper_force_limit"] = float(robot.gripper_force_limit)
    if packages:
        d["packages"] = dict(packages)
    return d


def package_robot_files(robot: RobotDef) -> dict[str, bytes]:
    """A self-contained copy of a file robot: ``robot.json`` (the definition), ``robot.urdf`` (the source URDF with
    package paths expanded and mesh paths made relative) and ``meshes/`` (content-addressed copies).

    The URDF keeps its original joints and links (the definition's ``fixed_joints``/``negate_joints``/prefix still
    apply when it is resolved), so resolving the copy gives the same robot as resolving the original."""
    if not is_file_robot(robot):
        raise RobotError(f"robot '{robot.name}' is a registry robot, not a definition file; it needs no copy")
    root_dir = _package_root(robot)
    src = source_urdf(robot)
    text = _expand(robot, root_dir)
    _clean(robot, text, src.parent, [], src, keep_materials=False)  # refuse a bad robot before anything is copied
    root = ET.fromstring(text)
    files: dict[str, bytes] = {}
    for mesh in root.iter("mesh"):
        fn = mesh.get("filename") or ""
        if fn.startswith("file://"):
            fn = fn[len("file://"):]
        p = Path(fn) if os.path.isabs(fn) else src.parent / fn
        data = p.read_bytes()
        if p.suffix.lower() == ".obj":  # its material library and textures travel with it (content-addressed)
            data = _packaged_obj(data, p.parent, files)
        rel = f"meshes/{hashlib.sha256(data).hexdigest()[:16]}_{p.name}"
        files[rel] = data
        mesh.set("filename", rel)
    files[PACKAGE_URDF] = (ET.tostring(root, encoding="unicode") + "\n").encode()
    files[PACKAGE_DEFINITION] = (json.dumps(definition_dict(robot, PACKAGE_URDF), indent=1) + "\n").encode()
    return files


def _packaged_obj(data: bytes, folder: Path, files: dict) -> bytes:
    """OBJ bytes whose ``mtllib`` names content-addressed copies (added to ``files`` under ``meshes/``) of its
    material libraries, whose ``map_Kd`` textures are copied the same way; a library that is missing is dropped (the
    resolver then reads the mesh without materials, as it would the original)."""
    import re

    def lib(m):
        names = m.group(1).decode(errors="replace").split()
        out = []
        for name in names:
            mp = folder / name
            if not mp.is_file():
                continue
            text = mp.read_text(errors="replace")

            def tex(t):
                tp = mp.parent / t.group(2).strip()
                if not tp.is_file():
                    return ""
                tdata = tp.read_bytes()
                rel = f"{hashlib.sha256(tdata).hexdigest()[:16]}_{tp.name}"
                files[f"meshes/{rel}"] = tdata
                return f"{t.group(1)}{rel}"

            text = re.sub(r"(?m)^([ \t]*map_Kd[ \t]+)(.+)$", tex, text)
            text = re.sub(r"(?m)^[ \t]*(map_(?!Kd)\w+|bump|disp|decal|refl)\b.*$", "", text)  # only map_Kd travels
            mdata = text.encode()
            rel = f"{hashlib.sha256(mdata).hexdigest()[:16]}_{mp.name}"
            files[f"meshes/{rel}"] = mdata
            out.append(rel)
        return (b"mtllib " + " ".join(out).encode()) if out else b""

    return re.sub(rb"(?m)^[ \t]*mtllib[ \t]+([^\r\n]+)", lib, data)


def write_robot_package(robot: RobotDef, folder: Path) -> Path:
    """Write :func:`package_robot_files` into ``folder`` (made if needed); returns the definition's path."""
    folder = Path(folder)
    for rel, data in sorted(package_robot_files(robot).items()):
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return folder / PACKAGE_DEFINITION


def install_in_bundle(robot: RobotDef, bundle_root: Path) -> str:
    """Copy a file robot's package into the bundle's ``robot/`` folder (replaced atomically); returns the bundle-
    relative path of its definition, for ``RobotSpec.definition``. A registry robot needs no copy: returns ''."""
    from real2sim.core.bundle import replace_dir_atomically

    if not is_file_robot(robot):
        return ""
    files = package_robot_files(robot)  # read and checked before the bundle is touched
    with replace_dir_atomically(Path(bundle_root) / BUNDLE_ROBOT_DIR) as tmp:
        for rel, data in sorted(files.items()):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    return f"{BUNDLE_ROBOT_DIR}/{PACKAGE_DEFINITION}"
