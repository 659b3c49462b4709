"""Exporters: MJCF (MuJoCo), USD (UsdPhysics + UsdShade) and SAPIEN 3.

Every exporter writes into ``exports/<name>/`` of a bundle and loads its own output
back in its engine (``Exporter.load``), failing loudly if the engine refuses it.
Engines are imported lazily, inside the backend modules.
"""
from __future__ import annotations

import importlib

from real2sim.core.errors import UnknownNameError
from real2sim.engines.base import Exporter, ExportResult, LoadedScene

# name -> "module:Class"; resolved on first use so that importing export/ stays light.
EXPORTERS = {
    "mjcf": "real2sim.engines.mujoco:MjcfExporter",
    "usd": "real2sim.engines.usd:UsdExporter",
    "sapien": "real2sim.engines.sapien:SapienExporter",
}


def get_exporter(name: str) -> Exporter:
    """Instantiate the exporter registered as ``name`` ('mjcf', 'usd', 'sapien')."""
    if name not in EXPORTERS:
        raise UnknownNameError("exporter", name, EXPORTERS)
    module, cls = EXPORTERS[name].split(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = ["EXPORTERS", "Exporter", "ExportResult", "LoadedScene", "get_exporter"]
