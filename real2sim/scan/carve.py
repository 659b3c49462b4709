"""Visual hull by voxel carving: a voxel is inside the object when it projects inside the object's mask in every
view (all but ``tolerance`` views, so one bad mask does not cut the object).

Instead of a binary occupancy each voxel keeps a signed distance: per view the mask's signed pixel distance at the
voxel's projection, scaled to metres by depth / focal length; the voxel's value is the (``tolerance`` + 1)-th
smallest over the views. Its zero level is the hull's surface, found with sub-voxel accuracy by marching cubes.
Carving runs coarse-to-fine: a 48^3 pass over the whole board finds the object's box, the fine pass fills only it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import Real2SimError, require

log = logging.getLogger(__name__)


class ScanError(Real2SimError):
    """A scan cannot be made from this capture (too few views, no object in the masks, ...)."""


@dataclass
class CarveResult:
    """A carved hull."""

    vertices: np.ndarray
    """``(V, 3)`` world (m)."""
    faces: np.ndarray
    """``(F, 3) int``."""
    voxel_m: float
    """Side of a voxel of the fine grid (m)."""
    grid: tuple[int, int, int]
    """Fine grid size."""
    bounds: np.ndarray
    """``(2, 3)`` box of the fine grid (m)."""
    seconds: float
    top: dict | None = None
    """What :func:`refine_top` did (columns lowered, by how much), when it ran."""


@dataclass
class TopConfig:
    """Photo-consistency refinement of the hull's top (:func:`refine_top`)."""

    max_drop_m: float = 0.03
    """Search this far below the hull's top in each column (m)."""
    min_views: int = 4
    """A height needs this many views that see it inside their mask."""
    window: int = 7
    """Costs are averaged over this many columns square (textureless patches borrow from their neighbours)."""
    accept_ratio: float = 0.5
    """A column is lowered only where the best height's colour variance is below this fraction of the hull top's."""
    mask_erode_px: int = 2


def signed_mask_distance(mask: np.ndarray) -> np.ndarray:
    """``(h, w) float32`` signed pixel distance to the mask's boundary: > 0 inside, < 0 outside (a pixel centre on
    either side of the boundary is +-0.5)."""
    import cv2

    m = np.asarray(mask, np.uint8)
    inside = cv2.distanceTransform(m, cv2.DIST_L2, 5)
    outside = cv2.distanceTransform(1 - m, cv2.DIST_L2, 5)
    return np.where(m > 0, inside - 0.5, 0.5 - outside).astype(np.float32)


def _sample(img: np.ndarray, u: np.ndarray, v: np.ndarray, border: float) -> np.ndarray:
    """Bilinear samples of ``img`` at pixels (u, v) (OpenCV centres); ``border`` outside the image."""
    import cv2

    n = len(u)
    cols = 4096
    rows = -(-n // cols)
    mu = np.full(rows * cols, -10.0, np.float32)
    mv = np.full(rows * cols, -10.0, np.float32)
    mu[:n], mv[:n] = u, v
    out = cv2.remap(img, mu.reshape(rows, cols), mv.reshape(rows, cols), cv2.INTER_LINEAR,
                    borderMode=cv2.BORDER_CONSTANT, borderValue=float(border))
    return out.ravel()[:n]


def hull_field(points: np.ndarray, cameras: list[Camera], distances: list[np.ndarray], tolerance: int = 1,
               chunk: int = 1 << 21) -> np.ndarray:
    """``(n,)`` metric signed distance (> 0 inside the hull) of world ``points (n, 3)``: per view the mask distance
    (:func:`signed_mask_distance`) at the projection times depth / fx, then the (tolerance + 1)-th smallest over
    the views. A point outside a view's image (or behind it) does not count in that view."""
    k = int(tolerance) + 1
    out = np.empty(len(points), np.float32)
    big = np.float32(1e3)
    for s in range(0, len(points), chunk):
        p = points[s:s + chunk]
        lows = np.full((k, len(p)), big, np.float32)  # the k smallest so far, ascending
        for cam, dist in zip(cameras, distances):
            Tcw = np.linalg.inv(cam.T_world_camera)
            pc = p @ Tcw[:3, :3].T.astype(np.float32) + Tcw[:3, 3].astype(np.float32)
            z = pc[:, 2]
            zs = np.where(z > 1e-4, z, np.float32(1e-4))
            u = pc[:, 0] / zs * cam.fx + cam.cx
            v = pc[:, 1] / zs * cam.fy + cam.cy
            d = _sample(dist, u, v, border=-float(big))  # outside the image: carved (keep the object in view)
            d = np.where(z > 1e-4, d * z / np.float32(cam.fx), -big).astype(np.float32)
            for j in range(k):  # insertion into the sorted k lowest
                smaller = d < lows[j]
                lows[j], d = np.where(smaller, d, lows[j]), np.where(smaller, lows[j], d)
        out[s:s + len(p)] = lows[k - 1]
    return out


def _grid(bounds: np.ndarray, resolution: int) -> tuple[np.ndarray, float, tuple[int, int, int]]:
    ext = bounds[1] - bounds[0]
    vox = float(ext.max() / resolution)
    shape = tuple(int(max(2, np.ceil(e / vox))) + 1 for e in ext)
    axes = [bounds[0, i] + vox * np.arange(shape[i]) for i in range(3)]
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3).astype(np.float32)
    return pts, vox, shape


