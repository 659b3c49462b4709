"""CLI handlers of the capture stage: ``real2sim init`` and ``real2sim plate``.

Wire them with ``real2sim.apps.cli.capture.add_parsers(subparsers)``; each handler takes the parsed namespace and returns an
exit code (errors are :class:`real2sim.core.errors.Real2SimError`, printed by the main CLI).
"""
from __future__ import annotations

import logging
from pathlib import Path

from real2sim.apps.cli.console import ACCEPT_POOR_HELP, console, gate_exit
from real2sim.apps.cli.options import add_config_options, config_from_args
from real2sim.capture.calibrate import calibrate_extrinsics, calibrate_intrinsics, calibrate_marker, marker_pose_flat
from real2sim.capture.frames import read_frames
from real2sim.capture.plate import PlateConfig, make_plate
from real2sim.capture.table import table_stage
from real2sim.capture.table_board import CharucoSpec, TableConfig
from real2sim.core.bundle import Bundle
from real2sim.core.errors import CaptureError
from real2sim.core.imaging import image_files, read_mask, write_gray, write_rgb
from real2sim.pipeline.capture import capture_scene

log = logging.getLogger(__name__)


def cmd_init(args) -> int:

    summary = capture_scene(Path(args.dir), args.frames, camera=args.camera, points=getattr(args, "points", None),
                            prompts=getattr(args, "prompts", None), robot=args.robot,
                            backend=getattr(args, "backend", "auto"), propagate=not getattr(args, "no_propagate", False),
                            plate=not getattr(args, "no_plate", False), overwrite=getattr(args, "force", False),
                            name=getattr(args, "name", None), stride=getattr(args, "stride", None),
                            max_frames=getattr(args, "max_frames", None), episode=getattr(args, "episode", 0))
    _print_capture_summary(console(), Path(args.dir), summary)
    return 0


def _print_capture_summary(con, root: Path, s: dict) -> None:

    b = Bundle.load(root)
    con.print(f"{root}: {b.manifest.stages['capture'].message}", highlight=False)
    if "main" not in b.manifest.cameras:
        con.print("[yellow]no camera file given: add one with --camera camera.json (see docs/capture.md)[/yellow]")
    if "calibration" in s:
        cal = s["calibration"]
        con.print(f"camera pose from {cal['points']} clicked points: RMS {cal['rms_px']:.2f} px, max {cal['max_px']:.2f} px",
                  highlight=False)
        if cal["max_px"] > 5:
            con.print("[yellow]a point reprojects more than 5 px off: check the clicks and the world coordinates[/yellow]")
    for ent, e in s.get("masks", {}).get("entities", {}).items():
        states = ", ".join(f"{k} {v}" for k, v in e["states"].items())
        con.print(f"mask '{ent}': {states} (frames); {e['area_px_min']}-{e['area_px_max']} px", highlight=False)
        if e["flagged_frames"]:
            con.print(f"[yellow]'{ent}' lost in frames {e['flagged_frames']}: prompt it again on one of them[/yellow]")
    if "robot" in s.get("masks", {}):
        con.print(_robot_line(s["masks"]["robot"]), highlight=False)
    if "plate" in s:
        p = s["plate"]
        con.print(f"plate: {p['coverage_many']:.1%} seen in many frames, {p['coverage_few']:.1%} in few, "
                  f"{p['inpainted_fraction']:.1%} inpainted", highlight=False)
        for w in p.get("warnings", []):
            con.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    masks = s.get("masks", {})
    found = [masks.get("picture"), masks.get("robot", {}).get("picture"), s.get("plate", {}).get("picture")]
    pics = [f"{root / 'reports' / 'capture.png'}"] + [str(root / p) for p in found if p]
    con.print("pictures: " + ", ".join(pics), highlight=False)
    con.print(f"numbers: {root / s['report']}", highlight=False)


def _robot_line(r: dict) -> str:
    """'robot: by its model, silhouette IoU 0.77 (the first fit, 0.69, missed the gate: fitted again against the
    plate)' and the like."""
    line = f"robot: by {r['method']}"
    if r.get("iou_fitted") is not None:
        line += f", silhouette IoU {r['iou_fitted']:.2f} (mean over frames)"
        if not r.get("applied", True):
            line += " [yellow]under the quality gate: joints and masks not applied[/yellow]"
    if r.get("first_fit_iou") is not None:
        line += f"; the first fit ({r['first_fit_iou']:.2f}) missed the gate: fitted again against the plate"
    return line


