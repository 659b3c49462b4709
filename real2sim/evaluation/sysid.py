"""System identification of the robot's joint drive gains (stiffness, damping) from real trajectories.

Method (SIMPLER, sec. 4.2): replay every recorded action sequence open loop from its recorded
start joints through :class:`real2sim.robots.control.Controller`; the loss of one episode is

    mean_t ||p_real(t) - p_sim(t)||_2  +  mean_t ||R_real(t)^T R_sim(t) - I||_F

over the end-effector poses in the robot base frame. Simulated annealing searches the gains in
normalised coordinates ``x in [0, 1]`` (log-scale between ``default / span`` and
``default * span``), in rounds that narrow the box around the best point (SIMPLER: 3 rounds).
Episodes are evaluated in parallel processes. Held-out episodes are only scored, never fitted.

Trajectory file (``.npz``), for episode ``i`` (0, 1, ...):

    actions_{i}     (T, A)        float: actions at the control rate (see the controller's modes)
    ee_poses_{i}    (T+1, 4, 4)   float: measured EE pose in the robot base frame, before the first
                                   action and after each action
    qpos_{i}        (T+1, dof)    float: measured joints (row 0 is the start pose of the replay)
    timestamps_{i}  (T+1,)        float: seconds, strictly increasing
    action_space    ()            str: "ee_delta" or "joint_pos" (default "ee_delta")
    robot           ()            str: registry name (optional; checked against --robot)

or a LeRobot v2 dataset root (see ``load_lerobot_trajectories``).
"""
from __future__ import annotations

import json
import logging
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError, require
from real2sim.core.manifest import RobotSpec
from real2sim.engines.sandbox import robot_scene
from real2sim.robots import get_robot, robot_ref
from real2sim.robots.control import Controller, ControllerConfig, replay
from real2sim.robots.kinematics import Kinematics

log = logging.getLogger(__name__)


class TrajectoryError(Real2SimError):
    """A trajectory file is malformed: the message names the file, the episode and the fix."""


@dataclass
class Episode:
    actions: np.ndarray
    ee_poses: np.ndarray
    qpos: np.ndarray
    timestamps: np.ndarray


def load_trajectories(path, robot, action_space: str | None = None) -> tuple[list[Episode], str]:
    """Read and validate a trajectory ``.npz`` for registry robot ``robot``; returns (episodes, action_space)."""

    path = Path(path)
    r = get_robot(robot)
    if _lerobot_root(path) is not None:
        return load_lerobot_trajectories(path, robot, action_space)
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise TrajectoryError(f"{path}: cannot read the trajectory file ({exc}). Fix: write it with numpy.savez") from exc
    space = str(z["action_space"]) if "action_space" in z.files else (action_space or "ee_delta")
    if "robot" in z.files and str(z["robot"]) not in (r.name, *r.aliases):
        raise TrajectoryError(f"{path}: recorded with robot '{z['robot']}', not '{r.name}'. Fix: pass --robot {z['robot']}")
    idx = sorted({int(m.group(1)) for k in z.files if (m := re.fullmatch(r"actions_(\d+)", k))})
    if not idx:
        raise TrajectoryError(f"{path}: no episodes (expected arrays actions_0, ee_poses_0, qpos_0, timestamps_0). "
                              "Fix: see docs/sysid.md")
    adim = 7 if space == "ee_delta" else r.n_arm + 1
    kin = Kinematics(r)
    eps = []
    for i in idx:
        where = f"{path}: episode {i}"
        missing = [f"{k}_{i}" for k in ("ee_poses", "qpos", "timestamps") if f"{k}_{i}" not in z.files]
        if missing:
            raise TrajectoryError(f"{where}: missing arrays {missing}. Fix: see docs/sysid.md")
        a, P, q, t = (np.asarray(z[f"{k}_{i}"], float) for k in ("actions", "ee_poses", "qpos", "timestamps"))
        eps.append(_check_episode(where, i, a, P, q, t, r, kin, space, adim))
    return eps, space


def _lerobot_root(path: Path) -> Path | None:
    for p in [path, *path.parents][:4]:
        if (p / "meta" / "info.json").is_file():
            return p
    return None


