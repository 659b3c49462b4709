"""Engine-independent kinematics (pinocchio): forward kinematics and damped least-squares IK.

All poses are ``(4, 4)`` matrices of the end-effector frame (``RobotDef.ee_link`` composed with
``ee_offset``) in the **robot base frame** (the URDF root link). Joint vectors follow
``RobotDef.joint_names`` (arm joints, then gripper joints); ``ik`` solves for the arm joints only.
"""
from __future__ import annotations

import logging

import numpy as np

from real2sim.core.errors import UnknownNameError, require
from real2sim.core.geometry import make_pose
from real2sim.robots import get_robot, robot_urdf
from real2sim.robots.spec import RobotDef

log = logging.getLogger(__name__)


def _so3_log(R: np.ndarray) -> np.ndarray:
    """Axis-angle vector of a rotation matrix."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if angle < 1e-7:
        return 0.5 * w
    if np.pi - angle < 1e-4:  # near pi: axis from the symmetric part
        A = (R + np.eye(3)) / 2.0
        axis = np.sqrt(np.clip(np.diag(A), 0, None))
        i = int(np.argmax(axis))
        axis = A[i] / max(axis[i], 1e-12)
        axis /= np.linalg.norm(axis)
        if np.dot(axis, w) < 0:
            axis = -axis
        return axis * angle
    return w * angle / (2.0 * np.sin(angle))


def so3_exp(v) -> np.ndarray:
    """Rotation matrix of an axis-angle vector (Rodrigues)."""
    v = np.asarray(v, float)
    a = np.linalg.norm(v)
    if a < 1e-12:
        return np.eye(3)
    k = v / a
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * K @ K


so3_log = _so3_log


class Kinematics:
    """Pinocchio model of one registry robot (loaded from its resolved URDF, no meshes)."""

    def __init__(self, robot: str | RobotDef):
        self.pin = require("pinocchio", "robots", "pin")
        self.robot = get_robot(robot)
        self.model = self.pin.buildModelFromUrdf(str(robot_urdf(self.robot)))
        self.data = self.model.createData()
        self._qidx = []
        for name in self.robot.joint_names:
            jid = self.model.getJointId(name)
            if jid >= self.model.njoints:
                raise ValueError(f"robot '{self.robot.name}': joint '{name}' not in the pinocchio model")
            self._qidx.append(self.model.joints[jid].idx_q)
        self._qidx = np.asarray(self._qidx)
        self._vidx = np.asarray([self.model.joints[self.model.getJointId(n)].idx_v for n in self.robot.arm_joints])
        self.ee_frame = self.model.getFrameId(self.robot.ee_link)
        self.T_link_ee = self.robot.ee_offset_matrix()
        self.lower = np.asarray(self.model.lowerPositionLimit)[self._qidx]
        self.upper = np.asarray(self.model.upperPositionLimit)[self._qidx]
        self._q = self.pin.neutral(self.model)

    def _full(self, q) -> np.ndarray:
        q = np.asarray(q, float)
        full = self._q.copy()
        full[self._qidx[: len(q)]] = q
        return full

    def reach(self) -> float:
        """An upper bound (m) on the end-effector's distance from the base origin over every joint value.

        The triangle inequality along the kinematic chain: the joint offsets from the root to the end-effector's
        link, each prismatic joint's largest travel, the link-to-frame offset and ``ee_offset``; holds for any
        rotation of the revolute joints (links are rigid)."""
        f = self.model.frames[self.ee_frame]
        j = int(f.parentJoint if hasattr(type(f), "parentJoint") else f.parent)  # pinocchio 3 renamed it
        total = float(np.linalg.norm(f.placement.translation)) + float(np.linalg.norm(self.T_link_ee[:3, 3]))
        while j > 0:
            total += float(np.linalg.norm(self.model.jointPlacements[j].translation))
            jm = self.model.joints[j]
            if "Prismatic" in jm.shortname() or jm.shortname().startswith("JointModelP"):
                lo = np.asarray(self.model.lowerPositionLimit)[jm.idx_q: jm.idx_q + jm.nq]
                hi = np.asarray(self.model.upperPositionLimit)[jm.idx_q: jm.idx_q + jm.nq]
                total += float(np.max(np.abs(np.concatenate([lo, hi]))))
            j = int(self.model.parents[j])
        return total

    def link_pose(self, q, link: str) -> np.ndarray:
        """Pose of ``link`` in the base frame."""
        self.pin.framesForwardKinematics(self.model, self.data, self._full(q))
        return np.asarray(self.data.oMf[self.model.getFrameId(link)].homogeneous).copy()

    def fk(self, q) -> np.ndarray:
        """End-effector pose in the base frame for joint vector ``q`` (arm joints, optionally gripper)."""
        self.pin.framesForwardKinematics(self.model, self.data, self._full(q))
        return np.asarray(self.data.oMf[self.ee_frame].homogeneous) @ self.T_link_ee

    def ik(self, T_target, q0, iters: int = 50, tol_pos: float = 1e-5, tol_rot: float = 1e-4,
           damping: float = 1e-2, rot_weight: float = 0.5) -> tuple[np.ndarray, bool]:
        """Arm joints reaching ``T_target`` (base frame) from ``q0``; returns (q_arm, converged).

        Damped least squares on the 6-D error (position, rotation log in the base frame) with a
        damping that shrinks with the error (quadratic convergence near the solution, robust far
        from it); joint limits enforced by clipping after each step.
        """
        pin = self.pin
        n = self.robot.n_arm
        q0 = np.asarray(q0, float)
        qa = q0[:n].copy()
        full = self._full(q0)  # the gripper (and any joint past the arm) stays as given
        arm_q = self._qidx[:n]
        T_target = np.asarray(T_target, float)
        p_target, R_target = T_target[:3, 3], T_target[:3, :3]
        r_ee = self.T_link_ee[:3, 3]
        R_ee = self.T_link_ee[:3, :3]
        lo, hi = self.lower[:n], self.upper[:n]
        W = np.array([1, 1, 1, rot_weight, rot_weight, rot_weight])
        eye6 = np.eye(6)
        LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        ok = False
        for _ in range(iters):
            full[arm_q] = qa
            # the EE frame's Jacobian alone (its chain), and its placement: ~2x cheaper than every joint's Jacobian
            # and every frame's placement
            J = np.asarray(pin.computeFrameJacobian(self.model, self.data, full, self.ee_frame, LWA))[:, self._vidx]
            M = pin.updateFramePlacement(self.model, self.data, self.ee_frame)
            R_link, p_link = M.rotation, M.translation
            R = R_link @ R_ee
            p = p_link + R_link @ r_ee
            dp = p_target - p
            dr = np.asarray(pin.log3(R_target @ R.T))
            if dp @ dp < tol_pos * tol_pos and dr @ dr < tol_rot * tol_rot:
                ok = True
                break
            # the Jacobian is of the link origin; shift the linear part to the EE point: v += w x r = -[r]x w
            rx, ry, rz = p - p_link
            J[:3] -= np.array([[0.0, -rz, ry], [rz, 0.0, -rx], [-ry, rx, 0.0]]) @ J[3:]
            e = np.concatenate([dp, dr]) * W
            Jw = J * W[:, None]
            lam = 1e-9 + damping * float(e @ e)  # Levenberg-Marquardt style: vanishes at the solution
            dq = Jw.T @ np.linalg.solve(Jw @ Jw.T + lam * eye6, e)
            q_new = np.clip(qa + dq, lo, hi)
            if np.abs(q_new - qa).max() < 1e-10:  # stalled (at a joint limit, or the target is out of reach)
                break
            qa = q_new
        return qa, ok


def camera_mount_pose(kin: Kinematics, name: str, q) -> np.ndarray:
    """Pose (base frame) of the robot-mounted camera ``name`` (``RobotDef.camera_mounts``) at joints ``q``.

    The mount frame follows the OpenCV camera convention (+Z forward, +Y down).
    """

    mounts = kin.robot.camera_mounts
    if name not in mounts:
        raise UnknownNameError("camera mount", name, mounts)
    m = mounts[name]
    return kin.link_pose(q, m["link"]) @ make_pose(m["position"], m["quaternion_wxyz"])
