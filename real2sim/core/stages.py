"""The stage graph and the stage runner.

Every stage is declared once, in :data:`GRAPH`: its name, the bundle artifacts it reads and the artifacts it
writes. What goes stale after what is derived from that: when a stage's outputs change (or an edit changes an
artifact), every stage that reads them, directly or through other stages, is marked stale. The pipeline walks the
same graph (:mod:`real2sim.pipeline`).

A stage runs as ``fn() -> (outputs, metrics, message)`` under :func:`run_stage`: an unchanged stage (same input
hash, outputs present, not stale) is skipped; a failed stage is recorded as 'failed' with its message and the
bundle keeps what it had.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

from real2sim.core.bundle import Bundle, content_hash, hash_file, hash_jsonable
from real2sim.core.errors import MeshError, Real2SimError, UnknownNameError
from real2sim.core.gates import POOR_APPLIED, POOR_NOT_APPLIED, failing
from real2sim.core.manifest import StageRecord
from real2sim.core.meshes import geometry_hash

log = logging.getLogger(__name__)

ARTIFACTS = {
    "frames": "capture.frames and their images",
    "camera": "cameras: intrinsics and poses (T_world_camera)",
    "prompts": "segmentation prompts (clicks, boxes) per entity",
    "object_masks": "masks/<frame>/<object>.png and their propagation states",
    "robot_masks": "masks/<frame>/robot.png",
    "plate": "background/plate.png and its confidence map",
    "robot": "the robot: registry name, base pose, gains",
    "robot_joints": "joint positions per frame and the robot's start joints",
    "table": "table_height (and tilt); the fixed table object's pose",
    "object_meshes": "objects' visual meshes and physical properties (density, friction, fixed)",
    "object_poses": "objects' poses",
    "textures": "objects' UV meshes and textures back-projected from the frames",
    "robot_appearance": "the robot's link colours and textures (robot.appearance, robot.textures)",
    "collision": "objects' collision geometry",
    "inertial": "objects' mass, centre of mass and inertia",
    "exports": "exports/<engine>/",
}


@dataclass(frozen=True)
class StageDecl:
    """One stage of the graph: what it reads and writes (names from :data:`ARTIFACTS`)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    doc: str = ""


GRAPH: tuple[StageDecl, ...] = (
    StageDecl("capture", (), ("frames", "camera"), "frames and a camera into a new bundle"),
    StageDecl("segment", ("frames", "prompts", "plate"), ("object_masks", "robot_masks"),
              "masks of prompted entities, propagated over the clip"),
    StageDecl("plate", ("frames", "object_masks", "robot_masks"), ("plate",), "background plate"),
    StageDecl("robot_fit", ("frames", "plate", "object_masks", "prompts", "camera", "robot"),
              ("robot_joints", "robot_masks"), "robot joints tracked through the clip from its pixels; its masks"),
    StageDecl("robot_masks", ("robot", "robot_joints", "camera"), ("robot_masks",),
              "robot masks rendered at recorded joints"),
    StageDecl("camera_refine", ("robot_masks", "robot_joints", "robot", "camera"), ("camera",),
              "camera pose refined against the robot masks"),
    StageDecl("table", ("object_masks", "camera", "object_meshes", "table"), ("table", "object_poses"),
              "table height from the objects resting on it (or a board)"),
    StageDecl("alignment", ("frames", "object_masks", "camera", "object_meshes", "table", "object_poses"),
              ("object_poses",), "object poses by render-and-compare"),
    StageDecl("texture", ("frames", "object_masks", "camera", "object_meshes", "object_poses"), ("textures",),
              "textures back-projected from the frames"),
    StageDecl("robot_appearance", ("frames", "robot_masks", "robot_joints", "robot", "camera", "plate"),
              ("robot_appearance",), "robot link colours and textures from the frames"),
    StageDecl("collision", ("object_meshes",), ("collision",), "collision geometry (CoACD, primitives)"),
    StageDecl("inertial", ("object_meshes", "collision"), ("inertial",), "mass properties"),
    StageDecl("export", ("object_meshes", "object_poses", "textures", "robot", "robot_joints", "robot_appearance",
                         "camera", "table", "collision", "inertial"), ("exports",),
              "MJCF, USD and SAPIEN exports, each loaded back"),
)
STAGES: dict[str, StageDecl] = {s.name: s for s in GRAPH}


