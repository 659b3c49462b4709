"""CLI handlers for robots: ``real2sim sysid`` and ``real2sim robots``. Wire with ``add_parsers(subparsers)``."""
from __future__ import annotations

import json
from pathlib import Path

from real2sim.engines import engine_names
from real2sim.evaluation.sysid import run_sysid
from real2sim.robots import get_robot, list_robots, robot_urdf


def cmd_sysid(args) -> int:
    from rich.console import Console

    res = run_sysid(Path(args.trajectories), args.robot, action_space=args.action_space, out=Path(args.out) if args.out else None,
                    bundle_dir=Path(args.bundle) if args.bundle else None, heldout_fraction=args.heldout,
                    workers=args.workers, share=args.share, rounds=args.rounds, iters_per_round=args.iters,
                    engine=args.engine, seed=args.seed)
    con = Console()
    con.print(f"sysid {res.robot}: train loss {res.initial_train_loss:.5f} -> {res.train_loss:.5f} "
              f"({res.evaluations} evaluations); held-out loss "
              + (f"{res.heldout_loss:.5f}" if res.heldout_loss is not None else "n/a (too few episodes)"))
    con.print("stiffness: " + ", ".join(f"{x:.1f}" for x in res.stiffness))
    con.print("damping:   " + ", ".join(f"{x:.2f}" for x in res.damping))
    if args.out:
        con.print(f"gains written to {args.out}")
    if args.bundle:
        con.print(f"gains written into {args.bundle}/scene.json (robot); plot: {args.bundle}/reports/sysid.png")
    if not args.out and not args.bundle:
        con.print(json.dumps(res.to_json()))
    return 0


def cmd_robots(args) -> int:
    from rich.console import Console

    con = Console()
    for name in list_robots():
        r = get_robot(name)
        line = f"{r.name:12s} dof {r.dof}  aliases {', '.join(r.aliases)}  EE {r.ee_link}  {r.description}"
        if args.resolve:
            line += f"\n    urdf: {robot_urdf(r)}"
        con.print(line, highlight=False)
    return 0


def add_parsers(subparsers) -> None:
    """Register ``sysid`` and ``robots`` on an argparse subparsers object (handlers set as ``fn``)."""
    p = subparsers.add_parser("sysid", help="fit the robot's joint drive gains to recorded trajectories")
    p.add_argument("--trajectories", required=True, help=".npz trajectory file or LeRobot dataset root (docs/sysid.md)")
    p.add_argument("--action-space", choices=["ee_delta", "joint_pos"], default=None,
                   help="action space of LeRobot actions (an .npz file records its own)")
    p.add_argument("--robot", required=True, help="registry robot name (real2sim robots)")
    p.add_argument("--out", help="write the fitted gains as JSON here")
    p.add_argument("--bundle", help="scene bundle: gains go into its robot section, plot into reports/")
    p.add_argument("--heldout", type=float, default=0.2, help="fraction of episodes held out (scored, not fitted)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: min(episodes, cores))")
    p.add_argument("--share", choices=["per_joint", "arm"], default="per_joint",
                   help="one gain pair per arm joint, or one shared by the whole arm")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=60, help="annealing iterations per round")
    p.add_argument("--engine", default=None, choices=engine_names("physics"),
                   help=f"engine that simulates (default: {engine_names('physics')[0]})")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_sysid)
    p = subparsers.add_parser("robots", help="list the registered robots")
    p.add_argument("--resolve", action="store_true", help="also build and show each resolved URDF")
    p.set_defaults(fn=cmd_robots)