def load_lerobot_trajectories(path, robot, action_space: str | None = None) -> tuple[list[Episode], str]:
    """Episodes of a LeRobot v2 dataset (``meta/info.json`` + ``data/chunk-*/episode_*.parquet``).

    Per episode (one parquet file, N rows): ``observation.state`` -> ``qpos`` (``dof`` values, or
    ``n_arm + 1`` with the gripper as an opening in [0, 1]); ``action`` rows 0..N-2 -> actions;
    ``timestamp`` -> timestamps; EE poses are the forward kinematics of the recorded joints
    (robot base frame). The action space comes from ``action_space`` (default ``ee_delta``).
    """

    root = _lerobot_root(Path(path))
    pq = require("pyarrow.parquet", "capture", "pyarrow")
    r = get_robot(robot)
    kin = Kinematics(r)
    space = action_space or "ee_delta"
    adim = 7 if space == "ee_delta" else r.n_arm + 1
    files = sorted((root / "data").rglob("episode_*.parquet"))
    if not files:
        raise TrajectoryError(f"{root}: LeRobot dataset without data/chunk-*/episode_*.parquet files")
    eps = []
    for f in files:
        where = f"{f}: episode {f.stem.split('_')[-1]}"
        cols = pq.read_table(f).to_pydict()
        missing = [c for c in ("action", "observation.state", "timestamp") if c not in cols]
        if missing:
            raise TrajectoryError(f"{where}: columns {missing} are missing (has {sorted(cols)})")
        state = np.asarray(cols["observation.state"], float)
        if state.ndim == 2 and state.shape[1] == r.n_arm + 1:  # arm + gripper opening
            grip = np.stack([r.gripper_targets(g) for g in np.clip(state[:, -1], 0, 1)])
            state = np.concatenate([state[:, :-1], grip], 1)
        if state.ndim != 2 or state.shape[1] != r.dof:
            raise TrajectoryError(f"{where}: observation.state has shape {state.shape}, expected (N, {r.dof}) or "
                                  f"(N, {r.n_arm + 1}) for robot '{r.name}'")
        P = np.stack([kin.fk(q) for q in state])
        i = int(f.stem.split("_")[-1]) if f.stem.split("_")[-1].isdigit() else len(eps)
        eps.append(_check_episode(where, i, np.asarray(cols["action"], float)[:-1], P, state,
                                  np.asarray(cols["timestamp"], float), r, kin, space, adim))
    return eps, space


def _check_episode(where: str, i: int, a, P, q, t, r, kin, space: str, adim: int) -> Episode:
    """Validate one episode's arrays; errors name ``where`` (file and episode) and the fix."""
    lo, hi = kin.lower, kin.upper
    T = len(a)
    for name, arr in (("actions", a), ("ee_poses", P), ("qpos", q), ("timestamps", t)):
        if not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0].tolist()
            raise TrajectoryError(f"{where}: {name}_{i} has NaN/inf (first at index {bad}). Fix: drop or repair "
                                  "that episode")
    if a.ndim != 2 or a.shape[1] != adim:
        raise TrajectoryError(f"{where}: actions_{i} has shape {a.shape}, expected (T, {adim}) for action space "
                              f"'{space}' of robot '{r.name}'")
    if q.shape != (T + 1, r.dof):
        raise TrajectoryError(f"{where}: qpos_{i} has shape {q.shape}, expected ({T + 1}, {r.dof}): robot '{r.name}' "
                              f"has {r.dof} joints ({', '.join(r.joint_names)}) and T+1 rows")
    if P.shape != (T + 1, 4, 4):
        raise TrajectoryError(f"{where}: ee_poses_{i} has shape {P.shape}, expected ({T + 1}, 4, 4)")
    if t.shape != (T + 1,):
        raise TrajectoryError(f"{where}: timestamps_{i} has shape {t.shape}, expected ({T + 1},)")
    if np.any(np.diff(t) <= 0):
        k = int(np.argmax(np.diff(t) <= 0))
        raise TrajectoryError(f"{where}: timestamps_{i} are not strictly increasing (t[{k}]={t[k]} >= "
                              f"t[{k + 1}]={t[k + 1]}). Fix: sort or de-duplicate the samples")
    tol = 1e-6
    if np.any(q < lo - 1e-3) or np.any(q > hi + 1e-3):
        j = int(np.argwhere((q < lo - 1e-3) | (q > hi + 1e-3))[0][1])
        raise TrajectoryError(f"{where}: qpos_{i} leaves the limits of joint '{r.joint_names[j]}' "
                              f"[{lo[j]:.4f}, {hi[j]:.4f}]")
    if space == "joint_pos":
        bad = (a[:, :-1] < lo[: r.n_arm] - tol) | (a[:, :-1] > hi[: r.n_arm] + tol)
        if bad.any():
            s, j = np.argwhere(bad)[0]
            raise TrajectoryError(f"{where}: action {s} targets joint '{r.joint_names[j]}' at {a[s, j]:.4f}, "
                                  f"outside its limits [{lo[j]:.4f}, {hi[j]:.4f}]")
    if np.any(a[:, -1] < -tol) or np.any(a[:, -1] > 1 + tol):
        s = int(np.argwhere((a[:, -1] < -tol) | (a[:, -1] > 1 + tol))[0][0])
        raise TrajectoryError(f"{where}: action {s} gripper value {a[s, -1]} is outside [0 (closed), 1 (open)]")
    if space == "ee_delta" and np.any(np.abs(a[:, :6]) > 1.0):
        s = int(np.argwhere(np.abs(a[:, :6]) > 1.0)[0][0])
        raise TrajectoryError(f"{where}: action {s} asks for an EE step over 1 m or 1 rad ({a[s, :6]}); "
                              "deltas are per control step, in metres and radians")
    return Episode(a, P, q, t)