def _read_mask_dir(masks_dir: Path, n: int, shape, names: list[str]):
    import numpy as np

    files = image_files(masks_dir)
    by_stem = {p.stem: p for p in files}
    out = np.zeros((n,) + tuple(shape), bool)
    if names and all(Path(nm).stem in by_stem for nm in names):
        chosen = [by_stem[Path(nm).stem] for nm in names]
    elif len(files) == n:
        chosen = files
    else:
        raise CaptureError(f"{masks_dir}: {len(files)} mask images for {n} frames; give one mask per frame (same file "
                           "names as the frames, or as many masks as frames in name order), white = foreground")
    for i, p in enumerate(chosen):
        out[i] = read_mask(p, shape)
    return out, [str(p) for p in chosen]


def cmd_plate(args) -> int:

    src = read_frames(args.frames)
    masks, names = None, None
    if args.masks:
        masks, names = _read_mask_dir(Path(args.masks), len(src.frames), src.frames.shape[1:3], src.names)
    cfg = config_from_args(PlateConfig, args)
    plate, conf, rep = make_plate(src.frames, masks, cfg, mask_names=names, frame_names=src.names)
    write_rgb(Path(args.out), plate)
    if args.confidence:
        write_gray(Path(args.confidence), conf)
    console().print(f"{args.out}: plate from {rep['frames_used']} frames in {rep['seconds']:.2f} s; "
                    f"{rep['coverage_many']:.1%} seen in many frames, {rep['coverage_few']:.1%} in few, "
                    f"{rep['inpainted_fraction']:.1%} inpainted ({rep['inpaint_method']})")
    for w in rep["warnings"]:
        console().print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    return 0


def _pattern(text: str) -> tuple[int, int]:
    import argparse

    try:
        a, b = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected inner corners as COLSxROWS (e.g. 9x6), got {text!r}") from None
    return a, b


def _marker_at(text: str) -> tuple[float, ...]:
    import argparse

    try:
        v = tuple(float(x) for x in text.split(","))
    except ValueError:
        v = ()
    if len(v) not in (3, 4) or not all(abs(x) < float("inf") for x in v):
        raise argparse.ArgumentTypeError(f"expected the marker centre X,Y,Z in metres and optionally its yaw in degrees "
                                         f"(X,Y,Z[,YAW_DEG], e.g. 0.3,0.1,0.0,90), got {text!r}")
    return v


def cmd_calibrate(args) -> int:

    marker = getattr(args, "marker", None)
    if marker:
        missing = [f for f, v in (("--marker-id", args.marker_id), ("--marker-size", args.marker_size),
                                  ("--marker-at", args.marker_at)) if v is None]
        if missing:
            raise CaptureError(f"--marker {marker} needs {', '.join(missing)}: the marker's id, the side of its black "
                               "square in metres and its centre X,Y,Z[,YAW_DEG] in the world (see docs/capture.md)")
        if args.points:
            raise CaptureError("give either --points (clicked pairs) or --marker for the camera pose, not both")
    bundle = Bundle.load(Path(args.dir))
    con = console()
    if args.checkerboard:
        rep = calibrate_intrinsics(bundle, Path(args.checkerboard), args.pattern, args.square, args.camera)
        con.print(f"intrinsics from {rep['images']} checkerboard images: RMS {rep['rms_px']:.3f} px")
    if args.points:
        rep = calibrate_extrinsics(bundle, Path(args.points), args.camera)
        con.print(f"camera pose from {rep['points']} points: RMS {rep['rms_px']:.2f} px, max {rep['max_px']:.2f} px"
                  + (f"; picture {rep['picture']}" if "picture" in rep else ""))
        if rep["max_px"] > 5:
            con.print("[yellow]a point reprojects more than 5 px off: check the clicks and the world coordinates[/yellow]")
    if marker:
        _calibrate_marker(con, bundle, args)
    return 0


