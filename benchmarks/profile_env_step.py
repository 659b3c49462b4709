"""cProfile of the composited env step against the raw engine work it wraps (physics + render + segmentation).

    MUJOCO_GL=egl .venv/bin/python benchmarks/profile_env_step.py [--backend mujoco|sapien] [--steps 40] [--top 25]

Prints the functions with the most own time (tottime) in the env step, so a change to the composite, the masks or
the observation can be checked against where the time goes. Not part of run_all (a profile, not a ratio).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="mujoco")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--size", default=None, help="observation WxH (default: the camera's)")
    args = ap.parse_args()

    from envbundle import make_env_bundle

    from real2sim.evaluation.envs.env import Real2SimEnv

    bundle = make_env_bundle(Path(tempfile.mkdtemp(prefix="profile_env_")) / "scene")
    size = tuple(int(x) for x in args.size.split("x")) if args.size else None
    env = Real2SimEnv(bundle.root, task="lift_cube", backend=args.backend, obs_size=size, privileged=True)
    env.reset(seed=0)
    hold = np.array([0, 0, 0, 0, 0, 0, 1.0])
    env.step(hold)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        env.step(hold)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(args.top)
    print(f"[{args.backend}] composited env step, {args.steps} steps, by own time:")
    print(buf.getvalue())
    env.close()


if __name__ == "__main__":
    main()
