"""SAPIEN 3 exporter: one URDF per object plus ``scene.sapien.json``, and a loader for it.

Layout written into ``exports/sapien/``::

    scene.sapien.json          timestep, gravity, objects (URDF, pose, fixed, friction), cameras, lights
    objects/<id>.urdf          one link: visual mesh, collision elements, inertial
    meshes/<sha16>.obj|.mtl|.png   visual mesh, its material and texture (content-addressed)
    collision/<sha16>.obj      convex hull pieces (content-addressed)

Why a JSON next to the URDFs: a URDF cannot carry an object's world pose, whether it
is fixed, its friction or restitution, nor cameras and lights. ``load_sapien_scene``
reads the JSON and builds every object with SAPIEN's own URDF loader
(``scene.create_urdf_loader()``); friction/restitution go to every collision shape
through ``loader.set_material``.

Conventions at this boundary:

* Quaternions are **wxyz** (as ``sapien.Pose`` takes them).
* A camera ``pose`` is the pose of SAPIEN's camera frame (+X forward, +Y left, +Z up),
  i.e. ``Camera.pose_in("sapien")``.
* Camera ``fx, fy, cx, cy`` are in SAPIEN's pixel convention, the values to pass to
  ``set_focal_lengths`` / ``set_principal_point``. SAPIEN puts pixel *edges* at integer
  coordinates (top-left pixel centre at (0.5, 0.5)), OpenCV puts pixel *centres* there,
  so ``cx_sapien = cx_opencv + 0.5`` (same for ``cy``); measured by rendering small
  spheres: without the shift the image lands half a pixel off. The OpenCV ``K`` is kept
  under ``opencv`` for reference.

SAPIEN facts this module relies on (sapien 3.0.3):

* A URDF with a single link and no joints comes out of ``URDFLoader.parse`` as an
  *actor* builder (not an articulation), so it becomes a free rigid body; we set the
  body type ourselves ("static" for fixed objects, "dynamic" otherwise) and the
  initial pose before ``build()``.
* The loader turns ``<inertial>`` into ``set_mass_and_inertia`` (principal moments +
  rotated COM frame). A static body must get no ``<inertial>`` (the builder would set
  ``mass`` on a ``PhysxRigidStaticComponent``), so fixed objects are written without one.
* The actor builder *silently skips* a collision mesh it cannot cook or find
  (``except RuntimeError: continue``); the loader here checks every referenced file
  first and counts the shapes afterwards, so a missing hull is an error, not a body
  that falls through the table.
* ``sapien.Scene()`` creates a render system and raises "failed to find a rendering
  device" without a Vulkan device (Mesa < 24.3). Physics then runs in a scene with only
  a ``PhysxCpuSystem``; visual shapes must be dropped before building (creating render
  materials needs the device too). Cameras still work for projection: a
  ``RenderCameraComponent`` on an entity outside the scene gives the same matrices.
* Gravity is global PhysX scene config (``physx.set_scene_config``), read when the
  ``PhysxCpuSystem`` is created.
"""
from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from real2sim.core.bundle import Bundle, hash_bytes, replace_dir_atomically
from real2sim.core.errors import (
    ExportError,
    MeshError,
)
from real2sim.core.geometry import split_pose
from real2sim.core.manifest import ObjectSpec
from real2sim.core.meshes import load_mesh
from real2sim.core.objio import mesh_uv, obj_text
from real2sim.engines.base import Exporter, ExportResult
from real2sim.engines.common import srgb_to_linear
from real2sim.engines.sapien.scene import (
    AMBIENT_LIGHT,
    FORMAT,
    FORMAT_VERSION,
    PIXEL_CENTRE_SHIFT,
    SapienScene,
    load_sapien_scene,
)
from real2sim.render.lod import render_mesh_path
from real2sim.robots.materials import visual_material
from real2sim.robots.robotfile import EXPORT_ROBOT_DIR, PACKAGE_DEFINITION, package_robot_files
from real2sim.robots.scene import robot_cameras, robot_setup
from real2sim.robots.spec import is_file_robot

log = logging.getLogger(__name__)

