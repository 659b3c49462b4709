"""Adding an articulated object (a URDF with prismatic / revolute joints) to a bundle, and moving its joints.

``objects/<id>/urdf/`` holds the packaged URDF (meshes converted to OBJ beside it); ``objects/<id>/visual.obj`` is
every link posed at the stored joint positions, so alignment, masks, the table stage, task boxes and the review page
see the object as one mesh with its joints where the manifest says (docs/bundle.md, articulated objects).
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.articulation import ArticulatedModel, ArticulationError, package_urdf
from real2sim.core.bundle import Bundle, replace_dir_atomically
from real2sim.core.errors import BundleError, UnknownNameError
from real2sim.core.manifest import FieldReader, ObjectSpec
from real2sim.core.objio import write_obj
from real2sim.core.stages import mark_changed

log = logging.getLogger(__name__)


def parse_joint_values(text: str, flag: str = "--joints") -> dict[str, float]:
    """``name=value,name=value`` -> {name: value}; bad input names the flag and the item."""
    out = {}
    for item in [t for t in (text or "").split(",") if t.strip()]:
        name, eq, val = item.partition("=")
        try:
            v = float(val)
        except ValueError:
            v = float("nan")
        if not eq or not name.strip() or not np.isfinite(v):
            raise BundleError(f"{flag} {text!r}: '{item}' is not NAME=NUMBER; write e.g. {flag} "
                              "top_drawer_joint=0.2,bottom_drawer_joint=0")
        out[name.strip()] = v
    return out


def _write_visual(bundle: Bundle, oid: str, model: ArticulatedModel, q: dict) -> list[float]:
    mesh, rgba = model.merged_visual(q)
    path = bundle.object_dir(oid) / "visual.obj"
    tmp = path.with_name(".visual.obj.tmp")
    write_obj(tmp, mesh.vertices, mesh.faces)
    tmp.replace(path)
    return rgba


def add_articulated_object(bundle: Bundle, oid: str, urdf: Path, joints: dict | None = None, position=None,
                           quaternion_wxyz=(1.0, 0.0, 0.0, 0.0), damping: dict | float | None = None,
                           joint_friction: dict | float | None = None, collide_visuals=(), **props) -> ObjectSpec:
    """Add the URDF ``urdf`` as articulated object ``oid`` (fixed to the world unless ``fixed=False``).

    ``joints``: start positions {movable joint: m or rad} (others 0, clipped into their limits); ``damping`` /
    ``joint_friction``: one number for every movable joint or {joint: value}, overriding the URDF's ``<dynamics>``.
    ``collide_visuals``: glob patterns of visual names (e.g. ``["handle*"]``) given collision shapes of their own in
    the bundle's copy of the URDF (:func:`real2sim.core.articulation.add_visual_collisions`; for handles that a
    URDF draws but does not collide, which a hand then cannot grasp).
    Without ``position`` the object stands at x = y = 0 on the table (its lowest point at ``table_height``).
    ``props``: fixed, density, friction (contact), restitution. Nothing is written for a URDF that cannot be used.
    """
    if oid in bundle.manifest.objects:
        raise BundleError(f"object '{oid}' is already in {bundle.root / 'scene.json'}; choose another id or remove it first")
    FieldReader("add-object").ident(oid, "id")
    urdf = Path(urdf)
    model = ArticulatedModel.load(urdf)  # every problem named before anything is copied
    joints = dict(joints or {})
    model.check_joint_values(joints, "--joints")
    movable = model.movable_joints
    if not movable:
        raise ArticulationError(f"{urdf}: no prismatic, revolute or continuous joint; a rigid object. Fix: add it "
                                "with --mesh, or give a URDF with joints")

    def per_joint(v, flag):
        if v is None:
            return {}
        if isinstance(v, dict):
            for k in v:
                if k not in {j.name for j in movable}:
                    raise UnknownNameError(f"movable joint in {flag} (object URDF {urdf.name})", k,
                                           [j.name for j in movable])
            vals = v
        else:
            vals = {j.name: float(v) for j in movable}
        for k, x in vals.items():
            if not np.isfinite(x) or x < 0:
                raise BundleError(f"{flag}: {k}={x} must be a number >= 0")
        return vals

    d_over, f_over = per_joint(damping, "--joint-damping"), per_joint(joint_friction, "--joint-friction")
    q = {j.name: float(np.clip(joints.get(j.name, 0.0), j.lower, j.upper) if j.limited else joints.get(j.name, 0.0))
         for j in movable}
    obj_dir = bundle.object_dir(oid)
    obj_dir.mkdir(parents=True, exist_ok=True)
    try:
        with replace_dir_atomically(obj_dir / "urdf") as tmp:
            packaged = package_urdf(urdf, tmp, collide_visuals)
            name = packaged.name
        packaged = obj_dir / "urdf" / name
        model = ArticulatedModel.load(packaged)
        rgba = _write_visual(bundle, oid, model, q)
        if position is None:
            from real2sim.core.geometry import quat_wxyz_to_matrix

            mesh, _ = model.merged_visual(q)
            lowest = (np.asarray(mesh.vertices) @ quat_wxyz_to_matrix(quaternion_wxyz).T)[:, 2].min()
            position = [0.0, 0.0, bundle.manifest.table_height - float(lowest)]
        dyn = {j.name: {"damping": float(d_over.get(j.name, j.damping)), "friction": float(f_over.get(j.name, j.friction))}
               for j in movable}
        spec = ObjectSpec.parse(FieldReader("add-object"), {
            "pose": {"position": [float(x) for x in position], "quaternion_wxyz": [float(x) for x in quaternion_wxyz]},
            "visual": {"mesh": bundle.rel(obj_dir / "visual.obj"), "rgba": rgba},
            "collision": {"kind": "urdf"},
            "fixed": bool(props.pop("fixed", True)),
            **{k: v for k, v in props.items() if v is not None},
            "articulation": {"urdf": bundle.rel(packaged), "joint_positions": q, "joint_dynamics": dyn},
            "source": urdf.name,
        }, f"objects.{oid}")
    except BaseException:
        if oid not in bundle.manifest.objects:
            shutil.rmtree(obj_dir, ignore_errors=True)
        raise
    bundle.manifest.objects[oid] = spec
    mark_changed(bundle, "object_meshes", "object_poses")
    bundle.save()
    log.info("added articulated object '%s' from %s: %d links, joints %s", oid, urdf, len(model.links), q)
    return spec


@dataclass(frozen=True)
class JointRange:
    """One movable joint as a control shows it: its name, type, limits (m or rad; ``limited`` False for a continuous
    joint) and the unit a person reads (m for a prismatic joint, deg for a revolute or continuous one)."""

    name: str
    type: str
    lower: float
    upper: float
    limited: bool = True

    @property
    def unit(self) -> str:
        return "m" if self.type == "prismatic" else "deg"

    def shown(self, value: float) -> float:
        """``value`` (m or rad) in the unit shown (m or deg)."""
        return float(value) if self.unit == "m" else float(np.degrees(value))

    def stored(self, value: float) -> float:
        """A shown value (m or deg) in the library's unit (m or rad)."""
        return float(value) if self.unit == "m" else float(np.radians(value))

    def describe(self, value: float) -> str:
        """``value`` (m or rad) with its unit (``0.2 m``; ``1.6 rad (91.7 deg)``)."""
        if self.unit == "m":
            return f"{value:.6g} m"
        return f"{value:.6g} rad ({np.degrees(value):.4g} deg)"

    def limits_text(self) -> str:
        if self.unit == "m":
            return f"[{self.lower:.6g}, {self.upper:.6g}] m"
        return (f"[{self.lower:.6g}, {self.upper:.6g}] rad ([{np.degrees(self.lower):.4g}, "
                f"{np.degrees(self.upper):.4g}] deg)")

    def check(self, value, where: str) -> float:
        """``value`` as a finite float within the limits, or an error naming the joint, the value and the limits."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = float("nan")
        if not np.isfinite(v):
            raise BundleError(f"{where}: joint '{self.name}' must be a finite number ({self.unit}), got {value!r}")
        if self.limited and not (self.lower - 1e-9 <= v <= self.upper + 1e-9):
            raise ArticulationError(f"{where}: joint '{self.name}' = {self.describe(v)} is outside its limits "
                                    f"{self.limits_text()}. Fix: give a value within them")
        return v


def object_joint_ranges(bundle: Bundle, oid: str) -> list[JointRange]:
    """The movable joints of articulated object ``oid`` (URDF order) with their limits."""
    obj = bundle.object(oid)
    if obj.articulation is None:
        raise BundleError(f"object '{oid}' is rigid (no joints); only objects added with --urdf have joint positions")
    model = ArticulatedModel.load(bundle.path(obj.articulation.urdf), check_meshes=False)
    return [JointRange(j.name, j.type, float(j.lower), float(j.upper), j.limited) for j in model.movable_joints]


def apply_object_joints(bundle: Bundle, oid: str, values: dict) -> dict[str, float]:
    """Set joint positions of articulated object ``oid`` in the manifest and rewrite its posed visual mesh, without
    saving (unknown names and values outside the limits are errors naming the joint, the value and the limits, raised
    before anything is written). Returns every joint's position."""
    obj = bundle.object(oid)
    if obj.articulation is None:
        raise BundleError(f"object '{oid}' is rigid (no joints); only objects added with --urdf have joint positions")
    model = ArticulatedModel.load(bundle.path(obj.articulation.urdf))
    ranges = {j.name: JointRange(j.name, j.type, float(j.lower), float(j.upper), j.limited) for j in model.movable_joints}
    for name, v in values.items():
        if name not in ranges:
            raise UnknownNameError(f"movable joint of '{oid}' (object URDF {model.path.name})", name, ranges)
        ranges[name].check(v, f"joints of '{oid}'")
    model.check_joint_values(values, f"joints of '{oid}'")
    obj.articulation.joint_positions.update({k: float(v) for k, v in values.items()})
    _write_visual(bundle, oid, model, obj.articulation.joint_positions)
    return dict(obj.articulation.joint_positions)


