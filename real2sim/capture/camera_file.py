"""Cameras: the camera file, intrinsic calibration (checkerboard / ChArUco), PnP extrinsics, the table plane.

A ROS ``camera_info`` YAML or an OpenCV calibration file is read too (:func:`load_camera`; intrinsics only).

Camera file (JSON; see docs/capture.md)::

    {"width": 640, "height": 480,
     "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545,      # or "K": [[fx,0,cx],[0,fy,cy],[0,0,1]]
     "distortion": [k1, k2, p1, p2, k3],                                # optional, OpenCV order, default zeros
     "T_world_camera": [[...4x4...]],                                   # OpenCV camera frame in the world, or:
     "pose": {"position": [x, y, z], "quaternion_wxyz": [w, x, y, z], "convention": "sapien"},
     "near": 0.01, "far": 10.0}                                         # optional

``pose.convention`` names the camera axes the quaternion rotates: ``"opencv"`` (+X right, +Y down, +Z forward),
``"opengl"`` (+X right, +Y up, -Z forward) or ``"sapien"`` (+X forward, +Y left, +Z up; what SAPIEN/ManiSkill
and the Bridge robot config use). Inside the library every pose is the 4x4 OpenCV ``T_world_camera``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import CalibrationError, CaptureError, UnknownNameError, did_you_mean
from real2sim.core.geometry import camera_pose_from_convention, make_pose

log = logging.getLogger(__name__)
CONVENTIONS = ("opencv", "opengl", "sapien")
CAMERA_FIELDS = ("width", "height", "fx", "fy", "cx", "cy", "K", "distortion", "T_world_camera", "pose", "near", "far")
"""The camera file's top-level fields."""
_POSE_WORDS = ("pos", "quat", "rot", "trans", "extrinsic", "orient", "rvec", "tvec")


# ---------------------------------------------------------------------------------------------
# camera file
# ---------------------------------------------------------------------------------------------

def _num(d: dict, key: str, path: Path):
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise CaptureError(f"{path}: field '{key}' must be a finite number, got {v!r}")
    return float(v)


def _check_fields(d: dict, path: Path) -> None:
    """A field the reader does not know is refused when it looks like a misspelt field or a pose outside 'pose'
    (the pose would be silently lost and the camera put at the origin); anything else is ignored with a warning."""
    for key in d:
        if key in CAMERA_FIELDS:
            continue
        hint = did_you_mean(key, CAMERA_FIELDS)
        if hint:
            raise CaptureError(f"{path}: unknown field '{key}'{hint}; the fields are {', '.join(CAMERA_FIELDS)}")
        if any(w in key.lower() for w in _POSE_WORDS) or key in ("R", "t", "T"):
            raise CaptureError(f"{path}: field '{key}' is not read: a camera pose goes under 'pose' as "
                               '{"position": [x, y, z], "quaternion_wxyz": [w, x, y, z], "convention": "sapien"} '
                               "(or a 4x4 OpenCV 'T_world_camera')")
        log.warning("%s: field '%s' is not a camera-file field; ignored (the fields are %s)", path, key,
                    ", ".join(CAMERA_FIELDS))