def trajectory_loss(real: np.ndarray, sim: np.ndarray) -> float:
    """Mean EE translation L2 (m) + mean rotation error ||R_real^T R_sim - I||_F over ``(T, 4, 4)`` poses."""
    dp = np.linalg.norm(real[:, :3, 3] - sim[:, :3, 3], axis=1).mean()
    M = np.einsum("tji,tjk->tik", real[:, :3, :3], sim[:, :3, :3]) - np.eye(3)
    return float(dp + np.linalg.norm(M, axis=(1, 2)).mean())


# ---------------------------------------------------------------------------------------------
# parameterisation
# ---------------------------------------------------------------------------------------------
@dataclass
class GainSpace:
    """Which gains are fitted. ``groups``: list of joint-index lists sharing one (stiffness, damping) pair."""

    default_k: np.ndarray
    default_d: np.ndarray
    groups: list
    span: float = 4.0

    @property
    def n(self) -> int:
        return 2 * len(self.groups)

    def gains(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Normalised ``x in [0,1]^n`` -> full per-joint (stiffness, damping); log scale in [default/span, default*span]."""
        k, d = self.default_k.copy(), self.default_d.copy()
        s = np.log(self.span)
        for g, joints in enumerate(self.groups):
            fk = np.exp(s * (2 * x[2 * g] - 1))
            fd = np.exp(s * (2 * x[2 * g + 1] - 1))
            k[joints] = self.default_k[joints] * fk
            d[joints] = self.default_d[joints] * fd
        return k, d


def make_space(robot, share: str = "per_joint", span: float = 4.0, default_k=None, default_d=None) -> GainSpace:
    """``share``: ``"per_joint"`` (every arm joint its own pair) or ``"arm"`` (one pair for the whole arm)."""

    r = get_robot(robot)
    k = np.asarray(default_k if default_k is not None else r.default_stiffness(), float)
    d = np.asarray(default_d if default_d is not None else r.default_damping(), float)
    groups = [list(range(r.n_arm))] if share == "arm" else [[j] for j in range(r.n_arm)]
    return GainSpace(k, d, groups, span)


# ---------------------------------------------------------------------------------------------
# workers
# ---------------------------------------------------------------------------------------------
_W: dict = {}
_CONTROLLERS: dict = {}


def _controller(robot: str, engine: str, space: str):
    """A controller on a robot-only scene, built once per process and (robot, engine, action space)."""

    key = (robot, engine, space)
    if key not in _CONTROLLERS:
        _CONTROLLERS[key] = Controller(robot_scene(robot, engine), ControllerConfig(mode=space))
    return _CONTROLLERS[key]


def _worker_init(robot: str, engine: str, space: str, episodes=None):
    logging.getLogger("real2sim").setLevel(logging.WARNING)
    _W["ctl"] = _controller(robot, engine, space)
    _W["episodes"] = episodes or []


def _simulate(k, d, ep: Episode, ctl=None) -> np.ndarray:

    ctl = ctl or _W["ctl"]
    ctl.set_gains(k, d)
    poses, _ = replay(ctl, ep.actions, ep.qpos[0])
    return poses


def _chunk_losses(args) -> list[float]:
    """Losses of the worker's cached episodes ``idx`` for gains (k, d): one message per chunk, not per episode."""
    k, d, idx = args
    eps = _W["episodes"]
    return [trajectory_loss(eps[i].ee_poses, _simulate(k, d, eps[i])) for i in idx]


class _Evaluator:
    """Scores gains on a fixed list of episodes, in ``workers`` processes that each hold every episode."""

    def __init__(self, robot, engine, space, workers, episodes):
        self.n = len(episodes)
        self.workers = max(1, min(workers, self.n))
        args = (robot, engine, space, episodes)
        if self.workers > 1:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")  # no fork of a process holding engine state
            self.pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_worker_init, initargs=args)
        else:
            _worker_init(*args)
            self.pool = None

    def losses(self, k, d, idx) -> list[float]:
        idx = list(idx)
        if self.pool is None:
            return _chunk_losses((k, d, idx))
        chunks = [idx[i::self.workers] for i in range(self.workers)]
        out = dict()
        for chunk, res in zip(chunks, self.pool.map(_chunk_losses, [(k, d, c) for c in chunks])):
            out.update(zip(chunk, res))
        return [out[i] for i in idx]

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()


