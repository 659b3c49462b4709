"""Evaluation commands: ``real2sim eval`` and ``real2sim metrics``."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from real2sim.apps.cli.console import console, progress, say
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.core.bundle import atomic_write_json
from real2sim.core.errors import Real2SimError
from real2sim.engines import simulator_names
from real2sim.evaluation.envs.env import OBS_MODES
from real2sim.evaluation.envs.runner import EvalOptions, evaluate
from real2sim.evaluation.metrics import compare, plot, read_results, to_json


def _env_kwargs(args) -> dict:
    env_kwargs = {}
    if args.shading != "auto":
        env_kwargs["shading"] = args.shading
    if args.variants:
        try:
            env_kwargs["variants"] = json.loads(args.variants)
        except json.JSONDecodeError as exc:
            raise Real2SimError(f"--variants must be a JSON object, e.g. '{{\"lighting\": [0.6, 1.4]}}' ({exc})") from exc
        if not isinstance(env_kwargs["variants"], dict):
            raise Real2SimError(f"--variants must be a JSON object, got {args.variants!r}")
    return env_kwargs


def _obs_size(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise Real2SimError(f"--obs-size must be WIDTHxHEIGHT in pixels, e.g. 320x240; got {text!r}") from None
    if not (8 <= w <= 8192 and 8 <= h <= 8192):
        raise Real2SimError(f"--obs-size {text}: width and height must be 8..8192 pixels")
    return w, h


def cmd_eval(args) -> int:
    opts = config_from_args(EvalOptions, args)
    obs_size = _obs_size(args.obs_size)
    ray = None if args.ray is None else (True if args.ray == "local" else args.ray)
    n_succ = 0
    with progress(f"eval {args.policy} ({opts.backend or simulator_names()[0]})", total=opts.episodes,
                  fields={"success": 0}) as update:

        def on_episode(done, total, rec):
            nonlocal n_succ
            n_succ += int(bool(rec["success"]))
            update(done, success=n_succ)

        s = evaluate(Path(args.dir), args.task, args.policy, ray=ray, obs_size=obs_size, progress=on_episode,
                     env_kwargs=_env_kwargs(args), **dataclasses.asdict(opts))
    say(f"{s.policy} on {s.task} ({s.backend}): {s.successes}/{s.trials} successes ({s.rate:.0%}); "
        f"{s.ran} run, {s.skipped} already done, {s.seconds:.1f} s")
    say(f"episodes: {s.results_path}\nsummary for 'real2sim metrics --sim': {s.csv_path}")
    return 0


def cmd_metrics(args) -> int:
    from rich.table import Table

    metrics = compare(read_results(Path(args.real)), read_results(Path(args.sim)), n_boot=args.bootstrap,
                      seed=args.seed, real_name=args.real, sim_name=args.sim)
    t = Table(title="sim vs real")
    for c in ("task", "policies", "MMRV [95% CI]", "Pearson r [95% CI]"):
        t.add_column(c)
    for m in metrics:
        t.add_row(m.task, str(len(m.policies)), f"{m.mmrv:.3f} [{m.mmrv_ci[0]:.3f}, {m.mmrv_ci[1]:.3f}]",
                  f"{m.pearson:.3f} [{m.pearson_ci[0]:.3f}, {m.pearson_ci[1]:.3f}]")
    console().print(t)
    if args.json:
        atomic_write_json(Path(args.json), to_json(metrics))
        say(f"wrote {args.json}")
    if args.plot:
        say(f"wrote {plot(metrics, Path(args.plot))}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a policy in a bundle's simulated scene")
    p.add_argument("dir", help="scene bundle directory (exported)")
    p.add_argument("--policy", required=True,
                   help="scripted[:noise=0.02], random, replay:path=FILE, or http://HOST:PORT")
    p.add_argument("--task", default=None, help="task id from the bundle (default: its first task)")
    add_config_options(p, EvalOptions, flags={"out_dir": "--out"},
                       choices={"backend": simulator_names(), "obs_mode": list(OBS_MODES)})
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run episodes on Ray: a local instance, or the cluster at ADDRESS")
    p.add_argument("--obs-size", default=None, metavar="WxH", help="resize image observations, e.g. 320x240")
    p.add_argument("--shading", choices=["auto", "lit", "unlit"], default="auto",
                   help="unlit: surfaces show their stored colours/textures (textures baked from photos already carry "
                        "the real light; closer to the photo on the Bridge frame); auto: unlit when the bundle's "
                        "textures were back-projected from its frames, else lit (docs/evaluation.md)")
    p.add_argument("--variants", default=None, metavar="JSON",
                   help='visual variants drawn per episode, e.g. \'{"lighting": [0.6, 1.4], "robot_tint": 0.2, '
                        '"background": "plate_jitter"}\' (docs/evaluation.md)')
    p.set_defaults(fn=cmd_eval)

    p = subparsers.add_parser("metrics", help="MMRV and Pearson r between real and sim success tables")
    p.add_argument("--real", required=True, help="CSV: policy, task, successes, trials (or rate, trials)")
    p.add_argument("--sim", required=True, help="CSV with the same columns and policy/task pairs")
    p.add_argument("--json", help="write the metrics here")
    p.add_argument("--plot", help="write a real-vs-sim scatter PNG here")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_metrics)