def _check_graph() -> None:
    for s in GRAPH:
        unknown = set(s.reads + s.writes) - set(ARTIFACTS)
        if unknown:  # a typo in the declarations above; caught at import by every test
            raise RuntimeError(f"stage '{s.name}' names unknown artifacts {sorted(unknown)}")


_check_graph()


def stage_decl(name: str) -> StageDecl:
    """The declaration of stage ``name`` (unknown names suggest close ones)."""
    try:
        return STAGES[name]
    except KeyError:
        raise UnknownNameError("stage", name, STAGES) from None


def readers_of(artifacts, exclude: str | None = None, transitive: bool = True) -> list[str]:
    """Stages that read any of ``artifacts`` (graph order); with ``transitive``, also the stages that read what
    those write, and so on."""
    changed, out = set(artifacts), []
    grew = True
    while grew:
        grew = False
        for s in GRAPH:
            if s.name not in out and s.name != exclude and changed & set(s.reads):
                out.append(s.name)
                if transitive:
                    changed |= set(s.writes)
                    grew = True
    return [s.name for s in GRAPH if s.name in out]


def downstream(name: str, transitive: bool = True) -> list[str]:
    """Stages that depend on stage ``name``'s outputs (never ``name`` itself): directly, or with ``transitive``
    through the stages between."""
    return readers_of(stage_decl(name).writes, exclude=name, transitive=transitive)


def mark_changed(bundle: Bundle, *artifacts: str) -> list[str]:
    """An edit changed ``artifacts`` (see :data:`ARTIFACTS`): mark every stage that depends on them stale.

    Returns the stages that went from 'done' to 'stale'."""
    unknown = set(artifacts) - set(ARTIFACTS)
    if unknown:
        raise UnknownNameError("artifact", sorted(unknown)[0], ARTIFACTS)
    names = readers_of(artifacts)
    before = {n: r.status for n, r in bundle.manifest.stages.items()}
    bundle.mark_stale(*names)
    return [n for n in names if before.get(n) == "done"]


def files_hash(bundle: Bundle, rel_paths) -> str:
    parts = []
    for rel in sorted(set(rel_paths)):
        p = bundle.path(rel)
        parts.append((rel, hash_file(p) if p.is_file() else "missing"))
    return hash_jsonable(parts)


def meshes_hash(bundle: Bundle, rel_paths) -> str:
    """Like :func:`files_hash` for meshes, but of their shapes (:func:`geometry_hash`): a mesh rewritten with UVs
    keeps its hash."""
    return hash_jsonable([_shape_hash(bundle, rel) for rel in rel_paths])


def _shape_hash(bundle: Bundle, rel: str) -> str:
    p = bundle.path(rel)
    if not p.is_file():
        return f"missing:{rel}"
    try:
        return geometry_hash(p)
    except MeshError:  # unreadable: the stage runs and reports it (with its record), the hash only has to differ
        return f"unreadable:{hash_file(p)}"


def _fingerprint(bundle: Bundle, outputs) -> tuple[str, dict[str, str]]:
    """What a stage can change: the manifest (stage records aside) and its output files (timings aside)."""
    data = bundle.manifest.to_dict()
    data.pop("stages", None)
    files = {rel: content_hash(bundle.path(rel)) if bundle.path(rel).is_file() else "missing" for rel in outputs}
    return hash_jsonable(data), files


class StageRun(NamedTuple):
    """What every stage function returns: the stage's record and whether it ran (False: unchanged, skipped)."""

    record: StageRecord
    ran: bool