def camera_from_dict(d: dict, path: Path | str = "<camera>") -> Camera:
    """Parse the camera-file dict (module docstring) into a :class:`real2sim.core.camera.Camera` (OpenCV pose)."""
    path = Path(path)
    if not isinstance(d, dict):
        raise CaptureError(f"{path}: must be a JSON object with width, height, fx, fy, cx, cy (see docs/capture.md)")
    _check_fields(d, path)
    for k in ("width", "height"):
        if not isinstance(d.get(k), int) or d[k] <= 0:
            raise CaptureError(f"{path}: field '{k}' must be a positive integer (image size in pixels), got {d.get(k)!r}")
    if "K" in d:
        K = np.asarray(d["K"], float)
        if K.shape != (3, 3):
            raise CaptureError(f"{path}: field 'K' must be 3x3, got shape {K.shape}")
    else:
        missing = [k for k in ("fx", "fy", "cx", "cy") if k not in d]
        if missing:
            raise CaptureError(f"{path}: missing {', '.join(missing)}; give fx, fy, cx, cy (pixels) or a 3x3 'K'")
        K = np.array([[_num(d, "fx", path), 0, _num(d, "cx", path)], [0, _num(d, "fy", path), _num(d, "cy", path)], [0, 0, 1]])
    dist = np.asarray(d.get("distortion", [0.0] * 5) or [0.0] * 5, float).ravel()
    if dist.size not in (4, 5, 8, 12, 14):
        raise CaptureError(f"{path}: 'distortion' must be OpenCV coefficients [k1, k2, p1, p2, k3], got {dist.size} numbers")
    if dist.size != 5:
        if np.any(dist[5:]) :
            raise CaptureError(f"{path}: distortion has rational/thin-prism terms ({dist.size} numbers); the bundle stores "
                               "5 (k1 k2 p1 p2 k3). Undistort the frames first, or recalibrate with the 5-term model")
        dist = np.concatenate([dist, np.zeros(5)])[:5]
    if "T_world_camera" in d and "pose" in d:
        raise CaptureError(f"{path}: give either 'T_world_camera' or 'pose', not both")
    if "T_world_camera" in d:
        T = np.asarray(d["T_world_camera"], float)
        if T.shape != (4, 4):
            raise CaptureError(f"{path}: 'T_world_camera' must be a 4x4 matrix, got shape {T.shape}")
        R = T[:3, :3]
        if not np.allclose(R.T @ R, np.eye(3), atol=1e-4) or np.linalg.det(R) < 0:
            raise CaptureError(f"{path}: 'T_world_camera' rotation is not orthonormal; it must be a rigid OpenCV camera pose")
    elif "pose" in d:
        p = d["pose"]
        conv = p.get("convention")
        if conv not in CONVENTIONS:
            raise CaptureError(f"{path}: 'pose.convention' must be one of {', '.join(CONVENTIONS)} (the camera axes the "
                               f"quaternion rotates; the Bridge/SAPIEN configs use 'sapien'), got {conv!r}")
        q = np.asarray(p.get("quaternion_wxyz", []), float)
        pos = np.asarray(p.get("position", []), float)
        if q.shape != (4,) or pos.shape != (3,) or abs(np.linalg.norm(q) - 1) > 1e-3:
            raise CaptureError(f"{path}: 'pose' needs position [x, y, z] (m) and a unit quaternion_wxyz [w, x, y, z]")
        T = camera_pose_from_convention(make_pose(pos, q), conv)
    else:
        log.warning("%s: no extrinsics; the camera is placed at the world origin looking along +Z. "
                    "Solve them with capture.camera.solve_pnp from >= 4 clicked points", path)
        T = np.eye(4)
    cam = Camera(int(d["width"]), int(d["height"]), K, T, dist, float(d.get("near", 0.01)), float(d.get("far", 10.0)))
    check_intrinsics(cam, path)
    return cam


def load_camera(path) -> Camera:
    """Read a camera file: the JSON of the module docstring (or the same fields in YAML), a ROS ``camera_info``
    (the ``camera_calibration`` package's YAML, or a ``rostopic`` / ``ros2 topic echo`` of the message), or an
    OpenCV ``FileStorage`` calibration (``%YAML:1.0`` or XML: ``camera_matrix`` / ``cameraMatrix``,
    ``distortion_coefficients`` / ``distCoeffs``, ``image_width``, ``image_height``). The last two carry no pose."""
    path = Path(path)
    if not path.is_file():
        raise CaptureError(f"{path}: no such camera file; check the path")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml", ".xml"):
        d = _read_opencv_storage(path) if suffix == ".xml" or path.read_text(errors="replace").startswith("%YAML") \
            else _read_yaml(path)
        return camera_from_dict(_camera_dict_from_other_tools(d, path), path)
    try:
        d = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno} ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise CaptureError(f"{path}: invalid JSON{where}; fix the syntax (a ROS camera_info or an OpenCV calibration "
                           "is read from a .yaml / .xml file)") from exc
    return camera_from_dict(d, path)


