"""The ``calibrate`` stage: set a bundle camera from clicked 2D-3D correspondences (PnP), an ArUco marker (or a
ChArUco board) at a known world pose, or checkerboard images (intrinsics).

Marker frame (OpenCV ``aruco``): origin at the marker centre, +X to the right of the printed marker, +Y up (towards
its top edge), +Z out of the printed face. Its corners are detected in the order top-left, top-right,
bottom-right, bottom-left, i.e. at (-s/2, s/2), (s/2, s/2), (s/2, -s/2), (-s/2, -s/2) for side ``s``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.capture.camera_file import (
    aruco_dictionary,
    calibrate_checkerboard,
    solve_pnp,
)
from real2sim.capture.init import FRAMES_DIR, source_camera
from real2sim.capture.table_board import CharucoSpec, _draw_polyline, _gray, _project, detect_charuco
from real2sim.capture.undistort import undistort_pixels
from real2sim.core.bundle import Bundle
from real2sim.core.camera import Camera
from real2sim.core.errors import CalibrationError, CaptureError
from real2sim.core.geometry import rotation_angle_between, transform_points
from real2sim.core.imaging import image_files, read_rgb, to_uint8, write_rgb
from real2sim.core.manifest import CameraSpec
from real2sim.core.stages import mark_changed

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


def _check_inside(px: np.ndarray, cam, source: Path) -> None:
    """Clicked pixels are in the image (half a pixel of slack): a point far outside is a typo or another image's
    click, and PnP would fit it exactly by moving the camera anywhere."""
    px = np.asarray(px, float)
    bad = np.nonzero((px[:, 0] < -0.5) | (px[:, 0] > cam.width - 0.5) | (px[:, 1] < -0.5) | (px[:, 1] > cam.height - 0.5))[0]
    if len(bad):
        i = int(bad[0])
        raise CalibrationError(f"{source}: pixels[{i}] = ({px[i, 0]:g}, {px[i, 1]:g}) is outside the {cam.width}x{cam.height} "
                               f"image ({len(bad)} point(s) outside); click the points on the frame itself (x right, y down, "
                               "in pixels of the full-size frame)")


def calibrate_extrinsics(bundle: Bundle, correspondences: Path, camera: str = "main", source: Camera | None = None
                         ) -> dict:
    """PnP from >= 4 clicked pairs; writes the camera pose, reports/calibration.json and a picture.

    ``source``: the camera whose distorted frames the pixels were clicked on, when the bundle's frames are those
    frames undistorted (:func:`real2sim.capture.init.source_camera`); the pixels are moved into the bundle's
    frames first."""
    if camera not in bundle.manifest.cameras:
        raise CalibrationError(f"{bundle.root}: no camera '{camera}'; give intrinsics with 'real2sim init DIR --camera camera.json'")
    spec = bundle.manifest.cameras[camera]
    cam = spec.camera()
    px, world = read_correspondences(correspondences)
    _check_inside(px, cam, correspondences)
    if source is not None:
        px = undistort_pixels(px, source)
    res = solve_pnp(px, world, cam.K, cam.distortion)
    cam.T_world_camera = res.T_world_camera
    bundle.manifest.cameras[camera] = CameraSpec.from_camera(cam)
    mark_changed(bundle, "camera")
    report = {"camera": camera, "method": "pnp", "points": len(px), "rms_px": res.rms_px, "max_px": res.max_px,
              "residuals_px": res.residuals_px}
    if bundle.manifest.capture.frames:
        report["picture"] = _picture(bundle, cam, px, world)
    bundle.write_report("calibration", report)
    bundle.save()
    return report


def calibrate_intrinsics(bundle: Bundle, images_dir: Path, pattern: tuple[int, int], square: float, camera: str = "main") -> dict:
    """Checkerboard calibration of K and distortion; keeps the camera's pose.

    The bundle's frames are pinhole images of its camera: when ``init`` undistorted them with the camera file's
    distortion, new intrinsics would not describe them, so this is refused (calibrate first, then ``init`` with the
    result); on frames kept as captured, a distortion found is reported with the command that undistorts them."""

    if camera == "main" and source_camera(bundle) is not None:
        raise CalibrationError(f"{bundle.root}: the frames were undistorted by 'real2sim init' with the distortion of "
                               "capture/camera.json; new intrinsics would not describe them. Calibrate without the "
                               "bundle (real2sim.capture.camera_file.calibrate_checkerboard), write the camera file and "
                               "re-run 'real2sim init DIR --frames ... --camera NEW.json --force'")
    if not Path(images_dir).is_dir():
        raise CalibrationError(f"{images_dir}: not a folder; --checkerboard takes a folder of checkerboard images")
    files = image_files(images_dir)
    if not files:
        raise CalibrationError(f"{images_dir}: no images (PNG/JPEG) of the checkerboard")
    res = calibrate_checkerboard([read_rgb(p) for p in files], pattern, square)
    old = bundle.manifest.cameras.get(camera)
    T = np.array(old.T_world_camera) if old else np.eye(4)
    h, w = read_rgb(files[0]).shape[:2]

    cam = Camera(w, h, np.asarray(res.K), T, np.asarray(res.distortion))
    bundle.manifest.cameras[camera] = CameraSpec.from_camera(cam)
    report = {"camera": camera, "method": "checkerboard", "images": len(files), "rms_px": res.rms_px,
              "K": np.asarray(res.K).tolist(), "distortion": list(map(float, res.distortion))}
    if np.any(np.asarray(res.distortion) != 0) and bundle.manifest.capture.frames:
        log.warning("%s: the lens has distortion %s but the bundle's frames were captured without it; write this "
                    "camera to a file (capture/camera.json's fields) and re-run 'real2sim init DIR --frames ... --camera "
                    "FILE --force' so the frames are undistorted to a pinhole camera like the simulators'", bundle.root,
                    [round(float(x), 5) for x in res.distortion])
    bundle.write_report("calibration", report)
    bundle.save()
    return report


def _picture(bundle: Bundle, cam, px, world) -> str:
    from PIL import Image, ImageDraw

    img = Image.fromarray(read_rgb(bundle.path(bundle.manifest.capture.frames[0].image)))
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


# ---------------------------------------------------------------------------------------------
# extrinsics from an ArUco marker (or a ChArUco board) at a known world pose
# ---------------------------------------------------------------------------------------------

_HINT_DICTIONARIES = ("DICT_4X4_1000", "DICT_5X5_1000", "DICT_6X6_1000", "DICT_7X7_1000", "DICT_ARUCO_ORIGINAL",
                      "DICT_APRILTAG_36h11")
"""Searched when no marker of the given dictionary is found, to say which dictionary the printed one may be."""


@dataclass
class MarkerExtrinsics:
    """Camera pose from an ArUco marker (or a ChArUco board) whose pose in the world is known."""

    T_world_camera: np.ndarray
    """``(4, 4)`` OpenCV camera pose in the world: ``T_world_marker @ inv(T_camera_marker)``."""
    T_camera_marker: np.ndarray
    """``(4, 4)`` the marker (board) frame in the OpenCV camera frame."""
    corners_px: np.ndarray
    """``(n, 2)`` detected corners (px): a marker's 4 in OpenCV order (top-left, top-right, bottom-right,
    bottom-left), or a board's ChArUco corners."""
    object_points: np.ndarray
    """``(n, 3)`` the same corners in the marker (board) frame (m)."""
    rms_px: float
    """Reprojection RMS of the corners through the solved pose (px)."""
    max_px: float
    """Largest corner reprojection error (px)."""
    residuals_px: list[float]
    """Per-corner reprojection error (px)."""
    side_px: float
    """Mean side of the marker in the image (px); for a board, the side of one of its squares."""
    alternative_rms_px: float | None
    """Marker only: reprojection RMS (px) of IPPE's second pose (the marker tilted the other way about the viewing
    ray). Close to ``rms_px`` means both tilts fit the corners: the rotation is ambiguous."""
    ids_found: list[int]
    """Ids of every marker of the dictionary found in the image (board: the ChArUco corner ids)."""
    warnings: list[str] = field(default_factory=list)
    """What makes the pose doubtful and what to do about it."""

    @property
    def distance_m(self) -> float:
        """Distance from the camera to the marker (board) origin (m)."""
        return float(np.linalg.norm(self.T_camera_marker[:3, 3]))

    def to_dict(self) -> dict:
        """JSON-ready numbers (metres, pixels)."""
        return {"rms_px": round(self.rms_px, 4), "max_px": round(self.max_px, 4),
                "residuals_px": [round(r, 4) for r in self.residuals_px], "side_px": round(self.side_px, 2),
                "alternative_rms_px": None if self.alternative_rms_px is None else round(self.alternative_rms_px, 4),
                "distance_m": round(self.distance_m, 5), "ids_found": list(self.ids_found),
                "corners_px": np.round(self.corners_px, 3).tolist(),
                "camera_position": np.round(self.T_world_camera[:3, 3], 6).tolist(),
                "T_world_camera": np.round(self.T_world_camera, 9).tolist(),
                "T_camera_marker": np.round(self.T_camera_marker, 9).tolist(), "warnings": list(self.warnings)}


