"""The typed, versioned scene manifest (``scene.json``) and its validation.

Every field is parsed by hand so that an error names the exact field path, the value
found and the fix. Poses are stored as ``position`` (m) + ``quaternion_wxyz``.

One manifest file holds the whole scene (objects and cameras included, rather than
one ``object.json`` per object): a single atomic rename then commits any change, so
no reader ever sees objects from two different saves.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import ManifestError, did_you_mean
from real2sim.core.geometry import make_pose, split_pose

SCHEMA_VERSION = 1
UNITS = {"length": "m", "mass": "kg", "time": "s", "angle": "rad"}
CONVENTIONS = {
    "world": "+Z up, table top at table_height",
    "camera_frame": "opencv (+X right, +Y down, +Z forward)",
    "pixel_centre": "opencv (top-left pixel centre at 0,0)",
    "quaternion_order": "wxyz",
    "images": "uint8 RGB PNG on disk; masks single-channel PNG 0/255",
}
STAGE_STATUSES = ("pending", "done", "stale", "failed", "poor")
"""'poor': the stage ran but its number missed its quality gate (:mod:`real2sim.core.gates`); its metrics say whether
the result was applied anyway (``applied``)."""
COLLISION_KINDS = ("pending", "none", "hulls", "box", "cylinder", "sphere", "urdf")


# Bounds every field is held to (docs/bundle.md, "Guarantees"). A value past them is refused with the field path.
MAX_ABS = 1e9            # any number in a float field (m, kg, s, px ...)
MAX_INT = 2**31 - 1      # any integer field
MAX_PIXELS = 100_000     # camera width / height
MAX_FOCAL_PX = 1e7       # fx, fy
MAX_NAME = 128           # ids, names (characters)
MAX_PATH = 1024          # bundle-relative paths (characters); each component at most 255 bytes
MAX_TEXT = 100_000       # free text (messages, instructions)
MAX_DEPTH = 32           # nesting of the whole document (the valid manifests nest 8 deep)
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def show(v: Any, limit: int = 60) -> str:
    """A short, never-failing rendering of any value for an error message (huge ints, deep lists, long strings)."""
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return repr(v) if abs(v) < 10**30 else f"an integer of {v.bit_length()} bits"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        body = v[:limit].encode("unicode_escape").decode("ascii")
        return f"'{body}'" + (f"... ({len(v)} characters)" if len(v) > limit else "")
    if isinstance(v, (list, tuple, dict)):
        inner = ", ".join(show(x, 12) for x in (list(v)[:4] if not isinstance(v, dict) else list(v.keys())[:4]))
        more = ", ..." if len(v) > 4 else ""
        return f"[{inner}{more}]" if not isinstance(v, dict) else f"{{keys {inner}{more}}}"
    return type(v).__name__


def check_tree(d: Any, path: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse what no field may hold, anywhere in the document (free-form blocks included): nesting deeper than
    ``max_depth``, integers past 64 bits, strings that are not valid Unicode text or longer than 1,000,000
    characters. Iterative, so a hostile depth cannot exhaust the stack. (Non-finite numbers are refused by the
    typed fields; recorded metrics may hold them, e.g. the PSNR of two identical images.)"""
    r = FieldReader(path)
    stack = [(d, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > max_depth:
            r.fail(where or "<root>", f"is nested deeper than {max_depth} levels", "flatten it; no field nests that deep")
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    r.fail(where or "<root>", f"has a non-string key {show(k)}")
                _tree_text(r, k, f"{where}.<key>".lstrip("."), MAX_TEXT)
                stack.append((v, f"{where}.{k}".lstrip("."), depth + 1))
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if abs(node) >= 2**63:
                r.fail(where, f"is {show(node)}, past the 64-bit range", "use a float or a smaller value")
        elif isinstance(node, float):
            continue
        elif isinstance(node, str):
            _tree_text(r, node, where, MAX_TEXT * 10)
        else:
            r.fail(where, f"has a value of type {type(node).__name__}, which JSON cannot hold")


def _tree_text(r: "FieldReader", v: str, where: str, max_len: int) -> None:
    if len(v) > max_len:
        r.fail(where, f"is a string of {len(v)} characters, more than {max_len}", "shorten it")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        r.fail(where, f"is not valid Unicode text (a lone surrogate) in {show(v)}", "re-type it")


class FieldReader:
    """Reads typed values out of nested dicts, raising ManifestError with the field path.

    There is one method per field type (number, integer, vector, matrix, text, ident, path, mapping, array,
    boolean); every parser of the manifest reads its fields through them, so a field type is validated in one
    place, with the same bounds, for the loader, ``real2sim check`` and every editor."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, problem: str, fix: str | None = None):
        raise ManifestError(self.path, where, problem, fix)

    def obj(self, d: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if not isinstance(d, dict):
            self.fail(where or "<root>", f"must be a JSON object, got {type(d).__name__} {show(d)}")
        for k in d:
            if k not in allowed:
                close = difflib.get_close_matches(k, sorted(allowed), n=1)
                hint = f"rename it to '{close[0]}'" if close else f"remove it (allowed: {', '.join(sorted(allowed))})"
                self.fail(f"{where}.{show(k, 40)[1:-1] if len(k) > 40 else k}".lstrip("."), "is not a known field", hint)
        for k in sorted(required):
            if k not in d:
                self.fail(f"{where}.{k}".lstrip("."), "is missing", "add it (see docs/bundle.md)")
        return d

    def mapping(self, d: Any, where: str, keys: str = "ident") -> dict:
        """A JSON object whose keys are ids (``keys='ident'``: ``[A-Za-z0-9_-]``, ASCII) or names (``'name'``)."""
        if not isinstance(d, dict):
            self.fail(where, f"must be a JSON object, got {type(d).__name__} {show(d)}",
                      "write it as {\"<id>\": {...}} (see docs/bundle.md)")
        for k in d:
            if keys == "ident":
                self.ident(k, f"{where}.{show(k, 40)[1:-1]}")
            else:
                self.text(k, f"{where}.<key>", MAX_NAME)
        return d

    def array(self, v: Any, where: str, what: str = "values") -> list:
        if not isinstance(v, list):
            self.fail(where, f"must be a list of {what}, got {type(v).__name__} {show(v)}")
        return v

    def number(self, v: Any, where: str, lo: float | None = None, hi: float | None = None, strict_lo=False,
               limit: float = MAX_ABS) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(where, f"must be a finite number, got {type(v).__name__} {show(v)}")
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f) or abs(f) > limit:
            self.fail(where, f"must be a finite number of magnitude <= {limit:g}, got {show(v)}")
        if lo is not None and (f < lo or (strict_lo and f == lo)):
            self.fail(where, f"must be {'>' if strict_lo else '>='} {lo}, got {show(v)}")
        if hi is not None and f > hi:
            self.fail(where, f"must be <= {hi}, got {show(v)}")
        return f

    def integer(self, v: Any, where: str, lo: int = 0, hi: int = MAX_INT) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            self.fail(where, f"must be an integer in [{lo}, {hi}], got {show(v)}")
        return int(v)

    def vector(self, v: Any, where: str, n: int, lo: float | None = None, limit: float = MAX_ABS) -> list[float]:
        if not isinstance(v, (list, tuple)) or len(v) != n:
            self.fail(where, f"must be a list of {n} numbers, got {show(v)}")
        return [self.number(x, f"{where}[{i}]", lo, limit=limit) for i, x in enumerate(v)]

    def matrix(self, v: Any, where: str, rows: int, cols: int, limit: float = MAX_ABS) -> np.ndarray:
        if not isinstance(v, (list, tuple)) or len(v) != rows:
            self.fail(where, f"must be a {rows}x{cols} nested list, got {show(v)}")
        return np.array([self.vector(r, f"{where}[{i}]", cols, limit=limit) for i, r in enumerate(v)])

    def text(self, v: Any, where: str, max_len: int = MAX_TEXT, allow_empty=False, allow_newlines=False) -> str:
        """A string of valid Unicode text: no NUL or control characters, at most ``max_len`` characters."""
        if not isinstance(v, str) or (not v and not allow_empty):
            self.fail(where, f"must be a non-empty string, got {type(v).__name__} {show(v)}")
        if len(v) > max_len:
            self.fail(where, f"is {len(v)} characters long, more than {max_len}", "shorten it")
        bad = _CONTROL.search(re.sub(r"[\n\r\t\x1b]", "", v) if allow_newlines else v)
        if bad:
            self.fail(where, f"holds the control character {bad.group()!r} in {show(v)}", "remove it")
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            self.fail(where, f"is not valid Unicode text (a lone surrogate) in {show(v)}", "re-type it")
        return v

    def string(self, v: Any, where: str, choices: tuple[str, ...] | None = None, optional=False,
               max_len: int = MAX_NAME) -> str | None:
        if v is None and optional:
            return None
        self.text(v, where, max_len)
        if choices and v not in choices:
            close = difflib.get_close_matches(v, choices, n=1)
            self.fail(where, f"must be one of {', '.join(choices)}, got {show(v)}", f"use '{close[0]}'" if close else None)
        return v

    def ident(self, v: Any, where: str) -> str:
        """An id: 1-64 ASCII letters, digits, '_' or '-' (it becomes a folder and an engine body name)."""
        if not isinstance(v, str) or not ID_PATTERN.fullmatch(v):
            self.fail(where, f"must be an id of 1-64 ASCII letters, digits, '_' or '-', got {show(v)}",
                      "rename it (e.g. 'cafe_mug')")
        return v

    def relpath(self, v: Any, where: str, optional=False) -> str | None:
        """A bundle-relative path: no NUL, not absolute, no '..', at most MAX_PATH characters and 255 bytes a
        component. (Whether it exists and stays inside the bundle after symlinks is checked on disk by
        :meth:`real2sim.core.bundle.Bundle.path`, which every reader and writer goes through.)"""
        if v is None and optional:
            return None
        self.text(v, where, MAX_PATH)
        parts = v.replace("\\", "/").split("/")
        if v.startswith(("/", "\\")) or (len(v) > 1 and v[1] == ":") or ".." in parts:
            self.fail(where, f"must be a path relative to the bundle that stays inside it, got {show(v)}",
                      "copy the file into the bundle and give its path relative to the bundle folder")
        if any(len(p.encode("utf-8")) > 255 for p in parts):
            self.fail(where, f"has a path component longer than 255 bytes: {show(v)}", "shorten the file name")
        return v

    def boolean(self, v: Any, where: str) -> bool:
        if not isinstance(v, bool):
            self.fail(where, f"must be true or false, got {show(v)}")
        return v


@dataclass
class Pose:
    """A rigid pose: position (m) and unit quaternion in wxyz order."""

    position: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    quaternion_wxyz: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])

    def matrix(self) -> np.ndarray:
        """``(4, 4) float`` transform."""
        return make_pose(self.position, self.quaternion_wxyz)

    @classmethod
    def from_matrix(cls, T) -> "Pose":
        p, q = split_pose(T)
        return cls([round(float(x), 9) for x in p], [round(float(x), 9) for x in q])

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "Pose":
        r.obj(d, where, {"position", "quaternion_wxyz"}, {"position", "quaternion_wxyz"})
        q = r.vector(d["quaternion_wxyz"], f"{where}.quaternion_wxyz", 4)
        if abs(np.linalg.norm(q) - 1.0) > 1e-3:
            r.fail(f"{where}.quaternion_wxyz", f"must be a unit quaternion (norm {np.linalg.norm(q):.4f})",
                   "normalise it; the order is w, x, y, z")
        return cls(r.vector(d["position"], f"{where}.position", 3), q)


@dataclass
class CameraSpec:
    """A camera: OpenCV intrinsics and the pose of its OpenCV frame in the world."""

    width: int
    height: int
    K: list[list[float]]
    T_world_camera: list[list[float]]
    distortion: list[float] = field(default_factory=lambda: [0.0] * 5)
    near: float = 0.01
    far: float = 10.0

    def camera(self) -> Camera:
        return Camera(self.width, self.height, np.array(self.K, float), np.array(self.T_world_camera, float),
                      np.array(self.distortion, float), self.near, self.far)

    @classmethod
    def from_camera(cls, cam: Camera) -> "CameraSpec":
        return cls(int(cam.width), int(cam.height), np.round(cam.K, 9).tolist(), np.round(cam.T_world_camera, 9).tolist(),
                   [float(x) for x in cam.distortion], float(cam.near), float(cam.far))

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "CameraSpec":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"width", "height", "K", "T_world_camera"})
        K = r.matrix(d["K"], f"{where}.K", 3, 3, limit=MAX_FOCAL_PX)
        if not (0 < K[0, 0] <= MAX_FOCAL_PX and 0 < K[1, 1] <= MAX_FOCAL_PX):
            r.fail(f"{where}.K", f"must have focal lengths fx, fy (K[0][0], K[1][1]) in (0, {MAX_FOCAL_PX:g}] px, got "
                   f"{K[0, 0]:g}, {K[1, 1]:g}")
        if K[1, 0] != 0 or K[2].tolist() != [0.0, 0.0, 1.0]:
            r.fail(f"{where}.K", f"must be an upper-triangular intrinsic matrix with third row [0, 0, 1], got rows "
                   f"{K[1].tolist()}, {K[2].tolist()}", "write K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]")
        T = r.matrix(d["T_world_camera"], f"{where}.T_world_camera", 4, 4, limit=1e6)
        R = T[:3, :3]
        if not np.allclose(R.T @ R, np.eye(3), atol=1e-4) or np.linalg.det(R) < 0 or not np.allclose(T[3], [0, 0, 0, 1]):
            r.fail(f"{where}.T_world_camera", "must be a rigid transform (orthonormal rotation, last row 0 0 0 1)")
        near = r.number(d.get("near", 0.01), f"{where}.near", 0.0, strict_lo=True)
        far = r.number(d.get("far", 10.0), f"{where}.far", near, strict_lo=True)
        return cls(r.integer(d["width"], f"{where}.width", 1, MAX_PIXELS), r.integer(d["height"], f"{where}.height", 1, MAX_PIXELS),
                   K.tolist(), T.tolist(), r.vector(d.get("distortion", [0.0] * 5), f"{where}.distortion", 5), near, far)


@dataclass
class VisualSpec:
    """Visual geometry: a mesh file (bundle-relative) and a texture or flat colour."""

    mesh: str
    texture: str | None = None
    rgba: list[float] = field(default_factory=lambda: [0.7, 0.7, 0.7, 1.0])

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "VisualSpec":
        r.obj(d, where, {"mesh", "texture", "rgba"}, {"mesh"})
        rgba = r.vector(d.get("rgba", [0.7, 0.7, 0.7, 1.0]), f"{where}.rgba", 4, lo=0.0)
        if max(rgba) > 1.0:
            r.fail(f"{where}.rgba", "components must be in [0, 1]")
        return cls(r.relpath(d["mesh"], f"{where}.mesh"), r.relpath(d.get("texture"), f"{where}.texture", optional=True), rgba)


@dataclass
class CollisionSpec:
    """Collision geometry, separate from the visual mesh.

    ``kind`` is 'pending' (not computed yet), 'none', 'hulls' (convex pieces in
    ``hulls``), or a primitive 'box' (``size`` = half extents), 'cylinder'
    (``size`` = [radius, half_height], axis = local Z of ``pose``), 'sphere'
    (``size`` = [radius]). ``pose`` places a primitive in the object frame.
    """

    kind: str = "pending"
    hulls: list[str] = field(default_factory=list)
    size: list[float] = field(default_factory=list)
    pose: Pose = field(default_factory=Pose)

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "CollisionSpec":
        r.obj(d, where, {"kind", "hulls", "size", "pose"}, {"kind"})
        kind = r.string(d["kind"], f"{where}.kind", COLLISION_KINDS)
        hulls = r.array(d.get("hulls", []), f"{where}.hulls", "bundle-relative .obj paths")
        hulls = [r.relpath(h, f"{where}.hulls[{i}]") for i, h in enumerate(hulls)]
        size = r.array(d.get("size", []), f"{where}.size", "numbers (m)")
        n = {"box": 3, "cylinder": 2, "sphere": 1}.get(kind)
        if n is not None:
            size = r.vector(size, f"{where}.size", n, lo=0.0)
            if min(size) <= 0:
                r.fail(f"{where}.size", "must be positive")
        else:
            size = [r.number(x, f"{where}.size[{i}]", 0.0) for i, x in enumerate(size)]
        if kind == "hulls" and not hulls:
            r.fail(f"{where}.hulls", "must list at least one hull when kind is 'hulls'", "run 'real2sim build' again")
        pose = Pose.parse(r, d["pose"], f"{where}.pose") if "pose" in d else Pose()
        return cls(kind, hulls, list(size), pose)


@dataclass
class InertialSpec:
    """Mass properties in the object frame: mass (kg), centre of mass (m), inertia about the COM (kg m^2)."""

    mass: float
    com: list[float]
    inertia: list[list[float]]

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "InertialSpec":
        r.obj(d, where, {"mass", "com", "inertia"}, {"mass", "com", "inertia"})
        I = r.matrix(d["inertia"], f"{where}.inertia", 3, 3)
        if not np.allclose(I, I.T, atol=1e-9) or np.linalg.eigvalsh(I).min() <= 0:
            r.fail(f"{where}.inertia", "must be symmetric positive definite")
        return cls(r.number(d["mass"], f"{where}.mass", 0.0, strict_lo=True), r.vector(d["com"], f"{where}.com", 3), I.tolist())


@dataclass
class JointDynamics:
    """Passive dynamics of one joint of an articulated object: viscous ``damping`` (N s/m or N m s/rad) and Coulomb
    ``friction`` (N or N m), as URDF's ``<dynamics>``."""

    damping: float = 0.0
    friction: float = 0.0

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "JointDynamics":
        r.obj(d, where, {"damping", "friction"})
        return cls(r.number(d.get("damping", 0.0), f"{where}.damping", 0.0),
                   r.number(d.get("friction", 0.0), f"{where}.friction", 0.0))


@dataclass
class ArticulationSpec:
    """An articulated object: its URDF packaged in the bundle, the position of every movable joint (m or rad) and
    each joint's dynamics. The object's ``visual.mesh`` is every link posed at ``joint_positions`` (what alignment,
    masks and the review page see); exporters build the links and joints from ``urdf``."""

    urdf: str
    joint_positions: dict[str, float] = field(default_factory=dict)
    joint_dynamics: dict[str, JointDynamics] = field(default_factory=dict)

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "ArticulationSpec":
        r.obj(d, where, {"urdf", "joint_positions", "joint_dynamics"}, {"urdf"})
        jp = r.mapping(d.get("joint_positions", {}), f"{where}.joint_positions", keys="name")
        jd = r.mapping(d.get("joint_dynamics", {}), f"{where}.joint_dynamics", keys="name")
        for k in jd:
            if k not in jp:
                r.fail(f"{where}.joint_dynamics.{k}", f"names a joint that is not in {where}.joint_positions"
                       f"{did_you_mean(k, jp)}", f"use one of {', '.join(sorted(jp)) or '(none)'}")
        return cls(r.relpath(d["urdf"], f"{where}.urdf"),
                   {k: r.number(v, f"{where}.joint_positions.{k}", limit=1e3) for k, v in jp.items()},
                   {k: JointDynamics.parse(r, v, f"{where}.joint_dynamics.{k}") for k, v in jd.items()})


@dataclass
class ObjectSpec:
    """One object of the scene (``articulation`` set: an articulated object, links and joints from a URDF)."""

    pose: Pose
    visual: VisualSpec
    collision: CollisionSpec = field(default_factory=CollisionSpec)
    fixed: bool = False
    density: float = 1000.0
    mass: float | None = None
    friction: float = 0.8
    restitution: float = 0.0
    inertial: InertialSpec | None = None
    source: str = ""
    articulation: ArticulationSpec | None = None

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "ObjectSpec":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"pose", "visual"})
        mass = d.get("mass")
        art = (ArticulationSpec.parse(r, d["articulation"], f"{where}.articulation")
               if d.get("articulation") is not None else None)
        kind = d.get("collision", {}).get("kind") if isinstance(d.get("collision"), dict) else None
        if (art is not None) != (kind == "urdf"):
            r.fail(f"{where}.collision.kind", "must be 'urdf' exactly when the object has an 'articulation' (its links' "
                   f"collision shapes come from the URDF), got {show(kind)}",
                   "add the object again with 'real2sim add-object SCENE ID --urdf FILE'")
        return cls(
            articulation=art,
            pose=Pose.parse(r, d["pose"], f"{where}.pose"),
            visual=VisualSpec.parse(r, d["visual"], f"{where}.visual"),
            collision=CollisionSpec.parse(r, d.get("collision", {"kind": "pending"}), f"{where}.collision"),
            fixed=r.boolean(d.get("fixed", False), f"{where}.fixed"),
            density=r.number(d.get("density", 1000.0), f"{where}.density", 0.0, strict_lo=True),
            mass=None if mass is None else r.number(mass, f"{where}.mass", 0.0, strict_lo=True),
            friction=r.number(d.get("friction", 0.8), f"{where}.friction", 0.0),
            restitution=r.number(d.get("restitution", 0.0), f"{where}.restitution", 0.0, 1.0),
            inertial=(InertialSpec.parse(r, d["inertial"], f"{where}.inertial")
                      if d.get("inertial") is not None else None),
            source=r.text(d.get("source", ""), f"{where}.source", MAX_PATH, allow_empty=True),
        )


