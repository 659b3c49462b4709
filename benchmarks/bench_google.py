"""The Google Robot's scenes (issue #15): ratios measured in one run, no assertions.

* control step overhead: the Google Robot's end-effector delta-pose control step in the coke-can scene (IK, joint
  targets, 171 physics substeps at 3 Hz / 513 Hz) vs the same joint targets with the raw substeps (target <= 1.2x),
  MuJoCo and SAPIEN;
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


def round_robin(fns: dict, n: int) -> dict[str, float]:
    """Median seconds per call of each function, called in turn (one call of each, ``n`` times): on a shared machine
    a burst of other work then hits every side alike, and the median ignores the calls it hit."""
    for fn in fns.values():
        fn()  # warm
    times = {k: [] for k in fns}
    for _ in range(n):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def google_bundle(tmp: Path):
    """The coke-can scene (standing can) built and exported (MJCF, SAPIEN) from the shared data; no evaluation."""
    from real2sim.demos.google import build_google_scene

    os.environ.setdefault("REAL2SIM_GOOGLE_ROBOT", str(DATA / "google_robot" / "description"))
    bundle, _ = build_google_scene(DATA, tmp / "google", "pick_coke_can", "standing", engines=["mjcf", "sapien"],
                                   evaluate_in=[])
    return bundle


def control_overhead(bundle, backend: str, n: int) -> None:
    """``Controller.step`` (IK + targets + substeps) in one env vs, in a second env of the same scene, the targets it
    set with the raw substeps: called in turn, so both do the same motion under the same load."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    envs = [Real2SimEnv(bundle.root, backend=backend, obs_mode="state", render_mode=None) for _ in range(2)]
    for env in envs:
        env.reset(seed=0)
    ctl, raw_scene, sub = envs[0].controller, envs[1].scene, envs[1].controller.substeps
    rng = np.random.default_rng(0)
    acts = np.concatenate([rng.uniform(-0.01, 0.01, (n + 1, 3)), rng.uniform(-0.02, 0.02, (n + 1, 3)),
                           np.ones((n + 1, 1))], 1)  # RT-1-sized EE deltas, the hand open
    it = iter(acts)

    def control():
        ctl.step(next(it))

    def raw():  # the controller's latest targets, the same substeps
        raw_scene.set_joint_targets(ctl.q_target)
        raw_scene.step_physics(sub)

    t = round_robin({"control": control, "raw": raw}, n)
    gap = np.abs(envs[0].scene.robot_qpos() - raw_scene.robot_qpos()).max()
    print(f"[{backend}] Google Robot control step (coke-can scene, {sub} substeps at {ctl.physics_hz:.0f} Hz): "
          f"{t['control'] * 1e3:.1f} ms vs the same targets + raw substeps {t['raw'] * 1e3:.1f} ms -> overhead "
          f"{t['control'] / t['raw']:.3f}x (target <= 1.2x; the two arms end {gap:.1e} rad apart)")
    for env in envs:
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
    t = round_robin(fns, n)
    (gw, gh), (ww, wh) = envs["google"].native_size, envs["widowx"].native_size
    g, w = envs["google"].controller, envs["widowx"].controller
    print(f"[{backend}] composited env step: Google coke-can scene {gw}x{gh} {t['google step'] * 1e3:.1f} ms vs "
          f"WidowX scene {ww}x{wh} {t['widowx step'] * 1e3:.1f} ms -> {t['google step'] / t['widowx step']:.2f}x "
          "(target <= 1.3x)")
    print(f"[{backend}]   parts: physics {g.substeps} substeps {t['google physics'] * 1e3:.1f} ms vs {w.substeps} "
          f"{t['widowx physics'] * 1e3:.1f} ms ({t['google physics'] / t['widowx physics']:.2f}x); render + "
          f"segmentation {t['google render'] * 1e3:.1f} ms vs {t['widowx render'] * 1e3:.1f} ms "
          f"({t['google render'] / t['widowx render']:.2f}x); the step's own work (step - physics - render) "
          f"{(t['google step'] - t['google physics'] - t['google render']) * 1e3:.1f} ms vs "
          f"{(t['widowx step'] - t['widowx physics'] - t['widowx render']) * 1e3:.1f} ms")
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
