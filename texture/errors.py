"""Errors of the texture stage (pose alignment, rasterisation, texture back-projection)."""
from __future__ import annotations

from real2sim.errors import Real2SimError


class TextureStageError(Real2SimError):
    """Base class of the texture package's errors."""


class RasterError(TextureStageError):
    """A rasteriser backend is unavailable or was given bad input."""


class MaskError(TextureStageError):
    """An object mask is missing, empty or too small to align or texture from."""


class AlignmentError(TextureStageError):
    """Pose alignment did not converge; carries the numbers (IoU, residual)."""

    def __init__(self, message: str, iou: float | None = None, residual_px: float | None = None):
        self.iou, self.residual_px = iou, residual_px
        super().__init__(message)


class UVError(TextureStageError):
    """A mesh has no UVs and could not be unwrapped."""
