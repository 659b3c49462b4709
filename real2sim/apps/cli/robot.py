"""Robot commands: ``real2sim robots``, ``fit-robot``, ``robot-masks``, ``refine-camera`` and ``sysid``."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from real2sim.apps.cli.console import ACCEPT_POOR_HELP, gate_exit, say
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.capture.camera_refine import RefineCameraConfig, refine_camera_stage
from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError
from real2sim.engines import engine_names
from real2sim.evaluation.sysid import SysIdConfig, run_sysid
from real2sim.robots import get_robot, list_robots, robot_urdf
from real2sim.segmentation.robot_fit import robot_fit_stage
from real2sim.segmentation.robot_masks import robot_masks_stage


def cmd_robots(args) -> int:
    if getattr(args, "robots_cmd", None) == "check":
        return cmd_robots_check(args)
    for name in list_robots():
        r = get_robot(name)
        line = f"{r.name:12s} dof {r.dof}  aliases {', '.join(r.aliases)}  EE {r.ee_link}  {r.description}"
        if args.resolve:
            try:
                line += f"\n    urdf: {robot_urdf(r)}"
            except Real2SimError as exc:  # e.g. the Google Robot without REAL2SIM_GOOGLE_ROBOT: say so, list the rest
                line += f"\n    urdf: not available: {exc}"
        say(line)
    return 0


def cmd_robots_check(args) -> int:
    """``real2sim robots check FILE``: load a robot in every engine, compare FK, report what was fixed."""
    from real2sim.engines.robot_check import check_robot

    rep = check_robot(args.robot, samples=args.samples, seed=args.seed)
    if args.json:
        say(json.dumps(rep.to_json(), indent=1))
    else:
        for line in rep.lines():
            say(line)
    return 0 if rep.ok else 1


def cmd_fit_robot(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    rec, ran = robot_fit_stage(bundle, args.frame, force=args.force, accept_poor=args.accept_poor)
    met = rec.metrics
    where = f"frame {args.frame}" if args.frame is not None else f"{met.get('frames')} frames"
    say(f"robot {'found' if ran else 'unchanged'} in {where} ({met.get('method')}): silhouette IoU "
        f"{met.get('iou_start')} -> {met.get('iou_fitted')} (min {met.get('iou_min')}), lost frames "
        f"{met.get('lost_frames')}, motion explained {met.get('motion_explained')}; report reports/robot_fit.json  "
        f"{rec.message}")
    if args.frame is not None:
        say(f"q = {bundle.manifest.capture.frames[args.frame].joint_positions}")
    return gate_exit(bundle, "robot_fit")


def cmd_robot_masks(args) -> int:
    rec, ran = robot_masks_stage(Bundle.load(Path(args.dir)), force=args.force)
    say(f"robot masks {'written' if ran else 'unchanged'}: {rec.metrics}")
    return 0


def cmd_refine_camera(args) -> int:
    cfg = config_from_args(RefineCameraConfig, args)
    bundle = Bundle.load(Path(args.dir))
    rec, ran = refine_camera_stage(bundle, force=args.force, accept_poor=args.accept_poor, **dataclasses.asdict(cfg))
    say(f"refine-camera{'' if ran else ' (inputs unchanged, last run)'}: {rec.message} {rec.metrics}")
    return gate_exit(bundle, "camera_refine")


def cmd_sysid(args) -> int:
    cfg = config_from_args(SysIdConfig, args)
    res = run_sysid(Path(args.trajectories), args.robot, action_space=args.action_space,
                    out=Path(args.out) if args.out else None, bundle_dir=Path(args.bundle) if args.bundle else None,
                    workers=args.workers, engine=args.engine, **dataclasses.asdict(cfg))
    say(f"sysid {res.robot}: train loss {res.initial_train_loss:.5f} -> {res.train_loss:.5f} "
        f"({res.evaluations} evaluations); held-out loss "
        + (f"{res.heldout_loss:.5f}" if res.heldout_loss is not None else "n/a (too few episodes)"))
    say("stiffness: " + ", ".join(f"{x:.1f}" for x in res.stiffness))
    say("damping:   " + ", ".join(f"{x:.2f}" for x in res.damping))
    if args.out:
        say(f"gains written to {args.out}")
    if args.bundle:
        say(f"gains written into {args.bundle}/scene.json (robot); plot: {args.bundle}/reports/sysid.png")
    if not args.out and not args.bundle:
        say(json.dumps(res.to_json()))
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("robots", help="list the registered robots; 'robots check FILE' checks a robot "
                              "definition in every engine")
    p.add_argument("--resolve", action="store_true", help="also build and show each resolved URDF")
    p.set_defaults(fn=cmd_robots)
    sub = p.add_subparsers(dest="robots_cmd")
    c = sub.add_parser("check", help="load a robot (definition file or registry name) in every engine: FK agreement "
                       "with pinocchio, one second holding its pose, what its URDF needed fixing (docs/robots.md)")
    c.add_argument("robot", help="robot definition file (.toml/.json/.yaml) or registry name")
    c.add_argument("--samples", type=int, default=50, help="random joint vectors for the FK comparison")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(fn=cmd_robots)

    p = subparsers.add_parser("fit-robot", help="find the robot in every frame: joints fitted to its pixels "
                              "(render-and-compare, frame to frame), its masks, reports/robot_fit.json")
    p.add_argument("dir")
    p.add_argument("--frame", type=int, default=None, help="fit this frame only (default: every frame)")
    p.add_argument("--force", action="store_true")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    p.set_defaults(fn=cmd_fit_robot)

    p = subparsers.add_parser("robot-masks", help="masks of the robot rendered from the simulator at each frame's joints")
    p.add_argument("dir")
    p.add_argument("--force", action="store_true")
    p.set_defaults(fn=cmd_robot_masks)

    p = subparsers.add_parser("refine-camera", help="refine a camera's pose by aligning the robot rendered at the "
                                                    "frames' joints to its masks")
    p.add_argument("dir")
    add_config_options(p, RefineCameraConfig, choices={"dof": [3, 6]})
    p.add_argument("--force", action="store_true")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    p.set_defaults(fn=cmd_refine_camera)

    p = subparsers.add_parser("sysid", help="fit the robot's joint drive gains to recorded trajectories")
    p.add_argument("--trajectories", required=True, help=".npz trajectory file or LeRobot dataset root (docs/sysid.md)")
    p.add_argument("--action-space", choices=["ee_delta", "joint_pos"], default=None,
                   help="action space of LeRobot actions (an .npz file records its own)")
    p.add_argument("--robot", required=True, help="registry robot name (real2sim robots) or robot definition file")
    p.add_argument("--out", help="write the fitted gains as JSON here")
    p.add_argument("--bundle", help="scene bundle: gains go into its robot section, plot into reports/")
    p.add_argument("--workers", type=int, default=None, help="processes (default: min(episodes, cores))")
    p.add_argument("--engine", default=None, choices=engine_names("physics"),
                   help=f"engine that simulates (default: {engine_names('physics')[0]})")
    add_config_options(p, SysIdConfig, flags={"iters_per_round": "--iters", "heldout_fraction": "--heldout"},
                       choices={"share": ["per_joint", "arm"]})
    p.set_defaults(fn=cmd_sysid)
