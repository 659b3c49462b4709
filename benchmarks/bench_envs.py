"""Env step and evaluation throughput against the simplest alternatives, same run.

* env step with compositing (controller + 100 physics substeps + render + segmentation + composite)
  vs the raw engine doing the same substeps, render and segmentation (target <= 1.15x);
* the same step with a half-size observation (rendered at that size) vs full size;
* the hybrid step (MuJoCo physics, SAPIEN pictures through pose sync) vs each engine's own step;
* env step in state mode vs the raw physics substeps alone;
* episodes/s after start-up with a warm pool of 2 local workers vs 1 (target >= 1.8x on >= 2 free cores), the
  start-up (process start, scene load, first render) reported apart;
* remote policy round trip (HTTP + msgpack on localhost) vs an in-process call.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_envs.py [--backend mujoco|sapien] [--episodes 8]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def per_call(fn, n: int) -> float:
    fn()  # warm
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def paired(fa, fb, n: int, rounds: int = 5) -> tuple[float, float]:
    """Per-call seconds of ``fa`` and ``fb`` measured in alternating blocks, the best block of each: on a shared
    machine a burst of other work then hits both sides alike instead of one."""
    fa(), fb()  # warm
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(per_call(fa, n))
        tb.append(per_call(fb, n))
    return min(ta), min(tb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="mujoco", choices=["mujoco", "sapien"])
    ap.add_argument("--episodes", type=int, default=12, help="episodes per task in the pool measurement")
    ap.add_argument("--steps", type=int, default=20)
    args, _ = ap.parse_known_args()  # benchmarks/run_all.py passes its own filter words

    from envbundle import make_env_bundle

    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies import PolicyServer
    from real2sim.evaluation.policies.base import make_policy

    tmp = Path(tempfile.mkdtemp(prefix="bench_envs_"))
    bundle = make_env_bundle(tmp / "scene")
    hold = np.array([0, 0, 0, 0, 0, 0, 1.0])

    env = Real2SimEnv(bundle.root, task="lift_cube", backend=args.backend, privileged=True)  # as the runner builds it
    env.reset(seed=0)
    sc, sub = env.scene, env.controller.substeps

    def raw():  # the engine's own physics substeps, then colour and segmentation (from one picture where it can);
        sc.set_joint_targets(env.controller.q_target)  # drive targets set as the env sets them (PhysX lets an
        sc.step_physics(sub)  # articulation whose targets never change fall asleep: 5x cheaper, not the same work)
        sc.render_layers(env.camera, env.movable)

    t_env, t_raw = paired(lambda: env.step(hold), raw, args.steps)
    w, h = env.native_size
    print(f"[{args.backend}] composited env step {w}x{h}: {t_env * 1e3:.1f} ms; raw substeps+render+segmentation "
          f"{t_raw * 1e3:.1f} ms -> ratio {t_env / t_raw:.2f}x (target <= 1.15x)")
    env.close()

    small = Real2SimEnv(bundle.root, task="lift_cube", backend=args.backend, obs_size=(w // 2, h // 2))
    small.reset(seed=0)
    t_small = per_call(lambda: small.step(hold), args.steps)
    print(f"[{args.backend}] composited env step with obs_size {w // 2}x{h // 2} (rendered at that size): "
          f"{t_small * 1e3:.1f} ms vs {t_env * 1e3:.1f} ms at {w}x{h} -> {t_small / t_env:.2f}x")
    small.close()

    st = Real2SimEnv(bundle.root, task="lift_cube", backend=args.backend, obs_mode="state", render_mode=None)
    st.reset(seed=0)

    def raw_physics():
        st.scene.set_joint_targets(st.controller.q_target)
        st.scene.step_physics(st.controller.substeps)

    t_state, t_phys = paired(lambda: st.step(hold), raw_physics, args.steps)
    print(f"[{args.backend}] state env step: {t_state * 1e3:.2f} ms; raw {st.controller.substeps} substeps "
          f"{t_phys * 1e3:.2f} ms -> ratio {t_state / t_phys:.2f}x (controller IK + observation)")

    obs, info = st.reset(seed=0)
    pol = make_policy("random")
    pol.reset("x", info, 0)
    t_local = per_call(lambda: pol.act(obs), 200)
    with PolicyServer(lambda o, i: pol.act(o), name="bench") as srv:
        rp = make_policy(srv.url)
        rp.reset("x", info, 0)
        t_remote = per_call(lambda: rp.act(obs), 100)
    print(f"remote policy round trip {t_remote * 1e3:.2f} ms vs in-process {t_local * 1e3:.3f} ms "
          f"-> overhead {(t_remote - t_local) * 1e3:.2f} ms per call")
    st.close()

    hybrid(bundle, args.steps)

    # the pool spawns processes that re-import the main module: measure it in a process whose main
    # module is this (guarded) file, not benchmarks/run_all.py
    import subprocess

    r = subprocess.run([sys.executable, __file__, "--pool", str(bundle.root), "--backend", args.backend,
                        "--episodes", str(args.episodes)], capture_output=True, text=True)
    print(r.stdout.strip() or r.stderr[-2000:])


def hybrid(bundle, steps: int) -> None:
    """Composited env step of the hybrid (MuJoCo physics, SAPIEN pictures through pose sync) against both engines'
    own steps, measured round-robin in blocks (best block of each)."""
    from real2sim.core.errors import UnsupportedCapability
    from real2sim.evaluation.envs.env import Real2SimEnv

    hold = np.array([0, 0, 0, 0, 0, 0, 1.0])
    envs = {}
    try:
        for b in ("mujoco", "sapien", "mujoco+sapien"):
            envs[b] = Real2SimEnv(bundle.root, task="lift_cube", backend=b, privileged=True)
            envs[b].reset(seed=0)
    except UnsupportedCapability as exc:
        print(f"hybrid step: not measured ({exc})")
        return
    times = {b: [] for b in envs}
    for _ in range(3):
        for b, env in envs.items():
            times[b].append(per_call(lambda env=env: env.step(hold), steps))
    t = {b: min(v) for b, v in times.items()}
    w, h = envs["mujoco"].native_size
    print(f"hybrid composited env step {w}x{h} (MuJoCo physics + SAPIEN pictures, pose sync each step): "
          f"{t['mujoco+sapien'] * 1e3:.1f} ms vs MuJoCo alone {t['mujoco'] * 1e3:.1f} ms "
          f"({t['mujoco+sapien'] / t['mujoco']:.2f}x) and SAPIEN alone {t['sapien'] * 1e3:.1f} ms "
          f"({t['mujoco+sapien'] / t['sapien']:.2f}x)")
    for env in envs.values():
        env.close()


def pool(bundle_root: str, backend: str, episodes: int) -> None:
    """Episodes/s of one warm pool per worker count over two tasks (start-up, i.e. loading the scene and the first
    render in every worker, reported apart), and the same episodes in this process for reference."""
    import os

    from real2sim.evaluation.envs.runner import clear_cache, evaluate, read_results
    from real2sim.evaluation.envs.workers import WorkerPool

    tmp = Path(tempfile.mkdtemp(prefix="bench_envs_pool_"))
    kw = dict(backend=backend, obs_mode="composited", obs_size=(160, 120))
    load0 = os.getloadavg()[0]
    rates, startup, total, cpu = {}, {}, {}, {}
    for label, workers in (("in-process", 0), ("1 worker", 1), ("2 workers", 2)):
        t0 = time.perf_counter()
        ctx = WorkerPool(workers) if workers else None
        try:
            runs = [evaluate(bundle_root, task, "scripted", episodes, workers=1, out_dir=tmp / label, pool=ctx, **kw)
                    for task in ("lift_cube", "push_cube")]
        finally:
            if ctx is not None:
                ctx.close()
            clear_cache()
        total[label] = time.perf_counter() - t0
        startup[label] = sum(r.startup_s for r in runs)
        rates[label] = sum(r.ran for r in runs) / sum(r.seconds for r in runs)
        recs = read_results(tmp / label / "episodes.jsonl")
        cpu[label] = sum(r["cpu_seconds"] for r in recs) / len(recs)
    n = 2 * episodes
    print(f"[{backend}] warm pool, composited 160x120, {n} episodes over 2 tasks (load avg {load0:.2f} -> "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores): episodes/s after start-up: "
          + ", ".join(f"{k} {v:.2f}" for k, v in rates.items())
          + f" -> 2 workers / 1 worker {rates['2 workers'] / rates['1 worker']:.2f}x (target >= 1.8x)")
    print(f"[{backend}] start-up (workers started, scene loaded, first render; once per eval, not per task): "
          + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items())
          + "; whole run incl. start-up: " + ", ".join(f"{k} {v:.1f} s" for k, v in total.items()))
    print(f"[{backend}] CPU seconds per episode (all threads of the worker; equal values = no contention "
          "overhead, so the wall-time ratio is bounded only by free cores): "
          + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--pool":
        ap = argparse.ArgumentParser()
        ap.add_argument("--pool")
        ap.add_argument("--backend")
        ap.add_argument("--episodes", type=int)
        a = ap.parse_args()
        pool(a.pool, a.backend, a.episodes)
    else:
        main()
