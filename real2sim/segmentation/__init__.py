"""Segmentation: prompts (clicks, boxes) -> object masks; several backends behind one interface.

``segment(image, Prompt(points=[(x, y)], box=None), plate=None, backend="auto") -> (h, w) bool``.
See :mod:`segmentation.core` for the backends and :mod:`segmentation.propagate` for propagation.
"""
from __future__ import annotations

from real2sim.core.errors import SegmentationError
from real2sim.core.plugins import load_entry_points
from real2sim.segmentation.core import (
    BACKENDS,
    LOW_CONFIDENCE,
    MaskResult,
    Prompt,
    register_backend,
    segment,
    segment_result,
)
from real2sim.segmentation.difference import (
    DifferenceConfig,
    change_maps,
    difference,
    difference_layers,
    difference_mask,
    difference_result,
)
from real2sim.segmentation.grabcut import GrabCutConfig, grabcut, grabcut_result
from real2sim.segmentation.propagate import (
    PropagateConfig,
    Propagation,
    propagate,
    propagate_many,
)
from real2sim.segmentation.sam import SamBackend, sam
from real2sim.segmentation.stage import segment_stage

ENTRY_POINT_GROUP = "real2sim.segmenters"
"""Installed packs add backends here: ``name = "my_pack.seg:segment"`` with ``segment(image, prompt, plate=None)``."""

register_backend("difference", difference, difference_result)
register_backend("grabcut", grabcut, grabcut_result, moved_clicks=2)
register_backend("sam", sam)
for _name, _backend in load_entry_points(ENTRY_POINT_GROUP):  # installed packs: fn(image, prompt, plate=None) -> mask
    register_backend(_name, _backend)

__all__ = ["BACKENDS", "LOW_CONFIDENCE", "MaskResult", "Prompt", "SegmentationError", "register_backend", "segment",
           "segment_result", "difference", "difference_layers", "difference_result", "change_maps",
           "difference_mask", "DifferenceConfig", "grabcut", "grabcut_result", "GrabCutConfig", "propagate", "propagate_many", "Propagation",
           "PropagateConfig",
           "SamBackend", "sam", "segment_stage"]

