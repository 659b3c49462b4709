"""The camera's pose aligned to the robot: render-and-compare of the robot's silhouettes, at known joints, against
the robot's pixels in many frames at once.

Shared by camera refinement against robot masks (:mod:`real2sim.capture.camera_refine`) and camera estimation from
a clip (:mod:`real2sim.segmentation.robot_camera`, which alternates this with fitting the joints).

Pose offsets are taken in the camera's own frame (3 translations, 3 rotations as an axis-angle), in units of
:data:`UNIT` (1 cm, 1 degree) so that simplex steps are comparable. A subspace of those 6 directions can be
searched instead (:func:`gauge_free_basis`): the yaw of the camera about the robot's first (vertical) joint axis is
not seen in the silhouettes of the links that joint moves, since turning the camera about that axis and the joint
by the same angle gives the same images.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from real2sim.core.camera import Camera
from real2sim.robots.scene import link_poses

log = logging.getLogger(__name__)

UNIT = np.array([0.01] * 3 + [np.radians(1.0)] * 3)
"""Offset units: 1 cm of translation, 1 degree of rotation."""


def perturb_pose(T0, x) -> np.ndarray:
    """``T0`` moved by ``x`` = (tx, ty, tz [m], rx, ry, rz [rad, axis-angle]) in the camera's own frame."""
    from scipy.spatial.transform import Rotation

    D = np.eye(4)
    D[:3, :3] = Rotation.from_rotvec(np.asarray(x[3:6], float)).as_matrix()
    D[:3, 3] = x[:3]
    return np.asarray(T0, float) @ D


def pose_change(T0, T1) -> dict:
    """Translation (mm) of the camera centre and rotation angle (deg) between two camera poses."""
    T0, T1 = np.asarray(T0, float), np.asarray(T1, float)
    R = T0[:3, :3].T @ T1[:3, :3]
    ang = np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0)))
    return {"translation_mm": round(float(np.linalg.norm(T1[:3, 3] - T0[:3, 3]) * 1000), 3),
            "rotation_deg": round(float(ang), 4)}


def rotate_about_axis(T, point, axis, angle: float) -> np.ndarray:
    """Pose ``T`` ``(4, 4)`` turned by ``angle`` (rad) about the world line through ``point`` along ``axis``."""
    from scipy.spatial.transform import Rotation

    a = np.asarray(axis, float) / np.linalg.norm(axis)
    R = Rotation.from_rotvec(a * angle).as_matrix()
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = np.asarray(point, float) - R @ np.asarray(point, float)
    return M @ np.asarray(T, float)


def gauge_direction(T0, point, axis) -> np.ndarray:
    """``(6,)`` the offset (in :data:`UNIT`, camera frame) that turns the camera at ``T0`` about the world line
    through ``point`` along ``axis`` by one unit (1 degree), to first order."""
    T0 = np.asarray(T0, float)
    R0, t0 = T0[:3, :3], T0[:3, 3]
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    rot = R0.T @ a  # rotation vector in the camera frame, per rad
    trans = R0.T @ np.cross(a, t0 - np.asarray(point, float))  # metres per rad
    d = np.r_[trans / UNIT[0], rot / 1.0] * np.radians(1.0)
    return d


def gauge_free_basis(T0, point, axis) -> np.ndarray:
    """``(6, 5)`` orthonormal directions (in :data:`UNIT` coordinates) perpendicular to :func:`gauge_direction`."""
    g = gauge_direction(T0, point, axis)
    g = g / np.linalg.norm(g)
    q, _ = np.linalg.qr(np.c_[g, np.eye(6)])
    return q[:, 1:6]


