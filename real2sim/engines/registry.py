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
    parts: tuple[str, ...] = ()
    """A composition's engines, (physics, images) registry names; empty for an engine of its own (see
    :func:`compose`)."""

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

HYBRID_SEPARATOR = "+"
"""``PHYSICS+IMAGES`` names a composition: ``--backend mujoco+sapien`` simulates in MuJoCo and draws in SAPIEN."""

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


def compose(physics: str, images: str) -> EngineSpec:
    """The hybrid of two engines: physics (and robot, mass) from ``physics``, pictures (render, depth, segmentation,
    appearance, projection) from ``images``, the render scene posed from the physics scene before every picture
    (:class:`real2sim.engines.hybrid.HybridScene`). It has no export of its own: it loads both engines' exports.
    Raises :class:`UnsupportedCapability` when ``physics`` does not simulate or ``images`` does not render."""
    from real2sim.engines.hybrid import IMAGE_CAPABILITIES, PHYSICS_CAPABILITIES

    p, r = get_engine(physics), get_engine(images)
    if p.parts or r.parts:
        raise UnsupportedCapability(f"'{physics}{HYBRID_SEPARATOR}{images}': a hybrid is made of two engines, "
                                    "not of hybrids")
    if p.name == r.name:
        raise UnsupportedCapability(f"'{physics}{HYBRID_SEPARATOR}{images}': both halves are {p.title}; use "
                                    f"--backend {p.simulator or p.name}")
    if "physics" not in p.capabilities:
        raise UnsupportedCapability(f"{p.title} does not simulate, so it cannot be a hybrid's physics "
                                    f"(engines that do: {', '.join(simulator_names())})")
    if "render" not in r.capabilities:
        raise UnsupportedCapability(f"{r.title} does not render, so it cannot draw a hybrid's pictures "
                                    f"(engines that do: {', '.join(engine_names('render'))})")
    sim = HYBRID_SEPARATOR.join(x.simulator or x.name for x in (p, r))
    alias = HYBRID_SEPARATOR.join((p.name, r.name))
    return EngineSpec(name=alias, title=f"{p.title} physics + {r.title} images", exporter="", simulator=sim,
                      aliases=tuple({alias} - {sim}),
                      capabilities=frozenset((p.capabilities & PHYSICS_CAPABILITIES)
                                             | (r.capabilities & IMAGE_CAPABILITIES)),
                      environment={**r.environment, **p.environment}, rank=1000 + p.rank + r.rank,
                      parts=(p.name, r.name))


def hybrid_names() -> list[str]:
    """Simulator names of every hybrid the registered engines make (``--backend`` choices beyond the engines')."""
    sims = [s for s in engines() if "physics" in s.capabilities and s.simulator]
    return [compose(p.name, r.name).simulator for p in sims for r in engines()
            if r.name != p.name and "render" in r.capabilities]


def backend_names() -> list[str]:
    """Every ``--backend`` an evaluation accepts: the simulating engines, then the hybrids."""
    return simulator_names() + hybrid_names()


def get_engine(name: str) -> EngineSpec:
    """The engine called ``name`` (registry name, simulator name or alias; ``A+B`` for the hybrid of A's physics and
    B's images, see :func:`compose`); unknown names suggest close ones."""
    if HYBRID_SEPARATOR in name:
        physics, _, images = name.partition(HYBRID_SEPARATOR)
        return compose(physics.strip(), images.strip())
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
    if spec.parts:
        raise UnsupportedCapability(f"'{name}' is a hybrid ({spec.title}): it has no files of its own; it loads the "
                                    f"exports of {' and '.join(spec.parts)}")
    prepare_environment(spec)
    module, cls = spec.exporter.split(":")
    return getattr(importlib.import_module(module), cls)()


def load_scene(name: str, export_dir, **kwargs) -> LoadedScene:
    """Load an export folder in the engine called ``name`` (``kwargs`` go to the exporter's ``load``)."""
    return get_exporter(name).load(export_dir, **kwargs)