def _calibrate_marker(con, bundle, args) -> None:

    quiet = logging.getLogger("real2sim.capture.calibrate")  # its warnings are printed below
    level = quiet.level
    quiet.setLevel(max(level, logging.ERROR))
    try:
        rep = calibrate_marker(bundle, Path(args.marker), args.marker_id, args.marker_size,
                               marker_pose_flat(*args.marker_at), args.camera, args.marker_dictionary)
    finally:
        quiet.setLevel(level)
    x, y, z = rep["camera_position"]
    con.print(f"camera pose from {rep['dictionary']} marker {rep['marker_id']} ({rep['side_px']:.0f} px across, "
              f"{rep['distance_m']:.2f} m away): RMS {rep['rms_px']:.2f} px; camera at ({x:+.3f}, {y:+.3f}, {z:+.3f}) m, "
              f"moved {rep['change_m'] * 1e3:.1f} mm / {rep['change_deg']:.2f} deg", highlight=False)
    for w in rep["warnings"]:
        con.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    con.print(f"picture: {bundle.root / rep['picture']}", highlight=False)


def cmd_table(args) -> int:
    import json


    bundle = Bundle.load(Path(args.dir))
    charuco = None
    if args.charuco:
        if not args.marker:
            raise CaptureError("--charuco needs --marker (the side of an ArUco marker in metres) and --square")
        charuco = CharucoSpec(args.charuco, args.square, args.marker, args.dictionary)
    objects = [s.strip() for s in args.objects.split(",") if s.strip()] if args.objects else None
    method = "board" if (args.board or charuco) else "objects"
    quiet = [logging.getLogger(n) for n in ("real2sim.capture.table_board", "real2sim.capture.table")]  # warnings are printed below
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(max(q.level, logging.ERROR))
    try:
        _, ran = table_stage(bundle, method, objects=objects, board=args.board, pattern=args.pattern,
                             square=args.square, charuco=charuco, camera=args.camera,
                             config=config_from_args(TableConfig, args), force=args.force,
                             accept_poor=args.accept_poor)
    finally:
        for q, lv in zip(quiet, levels):
            q.setLevel(lv)
    con = console()
    rep = json.loads(bundle.path("reports/table.json").read_text())
    if not ran:
        con.print(f"{bundle.root}: table stage unchanged (same inputs and table height); --force re-runs it")
    kept = "" if rep.get("applied", True) else " (not applied: table_height stays)"
    con.print(f"table_height {rep['height_m'] * 1e3:+.1f} mm{kept} (was {rep['previous_height_m'] * 1e3:+.1f} mm) from "
              f"{rep['method']}; tilt {rep['tilt_deg']:.2f} deg; spread {rep['spread_m'] * 1e3:.1f} mm"
              + (f"; reprojection {rep['rms_px']:.2f} px RMS" if rep["method"] == "board" else ""), highlight=False)
    if rep["method"] == "objects":
        con.print("bottoms: " + ", ".join(
            f"{k} not aligned" if v["bottom_m"] is None else
            f"{k} {v['bottom_m'] * 1e3:+.1f} mm" + ("" if v["used"] else " (left out)")
            for k, v in rep["sources"].items()), highlight=False)
    t = rep["table_object"]
    if t.get("moved"):
        con.print(f"object 'table' moved {t['dz_m'] * 1e3:+.1f} mm (its top follows the table height)", highlight=False)
    elif "top_m" in t or not rep.get("applied", True):
        con.print(f"[yellow]object 'table' not moved:[/yellow] {t['why']}", highlight=False)
    for w in rep["warnings"]:
        con.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    con.print(f"picture: {bundle.root / rep['picture']}")
    return gate_exit(bundle, "table")


