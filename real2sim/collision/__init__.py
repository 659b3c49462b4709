"""Collision geometry for simulated objects: primitive fits or CoACD convex decomposition.

Meshes are repaired first (merged, cleaned, closed with manifold3d), CoACD runs in a
subprocess bounded by ``CollisionConfig.timeout_s``, results are cached by content hash,
and every result carries a quality report (occupancy IoU, volume ratio, Hausdorff
distance) and can be written with a picture (``quality.png``).

Heavy dependencies (trimesh, coacd, manifold3d, scipy) are imported only when used.
"""
from __future__ import annotations

from pathlib import Path

from real2sim.collision.types import CollisionConfig, CollisionResult

__all__ = ["CollisionConfig", "CollisionResult", "decompose", "decompose_many", "hull_quality", "write_result",
           "collide_command"]


def decompose(mesh, config: CollisionConfig | None = None, cache_dir: Path | None = None, *,
              name: str | None = None) -> CollisionResult:
    """Collision geometry for one ``trimesh.Trimesh`` (in its own frame).

    ``name`` (default: the mesh's file path, else 'mesh') is used in errors and the report.
    Raises ``real2sim.core.errors.MeshError`` for degenerate or unrepairable meshes and
    ``real2sim.core.errors.CollisionError`` when CoACD crashes or times out.
    """
    from real2sim.collision.decomposition import decompose as _impl

    return _impl(mesh, config, cache_dir, name=name)


def decompose_many(meshes: dict, config: CollisionConfig | None = None, cache_dir: Path | None = None) -> dict:
    """``{id: CollisionResult | CollisionError}``; ``config.workers`` objects in parallel, one failure never stops the rest."""
    from real2sim.collision.decomposition import decompose_many as _impl

    return _impl(meshes, config, cache_dir)


def hull_quality(mesh, result_or_hulls, seed: int = 0) -> dict:
    """``hull_count``, ``volume_ratio``, ``occupancy_iou``, ``hausdorff_rel`` of a result or list of hulls vs a watertight mesh."""
    from real2sim.collision.quality import hull_quality as _impl

    return _impl(mesh, result_or_hulls, seed=seed)


def write_result(result: CollisionResult, out_dir: Path) -> list[Path]:
    """Write ``hull_000.obj``..., ``report.json`` and ``quality.png`` into ``out_dir``; returns the paths."""
    from real2sim.collision.decomposition import write_result as _impl

    return _impl(result, out_dir)


def collide_command(mesh_path: Path, out_dir: Path, config: CollisionConfig | None = None,
                    cache_dir: Path | None = None) -> CollisionResult:
    """The CLI's ``real2sim collide MESH --out DIR``: load, decompose, write; errors name the file."""
    from real2sim.collision.decomposition import collide_command as _impl

    return _impl(mesh_path, out_dir, config, cache_dir)