@dataclass
class LightSpec:
    """A directional light: direction it shines along (world), RGB colour."""

    direction: list[float] = field(default_factory=lambda: [0.3, 0.2, -1.0])
    color: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0])

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "LightSpec":
        r.obj(d, where, {"direction", "color"})
        direction = r.vector(d.get("direction", [0.3, 0.2, -1.0]), f"{where}.direction", 3)
        if float(np.linalg.norm(direction)) < 1e-6:
            r.fail(f"{where}.direction", "must be a non-zero vector (the direction the light shines along)",
                   "e.g. [0.3, 0.2, -1.0] for light from above")
        return cls(direction, r.vector(d.get("color", [1.0, 1.0, 1.0]), f"{where}.color", 3, lo=0.0))


@dataclass
class PhysicsSpec:
    """Simulation settings shared by every engine."""

    timestep: float = 0.002
    gravity: list[float] = field(default_factory=lambda: [0.0, 0.0, -9.81])

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "PhysicsSpec":
        r.obj(d, where, {"timestep", "gravity"})
        return cls(r.number(d.get("timestep", 0.002), f"{where}.timestep", 0.0, 0.1, strict_lo=True),
                   r.vector(d.get("gravity", [0.0, 0.0, -9.81]), f"{where}.gravity", 3))