def first_joint_axis(model, q) -> tuple[np.ndarray, np.ndarray]:
    """(point, direction) in the world of the robot's first moving joint's axis (the WidowX's waist) at joints
    ``q``: the axis about which the camera's yaw is not seen."""
    j = next(j for j in model.joints if j.type in ("revolute", "continuous"))
    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))
    Tp = np.asarray(model.base, float) @ poses.get(j.parent, np.eye(4)) @ np.asarray(j.origin, float)
    return Tp[:3, 3], Tp[:3, :3] @ np.asarray(j.axis, float)


def soft_targets(masks, ignore, width: int, height: int) -> tuple[list, list]:
    """Per frame (target, weight) at ``width`` x ``height``: the fraction of each low-resolution pixel the robot
    mask covers, and 1 - the fraction that is ignored (``ignore`` None: nothing)."""
    import cv2

    tg, wg = [], []
    for k, mk in enumerate(masks):
        tg.append(cv2.resize(np.asarray(mk, np.float32), (width, height), interpolation=cv2.INTER_AREA))
        ig = None if ignore is None else ignore[k]
        wg.append(np.ones((height, width), np.float32) if ig is None else
                  1.0 - cv2.resize(np.asarray(ig, np.float32), (width, height), interpolation=cv2.INTER_AREA))
    return tg, wg


def pooled_iou(silhouettes, targets, weights=None) -> float:
    """IoU pooled over frames (intersections and unions summed) of binary silhouettes and soft targets, pixels
    weighted by ``weights`` (None: all 1)."""
    inter = union = 0.0
    for k, (s, t) in enumerate(zip(silhouettes, targets)):
        sf, tf = np.asarray(s, np.float32), np.asarray(t, np.float32)
        w = 1.0 if weights is None else weights[k]
        inter += float((w * np.minimum(sf, tf)).sum())
        union += float((w * np.maximum(sf, tf)).sum())
    return 1.0 if union < 1e-9 else inter / union


def with_pose(camera: Camera, T) -> Camera:
    return dataclasses.replace(camera, T_world_camera=np.asarray(T, float))


def align_camera(render, camera: Camera, joints, targets, weights=None, basis=None, max_evals: int = 300,
                 step: float = 2.0, xatol: float = 0.02) -> tuple[np.ndarray, dict]:
    """The pose of ``camera`` that best lays the robot, at ``joints`` (one vector per frame), on ``targets``.

    ``render(camera, q) -> (h, w) bool`` draws the robot (a :class:`real2sim.render.robot.RobotSilhouette` per
    camera is fastest); ``targets`` / ``weights``: per frame ``(h, w) float`` at ``camera``'s size
    (:func:`soft_targets`); ``basis``: ``(6, k)`` directions searched (None: all six); ``step``: the simplex's
    first steps (units of :data:`UNIT`). Nelder-Mead on 1 - the pooled IoU. Returns (T_world_camera, record: IoU
    before / after, evaluations, offset)."""
    from scipy.optimize import minimize

    T0 = np.asarray(camera.T_world_camera, float)
    B = np.eye(6) if basis is None else np.asarray(basis, float)

    def pose(y):
        return perturb_pose(T0, (B @ y) * UNIT)

    def loss(y):
        cam = with_pose(camera, pose(y))
        return 1.0 - pooled_iou([render(cam, q) for q in joints], targets, weights)

    k = B.shape[1]
    y0 = np.zeros(k)
    before = loss(y0)
    res = minimize(loss, y0, method="Nelder-Mead",
                   options={"maxfev": max_evals, "initial_simplex": np.vstack([y0, y0 + step * np.eye(k)]),
                            "xatol": xatol, "fatol": 1e-5})
    y = res.x if res.fun < before else y0
    T1 = pose(y)
    return T1, {"iou_before": 1.0 - before, "iou_after": 1.0 - min(res.fun, before), "evaluations": int(res.nfev),
                "offset_units": [round(float(v), 4) for v in B @ y]}


