"""Object pose alignment by render-and-compare against masks in one or more frames.

1. Initialise: the current pose when it already overlaps the masks (IoU >= ``accept_init_iou``),
   else a global search: trimesh stable resting poses on the table plane, placed where the
   mask centroid's ray meets the plane, times a yaw sweep, scored by silhouette IoU.
2. Refine: a differentiable contour loss. The silhouette is rasterised at the current pose,
   its boundary pixels are lifted to 3D surface points (face id + barycentrics), and the pose
   is solved (Gauss-Newton with a robust loss) so that these points project onto the mask
   boundary, measured by the mask's signed distance field sampled bilinearly. Re-render,
   repeat until the pose stops moving.

Resting objects keep their contact with the table: by default only x, y and yaw (about
world +Z) move; ``dof="planar_z"`` also frees the height, ``"full"`` all six.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import AlignmentError, MaskError
from real2sim.core.geometry import rotation_angle_between, transform_points
from real2sim.core.imaging import iou
from real2sim.core.views import View
from real2sim.render.pose_search import Appearance, decimate_for_search, distinct, global_search, mask_box, rz
from real2sim.render.raster import rasterize

log = logging.getLogger(__name__)

DOFS = {"planar": 3, "planar_z": 4, "full": 6}


@dataclass
class AlignConfig:
    """Settings of pose alignment."""

    dof: str = "planar"
    """'planar' (x, y, yaw: resting objects stay on the table), 'planar_z' (+ height), 'full' (6 DoF)."""
    init: str = "auto"
    """'bundle' (start from the current pose), 'search' (stable poses x yaw sweep), 'auto' (current pose
    when its IoU >= accept_init_iou, else search)."""
    accept_init_iou: float = 0.5
    """With init='auto', the current pose is kept as the start when its mean IoU reaches this."""
    search_space: str = "auto"
    """Global search over 'stable' (every resting pose on the table x yaw), 'so3' (any orientation, for objects not
    on the table) or 'auto' ('so3' when dof='full', else 'stable')."""
    min_stable_probability: float = 0.001
    """Resting poses less probable than this (trimesh's quasi-static estimate) are left out of the search."""
    max_orientations: int = 32
    """At most this many distinct resting poses are searched in the coarse level (most probable first); the rest
    join the nearest one's members, tried at the fine level."""
    yaw_step_deg: float = 10.0
    """Yaw step of the coarse search (the range is 360 deg / the resting pose's rotational symmetry order)."""
    so3_samples: int = 600
    """Orientations tried by the 'so3' search."""
    symmetry_tol: float = 0.01
    """Two shapes count as the same (symmetry, duplicate resting poses) within this fraction of the mesh's
    bounding diagonal."""
    search_px: int = 64
    """Size (px, longer side) of the crop around the mask the coarse search renders into."""
    fine_px: int = 160
    """Size (px) of the crop the best coarse hypotheses are scored again in."""
    search_keep: int = 10
    """Hypotheses kept from the coarse level for the fine level."""
    refine_keep: int = 3
    """Best fine-level hypotheses refined by contour alignment (the best result wins)."""
    refine_margin: float = 0.05
    """... of those, only the ones whose fine score is within this of the best (clear winners are refined alone)."""
    colour_weight: float = 0.3
    """Weight of colour agreement (normalised cross-correlation of grey levels) in the fine score, when the object
    has a texture and the views have images (0 = silhouette only)."""
    search_max_faces: int = 6000
    """Meshes with more faces are decimated (vertex clustering) for the search renders only."""
    polish_px: int = 240
    """Size (px) of the crop around the mask the yaw polish renders into."""
    max_outer: int = 25
    """Re-render / re-solve rounds of the refinement."""
    inner_nfev: int = 30
    """Function evaluations of each robust Gauss-Newton solve."""
    contour_points: int = 800
    """Silhouette boundary points used per frame (evenly subsampled)."""
    robust_px: float = 2.0
    """Scale (pixels) of the soft-L1 robust loss; larger residuals (mask noise, occluders) count less."""
    patience: int = 4
    """Stop when the contour cost has not improved for this many rounds (noisy masks)."""
    tol_m: float = 2e-5
    """Stop when a round moves the object less than this (m) ..."""
    tol_rad: float = 2e-4
    """... and turns it less than this (rad)."""
    min_iou: float = 0.6
    """Below this mean IoU the fit counts as not converged (``converged`` False; status 'poor')."""
    aligned_iou: float = 0.9
    """Status 'aligned' needs a mean silhouette IoU of at least this (less for small masks, see
    mask_tolerance_px; or the contour rule, aligned_contour_px); else 'poor'."""
    mask_tolerance_px: float = 1.0
    """A mask's boundary may be off by this many pixels: for small masks the IoU needed for 'aligned' is lowered to
    what a perfect pose reaches with that error, (A - t P) / (A + t P) (area A, boundary P)."""
    aligned_contour_px: float = 1.0
    """Status 'aligned' also when the mean two-way contour distance (render <-> mask boundary, pixels) is at most
    this, whatever the IoU."""
    ambiguous_mm: float = 3.0
    """Refined poses that fit as well but lie farther apart than this (ADD-S, mm) are reported as ambiguous."""
    max_residual_px: float = 3.0
    """Above this robust RMS contour residual (pixels) the alignment is 'poor' (and not converged)."""
    polish_yaw_deg: float = 30.0
    """After refinement, yaws within +- this (deg) are tried by IoU when the fit is imperfect (0 = off)."""
    polish_step_deg: float = 5.0
    """Step of that yaw sweep (deg)."""
    polish_below_iou: float = 0.998
    """The yaw sweep runs only when the mean IoU is below this."""
    crop_grow: float = 2.5
    """Renders cover a box this many times the mask's extent (inside the frame), not the whole frame (0 = whole)."""
    min_mask_pixels: int = 30
    """Masks with fewer pixels are refused (too small to align to)."""
    backend: str = "auto"
    """Rasteriser backend ('auto', 'gl', 'numpy')."""


@dataclass
class AlignResult:
    """Outcome of :func:`align_pose`."""

    pose: np.ndarray
    """``(4, 4)`` object pose in the world."""
    ious: list[float]
    """Silhouette IoU per view at ``pose``."""
    residual_px: float
    """Robust RMS contour distance (pixels) at ``pose``."""
    converged: bool
    iterations: int
    init: str
    """Which start was used: 'bundle' or 'search'."""
    init_iou: float
    seconds: float
    message: str = ""
    history: list[dict] = field(default_factory=list)
    status: str = "aligned"
    """'aligned' (settled and the silhouette agrees: IoU >= aligned_iou or contour distance <= aligned_contour_px)
    or 'poor' (wrong pose, wrong or partial mask, mesh unlike the object: look at the numbers)."""
    contour_px: float = 0.0
    """Mean two-way boundary distance (pixels) between the rendered silhouette and the mask."""
    required_iou: float = 0.9
    """The IoU this mask needed for 'aligned' (``aligned_iou``, lowered for small masks)."""
    search: dict = field(default_factory=dict)
    """Summary of the global search when one ran (space, resting poses, hypotheses, seconds)."""

    @property
    def mean_iou(self) -> float:
        return float(np.mean(self.ious)) if self.ious else 0.0


# -- helpers -------------------------------------------------------------------------------------------------
_rz = rz


def _rotvec(r) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(r).as_matrix()


# Parameter units: 1 = 1 cm of translation or 0.1 rad of rotation (keeps the solver well scaled).
_T_UNIT, _R_UNIT = 0.01, 0.1


def _apply(T0: np.ndarray, p: np.ndarray, dof: str) -> np.ndarray:
    T = T0.copy()
    if dof in ("planar", "planar_z"):
        dz = p[2] * _T_UNIT if dof == "planar_z" else 0.0
        T[:3, 3] = T0[:3, 3] + [p[0] * _T_UNIT, p[1] * _T_UNIT, dz]
        T[:3, :3] = _rz(p[-1] * _R_UNIT) @ T0[:3, :3]
    else:
        T[:3, 3] = T0[:3, 3] + p[:3] * _T_UNIT
        T[:3, :3] = _rotvec(p[3:] * _R_UNIT) @ T0[:3, :3]
    return T


def signed_distance(mask: np.ndarray) -> np.ndarray:
    """``(h, w) float32`` signed distance (pixels) to the mask boundary: negative inside, +-0.5 at boundary pixels."""
    from scipy.ndimage import distance_transform_edt

    m = np.asarray(mask, bool)
    return (distance_transform_edt(~m) - distance_transform_edt(m)).astype(np.float32) + np.where(m, 0.5, -0.5)


def _boundary(sil: np.ndarray) -> np.ndarray:
    from scipy.ndimage import binary_erosion

    return sil & ~binary_erosion(sil, border_value=1)



def render_silhouette(cam: Camera, vertices, faces, pose, backend="auto") -> np.ndarray:
    return rasterize(cam, transform_points(pose, vertices), faces, backend).mask


def check_views(views: list[View], vertices, pose, min_pixels: int) -> None:
    """Refuse empty/tiny masks and an object behind every camera, with the numbers."""
    if not views:
        raise MaskError("no masks for this object: make masks first (segmentation) or pass some")
    for v in views:
        n = int(np.asarray(v.mask, bool).sum())
        if v.mask.shape != (v.camera.height, v.camera.width):
            raise MaskError(f"mask of frame {v.name or '?'} is {v.mask.shape[::-1]} but its camera is "
                            f"{v.camera.width}x{v.camera.height}; re-make the mask at the frame's size")
        if n < min_pixels:
            raise MaskError(f"mask of frame {v.name or '?'} has {n} pixels (< {min_pixels}): too small or empty to align "
                            "to; fix the mask or leave this frame out")
    c = transform_points(pose, np.asarray(vertices).mean(0)[None])
    if all(v.camera.depth_of(c)[0] <= v.camera.near for v in views):
        d = [round(float(v.camera.depth_of(c)[0]), 4) for v in views]
        raise AlignmentError(f"the object is behind the camera in every view (centre depth {d} m); "
                             "check the camera pose (OpenCV convention, T_world_camera) and the object's pose")


# -- initialisation ------------------------------------------------------------------------------------------
def search_candidates(vertices, faces, views: list[View], table_height: float, config: AlignConfig,
                      appearance: Appearance | None = None) -> list[tuple[np.ndarray, float]]:
    """Global search (:func:`real2sim.render.pose_search.global_search`): [(pose, fine score)], best first."""
    hyps, _ = global_search(vertices, faces, views, table_height, config, appearance)
    return [(h.pose, h.score) for h in hyps]


def search_init(vertices, faces, views: list[View], table_height: float, config: AlignConfig) -> tuple[np.ndarray, float]:
    """The best pose of the global search and its score."""
    return search_candidates(vertices, faces, views, table_height, config)[0]


# -- refinement ----------------------------------------------------------------------------------------------
def _contour_points(cam: Camera, vertices, faces, pose, n_max: int, backend: str):
    fr = rasterize(cam, transform_points(pose, vertices), faces, backend)
    sil = fr.mask
    ys, xs = np.nonzero(_boundary(sil))
    if len(ys) > n_max:
        idx = np.linspace(0, len(ys) - 1, n_max).round().astype(int)
        ys, xs = ys[idx], xs[idx]
    f = np.asarray(faces)[fr.face_id[ys, xs]]
    pts = np.einsum("nk,nkd->nd", fr.bary[ys, xs].astype(float), np.asarray(vertices)[f])  # object frame
    return pts, sil


def _sample(sdf: np.ndarray, uv: np.ndarray) -> np.ndarray:
    from scipy.ndimage import map_coordinates

    return map_coordinates(sdf, [uv[:, 1], uv[:, 0]], order=1, mode="nearest")


def contour_distance_px(sil: np.ndarray, mask: np.ndarray) -> float:
    """Mean two-way distance (pixels) between the boundaries of ``sil`` and ``mask`` (``(h, w) bool``): each
    boundary pixel's distance to the other boundary, averaged over both sets. 0 for identical shapes; a mask that
    holds half the object gives about a quarter of the object's size."""
    from scipy.ndimage import distance_transform_edt

    bs, bm = _boundary(np.asarray(sil, bool)), _boundary(np.asarray(mask, bool))
    if not bs.any() or not bm.any():
        return float("inf")
    d_to_m, d_to_s = distance_transform_edt(~bm), distance_transform_edt(~bs)
    return float(0.5 * (d_to_m[bs].mean() + d_to_s[bm].mean()))


def _evaluate(vertices, faces, views, sdfs, pose, config):
    """(IoU per view, robust RMS contour residual px, mean two-way contour distance px)."""
    ious, res, cdist = [], [], []
    for v, sdf in zip(views, sdfs):
        pts, sil = _contour_points(v.camera, vertices, faces, pose, config.contour_points, config.backend)
        ious.append(iou(sil, v.mask))
        cdist.append(contour_distance_px(sil, v.mask))
        if len(pts):
            res.append(_sample(sdf, v.camera.project(transform_points(pose, pts))) + 0.5)
    r = np.concatenate(res) if res else np.array([np.inf])
    # robust RMS: soft-L1 of the residuals expressed back in pixels
    c = config.robust_px
    rho = 2 * c * c * (np.sqrt(1 + (r / c) ** 2) - 1)
    return ious, float(np.sqrt(np.mean(rho))), float(np.mean(cdist))


def required_iou(mask: np.ndarray, aligned_iou: float, tolerance_px: float) -> float:
    """The IoU a perfect pose reaches against ``mask`` when the mask's boundary is off by ``tolerance_px``: (A - t P)
    / (A + t P) for area A and boundary length P (pixels), capped at ``aligned_iou``. A 35 px cube allows ~0.8, a
    large object ``aligned_iou``."""
    m = np.asarray(mask, bool)
    a, p = float(m.sum()), float(_boundary(m).sum())
    if a <= 0:
        return aligned_iou
    return float(min(aligned_iou, max(0.0, (a - tolerance_px * p) / (a + tolerance_px * p))))


def _status(cfg: AlignConfig, mean_iou: float, need_iou: float, resid: float, cdist: float) -> tuple[str, str]:
    """('aligned' | 'poor', why). Aligned: the silhouette agrees within what the mask allows (mean IoU >=
    ``need_iou``: ``aligned_iou``, lowered for small masks whose boundary pixels weigh more, see
    :func:`required_iou`; or two-way contour distance <= ``aligned_contour_px``) and the robust contour residual is
    within ``max_residual_px``."""
    why = []
    if mean_iou < need_iou and cdist > cfg.aligned_contour_px:
        why.append(f"silhouette IoU {mean_iou:.3f} < {need_iou:.3f} and contour distance {cdist:.2f} px > "
                   f"{cfg.aligned_contour_px} px (wrong pose, wrong or partial mask, or a mesh that does not match "
                   "the object)")
    if resid > cfg.max_residual_px:
        why.append(f"contour residual {resid:.2f} px > {cfg.max_residual_px}")
    return ("poor", "; ".join(why)) if why else ("aligned", "")


def _ambiguity(vertices, best, others, cfg) -> list[dict]:
    """Refined poses that fit the masks about as well as ``best`` (IoU within 0.003) but lie more than
    ``ambiguous_mm`` away (ADD-S): the silhouette cannot tell them apart (a mug's handle toward or away from the
    camera). ``best``/``others``: (pose, ious, ...) tuples."""
    from scipy.spatial import cKDTree

    pts = vertices[np.linspace(0, len(vertices) - 1, min(len(vertices), 1000)).round().astype(int)]
    tree = cKDTree(transform_points(best[0], pts))
    out = []
    for o in others:
        if np.mean(o[1]) < np.mean(best[1]) - 0.003:
            continue
        d = float(tree.query(transform_points(o[0], pts))[0].mean()) * 1e3
        if d > cfg.ambiguous_mm:
            from real2sim.core.geometry import matrix_to_quat_wxyz

            out.append({"iou": round(float(np.mean(o[1])), 5), "add_s_mm": round(d, 2),
                        "position": [round(float(x), 6) for x in o[0][:3, 3]],
                        "quaternion_wxyz": [round(float(x), 6) for x in matrix_to_quat_wxyz(o[0][:3, :3])]})
    return out


def align_pose(vertices, faces, views: list[View], init_pose: np.ndarray | None, table_height: float = 0.0,
               config: AlignConfig | None = None, appearance: Appearance | None = None) -> AlignResult:
    """Align an object (object-frame ``vertices``/``faces``) to its masks in ``views``. Never raises for a poor
    fit: look at ``status`` and the numbers. Raises for unusable input (empty masks, object behind camera).

    ``appearance``: the object's texture, used to score search hypotheses by colour when the views have images."""
    cfg = config or AlignConfig()
    if cfg.dof not in DOFS:
        raise ValueError(f"dof must be one of {', '.join(DOFS)}, got {cfg.dof!r}")
    t0 = time.perf_counter()
    vertices, faces = np.asarray(vertices, float), np.asarray(faces, np.int64)
    check_views(views, vertices, init_pose if init_pose is not None else _far_pose(views), cfg.min_mask_pixels)
    views = [_crop_view(View(v.camera, np.asarray(v.mask, bool), v.image, v.name), cfg.crop_grow) for v in views]
    sdfs = [signed_distance(v.mask) for v in views]

    starts, init_kind, init_iou, search = [], "bundle", 0.0, {}
    if init_pose is not None and cfg.init in ("bundle", "auto"):
        init_iou = float(np.mean([iou(render_silhouette(v.camera, vertices, faces, init_pose, cfg.backend), v.mask)
                                  for v in views]))
        if cfg.init == "bundle" or init_iou >= cfg.accept_init_iou:
            starts = [(np.asarray(init_pose, float), init_iou)]  # (start, score)
    if not starts:
        hyps, search = global_search(vertices, faces, views, table_height, cfg, appearance)
        picked = distinct([h for h in hyps if h.score >= hyps[0].score - cfg.refine_margin], deg=10.0,
                           metres=0.005)[:max(1, cfg.refine_keep)]
        starts = [(h.pose, h.score) for h in picked]  # distinct starts: a mirror pose is refined too
        init_kind, init_iou = "search", hyps[0].iou
    log.info("align: start from %s pose (IoU %.3f)", init_kind, init_iou)

    # several starts on a big mesh: refine them on its decimated copy, then the winner on the mesh itself
    many = len(starts) > 1 and len(faces) > cfg.search_max_faces
    rv, rf = decimate_for_search(vertices, faces, cfg.search_max_faces) if many else (vertices, faces)
    best, best_key, refined = None, -np.inf, []
    for k, (start, s_score) in enumerate(starts):
        out = _refine_and_polish(rv, rf, views, sdfs, start, cfg, appearance, (vertices, faces))
        refined.append(out)
        key = float(np.mean(out[1]))
        if init_kind == "search" and appearance is not None and cfg.colour_weight > 0 and len(starts) > 1:
            key = _final_score(vertices, faces, views, out[0], cfg, appearance)
        if key > best_key:
            best, best_key = out, key
        clear = k + 1 >= len(starts) or starts[k + 1][1] < s_score - 0.03
        if np.mean(best[1]) >= cfg.polish_below_iou and clear and (appearance is None or cfg.colour_weight <= 0):
            break  # good enough, and the next hypothesis scored clearly lower: it is not tried
    if many:
        p_full, h_full, it_full, settled_full = _refine(vertices, faces, views, sdfs, best[0], cfg)
        ious_full, resid_full, _ = _evaluate(vertices, faces, views, sdfs, p_full, cfg)
        best = (p_full, ious_full, resid_full, settled_full, best[4] + h_full, best[5] + it_full)
    pose, ious, resid, settled, history, it = best
    cdist = _evaluate(vertices, faces, views, sdfs, pose, cfg)[2]
    ok = settled and np.mean(ious) >= cfg.min_iou and resid <= cfg.max_residual_px
    need_iou = float(np.mean([required_iou(v.mask, cfg.aligned_iou, cfg.mask_tolerance_px) for v in views]))
    status, why_poor = _status(cfg, float(np.mean(ious)), need_iou, resid, cdist)
    notes = [] if settled else [f"still moving after {cfg.max_outer} rounds (a symmetric shape turns freely)"]
    if np.mean(ious) < cfg.min_iou:
        notes.append(f"mean IoU {np.mean(ious):.3f} < {cfg.min_iou}")
    ambiguous = _ambiguity(vertices, best, [o for o in refined if o is not best], cfg)
    if ambiguous:
        notes.append(f"ambiguous: {len(ambiguous)} other pose(s) fit as well (IoU {ambiguous[0]['iou']:.3f}) "
                     f"{ambiguous[0]['add_s_mm']:.1f} mm away; a second view or a texture tells them apart")
    msg = status + (f": {why_poor}" if why_poor else "") + (f" ({'; '.join(notes)})" if notes else "")
    if ambiguous:
        search = {**search, "ambiguous": ambiguous}
    res = AlignResult(pose, [round(x, 5) for x in ious], round(resid, 4), bool(ok), it, init_kind, round(init_iou, 5),
                      round(time.perf_counter() - t0, 4), msg, history, status, round(cdist, 4), round(need_iou, 4),
                      search)
    if ambiguous:
        log.warning("align: %s", notes[-1])
    log.info("align: %s (%s); IoU %s, residual %.3f px, contour distance %.2f px, %d rounds, %.2f s", status, msg,
             res.ious, resid, cdist, it, res.seconds)
    return res


def _crop_view(view: View, grow: float) -> View:
    """The view cut to a box ``grow`` times the mask's extent (inside the image), its camera moved to match: renders
    and distance fields cost the box, not the frame, and every number is the same while the object stays inside."""
    h, w = view.mask.shape
    if grow <= 0:
        return view
    x0, y0, x1, y1 = mask_box(view.mask, grow)
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if (x1 - x0) * (y1 - y0) >= 0.8 * w * h:
        return view
    K = np.array(view.camera.K, float)
    K[0, 2] -= x0
    K[1, 2] -= y0
    cam = Camera(x1 - x0, y1 - y0, K, np.array(view.camera.T_world_camera, float),
                 np.array(view.camera.distortion, float), view.camera.near, view.camera.far)
    img = None if view.image is None else view.image[y0:y1, x0:x1]
    return View(cam, view.mask[y0:y1, x0:x1], img, view.name)


def _final_score(vertices, faces, views, pose, cfg, appearance) -> float:
    """IoU + colour agreement of a refined pose, at the fine search scale (picks among refined hypotheses)."""
    from real2sim.render.pose_search import CropScorer

    sc = CropScorer(vertices, faces, views, cfg.fine_px, cfg.backend, appearance, cfg.colour_weight)
    return sc.score(pose, colour=True)[0]


def _refine_and_polish(vertices, faces, views, sdfs, start, cfg, appearance: Appearance | None = None,
                       textured_mesh: tuple | None = None):
    """Refine from ``start``; when the fit stays imperfect try nearby yaws by IoU (plus colour with an
    ``appearance``) and refine again from the best on each side. Returns (pose, ious, residual, settled, history,
    rounds). ``textured_mesh``: the (vertices, faces) the appearance belongs to when these are a decimated copy."""
    pose, history, it, converged_motion = _refine(vertices, faces, views, sdfs, start, cfg)
    ious, resid, _ = _evaluate(vertices, faces, views, sdfs, pose, cfg)
    if cfg.polish_yaw_deg > 0 and np.mean(ious) < cfg.polish_below_iou:
        # Contours miss parts hidden inside the silhouette (a mug's handle in front of its body). Each turned
        # pose is scored with its silhouette moved onto the mask's centroid (the turn also shifts it).
        from real2sim.render.pose_search import CropScorer

        scorer = CropScorer(vertices, faces, views, cfg.polish_px, cfg.backend, appearance, cfg.colour_weight,
                            textured_mesh)
        coloured = scorer.appearance is not None and cfg.colour_weight > 0
        plane = cfg.dof != "full"
        steps = np.arange(-cfg.polish_yaw_deg, cfg.polish_yaw_deg + 1e-9, cfg.polish_step_deg)
        cands = []
        centre = transform_points(pose, np.asarray(vertices).mean(0)[None])[0]
        for a in np.radians(steps[steps != 0]):
            T = _yawed_about(pose, a, centre)
            cands.append((scorer.score(T, colour=coloured)[0], float(a), T))
        # the best turn on each side is refined (a near-symmetric shape's silhouette barely prefers the right one
        # before refinement); the refined pose with the best IoU wins
        for side in (-1, 1):
            sc, a, T = max((c for c in cands if np.sign(c[1]) == side), key=lambda c: c[0])
            T = scorer.recentre(scorer.recentre(T, plane), plane)
            p2, h2, it2, c2 = _refine(vertices, faces, views, sdfs, T, cfg)
            ious2, resid2, _ = _evaluate(vertices, faces, views, sdfs, p2, cfg)
            history.append({"polish_yaw_deg": round(float(np.degrees(a)), 2), "iou_before": round(float(np.mean(ious)), 5),
                            "iou_after": round(float(np.mean(ious2)), 5)})
            it += it2
            better = np.mean(ious2) > np.mean(ious) + 1e-4
            if coloured:  # a label decides where the silhouette cannot (a can's turn about its axis)
                better = scorer.score(p2, colour=True)[0] > scorer.score(pose, colour=True)[0] + 1e-4
            if better:
                pose, ious, resid, converged_motion = p2, ious2, resid2, c2
                history += h2
    return pose, ious, resid, converged_motion, history, it


def _yawed_about(pose: np.ndarray, angle: float, centre) -> np.ndarray:
    """``pose`` turned by ``angle`` about the vertical through the world point ``centre (3,)``."""
    T = pose.copy()
    R = _rz(angle)
    T[:3, :3] = R @ pose[:3, :3]
    T[:3, 3] = R @ (pose[:3, 3] - centre) + centre
    return T


def _refine(vertices, faces, views, sdfs, start, cfg):
    """Contour refinement rounds from ``start``: (best pose, history, rounds, settled).

    Each round re-renders the silhouette, lifts its boundary to 3D and solves a robust Gauss-Newton
    problem with those points fixed. The best pose by the round's starting cost is kept: on noisy
    masks the contour set changes between rounds and the pose can wander by a fraction of a pixel.
    ``settled`` is true when the pose stopped moving or the cost stopped improving for ``patience`` rounds.
    """
    from scipy.optimize import least_squares

    pose = np.asarray(start, float).copy()
    n = DOFS[cfg.dof]
    c = cfg.robust_px
    history, it, settled = [], 0, False
    best_pose, best_cost, since_best = pose, np.inf, 0
    for it in range(1, cfg.max_outer + 1):
        data = []
        for v, sdf in zip(views, sdfs):
            pts, _ = _contour_points(v.camera, vertices, faces, pose, cfg.contour_points, cfg.backend)
            if len(pts):
                data.append((v.camera, sdf, pts))
        if not data:
            break  # nothing visible: cannot refine
        P0 = pose

        def residuals(p):
            T = _apply(P0, p, cfg.dof)
            return np.concatenate([_sample(sdf, cam.project(transform_points(T, pts))) + 0.5 for cam, sdf, pts in data])

        r0 = residuals(np.zeros(n))
        cost0 = float(np.mean(2 * c * c * (np.sqrt(1 + (r0 / c) ** 2) - 1)))
        if cost0 < best_cost * (1 - 1e-3):
            best_pose, best_cost, since_best = pose, cost0, 0
        else:
            since_best += 1
            if since_best >= cfg.patience:
                settled = True
                break
        sol = least_squares(residuals, np.zeros(n), method="trf", loss="soft_l1", f_scale=c,
                            diff_step=1e-3, max_nfev=cfg.inner_nfev, xtol=1e-6, ftol=1e-8)
        new = _apply(P0, sol.x, cfg.dof)
        dt = float(np.linalg.norm(new[:3, 3] - pose[:3, 3]))
        dr = rotation_angle_between(new[:3, :3], pose[:3, :3])
        pose = new
        history.append({"round": it, "cost_px2": round(cost0, 6), "moved_mm": round(dt * 1e3, 4),
                        "turned_deg": round(float(np.degrees(dr)), 4)})
        if dt < cfg.tol_m and dr < cfg.tol_rad:
            settled = True
            best_pose = pose  # the solver's last step is below tolerance: take it
            break
    return best_pose, history, it, settled


def _far_pose(views: list[View]) -> np.ndarray:
    """A pose 1 m in front of the first camera (only used to check masks when there is no start pose)."""
    T = np.eye(4)
    T[:3, 3] = views[0].camera.T_world_camera[:3, 3] + views[0].camera.T_world_camera[:3, 2]
    return T


def pose_error(T_est, T_true) -> tuple[float, float]:
    """(translation error m, rotation error deg)."""
    return (float(np.linalg.norm(np.asarray(T_est)[:3, 3] - np.asarray(T_true)[:3, 3])),
            float(np.degrees(rotation_angle_between(np.asarray(T_est)[:3, :3], np.asarray(T_true)[:3, :3]))))
