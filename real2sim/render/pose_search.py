"""Global pose search: which orientation (and where) explains an object's masks, before contour refinement.

The hypotheses cover the pose space instead of a fixed few:

- on the table (``dof`` 'planar'/'planar_z'): **every** stable resting pose of the mesh (trimesh's
  ``compute_stable_poses`` on the convex hull, all of them above ``min_stable_probability``), with resting poses
  that are the same shape up to a turn about the vertical merged, times a yaw sweep whose range is divided by the
  resting pose's own rotational symmetry (a can standing upright needs one yaw, a box on a face a quarter turn);
- off the table (``dof='full'``): a uniform sampling of SO(3) (super-Fibonacci spiral), the distance along the
  mask centroid's ray set from the mask's area.

Coarse to fine: every hypothesis is rendered into a small crop around the mask (``search_px`` across) and scored
by silhouette IoU after moving its silhouette onto the mask's centroid (so the score does not depend on the start
position); the best ``search_keep`` are placed properly (3D translation that puts the rendered centroid on the
mask's), swept locally in yaw at ``fine_px`` and scored again, by IoU plus, when the object has a texture and the
views have images, ``colour_weight`` x the normalised cross-correlation of rendered and observed grey levels
(lighting-gain invariant; it breaks the ties a symmetric shape with a printed label leaves).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import AlignmentError
from real2sim.core.geometry import transform_points
from real2sim.render.raster import camera_clip, coverage_clip, rasterize

log = logging.getLogger(__name__)
MEMBERS_TRIED = 4
"""Merged (tilted) resting poses tried with each kept hypothesis at the fine level, most probable first."""


@dataclass
class Appearance:
    """A texture for colour scoring: ``uv (Vt, 2)`` (OBJ convention), ``face_uv (F, 3)``, ``texture (h, w, 3)``
    float in [0, 1]."""

    uv: np.ndarray
    face_uv: np.ndarray
    texture: np.ndarray


@dataclass
class Hypothesis:
    """One candidate pose with its score."""

    pose: np.ndarray
    """``(4, 4)`` object pose in the world."""
    score: float
    iou: float
    family: int
    """Index of the resting pose (or SO(3) sample) it came from."""
    yaw: float = 0.0


# -- small helpers ---------------------------------------------------------------------------------------------
def rz(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def decimate_for_search(vertices, faces, max_faces: int = 6000) -> tuple[np.ndarray, np.ndarray]:
    """Vertex-clustering decimation (grid of the bounding diagonal / 96 and finer until under ``max_faces``):
    silhouettes at search resolution keep their shape, renders get cheaper. Meshes already small are returned as
    they are."""
    v, f = np.asarray(vertices, float), np.asarray(faces, np.int64)
    if len(f) <= max_faces:
        return v, f
    diag = float(np.linalg.norm(v.max(0) - v.min(0)))
    for cells in (160, 128, 96, 64, 48):
        q = np.floor((v - v.min(0)) / (diag / cells)).astype(np.int64)
        key = (q[:, 0] * (cells + 2) + q[:, 1]) * (cells + 2) + q[:, 2]
        _, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        inv = inv.ravel()
        centre = np.zeros((len(counts), 3))
        np.add.at(centre, inv, v)
        centre /= counts[:, None]
        nf = inv[f]
        keep = (nf[:, 0] != nf[:, 1]) & (nf[:, 1] != nf[:, 2]) & (nf[:, 0] != nf[:, 2])
        nf = np.sort(nf[keep], axis=1)
        n = np.int64(len(counts))
        nf = nf[np.unique((nf[:, 0] * n + nf[:, 1]) * n + nf[:, 2], return_index=True)[1]]
        if len(nf) <= max_faces:
            return centre, nf
    return centre, nf


def crop_camera(cam: Camera, box, size_px: int) -> tuple[Camera, tuple[int, int, int, int], float]:
    """A camera that sees pixel box ``(x0, y0, x1, y1)`` of ``cam`` (exclusive ends) scaled so that its longer side
    is ``size_px``. Returns (camera, box, scale)."""
    x0, y0, x1, y1 = box
    s = size_px / max(x1 - x0, y1 - y0)
    K = np.array(cam.K, float)
    K[0, 0] *= s
    K[1, 1] *= s
    K[0, 2] = (cam.cx - x0 + 0.5) * s - 0.5
    K[1, 2] = (cam.cy - y0 + 0.5) * s - 0.5
    w, h = max(1, int(round((x1 - x0) * s))), max(1, int(round((y1 - y0) * s)))
    return Camera(w, h, K, np.array(cam.T_world_camera, float), near=cam.near, far=cam.far), box, s


def crop_mask(mask: np.ndarray, box, cam: Camera) -> np.ndarray:
    """``mask`` cut to ``box`` (zero outside the image) and resized (area) to ``cam``'s size."""
    import cv2

    x0, y0, x1, y1 = box
    h, w = mask.shape
    out = np.zeros((y1 - y0, x1 - x0), np.float32)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if sx1 > sx0 and sy1 > sy0:
        out[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = mask[sy0:sy1, sx0:sx1]
    return cv2.resize(out, (cam.width, cam.height), interpolation=cv2.INTER_AREA) > 0.5


def mask_box(mask: np.ndarray, grow: float = 2.2) -> tuple[int, int, int, int]:
    """A square pixel box centred on the mask's bounding box, ``grow`` times its longer side."""
    ys, xs = np.nonzero(mask)
    cx, cy = (xs.min() + xs.max() + 1) / 2, (ys.min() + ys.max() + 1) / 2
    half = max(xs.max() - xs.min() + 1, ys.max() - ys.min() + 1, 8) * grow / 2
    return int(np.floor(cx - half)), int(np.floor(cy - half)), int(np.ceil(cx + half)), int(np.ceil(cy + half))


def shifted_iou(sil: np.ndarray, mask: np.ndarray, mask_centroid) -> tuple[float, np.ndarray]:
    """IoU of ``sil`` moved (whole pixels) so that its centroid lands on ``mask_centroid``; (IoU, shift (dx, dy))."""
    ys, xs = np.nonzero(sil)
    if len(xs) == 0:
        return 0.0, np.zeros(2)
    d = np.round(np.asarray(mask_centroid) - [xs.mean(), ys.mean()]).astype(int)
    x2, y2 = xs + d[0], ys + d[1]
    ok = (x2 >= 0) & (y2 >= 0) & (x2 < mask.shape[1]) & (y2 < mask.shape[0])
    inter = int(mask[y2[ok], x2[ok]].sum())
    return inter / float(len(xs) + int(mask.sum()) - inter), d.astype(float)


def ray_point(cam: Camera, px) -> tuple[np.ndarray, np.ndarray]:
    """(origin, unit direction) of the world ray through pixel ``px`` (x, y)."""
    d = cam.T_world_camera[:3, :3] @ np.array([(px[0] - cam.cx) / cam.fx, (px[1] - cam.cy) / cam.fy, 1.0])
    return cam.T_world_camera[:3, 3].copy(), d / np.linalg.norm(d)


def ray_plane(cam: Camera, px, z: float):
    """Where the ray through pixel ``px`` meets the plane Z = ``z`` (None when it does not, in front)."""
    o, d = ray_point(cam, px)
    if abs(d[2]) < 1e-9:
        return None
    t = (z - o[2]) / d[2]
    return None if t <= 0 else o + t * d


# -- orientations ----------------------------------------------------------------------------------------------
def symmetry_order(points: np.ndarray, tol: float) -> int:
    """Rotational symmetry order of ``points (n, 3)`` about the vertical axis through their XY centroid: 0 for
    continuous (any turn maps the set onto itself within ``tol`` m, or a 1/k turn with k >= 8 does: a tessellated
    solid of revolution), else the largest ``k`` in 2..7 whose 1/k turn does, else 1. Uses the 99th percentile of nearest-neighbour distances, so a handle breaks the symmetry and a
    scanning artefact does not."""
    from scipy.spatial import cKDTree

    p = points - [*points[:, :2].mean(0), 0.0]
    tree = cKDTree(p)

    def maps(angle: float) -> bool:
        return _mismatch(tree, p @ rz(angle).T) <= tol

    if all(maps(a) for a in np.radians([13.7, 47.3, 101.9])):
        return 0
    for k in range(12, 1, -1):
        if maps(2 * np.pi / k):
            return 0 if k >= 8 else k  # a finely faceted solid of revolution: any turn is a facet or less away
    return 1


def _mismatch(tree, points: np.ndarray) -> float:
    """99th percentile of the distances from ``points`` to their nearest neighbours in ``tree`` (m)."""
    return float(np.quantile(tree.query(points, k=1)[0], 0.99))


def _subsample(v: np.ndarray, n: int = 400) -> np.ndarray:
    if len(v) <= n:
        return v
    return v[np.linspace(0, len(v) - 1, n).round().astype(int)]


def _closest_turn(R: np.ndarray, R_ref: np.ndarray) -> float:
    """The turn ``psi`` about the vertical that brings rotation ``R`` closest to ``R_ref`` (maximises
    trace(R_ref^T Rz(psi) R), closed form)."""
    M = R @ R_ref.T
    return float(np.arctan2(M[0, 1] - M[1, 0], M[0, 0] + M[1, 1]))


def _turn_invariants(points: np.ndarray) -> np.ndarray:
    """``(42,)`` quantiles of height and of distance from the vertical axis: what a turn about the vertical keeps."""
    q = np.linspace(0, 1, 21)
    return np.concatenate([np.quantile(points[:, 2], q), np.quantile(np.linalg.norm(points[:, :2], axis=1), q)])


def _same_up_to_yaw(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    """Whether point sets ``a`` and ``b`` (resting, XY-centred, with equal :func:`_turn_invariants`) are the same up
    to a turn about the vertical: turned in 5 deg steps, then 0.5 deg around the best, compared point by point."""
    from scipy.spatial import cKDTree

    tree = cKDTree(b)
    sub = a[np.linspace(0, len(a) - 1, min(len(a), 300)).round().astype(int)]
    coarse = np.radians(np.arange(0, 360, 5.0))
    d = [_mismatch(tree, sub @ rz(y).T) for y in coarse]
    best = coarse[int(np.argmin(d))]
    return any(_mismatch(tree, sub @ rz(y).T) <= tol for y in best + np.radians(np.arange(-3, 3.01, 0.5)))


@dataclass
class Resting:
    """A resting pose: ``rotation (3, 3)`` from the object frame to the world (before yaw), its probability, its
    rotational symmetry order about the vertical (0 = continuous) and how many trimesh poses it stands for."""

    rotation: np.ndarray
    probability: float
    order: int
    merged: int = 1
    members: list = field(default_factory=list)
    """Rotations of the slightly tilted resting poses merged into this one, turned to match it (the fine level
    tries them)."""


def resting_poses(vertices, faces, min_probability: float, max_poses: int, symmetry_tol: float,
                  merge_deg: float = 12.0, merge_same_shape: bool = True) -> list[Resting]:
    """Every stable resting pose above ``min_probability`` (most probable first), with poses that are the same shape
    up to yaw (a can on any of its side facets), or tilted less than ``merge_deg`` from a more probable one (the
    facets of a rounded hull), merged into it. ``merge_same_shape=False`` keeps same-shape poses apart (a texture
    tells a can standing up from one upside down)."""
    import trimesh

    v = np.asarray(vertices, float)
    tol = symmetry_tol * float(np.linalg.norm(v.max(0) - v.min(0)))
    try:
        Ts, probs = trimesh.Trimesh(v, faces, process=True).convex_hull.compute_stable_poses(n_samples=1, threshold=0.0)
    except Exception as exc:  # degenerate hulls (flat meshes) etc.
        log.warning("stable poses failed (%s); searching the mesh as it is and upside down", exc)
        Ts, probs = [np.eye(4), np.diag([1.0, -1, -1, 1])], [0.5, 0.5]
    order = np.argsort(-np.asarray(probs), kind="stable")
    sub = _subsample(v)
    out: list[Resting] = []
    reps: list[np.ndarray] = []
    ups: list[np.ndarray] = []
    invs: list[np.ndarray] = []
    cos_merge = np.cos(np.radians(merge_deg))
    for i in order:
        if probs[i] < min_probability and out:
            break
        R = np.asarray(Ts[i], float)[:3, :3]
        up = R[2]  # the object-frame direction that points up in this resting pose
        pts = sub @ R.T
        pts = pts - [*pts[:, :2].mean(0), pts[:, 2].min()]
        near = next((j for j, u in enumerate(ups) if float(u @ up) >= cos_merge), None)
        if near is not None:  # a facet of a rounded hull: the same resting pose within merge_deg of tilt
            out[near].probability += float(probs[i])
            out[near].merged += 1
            out[near].members.append(rz(_closest_turn(R, out[near].rotation)) @ R)
            continue
        inv = _turn_invariants(pts)
        close = [j for j in range(len(reps)) if merge_same_shape and np.abs(invs[j] - inv).max() <= tol]
        dup = next((j for j in close if _same_up_to_yaw(pts, reps[j], tol)), None)
        if dup is not None:
            out[dup].probability += float(probs[i])
            out[dup].merged += 1
            continue
        if len(out) >= max_poses:  # past the cap: a member of the representative whose up direction is nearest
            j = int(np.argmax([float(u @ up) for u in ups]))
            out[j].probability += float(probs[i])
            out[j].merged += 1
            out[j].members.append(rz(_closest_turn(R, out[j].rotation)) @ R)
            continue
        out.append(Resting(R, float(probs[i]), symmetry_order(pts, tol)))
        reps.append(pts)
        invs.append(inv)
        ups.append(up)
    return out


def so3_samples(n: int) -> np.ndarray:
    """``(n, 3, 3)`` rotations spread evenly over SO(3) (super-Fibonacci spiral, Alexa 2022), deterministic."""
    from scipy.spatial.transform import Rotation

    phi, psi = np.sqrt(2.0), 1.533751168755204288118041
    s = np.arange(n) + 0.5
    r, R = np.sqrt(s / n), np.sqrt(1 - s / n)
    a, b = 2 * np.pi * s / phi, 2 * np.pi * s / psi
    q = np.stack([r * np.sin(a), r * np.cos(a), R * np.sin(b), R * np.cos(b)], 1)  # xyzw
    return Rotation.from_quat(q).as_matrix()


# -- the search --------------------------------------------------------------------------------------------------
class CropScorer:
    """Renders hypotheses into crops around the masks and scores them (silhouette IoU, + colour)."""

    def __init__(self, vertices, faces, views, size_px: int, backend: str, appearance: Appearance | None = None,
                 colour_weight: float = 0.0, textured_mesh: tuple | None = None):
        """``textured_mesh``: ``(vertices, faces)`` the ``appearance``'s ``face_uv`` belongs to, when ``vertices``/
        ``faces`` are a decimated copy for silhouettes (default: the same mesh)."""
        self.v, self.f = vertices, np.ascontiguousarray(faces, np.int64)
        self.tv, self.tf = textured_mesh if textured_mesh is not None else (self.v, self.f)
        if appearance is not None and len(appearance.face_uv) != len(self.tf):
            raise ValueError(f"the texture's face_uv has {len(appearance.face_uv)} faces, the mesh {len(self.tf)}")
        self.backend = backend
        self.crops = []
        for view in views:
            cam, box, _ = crop_camera(view.camera, mask_box(view.mask), size_px)
            m = crop_mask(view.mask, box, cam)
            ys, xs = np.nonzero(m)
            img = None
            if appearance is not None and view.image is not None and colour_weight > 0:
                img = _crop_image(view.image, box, cam)
            self.crops.append((cam, m, np.array([xs.mean(), ys.mean()]) if len(xs) else np.zeros(2), img))
        self.appearance = appearance if any(c[3] is not None for c in self.crops) else None
        self.colour_weight = colour_weight

    def silhouette(self, cam: Camera, pose) -> np.ndarray:
        return coverage_clip(camera_clip(cam, transform_points(pose, self.v)), self.f, cam.width, cam.height,
                             self.backend)

    def score(self, pose, colour: bool = False) -> tuple[float, float]:
        """(score, mean IoU) with each view's silhouette moved onto its mask's centroid."""
        ious, cols = [], []
        for cam, m, c, img in self.crops:
            if colour and self.appearance is not None and img is not None:
                s, col = self._colour(cam, m, c, img, pose)
                ious.append(s)
                cols.append(col)
            else:
                ious.append(shifted_iou(self.silhouette(cam, pose), m, c)[0])
        iou = float(np.mean(ious))
        return iou + (self.colour_weight * float(np.mean(cols)) if cols else 0.0), iou

    def _colour(self, cam, m, c, img, pose):
        fr = rasterize(cam, transform_points(pose, self.tv), self.tf, self.backend)
        sil = fr.mask
        s, d = shifted_iou(sil, m, c)
        ys, xs = np.nonzero(sil)
        y2, x2 = ys + int(d[1]), xs + int(d[0])
        ok = (x2 >= 0) & (y2 >= 0) & (x2 < m.shape[1]) & (y2 < m.shape[0])
        ys, xs, y2, x2 = ys[ok], xs[ok], y2[ok], x2[ok]
        inside = m[y2, x2]
        if inside.sum() < 20:
            return s, 0.0
        ys, xs, y2, x2 = ys[inside], xs[inside], y2[inside], x2[inside]
        a = self.appearance
        fid = fr.face_id[ys, xs]
        uv = np.einsum("nk,nkd->nd", fr.bary[ys, xs].astype(float), a.uv[a.face_uv[fid]])
        th, tw = a.texture.shape[:2]
        tx = np.clip((uv[:, 0] % 1.0) * tw, 0, tw - 1).astype(int)
        ty = np.clip((1 - uv[:, 1] % 1.0) * th, 0, th - 1).astype(int)
        g_r = a.texture[ty, tx].mean(1)
        g_o = img[y2, x2].mean(1)
        g_r, g_o = g_r - g_r.mean(), g_o - g_o.mean()
        den = float(np.sqrt((g_r ** 2).sum() * (g_o ** 2).sum()))
        return s, float((g_r * g_o).sum() / den) if den > 1e-9 else 0.0

    def recentre(self, pose, plane: bool, z_ref: float | None = None) -> np.ndarray:
        """Translate ``pose`` so that its silhouette's centroid in the first view lands on the mask's (in the plane
        Z = object centre height when ``plane``, else perpendicular to the viewing ray)."""
        cam, m, c, _ = self.crops[0]
        sil = self.silhouette(cam, pose)
        ys, xs = np.nonzero(sil)
        if len(xs) == 0:
            return pose
        centre = transform_points(pose, self.v).mean(0)
        out = pose.copy()
        if plane:
            a = ray_plane(cam, [xs.mean(), ys.mean()], centre[2])
            b = ray_plane(cam, c, centre[2])
            if a is None or b is None:
                return pose
            out[:2, 3] += (b - a)[:2]
        else:
            depth = float(cam.depth_of(centre[None])[0])
            d = (c - [xs.mean(), ys.mean()]) * depth / np.array([cam.fx, cam.fy])
            out[:3, 3] += cam.T_world_camera[:3, :3] @ np.array([d[0], d[1], 0.0])
        return out


def _crop_image(image: np.ndarray, box, cam: Camera) -> np.ndarray:
    import cv2

    x0, y0, x1, y1 = box
    h, w = image.shape[:2]
    out = np.zeros((y1 - y0, x1 - x0, 3), np.float32)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if sx1 > sx0 and sy1 > sy0:
        out[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = image[sy0:sy1, sx0:sx1]
    return cv2.resize(out, (cam.width, cam.height), interpolation=cv2.INTER_AREA)


def _hull_points(v: np.ndarray) -> np.ndarray:
    """The convex hull's vertices of ``v (n, 3)`` (all of ``v`` when the hull cannot be made, e.g. flat)."""
    from scipy.spatial import ConvexHull

    try:
        return v[ConvexHull(v).vertices]
    except Exception:  # scipy raises QhullError for flat / degenerate sets
        return v


def _place_on_table(R: np.ndarray, vertices, ref_cam: Camera, centroid_px, table_height: float) -> np.ndarray:
    """Pose with rotation ``R`` resting on the table (lowest point at ``table_height``), its bounding-box centre on
    the ray through ``centroid_px``."""
    rest = vertices @ R.T
    lo, hi = rest.min(0), rest.max(0)
    centre = (lo + hi) / 2
    P = ray_plane(ref_cam, centroid_px, table_height + centre[2] - lo[2])
    if P is None:
        raise AlignmentError(f"the ray through the mask centroid {np.round(centroid_px, 1).tolist()} does not meet the "
                             f"table plane z={table_height:.3f} in front of the camera; check the camera pose and "
                             "table_height")
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = [P[0] - centre[0], P[1] - centre[1], table_height - lo[2]]
    return T


def _place_free(R: np.ndarray, vertices, ref_cam: Camera, centroid_px, depth: float) -> np.ndarray:
    o, d = ray_point(ref_cam, centroid_px)
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = o + depth * d / float(d @ ref_cam.T_world_camera[:3, 2]) - R @ vertices.mean(0)
    return T


@dataclass
class _Problem:
    """What every search step needs: meshes (full, search, coarse), the first view's camera and mask centroid."""

    v_full: np.ndarray
    hull: np.ndarray
    v: np.ndarray
    f: np.ndarray
    cam0: Camera
    centroid: np.ndarray
    mask_pixels: int
    table_height: float


def global_search(vertices, faces, views, table_height: float, cfg, appearance: Appearance | None = None
                  ) -> tuple[list[Hypothesis], dict]:
    """Hypotheses over the pose space, best first, and a summary (counts, symmetry, seconds) for the report.

    ``cfg`` is an :class:`real2sim.render.align.AlignConfig`. Views: the object's masks (the largest leads)."""
    import time

    t0, c0 = time.perf_counter(), time.process_time()
    v_full = np.asarray(vertices, float)
    v, f = decimate_for_search(v_full, faces, cfg.search_max_faces)
    vc, fc = decimate_for_search(v, f, max(200, cfg.search_max_faces // 4))  # the coarse level's small crops
    ref = int(np.argmax([np.asarray(x.mask).sum() for x in views]))
    views = [views[ref]] + [x for i, x in enumerate(views) if i != ref]
    ys, xs = np.nonzero(views[0].mask)
    # the hull's vertices say where the object rests and how far it reaches (cheaper than every vertex)
    prob = _Problem(v_full, _hull_points(v_full), v, f, views[0].camera, np.array([xs.mean(), ys.mean()]), len(xs),
                    table_height)
    space = cfg.search_space if cfg.search_space != "auto" else ("so3" if cfg.dof == "full" else "stable")
    full = (v_full, np.asarray(faces, np.int64))
    coarse = CropScorer(vc, fc, views, cfg.search_px, cfg.backend, appearance, cfg.colour_weight, full)
    fine = CropScorer(v, f, views, cfg.fine_px, cfg.backend, appearance, cfg.colour_weight, full)
    coloured = appearance is not None and cfg.colour_weight > 0 and any(x.image is not None for x in views)
    summary: dict = {"space": space}
    if space == "stable":
        rest = resting_poses(v, f, cfg.min_stable_probability, cfg.max_orientations, cfg.symmetry_tol,
                             merge_same_shape=not coloured)
        summary["resting_poses"] = [{"probability": round(r.probability, 4), "symmetry_order": r.order,
                                     "merged": r.merged} for r in rest]
        cands = _coarse_resting(prob, rest, coarse, cfg, coloured)
        out = _fine_resting(prob, rest, _diverse(sorted(cands, key=lambda h: -h.score), cfg.search_keep), fine, cfg)
    elif space == "so3":
        cands = _coarse_so3(prob, coarse, cfg)
        out = _fine_so3(_diverse(sorted(cands, key=lambda h: -h.score), cfg.search_keep), fine)
        summary["so3_samples"] = cfg.so3_samples
    else:
        raise ValueError(f"search_space must be 'auto', 'stable' or 'so3', got {cfg.search_space!r}")
    out = distinct(out)
    summary.update(coarse_hypotheses=len(cands), fine_hypotheses=len(out), seconds=round(time.perf_counter() - t0, 4),
                   cpu_seconds=round(time.process_time() - c0, 4),
                   best_iou=round(out[0].iou, 5) if out else 0.0)
    log.info("pose search (%s): %d hypotheses, best IoU %.3f, %.2f s", space, len(cands), summary["best_iou"],
             summary["seconds"])
    return out, summary


def _coarse_resting(prob: _Problem, rest: list[Resting], coarse: CropScorer, cfg, coloured: bool) -> list[Hypothesis]:
    """Every resting pose x its yaw sweep (360 deg / symmetry order; the whole turn when a label may break the
    symmetry), scored in the coarse crops."""
    out = []
    step = np.radians(cfg.yaw_step_deg)
    for k, r in enumerate(rest):
        span = 2 * np.pi if r.order == 1 or coloured else (2 * np.pi / r.order if r.order > 1 else 0.0)
        n = max(1, int(round(span / step)))
        for yaw in np.arange(n) * (span / n if span else 0.0):
            pose = _place_on_table(rz(yaw) @ r.rotation, prob.hull, prob.cam0, prob.centroid, prob.table_height)
            # a symmetric shape's turns tie on the silhouette: its label (colour) ranks them already here
            s, iou = coarse.score(pose, colour=coloured and r.order != 1)
            out.append(Hypothesis(pose, s, iou, k, float(yaw)))
    return out


def _fine_resting(prob: _Problem, rest: list[Resting], top: list[Hypothesis], fine: CropScorer, cfg
                  ) -> list[Hypothesis]:
    """Each kept hypothesis and the slightly tilted resting poses merged into its own, each swept +-half a yaw step
    in the fine crops; all compete (refinement cannot tilt a resting object)."""
    out = []
    for h in top:
        starts = [h.pose] + [_place_on_table(rz(h.yaw) @ R, prob.hull, prob.cam0, prob.centroid, prob.table_height)
                             for R in rest[h.family].members[:MEMBERS_TRIED]]
        for T in starts:
            sc, iou, P = _local_yaw(fine, fine.recentre(T, True), np.radians(cfg.yaw_step_deg) / 2)
            out.append(Hypothesis(P, sc, iou, h.family, h.yaw))
    return out


def _coarse_so3(prob: _Problem, coarse: CropScorer, cfg) -> list[Hypothesis]:
    """``so3_samples`` orientations on the mask centroid's ray, each at the depth where its silhouette area matches
    the mask's (start: Cauchy's mean projected area, surface / 4), scored in the coarse crops."""
    import trimesh

    area = float(trimesh.Trimesh(prob.v, prob.f, process=False).area)
    depth0 = float(np.sqrt(prob.cam0.fx * prob.cam0.fy * area / 4 / max(prob.mask_pixels, 1)))
    out = []
    for k, R in enumerate(so3_samples(cfg.so3_samples)):
        pose = _fit_depth(coarse, _place_free(R, prob.v, prob.cam0, prob.centroid, depth0), steps=1)
        out.append(Hypothesis(pose, *coarse.score(pose), k))
    return out


def _fine_so3(top: list[Hypothesis], fine: CropScorer) -> list[Hypothesis]:
    out = []
    for h in top:
        pose = _fit_depth(fine, h.pose)
        pose = fine.recentre(fine.recentre(pose, False), False)
        out.append(Hypothesis(pose, *fine.score(pose, colour=True), h.family, h.yaw))
    return out


def _local_yaw(fine: CropScorer, pose: np.ndarray, half: float) -> tuple[float, float, np.ndarray]:
    """The best of ``pose`` turned by -half..half (5 steps) by fine score, re-centred: (score, IoU, pose)."""
    best = (*fine.score(pose, colour=True), pose)
    for a in np.linspace(-half, half, 5):
        if a == 0:
            continue
        T = pose.copy()
        T[:3, :3] = rz(a) @ pose[:3, :3]
        c = (*fine.score(T, colour=True), T)
        if c[0] > best[0]:
            best = c
    T = fine.recentre(best[2], True)
    return (*fine.score(T, colour=True), T)


def _fit_depth(scorer: CropScorer, pose, steps: int = 2) -> np.ndarray:
    """Move ``pose`` along the first view's ray so that its silhouette area matches the mask's."""
    cam, m, _, _ = scorer.crops[0]
    target = float(m.sum())
    out = pose.copy()
    for _ in range(steps):
        a = float(scorer.silhouette(cam, out).sum())
        if a <= 0 or target <= 0:
            return out
        o = cam.T_world_camera[:3, 3]
        centre = transform_points(out, scorer.v).mean(0)
        ratio = np.sqrt(a / target)
        out[:3, 3] += (centre - o) * (ratio - 1)
    return out


def distinct(hyps: list[Hypothesis], deg: float = 1.0, metres: float = 0.002) -> list[Hypothesis]:
    """Best first, without near-copies (rotation within ``deg`` and position within ``metres`` of a better one)."""
    from real2sim.core.geometry import rotation_angle_between

    out: list[Hypothesis] = []
    for h in sorted(hyps, key=lambda h: -h.score):
        if not any(np.linalg.norm(h.pose[:3, 3] - o.pose[:3, 3]) < metres
                   and np.degrees(rotation_angle_between(h.pose[:3, :3], o.pose[:3, :3])) < deg for o in out):
            out.append(h)
    return out


def _diverse(cands: list[Hypothesis], keep: int, tie: float = 0.02) -> list[Hypothesis]:
    """The best ``keep`` hypotheses, at most half of them from one resting pose (so a runner-up pose is tried), and
    more (up to 3x ``keep``) while they score within ``tie`` of the best: near-spherical shapes (an apple's hundreds
    of resting facets) tie at the coarse level and the fine level must see them."""
    out, per = [], {}
    cap = max(1, keep // 2)
    best = cands[0].score if cands else 0.0
    for h in cands:
        if per.get(h.family, 0) >= cap:
            continue
        if len(out) >= keep and (h.score < best - tie or len(out) >= 3 * keep):
            break
        out.append(h)
        per[h.family] = per.get(h.family, 0) + 1
    return out