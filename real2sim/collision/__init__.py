"""Collision geometry for simulated objects: primitive fits or CoACD convex decomposition.

Meshes are repaired first (merged, cleaned, closed with manifold3d), CoACD runs in a
subprocess bounded by ``CollisionConfig.timeout_s``, results are cached by content hash,
and every result carries a quality report (occupancy IoU, volume ratio, Hausdorff
distance) and can be written with a picture (``quality.png``).

Heavy dependencies (trimesh, coacd, manifold3d, scipy) are imported only when used.

- ``decompose(mesh, config, cache_dir, name=...) -> CollisionResult``: one ``trimesh.Trimesh`` (its own frame);
  raises ``MeshError`` for degenerate or unrepairable meshes and ``CollisionError`` when CoACD crashes or times out.
- ``decompose_many(meshes, config, cache_dir) -> {id: CollisionResult | CollisionError}``: ``config.workers`` in
  parallel; one failure never stops the rest.
- ``hull_quality(mesh, result_or_hulls, seed)``: hull count, volume ratio, occupancy IoU, relative Hausdorff distance.
- ``write_result(result, out_dir)``: ``hull_000.obj``..., ``report.json`` and ``quality.png``.
- ``collide_command(mesh_path, out_dir, config, cache_dir)``: ``real2sim collide MESH --out DIR``.
"""
from __future__ import annotations

from real2sim.collision.decomposition import collide_command, decompose, decompose_many, write_result
from real2sim.collision.quality import hull_quality
from real2sim.collision.types import CollisionConfig, CollisionResult

__all__ = ["CollisionConfig", "CollisionResult", "decompose", "decompose_many", "hull_quality", "write_result",
           "collide_command"]
