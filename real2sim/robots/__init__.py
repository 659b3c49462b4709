"""Robot registry: one small declarative file per robot (``real2sim/robots/<name>.py`` with ``ROBOT``).

>>> from real2sim.robots import get_robot, robot_urdf
>>> r = get_robot("widowx")            # aliases work; unknown names suggest close matches
>>> urdf = robot_urdf(r)               # resolved, cached, self-contained URDF

Adding a robot: write ``real2sim/robots/<name>.py`` defining ``ROBOT = RobotDef(...)`` and add
its module name to ``ROBOT_MODULES``; or, from an installed package, advertise a :class:`RobotDef` (or a callable
returning one) under the ``real2sim.robots`` entry-point group::

    [project.entry-points."real2sim.robots"]
    my_arm = "my_pack.robots:MY_ARM"

or, without Python, a definition file (TOML/JSON, :mod:`real2sim.robots.robotfile`, docs/robots.md): any function
here that takes a robot name also takes the path of such a file (``get_robot("arms/my_arm.toml")``); a robot read
from a file is registered under its name for the rest of the process. A bundle or an export made with it carries a
copy (``robot/``) that :func:`robot_for_spec` and the engines' scene loaders read, never the original path.
"""
from __future__ import annotations

import importlib
import logging
from functools import lru_cache
from pathlib import Path

from real2sim.core.errors import RobotError, UnknownNameError
from real2sim.core.plugins import load_entry_points
from real2sim.robots.spec import RobotDef, cache_dir, resolve_urdf

ROBOT_MODULES = ("widowx250s", "panda")
PACKAGED_DEFINITIONS = ("google_robot",)
"""Definition files shipped in ``real2sim/robots/definitions/`` (their URDFs live where the user keeps them)."""
ENTRY_POINT_GROUP = "real2sim.robots"
log = logging.getLogger(__name__)
_FILE_ROBOTS: dict[str, RobotDef] = {}
"""Robots read from definition files in this process, by name."""


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


@lru_cache(maxsize=None)
def _packaged() -> dict[str, RobotDef]:
    """The shipped definition files, read without their URDF (resolved on first use, where a missing data folder
    is reported with the variable to set)."""
    from real2sim.robots.robotfile import load_robot_file

    out = {}
    for name in PACKAGED_DEFINITIONS:
        r = load_robot_file(Path(__file__).parent / "definitions" / f"{name}.toml", check_urdf=False)
        out[r.name] = r
    return out


def list_robots() -> list[str]:
    return sorted(set(_all()) | set(_packaged()) | set(_FILE_ROBOTS))


def _builtin_names() -> set[str]:
    return {n for r in (*_all().values(), *_packaged().values()) for n in (r.name, *r.aliases)}



def register_robot(robot: RobotDef) -> RobotDef:
    """Make a robot read from a definition file known by name (and aliases) for the rest of the process.

    A later definition with the same name replaces an earlier one (a file edited and read again); a name or alias
    of a built-in robot is refused (a shipped definition's name is allowed: a bundle's copy of it)."""
    clash = ({robot.name} | set(robot.aliases)) & _builtin_names() - {
        n for r in _packaged().values() for n in (r.name, *r.aliases)}
    if clash:
        raise RobotError(f"{robot.source.get('definition', robot.name)}: the name(s) {', '.join(sorted(clash))} belong "
                         "to a built-in robot. Fix: give the definition another 'name' (and 'aliases')")
    old = _FILE_ROBOTS.get(robot.name)
    if old is not None and old.fingerprint() != robot.fingerprint():
        log.debug("robot '%s' now read from %s", robot.name, robot.source.get("definition"))
    _FILE_ROBOTS[robot.name] = robot
    return robot


def get_robot(name: str | RobotDef) -> RobotDef:
    """The robot registered as ``name`` (or one of its aliases), or read from the definition file at ``name``."""
    if isinstance(name, RobotDef):
        return name
    from real2sim.robots.robotfile import load_robot_file, looks_like_robot_file

    if isinstance(name, Path) or looks_like_robot_file(name):
        return register_robot(load_robot_file(Path(name)))
    robots = _all()
    if name in robots:
        return robots[name]
    for r in robots.values():
        if name in r.aliases:
            return r
    for pool in (_packaged(), _FILE_ROBOTS):
        if name in pool:
            return pool[name]
        for r in pool.values():
            if name in r.aliases:
                return r
    known = (set(robots) | {a for r in robots.values() for a in r.aliases} | set(_FILE_ROBOTS)
             | {n for r in _packaged().values() for n in (r.name, *r.aliases)})
    raise UnknownNameError("robot", name, known)


def robot_ref(robot: str | RobotDef) -> str:
    """A string that names ``robot`` in any process: the definition file's path for a robot read from a file (a new
    process has not registered it), else its registry name (for worker processes, subprocess arguments)."""
    r = get_robot(robot)
    if r.source.get("kind") == "file" and r.name not in _packaged():
        return str(r.source["definition"])
    return r.name


def robot_for_spec(spec, root: Path | None = None) -> RobotDef:
    """The robot of a manifest ``RobotSpec``: its packaged definition (``spec.definition``, relative to the bundle or
    export folder ``root``) when it has one, else the registry robot ``spec.name``."""
    definition = getattr(spec, "definition", "")
    if not definition:
        return get_robot(spec.name)
    if root is None:
        if spec.name in _FILE_ROBOTS:
            return _FILE_ROBOTS[spec.name]
        raise RobotError(f"robot '{spec.name}' comes from the bundle's {definition}, and the caller did not say which "
                         "bundle. Fix: pass the bundle folder (internal error: please report it)")
    from real2sim.robots.robotfile import load_robot_file

    path = Path(root) / definition
    if not path.is_file():
        raise RobotError(f"{path}: the robot definition recorded in scene.json (robot.definition = {definition!r}) is "
                         "missing. Fix: re-run 'real2sim init DIR --robot FILE' (or restore the bundle's robot/ folder)")
    robot = load_robot_file(path, check_urdf=False)  # checked when the copy was made; resolved when first used
    if robot.name != spec.name:
        raise RobotError(f"{path}: defines robot '{robot.name}' but scene.json names '{spec.name}'. Fix: make the two "
                         "names agree")
    return register_robot(robot)


_URDFS: dict[str, Path] = {}


def robot_urdf(robot: str | RobotDef) -> Path:
    """Path of the robot's resolved URDF (cached under ``$REAL2SIM_CACHE/robots``)."""
    r = get_robot(robot)
    key = r.fingerprint() + str(cache_dir())
    p = _URDFS.get(key)
    if p is None or not p.is_file():  # first use, or cache wiped while running
        p = _URDFS[key] = resolve_urdf(r)
    return p


__all__ = ["RobotDef", "cache_dir", "get_robot", "list_robots", "register_robot", "robot_for_spec", "robot_ref",
           "robot_urdf"]
