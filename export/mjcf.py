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

from real2sim.bundle import Bundle, replace_dir_atomically
from real2sim.errors import ExportError, UnknownNameError, require
from real2sim.geometry import make_pose, matrix_to_quat_wxyz

from .base import Exporter, ExportResult, LoadedScene
from .common import content_addressed_copy, fmt, require_ready

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
            caps.add("render")
        self.capabilities = frozenset(caps)
        self._ids = [self.model.body(i).name for i in range(1, self.model.nbody)]

    def object_ids(self) -> list[str]:
        return list(self._ids)

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

    def render(self, camera: str, segmentation: bool = False) -> np.ndarray:
        self.require("render")
        c = self._camera_id(camera)
        w, h = self.model.cam_resolution[c]
        key = (int(w), int(h))
        if key not in self._renderers:
            self._renderers[key] = self._mj.Renderer(self.model, height=int(h), width=int(w))
        r = self._renderers[key]
        if segmentation:
            r.enable_segmentation_rendering()
        else:
            r.disable_segmentation_rendering()
        r.update_scene(self.data, camera=camera)
        return r.render().copy()

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        seg = self.render(camera, segmentation=True)
        bid = self._body(oid)
        geoms = np.flatnonzero(self.model.geom_bodyid == bid)
        return np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM))

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