def detect_markers(gray: np.ndarray, dictionary: str) -> list[tuple[int, np.ndarray]]:
    """ArUco markers of ``dictionary`` in a grey uint8 image: ``[(id, (4, 2) corners px)]``, corners sub-pixel
    refined, in OpenCV order (top-left, top-right, bottom-right, bottom-left of the printed marker)."""
    import cv2

    params = cv2.aruco.DetectorParameters()
    params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    corners, ids, _ = cv2.aruco.ArucoDetector(aruco_dictionary(dictionary), params).detectMarkers(gray)
    if ids is None:
        return []
    return [(int(i), np.asarray(c, np.float64).reshape(4, 2)) for i, c in zip(np.ravel(ids), corners)]


def _edge_points(gray: np.ndarray, a: np.ndarray, b: np.ndarray, centre: np.ndarray, half: float) -> np.ndarray:
    """Sub-pixel points of the dark-to-bright step along the marker edge a -> b: on profiles across the edge
    (``half`` px each side, bilinear), where the intensity crosses the midpoint between the dark inside and the bright
    outside. That is where a step blurred by any symmetric blur lies (a corner detector is pulled inwards by blur)."""
    import cv2

    d = (b - a) / np.linalg.norm(b - a)
    n = np.array([d[1], -d[0]])
    if n @ ((a + b) / 2 - centre) < 0:
        n = -n  # outwards
    length = float(np.linalg.norm(b - a))
    s = a + np.outer(np.linspace(0.15, 0.85, max(8, int(length / 2))), b - a)
    u = np.arange(-half, half + 1e-9, 0.25)
    pts = s[:, None, :] + u[None, :, None] * n
    prof = cv2.remap(gray, pts[..., 0].astype(np.float32), pts[..., 1].astype(np.float32), cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REPLICATE)
    lo, hi = prof[:, :3].mean(1), prof[:, -3:].mean(1)
    out = []
    for i in np.flatnonzero(hi - lo > 20):
        level = (lo[i] + hi[i]) / 2
        j = int(np.argmax(prof[i] >= level))
        if j == 0:
            continue
        f = (level - prof[i, j - 1]) / max(prof[i, j] - prof[i, j - 1], 1e-6)
        out.append(s[i] + (u[j - 1] + f * 0.25) * n)
    return np.asarray(out, np.float64).reshape(-1, 2)


