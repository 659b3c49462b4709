"""Errors of the capture stage (frames, cameras, calibration, plates)."""
from __future__ import annotations

from real2sim.errors import Real2SimError


class CaptureError(Real2SimError):
    """Frames or a camera file cannot be read or are inconsistent; the message names the file and the fix."""


class CalibrationError(CaptureError):
    """Calibration failed (board not found, too few views or correspondences, degenerate geometry)."""
