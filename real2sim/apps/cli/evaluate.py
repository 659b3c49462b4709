"""CLI handler for ``real2sim eval``. Wire with ``add_parsers(subparsers)`` (handler set as ``fn``)."""
from __future__ import annotations

from pathlib import Path

from real2sim.core.errors import Real2SimError
from real2sim.engines import simulator_names
from real2sim.evaluation.envs.runner import evaluate


def cmd_eval(args) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    con = Console()
    obs_size = tuple(int(x) for x in args.obs_size.lower().split("x")) if args.obs_size else None
    env_kwargs = {}
    if getattr(args, "shading", "auto") != "auto":
        env_kwargs["shading"] = args.shading
    if getattr(args, "variants", None):
        import json

        try:
            env_kwargs["variants"] = json.loads(args.variants)
        except json.JSONDecodeError as exc:
            raise Real2SimError(f"--variants must be a JSON object, e.g. '{{\"lighting\": [0.6, 1.4]}}' ({exc})") from exc
        if not isinstance(env_kwargs["variants"], dict):
            raise Real2SimError(f"--variants must be a JSON object, got {args.variants!r}")
    ray = None
    if args.ray is not None:
        ray = True if args.ray == "local" else args.ray
    with Progress(TextColumn("[bold]eval[/bold] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("success {task.fields[succ]}"), TimeRemainingColumn(), console=con) as bar:
        tid = bar.add_task(f"{args.policy} ({args.backend})", total=args.episodes, succ=0)
        n_succ = 0

        def progress(done, total, rec):
            nonlocal n_succ
            n_succ += int(bool(rec["success"]))
            bar.update(tid, completed=done, succ=n_succ)

        s = evaluate(Path(args.dir), args.task, args.policy, args.episodes, workers=args.workers, backend=args.backend,
                     ray=ray, videos=args.videos, out_dir=Path(args.out), seed=args.seed, obs_mode=args.obs_mode,
                     obs_size=obs_size, progress=progress, env_kwargs=env_kwargs)
    con.print(f"{s.policy} on {s.task} ({s.backend}): {s.successes}/{s.trials} successes ({s.rate:.0%}); "
              f"{s.ran} run, {s.skipped} already done, {s.seconds:.1f} s", highlight=False)
    con.print(f"episodes: {s.results_path}\nsummary for 'real2sim metrics --sim': {s.csv_path}", highlight=False)
    return 0


def add_parsers(subparsers) -> None:
    """Register ``eval`` on an argparse subparsers object."""
    p = subparsers.add_parser("eval", help="evaluate a policy in a bundle's simulated scene")
    p.add_argument("dir", help="scene bundle directory (exported)")
    p.add_argument("--policy", required=True, help="scripted[:noise=0.02], random, replay:path=FILE, or http://HOST:PORT")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--task", default=None, help="task id from the bundle (default: its first task)")
    p.add_argument("--workers", type=int, default=1, help="local processes (or Ray CPUs with --ray)")
    p.add_argument("--backend", choices=simulator_names(), default=None,
                   help=f"simulator (default: {simulator_names()[0]})")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run episodes on Ray: a local instance, or the cluster at ADDRESS")
    p.add_argument("--videos", action="store_true", help="write one mp4 per episode under OUT/videos")
    p.add_argument("--out", default="results", help="results folder (episodes.jsonl, sim.csv); reruns resume")
    p.add_argument("--seed", type=int, default=0, help="first episode seed")
    p.add_argument("--obs-mode", choices=["composited", "render", "state"], default="composited")
    p.add_argument("--obs-size", default=None, metavar="WxH", help="resize image observations, e.g. 320x240")
    p.add_argument("--shading", choices=["auto", "lit", "unlit"], default="auto",
                   help="unlit: surfaces show their stored colours/textures (textures baked from photos already carry "
                        "the real light; closer to the photo on the Bridge frame); auto: unlit when the bundle's "
                        "textures were back-projected from its frames, else lit (docs/evaluation.md)")
    p.add_argument("--variants", default=None, metavar="JSON",
                   help='visual variants drawn per episode, e.g. \'{"lighting": [0.6, 1.4], "robot_tint": 0.2, '
                        '"background": "plate_jitter"}\' (docs/evaluation.md)')
    p.set_defaults(fn=cmd_eval)
