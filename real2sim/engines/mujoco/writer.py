"""MJCF exporter (MuJoCo) and the MuJoCo view of a loaded export.

Visual and collision geometry live in separate default classes: ``visual`` geoms
(group 2) never collide (``contype=0 conaffinity=0``); ``collision`` geoms (group 3)
are convex hulls or primitives. Mass and inertia are written explicitly from the
bundle so MuJoCo, SAPIEN and USD share the same numbers.
"""
from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, replace_dir_atomically
from real2sim.core.errors import (
    ExportError,
    require,
)
from real2sim.core.geometry import matrix_to_quat_wxyz
from real2sim.engines.base import Exporter, ExportResult
from real2sim.engines.common import articulated_setup, content_addressed_copy, fmt, require_ready
from real2sim.engines.mujoco.scene import MujocoScene
from real2sim.render.lod import render_mesh_path
from real2sim.robots.robotfile import EXPORT_ROBOT_DIR as ROBOT_PACKAGE_DIR
from real2sim.robots.robotfile import write_robot_package
from real2sim.robots.scene import ROBOT_PREFIX as P
from real2sim.robots.scene import robot_cameras, robot_setup
from real2sim.robots.spec import is_file_robot

log = logging.getLogger(__name__)
MAIN_FILE = "scene.xml"


def _sub(parent, tag, **attrs) -> ET.Element:
    return ET.SubElement(parent, tag, {k.rstrip("_"): str(v) for k, v in attrs.items() if v is not None})


