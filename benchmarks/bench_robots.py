"""Robots: IK per step, controller overhead per control step vs raw engine substeps, sysid 2 workers vs 1,
plus the kinematics and replay agreement numbers. Prints ratios measured in one run; no assertions.

    .venv/bin/python benchmarks/bench_robots.py [--quick]
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
QUICK = "--quick" in sys.argv


def _google_data() -> bool:
    """Point REAL2SIM_GOOGLE_ROBOT at ../shared/data's Google Robot description when it is there (and unset)."""
    desc = Path(__file__).resolve().parents[2] / "shared" / "data" / "google_robot" / "description"
    if "REAL2SIM_GOOGLE_ROBOT" not in os.environ and desc.is_dir():
        os.environ["REAL2SIM_GOOGLE_ROBOT"] = str(desc)
    return bool(os.environ.get("REAL2SIM_GOOGLE_ROBOT"))


def bench_ik():
    from real2sim.robots.kinematics import Kinematics

    for robot in ("widowx250s", "panda"):
        k = Kinematics(robot)
        q0 = np.array(k.robot.default_qpos)
        rng = np.random.default_rng(0)
        targets = []
        for _ in range(200):
            q = q0.copy()
            q[: k.robot.n_arm] += rng.normal(0, 0.03, k.robot.n_arm)  # a 5 Hz control step's worth of motion
            targets.append(k.fk(q))
        t = time.perf_counter()
        for T in targets:
            k.ik(T, q0)
        ik = (time.perf_counter() - t) / len(targets)
        t = time.perf_counter()
        for _ in range(len(targets)):
            k.fk(q0)
        fk = (time.perf_counter() - t) / len(targets)
        print(f"IK {robot:10s}: {ik * 1e3:.3f} ms/solve (target < 1 ms); FK {fk * 1e6:.1f} us; IK/FK {ik / fk:.1f}x")


def bench_controller():
    from real2sim.engines.sandbox import robot_scene
    from real2sim.robots.control import Controller

    robots = ["widowx250s"] + (["google_robot"] if _google_data() else [])
    for robot, engine in [(r, e) for r in robots for e in ("mjcf", "sapien")]:
        sc = robot_scene(robot, engine, Path(tempfile.mkdtemp()))
        ctl = Controller(sc)
        n = 20 if QUICK else 50
        rng = np.random.default_rng(0)
        acts = np.concatenate([rng.uniform(-0.01, 0.01, (n, 6)), np.ones((n, 1))], 1)
        ctl.reset(ctl.robot.default_qpos)
        targets = []
        t = time.perf_counter()
        for a in acts:
            ctl.step(a)
            targets.append(ctl.q_target.copy())
        t_ctl = (time.perf_counter() - t) / n
        sc.set_robot_qpos(ctl.robot.default_qpos)  # the same motion, targets precomputed: raw engine cost
        t = time.perf_counter()
        for q in targets:
            sc.set_joint_targets(q)
            sc.step_physics(ctl.substeps)
        t_raw = (time.perf_counter() - t) / n
        print(f"controller {robot:12s} {engine:6s}: {t_ctl * 1e3:.2f} ms/control step vs the same targets + "
              f"{ctl.substeps} raw substeps {t_raw * 1e3:.2f} ms -> overhead {t_ctl / t_raw:.3f}x "
              f"(target <= {1.1 if robot == 'widowx250s' else 1.2}x)")


def bench_agreement():
    from real2sim.core.manifest import Pose
    from real2sim.engines.sandbox import robot_scene
    from real2sim.robots.control import Controller, replay
    from real2sim.robots.kinematics import Kinematics

    base = Pose([-0.35, 0.1, 0.02], [0.9238795, 0.0, 0.0, 0.3826834])
    for robot in ("widowx250s", "panda"):
        k = Kinematics(robot)
        scenes = {e: robot_scene(robot, e, Path(tempfile.mkdtemp()), base_pose=base) for e in ("mjcf", "sapien")}
        rng = np.random.default_rng(42)
        mm, deg = {e: 0.0 for e in scenes}, {e: 0.0 for e in scenes}
        for _ in range(100):
            q = rng.uniform(k.lower, k.upper)
            ref = base.matrix() @ k.fk(q)
            for e, sc in scenes.items():
                sc.set_robot_qpos(q)
                T = sc.link_pose(k.robot.ee_link) @ k.T_link_ee
                mm[e] = max(mm[e], 1e3 * np.linalg.norm(T[:3, 3] - ref[:3, 3]))
                c = np.clip((np.trace(T[:3, :3].T @ ref[:3, :3]) - 1) / 2, -1, 1)
                deg[e] = max(deg[e], np.degrees(np.arccos(c)))
        print(f"FK agreement {robot:10s} vs pinocchio, 100 configs: "
              + ", ".join(f"{e} {mm[e]:.2e} mm / {deg[e]:.2e} deg" for e in scenes))
        rng = np.random.default_rng(1)
        n = 25
        acts = np.concatenate([rng.uniform(-0.02, 0.02, (n, 3)), rng.uniform(-0.06, 0.06, (n, 3)),
                               (rng.uniform(size=(n, 1)) > 0.5)], 1)
        paths = {e: replay(Controller(sc), acts, k.robot.default_qpos)[0][:, :3, 3] for e, sc in scenes.items()}
        gap = np.linalg.norm(paths["mjcf"] - paths["sapien"], axis=1).max()
        travel = np.linalg.norm(np.diff(paths["mjcf"], axis=0), axis=1).sum()
        print(f"replay {robot:10s}: {n} EE-delta actions, MuJoCo vs SAPIEN max EE gap {gap * 1e3:.3f} mm "
              f"(travel {travel * 1e3:.0f} mm; limit 5 mm)")


def bench_sysid():
    from test_sysid import _episodes

    from real2sim.evaluation.sysid import _Evaluator
    from real2sim.robots import get_robot

    r = get_robot("widowx250s")
    n = 8 if QUICK else 20
    eps = _episodes("widowx250s", r.default_stiffness(), r.default_damping(), n=n, T=5)
    k, d = np.array(r.default_stiffness()), np.array(r.default_damping())
    times, start = {}, {}
    for w in (1, 2):
        t = time.perf_counter()
        ev = _Evaluator("widowx250s", "mjcf", "ee_delta", w, eps)
        ev.losses(k, d, range(n))  # workers are up and warm
        start[w] = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(5):
            ev.losses(k * (1 + 0.01 * i), d, range(n))
        times[w] = (time.perf_counter() - t) / 5
        ev.close()
    print(f"sysid {n} trajectories, one loss evaluation: 1 worker {times[1] * 1e3:.0f} ms, 2 workers "
          f"{times[2] * 1e3:.0f} ms -> speed-up {times[1] / times[2]:.2f}x (one-off start-up {start[1]:.1f} s vs "
          f"{start[2]:.1f} s)")


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.WARNING)
    bench_ik()
    bench_controller()
    bench_agreement()
    bench_sysid()
