"""Server-side state of the review page, shared by every browser tab: the bundle and one preview renderer.

All preview rendering runs on one worker thread (an EGL context belongs to the thread that made it).
"""
from __future__ import annotations

import concurrent.futures
import logging
from pathlib import Path

from real2sim.apps.review.preview import (
    PreviewRenderer,
    compose_overlay,
    difference_view,
    draw_outlines,
    frame_masks,
    mask_ious,
    plate_for,
    real_image,
    wipe,
)
from real2sim.apps.review.versions import manifest_version
from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError

log = logging.getLogger(__name__)


class ReviewServer:
    """Server-side state shared by every browser tab: the bundle directory and one preview renderer."""

    def __init__(self, bundle_dir: Path, export_if_missing: bool = True):
        self.root = Path(bundle_dir).resolve()
        Bundle.load(self.root)  # fail early with the bundle's own message
        self.export_if_missing = export_if_missing
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="review-render")
        self._preview: PreviewRenderer | None = None
        self.preview_error = ""
        self.live_iou = True
        """Compute each object's mask IoU for every picture (one segmentation render per entity)."""

    def bundle(self) -> Bundle:
        return Bundle.load(self.root)

    def version(self) -> str:
        return manifest_version(self.root)

    def on_render_thread(self, fn, *args):
        """Run ``fn(*args)`` on the render thread and return its result."""
        return self._pool.submit(fn, *args).result()

    def _get_preview(self, bundle: Bundle) -> PreviewRenderer | None:
        if self._preview is None and not self.preview_error:
            try:
                self._preview = PreviewRenderer(bundle, export_if_missing=self.export_if_missing)
            except Real2SimError as exc:
                self.preview_error = f"no preview: {exc}"
                log.warning("%s", self.preview_error)
        return self._preview

    def _close_preview(self) -> None:
        if self._preview is not None:
            self._preview.close()

    def reset_preview(self) -> None:
        """Drop the loaded export (after a re-export); the next picture loads it again."""
        def reset():
            self._close_preview()
            self._preview, self.preview_error = None, ""
        self.on_render_thread(reset)

    def picture(self, camera: str | None, frame: int, mode: str, blend: float, outlines: bool = False,
                robot_start: bool = False):
        """(overlay image, note) for the current manifest (see :func:`_picture`); a mode ending in '+ outlines'
        draws the outlines; ``robot_start``: the robot at its start joints (the joint sliders) even where the frame
        has recorded joints."""
        mode = mode or "composite"
        if mode.endswith("+ outlines"):
            mode, outlines = mode.split("+")[0].strip(), True
        return self.on_render_thread(self._picture, camera, frame, mode, blend, outlines, robot_start)

    def mounted_view(self, camera: str | None):
        """(image, note) from the robot-mounted camera ``camera`` (the first when None or unknown) with the robot at
        its start joints. Render only: a camera that moves with the robot has no background plate."""
        return self.on_render_thread(self._mounted_view, camera)

    def mounted_cameras(self) -> dict[str, str]:
        """``{camera: link}`` of the robot-mounted cameras in the preview's export (empty without one)."""
        def names():
            pr = self._get_preview(self.bundle())
            return pr.mounted_cameras() if pr is not None else {}
        return self.on_render_thread(names)

    def _mounted_view(self, camera: str | None):
        bundle = self.bundle()
        pr = self._get_preview(bundle)
        if pr is None:
            return None, self.preview_error
        mounted = pr.mounted_cameras()
        if not mounted:
            r = bundle.manifest.robot
            return None, (f"robot '{r.name}' has no mounted camera with intrinsics (a camera mount needs width, height, "
                          "fx, fy, cx, cy in its robot definition: docs/robots.md)" if r else "the bundle has no robot")
        cam = camera if camera in mounted else sorted(mounted)[0]
        pr.sync(bundle.manifest, None)
        img = pr.render(cam)
        return img, (f"camera '{cam}' on robot link '{mounted[cam]}', the robot at its start joints (the sliders): "
                     "**render only**: a camera that moves with the robot has no background plate, so there is no "
                     "composite (the policy sees this render: env obs_mode='render' with this camera)")

    def _picture(self, camera: str | None, frame: int, mode: str, blend: float, outlines: bool,
                 robot_start: bool = False):
        """``mode``: 'composite' is what ``eval --obs-mode composited`` gives the policy (the plate with the robot
        and the movable objects rendered; the same code path); 'difference' its difference from the photo (colour
        scale, PSNR); 'wipe' the photo left of ``blend`` x width and the composite right of it; 'blend' the photo
        and the full render mixed by ``blend``; 'render' the simulation alone. ``outlines``: each simulated
        entity's outline and label (the photo's masks in black); the note gives each object's mask IoU."""
        bundle = self.bundle()
        cams = list(bundle.manifest.cameras)
        if not cams:
            return None, "no camera in the bundle: add one with 'real2sim init DIR --frames ... --camera camera.json'"
        cam = camera if camera in cams else cams[0]
        frame = int(frame or 0)
        real, real_note = real_image(bundle, frame)
        pr = self._get_preview(bundle)
        if pr is None:
            return real, f"{self.preview_error} ({real_note})"
        pr.sync(bundle.manifest, None if robot_start else frame)
        plate = plate_for(bundle, bundle.manifest.cameras[cam])
        render = pr.render(cam) if plate is None or mode in ("blend", "render") else None
        if plate is not None:
            obs, fg = pr.observation(cam, plate)
            what = "the policy's view (`eval --obs-mode composited`): the plate, the robot and the movable objects"
        else:
            obs, fg = render, None
            what = "no background plate: the policy sees the render (`eval` falls back to `--obs-mode render`)"
        notes = [f"camera '{cam}'; real image: {real_note}"]
        if real is not None and real.shape != obs.shape:
            real = compose_overlay(obs, real, 0.0, "blend")  # resized to the simulated picture
        if mode == "composite" or real is None and mode in ("difference", "wipe"):
            img, notes = obs, [f"composite = {what}"] + notes
        elif mode == "difference":
            img, line = difference_view(obs, real, fg)
            notes = [f"difference of the composite and the photo: {line}"] + notes
        elif mode == "wipe":
            img = wipe(real, obs, blend)
            notes = [f"wipe: photo left of {blend:.0%} of the width, composite right of it"] + notes
        else:
            img = compose_overlay(render, real, blend, mode)
        # live IoU: only the entities the photo has masks of at this frame (one segmentation render each)
        real_masks = frame_masks(bundle, frame, [*bundle.manifest.objects, "robot"]) if self.live_iou or outlines else {}
        masks = pr.entity_masks(cam, None if outlines else list(real_masks)) if real_masks or outlines else {}
        ious = mask_ious(masks, real_masks)
        if ious:
            notes.append("mask IoU (simulated vs photo mask): " + ", ".join(f"{k} {v:.3f}" for k, v in ious.items()))
        if outlines and masks:
            img = draw_outlines(img, masks, real_masks)
        return img, "; ".join(notes)

    def settle(self, camera: str | None, seconds: float = 1.0):
        """Step physics for ``seconds`` from the saved scene, as an episode's start does (``settle_s``); returns
        (the policy's view of where things came to rest, ``[object, moved mm, turned deg, dropped mm]`` rows, note).
        The preview goes back to the saved poses afterwards; the bundle is not changed."""
        return self.on_render_thread(self._settle, camera, float(seconds))

    def _settle(self, camera: str | None, seconds: float):
        from real2sim.evaluation.envs.observation import observed_objects

        if not 0 < seconds <= 10:
            raise Real2SimError(f"settle time must be in (0, 10] s, got {seconds}")
        bundle = self.bundle()
        pr = self._get_preview(bundle)
        if pr is None:
            raise Real2SimError(self.preview_error)
        scene = pr.scene
        scene.require("physics")
        cams = list(bundle.manifest.cameras)
        cam = camera if camera in cams else (cams[0] if cams else None)
        scene.reset_state()
        pr.sync(bundle.manifest, 0)
        movable = observed_objects(scene, bundle.manifest)
        before = {o: scene.object_pose(o) for o in movable}
        steps = int(round(seconds / scene.physics_timestep))
        try:
            scene.step_physics(steps)
            after = {o: scene.object_pose(o) for o in movable}
            img = None
            if cam is not None:
                plate = plate_for(bundle, bundle.manifest.cameras[cam])
                img = pr.observation(cam, plate)[0] if plate is not None else pr.render(cam)
        finally:
            scene.reset_state()
            pr.sync(bundle.manifest, 0)
        rows = [[o, *settle_motion(before[o], after[o])] for o in movable]
        worst = max((r[1] for r in rows), default=0.0)
        note = (f"{steps} physics steps ({seconds:g} s) from the saved poses: the largest move is {worst:.1f} mm"
                + (" (an object that moves more than a few mm is floating, sunk or interpenetrating: check its z and "
                   "the table height)" if worst > 5 else ""))
        return img, rows, note

    def close(self) -> None:
        self.on_render_thread(self._close_preview)
        self._pool.shutdown(wait=True)


def settle_motion(T0, T1) -> list[float]:
    """``[moved mm, turned deg, dropped mm]`` from pose ``T0`` to ``T1`` (4x4)."""
    import numpy as np

    T0, T1 = np.asarray(T0, float), np.asarray(T1, float)
    moved = float(np.linalg.norm(T1[:3, 3] - T0[:3, 3])) * 1e3
    c = (np.trace(T0[:3, :3].T @ T1[:3, :3]) - 1) / 2
    turned = float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))
    return [round(moved, 2), round(turned, 2), round(float(T0[2, 3] - T1[2, 3]) * 1e3, 2)]
