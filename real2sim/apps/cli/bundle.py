"""Bundle commands: ``real2sim check``, ``add-object`` and ``add-task``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from real2sim.apps.cli.console import say
from real2sim.core.bundle import Bundle
from real2sim.core.errors import BundleError, ManifestError
from real2sim.core.manifest import FieldReader, Manifest, TaskSpec
from real2sim.pipeline.check import check_bundle
from real2sim.pipeline.recipe import add_object


def cmd_check(args) -> int:
    root = Path(args.dir)
    if not (root / "scene.json").is_file():  # nothing to check: a wrong path, not a broken bundle
        raise BundleError(f"{root}: not a bundle (no scene.json); give a bundle folder made by 'real2sim init' or "
                          "'real2sim demo --out DIR'")
    findings = check_bundle(root, load_meshes=not args.quick)
    for f in findings:
        say(("[red]" if f.level == "error" else "[yellow]") + str(f), markup=True)
    errors = sum(f.level == "error" for f in findings)
    say(f"{args.dir}: {errors} error(s), {len(findings) - errors} warning(s)")
    return 1 if errors else 0


def _numbers(text: str, flag: str, counts: tuple[int, ...], example: str) -> list[float]:
    """Comma-separated finite numbers given to ``flag`` (one of ``counts`` many), or bad input naming the flag."""
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) not in counts or not np.isfinite(vals).all():
        raise BundleError(f"{flag} {text!r}: expected {' or '.join(map(str, counts))} comma-separated numbers, e.g. "
                          f"{flag} {example} (negative numbers work: {flag} -0.08,0,0 or {flag}=-0.08,0,0)")
    return vals


def orientation_wxyz(text: str) -> list[float]:
    """``--orientation``: 4 numbers = quaternion w,x,y,z (normalised); 3 numbers = roll,pitch,yaw in degrees
    (extrinsic X, Y, Z: R = Rz Ry Rx)."""
    from real2sim.core.geometry import euler_xyz_to_matrix, matrix_to_quat_wxyz

    vals = _numbers(text, "--orientation", (3, 4), "1,0,0,0 (quaternion w,x,y,z) or 0,0,90 (roll,pitch,yaw degrees)")
    if len(vals) == 3:
        return [float(x) for x in matrix_to_quat_wxyz(euler_xyz_to_matrix(*np.radians(vals)))]
    q = np.asarray(vals, float)
    if np.linalg.norm(q) < 1e-9:
        raise BundleError(f"--orientation {text!r}: a zero quaternion is no rotation; give w,x,y,z with w=1 for none")
    return [float(x) for x in q / np.linalg.norm(q)]


def cmd_add_object(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    props = {k: getattr(args, k) for k in ("density", "mass", "friction") if getattr(args, k) is not None}
    if args.fixed:
        props["fixed"] = True
    position = _numbers(args.position, "--position", (3,), "0.1,-0.05,0.02") if args.position else None
    quat = orientation_wxyz(args.orientation) if args.orientation else (1.0, 0.0, 0.0, 0.0)
    if sum(bool(x) for x in (args.mesh, args.scan, args.urdf)) != 1:
        raise BundleError("add-object: give exactly one of --mesh FILE, --scan OBJECT_DIR (from 'real2sim scan') or "
                          "--urdf FILE (an articulated object)")
    if not args.urdf and (args.joints or args.joint_damping or args.joint_friction or args.free):
        raise BundleError("add-object: --joints, --joint-damping, --joint-friction and --free go with --urdf")
    if args.urdf:
        from real2sim.pipeline.articulated import add_articulated_object, parse_joint_values

        if args.texture or args.mass is not None:
            raise BundleError("add-object --urdf: --texture and --mass do not apply (colours and link masses come from "
                              "the URDF, or from its geometry at --density)")
        props.pop("fixed", None)

        def per_joint(text, flag):
            if not text:
                return None
            try:
                return float(text)
            except ValueError:
                return parse_joint_values(text, flag)

        obj = add_articulated_object(bundle, args.id, Path(args.urdf), parse_joint_values(args.joints or ""), position,
                                     quat, damping=per_joint(args.joint_damping, "--joint-damping"),
                                     joint_friction=per_joint(args.joint_friction, "--joint-friction"),
                                     fixed=not args.free, **props)
        say(f"added articulated '{args.id}' at {obj.pose.position}: joints {obj.articulation.joint_positions}; "
            f"next: real2sim export {args.dir}")
        return 0
    if args.scan:
        from real2sim.pipeline.scan import add_scanned_object

        if args.texture:
            raise BundleError("add-object: --texture goes with --mesh; a scan brings its own texture")
        obj = add_scanned_object(bundle, args.id, Path(args.scan), position, quat, **props)
    else:
        obj = add_object(bundle, args.id, Path(args.mesh), Path(args.texture) if args.texture else None, position,
                         quat, **props)
    say(f"added '{args.id}' at {obj.pose.position} ({obj.visual.mesh}); "
        f"next: real2sim masks {args.dir} --entity {args.id} --point X,Y, then real2sim build {args.dir}")
    return 0


def cmd_set_joints(args) -> int:
    from real2sim.pipeline.articulated import parse_joint_values, set_object_joints, set_robot_joints

    bundle = Bundle.load(Path(args.dir))
    values = parse_joint_values(args.joints, "joints")
    if args.id == "robot" and "robot" not in bundle.manifest.objects:
        q = set_robot_joints(bundle, values)
        say(f"robot start joints: {[round(x, 6) for x in q]}; next: real2sim export {args.dir}")
        return 0
    q = set_object_joints(bundle, args.id, values)
    say(f"'{args.id}' joints: {q}; next: real2sim export {args.dir}")
    return 0


def cmd_add_task(args) -> int:
    bundle = Bundle.load(Path(args.dir))
    try:
        success = json.loads(args.success)
        init = json.loads(args.init) if args.init else {}
    except json.JSONDecodeError as exc:
        raise ManifestError("add-task", "--success/--init", f"is not valid JSON ({exc})",
                            'quote it, e.g. --success \'{"type": "lifted", "object": "cube", "height": 0.04}\'') from exc
    spec = TaskSpec.parse(FieldReader("add-task"), {"instruction": args.instruction, "success": success,
                          "time_limit_s": args.time_limit, "init": init}, f"tasks.{args.id}")
    for oid in _objects_named(success):
        bundle.object(oid)  # unknown object ids suggest close ones
    bundle.manifest.tasks[args.id] = spec
    Manifest.from_dict(bundle.manifest.to_dict(), "add-task")  # joints of articulated objects: refused before saving
    bundle.save()
    say(f"task '{args.id}' added: {args.instruction!r}; evaluate with: real2sim eval {args.dir} --task {args.id} "
        "--policy scripted")
    return 0


def _objects_named(pred: dict) -> list[str]:
    names = [pred[k] for k in ("object", "support", "container", "target") if isinstance(pred.get(k), str)]
    for t in pred.get("terms", []):
        names += _objects_named(t)
    return names


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("check", help="validate a scene bundle")
    p.add_argument("dir")
    p.add_argument("--quick", action="store_true", help="do not load meshes")
    p.set_defaults(fn=cmd_check)

    p = subparsers.add_parser("add-object", help="add an object (a mesh, optionally textured) to a bundle")
    p.add_argument("dir")
    p.add_argument("id", help="object id ([A-Za-z0-9_-])")
    p.add_argument("--scan", help="an object folder made by 'real2sim scan' (mesh, texture, mass, collision pieces)")
    p.add_argument("--mesh", help="OBJ, DAE, GLB/GLTF, PLY or STL, in metres; its embedded texture "
                   "and UVs are kept (the bundle stores it as visual.obj + texture.png, which every engine reads)")
    p.add_argument("--texture", help="texture image for the mesh's UVs (overrides a texture the mesh embeds)")
    p.add_argument("--position", help="x,y,z in metres, e.g. --position -0.08,0,0 (default: x = y = 0, the world "
                   "origin, where the robot's base usually stands, resting on the table height; alignment then moves "
                   "it to its masks)")
    p.add_argument("--orientation", help="quaternion w,x,y,z (4 numbers) or roll,pitch,yaw in degrees (3 numbers, "
                   "extrinsic X-Y-Z), e.g. --orientation 0,0,90 (default: as the mesh is)")
    p.add_argument("--density", type=float, help="kg/m^3 (default 1000)")
    p.add_argument("--mass", type=float, help="kg (overrides density)")
    p.add_argument("--friction", type=float)
    p.add_argument("--fixed", action="store_true", help="static (e.g. a shelf)")
    p.add_argument("--urdf", help="an articulated object: a URDF whose links are joined by prismatic, revolute, "
                   "continuous or fixed joints (e.g. a cabinet with drawers); its root link is fixed to the world "
                   "unless --free")
    p.add_argument("--joints", help="with --urdf: start joint positions NAME=VALUE,... (m or rad; default 0), e.g. "
                   "--joints top_drawer_joint=0.2")
    p.add_argument("--joint-damping", help="with --urdf: viscous damping, one number for every joint or NAME=VALUE,... "
                   "(N s/m or N m s/rad; default: the URDF's <dynamics damping>)")
    p.add_argument("--joint-friction", help="with --urdf: Coulomb friction, one number or NAME=VALUE,... (N or N m; "
                   "default: the URDF's <dynamics friction>)")
    p.add_argument("--free", action="store_true", help="with --urdf: the root link is not fixed to the world")
    p.set_defaults(fn=cmd_add_object)

    p = subparsers.add_parser("set-joints", help="set joint positions of an articulated object (its posed mesh follows) "
                              "or the robot's start joints")
    p.add_argument("dir")
    p.add_argument("id", help="an object added with --urdf, or 'robot' for the robot's start joints")
    p.add_argument("joints", help="NAME=VALUE,... (m or rad), e.g. top_drawer_joint=0.25")
    p.set_defaults(fn=cmd_set_joints)

    p = subparsers.add_parser("add-task", help="add an evaluation task (instruction, success predicate, init)")
    p.add_argument("dir")
    p.add_argument("id")
    p.add_argument("--instruction", required=True, help="language instruction given to the policy")
    p.add_argument("--success", required=True,
                   help='JSON predicate, e.g. \'{"type": "lifted", "object": "cube", "height": 0.04}\'')
    p.add_argument("--init", help='JSON randomisation, e.g. \'{"objects": {"cube": {"xy": [[0.1, -0.1], [0.15, -0.05]]}}}\'')
    p.add_argument("--time-limit", type=float, default=TaskSpec.time_limit_s, dest="time_limit",
                   help=f"seconds (default {TaskSpec.time_limit_s})")
    p.set_defaults(fn=cmd_add_task)