@dataclass
class SysIdResult:
    robot: str
    stiffness: list
    damping: list
    train_loss: float
    heldout_loss: float | None
    initial_train_loss: float
    evaluations: int
    history: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("robot", "stiffness", "damping", "train_loss", "heldout_loss",
                                               "initial_train_loss", "evaluations")}


@dataclass
class SysIdConfig:
    """How gains are fitted (``real2sim sysid``)."""

    share: str = "per_joint"
    """'per_joint': one stiffness/damping pair per arm joint; 'arm': one pair shared by the whole arm."""
    rounds: int = 3
    """Narrowing rounds of simulated annealing."""
    iters_per_round: int = 60
    """Annealing iterations per round."""
    span: float = 4.0
    """Search range around the start gains (a factor, each way)."""
    heldout_fraction: float = 0.2
    """Fraction of episodes held out (scored, not fitted)."""
    seed: int = 0
    """Random seed: the same episodes and seed give the same gains."""


def fit_gains(episodes: list[Episode], robot, action_space: str = "ee_delta", heldout: list[Episode] | None = None,
              engine: str | None = None, share: str = SysIdConfig.share, rounds: int = SysIdConfig.rounds,
              iters_per_round: int = SysIdConfig.iters_per_round, span: float = SysIdConfig.span, workers: int = 1,
              seed: int = SysIdConfig.seed, default_k=None, default_d=None) -> SysIdResult:
    """Simulated annealing over normalised gains, ``rounds`` narrowing rounds; deterministic for a seed."""

    r = get_robot(robot)
    space = make_space(r, share, span, default_k, default_d)
    rng = np.random.default_rng(seed)
    heldout = list(heldout or [])
    ev = _Evaluator(robot_ref(r), engine, action_space, workers, list(episodes) + heldout)  # by path for a file robot
    train_idx = range(len(episodes))
    held_idx = range(len(episodes), len(episodes) + len(heldout))
    n_eval = 0

    def f(x):
        nonlocal n_eval
        n_eval += 1
        k, d = space.gains(x)
        return float(np.mean(ev.losses(k, d, train_idx)))

    try:
        x = np.full(space.n, 0.5)
        fx = f(x)
        init = fx
        best, fbest = x.copy(), fx
        lo, hi = np.zeros(space.n), np.ones(space.n)
        history = [fx]
        for rnd in range(rounds):
            T0 = max(fbest, 1e-9) * 0.1
            step = 0.25 * (hi - lo)
            x, fx = best.copy(), fbest
            for it in range(iters_per_round):
                temp = T0 * (1 - it / iters_per_round) + 1e-12
                cand = np.clip(x + rng.normal(0, 1, space.n) * step * (1 - 0.7 * it / iters_per_round), lo, hi)
                fc = f(cand)
                if fc < fx or rng.random() < np.exp(-(fc - fx) / temp):
                    x, fx = cand, fc
                if fc < fbest:
                    best, fbest = cand.copy(), fc
                history.append(fbest)
            width = (hi - lo) / 3.0  # narrow the box around the best point
            lo, hi = np.clip(best - width / 2, 0, 1), np.clip(best + width / 2, 0, 1)
            log.info("sysid round %d: loss %.5f", rnd + 1, fbest)
        k, d = space.gains(best)
        held = float(np.mean(ev.losses(k, d, held_idx))) if heldout else None
    finally:
        ev.close()
    return SysIdResult(r.name, k.tolist(), d.tolist(), fbest, held, init, n_eval, history)


