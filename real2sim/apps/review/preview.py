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
from real2sim.evaluation.envs.observation import (
    apply_shading,
    composite,
    observed_objects,
    rendered_objects,
    scene_shading,
)

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
        # the evaluation's render settings (shadows on, the evaluation's shading): the composite is the policy's view
        self._shading: str | None = None
        self._objects = set(self.scene.object_ids())

    def _missing_names(self, main: Path) -> bool:
        """An object or camera the export does not have yet (added since): export again."""
        text = main.read_text()
        m = self.bundle.manifest
        return any(f'"{name}"' not in text for name in [*m.objects, *m.cameras])

    def sync(self, manifest: Manifest, frame: int | None = None) -> None:
        """Move objects (and an articulated object's joints), cameras and the robot to the manifest's values (no
        re-export); the robot at frame ``frame``'s recorded joints when it has them (``frame=None``: at its start
        joints, ``robot.joint_positions``); the lights as the evaluation sets them."""
        shading = scene_shading(self.scene, manifest)
        if shading != self._shading:
            apply_shading(self.scene, shading)
            self._shading = shading
        self.manifest = manifest
        for oid, obj in manifest.objects.items():
            if oid in self._objects:
                self.scene.place_object(oid, obj.pose.matrix())
                if obj.articulation is not None:  # a joint edit shows before the next export
                    names = set(self.scene.object_joint_names(oid))
                    q = {k: v for k, v in obj.articulation.joint_positions.items() if k in names}
                    if q:
                        self.scene.set_object_joint_positions(oid, q)
        for name, spec in manifest.cameras.items():
            try:
                self.scene.set_camera_pose(name, spec.camera().T_world_camera)
            except UnknownNameError:
                continue  # a camera added after the export
        self._sync_robot(manifest, frame)

    def _sync_robot(self, manifest: Manifest, frame: int | None) -> None:
        """The robot's base pose and joints from the manifest (a base edit shows before the next export)."""
        r = manifest.robot
        if r is None or "robot" not in self.scene.capabilities:
            return
        self.scene.set_robot_base_pose(r.base_pose.matrix())
        frames = manifest.capture.frames
        at_frame = frames[int(np.clip(frame, 0, len(frames) - 1))].joint_positions if frames and frame is not None else None
        q = list(at_frame or r.joint_positions or [])
        if len(q) == len(self.scene.robot_joint_names()):
            self.scene.set_robot_qpos(q)

    def render(self, camera: str) -> np.ndarray:
        """``(h, w, 3) uint8`` preview from the named bundle camera (or robot-mounted camera)."""
        return self.scene.render(camera)[..., :3]

    def mounted_cameras(self) -> dict[str, str]:
        """``{camera: link}`` of the robot-mounted cameras of the export (render only: they have no plate)."""
        return self.scene.mounted_cameras()

    def mask(self, camera: str, ids: Sequence[str]) -> np.ndarray:
        """``(h, w) bool``: pixels where any of the objects ``ids`` is visible."""
        return self.scene.foreground_mask(camera, [i for i in ids if i in self._objects], robot=False)

    def observation(self, camera: str, background: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(image (h, w, 3) uint8, foreground mask (h, w) bool)``: what ``eval --obs-mode composited`` gives the
        policy from ``camera`` (:func:`real2sim.evaluation.envs.observation.composite`) over ``background``."""
        img, mask, _ = composite(self.scene, camera, rendered_objects(self.scene, self.manifest), background)
        return img, mask

    def entity_masks(self, camera: str, only=None) -> dict[str, np.ndarray]:
        """``{entity: (h, w) bool}`` for the robot (when the scene has one) and every movable object (those in
        ``only`` when given)."""
        want = None if only is None else set(only)
        out = {o: self.scene.foreground_mask(camera, [o], robot=False) for o in observed_objects(self.scene, self.manifest)
               if want is None or o in want}
        if "robot" in self.scene.capabilities and (want is None or "robot" in want):
            out["robot"] = self.scene.robot_mask(camera)
        return out

    def close(self) -> None:
        self.scene.close()


# -- the picture shown ----------------------------------------------------------------------------
def difference_heatmap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(h, w, 3) uint8`` heat map of the per-pixel colour difference (black = equal, yellow = a mean absolute
    difference of :data:`DIFF_FULL_SCALE` grey levels or more)."""
    d = np.abs(a.astype(np.float32) - b.astype(np.float32)).mean(-1)
    return heat_colours(d / DIFF_FULL_SCALE)


def heat_colours(d: np.ndarray) -> np.ndarray:
    """``(..., 3) uint8`` colours of the difference scale for ``d`` in [0, 1] (black, red, yellow)."""
    d = np.clip(np.asarray(d, np.float32), 0.0, 1.0)
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


# -- the policy's view, compared with the photo ------------------------------------------------------
ENTITY_COLOURS = [(255, 64, 64), (64, 160, 255), (255, 200, 0), (0, 220, 120), (220, 80, 255), (255, 140, 0),
                  (0, 230, 230), (160, 255, 60)]
"""Outline colours, one per entity in order; the robot is white."""
DIFF_FULL_SCALE = 85
"""Mean absolute difference (0-255 grey levels) that saturates the difference view (yellow)."""


def plate_for(bundle: Bundle, camera) -> np.ndarray | None:
    """The bundle's background plate when it fits ``camera`` (the evaluation's composite background), else None."""
    rel = bundle.manifest.capture.plate
    if not rel or not bundle.path(rel).is_file():
        return None
    plate = read_rgb(bundle.path(rel))
    return plate if plate.shape[:2] == (camera.height, camera.width) else None


def psnr_db(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> float | None:
    """PSNR (dB) of two uint8 images, over ``mask`` when given (None when the mask is empty)."""
    d = (a.astype(np.float64) - b.astype(np.float64)) ** 2
    if mask is not None:
        if not mask.any():
            return None
        d = d[mask]
    mse = float(d.mean())
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def _put(img: np.ndarray, text: str, org, colour=(255, 255, 255), scale: float = 0.5) -> None:
    import cv2

    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    x, y = org
    cv2.rectangle(img, (x - 2, y - th - 3), (x + tw + 2, y + base), (0, 0, 0), -1)  # a dark box: readable anywhere
    cv2.putText(img, text, org, cv2.FONT_HERSHEY_SIMPLEX, scale, colour, 1, cv2.LINE_AA)


def difference_view(observation: np.ndarray, real: np.ndarray, fg: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The difference of the policy's view and the photo as a heat map with its colour scale and PSNR drawn on it,
    and a one-line summary (PSNR whole image / where the simulation draws)."""
    heat = difference_heatmap(real, observation)
    h, w = heat.shape[:2]
    whole, inside = psnr_db(observation, real), None if fg is None else psnr_db(observation, real, fg)
    # the colour scale: a bar from 0 to DIFF_FULL_SCALE grey levels of mean |difference|
    bar_w, bar_h, x0, y0 = min(200, w - 20), 10, 10, h - 34
    heat[y0 - 4:h, 0:min(w, bar_w + 330)] = 0  # the scale's own dark band
    heat[y0:y0 + bar_h, x0:x0 + bar_w] = heat_colours(np.linspace(0, 1, bar_w))[None].repeat(bar_h, 0)
    _put(heat, "0", (x0, y0 + bar_h + 14), scale=0.4)
    _put(heat, f"{DIFF_FULL_SCALE}+", (x0 + bar_w - 18, y0 + bar_h + 14), scale=0.4)
    _put(heat, "mean |composite - photo|, grey levels", (x0 + bar_w + 10, y0 + bar_h), scale=0.4)
    line = f"PSNR {whole:.1f} dB whole image" + ("" if inside is None else f", {inside:.1f} dB where the simulation draws")
    _put(heat, line, (10, 20))
    return heat, line


def draw_outlines(img: np.ndarray, masks: dict[str, np.ndarray], real_masks: dict[str, np.ndarray]) -> np.ndarray:
    """``img`` with each entity's simulated outline in its colour (robot white) and label, and the photo's mask of
    the same entity (where the bundle has one) as a thin dark outline."""
    import cv2

    out = img.copy()
    for i, (name, m) in enumerate(masks.items()):
        colour = (255, 255, 255) if name == "robot" else ENTITY_COLOURS[i % len(ENTITY_COLOURS)]
        if name in real_masks:
            cnt, _ = cv2.findContours(real_masks[name].astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
            cv2.drawContours(out, cnt, -1, (0, 0, 0), 1)
        if not m.any():
            continue
        cnt, _ = cv2.findContours(m.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(out, cnt, -1, colour, 2 if name != "robot" else 1)
        ys, xs = np.nonzero(m)
        _put(out, name, (int(xs.min()), max(12, int(ys.min()) - 4)), colour, 0.45)
    return out


def wipe(left: np.ndarray, right: np.ndarray, at: float) -> np.ndarray:
    """``left`` (the photo) left of the column at fraction ``at`` of the width, ``right`` (the composite) after it,
    with a white divider."""
    x = int(round(np.clip(at, 0.0, 1.0) * left.shape[1]))
    out = np.concatenate([left[:, :x], right[:, x:]], 1)
    out[:, max(0, x - 1):x + 1] = 255
    return out


def mask_ious(masks: dict[str, np.ndarray], real_masks: dict[str, np.ndarray]) -> dict[str, float]:
    """``{entity: IoU}`` of each simulated mask with the photo's mask of the same entity."""
    out = {}
    for name, m in masks.items():
        r = real_masks.get(name)
        if r is not None and r.shape == m.shape:
            union = (m | r).sum()
            out[name] = float((m & r).sum() / union) if union else 1.0
    return out


def frame_masks(bundle: Bundle, frame: int, entities) -> dict[str, np.ndarray]:
    """``{entity: (h, w) bool}``: the photo's masks of ``entities`` at capture frame ``frame`` (those it has)."""
    masks = bundle.manifest.capture.masks.get(f"{int(frame):06d}", {})
    out = {}
    for e in entities:
        rel = masks.get(e)
        if rel and bundle.path(rel).is_file():
            out[e] = imaging.read_mask(bundle.path(rel))
    return out
