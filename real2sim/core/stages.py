"""The stage runner: input hashing, skip-if-unchanged, status and reports in the manifest.

A stage is a function ``fn() -> (outputs, metrics, message)`` run under :func:`run_stage`.
An unchanged stage (same input hash, outputs present) is skipped; a failed stage is
recorded as 'failed' with its message and the bundle keeps what it had.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from real2sim.core.bundle import Bundle, hash_file, hash_jsonable
from real2sim.core.errors import Real2SimError
from real2sim.core.manifest import StageRecord

log = logging.getLogger(__name__)

# Which stages read the outputs of which: editing one marks these stale.
DOWNSTREAM = {
    "plate": (),
    "robot_masks": ("plate",),
    # camera_refine marks its own dependents, and only when it changed the pose
    "table": ("alignment", "texture", "export"),  # table_height: the plane objects rest on, the table object
    "alignment": ("texture", "export"),
    "texture": ("export",),
    "robot_appearance": ("export",),
    "collision": ("inertial", "export"),
    "inertial": ("export",),
    "export": (),
}
CAMERA_DOWNSTREAM = ("robot_masks", "table", "alignment", "texture", "robot_appearance", "export")
"""Stages computed from a camera pose: a new pose (calibrate, refine-camera) marks them stale."""


def files_hash(bundle: Bundle, rel_paths) -> str:
    parts = []
    for rel in sorted(set(rel_paths)):
        p = bundle.path(rel)
        parts.append((rel, hash_file(p) if p.is_file() else "missing"))
    return hash_jsonable(parts)


def run_stage(bundle: Bundle, name: str, input_hash: str, config: dict, fn: Callable[[], tuple[list[str], dict, str]],
              force: bool = False, input_hash_after: Callable[[], str] | None = None) -> tuple[StageRecord, bool]:
    """Run ``fn`` unless the stage is current. Returns (record, ran).

    ``input_hash_after``: for a stage whose inputs include what it writes (refine-camera's camera, the table
    stage's height): the record keeps the hash of its inputs as it left them, so that running it again is a
    no-op until something else changes them."""
    if not force and bundle.stage_is_current(name, input_hash):
        log.info("stage %s: unchanged, skipped", name)
        return bundle.manifest.stages[name], False
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
    bundle.manifest.stages[name] = StageRecord("done", input_hash, config, sorted(outputs), metrics, message)
    bundle.mark_stale(*DOWNSTREAM.get(name, ()))
    bundle.save()
    return bundle.manifest.stages[name], True
