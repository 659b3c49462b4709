"""``real2sim align`` and ``real2sim texture``: wire into the main CLI with :func:`add_parsers`."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError
from real2sim.render.align import AlignConfig
from real2sim.texture.backproject import TextureConfig
from real2sim.texture.robot import RobotAppearanceConfig, robot_appearance_stage
from real2sim.texture.stage import align_stage, texture_stage

log = logging.getLogger(__name__)


def _print(msg: str) -> None:
    try:
        from rich.console import Console

        Console().print(msg, highlight=False, markup=False)
    except ImportError:  # pragma: no cover
        import sys

        sys.stdout.write(msg + "\n")


def _stage_report(bundle, name: str) -> dict:
    """The JSON report a stage wrote (empty when it has not written one)."""
    import json

    path = bundle.root / "reports" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def cmd_align(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    cfg = AlignConfig(dof=args.dof, init=args.init, backend=args.backend)
    rec, ran = align_stage(bundle, args.object or None, cfg, force=args.force)
    rep = _stage_report(bundle, "alignment")
    for oid, r in rep.get("objects", {}).items():
        if r.get("status") == "failed":
            _print(f"{oid}: FAILED: {r['error']} (pose kept)")
        else:
            _print(f"{oid}: {r['status']}: mean IoU {r['mean_iou']:.3f} per frame {r['iou_per_frame']}, contour residual "
                   f"{r['residual_px']:.2f} px, {r['rounds']} rounds, {r['seconds']:.2f} s -> {r['picture']}")
    _print(f"alignment {'ran' if ran else 'unchanged'}: {rec.metrics}")
    return 1 if rec.metrics.get("failed") else 0


def cmd_texture(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    cfg = TextureConfig(size=args.size, refine_iters=args.refine, backend=args.backend)
    rec, ran = texture_stage(bundle, args.object or None, cfg, force=args.force)
    rep = _stage_report(bundle, "texture")
    for oid, r in rep.get("objects", {}).items():
        if r.get("status") == "failed":
            _print(f"{oid}: FAILED: {r['error']} (texture kept: {r.get('texture_kept')})")
        else:
            _print(f"{oid}: coverage {r['coverage']:.3f}, re-render PSNR {r['psnr_db']:.2f} dB, texture {r['texture']} "
                   f"-> {r['picture']}")
    _print(f"texture {'ran' if ran else 'unchanged'}: {rec.metrics}")
    return 1 if rec.metrics.get("failed") else 0


def cmd_robot_appearance(args) -> int:

    bundle = Bundle.load(Path(args.dir))
    rec, ran = robot_appearance_stage(bundle, RobotAppearanceConfig(backend=args.backend), force=args.force)
    rep = _stage_report(bundle, "robot_appearance")
    for link, r in rep.get("links", {}).items():
        _print(f"{link:24s} {r['pixels']:7d} px  " + (f"rgba {r['rgba']}" if r["rgba"] else "not seen (colour kept)"))
    _print(f"robot appearance {'ran' if ran else 'unchanged'}: {rec.metrics} -> {rep.get('picture', '')}")
    return 0


def add_parsers(subparsers) -> None:
    """Register ``align``, ``texture`` and ``robot-appearance`` on an argparse ``add_subparsers()`` object
    (each sets ``fn``)."""
    p = subparsers.add_parser("align", help="align object poses to their masks (render-and-compare)")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--object", action="append", help="object id (repeatable); default: every masked dynamic object")
    p.add_argument("--dof", default="planar", choices=["planar", "planar_z", "full"],
                   help="planar: x, y, yaw on the table (default); planar_z: + height; full: 6 DoF")
    p.add_argument("--init", default="auto", choices=["auto", "bundle", "search"],
                   help="start from the current pose, a global search, or whichever fits (auto)")
    p.add_argument("--backend", default="auto", choices=["auto", "gl", "numpy"], help="rasteriser")
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.set_defaults(fn=cmd_align)
    p = subparsers.add_parser("texture", help="back-project object textures from the frames")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--object", action="append", help="object id (repeatable); default: every masked dynamic object")
    p.add_argument("--size", type=int, default=1024, help="texture resolution (pixels)")
    p.add_argument("--refine", type=int, default=0, help="Adam refinement iterations after the splat (0: off)")
    p.add_argument("--backend", default="auto", choices=["auto", "gl", "numpy"], help="rasteriser")
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.set_defaults(fn=cmd_texture)
    p = subparsers.add_parser("robot-appearance", help="fit the robot's link colours from the frames")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--backend", default="auto", choices=["auto", "gl", "numpy"], help="rasteriser")
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.set_defaults(fn=cmd_robot_appearance)


def main(argv=None) -> int:
    """Standalone entry (``python -m real2sim.apps.cli.texture align DIR``) until the main CLI wires :func:`add_parsers`."""
    ap = argparse.ArgumentParser(prog="real2sim-texture")
    add_parsers(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        return args.fn(args)
    except Real2SimError as exc:
        _print(f"error: {exc}")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