def refine_marker_corners(gray: np.ndarray, corners: np.ndarray, K, distortion) -> np.ndarray:
    """Marker corners as the intersections of its four outer edges, each a line fitted to sub-pixel edge points
    (:func:`_edge_points`) in undistorted pixels. Falls back to the detector's corners when an edge is not clean
    (too few points, or a corner moving more than 1.5 px or 5 % of the side)."""
    import cv2

    K, dist = np.asarray(K, np.float64), np.asarray(distortion, np.float64)
    g = np.asarray(gray, np.float32)
    side = float(np.mean(np.linalg.norm(corners - np.roll(corners, -1, 0), axis=1)))
    half = float(np.clip(side / 12, 1.5, 5.0))  # within the black border cell inside (<= 3/4 of a cell of a 7x7 marker)
    lines = []
    for k in range(4):
        p = _edge_points(g, corners[k], corners[(k + 1) % 4], corners.mean(0), half)
        if len(p) < 4:
            log.debug("marker edge %d: %d edge points; keeping the detector's corners", k, len(p))
            return corners
        p = cv2.undistortPoints(p.reshape(-1, 1, 2), K, dist, P=K).reshape(-1, 2)
        c = p.mean(0)
        direction = np.linalg.svd(p - c)[2][0]
        lines.append((c, direction))
    und = []
    for k in range(4):  # corner k joins edge k-1 (ending there) and edge k (starting there)
        (c1, d1), (c2, d2) = lines[k - 1], lines[k]
        A = np.column_stack([d1, -d2])
        if abs(np.linalg.det(A)) < 1e-6:
            return corners
        t = np.linalg.solve(A, c2 - c1)
        und.append(c1 + t[0] * d1)
    xn = np.column_stack([(np.asarray(und) - K[:2, 2]) / np.diag(K)[:2], np.ones(4)])
    out = cv2.projectPoints(xn, np.zeros(3), np.zeros(3), K, dist)[0].reshape(4, 2)
    if np.linalg.norm(out - corners, axis=1).max() > max(1.5, 0.05 * side):
        log.debug("marker corners moved %.2f px by the edge refinement; keeping the detector's corners",
                  np.linalg.norm(out - corners, axis=1).max())
        return corners
    return out