def _read_yaml(path: Path) -> dict:
    try:
        import yaml
    except ImportError:
        raise CaptureError(f"{path}: reading a YAML camera file needs PyYAML. Install it with: "
                           "pip install 'real2sim[capture]' (or pip install pyyaml)") from None
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CaptureError(f"{path}: invalid YAML ({' '.join(str(exc).split())}); fix the syntax") from exc
    if not isinstance(d, dict):
        raise CaptureError(f"{path}: must be a YAML mapping (a ROS camera_info or the camera-file fields)")
    return d


def _read_opencv_storage(path: Path) -> dict:
    """The top-level nodes of an OpenCV ``FileStorage`` file: matrices as nested lists, numbers, strings."""
    import cv2

    try:
        fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_READ)
    except cv2.error as exc:
        raise CaptureError(f"{path}: OpenCV cannot read this calibration file ({' '.join(str(exc).split())[:200]})") from exc
    if not fs.isOpened():
        raise CaptureError(f"{path}: OpenCV cannot read this calibration file; check that it is a FileStorage YAML/XML")
    out = {}
    try:
        for key in fs.root().keys():
            node = fs.getNode(key)
            if node.isInt():
                out[key] = int(node.real())
            elif node.isReal():
                out[key] = float(node.real())
            elif node.isString():
                out[key] = node.string()
            elif node.isMap() and node.mat() is not None:
                out[key] = node.mat().tolist()
            elif node.isSeq():
                out[key] = [node.at(i).real() for i in range(node.size())]
    finally:
        fs.release()
    return out


_MATRIX_KEYS = ("camera_matrix", "cameraMatrix", "K", "k")
_DIST_KEYS = ("distortion_coefficients", "distCoeffs", "dist_coeffs", "D", "d")
_PINHOLE_MODELS = ("plumb_bob", "rational_polynomial", "", None)


def _matrix(v, path: Path, key: str) -> list:
    """A ROS ``{rows, cols, data}`` matrix, a flat list or nested lists, as nested / flat lists."""
    if isinstance(v, dict):
        if "data" not in v:
            raise CaptureError(f"{path}: field '{key}' has no 'data'; a ROS matrix is {{rows, cols, data}}")
        v = v["data"]
    a = np.asarray(v, float)
    if key in _MATRIX_KEYS:
        if a.size != 9:
            raise CaptureError(f"{path}: field '{key}' must hold 9 numbers (the 3x3 intrinsic matrix), got {a.size}")
        return a.reshape(3, 3).tolist()
    return a.ravel().tolist()


def _camera_dict_from_other_tools(d: dict, path: Path) -> dict:
    """A ROS camera_info or an OpenCV calibration as the camera-file dict; a dict already in camera-file fields is
    returned as it is."""
    key_k = next((k for k in _MATRIX_KEYS if k in d), None)
    if key_k is None or key_k == "K" and not any(k in d for k in ("image_width", "distortion_model", "D", "d")):
        return d  # the camera-file fields in YAML (its 'K' is the camera file's own)
    model = d.get("distortion_model")
    if model not in _PINHOLE_MODELS:
        raise CaptureError(f"{path}: distortion_model '{model}' is not supported (a fisheye / equidistant lens); "
                           "undistort the frames to a pinhole camera first, or calibrate with the plumb_bob model")
    width = d.get("image_width", d.get("width"))
    height = d.get("image_height", d.get("height"))
    if width is None or height is None:
        raise CaptureError(f"{path}: no image size; add image_width and image_height (pixels) to the file")
    out = {"width": width, "height": height, "K": _matrix(d[key_k], path, key_k)}
    key_d = next((k for k in _DIST_KEYS if k in d), None)
    if key_d is not None and _matrix(d[key_d], path, key_d):
        out["distortion"] = _matrix(d[key_d], path, key_d)
    log.info("%s: read as a %s calibration (intrinsics only)", path,
             "ROS camera_info" if "distortion_model" in d or key_k in ("K", "k") else "OpenCV")
    return out