SCENE_FILE = "scene.sapien.json"
MATERIAL_NAME = "material_0"
"""SAPIEN pixel coordinate minus OpenCV pixel coordinate of the same image point."""


# ---------------------------------------------------------------------------------------
# number formatting (deterministic bytes)
# ---------------------------------------------------------------------------------------
def _num(x: float) -> str:
    """A float as text: 12 significant digits, no negative zero."""
    s = f"{float(x) + 0.0:.12g}"
    return "0" if s == "-0" else s


def _vec(v) -> str:
    return " ".join(_num(x) for x in v)


def _r(x: float) -> float:
    """Round for JSON (stable across runs, no negative zero)."""
    return round(float(x), 12) + 0.0


def _rpy(R) -> list[float]:
    """URDF rpy (fixed-axis X, Y, Z; R = Rz(y) Ry(p) Rx(r)) of a rotation matrix."""
    from scipy.spatial.transform import Rotation

    R = np.asarray(R, float)
    if np.allclose(R, np.eye(3), atol=1e-12):
        return [0.0, 0.0, 0.0]
    return [float(a) for a in Rotation.from_matrix(R).as_euler("xyz")]


def _origin(T) -> str:
    T = np.asarray(T, float)
    return f'<origin xyz="{_vec(T[:3, 3])}" rpy="{_vec(_rpy(T[:3, :3]))}"/>'


# ---------------------------------------------------------------------------------------
# assets
# ---------------------------------------------------------------------------------------
def _read_required(path: Path, what: str, fix: str) -> bytes:
    if not path.is_file():
        raise ExportError(f"{path}: {what} not found. Fix: {fix}")
    return path.read_bytes()


def _visual_obj_text(bundle: Bundle, oid: str, obj: ObjectSpec) -> str:
    """The visual mesh as OBJ text without material statements (geometry and UVs kept as they are): the
    level-of-detail copy where the mesh has far more triangles than its size on the bundle's cameras shows (the env
    renders this export; ``render/lod.py``), else ``objects/<id>/visual.*``."""

    path = bundle.path(obj.visual.mesh)
    if path.is_file():
        path = render_mesh_path(bundle, oid)
    fix = f"re-run the stage that writes object '{oid}' visual mesh, or fix 'objects.{oid}.visual.mesh' in scene.json"
    if not path.is_file():
        raise ExportError(f"{path}: visual mesh of object '{oid}' not found. Fix: {fix}")
    try:
        mesh = load_mesh(path)  # validates: readable, has triangles, finite
    except MeshError as exc:
        raise ExportError(f"{exc}. Object '{oid}'; fix: {fix}") from exc
    if path.suffix.lower() == ".obj":
        lines = path.read_text(errors="replace").splitlines()
        lines = [ln.rstrip() for ln in lines if not re.match(r"\s*(mtllib|usemtl)\b", ln)]
        return "\n".join(lines) + "\n"
    return obj_text(mesh.vertices, mesh.faces, uv=mesh_uv(mesh))  # other formats converted through trimesh


def _with_material(text: str, mtl_name: str) -> str:
    """Insert ``mtllib`` at the top and ``usemtl`` before the first face."""
    out = [f"mtllib {mtl_name}"]
    used = False
    for ln in text.splitlines():
        if not used and ln.lstrip().startswith("f "):
            out.append(f"usemtl {MATERIAL_NAME}")
            used = True
        out.append(ln)
    return "\n".join(out) + "\n"


def _mtl_text(rgba, texture_name: str | None) -> str:
    kd = [1.0, 1.0, 1.0] if texture_name else srgb_to_linear(rgba[:3])
    lines = [f"newmtl {MATERIAL_NAME}", "Ka 0 0 0", f"Kd {_vec(kd)}", "Ks 0 0 0", "Ns 1",
             f"d {_num(rgba[3])}", "illum 1"]
    if texture_name:
        lines.append(f"map_Kd {texture_name}")
    return "\n".join(lines) + "\n"