def repose_object(bundle: Bundle, oid: str) -> None:
    """Rewrite articulated object ``oid``'s posed visual mesh at the manifest's joint positions (after an undo
    restored them)."""
    obj = bundle.object(oid)
    if obj.articulation is not None:
        model = ArticulatedModel.load(bundle.path(obj.articulation.urdf))
        _write_visual(bundle, oid, model, obj.articulation.joint_positions)


def set_object_joints(bundle: Bundle, oid: str, values: dict) -> dict[str, float]:
    """Set joint positions of articulated object ``oid`` (unknown names and values outside the limits are errors
    naming them); rewrites its posed visual mesh and saves. Returns every joint's position."""
    q = apply_object_joints(bundle, oid, values)
    mark_changed(bundle, "object_meshes")
    bundle.save()
    return q


# -- the robot's start joints -------------------------------------------------------------------------
def robot_joint_ranges(bundle: Bundle) -> list[JointRange]:
    """The robot's actuated joints (arm, then gripper: the order of ``robot.joint_positions``) with their limits from
    its resolved URDF."""
    from real2sim.robots.scene import parse_urdf, robot_setup

    spec = bundle.manifest.robot
    if spec is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --frames ... "
                          "--robot NAME'")
    rs = robot_setup(spec, bundle.root)
    joints = {j.name: j for j in parse_urdf(rs.urdf)[1]}
    out = []
    for name in rs.robot.joint_names:
        j = joints.get(name)
        if j is None:
            raise BundleError(f"robot '{rs.robot.name}': actuated joint '{name}' is not in its URDF {rs.urdf}")
        limited = j.type in ("revolute", "prismatic") and j.upper > j.lower
        out.append(JointRange(name, j.type, float(j.lower), float(j.upper), limited))
    return out