def run_stage(bundle: Bundle, name: str, input_hash: str, config: dict, fn: Callable[[], tuple[list[str], dict, str]],
              force: bool = False, input_hash_after: Callable[[], str] | None = None,
              accept_poor: bool = False) -> StageRun:
    """Run ``fn`` unless stage ``name`` is current.

    Quality gates (:mod:`real2sim.core.gates`): when the metrics ``fn`` returns miss the stage's bar, the record's
    status is 'poor', its metrics carry ``gate`` (each failed rule: number, bar) and ``applied`` (``fn`` reports
    whether it applied its result: a gated stage applies a poor result only when asked to, ``accept_poor``), and
    its message starts with the verdict. A poor record whose result was not applied is re-run when
    ``accept_poor`` is given, even with unchanged inputs.

    ``input_hash_after``: for a stage whose inputs include what it writes (refine-camera's camera, the table
    stage's height): the record keeps the hash of its inputs as it left them, so that running it again is a
    no-op until something else changes them. When the run changed what the stage writes, the stages that read it
    are marked stale (directly: they mark their own readers in turn when they re-run and their outputs change)."""
    decl = stage_decl(name)
    if not force and bundle.stage_is_current(name, input_hash) and not (accept_poor and not_applied(bundle, name)):
        log.info("stage %s: unchanged, skipped", name)
        return StageRun(bundle.manifest.stages[name], False)
    previous = bundle.manifest.stages.get(name)
    before = _fingerprint(bundle, previous.outputs if previous else [])
    t0 = time.perf_counter()
    try:
        outputs, metrics, message = fn()
    except Real2SimError as exc:
        rec = bundle.stage(name)
        rec.status, rec.message = "failed", str(exc)
        bundle.save()
        raise
    metrics = {**metrics, "seconds": round(time.perf_counter() - t0, 3)}
    if input_hash_after is not None:
        input_hash = input_hash_after()
    changed = previous is None or _fingerprint(bundle, outputs) != before
    status, metrics, message = _gated(name, metrics, message)
    bundle.manifest.stages[name] = StageRecord(status, input_hash, config, sorted(outputs), metrics, message)
    if changed and metrics.get("applied", True):
        bundle.mark_stale(*downstream(decl.name, transitive=False))
    bundle.save()
    return StageRun(bundle.manifest.stages[name], True)


def _gated(name: str, metrics: dict, message: str) -> tuple[str, dict, str]:
    """The record's status, metrics and message after the stage's quality gates."""
    poor = failing(name, metrics)
    if not poor:
        return "done", metrics, message
    applied = bool(metrics.get("applied", False))
    verdict = "; ".join(v.line() for v in poor) + " -> " + (POOR_APPLIED if applied else POOR_NOT_APPLIED)
    log.warning("%s", verdict)
    metrics = {**metrics, "applied": applied, "gate": [v.to_dict() for v in poor]}
    return "poor", metrics, verdict + (f"; {message}" if message else "")


def not_applied(bundle: Bundle, name: str) -> bool:
    """Whether stage ``name`` is recorded 'poor' with its result not applied."""
    rec = bundle.manifest.stages.get(name)
    return bool(rec and rec.status == "poor" and not rec.metrics.get("applied", False))


def poor_line(bundle: Bundle, name: str) -> str | None:
    """The one-line verdict of a poor stage (its number and the bar, applied or not), or None."""
    rec = bundle.manifest.stages.get(name)
    if rec is None or rec.status != "poor":
        return None
    misses = ", ".join(f"{g['metric']} {g['value']:.4g} misses the bar ({g['rule']})" for g in rec.metrics.get("gate", []))
    verdict = POOR_APPLIED if rec.metrics.get("applied") else POOR_NOT_APPLIED
    detail = rec.message.split(verdict, 1)[1].lstrip("; ") if verdict in rec.message else ""
    return f"{name}: {misses or 'poor'} -> {verdict}" + (f"; {detail}" if detail else "")


def quality_problems(bundle: Bundle, names=None) -> list[tuple[str, str]]:
    """``(stage, line)`` for each poor, failed or stale stage among ``names`` (default: every recorded stage but
    ``export``), in graph order: what ``build`` stops on and ``export`` and ``eval`` warn about."""
    out = []
    for s in GRAPH:
        rec = bundle.manifest.stages.get(s.name)
        if rec is None or (s.name not in names if names is not None else s.name == "export"):
            continue
        if rec.status == "poor":
            out.append((s.name, poor_line(bundle, s.name)))
        elif rec.status == "failed":
            out.append((s.name, f"{s.name}: last run failed: {rec.message}"))
        elif rec.status == "stale":
            out.append((s.name, f"{s.name}: stale (an input changed since it ran; 'real2sim build' re-runs it)"))
    return out