class MjcfExporter(Exporter):
    """Writes ``exports/mjcf/scene.xml`` with ``meshes/`` and ``textures/`` (content-addressed names)."""

    name = "mjcf"
    main_file_name = MAIN_FILE

    def export(self, bundle: Bundle, out_dir: Path | None = None) -> ExportResult:
        require_ready(bundle)
        out_dir = Path(out_dir or self.out_dir(bundle))
        with replace_dir_atomically(out_dir) as tmp:
            root = self._build(bundle, tmp)
            ET.indent(root, space="  ")
            (tmp / MAIN_FILE).write_text(ET.tostring(root, encoding="unicode") + "\n")
            self.load(tmp).close()  # the engine must accept it before it replaces the old export
        files = sorted(p for p in out_dir.rglob("*") if p.is_file())
        return ExportResult("mjcf", out_dir / MAIN_FILE, files)

    def _build(self, bundle: Bundle, out: Path) -> ET.Element:
        m = bundle.manifest
        root = ET.Element("mujoco", model=m.name)
        self._root = root
        _sub(root, "compiler", angle="radian", meshdir="meshes", texturedir="textures", autolimits="true",
             inertiafromgeom="false")
        _sub(root, "option", timestep=fmt([m.physics.timestep]), gravity=fmt(m.physics.gravity), cone="elliptic",
             impratio="10")
        w = max([c.width for c in m.cameras.values()] + [640])
        h = max([c.height for c in m.cameras.values()] + [480])
        vis = _sub(root, "visual")
        _sub(vis, "global", offwidth=w, offheight=h)
        _sub(vis, "headlight", ambient="0.35 0.35 0.35", diffuse="0.3 0.3 0.3", specular="0 0 0")
        _sub(vis, "map", znear="0.01")
        default = _sub(root, "default")
        _sub(_sub(default, "default", class_="visual"), "geom", contype=0, conaffinity=0, group=2)
        _sub(_sub(default, "default", class_="collision"), "geom", group=3, condim=4, solref="0.005 1",
             rgba="0.9 0.4 0.2 0.5")
        asset = _sub(root, "asset")
        world = _sub(root, "worldbody")
        for i, light in enumerate(m.lights):
            d = np.asarray(light.direction, float)
            _sub(world, "light", name=f"light_{i}", directional="true", pos=fmt(-d / np.linalg.norm(d)),
                 dir=fmt(d / np.linalg.norm(d)), diffuse=fmt(light.color), specular="0.1 0.1 0.1", castshadow="false")
        for name, spec in m.cameras.items():
            self._camera(world, name, spec)
        seen_assets: set[str] = set()
        for oid, obj in m.objects.items():
            self._object(bundle, world, asset, out, oid, obj, seen_assets)
        if m.robot is not None:
            _add_robot(root, asset, world, out, m.robot, bundle.root, list(m.cameras))
        return root

    @staticmethod
    def _camera(world, name, spec) -> None:
        cam = spec.camera()
        T = cam.pose_in("opengl")
        # MuJoCo's principalpixel (px, py) puts the principal point at centre - (px, py) in image
        # pixels (measured by rendering); the OpenCV centre of a w-pixel image is (w - 1) / 2.
        dx, dy = cam.principal_offset_px()
        pixel = 1e-5  # sensor pixel pitch (m); only the ratios matter
        _sub(world, "camera", name=name, mode="fixed", pos=fmt(T[:3, 3]), quat=fmt(matrix_to_quat_wxyz(T[:3, :3])),
             resolution=f"{cam.width} {cam.height}", sensorsize=fmt([cam.width * pixel, cam.height * pixel]),
             focalpixel=fmt([cam.fx, cam.fy]), principalpixel=fmt([-dx, -dy]))

    def _object(self, bundle, world, asset, out, oid, obj, seen) -> None:
        if obj.articulation is not None:
            _articulated(bundle, world, asset, out, oid, obj, seen, self._root)
            return
        p, q = obj.pose.position, obj.pose.quaternion_wxyz
        body = _sub(world, "body", name=oid, pos=fmt(p), quat=fmt(q))
        if not obj.fixed:
            _sub(body, "freejoint", name=oid)
            I = np.asarray(obj.inertial.inertia)
            _sub(body, "inertial", pos=fmt(obj.inertial.com), mass=fmt([obj.inertial.mass], 12),
                 fullinertia=fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]], 15))
        mat = self._material(bundle, asset, out, oid, obj, seen)
        # the env renders this export: the visual is the level-of-detail copy where the mesh has far more triangles
        # than its size on the bundle's cameras shows (render/lod.py); objects/<id>/visual.* stays the full mesh
        mesh = self._mesh_asset(asset, out, render_mesh_path(bundle, oid), seen, visual=True)
        _sub(body, "geom", name=f"{oid}_visual", class_="visual", type="mesh", mesh=mesh, material=mat)
        friction = f"{obj.friction:g} 0.005 0.0001"
        col = obj.collision
        if col.kind == "hulls":
            for i, hull in enumerate(col.hulls):
                name = self._mesh_asset(asset, out, bundle.path(hull), seen, visual=False)
                _sub(body, "geom", name=f"{oid}_collision_{i:03d}", class_="collision", type="mesh", mesh=name,
                     friction=friction)
        elif col.kind in ("box", "cylinder", "sphere"):
            _sub(body, "geom", name=f"{oid}_collision_000", class_="collision", type=col.kind, size=fmt(col.size),
                 pos=fmt(col.pose.position), quat=fmt(col.pose.quaternion_wxyz), friction=friction)

    @staticmethod
    def _mesh_asset(asset, out, src: Path, seen, visual: bool) -> str:
        fname = content_addressed_copy(src, out / "meshes")
        name = f"mesh_{Path(fname).stem}"
        if name not in seen:
            seen.add(name)
            # visual meshes need not be closed: 'shell' inertia avoids MuJoCo's volume check
            _sub(asset, "mesh", name=name, file=fname, inertia="shell" if visual else None)
        return name

    @staticmethod
    def _material(bundle, asset, out, oid, obj, seen) -> str:
        name = f"mat_{oid}"
        if obj.visual.texture:
            tfile = content_addressed_copy(bundle.path(obj.visual.texture), out / "textures")
            tname = f"tex_{Path(tfile).stem}"
            if tname not in seen:
                seen.add(tname)
                _sub(asset, "texture", name=tname, type="2d", file=tfile)
            _sub(asset, "material", name=name, texture=tname, specular="0.1", shininess="0.1")
        else:
            _sub(asset, "material", name=name, rgba=fmt(obj.visual.rgba), specular="0.1", shininess="0.1")
        return name

    def load(self, out_dir: Path) -> "MujocoScene":
        return MujocoScene(Path(out_dir) / MAIN_FILE)


