"""On-disk cache of collision results: ``<cache_dir>/<key>.npz`` (hulls, primitive, report)."""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from real2sim.collision.types import CollisionConfig, CollisionResult
from real2sim.core.bundle import hash_bytes
from real2sim.core.tempfiles import sweep_temp_files, temp_file_prefix

log = logging.getLogger(__name__)

CACHE_VERSION = 1


def cache_key(mesh, config: CollisionConfig) -> str:
    """Hash of the input mesh's vertices and faces and of the config fields that change the result."""
    v = np.ascontiguousarray(np.asarray(mesh.vertices, dtype="<f8"))
    f = np.ascontiguousarray(np.asarray(mesh.faces, dtype="<i8"))
    cfg = json.dumps({"cache_version": CACHE_VERSION, **config.cache_fields()}, sort_keys=True)
    return hash_bytes(v.tobytes(), f.tobytes(), cfg.encode())


def cache_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / f"{key}.npz"


def load(cache_dir: Path, key: str) -> CollisionResult | None:
    """The cached result for ``key``, or None (a missing or unreadable entry is a miss)."""
    import trimesh

    path = cache_path(cache_dir, key)
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as d:
            n = int(d["count"])
            hulls = [trimesh.Trimesh(d[f"v{i}"], d[f"f{i}"], process=False) for i in range(n)]
            return CollisionResult(kind=str(d["kind"]), hulls=hulls, size=[float(x) for x in d["size"]],
                                   pose=np.array(d["pose"], float), report=json.loads(str(d["report"])))
    except Exception as exc:  # a corrupt entry is recomputed, never fatal
        log.warning("collision cache entry %s is unreadable (%s); recomputing", path, exc)
        return None


def store(cache_dir: Path, key: str, result: CollisionResult) -> Path:
    """Write ``result`` atomically (temp file + ``os.replace``)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    arrays = {"count": np.array(len(result.hulls)), "kind": np.array(result.kind),
              "size": np.asarray(result.size, float), "pose": np.asarray(result.pose, float),
              "report": np.array(json.dumps(result.report, sort_keys=True))}
    for i, h in enumerate(result.hulls):
        arrays[f"v{i}"] = np.asarray(h.vertices, float)
        arrays[f"f{i}"] = np.asarray(h.faces, np.int64)
    path = cache_path(cache_dir, key)
    sweep_temp_files(cache_dir, path.name)
    fd, tmp = tempfile.mkstemp(prefix=temp_file_prefix(path.name), suffix=".tmp", dir=cache_dir)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
