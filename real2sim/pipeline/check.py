"""``real2sim check DIR``: validate a bundle the way Gymnasium's ``check_env`` checks an env.

Each check yields findings with a level ('error' breaks the bundle, 'warning' degrades
it) and a message that names the field or file and the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError
from real2sim.core.manifest import MASK_STATES_AT_POSE
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import poor_line


@dataclass(frozen=True)
class Finding:
    level: str  # "error" | "warning"
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.level.upper():7s} {self.where}: {self.message}"


def check_bundle(root: Path, load_meshes: bool = True) -> list[Finding]:
    """All problems found in the bundle at ``root`` (empty list = valid)."""
    try:
        bundle = Bundle.load(root)
    except Real2SimError as exc:
        return [Finding("error", str(Path(root) / "scene.json"), str(exc))]
    out: list[Finding] = []
    m = bundle.manifest
    for oid, obj in m.objects.items():
        out += _check_object(bundle, oid, obj, load_meshes)
    for name, spec in m.cameras.items():
        out += _check_camera(bundle, name, spec)
    for name, rec in m.stages.items():
        for rel in rec.outputs:
            problem = file_problem(bundle, rel, must_be_file=False)
            if problem:
                out.append(Finding("error", f"stages.{name}.outputs", f"{problem}; re-run the stage with 'real2sim build'"))
        if rec.status == "failed":  # a failed export leaves exports older than the scene: evaluating them misleads
            out.append(Finding("error" if name == "export" else "warning", f"stages.{name}", f"last run failed: {rec.message}"))
        elif rec.status == "poor":  # a fit below its quality gate: applied anyway, or refused (the bundle kept the old)
            out.append(Finding("warning", f"stages.{name}", f"poor: {poor_line(bundle, name)}; "
                               + ("the twin uses this result: check the report picture" if rec.metrics.get("applied")
                                  else "fix its input (masks, camera, prompt) and re-run the stage")))
        elif rec.status == "stale":
            out.append(Finding("warning", f"stages.{name}", f"is stale (an input changed); {_rerun_hint(name)}"))
    if not any(not o.fixed for o in m.objects.values()):
        out.append(Finding("warning", "objects", "no dynamic objects: nothing will move in simulation"))
    out += _check_capture_files(bundle)
    out += _check_masks(bundle)
    for link, d in sorted((m.robot.textures if m.robot is not None else {}).items()):
        for k in ("mesh", "texture"):
            problem = file_problem(bundle, d[k])
            if problem:
                out.append(Finding("error", f"robot.textures.{link}.{k}", f"{problem}; re-run 'real2sim robot-appearance "
                                   f"{bundle.root}' (or remove robot.textures.{link} to use the flat colour)"))
    for oid, why in poor_alignments(bundle).items():
        out.append(Finding("warning", f"objects.{oid}.pose", f"alignment is poor: {why}; the pose was kept. Fix the "
                           f"mask or the pose in 'real2sim review {bundle.root}', then 'real2sim align'"))
    return out


# stages 'real2sim build' does not run, and the command that does
OWN_COMMAND = {"capture": "init", "segment": "masks", "robot_masks": "robot-masks", "camera_refine": "refine-camera",
               "table": "table", "robot_appearance": "robot-appearance", "export": "export"}


def _rerun_hint(stage: str) -> str:
    """How to bring a stale stage up to date: 'real2sim build' re-runs only its own steps (a segmentation made stale
    by the plate the build made again used to be told to re-run build, which never re-segments)."""
    from real2sim.pipeline import BUILD_STEPS

    if stage in {s.name for s in BUILD_STEPS}:
        return "re-run 'real2sim build' (then 'real2sim export')"
    cmd = OWN_COMMAND.get(stage)
    if cmd == "export":
        return "re-run 'real2sim export'"
    if cmd is None:
        return f"re-run the '{stage}' stage"
    return f"'real2sim build' does not re-run it: re-run 'real2sim {cmd}' if its result should change"


def poor_alignments(bundle: Bundle) -> dict[str, str]:
    """``{object id: why}`` for objects whose last alignment (``reports/alignment.json``) was 'poor' or failed, while
    the alignment stage is current (a stale report says nothing about the present bundle)."""
    import json

    rec = bundle.manifest.stages.get("alignment")
    p = bundle.root / "reports" / "alignment.json"
    if rec is None or rec.status == "stale" or not p.is_file():
        return {}
    try:
        objects = json.loads(p.read_text()).get("objects", {})
    except (OSError, ValueError):
        return {}
    out = {}
    for oid, r in objects.items():
        if oid in bundle.manifest.objects and r.get("status") in ("poor", "failed", "not converged"):
            num = f"silhouette IoU {r['mean_iou']:.3f}, " if "mean_iou" in r else ""
            out[oid] = f"{r['status']} ({num}{r.get('message') or r.get('error', '')})"
    return out


def file_problem(bundle: Bundle, rel: str, must_be_file: bool = True) -> str | None:
    """Why the bundle path ``rel`` cannot be read (leaves the bundle, missing, not a file), or None."""
    try:
        p = bundle.path(rel)
        ok = p.is_file() if must_be_file else p.exists()
    except Real2SimError as exc:
        return str(exc)
    except OSError as exc:
        return f"'{rel}' cannot be read ({exc.strerror or exc})"
    return None if ok else f"'{rel}' is missing"


def _check_capture_files(bundle: Bundle) -> list[Finding]:
    """Every frame, the plate and its confidence map exist inside the bundle."""
    cap, out = bundle.manifest.capture, []
    files = [(f"capture.frames[{i}].image", f.image, "re-import the frames with 'real2sim init' or remove the entry")
             for i, f in enumerate(cap.frames)]
    files += [(f"capture.{k}", getattr(cap, k), f"rebuild it with 'real2sim plate {bundle.root}' or set it to null")
              for k in ("plate", "plate_confidence")]
    for where, rel, fix in files:
        problem = rel is not None and file_problem(bundle, rel)
        if problem:
            out.append(Finding("error", where, f"{problem}; {fix}"))
    return out


def _check_masks(bundle: Bundle) -> list[Finding]:
    """Mask files exist, states belong to masks, and every masked object has a frame at its scene pose."""

    cap, out = bundle.manifest.capture, []
    for key, ents in cap.masks.items():
        for ent, rel in ents.items():
            problem = file_problem(bundle, rel)
            if problem:
                out.append(Finding("error", f"capture.masks.{key}.{ent}", f"{problem}; segment '{ent}' again "
                                   f"('real2sim masks {bundle.root} --entity {ent} ...') or remove the entry"))
    for key, ents in cap.mask_states.items():
        for ent in ents:
            if ent not in cap.masks.get(key, {}):
                out.append(Finding("warning", f"capture.mask_states.{key}.{ent}", "a state without a mask; remove "
                                   "it or segment the entity again"))
    for oid in bundle.manifest.objects:
        keys = [k for k, ents in cap.masks.items() if oid in ents]
        if keys and not any(cap.mask_state(k, oid) in MASK_STATES_AT_POSE for k in keys):
            out.append(Finding("warning", f"capture.masks (object '{oid}')", "no frame shows it at its scene pose "
                               "(every mask is occluded, moved or lost): alignment and texturing have nothing to use; "
                               "prompt it on a frame where it rests and is fully visible"))
    return out


def _check_object(bundle: Bundle, oid: str, obj, load_meshes: bool) -> list[Finding]:
    where = f"objects.{oid}"
    out = []
    files = [("visual.mesh", obj.visual.mesh), ("visual.texture", obj.visual.texture)]
    files += [(f"collision.hulls[{i}]", h) for i, h in enumerate(obj.collision.hulls)]
    if obj.articulation is not None:
        files.append(("articulation.urdf", obj.articulation.urdf))
    for field, rel in files:
        if rel is None:
            continue
        problem = file_problem(bundle, rel)
        if problem:
            out.append(Finding("error", f"{where}.{field}", f"{problem}; restore it or re-run the stage that writes it"))
    if obj.articulation is not None and not out:
        out += _check_articulation(bundle, where, obj)
    elif obj.visual.texture is None:
        out.append(Finding("warning", f"{where}.visual.texture", f"no texture; rendered with flat colour {obj.visual.rgba}"))
    if obj.collision.kind == "pending":
        out.append(Finding("warning", f"{where}.collision", "not computed yet; run 'real2sim build'"))
    if not obj.fixed and obj.inertial is None and obj.collision.kind not in ("pending", "urdf"):
        out.append(_missing_inertial(bundle, where))
    if obj.inertial is not None:
        ev = np.linalg.eigvalsh(np.array(obj.inertial.inertia))
        if ev[0] + ev[1] < ev[2] * (1 - 1e-6):
            out.append(Finding("error", f"{where}.inertial.inertia", "violates the triangle inequality (not a physical body)"))
    if load_meshes and not any(f.level == "error" for f in out):
        out += _check_meshes(bundle, where, obj)
    return out


def _missing_inertial(bundle: Bundle, where: str) -> Finding:
    """A dynamic object with collision shapes but no mass properties: a build stopped between its collision and
    inertial stages (a warning, like collision not computed yet), or an inertial stage that claims to be done
    without them (an error)."""
    rec = bundle.manifest.stages.get("inertial")
    if rec is None or rec.status != "done":
        return Finding("warning", f"{where}.inertial", "not computed yet (the build stopped before its inertial "
                       "stage); run 'real2sim build'")
    return Finding("error", f"{where}.inertial", "missing for a dynamic object; run 'real2sim build --force'")


def _check_articulation(bundle, where, obj) -> list[Finding]:
    """The packaged URDF parses, its meshes are there, and the manifest's joint names and values fit it."""
    from real2sim.core.articulation import ArticulatedModel

    art = obj.articulation
    try:
        model = ArticulatedModel.load(bundle.path(art.urdf))
        model.check_joint_values(art.joint_positions, f"{where}.articulation.joint_positions")
    except Real2SimError as exc:
        return [Finding("error", f"{where}.articulation", str(exc))]
    missing = sorted({j.name for j in model.movable_joints} - set(art.joint_positions))
    if missing:
        return [Finding("warning", f"{where}.articulation.joint_positions", f"has no position for {', '.join(missing)}; "
                        "they start at 0")]
    return []


