"""Frames of a camera with lens distortion made pinhole at capture.

Every renderer the toolkit exports to (SAPIEN, MuJoCo, USD) and its own silhouette renderer are pinhole cameras.
A plate or a mask from distorted frames does not line up with them: with k1 = -0.1 (f = 600 px) a pixel at a
640x480 frame's corner sits 18 px off its render. So ``real2sim init`` undistorts the frames of a camera file that
has distortion (OpenCV's ``k1 k2 p1 p2 k3``) to the *same* intrinsics ``K`` without distortion, and the bundle's
camera (``cameras.main``) says so; ``capture/camera.json`` keeps the camera as given.

Keeping ``K`` keeps every pixel of a barrel-distorted frame (the usual wide lens, k1 < 0: the corners of the
pinhole image come from inside the frame; what lay beyond them is left out). With pincushion distortion the
pinhole image's corners see past the frame's edge: those pixels repeat the nearest edge pixel, and the report
gives their share (``outside_fraction``).

Pixel coordinates a user wrote for the source frames (the prompts and the clicked points given to ``init``) go
through :func:`undistort_pixels`; those given later to the bundle (``real2sim masks``, the review app) are in
the bundle's frames already.
"""
from __future__ import annotations

import numpy as np

from real2sim.capture.camera_file import scale_camera
from real2sim.core.camera import Camera


def has_distortion(cam: Camera | None) -> bool:
    """Whether ``cam`` has any non-zero distortion coefficient."""
    return cam is not None and bool(np.any(np.asarray(cam.distortion, float) != 0))


def pinhole(cam: Camera) -> Camera:
    """The same camera without distortion: what the undistorted frames are."""
    return Camera(cam.width, cam.height, np.array(cam.K, float), np.array(cam.T_world_camera, float), np.zeros(5),
                  cam.near, cam.far)


def _maps(cam: Camera) -> tuple[np.ndarray, np.ndarray]:
    """``(h, w) float32`` x and y: where in the distorted frame each pixel of the pinhole frame lies."""
    import cv2

    K = np.asarray(cam.K, np.float64)
    return cv2.initUndistortRectifyMap(K, np.asarray(cam.distortion, np.float64), None, K, (cam.width, cam.height),
                                       cv2.CV_32FC1)


def undistort_frames(frames: np.ndarray, cam: Camera) -> tuple[np.ndarray, dict]:
    """``(n, h, w, 3) uint8`` frames of ``cam`` -> the same frames seen by :func:`pinhole` ``(cam)``, and a report:
    the distortion, the largest shift of a pixel (``max_shift_px``) and the share of pixels outside the source
    frame (``outside_fraction``, filled from its nearest edge). Bilinear; deterministic."""
    import cv2

    n, h, w = frames.shape[:3]
    if (w, h) != (cam.width, cam.height):
        raise ValueError(f"frames are {w}x{h} but the camera is {cam.width}x{cam.height}")
    mx, my = _maps(cam)
    out = np.empty_like(frames)
    for i in range(n):
        out[i] = cv2.remap(frames[i], mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    outside = (mx < -0.5) | (mx > w - 0.5) | (my < -0.5) | (my > h - 0.5)
    report = {"distortion": [float(x) for x in cam.distortion],
              "max_shift_px": round(float(np.hypot(mx - xs, my - ys).max()), 2),
              "outside_fraction": round(float(outside.mean()), 5)}
    return out, report


def undistort_pixels(uv, cam: Camera) -> np.ndarray:
    """``(k, 2)`` pixels of the distorted frames of ``cam`` -> ``(k, 2) float`` pixels of the undistorted ones."""
    import cv2

    uv = np.asarray(uv, np.float64).reshape(-1, 2)
    if not len(uv):
        return uv
    K = np.asarray(cam.K, np.float64)
    return cv2.undistortPoints(uv.reshape(-1, 1, 2), K, np.asarray(cam.distortion, np.float64), P=K).reshape(-1, 2)


def undistort_box(box, cam: Camera) -> tuple[float, float, float, float]:
    """A box ``(x0, y0, x1, y1)`` in pixels of the distorted frames of ``cam`` -> the box around its corners in the
    undistorted ones."""
    x0, y0, x1, y1 = box
    c = undistort_pixels([(x0, y0), (x1, y0), (x0, y1), (x1, y1)], cam)
    return float(c[:, 0].min()), float(c[:, 1].min()), float(c[:, 0].max()), float(c[:, 1].max())


def lens_maps(cam: Camera, size: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(h, w) float32`` x and y: where in the pinhole image of ``cam`` (:func:`pinhole`) each pixel of its lens's
    image lies, at ``size`` = ``(width, height)`` (default the camera's; intrinsics scaled per axis, OpenCV pixel
    centres). ``cv2.remap`` of a pinhole image (a simulator's render) with them gives the image the real camera
    shows: the inverse of :func:`undistort_frames`."""
    import cv2

    w, h = size or (cam.width, cam.height)
    K = np.asarray(scale_camera(cam, w, h).K, np.float64)
    grid = np.stack(np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)), -1)
    at = cv2.undistortPoints(grid.reshape(-1, 1, 2), K, np.asarray(cam.distortion, np.float64), P=K)
    at = at.reshape(h, w, 2).astype(np.float32)
    return np.ascontiguousarray(at[..., 0]), np.ascontiguousarray(at[..., 1])
