"""``real2sim demo``: the whole journey on a registered scene with no input."""
from __future__ import annotations

from pathlib import Path

from real2sim.apps.cli.console import console, progress, say
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.demos.demo import STAGES, DemoConfig, DemoReport, run_demo, worst
from real2sim.scenes import list_scenes


def cmd_demo(args) -> int:
    cfg = config_from_args(DemoConfig, args)
    with progress("demo", total=len(STAGES)) as update:
        rep = run_demo(Path(args.out), scene=cfg.scene, workers=cfg.workers, episodes=cfg.episodes, task=cfg.task,
                       on_stage=lambda name: update(STAGES.index(name), description=f"demo: {name}"))
        update(len(STAGES))
    _print_report(rep)
    ok = (worst(rep.drop_position_mm) < 5 and worst(rep.drop_angle_deg) < 5 and worst(rep.projection_px) < 0.5
          and all(v["after"] < 3.0 for v in rep.pose_error_mm.values()))
    say("[green]demo OK[/green]" if ok else "[red]demo: a check is outside its limit (see above)[/red]", markup=True)
    return 0 if ok else 1


def _print_report(rep: DemoReport) -> None:
    from rich.table import Table

    t = Table(title=f"real2sim demo -> {rep.out_dir}")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    for k, v in rep.stage_seconds.items():
        t.add_row(k, f"{v:.2f}")
    t.add_row("total", f"{sum(rep.stage_seconds.values()):.2f}")
    console().print(t)
    say("pose recovery (ADD-S vs ground truth, mm): " + ", ".join(
        f"{k} {v['before']:.1f} -> {v['after']:.1f}" for k, v in rep.pose_error_mm.items()))
    b = rep.build
    if "plate" in b:
        say(f"plate: {b['plate'].get('inpainted_fraction', 0):.1%} inpainted;  "
            f"alignment min IoU {b.get('alignment', {}).get('min_iou')};  "
            f"texture min PSNR {b.get('texture', {}).get('min_psnr_db')} dB")
    for k, v in rep.exports.items():
        say(f"export {k:7s} {v}")
    engines = list(rep.success)
    say(f"drop test {' vs '.join(engines) or 'engines'}: worst position {worst(rep.drop_position_mm):.2f} mm, "
        f"worst angle {worst(rep.drop_angle_deg):.2f} deg (limits 5 mm / 5 deg)")
    say("camera projection vs bundle (max px): " + ", ".join(f"{k} {v:.4f}" for k, v in rep.projection_px.items()))
    e = Table(title=f"success rate on {rep.task} (state observations)")
    e.add_column("policy")
    for engine in engines:
        e.add_column(engine, justify="right")
    for policy in next(iter(rep.success.values()), {}):
        e.add_row(policy, *[f"{rep.success[eng][policy]:.2f}" for eng in engines])
    console().print(e)
    say(f"ranking agreement {' vs '.join(reversed(engines))}: MMRV {rep.mmrv}, Pearson r {rep.pearson}")
    for k, v in rep.pictures.items():
        say(f"picture ({k}): {rep.out_dir / v}")
    say(f"review it in the browser: real2sim review {rep.out_dir}   (serves http://127.0.0.1:7860)")


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run the journey on a bundled (or installed) scene with no input")
    p.add_argument("--out", default="demo_out", help="bundle directory to write (default: ./demo_out)")
    add_config_options(p, DemoConfig, choices={"scene": list_scenes()})
    p.set_defaults(fn=cmd_demo)
