"""The collision stage: repair -> primitive fit or CoACD (subprocess) -> quality report, cached."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from real2sim.collision import cache
from real2sim.collision.coacd_worker import PARENT_ENV
from real2sim.collision.picture import quality_picture
from real2sim.collision.primitives import fit_primitives
from real2sim.collision.quality import hull_quality, primitive_mesh
from real2sim.collision.repair import repair_mesh
from real2sim.collision.types import CollisionConfig, CollisionResult
from real2sim.core.errors import CollisionError, DependencyMissing, Real2SimError
from real2sim.core.meshes import load_mesh
from real2sim.core.objio import write_obj
from real2sim.core.tempfiles import scratch_dir

log = logging.getLogger(__name__)

_WORKER_MODULE = "real2sim.collision.coacd_worker"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])



def _mesh_name(mesh, name: str | None) -> str:
    if name:
        return str(name)
    meta = getattr(mesh, "metadata", None) or {}
    return str(meta.get("file_path") or meta.get("file_name") or "mesh")


def decompose(mesh, config: CollisionConfig | None = None, cache_dir: Path | None = None, *,
              name: str | None = None) -> CollisionResult:
    """Collision geometry for one mesh (see :class:`collision.CollisionConfig` for the methods).

    Raises :class:`MeshError` for degenerate/unrepairable meshes and
    :class:`CollisionError` when CoACD crashes or runs past ``config.timeout_s``.
    """

    config = config or CollisionConfig()
    name = _mesh_name(mesh, name)
    t0 = time.perf_counter()
    key = None
    if cache_dir is not None:
        try:
            key = cache.cache_key(mesh, config)
        except Exception as exc:  # unhashable input: let repair give the proper error
            log.debug("no cache key for %s: %s", name, exc)
        if key is not None:
            hit = cache.load(cache_dir, key)
            if hit is not None:
                hit.report.update(cache_hit=True, seconds=round(time.perf_counter() - t0, 6), name=name)
                hit.mesh = mesh
                log.info("%s: collision cache hit (%s)", name, key)
                return hit

    solid, notes = repair_mesh(mesh, name=name, allow_hull_fallback=(config.method == "convex"))
    report: dict = {"name": name, "requested_method": config.method, "repair": notes,
                    "config": config.cache_fields(),
                    "mesh": {"faces": int(len(solid.faces)), "vertices": int(len(solid.vertices)),
                             "volume": float(solid.volume)}}
    result = None
    if config.method in ("auto", "primitive"):

        fits = fit_primitives(solid, seed=config.seed)
        report["primitive_fits"] = {f"{c['kind']}[{c['frame']}]": c["iou"] for c in fits}
        best = fits[0]
        if config.method == "primitive" or best["iou"] >= config.primitive_iou:
            result = CollisionResult(kind=best["kind"], size=list(best["size"]), pose=np.asarray(best["pose"], float))
            report["method"] = "primitive"
        else:
            log.info("%s: best primitive (%s) IoU %.3f < %.3f; running CoACD", name, best["kind"], best["iou"],
                     config.primitive_iou)
    if result is None and config.method == "convex":
        result = CollisionResult(kind="hulls", hulls=[_canonical_hull(solid.vertices)])
        report["method"] = "convex"
    if result is None:
        t1 = time.perf_counter()
        hulls = run_coacd(solid, config, name)
        report["coacd_seconds"] = round(time.perf_counter() - t1, 3)
        result = CollisionResult(kind="hulls", hulls=hulls)
        report["method"] = "coacd"
    report["kind"] = result.kind
    report.update(hull_quality(solid, result, seed=config.seed))
    report["cache_hit"] = False
    report["seconds"] = round(time.perf_counter() - t0, 6)
    result.report = report
    if key is not None:
        cache.store(cache_dir, key, result)
    result.mesh = solid
    log.info("%s: %s (%s) IoU %.3f in %.2f s", name, result.kind, report["method"], report["occupancy_iou"],
             report["seconds"])
    return result


def _canonical_hull(points):
    """Convex hull of ``points`` as a trimesh (qhull: deterministic for equal input)."""
    import trimesh

    return trimesh.convex.convex_hull(np.asarray(points, float))


def _sort_hulls(hulls: list) -> list:
    """A stable order independent of CoACD's internal order: by rounded centroid, then volume."""
    return sorted(hulls, key=lambda h: (*np.round(np.asarray(h.vertices).mean(0), 9).tolist(), round(float(h.volume), 15)))


