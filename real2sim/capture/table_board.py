"""Table plane: where the table top is in the world, measured from images.

The bundle's convention (``docs/bundle.md``): world +Z up, the table top is the level plane
``z = table_height``. Two ways to measure it with the bundle camera (intrinsics and ``T_world_camera``):

- :func:`table_from_board`: a checkerboard (or ChArUco board) lying flat on the table in one image. Its corners
  are detected, the board pose solved by PnP (board z = 0) and the board plane moved into the world with the
  camera pose. Gives the plane's normal (tilt from +Z) and its height at the board centre.
- :func:`real2sim.capture.table.table_from_objects`: every object with masks in the bundle is aligned with a free height
  (render-and-compare, ``dof="planar_z"``); its lowest world point is where it touches the table. The height is
  the median of those bottoms; with >= 3 objects a least-squares plane through the contacts also gives a tilt.
  Objects on one flat table must agree: a large spread says the camera pose (or the intrinsics) is off.

:func:`real2sim.capture.table.table_stage` runs either one in a bundle (it lives in the core package because the
objects method uses the texture stage's alignment; stage packages do not import each other), writes ``table_height`` (and moves a fixed object ``table`` with
it when its top was on the plane), ``reports/table.json`` and ``reports/table.png`` (the image with the estimated
plane drawn as a 5 cm grid and the contacts / corners marked).
"""
from __future__ import annotations

import dataclasses
import logging
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.capture.camera_file import charuco_board, pixel_rays, solve_pnp
from real2sim.core.camera import Camera
from real2sim.core.errors import CalibrationError, CaptureError
from real2sim.core.imaging import read_rgb, to_uint8

log = logging.getLogger(__name__)



# ---------------------------------------------------------------------------------------------
# configuration and result
# ---------------------------------------------------------------------------------------------

@dataclass
class TableConfig:
    """Settings of the table-plane estimate and its checks."""

    max_spread_m: float = 0.005
    """Objects' bottoms differing by more than this (m) give a warning: on one flat table they agree to a few mm,
    so a larger spread says the camera pose or intrinsics are off (or an object does not rest on the table)."""
    max_tilt_deg: float = 5.0
    """A plane tilted more than this from world +Z gives a warning (the bundle assumes a level table)."""
    contact_band_m: float = 0.001
    """Mesh vertices within this of an object's lowest point form its footprint; the contact is its centre."""
    require_converged: bool = True
    """Leave out objects whose alignment did not converge (they are still reported)."""
    board_thickness_m: float = 0.0
    """Thickness of the board (m): the table is this far below the board's printed surface."""
    min_charuco_corners: int = 6
    """Fewer detected ChArUco corners count as 'board not found'."""
    grid_step_m: float = 0.05
    """Spacing (m) of the grid drawn on the estimated plane in ``reports/table.png``."""
    grid_max_range_m: float = 2.5
    """The grid covers the plane seen within this distance (m) of the camera."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class CharucoSpec:
    """A ChArUco board as printed (OpenCV ``CharucoBoard``)."""

    squares: tuple[int, int]
    """Squares (cols, rows) of the board (not inner corners)."""
    square: float
    """Side of a chessboard square (m)."""
    marker: float
    """Side of an ArUco marker (m)."""
    dictionary: str = "DICT_5X5_100"
    """OpenCV ArUco dictionary name."""

    @classmethod
    def coerce(cls, value) -> CharucoSpec | None:
        """None, a CharucoSpec, or a dict with the field names."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, dict):
            try:
                return cls(tuple(int(v) for v in value["squares"]), float(value["square"]), float(value["marker"]),
                           str(value.get("dictionary", "DICT_5X5_100")))
            except (KeyError, TypeError, ValueError) as exc:
                raise CaptureError(f"charuco: needs 'squares' [cols, rows], 'square' (m), 'marker' (m) and optionally "
                                   f"'dictionary'; got {value!r} ({exc})") from None
        raise CaptureError(f"charuco: expected a CharucoSpec or a dict, got {type(value).__name__}")


