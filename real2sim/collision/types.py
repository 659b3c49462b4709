"""Config and result types of the collision stage (no heavy imports here)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from real2sim.core.errors import UnknownNameError

METHODS = ("auto", "coacd", "convex", "primitive")
RESULT_KINDS = ("hulls", "box", "cylinder", "sphere")


@dataclass
class CollisionConfig:
    """How to turn one visual mesh into collision geometry."""

    method: str = "auto"
    """'auto' (a primitive when it fits well enough, else CoACD), 'coacd', 'convex' (one hull) or 'primitive' (best primitive, whatever its fit)."""
    threshold: float = 0.05
    """CoACD concavity threshold: smaller = more, tighter hulls (0.1 for coarse)."""
    max_convex_hull: int = -1
    """CoACD hull limit; -1 = no limit. Avoid small values: quality loss and a known CoACD crash."""
    mcts_iterations: int = 60
    """CoACD MCTS iterations (60 is about twice as fast as CoACD's 150 at equal quality here)."""
    mcts_max_depth: int = 2
    """CoACD MCTS depth."""
    preprocess_resolution: int = 50
    """CoACD manifold-preprocess voxel resolution."""
    seed: int = 0
    """Random seed for CoACD and for the quality sampling: same mesh + config -> same bytes."""
    timeout_s: float = 120.0
    """Per-object time limit of the CoACD subprocess; it is killed after this."""
    primitive_iou: float = 0.97
    """'auto' accepts a box/cylinder/sphere when its occupancy IoU with the mesh is at least this."""
    workers: int = 2
    """Objects decomposed in parallel (each CoACD run is its own process); does not change the result."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:

            raise UnknownNameError("collision method", str(self.method), METHODS)
        if self.timeout_s <= 0:
            raise ValueError(f"CollisionConfig.timeout_s must be > 0 (got {self.timeout_s})")
        if self.workers < 1:
            raise ValueError(f"CollisionConfig.workers must be >= 1 (got {self.workers})")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"CollisionConfig.threshold must be in (0, 1] (got {self.threshold})")

    def cache_fields(self) -> dict[str, Any]:
        """The fields that change the result (the cache key is built from these)."""
        return {k: getattr(self, k) for k in ("method", "threshold", "max_convex_hull", "mcts_iterations",
                                              "mcts_max_depth", "preprocess_resolution", "seed", "primitive_iou")}

    def coacd_params(self) -> dict[str, Any]:
        """Keyword arguments for ``coacd.run_coacd``."""
        return {"threshold": float(self.threshold), "max_convex_hull": int(self.max_convex_hull),
                "mcts_iterations": int(self.mcts_iterations), "mcts_max_depth": int(self.mcts_max_depth),
                "preprocess_resolution": int(self.preprocess_resolution), "seed": int(self.seed)}


@dataclass
class CollisionResult:
    """Collision geometry of one object, in the mesh's frame."""

    kind: str
    """'hulls', 'box', 'cylinder' or 'sphere'."""
    hulls: list = field(default_factory=list)
    """Convex pieces (``trimesh.Trimesh``) for kind 'hulls'; empty for primitives."""
    size: list = field(default_factory=list)
    """box: half extents (3); cylinder: [radius, half_height] (axis = local Z of ``pose``); sphere: [radius]."""
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    """(4, 4) primitive pose in the mesh frame (identity for hulls)."""
    report: dict = field(default_factory=dict)
    """Quality numbers (hull_count, volume_ratio, occupancy_iou, hausdorff_rel) + method, seconds, cache_hit, repair notes."""
    mesh: Any = field(default=None, repr=False, compare=False)
    """The (repaired) mesh it was computed from, kept for the quality picture; may be None."""
