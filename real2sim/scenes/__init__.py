"""Scene recipes: the bundled ones (``real2sim/scenes/<name>/recipe.json``) and those of installed packs.

A recipe folder holds ``recipe.json`` and the meshes and textures it names (see ``scenes/tabletop``). An installed
package adds scenes through the ``real2sim.scenes`` entry-point group; each entry point names the recipe folder
(a ``Path`` or ``str``, or a callable returning one)::

    [project.entry-points."real2sim.scenes"]
    my_kitchen = "my_pack.scenes:KITCHEN_DIR"
"""
from __future__ import annotations

import logging
from pathlib import Path

from real2sim.core.errors import UnknownNameError
from real2sim.core.plugins import load_entry_points

log = logging.getLogger(__name__)
BUILTIN_DIR = Path(__file__).resolve().parent
ENTRY_POINT_GROUP = "real2sim.scenes"


def scene_dirs() -> dict[str, Path]:
    """Scene name -> recipe folder, bundled scenes first, then installed packs' (which may not shadow them)."""
    out = {p.parent.name: p.parent for p in sorted(BUILTIN_DIR.glob("*/recipe.json"))}
    for name, value in load_entry_points(ENTRY_POINT_GROUP, (str, Path)):
        folder = Path(value)
        if not (folder / "recipe.json").is_file():
            log.warning("scene '%s' from an installed package: %s has no recipe.json; skipped", name, folder)
        elif name in out:
            log.warning("scene '%s' from an installed package has the name of a bundled scene; skipped", name)
        else:
            out[name] = folder
    return out


def list_scenes() -> list[str]:
    """Names of every known scene."""
    return list(scene_dirs())


def scene_recipe(name: str = "tabletop") -> Path:
    """``recipe.json`` of the scene called ``name`` (unknown names suggest close ones)."""
    dirs = scene_dirs()
    if name not in dirs:
        raise UnknownNameError("scene", name, dirs)
    return dirs[name] / "recipe.json"


__all__ = ["BUILTIN_DIR", "list_scenes", "scene_dirs", "scene_recipe"]