class _Writer:
    """Collects output files (relative path -> bytes) in a deterministic order."""

    def __init__(self):
        self.files: dict[str, bytes] = {}

    def add(self, rel: str, data: bytes) -> str:
        if rel in self.files and self.files[rel] != data:  # pragma: no cover - would be a hash collision
            raise ExportError(f"internal error: two different files want the name {rel}")
        self.files[rel] = data
        return rel

    @staticmethod
    def write_all(files: dict[str, bytes], root: Path) -> None:
        for rel in sorted(files):
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(files[rel])


def _visual_assets(w: _Writer, bundle: Bundle, oid: str, obj: ObjectSpec) -> str:
    """Write the visual OBJ + MTL (+ texture); returns the OBJ's export-relative path."""
    geometry = _visual_obj_text(bundle, oid, obj)
    tex_bytes, tex_ext = b"", ""
    if obj.visual.texture:
        tpath = bundle.path(obj.visual.texture)
        tex_bytes = _read_required(tpath, f"texture of object '{oid}'",
                                   f"re-run the texture stage, or set 'objects.{oid}.visual.texture' to null")
        tex_ext = tpath.suffix.lower() or ".png"
    h = hash_bytes(geometry.encode(), tex_bytes, json.dumps([_r(c) for c in obj.visual.rgba]).encode())
    tex_name = f"{h}{tex_ext}" if obj.visual.texture else None
    if tex_name:
        w.add(f"meshes/{tex_name}", tex_bytes)
    w.add(f"meshes/{h}.mtl", _mtl_text(obj.visual.rgba, tex_name).encode())
    return w.add(f"meshes/{h}.obj", _with_material(geometry, f"{h}.mtl").encode())


def _collision_xml(w: _Writer, bundle: Bundle, oid: str, obj: ObjectSpec, warnings: list[str]) -> list[str]:
    """``<collision>`` elements (and written hull files) of one object."""

    col = obj.collision
    fix_hint = "re-run the collision stage ('real2sim build')"
    if col.kind == "pending":
        raise ExportError(f"object '{oid}' has no collision geometry yet (collision.kind is 'pending'). Fix: {fix_hint}")
    if col.kind == "none":
        if not obj.fixed:
            warnings.append(f"object '{oid}' is dynamic but has no collision geometry; it will fall through everything")
        return []
    out = []
    if col.kind == "hulls":
        for i, rel in enumerate(col.hulls):
            path = bundle.path(rel)
            data = _read_required(path, f"collision hull {i} of object '{oid}'", fix_hint)
            try:
                load_mesh(path)
            except MeshError as exc:
                raise ExportError(f"{exc}. Collision hull {i} of object '{oid}'; fix: {fix_hint}") from exc
            name = w.add(f"collision/{hash_bytes(data)}.obj", data)
            out.append(f'    <collision name="{oid}_hull_{i:03d}">\n      {_origin(np.eye(4))}\n'
                       f'      <geometry><mesh filename="../{name}"/></geometry>\n    </collision>')
        return out
    T = col.pose.matrix()
    if col.kind == "box":
        geom = f'<box size="{_vec(2.0 * np.asarray(col.size))}"/>'  # URDF: full extents
    elif col.kind == "cylinder":
        r, hh = col.size  # URDF cylinders run along local Z, like the bundle's
        geom = f'<cylinder radius="{_num(r)}" length="{_num(2.0 * hh)}"/>'
    elif col.kind == "sphere":
        geom = f'<sphere radius="{_num(col.size[0])}"/>'
    else:  # pragma: no cover - the manifest validates kinds
        raise ExportError(f"object '{oid}': collision kind '{col.kind}' is not supported by the SAPIEN exporter")
    out.append(f'    <collision name="{oid}_{col.kind}">\n      {_origin(T)}\n      <geometry>{geom}</geometry>\n    </collision>')
    return out


