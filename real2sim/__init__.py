"""real2sim: real camera frames of a robot workcell -> a matched, evaluable simulated scene.

The package import is light: engines (MuJoCo, SAPIEN, USD), CoACD and Gradio are
imported only by the functions that need them.
"""
from __future__ import annotations

import logging

from real2sim.core.bundle import Bundle  # noqa: E402
from real2sim.core.camera import Camera  # noqa: E402
from real2sim.core.errors import (  # noqa: E402
    BundleError,
    CollisionError,
    DependencyMissing,
    ExportError,
    ManifestError,
    MeshError,
    Real2SimError,
    UnknownNameError,
    UnsupportedCapability,
)
from real2sim.core.manifest import Manifest, ObjectSpec, Pose  # noqa: E402
from real2sim.core.version import __version__  # noqa: E402

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "Bundle", "Camera", "Manifest", "ObjectSpec", "Pose", "Real2SimError", "BundleError", "ManifestError",
    "MeshError", "CollisionError", "ExportError", "UnsupportedCapability", "DependencyMissing", "UnknownNameError",
    "__version__",
]