def camera_to_dict(cam: Camera) -> dict:
    """The camera-file dict of a camera (OpenCV ``T_world_camera``)."""
    return {"width": int(cam.width), "height": int(cam.height), "fx": cam.fx, "fy": cam.fy, "cx": cam.cx, "cy": cam.cy,
            "distortion": [float(x) for x in cam.distortion], "T_world_camera": np.round(cam.T_world_camera, 9).tolist(),
            "near": float(cam.near), "far": float(cam.far)}


def check_intrinsics(cam: Camera, path: Path | str = "<camera>") -> None:
    """Refuse intrinsics that cannot belong to an image of the camera's size."""
    w, h = cam.width, cam.height
    if cam.fx <= 0 or cam.fy <= 0:
        raise CaptureError(f"{path}: focal lengths must be positive (fx={cam.fx}, fy={cam.fy})")
    if not (0 < cam.cx < w and 0 < cam.cy < h):
        raise CaptureError(f"{path}: principal point ({cam.cx:.1f}, {cam.cy:.1f}) lies outside the {w}x{h} image; "
                           "cx, cy are in pixels of this image size (were the intrinsics made for another resolution?)")
    fov = np.degrees(2 * np.arctan(w / (2 * cam.fx)))
    if not 5.0 < fov < 175.0:
        raise CaptureError(f"{path}: fx={cam.fx:.1f} gives a {fov:.1f} deg horizontal field of view at width {w}; "
                           "fx, fy are in pixels (not mm)")
    if not 0.2 < cam.fx / cam.fy < 5.0:
        raise CaptureError(f"{path}: fx/fy = {cam.fx / cam.fy:.2f} is implausible; check fx and fy")


def check_camera_matches_frames(cam: Camera, width: int, height: int, path: Path | str = "<camera>",
                                frames: str = "the frames") -> None:
    """The camera must describe images of the frames' size; says how to fix a resolution mismatch."""
    if (cam.width, cam.height) == (width, height):
        return
    fix = "give intrinsics calibrated at the frames' resolution"
    if abs(cam.width / cam.height - width / height) < 1e-3:
        s = width / cam.width
        fix = (f"the aspect ratio matches: scale fx, fy, cx, cy by {s:.4g} (capture.camera.scale_camera) and set "
               f"width={width}, height={height}")
    raise CaptureError(f"{path}: camera is {cam.width}x{cam.height} but {frames} are {width}x{height}; {fix}")


def scale_camera(cam: Camera, width: int, height: int) -> Camera:
    """Intrinsics for the same camera at another resolution (OpenCV pixel centres: c' = (c + 0.5) s - 0.5)."""
    sx, sy = width / cam.width, height / cam.height
    K = cam.K.copy()
    K[0, 0] *= sx
    K[1, 1] *= sy
    K[0, 2] = (cam.cx + 0.5) * sx - 0.5
    K[1, 2] = (cam.cy + 0.5) * sy - 0.5
    return Camera(width, height, K, cam.T_world_camera.copy(), cam.distortion.copy(), cam.near, cam.far)


# ---------------------------------------------------------------------------------------------
# intrinsic calibration
# ---------------------------------------------------------------------------------------------