@dataclass
class TableEstimate:
    """Where the table top is, and how well the sources agree."""

    height: float
    """Table height (m, world Z): the ``table_height`` of the bundle convention (level plane)."""
    normal: np.ndarray
    """``(3,)`` unit normal of the measured plane, pointing up (+Z side). ``[0, 0, 1]`` when it is not measured
    (one or two objects)."""
    tilt_deg: float
    """Angle between ``normal`` and world +Z (deg)."""
    method: str
    """'board' or 'objects'."""
    centre: np.ndarray
    """``(3,)`` world point on the measured plane: the centre of the board corners found (where ``height`` is
    taken), or the contacts' centre (on the fitted plane with >= 3 objects)."""
    points: np.ndarray
    """``(n, 3)`` world points used: the board corners on the table, or one contact per object."""
    labels: list[str]
    """``n`` names of ``points`` (corner index or object id)."""
    residuals_m: dict[str, float]
    """Per source: signed world-Z distance (m) of its point from the level plane ``z = height`` (objects: bottom
    minus height; board: per corner, non-zero only where the board is tilted)."""
    spread_m: float
    """Largest minus smallest Z of ``points`` (m): the objects' disagreement, or the board's tilt over its size."""
    rms_px: float | None = None
    """Board: PnP reprojection RMS (px). Objects: mean robust contour residual of the alignments (px)."""
    plane_rms_m: float | None = None
    """RMS distance (m) of the contacts from the least-squares plane through them (objects, >= 3 of them)."""
    sources: dict[str, dict] = field(default_factory=dict)
    """Per source the details: objects' bottoms, IoU, convergence; the board's pattern, corners, pose."""
    warnings: list[str] = field(default_factory=list)
    """What looks wrong and how to fix it (large spread, tilt, objects left out)."""
    T_world_board: np.ndarray | None = None
    """``(4, 4)`` pose of the board in the world (board method only)."""

    def height_at(self, x: float, y: float) -> float:
        """World Z of the measured (possibly tilted) plane above world (x, y)."""
        n, c = self.normal, self.centre
        return float(c[2] - (n[0] * (x - c[0]) + n[1] * (y - c[1])) / n[2])

    def to_dict(self) -> dict:
        """JSON-ready numbers (metres, degrees, pixels)."""
        def r(v, k=6):
            return None if v is None else round(float(v), k)

        out = {"method": self.method, "height_m": r(self.height), "normal": [r(v) for v in self.normal],
               "tilt_deg": r(self.tilt_deg, 4), "centre": [r(v) for v in self.centre],
               "spread_m": r(self.spread_m), "rms_px": r(self.rms_px, 4), "plane_rms_m": r(self.plane_rms_m),
               "residuals_m": {k: r(v) for k, v in self.residuals_m.items()},
               "points": {lab: [r(v) for v in p] for lab, p in zip(self.labels, self.points)},
               "sources": self.sources, "warnings": list(self.warnings)}
        if self.T_world_board is not None:
            out["T_world_board"] = np.round(self.T_world_board, 9).tolist()
        return out


# ---------------------------------------------------------------------------------------------
# board on the table
# ---------------------------------------------------------------------------------------------

