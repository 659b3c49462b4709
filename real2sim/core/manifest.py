"""The typed, versioned scene manifest (``scene.json``) and its validation.

Every field is parsed by hand so that an error names the exact field path, the value
found and the fix. Poses are stored as ``position`` (m) + ``quaternion_wxyz``.

One manifest file holds the whole scene (objects and cameras included, rather than
one ``object.json`` per object): a single atomic rename then commits any change, so
no reader ever sees objects from two different saves.
"""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import ManifestError
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
STAGE_STATUSES = ("pending", "done", "stale", "failed")
COLLISION_KINDS = ("pending", "none", "hulls", "box", "cylinder", "sphere")


class FieldReader:
    """Reads typed values out of nested dicts, raising ManifestError with the field path."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, problem: str, fix: str | None = None):
        raise ManifestError(self.path, where, problem, fix)

    def obj(self, d: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if not isinstance(d, dict):
            self.fail(where or "<root>", f"must be a JSON object, got {type(d).__name__}")
        for k in d:
            if k not in allowed:
                close = difflib.get_close_matches(k, sorted(allowed), n=1)
                hint = f"rename it to '{close[0]}'" if close else f"remove it (allowed: {', '.join(sorted(allowed))})"
                self.fail(f"{where}.{k}".lstrip("."), "is not a known field", hint)
        for k in sorted(required):
            if k not in d:
                self.fail(f"{where}.{k}".lstrip("."), "is missing", "add it (see docs/bundle.md)")
        return d

    def number(self, v: Any, where: str, lo: float | None = None, hi: float | None = None, strict_lo=False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            self.fail(where, f"must be a finite number, got {v!r}")
        if lo is not None and (v < lo or (strict_lo and v == lo)):
            self.fail(where, f"must be {'>' if strict_lo else '>='} {lo}, got {v!r}")
        if hi is not None and v > hi:
            self.fail(where, f"must be <= {hi}, got {v!r}")
        return float(v)

    def integer(self, v: Any, where: str, lo: int = 0) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            self.fail(where, f"must be an integer >= {lo}, got {v!r}")
        return int(v)

    def vector(self, v: Any, where: str, n: int, lo: float | None = None) -> list[float]:
        if not isinstance(v, (list, tuple)) or len(v) != n:
            self.fail(where, f"must be a list of {n} numbers, got {v!r}")
        return [self.number(x, f"{where}[{i}]", lo) for i, x in enumerate(v)]

    def matrix(self, v: Any, where: str, rows: int, cols: int) -> np.ndarray:
        if not isinstance(v, (list, tuple)) or len(v) != rows:
            self.fail(where, f"must be a {rows}x{cols} nested list, got {v!r}")
        return np.array([self.vector(r, f"{where}[{i}]", cols) for i, r in enumerate(v)])

    def string(self, v: Any, where: str, choices: tuple[str, ...] | None = None, optional=False) -> str | None:
        if v is None and optional:
            return None
        if not isinstance(v, str) or not v:
            self.fail(where, f"must be a non-empty string, got {v!r}")
        if choices and v not in choices:
            close = difflib.get_close_matches(v, choices, n=1)
            self.fail(where, f"must be one of {', '.join(choices)}, got {v!r}", f"use '{close[0]}'" if close else None)
        return v

    def boolean(self, v: Any, where: str) -> bool:
        if not isinstance(v, bool):
            self.fail(where, f"must be true or false, got {v!r}")
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
        K = r.matrix(d["K"], f"{where}.K", 3, 3)
        if K[0, 0] <= 0 or K[1, 1] <= 0:
            r.fail(f"{where}.K", "must have positive focal lengths fx, fy (K[0][0], K[1][1])")
        T = r.matrix(d["T_world_camera"], f"{where}.T_world_camera", 4, 4)
        R = T[:3, :3]
        if not np.allclose(R.T @ R, np.eye(3), atol=1e-4) or np.linalg.det(R) < 0 or not np.allclose(T[3], [0, 0, 0, 1]):
            r.fail(f"{where}.T_world_camera", "must be a rigid transform (orthonormal rotation, last row 0 0 0 1)")
        near = r.number(d.get("near", 0.01), f"{where}.near", 0.0, strict_lo=True)
        far = r.number(d.get("far", 10.0), f"{where}.far", near, strict_lo=True)
        return cls(r.integer(d["width"], f"{where}.width", 1), r.integer(d["height"], f"{where}.height", 1),
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
        return cls(r.string(d["mesh"], f"{where}.mesh"), r.string(d.get("texture"), f"{where}.texture", optional=True), rgba)


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
        hulls = d.get("hulls", [])
        if not isinstance(hulls, list):
            r.fail(f"{where}.hulls", "must be a list of bundle-relative .obj paths")
        hulls = [r.string(h, f"{where}.hulls[{i}]") for i, h in enumerate(hulls)]
        size = d.get("size", [])
        n = {"box": 3, "cylinder": 2, "sphere": 1}.get(kind)
        if n is not None:
            size = r.vector(size, f"{where}.size", n, lo=0.0)
            if min(size) <= 0:
                r.fail(f"{where}.size", "must be positive")
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
class ObjectSpec:
    """One object of the scene."""

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

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "ObjectSpec":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"pose", "visual"})
        mass = d.get("mass")
        return cls(
            pose=Pose.parse(r, d["pose"], f"{where}.pose"),
            visual=VisualSpec.parse(r, d["visual"], f"{where}.visual"),
            collision=CollisionSpec.parse(r, d.get("collision", {"kind": "pending"}), f"{where}.collision"),
            fixed=r.boolean(d.get("fixed", False), f"{where}.fixed"),
            density=r.number(d.get("density", 1000.0), f"{where}.density", 0.0, strict_lo=True),
            mass=None if mass is None else r.number(mass, f"{where}.mass", 0.0, strict_lo=True),
            friction=r.number(d.get("friction", 0.8), f"{where}.friction", 0.0),
            restitution=r.number(d.get("restitution", 0.0), f"{where}.restitution", 0.0, 1.0),
            inertial=InertialSpec.parse(r, d["inertial"], f"{where}.inertial") if d.get("inertial") else None,
            source=str(d.get("source", "")),
        )


@dataclass
class LightSpec:
    """A directional light: direction it shines along (world), RGB colour."""

    direction: list[float] = field(default_factory=lambda: [0.3, 0.2, -1.0])
    color: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0])

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "LightSpec":
        r.obj(d, where, {"direction", "color"})
        return cls(r.vector(d.get("direction", [0.3, 0.2, -1.0]), f"{where}.direction", 3),
                   r.vector(d.get("color", [1.0, 1.0, 1.0]), f"{where}.color", 3, lo=0.0))


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
            if not isinstance(d.get(k, {}), dict):
                r.fail(f"{where}.{k}", "must be a JSON object")
        return cls(r.string(d["status"], f"{where}.status", STAGE_STATUSES), str(d.get("input_hash", "")),
                   dict(d.get("config", {})), [str(o) for o in d.get("outputs", [])], dict(d.get("metrics", {})),
                   str(d.get("message", "")))


@dataclass
class RobotSpec:
    """The robot in the scene: a registry name, its base pose, state, controller gains and appearance.

    ``stiffness`` / ``damping`` are per actuated joint (None until set or fitted by sysid);
    ``appearance`` maps a link name to an rgba colour (fitted from real frames later).
    """

    name: str
    base_pose: Pose = field(default_factory=Pose)
    joint_positions: list[float] = field(default_factory=list)
    stiffness: list[float] | None = None
    damping: list[float] | None = None
    appearance: dict[str, list[float]] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def parse(cls, r: FieldReader, d: Any, where: str) -> "RobotSpec":
        names = {f.name for f in fields(cls)}
        r.obj(d, where, names, {"name"})
        def vec_or_none(key, lo=None):
            v = d.get(key)
            if v is None:
                return None
            if not isinstance(v, list):
                r.fail(f"{where}.{key}", f"must be a list of numbers (one per joint), got {v!r}")
            return r.vector(v, f"{where}.{key}", len(v), lo)
        app = d.get("appearance", {})
        r.obj(app, f"{where}.appearance", set(app))
        return cls(
            name=r.string(d["name"], f"{where}.name"),
            base_pose=Pose.parse(r, d["base_pose"], f"{where}.base_pose") if "base_pose" in d else Pose(),
            joint_positions=vec_or_none("joint_positions") or [],
            stiffness=vec_or_none("stiffness", 0.0),
            damping=vec_or_none("damping", 0.0),
            appearance={k: r.vector(v, f"{where}.appearance.{k}", 4, 0.0) for k, v in app.items()},
            source=str(d.get("source", "")),
        )


SUCCESS_TYPES = ("lifted", "near", "on_top", "inside", "joint_opened", "all_of", "any_of")


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

        def check(pred, w):
            r.obj(pred, w, set(pred), {"type"})
            r.string(pred["type"], f"{w}.type", SUCCESS_TYPES)
            if pred["type"] in ("all_of", "any_of"):
                terms = pred.get("terms")
                if not isinstance(terms, list) or not terms:
                    r.fail(f"{w}.terms", "must be a non-empty list of predicates")
                for i, t in enumerate(terms):
                    check(t, f"{w}.terms[{i}]")

        check(d["success"], f"{where}.success")
        init = d.get("init", {})
        r.obj(init, f"{where}.init", set(init))
        return cls(r.string(d["instruction"], f"{where}.instruction"), dict(d["success"]),
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
            if not isinstance(jp, list):
                r.fail(f"{where}.joint_positions", f"must be a list of joint angles (rad), got {jp!r}")
            jp = r.vector(jp, f"{where}.joint_positions", len(jp))
        return cls(r.string(d["image"], f"{where}.image"), r.number(d.get("timestamp", 0.0), f"{where}.timestamp", 0.0),
                   r.string(d.get("camera", "main"), f"{where}.camera"), jp)


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
        frames = d.get("frames", [])
        if not isinstance(frames, list):
            r.fail(f"{where}.frames", "must be a list")
        masks = d.get("masks", {})
        r.obj(masks, f"{where}.masks", set(masks))
        for k, v in masks.items():
            r.obj(v, f"{where}.masks.{k}", set(v))
            for e, path in v.items():
                r.string(path, f"{where}.masks.{k}.{e}")
        states = d.get("mask_states", {})
        r.obj(states, f"{where}.mask_states", set(states))
        for k, v in states.items():
            r.obj(v, f"{where}.mask_states.{k}", set(v))
            for e, st in v.items():
                r.string(st, f"{where}.mask_states.{k}.{e}", MASK_STATES)
        return cls(str(d.get("source", "")), [FrameSpec.parse(r, f, f"{where}.frames[{i}]") for i, f in enumerate(frames)],
                   r.string(d.get("plate"), f"{where}.plate", optional=True),
                   r.string(d.get("plate_confidence"), f"{where}.plate_confidence", optional=True),
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
        if d["robot"] is None:
            del d["robot"]
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
        version = d["schema_version"]
        if version != SCHEMA_VERSION:
            r.fail("schema_version", f"is {version!r}; this real2sim reads version {SCHEMA_VERSION}",
                   "re-create the bundle with this version or upgrade real2sim")
        if d.get("units", UNITS) != UNITS:
            r.fail("units", f"must be {UNITS}, got {d.get('units')!r}", "convert the scene to SI units")
        ids = d.get("objects", {})
        r.obj(ids, "objects", set(ids))
        for oid in ids:
            if not oid.replace("_", "").replace("-", "").isalnum():
                r.fail(f"objects.{oid}", "has an id that is not [A-Za-z0-9_-]", "rename the object")
        cams = d.get("cameras", {})
        r.obj(cams, "cameras", set(cams))
        stages = d.get("stages", {})
        r.obj(stages, "stages", set(stages))
        lights = d.get("lights", [LightSpec().__dict__])
        if not isinstance(lights, list):
            r.fail("lights", "must be a list")
        return cls(
            name=r.string(d["name"], "name"),
            table_height=r.number(d.get("table_height", 0.0), "table_height"),
            objects={k: ObjectSpec.parse(r, v, f"objects.{k}") for k, v in ids.items()},
            cameras={k: CameraSpec.parse(r, v, f"cameras.{k}") for k, v in cams.items()},
            lights=[LightSpec.parse(r, v, f"lights[{i}]") for i, v in enumerate(lights)],
            physics=PhysicsSpec.parse(r, d.get("physics", {}), "physics"),
            stages={k: StageRecord.parse(r, v, f"stages.{k}") for k, v in stages.items()},
            provenance=dict(d.get("provenance", {})),
            capture=CaptureSpec.parse(r, d.get("capture", {}), "capture"),
            robot=RobotSpec.parse(r, d["robot"], "robot") if d.get("robot") else None,
            tasks={k: TaskSpec.parse(r, v, f"tasks.{k}") for k, v in r.obj(d.get("tasks", {}), "tasks", set(d.get("tasks", {}))).items()},
            schema_version=SCHEMA_VERSION,
        )