def carve(cameras: list[Camera], masks: list[np.ndarray], region: np.ndarray, resolution: int = 128,
          tolerance: int = 1, table_z: float | None = 0.0, images: list[np.ndarray] | None = None,
          top: TopConfig | None = None) -> CarveResult:
    """The visual hull of ``masks`` (``(h, w) bool`` each, seen by ``cameras``) inside ``region`` (``(2, 3)`` world
    box), as a mesh on a grid with ``resolution`` voxels along the object's longest side. ``table_z``: nothing is
    below this plane (the bottom is cut there). With ``images`` (``(h, w, 3) float``, exposure-levelled) the hull's
    top is lowered where photo consistency says so (:func:`refine_top`). Raises :class:`ScanError` when nothing
    survives."""
    measure = require("skimage.measure", "scan", "scikit-image")
    t0 = time.perf_counter()
    if len(cameras) != len(masks) or not cameras:
        raise ScanError(f"carving needs one mask per camera and at least one view (got {len(cameras)} cameras, "
                        f"{len(masks)} masks)")
    dists = [signed_mask_distance(m) for m in masks]
    region = np.asarray(region, float).copy()
    if table_z is not None:
        region[0, 2] = max(region[0, 2], table_z)
    pts, vox, shape = _grid(region, 48)
    f = hull_field(pts, cameras, dists, tolerance)
    inside = f > 0
    if not inside.any():
        raise ScanError("no voxel is inside every mask: the masks do not agree on any object (a mask that misses "
                        "the object, or camera poses from another board) - check masks/ against frames/")
    occ = pts[inside]
    lo, hi = occ.min(0) - 2 * vox, occ.max(0) + 2 * vox
    if table_z is not None:
        lo[2] = table_z
    fine_bounds = np.stack([lo, hi])
    pts, vox, shape = _grid(fine_bounds, resolution)
    f = hull_field(pts, cameras, dists, tolerance).reshape(shape)
    if table_z is not None:  # the bottom cut: nothing below the table
        z = pts[:, 2].reshape(shape)
        f = np.minimum(f, (z - table_z - 0.25 * vox).astype(np.float32))
    refined = None
    if images is not None:
        f, refined = refine_top(f, lo, vox, cameras, masks, images, top or TopConfig())
    f = np.pad(f, 1, constant_values=-1.0)  # closed at the grid's border
    if f.max() <= 0:
        raise ScanError("the fine carving pass left nothing inside the masks; the object may be thinner than one "
                        f"voxel ({vox * 1e3:.2f} mm): raise the resolution")
    verts, faces, _, _ = measure.marching_cubes(f, level=0.0, spacing=(vox, vox, vox))
    verts = verts + (lo - vox)
    res = CarveResult(verts.astype(np.float64), faces.astype(np.int64), vox, shape, fine_bounds,
                      round(time.perf_counter() - t0, 3), refined)
    log.info("carved %d views at %s voxels of %.2f mm in %.2f s: %d faces", len(cameras), shape, vox * 1e3,
             res.seconds, len(faces))
    return res


