"""Evaluation commands: ``real2sim eval``, ``real2sim plan`` and ``real2sim metrics``."""
from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

from real2sim.apps.cli.console import console, progress, say, warn
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.core.bundle import atomic_write_json
from real2sim.core.errors import Real2SimError
from real2sim.engines import backend_names, simulator_names
from real2sim.evaluation.envs.env import LENSES, OBS_MODES
from real2sim.evaluation.envs.runner import EvalOptions, evaluate
from real2sim.evaluation.metrics import compare, plot, read_results, to_json
from real2sim.evaluation.sequential import (
    SequentialInputError,
    StopRule,
    episodes_for_ci,
    episodes_for_difference,
    run_sequential,
    simulate,
)


def _env_kwargs(args) -> dict:
    env_kwargs = {}
    if args.shading != "auto":
        env_kwargs["shading"] = args.shading
    if getattr(args, "lens", "pinhole") != "pinhole":
        env_kwargs["lens"] = args.lens
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


def _one_policy(args, opts, policy: str, episodes: int, obs_size, ray, pool=None, record=None):
    n_succ = 0
    with progress(f"eval {policy} ({opts.backend or simulator_names()[0]})", total=episodes,
                  fields={"success": 0}) as update:

        def on_episode(done, total, rec):
            nonlocal n_succ
            n_succ += int(bool(rec["success"]))
            update(done, success=n_succ)

        kw = dataclasses.asdict(opts)
        kw["episodes"] = episodes
        return evaluate(Path(args.dir), args.task, policy, ray=ray, obs_size=obs_size, progress=on_episode,
                        env_kwargs=_env_kwargs(args), pool=pool, record=record, **kw)


def _open_record(args):
    """The dataset ``--record FORMAT DIR`` names, opened before any episode runs (None without --record)."""
    if not args.record:
        if args.record_resume:
            raise Real2SimError("--record-resume adds to a recorded dataset: give --record lerobot DIR too")
        return None
    from real2sim.evaluation.record import open_dataset

    fmt, root = args.record
    return open_dataset(fmt, Path(root), resume=args.record_resume)


def _close_record(ds) -> None:
    if ds is None:
        return
    ds.close()
    say(f"recorded: {ds.root} ({len(ds.rows)} episodes, LeRobot {ds.info['codebase_version'] if ds.info else 'v3.0'}); "
        f"replay one with: real2sim replay {ds.root} --episode 0")


def side_label(csv_path: str) -> str:
    """An axis name for a results table: its file name, or its folder's when the file is a generic 'sim.csv'
    ('results/ENGINE/sim.csv' -> 'ENGINE')."""
    p = Path(csv_path)
    return p.parent.name if p.stem in ("sim", "real", "results", "summary") and p.parent.name else p.stem


def warn_quality(bundle_dir: str) -> None:
    """Warn (stderr, after the results) about every poor, failed or stale stage of the bundle, exports included:
    evaluating a twin built on a refused fit or on exports older than the scene measures something else."""
    from real2sim.core.bundle import Bundle
    from real2sim.core.stages import GRAPH, quality_problems

    path = Path(bundle_dir)
    if not (path / "scene.json").is_file():
        return  # not a bundle: evaluate() says so
    for _, line in quality_problems(Bundle.load(path), [s.name for s in GRAPH]):
        warn(f"evaluating a bundle whose {line}")


def _pool(opts, ray):
    """The eval command's one worker pool (started once, warm across policies and rounds), or None in-process."""
    if ray is None and opts.workers <= 1:
        return contextlib.nullcontext(None)
    from real2sim.evaluation.envs.workers import make_pool

    return make_pool(opts.workers, ray)


def _say_run(s) -> None:
    say(f"{s.policy} on {s.task} ({s.backend}): {s.successes}/{s.trials} successes ({s.rate:.0%}); "
        f"{s.ran} run, {s.skipped} already done; start-up {s.startup_s:.1f} s, then {s.seconds:.1f} s"
        + (f" ({s.episodes_per_s:.2f} episodes/s)" if s.ran else ""))
    for seed, why in s.lost:
        say(f"episode {seed} lost: {why} (in {s.results_path.parent / 'errors.jsonl'}; a rerun tries it again)")


def cmd_eval(args) -> int:
    code = _cmd_eval(args)
    warn_quality(args.dir)  # after the results (bad input stays one line on stderr)
    return code


