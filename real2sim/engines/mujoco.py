"""MJCF exporter (MuJoCo) and the MuJoCo view of a loaded export.

Visual and collision geometry live in separate default classes: ``visual`` geoms
(group 2) never collide (``contype=0 conaffinity=0``); ``collision`` geoms (group 3)
are convex hulls or primitives. Mass and inertia are written explicitly from the
bundle so MuJoCo, SAPIEN and USD share the same numbers.
"""
from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, replace_dir_atomically
from real2sim.core.errors import (
    ExportError,
    UnknownNameError,
    UnsupportedCapability,
    require,
)
from real2sim.core.geometry import make_pose, matrix_to_quat_wxyz
from real2sim.engines.base import Exporter, ExportResult, LoadedScene
from real2sim.engines.common import content_addressed_copy, fmt, require_ready
from real2sim.robots import get_robot
from real2sim.robots.scene import ROBOT_PREFIX as P
from real2sim.robots.scene import robot_setup

log = logging.getLogger(__name__)
MAIN_FILE = "scene.xml"


def _sub(parent, tag, **attrs) -> ET.Element:
    return ET.SubElement(parent, tag, {k.rstrip("_"): str(v) for k, v in attrs.items() if v is not None})


class MjcfExporter(Exporter):
    """Writes ``exports/mjcf/scene.xml`` with ``meshes/`` and ``textures/`` (content-addressed names)."""

    name = "mjcf"

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
            _add_robot(root, asset, world, out, m.robot)
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
        p, q = obj.pose.position, obj.pose.quaternion_wxyz
        body = _sub(world, "body", name=oid, pos=fmt(p), quat=fmt(q))
        if not obj.fixed:
            _sub(body, "freejoint", name=oid)
            I = np.asarray(obj.inertial.inertia)
            _sub(body, "inertial", pos=fmt(obj.inertial.com), mass=fmt([obj.inertial.mass], 12),
                 fullinertia=fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]], 15))
        mat = self._material(bundle, asset, out, oid, obj, seen)
        mesh = self._mesh_asset(asset, out, bundle.path(obj.visual.mesh), seen, visual=True)
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


def _add_robot(root, asset, world, out: Path, spec) -> None:
    """Graft the robot (URDF via MuJoCo's importer) under ``worldbody`` with position actuators.

    Names get the ``robot/`` prefix; bodies are gravity-compensated (``gravcomp=1``, as SIMPLER
    balances passive forces); robot geoms do not collide with each other (contype 2, conaffinity 1)
    but do with objects; the integrator becomes ``implicitfast`` so that large drive damping is stable.
    """

    rs = robot_setup(spec)
    r = rs.robot
    rx = _robot_urdf_mjcf(rs.urdf)
    root.find("option").set("integrator", "implicitfast")
    default = root.find("default")
    _sub(_sub(default, "default", class_="robot_visual"), "geom", contype=0, conaffinity=0, group=2)
    _sub(_sub(default, "default", class_="robot_collision"), "geom", group=3, contype=2, conaffinity=1, condim=4,
         rgba="0.2 0.6 0.9 0.5")
    meshes = {}
    for m_el in rx.find("asset").findall("mesh"):
        fname = _robot_mesh_copy(Path(m_el.get("file")), out / "meshes")
        name = f"{P}{m_el.get('name')}"
        meshes[m_el.get("name")] = name
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
        _sub(asset, "material", name=mat, rgba=fmt(rgba), specular="0.3", shininess="0.3")
        for g in body.findall("geom"):
            visual = g.get("contype") == "0" and g.get("conaffinity") == "0"
            for k in ("contype", "conaffinity", "group", "density"):
                g.attrib.pop(k, None)
            g.set("class", "robot_visual" if visual else "robot_collision")
            if visual:
                g.set("material", mat)
            if g.get("mesh"):
                g.set("mesh", meshes[g.get("mesh")])
        for j in body.findall("joint"):
            j.set("name", P + j.get("name"))
            j.set("armature", fmt([r.armature]))
            j.attrib.pop("actuatorfrcrange", None)
    p, q = rs.base[:3, 3], matrix_to_quat_wxyz(rs.base[:3, :3])
    base.set("pos", fmt(p))
    base.set("quat", fmt(q))
    world.append(base)
    act = _sub(root, "actuator")
    for name, kp, kv in zip(r.joint_names, rs.stiffness, rs.damping):
        _sub(act, "general", name=P + name, joint=P + name, gaintype="fixed", gainprm=fmt([kp]), biastype="affine",
             biasprm=fmt([0.0, -kp, -kv]))
    custom = _sub(root, "custom")
    _sub(custom, "text", name="real2sim:robot", data=r.name)
    _sub(custom, "numeric", name="real2sim:robot_qpos", data=fmt(rs.qpos))