def _check_meshes(bundle, where, obj) -> list[Finding]:

    out = []
    try:
        mesh = load_mesh(bundle.path(obj.visual.mesh))
    except Real2SimError as exc:
        return [Finding("error", f"{where}.visual.mesh", str(exc))]
    if obj.visual.texture and getattr(mesh.visual, "uv", None) is None:
        out.append(Finding("warning", f"{where}.visual.mesh", "has a texture but no UV coordinates; run the texture stage to unwrap it"))
    for i, rel in enumerate(obj.collision.hulls):
        try:
            hull = load_mesh(bundle.path(rel))
        except Real2SimError as exc:
            out.append(Finding("error", f"{where}.collision.hulls[{i}]", str(exc)))
            continue
        ch = hull.convex_hull
        if ch.volume > 0 and abs(hull.convex_hull.volume - abs(hull.volume)) / ch.volume > 0.02:
            out.append(Finding("warning", f"{where}.collision.hulls[{i}]", "is not convex; engines will use its convex hull"))
    return out


def _check_camera(bundle, name, spec) -> list[Finding]:
    cam = spec.camera()
    out = []
    where = f"cameras.{name}"
    if not (0 <= cam.cx < cam.width and 0 <= cam.cy < cam.height):
        out.append(Finding("error", f"{where}.K", f"principal point ({cam.cx}, {cam.cy}) lies outside the {cam.width}x{cam.height} image"))
    centres = np.array([o.pose.position for o in bundle.manifest.objects.values() if not o.fixed])
    if len(centres):
        depth = cam.depth_of(centres)
        uv = cam.project(centres)
        visible = (depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < cam.width) & (uv[:, 1] >= 0) & (uv[:, 1] < cam.height)
        if not visible.any():
            out.append(Finding("warning", f"{where}.T_world_camera", "no object centre is in view; check the camera pose (OpenCV axes: +Z forward, +Y down)"))
    return out
