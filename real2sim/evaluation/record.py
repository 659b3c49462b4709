"""Recording rollouts: the per-step hook the episode runner calls, and the datasets episodes go to.

In each worker an :class:`EpisodeRecorder` receives every step (observation, action, the env's state) and leaves the
finished episode in a staging folder (arrays + one encoded video per camera, written as the episode runs); the process
that owns the dataset moves it in with :meth:`LeRobotWriter.add` when the episode's result comes back. Workers never
touch the dataset's tables, so local pools and Ray workers record the same way (Ray workers need the dataset folder
on a shared file system).

``FORMATS`` names the formats ``real2sim eval --record FORMAT DIR`` writes (``lerobot``: :mod:`.lerobot`).
"""
from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

import numpy as np

from real2sim.core.errors import UnknownNameError
from real2sim.core.geometry import matrix_to_quat_wxyz
from real2sim.evaluation.lerobot import BackgroundVideoWriter, LeRobotWriter, image_stats

log = logging.getLogger(__name__)

FORMATS = ("lerobot",)
POSE_NAMES = ("x", "y", "z", "qw", "qx", "qy", "qz")
IMAGE_ONLY_VARIANTS = ("background", "camera_jitter_px", "lighting", "robot_tint", "table_tint")
"""Variants that change only images (no physics): replay leaves them out."""


STATS_STRIDE = 4
"""Image stats read every 4th pixel per axis of every other frame."""


def _own(img):
    """A copy of an observation image: an env may render the next step into the same buffer."""
    return None if img is None else np.array(img, copy=True)


def open_dataset(fmt: str, root, resume: bool = False) -> LeRobotWriter:
    """The dataset a run records into (refuses a folder that exists unless ``resume``)."""
    if fmt not in FORMATS:
        raise UnknownNameError("record format", fmt, FORMATS)
    return LeRobotWriter(root, resume=resume)


def camera_key(camera: str) -> str:
    return f"observation.images.{camera}"


def sim_state(env) -> dict:
    """The env's state as recorded: ``observation.state`` joint positions ``(dof,)``, ``observation.ee_pose`` ``(7,)``
    and ``observation.environment_state`` ``(n * 7,)`` (movable objects, robot base frame, quaternion wxyz)."""
    base_inv = np.linalg.inv(env.scene.robot_base_pose())
    objs = []
    for oid in env.movable:
        P = base_inv @ env.scene.object_pose(oid)
        objs.append(np.concatenate([P[:3, 3], matrix_to_quat_wxyz(P[:3, :3])]))
    P = env.controller.ee_pose_base()
    return {"observation.state": np.asarray(env.scene.robot_qpos(), np.float32),
            "observation.ee_pose": np.concatenate([P[:3, 3], matrix_to_quat_wxyz(P[:3, :3])]).astype(np.float32),
            "observation.environment_state": np.asarray(np.concatenate(objs) if objs else np.zeros(0), np.float32)}


def state_names(env) -> dict:
    return {"observation.state": list(env.scene.robot_joint_names()),
            "observation.ee_pose": list(POSE_NAMES),
            "observation.environment_state": [f"{o}.{c}" for o in env.movable for c in POSE_NAMES],
            "action": _action_names(env)}


def _action_names(env) -> list[str]:
    if env.controller.config.mode == "ee_delta":
        return ["dx", "dy", "dz", "rx", "ry", "rz", "gripper"]
    return [f"{j}.target" for j in env.scene.robot_joint_names()[: env.controller.n_arm]] + ["gripper"]


def replay_env_kwargs(env_kwargs: dict) -> dict:
    """The env settings that shape the physics of an episode (image-only variants and shading removed)."""
    kw = {k: v for k, v in env_kwargs.items() if k != "shading"}
    if kw.get("variants"):
        kw["variants"] = {k: v for k, v in kw["variants"].items() if k not in IMAGE_ONLY_VARIANTS}
        if not kw["variants"]:
            kw.pop("variants")
    return kw


