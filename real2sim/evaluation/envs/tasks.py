"""Declarative tasks: success predicates over object poses and the initial-state schema.

A task lives in the bundle manifest (``scene.json`` -> ``tasks``; see
:class:`real2sim.core.manifest.TaskSpec`) and is documented in ``docs/evaluation.md``.

Success predicates (world frame, metres; object boxes are the visual mesh's bounds in the
object frame, moved with the object's pose):

``lifted``        ``{"object", "height"=0.05}``: the object frame's z rose at least
                  ``height`` above its z at the start of the episode.
``near``          ``{"object", "target": oid | "position": [x, y, z], "distance"=0.05,
                  "xy_only"=false}``: object frame origin within ``distance`` of the target
                  object's origin (or the point).
``on_top``        ``{"object", "support", "z_tol"=0.02, "margin"=0.0}``: the object's box centre
                  lies inside the support's box footprint (xy, shrunk by ``margin``) and the
                  object's box bottom is within ``z_tol`` of the support's box top.
``inside``        ``{"object", "container", "margin"=0.0, "link"}``: the object's box centre lies inside
                  the container's box (shrunk by ``margin``); with ``link`` (an articulated container)
                  the box of that link's collision shapes, moved with the link (the apple in the drawer).
``joint_opened``  ``{"object", "joint", "fraction"=0.3}``: joint ``joint`` of articulated object
                  ``object`` is at least ``fraction`` of its range from its lower limit (SIMPLER's
                  drawer: open at >= 0.15 m of 0.5 m).
``joint_closed``  ``{"object", "joint", "fraction"=0.1}``: the joint is at most ``fraction`` of its
                  range from its lower limit (SIMPLER's drawer: closed at <= 0.05 m).
``all_of`` / ``any_of``  ``{"terms": [...]}``.

Initial state (``TaskSpec.init``)::

    {"mode": "random" | "grid",                 # default "random"
     "objects": {oid: {"xy": [[x0, y0], [x1, y1]],  # world box for the object frame origin
                       "yaw": [a, b]}},             # rad, added to the bundle orientation about world z
     "grid": [nx, ny],                          # grid mode: points per axis over each xy box
     "grid_yaw": n,                             # grid mode: yaw values over [a, b] (default 1: a)
     "min_separation": 0.0,                     # m, between randomised object origins (xy)
     "robot_qpos": [...],                       # start joints (default: the bundle's)
     "robot_qpos_noise": 0.0,                   # rad, Gaussian per arm joint
     "settle_s": 0.2}                           # physics seconds after placement

Random mode draws from the env's seeded generator (``reset(seed=...)``); grid mode enumerates
the grid in order and uses ``seed`` modulo the grid size as the cell index, so ``seeds
0..N-1`` cover the grid (SIMPLER's grid evaluation).
"""
from __future__ import annotations

import itertools
import logging

import numpy as np

from real2sim.core.errors import Real2SimError, UnknownNameError, UnsupportedCapability

log = logging.getLogger(__name__)
PREDICATES = ("lifted", "near", "on_top", "inside", "joint_opened", "joint_closed", "all_of", "any_of")
JOINT_FRACTION = {"joint_opened": 0.3, "joint_closed": 0.1}
"""Default ``fraction`` of the joint predicates (SIMPLER's drawer thresholds: 0.15 m and 0.05 m of 0.5 m)."""
INIT_KEYS = {"mode", "objects", "grid", "grid_yaw", "min_separation", "robot_qpos", "robot_qpos_noise", "settle_s"}


class TaskError(Real2SimError):
    """A task's success predicate or init block is malformed (names the task and key)."""


def referenced_objects(pred: dict) -> list[str]:
    """Object ids a predicate reads."""
    t = pred.get("type")
    if t in ("all_of", "any_of"):
        return [o for term in pred.get("terms", []) for o in referenced_objects(term)]
    out = [pred[k] for k in ("object", "target", "support", "container") if isinstance(pred.get(k), str)]
    return out


