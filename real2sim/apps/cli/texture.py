"""Texture commands: ``real2sim align``, ``texture`` and ``robot-appearance`` (flags from the stages' configs)."""
from __future__ import annotations

import json
from pathlib import Path

from real2sim.apps.cli.console import ACCEPT_POOR_HELP, gate_exit, say, warn
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.core.bundle import Bundle
from real2sim.render.align import AlignConfig
from real2sim.render.raster import BACKENDS as RASTER_BACKENDS
from real2sim.texture.backproject import TextureConfig
from real2sim.texture.robot import RobotAppearanceConfig, robot_appearance_stage
from real2sim.texture.stage import align_stage, texture_stage

RASTER_CHOICES = ["auto", *RASTER_BACKENDS]


def _stage_report(bundle, name: str) -> dict:
    """The JSON report a stage wrote (empty when it has not written one)."""
    path = bundle.path(f"reports/{name}.json")
    return json.loads(path.read_text()) if path.exists() else {}


def cmd_align(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    rec, ran = align_stage(bundle, args.object or None, config_from_args(AlignConfig, args), force=args.force,
                           accept_poor=args.accept_poor)
    for oid, r in _stage_report(bundle, "alignment").get("objects", {}).items():
        if r.get("status") == "failed":
            num = f" (mean IoU {r['mean_iou']:.3f})" if "mean_iou" in r else ""
            say(f"{oid}: FAILED: {r.get('error') or r.get('message')}{num} (pose kept)")
        else:
            search = r.get("search") or {}
            found = (f", searched {search.get('coarse_hypotheses')} hypotheses over "
                     f"{len(search.get('resting_poses', [])) or search.get('so3_samples')} "
                     f"{'resting poses' if search.get('space') == 'stable' else 'orientations'} in "
                     f"{search.get('seconds', 0):.2f} s") if search else ""
            say(f"{oid}: {r['status']}: mean IoU {r['mean_iou']:.3f} per frame {r['iou_per_frame']}, contour distance "
                f"{r.get('contour_px', float('nan')):.2f} px, residual {r['residual_px']:.2f} px, {r['rounds']} rounds, "
                f"{r['seconds']:.2f} s{found} -> {r['picture']}")
            if r["status"] == "poor":
                warn(f"{oid}: alignment is POOR ({r['message']}); pose {'applied (--accept-poor)' if not r.get('pose_kept') else 'kept'}. Check the mask and the mesh in "
                     f"'real2sim review {args.dir}'")
    say(f"alignment {'ran' if ran else 'unchanged'}: {rec.metrics}")
    return gate_exit(bundle, "alignment")


def cmd_texture(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    rec, ran = texture_stage(bundle, args.object or None, config_from_args(TextureConfig, args), force=args.force,
                             accept_poor=args.accept_poor)
    for oid, r in _stage_report(bundle, "texture").get("objects", {}).items():
        if r.get("status") == "failed":
            say(f"{oid}: FAILED: {r['error']} (texture kept: {r.get('texture_kept')})")
        elif r.get("status") == "poor":
            say(f"{oid}: POOR: coverage {r['coverage']:.3f}, re-render PSNR {r['psnr_db']:.2f} dB (texture kept: "
                f"{r.get('texture_kept')})")
        else:
            say(f"{oid}: coverage {r['coverage']:.3f}, re-render PSNR {r['psnr_db']:.2f} dB, texture {r['texture']} "
                f"-> {r['picture']}")
    say(f"texture {'ran' if ran else 'unchanged'}: {rec.metrics}")
    return gate_exit(bundle, "texture")


def cmd_robot_appearance(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    rec, ran = robot_appearance_stage(bundle, config_from_args(RobotAppearanceConfig, args), force=args.force)
    rep = _stage_report(bundle, "robot_appearance")
    for link, r in rep.get("links", {}).items():
        say(f"{link:24s} {r['pixels']:7d} px  " + (f"rgba {r['rgba']}" if r["rgba"] else "not seen (colour kept)"))
    say(f"robot appearance {'ran' if ran else 'unchanged'}: {rec.metrics} -> {rep.get('picture', '')}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("align", help="align object poses to their masks (render-and-compare)")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--object", action="append", help="object id (repeatable); default: every masked dynamic object")
    add_config_options(p, AlignConfig, only=("dof", "init", "backend", "min_iou", "max_residual_px", "aligned_iou", "mask_tolerance_px",
                                             "aligned_contour_px", "search_space", "min_stable_probability",
                                             "max_orientations", "yaw_step_deg", "so3_samples", "search_keep",
                                             "refine_keep", "colour_weight"),
                       choices={"dof": ["planar", "planar_z", "full"], "init": ["auto", "bundle", "search"],
                                "search_space": ["auto", "stable", "so3"], "backend": RASTER_CHOICES})
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    p.set_defaults(fn=cmd_align)

    p = subparsers.add_parser("texture", help="back-project object textures from the frames")
    p.add_argument("dir", help="scene bundle directory")
    p.add_argument("--object", action="append", help="object id (repeatable); default: every masked dynamic object")
    add_config_options(p, TextureConfig, only=("size", "refine_iters", "backend", "seed"),
                       flags={"refine_iters": "--refine"}, choices={"backend": RASTER_CHOICES})
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    p.set_defaults(fn=cmd_texture)

    p = subparsers.add_parser("robot-appearance", help="fit the robot's link colours from the frames")
    p.add_argument("dir", help="scene bundle directory")
    add_config_options(p, RobotAppearanceConfig, choices={"backend": RASTER_CHOICES})
    p.add_argument("--force", action="store_true", help="re-run even if inputs are unchanged")
    p.set_defaults(fn=cmd_robot_appearance)
