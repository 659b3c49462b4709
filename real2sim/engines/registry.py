"""The engine registry: the one place that names simulation engines.

Each engine is one :class:`EngineSpec`: its name (the export folder, ``exports/<name>/``), the name users call
it by when simulating (``simulator``), aliases, the exporter that writes and loads its files, what its loaded
scenes can do (``capabilities``) and the environment it needs before its module is imported. Everything else in
real2sim asks this registry ("which engines simulate?", "which one renders robot masks?") instead of spelling
engine names.

Installed packages add engines through the ``real2sim.engines`` entry-point group: each entry point is an
:class:`EngineSpec` or a callable returning one::

    [project.entry-points."real2sim.engines"]
    myengine = "my_pack.engine:SPEC"
"""
from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field

from real2sim.core.errors import UnknownNameError, UnsupportedCapability
from real2sim.core.plugins import load_entry_points
from real2sim.engines.base import Exporter, LoadedScene

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "real2sim.engines"


@dataclass(frozen=True)
class EngineSpec:
    """One simulation engine as real2sim knows it."""

    name: str
    """Registry key and export folder (``exports/<name>/``), e.g. ``"mjcf"``."""
    title: str
    """Human name for tables and pages, e.g. ``"MuJoCo (MJCF)"``."""
    exporter: str
    """``"module:Class"`` of its :class:`Exporter` (imported on first use, so the registry stays light)."""
    simulator: str | None = None
    """The name an evaluation backend is called by (``--backend mujoco``); None when it does not simulate."""
    aliases: tuple[str, ...] = ()
    """Other names accepted for it (``"mujoco"`` for ``"mjcf"``)."""
    capabilities: frozenset[str] = frozenset()
    """What its loaded scenes can do, a subset of :data:`CAPABILITIES`."""
    environment: dict[str, str] = field(default_factory=dict)
    """Environment variables set (if unset) before its module is imported, e.g. ``MUJOCO_GL=egl``."""
    rank: int = 100
    """Order when several engines offer a capability (lower first): the default engine for a job."""

    def all_names(self) -> tuple[str, ...]:
        return (self.name, *((self.simulator,) if self.simulator else ()), *self.aliases)


CAPABILITIES = frozenset({
    "physics",      # steps rigid-body dynamics (episodes, drop tests)
    "render",       # colour images from bundle cameras
    "depth",        # depth images
    "segmentation", # per-object / robot masks from the renderer
    "robot",        # articulated robot with joint control
    "appearance",   # lighting scale and colour tints at run time
    "mass",         # reports mass properties of loaded bodies
    "project",      # projects world points through bundle cameras
    "preview",      # cheap to load and re-pose for interactive previews
})

BUILTIN = (
    EngineSpec(name="mjcf", title="MuJoCo (MJCF)", simulator="mujoco", aliases=("mj",),
               exporter="real2sim.engines.mujoco.writer:MjcfExporter",
               capabilities=frozenset({"physics", "render", "depth", "segmentation", "robot", "appearance", "mass",
                                       "project", "preview"}),
               environment={"MUJOCO_GL": "egl"}, rank=0),
    EngineSpec(name="sapien", title="SAPIEN 3", simulator="sapien",
               exporter="real2sim.engines.sapien.writer:SapienExporter",
               capabilities=frozenset({"physics", "render", "depth", "segmentation", "robot", "appearance", "mass",
                                       "project"}),
               rank=10),
    EngineSpec(name="usd", title="OpenUSD (UsdPhysics + UsdShade)", aliases=("openusd", "usda"),
               exporter="real2sim.engines.usd.writer:UsdExporter",
               capabilities=frozenset({"mass", "project"}), rank=20),
)

_REGISTRY: dict[str, EngineSpec] | None = None


def _registry() -> dict[str, EngineSpec]:
    global _REGISTRY
    if _REGISTRY is None:
        reg = {s.name: s for s in BUILTIN}
        for _, spec in load_entry_points(ENTRY_POINT_GROUP, EngineSpec):
            if spec.name in reg:
                log.warning("engine '%s' from an installed package replaces the built-in one", spec.name)
            reg[spec.name] = spec
        _REGISTRY = reg
    return _REGISTRY


def register_engine(spec: EngineSpec) -> None:
    """Add (or replace) an engine at run time."""
    unknown = spec.capabilities - CAPABILITIES
    if unknown:
        raise UnknownNameError("engine capability", sorted(unknown)[0], CAPABILITIES)
    _registry()[spec.name] = spec


def engines() -> list[EngineSpec]:
    """Every registered engine, in rank order."""
    return sorted(_registry().values(), key=lambda s: (s.rank, s.name))


def engine_names(capability: str | None = None) -> list[str]:
    """Registry names (export folders) of the engines, optionally only those with ``capability``."""
    return [s.name for s in engines() if capability is None or capability in s.capabilities]


def simulator_names() -> list[str]:
    """Names of the engines that simulate episodes (``--backend`` choices)."""
    return [s.simulator for s in engines() if s.simulator and "physics" in s.capabilities]


def get_engine(name: str) -> EngineSpec:
    """The engine called ``name`` (registry name, simulator name or alias); unknown names suggest close ones."""
    reg = _registry()
    if name in reg:
        return reg[name]
    for spec in reg.values():
        if name in spec.all_names():
            return spec
    raise UnknownNameError("engine", name, {n for s in reg.values() for n in s.all_names()})


def engine_for(capability: str) -> EngineSpec:
    """The default engine for a job: the lowest-ranked one offering ``capability``."""
    for spec in engines():
        if capability in spec.capabilities:
            return spec
    raise UnsupportedCapability(f"no registered engine offers '{capability}' (engines: {', '.join(engine_names())})")


def prepare_environment(spec: EngineSpec) -> None:
    """Set the engine's environment variables (unless the user set them) before its module is imported."""
    for key, value in spec.environment.items():
        os.environ.setdefault(key, value)


def get_exporter(name: str) -> Exporter:
    """A fresh :class:`Exporter` of the engine called ``name``."""
    spec = get_engine(name)
    prepare_environment(spec)
    module, cls = spec.exporter.split(":")
    return getattr(importlib.import_module(module), cls)()


def load_scene(name: str, export_dir, **kwargs) -> LoadedScene:
    """Load an export folder in the engine called ``name`` (``kwargs`` go to the exporter's ``load``)."""
    return get_exporter(name).load(export_dir, **kwargs)
