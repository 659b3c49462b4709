"""``real2sim robots check FILE``: a robot (definition file or registry name) loaded in every engine, its forward
kinematics compared with pinocchio's, its drives stepped, and what its URDF needed fixing reported.

Forward kinematics: ``samples`` random joint vectors inside the limits; each engine that can re-pose its robot
(capability ``physics``) is posed at every one; a static export (USD) is exported and read back at a few of them.
The end-effector frame (``ee_link`` + ``ee_offset``) and every camera mount are compared with pinocchio's.
Stepping: from the default pose, the drives hold it for one second of simulated time; the largest joint error and
whether the state stayed finite are reported (a robot that explodes or sags is refused).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.geometry import make_pose
from real2sim.core.tempfiles import scratch_dir
from real2sim.engines.registry import engines, get_exporter
from real2sim.engines.sandbox import robot_only_bundle
from real2sim.robots import get_robot
from real2sim.robots.spec import urdf_fixes

log = logging.getLogger(__name__)

FK_TOL_MM = 1.0
FK_TOL_DEG = 0.5
HOLD_TOL = 0.05
TRACK_STEP = 0.1
"""The step (rad or m, each joint toward its range's middle) the drives track for one second in every simulator."""
STEP_GAP_NOTE_MM = 5.0
"""Largest joint error (rad or m) after holding the default pose for one second before the check fails."""


@dataclass
class EngineCheck:
    engine: str
    loaded: bool = False
    error: str = ""
    fk_samples: int = 0
    fk_worst_mm: float = 0.0
    fk_worst_deg: float = 0.0
    camera_worst_mm: float = 0.0
    hold_error: float | None = None
    finite: bool | None = None
    track_error: float | None = None
    track_ee: list | None = None


@dataclass
class RobotCheck:
    robot: str
    source: str
    dof: int
    joints: list
    fixes: list
    engines: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    step_gap_mm: float | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {**asdict(self), "ok": self.ok}

    def lines(self) -> list[str]:
        out = [f"robot {self.robot} ({self.dof} actuated joints: {', '.join(self.joints)}) from {self.source}"]
        out += [f"  fixed: {f}" for f in self.fixes] or ["  fixed: nothing (the URDF was usable as it is)"]
        for e in self.engines:
            if not e["loaded"]:
                out.append(f"  {e['engine']:7s} FAILED to load: {e['error']}")
                continue
            line = (f"  {e['engine']:7s} FK vs pinocchio over {e['fk_samples']} poses: worst {e['fk_worst_mm']:.4f} mm, "
                    f"{e['fk_worst_deg']:.4f} deg")
            if e["camera_worst_mm"]:
                line += f"; camera mounts worst {e['camera_worst_mm']:.4f} mm"
            if e["hold_error"] is not None:
                line += f"; holds the default pose for 1 s within {e['hold_error']:.4g}"
            if e["track_error"] is not None:
                line += f"; a {TRACK_STEP} rad/m step on every joint tracked to {e['track_error']:.4g} in 1 s"
            out.append(line)
        if self.step_gap_mm is not None:
            out.append(f"  end-effector after that step, simulators apart by {self.step_gap_mm:.3f} mm")
        out += [f"  note: {n}" for n in self.notes]
        out += [f"  PROBLEM: {p}" for p in self.problems] or ["  OK"]
        return out


def _angle_deg(Ra, Rb) -> float:
    c = np.clip((np.trace(Ra.T @ Rb) - 1) / 2, -1, 1)
    return float(np.degrees(np.arccos(c)))


def _compare(sc, kin, q, base, rec: EngineCheck) -> None:
    r = kin.robot
    ref = base @ kin.fk(q)
    T = sc.link_pose(r.ee_link) @ kin.T_link_ee
    rec.fk_worst_mm = max(rec.fk_worst_mm, 1e3 * float(np.linalg.norm(T[:3, 3] - ref[:3, 3])))
    rec.fk_worst_deg = max(rec.fk_worst_deg, _angle_deg(T[:3, :3], ref[:3, :3]))
    for m in r.camera_mounts.values():
        off = make_pose(m["position"], m["quaternion_wxyz"])
        got = sc.link_pose(m["link"]) @ off
        want = base @ kin.link_pose(q, m["link"]) @ off
        rec.camera_worst_mm = max(rec.camera_worst_mm, 1e3 * float(np.linalg.norm(got[:3, 3] - want[:3, 3])))
    rec.fk_samples += 1


def _hold(sc, q0, rec: EngineCheck) -> None:
    sc.set_robot_qpos(q0)
    sc.set_joint_targets(q0)
    n = max(1, int(round(1.0 / sc.physics_timestep)))
    sc.step_physics(n)
    q = sc.robot_qpos()
    rec.finite = bool(np.all(np.isfinite(q)))
    rec.hold_error = float(np.abs(q - q0).max()) if rec.finite else float("inf")


def _track(sc, kin, q0, base, rec: EngineCheck) -> None:
    """Step every joint target by TRACK_STEP toward the middle of its range (gripper too: a tenth of its travel), hold
    one second: the joint error left and where the end-effector went."""
    mid = (kin.lower + kin.upper) / 2
    step = np.full(len(q0), TRACK_STEP)
    n = kin.robot.n_arm
    step[n:] = np.minimum(TRACK_STEP, 0.1 * (kin.upper[n:] - kin.lower[n:]))
    target = np.clip(q0 + np.sign(mid - q0) * step, kin.lower, kin.upper)
    sc.set_robot_qpos(q0)
    sc.set_joint_targets(target)
    sc.step_physics(max(1, int(round(1.0 / sc.physics_timestep))))
    q = sc.robot_qpos()
    rec.track_error = float(np.abs(q - target).max())
    rec.track_ee = (sc.link_pose(kin.robot.ee_link) @ kin.T_link_ee)[:3, 3].tolist()


def check_robot(robot, samples: int = 50, static_samples: int = 3, seed: int = 0, work_dir: Path | None = None,
                engine_names: list[str] | None = None) -> RobotCheck:
    """Load ``robot`` (definition file path, registry name or RobotDef) in every engine and check it (module doc).
    The bundles and exports go to ``work_dir`` (default: a temporary folder, removed afterwards)."""
    from real2sim.robots.kinematics import Kinematics

    if work_dir is None:
        with scratch_dir("robotcheck") as tmp:
            return check_robot(robot, samples, static_samples, seed, tmp, engine_names)

    r = get_robot(robot)
    kin = Kinematics(r)
    rep = RobotCheck(r.name, r.source.get("definition") or f"registry ({r.source.get('pip')})", r.dof,
                     list(r.joint_names), urdf_fixes(r))
    rng = np.random.default_rng(seed)
    qs = [np.asarray(r.default_qpos, float)] + [rng.uniform(kin.lower, kin.upper) for _ in range(samples)]
    work = Path(work_dir)
    for spec in engines():
        if engine_names and spec.name not in engine_names:
            continue
        rec = EngineCheck(spec.name)
        try:
            ex = get_exporter(spec.name)
            b = robot_only_bundle(r, work / spec.name)
            base = b.manifest.robot.base_pose.matrix()
            sc = ex.load(ex.export(b).main_file.parent)
            rec.loaded = True
            try:
                if "physics" in sc.capabilities:
                    for q in qs:
                        sc.set_robot_qpos(q)
                        _compare(sc, kin, q, base, rec)
                    _hold(sc, qs[0], rec)
                    _track(sc, kin, qs[0], base, rec)
                else:  # a static export holds one configuration: export and read back a few
                    _compare(sc, kin, qs[0], base, rec)
                    for i, q in enumerate(qs[1:1 + static_samples]):
                        bq = robot_only_bundle(r, work / f"{spec.name}_{i}", qpos=q)
                        sq = ex.load(ex.export(bq).main_file.parent)
                        try:
                            _compare(sq, kin, q, base, rec)
                        finally:
                            sq.close()
            finally:
                sc.close()
        except Exception as exc:  # one engine failing is a finding of the check, not the end of it
            rec.error = f"{type(exc).__name__}: {exc}"
            log.debug("robot check: %s failed", spec.name, exc_info=True)
        rep.engines.append(asdict(rec))
        if not rec.loaded:
            rep.problems.append(f"{spec.name} could not load the robot: {rec.error}")
            continue
        if rec.error:
            rep.problems.append(f"{spec.name}: {rec.error}")
        if rec.fk_worst_mm > FK_TOL_MM or rec.fk_worst_deg > FK_TOL_DEG or rec.camera_worst_mm > FK_TOL_MM:
            rep.problems.append(f"{spec.name} disagrees with pinocchio's forward kinematics by {rec.fk_worst_mm:.3f} mm "
                                f"/ {rec.fk_worst_deg:.3f} deg (camera mounts {rec.camera_worst_mm:.3f} mm; tolerance "
                                f"{FK_TOL_MM} mm / {FK_TOL_DEG} deg)")
        if rec.finite is False:
            rep.problems.append(f"{spec.name}: the simulation blew up (non-finite joint values) holding the default "
                                "pose; check the link masses/inertias and the gains")
        elif rec.hold_error is not None and rec.hold_error > HOLD_TOL:
            rep.problems.append(f"{spec.name}: holding the default pose for 1 s it drifted {rec.hold_error:.3f} "
                                f"(> {HOLD_TOL}); the gains are too weak for the links' masses, or a force limit "
                                "is too low")
    ees = [e["track_ee"] for e in rep.engines if e.get("track_ee") is not None]
    if len(ees) >= 2:
        rep.step_gap_mm = 1e3 * max(float(np.linalg.norm(np.subtract(a, b))) for a in ees for b in ees)
        if rep.step_gap_mm > STEP_GAP_NOTE_MM:
            rep.notes.append(f"the simulators end the same {TRACK_STEP} rad step {rep.step_gap_mm:.1f} mm apart: the "
                             "drives differ (a saturated force limit clamps MuJoCo's spring but PhysX's spring + "
                             "damper; docs/robots.md)")
    return rep