def validate_predicate(pred: dict, known_objects, where: str = "success", articulated: dict | None = None) -> None:
    """Raise TaskError / UnknownNameError / UnsupportedCapability for a predicate this env cannot evaluate.

    ``articulated``: ``{object id: ArticulatedModel}`` of the bundle's articulated objects (joint and link names)."""
    t = pred.get("type")
    articulated = articulated or {}
    if t not in PREDICATES:
        raise TaskError(f"{where}.type: unknown predicate '{t}'; use one of {', '.join(PREDICATES)}")
    if t in ("all_of", "any_of"):
        for i, term in enumerate(pred.get("terms") or []):
            validate_predicate(term, known_objects, f"{where}.terms[{i}]", articulated)
        return
    if t in ("joint_opened", "joint_closed"):
        for k in ("object", "joint"):
            if k not in pred:
                raise TaskError(f"{where}: predicate '{t}' needs key '{k}'")
        oid = pred["object"]
        if oid not in known_objects:
            raise UnknownNameError(f"object in {where}", oid, known_objects)
        if oid not in articulated:
            have = ", ".join(sorted(articulated)) or "none in this bundle; add one with real2sim add-object SCENE ID --urdf FILE"
            raise UnsupportedCapability(f"{where}: '{t}' needs an articulated object; '{oid}' is rigid (no joints). "
                                        f"Fix: name an articulated object ({have})")
        model = articulated[oid]
        j = model.joint(pred["joint"]) if pred["joint"] in [x.name for x in model.movable_joints] else None
        if j is None:
            raise UnknownNameError(f"movable joint of object '{oid}' in {where}.joint", pred["joint"],
                                   [x.name for x in model.movable_joints])
        if not j.limited or j.upper - j.lower <= 0:
            raise TaskError(f"{where}: joint '{j.name}' of '{oid}' has no range (type {j.type}, limits [{j.lower}, "
                            f"{j.upper}]), so a fraction of it means nothing. Fix: name a prismatic or revolute joint "
                            "with limits")
        f = float(pred.get("fraction", JOINT_FRACTION[t]))
        if not 0.0 <= f <= 1.0:
            raise TaskError(f"{where}.fraction must be in [0, 1] (a fraction of the joint's range), got {f}")
        return
    if t == "inside" and "link" in pred:
        c = pred.get("container")
        if c not in articulated:
            raise UnsupportedCapability(f"{where}: 'inside' with a 'link' needs an articulated container; "
                                        f"'{c}' is {'rigid' if c in known_objects else 'not an object'}")
        if pred["link"] not in articulated[c].links:
            raise UnknownNameError(f"link of object '{c}' in {where}.link", pred["link"], articulated[c].links)
    need = {"lifted": ["object"], "near": ["object"], "on_top": ["object", "support"], "inside": ["object", "container"]}[t]
    for k in need:
        if k not in pred:
            raise TaskError(f"{where}: predicate '{t}' needs key '{k}'")
    if t == "near" and ("target" in pred) == ("position" in pred):
        raise TaskError(f"{where}: predicate 'near' needs exactly one of 'target' (object id) or 'position' ([x, y, z])")
    for oid in referenced_objects(pred):
        if oid not in known_objects:
            raise UnknownNameError(f"object in {where}", oid, known_objects)