def marker_object_points(size: float) -> np.ndarray:
    """``(4, 3)`` corners of a marker of side ``size`` (m) in its own frame, in OpenCV's detection order."""
    h = size / 2.0
    return np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])


def marker_pose_flat(x: float, y: float, z: float, yaw_deg: float = 0.0) -> np.ndarray:
    """``T_world_marker`` of a marker lying flat and face up (its +Z is world +Z), centre at (x, y, z) m, its +X
    axis turned ``yaw_deg`` from world +X about +Z (what ``--marker-at X,Y,Z[,YAW]`` means)."""
    a = np.radians(yaw_deg)
    T = np.eye(4)
    T[:3, :3] = [[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]]
    T[:3, 3] = (x, y, z)
    return T


def _check_rigid(T, what: str) -> np.ndarray:
    T = np.asarray(T, float)
    if T.shape != (4, 4) or not np.allclose(T[:3, :3].T @ T[:3, :3], np.eye(3), atol=1e-6) \
            or np.linalg.det(T[:3, :3]) < 0 or not np.allclose(T[3], [0, 0, 0, 1]):
        raise CalibrationError(f"{what}: must be a rigid 4x4 transform (orthonormal rotation, last row 0 0 0 1); "
                               "for a marker lying flat use real2sim.capture.calibrate.marker_pose_flat(x, y, z, yaw_deg)")
    return T


def _load_image(image, camera, name: str | None) -> tuple[np.ndarray, str]:

    if isinstance(image, (str, Path)):
        name = name or str(image)
        image = read_rgb(image)
    name = name or "<marker image>"
    img = np.asarray(image)
    if (img.shape[1], img.shape[0]) != (camera.width, camera.height):
        raise CaptureError(f"{name}: the image is {img.shape[1]}x{img.shape[0]} but the camera is "
                           f"{camera.width}x{camera.height}; take the marker image with this camera at its resolution "
                           "(or scale the intrinsics: capture.camera.scale_camera)")
    return img, name


def _no_marker(name: str, gray: np.ndarray, dictionary: str) -> CalibrationError:
    hint = ""
    for other in _HINT_DICTIONARIES:
        if other == dictionary:
            continue
        found = detect_markers(gray, other)
        if found:
            hint = (f" Markers of {other} are in the image (ids {', '.join(str(i) for i, _ in found)}): if that is "
                    f"the printed marker's family, give its dictionary (--marker-dictionary, e.g. {other}).")
            break
    return CalibrationError(f"{name}: no ArUco marker of {dictionary} found. Check the dictionary (the marker generator "
                            "names it), and that the marker is in view, flat, sharp, not overexposed, with a white "
                            "border at least one cell wide around its black square; a marker under ~15 px across is "
                            "not detected: use a bigger one or move it closer." + hint)


