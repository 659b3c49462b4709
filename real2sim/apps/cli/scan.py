"""``real2sim scan``: an object mesh (textured, with collision and mass) from photos of it on a ChArUco board."""
from __future__ import annotations

import json
from pathlib import Path

from real2sim.apps.cli.console import say
from real2sim.apps.cli.options import pixel_box, pixel_point
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
    prompt = mask_cfg = None
    if args.point is not None or args.box is not None:
        from real2sim.pipeline.scan_masks import ClickPrompt, OneClickConfig

        prompt = ClickPrompt(args.point, args.box, args.frame)
        mask_cfg = OneClickConfig(backend=args.backend, min_confidence=args.min_mask_confidence)
    elif args.frame is not None:
        raise CaptureError("--frame names the photo of --point/--box; give --point X,Y (pixels on the object in that "
                           "photo) too")
    res = scan_object(Path(args.dir), Path(args.out), cfg, Path(args.depth) if args.depth else None, prompt, mask_cfg)
    r = res.report
    line = (f"{args.out}: {r['method']} from {len(r['frames_used'])} of {r['frames_total']} frames, "
            f"{r['faces']} faces, {r['size_m'][0] * 100:.1f} x {r['size_m'][1] * 100:.1f} x {r['size_m'][2] * 100:.1f} cm, "
            f"seen {r['seen_fraction']:.0%}, watertight {r['watertight']}, mass {r['mass_kg']} kg, "
            f"{r['timing']['total_s']:.1f} s")
    if r["grade"]:
        line += f"; vs reference: Chamfer {r['grade']['chamfer_mm']:.2f} mm, volume IoU {r['grade']['volume_iou']:.3f}"
    say(line)
    if r.get("one_click"):
        oc = r["one_click"]
        say(f"masks from one click in frame {oc['frame']}: confidence mean {oc['mean_confidence']:.3f}, min "
            f"{oc['min_confidence']:.3f}" + (f"; left out: {', '.join(oc['low_confidence'])}" if oc["low_confidence"]
                                           else "") + f" (masks in {args.out}/masks/)")
    for w in res.warnings:
        say(f"[yellow]warning: {w}", markup=True)
    say(f"next: real2sim add-object SCENE ID --scan {args.out}")
    return 0


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("scan", help="object mesh from photos (or RGB-D) of it on a ChArUco board")
    p.add_argument("dir", help="capture folder (frames/, camera.json, board.json, masks/ unless --point) or a video")
    p.add_argument("--point", type=pixel_point, help="X,Y: one click on the object in one photo (--frame); the masks of "
                   "every photo are made from it (through the board's poses) instead of read from masks/")
    p.add_argument("--box", type=pixel_box, help="X0,Y0,X1,Y1 around the object in that photo (with or instead of --point)")
    p.add_argument("--frame", help="the photo of --point/--box: its name (e.g. 000) or index (default: the first)")
    p.add_argument("--backend", default="auto", help="segmentation backend of the clicked photo (auto: SAM when "
                   "configured, else GrabCut)")
    p.add_argument("--min-mask-confidence", type=float, default=0.85, dest="min_mask_confidence",
                   help="frames whose one-click mask agrees less (IoU) with the other views are left out (0.85)")
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
