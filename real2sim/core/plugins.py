"""Entry-point discovery: installed packages extend real2sim's registries (engines, robots, scenes, segmenters).

A pack declares, in its own ``pyproject.toml``::

    [project.entry-points."real2sim.robots"]
    my_arm = "my_pack.robots:MY_ARM"

Each registry calls :func:`load_entry_points` with its group and the type it expects; an entry point may name
an object of that type or a callable returning one. A broken entry point is logged and skipped, never fatal:
one bad pack must not take the toolkit down.
"""
from __future__ import annotations

import logging
from importlib import metadata

log = logging.getLogger(__name__)


def load_entry_points(group: str, kind: type | tuple[type, ...] | None = None) -> list[tuple[str, object]]:
    """``(entry-point name, object)`` advertised under ``group``, sorted by name (a stable order).

    With ``kind``, an entry point naming a callable that is not of that type is called to get one."""
    out = []
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
            if kind is not None and not isinstance(obj, kind) and callable(obj):
                obj = obj()
            if kind is not None and not isinstance(obj, kind):
                raise TypeError(f"expected {kind}, got {type(obj).__name__}")
        except Exception as exc:  # noqa: BLE001 - a broken pack is reported and skipped
            log.warning("entry point '%s' in group '%s' (%s) could not be loaded: %s", ep.name, group, ep.value, exc)
            continue
        out.append((ep.name, obj))
    return out