class SurfacePoints:
    """Points on the robot's visual surfaces, per link (``spacing`` apart on average, seeded): what a silhouette
    is made of, for distance-based alignment (every point of the robot projects into its silhouette)."""

    def __init__(self, model, spacing: float = 0.008, seed: int = 0):
        import trimesh

        self.model = model
        self.names, self.points = [], []
        for name, (v, f) in sorted(model.links.items()):
            mesh = trimesh.Trimesh(np.asarray(v, float), np.asarray(f), process=False)
            n = int(np.clip(mesh.area / spacing ** 2, 8, 4000))
            pts, _ = trimesh.sample.sample_surface(mesh, n, seed=seed)
            self.names.append(name)
            self.points.append(np.c_[pts, np.ones(len(pts))])

    def world(self, q) -> np.ndarray:
        """``(n, 3)`` the points in the world at joints ``q``."""
        poses = link_poses(self.model.joints, self.model.root, dict(zip(self.model.joint_names, np.asarray(q, float))))
        base = np.asarray(self.model.base, float)
        return np.concatenate([(p @ (base @ poses[n]).T)[:, :3] for n, p in zip(self.names, self.points)
                               if n in poses])


def _project(K, T_cam_world, pts) -> tuple[np.ndarray, np.ndarray]:
    pc = pts @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]
    z = pc[:, 2]
    ok = z > 1e-3
    uv = (pc[:, :2] / np.where(ok, z, 1.0)[:, None]) @ K[:2, :2].T + K[:2, 2]
    return uv, ok


def _pseudo_huber(r, f: float):
    return np.sqrt(2.0 * f * f * (np.sqrt(1.0 + (r / f) ** 2) - 1.0))