def simulate_episode(robot, k, d, ep: Episode, action_space: str = "ee_delta", engine: str | None = None) -> np.ndarray:
    """Simulated EE poses of one episode with gains (k, d) (in this process)."""
    ctl = _controller(get_robot_name(robot), engine, action_space)
    return _simulate(np.asarray(k, float), np.asarray(d, float), ep, ctl)


def get_robot_name(robot) -> str:

    return get_robot(robot).name


def plot_paths(path, real: list[np.ndarray], sim: list[np.ndarray], title: str = "") -> Path:
    """PNG of real (black) vs simulated (red) EE paths: top view (x-y) and side view (x-z), drawn with PIL."""
    from PIL import Image, ImageDraw

    W, H, pad = 900, 450, 30
    img = Image.new("RGB", (W, H), "white")
    dr = ImageDraw.Draw(img)
    allp = np.concatenate([p[:, :3, 3] for p in real + sim])
    mn, mx = allp.min(0), allp.max(0)
    scale = min((W / 2 - 2 * pad) / max(mx[0] - mn[0], mx[1] - mn[1], mx[2] - mn[2], 1e-6), (H - 2 * pad - 20) /
                max(mx[1] - mn[1], mx[2] - mn[2], mx[0] - mn[0], 1e-6))
    for panel, (ax, ay, name) in enumerate(((0, 1, "top (x, y)"), (0, 2, "side (x, z)"))):
        ox = panel * W / 2 + pad
        dr.text((ox, 5), f"{name} {title}", fill="black")
        for paths, colour in ((real, (0, 0, 0)), (sim, (220, 30, 30))):
            for p in paths:
                pts = [(ox + (v[ax] - mn[ax]) * scale, H - pad - (v[ay] - mn[ay]) * scale) for v in p[:, :3, 3]]
                if len(pts) > 1:
                    dr.line(pts, fill=colour, width=2)
    dr.text((pad, H - 20), "black: real   red: simulated", fill="black")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def run_sysid(trajectories, robot, out: Path | None = None, bundle_dir: Path | None = None,
              heldout_fraction: float = SysIdConfig.heldout_fraction,
              workers: int | None = None, action_space: str | None = None, **kw) -> SysIdResult:
    """Load, fit, report: writes gains JSON (``out``), and with a bundle its robot section + reports/sysid.{json,png}."""

    eps, space = load_trajectories(trajectories, robot, action_space)
    n_held = int(round(len(eps) * heldout_fraction)) if len(eps) > 1 else 0
    train, held = eps[: len(eps) - n_held], eps[len(eps) - n_held:]
    workers = workers or min(len(train), os.cpu_count() or 1)
    res = fit_gains(train, robot, space, heldout=held or None, workers=workers, **kw)
    if out:
        Path(out).write_text(json.dumps(res.to_json(), indent=2) + "\n")
    if bundle_dir:
        b = Bundle.load(bundle_dir)
        m = b.manifest
        if m.robot is None:
            m.robot = RobotSpec(name=res.robot, source="sysid")
        elif get_robot_name(m.robot.name) != res.robot:
            raise Real2SimError(f"{bundle_dir}: the bundle's robot is '{m.robot.name}', the gains are for '{res.robot}'")
        m.robot.stiffness, m.robot.damping = list(res.stiffness), list(res.damping)
        sims = [simulate_episode(robot, res.stiffness, res.damping, e, space) for e in eps[:8]]
        plot_paths(b.path("reports/sysid.png"), [e.ee_poses for e in eps[:8]], sims, f"loss {res.train_loss:.4f}")
        b.write_report("sysid", res.to_json())
        b.save()
    return res