def _articulated(bundle, world, asset, out, oid, obj, seen, root) -> None:
    """An articulated object: one body per URDF link (the root link is body ``oid``, the others ``oid/link``), nested
    along the joints (``oid/joint``: slide or hinge, limits, damping, frictionloss), explicit inertials from
    :meth:`ArticulatedModel.link_inertials`, visual geoms coloured from the URDF, collision geoms with the object's
    friction. The joints' start positions travel as the custom numeric ``real2sim:qpos:<oid>`` (MuJoCo's ``qpos0``
    of a slide/hinge joint is always 0)."""
    import hashlib

    model, q, dyn, inertials = articulated_setup(bundle, oid)
    friction = f"{obj.friction:g} 0.005 0.0001"

    def mesh_asset(shape) -> str:
        g = shape.geometry
        fname = content_addressed_copy(g.mesh, out / "meshes")
        scale = fmt(g.scale)
        name = f"mesh_{Path(fname).stem}" + ("" if scale == "1 1 1" else "_" + hashlib.sha256(scale.encode()).hexdigest()[:8])
        if name not in seen:
            seen.add(name)
            _sub(asset, "mesh", name=name, file=fname, scale=None if scale == "1 1 1" else scale)
        return name

    def geom(body, shape, name, cls, **extra):
        g = shape.geometry
        T = shape.origin
        kw = {"pos": fmt(T[:3, 3]), "quat": fmt(matrix_to_quat_wxyz(T[:3, :3]))}
        if g.kind == "box":
            kw.update(type="box", size=fmt(np.asarray(g.size) / 2))
        elif g.kind == "cylinder":
            kw.update(type="cylinder", size=fmt([g.size[0], g.size[1] / 2]))
        elif g.kind == "sphere":
            kw.update(type="sphere", size=fmt(g.size))
        else:
            kw.update(type="mesh", mesh=mesh_asset(shape))
        _sub(body, "geom", name=name, class_=cls, **kw, **extra)

    def link_body(parent_el, lname, T, joint=None):
        body = _sub(parent_el, "body", name=oid if lname == model.root else f"{oid}/{lname}", pos=fmt(T[:3, 3]),
                    quat=fmt(matrix_to_quat_wxyz(T[:3, :3])))
        if lname == model.root and not obj.fixed:
            _sub(body, "freejoint", name=oid)
        if joint is not None and joint.movable:
            d, f = dyn[joint.name]
            kind = "slide" if joint.type == "prismatic" else "hinge"
            order.append(joint.name)  # MuJoCo numbers joints depth-first, as written
            _sub(body, "joint", name=f"{oid}/{joint.name}", type=kind, axis=fmt(joint.axis),
                 range=fmt([joint.lower, joint.upper]) if joint.limited else None,
                 limited="true" if joint.limited else "false", damping=fmt([d]), frictionloss=fmt([f]),
                 solreflimit="0.004 1", solimplimit="0.95 0.99 0.001")
        if lname != model.root or not obj.fixed:
            mass, com, I = inertials[lname]
            _sub(body, "inertial", pos=fmt(com), mass=fmt([mass], 12),
                 fullinertia=fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]], 15))
        link = model.links[lname]
        for i, s in enumerate(link.visuals):
            mat = f"mat_{oid}/{lname}/{i}"
            _sub(asset, "material", name=mat, rgba=fmt(s.rgba), specular="0.1", shininess="0.1")
            geom(body, s, f"{oid}/{lname}/visual_{i:03d}", "visual", material=mat)
        for i, s in enumerate(link.collisions):
            geom(body, s, f"{oid}/{lname}/collision_{i:03d}", "collision", friction=friction)
        for j in model.joints:
            if j.parent == lname:
                link_body(body, j.child, j.origin, j)

    order: list[str] = []
    link_body(world, model.root, obj.pose.matrix())
    # a link never touches the link it hangs from (as in PhysX articulations); MuJoCo's own parent filter skips
    # bodies welded to the world, i.e. the root of a fixed object
    contact = root.find("contact")
    if contact is None:
        contact = _sub(root, "contact")
    body = {model.root: oid, **{lk: f"{oid}/{lk}" for lk in model.links if lk != model.root}}
    for j in model.joints:
        _sub(contact, "exclude", body1=body[j.parent], body2=body[j.child])
    custom = root.find("custom")
    if custom is None:
        custom = _sub(root, "custom")
    _sub(custom, "text", name=f"real2sim:root_link:{oid}", data=model.root)
    if q:
        _sub(custom, "numeric", name=f"real2sim:qpos:{oid}", data=fmt([q[n] for n in order]))


