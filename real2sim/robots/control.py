"""One controller for every engine: joint position targets, end-effector delta pose, gripper.

The controller talks to an engine only through :class:`export.base.LoadedScene` robot methods,
and computes every joint target itself (IK in :mod:`real2sim.robots.kinematics`), so the same
action gives the same joint targets in MuJoCo, SAPIEN or any other backend; only the physics
that follows differs.

Action spaces (``ControllerConfig.mode``):

``"ee_delta"`` (default, Bridge/SIMPLER): ``[dx, dy, dz, rx, ry, rz, gripper]``.
    Translation ``(dx, dy, dz)`` in metres in the **robot base frame**; rotation ``(rx, ry, rz)``
    an axis-angle vector expressed in the **base-aligned frame at the end effector**
    (``R_new = exp([r]) @ R_old``, rotating about the EE point, axes parallel to the base) --
    SIMPLER's ``root_translation:root_aligned_body_rotation``. The delta is applied to the
    previous *target* pose (not the measured one), so tracking error does not accumulate.
``"joint_pos"``: absolute arm joint targets followed by ``gripper``.

``gripper`` is the opening in [0 (closed), 1 (open)], mapped linearly onto the robot's gripper
joint values. Each ``step`` sets the targets then runs ``physics_hz / control_hz`` physics steps.
Drives: force = K (q* - q) - D qdot per joint (engine-native PD; gains from the bundle or fitted).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from real2sim.core.errors import Real2SimError
from real2sim.robots.kinematics import Kinematics, so3_exp

log = logging.getLogger(__name__)
MODES = ("ee_delta", "joint_pos")


@dataclass
class ControllerConfig:
    mode: str = "ee_delta"
    control_hz: float | None = None  # None: the robot's default (WidowX 5 Hz)
    physics_hz: float | None = None  # None: the robot's default (500 Hz)
    ik_iters: int = 50


class Controller:
    """Drives the robot of a loaded scene (capability ``"robot"``)."""

    def __init__(self, scene, config: ControllerConfig | None = None, kinematics: Kinematics | None = None):
        scene.require("robot")
        self.scene = scene
        self.config = config or ControllerConfig()
        if self.config.mode not in MODES:
            raise Real2SimError(f"unknown controller mode '{self.config.mode}'; use one of {MODES}")
        self.robot = scene.robot_def()
        self.kin = kinematics or Kinematics(self.robot)
        self.control_hz = float(self.config.control_hz or self.robot.control_hz)
        self.physics_hz = float(self.config.physics_hz or self.robot.physics_hz)
        self.substeps = int(round(self.physics_hz / self.control_hz))
        if self.substeps < 1 or abs(self.substeps * self.control_hz - self.physics_hz) > 1e-6 * self.physics_hz:
            raise Real2SimError(f"physics rate {self.physics_hz} Hz must be a whole multiple of the control rate "
                                f"{self.control_hz} Hz")
        scene.set_physics_timestep(1.0 / self.physics_hz)
        self.n_arm = self.robot.n_arm
        self.action_dim = (7 if self.config.mode == "ee_delta" else self.n_arm + 1)
        self.reset()

    # -- state ----------------------------------------------------------------------------
    def reset(self, qpos=None) -> None:
        """Teleport to ``qpos`` (default: current) and make it the target."""
        q = self.scene.robot_qpos() if qpos is None else np.asarray(qpos, float)
        self.scene.set_robot_qpos(q)
        self.q_target = q.copy()
        self.T_target = self.kin.fk(q)  # base frame

    def ee_pose(self) -> np.ndarray:
        """Measured end-effector pose in the world."""
        return self.scene.link_pose(self.robot.ee_link) @ self.kin.T_link_ee

    def ee_pose_base(self) -> np.ndarray:
        """Measured end-effector pose in the robot base frame."""
        return np.linalg.inv(self.scene.robot_base_pose()) @ self.ee_pose()

    # -- actions ----------------------------------------------------------------------------
    def targets(self, action) -> np.ndarray:
        """Joint targets for ``action`` (updates the internal target state)."""
        a = np.asarray(action, float)
        if a.shape != (self.action_dim,) or not np.all(np.isfinite(a)):
            raise Real2SimError(f"action must be {self.action_dim} finite numbers for mode '{self.config.mode}', "
                                f"got shape {a.shape}")
        grip = self.robot.gripper_targets(a[-1])
        if self.config.mode == "ee_delta":
            T = self.T_target.copy()
            T[:3, 3] += a[:3]
            T[:3, :3] = so3_exp(a[3:6]) @ T[:3, :3]
            qa, ok = self.kin.ik(T, self.q_target, iters=self.config.ik_iters)
            if not ok:
                log.debug("IK did not converge; using the closest solution")
            self.T_target = T if ok else self.kin.fk(np.concatenate([qa, self.q_target[self.n_arm:]]))
        else:
            qa = np.clip(a[: self.n_arm], self.kin.lower[: self.n_arm], self.kin.upper[: self.n_arm])
            self.T_target = self.kin.fk(np.concatenate([qa, grip]))
        self.q_target = np.concatenate([qa, grip])
        return self.q_target

    def step(self, action) -> None:
        """Apply one control step: set joint targets, run the physics substeps."""
        self.scene.set_joint_targets(self.targets(action))
        self.scene.step_physics(self.substeps)

    def set_gains(self, stiffness, damping) -> None:
        self.scene.set_joint_gains(stiffness, damping)


def replay(controller: Controller, actions, qpos0) -> tuple[np.ndarray, np.ndarray]:
    """Open-loop replay from ``qpos0``: returns (EE poses in the base frame ``(T+1, 4, 4)``, joints ``(T+1, dof)``)."""
    controller.reset(qpos0)
    poses = [controller.ee_pose_base()]
    qs = [controller.scene.robot_qpos()]
    for a in actions:
        controller.step(a)
        poses.append(controller.ee_pose_base())
        qs.append(controller.scene.robot_qpos())
    return np.asarray(poses), np.asarray(qs)