def _gray(image: np.ndarray) -> np.ndarray:
    import cv2

    img = np.asarray(image)
    if img.dtype != np.uint8:
        img = np.clip(np.rint(img.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY) if img.ndim == 3 else img


def require_pose(camera: Camera, where: str) -> None:
    """Refuse a camera without a pose (identity ``T_world_camera``: the camera file had no extrinsics)."""
    if np.allclose(camera.T_world_camera, np.eye(4)):
        raise CaptureError(f"{where}: the camera has no pose (T_world_camera is the identity, i.e. the camera file had "
                           "no extrinsics), so the table cannot be placed in the world. Set the pose first: "
                           "'real2sim calibrate DIR --points clicks.json' (PnP), or 'T_world_camera' / 'pose' in "
                           "camera.json")


def detect_checkerboard(gray: np.ndarray, pattern: tuple[int, int], square: float):
    """Inner corners of a checkerboard: ``(n, 2)`` pixels and ``(n, 3)`` board points (z = 0), or None."""
    import cv2

    ok, corners = cv2.findChessboardCornersSB(gray, pattern, flags=cv2.CALIB_CB_ACCURACY)
    if not ok:
        ok, corners = cv2.findChessboardCorners(gray, pattern, flags=cv2.CALIB_CB_ADAPTIVE_THRESH
                                                | cv2.CALIB_CB_NORMALIZE_IMAGE)
        if ok:
            corners = cv2.cornerSubPix(gray, corners, (5, 5), (-1, -1),
                                       (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 50, 1e-4))
    if not ok:
        return None
    obj = np.zeros((pattern[0] * pattern[1], 3))
    obj[:, :2] = np.mgrid[0:pattern[0], 0:pattern[1]].T.reshape(-1, 2) * square
    return corners.reshape(-1, 2).astype(np.float64), obj


def detect_charuco(gray: np.ndarray, spec: CharucoSpec, min_corners: int):
    """ChArUco corners: ``(n, 2)`` pixels and ``(n, 3)`` board points (z = 0), or None when fewer than ``min_corners``."""
    import cv2

    board = charuco_board(spec.squares, spec.square, spec.marker, spec.dictionary)
    corners, ids, _, _ = cv2.aruco.CharucoDetector(board).detectBoard(gray)
    if ids is None or len(ids) < max(4, min_corners):
        return None
    obj, img = board.matchImagePoints(corners, ids)
    return img.reshape(-1, 2).astype(np.float64), obj.reshape(-1, 3).astype(np.float64)


def _not_found(name: str, pattern, charuco: CharucoSpec | None) -> CalibrationError:
    if charuco is not None:
        what = f"ChArUco board {charuco.squares[0]}x{charuco.squares[1]} squares ({charuco.dictionary})"
        fix = "check the squares count and the dictionary, and that enough markers are in view and sharp"
    else:
        what = f"{pattern[0]}x{pattern[1]} checkerboard (inner corners)"
        fix = ("the pattern counts inner corners (squares minus one per side: a board of 10x7 squares is 9x6); the "
               "whole board must be in view, in focus, not overexposed, with a white border around it")
    return CalibrationError(f"{name}: no {what} found; {fix}")


def _level_normal(n: np.ndarray) -> np.ndarray:
    n = np.asarray(n, float) / np.linalg.norm(n)
    return -n if n[2] < 0 else n


def _tilt(n: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip(n[2], -1.0, 1.0))))