def _robot_urdf_mjcf(urdf: Path) -> ET.Element:
    """The URDF converted by MuJoCo's own URDF importer, as MJCF XML (every link kept as a body)."""
    mujoco = require("mujoco", "mujoco")
    text = urdf.read_text()
    ext = ('<mujoco><compiler strippath="false" fusestatic="false" discardvisual="false" '
           'balanceinertia="true"/></mujoco>')
    i = text.index("<link")
    import warnings

    try:
        with warnings.catch_warnings():  # source OBJ UV warnings: the copies we write are cleaned
            warnings.simplefilter("ignore")
            spec = mujoco.MjSpec.from_string(text[:i] + ext + "\n" + text[i:])
            return ET.fromstring(spec.to_xml())
    except ValueError as exc:
        raise ExportError(f"{urdf}: MuJoCo refused the robot URDF: {exc}") from exc


def _robot_mesh_copy(src: Path, dst_dir: Path) -> str:
    """Content-addressed copy of a robot mesh; OBJ files lose texture coordinates and materials
    (robot colours come from the appearance; partial UVs make MuJoCo warn)."""
    import hashlib
    import re

    if src.suffix.lower() != ".obj":
        return content_addressed_copy(src, dst_dir)
    text = src.read_text(errors="replace")
    text = re.sub(r"(?m)^(vt|mtllib|usemtl)\b.*\n?", "", text)
    text = re.sub(r"(?m)^(f\s.*)$", lambda m: re.sub(r"(\d+)/\d*(/?)", lambda g: g.group(1) + ("//" if g.group(2) else ""),
                                                       m.group(1)), text)
    name = hashlib.sha256(text.encode()).hexdigest()[:16] + ".obj"
    dst_dir.mkdir(parents=True, exist_ok=True)
    if not (dst_dir / name).exists():
        (dst_dir / name).write_text(text)
    return name


def own_materials(urdf: Path) -> dict:
    """``{mesh file: (rgba, texture PNG or None)}`` of the resolved URDF's visuals that carry their mesh's own
    material (``real2sim.robots.materials``; one material per part, so one per MJCF geom)."""
    from real2sim.robots.materials import visual_material

    out = {}
    for vis in ET.parse(urdf).getroot().iter("visual"):
        rgba, tex = visual_material(vis)
        mesh = vis.find("geometry/mesh")
        if rgba is not None and mesh is not None:
            out[mesh.get("filename")] = (rgba, tex)
    return out