@dataclass
class StageRecord:
    """What a stage last did: status, the hash of its inputs + config, outputs, quality metrics."""

    status: str = "pending"
    input_hash: str = ""
    config: dict = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    message: str = ""

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "StageRecord":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"status"})
        for k in ("config", "metrics"):
            r.mapping(d.get(k, {}), f"{where}.{k}", keys="name")
        outputs = r.array(d.get("outputs", []), f"{where}.outputs", "bundle-relative paths")
        return cls(r.string(d["status"], f"{where}.status", STAGE_STATUSES),
                   r.text(d.get("input_hash", ""), f"{where}.input_hash", MAX_NAME, allow_empty=True),
                   dict(d.get("config", {})), [r.relpath(o, f"{where}.outputs[{i}]") for i, o in enumerate(outputs)],
                   dict(d.get("metrics", {})),
                   r.text(d.get("message", ""), f"{where}.message", MAX_TEXT, allow_empty=True, allow_newlines=True))


@dataclass
class RobotSpec:
    """The robot in the scene: a registry name, its base pose, state, controller gains and appearance.

    ``stiffness`` / ``damping`` are per actuated joint (None until set or fitted by sysid);
    ``appearance`` maps a link name to an rgba colour (fitted from real frames later); ``textures`` maps a link name
    to its textured visual mesh (``{"mesh": OBJ with UVs in the link frame, "texture": PNG}``, bundle-relative,
    back-projected from the frames by the ``robot_appearance`` stage), which replaces the link's URDF visuals in
    every export; links without one keep their flat ``appearance`` colour.
    """

    name: str
    base_pose: Pose = field(default_factory=Pose)
    joint_positions: list[float] = field(default_factory=list)
    stiffness: list[float] | None = None
    damping: list[float] | None = None
    appearance: dict[str, list[float]] = field(default_factory=dict)
    textures: dict[str, dict[str, str]] = field(default_factory=dict)
    source: str = ""
    definition: str = ""
    """Bundle-relative path of the robot's packaged definition file (``robot/robot.json``) for a robot read from a
    definition file; empty for a registry robot."""

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "RobotSpec":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"name"})
        def vec_or_none(key, lo=None):
            v = d.get(key)
            if v is None:
                return None
            r.array(v, f"{where}.{key}", "numbers (one per joint)")
            return r.vector(v, f"{where}.{key}", len(v), lo)
        app = r.mapping(d.get("appearance", {}), f"{where}.appearance", keys="name")
        tex = r.mapping(d.get("textures", {}), f"{where}.textures", keys="name")
        for k, v in tex.items():
            r.obj(v, f"{where}.textures.{k}", {"mesh", "texture"}, {"mesh", "texture"})
        return cls(
            name=r.string(d["name"], f"{where}.name"),
            base_pose=Pose.parse(r, d["base_pose"], f"{where}.base_pose") if "base_pose" in d else Pose(),
            joint_positions=vec_or_none("joint_positions") or [],
            stiffness=vec_or_none("stiffness", 0.0),
            damping=vec_or_none("damping", 0.0),
            appearance={k: r.vector(v, f"{where}.appearance.{k}", 4, 0.0) for k, v in app.items()},
            textures={k: {f: r.relpath(v[f], f"{where}.textures.{k}.{f}") for f in ("mesh", "texture")}
                      for k, v in tex.items()},
            source=r.text(d.get("source", ""), f"{where}.source", MAX_PATH, allow_empty=True),
            definition=r.relpath(d["definition"], f"{where}.definition") if d.get("definition") else "",
        )