def table_from_board(image, camera: Camera, pattern: tuple[int, int] = (9, 6), square: float = 0.025,
                     charuco=None, config: TableConfig | None = None, name: str | None = None) -> TableEstimate:
    """Table plane from a checkerboard (or ChArUco board) lying flat on the table, seen by ``camera``.

    ``image``: ``(h, w, 3)`` uint8 RGB (or float in [0, 1], or grey), or an image file path. ``camera``: the bundle
    camera (intrinsics, distortion, OpenCV ``T_world_camera``). ``pattern``: inner corners (cols, rows) of a
    checkerboard of ``square`` m squares; ``charuco``: a :class:`CharucoSpec` (or dict) instead. ``name`` names the
    image in errors (default: the path). The height is the plane's Z at the board centre, minus
    ``config.board_thickness_m``.
    """
    cfg = config or TableConfig()
    spec = CharucoSpec.coerce(charuco)
    if isinstance(image, (str, Path)):

        name = name or str(image)
        image = read_rgb(image)
    name = name or "<board image>"
    img = np.asarray(image)
    require_pose(camera, name)
    if (img.shape[1], img.shape[0]) != (camera.width, camera.height):
        raise CaptureError(f"{name}: the image is {img.shape[1]}x{img.shape[0]} but the camera is "
                           f"{camera.width}x{camera.height}; take the board image with the bundle camera at its "
                           "resolution (or scale the intrinsics: capture.camera.scale_camera)")
    gray = _gray(img)
    found = (detect_charuco(gray, spec, cfg.min_charuco_corners) if spec is not None
             else detect_checkerboard(gray, tuple(pattern), float(square)))
    if found is None:
        raise _not_found(name, pattern, spec)
    uv, obj = found
    pnp = solve_pnp(uv, obj, camera.K, camera.distortion)  # its 'world' is the board frame
    T_world_board = camera.T_world_camera @ np.linalg.inv(pnp.T_world_camera)
    n = _level_normal(T_world_board[:3, 2])
    corners = obj @ T_world_board[:3, :3].T + T_world_board[:3, 3] - cfg.board_thickness_m * n
    centre = corners.mean(0)
    height = float(centre[2])
    tilt = _tilt(n)
    labels = [f"corner_{i}" for i in range(len(corners))]
    view_h = _view_centre_height(camera, n, centre)
    warnings = []
    if tilt > cfg.max_tilt_deg:
        warnings.append(f"the board plane is tilted {tilt:.1f} deg from world +Z: the board does not lie flat, or the "
                        "camera pose is rotated (refine it: 'real2sim calibrate DIR --points clicks.json'); the bundle "
                        "assumes a level table")
    if pnp.rms_px > 1.0:
        warnings.append(f"the board's corners reproject {pnp.rms_px:.2f} px RMS off (expected < 1 px): wrong square "
                        "size or pattern, a bent board, or lens distortion missing from the camera")
    sources = {"board": {"image": name, "kind": "charuco" if spec else "checkerboard",
                         "pattern": list(spec.squares) if spec else [int(pattern[0]), int(pattern[1])],
                         "square_m": spec.square if spec else float(square), "corners": int(len(uv)),
                         "reprojection_rms_px": round(pnp.rms_px, 4), "reprojection_max_px": round(pnp.max_px, 4),
                         "board_thickness_m": cfg.board_thickness_m,
                         "height_at_view_centre_m": None if view_h is None else round(view_h, 6),
                         "corners_px": np.round(uv, 2).tolist()}}
    for w in warnings:
        log.warning("table from board: %s", w)
    return TableEstimate(height, n, tilt, "board", centre, corners, labels,
                         {lab: float(p[2] - height) for lab, p in zip(labels, corners)},
                         float(np.ptp(corners[:, 2])), float(pnp.rms_px), None, sources, warnings, T_world_board)


def _view_centre_height(camera: Camera, normal: np.ndarray, centre: np.ndarray) -> float | None:
    """World Z where the optical axis meets the plane (normal, centre), or None when it does not."""
    o, d = camera.T_world_camera[:3, 3], camera.T_world_camera[:3, 2]
    den = float(normal @ d)
    if abs(den) < 1e-9:
        return None
    t = float(normal @ (centre - o)) / den
    return None if t <= 0 else float((o + t * d)[2])


# ---------------------------------------------------------------------------------------------
# picture
# ---------------------------------------------------------------------------------------------

