"""``real2sim build`` and ``real2sim export``: the stage graph walked over a bundle.

The graph (which stage reads and writes what) is declared once, in :data:`real2sim.core.stages.GRAPH`. A build
runs, in graph order, every step below that the bundle's contents call for; each stage skips itself when its inputs
are unchanged. A stage whose outputs change marks its readers stale, and the walk repeats for stale stages until
nothing changes (at most :data:`MAX_ROUNDS` rounds): plate -> robot fit -> plate again happens by itself, the
second plate keeping the fitted robot out.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from real2sim.capture.plate import plate_stage
from real2sim.collision.stage import collision_stage, default_cache_dir, inertial_stage
from real2sim.collision.types import CollisionConfig
from real2sim.core.bundle import Bundle
from real2sim.core.stages import STAGES, StageRun, quality_problems
from real2sim.export import export_bundle
from real2sim.segmentation.robot_fit import robot_fit_stage
from real2sim.texture.stage import align_stage, texture_stage

log = logging.getLogger(__name__)

MAX_ROUNDS = 4
"""Rounds of the walk: the first runs everything due; later ones re-run what the first made stale."""


@dataclass
class BuildOptions:
    """Settings that reach the stages of a build."""

    collision: CollisionConfig | None = None
    """Collision decomposition settings (None: :class:`CollisionConfig` defaults)."""
    cache_dir: Path | None = None
    """Collision cache (None: ``$REAL2SIM_CACHE/collision`` or ``~/.cache/real2sim/collision``)."""
    force: bool = False
    """Re-run every step in the first round even when its inputs are unchanged."""
    accept_poor: bool = False
    """Apply a fitting stage's result even when it misses its quality gate (:mod:`real2sim.core.gates`)."""


@dataclass(frozen=True)
class BuildStep:
    """A stage of the graph as ``build`` runs it: when it is due, and how to run it."""

    name: str
    """A stage declared in :data:`real2sim.core.stages.GRAPH`."""
    due: Callable[[Bundle], bool]
    run: Callable[[Bundle, BuildOptions], StageRun]


def _has_frames(bundle: Bundle) -> bool:
    return bool(bundle.manifest.capture.frames)


def _robot_needs_fit(bundle: Bundle) -> bool:
    """A robot seen in the frames whose joints were not recorded: its pixels (a prompt's mask) pin them."""
    m = bundle.manifest
    if m.robot is None or not m.capture.frames or not m.cameras:
        return False
    if "robot_fit" in m.stages:
        return True  # fitted before: keep it current
    first = m.capture.frames[0]
    return first.joint_positions is None and "robot" in m.capture.masks.get("000000", {})


def _has_masked_objects(bundle: Bundle) -> bool:
    m = bundle.manifest
    masked = {e for masks in m.capture.masks.values() for e in masks}
    return bool(m.cameras) and bool(masked & set(bundle.dynamic_objects()))


def _has_masked_aligned_objects(bundle: Bundle) -> bool:
    """Masked dynamic objects, or masked articulated ones (fixed or not): what alignment places."""
    m = bundle.manifest
    masked = {e for masks in m.capture.masks.values() for e in masks}
    articulated = {k for k, o in m.objects.items() if o.articulation is not None}
    return bool(m.cameras) and bool(masked & (set(bundle.dynamic_objects()) | articulated))


def _always(bundle: Bundle) -> bool:
    return True


BUILD_STEPS: tuple[BuildStep, ...] = (
    BuildStep("plate", _has_frames, lambda b, o: plate_stage(b, force=o.force)),
    BuildStep("robot_fit", _robot_needs_fit, lambda b, o: robot_fit_stage(b, force=o.force, accept_poor=o.accept_poor)),
    BuildStep("alignment", _has_masked_aligned_objects, lambda b, o: align_stage(b, force=o.force, accept_poor=o.accept_poor)),
    BuildStep("texture", _has_masked_objects, lambda b, o: texture_stage(b, force=o.force, accept_poor=o.accept_poor)),
    BuildStep("collision", _always, lambda b, o: collision_stage(b, o.collision, o.cache_dir, o.force)),
    BuildStep("inertial", _always, lambda b, o: inertial_stage(b, o.force)),
)


def build(bundle: Bundle, collision_config: CollisionConfig | None = None, cache_dir: Path | None = None,
          force: bool = False, accept_poor: bool = False) -> dict[str, bool]:
    """Run every build step the bundle calls for, in graph order, until no stage is stale.

    Returns ``{stage: ran}`` (True when it ran in any round). Each stage skips itself when its inputs are unchanged.
    A fitting stage whose number misses its quality gate is recorded 'poor' and the walk goes on (the stages after it
    work from what the bundle kept); :func:`build_problems` lists them.
    """
    opts = BuildOptions(collision_config, cache_dir, force, accept_poor)
    ran: dict[str, bool] = {}
    for round_ in range(MAX_ROUNDS):
        ran_now = []
        for step in BUILD_STEPS:
            rec = bundle.manifest.stages.get(step.name)
            if round_ > 0 and (rec is None or rec.status != "stale"):
                continue  # later rounds only re-run what the earlier ones made stale
            if not step.due(bundle):
                continue
            run = step.run(bundle, opts if round_ == 0 else BuildOptions(opts.collision, opts.cache_dir,
                                                                          accept_poor=opts.accept_poor))
            ran[step.name] = ran.get(step.name, False) or run.ran
            if run.ran:
                ran_now.append(step.name)
        if round_ > 0 and ran_now:
            log.info("build: round %d re-ran %s (their inputs changed in the previous round)", round_ + 1,
                     ", ".join(ran_now))
        if not ran_now or round_ == MAX_ROUNDS - 1:
            break
        if not any(bundle.manifest.stages.get(s.name) and bundle.manifest.stages[s.name].status == "stale"
                   for s in BUILD_STEPS):
            break
    stale = [s.name for s in BUILD_STEPS if s.name in bundle.manifest.stages
             and bundle.manifest.stages[s.name].status == "stale" and s.due(bundle)]
    if stale:
        log.warning("build: %s still stale after %d rounds (their inputs kept changing)", ", ".join(stale), MAX_ROUNDS)
    return ran


def build_problems(bundle: Bundle) -> list[tuple[str, str]]:
    """One line per build stage that is poor (number and bar), failed or still stale: why ``build`` exits non-zero."""
    due = {s.name for s in BUILD_STEPS if s.due(bundle)}
    return [(name, line) for name, line in quality_problems(bundle, [s.name for s in BUILD_STEPS])
            if bundle.manifest.stages[name].status != "stale" or name in due]


def _check_steps() -> None:
    order = list(STAGES)
    names = [s.name for s in BUILD_STEPS]
    if names != sorted(names, key=order.index):  # graph order is the walk order
        raise RuntimeError(f"BUILD_STEPS {names} are not in the graph order {order}")


_check_steps()

__all__ = ["BUILD_STEPS", "BuildOptions", "BuildStep", "MAX_ROUNDS", "build", "build_problems", "default_cache_dir",
           "export_bundle"]