@dataclass
class CalibrationResult:
    """Intrinsic calibration."""

    K: np.ndarray
    distortion: np.ndarray
    width: int
    height: int
    rms_px: float
    """Overall RMS reprojection error (pixels)."""
    per_view_rms_px: list[float]
    T_camera_board: list[np.ndarray]
    """Board pose in each used view (OpenCV camera frame)."""
    used: list[int] = field(default_factory=list)
    """Indices of the images in which the board was found."""

    def camera(self, T_world_camera: np.ndarray | None = None) -> Camera:
        return Camera(self.width, self.height, self.K.copy(), np.eye(4) if T_world_camera is None else T_world_camera,
                      self.distortion.copy())


def _to_gray(img: np.ndarray) -> np.ndarray:
    import cv2

    img = np.asarray(img)
    if img.ndim == 3:
        return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
    return img.astype(np.uint8)


def _calibrate(obj_pts, img_pts, size, used, fix_k3: bool, name: str) -> CalibrationResult:
    import cv2

    if len(obj_pts) < 3:
        raise CalibrationError(f"{name}: the board was found in {len(obj_pts)} image(s); at least 3 views at different "
                               "angles are needed (tilt the board by 20-45 degrees between views)")
    flags = cv2.CALIB_FIX_K3 if fix_k3 else 0
    rms, K, dist, rvecs, tvecs = cv2.calibrateCamera(obj_pts, img_pts, size, None, None, flags=flags)
    per_view, poses = [], []
    for o, i, rv, tv in zip(obj_pts, img_pts, rvecs, tvecs):
        proj, _ = cv2.projectPoints(o, rv, tv, K, dist)
        per_view.append(float(np.sqrt(np.mean(np.sum((proj.reshape(-1, 2) - i.reshape(-1, 2)) ** 2, 1)))))
        T = np.eye(4)
        T[:3, :3] = cv2.Rodrigues(rv)[0]
        T[:3, 3] = tv.ravel()
        poses.append(T)
    return CalibrationResult(K, dist.ravel()[:5], size[0], size[1], float(rms), per_view, poses, used)


def calibrate_checkerboard(images: Sequence[np.ndarray], pattern: tuple[int, int], square: float,
                           fix_k3: bool = True) -> CalibrationResult:
    """Intrinsics from checkerboard views. ``pattern`` = inner corners (cols, rows); ``square`` = side (m)."""
    import cv2

    obj = np.zeros((pattern[0] * pattern[1], 3), np.float32)
    obj[:, :2] = np.mgrid[0:pattern[0], 0:pattern[1]].T.reshape(-1, 2) * square
    obj_pts, img_pts, used, size = [], [], [], None
    for i, img in enumerate(images):
        g = _to_gray(img)
        if size is None:
            size = (g.shape[1], g.shape[0])
        elif (g.shape[1], g.shape[0]) != size:
            raise CalibrationError(f"calibration image {i} is {g.shape[1]}x{g.shape[0]}, the first is {size[0]}x{size[1]}; "
                                   "use images from one camera at one resolution")
        ok, corners = cv2.findChessboardCornersSB(g, pattern, flags=cv2.CALIB_CB_ACCURACY)
        if not ok:
            ok, corners = cv2.findChessboardCorners(g, pattern)
            if ok:
                corners = cv2.cornerSubPix(g, corners, (5, 5), (-1, -1),
                                           (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 1e-4))
        if not ok:
            log.info("checkerboard %s not found in image %d", pattern, i)
            continue
        obj_pts.append(obj)
        img_pts.append(corners.astype(np.float32))
        used.append(i)
    if size is None:
        raise CalibrationError("calibrate_checkerboard: no images given")
    return _calibrate(obj_pts, img_pts, size, used, fix_k3, f"checkerboard {pattern[0]}x{pattern[1]} (inner corners)")


def aruco_dictionary(name: str):
    """The OpenCV predefined ArUco dictionary ``name`` (e.g. ``"DICT_4X4_50"``); unknown names suggest close ones."""
    import cv2

    if not name.startswith("DICT_") or not hasattr(cv2.aruco, name):

        raise UnknownNameError("ArUco dictionary", name, [n for n in dir(cv2.aruco) if n.startswith("DICT_")])
    return cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, name))


