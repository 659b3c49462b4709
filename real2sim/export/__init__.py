"""The 'export' stage: the bundle written for every registered engine, each export loaded back in its engine.

The stage is 'done' only when every requested engine exported; when any failed it is 'failed' (its message names
each failed engine and why; ``metrics.failed`` lists them), so the next export runs again instead of answering
'unchanged', ``check`` reports it and an env refuses the failed engine's now out-of-date export. Temp folders a
killed export left in ``exports/`` are removed by the next export of any engine.
"""
from __future__ import annotations

import contextlib
import logging

from real2sim.core.bundle import Bundle, hash_jsonable, sweep_temp_dirs
from real2sim.core.errors import ExportError, Real2SimError
from real2sim.core.stages import files_hash, run_stage
from real2sim.engines import engine_names, get_engine, get_exporter
from real2sim.render.lod import settings_key as lod_settings_key

log = logging.getLogger(__name__)


def export_bundle(bundle: Bundle, engines=None, force: bool = False) -> dict:
    """Export to each engine (each loads its own output back). Returns {engine: ExportResult | Exception}.

    One engine failing does not stop the others; the stage is then recorded 'failed' (message: each failed engine
    and its reason) and, when every engine failed, an :class:`ExportError` naming them is raised after all ran.
    """

    engines = [get_engine(e).name for e in engines] if engines else engine_names()
    bundle.exports_dir()  # exports/ leading outside the bundle (a symlink): refused before anything is swept or written
    for name in engine_names():  # leftovers of a killed export, whichever engine it was writing
        with contextlib.suppress(Real2SimError):
            sweep_temp_dirs(get_exporter(name).out_dir(bundle))
    m = bundle.manifest
    scene = {k: v for k, v in m.to_dict().items() if k != "stages"}
    refs = [p for o in m.objects.values() for p in [o.visual.mesh, o.visual.texture, *o.collision.hulls] if p]
    refs += [p for t in (m.robot.textures.values() if m.robot is not None else ()) for p in (t["mesh"], t["texture"])]
    refs += [bundle.rel(f) for o in m.objects.values() if o.articulation is not None  # the URDF and its meshes
             for f in sorted(bundle.path(o.articulation.urdf).parent.rglob("*")) if f.is_file()]
    # + the level-of-detail settings of the rendered visuals (render/lod.py: the MJCF and SAPIEN exports carry them)
    input_hash = hash_jsonable([scene, files_hash(bundle, refs), sorted(engines), lod_settings_key()])
    results: dict = {}

    def work():
        outputs, metrics, errors = [], {}, {}
        for name in engines:
            try:
                res = get_exporter(name).export(bundle)
            except Real2SimError as exc:
                errors[name] = " ".join(str(exc).split())  # one line (engines' messages carry newlines)
                results[name] = exc
                log.error("export to %s failed: %s", name, errors[name])
                continue
            results[name] = res
            outputs.append(bundle.rel(res.main_file))
            metrics[name] = {"files": len(res.files), "warnings": len(res.warnings)}
        if errors and len(errors) == len(engines):
            raise ExportError(_failure_message(errors))
        return outputs, {**metrics, "failed": sorted(errors)}, _failure_message(errors) if errors else ""

    try:
        rec, ran = run_stage(bundle, "export", input_hash, {"engines": list(engines)}, work, force)
    except ExportError:
        rec = bundle.manifest.stages["export"]  # run_stage recorded it 'failed'; say which engines
        rec.config, rec.metrics = {"engines": list(engines)}, {"failed": sorted(engines)}
        bundle.save()
        raise
    if not ran:
        for name in engines:
            results[name] = "unchanged"
    elif rec.metrics.get("failed"):  # some engines exported, some did not: the stage did not do its job
        rec.status = "failed"
        bundle.save()
    return results


def _failure_message(errors: dict) -> str:
    return (f"export failed for {', '.join(sorted(errors))}: " + "; ".join(f"{k}: {v}" for k, v in errors.items())
            + ". Fix the cause and run 'real2sim export' again (the other engines' exports are current)")


def failed_engines(bundle: Bundle) -> dict[str, str]:
    """Engines whose last export failed (their ``exports/<engine>/`` predates the scene): {engine: stage message}."""
    rec = bundle.manifest.stages.get("export")
    if rec is None or rec.status != "failed":
        return {}
    return {str(e): rec.message for e in rec.metrics.get("failed") or []}


__all__ = ["export_bundle", "failed_engines"]