def _cmd_eval(args) -> int:
    opts = config_from_args(EvalOptions, args)
    obs_size = _obs_size(args.obs_size)
    ray = None if args.ray is None else (True if args.ray == "local" else args.ray)
    policies = list(dict.fromkeys(args.policy))
    if args.until == "settled" and len(policies) < 2:
        raise SequentialInputError(
            f"--until settled ranks policies: give at least two --policy values (got {len(policies)}: "
            f"{', '.join(policies)}); for one policy use --target-ci W")
    if args.round is not None and not (args.until or args.target_ci is not None):
        raise SequentialInputError("--round sets the round size of a sequential run: add --until settled or "
                                   "--target-ci W")
    record = _open_record(args)
    try:
        with _pool(opts, ray) as pool:
            if args.until or args.target_ci is not None:
                return _eval_sequential(args, opts, policies, obs_size, ray, pool, record)
            s = None
            for policy in policies:
                s = _one_policy(args, opts, policy, opts.episodes, obs_size, ray, pool, record)
                _say_run(s)
        say(f"episodes: {s.results_path}\nsummary for 'real2sim metrics --sim': {s.csv_path}")
    finally:
        _close_record(record)
    return 0


def _eval_sequential(args, opts, policies, obs_size, ray, pool=None, record=None) -> int:
    rule = StopRule(round_size=args.round or 10, max_episodes=opts.episodes, confidence=args.confidence,
                    target_ci=args.target_ci, settle=args.until == "settled")
    summaries = {}

    def run_to(policy: str, n: int) -> tuple[int, int]:
        s = _one_policy(args, opts, policy, n, obs_size, ray, pool, record)
        summaries[policy] = s
        for seed, why in s.lost:
            say(f"episode {seed} of {policy} lost: {why} (a rerun tries it again)")
        return s.successes, s.trials

    def on_look(k: int, look) -> None:
        rates = ", ".join(f"{p} {look.successes[p]}/{look.episodes[p]} [{lo:.2f}, {hi:.2f}]"
                          for p, (lo, hi) in look.intervals.items())
        say(f"look {k}/{rule.looks}: {rates}" + ("; ranking settled" if look.settled else ""))

    res = run_sequential(policies, run_to, rule, on_look)
    for p, (s, n) in res.counts.items():
        lo, hi = res.final.intervals[p]
        say(f"{p}: {s}/{n} successes ({s / n:.0%}), {rule.confidence:.0%} interval over {rule.looks} looks "
            f"[{lo:.3f}, {hi:.3f}]; stopped: {res.stopped[p]}")
    if len(policies) > 1:
        undecided = [f"{q['a']} vs {q['b']} (p={q['p']:.3g})" for q in res.final.pairs if not q["decided"]]
        say(("ranking settled: " if res.settled else "ranking not settled: ") + " > ".join(res.order)
            + (f"; undecided at {rule.alpha_look:.3g} per look: {', '.join(undecided)}" if undecided else ""))
    say(f"{res.total_episodes} episodes in all")
    out = Path(opts.out_dir) / "sequential.json"
    atomic_write_json(out, res.to_json())
    some = next(iter(summaries.values()))
    say(f"episodes: {some.results_path}\nsummary for 'real2sim metrics --sim': {some.csv_path}\nstop record: {out}")
    return 0


