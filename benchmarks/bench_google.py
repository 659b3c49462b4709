"""The Google Robot's scenes (issue #15): ratios measured in one run, no assertions.

* control step overhead: the Google Robot's end-effector delta-pose control step in the coke-can scene (IK, joint
  targets, 171 physics substeps at 3 Hz / 513 Hz) vs its raw substeps alone (target <= 1.2x), MuJoCo and SAPIEN
  (``bench_robots.py`` times the robot alone, without a scene, against a replay of the same targets);
* composited env step at the overlay's 640x512 (controller + substeps + render + segmentation + composite on the
  real overlay) vs the WidowX scene's composited step (the tabletop demo scene with the WidowX, 640x480, 5 Hz / 500 Hz),
  MuJoCo and SAPIEN (target within 1.3x); each side's raw physics and raw render + segmentation are printed apart so
  a miss can be traced to its part.

Needs ``../shared/data`` (the Google Robot, the overlay, the coke can); without it says so and measures nothing.

    MUJOCO_GL=egl PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_google.py [--steps 20] [--backend B]
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
DATA = ROOT.parent / "shared" / "data"
BACKENDS = ("mujoco", "sapien")


def round_robin(fns: dict, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall seconds and median CPU seconds (every thread of this process: llvmpipe renders on several) per
    call of each function, called in turn (one call of each, ``n`` times, the order reversed every other time: the
    first of a turn measured slower on the loaded 2-core machine). A burst of other work then hits every side alike;
    the CPU time is the work itself, which other sessions' load does not stretch."""
    for fn in fns.values():
        fn()  # warm
    wall, cpu = {k: [] for k in fns}, {k: [] for k in fns}
    for i in range(n):
        for k, fn in (list(fns.items()) if i % 2 == 0 else list(fns.items())[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return ({k: float(np.median(v)) for k, v in wall.items()}, {k: float(np.median(v)) for k, v in cpu.items()})


def google_bundle(tmp: Path):
    """The coke-can scene (standing can) built and exported (MJCF, SAPIEN) from the shared data; no evaluation."""
    from real2sim.demos.google import build_google_scene

    os.environ.setdefault("REAL2SIM_GOOGLE_ROBOT", str(DATA / "google_robot" / "description"))
    bundle, _ = build_google_scene(DATA, tmp / "google", "pick_coke_can", "standing", engines=["mjcf", "sapien"],
                                   evaluate_in=[])
    return bundle


def control_overhead(bundle, backend: str, n: int) -> None:
    """The control step (``Controller.step``: the action's joint targets by IK, then the raw physics substeps) timed
    in its two parts step by step, so the raw substeps it is compared with are exactly the ones it ran (two envs
    taking turns differed by 10 % doing identical work on the loaded 2-core machine). Overhead = median over steps
    of (targets + substeps) / substeps."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    env = Real2SimEnv(bundle.root, backend=backend, obs_mode="state", render_mode=None)
    env.reset(seed=0)
    ctl, sc, sub = env.controller, env.scene, env.controller.substeps
    rng = np.random.default_rng(0)
    acts = np.concatenate([rng.uniform(-0.01, 0.01, (n + 1, 3)), rng.uniform(-0.02, 0.02, (n + 1, 3)),
                           np.ones((n + 1, 1))], 1)  # RT-1-sized EE deltas, the hand open
    ctl.step(acts[0])  # warm
    t_targets, t_raw, c_targets, c_raw = [], [], [], []
    for a in acts[1:]:  # what Controller.step does, timed in its parts
        t0, c0 = time.perf_counter(), time.process_time()
        q = ctl.targets(a)
        t1, c1 = time.perf_counter(), time.process_time()
        sc.set_joint_targets(q)
        sc.step_physics(sub)
        t_targets.append(t1 - t0)
        t_raw.append(time.perf_counter() - t1)
        c_targets.append(c1 - c0)
        c_raw.append(time.process_time() - c1)
    tt, tr = np.asarray(t_targets), np.asarray(t_raw)
    ct, cr = np.asarray(c_targets), np.asarray(c_raw)
    print(f"[{backend}] Google Robot control step (coke-can scene, {n} RT-1-sized EE-delta actions, {sub} substeps at "
          f"{ctl.physics_hz:.0f} Hz): IK + targets {np.median(tt) * 1e3:.2f} ms, raw substeps {np.median(tr) * 1e3:.1f} "
          f"ms -> overhead {np.median((tt + tr) / tr):.3f}x (target <= 1.2x; mean {(tt + tr).mean() / tr.mean():.3f}x; CPU "
          f"time {(ct + cr).sum() / cr.sum():.3f}x)")
    env.close()


def composited_steps(google, widowx, backend: str, n: int) -> None:
    """The Google scene's composited env step at 640x512 vs the WidowX scene's, interleaved, with each side's raw
    physics and raw render + segmentation alone."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    hold = np.array([0, 0, 0, 0, 0, 0, 1.0])
    envs = {"google": Real2SimEnv(google.root, backend=backend, camera="main", privileged=True),
            "widowx": Real2SimEnv(widowx.root, task="lift_cube", backend=backend, privileged=True)}
    fns = {}
    for name, env in envs.items():
        env.reset(seed=0)
        fns[f"{name} step"] = lambda env=env: env.step(hold)

        def phys(env=env):
            env.scene.set_joint_targets(env.controller.q_target)
            env.scene.step_physics(env.controller.substeps)

        fns[f"{name} physics"] = phys
        fns[f"{name} render"] = lambda env=env: env.scene.render_layers(env.camera, env.movable)
    t, c = round_robin(fns, n)
    (gw, gh), (ww, wh) = envs["google"].native_size, envs["widowx"].native_size
    g, w = envs["google"].controller, envs["widowx"].controller
    print(f"[{backend}] composited env step: Google coke-can scene {gw}x{gh} {t['google step'] * 1e3:.1f} ms vs "
          f"WidowX scene {ww}x{wh} {t['widowx step'] * 1e3:.1f} ms -> {t['google step'] / t['widowx step']:.2f}x "
          f"(target <= 1.3x); CPU time {c['google step'] * 1e3:.1f} vs {c['widowx step'] * 1e3:.1f} ms -> "
          f"{c['google step'] / c['widowx step']:.2f}x")
    for label, x in (("wall", t), ("CPU", c)):
        print(f"[{backend}]   parts ({label}): physics {g.substeps} substeps {x['google physics'] * 1e3:.1f} ms vs "
              f"{w.substeps} {x['widowx physics'] * 1e3:.1f} ms ({x['google physics'] / x['widowx physics']:.2f}x); "
              f"render + segmentation {x['google render'] * 1e3:.1f} ms vs {x['widowx render'] * 1e3:.1f} ms "
              f"({x['google render'] / x['widowx render']:.2f}x)")
    for env in envs.values():
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20, help="composited steps timed per side (control steps: 3x)")
    ap.add_argument("--backend", action="append", choices=BACKENDS, help="engine(s) (default: both)")
    args, _ = ap.parse_known_args()  # benchmarks/run_all.py passes its own filter words
    logging.basicConfig(level=logging.ERROR)
    need = [DATA / "google_robot" / "description", DATA / "google_robot" / "overlays", DATA / "objects" / "coke_can"]
    if not all(p.is_dir() for p in need):
        print(f"bench_google: {DATA} has no Google Robot data (google_robot/, objects/coke_can); nothing measured")
        return
    from envbundle import make_env_bundle

    tmp = Path(tempfile.mkdtemp(prefix="bench_google_"))
    os.environ.setdefault("REAL2SIM_CACHE", str(tmp / "cache"))
    google = google_bundle(tmp)
    widowx = make_env_bundle(tmp / "widowx")
    for backend in args.backend or BACKENDS:
        control_overhead(google, backend, 3 * args.steps)
        composited_steps(google, widowx, backend, args.steps)


if __name__ == "__main__":
    main()