def charuco_board(squares: tuple[int, int], square: float, marker: float, dictionary: str = "DICT_5X5_100"):
    """An OpenCV ChArUco board (``squares`` = (cols, rows) of squares; lengths in m)."""
    import cv2

    d = aruco_dictionary(dictionary)
    return cv2.aruco.CharucoBoard(tuple(squares), square, marker, d)


def calibrate_charuco(images: Sequence[np.ndarray], squares: tuple[int, int], square: float, marker: float,
                      dictionary: str = "DICT_5X5_100", fix_k3: bool = True, min_corners: int = 6) -> CalibrationResult:
    """Intrinsics from ChArUco views (partial views are fine: each corner is identified by its markers)."""
    import cv2

    board = charuco_board(squares, square, marker, dictionary)
    det = cv2.aruco.CharucoDetector(board)
    obj_pts, img_pts, used, size = [], [], [], None
    for i, img in enumerate(images):
        g = _to_gray(img)
        if size is None:
            size = (g.shape[1], g.shape[0])
        corners, ids, _, _ = det.detectBoard(g)
        if ids is None or len(ids) < min_corners:
            log.info("ChArUco: %s corners in image %d (need %d)", 0 if ids is None else len(ids), i, min_corners)
            continue
        o, p = board.matchImagePoints(corners, ids)
        obj_pts.append(o.astype(np.float32))
        img_pts.append(p.astype(np.float32))
        used.append(i)
    if size is None:
        raise CalibrationError("calibrate_charuco: no images given")
    return _calibrate(obj_pts, img_pts, size, used, fix_k3, f"ChArUco {squares[0]}x{squares[1]} {dictionary}")


# ---------------------------------------------------------------------------------------------
# extrinsics
# ---------------------------------------------------------------------------------------------

@dataclass
class PnPResult:
    """Camera pose from 2D-3D correspondences."""

    T_world_camera: np.ndarray
    rms_px: float
    max_px: float
    residuals_px: list[float]


def solve_pnp(points_2d, points_3d, K, distortion=None) -> PnPResult:
    """OpenCV camera pose from >= 4 pixel <-> world point correspondences (SQPnP, then LM refinement)."""
    import cv2

    p2 = np.asarray(points_2d, np.float64).reshape(-1, 2)
    p3 = np.asarray(points_3d, np.float64).reshape(-1, 3)
    if p2.shape[0] != p3.shape[0]:
        raise CalibrationError(f"solve_pnp: {p2.shape[0]} pixel points but {p3.shape[0]} world points; give them in pairs")
    if p2.shape[0] < 4:
        raise CalibrationError(f"solve_pnp: {p2.shape[0]} correspondences; click at least 4 (6+ spread over the image is better)")
    centred = p3 - p3.mean(0)
    if np.linalg.svd(centred, compute_uv=False)[1] < 1e-6:
        raise CalibrationError("solve_pnp: the world points are (nearly) collinear; use points that span a plane or a volume")
    dist = np.zeros(5) if distortion is None else np.asarray(distortion, np.float64)
    K = np.asarray(K, np.float64)
    ok, rv, tv = cv2.solvePnP(p3, p2, K, dist, flags=cv2.SOLVEPNP_SQPNP)
    if not ok:
        raise CalibrationError("solve_pnp: OpenCV found no pose; check that the 2D and 3D points are in the same order")
    rv, tv = cv2.solvePnPRefineLM(p3, p2, K, dist, rv, tv)
    proj, _ = cv2.projectPoints(p3, rv, tv, K, dist)
    res = np.linalg.norm(proj.reshape(-1, 2) - p2, axis=1)
    T_cw = np.eye(4)
    T_cw[:3, :3] = cv2.Rodrigues(rv)[0]
    T_cw[:3, 3] = tv.ravel()
    T = np.linalg.inv(T_cw)
    if (T_cw[:3, :3] @ p3.T + T_cw[:3, 3:4])[2].min() <= 0:
        raise CalibrationError("solve_pnp: some world points end up behind the camera; a 2D-3D pair is probably swapped")
    return PnPResult(T, float(np.sqrt(np.mean(res ** 2))), float(res.max()), [float(r) for r in res])