SUCCESS_TYPES = ("lifted", "near", "on_top", "inside", "joint_opened", "joint_closed", "all_of", "any_of")


# Keys of each success predicate: (required, optional). Object references are checked against the manifest's
# objects by Manifest.from_dict; real2sim.evaluation.envs.tasks documents what each predicate means.
PREDICATE_KEYS = {
    "lifted": ({"object"}, {"height"}),
    "near": ({"object"}, {"target", "position", "distance", "xy_only"}),
    "on_top": ({"object", "support"}, {"z_tol", "margin"}),
    "inside": ({"object", "container"}, {"margin", "link"}),
    "joint_opened": ({"object", "joint"}, {"fraction"}),
    "joint_closed": ({"object", "joint"}, {"fraction"}),
    "all_of": ({"terms"}, set()),
    "any_of": ({"terms"}, set()),
}
PREDICATE_OBJECT_KEYS = ("object", "target", "support", "container")


def parse_predicate(r: FieldReader, pred: Any, where: str) -> list[tuple[str, str]]:
    """Validate a success predicate; returns the (field path, object id) pairs it references."""
    r.obj(pred, where, {"type"} | set().union(*(a | b for a, b in PREDICATE_KEYS.values())), {"type"})
    kind = r.string(pred["type"], f"{where}.type", SUCCESS_TYPES)
    required, optional = PREDICATE_KEYS[kind]
    r.obj(pred, where, {"type"} | required | optional, required)
    refs = []
    if kind in ("all_of", "any_of"):
        terms = r.array(pred["terms"], f"{where}.terms", "predicates")
        if not terms:
            r.fail(f"{where}.terms", "must be a non-empty list of predicates")
        for i, t in enumerate(terms):
            refs += parse_predicate(r, t, f"{where}.terms[{i}]")
        return refs
    for k in PREDICATE_OBJECT_KEYS:
        if k in pred:
            refs.append((f"{where}.{k}", r.ident(pred[k], f"{where}.{k}")))
    if kind == "near" and ("target" in pred) == ("position" in pred):
        r.fail(where, "predicate 'near' needs exactly one of 'target' (object id) or 'position' ([x, y, z])")
    if "position" in pred:
        r.vector(pred["position"], f"{where}.position", 3, limit=1e3)
    for k, lo in (("height", 0.0), ("distance", 0.0), ("z_tol", 0.0), ("margin", None), ("fraction", 0.0)):
        if k in pred:
            r.number(pred[k], f"{where}.{k}", lo, limit=1e3)
    if "xy_only" in pred:
        r.boolean(pred["xy_only"], f"{where}.xy_only")
    if "joint" in pred:
        r.text(pred["joint"], f"{where}.joint", MAX_NAME)
    if "link" in pred:
        r.text(pred["link"], f"{where}.link", MAX_NAME)
    if "fraction" in pred and pred["fraction"] > 1.0:
        r.fail(f"{where}.fraction", f"is a fraction of the joint's range, in [0, 1]; got {show(pred['fraction'])}")
    return refs


