"""``Real2SimEnv``: a Gymnasium env over any exported bundle, in MuJoCo or SAPIEN.

The engine sits behind :class:`export.base.LoadedScene`; this module has no per-engine
branches. Observation modes (``obs_mode``):

``"composited"`` (SIMPLER "visual matching"): ``I' = M * I_sim + (1 - M) * I_real`` with ``M`` the
    simulator's segmentation of the robot and the movable objects and ``I_real`` the bundle's
    background plate. A bundle without a plate falls back to ``"render"`` (logged; ``env.obs_mode``
    says which mode is in force).
``"render"``: the simulator's own image.
``"state"``: no image (proprioception, and object poses when ``privileged``).

``lens``: ``"pinhole"`` (default) the image as the simulators render it; ``"source"`` through the lens of the
camera file whose frames ``real2sim init`` undistorted (:data:`LENSES`): the real camera's image, which a policy
trained on that camera saw. Near the corners of a barrel lens it repeats the plate's edge (what lay beyond the
pinhole frame was left out at capture).

Observation dict: ``image`` (h, w, 3) uint8 (not in ``"state"``), ``depth`` (h, w, 1) float32 metres
(``depth=True``; 0 = no hit), ``qpos`` (dof,) float32, ``ee_pose`` (7,) float32 end-effector position
+ quaternion wxyz in the robot base frame, and with ``privileged=True`` ``objects`` (n, 7) float32, the
movable objects' poses (position + quaternion wxyz, robot base frame) in ``info["object_ids"]`` order.

Actions: the robot controller's (:mod:`real2sim.robots.control`); ``ee_delta`` by default:
``[dx, dy, dz, rx, ry, rz, gripper]`` clipped to the action space (``MAX_TRANSLATION`` m and
``MAX_ROTATION`` rad per step, gripper in [0 closed, 1 open]). NaN or a wrong shape raises.
"""
from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np

from real2sim.capture.init import source_camera
from real2sim.capture.undistort import lens_maps
from real2sim.core.articulation import ArticulatedModel
from real2sim.core.bundle import Bundle
from real2sim.core.errors import (
    ExportError,
    Real2SimError,
    UnknownNameError,
    UnsupportedCapability,
    require,
)
from real2sim.core.geometry import make_pose, rotations_to_quats_wxyz
from real2sim.core.manifest import FieldReader, TaskSpec
from real2sim.core.meshes import load_mesh
from real2sim.engines import HybridScene, backend_names, engine_for, get_engine, get_exporter
from real2sim.evaluation.envs import tasks as T
from real2sim.evaluation.envs.observation import (  # noqa: F401  (SHADINGS, resolve_shading: the env's names too)
    SHADINGS,
    apply_shading,
    composite,
    observed_objects,
    rendered_objects,
    resolve_shading,
)
from real2sim.export import failed_engines
from real2sim.robots.control import Controller, ControllerConfig

log = logging.getLogger(__name__)
OBS_MODES = ("composited", "render", "state")
LENSES = ("pinhole", "source")
"""``lens``: the observation as the simulators render it (a pinhole camera), or through the lens of the camera file
``real2sim init`` undistorted the frames of (:mod:`real2sim.capture.undistort`): what the real camera, and a policy
trained on its images, sees."""
MAX_TRANSLATION = 0.05
MAX_ROTATION = 0.25
VARIANT_KEYS = {"background", "camera_jitter_px", "lighting", "robot_tint", "table_tint", "table_texture", "distractors"}
APPEARANCE_VARIANTS = ("lighting", "robot_tint", "table_tint")
PARKING_XY = (50.0, 50.0)
"""Where distractors left out of an episode wait (far outside every camera; they fall freely there)."""
BACKGROUNDS = ("plate", "plate_jitter", "noise")


def _gym():
    return require("gymnasium", "envs")


def _pose7(T: np.ndarray) -> np.ndarray:
    """``(..., 4, 4)`` poses -> ``(..., 7)`` float32 position + wxyz quaternion."""
    T = np.asarray(T, float)
    return np.concatenate([T[..., :3, 3], rotations_to_quats_wxyz(T[..., :3, :3])], -1).astype(np.float32)


def default_backend() -> str:
    """The simulator an evaluation uses unless told otherwise (the registry's first physics engine)."""
    return engine_for("physics").simulator


