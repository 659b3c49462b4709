"""Physics from one engine, images from another: a :class:`LoadedScene` composed of two loaded exports of one bundle.

:class:`HybridScene` steps, poses and reports the *physics* scene; before each picture it copies the physics state
into the *render* scene (pose sync: every movable object's world pose, every articulated object's joint positions and
the robot's joint positions; fixed objects sit where both exports put them) and asks the render scene for colour, depth, masks and projections. Appearance
changes (lights, tints) go to the render scene. The render scene is never stepped.

The composition is checked when it is made, so that a scene is refused instead of shown wrong: the renderer must
offer "render", the two scenes must hold the same objects, the same robot with the same joints, and the fixed
objects at the same poses. Which engines can be composed (and under which names) is declared in
:mod:`real2sim.engines.registry`.
"""
from __future__ import annotations

import numpy as np

from real2sim.core.errors import UnsupportedCapability
from real2sim.engines.base import LoadedScene

PHYSICS_CAPABILITIES = frozenset({"physics", "robot", "mass", "articulation"})
"""What a hybrid takes from its physics scene."""
IMAGE_CAPABILITIES = frozenset({"render", "depth", "segmentation", "appearance", "project"})
"""What a hybrid takes from its render scene."""
FIXED_POSE_TOLERANCE_M = 1e-5