def _inertial_xml(oid: str, obj: ObjectSpec, warnings: list[str]) -> str:
    if obj.fixed:
        return ""  # static bodies take no mass (see module docstring)
    if obj.inertial is None:
        warnings.append(f"object '{oid}' has no inertial; SAPIEN computes mass from collision shapes at density "
                        f"{obj.density} (run the inertial stage for engine-independent numbers)")
        return ""
    I = np.asarray(obj.inertial.inertia, float)
    return (f'    <inertial>\n      <origin xyz="{_vec(obj.inertial.com)}" rpy="0 0 0"/>\n'
            f'      <mass value="{_num(obj.inertial.mass)}"/>\n'
            f'      <inertia ixx="{_num(I[0, 0])}" ixy="{_num(I[0, 1])}" ixz="{_num(I[0, 2])}" '
            f'iyy="{_num(I[1, 1])}" iyz="{_num(I[1, 2])}" izz="{_num(I[2, 2])}"/>\n    </inertial>\n')


def _urdf_text(oid: str, visual_rel: str, collisions: list[str], inertial: str) -> str:
    parts = ['<?xml version="1.0"?>',
             "<!-- written by real2sim (export/sapien.py); one link = one rigid object; its world pose,",
             "     fixed flag and friction live in ../scene.sapien.json -->",
             f'<robot name="{oid}">', f'  <link name="{oid}">']
    body = inertial
    body += (f'    <visual name="{oid}_visual">\n      {_origin(np.eye(4))}\n'
             f'      <geometry><mesh filename="../{visual_rel}"/></geometry>\n    </visual>\n')
    body += "".join(c + "\n" for c in collisions)
    parts.append(body.rstrip("\n"))
    parts += ["  </link>", "</robot>"]
    return "\n".join(parts) + "\n"


def _articulated_entry(w: _Writer, bundle: Bundle, oid: str, obj: ObjectSpec) -> dict:
    """An articulated object: ``objects/<id>.urdf`` with every link (visuals coloured from the URDF in linear RGB,
    collisions, explicit inertials from :meth:`ArticulatedModel.link_inertials`) and joint (limits); its scene entry
    carries the joint positions, damping, friction and each joint's effective mass (for the loader's Coulomb
    friction, see :mod:`real2sim.engines.sapien.scene`)."""
    from real2sim.engines.common import articulated_setup

    model, q, dyn, inertials = articulated_setup(bundle, oid)

    def geom(shape) -> str:
        g = shape.geometry
        if g.kind == "box":
            return f'<box size="{_vec(g.size)}"/>'
        if g.kind == "cylinder":
            return f'<cylinder radius="{_num(g.size[0])}" length="{_num(g.size[1])}"/>'
        if g.kind == "sphere":
            return f'<sphere radius="{_num(g.size[0])}"/>'
        data = _read_required(g.mesh, f"mesh of object '{oid}'", "add the object again ('real2sim add-object --urdf')")
        rel = w.add(f"meshes/{hash_bytes(data)}.obj", data)
        return f'<mesh filename="../{rel}" scale="{_vec(g.scale)}"/>'

    parts = ['<?xml version="1.0"?>', "<!-- written by real2sim (engines/sapien/writer.py): an articulated object; its "
             "world pose, joint positions and dynamics live in ../scene.sapien.json -->", f'<robot name="{oid}">']
    n_collisions = 0
    for lname, link in model.links.items():
        parts.append(f'  <link name="{lname}">')
        if lname != model.root or not obj.fixed:
            m, com, I = inertials[lname]
            parts.append(f'    <inertial>\n      <origin xyz="{_vec(com)}" rpy="0 0 0"/>\n      <mass value="{_num(m)}"/>\n'
                         f'      <inertia ixx="{_num(I[0, 0])}" ixy="{_num(I[0, 1])}" ixz="{_num(I[0, 2])}" '
                         f'iyy="{_num(I[1, 1])}" iyz="{_num(I[1, 2])}" izz="{_num(I[2, 2])}"/>\n    </inertial>')
        for i, sh in enumerate(link.visuals):
            rgba = [*srgb_to_linear(sh.rgba[:3]), sh.rgba[3]]
            parts.append(f'    <visual name="{lname}_visual_{i:03d}">{_origin(sh.origin)}<geometry>{geom(sh)}</geometry>'
                         f'<material name="{lname}_{i}"><color rgba="{_vec(rgba)}"/></material></visual>')
        for i, sh in enumerate(link.collisions):
            parts.append(f'    <collision name="{lname}_collision_{i:03d}">{_origin(sh.origin)}'
                         f'<geometry>{geom(sh)}</geometry></collision>')
            n_collisions += 1
        parts.append("  </link>")
    for j in model.joints:
        jt = j.type
        lim = f'<limit lower="{_num(j.lower)}" upper="{_num(j.upper)}" effort="0" velocity="0"/>' if j.limited else ""
        parts.append(f'  <joint name="{j.name}" type="{jt}"><parent link="{j.parent}"/><child link="{j.child}"/>'
                     f'{_origin(j.origin)}<axis xyz="{_vec(j.axis)}"/>{lim}</joint>')
    parts.append("</robot>")
    urdf_rel = w.add(f"objects/{oid}.urdf", ("\n".join(parts) + "\n").encode())
    eff = {}
    for j in model.movable_joints:  # the subtree's mass along a prismatic axis, its inertia about a revolute one
        poses = model.link_poses(q)
        Tj = poses[j.parent] @ j.origin
        a = Tj[:3, :3] @ j.axis
        total = 0.0
        for lname in model.subtree(j.child):
            m, com, I = inertials[lname]
            if j.type == "prismatic":
                total += m
            else:
                R = poses[lname][:3, :3]
                c = poses[lname][:3, :3] @ com + poses[lname][:3, 3] - Tj[:3, 3]
                r = c - a * (c @ a)
                total += float(a @ (R @ I @ R.T) @ a) + m * float(r @ r)
        eff[j.name] = _r(total)
    return {
        **_object_entry(obj, urdf_rel, n_collisions),
        "articulation": {"root_link": model.root, "joint_positions": {k: _r(v) for k, v in q.items()},
                         "damping": {k: _r(v[0]) for k, v in dyn.items()},
                         "friction": {k: _r(v[1]) for k, v in dyn.items()}, "effective_mass": eff},
    }