def _pick_marker(found: list[tuple[int, np.ndarray]], marker_id: int, dictionary: str, name: str) -> np.ndarray:
    ids = [i for i, _ in found]
    hits = [c for i, c in found if i == marker_id]
    if not hits:
        closest = min(ids, key=lambda i: (abs(i - marker_id), i))
        raise CalibrationError(f"{name}: no {dictionary} marker with id {marker_id}; found id(s) "
                               f"{', '.join(str(i) for i in sorted(set(ids)))}. Did you mean {closest}? Give the id of "
                               "the marker lying at the pose you gave (--marker-id)")
    if len(hits) > 1:
        raise CalibrationError(f"{name}: {len(hits)} {dictionary} markers with id {marker_id} in the image; the pose "
                               "of one of them is given, so keep only that one in view (or use markers with distinct ids)")
    return hits[0]


def _rt_to_T(rv, tv) -> np.ndarray:
    import cv2

    T = np.eye(4)
    T[:3, :3] = cv2.Rodrigues(np.asarray(rv, np.float64))[0]
    T[:3, 3] = np.ravel(tv)
    return T


def _residuals(obj, uv, T_cm, K, dist) -> np.ndarray:
    import cv2

    rv = cv2.Rodrigues(T_cm[:3, :3])[0]
    proj, _ = cv2.projectPoints(obj, rv, T_cm[:3, 3], K, dist)
    return np.linalg.norm(proj.reshape(-1, 2) - uv, axis=1)


