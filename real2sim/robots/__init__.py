"""Robot registry: one small declarative file per robot (``real2sim/robots/<name>.py`` with ``ROBOT``).

>>> from real2sim.robots import get_robot, robot_urdf
>>> r = get_robot("widowx")            # aliases work; unknown names suggest close matches
>>> urdf = robot_urdf(r)               # resolved, cached, self-contained URDF

Adding a robot: write ``real2sim/robots/<name>.py`` defining ``ROBOT = RobotDef(...)`` and add
its module name to ``ROBOT_MODULES``; or, from an installed package, advertise a :class:`RobotDef` (or a callable
returning one) under the ``real2sim.robots`` entry-point group::

    [project.entry-points."real2sim.robots"]
    my_arm = "my_pack.robots:MY_ARM"
"""
from __future__ import annotations

import importlib
import logging
from functools import lru_cache
from pathlib import Path

from real2sim.core.errors import UnknownNameError
from real2sim.core.plugins import load_entry_points
from real2sim.robots.spec import RobotDef, cache_dir, resolve_urdf

ROBOT_MODULES = ("widowx250s", "panda")
ENTRY_POINT_GROUP = "real2sim.robots"
log = logging.getLogger(__name__)


@lru_cache(maxsize=None)
def _all() -> dict[str, RobotDef]:
    out = {}
    for mod in ROBOT_MODULES:
        r = importlib.import_module(f"{__name__}.{mod}").ROBOT
        out[r.name] = r
    for _, r in load_entry_points(ENTRY_POINT_GROUP, RobotDef):
        if r.name in out:
            log.warning("robot '%s' from an installed package replaces the built-in one", r.name)
        out[r.name] = r
    return out


def list_robots() -> list[str]:
    return sorted(_all())


def get_robot(name: str | RobotDef) -> RobotDef:
    """The robot registered as ``name`` (or one of its aliases)."""
    if isinstance(name, RobotDef):
        return name
    robots = _all()
    if name in robots:
        return robots[name]
    for r in robots.values():
        if name in r.aliases:
            return r
    known = set(robots) | {a for r in robots.values() for a in r.aliases}
    raise UnknownNameError("robot", name, known)


@lru_cache(maxsize=None)
def _urdf(name: str) -> Path:
    return resolve_urdf(get_robot(name))


def robot_urdf(robot: str | RobotDef) -> Path:
    """Path of the robot's resolved URDF (cached under ``$REAL2SIM_CACHE/robots``)."""
    r = get_robot(robot)
    p = _urdf(r.name)
    if not p.is_file():  # cache wiped while running
        _urdf.cache_clear()
        p = _urdf(r.name)
    return p


__all__ = ["RobotDef", "cache_dir", "get_robot", "list_robots", "robot_urdf"]
