"""The ``real2sim`` command line: one entry point, one subcommand per step of the journey."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from real2sim import collision
from real2sim.capture.camera_refine import refine_camera_stage
from real2sim.core.bundle import Bundle, atomic_write_json
from real2sim.core.errors import ManifestError, Real2SimError
from real2sim.core.manifest import TaskSpec, _Reader
from real2sim.core.version import __version__
from real2sim.demos.demo import STAGES, run_demo, worst
from real2sim.engines import engine_names
from real2sim.evaluation.metrics import compare, plot, read_results, to_json
from real2sim.pipeline import build, export_bundle
from real2sim.pipeline.check import check_bundle
from real2sim.pipeline.recipe import add_object
from real2sim.scenes import list_scenes
from real2sim.segmentation.robot_fit import robot_fit_stage
from real2sim.segmentation.robot_masks import robot_masks_stage


def _console():
    from rich.console import Console

    return Console(stderr=False)


def cmd_demo(args) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    con = _console()
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=con, transient=True) as prog:
        task = prog.add_task("demo", total=len(STAGES))

        def on_stage(name):
            prog.update(task, description=f"demo: {name}", completed=STAGES.index(name))

        rep = run_demo(Path(args.out), scene=args.scene, workers=args.workers, episodes=args.episodes, task=args.task,
                       on_stage=on_stage)
        prog.update(task, completed=len(STAGES))
    t = Table(title=f"real2sim demo -> {rep.out_dir}")
    t.add_column("stage")
    t.add_column("seconds", justify="right")
    for k, v in rep.stage_seconds.items():
        t.add_row(k, f"{v:.2f}")
    t.add_row("total", f"{sum(rep.stage_seconds.values()):.2f}")
    con.print(t)
    con.print("pose recovery (ADD-S vs ground truth, mm): " + ", ".join(
        f"{k} {v['before']:.1f} -> {v['after']:.1f}" for k, v in rep.pose_error_mm.items()))
    b = rep.build
    if "plate" in b:
        con.print(f"plate: {b['plate'].get('inpainted_fraction', 0):.1%} inpainted;  "
                  f"alignment min IoU {b.get('alignment', {}).get('min_iou')};  "
                  f"texture min PSNR {b.get('texture', {}).get('min_psnr_db')} dB")
    for k, v in rep.exports.items():
        con.print(f"export {k:7s} {v}")
    con.print(f"drop test {' vs '.join(rep.success) or 'engines'}: worst position {worst(rep.drop_position_mm):.2f} mm, "
              f"worst angle {worst(rep.drop_angle_deg):.2f} deg (limits 5 mm / 5 deg)")
    con.print("camera projection vs bundle (max px): " + ", ".join(f"{k} {v:.4f}" for k, v in rep.projection_px.items()))
    e = Table(title=f"success rate on {rep.task} (state observations)")
    e.add_column("policy")
    for engine in rep.success:
        e.add_column(engine, justify="right")
    for policy in next(iter(rep.success.values()), {}):
        e.add_row(policy, *[f"{rep.success[eng][policy]:.2f}" for eng in rep.success])
    con.print(e)
    con.print(f"ranking agreement {' vs '.join(reversed(list(rep.success)))}: MMRV {rep.mmrv}, Pearson r {rep.pearson}")
    for k, v in rep.pictures.items():
        con.print(f"picture ({k}): {rep.out_dir / v}")
    con.print(f"review it in the browser: real2sim review {rep.out_dir}   (serves http://127.0.0.1:7860)")
    ok = (worst(rep.drop_position_mm) < 5 and worst(rep.drop_angle_deg) < 5 and worst(rep.projection_px) < 0.5
          and all(v["after"] < 3.0 for v in rep.pose_error_mm.values()))
    con.print("[green]demo OK[/green]" if ok else "[red]demo: a check is outside its limit (see above)[/red]")
    return 0 if ok else 1


def cmd_check(args) -> int:

    findings = check_bundle(Path(args.dir), load_meshes=not args.quick)
    con = _console()
    for f in findings:
        con.print(("[red]" if f.level == "error" else "[yellow]") + str(f), markup=True, highlight=False)
    errors = sum(f.level == "error" for f in findings)
    con.print(f"{args.dir}: {errors} error(s), {len(findings) - errors} warning(s)")
    return 1 if errors else 0


def _collision_config(args):

    return collision.CollisionConfig(method=args.method, threshold=args.threshold, timeout_s=args.timeout,
                                     seed=args.seed, workers=args.workers)


def cmd_add_object(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    props = {k: getattr(args, k) for k in ("density", "mass", "friction") if getattr(args, k) is not None}
    if args.fixed:
        props["fixed"] = True
    obj = add_object(bundle, args.id, Path(args.mesh), Path(args.texture) if args.texture else None,
                     [float(v) for v in args.position.split(",")] if args.position else None, **props)
    _console().print(f"added '{args.id}' at {obj.pose.position} ({obj.visual.mesh}); "
                     f"next: real2sim masks {args.dir} --entity {args.id} --point X,Y, then real2sim build {args.dir}")
    return 0


def cmd_add_task(args) -> int:
    import json

    bundle = Bundle.load(Path(args.dir))
    try:
        success = json.loads(args.success)
        init = json.loads(args.init) if args.init else {}
    except json.JSONDecodeError as exc:

        raise ManifestError("add-task", "--success/--init", f"is not valid JSON ({exc})",
                            'quote it, e.g. --success \'{"type": "lifted", "object": "cube", "height": 0.04}\'') from exc
    spec = TaskSpec.parse(_Reader("add-task"), {"instruction": args.instruction, "success": success,
                                                "time_limit_s": args.time_limit, "init": init}, f"tasks.{args.id}")
    for oid in _objects_named(success):
        bundle.object(oid)  # unknown object ids suggest close ones
    bundle.manifest.tasks[args.id] = spec
    bundle.save()
    _console().print(f"task '{args.id}' added: {args.instruction!r}; evaluate with: real2sim eval {args.dir} --task {args.id} --policy scripted")
    return 0


def _objects_named(pred: dict) -> list[str]:
    names = [pred[k] for k in ("object", "support", "container", "target") if isinstance(pred.get(k), str)]
    for t in pred.get("terms", []):
        names += _objects_named(t)
    return names


def cmd_fit_robot(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    rec, ran = robot_fit_stage(bundle, args.frame, force=args.force)
    q = bundle.manifest.capture.frames[args.frame].joint_positions
    _console().print(f"robot joints {'fitted' if ran else 'unchanged'} for frame {args.frame}: silhouette IoU "
                     f"{rec.metrics.get('iou_start')} -> {rec.metrics.get('iou_fitted')}; q = {q}  {rec.message}")
    return 0


def cmd_robot_masks(args) -> int:

    rec, ran = robot_masks_stage(Bundle.load(Path(args.dir)), force=args.force)
    _console().print(f"robot masks {'written' if ran else 'unchanged'}: {rec.metrics}")
    return 0


def cmd_refine_camera(args) -> int:

    rec, ran = refine_camera_stage(Bundle.load(Path(args.dir)), camera=args.camera, force=args.force, dof=args.dof,
                                   min_gain=args.min_gain)
    _console().print(f"refine-camera{'' if ran else ' (inputs unchanged, last run)'}: {rec.message} {rec.metrics}")
    return 0


def cmd_build(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    ran = build(bundle, _collision_config(args), force=args.force)
    con = _console()
    for name, did in ran.items():
        rec = bundle.manifest.stages[name]
        con.print(f"{name:10s} {'ran' if did else 'unchanged'}  {rec.metrics}  {rec.message}")
    return 0


def cmd_export(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    res = export_bundle(bundle, engines=args.engine, force=args.force)
    con = _console()
    failed = 0
    for k, v in res.items():
        if isinstance(v, Exception):
            failed += 1
            con.print(f"[red]{k}: {v}[/red]")
        else:
            con.print(f"{k}: {getattr(v, 'main_file', v)}")
    return 1 if failed else 0


def cmd_collide(args) -> int:

    res = collision.collide_command(Path(args.mesh), Path(args.out), _collision_config(args))
    r = res.report
    _console().print(f"{args.mesh}: {res.kind}, {len(res.hulls)} hull(s), occupancy IoU {r.get('occupancy_iou', float('nan')):.3f}, "
                     f"volume ratio {r.get('volume_ratio', float('nan')):.3f}, Hausdorff/diag {r.get('hausdorff_rel', float('nan')):.4f} -> {args.out}")
    return 0


def cmd_metrics(args) -> int:
    from rich.table import Table

    metrics = compare(read_results(Path(args.real)), read_results(Path(args.sim)), n_boot=args.bootstrap, seed=args.seed,
                      real_name=args.real, sim_name=args.sim)
    con = _console()
    t = Table(title="sim vs real")
    for c in ("task", "policies", "MMRV [95% CI]", "Pearson r [95% CI]"):
        t.add_column(c)
    for m in metrics:
        t.add_row(m.task, str(len(m.policies)), f"{m.mmrv:.3f} [{m.mmrv_ci[0]:.3f}, {m.mmrv_ci[1]:.3f}]",
                  f"{m.pearson:.3f} [{m.pearson_ci[0]:.3f}, {m.pearson_ci[1]:.3f}]")
    con.print(t)
    if args.json:
        atomic_write_json(Path(args.json), to_json(metrics))
        con.print(f"wrote {args.json}")
    if args.plot:
        con.print(f"wrote {plot(metrics, Path(args.plot))}")
    return 0


def _add_collision_args(p):
    p.add_argument("--method", default="auto", choices=["auto", "coacd", "convex", "primitive"],
                   help="auto: a primitive when exact enough, else CoACD")
    p.add_argument("--threshold", type=float, default=0.05, help="CoACD concavity threshold (0.1 for coarse)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per object before CoACD is killed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="objects decomposed in parallel")


# Stage packages register their own subcommands (module, function); imported at parse time only.
STAGE_PARSERS = [
    ("real2sim.apps.cli.capture", "add_parsers"),        # init, plate, calibrate, table
    ("real2sim.apps.cli.segmentation", "add_parsers"),   # segment, masks
    ("real2sim.apps.cli.robots", "add_parsers"),  # sysid, robots
    ("real2sim.apps.cli.texture", "add_parsers"),        # align, texture, robot-appearance
    ("real2sim.apps.cli.review", "add_parsers"),           # review
    ("real2sim.apps.cli.evaluate", "add_parsers"),  # eval
]


def _add_stage_parsers(sub) -> None:
    import importlib

    for module, fn in STAGE_PARSERS:
        getattr(importlib.import_module(module), fn)(sub)


def make_parser() -> argparse.ArgumentParser:

    ap = argparse.ArgumentParser(prog="real2sim", description="Real frames -> matched simulated scene -> evaluation.")
    ap.add_argument("--version", action="version", version=f"real2sim {__version__}")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="run the journey on a bundled (or installed) scene with no input")
    p.add_argument("--scene", default="tabletop", choices=list_scenes(), help="scene recipe (default: tabletop)")
    p.add_argument("--task", default=None, help="task of the scene to evaluate (default: its first)")
    p.add_argument("--out", default="demo_out", help="bundle directory to write (default: ./demo_out)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--episodes", type=int, default=6, help="episodes per policy and engine")
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("check", help="validate a scene bundle")
    p.add_argument("dir")
    p.add_argument("--quick", action="store_true", help="do not load meshes")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("add-object", help="add an object (a mesh, optionally textured) to a bundle")
    p.add_argument("dir")
    p.add_argument("id", help="object id ([A-Za-z0-9_-])")
    p.add_argument("--mesh", required=True, help="OBJ, STL, PLY, GLB or DAE, in metres")
    p.add_argument("--texture", help="texture image for the mesh's UVs")
    p.add_argument("--position", help="x,y,z in metres (default: resting on the table centre)")
    p.add_argument("--density", type=float, help="kg/m^3 (default 1000)")
    p.add_argument("--mass", type=float, help="kg (overrides density)")
    p.add_argument("--friction", type=float)
    p.add_argument("--fixed", action="store_true", help="static (e.g. a shelf)")
    p.set_defaults(fn=cmd_add_object)
    p = sub.add_parser("add-task", help="add an evaluation task (instruction, success predicate, init) to a bundle")
    p.add_argument("dir")
    p.add_argument("id")
    p.add_argument("--instruction", required=True, help="language instruction given to the policy")
    p.add_argument("--success", required=True, help='JSON predicate, e.g. \'{"type": "lifted", "object": "cube", "height": 0.04}\'')
    p.add_argument("--init", help='JSON randomisation, e.g. \'{"objects": {"cube": {"xy": [[0.1, -0.1], [0.15, -0.05]]}}}\'')
    p.add_argument("--time-limit", type=float, default=20.0, dest="time_limit", help="seconds")
    p.set_defaults(fn=cmd_add_task)
    p = sub.add_parser("fit-robot", help="fit the robot's joints in a frame to its pixels (frame minus plate)")
    p.add_argument("dir")
    p.add_argument("--frame", type=int, default=0)
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_fit_robot)
    p = sub.add_parser("robot-masks", help="masks of the robot rendered from the simulator at each frame's joints")
    p.add_argument("dir")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_robot_masks)
    p = sub.add_parser("refine-camera", help="refine a camera's pose by aligning the robot rendered at the frames' "
                       "joints to its masks")
    p.add_argument("dir")
    p.add_argument("--camera", default="main", help="camera name in scene.json (default: main)")
    p.add_argument("--dof", type=int, default=6, choices=[3, 6],
                   help="6: move and turn the camera; 3: only turn it (its position is measured). One frame of a "
                        "gripper pins where the robot lands in the image, not the whole pose: see docs/journey.md")
    p.add_argument("--min-gain", type=float, default=0.01, dest="min_gain",
                   help="keep the old pose unless the mean IoU improves by this much (default 0.01)")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_refine_camera)
    p = sub.add_parser("build", help="run the build stages (plate, alignment, texture, collision, inertial)")
    p.add_argument("dir")
    p.add_argument("--force", action="store_true", help="re-run stages even if unchanged")
    _add_collision_args(p)
    p.set_defaults(fn=cmd_build)
    p = sub.add_parser("export", help="export to every registered engine (or --engine); each export is loaded back in its engine")
    p.add_argument("dir")
    p.add_argument("--engine", action="append", choices=engine_names(), help="repeatable; default all")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("metrics", help="MMRV and Pearson r between real and sim success tables")
    p.add_argument("--real", required=True, help="CSV: policy, task, successes, trials (or rate, trials)")
    p.add_argument("--sim", required=True, help="CSV with the same columns and policy/task pairs")
    p.add_argument("--json", help="write the metrics here")
    p.add_argument("--plot", help="write a real-vs-sim scatter PNG here")
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the intervals")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_metrics)
    _add_stage_parsers(sub)
    p = sub.add_parser("collide", help="collision geometry for one mesh file")
    p.add_argument("mesh")
    p.add_argument("--out", required=True)
    _add_collision_args(p)
    p.set_defaults(fn=cmd_collide)
    return ap


def main(argv=None) -> int:
    from rich.logging import RichHandler

    args = make_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(show_path=False, show_time=False)])
    try:
        return args.fn(args)
    except Real2SimError as exc:
        _console().print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)  # paths stay whole
        return 2


if __name__ == "__main__":
    sys.exit(main())
