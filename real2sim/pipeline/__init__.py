"""Wires the stage packages into ``real2sim build`` and ``real2sim export``.

Stage packages (collision/, export/) are imported here lazily; they import only
``real2sim`` core types, never each other.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import real2sim.collision as col
from real2sim import capture
from real2sim.collision.inertia import compute_inertials
from real2sim.core.bundle import Bundle, hash_jsonable, replace_dir_atomically
from real2sim.core.errors import CollisionError, MeshError, Real2SimError
from real2sim.core.manifest import CollisionSpec, Pose
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import files_hash, run_stage
from real2sim.engines import get_exporter
from real2sim.texture import stage as texture_stage

log = logging.getLogger(__name__)
ENGINES = ("mjcf", "usd", "sapien")


def default_cache_dir() -> Path:
    """Collision cache: ``$REAL2SIM_CACHE`` or ``~/.cache/real2sim``."""
    return Path(os.environ.get("REAL2SIM_CACHE", Path.home() / ".cache" / "real2sim")) / "collision"


def collision_stage(bundle: Bundle, config=None, cache_dir: Path | None = None, force: bool = False):
    """Convex decomposition / primitive fit for every object.

    An object whose CoACD run crashes or times out falls back to its single convex hull;
    the failure is named in ``reports/collision.json`` and the rest of the scene proceeds.
    """

    config = config or col.CollisionConfig()
    cache_dir = Path(cache_dir or default_cache_dir())
    objects = bundle.manifest.objects
    cfg = dataclasses.asdict(config)
    cfg_hash = {k: v for k, v in cfg.items() if k != "workers"}
    input_hash = hash_jsonable([files_hash(bundle, [o.visual.mesh for o in objects.values()]), cfg_hash, sorted(objects)])

    def work():
        meshes = {oid: load_mesh(bundle.path(o.visual.mesh)) for oid, o in objects.items()}
        results = col.decompose_many(meshes, config, cache_dir=cache_dir)
        report, outputs, failed = {}, [], {}
        for oid, res in results.items():
            if isinstance(res, Exception):
                failed[oid] = str(res)
                log.warning("collision for '%s' failed (%s); falling back to its convex hull", oid, res)
                try:
                    res = col.decompose(meshes[oid], dataclasses.replace(config, method="convex"), cache_dir=cache_dir)
                except (CollisionError, MeshError) as exc:
                    failed[oid] += f"; convex fallback failed too: {exc}"
                    continue
                res.report["fallback_from_error"] = failed[oid]
            out_dir = bundle.object_dir(oid) / "collision"
            with replace_dir_atomically(out_dir) as tmp:
                col.write_result(res, tmp)
            hulls = [bundle.rel(out_dir / f"hull_{i:03d}.obj") for i in range(len(res.hulls))]
            objects[oid].collision = CollisionSpec(kind=res.kind, hulls=hulls if res.kind == "hulls" else [],
                                                   size=[float(x) for x in res.size],
                                                   pose=Pose.from_matrix(res.pose) if res.kind != "hulls" else Pose())
            outputs += hulls + [bundle.rel(out_dir / "report.json")]
            report[oid] = {**res.report, "kind": res.kind, "picture": bundle.rel(out_dir / "quality.png")}
        if objects and not report:
            raise CollisionError(f"collision failed for every object, even the convex-hull fallback: {failed}")
        outputs.append(bundle.write_report("collision", {"objects": report, "failed": failed}))
        metrics = {"objects": len(report), "failed": sorted(failed),
                   "min_occupancy_iou": min((r.get("occupancy_iou", 1.0) for r in report.values()), default=None),
                   "hulls": sum(r.get("hull_count", 0) for r in report.values())}
        msg = f"fell back to a convex hull for: {', '.join(sorted(failed))}" if failed else ""
        return outputs, metrics, msg

    return run_stage(bundle, "collision", input_hash, cfg, work, force)


def inertial_stage(bundle: Bundle, force: bool = False):
    """Mass properties from density and geometry for every dynamic object."""
    objs = bundle.manifest.objects
    key = [(oid, o.density, o.mass, o.fixed, dataclasses.asdict(o.collision), o.visual.mesh) for oid, o in sorted(objs.items())]
    input_hash = hash_jsonable([key, files_hash(bundle, [o.visual.mesh for o in objs.values()])])

    def work():
        masses = compute_inertials(bundle)
        return [], {"total_mass_kg": round(sum(masses.values()), 6), "objects": len(masses)}, ""

    return run_stage(bundle, "inertial", input_hash, {}, work, force)


def build(bundle: Bundle, collision_config=None, cache_dir: Path | None = None, force: bool = False) -> dict:
    """Run every build stage that the bundle's inputs allow.

    plate (when it has frames) -> alignment and texture (when objects have masks) ->
    collision -> inertial. Each stage skips itself when its inputs are unchanged.
    """
    ran = {}
    m = bundle.manifest
    if m.capture.frames:

        ran["plate"] = capture.plate_stage(bundle, force=force)[1]
    masked = {e for masks in m.capture.masks.values() for e in masks}
    if m.cameras and masked & set(bundle.dynamic_objects()):

        ran["alignment"] = texture_stage.align_stage(bundle, force=force)[1]
        ran["texture"] = texture_stage.texture_stage(bundle, force=force)[1]
    ran["collision"] = collision_stage(bundle, collision_config, cache_dir, force)[1]
    ran["inertial"] = inertial_stage(bundle, force)[1]
    return ran


def export_bundle(bundle: Bundle, engines=ENGINES, force: bool = False) -> dict:
    """Export to each engine (each loads its own output back). Returns {engine: ExportResult | Exception}.

    One engine failing does not stop the others; the failure is recorded in the
    'export' stage and re-raised after all engines ran when every engine failed.
    """

    m = bundle.manifest
    scene = {k: v for k, v in m.to_dict().items() if k != "stages"}
    refs = [p for o in m.objects.values() for p in [o.visual.mesh, o.visual.texture, *o.collision.hulls] if p]
    input_hash = hash_jsonable([scene, files_hash(bundle, refs), sorted(engines)])
    results: dict = {}

    def work():
        outputs, metrics, errors = [], {}, {}
        for name in engines:
            try:
                res = get_exporter(name).export(bundle)
            except Real2SimError as exc:
                errors[name] = str(exc)
                results[name] = exc
                log.error("export to %s failed: %s", name, exc)
                continue
            results[name] = res
            outputs.append(bundle.rel(res.main_file))
            metrics[name] = {"files": len(res.files), "warnings": len(res.warnings)}
        if errors and len(errors) == len(engines):
            raise next(iter(r for r in results.values() if isinstance(r, Exception)))
        return outputs, {**metrics, "failed": sorted(errors)}, "; ".join(f"{k}: {v}" for k, v in errors.items())

    rec, ran = run_stage(bundle, "export", input_hash, {"engines": list(engines)}, work, force)
    if not ran:
        for name in engines:
            results[name] = "unchanged"
    return results
