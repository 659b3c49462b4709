"""The MuJoCo view of an MJCF export: physics, rendering, robot state (a :class:`LoadedScene`)."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from real2sim.core.errors import (
    ExportError,
    UnknownNameError,
    UnsupportedCapability,
    require,
)
from real2sim.core.geometry import camera_pose_to_convention, make_pose, matrix_to_quat_wxyz
from real2sim.core.manifest import RobotSpec
from real2sim.engines.base import LoadedScene
from real2sim.robots import get_robot, robot_for_spec

log = logging.getLogger(__name__)


class MujocoScene(LoadedScene):
    """An MJCF export loaded in MuJoCo."""

    engine = "mujoco"

    def __init__(self, xml_path: Path):
        mujoco = require("mujoco", "mujoco")
        self._mj = mujoco
        self.path = Path(xml_path)
        if not Path(xml_path).is_file():
            raise ExportError(f"{xml_path}: MJCF file not found; run 'real2sim export' first")
        try:
            self.model = mujoco.MjModel.from_xml_path(str(xml_path))
        except ValueError as exc:
            raise ExportError(f"{xml_path}: MuJoCo refused the model: {exc}") from exc
        self.data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, self.data)
        self._renderers: dict = {}
        self._mask_tables: dict = {}
        self._fast = False
        caps = {"physics", "mass", "project", "preview"}
        if os.environ.get("MUJOCO_GL", "egl") in ("egl", "osmesa", "glfw"):
            caps |= {"render", "depth", "appearance", "segmentation"}
        self._appearance0 = self._appearance_state()
        self._robot = None
        self._init_robot()
        if self._robot is not None:
            caps.add("robot")
        self.capabilities = frozenset(caps)
        # object links and robot bodies carry a '/' (ids cannot): an object is its top body
        self._ids = [self.model.body(i).name for i in range(1, self.model.nbody) if "/" not in self.model.body(i).name]
        self._init_articulated()
        if self._art:
            self.capabilities = self.capabilities | {"articulation"}

    # -- articulated objects -----------------------------------------------------------------
    def _init_articulated(self) -> None:
        """``self._art[oid] = {joint: (joint id, qpos adr, dof adr)}`` for objects whose bodies ``oid/<link>`` carry
        joints ``oid/<joint>``; their start positions (custom numeric ``real2sim:qpos:<oid>``) are applied."""
        mj, m = self._mj, self.model
        self._art: dict[str, dict] = {}
        self._art_q0: dict[str, np.ndarray] = {}
        self._bodies = {oid: [oid_b] for oid, oid_b in ((o, self._body(o)) for o in self._ids)}
        for b in range(1, m.nbody):
            name = m.body(b).name
            head = name.split("/", 1)[0]
            if "/" in name and head in self._bodies and head != "robot":
                self._bodies[head].append(b)
        for oid in self._ids:
            joints = {}
            for j in range(m.njnt):
                name = m.joint(j).name
                if name.startswith(oid + "/"):
                    joints[name[len(oid) + 1:]] = (j, int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]))
            if not joints:
                continue
            self._art[oid] = joints
            nid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_NUMERIC, f"real2sim:qpos:{oid}")
            q0 = (np.array(m.numeric_data[m.numeric_adr[nid]:m.numeric_adr[nid] + m.numeric_size[nid]])
                  if nid >= 0 else np.zeros(len(joints)))
            self._art_q0[oid] = q0
            self.set_object_joint_positions(oid, dict(zip(joints, q0)))

    def _joints_of(self, oid: str) -> dict:
        self._body(oid)
        if oid not in self._art:
            raise UnsupportedCapability(f"object '{oid}' is rigid (no joints); joint queries need an articulated "
                                        "object (real2sim add-object SCENE ID --urdf FILE)")
        return self._art[oid]

    def _joint_of(self, oid: str, joint: str):
        joints = self._joints_of(oid)
        if joint not in joints:
            raise UnknownNameError(f"joint of object '{oid}'", joint, joints)
        return joints[joint]

    def object_joint_names(self, oid: str) -> list[str]:
        self._body(oid)
        return list(self._art.get(oid, {}))

    def object_joint_positions(self, oid: str) -> dict[str, float]:
        return {n: float(self.data.qpos[qa]) for n, (_, qa, _) in self._joints_of(oid).items()}

    def set_object_joint_positions(self, oid: str, positions: dict) -> None:
        for name, v in positions.items():
            _, qa, da = self._joint_of(oid, name)
            self.data.qpos[qa] = float(v)
            self.data.qvel[da] = 0.0
        self._mj.mj_forward(self.model, self.data)

    def set_object_joint_force(self, oid: str, joint: str, force: float) -> None:
        _, _, da = self._joint_of(oid, joint)
        self.data.qfrc_applied[da] = float(force)  # MuJoCo keeps it until changed; mj_resetData clears it

    def object_link_pose(self, oid: str, link: str) -> np.ndarray:
        self._joints_of(oid)
        root = self._root_link(oid)
        b = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_BODY, oid if link == root else f"{oid}/{link}")
        if b < 0 or (link != root and "/" not in self.model.body(b).name):
            links = [root] + [self.model.body(x).name.split("/", 1)[1] for x in self._bodies[oid][1:]]
            raise UnknownNameError(f"link of object '{oid}'", link, links)
        T = np.eye(4)
        T[:3, :3] = self.data.xmat[b].reshape(3, 3)
        T[:3, 3] = self.data.xpos[b]
        return T

    def _root_link(self, oid: str) -> str:
        tid = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_TEXT, f"real2sim:root_link:{oid}")
        if tid < 0:
            return ""
        adr, n = self.model.text_adr[tid], self.model.text_size[tid]
        return bytes(self.model.text_data[adr:adr + n - 1]).decode()

    # -- robot ------------------------------------------------------------------------
    def _init_robot(self) -> None:
        mj, m = self._mj, self.model
        tid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_TEXT, "real2sim:robot")
        if tid < 0:
            return

        def text(tid):
            adr, n = m.text_adr[tid], m.text_size[tid]
            return bytes(m.text_data[adr:adr + n - 1]).decode()

        did = mj.mj_name2id(m, mj.mjtObj.mjOBJ_TEXT, "real2sim:robot_definition")
        if did >= 0:  # a robot from a definition file: read the copy packaged with the export
            self._robot = robot_for_spec(RobotSpec(text(tid), definition=text(did)), self.path.parent)
        else:
            self._robot = get_robot(text(tid))
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
        limited = self.model.actuator_forcelimited[self._act].astype(bool)
        self.model.actuator_gainprm[self._act, 0] = kp
        self.model.actuator_biasprm[self._act, 1] = -kp
        # a force-limited drive's damping is the joint's passive damping (implicit; see the MJCF writer)
        self.model.actuator_biasprm[self._act, 2] = np.where(limited, 0.0, -kv)
        self.model.dof_damping[self._dadr[limited]] = kv[limited]

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

    # -- preview --------------------------------------------------------------------------
    def place_object(self, oid: str, pose) -> None:
        self.require("preview")
        b = self._body(oid)
        T = np.asarray(pose, float)
        if self.model.body_jntnum[b] > 0:
            self.set_object_pose(oid, T)
            return
        self.model.body_pos[b] = T[:3, 3]  # a fixed body: its pose lives in the model
        self.model.body_quat[b] = matrix_to_quat_wxyz(T[:3, :3])
        self._mj.mj_kinematics(self.model, self.data)

    def set_camera_pose(self, camera: str, T_world_camera) -> None:
        self.require("preview")
        c = self._camera_id(camera)
        if camera in self.mounted_cameras():
            raise UnsupportedCapability(f"camera '{camera}' is mounted on robot link '{self.mounted_cameras()[camera]}'"
                                        " and moves with it; move the robot, or change the mount in the robot "
                                        "definition")
        T = camera_pose_to_convention(np.asarray(T_world_camera, float), "opengl")
        self.model.cam_pos[c] = T[:3, 3]
        self.model.cam_quat[c] = matrix_to_quat_wxyz(T[:3, :3])
        self._mj.mj_kinematics(self.model, self.data)
        self._mj.mj_camlight(self.model, self.data)

    def set_robot_base_pose(self, T_world_base) -> None:
        self.require("preview")
        self.require("robot")
        T = np.asarray(T_world_base, float)
        self.model.body_pos[self._base_body] = T[:3, 3]
        self.model.body_quat[self._base_body] = matrix_to_quat_wxyz(T[:3, :3])
        self._mj.mj_kinematics(self.model, self.data)

    def set_fast_rendering(self, fast: bool = True) -> None:
        self.require("preview")
        self._fast = bool(fast)
        for r in self._renderers.values():
            self._apply_render_flags(r)

    def _apply_render_flags(self, r) -> None:
        flags = r.scene.flags
        for f in (self._mj.mjtRndFlag.mjRND_SHADOW, self._mj.mjtRndFlag.mjRND_REFLECTION,
                  self._mj.mjtRndFlag.mjRND_SKYBOX):
            flags[f] = 0 if self._fast else 1

    def reset_state(self) -> None:
        self._mj.mj_resetData(self.model, self.data)  # qpos0 = exported poses; clears warm starts and applied forces
        for oid, q0 in self._art_q0.items():
            self.set_object_joint_positions(oid, dict(zip(self._art[oid], q0)))
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
        self._body(target)
        return list(self._bodies[target])

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
            if self._fast:
                self._apply_render_flags(self._renderers[key])
        r = self._renderers[key]
        r.disable_depth_rendering()
        r.disable_segmentation_rendering()
        if segmentation:
            r.enable_segmentation_rendering()
        elif depth:
            r.enable_depth_rendering()
        r.update_scene(self.data, camera=camera)
        return r.render()  # a new array per call (the Renderer allocates it): no copy needed

    def depth(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("depth")
        d = self.render(camera, depth=True, size=size).astype(np.float32)
        d[d >= 0.999 * self.model.stat.extent * self.model.vis.map.zfar] = 0.0  # background: no hit
        return d

    def _geom_table(self, oids, robot: bool) -> np.ndarray:
        """``(ngeom + 1,) bool``: True at the geoms of ``oids`` (+ robot); the last entry (id -1, background) False.
        Made once per entity set: a table lookup per pixel instead of a set test."""
        key = (tuple(oids), bool(robot))
        table = self._mask_tables.get(key)
        if table is None:
            bodies = [b for o in oids for b in (self._body(o), *self._bodies[o][1:])]
            if robot and self._robot is not None:
                bodies += [i for i in range(self.model.nbody) if self.model.body(i).name.startswith("robot/")]
            table = np.zeros(self.model.ngeom + 1, bool)
            table[np.flatnonzero(np.isin(self.model.geom_bodyid, bodies))] = True
            self._mask_tables[key] = table
        return table

    def foreground_mask(self, camera: str, oids, robot: bool = True, size: tuple[int, int] | None = None) -> np.ndarray:
        seg = self.render(camera, segmentation=True, size=size)
        mask = self._geom_table(oids, robot)[seg[..., 0]]
        mask &= seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM)
        return mask

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        seg = self.render(camera, segmentation=True)
        self._body(oid)
        geoms = np.flatnonzero(np.isin(self.model.geom_bodyid, self._bodies[oid]))
        return np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(self._mj.mjtObj.mjOBJ_GEOM))

    def close(self) -> None:
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