def world_box(T: np.ndarray, local_bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned world box of a local ``(2, 3)`` box moved by pose ``T``."""
    corners = np.array(list(itertools.product(*local_bounds.T)))
    w = corners @ T[:3, :3].T + T[:3, 3]
    return w.min(0), w.max(0)


def joint_terms(pred: dict) -> tuple[set, set]:
    """``({(object, joint)}, {(container, link)})`` a predicate reads from articulated objects."""
    t = pred.get("type")
    if t in ("all_of", "any_of"):
        js, ls = set(), set()
        for term in pred.get("terms", []):
            a, b = joint_terms(term)
            js |= a
            ls |= b
        return js, ls
    if t in ("joint_opened", "joint_closed"):
        return {(pred["object"], pred["joint"])}, set()
    if t == "inside" and "link" in pred:
        return set(), {(pred["container"], pred["link"])}
    return set(), set()


def evaluate(pred: dict, poses: dict, bounds: dict, init_poses: dict, joints: dict | None = None,
             links: dict | None = None) -> bool:
    """Whether predicate ``pred`` holds.

    ``poses``/``init_poses``: {oid: (4, 4) world pose now / at episode start};
    ``bounds``: {oid: (2, 3) local box (min, max) in the object frame};
    ``joints``: {(oid, joint): (position, lower, upper)}; ``links``: {(oid, link): ((4, 4) world pose, (2, 3) box in
    the link frame)} for the terms :func:`joint_terms` names.
    """
    t = pred["type"]
    if t == "all_of":
        return all(evaluate(p, poses, bounds, init_poses, joints, links) for p in pred["terms"])
    if t == "any_of":
        return any(evaluate(p, poses, bounds, init_poses, joints, links) for p in pred["terms"])
    if t in ("joint_opened", "joint_closed"):
        q, lo, hi = joints[(pred["object"], pred["joint"])]
        level = lo + float(pred.get("fraction", JOINT_FRACTION[t])) * (hi - lo)
        return bool(q >= level) if t == "joint_opened" else bool(q <= level)
    oid = pred["object"]
    T = poses[oid]
    if t == "lifted":
        return bool(T[2, 3] - init_poses[oid][2, 3] >= float(pred.get("height", 0.05)))
    if t == "near":
        goal = poses[pred["target"]][:3, 3] if "target" in pred else np.asarray(pred["position"], float)
        d = T[:3, 3] - goal
        if pred.get("xy_only", False):
            d = d[:2]
        return bool(np.linalg.norm(d) <= float(pred.get("distance", 0.05)))
    lo, hi = world_box(T, bounds[oid])
    centre = (lo + hi) / 2
    if t == "on_top":
        slo, shi = world_box(poses[pred["support"]], bounds[pred["support"]])
        m = float(pred.get("margin", 0.0))
        inside_xy = np.all(centre[:2] >= slo[:2] + m) and np.all(centre[:2] <= shi[:2] - m)
        return bool(inside_xy and abs(lo[2] - shi[2]) <= float(pred.get("z_tol", 0.02)))
    if t == "inside":
        if "link" in pred:
            T_link, box = links[(pred["container"], pred["link"])]
            clo, chi = world_box(T_link, box)
        else:
            clo, chi = world_box(poses[pred["container"]], bounds[pred["container"]])
        m = float(pred.get("margin", 0.0))
        return bool(np.all(centre >= clo + m) and np.all(centre <= chi - m))
    raise TaskError(f"unknown predicate '{t}'")  # pragma: no cover (validated before)


def validate_init(init: dict, movable, n_joints: int, where: str = "init") -> None:
    for k in init:
        if k not in INIT_KEYS:
            raise TaskError(f"{where}: unknown key '{k}'; known: {', '.join(sorted(INIT_KEYS))}")
    if init.get("mode", "random") not in ("random", "grid"):
        raise TaskError(f"{where}.mode must be 'random' or 'grid', got {init.get('mode')!r}")
    for oid, spec in init.get("objects", {}).items():
        if oid not in movable:
            raise UnknownNameError(f"movable object in {where}.objects", oid, movable)
        xy = np.asarray(spec.get("xy", [[0, 0], [0, 0]]), float)
        if set(spec) - {"xy", "yaw"}:
            raise TaskError(f"{where}.objects.{oid}: unknown keys {sorted(set(spec) - {'xy', 'yaw'})}; use 'xy' and 'yaw'")
        if xy.shape != (2, 2) or np.any(xy[1] < xy[0]):
            raise TaskError(f"{where}.objects.{oid}.xy must be [[x0, y0], [x1, y1]] with x0 <= x1, y0 <= y1")
        if "yaw" in spec and (len(spec["yaw"]) != 2 or spec["yaw"][1] < spec["yaw"][0]):
            raise TaskError(f"{where}.objects.{oid}.yaw must be [min, max] radians")
    if "robot_qpos" in init and len(init["robot_qpos"]) != n_joints:
        raise TaskError(f"{where}.robot_qpos needs {n_joints} values (arm + gripper), got {len(init['robot_qpos'])}")


def _rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def sample_init(init: dict, base_poses: dict, rng: np.random.Generator, seed: int | None) -> dict:
    """{oid: (4, 4) world pose} for the objects named in ``init.objects`` (others keep the bundle pose)."""
    objs = init.get("objects", {})
    out = {}
    if init.get("mode", "random") == "grid":
        nx, ny = (list(init.get("grid", [3, 3])) + [1])[:2]
        nyaw = int(init.get("grid_yaw", 1))
        cells = list(itertools.product(range(int(nx)), range(int(ny)), range(nyaw)))
        i, j, k = cells[(seed or 0) % len(cells)]
        for oid, spec in objs.items():
            (x0, y0), (x1, y1) = _xy_box(spec, base_poses[oid])
            fx = i / (nx - 1) if nx > 1 else 0.5
            fy = j / (ny - 1) if ny > 1 else 0.5
            a0, a1 = spec.get("yaw", [0.0, 0.0])
            yaw = a0 + (a1 - a0) * (k / (nyaw - 1) if nyaw > 1 else 0.0)
            out[oid] = place_xy_yaw(base_poses[oid], x0 + fx * (x1 - x0), y0 + fy * (y1 - y0), yaw)
        return out
    sep = float(init.get("min_separation", 0.0))
    for _attempt in range(100):
        out = {}
        for oid, spec in objs.items():
            (x0, y0), (x1, y1) = _xy_box(spec, base_poses[oid])
            a0, a1 = spec.get("yaw", [0.0, 0.0])
            out[oid] = place_xy_yaw(base_poses[oid], rng.uniform(x0, x1), rng.uniform(y0, y1), rng.uniform(a0, a1))
        pts = np.array([T[:2, 3] for T in out.values()])
        if sep <= 0 or len(pts) < 2 or min(np.linalg.norm(a - b) for a, b in itertools.combinations(pts, 2)) >= sep:
            return out
    log.warning("init: no placement with min_separation %.3f m in 100 draws; using the last one", sep)
    return out


def _xy_box(spec: dict, T0: np.ndarray) -> np.ndarray:
    """The object's xy box; without one the bundle position (only the yaw is drawn)."""
    if "xy" in spec:
        return np.asarray(spec["xy"], float)
    return np.array([T0[:2, 3], T0[:2, 3]])


def place_xy_yaw(T0: np.ndarray, x: float, y: float, yaw: float) -> np.ndarray:
    """``T0`` moved to (x, y) and turned by ``yaw`` about world Z (its height and tilt kept)."""
    T = T0.copy()
    T[:3, :3] = _rot_z(yaw) @ T0[:3, :3]
    T[0, 3], T[1, 3] = x, y
    return T