def _require_unimported(module: str, extra: str) -> None:
    """Raise :class:`DependencyMissing` (with the install command) when ``module`` is not installed, without importing
    it: ``import coacd`` in this process would break a later ``import open3d`` (std::bad_cast; DESIGN.md)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise DependencyMissing(f"'{module}' is needed here but is not installed. "
                                f"Install it with: pip install 'real2sim[{extra}]' (or pip install {module})")


def run_coacd(solid, config: CollisionConfig, name: str = "mesh") -> list:
    """Convex pieces of a watertight mesh from CoACD, run in a subprocess under ``config.timeout_s``."""

    _require_unimported("coacd", extra="collision")  # fail early with the install command, without importing it here
    params = config.coacd_params()
    hint = (f"parameters: {json.dumps(params)}, timeout_s={config.timeout_s}")
    # a worker's folder is r2s_coacd_<pid of this process>_<random>: those of killed runs are removed here
    with scratch_dir("coacd") as tmp:
        inp, out = tmp / "in.npz", tmp / "out.npz"
        np.savez(inp, vertices=np.asarray(solid.vertices, np.float64), faces=np.asarray(solid.faces, np.int64),
                 params=np.array(json.dumps(params)))
        env = dict(os.environ)
        env[PARENT_ENV] = str(os.getpid())
        env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", _WORKER_MODULE, str(inp), str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=config.timeout_s, env=env,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:  # subprocess.run kills the child before raising
            raise CollisionError(
                f"{name}: CoACD ran past the timeout of {config.timeout_s:g} s and was killed ({hint}). Fix: raise "
                f"CollisionConfig.timeout_s, coarsen it (threshold=0.1, fewer mcts_iterations, lower "
                f"preprocess_resolution), simplify the mesh, or use method='convex'") from exc
        if proc.returncode != 0 or not out.is_file():
            how = (f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}")
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
            raise CollisionError(
                f"{name}: CoACD crashed ({how}; {hint}). Fix: try another seed or preprocess_resolution, leave "
                f"max_convex_hull at -1, repair/simplify the mesh, or use method='convex'."
                + (f" Last output: {' | '.join(tail)}" if tail else ""))
        with np.load(out, allow_pickle=False) as d:
            parts = [(d[f"v{i}"], d[f"f{i}"]) for i in range(int(d["count"]))]
    hulls = []
    for pv, _pf in parts:
        if len(pv) < 4:
            continue
        try:
            h = _canonical_hull(pv)
        except Exception as exc:  # a flat piece: qhull refuses it
            log.debug("%s: dropped a flat CoACD piece (%s)", name, exc)
            continue
        if h.volume > 0:
            hulls.append(h)
    if not hulls:
        raise CollisionError(f"{name}: CoACD returned no usable convex pieces ({hint}). Fix: lower threshold, "
                             f"check the mesh, or use method='convex'")
    return _sort_hulls(hulls)


def decompose_many(meshes: dict, config: CollisionConfig | None = None, cache_dir: Path | None = None) -> dict:
    """Decompose several meshes, ``config.workers`` at a time.

    Returns ``{id: CollisionResult | CollisionError}`` in the input order: one object's
    bad mesh, crash or timeout is returned as a :class:`CollisionError` for that id
    and the others still succeed.
    """
    config = config or CollisionConfig()

    def one(item):
        oid, mesh = item
        try:
            return decompose(mesh, config, cache_dir, name=oid)
        except CollisionError as exc:
            log.warning("%s", exc)
            return exc
        except Exception as exc:  # MeshError, or a bug: report it for this object only
            if not isinstance(exc, Real2SimError):
                log.exception("%s: unexpected error in collision", oid)
            err = CollisionError(f"{oid}: {exc}" if not str(exc).startswith(str(oid)) else str(exc))
            err.__cause__ = exc
            log.warning("%s", err)
            return err

    items = list(meshes.items())
    if config.workers <= 1 or len(items) <= 1:
        results = [one(it) for it in items]
    else:
        with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="collision") as pool:
            results = list(pool.map(one, items))
    return {oid: r for (oid, _), r in zip(items, results)}


def result_pieces(result: CollisionResult) -> list:
    """Convex meshes to draw: the hulls, or the primitive tessellated."""

    if result.kind == "hulls":
        return list(result.hulls)
    return [primitive_mesh(result.kind, result.size, result.pose)]


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")  # keep the suffix: PIL picks the format from it
    write(tmp)
    os.replace(tmp, path)


def write_result(result: CollisionResult, out_dir: Path) -> list[Path]:
    """Write ``hull_000.obj``... (hulls only), ``report.json`` and ``quality.png`` into ``out_dir``.

    Each file is written to a temp name and renamed; stale ``hull_NNN.obj`` from an
    earlier run with more hulls are removed. Returns the paths written.
    """

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for i, h in enumerate(result.hulls):
        p = out_dir / f"hull_{i:03d}.obj"
        _write_atomic(p, lambda t, h=h: write_obj(t, h.vertices, h.faces))
        written.append(p)
    keep = {p.name for p in written}
    for old in out_dir.glob("hull_[0-9][0-9][0-9].obj"):
        if old.name not in keep:
            old.unlink()
    doc = {"kind": result.kind, "hulls": [p.name for p in written], "size": [float(x) for x in result.size],
           "pose": np.asarray(result.pose, float).round(12).tolist(), "report": result.report}
    rp = out_dir / "report.json"
    _write_atomic(rp, lambda t: t.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n"))
    written.append(rp)
    qp = out_dir / "quality.png"
    _write_atomic(qp, lambda t: quality_picture(result.mesh, result_pieces(result), {**result.report, "kind": result.kind}, t))
    written.append(qp)
    return written


def collide_command(mesh_path: Path, out_dir: Path, config: CollisionConfig | None = None,
                    cache_dir: Path | None = None) -> CollisionResult:
    """``real2sim collide MESH --out DIR``: load, decompose, write; errors name the file."""

    mesh_path = Path(mesh_path)
    mesh = load_mesh(mesh_path)  # MeshError naming the file when unreadable
    result = decompose(mesh, config or CollisionConfig(), cache_dir, name=str(mesh_path))
    write_result(result, out_dir)
    return result
