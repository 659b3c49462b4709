"""``real2sim demo``: the journey on the bundled tabletop scene, with no input.

Today: recipe -> collision -> inertial -> export (MJCF, USD, SAPIEN, each loaded back)
-> drop test in MuJoCo and SAPIEN -> side-by-side render. Later stages extend it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .bundle import Bundle, atomic_write_json
from .recipe import builtin_recipe, bundle_from_recipe

log = logging.getLogger(__name__)


@dataclass
class DemoReport:
    out_dir: Path
    stage_seconds: dict[str, float] = field(default_factory=dict)
    exports: dict[str, str] = field(default_factory=dict)
    drop_position_mm: dict[str, float] = field(default_factory=dict)
    drop_angle_deg: dict[str, float] = field(default_factory=dict)
    projection_px: dict[str, float] = field(default_factory=dict)
    collision: dict[str, dict] = field(default_factory=dict)
    picture: str = ""
    render_notes: dict[str, str] = field(default_factory=dict)


def run_demo(out_dir: Path, scene: str = "tabletop", workers: int = 2, on_stage: Callable[[str], None] | None = None) -> DemoReport:
    """Run the demo into ``out_dir``; ``on_stage(name)`` is called as each stage starts (for progress bars)."""
    import collision

    from . import crosscheck, pipeline

    out_dir = Path(out_dir)
    rep = DemoReport(out_dir)
    notify = on_stage or (lambda name: None)

    def timed(name, fn):
        notify(name)
        t0 = time.perf_counter()
        value = fn()
        rep.stage_seconds[name] = round(time.perf_counter() - t0, 2)
        return value

    bundle = timed("recipe", lambda: _fresh_or_existing(out_dir, scene))
    cfg = collision.CollisionConfig(workers=workers)
    timed("collision", lambda: pipeline.collision_stage(bundle, cfg))
    timed("inertial", lambda: pipeline.inertial_stage(bundle))
    results = timed("export", lambda: pipeline.export_bundle(bundle))
    rep.exports = {k: (str(v.main_file) if hasattr(v, "main_file") else str(v)) for k, v in results.items()}
    drop = timed("drop test", lambda: crosscheck.drop_test(bundle, ("mjcf", "sapien"), seconds=1.0))
    rep.drop_position_mm = {k: round(v, 3) for k, v in drop.position_error_mm.items()}
    rep.drop_angle_deg = {k: round(v, 3) for k, v in drop.angle_error_deg.items()}
    cam = next(iter(bundle.manifest.cameras))
    rep.projection_px = timed("projection", lambda: crosscheck.projection_errors(bundle, cam))
    img, rep.render_notes = timed("render", lambda: crosscheck.render_side_by_side(bundle, cam))
    from PIL import Image

    pic = bundle.reports_dir() / "demo_mujoco_vs_sapien.png"
    Image.fromarray(img).save(pic)
    rep.picture = str(pic)
    coll = bundle.manifest.stages["collision"].metrics
    rep.collision = {oid: {"kind": o.collision.kind, "hulls": len(o.collision.hulls)} for oid, o in bundle.manifest.objects.items()}
    rep.collision["_stage"] = coll
    atomic_write_json(bundle.reports_dir() / "demo.json", {
        "stage_seconds": rep.stage_seconds, "exports": rep.exports, "drop_position_mm": rep.drop_position_mm,
        "drop_angle_deg": rep.drop_angle_deg, "projection_px": rep.projection_px, "render": rep.render_notes,
        "picture": bundle.rel(pic)})
    return rep


def _fresh_or_existing(out_dir: Path, scene: str) -> Bundle:
    """Re-use a previous demo bundle of the same recipe (stages then skip), else create one."""
    recipe = builtin_recipe(scene)
    if (out_dir / "scene.json").exists():
        try:
            b = Bundle.load(out_dir)
            if b.manifest.provenance.get("recipe") == recipe.name and b.manifest.name == scene:
                return b
        except Exception as exc:  # a broken old demo bundle is simply rebuilt
            log.warning("rebuilding demo bundle: %s", exc)
    return bundle_from_recipe(recipe, out_dir, overwrite=True)


def worst(values: dict) -> float:
    return float(np.max(list(values.values()))) if values else 0.0
