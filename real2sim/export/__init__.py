"""The 'export' stage: the bundle written for every registered engine, each export loaded back in its engine."""
from __future__ import annotations

import logging

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.errors import Real2SimError
from real2sim.core.stages import files_hash, run_stage
from real2sim.engines import engine_names, get_engine, get_exporter

log = logging.getLogger(__name__)


def export_bundle(bundle: Bundle, engines=None, force: bool = False) -> dict:
    """Export to each engine (each loads its own output back). Returns {engine: ExportResult | Exception}.

    One engine failing does not stop the others; the failure is recorded in the
    'export' stage and re-raised after all engines ran when every engine failed.
    """

    engines = [get_engine(e).name for e in engines] if engines else engine_names()
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


__all__ = ["export_bundle"]