def load_backend(bundle: Bundle, backend: str):
    """The bundle's export for ``backend`` loaded in its engine."""

    spec = get_engine(backend)
    if "physics" not in spec.capabilities:
        raise UnsupportedCapability(f"engine '{backend}' does not simulate; backends: {', '.join(backend_names())}")
    if spec.parts:  # a hybrid: physics from one engine's export, pictures from another's, posed from the physics
        physics = _load_export(bundle, get_engine(spec.parts[0]))
        try:
            images = _load_export(bundle, get_engine(spec.parts[1]))
        except BaseException:
            physics.close()
            raise
        fixed = [o for o, obj in bundle.manifest.objects.items() if obj.fixed]
        try:
            return HybridScene(physics, images, name=spec.simulator, fixed_ids=fixed)
        except BaseException:
            physics.close()
            images.close()
            raise
    return _load_export(bundle, spec)


def _load_export(bundle: Bundle, spec):
    exp = get_exporter(spec.name)
    d = exp.out_dir(bundle)
    if not d.is_dir():
        raise Real2SimError(f"{d}: no {spec.name} export in this bundle. Fix: run 'real2sim export {bundle.root}'")
    failed = failed_engines(bundle)
    if spec.name in failed:
        raise ExportError(f"{d} is out of date: the last export to {spec.name} failed ({failed[spec.name]})")
    return exp.load(d)


def resolve_task(manifest, task):
    """(task id, TaskSpec) from an id, a TaskSpec or a dict; None picks the bundle's only/first task."""

    if isinstance(task, TaskSpec):
        return "custom", task
    if isinstance(task, dict):
        return task.get("id", "custom"), TaskSpec.parse(FieldReader("<task>"), {k: v for k, v in task.items() if k != "id"}, "task")
    if not manifest.tasks:
        raise Real2SimError(f"bundle '{manifest.name}' defines no tasks. Fix: add a 'tasks' entry to scene.json "
                            "(see docs/evaluation.md) or pass a task dict")
    if task is None:
        tid = sorted(manifest.tasks)[0]
        if len(manifest.tasks) > 1:
            log.info("no task given; using '%s' (bundle has %s)", tid, ", ".join(sorted(manifest.tasks)))
        return tid, manifest.tasks[tid]
    if task not in manifest.tasks:
        raise UnknownNameError("task", task, manifest.tasks)
    return task, manifest.tasks[task]


def _env_base():
    return _gym().Env


