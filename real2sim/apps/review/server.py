"""Server-side state of the review page, shared by every browser tab: the bundle and one preview renderer.

All preview rendering runs on one worker thread (an EGL context belongs to the thread that made it).
"""
from __future__ import annotations

import concurrent.futures
import logging
from pathlib import Path

from real2sim.apps.review.preview import PreviewRenderer, compose_overlay, real_image
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

    def picture(self, camera: str | None, frame: int, mode: str, blend: float, highlight: list[str] | None = None):
        """(overlay image, note) for the current manifest."""
        return self.on_render_thread(self._picture, camera, frame, mode, blend, highlight)

    def _picture(self, camera: str | None, frame: int, mode: str, blend: float, highlight: list[str] | None):
        bundle = self.bundle()
        cams = list(bundle.manifest.cameras)
        if not cams:
            return None, "no camera in the bundle: add one with 'real2sim init DIR --frames ... --camera camera.json'"
        cam = camera if camera in cams else cams[0]
        real, real_note = real_image(bundle, int(frame or 0))
        pr = self._get_preview(bundle)
        if pr is None:
            return real, f"{self.preview_error} ({real_note})"
        pr.sync(bundle.manifest)
        img = pr.render(cam)
        mask = None
        if mode == "composite" and real is not None:
            mask = pr.mask(cam, list(bundle.manifest.objects if highlight is None else highlight))
        return compose_overlay(img, real, blend, mode, mask), f"camera '{cam}'; real image: {real_note}"

    def close(self) -> None:
        self.on_render_thread(self._close_preview)
        self._pool.shutdown(wait=True)