def _solve_square(corners: np.ndarray, size: float, camera, name: str) -> tuple[np.ndarray, float | None]:
    """``T_camera_marker`` (IPPE_SQUARE, best of its two poses, LM-refined) and the other pose's RMS (px)."""
    import cv2

    obj = marker_object_points(size)
    K, dist = np.asarray(camera.K, np.float64), np.asarray(camera.distortion, np.float64)
    n, rvecs, tvecs, _ = cv2.solvePnPGeneric(obj, corners, K, dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
    if not n:
        raise CalibrationError(f"{name}: OpenCV found no pose for the marker's corners; check the intrinsics")
    poses = [_rt_to_T(rv, tv) for rv, tv in zip(rvecs, tvecs)]
    rms = [float(np.sqrt(np.mean(_residuals(obj, corners, T, K, dist) ** 2))) for T in poses]
    order = np.argsort(rms)
    rv, tv = cv2.solvePnPRefineLM(obj, corners, K, dist, rvecs[order[0]].copy(), tvecs[order[0]].copy())
    return _rt_to_T(rv, tv), (rms[order[1]] if len(order) > 1 else None)


def _marker_warnings(res: MarkerExtrinsics, min_side_px: float, what: str = "marker") -> list[str]:
    out = []
    cm_per_deg = res.distance_m * np.radians(1.0) * 100
    if res.side_px < min_side_px:
        out.append(f"the {what} is only {res.side_px:.0f} px across in the image (< {min_side_px:.0f} px): its rotation, "
                   f"and with it the camera position {res.distance_m:.2f} m away, is poorly determined (each degree "
                   f"of rotation error moves the camera {cm_per_deg:.1f} cm). Use a bigger {what} or bring it closer "
                   "to the camera, or click >= 6 points spread over the image ('real2sim calibrate DIR --points "
                   "clicks.json')")
    if res.rms_px > 1.0:
        out.append(f"the {what}'s corners reproject {res.rms_px:.2f} px RMS off (expected < 1 px): the {what} is not "
                   "flat, or lens distortion is missing from the camera")
    if res.alternative_rms_px is not None and res.alternative_rms_px < max(2.0 * res.rms_px, 0.3):
        out.append(f"the {what} seen tilted the other way fits its corners almost as well ({res.alternative_rms_px:.2f} "
                   f"vs {res.rms_px:.2f} px): the rotation may be flipped. View the marker more obliquely or from "
                   "closer, or use a ChArUco board or clicked points")
    return out


def extrinsics_from_marker(image, camera, marker_id: int, marker_size: float, T_world_marker,
                           dictionary: str = "DICT_4X4_50", name: str | None = None,
                           min_side_px: float = 40.0) -> MarkerExtrinsics:
    """Camera pose from one ArUco marker at a known world pose, seen in one image.

    ``image``: ``(h, w, 3)`` uint8 RGB (or grey) or an image file path, taken by ``camera`` (its intrinsics and
    distortion are used, its pose is not). ``marker_size``: side of the black square (m). ``T_world_marker``:
    ``(4, 4)`` pose of the marker frame (module docstring) in the world, e.g. :func:`marker_pose_flat`. The corners
    (OpenCV's detector, sub-pixel) are refined as intersections of the edges (:func:`refine_marker_corners`; the
    detector's corners are pulled ~0.2-0.5 px inwards by blur, a 0.3-0.6 % error in distance), the pose is
    solved with ``SOLVEPNP_IPPE_SQUARE`` on them (then LM-refined) and
    ``T_world_camera = T_world_marker @ inv(T_camera_marker)``. Warnings (also logged): a marker smaller than
    ``min_side_px`` in the image, corners that do not fit, an ambiguous tilt.
    """

    try:
        marker_size = float(marker_size)
    except (TypeError, ValueError):
        marker_size = float("nan")
    if not (np.isfinite(marker_size) and marker_size > 0):
        raise CalibrationError(f"marker size must be the positive side of the marker's black square in metres, got "
                               f"{marker_size!r} (--marker-size)")
    T_world_marker = _check_rigid(T_world_marker, "T_world_marker")
    img, name = _load_image(image, camera, name)
    gray = _gray(img)
    found = detect_markers(gray, dictionary)
    if not found:
        raise _no_marker(name, gray, dictionary)
    corners = refine_marker_corners(gray, _pick_marker(found, int(marker_id), dictionary, name), camera.K,
                                    camera.distortion)
    T_cm, alt = _solve_square(corners, float(marker_size), camera, name)
    obj = marker_object_points(float(marker_size))
    res_px = _residuals(obj, corners, T_cm, camera.K, camera.distortion)
    sides = np.linalg.norm(corners - np.roll(corners, -1, axis=0), axis=1)
    res = MarkerExtrinsics(T_world_marker @ np.linalg.inv(T_cm), T_cm, corners, obj, float(np.sqrt(np.mean(res_px ** 2))),
                           float(res_px.max()), [float(r) for r in res_px], float(sides.mean()), alt,
                           sorted(i for i, _ in found))
    res.warnings = _marker_warnings(res, min_side_px)
    for w in res.warnings:
        log.warning("marker %d in %s: %s", marker_id, name, w)
    log.info("marker %d in %s: %.1f px side, RMS %.3f px, camera at %s", marker_id, name, res.side_px, res.rms_px,
             np.round(res.T_world_camera[:3, 3], 4))
    return res


def extrinsics_from_charuco(image, camera, charuco, T_world_board, name: str | None = None, min_corners: int = 6,
                            min_side_px: float = 15.0) -> MarkerExtrinsics:
    """Camera pose from a ChArUco board at a known world pose (``charuco``: a :class:`real2sim.capture.table_board.CharucoSpec`
    or dict). The board frame is OpenCV's: origin at the board's top-left outer corner, +X along its columns, +Y
    down its rows, +Z *into* the board (a board lying face up has its +Z pointing down). Corners by
    :func:`real2sim.capture.table_board.detect_charuco`, pose by :func:`capture.camera.solve_pnp`. ``side_px`` is a square's side."""
    import cv2

    spec = CharucoSpec.coerce(charuco)
    T_world_board = _check_rigid(T_world_board, "T_world_board")
    img, name = _load_image(image, camera, name)
    found = detect_charuco(_gray(img), spec, min_corners)
    if found is None:
        raise CalibrationError(f"{name}: no ChArUco board {spec.squares[0]}x{spec.squares[1]} squares ({spec.dictionary}) "
                               f"with >= {max(4, min_corners)} corners found; check the squares count and the dictionary, "
                               "and that enough of its markers are in view and sharp")
    uv, obj = found
    pnp = solve_pnp(uv, obj, camera.K, camera.distortion)  # its 'world' is the board frame
    T_cb = np.linalg.inv(pnp.T_world_camera)
    area_px = cv2.contourArea(cv2.convexHull(uv.astype(np.float32)))
    area_m = cv2.contourArea(cv2.convexHull(obj[:, :2].astype(np.float32)))
    side = float(np.sqrt(area_px / area_m) * spec.square) if area_m > 0 else 0.0
    res = MarkerExtrinsics(T_world_board @ pnp.T_world_camera, T_cb, uv, obj, pnp.rms_px, pnp.max_px,
                           pnp.residuals_px, side, None, list(range(len(uv))))
    res.warnings = _marker_warnings(res, min_side_px, "board square")
    for w in res.warnings:
        log.warning("ChArUco board in %s: %s", name, w)
    return res


def _pt(p) -> tuple[int, int]:
    return int(np.rint(p[0])), int(np.rint(p[1]))


def marker_picture(image: np.ndarray, camera, res: MarkerExtrinsics, T_world_marker: np.ndarray,
                   title: str = "marker") -> np.ndarray:
    """``(h, w, 3)`` uint8: the image with the detected corners (green circles), the marker (board) outline and
    corners reprojected through the solved camera (red), and the world axes (X red, Y green, Z blue; 10 cm at the
    world origin, and at the marker centre)."""
    import cv2

    out = to_uint8(np.asarray(image))
    out = np.ascontiguousarray(np.repeat(out[..., None], 3, -1) if out.ndim == 2 else out[..., :3]).copy()
    cam = camera.__class__(camera.width, camera.height, camera.K, res.T_world_camera, camera.distortion,
                           camera.near, camera.far)
    lo, hi = res.object_points[:, :2].min(0), res.object_points[:, :2].max(0)
    box = np.array([[lo[0], lo[1], 0], [hi[0], lo[1], 0], [hi[0], hi[1], 0], [lo[0], hi[1], 0], [lo[0], lo[1], 0]])
    _draw_polyline(out, cam, transform_points(T_world_marker, box), (255, 0, 0), 1)
    centre = transform_points(T_world_marker, [[(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0]])[0]
    for origin in (np.zeros(3), centre):
        for axis, color in zip(np.eye(3), ((255, 0, 0), (0, 200, 0), (0, 80, 255))):
            _draw_polyline(out, cam, np.stack([origin, origin + 0.1 * axis]), color, 2)
    for p in res.corners_px:
        cv2.circle(out, _pt(p), 5, (0, 255, 0), 1, cv2.LINE_AA)
    uv, z = _project(cam, transform_points(T_world_marker, res.object_points))
    for p, d in zip(uv, z):
        if d > 0:
            cv2.drawMarker(out, _pt(p), (255, 0, 0), cv2.MARKER_CROSS, 8, 1, cv2.LINE_AA)
    pos = res.T_world_camera[:3, 3]
    lines = [(f"{title}: {res.side_px:.0f} px, RMS {res.rms_px:.2f} px; camera at ({pos[0]:+.3f}, {pos[1]:+.3f}, "
              f"{pos[2]:+.3f}) m"),
             "green: detected corners  red: marker reprojected  axes: world X red, Y green, Z blue (10 cm)"]
    if res.warnings:
        import textwrap

        wrapped = textwrap.wrap("warning: " + res.warnings[0], 100)
        lines += [wrapped[0], *(("  " + w) for w in wrapped[1:3])]
    cv2.rectangle(out, (0, 0), (out.shape[1], 8 + 18 * len(lines)), (0, 0, 0), -1)
    for i, text in enumerate(lines):
        cv2.putText(out, text, (6, 18 + 18 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.42,
                    (255, 255, 255) if i < 2 else (255, 200, 0), 1, cv2.LINE_AA)
    return out


def _camera_spec(bundle: Bundle, camera: str) -> CameraSpec:
    if camera not in bundle.manifest.cameras:
        raise CalibrationError(f"{bundle.root}: no camera '{camera}'; give intrinsics with 'real2sim init DIR --camera "
                               "camera.json'")
    return bundle.manifest.cameras[camera]


def _photo_camera(bundle: Bundle, camera: str, image_path) -> Camera:
    """The bundle camera as it took the photo ``image_path``: with the distortion of the camera file when ``init``
    undistorted the frames and the photo is not one of them (a marker photo straight from the camera)."""
    cam = _camera_spec(bundle, camera).camera()
    src = source_camera(bundle) if camera == "main" else None
    frames = bundle.path(FRAMES_DIR).resolve()
    if src is not None and frames not in Path(image_path).resolve().parents:
        cam.distortion = np.array(src.distortion, float)
    return cam


def _write_pose(bundle: Bundle, camera: str, cam, res: MarkerExtrinsics, image: np.ndarray, T_world_marker,
                report: dict, title: str) -> dict:
    """Write the picture (drawn with ``cam``, the camera that took ``image``), the report and the new pose of the
    bundle camera (its intrinsics and distortion kept; in that order, after everything was computed)."""

    old = np.asarray(cam.T_world_camera, float)
    pic = bundle.reports_dir() / "calibration.png"
    write_rgb(pic, marker_picture(image, cam, res, T_world_marker, title))
    report = {"camera": camera, **report, "T_world_marker": np.round(T_world_marker, 9).tolist(), **res.to_dict(),
              "previous_T_world_camera": np.round(old, 9).tolist(),
              "change_m": round(float(np.linalg.norm(res.T_world_camera[:3, 3] - old[:3, 3])), 6),
              "change_deg": round(float(np.degrees(rotation_angle_between(old[:3, :3], res.T_world_camera[:3, :3]))), 4),
              "picture": bundle.rel(pic)}
    bundle.write_report("calibration", report)
    stored = _camera_spec(bundle, camera).camera()
    stored.T_world_camera = res.T_world_camera
    bundle.manifest.cameras[camera] = CameraSpec.from_camera(stored)
    mark_changed(bundle, "camera")
    bundle.save()
    return report


def calibrate_marker(bundle: Bundle, image_path: Path, marker_id: int, size: float, T_world_marker,
                     camera: str = "main", dictionary: str = "DICT_4X4_50", min_side_px: float = 40.0) -> dict:
    """Set the bundle camera's pose from an ArUco marker at ``T_world_marker`` seen in ``image_path`` (taken by that
    camera). Writes ``cameras.<camera>.T_world_camera``, ``reports/calibration.json`` (method "marker") and
    ``reports/calibration.png`` (:func:`marker_picture`), and marks every stage that reads the camera stale. On an error
    the bundle is left as it was. Returns the report."""

    cam = _photo_camera(bundle, camera, image_path)
    T_world_marker = _check_rigid(T_world_marker, "T_world_marker")
    img = read_rgb(image_path)
    res = extrinsics_from_marker(img, cam, marker_id, size, T_world_marker, dictionary, name=str(image_path),
                                 min_side_px=min_side_px)
    info = {"method": "marker", "image": str(image_path), "marker_id": int(marker_id), "dictionary": dictionary,
            "marker_size_m": float(size)}
    return _write_pose(bundle, camera, cam, res, img, T_world_marker, info, f"marker {marker_id}")


def calibrate_charuco_pose(bundle: Bundle, image_path: Path, charuco, T_world_board, camera: str = "main",
                           min_corners: int = 6) -> dict:
    """As :func:`calibrate_marker` with a ChArUco board at ``T_world_board`` (OpenCV board frame, see
    :func:`extrinsics_from_charuco`); the report's method is "charuco"."""

    spec = CharucoSpec.coerce(charuco)
    cam = _photo_camera(bundle, camera, image_path)
    T_world_board = _check_rigid(T_world_board, "T_world_board")
    img = read_rgb(image_path)
    res = extrinsics_from_charuco(img, cam, spec, T_world_board, name=str(image_path), min_corners=min_corners)
    info = {"method": "charuco", "image": str(image_path), "squares": list(spec.squares), "square_m": spec.square,
            "marker_m": spec.marker, "dictionary": spec.dictionary, "corners": len(res.corners_px)}
    return _write_pose(bundle, camera, cam, res, img, T_world_board, info, "ChArUco board")
