"""A privileged scripted oracle: pick, place and push from object poses, through the ee_delta controller.

It reads ``observation["objects"]`` (object poses in the robot base frame; the env must be built
with ``privileged=True``) and the task predicate from the reset ``info``, and moves the end effector
through waypoints with a proportional ee_delta step (one action per call). Strategy ``"auto"``:
``lifted`` -> pick, ``on_top`` / ``inside`` -> pick and place, ``near`` -> push, ``joint_closed`` (a
drawer) -> close: push the drawer's front face (from the env's ``joints`` reset info) along its axis with the
gripper closed until the joint is well inside its closed fraction.

``noise`` (m) grades its quality: a per-episode error of the perceived object position drawn from
N(0, noise^2) in x and y (a calibration error the oracle cannot see), seeded by the episode seed.
``noise=0`` is the oracle; a few centimetres make it miss some grasps.
"""
from __future__ import annotations

import logging

import numpy as np

from real2sim.core.errors import Real2SimError
from real2sim.core.geometry import quat_wxyz_to_matrix
from real2sim.robots.kinematics import _so3_log, so3_exp

log = logging.getLogger(__name__)
STRATEGIES = ("auto", "pick", "place", "push", "close")


def _rot_z(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _rot_y(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _first(pred: dict, types) -> dict | None:
    if pred.get("type") in types:
        return pred
    for t in pred.get("terms", []):
        f = _first(t, types)
        if f:
            return f
    return None


class ScriptedPolicy:
    """Privileged oracle (see the module docstring)."""

    privileged = True

    def __init__(self, noise: float = 0.0, strategy: str = "auto", max_step: float = 0.04, lift: float = 0.10,
                 gain: float = 1.0):
        if strategy not in STRATEGIES:
            raise Real2SimError(f"scripted strategy '{strategy}' unknown; use one of {STRATEGIES}")
        self.name = "scripted"
        self.noise, self.strategy = float(noise), strategy
        self.max_step, self.lift, self.gain = float(max_step), float(lift), float(gain)
        self.rng = np.random.default_rng(0)
        self.plan: list = []

    # -- protocol ---------------------------------------------------------------------------------
    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None:
        if not info or "task" not in info or "object_ids" not in info:
            raise Real2SimError("the scripted oracle needs the env's reset info (task predicate, object ids)")
        self.rng = np.random.default_rng(seed)
        self.ids = list(info["object_ids"])
        self.bounds = {k: np.asarray(v, float) for k, v in info.get("object_bounds", {}).items()}
        Twb = info.get("robot_base_pose")
        self.T_base_world = None if Twb is None else np.linalg.inv(np.asarray(Twb, float))
        pred = info["task"]["success"]
        strat = self.strategy
        self.joint = None
        jp = _first(pred, ("joint_closed",))
        if strat in ("auto", "close") and jp is not None and _first(pred, ("lifted", "on_top", "inside", "near")) is None:
            # close a drawer: push its front face along the joint axis (no grasp)
            joints = {(d["object"], d["joint"]): d for d in info.get("joints", [])}
            if (jp["object"], jp["joint"]) not in joints:
                raise Real2SimError("closing a joint needs the env's 'joints' reset info (a joint_closed task)")
            self.joint, self.pred, self.mode = joints[(jp["object"], jp["joint"])], jp, "close"
            if self.joint["type"] != "prismatic":
                raise Real2SimError(f"the scripted oracle closes prismatic joints (drawers); "
                                    f"'{self.joint['joint']}' is {self.joint['type']}")
            self.plan, self.phase, self.hold = [], 0, 0
            self.offset = np.r_[self.rng.normal(0.0, self.noise, 2), 0.0] if self.noise > 0 else np.zeros(3)
            return
        if strat == "auto":
            p = _first(pred, ("lifted", "on_top", "inside", "near"))
            if p is None:
                raise Real2SimError(f"the scripted oracle has no strategy for predicate {pred}")
            strat = {"lifted": "pick", "on_top": "place", "inside": "place", "near": "push"}[p["type"]]
            self.pred = p
        else:
            self.pred = _first(pred, ("lifted", "on_top", "inside", "near")) or pred
        self.mode = strat
        self.offset = np.r_[self.rng.normal(0.0, self.noise, 2), 0.0] if self.noise > 0 else np.zeros(3)
        self.plan = []
        self.phase = 0
        self.hold = 0

    def act(self, observation: dict) -> np.ndarray:
        if "objects" not in observation:
            raise Real2SimError("the scripted oracle needs privileged observations (env privileged=True)")
        ee = np.asarray(observation["ee_pose"], float)
        if not self.plan:
            self.plan = self._make_plan(np.asarray(observation["objects"], float))
            # the controller applies deltas to its previous *target*: track that target here
            self.cmd_p, self.cmd_R = ee[:3].copy(), quat_wxyz_to_matrix(ee[3:7])
        pos, R, grip, hold = self.plan[self.phase]
        reached = (np.linalg.norm(pos - self.cmd_p) < 1e-3 and np.linalg.norm(_so3_log(R @ self.cmd_R.T)) < 0.02
                   and np.linalg.norm(ee[:3] - self.cmd_p) < 0.015)
        if reached:
            self.hold += 1
            if self.hold > hold and self.phase < len(self.plan) - 1:
                self.phase += 1
                self.hold = 0
                pos, R, grip, hold = self.plan[self.phase]
        d = pos - self.cmd_p
        n = np.linalg.norm(d)
        if n > self.max_step:
            d *= self.max_step / n
        r = _so3_log(R @ self.cmd_R.T)
        rn = np.linalg.norm(r)
        if rn > 0.2:
            r *= 0.2 / rn
        self.cmd_p = self.cmd_p + d
        self.cmd_R = so3_exp(r) @ self.cmd_R
        return np.r_[d, r, grip][None]

    # -- planning ---------------------------------------------------------------------------------
    def _pose(self, objects, oid):
        i = self.ids.index(oid)
        p = objects[i, :3] + self.offset
        R = quat_wxyz_to_matrix(objects[i, 3:7])
        return p, R

    def _half_z(self, oid, R) -> float:
        b = self.bounds.get(oid)
        if b is None:
            return 0.02
        ext = np.abs(R) @ ((b[1] - b[0]) / 2)
        return float(ext[2])

    def _grasp_R(self, R_obj) -> np.ndarray:
        # the object axis closest to horizontal sets the yaw: an object frame need not have
        # +Z up (alignment may pick any symmetric-equivalent pose of a box)
        axis = R_obj[:, int(np.argmin(np.abs(R_obj[2, :])))]
        yaw = np.arctan2(axis[1], axis[0])
        yaw = (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4  # box symmetry: the closest face pair
        return _rot_z(yaw) @ _rot_y(np.pi / 2)  # EE x axis pointing down

    def _close_plan(self) -> list:
        """Push a drawer closed: in front of its face, then along -axis to where the face is at the closed level."""
        J = self.joint
        a_w = np.asarray(J["axis"], float)
        face_w = np.asarray(J["face"], float)
        frac = float(self.pred.get("fraction", 0.1))
        travel = J["position"] - (J["lower"] + 0.3 * frac * (J["upper"] - J["lower"]))  # well inside the bar
        T = self.T_base_world
        if T is None:
            raise Real2SimError("closing a drawer needs 'robot_base_pose' in the reset info")
        a = T[:3, :3] @ a_w
        face = T[:3, :3] @ face_w + T[:3, 3] + self.offset
        start = face + a * 0.07  # the gripper (its bar is wider than its fingers) comes down clear of the face
        end = face - a * max(travel, 0.0)
        d = -a[:2] / max(np.linalg.norm(a[:2]), 1e-6)
        Rp = _rot_z(np.arctan2(d[1], d[0]) + np.pi / 2) @ _rot_y(np.pi / 2)
        over = (T[:3, :3] @ [0.0, 0.0, J["top"] + 0.08] + T[:3, 3])[2]  # above the object, in base-frame height
        return [(np.r_[start[:2], max(start[2] + 0.08, over)], Rp, 0.0, 0), (start, Rp, 0.0, 0), (end, Rp, 0.0, 2),
                (end + a * 0.04, Rp, 0.0, 0)]

    def _make_plan(self, objects) -> list:
        """Waypoints: (position in base frame, orientation, gripper opening, steps to hold once reached)."""
        if self.mode == "close":
            return self._close_plan()
        oid = self.pred["object"]
        p, R = self._pose(objects, oid)
        Rg = self._grasp_R(R)
        above = p + [0, 0, 0.08]
        if self.mode == "push":
            goal = (self._pose(objects, self.pred["target"])[0] if "target" in self.pred
                    else np.asarray(self.pred["position"], float))
            if "target" not in self.pred:  # a world point
                goal = self._world_to_base(goal)
            d = goal[:2] - p[:2]
            d = d / max(np.linalg.norm(d), 1e-6)
            half = 0.03
            start = np.r_[p[:2] - d * (half + 0.04), p[2]]
            end = np.r_[goal[:2] - d * half, p[2]]
            Rp = _rot_z(np.arctan2(d[1], d[0]) + np.pi / 2) @ _rot_y(np.pi / 2)
            return [(start + [0, 0, 0.08], Rp, 0.0, 0), (start, Rp, 0.0, 0), (end, Rp, 0.0, 1),
                    (end + [0, 0, 0.08], Rp, 0.0, 0)]
        plan = [(above, Rg, 1.0, 1), (p, Rg, 1.0, 1), (p, Rg, 0.0, 3), (p + [0, 0, self.lift], Rg, 0.0, 2)]
        if self.mode == "place":
            sup = self.pred.get("support", self.pred.get("container"))
            sp, sR = self._pose(objects, sup)
            top = sp[2] + self._half_z(sup, sR)
            target = np.r_[sp[:2], top + self._half_z(oid, R) + 0.01]
            plan += [(target + [0, 0, 0.08], Rg, 0.0, 0), (target, Rg, 0.0, 1), (target, Rg, 1.0, 2),
                     (target + [0, 0, 0.08], Rg, 1.0, 0)]
        return plan

    def _world_to_base(self, p):
        T = self.T_base_world
        if T is None:
            raise Real2SimError("pushing to a world point needs 'robot_base_pose' in the reset info")
        return T[:3, :3] @ p + T[:3, 3]
