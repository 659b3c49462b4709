"""A robot-only scene in any engine (for sysid, tests and benchmarks), built through the normal exporters."""
from __future__ import annotations

import tempfile
from pathlib import Path

from real2sim.core.bundle import Bundle
from real2sim.core.manifest import RobotSpec
from real2sim.core.tempfiles import scratch_prefix
from real2sim.engines.registry import engine_for, get_exporter
from real2sim.robots import get_robot
from real2sim.robots.robotfile import install_in_bundle
from real2sim.robots.spec import is_file_robot


def robot_only_bundle(robot, root: Path | None = None, stiffness=None, damping=None, base_pose=None,
                      qpos=None) -> Bundle:
    """A bundle holding only ``robot`` (registry name, definition file path or RobotDef; a file robot is copied
    into the bundle's ``robot/``)."""
    r = get_robot(robot)
    # a process's sandboxes stay while it runs (its scenes may read them); the next run removes them after it
    root = Path(root or tempfile.mkdtemp(prefix=scratch_prefix("sandbox")))
    b = Bundle.create(root / "bundle", name=f"{r.name}_only", overwrite=True)
    b.manifest.robot = RobotSpec(name=r.name, joint_positions=list(map(float, r.default_qpos if qpos is None else qpos)),
                                 stiffness=None if stiffness is None else list(map(float, stiffness)),
                                 damping=None if damping is None else list(map(float, damping)),
                                 source="registry" if not is_file_robot(r) else r.source["definition"],
                                 definition=install_in_bundle(r, b.root))
    if base_pose is not None:
        b.manifest.robot.base_pose = base_pose
    b.save()
    return b


def robot_scene(robot, engine: str | None = None, root: Path | None = None, **kw):
    """Export a robot-only bundle with engine ``engine`` (default: the first that simulates) and load it (physics only)."""

    b = robot_only_bundle(robot, root, **kw)
    ex = get_exporter(engine or engine_for("physics").name)
    res = ex.export(b)
    try:
        return ex.load(res.main_file.parent, render=False)
    except TypeError:
        return ex.load(res.main_file.parent)
