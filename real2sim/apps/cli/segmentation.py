"""CLI handler of ``real2sim segment``; wire it with ``real2sim.apps.cli.segmentation.add_parsers(subparsers)``."""
from __future__ import annotations

from pathlib import Path

from real2sim.apps.cli.console import console
from real2sim.apps.cli.options import pixel_box, pixel_point
from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.errors import ImageError, SegmentationError
from real2sim.core.imaging import read_rgb
from real2sim.segmentation import BACKENDS, Prompt, SamBackend, segment
from real2sim.segmentation.robot_fit import check_robot_prompt
from real2sim.segmentation.stage import segment_stage


def _read_rgb(path: Path, what: str):

    try:
        return read_rgb(path)
    except ImageError as exc:
        raise SegmentationError(f"cannot read the {what}: {exc}") from exc


def cmd_segment(args) -> int:
    import io
    import time

    import numpy as np
    from PIL import Image

    image = _read_rgb(Path(args.image), "image")
    plate = _read_rgb(Path(args.plate), "plate") if args.plate else None
    pts = list(args.point or []) + list(args.negative or [])
    labels = [1] * len(args.point or []) + [0] * len(args.negative or [])
    prompt = Prompt(pts, labels, args.box)
    backend = args.backend
    if backend == "sam" and getattr(args, "sam_checkpoint", None):
        BACKENDS["sam"] = SamBackend(args.sam_checkpoint, args.sam_model)
    t0 = time.perf_counter()
    mask = segment(image, prompt, plate=plate, backend=backend)
    dt = time.perf_counter() - t0
    buf = io.BytesIO()
    Image.fromarray(np.where(mask, 255, 0).astype(np.uint8), mode="L").save(buf, format="PNG")
    atomic_write_bytes(Path(args.out), buf.getvalue())
    console().print(f"{args.out}: {int(mask.sum())} px ({mask.mean():.2%} of the image) in {dt:.2f} s")
    return 0 if mask.any() else 1


def cmd_masks(args) -> int:
    import json


    bundle = Bundle.load(Path(args.dir))
    stored = bundle.root / "masks" / "prompts.json"
    prompts = json.loads(stored.read_text()) if stored.is_file() else {}  # earlier entities are kept and re-used
    known = [*bundle.manifest.objects, *prompts]
    if args.entity not in known and not check_robot_prompt(bundle, args.entity):
        choices = sorted(set(known)) + (["robot"] if bundle.manifest.robot else [])
        raise SegmentationError(f"unknown entity '{args.entity}' in {bundle.root}; entities: {', '.join(choices) or '(none)'}. "
                                f"Prompt one of those, or add the object first ('real2sim add-object {args.dir} {args.entity} "
                                "--mesh MESH')")
    pts = list(args.point or []) + list(args.negative or [])
    labels = [1] * len(args.point or []) + [0] * len(args.negative or [])
    prompts[args.entity] = {"frame": args.frame, "prompt": Prompt(pts, labels, args.box).to_dict(),
                            "propagate": not args.no_propagate}  # earlier entities keep their own choice
    rec, _ = segment_stage(bundle, prompts, backend=args.backend)
    con = console()
    con.print(f"{rec.message}; masks recorded in {bundle.root / 'scene.json'} (capture.masks)")
    con.print(f"contact sheet: {bundle.root / 'reports' / 'segment.png'}")
    if rec.metrics.get("flagged_frames"):
        con.print(f"[yellow]{rec.metrics['flagged_frames']} frame mask(s) lost by propagation: see reports/segment.json "
                  "and prompt the entity again on one of those frames[/yellow]")
    return 0


def add_parsers(subparsers) -> None:
    """Register ``segment`` on an argparse subparsers object."""
    p = subparsers.add_parser("segment", help="mask of an object in one image from clicks or a box")
    p.add_argument("--image", required=True, help="image (PNG/JPEG)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--point", type=pixel_point, nargs="+", metavar="X,Y", help="click(s) on the object, pixels")
    g.add_argument("--box", type=pixel_box, metavar="X0,Y0,X1,Y1", help="box around the object, pixels")
    p.add_argument("--negative", type=pixel_point, nargs="+", metavar="X,Y", help="click(s) on background")
    p.add_argument("--plate", help="background plate of the same camera (enables the 'difference' backend)")
    p.add_argument("--backend", default="auto", choices=["auto", "difference", "grabcut", "sam"],
                   help="auto = difference with a plate, else grabcut")
    p.add_argument("--sam-checkpoint", dest="sam_checkpoint", help="SAM .pth checkpoint (or env REAL2SIM_SAM_CHECKPOINT)")
    p.add_argument("--sam-model", dest="sam_model", default="vit_b", choices=["vit_b", "vit_l", "vit_h"])
    p.add_argument("--out", required=True, help="mask PNG to write (0/255)")
    p.set_defaults(fn=cmd_segment)

    p = subparsers.add_parser("masks", help="segment an entity in a bundle's frames (and propagate to the others)")
    p.add_argument("dir", help="bundle directory")
    p.add_argument("--entity", required=True, help="object id (or 'robot'); becomes masks/<frame>/<entity>.png")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--point", type=pixel_point, nargs="+", metavar="X,Y", help="click(s) on the entity, pixels")
    g.add_argument("--box", type=pixel_box, metavar="X0,Y0,X1,Y1", help="box around the entity, pixels")
    p.add_argument("--negative", type=pixel_point, nargs="+", metavar="X,Y", help="click(s) on background")
    p.add_argument("--frame", type=int, default=0, help="frame the clicks refer to")
    p.add_argument("--backend", default="auto", choices=["auto", "difference", "grabcut", "sam"])
    p.add_argument("--no-propagate", action="store_true", dest="no_propagate",
                   help="mask only the prompted frame (propagation can drift when the robot occludes the entity)")
    p.set_defaults(fn=cmd_masks)