def add_parsers(subparsers) -> None:
    """Register ``init`` and ``plate`` on an argparse subparsers object."""
    p = subparsers.add_parser("init", help="create a bundle from frames (image folder, video, LeRobot episode)")
    p.add_argument("dir", help="bundle directory to create")
    p.add_argument("--frames", required=True, help="image folder, video file, or LeRobot dataset root / episode parquet")
    p.add_argument("--camera", help="camera.json: intrinsics + extrinsics (see docs/capture.md)")
    p.add_argument("--robot", help="robot in the scene: a registry name (e.g. widowx, panda) or a robot definition "
                   "file (.toml/.json/.yaml, docs/robots.md; copied into the bundle); base at the world origin")
    p.add_argument("--name", help="scene name (default: the directory name)")
    p.add_argument("--stride", type=int, default=None,
                   help="keep every N-th frame (default: 1; a clip of more than 300 frames is thinned to 300 or fewer)")
    p.add_argument("--max-frames", type=int, default=None, dest="max_frames")
    p.add_argument("--episode", type=int, default=0, help="LeRobot episode index")
    p.add_argument("--force", action="store_true", help="re-initialise the capture of an existing bundle")
    p.add_argument("--points", help="JSON of >= 4 clicked pixel <-> world pairs: the camera pose by PnP (needs --camera)")
    p.add_argument("--prompts", help="JSON {entity: {\"points\": [[x, y]], \"box\": [x0, y0, x1, y1], \"frame\": 0}}: "
                                     "masks from one prompt each, propagated over the clip")
    p.add_argument("--backend", default="auto", choices=["auto", "difference", "grabcut", "sam"],
                   help="segmentation backend for --prompts (auto: grabcut, as there is no plate yet)")
    p.add_argument("--no-propagate", action="store_true", dest="no_propagate",
                   help="masks on the prompted frames only")
    p.add_argument("--no-plate", action="store_true", dest="no_plate",
                   help="do not make the background plate now (real2sim build makes it)")
    p.set_defaults(fn=cmd_init)
    p = subparsers.add_parser("calibrate", help="set a bundle camera: pose from clicked points (PnP) or an ArUco marker, "
                                                "intrinsics from a checkerboard")
    p.add_argument("dir", help="bundle directory")
    p.add_argument("--points", help="JSON of >= 4 pixel <-> world pairs (see docs/capture.md)")
    p.add_argument("--marker", help="image, by the bundle camera, of an ArUco marker lying flat at --marker-at: the pose")
    p.add_argument("--marker-id", type=int, dest="marker_id", help="id of that marker")
    p.add_argument("--marker-size", type=float, dest="marker_size", help="side of the marker's black square in metres")
    p.add_argument("--marker-at", type=_marker_at, dest="marker_at", metavar="X,Y,Z[,YAW_DEG]",
                   help="world position (m) of the marker centre, face up; YAW: its +X axis from world +X about +Z")
    p.add_argument("--marker-dictionary", default="DICT_4X4_50", dest="marker_dictionary",
                   help="OpenCV ArUco dictionary of the marker (default DICT_4X4_50)")
    p.add_argument("--checkerboard", help="folder of checkerboard images for the intrinsics")
    p.add_argument("--pattern", type=_pattern, default=(9, 6), help="inner corners COLSxROWS (default 9x6)")
    p.add_argument("--square", type=float, default=0.025, help="checkerboard square size in metres")
    p.add_argument("--camera", default="main", help="bundle camera name")
    p.set_defaults(fn=cmd_calibrate)

    p = subparsers.add_parser("plate", help="background plate from frames of a fixed camera")
    p.add_argument("--frames", required=True, help="video file or folder of frames")
    p.add_argument("--masks", help="folder of foreground masks, one per frame (white = not background)")
    p.add_argument("--out", required=True, help="plate PNG to write")
    p.add_argument("--confidence", help="confidence PNG to write (255 many frames, 128 few, 0 inpainted)")
    add_config_options(p, PlateConfig, only=("inpaint", "reference_frame", "max_frames", "many_frames", "seed"),
                       choices={"inpaint": ["auto", "telea", "ns", "patchmatch"]})
    p.set_defaults(fn=cmd_plate)

    p = subparsers.add_parser("table", help="table height (and tilt) from the objects resting on it or a board lying on it")
    p.add_argument("dir", help="bundle directory")
    p.add_argument("--board", help="image (by the bundle camera) of a checkerboard lying flat on the table")
    p.add_argument("--pattern", type=_pattern, default=(9, 6), help="checkerboard inner corners COLSxROWS (default 9x6)")
    p.add_argument("--square", type=float, default=0.025, help="board square size in metres (default 0.025)")
    p.add_argument("--charuco", type=_pattern, help="a ChArUco board of COLSxROWS squares instead of a checkerboard")
    p.add_argument("--marker", type=float, help="ChArUco marker side in metres")
    p.add_argument("--dictionary", default="DICT_5X5_100", help="ChArUco ArUco dictionary (default DICT_5X5_100)")
    add_config_options(p, TableConfig, only=("board_thickness_m", "max_spread_m", "max_tilt_deg", "require_converged",
                                             "grid_step_m"), flags={"board_thickness_m": "--thickness"})
    p.add_argument("--objects", help="object ids resting on the table, comma-separated (default: every masked object)")
    p.add_argument("--camera", default="main", help="bundle camera that took the board image (default main)")
    p.add_argument("--force", action="store_true", help="re-run even when nothing changed")
    p.add_argument("--accept-poor", action="store_true", help=ACCEPT_POOR_HELP)
    p.set_defaults(fn=cmd_table)
