"""Texture stage: rasteriser, object pose alignment (render-and-compare), multi-view texture back-projection.

Split like nvdiffrast so a GPU backend can slot in: :mod:`texture.raster` (rasterize: face id,
barycentrics, depth; backends 'gl' = moderngl/EGL and 'numpy'), :mod:`texture.interp`
(differentiable interpolate + texture sampling in torch), :mod:`texture.align` (pose alignment),
:mod:`texture.backproject` (splat, Adam refinement, UV-space fill), :mod:`texture.stage` (the bundle
stages 'alignment' and 'texture'), :mod:`real2sim.apps.cli.texture` (``add_parsers``). Importing this package
imports neither torch nor moderngl.
"""
from __future__ import annotations

__all__ = ["raster", "interp", "align", "backproject", "mesh", "stage", "cli", "report", "errors"]