class EpisodeRecorder:
    """One episode's frames, collected in a worker (see the module docstring).

    Frame ``t`` pairs the observation before action ``t`` with the action and the step's outcome; the observation
    after the last action is not a frame (LeRobot's convention). An episode that raises leaves its staging folder
    behind; the dataset's owner clears the staging area when it opens and closes."""

    def __init__(self, staging: Path, env, env_config: dict):
        self.dir = Path(staging) / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.dir.mkdir(parents=True)
        self.env = env
        self.fps = float(env.controller.control_hz)
        self.env_config = env_config
        self.columns: dict[str, list] = {k: [] for k in ("action", "next.reward", "next.success", "next.done")}
        self._state = sim_state(env)
        for k in self._state:
            self.columns[k] = []
        self.video: BackgroundVideoWriter | None = None
        self.key = camera_key(env.camera) if env.camera else None
        self._frames_for_stats: list[np.ndarray] = []
        self._pending_image = None

    def start(self, obs: dict) -> None:
        """The observation after reset (frame 0's)."""
        self._pending_image = _own(obs.get("image"))

    def step(self, action, obs: dict, success: bool) -> None:
        """After ``env.step(action)`` returned ``obs``: closes the frame of the previous observation."""
        env = self.env
        a = np.clip(np.asarray(action, float), env.action_space.low, env.action_space.high)
        for k, v in self._state.items():
            self.columns[k].append(v)
        self.columns["action"].append(a.astype(np.float32))
        self.columns["next.reward"].append(np.float32(success))
        self.columns["next.success"].append(bool(success))
        self.columns["next.done"].append(False)  # the last frame's is set by finish()
        self._write_image(self._pending_image)
        self._pending_image = _own(obs.get("image"))
        self._state = sim_state(env)

    def _write_image(self, img) -> None:
        if img is None:
            return
        if self.video is None:
            h, w = img.shape[:2]
            self.video = BackgroundVideoWriter(self.dir / "video.mp4", self.fps, w, h)
        self.video.add(img)  # the recorder's own copy (_own)
        if len(self._frames_for_stats) < 400 and self.video.queued % 2 == 1:  # every other frame, enough for stats
            self._frames_for_stats.append(img[::STATS_STRIDE, ::STATS_STRIDE].copy())

    def finish(self) -> str:
        """Close the video and write the arrays; returns the staging folder for the dataset's owner."""
        env = self.env
        if self.columns["next.done"]:
            self.columns["next.done"][-1] = True
        videos = {}
        if self.video is not None:
            self.video.close()
            h, w = env.obs_size[1], env.obs_size[0]
            videos[self.key] = {"file": "video.mp4", "height": h, "width": w, "pix_fmt": self.video.pix_fmt,
                                "stats": image_stats(self._frames_for_stats, step=1)}
        names = state_names(env)
        arrays = {k: np.asarray(v) for k, v in self.columns.items()}
        for k in list(names):
            if k in arrays:
                arrays[k] = arrays[k].reshape(len(arrays["action"]), -1)
        np.savez(self.dir / "frames.npz", **arrays)
        robot = env.bundle.manifest.robot
        meta = {"fps": self.fps, "instruction": env.task.instruction, "videos": videos,
                "names": {k: names[k] for k in ("observation.state", "observation.ee_pose",
                                                "observation.environment_state", "action")},
                "robot_type": robot.name if robot is not None else env.scene.robot_name(),
                "env_config": self.env_config,
                "dataset": {"format": "real2sim rollouts", "bundle_dir": self.env_config["bundle_dir"],
                            "control_mode": env.controller.config.mode, "control_hz": self.fps,
                            "action_low": env.action_space.low.tolist(), "action_high": env.action_space.high.tolist(),
                            "state": "observation.state = joint positions (rad / m); observation.ee_pose and "
                                     "observation.environment_state: position + quaternion wxyz, robot base frame",
                            "objects": list(env.movable)}}
        (self.dir / "episode.json").write_text(json.dumps(meta))
        return str(self.dir)


def env_config(cfg, env) -> dict:
    """What builds this episode's env again (the runner's EvalConfig + the env in force)."""
    return {"bundle_dir": str(cfg.bundle_dir), "task": env.task_id, "backend": env.backend, "obs_mode": env.obs_mode,
            "obs_size": list(env.obs_size) if env.obs_size else None, "control_mode": env.controller.config.mode,
            "env_kwargs": dict(cfg.env_kwargs)}


__all__ = ["FORMATS", "EpisodeRecorder", "env_config", "open_dataset", "replay_env_kwargs", "sim_state"]
