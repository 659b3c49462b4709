"""``real2sim build``, ``export`` and ``collide``."""
from __future__ import annotations

from pathlib import Path

from real2sim.apps.cli.console import ACCEPT_POOR_HELP, error, say, warn
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.collision import collide_command
from real2sim.collision.types import METHODS, CollisionConfig
from real2sim.core.bundle import Bundle
from real2sim.core.stages import quality_problems
from real2sim.engines import engine_names
from real2sim.pipeline import build, build_problems, export_bundle

COLLISION_FLAGS = {"timeout_s": "--timeout"}
COLLISION_OPTIONS = ("method", "threshold", "timeout_s", "seed", "workers")


def _collision_options(p) -> None:
    add_config_options(p, CollisionConfig, only=COLLISION_OPTIONS, flags=COLLISION_FLAGS,
                       choices={"method": sorted(METHODS)}, group="collision")


def cmd_build(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    ran = build(bundle, config_from_args(CollisionConfig, args), force=args.force, accept_poor=args.accept_poor)
    for name, did in ran.items():
        rec = bundle.manifest.stages[name]
        say(f"{name:10s} {'ran' if did else 'unchanged'}  {rec.metrics}  {rec.message}")
    code = 0
    for name, line in build_problems(bundle):
        rec = bundle.manifest.stages[name]
        if rec.status == "poor" and rec.metrics.get("applied"):
            warn(line)
        else:
            error(line)
            code = 2
    return code


def cmd_export(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    for _, line in quality_problems(bundle):
        warn(f"exporting with {line}")
    res = export_bundle(bundle, engines=args.engine, force=args.force)
    failed = 0
    for k, v in res.items():
        if isinstance(v, Exception):
            failed += 1
            say(f"[red]{k}: {v}[/red]", markup=True)
        else:
            say(f"{k}: {getattr(v, 'main_file', v)}")
    return 1 if failed else 0


def cmd_collide(args) -> int:
    res = collide_command(Path(args.mesh), Path(args.out), config_from_args(CollisionConfig, args))
    r = res.report
    say(f"{args.mesh}: {res.kind}, {len(res.hulls)} hull(s), occupancy IoU {r.get('occupancy_iou', float('nan')):.3f}, "
        f"volume ratio {r.get('volume_ratio', float('nan')):.3f}, Hausdorff/diag "
        f"{r.get('hausdorff_rel', float('nan')):.4f} -> {args.out}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("build", help="run the build stages the bundle calls for (plate, robot fit, alignment, "
                                            "texture, collision, inertial), in graph order, until none is stale")
    p.add_argument("dir")
    p.add_argument("--force", action="store_true", help="re-run stages even if unchanged")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    _collision_options(p)
    p.set_defaults(fn=cmd_build)

    p = subparsers.add_parser("export", help="export to every registered engine (or --engine); each export is "
                                             "loaded back in its engine")
    p.add_argument("dir")
    p.add_argument("--engine", action="append", choices=engine_names(), help="repeatable; default all")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_export)

    p = subparsers.add_parser("collide", help="collision geometry for one mesh file")
    p.add_argument("mesh")
    p.add_argument("--out", required=True)
    _collision_options(p)
    p.set_defaults(fn=cmd_collide)
