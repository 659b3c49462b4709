"""Recording rollouts as a LeRobot dataset against the same evaluation unrecorded, same run (target <= 1.2x).

Scripted episodes of lift_cube with composited image observations, one worker whose env is warm (the first,
unmeasured episode builds it); each seed runs unrecorded and recorded in turn, and the ratio is of the summed episode
times. Recording = the per-step hook (state read-out, H.264 encoding of the observation) + the dataset's add
(parquet, episode table, stats). Also: the hook's own per-step cost against the env step.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_record.py [--backend mujoco|sapien] [--episodes 6]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="mujoco", choices=["mujoco", "sapien"])
    ap.add_argument("--episodes", type=int, default=6)
    args, _ = ap.parse_known_args()  # benchmarks/run_all.py passes its own filter words

    from envbundle import make_env_bundle

    from real2sim.evaluation.envs.runner import clear_cache, evaluate
    from real2sim.evaluation.record import open_dataset

    tmp = Path(tempfile.mkdtemp(prefix="bench_record_"))
    bundle = make_env_bundle(tmp / "scene")
    evaluate(bundle.root, "lift_cube", "scripted", 1, out_dir=tmp / "warm", backend=args.backend)  # builds the env

    def run(i: int, record: bool) -> float:
        ds = open_dataset("lerobot", tmp / f"ds{i}") if record else None
        t0 = time.perf_counter()
        evaluate(bundle.root, "lift_cube", "scripted", 1, out_dir=tmp / f"out{i}_{record}", backend=args.backend,
                 seed=i, record=ds)
        if ds is not None:
            ds.close()
        return time.perf_counter() - t0

    # one unrecorded and one recorded episode of the same seed in turn (the order flips each round): load on a shared
    # machine drifts over minutes, and pairs see the same drift
    plain = rec = 0.0
    for i in range(args.episodes):
        first = i % 2 == 0
        a = run(i, not first)
        b = run(i, first)
        plain, rec = (plain + b, rec + a) if first else (plain + a, rec + b)
    size = sum(f.stat().st_size for f in tmp.glob("ds*/**/*") if f.is_file())
    print(f"[{args.backend}] recording (LeRobot v3.0, composited 640x480 H.264 + parquet): {rec / args.episodes:.2f} "
          f"s/episode vs unrecorded {plain / args.episodes:.2f} s/episode: {rec / plain:.2f}x (target <= 1.2x); "
          f"{size / args.episodes / 1e6:.2f} MB per episode on disk")
    hook_ratio(bundle, args.backend)
    clear_cache()


def hook_ratio(bundle, backend: str, steps: int = 15) -> None:
    """The per-step cost of the recording hook alone against the env step it follows (median of ``steps``)."""
    import numpy as np

    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.record import EpisodeRecorder

    env = Real2SimEnv(bundle.root, task="lift_cube", backend=backend)
    obs, _ = env.reset(seed=0)
    rec = EpisodeRecorder(Path(tempfile.mkdtemp(prefix="bench_record_hook_")), env, {"bundle_dir": str(bundle.root)})
    rec.start(obs)
    hold = np.array([0, 0, 0, 0, 0, 0, 1.0])
    t_step, t_hook = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        obs, *_ = env.step(hold)
        t1 = time.perf_counter()
        rec.step(hold, obs, False)
        t_step.append(t1 - t0)
        t_hook.append(time.perf_counter() - t1)
    t0 = time.perf_counter()
    rec.finish()
    t_finish = time.perf_counter() - t0
    env.close()
    s, h = float(np.median(t_step)), float(np.median(t_hook))
    print(f"[{backend}] recording hook per step {h * 1e3:.1f} ms (state read-out, image copy; H.264 encodes on its own "
          f"thread, in the end-to-end ratio above) vs the composited env step "
          f"{s * 1e3:.1f} ms: {(s + h) / s:.2f}x; episode close (video flush, arrays, image stats) {t_finish * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