def _pose_json(position, quat_wxyz) -> dict:
    return {"position": [_r(x) for x in position], "quaternion_wxyz": [_r(x) for x in quat_wxyz]}


def _camera_json(name: str, spec, warnings: list[str]) -> dict:
    return _camera_dict(name, spec.camera(), warnings)


def _camera_dict(name: str, cam, warnings: list[str]) -> dict:
    """A camera's SAPIEN entry; its pose is ``cam.T_world_camera`` (in the world, or in a link for a mount)."""
    if np.any(np.asarray(cam.distortion) != 0):
        warnings.append(f"camera '{name}': lens distortion {list(cam.distortion)} is dropped (SAPIEN cameras are pinhole); "
                        "undistort the real frames for comparison")
    p, q = split_pose(cam.pose_in("sapien"))
    return {
        "width": int(cam.width), "height": int(cam.height),
        "fx": _r(cam.fx), "fy": _r(cam.fy),
        "cx": _r(cam.cx + PIXEL_CENTRE_SHIFT), "cy": _r(cam.cy + PIXEL_CENTRE_SHIFT),
        "skew": _r(cam.K[0, 1]),
        "near": _r(cam.near), "far": _r(cam.far),
        "pose": _pose_json(p, q),
        "opencv": {"K": [[_r(x) for x in row] for row in cam.K],
                   "T_world_camera": [[_r(x) for x in row] for row in cam.T_world_camera]},
    }


