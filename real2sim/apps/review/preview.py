"""The review preview: the bundle's export re-posed from the manifest, the real picture, and the two composed.

:class:`PreviewRenderer` keeps the export loaded in the preview engine (the registry's first with the
'preview' capability of :class:`~real2sim.engines.LoadedScene`) and moves objects, cameras and the robot
to the manifest values instead of re-exporting; fast rendering (no shadows, reflections or skybox) is on.
:func:`real_image` is the real frame (or the background plate) to compare against and
:func:`compose_overlay` blends the two (or shows a :func:`difference_heatmap`).
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from real2sim.core import imaging
from real2sim.core.bundle import Bundle
from real2sim.core.errors import BundleError, UnknownNameError
from real2sim.core.manifest import Manifest
from real2sim.engines import engine_for, get_exporter

log = logging.getLogger(__name__)


# -- real images ------------------------------------------------------------------------------
def read_rgb(path: Path) -> np.ndarray:
    """``(h, w, 3) uint8`` RGB of an image file (decoded once per file version, then cached)."""
    st = Path(path).stat()
    return _read_rgb_cached(str(Path(path).resolve()), st.st_mtime_ns, st.st_size).copy()


@functools.lru_cache(maxsize=16)
def _read_rgb_cached(path: str, mtime_ns: int, size: int) -> np.ndarray:
    return imaging.read_rgb(path)


def real_image(bundle: Bundle, frame: int = 0) -> tuple[np.ndarray | None, str]:
    """The real picture to compare against: capture frame ``frame``, else the background plate.

    Returns ``(image or None, description)``; the description says which command makes what is missing.
    """
    frames = bundle.manifest.capture.frames
    if frames:
        i = int(np.clip(frame, 0, len(frames) - 1))
        p = bundle.path(frames[i].image)
        if p.is_file():
            return read_rgb(p), f"capture frame {i} ({frames[i].image})"
        return None, f"{frames[i].image} is missing; re-run 'real2sim init {bundle.root} --frames ... --force'"
    plate = bundle.manifest.capture.plate
    if plate and bundle.path(plate).is_file():
        return read_rgb(bundle.path(plate)), f"background plate ({plate}); no frames"
    return None, (f"no real frames: run 'real2sim init {bundle.root} --frames PATH' (and 'real2sim build' for the "
                  "background plate); showing the simulated render only")


# -- the simulated render -----------------------------------------------------------------------
class PreviewRenderer:
    """The bundle's export loaded once in the preview engine (the registry's first with capability 'preview'),
    re-posed from the manifest for each preview.

    ``sync(manifest)`` moves objects, cameras and the robot to the manifest's values without re-exporting;
    ``render(camera)`` draws RGB, ``mask(camera, ids)`` the pixels of the given objects.
    """

    def __init__(self, bundle: Bundle, export_if_missing: bool = True):
        self.bundle = bundle
        self.engine = engine_for("preview")
        exporter = get_exporter(self.engine.name)
        main = exporter.main_file(bundle)
        self.exported_now = False
        if not main.is_file() or self._missing_names(main):
            if not export_if_missing:
                raise BundleError(f"{main}: no {self.engine.title} export; run 'real2sim export {bundle.root}'")
            log.info("preview: exporting %s for %s", self.engine.title, bundle.root)
            exporter.export(bundle)  # raises ExportError naming 'real2sim build' when not ready
            self.exported_now = True
        self.scene = exporter.load(exporter.out_dir(bundle))
        self.scene.set_fast_rendering(True)
        self._objects = set(self.scene.object_ids())

    def _missing_names(self, main: Path) -> bool:
        """An object or camera the export does not have yet (added since): export again."""
        text = main.read_text()
        m = self.bundle.manifest
        return any(f'"{name}"' not in text for name in [*m.objects, *m.cameras])

    def sync(self, manifest: Manifest) -> None:
        """Move objects, cameras and the robot to the manifest's values (no re-export)."""
        for oid, obj in manifest.objects.items():
            if oid in self._objects:
                self.scene.place_object(oid, obj.pose.matrix())
        for name, spec in manifest.cameras.items():
            try:
                self.scene.set_camera_pose(name, spec.camera().T_world_camera)
            except UnknownNameError:
                continue  # a camera added after the export
        self._sync_robot(manifest)

    def _sync_robot(self, manifest: Manifest) -> None:
        """The robot's base pose and joints from the manifest (a base edit shows before the next export)."""
        r = manifest.robot
        if r is None or "robot" not in self.scene.capabilities:
            return
        self.scene.set_robot_base_pose(r.base_pose.matrix())
        q = list(r.joint_positions or [])
        if len(q) == len(self.scene.robot_joint_names()):
            self.scene.set_robot_qpos(q)

    def render(self, camera: str) -> np.ndarray:
        """``(h, w, 3) uint8`` preview from the named bundle camera."""
        return self.scene.render(camera)[..., :3]

    def mask(self, camera: str, ids: Sequence[str]) -> np.ndarray:
        """``(h, w) bool``: pixels where any of the objects ``ids`` is visible."""
        return self.scene.foreground_mask(camera, [i for i in ids if i in self._objects], robot=False)

    def close(self) -> None:
        self.scene.close()


# -- the picture shown ----------------------------------------------------------------------------
def difference_heatmap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(h, w, 3) uint8`` heat map of the per-pixel colour difference (black = equal, yellow = far apart)."""
    d = np.abs(a.astype(np.float32) - b.astype(np.float32)).mean(-1) / 255.0
    d = np.clip(d * 3.0, 0.0, 1.0)
    return (np.stack([np.clip(d * 2, 0, 1), np.clip(d * 2 - 1, 0, 1) * 0.9 + d * 0.1, np.zeros_like(d)], -1) * 255).astype(np.uint8)


def compose_overlay(render: np.ndarray, real: np.ndarray | None, blend: float = 0.5, mode: str = "blend",
                    objects_mask: np.ndarray | None = None) -> np.ndarray:
    """The picture shown in the review app.

    ``mode``: 'blend' (``blend`` 0 = real, 1 = simulation), 'composite' (real picture with the rendered
    objects pasted where ``objects_mask`` is set, then blended), 'difference' (heat map),
    'render' (simulation only). Without a real picture the render is returned.
    """
    if real is None or mode == "render":
        return render
    if real.shape != render.shape:
        from PIL import Image

        real = np.asarray(Image.fromarray(real).resize((render.shape[1], render.shape[0]), Image.BILINEAR))
    if mode == "difference":
        return difference_heatmap(real, render)
    sim = render
    if mode == "composite" and objects_mask is not None:
        sim = np.where(objects_mask[..., None], render, real)
    t = float(np.clip(blend, 0.0, 1.0))
    return (real.astype(np.float32) * (1 - t) + sim.astype(np.float32) * t).round().astype(np.uint8)