def cmd_plan(args) -> int:
    from rich.table import Table

    rates = args.rates
    n_pol = len(rates)
    pairs = [(i, j) for i in range(n_pol) for j in range(i + 1, n_pol)]
    if not pairs and args.target_ci is None:
        raise SequentialInputError("plan: give two or more --rates to compare, or --target-ci W for one policy")
    m = max(1, len(pairs))
    looks = -(-args.max_episodes // args.round)
    t = Table(title=f"episodes per policy ({args.confidence:.0%} confidence, power {args.power:.0%})")
    for c in ("what", "fixed design", f"sequential worst case ({looks} looks)"):
        t.add_column(c)
    for i, j in pairs:
        a, b = rates[i], rates[j]
        if a == b:
            t.add_row(f"{a} vs {b}", "never (equal rates)", "never")
            continue
        t.add_row(f"{a} vs {b}" + (f" (Bonferroni over {m} pairs)" if m > 1 else ""),
                  str(episodes_for_difference(a, b, args.confidence, args.power, m)),
                  str(episodes_for_difference(a, b, args.confidence, args.power, m * looks)))
    if args.target_ci is not None:
        for r in dict.fromkeys(rates):
            seq_conf = 1 - (1 - args.confidence) / looks
            t.add_row(f"interval narrower than {args.target_ci} at {r}", str(episodes_for_ci(r, args.target_ci,
                      args.confidence)), str(episodes_for_ci(r, args.target_ci, seq_conf)))
    console().print(t)
    say("fixed design: run that many episodes once and test once (two-proportion z-test; Wilson interval). "
        f"sequential worst case: the same at the per-look level of 'eval --until settled/--target-ci' "
        f"(alpha/{looks}); it stops earlier when the difference is clearer than expected.")
    if args.simulate and len(rates) >= 1:
        rule = StopRule(round_size=args.round, max_episodes=args.max_episodes, confidence=args.confidence,
                        target_ci=args.target_ci, settle=len(rates) >= 2)
        sim = simulate(rates, rule, runs=args.simulate, seed=args.seed)
        say(f"simulated {args.simulate} sequential runs at these rates (rounds of {args.round}, cap "
            f"{args.max_episodes}): mean episodes per policy "
            f"{', '.join(f'{x:.0f}' for x in sim['mean_episodes_per_policy'])}; settled in "
            f"{sim['settled_rate']:.0%} of runs; wrong order {sim['wrong_order_rate']:.1%}, "
            f"interval missed the rate {sim['ci_miss_rate']:.1%}")
    return 0


def cmd_replay(args) -> int:
    from real2sim.evaluation.replay import replay_episode

    r = replay_episode(Path(args.dir), args.episode, backend=args.backend, bundle_dir=args.bundle)
    how = ("recorded start state set, " if r.start_state_set else "") + f"recorded in {r.recorded_backend}"
    say(f"episode {r.episode}: {r.frames} frames replayed open loop in {r.backend} ({how}); largest state error: "
        f"joints {r.joint_error:.2e} rad, end effector {r.ee_error_m * 1000:.3f} mm, objects "
        f"{r.object_error_m * 1000:.3f} mm; success recorded {r.recorded_success}, replayed {r.replay_success}")
    if args.json:
        atomic_write_json(Path(args.json), r.to_json())
        say(f"wrote {args.json}")
    if args.tolerance is not None:
        worst = max(r.joint_error, r.ee_error_m, r.object_error_m)
        if worst > args.tolerance or r.recorded_success != r.replay_success:
            raise Real2SimError(f"replay of episode {r.episode} in {r.backend} left the recording: largest error "
                                f"{worst:.3g} > --tolerance {args.tolerance} or success differs")
    return 0


def cmd_metrics(args) -> int:
    from rich.table import Table

    metrics = compare(read_results(Path(args.real)), read_results(Path(args.sim)), n_boot=args.bootstrap,
                      seed=args.seed, real_name=args.real, sim_name=args.sim)
    t = Table(title="sim vs real")
    for c in ("task", "policies", "MMRV [95% CI]", "Pearson r [95% CI]"):
        t.add_column(c)
    for m in metrics:
        if m.unavailable:
            t.add_row(m.task, str(len(m.policies)), f"{m.mmrv:.3f} [n/a]", f"{m.pearson:.3f} [n/a]")
        else:
            t.add_row(m.task, str(len(m.policies)), f"{m.mmrv:.3f} [{m.mmrv_ci[0]:.3f}, {m.mmrv_ci[1]:.3f}]",
                      f"{m.pearson:.3f} [{m.pearson_ci[0]:.3f}, {m.pearson_ci[1]:.3f}]")
    console().print(t)
    for why in dict.fromkeys(m.unavailable for m in metrics if m.unavailable):
        say(f"n/a: {why}; the point MMRV and Pearson r above are exact for the rates given")
    if args.json:
        atomic_write_json(Path(args.json), to_json(metrics))
        say(f"wrote {args.json}")
    if args.plot:
        say(f"wrote {plot(metrics, Path(args.plot), real_label=side_label(args.real), sim_label=side_label(args.sim))}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a policy in a bundle's simulated scene")
    p.add_argument("dir", help="scene bundle directory (exported)")
    p.add_argument("--policy", required=True, action="append",
                   help="scripted[:noise=0.02], random, replay:path=FILE, or http://HOST:PORT; repeat to evaluate "
                        "several policies into the same folder")
    p.add_argument("--task", default=None, help="task id from the bundle (default: its first task)")
    add_config_options(p, EvalOptions, flags={"out_dir": "--out"},
                       choices={"backend": backend_names(), "obs_mode": list(OBS_MODES)})
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run episodes on Ray: a local instance, or the cluster at ADDRESS")
    p.add_argument("--obs-size", default=None, metavar="WxH", help="resize image observations, e.g. 320x240")
    p.add_argument("--shading", choices=["auto", "lit", "unlit"], default="auto",
                   help="unlit: surfaces show their stored colours/textures (textures baked from photos already carry "
                        "the real light; closer to the photo on the Bridge frame); auto: unlit when the bundle's "
                        "textures were back-projected from its frames, else lit (docs/evaluation.md)")
    p.add_argument("--lens", choices=list(LENSES), default="pinhole",
                   help="source: observations through the lens of the camera file whose frames 'real2sim init' "
                        "undistorted (what the real camera and a policy trained on it see); pinhole: as rendered")
    p.add_argument("--variants", default=None, metavar="JSON",
                   help='visual variants drawn per episode, e.g. \'{"lighting": [0.6, 1.4], "robot_tint": 0.2, '
                        '"background": "plate_jitter"}\' (docs/evaluation.md)')
    p.add_argument("--until", choices=["settled"], default=None,
                   help="settled: run in rounds and stop when the ranking of the (two or more) policies is decided "
                        "(Fisher exact tests, Holm over pairs, Bonferroni over rounds; docs/evaluation.md); "
                        "--episodes is then the cap per policy")
    p.add_argument("--target-ci", type=float, default=None, metavar="W",
                   help="run in rounds and stop a policy when its success-rate interval is narrower than W")
    p.add_argument("--round", type=int, default=None, metavar="K",
                   help="episodes per policy per round of a sequential run (default 10)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of a sequential run's ranking and intervals, over all its rounds")
    p.add_argument("--record", nargs=2, default=None, metavar=("FORMAT", "DIR"),
                   help="also write every episode to a dataset: 'lerobot DIR' (LeRobot v3.0: videos per camera, "
                        "states, actions, instruction, success; docs/evaluation.md). DIR must not exist")
    p.add_argument("--record-resume", action="store_true",
                   help="add to the dataset --record names when it exists (same features; episodes already there are "
                        "not added twice)")
    p.set_defaults(fn=cmd_eval)

    p = subparsers.add_parser("replay", help="play a recorded episode back open loop in either engine; reports the "
                                             "state error against the recording")
    p.add_argument("dir", help="dataset folder written by 'real2sim eval --record lerobot DIR'")
    p.add_argument("--episode", type=int, default=0, help="episode index (default 0)")
    p.add_argument("--backend", choices=simulator_names(), default=None,
                   help="engine to replay in (default: the one that recorded the episode)")
    p.add_argument("--bundle", default=None, help="scene bundle folder (default: the one the episode was recorded in)")
    p.add_argument("--json", default=None, help="write the report (per-frame errors) here")
    p.add_argument("--tolerance", type=float, default=None, metavar="T",
                   help="exit 2 when an error (rad or m) exceeds T or the success differs")
    p.set_defaults(fn=cmd_replay)

    p = subparsers.add_parser("plan", help="how many episodes per policy a comparison or a target interval needs")
    p.add_argument("--rates", type=float, nargs="+", required=True, metavar="P",
                   help="expected success rates of the policies, e.g. --rates 0.6 0.4")
    p.add_argument("--power", type=float, default=0.8, help="chance of detecting the difference if it is real")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--target-ci", type=float, default=None, metavar="W", help="also: episodes for an interval < W")
    p.add_argument("--round", type=int, default=10, help="round size of the sequential run to plan for")
    p.add_argument("--max-episodes", type=int, default=200, help="cap per policy of the sequential run")
    p.add_argument("--simulate", type=int, default=0, metavar="RUNS",
                   help="also simulate RUNS sequential runs at these rates (episodes used, error rates)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_plan)

    p = subparsers.add_parser("metrics", help="MMRV and Pearson r between real and sim success tables")
    p.add_argument("--real", required=True, help="CSV: policy, task, successes, trials (or rate / success_rate [, trials]: without trials, "
                        "point metrics only)")
    p.add_argument("--sim", required=True, help="CSV with the same columns and policy/task pairs")
    p.add_argument("--json", help="write the metrics here")
    p.add_argument("--plot", help="write a real-vs-sim scatter PNG here")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_metrics)