def chamfer_align(points: SurfacePoints, camera: Camera, joints, free, lower, upper, evidence, ignore=None,
                  basis=None, scale: float = 0.25, prior_px: float = 1.0, robust_px: float = 2.0,
                  max_iter: int = 100, max_evidence: int = 400, fix_camera: bool = False,
                  fix_joints: bool = False) -> tuple[np.ndarray, np.ndarray, dict]:
    """Camera pose and every frame's joints together, by least squares on silhouette distances.

    Per frame: every surface point of the robot should fall on the frame's evidence (its distance, in pixels at
    ``scale``, to the nearest evidence or ignored pixel), and every evidence pixel should have a robot point near
    it (distance to the nearest projected point; up to ``max_evidence`` pixels sampled per frame); both averaged
    per frame and robust beyond ``robust_px``. ``joints``: ``(n, dof)`` start joints; ``free``: indices of the
    joints fitted (within ``lower``/``upper``); ``evidence`` / ``ignore``: per frame ``(h, w) bool`` at full size;
    ``basis``: ``(6, k)`` camera directions (units of :data:`UNIT`; None: all six); a pull of ``prior_px`` pixels
    per radian towards the start joints keeps what the silhouettes do not show where it was. Unlike
    :func:`align_camera` (the joints held), the joints follow the camera here, so the camera can go where the arm
    was compensating for it. Returns (T_world_camera, joints ``(n, dof)``, record)."""
    import cv2
    from scipy.ndimage import map_coordinates
    from scipy.optimize import least_squares
    from scipy.spatial import cKDTree

    T0 = np.asarray(camera.T_world_camera, float)
    B = np.eye(6) if basis is None else np.asarray(basis, float)
    kc = 0 if fix_camera else B.shape[1]
    free = np.asarray(free, int)
    kj = 0 if fix_joints else len(free)
    Q0 = np.asarray(joints, float)
    n = len(Q0)
    K = np.array(camera.K, float)
    K[:2] *= scale
    w, h = max(1, int(round(camera.width * scale))), max(1, int(round(camera.height * scale)))
    rng = np.random.default_rng(0)
    dts, evs = [], []
    for k in range(n):
        ev = cv2.resize(np.asarray(evidence[k], np.uint8), (w, h), interpolation=cv2.INTER_AREA) > 0
        ig = np.zeros_like(ev) if ignore is None or ignore[k] is None else \
            cv2.resize(np.asarray(ignore[k], np.uint8), (w, h), interpolation=cv2.INTER_AREA) > 0
        dts.append(cv2.distanceTransform((~(ev | ig)).astype(np.uint8), cv2.DIST_L2, 5))
        ys, xs = np.nonzero(ev & ~ig)
        if len(xs) > max_evidence:
            pick = rng.choice(len(xs), max_evidence, replace=False)
            ys, xs = ys[pick], xs[pick]
        evs.append(np.c_[xs, ys].astype(float))

    # parameters: camera (kc), then per frame the free joints (n * kj), in units of 1 cm / 1 deg and 0.01 rad
    def frame_res(T_cw, q, k):
        uv, ok = _project(K, T_cw, points.world(q))
        inside = ok & (uv[:, 0] > -0.5) & (uv[:, 0] < w - 0.5) & (uv[:, 1] > -0.5) & (uv[:, 1] < h - 0.5)
        d = np.zeros(len(uv))
        d[inside] = map_coordinates(dts[k], [uv[inside, 1], uv[inside, 0]], order=1, mode="nearest")
        prec = _pseudo_huber(d, robust_px) / np.sqrt(len(d))
        if len(evs[k]) and inside.any():
            dist, _ = cKDTree(uv[inside]).query(evs[k])
        else:
            dist = np.full(len(evs[k]), 3.0 * robust_px)
        rec = _pseudo_huber(dist, robust_px) / np.sqrt(max(1, len(dist)))
        return np.r_[prec, rec]

    def q_of(x, k):
        q = Q0[k].copy()
        if kj:
            q[free] = np.clip(Q0[k][free] + 0.01 * x[kc + k * kj: kc + (k + 1) * kj], lower, upper)
        return q

    def T_of(x):
        return perturb_pose(T0, (B @ x[:kc]) * UNIT) if kc else T0

    def residuals(x):
        T_cw = np.linalg.inv(T_of(x))
        out = [frame_res(T_cw, q_of(x, k), k) for k in range(n)]
        prior = prior_px * 0.01 * x[kc:] if kj else np.zeros(0)
        return np.r_[np.concatenate(out), prior]

    sizes = [len(frame_res(np.linalg.inv(T0), Q0[k], k)) for k in range(n)]
    offs = np.r_[0, np.cumsum(sizes)]
    m = int(offs[-1]) + n * kj
    step_c, step_j = 0.1, 0.15

    def jac(x):
        J = np.zeros((m, len(x)))
        r0 = residuals(x)
        for c in range(kc):  # camera columns: every frame
            x1 = x.copy()
            x1[c] += step_c
            J[:, c] = (residuals(x1) - r0) / step_c
        for j in range(kj):  # joint j of every frame at once: each frame's residuals see only its own joints
            x1 = x.copy()
            x1[kc + j::kj] += step_j
            T_cw = np.linalg.inv(T_of(x1))
            for k in range(n):
                rk = frame_res(T_cw, q_of(x1, k), k)
                J[offs[k]:offs[k + 1], kc + k * kj + j] = (rk - r0[offs[k]:offs[k + 1]]) / step_j
                J[offs[-1] + k * kj + j, kc + k * kj + j] = prior_px * 0.01
        return J

    x0 = np.zeros(kc + n * kj)
    c0 = float(np.sum(residuals(x0) ** 2))
    res = least_squares(residuals, x0, jac=jac, method="trf", max_nfev=max_iter, x_scale=1.0, tr_solver="exact")
    x = res.x if res.cost * 2 < c0 else x0
    T1 = T_of(x)
    Q1 = np.array([q_of(x, k) for k in range(n)])
    return T1, Q1, {"cost_before": round(c0, 4), "cost_after": round(float(min(res.cost * 2, c0)), 4),
                    "iterations": int(res.nfev), "offset_units": [round(float(v), 4) for v in B @ x[:kc]] if kc else []}