def build_sapien_files(bundle: Bundle) -> tuple[dict[str, bytes], list[str]]:
    """Everything the export writes, as {relative path: bytes}, plus warnings. Reads the bundle only."""
    w = _Writer()
    warnings: list[str] = []
    objects = {}
    for oid, obj in bundle.manifest.objects.items():
        if obj.articulation is not None:
            objects[oid] = _articulated_entry(w, bundle, oid, obj)
            continue
        visual_rel = _visual_assets(w, bundle, oid, obj)
        collisions = _collision_xml(w, bundle, oid, obj, warnings)
        urdf_rel = w.add(f"objects/{oid}.urdf", _urdf_text(oid, visual_rel, collisions,
                                                            _inertial_xml(oid, obj, warnings)).encode())
        objects[oid] = _object_entry(obj, urdf_rel, len(collisions))
    m = bundle.manifest
    scene = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "name": m.name,
        "conventions": {
            "units": "m, kg, s, rad; world +Z up",
            "quaternion_order": "wxyz",
            "object_pose": "world pose of the object (URDF link) frame, not the centre of mass",
            "camera_pose": "SAPIEN camera frame (+X forward, +Y left, +Z up)",
            "camera_intrinsics": "fx, fy, cx, cy for set_focal_lengths/set_principal_point: SAPIEN pixel edges at "
                                 "integers, so cx = cx_opencv + 0.5 and cy = cy_opencv + 0.5",
        },
        "table_height": _r(m.table_height),
        "physics": {"timestep": _r(m.physics.timestep), "gravity": [_r(g) for g in m.physics.gravity]},
        "objects": objects,
        "cameras": {name: _camera_json(name, spec, warnings) for name, spec in m.cameras.items()},
        "lights": {"ambient": list(AMBIENT_LIGHT),
                   "directional": [{"direction": [_r(x) for x in li.direction], "color": [_r(x) for x in li.color]}
                                   for li in m.lights]},
    }
    if m.robot is not None:
        scene["robot"] = _robot_files(w, m.robot, bundle.root)
        for name, (link, cam) in robot_cameras(robot_setup(m.robot, bundle.root), m.cameras).items():
            # a robot-mounted camera: pose in the link frame; the loader keeps it on the link as the robot moves
            scene["cameras"][name] = {**_camera_dict(name, cam, warnings), "link": link}
    w.add(SCENE_FILE, (json.dumps(scene, indent=2) + "\n").encode())
    return w.files, warnings


def _robot_files(w: _Writer, spec, bundle_root: Path) -> dict:
    """Copy the robot's resolved URDF (meshes content-addressed, link colours from the appearance) into ``robot/``;
    a robot from a definition file also gets its package (definition, URDF, meshes) in ``robot_def/``."""

    rs = robot_setup(spec, bundle_root)
    root = ElementTree.fromstring(rs.urdf.read_text())
    for link in root.findall("link"):
        rgba = rs.robot.link_rgba(link.get("name"), rs.appearance)
        textured = rs.textures.get(link.get("name"))
        if textured:  # a texture back-projected from the frames: one UV mesh (link frame) replaces the visuals
            for vis in link.findall("visual"):
                link.remove(vis)
            tex = textured[1].read_bytes()
            th = hash_bytes(tex)
            w.add(f"robot/meshes/{th}.png", tex)
            w.add(f"robot/meshes/{th}.mtl", _mtl_text(rgba, f"{th}.png").encode())
            obj = _with_material(textured[0].read_text(), f"{th}.mtl").encode()
            rel = w.add(f"robot/meshes/{hash_bytes(obj)}.obj", obj)
            vis = ElementTree.Element("visual", name=f"visual_{link.get('name')}")
            ElementTree.SubElement(vis, "origin", xyz="0 0 0", rpy="0 0 0")
            ElementTree.SubElement(ElementTree.SubElement(vis, "geometry"), "mesh", filename=rel[len("robot/"):])
            link.insert(0, vis)
        own_parts = set()
        for vis in ([] if textured else link.findall("visual")):
            own_rgba, own_tex = visual_material(vis)
            for mat in vis.findall("material"):
                vis.remove(mat)
            mesh = vis.find("geometry/mesh")
            if own_rgba is not None and own_tex is not None and mesh is not None:
                # the mesh's own texture: the part's OBJ (UVs) with an MTL naming the texture, content-addressed
                tex = own_tex.read_bytes()
                th = hash_bytes(tex)
                w.add(f"robot/meshes/{th}.png", tex)
                mtl = _mtl_text(own_rgba, f"{th}.png").encode()
                mh = hash_bytes(mtl)
                w.add(f"robot/meshes/{mh}.mtl", mtl)
                obj = _with_material(Path(mesh.get("filename")).read_text(), f"{mh}.mtl").encode()
                rel = w.add(f"robot/meshes/{hash_bytes(obj)}.obj", obj)
                mesh.set("filename", rel[len("robot/"):])
                own_parts.add(id(mesh))
                continue
            c = own_rgba if own_rgba is not None else rgba  # the mesh's own colour, else the flat colour
            # one name per colour: SAPIEN's URDF loader keeps the first material of a name
            mname = f"mat_{link.get('name')}" if own_rgba is None else f"mat_{link.get('name')}_{hash_bytes(_vec(c).encode())}"
            mat = ElementTree.SubElement(vis, "material", name=mname)
            ElementTree.SubElement(mat, "color", rgba=_vec([*srgb_to_linear(c[:3]), c[3]]))
        for mesh in (m_ for c in link.findall("collision") + link.findall("visual") for m_ in c.iter("mesh")):
            if (textured and mesh.get("filename", "").startswith("meshes/")) or id(mesh) in own_parts:
                continue  # a textured visual, written above
            src = Path(mesh.get("filename"))
            data = src.read_bytes()
            if src.suffix.lower() == ".obj":  # drop material libraries we do not ship
                data = re.sub(rb"(?m)^(mtllib|usemtl)\b.*$", b"", data)
            rel = w.add(f"robot/meshes/{hash_bytes(data)}{src.suffix.lower()}", data)
            mesh.set("filename", rel[len("robot/"):])
    ElementTree.indent(root, space="  ")
    urdf_rel = w.add(f"robot/{rs.robot.name}.urdf", (ElementTree.tostring(root, encoding="unicode") + "\n").encode())
    p, q = split_pose(rs.base)
    extra = {}
    if is_file_robot(rs.robot):
        for rel, data in sorted(package_robot_files(rs.robot).items()):
            w.add(f"{EXPORT_ROBOT_DIR}/{rel}", data)
        extra["definition"] = f"{EXPORT_ROBOT_DIR}/{PACKAGE_DEFINITION}"
    return {"name": rs.robot.name, **extra, "urdf": urdf_rel, "base_pose": _pose_json(p, q),
            "joint_names": rs.robot.joint_names, "qpos": [_r(x) for x in rs.qpos],
            "stiffness": [_r(x) for x in rs.stiffness], "damping": [_r(x) for x in rs.damping],
            "force_limit": [_r(x) if np.isfinite(x) else None for x in rs.force_limit],
            "armature": _r(rs.robot.armature), "gravity_compensation": True}