def robot_start_joints(bundle: Bundle) -> list[float]:
    """The robot's start joints: ``robot.joint_positions``, else the robot's default pose."""
    from real2sim.robots.scene import robot_setup

    return [float(x) for x in robot_setup(bundle.manifest.robot, bundle.root).qpos]


def apply_robot_joints(bundle: Bundle, values: dict) -> list[float]:
    """Set the named joints of the robot's start pose (``robot.joint_positions``; the others keep theirs, or the
    robot's default) without saving; unknown names and values outside the limits are errors naming the joint, the
    value and the limits. Returns the whole joint vector."""
    ranges = robot_joint_ranges(bundle)
    by_name = {j.name: i for i, j in enumerate(ranges)}
    q = robot_start_joints(bundle)
    for name, v in values.items():
        if name not in by_name:
            raise UnknownNameError(f"actuated joint of robot '{bundle.manifest.robot.name}'", name, by_name)
        q[by_name[name]] = ranges[by_name[name]].check(v, "robot joints")
    bundle.manifest.robot.joint_positions = [float(x) for x in q]
    return q


def set_robot_joints(bundle: Bundle, values: dict) -> list[float]:
    """Set the robot's start joints (see :func:`apply_robot_joints`) and save."""
    q = apply_robot_joints(bundle, values)
    mark_changed(bundle, "robot_joints")
    bundle.save()
    return q
