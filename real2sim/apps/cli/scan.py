"""``real2sim scan``: an object mesh (textured, with collision and mass) from photos of it on a ChArUco board."""
from __future__ import annotations

import json
from pathlib import Path

from real2sim.apps.cli.console import say
from real2sim.core.errors import CaptureError


def cmd_scan(args) -> int:
    from real2sim.pipeline.scan import ScanConfig, scan_object

    board = None
    if args.board:
        p = Path(args.board)
        try:
            board = json.loads(p.read_text()) if p.is_file() else json.loads(args.board)
        except json.JSONDecodeError as exc:
            raise CaptureError(f"--board {args.board}: neither a JSON file nor JSON ({exc.msg}); give e.g. "
                               '\'{"squares": [8, 6], "square": 0.03, "marker": 0.022}\'') from exc
    cfg = ScanConfig(resolution=args.resolution, face_budget=args.faces, density=args.density,
                     collision=not args.no_collision, reference=args.reference, board=board,
                     depth_scale=args.depth_scale, texture_size=args.texture_size)
    res = scan_object(Path(args.dir), Path(args.out), cfg, Path(args.depth) if args.depth else None)
    r = res.report
    line = (f"{args.out}: {r['method']} from {len(r['frames_used'])} of {r['frames_total']} frames, "
            f"{r['faces']} faces, {r['size_m'][0] * 100:.1f} x {r['size_m'][1] * 100:.1f} x {r['size_m'][2] * 100:.1f} cm, "
            f"seen {r['seen_fraction']:.0%}, watertight {r['watertight']}, mass {r['mass_kg']} kg, "
            f"{r['timing']['total_s']:.1f} s")
    if r["grade"]:
        line += f"; vs reference: Chamfer {r['grade']['chamfer_mm']:.2f} mm, volume IoU {r['grade']['volume_iou']:.3f}"
    say(line)
    for w in res.warnings:
        say(f"[yellow]warning: {w}", markup=True)
    say(f"next: real2sim add-object SCENE ID --scan {args.out}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("scan", help="object mesh from photos (or RGB-D) of it on a ChArUco board")
    p.add_argument("dir", help="capture folder (frames/, camera.json, board.json, optional masks/) or a video")
    p.add_argument("--out", required=True, help="object folder to write (visual.obj, texture.png, collision/, ...)")
    p.add_argument("--board", help="board JSON (file or text) instead of DIR/board.json")
    p.add_argument("--depth", help="folder of uint16 depth PNGs (mm) named like the frames: TSDF fusion")
    p.add_argument("--depth-scale", type=float, dest="depth_scale", help="depth PNG units per metre (default 1000)")
    p.add_argument("--resolution", type=int, default=128, help="carving voxels along the longest side (128)")
    p.add_argument("--faces", type=int, default=10000, help="face budget of the mesh (10000; xatlas slows down sharply above)")
    p.add_argument("--texture-size", type=int, default=1024, dest="texture_size")
    p.add_argument("--density", type=float, default=1000.0, help="kg/m^3 for the mass (1000)")
    p.add_argument("--reference", help="reference mesh (scan world frame) to grade against: Chamfer, volume IoU")
    p.add_argument("--no-collision", action="store_true", dest="no_collision", help="skip CoACD")
    p.set_defaults(fn=cmd_scan)