class SapienExporter(Exporter):
    """Writes ``exports/sapien/`` and loads it back in SAPIEN 3.

    With ``verify=True`` (default) the new export is loaded in a physics-only SAPIEN
    scene *before* it replaces the previous one, so an export SAPIEN refuses never
    overwrites a good one.
    """

    name = "sapien"
    main_file_name = SCENE_FILE

    def __init__(self, verify: bool = True):
        self.verify = verify

    def export(self, bundle: Bundle, out_dir: Path | None = None) -> ExportResult:
        final = Path(out_dir) if out_dir is not None else self.out_dir(bundle)
        t0 = time.perf_counter()
        files, warnings = build_sapien_files(bundle)  # all reading + validation before touching final
        with replace_dir_atomically(final) as tmp:
            _Writer.write_all(files, tmp)
            if self.verify:
                load_sapien_scene(tmp / SCENE_FILE, render=False).close()
        for w in warnings:
            log.warning("sapien export: %s", w)
        log.info("sapien export: %d files in %s (%.2f s)", len(files), final, time.perf_counter() - t0)
        return ExportResult(engine=self.name, main_file=final / SCENE_FILE,
                            files=[final / rel for rel in sorted(files)], warnings=warnings)

    def load(self, out_dir: Path, render: bool = True) -> "SapienScene":
        return load_sapien_scene(Path(out_dir) / SCENE_FILE, render=render)


def _object_entry(obj, urdf_rel: str, n_collisions: int) -> dict:
    """The scene file's entry of one object: its URDF, pose and contact/mass settings."""
    return {
        "urdf": urdf_rel,
        "pose": _pose_json(obj.pose.position, obj.pose.quaternion_wxyz),
        "fixed": bool(obj.fixed),
        "static_friction": _r(obj.friction), "dynamic_friction": _r(obj.friction),
        "restitution": _r(obj.restitution),
        "density": _r(obj.density),
        "collision_shapes": n_collisions,
    }
