"""``real2sim demo``: the whole journey on a registered scene with no input; ``--scene google_*``: one of SIMPLER's
Google Robot scenes rebuilt from the shared data (``real2sim.demos.google``)."""
from __future__ import annotations

from pathlib import Path

from real2sim.apps.cli.console import console, progress, say
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.core.errors import Real2SimError
from real2sim.demos import google
from real2sim.demos.demo import STAGES, DemoConfig, DemoReport, run_demo, worst
from real2sim.scenes import list_scenes


def cmd_demo(args) -> int:
    cfg = config_from_args(DemoConfig, args)
    if cfg.scene in google.demo_scenes():
        return _google_demo(cfg, Path(args.out))
    if cfg.data is not None or cfg.variant is not None:
        raise Real2SimError(f"--data and --variant apply to the scenes built from the shared data "
                            f"({', '.join(google.demo_scenes())}); '{cfg.scene}' is a bundled scene: drop them")
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


def _google_demo(cfg: DemoConfig, out: Path) -> int:
    """SIMPLER's Google Robot scene ``cfg.scene`` rebuilt from the shared data (``real2sim.demos.google``): built,
    exported (MJCF, SAPIEN, USD, each loaded back) and evaluated with the recipe's scripted oracle in every simulator;
    one bundle per variant in ``out/<scene>_<variant>/scene``. OK when every export loaded, the camera explains the
    real table top (IoU >= 0.8; not checked in the drawer scenes, whose overlays hold no cabinet) and the oracle
    succeeded in at least half of its episodes in every engine."""
    name = google.demo_scenes()[cfg.scene]
    spec = google.load_scene(name)
    if cfg.task is not None and cfg.task != spec["task"]["id"]:
        raise Real2SimError(f"scene '{cfg.scene}' has one task, '{spec['task']['id']}' (--task {cfg.task} is not it)")
    data = google.check_shared_data(cfg.data or google.default_data_dir(), name)
    reports = {}
    for v in google.scene_variants(name, cfg.variant):
        label = f"{cfg.scene} ({v})"
        with progress(label, total=len(google.STAGES)) as update:
            bundle, rep = google.build_google_scene(
                data, out / f"{name}_{v}", name, v, episodes=cfg.episodes,
                on_stage=lambda stage: update(google.STAGES.index(stage), description=f"{label}: {stage}"))
            update(len(google.STAGES))
        reports[v] = (bundle, rep)
    return 0 if _print_google(cfg.scene, data, reports) else 1


def google_ok(rep: dict) -> list[str]:
    """What is wrong with one variant's ``reports/google.json`` (empty: the demo's checks hold)."""
    bad = [f"export {k} {v}" for k, v in rep["exports"].items() if str(v).startswith("failed")]
    iou = rep["table_check"].get("iou")
    if not rep["table_check"].get("not_applicable") and (iou is None or iou < 0.8):
        bad.append(f"table top IoU {iou} < 0.8 (the camera does not explain the real table)")
    bad += [f"oracle in {eng} {s['rate']:.2f} < 0.5" for eng, s in rep["success"].items() if s["rate"] < 0.5]
    return bad


def _print_google(scene: str, data: Path, reports: dict) -> bool:
    from rich.table import Table

    engines = sorted({e for _, rep in reports.values() for e in rep["success"]})
    t = Table(title=f"real2sim demo --scene {scene}  (data: {data})",
              caption="table IoU: the real table top vs its known size through SIMPLER's camera -> the head refined")
    for col in ("variant", "table IoU", "exports", *[f"oracle {e}" for e in engines],
                "seconds"):
        t.add_column(col, justify="left" if col in ("variant", "exports") else "right")
    bad = []
    for v, (bundle, rep) in reports.items():
        tc = rep["table_check"]
        refined = tc.get("refined", {}).get("iou")
        iou = f"{tc['iou']:.3f}" if "iou" in tc else tc.get("error", "-")
        exports = ", ".join(f"{k} {'failed' if str(p).startswith('failed') else 'ok'}" for k, p in rep["exports"].items())
        succ = [f"{round(rep['success'][e]['rate'] * rep['success'][e]['trials'])}/{rep['success'][e]['trials']}"
                if e in rep["success"] else "-" for e in engines]
        t.add_row(v, iou + (f" -> {refined:.3f}" if refined else ""), exports, *succ, f"{rep['total_seconds']:.1f}")
        bad += [f"{v}: {b}" for b in google_ok(rep)]
    console().print(t)
    for v, (bundle, rep) in reports.items():
        say(f"{v}: report {bundle.reports_dir() / 'google.json'}, picture {bundle.path(rep['picture'])}")
        say(f"   review it in the browser: real2sim review {bundle.root}")
    for b in bad:
        say(f"[red]{b}[/red]", markup=True)
    say("[green]demo OK[/green]" if not bad else "[red]demo: a check is outside its limit (see above)[/red]",
        markup=True)
    return not bad


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run the journey on a bundled (or installed) scene with no input, or "
                              "rebuild one of SIMPLER's Google Robot scenes from the shared data (google_*)")
    p.add_argument("--out", default="demo_out", help="bundle directory to write (default: ./demo_out; a google_* "
                   "scene writes one bundle per variant, OUT/<scene>_<variant>/scene)")
    add_config_options(p, DemoConfig, choices={"scene": [*list_scenes(), *google.demo_scenes()]})
    p.set_defaults(fn=cmd_demo)
