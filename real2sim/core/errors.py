"""Error hierarchy. Every message names the file or field and says the fix."""
from __future__ import annotations

import difflib
from typing import Iterable


class Real2SimError(Exception):
    """Base class of every error real2sim raises on purpose."""


class BundleError(Real2SimError):
    """A scene bundle on disk is missing, malformed or inconsistent."""


class ManifestError(BundleError):
    """``scene.json`` is malformed: names the field and the expected value."""

    def __init__(self, path: str, field: str, problem: str, fix: str | None = None):
        self.path, self.field, self.problem = path, field, problem
        msg = f"{path}: field '{field}' {problem}"
        if fix:
            msg += f". Fix: {fix}"
        super().__init__(msg)


class MeshError(Real2SimError):
    """A mesh file cannot be read, is degenerate, or cannot be repaired."""


class CollisionError(Real2SimError):
    """Convex decomposition failed, crashed or ran past its time limit."""


class RobotError(Real2SimError):
    """A robot definition file or its URDF cannot be used: names the file, link or joint and the fix."""


class ExportError(Real2SimError):
    """An exporter could not write its scene, or its engine refused to load it."""


class UnsupportedCapability(Real2SimError):
    """A backend was asked for something it does not support (never faked)."""


class DependencyMissing(Real2SimError, ImportError):
    """An optional dependency is not installed; the message carries the install command."""


class UnknownNameError(Real2SimError, KeyError):
    """A name (object id, exporter, scene) is not known; suggests the closest ones."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3)
        msg = f"unknown {kind} '{name}'"
        if close:
            msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
        msg += f" Known: {', '.join(known) if known else '(none)'}"
        self.msg = msg
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.msg


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def require(module: str, extra: str, pip_name: str | None = None):
    """Import an optional dependency or raise :class:`DependencyMissing` with the fix."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        pip_name = pip_name or module
        raise DependencyMissing(
            f"'{module}' is needed here but could not be imported ({exc}). "
            f"Install it with: pip install 'real2sim[{extra}]' (or pip install {pip_name})"
        ) from exc


class CaptureError(Real2SimError):
    """Frames or a camera file cannot be read or are inconsistent; the message names the file and the fix."""


class CalibrationError(CaptureError):
    """Calibration failed (board not found, too few views or correspondences, degenerate geometry)."""


class ImageError(CaptureError):
    """An image or mask file is missing, unreadable or of the wrong size; the message names the file."""


class SegmentationError(Real2SimError):
    """A prompt or image cannot be segmented (bad prompt, missing plate, empty or full mask)."""


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
