"""The exporter interface and the engine-neutral view of a loaded scene."""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.errors import UnsupportedCapability


@dataclass
class ExportResult:
    """What an exporter wrote."""

    engine: str
    main_file: Path
    """The file a user opens in the engine (scene.xml, scene.usda, scene.sapien.json)."""
    files: list[Path] = field(default_factory=list)
    """Every file written, including assets."""
    warnings: list[str] = field(default_factory=list)


class LoadedScene(abc.ABC):
    """A bundle's export loaded back in its engine.

    Backends declare ``capabilities``; a method outside them raises
    :class:`UnsupportedCapability` instead of returning plausible zeros.
    Object ids are the bundle's object ids. Poses are world ``(4, 4)`` matrices of the
    object frame (not the COM frame).
    """

    engine: str = ""
    capabilities: frozenset[str] = frozenset()
    """Subset of {"physics", "render", "depth", "project", "mass", "robot", "appearance", "preview", "articulation"}."""

    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise UnsupportedCapability(
                f"the {self.engine} scene does not support '{capability}' (it supports: {', '.join(sorted(self.capabilities))})")

    @abc.abstractmethod
    def object_ids(self) -> list[str]:
        """Ids of the objects present in the engine scene."""

    @abc.abstractmethod
    def object_pose(self, oid: str) -> np.ndarray:
        """``(4, 4)`` world pose of object ``oid``'s frame."""

    def mass_properties(self, oid: str) -> tuple[float, np.ndarray, np.ndarray]:
        """(mass kg, COM ``(3,)`` in the object frame, inertia ``(3, 3)`` about the COM in the object frame)."""
        self.require("mass")
        raise UnsupportedCapability(f"{self.engine}: mass_properties not implemented")

    def step(self, seconds: float) -> None:
        """Advance physics by ``seconds``."""
        self.require("physics")

    def project(self, camera: str, points) -> np.ndarray:
        """``(n, 3)`` world points -> ``(n, 2)`` OpenCV pixel coordinates through the engine's own camera."""
        self.require("project")
        raise UnsupportedCapability(f"{self.engine}: project not implemented")

    def render(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        """``(h, w, 3) uint8`` RGB image from the named bundle camera; ``size`` ``(w, h)`` renders the same view at
        another resolution (intrinsics scaled per axis, as resizing the full image would) - cheaper than resizing."""
        self.require("render")
        raise UnsupportedCapability(f"{self.engine}: render not implemented")

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        """``(h, w) bool`` pixels where object ``oid`` is visible from the named camera."""
        self.require("render")
        raise UnsupportedCapability(f"{self.engine}: object_mask not implemented")

    # -- robot (capability "robot"; joint vectors follow RobotDef.joint_names: arm, then gripper) --
    _robot = None  # the registry RobotDef, set by backends that load a robot

    def robot_name(self) -> str:
        """Registry name of the robot in the scene."""
        self.require("robot")
        return self._robot.name

    def robot_def(self):
        """The scene's :class:`~real2sim.robots.spec.RobotDef` (a robot from a definition file: the copy packaged
        with the export, never the user's original file)."""
        self.require("robot")
        if self._robot is None:
            from real2sim.robots import get_robot

            self._robot = get_robot(self.robot_name())
        return self._robot

    def mounted_cameras(self) -> dict[str, str]:
        """``{camera: link}`` of the robot-mounted cameras in the scene (they move with their link; they have no
        background plate). Empty without a robot."""
        if "robot" not in self.capabilities:
            return {}
        return {name: link for name, (link, _) in self.robot_def().mounted_cameras().items()}

    def robot_joint_names(self) -> list[str]:
        """Actuated joint names (registry names, not the engine's prefixed ones)."""
        self.require("robot")
        return list(self._robot.joint_names)

    def robot_qpos(self) -> np.ndarray:
        """Actuated joint positions (rad or m)."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: robot_qpos not implemented")

    def robot_qvel(self) -> np.ndarray:
        """Actuated joint velocities."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: robot_qvel not implemented")

    def set_robot_qpos(self, q) -> None:
        """Teleport the actuated joints to ``q`` with zero velocity; drive targets follow."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: set_robot_qpos not implemented")

    def set_joint_targets(self, q) -> None:
        """Position targets of the joint drives (force = K (q* - q) - D qdot)."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: set_joint_targets not implemented")

    def set_joint_gains(self, stiffness, damping) -> None:
        """Per actuated joint drive stiffness (N m/rad or N/m) and damping (N m s/rad or N s/m)."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: set_joint_gains not implemented")

    def link_pose(self, link: str) -> np.ndarray:
        """``(4, 4)`` world pose of robot link ``link`` (URDF link name)."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: link_pose not implemented")

    def robot_base_pose(self) -> np.ndarray:
        """``(4, 4)`` world pose of the robot base link."""
        self.require("robot")
        raise UnsupportedCapability(f"{self.engine}: robot_base_pose not implemented")

    # -- articulated objects (capability "articulation"; joint names are the URDF's, values m or rad) --
    def object_joint_names(self, oid: str) -> list[str]:
        """Movable joints of articulated object ``oid`` (empty for a rigid object)."""
        return []

    def object_joint_positions(self, oid: str) -> dict[str, float]:
        """``{joint: position}`` of articulated object ``oid``."""
        self.require("articulation")
        raise UnsupportedCapability(f"{self.engine}: object_joint_positions not implemented")

    def set_object_joint_positions(self, oid: str, positions: dict) -> None:
        """Teleport the named joints of ``oid`` to ``positions`` at rest (other joints keep theirs)."""
        self.require("articulation")
        raise UnsupportedCapability(f"{self.engine}: set_object_joint_positions not implemented")

    def set_object_joint_force(self, oid: str, joint: str, force: float) -> None:
        """Apply a generalised force (N along a prismatic axis, N m about a revolute one) to joint ``joint`` of
        ``oid`` at every physics step from now until changed (0 stops it) or :meth:`reset_state`."""
        self.require("articulation")
        raise UnsupportedCapability(f"{self.engine}: set_object_joint_force not implemented")

    def object_link_pose(self, oid: str, link: str) -> np.ndarray:
        """``(4, 4)`` world pose of link ``link`` (URDF name) of articulated object ``oid``."""
        self.require("articulation")
        raise UnsupportedCapability(f"{self.engine}: object_link_pose not implemented")

    def set_object_pose(self, oid: str, pose) -> None:
        """Teleport movable object ``oid`` to the world ``(4, 4)`` pose of its frame, at rest (capability ``"physics"``)."""
        self.require("physics")
        raise UnsupportedCapability(f"{self.engine}: set_object_pose not implemented")

    def reset_state(self) -> None:
        """Back to the exported state: objects at their bundle poses at rest, robot at its bundle joints,
        engine caches (warm starts, contacts) cleared where the engine allows, so the same actions
        after a reset give the same trajectory."""
        self.require("physics")
        raise UnsupportedCapability(f"{self.engine}: reset_state not implemented")

    def depth(self, camera: str, size: tuple[int, int] | None = None) -> np.ndarray:
        """``(h, w) float32`` depth in metres along the camera's +Z (OpenCV), 0 where nothing was hit
        (capability ``"depth"``)."""
        self.require("depth")
        raise UnsupportedCapability(f"{self.engine}: depth not implemented")

    def foreground_mask(self, camera: str, oids, robot: bool = True, size: tuple[int, int] | None = None) -> np.ndarray:
        """``(h, w) bool`` union of the masks of objects ``oids`` (and the robot when ``robot``).

        Backends override this with one segmentation render; the default combines the per-entity masks."""
        self.require("render")
        m = None
        if size is not None:
            raise UnsupportedCapability(f"{self.engine}: foreground_mask at another size is not implemented")
        for oid in oids:
            x = self.object_mask(camera, oid)
            m = x if m is None else (m | x)
        if robot and "robot" in self.capabilities:
            x = self.robot_mask(camera)
            m = x if m is None else (m | x)
        if m is None:
            raise UnsupportedCapability(f"{self.engine}: foreground_mask needs at least one object or the robot")
        return m

    def render_layers(self, camera: str, oids, robot: bool = True, depth: bool = False,
                      size: tuple[int, int] | None = None):
        """``(rgb (h, w, 3) uint8, foreground mask (h, w) bool, depth (h, w) float32 or None)`` of one state.

        The mask is :meth:`foreground_mask` of ``oids`` (+ robot). Backends that can take every layer
        from one picture override this."""
        return (self.render(camera, size=size), self.foreground_mask(camera, oids, robot, size=size),
                self.depth(camera, size=size) if depth else None)

    # -- appearance (capability "appearance": run-time changes for visual variants; physics is untouched) --
    def set_lighting(self, scale: float, unlit: bool = False) -> None:
        """Scale every light of the scene (directional, ambient, headlight) by ``scale`` relative to the export
        (1 = as exported). ``unlit``: directional lights off and a white ambient light of strength ``scale``,
        so every surface shows its stored colour or texture times ``scale`` (textures back-projected from
        photos already carry the scene's light)."""
        self.require("appearance")
        raise UnsupportedCapability(f"{self.engine}: set_lighting not implemented")

    def set_tint(self, target: str, rgb) -> None:
        """Multiply the stored colours (material colour or texture texels) of ``target`` by ``rgb`` ``(3,)``,
        relative to the export ((1, 1, 1) = as exported). ``target``: an object id, or ``"robot"`` for every
        robot link."""
        self.require("appearance")
        raise UnsupportedCapability(f"{self.engine}: set_tint not implemented")

    # -- preview (capability "preview": re-pose a loaded scene from edited values without re-exporting) --
    def place_object(self, oid: str, pose) -> None:
        """Put object ``oid`` (movable or fixed) at the world ``(4, 4)`` pose of its frame, for display only."""
        self.require("preview")
        raise UnsupportedCapability(f"{self.engine}: place_object not implemented")

    def set_camera_pose(self, camera: str, T_world_camera) -> None:
        """Move a bundle camera to the ``(4, 4)`` OpenCV pose ``T_world_camera`` (intrinsics unchanged)."""
        self.require("preview")
        raise UnsupportedCapability(f"{self.engine}: set_camera_pose not implemented")

    def set_robot_base_pose(self, T_world_base) -> None:
        """Move the robot's base link to the world ``(4, 4)`` pose, for display only."""
        self.require("preview")
        raise UnsupportedCapability(f"{self.engine}: set_robot_base_pose not implemented")

    def set_fast_rendering(self, fast: bool = True) -> None:
        """Drop costly effects (shadows, reflections, sky) from later renders; geometry and colours unchanged."""
        self.require("preview")
        raise UnsupportedCapability(f"{self.engine}: set_fast_rendering not implemented")

    def robot_mask(self, camera: str) -> np.ndarray:
        """``(h, w) bool`` pixels where any robot link is visible from the named camera."""
        self.require("robot")
        self.require("render")
        raise UnsupportedCapability(f"{self.engine}: robot_mask not implemented")

    @property
    def physics_timestep(self) -> float:
        """Seconds per physics step."""
        self.require("physics")
        raise UnsupportedCapability(f"{self.engine}: physics_timestep not implemented")

    def set_physics_timestep(self, dt: float) -> None:
        """Change the physics step (the controller sets its physics rate through this)."""
        self.require("physics")
        raise UnsupportedCapability(f"{self.engine}: set_physics_timestep not implemented")

    def step_physics(self, n: int) -> None:
        """Advance exactly ``n`` physics steps."""
        self.require("physics")
        raise UnsupportedCapability(f"{self.engine}: step_physics not implemented")

    def close(self) -> None:
        """Release engine resources."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Exporter(abc.ABC):
    """Writes a bundle into one engine's native format and loads it back."""

    name: str = ""
    main_file_name: str = ""
    """The file a user opens in the engine, inside the export folder."""

    def out_dir(self, bundle: Bundle) -> Path:
        return bundle.exports_dir(self.name)

    def main_file(self, bundle: Bundle) -> Path:
        """Where :meth:`export` writes the main file for ``bundle``."""
        return self.out_dir(bundle) / self.main_file_name

    @abc.abstractmethod
    def export(self, bundle: Bundle, out_dir: Path | None = None) -> ExportResult:
        """Write the scene; the directory is replaced atomically so a failure keeps the previous export."""

    @abc.abstractmethod
    def load(self, out_dir: Path) -> LoadedScene:
        """Load an export back in its engine; raises ExportError if the engine refuses it."""