def _check_joint_refs(r: FieldReader, pred: dict, where: str, objects: dict) -> None:
    """A joint predicate names an articulated object and one of its movable joints; ``inside`` with ``link`` an
    articulated container."""
    for i, t in enumerate(pred.get("terms", []) if pred.get("type") in ("all_of", "any_of") else []):
        _check_joint_refs(r, t, f"{where}.terms[{i}]", objects)
    kind = pred.get("type")
    key = {"joint_opened": "object", "joint_closed": "object", "inside": "container"}.get(kind)
    if key is None or (kind == "inside" and "link" not in pred):
        return
    oid = pred[key]
    art = objects[oid].articulation
    if art is None:
        r.fail(f"{where}.{key}", f"names '{oid}', a rigid object; '{kind}'{' with a link' if kind == 'inside' else ''} "
               "needs an articulated object (links and joints)",
               "name an object added with 'real2sim add-object SCENE ID --urdf FILE'")
    if kind != "inside" and pred["joint"] not in art.joint_positions:
        r.fail(f"{where}.joint", f"'{pred['joint']}' is not a movable joint of '{oid}'"
               f"{did_you_mean(pred['joint'], art.joint_positions)}",
               f"use one of {', '.join(sorted(art.joint_positions)) or '(it has none)'}")