def _part_material(asset, part, out: Path) -> str:
    """The MJCF material (and texture) of one mesh part: ``(rgba, texture PNG or None)``; shared between parts that
    have the same colour and texture."""
    import hashlib

    rgba, tex = part
    tfile = content_addressed_copy(tex, out / "textures") if tex is not None else None
    name = f"{P}mesh_mat_{hashlib.sha256(f'{fmt(rgba)}|{tfile}'.encode()).hexdigest()[:12]}"
    if asset.find(f"material[@name='{name}']") is not None:
        return name
    if tfile is not None:
        tname = f"{P}tex_{Path(tfile).stem}"
        if asset.find(f"texture[@name='{tname}']") is None:
            _sub(asset, "texture", name=tname, type="2d", file=tfile)
        _sub(asset, "material", name=name, texture=tname, rgba=fmt(rgba), specular="0.3", shininess="0.3")
    else:
        _sub(asset, "material", name=name, rgba=fmt(rgba), specular="0.3", shininess="0.3")
    return name


def _add_robot(root, asset, world, out: Path, spec, bundle_root: Path, bundle_cameras=()) -> None:
    """Graft the robot (URDF via MuJoCo's importer) under ``worldbody`` with position actuators.

    Names get the ``robot/`` prefix; bodies are gravity-compensated (``gravcomp=1``, as SIMPLER
    balances passive forces); robot geoms do not collide with each other (contype 2, conaffinity 1)
    but do with objects; the integrator becomes ``implicitfast`` so that large drive damping is stable.
    """

    rs = robot_setup(spec, bundle_root)
    r = rs.robot
    rx = _robot_urdf_mjcf(rs.urdf)
    # A force-limited actuator's velocity term is not integrated implicitly by MuJoCo: with SIMPLER's large damping
    # on light links it chatters between +-limit every step (the Google Robot's bicep ran 0.5 rad away from a 0.1 rad
    # step). Its damping becomes the joint's passive damping instead (implicit, unclamped); the spring stays clamped.
    joint_damping = {P + n: kv for n, kv, fmax in zip(r.joint_names, rs.damping, rs.force_limit) if np.isfinite(fmax)}
    root.find("option").set("integrator", "implicitfast")
    default = root.find("default")
    _sub(_sub(default, "default", class_="robot_visual"), "geom", contype=0, conaffinity=0, group=2)
    _sub(_sub(default, "default", class_="robot_collision"), "geom", group=3, contype=2, conaffinity=1, condim=4,
         rgba="0.2 0.6 0.9 0.5")
    own = own_materials(rs.urdf)  # mesh file -> (rgba, texture) of the meshes' own materials
    meshes, mesh_own = {}, {}
    for m_el in rx.find("asset").findall("mesh"):
        src = Path(m_el.get("file"))
        if own.get(str(src), (None, None))[1] is not None:  # a textured part: its UVs are whole, keep them
            fname = content_addressed_copy(src, out / "meshes")
        else:
            fname = _robot_mesh_copy(src, out / "meshes")
        name = f"{P}{m_el.get('name')}"
        meshes[m_el.get("name")] = name
        if str(src) in own:
            mesh_own[name] = own[str(src)]
        attrs = {"name": name, "file": fname}
        if m_el.get("scale"):
            attrs["scale"] = m_el.get("scale")
        _sub(asset, "mesh", inertia="shell", **attrs)
    base = rx.find("worldbody").find("body")
    links = []
    for body in base.iter("body"):
        link = body.get("name")
        links.append(link)
        body.set("name", P + link)
        body.set("gravcomp", "1")
        rgba = rs.robot.link_rgba(link, rs.appearance)
        mat = f"{P}mat_{link}"
        textured = rs.textures.get(link)
        if textured:  # a texture back-projected from the frames: one UV mesh in the link frame replaces the visuals
            tfile = content_addressed_copy(textured[1], out / "textures")
            tname = f"{P}tex_{Path(tfile).stem}"
            if asset.find(f"texture[@name='{tname}']") is None:
                _sub(asset, "texture", name=tname, type="2d", file=tfile)
            _sub(asset, "material", name=mat, texture=tname, rgba=fmt([1, 1, 1, rgba[3]]), specular="0.3",
                 shininess="0.3")
        else:
            _sub(asset, "material", name=mat, rgba=fmt(rgba), specular="0.3", shininess="0.3")
        for g in body.findall("geom"):
            visual = g.get("contype") == "0" and g.get("conaffinity") == "0"
            if visual and textured:
                body.remove(g)
                continue
            for k in ("contype", "conaffinity", "group", "density"):
                g.attrib.pop(k, None)
            g.set("class", "robot_visual" if visual else "robot_collision")
            if g.get("mesh"):
                g.set("mesh", meshes[g.get("mesh")])
            if visual:
                g.attrib.pop("rgba", None)  # a geom's rgba would override its material's
                part = mesh_own.get(g.get("mesh"))
                g.set("material", _part_material(asset, part, out) if part else mat)
        if textured:
            mfile = content_addressed_copy(textured[0], out / "meshes")
            mname = f"{P}texmesh_{Path(mfile).stem}"
            if asset.find(f"mesh[@name='{mname}']") is None:
                _sub(asset, "mesh", name=mname, file=mfile, inertia="shell")
            _sub(body, "geom", name=f"{P}visual_{link}", type="mesh", mesh=mname, material=mat, class_="robot_visual")
        for j in body.findall("joint"):
            j.set("name", P + j.get("name"))
            j.set("armature", fmt([r.armature]))
            # Joint limits stiffer than contacts (MuJoCo's default makes both equally soft): a finger pressed into
            # the table by the arm was squeezed up to 0.2 m out of its 2.2 cm slide range.
            j.set("solreflimit", "0.004 1")
            j.set("solimplimit", "0.95 0.99 0.001")
            j.attrib.pop("actuatorfrcrange", None)
            if j.get("name") in joint_damping:
                j.set("damping", fmt([joint_damping[j.get("name")]]))
    bodies = {b.get("name")[len(P):]: b for b in base.iter("body")}
    glob = root.find("visual").find("global")
    for cam_name, (link, cam) in robot_cameras(rs, bundle_cameras).items():
        # a robot-mounted camera: a MuJoCo camera fixed in the link's body, moving with it
        T = cam.pose_in("opengl")
        dx, dy = cam.principal_offset_px()
        pixel = 1e-5
        _sub(bodies[link], "camera", name=cam_name, mode="fixed", pos=fmt(T[:3, 3]),
             quat=fmt(matrix_to_quat_wxyz(T[:3, :3])), resolution=f"{cam.width} {cam.height}",
             sensorsize=fmt([cam.width * pixel, cam.height * pixel]), focalpixel=fmt([cam.fx, cam.fy]),
             principalpixel=fmt([-dx, -dy]))
        glob.set("offwidth", str(max(int(glob.get("offwidth")), cam.width)))
        glob.set("offheight", str(max(int(glob.get("offheight")), cam.height)))
    p, q = rs.base[:3, 3], matrix_to_quat_wxyz(rs.base[:3, :3])
    base.set("pos", fmt(p))
    base.set("quat", fmt(q))
    world.append(base)
    act = _sub(root, "actuator")
    for name, kp, kv, fmax in zip(r.joint_names, rs.stiffness, rs.damping, rs.force_limit):
        limit = {"forcelimited": "true", "forcerange": fmt([-fmax, fmax])} if np.isfinite(fmax) else {}
        kv_act = 0.0 if np.isfinite(fmax) else kv  # force-limited: the damping is the joint's (above)
        _sub(act, "general", name=P + name, joint=P + name, gaintype="fixed", gainprm=fmt([kp]), biastype="affine",
             biasprm=fmt([0.0, -kp, -kv_act]), **limit)
    custom = root.find("custom")
    if custom is None:
        custom = _sub(root, "custom")
    _sub(custom, "text", name="real2sim:robot", data=r.name)
    if is_file_robot(r):  # the robot travels with the export (a new process reads it from here, not the user's file)
        _sub(custom, "text", name="real2sim:robot_definition",
             data=(ROBOT_PACKAGE_DIR + "/" + write_robot_package(r, out / ROBOT_PACKAGE_DIR).name))
    _sub(custom, "numeric", name="real2sim:robot_qpos", data=fmt(rs.qpos))
