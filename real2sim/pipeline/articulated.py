"""Adding an articulated object (a URDF with prismatic / revolute joints) to a bundle, and moving its joints.

``objects/<id>/urdf/`` holds the packaged URDF (meshes converted to OBJ beside it); ``objects/<id>/visual.obj`` is
every link posed at the stored joint positions, so alignment, masks, the table stage, task boxes and the review page
see the object as one mesh with its joints where the manifest says (docs/bundle.md, articulated objects).
"""
from __future__ import annotations

import logging
import shutil
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


def set_object_joints(bundle: Bundle, oid: str, values: dict) -> dict[str, float]:
    """Set joint positions of articulated object ``oid`` (unknown names and values outside the limits are errors
    naming them); rewrites its posed visual mesh. Returns every joint's position."""
    obj = bundle.object(oid)
    if obj.articulation is None:
        raise BundleError(f"object '{oid}' is rigid (no joints); only objects added with --urdf have joint positions")
    model = ArticulatedModel.load(bundle.path(obj.articulation.urdf))
    model.check_joint_values(values, f"joints of '{oid}'")
    obj.articulation.joint_positions.update({k: float(v) for k, v in values.items()})
    _write_visual(bundle, oid, model, obj.articulation.joint_positions)
    mark_changed(bundle, "object_meshes")
    bundle.save()
    return dict(obj.articulation.joint_positions)
