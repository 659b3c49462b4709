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
STRATEGIES = ("auto", "pick", "place", "push", "close", "open")


def _rot_z(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _rot_y(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _nearest_axis_aligned(R: np.ndarray) -> np.ndarray:
    """The rotation whose columns are signed base axes (one of 24) nearest to ``R``, with an axis straight down."""
    import itertools

    best, score = None, -np.inf
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            P = np.zeros((3, 3))
            for col, (row, sg) in enumerate(zip(perm, signs)):
                P[row, col] = sg
            if np.linalg.det(P) < 0 or not np.any(P[2] < 0):
                continue
            s = float(np.trace(P.T @ R))
            if s > score:
                best, score = P, s
    return best


STALL_FRACTION = 0.75
"""Closing fingers that move less than this fraction of their longest (free) step are taken as holding something."""
SAG_HOLD = 0.04
"""The oracle holds its command's sideways motion while the measured hand is this far (m) below the command..."""
SAG_HOLD_STEPS = 6
"""... for at most this many steps in a row."""
REACH_TOL = 0.015
"""A plan whose waypoints the controller's IK (mirrored, :meth:`ScriptedPolicy._rollout`) reaches within this (m)."""
PITCHES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
"""The level hand's pitches (rad, down) the oracle may open a drawer with (:meth:`ScriptedPolicy._reachable_open_plan`)."""
TILT_KEEP_DEG = 10.0
"""A hand that starts more than this tilted from straight down keeps its tilt (see :func:`_top_down`)."""


def _top_down(R: np.ndarray) -> np.ndarray:
    """The hand orientation the oracle grasps with, from the hand's orientation ``R`` at the start of the episode.

    A hand that starts nearly vertical (the WidowX and the Panda at their rest poses: 3 and 6 degrees off) grasps
    straight down, axis-aligned (:func:`_nearest_axis_aligned`). A hand that starts tilted keeps its tilt (the grasp
    only turns it about its approach axis, or with ``turn="vertical"`` about the vertical): the Google Robot rests 19
    degrees off vertical, and straight down its wrist is at its 1.79 rad limit everywhere above ~8 cm over the table,
    where IK then fails and the hand cannot descend.
    """
    P = _nearest_axis_aligned(R)
    down = P[2].argmin()  # the hand axis that points down
    tilt = np.degrees(np.arccos(np.clip(-R[2, down], -1.0, 1.0)))
    return P if tilt <= TILT_KEEP_DEG else R.copy()


_KINEMATICS: dict = {}


def _kinematics(robot: str | None):
    """The robot's :class:`~real2sim.robots.kinematics.Kinematics` (cached per process), or None when the robot is not
    known here (a remote env, pinocchio missing): the oracle then moves without checking its plan."""
    if not robot:
        return None
    if robot not in _KINEMATICS:
        try:
            from real2sim.robots.kinematics import Kinematics

            _KINEMATICS[robot] = Kinematics(robot)
        except Exception as exc:  # noqa: BLE001 - any failure only turns the check off
            log.info("scripted: no kinematics for robot '%s' (%s); the plan is not checked", robot, exc)
            _KINEMATICS[robot] = None
    return _KINEMATICS[robot]


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
                 gain: float = 1.0, grasp_depth: float | None = None, close_step: float | None = None,
                 clearance: float = 0.05, max_rot: float = 0.2, lean: float = 0.0, push_turn: bool = True,
                 push_gap: float | None = None, settle_steps: int = 0, turn: str = "approach",
                 drawer_hand: str = "down", pull_margin: float = 0.07, close_hand: str = "level",
                 grip_past: float = 0.0, level_roll: float = 0.0, open_step: float = 0.0, level_pitch: float = 0.0,
                 level_turn: str = "moving"):
        if strategy not in STRATEGIES:
            raise Real2SimError(f"scripted strategy '{strategy}' unknown; use one of {STRATEGIES}")
        self.name = "scripted"
        self.noise, self.strategy = float(noise), strategy
        self.max_step, self.lift, self.gain = float(max_step), float(lift), float(gain)
        self.grasp_depth = None if grasp_depth is None else float(grasp_depth)
        self.close_step = None if close_step is None else float(close_step)
        self.clearance = float(clearance)
        self.max_rot = float(max_rot)
        self.lean = float(lean)
        self.push_turn = bool(push_turn)
        self.push_gap = None if push_gap is None else float(push_gap)
        self.settle_steps = int(settle_steps)
        if turn not in ("approach", "vertical"):
            raise Real2SimError(f"scripted: turn must be 'approach' or 'vertical', got {turn!r}")
        self.turn = turn
        if drawer_hand not in ("down", "level"):
            raise Real2SimError(f"scripted: drawer_hand must be 'down' or 'level', got {drawer_hand!r}")
        self.drawer_hand = drawer_hand
        self.pull_margin = float(pull_margin)
        self.grip_past = float(grip_past)
        self.open_step = float(open_step)
        self.level_pitch = float(level_pitch)
        self.level_roll = float(np.sign(level_roll))  # 0: whichever is the smaller turn from the hand at rest
        if close_hand not in ("level", "rest"):
            raise Real2SimError(f"scripted: close_hand must be 'level' or 'rest', got {close_hand!r}")
        self.close_hand = close_hand
        if level_turn not in ("moving", "first"):
            raise Real2SimError(f"scripted: level_turn must be 'moving' or 'first', got {level_turn!r}")
        self.level_turn = level_turn
        self.back_off = "far"  # after a drawer is opened for an object: "far" (back, then up) or "rise" (up)
        self.rng = np.random.default_rng(0)
        self.plan: list = []

    # -- protocol ---------------------------------------------------------------------------------
    def reset(self, instruction: str, info: dict | None = None, seed: int | None = None) -> None:
        if not info or "task" not in info or "object_ids" not in info:
            raise Real2SimError("the scripted oracle needs the env's reset info (task predicate, object ids)")
        self.rng = np.random.default_rng(seed)
        self._tracked, self._drags = {}, set()  # waypoints that follow the object / that drag a drawer (by id)
        self.kin = _kinematics(info.get("robot")) if info.get("controller", {}).get("mode") == "ee_delta" else None
        self.ik_iters = int(info.get("controller", {}).get("ik_iters", 50))
        self.ids = list(info["object_ids"])
        self.bounds = {k: np.asarray(v, float) for k, v in info.get("object_bounds", {}).items()}
        Twb = info.get("robot_base_pose")
        self.T_base_world = None if Twb is None else np.linalg.inv(np.asarray(Twb, float))
        pred = info["task"]["success"]
        strat = self.strategy
        self.joint, self.then = None, None
        jp = _first(pred, ("joint_closed",))
        jo = _first(pred, ("joint_opened",))
        rigid = _first(pred, ("lifted", "on_top", "inside", "near"))
        if strat in ("auto", "close", "open") and (jp or jo) is not None and (rigid is None or jo is not None):
            # close a drawer: push its front face along the joint axis (no grasp); open one: pull its handle, then
            # (an 'inside' or 'on_top' term too, e.g. "put the apple in the drawer") place the object
            jt = jo if jo is not None and strat != "close" else jp
            joints = {(d["object"], d["joint"]): d for d in info.get("joints", [])}
            if (jt["object"], jt["joint"]) not in joints:
                raise Real2SimError(f"moving a joint needs the env's 'joints' reset info (a {jt['type']} task)")
            self.joint, self.pred = joints[(jt["object"], jt["joint"])], jt
            self.mode = "close" if jt is jp else "open"
            if self.joint["type"] != "prismatic":
                raise Real2SimError(f"the scripted oracle moves prismatic joints (drawers); "
                                    f"'{self.joint['joint']}' is {self.joint['type']}")
            if self.mode == "open" and "handle" not in self.joint:
                raise Real2SimError(f"opening '{self.joint['joint']}' needs a handle that collides (nothing stands out "
                                    "of the drawer's front); give its handle collision shapes (collide_visuals)")
            self.then = rigid if self.mode == "open" and rigid is not None and rigid["type"] in ("inside", "on_top") \
                else None
        if self.joint is not None:
            self.plan, self.phase, self.hold = [], 0, 0
            self.offset = np.r_[self.rng.normal(0.0, self.noise, 2), 0.0] if self.noise > 0 else np.zeros(3)
            self.grip_cmd, self.stalled, self.prev_fingers, self.free_travel = 1.0, False, None, None
            self.prev_ee, self.still, self.sagging = None, 0, 0
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
        self.grip_cmd, self.stalled, self.prev_fingers, self.free_travel = 1.0, False, None, None
        self.prev_ee, self.still = None, 0

    def act(self, observation: dict) -> np.ndarray:
        if "objects" not in observation:
            raise Real2SimError("the scripted oracle needs privileged observations (env privileged=True)")
        ee = np.asarray(observation["ee_pose"], float)
        if not self.plan:
            self.R_top = _top_down(quat_wxyz_to_matrix(ee[3:7]))
            if self.lean:  # lean the hand forward (its approach axis away from the base, about the base's y axis)
                self.R_top = _rot_y(-self.lean) @ self.R_top
            self.q_start = np.asarray(observation["qpos"], float) if "qpos" in observation else None
            self._tracked = {}
            self.plan = self._make_plan(np.asarray(observation["objects"], float), ee[:3])
            # the controller applies deltas to its previous *target*: track that target here
            self.cmd_p, self.cmd_R = ee[:3].copy(), quat_wxyz_to_matrix(ee[3:7])
        self._follow(np.asarray(observation["objects"], float))
        pos, R, grip, hold = self.plan[self.phase]
        commanded = np.linalg.norm(pos - self.cmd_p) < 1e-3 and np.linalg.norm(_so3_log(R @ self.cmd_R.T)) < 0.02
        reached = commanded and np.linalg.norm(ee[:3] - self.cmd_p) < 0.015
        if self.settle_steps and commanded and not reached:
            # the hand stopped short (IK at a joint limit holds the closest pose): within 3 cm and still for
            # settle_steps steps counts as there
            still = self.prev_ee is not None and np.linalg.norm(ee[:3] - self.prev_ee) < 0.002
            self.still = self.still + 1 if still else 0
            reached = self.still >= self.settle_steps and np.linalg.norm(ee[:3] - self.cmd_p) < 0.03
        self.prev_ee = ee[:3].copy()
        ramping = self._gripper(grip, observation)
        closing = grip < 0.5 and (self.phase == 0 or self.plan[self.phase - 1][2] >= 0.5)
        dragging = grip < 0.5 and id(pos) in self._drags
        if self.close_step is not None and (closing or dragging) and self.stalled and commanded:
            # closing on something that pushes the hand back (a round object gripped at the arm's reach, the hand
            # pushed 5 cm off), or dragging something that holds it back (a drawer pulled open: let go while the
            # drawer still moves out; slowed to a stop first, MuJoCo's opening fingers threw it shut again, 0.22 ->
            # 0.05 m): fingers that hold it count as there - at those waypoints only (at every closed-hand waypoint,
            # the apple was let go 7 cm above the drawer)
            reached = True
        if reached and not ramping:
            self.hold += 1
            if self.hold > hold and self.phase < len(self.plan) - 1:
                self.phase += 1
                self.hold = 0
                self._follow(np.asarray(observation["objects"], float))
                pos, R, grip, hold = self.plan[self.phase]
                self._gripper(grip, observation)
        grip = self.grip_cmd if self.close_step is not None else grip
        d, r = self._delta(pos, R, self.cmd_p, self.cmd_R)
        if ee[2] < self.cmd_p[2] - SAG_HOLD and self.sagging < SAG_HOLD_STEPS:
            # the measured hand hangs below its command (a soft arm at 3 Hz sags while it moves and turns): no
            # sideways progress until it has caught up (sweeping on low, MuJoCo's arm knocked the apple off its
            # place), at most SAG_HOLD_STEPS steps in a row (a height the arm cannot reach must not stop it)
            d[:2] = 0.0
            self.sagging += 1
        else:
            self.sagging = 0
        self.cmd_p = self.cmd_p + d
        self.cmd_R = so3_exp(r) @ self.cmd_R
        return np.r_[d, r, grip][None]

    def _delta(self, pos, R, cmd_p, cmd_R) -> tuple[np.ndarray, np.ndarray]:
        """One step from the commanded pose towards (pos, R): at most ``max_step`` and ``max_rot``."""
        d = pos - cmd_p
        n = np.linalg.norm(d)
        if n > self.max_step:
            d *= self.max_step / n
        r = _so3_log(R @ cmd_R.T)
        rn = np.linalg.norm(r)
        if rn > self.max_rot:
            r *= self.max_rot / rn
        return d, r

    def _rollout(self, plan, q) -> tuple[float, float, np.ndarray]:
        """The plan's commands through a mirror of the controller's local IK, from joints ``q``.

        The ee_delta controller moves its target by each delta and solves IK from its previous joint targets; a
        redundant arm (the Google Robot's 7 joints) can wind a joint onto its limit on the way to a pose that is
        reachable from the rest pose, and then holds the closest pose short of the waypoint. Returns (the largest
        distance between a waypoint and where the mirrored target ends, m; the smallest margin of a moving joint to
        its limits over the path, rad; the joint targets at the end)."""
        kin, n = self.kin, self.kin.robot.n_arm
        q = np.asarray(q, float).copy()
        T = kin.fk(q)
        cmd_p, cmd_R = T[:3, 3].copy(), T[:3, :3].copy()
        q0, moved = q[:n].copy(), np.zeros(n, bool)
        err, margin = 0.0, np.inf
        for pos, R, _, _ in plan:
            for _ in range(int(2.0 / self.max_step) + int(np.pi / self.max_rot)):
                if np.linalg.norm(pos - cmd_p) < 1e-3 and np.linalg.norm(_so3_log(R @ cmd_R.T)) < 0.02:
                    break
                d, r = self._delta(pos, R, cmd_p, cmd_R)
                cmd_p, cmd_R = cmd_p + d, so3_exp(r) @ cmd_R
                T[:3, 3] += d
                T[:3, :3] = so3_exp(r) @ T[:3, :3]
                qa, ok = kin.ik(T, q, iters=self.ik_iters)
                q[:n] = qa
                if not ok:
                    T = kin.fk(q)
                moved |= np.abs(qa - q0) > 1e-6
                if moved.any():
                    margin = min(margin, float(np.minimum(qa - kin.lower[:n], kin.upper[:n] - qa)[moved].min()))
            err = max(err, float(np.linalg.norm(kin.fk(q)[:3, 3] - pos)))
        return err, margin, q

    def _gripper(self, grip: float, observation: dict) -> bool:
        """With ``close_step``: close gently. The gripper command falls by ``close_step`` per step until the
        fingers (the last two joints) stop following (a step shorter than ``STALL_FRACTION`` of the longest, free
        one), then one step more (the squeeze) and no further: the drive then presses with its stiffness times one step,
        not with its force limit (SIMPLER's Google Robot fingers, 200 N m/rad up to 60 N m, eject a 20 g can when
        driven straight to closed). Opening is immediate, or by ``open_step`` per step. Returns whether the gripper is
        still closing (or opening)."""
        if self.close_step is None:
            return False
        f = np.asarray(observation["qpos"], float)[-2:]
        if grip >= self.grip_cmd:
            if self.open_step and grip > self.grip_cmd:  # open gently too (fingers snapped open on a drawer's
                # handle throw the drawer shut in MuJoCo)
                self.grip_cmd, self.stalled, self.free_travel = min(grip, self.grip_cmd + self.open_step), False, None
                self.prev_fingers = f
                return self.grip_cmd < grip
            self.grip_cmd, self.stalled, self.free_travel = grip, False, None
        elif not self.stalled:
            if self.prev_fingers is not None and self.grip_cmd < 1.0:
                moved = float(np.abs(f - self.prev_fingers).max())
                if self.free_travel and moved < STALL_FRACTION * self.free_travel:
                    self.stalled = True
                self.free_travel = max(self.free_travel or 0.0, moved)  # the longest step so far: moving freely
            self.grip_cmd = max(grip, self.grip_cmd - self.close_step)
        self.prev_fingers = f
        return grip < self.grip_cmd and not self.stalled

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

    def _half_xy(self, oid, R) -> float:
        """The object's horizontal half-size (its box turned by ``R``)."""
        b = self.bounds.get(oid)
        if b is None:
            return 0.03
        return float(np.max((np.abs(R) @ ((b[1] - b[0]) / 2))[:2]))

    def _grasp_R(self, R_obj, oid=None) -> np.ndarray:
        """A top-down grasp: the hand's approach axis straight down, its fingers closing across the object.

        The hand's frame differs between robots (the WidowX's approach axis is its x, the Panda's and the Google
        Robot's their z): the top-down orientation is the axis-aligned one (a signed permutation of the base axes)
        nearest to the hand's orientation at the start of the episode, or that orientation itself for a hand that
        starts tilted (:func:`_top_down`), and only its turn is chosen here. The fingers
        close across the object's narrower horizontal side when one side is clearly (> 20 %) narrower (a lying can
        is gripped around its body, not end to end); otherwise across a face pair of the box (symmetry pi/2), the
        one needing the least turn.
        """
        R0 = getattr(self, "R_top", _rot_y(np.pi / 2))
        closing = np.arctan2(R0[1, 1], R0[0, 1])  # direction the fingers close along (the hand's y axis)
        horiz = np.argsort(np.abs(R_obj[2, :]))[:2]  # the two object axes closest to horizontal
        ext = None
        b = self.bounds.get(oid) if oid is not None else None
        if b is not None:
            ext = (b[1] - b[0])[horiz]
        if ext is not None and max(ext) > 1.2 * min(ext):
            axis = R_obj[:, horiz[int(np.argmax(ext))]]  # the long side: close across it
            yaw = np.arctan2(axis[1], axis[0]) + np.pi / 2 - closing
            yaw = (yaw + np.pi / 2) % np.pi - np.pi / 2
        else:
            axis = R_obj[:, int(np.argmin(np.abs(R_obj[2, :])))]
            yaw = np.arctan2(axis[1], axis[0]) + np.pi / 2 - closing
            yaw = (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4  # box symmetry: the closest face pair
        if self.turn == "vertical":
            return _rot_z(yaw) @ R0
        # about the hand's own approach axis (the wrist's roll): for a vertical hand that is the world's vertical; a
        # tilted hand keeps the direction it leans in (turned about the vertical it leans sideways, and the Google
        # Robot's hand then leaves its reach over the lying cans)
        approach = R0[:, int(np.argmin(R0[2]))]
        return so3_exp(-approach * yaw) @ R0

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

    def _level_R(self, a: np.ndarray) -> np.ndarray:
        """The hand level, its approach axis along ``-a`` (towards the drawer; ``a`` the opening direction in the
        base frame), its fingers closing vertically (across a horizontal handle bar): the axes of the hand at rest
        (approach = its most downward axis, closing = its y axis) are mapped there."""
        R0 = getattr(self, "R_top", np.eye(3))
        if not self.level_roll:
            return min((self._level_R_roll(a, r) for r in (1.0, -1.0)),
                       key=lambda R: np.linalg.norm(_so3_log(R @ R0.T)))
        return self._level_R_roll(a, self.level_roll)

    def _level_R_roll(self, a: np.ndarray, roll: float) -> np.ndarray:
        R0 = getattr(self, "R_top", np.eye(3))
        iz = int(np.argmin(R0[2]))  # the approach axis (the one pointing most down at rest)
        iy = 1 if iz != 1 else 0
        d = -np.r_[a[:2], 0.0] / max(np.linalg.norm(a[:2]), 1e-6)
        cols = {iz: d, iy: np.array([0.0, 0.0, roll])}  # roll: the hand's y up (1) or down (-1)
        ix = 3 - iz - iy
        cols[ix] = np.cross(cols[(ix + 1) % 3], cols[(ix + 2) % 3])
        R = np.c_[cols[0], cols[1], cols[2]]
        if self.level_pitch:  # pitched down by level_pitch about the horizontal axis across the approach
            R = so3_exp(np.cross(d, [0.0, 0.0, 1.0]) * -self.level_pitch) @ R
        return R

    def _joint_frame(self):
        T = self.T_base_world
        if T is None:
            raise Real2SimError("moving a drawer needs 'robot_base_pose' in the reset info")
        J = self.joint
        a = T[:3, :3] @ np.asarray(J["axis"], float)
        to_base = lambda p: T[:3, :3] @ np.asarray(p, float) + T[:3, 3] + self.offset  # noqa: E731
        return J, a, to_base

    def _level_close_plan(self, ee) -> list:
        """Push a drawer shut with the closed hand level (``drawer_hand='level'``): back and level at the start
        height, down in front of the handle, along -axis until the joint is well inside its closed fraction."""
        J, a, to_base = self._joint_frame()
        frac = float(self.pred.get("fraction", 0.1))
        travel = J["position"] - (J["lower"] + 0.3 * frac * (J["upper"] - J["lower"]))
        h = to_base(J.get("handle", J["face"]))
        # close_hand='rest': the hand as it rests (no turn; in MuJoCo the Google Robot's arm sags ~0.2 m while it
        # turns the hand level and lands on the open drawer)
        R = self.R_top if self.close_hand == "rest" else self._level_R(a)
        start = h + a * 0.08
        end = h - a * max(travel, 0.0)
        back = start + a * 0.05
        return [(back, R, 0.0, 0), (start, R, 0.0, 0), (end, R, 0.0, 2), (end + a * 0.05, R, 0.0, 0)]

    def _open_plan(self, ee, min_pull: float = 0.0) -> list:
        """Pull a drawer open by its handle (the env's joint info): the hand level (:meth:`_level_R`), back and
        level at the start height, down in front of the handle, in until the fingertips are past the bar, close,
        pull along the axis until the joint is ``pull_margin`` past its opened fraction (at least ``min_pull``), let go,
        back off."""
        J, a, to_base = self._joint_frame()
        frac = float(self.pred.get("fraction", 0.3))
        pull = max(J["lower"] + frac * (J["upper"] - J["lower"]) - J["position"] + self.pull_margin, min_pull)
        h = to_base(J["handle"])
        R = self._level_R(a)
        pre = h + a * 0.10
        # the fingertips this far past the bar's centre (1 cm past: the fingers, opening, threw the drawer shut)
        grip = h - a * self.grip_past
        out = h + a * max(pull, 0.0)
        back = pre + a * 0.05
        # level_turn='first': the hand turns level where it is, then goes (turning while it travels ~0.8 m down, a
        # local IK can wind a wrist joint onto its limit on the way and stall there, short of the handle)
        turn = [(np.asarray(ee, float).copy(), R, 1.0, 0)] if self.level_turn == "first" and ee is not None else []
        self._drags = {id(out)}
        return turn + [(back, R, 1.0, 0), (pre, R, 1.0, 0), (grip, R, 1.0, 1), (grip, R, 0.0, 2), (out, R, 0.0, 1),
                (out, R, 1.0, 1), (out + a * 0.06, R, 1.0, 0)]

    def _reachable_open_plan(self, objects, ee) -> list:
        """:meth:`_drawer_plan` with the level hand's pitch, its roll and ``level_turn`` chosen by the arm's
        kinematics: the controller's IK, mirrored along the whole plan (:meth:`_rollout`; for "put the apple in the
        drawer" that includes the pick and the drop), must reach every waypoint within ``REACH_TOL``. Candidates in
        order: with an object to place, the back-off after the drawer (``"rise"``, then ``"far"``); the configured
        roll (with ``level_roll=0``: both), then the configured turn, then pitches of
        ``PITCHES`` nearest to the configured ``level_pitch`` first; the first that reaches is taken, else the one that
        comes closest. Without the robot's kinematics (a remote env), the configured plan."""
        if self.kin is None or getattr(self, "q_start", None) is None:
            return self._drawer_plan(objects, ee)
        pitch0, turn0, roll0 = self.level_pitch, self.level_turn, self.level_roll
        pitches = sorted({pitch0, *PITCHES}, key=lambda p: (abs(p - pitch0), p))
        turns = (turn0, "moving" if turn0 == "first" else "first")
        rolls = (roll0, -roll0) if roll0 else (0.0,)
        rolls = rolls + tuple(r for r in (1.0, -1.0) if r not in rolls)
        backs = ("rise", "far") if self.then is not None else ("far",)
        best = None
        try:
            for back in backs:
                for roll in rolls:
                    for turn in turns:
                        for pitch in pitches:
                            self.level_pitch, self.level_turn, self.level_roll = pitch, turn, roll
                            self.back_off, self._tracked = back, {}
                            plan = self._drawer_plan(objects, ee)
                            err = self._rollout(plan, self.q_start)[0]
                            if best is None or err < best[0]:
                                best = (err, (pitch, turn, roll, back), plan, self._tracked, self._drags)
                            if err < REACH_TOL:
                                break
                        if best[0] < REACH_TOL:
                            break
                    if best[0] < REACH_TOL:
                        break
                if best[0] < REACH_TOL:
                    break
        finally:
            self.level_pitch, self.level_turn, self.level_roll, self.back_off = pitch0, turn0, roll0, "far"
        err, (pitch, turn, roll, back), plan, self._tracked, self._drags = best
        log.debug("scripted: drawer with pitch %.2f, turn %s, roll %s, back-off %s (mirrored IK ends %.1f cm from a "
                  "waypoint at most)", pitch, turn, roll, back, 100 * err)
        self.chosen = {"level_pitch": pitch, "level_turn": turn, "level_roll": roll, "back_off": back,
                       "reach_error": round(err, 4)}
        return plan

    def _drawer_plan(self, objects, ee) -> list:
        """Open the drawer (:meth:`_open_plan`), then (an object to put in it) place the object in it."""
        min_pull = 0.0
        if self.then is not None:  # the opening must take the object: its width, 4 cm each side and the front's
            oid = self.then["object"]
            min_pull = 2 * self._half_xy(oid, self._pose(objects, oid)[1]) + 0.12
        plan = self._open_plan(ee, min_pull)
        if self.then is not None:
            last, R = plan[-1][0], plan[-1][1]
            if self.back_off == "far":  # back off further, still level, before turning the hand (it sweeps ahead)
                plan.append((last + np.r_[last[:2] - plan[-2][0][:2], 0.0] * 1.5, R, 1.0, 0))
            else:  # "rise": up, still level, to the height the hand turns at (over the cabinet top)
                J, _, _ = self._joint_frame()
                oid = self.then["object"]
                top = (self.T_base_world[:3, :3] @ [0.0, 0.0, J["top"]] + self.T_base_world[:3, 3])[2]
                hz = self._half_z(oid, self._pose(objects, oid)[1])
                plan.append((np.r_[last[:2], top + hz + self.clearance + 0.05], R, 1.0, 0))
            plan += self._place_in_drawer_plan(objects, plan[-1][0])
        return plan

    def _make_plan(self, objects, ee=None) -> list:
        """Waypoints: (position in base frame, orientation, gripper opening, steps to hold once reached)."""
        if self.mode == "close":
            return self._level_close_plan(ee) if self.drawer_hand == "level" else self._close_plan()
        if self.mode == "open":
            return self._reachable_open_plan(objects, ee)
        oid = self.pred["object"]
        p, R = self._pose(objects, oid)
        Rg = self._grasp_R(R, oid)
        above = p + [0, 0, 0.08]
        self._tracked = {}
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
            if self.push_gap is not None and "target" in self.pred:  # stop with the object push_gap short of the target
                tgt = self.pred["target"]
                r_src, r_tgt = self._half_xy(oid, R), self._half_xy(tgt, self._pose(objects, tgt)[1])
                z = p[2]
                if self.grasp_depth is not None:  # fingertips low (a hand leaning over rides up a round object)
                    z = p[2] - 0.6 * self._half_z(oid, R)
                start = np.r_[p[:2] - d * (r_src + 0.04), z]
                end = np.r_[goal[:2] - d * (2 * r_src + r_tgt + self.push_gap), z]
            R0 = getattr(self, "R_top", _rot_y(np.pi / 2))
            yaw = np.arctan2(d[1], d[0]) + np.pi - np.arctan2(R0[1, 1], R0[0, 1])  # fingers along the push, as before
            yaw = (yaw + np.pi / 2) % np.pi - np.pi / 2  # the symmetric hand: the smaller turn
            Rp = _rot_z(yaw) @ R0 if self.push_turn else R0  # or push with the closed hand as it is
            return [(start + [0, 0, 0.08], Rp, 0.0, 0), (start, Rp, 0.0, 0), (end, Rp, 0.0, 1),
                    (end + [0, 0, 0.08], Rp, 0.0, 0)]
        if self.grasp_depth is not None:  # fingers this long: below the middle, but the hand above the top
            hz = self._half_z(oid, R)
            # the approach clears the top (at 3 Hz a soft arm sags a few cm below its path while it moves)
            above = np.r_[p[:2], p[2] + hz + self.clearance]
            p = np.r_[p[:2], max(p[2] - 0.4 * hz, p[2] + hz - self.grasp_depth)]
        self._track(oid, above, p)
        plan = [(above, Rg, 1.0, 1), (p, Rg, 1.0, 1), (p, Rg, 0.0, 3), (p + [0, 0, self.lift], Rg, 0.0, 2)]
        if self.mode == "place":
            sup = self.pred.get("support", self.pred.get("container"))
            sp, sR = self._pose(objects, sup)
            top = sp[2] + self._half_z(sup, sR)
            target = np.r_[sp[:2], top + self._half_z(oid, R) + 0.01]
            plan += [(target + [0, 0, 0.08], Rg, 0.0, 0), (target, Rg, 0.0, 1), (target, Rg, 1.0, 2),
                     (target + [0, 0, 0.08], Rg, 1.0, 0)]
        return plan

    def _place_in_drawer_plan(self, objects, hand) -> list:
        """After the drawer is open: up over the object's top, pick it (as ``pick``), lift it by its half height
        (above the drawer's rim), carry it low over the middle of the drawer's opened part, let go, up."""
        J, a, to_base = self._joint_frame()
        oid = self.then["object"]
        frac = float(self.pred.get("fraction", 0.3))
        pulled = max(J["lower"] + frac * (J["upper"] - J["lower"]) - J["position"] + self.pull_margin,
                     2 * self._half_xy(oid, self._pose(objects, oid)[1]) + 0.12)
        p, Ro = self._pose(objects, oid)
        Rg = self._grasp_R(Ro, oid)
        hz = self._half_z(oid, Ro)
        top = (self.T_base_world[:3, :3] @ [0.0, 0.0, J["top"]] + self.T_base_world[:3, 3])[2]
        up = np.r_[hand[:2], top + hz + self.clearance + 0.05]
        above = np.r_[p[:2], max(p[2] + hz + self.clearance, up[2])]
        g = p if self.grasp_depth is None else np.r_[p[:2], max(p[2] - 0.4 * hz, p[2] + hz - self.grasp_depth)]
        # the opened part of the drawer: from the cabinet's front (the handle's front at the closed position, less
        # the handle's depth and the front's) to the drawer front's inside; its middle
        h = to_base(J["handle"])
        depth = float(np.abs(np.asarray(J["handle_size"])) @ np.abs(J["axis"]))
        mid = h - a * (depth + 0.03) + a * (pulled / 2)
        rim = to_base(J["face"])[2]  # the drawer's height at its centre; its rim is above
        drop = np.r_[mid[:2], max(rim + 0.07 + hz + 0.02, g[2])]
        self._track(oid, above, g)
        # carried low: lifted by its half height (above the drawer's rim), over the drawer, let go there. Carried
        # over the top (up to the approach height, across, down: ~14 steps), MuJoCo's apple slid out along the
        # tilted fingers (3 cm) and fell onto the cabinet (a0, b0: 0/6); a harder squeeze ejected it sooner
        carry = np.r_[g[:2], max(g[2], drop[2]) + hz]
        return [(up, Rg, 1.0, 0), (above, Rg, 1.0, 1), (g, Rg, 1.0, 1), (g, Rg, 0.0, 3), (carry, Rg, 0.0, 0),
                (np.r_[drop[:2], carry[2]], Rg, 0.0, 0), (np.r_[drop[:2], carry[2]], Rg, 1.0, 2),
                (np.r_[drop[:2], above[2]], Rg, 1.0, 0)]

    def _track(self, oid, approach, *points) -> None:
        """While the hand goes open to ``approach`` (over the object), it and ``points`` (the grasp; arrays, changed
        in place) follow the object's measured x, y each step (re-planned from the state: an object nudged on the way,
        e.g. by a sagging arm, is gripped where it is). Not on the way down to the grasp: there the fingers touch the
        object (a noisy oracle's, 3 cm off) and chasing it pushes it on (the WidowX's scripted:noise=0.03 lost 1 of
        12 lifts and stacks that way)."""
        self._tracked[id(approach)] = (oid, (approach, *points))

    def _follow(self, objects) -> None:
        pos, _, grip, _ = self.plan[self.phase]
        tr = self._tracked.get(id(pos))
        if tr is None or grip < 0.5:
            return
        oid, pts = tr
        xy = self._pose(objects, oid)[0][:2]
        for pt in pts:
            pt[:2] = xy

    def _world_to_base(self, p):
        T = self.T_base_world
        if T is None:
            raise Real2SimError("pushing to a world point needs 'robot_base_pose' in the reset info")
        return T[:3, :3] @ p + T[:3, 3]