@dataclass
class TaskSpec:
    """A declarative evaluation task.

    ``success`` is a predicate dict with a ``type`` in :data:`SUCCESS_TYPES` (e.g.
    ``{"type": "lifted", "object": "cube", "height": 0.05}``, ``{"type": "on_top",
    "object": "cube", "support": "domino"}``; ``all_of``/``any_of`` take ``"terms": [...]``).
    ``init`` describes the initial-state randomisation or grid (interpreted by real2sim.evaluation.envs).
    """

    instruction: str
    success: dict
    time_limit_s: float = 20.0
    init: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "TaskSpec":
        r.obj(d, where, {"instruction", "success", "time_limit_s", "init"}, {"instruction", "success"})

        parse_predicate(r, d["success"], f"{where}.success")
        init = r.mapping(d.get("init", {}), f"{where}.init", keys="name")
        return cls(r.text(d["instruction"], f"{where}.instruction", MAX_TEXT), dict(d["success"]),
                   r.number(d.get("time_limit_s", 20.0), f"{where}.time_limit_s", 0.0, strict_lo=True), dict(init))


@dataclass
class FrameSpec:
    """One captured frame: a bundle-relative PNG, its time, its camera and (when recorded) joint positions."""

    image: str
    timestamp: float = 0.0
    camera: str = "main"
    joint_positions: list[float] | None = None

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "FrameSpec":
        r.obj(d, where, {"image", "timestamp", "camera", "joint_positions"}, {"image"})
        jp = d.get("joint_positions")
        if jp is not None:
            r.array(jp, f"{where}.joint_positions", "joint angles (rad)")
            jp = r.vector(jp, f"{where}.joint_positions", len(jp))
        return cls(r.relpath(d["image"], f"{where}.image"),
                   r.number(d.get("timestamp", 0.0), f"{where}.timestamp", 0.0, limit=1e11),
                   r.ident(d.get("camera", "main"), f"{where}.camera"), jp)


