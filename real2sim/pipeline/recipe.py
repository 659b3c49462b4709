"""Build a bundle from a scene recipe (``scenes/<name>/recipe.json``): meshes in, no camera frames needed.

Recipe format::

    {"name": str, "table_height": float, "physics": {...},
     "cameras": {name: {"width", "height", "fx", "fy", "cx", "cy", "eye": [3], "target": [3]}},
     "lights": [...],
     "objects": {id: {"mesh": path, "texture": path?, "rgba": [4]?, "pose": {...}, "fixed": bool?,
                      "density": float?, "mass": float?, "friction": float?}
                 | {"urdf": path, "joints": {name: q}?, "joint_damping": ..?, "joint_friction": ..?, "pose"?, ...}},
     "robot": {"name": registry name, "base_pose": {...}?, "joint_positions": [...]?,
               "stiffness": [...]?, "damping": [...]?, "appearance": {link: rgba}?}?}

Paths are relative to the recipe file. A missing texture logs a warning and records
the flat colour in the manifest.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.camera import Camera
from real2sim.core.errors import BundleError, ManifestError
from real2sim.core.geometry import look_at_opencv
from real2sim.core.imaging import read_rgb
from real2sim.core.manifest import (
    CameraSpec,
    FieldReader,
    LightSpec,
    Manifest,
    ObjectSpec,
    PhysicsSpec,
    Pose,
    RobotSpec,
    TaskSpec,
)
from real2sim.core.meshes import canonical_visual, embedded_appearance, load_mesh
from real2sim.core.objio import strip_obj_materials
from real2sim.core.stages import mark_changed
from real2sim.robots import get_robot
from real2sim.robots.robotfile import install_in_bundle
from real2sim.scenes import scene_recipe

log = logging.getLogger(__name__)
OBJECT_KEYS = {"mesh", "texture", "rgba", "pose", "fixed", "density", "mass", "friction", "restitution"}


def builtin_recipe(name: str = "tabletop") -> Path:
    """``recipe.json`` of a registered scene (bundled or from an installed pack)."""
    return scene_recipe(name)


def camera_from_recipe(r: FieldReader, d: dict, where: str) -> Camera:
    r.obj(d, where, {"width", "height", "fx", "fy", "cx", "cy", "eye", "target", "up"},
          {"width", "height", "fx", "fy", "cx", "cy", "eye", "target"})
    K = np.array([[r.number(d["fx"], f"{where}.fx", 0, strict_lo=True), 0, r.number(d["cx"], f"{where}.cx")],
                  [0, r.number(d["fy"], f"{where}.fy", 0, strict_lo=True), r.number(d["cy"], f"{where}.cy")], [0, 0, 1]])
    T = look_at_opencv(r.vector(d["eye"], f"{where}.eye", 3), r.vector(d["target"], f"{where}.target", 3),
                       r.vector(d.get("up", [0, 0, 1]), f"{where}.up", 3))
    return Camera(r.integer(d["width"], f"{where}.width", 1), r.integer(d["height"], f"{where}.height", 1), K, T)


def bundle_from_recipe(recipe_path: Path, out_dir: Path, overwrite: bool = False) -> Bundle:
    """Create a bundle in ``out_dir`` from a recipe file; copies meshes and textures in."""
    recipe_path = Path(recipe_path)
    base = recipe_path.parent
    try:
        data = json.loads(recipe_path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(str(recipe_path), f"<line {exc.lineno}>", f"is not valid JSON ({exc.msg})") from exc
    r = FieldReader(str(recipe_path))
    r.obj(data, "", {"name", "description", "table_height", "physics", "cameras", "lights", "objects", "robot", "tasks"},
          {"name", "objects"})
    robot, robot_def = _import_robot(r, data["robot"], base) if data.get("robot") is not None else (None, None)
    tasks = r.obj(data.get("tasks", {}), "tasks", set(data.get("tasks", {})))
    tasks = {k: TaskSpec.parse(r, v, f"tasks.{k}") for k, v in tasks.items()}
    new_dir = not Path(out_dir).exists()
    bundle = Bundle.create(out_dir, name=r.string(data["name"], "name"), overwrite=overwrite)
    try:
        m = bundle.manifest
        m.provenance["recipe"] = recipe_path.name
        m.table_height = r.number(data.get("table_height", 0.0), "table_height")
        m.physics = PhysicsSpec.parse(r, data.get("physics", {}), "physics")
        m.cameras = {k: CameraSpec.from_camera(camera_from_recipe(r, v, f"cameras.{k}"))
                     for k, v in data.get("cameras", {}).items()}
        if "lights" in data:
            m.lights = [LightSpec.parse(r, v, f"lights[{i}]") for i, v in enumerate(data["lights"])]
        for oid, od in data["objects"].items():
            if isinstance(od, dict) and "urdf" in od:  # an articulated object (docs/bundle.md#articulated-objects)
                _import_articulated(bundle, r, base, oid, od)
                continue
            m.objects[oid] = _import_object(bundle, r, base, oid, od)
        if robot is not None:  # a robot from a definition file is copied into the bundle (robot/)
            robot.definition = install_in_bundle(robot_def, bundle.root)
        m.robot = robot
        m.tasks = tasks
        Manifest.from_dict(m.to_dict(), str(recipe_path))  # tasks naming joints the articulated objects lack
        bundle.save()
    except BaseException:
        # a refused recipe leaves no half-made bundle behind (it would block the corrected recipe: "already exists")
        if new_dir:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return bundle


def _import_object(bundle: Bundle, r: FieldReader, base: Path, oid: str, od: dict) -> ObjectSpec:
    where = f"objects.{oid}"
    r.obj(od, where, OBJECT_KEYS, {"mesh", "pose"})
    src = base / r.string(od["mesh"], f"{where}.mesh")
    loaded = load_mesh(src)  # refuse unreadable meshes now, naming the file
    dst_dir = bundle.object_dir(oid)
    dst_dir.mkdir(parents=True, exist_ok=True)
    mesh_dst = dst_dir / "visual.obj"
    given_texture = bool(od.get("texture"))
    embedded = None if given_texture else embedded_appearance(loaded)
    texture, rgba = None, None
    if src.suffix.lower() == ".obj" and (embedded is None or embedded[0] is None):
        # its material library stays behind (a texture given separately is copied and named below)
        atomic_write_bytes(mesh_dst, strip_obj_materials(src.read_bytes()))
    else:
        # any other format, or an OBJ whose material embeds a texture: the canonical OBJ (+ PNG) every engine reads
        made = canonical_visual(src, mesh_dst, None if given_texture else dst_dir / "texture.png")
        if made["texture"]:
            texture = bundle.rel(dst_dir / "texture.png")
        rgba = made["rgba"]
        log.info("%s: %s -> %s (%d faces, UVs %s, texture %s)", where, src.name, bundle.rel(mesh_dst), made["faces"],
                 "kept" if made["uv"] else "none", texture or "none")
    if od.get("texture"):
        tex = base / r.string(od["texture"], f"{where}.texture")
        if tex.is_file():
            read_rgb(tex)  # refuse an unreadable image now, naming the file (every exporter would fail on it later)
            texture = bundle.rel(dst_dir / f"texture{tex.suffix.lower()}")
            shutil.copyfile(tex, bundle.path(texture))
        else:
            log.warning("%s: texture %s not found; object '%s' gets its flat colour rgba (recorded in scene.json)", where, tex, oid)
    spec = ObjectSpec.parse(r, {
        "pose": od["pose"],
        "visual": {"mesh": bundle.rel(mesh_dst), "texture": texture,
                   "rgba": od.get("rgba", list(rgba) if rgba and not texture else [0.7, 0.7, 0.7, 1.0])},
        **{k: od[k] for k in ("fixed", "density", "mass", "friction", "restitution") if k in od},
        "source": str(src.name),
    }, where)
    return spec


ARTICULATED_KEYS = {"urdf", "joints", "joint_damping", "joint_friction", "collide_visuals", "pose", "fixed", "density",
                    "friction", "restitution"}


def _import_articulated(bundle: Bundle, r: FieldReader, base: Path, oid: str, od: dict) -> None:
    """A recipe object ``{"urdf": path, "joints": {name: q}?, "joint_damping": number | {name: d}?,
    "joint_friction": number | {name: f}?, "collide_visuals": [glob of visual names]?, "pose"?, "fixed"? (default
    true), "density"?, "friction"?, "restitution"?}``; ``collide_visuals`` gives those visuals collision shapes of
    their own (e.g. ``["handle*"]``: drawer handles a URDF draws but does not collide)."""
    from real2sim.pipeline.articulated import add_articulated_object

    where = f"objects.{oid}"
    r.obj(od, where, ARTICULATED_KEYS, {"urdf"})
    urdf = base / r.string(od["urdf"], f"{where}.urdf", max_len=4096)
    joints = r.mapping(od.get("joints", {}), f"{where}.joints", keys="name")
    joints = {k: r.number(v, f"{where}.joints.{k}", limit=1e3) for k, v in joints.items()}

    def per_joint(key):
        v = od.get(key)
        if v is None or not isinstance(v, dict):
            return None if v is None else r.number(v, f"{where}.{key}", 0.0)
        return {k: r.number(x, f"{where}.{key}.{k}", 0.0) for k, x in r.mapping(v, f"{where}.{key}", keys="name").items()}

    pose = Pose.parse(r, od["pose"], f"{where}.pose") if "pose" in od else None
    props = {k: od[k] for k in ("density", "friction", "restitution") if k in od}
    collide = [r.text(p, f"{where}.collide_visuals[{i}]", 200)
               for i, p in enumerate(r.array(od.get("collide_visuals", []), f"{where}.collide_visuals", "patterns"))]
    add_articulated_object(bundle, oid, urdf, joints, pose.position if pose else None,
                           pose.quaternion_wxyz if pose else (1.0, 0.0, 0.0, 0.0), damping=per_joint("joint_damping"),
                           joint_friction=per_joint("joint_friction"), collide_visuals=collide,
                           fixed=r.boolean(od.get("fixed", True), f"{where}.fixed"), **props)


def _import_robot(r: FieldReader, d: dict, base: Path):
    """The recipe's robot entry: a registry name (aliases allowed, unknown names suggest close ones), or
    ``definition``: a robot definition file relative to the recipe (docs/robots.md), read and checked here.
    Returns (RobotSpec, RobotDef)."""

    d = dict(d) if isinstance(d, dict) else d
    robot = None
    if isinstance(d, dict) and d.get("definition"):
        r.text(d["definition"], "robot.definition", 4096)
        robot = get_robot(base / d["definition"])
        d.setdefault("name", robot.name)
        d["definition"] = ""  # set to the bundle's copy once the bundle exists
    spec = RobotSpec.parse(r, d, "robot")
    robot = robot or get_robot(spec.name)
    if spec.name not in (robot.name, *robot.aliases):
        r.fail("robot.name", f"is '{spec.name}' but the definition file names the robot '{robot.name}'",
               "drop 'name' or make the two agree")
    spec.name = robot.name
    if not spec.joint_positions:
        spec.joint_positions = [float(x) for x in robot.default_qpos]
    elif len(spec.joint_positions) != robot.dof:
        r.fail("robot.joint_positions", f"has {len(spec.joint_positions)} values, robot '{robot.name}' has {robot.dof} "
               f"joints ({', '.join(robot.joint_names)})")
    spec.source = spec.source or "recipe"
    return spec, robot


def add_object(bundle: Bundle, oid: str, mesh: Path, texture: Path | None = None, position=None,
               quaternion_wxyz=(1.0, 0.0, 0.0, 0.0), **props) -> ObjectSpec:
    """Add one object to an existing bundle (mesh and texture copied in).

    Without ``position`` the object is placed at x = y = 0 (the world origin, not the table's centre), resting on the table
    (its mesh's lowest point at ``table_height``); alignment then moves it to its masks.
    ``props``: fixed, density, mass, friction, restitution, rgba.
    """

    if oid in bundle.manifest.objects:
        raise BundleError(f"object '{oid}' is already in {bundle.root / 'scene.json'}; choose another id or remove it first")
    if not oid.replace("_", "").replace("-", "").isalnum():
        raise BundleError(f"object id '{oid}' must be letters, digits, '_' or '-' (it becomes a folder name)")
    mesh = Path(mesh).resolve()
    if position is None:  # resting on the table: the lowest point of the turned mesh at the table's height
        from real2sim.core.geometry import quat_wxyz_to_matrix

        lowest = (np.asarray(load_mesh(mesh).vertices, float) @ quat_wxyz_to_matrix(quaternion_wxyz).T)[:, 2].min()
        position = [0.0, 0.0, bundle.manifest.table_height - float(lowest)]
    entry = {"mesh": str(mesh), "pose": {"position": [float(x) for x in position],
                                          "quaternion_wxyz": [float(x) for x in quaternion_wxyz]}, **props}
    if texture is not None:
        entry["texture"] = str(Path(texture).resolve())
    r = FieldReader("add-object")
    bundle.manifest.objects[oid] = _import_object(bundle, r, Path("/"), oid, entry)
    mark_changed(bundle, "object_meshes", "object_poses")
    bundle.save()
    return bundle.manifest.objects[oid]
