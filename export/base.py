"""The exporter interface and the engine-neutral view of a loaded scene."""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.bundle import Bundle
from real2sim.errors import UnsupportedCapability


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
    capabilities: frozenset[str] = frozenset()  # subset of {"physics", "render", "project", "mass"}

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

    def render(self, camera: str) -> np.ndarray:
        """``(h, w, 3) uint8`` RGB image from the named bundle camera."""
        self.require("render")
        raise UnsupportedCapability(f"{self.engine}: render not implemented")

    def object_mask(self, camera: str, oid: str) -> np.ndarray:
        """``(h, w) bool`` pixels where object ``oid`` is visible from the named camera."""
        self.require("render")
        raise UnsupportedCapability(f"{self.engine}: object_mask not implemented")

    def close(self) -> None:
        """Release engine resources."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Exporter(abc.ABC):
    """Writes a bundle into one engine's native format and loads it back."""

    name: str = ""

    def out_dir(self, bundle: Bundle) -> Path:
        return bundle.root / "exports" / self.name

    @abc.abstractmethod
    def export(self, bundle: Bundle, out_dir: Path | None = None) -> ExportResult:
        """Write the scene; the directory is replaced atomically so a failure keeps the previous export."""

    @abc.abstractmethod
    def load(self, out_dir: Path) -> LoadedScene:
        """Load an export back in its engine; raises ExportError if the engine refuses it."""