MASK_STATES = ("prompt", "rest", "occluded", "moved", "lost")
"""States of a propagated mask: ``prompt`` (segmented on that frame), ``rest`` (the object where it was prompted,
mostly visible), ``occluded`` (there, but less than half of it seen), ``moved`` (carried away), ``lost``."""
MASK_STATES_AT_POSE = ("prompt", "rest")


@dataclass
class CaptureSpec:
    """Real frames and what was derived from them.

    ``masks`` maps a frame key (``"000000"``) to {entity id: bundle-relative mask PNG} (the entity's visible
    pixels in that frame). ``mask_states`` maps the same keys to {entity id: state}, one of :data:`MASK_STATES`
    (from mask propagation; a mask without a state is taken as ``"prompt"``). Stages that need the object at
    its scene pose (alignment, texturing) use only the frames whose state is in :data:`MASK_STATES_AT_POSE`.
    """

    source: str = ""
    frames: list[FrameSpec] = field(default_factory=list)
    plate: str | None = None
    plate_confidence: str | None = None
    masks: dict[str, dict[str, str]] = field(default_factory=dict)
    mask_states: dict[str, dict[str, str]] = field(default_factory=dict)

    def mask_state(self, key: str, entity: str) -> str:
        """State of ``entity``'s mask on frame ``key`` (``"prompt"`` when none was recorded)."""
        return self.mask_states.get(key, {}).get(entity, "prompt")

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "CaptureSpec":
        r.obj(d, where, {"source", "frames", "plate", "plate_confidence", "masks", "mask_states"})
        frames = r.array(d.get("frames", []), f"{where}.frames", "frames ({image, timestamp, camera})")
        masks = r.mapping(d.get("masks", {}), f"{where}.masks")
        for k, v in masks.items():
            r.mapping(v, f"{where}.masks.{k}")
            for e, path in v.items():
                r.relpath(path, f"{where}.masks.{k}.{e}")
        states = r.mapping(d.get("mask_states", {}), f"{where}.mask_states")
        for k, v in states.items():
            r.mapping(v, f"{where}.mask_states.{k}")
            for e, st in v.items():
                r.string(st, f"{where}.mask_states.{k}.{e}", MASK_STATES)
        return cls(r.text(d.get("source", ""), f"{where}.source", MAX_PATH, allow_empty=True),
                   [FrameSpec.parse(r, f, f"{where}.frames[{i}]") for i, f in enumerate(frames)],
                   r.relpath(d.get("plate"), f"{where}.plate", optional=True),
                   r.relpath(d.get("plate_confidence"), f"{where}.plate_confidence", optional=True),
                   {k: dict(v) for k, v in masks.items()}, {k: dict(v) for k, v in states.items()})