class MujocoScene(LoadedScene):
    """An MJCF export loaded in MuJoCo."""

    engine = "mujoco"

    def __init__(self, xml_path: Path):
        mujoco = require("mujoco", "mujoco")
        self._mj = mujoco
        if not Path(xml_path).is_file():
            raise ExportError(f"{xml_path}: MJCF file not found; run 'real2sim export' first")
        try:
            self.model = mujoco.MjModel.from_xml_path(str(xml_path))
        except ValueError as exc:
            raise ExportError(f"{xml_path}: MuJoCo refused the model: {exc}") from exc
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)
        self._renderers: dict = {}
        caps = {"physics", "mass", "project"}
        if os.environ.get("MUJOCO_GL", "egl") in ("egl", "osmesa", "glfw"):
            caps |= {"render", "depth", "appearance"}
        self._appearance0 = self._appearance_state()
        self._robot = None
        self._init_robot()
        if self._robot is not None:
            caps.add("robot")
        self.capabilities = frozenset(caps)
        self._ids = [self.model.body(i).name for i in range(1, self.model.nbody)
                     if not self.model.body(i).name.startswith("robot/")]

    # -- robot ------------------------------------------------------------------------
    def _init_robot(self) -> None:
        mj, m = self._mj, self.model
        tid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_TEXT, "real2sim:robot")
        if tid < 0:
            return

        adr, n = m.text_adr[tid], m.text_size[tid]
        name = bytes(m.text_data[adr:adr + n - 1]).decode()
        self._robot = get_robot(name)
        names = self._robot.joint_names
        jids = [mj.mj_name2id(m, mj.mjtObj.mjOBJ_JOINT, "robot/" + j) for j in names]
        self._qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self._dadr = np.array([m.jnt_dofadr[j] for j in jids])
        self._act = np.array([mj.mj_name2id(m, mj.mjtObj.mjOBJ_ACTUATOR, "robot/" + j) for j in names])
        nid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_NUMERIC, "real2sim:robot_qpos")
        q0 = np.array(m.numeric_data[m.numeric_adr[nid]:m.numeric_adr[nid] + m.numeric_size[nid]])
        self._base_body = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, "robot/" + self._robot.base_link)
        self._q0 = q0.copy()
        self.set_robot_qpos(q0)

    def robot_qpos(self) -> np.ndarray:
        self.require("robot")
        return self.data.qpos[self._qadr].copy()

    def robot_qvel(self) -> np.ndarray:
        self.require("robot")
        return self.data.qvel[self._dadr].copy()

    def set_robot_qpos(self, q) -> None:
        q = np.asarray(q, float)
        self.data.qpos[self._qadr] = q
        self.data.qvel[self._dadr] = 0.0
        self.data.ctrl[self._act] = q
        self._mj.mj_forward(self.model, self.data)

    def set_joint_targets(self, q) -> None:
        self.require("robot")
        self.data.ctrl[self._act] = np.asarray(q, float)

    def set_joint_gains(self, stiffness, damping) -> None:
        self.require("robot")
        kp, kv = np.asarray(stiffness, float), np.asarray(damping, float)
        self.model.actuator_gainprm[self._act, 0] = kp
        self.model.actuator_biasprm[self._act, 1] = -kp
        self.model.actuator_biasprm[self._act, 2] = -kv

    def link_pose(self, link: str) -> np.ndarray:
        self.require("robot")
        b = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_BODY, "robot/" + link)
        if b < 0:
            links = [self.model.body(i).name[6:] for i in range(self.model.nbody) if self.model.body(i).name.startswith("robot/")]
            raise UnknownNameError("robot link", link, links)
        T = np.eye(4)
        T[:3, :3] = self.data.xmat[b].reshape(3, 3)
        T[:3, 3] = self.data.xpos[b]
        return T

    def robot_base_pose(self) -> np.ndarray:
        return self.link_pose(self._robot.base_link) if self._robot else super().robot_base_pose()

    def robot_mask(self, camera: str) -> np.ndarray:
        self.require("robot")
        seg = self.render(camera, segmentation=True)
        robot_bodies = [i for i in range(self.model.nbody) if self.model.body(i).name.startswith("robot/")]
        geoms = np.flatnonzero(np.isin(self.model.geom_bodyid, robot_bodies))
        return np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM))

    @property
    def physics_timestep(self) -> float:
        return float(self.model.opt.timestep)

    def set_physics_timestep(self, dt: float) -> None:
        self.model.opt.timestep = float(dt)

    def step_physics(self, n: int) -> None:
        if n > 0:
            self._mj.mj_step(self.model, self.data, nstep=int(n))

    def object_ids(self) -> list[str]:
        return list(self._ids)

    def set_object_pose(self, oid: str, pose) -> None:
        b = self._body(oid)
        if self.model.body_jntnum[b] == 0:
            raise UnsupportedCapability(f"object '{oid}' is fixed; it cannot be moved")
        j = self.model.body_jntadr[b]
        qa, da = self.model.jnt_qposadr[j], self.model.jnt_dofadr[j]
        T = np.asarray(pose, float)
        self.data.qpos[qa:qa + 3] = T[:3, 3]
        self.data.qpos[qa + 3:qa + 7] = matrix_to_quat_wxyz(T[:3, :3])
        self.data.qvel[da:da + 6] = 0.0
        self._mj.mj_forward(self.model, self.data)

    def reset_state(self) -> None:
        self._mj.mj_resetData(self.model, self.data)  # qpos0 = exported poses; clears warm starts
        if self._robot is not None:
            self.set_robot_qpos(self._q0)
        self._mj.mj_forward(self.model, self.data)

    # -- appearance ---------------------------------------------------------------------
    def _appearance_state(self) -> dict:
        m, hl = self.model, self.model.vis.headlight
        return {"light_diffuse": m.light_diffuse.copy(), "light_specular": m.light_specular.copy(),
                "light_ambient": m.light_ambient.copy(), "head_ambient": np.array(hl.ambient),
                "head_diffuse": np.array(hl.diffuse), "head_specular": np.array(hl.specular),
                "mat_rgba": m.mat_rgba.copy(), "geom_rgba": m.geom_rgba.copy()}

    def set_lighting(self, scale: float, unlit: bool = False) -> None:
        self.require("appearance")
        a, m, hl = self._appearance0, self.model, self.model.vis.headlight
        s = float(scale)
        on = 0.0 if unlit else s
        m.light_diffuse[:] = a["light_diffuse"] * on
        m.light_specular[:] = a["light_specular"] * on
        m.light_ambient[:] = a["light_ambient"] * on
        hl.ambient[:] = s if unlit else a["head_ambient"] * s
        hl.diffuse[:] = a["head_diffuse"] * on
        hl.specular[:] = a["head_specular"] * on

    def _tint_bodies(self, target: str) -> list[int]:
        if target == "robot":
            self.require("robot")
            return [i for i in range(self.model.nbody) if self.model.body(i).name.startswith("robot/")]
        return [self._body(target)]

    def set_tint(self, target: str, rgb) -> None:
        self.require("appearance")
        rgb = np.asarray(rgb, float).reshape(3)
        a, m = self._appearance0, self.model
        for g in np.flatnonzero(np.isin(m.geom_bodyid, self._tint_bodies(target))):
            mat = m.geom_matid[g]
            if mat >= 0:  # the material's rgba multiplies its texture in MuJoCo
                m.mat_rgba[mat, :3] = np.clip(a["mat_rgba"][mat, :3] * rgb, 0.0, 1.0)
            else:
                m.geom_rgba[g, :3] = np.clip(a["geom_rgba"][g, :3] * rgb, 0.0, 1.0)

    def _body(self, oid: str) -> int:
        bid = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_BODY, oid)
        if bid < 0:
            raise UnknownNameError("object", oid, self._ids)
        return bid

    def object_pose(self, oid: str) -> np.ndarray:
        b = self._body(oid)
        T = np.eye(4)
        T[:3, :3] = self.data.xmat[b].reshape(3, 3)
        T[:3, 3] = self.data.xpos[b]
        return T

    def mass_properties(self, oid: str):
        b = self._body(oid)
        R = make_pose((0, 0, 0), self.model.body_iquat[b])[:3, :3]
        I = R @ np.diag(self.model.body_inertia[b]) @ R.T
        return float(self.model.body_mass[b]), self.model.body_ipos[b].copy(), I

    def step(self, seconds: float) -> None:
        n = int(round(seconds / self.model.opt.timestep))
        self._mj.mj_step(self.model, self.data, nstep=n) if n else None

    def warnings(self) -> dict[str, int]:
        """MuJoCo warnings raised so far (name -> count)."""
        return {self._mj.mjtWarning(i).name: int(w.number) for i, w in enumerate(self.data.warning) if w.number}

    def _camera_id(self, camera: str) -> int:
        cid = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_CAMERA, camera)
        if cid < 0:
            names = [self.model.camera(i).name for i in range(self.model.ncam)]
            raise UnknownNameError("camera", camera, names)
        return cid

    def intrinsics(self, camera: str) -> np.ndarray:
        """``(3, 3)`` OpenCV K rebuilt from the MuJoCo camera's own parameters."""
        c = self._camera_id(camera)
        w, h = self.model.cam_resolution[c]
        fx_len, fy_len, px, py = self.model.cam_intrinsic[c]
        sw, sh = self.model.cam_sensorsize[c]
        if sw <= 0:  # camera defined by fovy only
            f = 0.5 * h / np.tan(np.deg2rad(self.model.cam_fovy[c]) / 2)
            return np.array([[f, 0, (w - 1) / 2], [0, f, (h - 1) / 2], [0, 0, 1]])
        fx, fy = fx_len / sw * w, fy_len / sh * h
        return np.array([[fx, 0, (w - 1) / 2 - px / sw * w], [0, fy, (h - 1) / 2 - py / sh * h], [0, 0, 1]])

    def project(self, camera: str, points) -> np.ndarray:
        c = self._camera_id(camera)
        R_gl = self.data.cam_xmat[c].reshape(3, 3)
        R_cv = R_gl @ np.diag([1.0, -1.0, -1.0])
        pc = (np.asarray(points, float) - self.data.cam_xpos[c]) @ R_cv
        K = self.intrinsics(camera)
        return pc[:, :2] / pc[:, 2:3] * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]

    def render(self, camera: str, segmentation: bool = False, depth: bool = False,
               size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("render")
        c = self._camera_id(camera)
        # the camera's frustum comes from its intrinsics (sensor size, focal length), so another viewport size
        # renders the same view, stretched per axis like a resize of the full image
        w, h = size if size is not None else self.model.cam_resolution[c]
        key = (int(w), int(h))
        if key not in self._renderers:
            self._renderers[key] = self._mj.Renderer(self.model, height=int(h), width=int(w))
        r = self._renderers[key]
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        if segmentation:
            r.enable_segmentation_rendering()
        elif depth:
            r.enable_depth_rendering()
        r.update_scene(self.data, camera=camera)
        return r.render().copy()

    def depth(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("depth")
        d = self.render(camera, depth=True, size=size).astype(np.float32)
        d[d >= 0.999 * self.model.stat.extent * self.model.vis.map.zfar] = 0.0  # background: no hit
        return d

    def foreground_mask(self, camera: str, oids, robot: bool = True, size: tuple[int, int] | None = None) -> np.ndarray:
        seg = self.render(camera, segmentation=True, size=size)
        bodies = [self._body(o) for o in oids]
        if robot and self._robot is not None:
            bodies += [i for i in range(self.model.nbody) if self.model.body(i).name.startswith("robot/")]
        geoms = np.flatnonzero(np.isin(self.model.geom_bodyid, bodies))
        return np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM))

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        seg = self.render(camera, segmentation=True)
        bid = self._body(oid)
        geoms = np.flatnonzero(self.model.geom_bodyid == bid)
        return np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM))

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
