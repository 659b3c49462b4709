"""Simulation engines: MJCF (MuJoCo), SAPIEN 3 and USD, behind one registry.

Each engine has a writer (``engines/<engine>/writer.py``: writes ``exports/<name>/`` and loads its own output back,
failing loudly if the engine refuses it) and a runtime scene (``engines/<engine>/scene.py``: the engine-neutral
:class:`LoadedScene` over the loaded files). :mod:`real2sim.engines.registry` is the only place engine names
appear; engines are imported lazily, on first use. A hybrid (``--backend PHYSICS+IMAGES``, e.g. MuJoCo physics with
SAPIEN pictures) composes two loaded exports (:mod:`real2sim.engines.hybrid`).
"""
from __future__ import annotations

from real2sim.engines.base import Exporter, ExportResult, LoadedScene
from real2sim.engines.hybrid import HybridScene
from real2sim.engines.registry import (
    CAPABILITIES,
    EngineSpec,
    backend_names,
    compose,
    engine_for,
    engine_names,
    engines,
    get_engine,
    get_exporter,
    hybrid_names,
    load_scene,
    register_engine,
    simulator_names,
)

__all__ = ["CAPABILITIES", "EngineSpec", "Exporter", "ExportResult", "HybridScene", "LoadedScene", "backend_names",
           "compose", "engine_for", "engine_names", "engines", "get_engine", "get_exporter", "hybrid_names",
           "load_scene", "register_engine", "simulator_names"]
