"""Recording rollouts as a LeRobot dataset against the same evaluation unrecorded, same run (target <= 1.2x).

Scripted episodes of lift_cube with composited image observations, one worker whose env is warm (the first,
unmeasured episode builds it); unrecorded and recorded runs alternate, each over fresh seeds-folders, and the
ratio is of the summed episode times. Recording = the per-step hook (state read-out, H.264 encoding of the
observation) + the dataset's add (parquet, episode table, stats).

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_record.py [--backend mujoco|sapien] [--episodes 4] [--rounds 2]
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
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args, _ = ap.parse_known_args()  # benchmarks/run_all.py passes its own filter words

    from envbundle import make_env_bundle

    from real2sim.evaluation.envs.runner import clear_cache, evaluate
    from real2sim.evaluation.record import open_dataset

    tmp = Path(tempfile.mkdtemp(prefix="bench_record_"))
    bundle = make_env_bundle(tmp / "scene")
    evaluate(bundle.root, "lift_cube", "scripted", 1, out_dir=tmp / "warm", backend=args.backend)  # builds the env

    def run(i: int, record: bool) -> tuple[float, int]:
        ds = open_dataset("lerobot", tmp / f"ds{i}") if record else None
        t0 = time.perf_counter()
        s = evaluate(bundle.root, "lift_cube", "scripted", args.episodes, out_dir=tmp / f"out{i}_{record}",
                     backend=args.backend, seed=100 * (i + 1), record=ds)
        if ds is not None:
            ds.close()
        return time.perf_counter() - t0, s.ran

    plain = rec = 0.0
    for i in range(args.rounds):
        t, n = run(i, False)
        plain += t
        t, n = run(i, True)
        rec += t
    size = sum(f.stat().st_size for f in tmp.glob("ds*/**/*") if f.is_file())
    n_eps = args.episodes * args.rounds
    print(f"[{args.backend}] recording (LeRobot v3.0, composited 640x480 H.264 + parquet): {rec / n_eps:.2f} s/episode "
          f"vs unrecorded {plain / n_eps:.2f} s/episode: {rec / plain:.2f}x (target <= 1.2x); "
          f"{size / n_eps / 1e6:.2f} MB per episode on disk")
    clear_cache()


if __name__ == "__main__":
    main()