# ---------------------------------------------------------------------------------------------
# table plane
# ---------------------------------------------------------------------------------------------

@dataclass
class Plane:
    """A plane n . x = d (unit normal pointing up, +Z side)."""

    normal: np.ndarray
    d: float
    rms_m: float = 0.0

    @property
    def tilt_deg(self) -> float:
        """Angle between the normal and world +Z."""
        return float(np.degrees(np.arccos(np.clip(self.normal[2], -1.0, 1.0))))

    def height_at(self, x: float, y: float) -> float:
        n = self.normal
        return float((self.d - n[0] * x - n[1] * y) / n[2])


def fit_plane(points_3d) -> Plane:
    """Least-squares plane through >= 3 world points (e.g. clicked table corners measured in the robot frame)."""
    p = np.asarray(points_3d, float).reshape(-1, 3)
    if p.shape[0] < 3:
        raise CalibrationError(f"fit_plane: {p.shape[0]} points; give at least 3 points on the table")
    c = p.mean(0)
    _, s, vt = np.linalg.svd(p - c)
    if s[1] < 1e-9:
        raise CalibrationError("fit_plane: the points are collinear; use points spread over the table")
    n = vt[2] / np.linalg.norm(vt[2])
    if n[2] < 0:
        n = -n
    rms = float(np.sqrt(np.mean(((p - c) @ n) ** 2)))
    return Plane(n, float(n @ c), rms)


def table_height_from_points(points_3d, max_tilt_deg: float = 5.0) -> tuple[float, Plane]:
    """Table height (m, world Z) from points on the table; warns when the table is not level in the world."""
    plane = fit_plane(points_3d)
    if plane.tilt_deg > max_tilt_deg:
        log.warning("table plane is tilted %.1f deg from world +Z; the bundle assumes a level table "
                    "(is the world frame the robot base?)", plane.tilt_deg)
    c = np.asarray(points_3d, float).reshape(-1, 3).mean(0)
    return plane.height_at(c[0], c[1]), plane


def pixel_rays(cam: Camera, uv) -> tuple[np.ndarray, np.ndarray]:
    """World-frame ray origins and unit directions through pixels ``uv`` (undistorted with the camera's model)."""
    import cv2

    uv = np.asarray(uv, np.float64).reshape(-1, 1, 2)
    xy = cv2.undistortPoints(uv, cam.K, cam.distortion).reshape(-1, 2)
    d_cam = np.concatenate([xy, np.ones((len(xy), 1))], 1)
    d = d_cam @ cam.T_world_camera[:3, :3].T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.repeat(cam.T_world_camera[None, :3, 3], len(d), 0), d


def pixels_to_table(cam: Camera, uv, table_height: float) -> np.ndarray:
    """World points where the rays through pixels ``uv`` meet the table plane z = ``table_height``."""
    o, d = pixel_rays(cam, uv)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (table_height - o[:, 2]) / d[:, 2]
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise CalibrationError("pixels_to_table: some pixels look at or above the horizon of the table plane; "
                               "click pixels on the table")
    return o + s[:, None] * d


def table_mask(cam: Camera, table_height: float, corners_xy) -> np.ndarray:
    """``(h, w) bool`` pixels whose ray meets the table plane inside the polygon ``corners_xy`` (world x, y)."""
    import cv2

    pts = np.array([[x, y, table_height] for x, y in corners_xy])
    uv = cam.project(pts)
    m = np.zeros((cam.height, cam.width), np.uint8)
    cv2.fillPoly(m, [np.round(uv).astype(np.int32)], 1)
    return m > 0