def refine_top(f: np.ndarray, lo: np.ndarray, vox: float, cameras: list[Camera], masks: list[np.ndarray],
               images: list[np.ndarray], cfg: TopConfig) -> tuple[np.ndarray, dict]:
    """Lower the visual hull's top where photo consistency allows.

    Views that all look down on a flat top leave a roof above it: a point above the top projects inside every
    silhouette (the carving cannot remove it). A point on the real top, though, has the same colour in every view
    that sees it, and a point of the roof does not (it projects onto different parts of the textured top). For each
    vertical column of the grid this sweeps heights from the hull's top down by ``max_drop_m``, scores each by the
    colour variance across the views (window-averaged over neighbouring columns), and cuts the column at the best
    height where that is clearly more consistent than the hull's top. Occlusion is ignored (the top-most surface of
    a column is what views from above see); a point inside a cup is seen by few views and is left alone.

    ``f``: ``(nx, ny, nz)`` hull field (> 0 inside) on the grid at ``lo`` with voxel ``vox``. Returns the new field and
    a summary (columns lowered, median and largest drop in mm)."""
    import cv2

    from real2sim.core.imaging import erode

    nx, ny, nz = f.shape
    inside = f > 0
    has = inside.any(2)
    top = nz - 1 - np.argmax(inside[:, :, ::-1], axis=2)  # highest inside voxel per column
    ii, jj = np.nonzero(has)
    kmax = int(min(cfg.max_drop_m / vox, nz - 1))
    if not len(ii) or kmax < 2:
        return f, {"columns_lowered": 0}
    ks = np.arange(kmax + 1)
    zc = lo[2] + vox * (top[ii, jj][:, None] - ks[None])  # (ncol, K)
    valid_k = (top[ii, jj][:, None] - ks[None]) >= 0
    pts = np.stack([np.broadcast_to((lo[0] + vox * ii)[:, None], zc.shape),
                    np.broadcast_to((lo[1] + vox * jj)[:, None], zc.shape), zc], -1).reshape(-1, 3)
    s1 = np.zeros((len(pts), 3))
    s2 = np.zeros(len(pts))
    cnt = np.zeros(len(pts))
    for cam, m, img in zip(cameras, masks, images):
        inner = erode(np.asarray(m, bool), cfg.mask_erode_px).astype(np.float32)
        Tcw = np.linalg.inv(cam.T_world_camera)
        pc = pts @ Tcw[:3, :3].T + Tcw[:3, 3]
        z = np.maximum(pc[:, 2], 1e-4)
        u = (pc[:, 0] / z * cam.fx + cam.cx).astype(np.float32)
        v = (pc[:, 1] / z * cam.fy + cam.cy).astype(np.float32)
        ok = _sample(inner, u, v, 0.0) > 0.99
        if not ok.any():
            continue
        col = np.stack([_sample(np.ascontiguousarray(img[..., c], np.float32), u, v, 0.0) for c in range(3)], 1)
        s1[ok] += col[ok]
        s2[ok] += (col[ok] ** 2).sum(1)
        cnt[ok] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (s2 / cnt - (s1 ** 2).sum(1) / cnt ** 2) / 3
    var = np.where(cnt >= cfg.min_views, var, np.nan).reshape(zc.shape)
    var[~valid_k] = np.nan
    # window average over neighbouring columns, per height
    cost = np.full_like(var, np.nan)
    for k in ks:
        grid = np.zeros((nx, ny), np.float32)
        w = np.zeros((nx, ny), np.float32)
        okk = np.isfinite(var[:, k])
        grid[ii[okk], jj[okk]] = var[okk, k]
        w[ii[okk], jj[okk]] = 1
        gs = cv2.blur(grid, (cfg.window, cfg.window))
        ws = cv2.blur(w, (cfg.window, cfg.window))
        with np.errstate(invalid="ignore", divide="ignore"):
            cost[:, k] = np.where(ws[ii, jj] > 0.3, gs[ii, jj] / ws[ii, jj], np.nan)
        cost[~np.isfinite(var[:, k]), k] = np.nan
    filled = np.where(np.isfinite(cost), cost, np.inf)
    best = np.argmin(filled, axis=1)
    c0, cb = filled[:, 0], filled[np.arange(len(best)), best]
    lower = (best > 0) & np.isfinite(cb) & (cb < cfg.accept_ratio * c0)
    drop = np.zeros((nx, ny), np.float32)
    drop[ii[lower], jj[lower]] = best[lower]
    drop = cv2.medianBlur(drop, 5)  # a lone column does not cut (or keep) a spike
    out = f.copy()
    zz = lo[2] + vox * np.arange(nz)
    li, lj = np.nonzero(drop > 0)
    z_new = lo[2] + vox * (top[li, lj] - drop[li, lj]) + 0.5 * vox
    out[li, lj] = np.minimum(out[li, lj], (z_new[:, None] - zz[None]).astype(np.float32))
    drops_mm = drop[li, lj] * vox * 1e3
    summary = {"columns": int(len(ii)), "columns_lowered": int(len(li)),
               "median_drop_mm": round(float(np.median(drops_mm)), 2) if len(li) else 0.0,
               "max_drop_mm": round(float(drops_mm.max()), 2) if len(li) else 0.0}
    log.info("hull top refined by photo consistency: %s", summary)
    return out, summary