class HybridScene(LoadedScene):
    """``physics`` simulates, ``renderer`` draws (see the module docstring)."""

    def __init__(self, physics: LoadedScene, renderer: LoadedScene, name: str = "", fixed_ids=()):
        check_composable(physics, renderer, fixed_ids)
        self.physics, self.renderer = physics, renderer
        self.engine = name or f"{physics.engine}+{renderer.engine}"
        self.capabilities = frozenset((physics.capabilities & PHYSICS_CAPABILITIES)
                                      | (renderer.capabilities & IMAGE_CAPABILITIES))
        self._robot = getattr(physics, "_robot", None)
        self._movable = [o for o in physics.object_ids() if o not in set(fixed_ids)]
        self._articulated = [o for o in physics.object_ids() if physics.object_joint_names(o)]
        self._synced = False
        self.syncs = 0
        """Pose syncs done (one per picture taken after the physics state changed)."""

    # -- pose sync ----------------------------------------------------------------------------------
    def _changed(self) -> None:
        self._synced = False

    def sync(self) -> None:
        """Copy the physics state (movable object poses, robot joints) into the render scene, if it changed."""
        if self._synced:
            return
        for oid in self._movable:
            self.renderer.set_object_pose(oid, self.physics.object_pose(oid))
        for oid in self._articulated:  # a drawer pulled open in the physics is drawn open
            self.renderer.set_object_joint_positions(oid, self.physics.object_joint_positions(oid))
        if "robot" in self.physics.capabilities:
            self.renderer.set_robot_qpos(self.physics.robot_qpos())
        self._synced = True
        self.syncs += 1

    # -- physics and state: the physics scene ----------------------------------------------------------
    def object_ids(self) -> list[str]:
        return self.physics.object_ids()

    def object_pose(self, oid: str) -> np.ndarray:
        return self.physics.object_pose(oid)

    def mass_properties(self, oid: str):
        return self.physics.mass_properties(oid)

    def step(self, seconds: float) -> None:
        self.physics.step(seconds)
        self._changed()

    def step_physics(self, n: int) -> None:
        self.physics.step_physics(n)
        self._changed()

    @property
    def physics_timestep(self) -> float:
        return self.physics.physics_timestep

    def set_physics_timestep(self, dt: float) -> None:
        self.physics.set_physics_timestep(dt)

    def set_object_pose(self, oid: str, pose) -> None:
        self.physics.set_object_pose(oid, pose)
        self._changed()

    def reset_state(self) -> None:
        self.physics.reset_state()
        self._changed()

    def object_joint_names(self, oid: str) -> list[str]:
        return self.physics.object_joint_names(oid)

    def object_joint_positions(self, oid: str) -> dict[str, float]:
        return self.physics.object_joint_positions(oid)

    def set_object_joint_positions(self, oid: str, positions: dict) -> None:
        self.physics.set_object_joint_positions(oid, positions)
        self._changed()

    def set_object_joint_force(self, oid: str, joint: str, force: float) -> None:
        self.physics.set_object_joint_force(oid, joint, force)

    def robot_name(self) -> str:
        return self.physics.robot_name()

    def robot_joint_names(self) -> list[str]:
        return self.physics.robot_joint_names()

    def robot_qpos(self) -> np.ndarray:
        return self.physics.robot_qpos()

    def robot_qvel(self) -> np.ndarray:
        return self.physics.robot_qvel()

    def set_robot_qpos(self, q) -> None:
        self.physics.set_robot_qpos(q)
        self._changed()

    def set_joint_targets(self, q) -> None:
        self.physics.set_joint_targets(q)

    def set_joint_gains(self, stiffness, damping) -> None:
        self.physics.set_joint_gains(stiffness, damping)

    def link_pose(self, link: str) -> np.ndarray:
        return self.physics.link_pose(link)

    def robot_base_pose(self) -> np.ndarray:
        return self.physics.robot_base_pose()

    # -- images: the render scene, after a pose sync ---------------------------------------------------
    def project(self, camera: str, points) -> np.ndarray:
        self.require("project")
        return self.renderer.project(camera, points)

    def render(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("render")
        self.sync()
        return self.renderer.render(camera, size=size)

    def depth(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("depth")
        self.sync()
        return self.renderer.depth(camera, size=size)

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        self.require("render")
        self.sync()
        return self.renderer.object_mask(camera, oid)

    def robot_mask(self, camera: str) -> np.ndarray:
        self.require("render")
        self.sync()
        return self.renderer.robot_mask(camera)

    def foreground_mask(self, camera: str, oids, robot: bool = True, size: tuple[int, int] | None = None) -> np.ndarray:
        self.require("render")
        self.sync()
        return self.renderer.foreground_mask(camera, oids, robot, size=size)

    def render_layers(self, camera: str, oids, robot: bool = True, depth: bool = False,
                      size: tuple[int, int] | None = None):
        self.require("render")
        self.sync()
        return self.renderer.render_layers(camera, oids, robot, depth=depth, size=size)

    def set_lighting(self, scale: float, unlit: bool = False) -> None:
        self.require("appearance")
        self.renderer.set_lighting(scale, unlit=unlit)

    def set_tint(self, target: str, rgb) -> None:
        self.require("appearance")
        self.renderer.set_tint(target, rgb)

    def close(self) -> None:
        self.physics.close()
        self.renderer.close()


def check_composable(physics: LoadedScene, renderer: LoadedScene, fixed_ids=()) -> None:
    """Raise :class:`UnsupportedCapability` naming what the render scene cannot show of the physics scene."""
    who = f"physics from {physics.engine}, images from {renderer.engine}"
    if "physics" not in physics.capabilities:
        raise UnsupportedCapability(f"{who}: the {physics.engine} scene does not simulate")
    if "render" not in renderer.capabilities:
        why = getattr(renderer, "render_unavailable", None)
        raise UnsupportedCapability(f"{who}: the {renderer.engine} scene cannot render here"
                                    + (f" ({why})" if why else ""))
    ours, theirs = set(physics.object_ids()), set(renderer.object_ids())
    if ours != theirs:
        parts = []
        if ours - theirs:
            parts.append(f"objects {sorted(ours - theirs)} are simulated but not in the {renderer.engine} scene")
        if theirs - ours:
            parts.append(f"objects {sorted(theirs - ours)} are drawn but not simulated")
        raise UnsupportedCapability(f"{who}: {'; '.join(parts)}. Fix: export the bundle again to both engines "
                                    "('real2sim export')")
    for oid in sorted(ours):
        joints = physics.object_joint_names(oid)
        if joints and ("articulation" not in renderer.capabilities or renderer.object_joint_names(oid) != joints):
            raise UnsupportedCapability(f"{who}: articulated object '{oid}' (joints {joints}) cannot be posed in the "
                                        f"{renderer.engine} scene, so its moving parts would be drawn where they "
                                        "started. Fix: export the bundle again to both engines, or use one engine")
    if "robot" in physics.capabilities:
        if "robot" not in renderer.capabilities:
            raise UnsupportedCapability(f"{who}: the {renderer.engine} scene has no robot to show the simulated one")
        if physics.robot_name() != renderer.robot_name() or physics.robot_joint_names() != renderer.robot_joint_names():
            raise UnsupportedCapability(f"{who}: the robots differ ({physics.robot_name()} "
                                        f"{physics.robot_joint_names()} vs {renderer.robot_name()} "
                                        f"{renderer.robot_joint_names()}). Fix: export the bundle again")
    for oid in fixed_ids:  # never synced: both exports must put them in the same place
        a, b = physics.object_pose(oid), renderer.object_pose(oid)
        if np.abs(a[:3, 3] - b[:3, 3]).max() > FIXED_POSE_TOLERANCE_M or np.abs(a[:3, :3] - b[:3, :3]).max() > 1e-4:
            raise UnsupportedCapability(f"{who}: fixed object '{oid}' sits at different poses in the two exports. "
                                        "Fix: export the bundle again to both engines")


__all__ = ["HybridScene", "IMAGE_CAPABILITIES", "PHYSICS_CAPABILITIES", "check_composable"]
