"""The ``calibrate`` stage: set a bundle camera from clicked 2D-3D correspondences (PnP) or checkerboard images."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from real2sim.bundle import Bundle
from real2sim.manifest import CameraSpec

from .camera import calibrate_checkerboard, solve_pnp
from .errors import CalibrationError

log = logging.getLogger(__name__)


def read_correspondences(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read pixel <-> world pairs: ``{"pixels": [[u, v], ...], "world": [[x, y, z], ...]}``
    or ``[{"pixel": [u, v], "world": [x, y, z]}, ...]`` (metres, world frame; OpenCV pixels)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read correspondences ({exc})") from exc
    if isinstance(data, list):
        try:
            px = [d["pixel"] for d in data]
            w = [d["world"] for d in data]
        except (KeyError, TypeError) as exc:
            raise CalibrationError(f"{path}: each entry needs 'pixel' [u, v] and 'world' [x, y, z]") from exc
    elif isinstance(data, dict) and {"pixels", "world"} <= set(data):
        px, w = data["pixels"], data["world"]
    else:
        raise CalibrationError(f"{path}: expected {{'pixels': [...], 'world': [...]}} or a list of {{'pixel', 'world'}}")
    try:
        px, w = np.asarray(px, float).reshape(-1, 2), np.asarray(w, float).reshape(-1, 3)
    except ValueError as exc:
        raise CalibrationError(f"{path}: pixels must be [u, v] pairs and world points [x, y, z] triples ({exc})") from exc
    return px, w


def calibrate_extrinsics(bundle: Bundle, correspondences: Path, camera: str = "main") -> dict:
    """PnP from >= 4 clicked pairs; writes the camera pose, reports/calibration.json and a picture."""
    if camera not in bundle.manifest.cameras:
        raise CalibrationError(f"{bundle.root}: no camera '{camera}'; give intrinsics with 'real2sim init DIR --camera camera.json'")
    spec = bundle.manifest.cameras[camera]
    cam = spec.camera()
    px, world = read_correspondences(correspondences)
    res = solve_pnp(px, world, cam.K, cam.distortion)
    cam.T_world_camera = res.T_world_camera
    bundle.manifest.cameras[camera] = CameraSpec.from_camera(cam)
    report = {"camera": camera, "method": "pnp", "points": len(px), "rms_px": res.rms_px, "max_px": res.max_px,
              "residuals_px": res.residuals_px}
    if bundle.manifest.capture.frames:
        report["picture"] = _picture(bundle, cam, px, world)
    bundle.write_report("calibration", report)
    bundle.save()
    return report


def calibrate_intrinsics(bundle: Bundle, images_dir: Path, pattern: tuple[int, int], square: float, camera: str = "main") -> dict:
    """Checkerboard calibration of K and distortion; keeps the camera's pose."""
    from .images import IMAGE_SUFFIXES, read_rgb

    files = sorted(p for p in Path(images_dir).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise CalibrationError(f"{images_dir}: no images (PNG/JPEG) of the checkerboard")
    res = calibrate_checkerboard([read_rgb(p) for p in files], pattern, square)
    old = bundle.manifest.cameras.get(camera)
    T = np.array(old.T_world_camera) if old else np.eye(4)
    h, w = read_rgb(files[0]).shape[:2]
    from real2sim.camera import Camera

    cam = Camera(w, h, np.asarray(res.K), T, np.asarray(res.distortion))
    bundle.manifest.cameras[camera] = CameraSpec.from_camera(cam)
    report = {"camera": camera, "method": "checkerboard", "images": len(files), "rms_px": res.rms_px,
              "K": np.asarray(res.K).tolist(), "distortion": list(map(float, res.distortion))}
    bundle.write_report("calibration", report)
    bundle.save()
    return report


def _picture(bundle: Bundle, cam, px, world) -> str:
    from PIL import Image, ImageDraw

    img = Image.open(bundle.path(bundle.manifest.capture.frames[0].image)).convert("RGB")
    draw = ImageDraw.Draw(img)
    proj = cam.project(world)
    for (u, v), (pu, pv) in zip(px, proj):
        draw.ellipse([u - 5, v - 5, u + 5, v + 5], outline=(0, 255, 0), width=2)  # clicked
        draw.line([pu - 6, pv, pu + 6, pv], fill=(255, 0, 0), width=2)  # reprojected
        draw.line([pu, pv - 6, pu, pv + 6], fill=(255, 0, 0), width=2)
    draw.text((8, 8), "green: clicked   red: reprojected through the solved camera", fill=(255, 255, 0))
    out = bundle.reports_dir() / "calibration.png"
    img.save(out)
    return bundle.rel(out)