def _project(camera: Camera, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n, 2)`` pixels (with the camera's distortion) and ``(n,)`` depths of world points ``(n, 3)``."""
    import cv2

    T_cw = np.linalg.inv(camera.T_world_camera)
    pc = pts @ T_cw[:3, :3].T + T_cw[:3, 3]
    uv, _ = cv2.projectPoints(pc.reshape(-1, 1, 3), np.zeros(3), np.zeros(3), camera.K, camera.distortion)
    return uv.reshape(-1, 2), pc[:, 2]


def _plane_extent(camera: Camera, est: TableEstimate, max_range: float):
    """(xmin, xmax, ymin, ymax) of the plane seen by the camera within ``max_range`` m, or None."""

    us, vs = np.meshgrid(np.linspace(0, camera.width - 1, 33), np.linspace(0, camera.height - 1, 25))
    o, d = pixel_rays(camera, np.stack([us.ravel(), vs.ravel()], 1))
    den = d @ est.normal
    with np.errstate(divide="ignore", invalid="ignore"):
        t = ((est.centre - o) @ est.normal) / den
    ok = np.isfinite(t) & (t > 0) & (t < max_range)
    if ok.sum() < 3:
        return None
    p = o[ok] + t[ok, None] * d[ok]
    return p[:, 0].min(), p[:, 0].max(), p[:, 1].min(), p[:, 1].max()


def _draw_polyline(canvas: np.ndarray, camera: Camera, pts: np.ndarray, color, thickness: int) -> None:
    import cv2

    uv, z = _project(camera, pts)
    lim = 4 * max(camera.width, camera.height)
    ok = (z > camera.near) & (np.abs(uv) < lim).all(1)
    for a in range(len(pts) - 1):
        if ok[a] and ok[a + 1]:
            p0 = (int(round(uv[a, 0] * 16)), int(round(uv[a, 1] * 16)))
            p1 = (int(round(uv[a + 1, 0] * 16)), int(round(uv[a + 1, 1] * 16)))
            cv2.line(canvas, p0, p1, color, thickness, cv2.LINE_AA, shift=4)


def table_picture(image: np.ndarray, camera: Camera, est: TableEstimate, config: TableConfig | None = None) -> np.ndarray:
    """``(h, w, 3)`` uint8: ``image`` with the estimated plane as a metric grid (``grid_step_m`` lines, every
    second one brighter), the contacts / board corners marked, and the numbers written at the top."""
    import cv2

    cfg = config or TableConfig()
    base = to_uint8(np.asarray(image))
    if base.ndim == 2:
        base = np.repeat(base[..., None], 3, -1)
    base = np.ascontiguousarray(base[..., :3])
    grid = base.copy()
    ext = _plane_extent(camera, est, cfg.grid_max_range_m)
    step = cfg.grid_step_m
    if ext is not None:
        x0, x1, y0, y1 = ext
        xs = np.arange(np.floor(x0 / step), np.ceil(x1 / step) + 1) * step
        ys = np.arange(np.floor(y0 / step), np.ceil(y1 / step) + 1) * step
        for axis, values, lo, hi in ((0, xs, y0, y1), (1, ys, x0, x1)):
            t = np.linspace(lo, hi, 200)
            for val in values:
                xy = np.stack([np.full_like(t, val), t], 1) if axis == 0 else np.stack([t, np.full_like(t, val)], 1)
                z = np.array([est.height_at(x, y) for x, y in xy])
                major = abs(round(val / step)) % 2 == 0
                _draw_polyline(grid, camera, np.column_stack([xy, z]), (0, 255, 255) if major else (0, 170, 200),
                               2 if major else 1)
    out = cv2.addWeighted(grid, 0.7, base, 0.3, 0)
    uv, z = _project(camera, est.points)
    board = est.method == "board"
    for lab, p, d in zip(est.labels, uv, z):
        if d <= 0:
            continue
        c = (int(round(p[0])), int(round(p[1])))
        if board:
            cv2.circle(out, c, 3, (255, 0, 255), -1, cv2.LINE_AA)
        else:
            cv2.drawMarker(out, c, (255, 0, 255), cv2.MARKER_TILTED_CROSS, 14, 2, cv2.LINE_AA)
            text = f"{lab} {est.residuals_m[lab] * 1e3 + est.height * 1e3:+.1f} mm"
            cv2.putText(out, text, (c[0] + 8, c[1] + 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 3, cv2.LINE_AA)
            cv2.putText(out, text, (c[0] + 8, c[1] + 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1,
                        cv2.LINE_AA)
    lines = [(f"table z = {est.height * 1e3:+.1f} mm  tilt {est.tilt_deg:.2f} deg  spread {est.spread_m * 1e3:.1f} mm"
              f"  ({est.method}, {len(est.labels)} {'corners' if board else 'objects'})"),
             f"grid: {step * 100:.0f} cm lines on the estimated plane" + ("" if ext else " (plane not in view)")]
    if est.warnings:
        wrapped = textwrap.wrap("warning: " + est.warnings[0], 95)
        lines += [wrapped[0], *(("  " + w) for w in wrapped[1:3])]
    cv2.rectangle(out, (0, 0), (out.shape[1], 8 + 20 * len(lines)), (0, 0, 0), -1)
    for i, text in enumerate(lines):
        color = (255, 255, 255) if i < 2 else (255, 200, 0)
        cv2.putText(out, text, (6, 20 + 20 * i), cv2.FONT_HERSHEY_SIMPLEX, 0.48, color, 1, cv2.LINE_AA)
    return out
