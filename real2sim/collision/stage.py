"""The 'collision' and 'inertial' stages: collision geometry and mass properties for every object of a bundle."""
from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from real2sim.collision.decomposition import decompose, decompose_many, write_result
from real2sim.collision.inertia import compute_inertials
from real2sim.collision.types import CollisionConfig
from real2sim.core.bundle import Bundle, hash_jsonable, replace_dir_atomically
from real2sim.core.errors import CollisionError, MeshError
from real2sim.core.manifest import CollisionSpec, Pose
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import StageRun, meshes_hash, run_stage

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """Collision cache: ``$REAL2SIM_CACHE`` or ``~/.cache/real2sim``."""
    return Path(os.environ.get("REAL2SIM_CACHE", Path.home() / ".cache" / "real2sim")) / "collision"


def collision_stage(bundle: Bundle, config: CollisionConfig | None = None, cache_dir: Path | None = None,
                    force: bool = False) -> StageRun:
    """Convex decomposition / primitive fit for every object.

    An object whose CoACD run crashes or times out falls back to its single convex hull;
    the failure is named in ``reports/collision.json`` and the rest of the scene proceeds.
    """

    config = config or CollisionConfig()
    cache_dir = Path(cache_dir or default_cache_dir())
    # articulated objects bring each link's collision shapes in their URDF (collision.kind 'urdf')
    objects = {k: o for k, o in bundle.manifest.objects.items() if o.articulation is None}
    cfg = dataclasses.asdict(config)
    cfg_hash = {k: v for k, v in cfg.items() if k != "workers"}
    input_hash = hash_jsonable([meshes_hash(bundle, [objects[k].visual.mesh for k in sorted(objects)]), cfg_hash, sorted(objects)])

    def work():
        meshes = {oid: load_mesh(bundle.path(o.visual.mesh)) for oid, o in objects.items()}
        results = decompose_many(meshes, config, cache_dir=cache_dir)
        report, outputs, failed = {}, [], {}
        for oid, res in results.items():
            if isinstance(res, Exception):
                failed[oid] = str(res)
                log.warning("collision for '%s' failed (%s); falling back to its convex hull", oid, res)
                try:
                    res = decompose(meshes[oid], dataclasses.replace(config, method="convex"), cache_dir=cache_dir)
                except (CollisionError, MeshError) as exc:
                    failed[oid] += f"; convex fallback failed too: {exc}"
                    continue
                res.report["fallback_from_error"] = failed[oid]
            out_dir = bundle.path(f"objects/{oid}/collision")
            with replace_dir_atomically(out_dir) as tmp:
                write_result(res, tmp)
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


def inertial_stage(bundle: Bundle, force: bool = False) -> StageRun:
    """Mass properties from density and geometry for every dynamic object."""
    objs = bundle.manifest.objects
    key = [(oid, o.density, o.mass, o.fixed, dataclasses.asdict(o.collision)) for oid, o in sorted(objs.items())]
    input_hash = hash_jsonable([key, meshes_hash(bundle, [objs[k].visual.mesh for k in sorted(objs)])])

    def work():
        masses = compute_inertials(bundle)
        return [], {"total_mass_kg": round(sum(masses.values()), 6), "objects": len(masses)}, ""

    return run_stage(bundle, "inertial", input_hash, {}, work, force)
