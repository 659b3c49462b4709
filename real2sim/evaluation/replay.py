"""Play a recorded episode back: its actions open loop in either engine, its states as the reference.

The env is rebuilt from the episode's ``env_config`` (bundle, task, control mode, the variants that shape physics) in
``obs_mode="state"`` and reset with the episode's seed, which places the objects and the robot as recorded. In
another engine than the one that recorded, the recorded start state (joints and object poses, frame 0) is set after
the reset, so the replay measures how the engines' dynamics differ, not how their settling differs. Then every
recorded action goes through ``env.step`` and the state after action ``t`` is compared with frame ``t + 1``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.geometry import make_pose
from real2sim.evaluation.lerobot import DatasetError, read_episode
from real2sim.evaluation.record import replay_env_kwargs, sim_state

log = logging.getLogger(__name__)


@dataclass
class ReplayReport:
    """State error of a replay against the recording (max over the compared frames)."""

    episode: int
    backend: str
    recorded_backend: str
    frames: int
    start_state_set: bool
    """True when the recorded start state was set after reset (a replay in another engine)."""
    joint_error: float
    """Largest joint position difference, rad (m for prismatic joints such as the gripper fingers)."""
    ee_error_m: float
    """Largest end-effector position difference, m."""
    object_error_m: float
    """Largest movable-object position difference, m (0 when the scene has none)."""
    recorded_success: bool
    replay_success: bool
    per_frame: dict = field(default_factory=dict)
    """``joint``, ``ee_m``, ``object_m``: ``(frames,)`` errors, frame 0 = the start state."""

    def to_json(self) -> dict:
        d = asdict(self)
        d["per_frame"] = {k: [round(float(x), 7) for x in v] for k, v in self.per_frame.items()}
        return d


def _set_state(env, frame: dict) -> None:
    """Put the robot and the movable objects where frame 0 recorded them (poses in the robot base frame)."""
    base = env.scene.robot_base_pose()
    poses = np.asarray(frame["observation.environment_state"], float).reshape(-1, 7)
    for oid, p in zip(env.movable, poses):
        env.scene.set_object_pose(oid, base @ make_pose(p[:3], p[3:]))
    env.controller.reset(np.asarray(frame["observation.state"], float))


def _errors(rec: dict, now: dict) -> tuple[float, float, float]:
    joint = float(np.abs(rec["observation.state"] - now["observation.state"]).max())
    ee = float(np.linalg.norm(rec["observation.ee_pose"][:3] - now["observation.ee_pose"][:3]))
    a = np.asarray(rec["observation.environment_state"], float).reshape(-1, 7)
    b = np.asarray(now["observation.environment_state"], float).reshape(-1, 7)
    obj = float(np.linalg.norm(a[:, :3] - b[:, :3], axis=1).max()) if len(a) else 0.0
    return joint, ee, obj


def replay_episode(root, episode: int = 0, backend: str | None = None, bundle_dir=None) -> ReplayReport:
    """Replay episode ``episode`` of the dataset at ``root`` in ``backend`` (default: the one that recorded it)."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    ep = read_episode(root, int(episode))
    row, frames = ep["row"], ep["frames"]
    for key in ("env_config", "seed", "backend"):
        if key not in row:
            raise DatasetError(f"{root}: meta/episodes has no '{key}' column: replay needs a dataset real2sim recorded "
                               "(real2sim eval --record lerobot DIR)")
    cfg = json.loads(row["env_config"])
    bundle = Path(bundle_dir or cfg["bundle_dir"])
    if not (bundle / "scene.json").is_file():
        raise DatasetError(f"{bundle}: the bundle episode {episode} was recorded in is not there. Fix: pass --bundle "
                           "with the scene bundle folder")
    recorded_backend = row["backend"]
    backend = backend or recorded_backend
    env = Real2SimEnv(bundle, task=cfg["task"], backend=backend, obs_mode="state", render_mode=None,
                      control_mode=cfg["control_mode"], **replay_env_kwargs(cfg.get("env_kwargs", {})))
    try:
        names = ("observation.state", "observation.ee_pose", "observation.environment_state")
        recorded = [{k: frames[k][t] for k in names} for t in range(len(frames["action"]))]
        env.reset(seed=int(row["seed"]))
        start_set = backend != recorded_backend
        if start_set:
            _set_state(env, recorded[0])
        errs = [_errors(recorded[0], sim_state(env))]
        info = {"success": False}
        for t, action in enumerate(frames["action"]):
            _, _, _, _, info = env.step(np.asarray(action, float))
            if t + 1 < len(recorded):
                errs.append(_errors(recorded[t + 1], sim_state(env)))
        e = np.asarray(errs)
        return ReplayReport(int(episode), backend, recorded_backend, len(recorded), start_set, float(e[:, 0].max()),
                            float(e[:, 1].max()), float(e[:, 2].max()), bool(row["success"]), bool(info["success"]),
                            {"joint": e[:, 0], "ee_m": e[:, 1], "object_m": e[:, 2]})
    finally:
        env.close()


__all__ = ["ReplayReport", "replay_episode"]