@dataclass
class Manifest:
    """Everything in ``scene.json``."""

    name: str
    table_height: float = 0.0
    objects: dict[str, ObjectSpec] = field(default_factory=dict)
    cameras: dict[str, CameraSpec] = field(default_factory=dict)
    lights: list[LightSpec] = field(default_factory=lambda: [LightSpec()])
    physics: PhysicsSpec = field(default_factory=PhysicsSpec)
    stages: dict[str, StageRecord] = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    capture: CaptureSpec = field(default_factory=CaptureSpec)
    robot: RobotSpec | None = None
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    units: dict = field(default_factory=lambda: dict(UNITS))
    conventions: dict = field(default_factory=lambda: dict(CONVENTIONS))

    def to_dict(self) -> dict:
        d = asdict(self)
        for obj in d["objects"].values():
            if obj["inertial"] is None:
                del obj["inertial"]
            if obj["mass"] is None:
                del obj["mass"]
            if obj["articulation"] is None:
                del obj["articulation"]
        if d["robot"] is None:
            del d["robot"]
        else:
            if not d["robot"]["definition"]:
                del d["robot"]["definition"]
            if not d["robot"]["textures"]:
                del d["robot"]["textures"]
        if not d["capture"]["mask_states"]:
            del d["capture"]["mask_states"]
        order = ["schema_version", "name", "units", "conventions", "provenance", "table_height", "physics",
                 "cameras", "lights", "robot", "objects", "tasks", "capture", "stages"]
        return {k: d[k] for k in order if k in d}

    @classmethod
    def from_dict(cls, d: Any, path: str = "scene.json") -> "Manifest":
        r = FieldReader(path)
        names = {f.name for f in fields(cls)}
        r.obj(d, "", names, {"schema_version", "name"})
        check_tree(d, path)
        version = d["schema_version"]
        if isinstance(version, bool) or not isinstance(version, int) or version != SCHEMA_VERSION:
            r.fail("schema_version", f"is {show(version)}; this real2sim reads version {SCHEMA_VERSION} (an integer)",
                   "re-create the bundle with this version or upgrade real2sim")
        if d.get("units", UNITS) != UNITS:
            r.fail("units", f"must be {UNITS}, got {show(d.get('units'))}", "convert the scene to SI units")
        r.mapping(d.get("conventions", {}), "conventions", keys="name")
        ids = r.mapping(d.get("objects", {}), "objects")
        cams = r.mapping(d.get("cameras", {}), "cameras")
        stages = r.mapping(d.get("stages", {}), "stages")
        tasks = r.mapping(d.get("tasks", {}), "tasks")
        provenance = r.mapping(d.get("provenance", {}), "provenance", keys="name")
        lights = r.array(d.get("lights", [LightSpec().__dict__]), "lights", "lights ({direction, color})")
        robot = d.get("robot")
        parsed_tasks = {k: TaskSpec.parse(r, v, f"tasks.{k}") for k, v in tasks.items()}
        for k, v in tasks.items():
            for where, oid in parse_predicate(r, v["success"], f"tasks.{k}.success"):
                if oid not in ids:
                    r.fail(where, f"names the object '{oid}', which is not in 'objects'{did_you_mean(oid, ids)}",
                           f"use one of {', '.join(sorted(ids)) or '(no objects yet)'}")
        parsed_objects = {k: ObjectSpec.parse(r, v, f"objects.{k}") for k, v in ids.items()}
        for k, v in tasks.items():
            _check_joint_refs(r, v["success"], f"tasks.{k}.success", parsed_objects)
        return cls(
            name=r.text(d["name"], "name", 255),
            table_height=r.number(d.get("table_height", 0.0), "table_height"),
            objects=parsed_objects,
            cameras={k: CameraSpec.parse(r, v, f"cameras.{k}") for k, v in cams.items()},
            lights=[LightSpec.parse(r, v, f"lights[{i}]") for i, v in enumerate(lights)],
            physics=PhysicsSpec.parse(r, d.get("physics", {}), "physics"),
            stages={k: StageRecord.parse(r, v, f"stages.{k}") for k, v in stages.items()},
            provenance=dict(provenance),
            capture=CaptureSpec.parse(r, d.get("capture", {}), "capture"),
            robot=RobotSpec.parse(r, robot, "robot") if robot is not None else None,
            tasks=parsed_tasks,
            schema_version=SCHEMA_VERSION,
        )