class Real2SimEnv(_env_base()):
    """A matched evaluation scene as a Gymnasium env (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 5}

    def __init__(self, bundle_dir, task=None, backend: str | None = None, obs_mode: str = "composited",
                 camera: str | None = None, obs_size: tuple[int, int] | None = None, depth: bool = False,
                 control_mode: str = "ee_delta", privileged: bool = False, variants: dict | None = None,
                 terminate_on_success: bool = True, render_mode: str | None = "rgb_array", scene=None,
                 shading: str = "auto", lens: str = "pinhole"):
        gym = _gym()

        if obs_mode not in OBS_MODES:
            raise UnknownNameError("obs_mode", obs_mode, OBS_MODES)
        if render_mode not in (None, "rgb_array"):
            raise UnsupportedCapability(f"render_mode '{render_mode}' is not supported; use 'rgb_array'")
        self.render_mode = render_mode
        self.bundle = Bundle.load(Path(bundle_dir))
        m = self.bundle.manifest
        self.shading = resolve_shading(m, shading)
        self.backend = backend = backend or default_backend()
        self.scene = scene if scene is not None else load_backend(self.bundle, backend)
        self.scene.require("robot")
        self.scene.require("physics")
        if "appearance" not in self.scene.capabilities:
            self.shading = "lit"  # a scene that cannot change its lights does not render either
        self.movable = observed_objects(self.scene, m)
        self._drawn = rendered_objects(self.scene, m)
        self._fixed = [o for o in self.scene.object_ids() if o in m.objects and m.objects[o].fixed]
        self._articulated = {oid: ArticulatedModel.load(self.bundle.path(o.articulation.urdf))
                             for oid, o in m.objects.items() if o.articulation is not None}
        self.controller = Controller(self.scene, ControllerConfig(mode=control_mode))
        self.variants: dict = {}
        self._bind_task(task)
        self.terminate_on_success = terminate_on_success
        self.privileged = privileged
        self._base_poses = {o: make_pose(m.objects[o].pose.position, m.objects[o].pose.quaternion_wxyz) for o in m.objects}
        self._bounds = self._object_bounds()

        # -- images --------------------------------------------------------------------------------
        self.camera = camera or (sorted(m.cameras)[0] if m.cameras else None)
        mounted = self.scene.mounted_cameras()  # robot-mounted cameras: render only (they have no plate)
        self.obs_mode = obs_mode
        self.depth = bool(depth)
        self.plate = None
        self._plate_obs = None
        if obs_mode != "state" or depth or render_mode:
            if self.camera is None:
                raise UnsupportedCapability(f"bundle '{m.name}' has no camera; use obs_mode='state', depth=False, render_mode=None")
            if self.camera not in m.cameras and self.camera not in mounted:
                raise UnknownNameError("camera", self.camera, sorted(set(m.cameras) | set(mounted)))
        if obs_mode != "state":
            self.scene.require("render")
        if depth:
            self.scene.require("depth")
        if obs_mode == "composited" and self.camera in mounted:
            raise UnsupportedCapability(
                f"camera '{self.camera}' is mounted on the robot (link '{mounted[self.camera]}') and moves with it: "
                "there is no background plate for it, so obs_mode='composited' (plate + simulated foreground) "
                "applies only to fixed cameras. Fix: obs_mode='render' for this camera, or a fixed bundle camera")
        if obs_mode == "composited":
            self.plate = self._load_plate()
            if self.plate is None:
                self.obs_mode = "render"
        if self.camera in mounted:
            cam = self.controller.robot.mounted_cameras()[self.camera][1]
        else:
            cam = m.cameras[self.camera] if self.camera else None
        self.native_size = (cam.width, cam.height) if cam else None
        self.obs_size = tuple(int(x) for x in obs_size) if obs_size else self.native_size
        self.variants = self._check_variants(dict(variants or {}))
        self._variants_given = dict(variants or {})
        self.lens = lens
        self._source_lens = self._source_camera_lens(lens)
        self._lens_maps = None  # ((w, h), map x, map y) at the observation size

        # -- spaces --------------------------------------------------------------------------------
        spaces = gym.spaces
        dof = self.controller.robot.dof
        # qpos stays unbounded: the engines hold joint limits softly (MuJoCo's gripper fingers leave their URDF
        # range under contact), and an observation outside its space would be a false alarm of the env checker.
        # ee_pose: the position within the arm's reach of the base origin (a rigid chain), the quaternion in [-1, 1].
        reach = self.controller.kin.reach() + 1e-4  # + float32 rounding slack
        ee_hi = np.array([reach] * 3 + [1.0] * 4, np.float32)
        obs = {"qpos": spaces.Box(-np.inf, np.inf, (dof,), np.float32),
               "ee_pose": spaces.Box(-ee_hi, ee_hi, (7,), np.float32)}
        if self.obs_mode != "state":
            w, h = self.obs_size
            obs["image"] = spaces.Box(0, 255, (h, w, 3), np.uint8)
        if self.depth:
            w, h = self.obs_size
            obs["depth"] = spaces.Box(0.0, np.inf, (h, w, 1), np.float32)
        if privileged:
            obs["objects"] = spaces.Box(-np.inf, np.inf, (len(self.movable), 7), np.float32)
        self.observation_space = spaces.Dict(obs)
        if control_mode == "ee_delta":
            lo = np.array([-MAX_TRANSLATION] * 3 + [-MAX_ROTATION] * 3 + [0.0], np.float32)
        else:
            kin = self.controller.kin
            lo = np.concatenate([kin.lower[: self.controller.n_arm], [0.0]]).astype(np.float32)
        if control_mode == "ee_delta":
            hi = np.array([MAX_TRANSLATION] * 3 + [MAX_ROTATION] * 3 + [1.0], np.float32)
        else:
            hi = np.concatenate([self.controller.kin.upper[: self.controller.n_arm], [1.0]]).astype(np.float32)
        self.action_space = spaces.Box(lo, hi, dtype=np.float32)
        self._steps = 0
        self._init_poses: dict = {}
        self._episode_variant: dict = {}
        self._last_frame = None

    # -- setup helpers ----------------------------------------------------------------------------
    def _bind_task(self, task) -> None:
        m = self.bundle.manifest
        task_id, spec = resolve_task(m, task)
        T.validate_predicate(spec.success, list(m.objects), f"tasks.{task_id}.success", self._articulated)
        T.validate_init(spec.init, self.movable, self.controller.robot.dof, f"tasks.{task_id}.init")
        joint_terms, link_terms = T.joint_terms(spec.success)
        if joint_terms or link_terms:
            self.scene.require("articulation")
        self.task_id, self.task = task_id, spec
        self._joint_terms, self._link_terms = joint_terms, link_terms
        self.max_steps = max(1, int(round(spec.time_limit_s * self.controller.control_hz)))

    def set_task(self, task) -> None:
        """Switch to another task of the same bundle without reloading the scene, engines or renderer (a task id,
        a TaskSpec or a dict, as ``task=`` of the constructor); the next :meth:`reset` starts an episode of it."""
        if isinstance(task, str) and task == self.task_id:
            return
        previous = (self.task_id, self.task, self.max_steps, self._joint_terms, self._link_terms)
        try:
            self._bind_task(task)
            if self._variants_given.get("distractors") is not None:  # distractors must stay off the task's objects
                self.variants["distractors"] = self._check_distractors(self._variants_given["distractors"])
        except Exception:
            self.task_id, self.task, self.max_steps, self._joint_terms, self._link_terms = previous
            raise

    def _object_bounds(self) -> dict:

        out = {}
        for oid, obj in self.bundle.manifest.objects.items():
            out[oid] = np.asarray(load_mesh(self.bundle.path(obj.visual.mesh)).bounds, float)
        return out

    def _load_plate(self):
        import cv2

        cap = self.bundle.manifest.capture
        if not cap.plate:
            log.warning("bundle '%s' has no background plate: obs_mode 'composited' falls back to 'render' "
                        "(build a plate with 'real2sim plate' for visual matching)", self.bundle.manifest.name)
            return None
        path = self.bundle.path(cap.plate)
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if img is None:
            raise Real2SimError(f"{path}: background plate is unreadable. Fix: rebuild it with 'real2sim plate'")
        cam = self.bundle.manifest.cameras[self.camera]
        if img.shape[:2] != (cam.height, cam.width):
            raise Real2SimError(f"{path}: plate is {img.shape[1]}x{img.shape[0]} but camera '{self.camera}' is "
                                f"{cam.width}x{cam.height}. Fix: rebuild the plate from this camera's frames")
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)

    def _check_variants(self, v: dict) -> dict:
        for k in v:
            if k not in VARIANT_KEYS:
                raise UnknownNameError("variant", k, VARIANT_KEYS)
        if v.get("table_texture"):
            raise UnsupportedCapability("variant 'table_texture': the backends cannot swap textures at run time; "
                                        "'table_tint' varies the table's colours")
        if v.get("distractors") is not None:
            v["distractors"] = self._check_distractors(v["distractors"])
        for k in APPEARANCE_VARIANTS:
            if v.get(k) is not None:
                self.scene.require("appearance")
        if self.shading == "unlit" and self.obs_mode != "state":
            self.scene.require("appearance")
        if v.get("lighting") is not None:
            lo_hi = v["lighting"]
            if (not isinstance(lo_hi, (list, tuple)) or len(lo_hi) != 2
                    or not all(isinstance(x, (int, float)) and 0 < x <= 4 for x in lo_hi) or lo_hi[0] > lo_hi[1]):
                raise Real2SimError(f"variant 'lighting' must be [min_scale, max_scale] with 0 < min <= max <= 4 "
                                    f"(1 = as exported), got {lo_hi!r}")
        for k in ("robot_tint", "table_tint"):
            a = v.get(k)
            if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a < 1):
                raise Real2SimError(f"variant '{k}' is the amplitude a of per-channel colour factors drawn in "
                                    f"[1 - a, 1 + a]; it must be a number in [0, 1), got {a!r}")
        if v.get("table_tint") is not None and not self._fixed:
            raise UnsupportedCapability("variant 'table_tint' tints the bundle's fixed objects (the table); this bundle "
                                        "has none")
        if v.get("table_tint") and self.obs_mode == "composited":
            raise UnsupportedCapability("variant 'table_tint' changes the rendered table, but obs_mode 'composited' "
                                        "shows the plate there; use background='plate_jitter', or obs_mode 'render'")
        bg = v.get("background", "plate")
        if bg not in BACKGROUNDS:
            raise UnknownNameError("background variant", bg, BACKGROUNDS)
        if bg != "plate" and self.obs_mode != "composited":
            raise UnsupportedCapability(f"variant background='{bg}' needs obs_mode 'composited' with a plate "
                                        f"(obs_mode in force: '{self.obs_mode}')")
        if v.get("camera_jitter_px") and self.obs_mode == "state":
            raise UnsupportedCapability("variant camera_jitter_px needs an image observation")
        return v

    def _check_distractors(self, spec) -> dict:
        """``{"objects": [ids], "count": [min, max], "xy": [[x0, y0], [x1, y1]], "min_separation": m}``
        (``min_separation``: the gap in metres kept between footprints, default 0.01)."""
        usage = ("variant 'distractors' must be {\"objects\": [ids], \"count\": [min, max], \"xy\": [[x0, y0], "
                 "[x1, y1]]} (bundle objects not in the task; each episode places min..max of them in the box, "
                 "world metres)")
        if not isinstance(spec, dict) or not spec.get("objects") or "xy" not in spec:
            raise Real2SimError(f"{usage}; got {spec!r}")
        unknown = set(spec) - {"objects", "count", "xy", "min_separation"}
        if unknown:
            raise UnknownNameError("distractors field", sorted(unknown)[0], ["objects", "count", "xy", "min_separation"])
        objs = list(spec["objects"])
        task_objs = set(self.task.init.get("objects", {})) | set(T.referenced_objects(self.task.success))
        for oid in objs:
            if oid not in self.movable:
                raise UnknownNameError("movable object (distractor)", oid, self.movable)
            if oid in task_objs:
                raise Real2SimError(f"variant 'distractors': '{oid}' is part of task '{self.task_id}'; list other objects")
        lo, hi = (list(spec.get("count", [0, len(objs)])) + [None])[:2]
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in (lo, hi)) or not 0 <= lo <= hi <= len(objs):
            raise Real2SimError(f"variant 'distractors': count must be [min, max] integers with 0 <= min <= max <= "
                                f"{len(objs)} (the objects listed), got {spec.get('count')!r}")
        try:
            box = np.asarray(spec["xy"], float).reshape(2, 2)
        except (TypeError, ValueError):
            raise Real2SimError(f"{usage}; 'xy' is {spec['xy']!r}") from None
        if not (box[1] > box[0]).all():
            raise Real2SimError(f"variant 'distractors': 'xy' must be [[x0, y0], [x1, y1]] with x1 > x0 and y1 > y0, "
                                f"got {box.tolist()}")
        return {"objects": objs, "count": [lo, hi], "xy": box.tolist(),
                "min_separation": float(spec.get("min_separation", 0.01))}

    def _footprint(self, oid: str) -> float:
        """Radius (m) of the object's footprint on the table around its frame origin, in its bundle orientation."""
        lo, hi = self._bounds[oid]
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        xy = (corners @ self._base_poses[oid][:3, :3].T)[:, :2]
        return float(np.linalg.norm(xy, axis=1).max())

    def _place_distractors(self, rng, placed: dict) -> list[str]:
        """Put this episode's distractors on the table (apart from the task's objects); park the others."""
        spec = self.variants.get("distractors")
        if not spec:
            return []
        objs, (lo, hi) = spec["objects"], spec["count"]
        k = int(rng.integers(lo, hi + 1))
        chosen = [objs[i] for i in sorted(rng.choice(len(objs), size=k, replace=False))] if k else []
        (x0, y0), (x1, y1) = spec["xy"]
        taken = [(P[:2, 3], self._footprint(o)) for o, P in placed.items()]
        taken += [(self._base_poses[o][:2, 3], self._footprint(o)) for o in self.movable
                  if o not in placed and o not in objs]
        for oid in chosen:
            r = self._footprint(oid)
            for _ in range(100):
                xy = np.array([rng.uniform(x0, x1), rng.uniform(y0, y1)])
                if all(np.linalg.norm(xy - t) >= r + rt + spec["min_separation"] for t, rt in taken):
                    break
            else:
                log.warning("distractors: no free place for '%s' in %s after 100 draws; it may touch another object",
                            oid, spec["xy"])
            taken.append((xy, r))
            self.scene.set_object_pose(oid, T.place_xy_yaw(self._base_poses[oid], xy[0], xy[1], rng.uniform(-np.pi, np.pi)))
        for i, oid in enumerate(o for o in objs if o not in chosen):
            self.scene.set_object_pose(oid, T.place_xy_yaw(self._base_poses[oid], PARKING_XY[0] + 2.0 * i,
                                                           PARKING_XY[1], 0.0))
        return chosen

    # -- gym API ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        init = self.task.init
        self.scene.reset_state()
        q = np.asarray(init.get("robot_qpos", self.scene.robot_qpos()), float)
        noise = float(init.get("robot_qpos_noise", 0.0))
        if noise > 0:
            n_arm = self.controller.n_arm
            q[:n_arm] = np.clip(q[:n_arm] + rng.normal(0.0, noise, n_arm), self.controller.kin.lower[:n_arm],
                                self.controller.kin.upper[:n_arm])
        placed = T.sample_init(init, self._base_poses, rng, seed)
        for oid, pose in placed.items():
            self.scene.set_object_pose(oid, pose)
        distractors = self._place_distractors(rng, placed)
        self.controller.reset(q)
        settle = int(round(float(init.get("settle_s", 0.2)) / self.scene.physics_timestep))
        self.scene.step_physics(settle)
        self.controller.reset(self.scene.robot_qpos())
        self._init_poses = self._poses()
        self._steps = 0
        self._episode_variant = self._draw_variant(rng)
        self._apply_appearance()
        obs = self._obs()
        info = self._info(success=False)
        info["object_bounds"] = {o: b.tolist() for o, b in self._bounds.items()}
        info["robot_base_pose"] = self.scene.robot_base_pose().tolist()
        # the robot and its controller (a privileged policy can mirror the controller's IK: the scripted oracle
        # checks that its waypoints are reachable along the way before it moves)
        rdef = self.scene.robot_def()  # the export's packaged definition file where it has one
        info["robot"] = str(rdef.source["definition"]) if rdef.source.get("kind") == "file" else rdef.name
        info["controller"] = {"mode": self.controller.config.mode, "ik_iters": int(self.controller.config.ik_iters)}
        if self._joint_terms:
            info["joints"] = self._joint_info()
        info["init"] = {o: [round(float(x), 6) for x in (*P[:3, 3], np.arctan2(P[1, 0], P[0, 0]))]
                        for o, P in placed.items()}
        info["variant"] = {k: np.round(np.asarray(v, float), 4).tolist() for k, v in self._episode_variant.items()
                           if k != "noise"}
        if self.variants.get("distractors"):
            info["variant"]["distractors"] = distractors
        return obs, info

    def step(self, action):
        a = np.asarray(action, dtype=float)
        if a.shape != self.action_space.shape:
            raise Real2SimError(f"action must have shape {self.action_space.shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise Real2SimError(f"action has NaN or inf: {a.tolist()}")
        a = np.clip(a, self.action_space.low, self.action_space.high)
        self.controller.step(a)
        self._steps += 1
        success = self.success()
        terminated = bool(success and self.terminate_on_success)
        truncated = bool(self._steps >= self.max_steps and not terminated)
        return self._obs(), float(success), terminated, truncated, self._info(success)

    def render(self):
        if self.render_mode is None:
            return None
        if self._last_frame is not None:
            return self._last_frame
        return self._image()[0]

    def close(self):
        if getattr(self, "scene", None) is not None:
            self.scene.close()
            self.scene = None

    # -- state --------------------------------------------------------------------------------------
    def _poses(self) -> dict:
        return {o: self.scene.object_pose(o) for o in self.bundle.manifest.objects if o in self.scene.object_ids()}

    def success(self) -> bool:
        """Whether the task's success predicate holds now."""
        joints = {}
        for oid, name in self._joint_terms:
            j = self._articulated[oid].joint(name)
            joints[(oid, name)] = (self.scene.object_joint_positions(oid)[name], j.lower, j.upper)
        links = {(oid, link): (self.scene.object_link_pose(oid, link), self._link_bounds(oid, link))
                 for oid, link in self._link_terms}
        return T.evaluate(self.task.success, self._poses(), self._bounds, self._init_poses, joints, links)

    def _joint_info(self) -> list[dict]:
        """What an oracle needs to move each joint the task names (world frame): the joint's position and limits,
        the unit direction its child link moves in as the joint opens (prismatic), the centre of that link's face on
        that side (where to push it closed, or to pull it open from) and the height of the object's top (at the
        bundle's joint positions) to pass over."""
        out = []
        for oid, name in sorted(self._joint_terms):
            model = self._articulated[oid]
            j = model.joint(name)
            Tl = self.scene.object_link_pose(oid, j.child)
            box = self._link_bounds(oid, j.child)
            c, ext = (box[0] + box[1]) / 2, (box[1] - box[0]) / 2
            face = c + j.axis * float(np.abs(j.axis) @ ext)
            top = T.world_box(self.scene.object_pose(oid), self._bounds[oid])[1][2]
            out.append({"object": oid, "joint": name, "type": j.type, "position": self.scene.object_joint_positions(oid)[name],
                        "top": float(top),
                        "lower": j.lower, "upper": j.upper, "axis": (Tl[:3, :3] @ j.axis).tolist(),
                        "face": (Tl[:3, :3] @ face + Tl[:3, 3]).tolist()})
            handle = model.link_handle(j.child, j.axis) if j.type == "prismatic" else None
            if handle is not None:  # what a hand grips to pull it open (its centre and size, world frame)
                hc = (handle[0] + handle[1]) / 2
                out[-1]["handle"] = (Tl[:3, :3] @ hc + Tl[:3, 3]).tolist()
                out[-1]["handle_size"] = (np.abs(Tl[:3, :3]) @ (handle[1] - handle[0])).tolist()
        return out

    def _link_bounds(self, oid: str, link: str) -> np.ndarray:
        key = (oid, link)
        cache = self.__dict__.setdefault("_link_bounds_cache", {})
        if key not in cache:
            cache[key] = self._articulated[oid].link_bounds(link)
        return cache[key]

    def _info(self, success: bool) -> dict:
        extra = {"object_joints": {o: self.scene.object_joint_positions(o) for o in self._articulated
                                   if o in self.scene.object_ids()}} if self._articulated else {}
        return {**extra, "success": bool(success), "instruction": self.task.instruction, "task_id": self.task_id,
                "task": copy.deepcopy({"success": self.task.success, "instruction": self.task.instruction}),
                "object_ids": list(self.movable), "elapsed_steps": self._steps, "max_steps": self.max_steps}

    def _draw_variant(self, rng) -> dict:
        v = {}
        bg = self.variants.get("background", "plate")
        if bg == "plate_jitter":
            v["gain"] = rng.uniform(0.8, 1.2, 3)
            v["bias"] = rng.uniform(-20, 20, 3)
        elif bg == "noise":
            w, h = self.obs_size
            v["noise"] = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        j = float(self.variants.get("camera_jitter_px", 0) or 0)
        if j > 0:
            v["shift"] = rng.integers(-int(j), int(j) + 1, 2)
        if self.variants.get("lighting") is not None:
            v["light_scale"] = float(rng.uniform(*self.variants["lighting"]))
        for k in ("robot_tint", "table_tint"):
            a = self.variants.get(k)
            if a is not None:
                v[k] = rng.uniform(1.0 - a, 1.0 + a, 3)
        return v

    def _apply_appearance(self) -> None:
        """Lights and colours of this episode's variant (the exported ones when it has none)."""
        if self.shading == "lit" and not any(self.variants.get(k) is not None for k in APPEARANCE_VARIANTS):
            return
        ev = self._episode_variant
        apply_shading(self.scene, self.shading, ev.get("light_scale", 1.0))
        if self.variants.get("robot_tint") is not None:
            self.scene.set_tint("robot", ev["robot_tint"])
        if self.variants.get("table_tint") is not None:
            for oid in self._fixed:
                self.scene.set_tint(oid, ev["table_tint"])

    def _plate_at_obs_size(self) -> np.ndarray:
        if self._plate_obs is None or self._plate_obs[0] != self.obs_size:
            import cv2

            same = self.obs_size == (self.plate.shape[1], self.plate.shape[0])
            plate = self.plate if same else cv2.resize(self.plate, self.obs_size, interpolation=cv2.INTER_AREA)
            self._plate_obs = (self.obs_size, plate)
        return self._plate_obs[1]

    def _background(self) -> np.ndarray:
        ev = self._episode_variant
        if "noise" in ev:
            return ev["noise"]
        plate = self._plate_at_obs_size()
        if "gain" in ev:
            return np.clip(plate.astype(np.float32) * ev["gain"] + ev["bias"], 0, 255).astype(np.uint8)
        return plate

    def _image(self):
        """(image at obs size, depth at obs size or None); composites when obs_mode is 'composited'.

        The engines render at the observation size directly (the camera's intrinsics scaled per axis: the same
        view a resize of the full render gives, at a fraction of the cost)."""
        import cv2

        size = None if self.obs_size == self.native_size else self.obs_size
        if self.obs_mode == "composited":
            img, _, d = composite(self.scene, self.camera, self._drawn, self._background(), size, self.depth)
        else:
            img = self.scene.render(self.camera, size=size)
            d = self.scene.depth(self.camera, size=size) if self.depth else None
        if "shift" in self._episode_variant:  # image-space camera jitter (a translation in native pixels)
            sx, sy = self.obs_size[0] / self.native_size[0], self.obs_size[1] / self.native_size[1]
            dx, dy = (float(x) for x in self._episode_variant["shift"])
            M = np.float32([[1, 0, dx * sx], [0, 1, dy * sy]])
            img = cv2.warpAffine(img, M, (img.shape[1], img.shape[0]), borderMode=cv2.BORDER_REPLICATE)
            if d is not None:
                d = cv2.warpAffine(d, M, (d.shape[1], d.shape[0]), flags=cv2.INTER_NEAREST, borderMode=cv2.BORDER_REPLICATE)
        if self._source_lens is not None:
            img, d = self._through_source_lens(img, d)
        return img, d

    def _source_camera_lens(self, lens: str):
        """The source camera whose lens ``lens='source'`` images go through, or ``None`` for ``'pinhole'``."""
        if lens not in LENSES:
            raise UnknownNameError("lens", lens, LENSES)
        if lens == "pinhole":
            return None
        src = source_camera(self.bundle) if self.camera == "main" else None
        if src is None:
            raise UnsupportedCapability(
                f"lens='source' images the scene through the lens of the camera file 'real2sim init' undistorted the "
                f"frames of, but camera '{self.camera}' of bundle '{self.bundle.manifest.name}' has none (its frames "
                "were captured as they are): use lens='pinhole'")
        return src

    def _through_source_lens(self, img: np.ndarray, d: np.ndarray | None):
        """The observation as the real camera's lens shows it (``lens='source'``)."""
        import cv2

        if self._lens_maps is None or self._lens_maps[0] != self.obs_size:
            self._lens_maps = (self.obs_size, *lens_maps(self._source_lens, self.obs_size))
        _, mx, my = self._lens_maps
        img = cv2.remap(img, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        if d is not None:
            d = cv2.remap(d, mx, my, cv2.INTER_NEAREST, borderMode=cv2.BORDER_REPLICATE)
        return img, d

    def _obs(self) -> dict:
        obs = {"qpos": self.scene.robot_qpos().astype(np.float32),
               "ee_pose": _pose7(self.controller.ee_pose_base())}
        self._last_frame = None
        if self.obs_mode != "state" or self.depth:
            img, d = self._image()
            if self.obs_mode != "state":
                obs["image"] = img
                self._last_frame = img
            if self.depth:
                obs["depth"] = d[..., None].astype(np.float32)
        if self.privileged:
            base_inv = np.linalg.inv(self.scene.robot_base_pose())
            poses = np.asarray([self.scene.object_pose(o) for o in self.movable], float).reshape(-1, 4, 4)
            obs["objects"] = _pose7(base_inv @ poses).reshape(len(self.movable), 7)
        return obs


__all__ = ["OBS_MODES", "Real2SimEnv", "load_backend", "resolve_task"]
