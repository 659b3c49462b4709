"""Camera extrinsics refined by aligning the robot, rendered at the frames' joint states, to its mask.

The robot's pose in the world (``robot.base_pose``) and its joint positions at each frame
(``capture.frames[i].joint_positions``, else ``robot.joint_positions``) are known; its
silhouette in a frame then depends only on the camera. :func:`refine_camera` perturbs the
camera pose by a 6-D offset in the camera's own frame (3 translations in metres, 3 rotations
as an axis-angle) and minimises ``1 - IoU`` between the rendered robot silhouette (the
registry URDF's visual meshes, :func:`texture.robot.link_id_image`) and the robot masks
``masks/<frame>/robot.png``, pooled over the frames. As :func:`real2sim.segmentation.robot_fit.fit_robot_joints`
does for the joints: Nelder-Mead on low-resolution silhouettes, then coarse to fine up to full
resolution (the last pass is what brings the error from ~5 mm to ~1 mm on the tabletop WidowX).

The masks must come from the real frames (``real2sim masks DIR --entity robot ...``): masks
rendered by the ``robot_masks`` stage are drawn from the bundle's current camera, so
refining against them returns the camera they were rendered with (useful as a check, not
as a calibration).

On a real frame, one arm pose pins down where the robot appears in the image, not the whole
camera pose: on the Bridge frame (one gripper, joints fitted to it) 6-DoF refinement from
2 cm / 2 deg off brings the gripper back to ~3 px but leaves the pose loose by ~1.5 cm / 3 deg
(roll about the optical axis, distance, the direction the gripper is seen from); rotation only
with a known position gets to ~1 deg. See docs/journey.md, "Camera refinement on the real frame".
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

import numpy as np

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.errors import BundleError
from real2sim.core.gates import failing
from real2sim.core.imaging import iou, read_mask, read_rgb_float, write_rgb
from real2sim.core.manifest import CameraSpec
from real2sim.core.stages import files_hash, run_stage
from real2sim.render.robot import link_id_image, load_robot_model

log = logging.getLogger(__name__)
STAGE = "camera_refine"
# Offsets are optimised in units of 1 cm and 1 degree, so that the simplex steps are comparable.
UNIT = np.array([0.01] * 3 + [np.radians(1.0)] * 3)
# A mean-IoU gain below this does not identify a better camera on masks segmented from real frames: on the
# Bridge frame, refinements from six starts ended 4-16 mm / 1-2.8 deg apart within IoU 0.825-0.834.
MIN_GAIN = 0.01
ONE_POSE_NOTE = (
    "one robot pose: its masks pin down where the robot appears in the image (to ~3 px), not the whole camera "
    "pose (on the Bridge frame, refinements from 2 cm / 2 deg off ended 4-16 mm / 1-2.8 deg from the "
    "reference, all at its IoU or better); refine rotation only (refine_camera_stage dof=3) when the position "
    "is known, or add frames with the arm elsewhere")


def _pooled_loss(silhouettes, targets) -> float:
    """``1 - IoU`` pooled over the frames; ``targets`` may be soft (the fraction of each pixel the mask covers)."""
    inter = union = 0.0
    for sil, t in zip(silhouettes, targets):
        sf, tf = np.asarray(sil, np.float32), np.asarray(t, np.float32)
        inter += np.minimum(sf, tf).sum()
        union += np.maximum(sf, tf).sum()
    return float(1.0 - inter / max(union, 1e-9))


def _perturb(T0: np.ndarray, x) -> np.ndarray:
    """``T0`` moved by ``x`` = (tx, ty, tz [m], rx, ry, rz [rad, axis-angle]) in the camera's own frame."""
    from scipy.spatial.transform import Rotation

    D = np.eye(4)
    D[:3, :3] = Rotation.from_rotvec(x[3:6]).as_matrix()
    D[:3, 3] = x[:3]
    return T0 @ D


def pose_change(T0, T1) -> dict:
    """Translation (mm) of the camera centre and rotation angle (deg) between two camera poses."""
    T0, T1 = np.asarray(T0, float), np.asarray(T1, float)
    R = T0[:3, :3].T @ T1[:3, :3]
    ang = np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0)))
    return {"translation_mm": round(float(np.linalg.norm(T1[:3, 3] - T0[:3, 3]) * 1000), 3),
            "rotation_deg": round(float(ang), 4)}


def _views(bundle: Bundle, camera: str, frames=None) -> list[tuple[int, str, np.ndarray]]:
    """[(frame index, robot mask path, joint vector)] of the frames of ``camera`` that have a robot mask."""
    m = bundle.manifest
    if m.robot is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --robot widowx'")
    if camera not in m.cameras:
        raise BundleError(f"{bundle.root}: no camera '{camera}' (cameras: {', '.join(sorted(m.cameras)) or 'none'})")
    if not m.capture.frames:
        raise BundleError(f"{bundle.root}: no frames; run 'real2sim init DIR --frames PATH' first")
    idx = range(len(m.capture.frames)) if frames is None else [int(i) for i in frames]
    out = []
    for i in idx:
        if not 0 <= i < len(m.capture.frames):
            raise BundleError(f"{bundle.root}: no frame {i} (the bundle has {len(m.capture.frames)})")
        f = m.capture.frames[i]
        rel = m.capture.masks.get(f"{i:06d}", {}).get("robot")
        if f.camera != camera or not rel:
            continue
        q = f.joint_positions or m.robot.joint_positions
        out.append((i, rel, None if not q else np.asarray(q, float)))
    if not out:
        raise BundleError(
            f"{bundle.root}: no frame of camera '{camera}' has a robot mask (masks/<frame>/robot.png); segment the "
            f"robot in the real frames with 'real2sim masks {bundle.root} --entity robot --point X,Y' "
            f"(or render them with 'real2sim robot-masks {bundle.root}', which draws them from the current camera)")
    return out


def _targets(bundle: Bundle, camera: str, frames, max_frames: int):
    """(views, robot model, camera, masks, joint vectors) of the frames to align to; checks shapes and joints."""

    m = bundle.manifest
    views = _views(bundle, camera, frames)
    if len(views) > max_frames:
        views = [views[int(round(j))] for j in np.linspace(0, len(views) - 1, max_frames)]
    model = load_robot_model(m.robot, bundle.root)
    cam0 = m.cameras[camera].camera()
    masks, qs = [], []
    for i, rel, q in views:
        q = model.default_q if q is None else q
        if len(q) != len(model.joint_names):
            raise BundleError(f"frame {i:06d}: {len(q)} joint positions but robot '{m.robot.name}' has "
                              f"{len(model.joint_names)} ({', '.join(model.joint_names)})")
        mk = read_mask(bundle.path(rel))
        if mk.shape != (cam0.height, cam0.width):
            raise BundleError(f"{bundle.path(rel)}: mask is {mk.shape[1]}x{mk.shape[0]}, camera '{camera}' is "
                              f"{cam0.width}x{cam0.height}")
        masks.append(mk)
        qs.append(q)
    if not any(mk.any() for mk in masks):
        raise BundleError(f"{bundle.root}: the robot masks of camera '{camera}' are all empty; nothing to align to")
    return views, model, cam0, masks, qs


def _coarse_to_fine(loss_at, n: int, scales, max_evals: int) -> tuple[np.ndarray, list, int]:
    """Nelder-Mead on ``loss_at(scale)(x)`` at each scale in turn, from 0; a pass that does not lower the loss is
    dropped. Returns (x, passes, evaluations)."""
    from scipy.optimize import minimize

    x = np.zeros(n)
    passes, evals = [], 0
    for s in scales:
        loss = loss_at(s)
        step = 2.0 * 0.25 / s  # coarse pass: 2 cm / 2 deg steps; finer passes: smaller
        simplex = np.vstack([x] + [x + step * e for e in np.eye(n)])
        before = loss(x)
        res = minimize(loss, x, method="Nelder-Mead",
                       options={"maxfev": max_evals, "initial_simplex": simplex, "xatol": 0.02, "fatol": 1e-5})
        if res.fun < before:
            x = res.x
        evals += int(res.nfev)
        passes.append({"scale": s, "loss_before": round(float(before), 5),
                       "loss_after": round(float(min(res.fun, before)), 5), "evaluations": int(res.nfev)})
    return x, passes, evals


def refine_camera(bundle: Bundle, camera: str = "main", frames=None, dof: int = 6, max_evals: int = 400,
                  scales=(0.25, 0.5, 1.0), max_frames: int = 12) -> tuple[np.ndarray, dict]:
    """Refine ``bundle.manifest.cameras[camera]``'s pose against the robot masks. Returns (T_world_camera, report).

    ``dof`` 6 moves and turns the camera; 3 only turns it (the position is trusted). ``max_evals`` silhouette
    renders per frame set and scale; ``scales`` are the image scales of the coarse-to-fine passes. The report has
    the IoU per frame before and after (full resolution) and the pose change; the returned pose is the refined
    one even when it is not better (the caller decides, see :func:`refine_camera_stage`). ``robot_poses`` counts
    the distinct joint states among the frames: with one, the masks pin down where the robot appears in the
    image, not the whole camera pose (see :data:`ONE_POSE_NOTE`).
    """
    import cv2

    if dof not in (3, 6):
        raise BundleError(f"dof must be 6 (translation + rotation) or 3 (rotation only), not {dof}")
    t0 = time.perf_counter()
    views, model, cam0, masks, qs = _targets(bundle, camera, frames, max_frames)
    T0 = np.array(cam0.T_world_camera, float)
    free = np.arange(6) if dof == 6 else np.arange(3, 6)

    def pose(x):
        full = np.zeros(6)
        full[free] = x
        return _perturb(T0, full * UNIT)

    def silhouettes(cam, T):
        c = cam.with_pose(T)
        return [link_id_image(model, c, q)[0] >= 0 for q in qs]

    def loss_at(s):
        small = cam0.scaled(s)
        # soft target: the fraction of each low-resolution pixel the mask covers (IoU varies more smoothly)
        targets = [cv2.resize(mk.astype(np.float32), (small.width, small.height), interpolation=cv2.INTER_AREA)
                   for mk in masks]
        return lambda xv: _pooled_loss(silhouettes(small, pose(xv)), targets)

    x, passes, evals = _coarse_to_fine(loss_at, len(free), scales, max_evals)
    T1 = pose(x)
    iou0 = [iou(s, mk) for s, mk in zip(silhouettes(cam0, T0), masks)]
    iou1 = [iou(s, mk) for s, mk in zip(silhouettes(cam0, T1), masks)]
    full = np.zeros(6)
    full[free] = x
    rep = {"camera": camera, "dof": dof, "frames": [f"{i:06d}" for i, _, _ in views],
           "iou_before": [round(v, 4) for v in iou0], "iou_after": [round(v, 4) for v in iou1],
           "mean_iou_before": round(float(np.mean(iou0)), 4), "mean_iou_after": round(float(np.mean(iou1)), 4),
           "offset_camera_frame": {"translation_m": [round(float(v), 5) for v in full[:3] * UNIT[:3]],
                                   "rotation_deg": [round(float(v), 4) for v in full[3:]]},
           "pose_change": pose_change(T0, T1), "passes": passes, "evaluations": evals,
           "T_world_camera_before": np.round(T0, 6).tolist(), "T_world_camera_after": np.round(T1, 6).tolist(),
           "robot_poses": _distinct_poses(qs), "seconds": round(time.perf_counter() - t0, 2)}
    return T1, rep


def _picture(bundle: Bundle, camera: str, rep: dict, path) -> None:
    """Per frame (rows, at most 3): the frame with mask vs silhouette before | after. Green: both; red: robot mask
    only; blue: rendered silhouette only."""

    m = bundle.manifest
    model = load_robot_model(m.robot, bundle.root)
    cam = m.cameras[camera].camera()
    rows = []
    keys = rep["frames"][:3]
    boxes = []
    for k in keys:
        i = int(k)
        f = m.capture.frames[i]
        q = f.joint_positions or m.robot.joint_positions or model.default_q
        mk = read_mask(bundle.path(m.capture.masks[k]["robot"]))
        try:
            img = read_rgb_float(bundle.path(f.image))
        except Exception:  # noqa: BLE001 - a missing frame image still gets a picture of the masks
            img = np.zeros((cam.height, cam.width, 3), np.float32)
        panels = []
        for T in (rep["T_world_camera_before"], rep["T_world_camera_after"]):
            sil = link_id_image(model, cam.with_pose(T), q)[0] >= 0
            out = 0.5 * img
            out[mk & sil] = 0.35 * out[mk & sil] + 0.65 * np.array([0.1, 0.9, 0.1])
            out[mk & ~sil] = 0.35 * out[mk & ~sil] + 0.65 * np.array([1.0, 0.1, 0.1])
            out[sil & ~mk] = 0.35 * out[sil & ~mk] + 0.65 * np.array([0.1, 0.4, 1.0])
            panels.append(out)
            boxes.append(mk | sil)
        rows.append(panels)
    # one crop for all panels, around every mask and silhouette
    allm = np.any(boxes, 0)
    ys, xs = np.nonzero(allm) if allm.any() else (np.array([0, cam.height - 1]), np.array([0, cam.width - 1]))
    pad = 20
    y0, y1 = max(ys.min() - pad, 0), min(ys.max() + pad + 1, cam.height)
    x0, x1 = max(xs.min() - pad, 0), min(xs.max() + pad + 1, cam.width)
    sep = np.ones((y1 - y0, 4, 3), np.float32)
    img = np.concatenate([np.concatenate([r[0][y0:y1, x0:x1], sep, r[1][y0:y1, x0:x1]], 1) for r in rows], 0)
    out = np.ascontiguousarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
    import cv2

    w = x1 - x0
    for j, label in enumerate((f"before IoU {rep['mean_iou_before']:.3f}", f"after IoU {rep['mean_iou_after']:.3f}")):
        cv2.putText(out, label, (j * (w + 4) + 6, out.shape[0] - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    (255, 255, 255), 1, cv2.LINE_AA)
    write_rgb(path, out)


def _distinct_poses(qs, tol: float = 1e-3) -> int:
    """How many different joint states (to ``tol`` rad / m) the frames hold."""
    out: list[np.ndarray] = []
    for q in qs:
        if not any(len(q) == len(p) and np.allclose(q, p, atol=tol) for p in out):
            out.append(np.asarray(q, float))
    return len(out)


def _decide(rep: dict, min_gain: float) -> tuple[bool, str]:
    """Whether to apply the refined pose (the mean IoU gained at least ``min_gain``), and the stage message."""
    gain = rep["mean_iou_after"] - rep["mean_iou_before"]
    if gain >= min_gain and gain > 0:
        return True, (f"IoU {rep['mean_iou_before']:.4f} -> {rep['mean_iou_after']:.4f}; camera moved "
                      f"{rep['pose_change']['translation_mm']:.1f} mm, {rep['pose_change']['rotation_deg']:.2f} deg")
    why = "IoU did not improve" if gain <= 0 else f"IoU gain {gain:.4f} is below min_gain {min_gain:g}"
    return False, (f"{why} ({rep['mean_iou_before']:.4f} -> {rep['mean_iou_after']:.4f}, a pose "
                   f"{rep['pose_change']['translation_mm']:.1f} mm, {rep['pose_change']['rotation_deg']:.2f} deg "
                   "away); previous camera pose kept")


@dataclass
class RefineCameraConfig:
    """Settings of ``real2sim refine-camera``."""

    camera: str = "main"
    """Bundle camera whose pose is refined."""
    dof: int = 6
    """6: move and turn the camera; 3: only turn it (its position is measured). One frame of a gripper pins where
    the robot lands in the image, not the whole pose (docs/journey.md)."""
    max_evals: int = 400
    """Loss evaluations of the coarse-to-fine search."""
    min_gain: float = MIN_GAIN
    """Keep the old pose unless the mean IoU improves by this much."""


def refine_camera_stage(bundle: Bundle, camera: str = RefineCameraConfig.camera, force: bool = False,
                        dof: int = RefineCameraConfig.dof, max_evals: int = RefineCameraConfig.max_evals,
                        min_gain: float = RefineCameraConfig.min_gain, accept_poor: bool = False):
    """Refine camera ``camera`` against the robot masks and write it into the manifest. Returns (record, ran).

    Writes ``reports/camera_refine.json`` and ``reports/camera_refine.png``. The previous pose is kept when the
    mean IoU (full resolution) gains less than ``min_gain``: on masks segmented from real frames, smaller
    gains do not single out a better camera (see :data:`MIN_GAIN`). With one robot pose among the frames and
    ``dof`` 6 the message says what that cannot determine (:data:`ONE_POSE_NOTE`).

    Quality gate (:mod:`real2sim.core.gates`, ``camera_refine``): a refined camera whose robot silhouette IoU misses
    the bar is not applied unless ``accept_poor`` (the record is 'poor').
    """
    if not 0.0 <= float(min_gain) < 1.0:
        raise BundleError(f"min_gain must be in [0, 1) (a mean-IoU gain; default {MIN_GAIN}), not {min_gain}")
    m = bundle.manifest
    views = _views(bundle, camera)
    spec_d = dataclasses.asdict(m.robot)
    spec_d.pop("appearance", None)
    config = {"camera": camera, "dof": dof, "max_evals": max_evals, "min_gain": float(min_gain)}

    def input_hash():
        return hash_jsonable([files_hash(bundle, [rel for _, rel, _ in views]), spec_d,
                              [None if q is None else q.tolist() for _, _, q in views],
                              dataclasses.asdict(m.cameras[camera]), config])

    def work():

        T1, rep = refine_camera(bundle, camera, dof=dof, max_evals=max_evals)
        improved, msg = _decide(rep, float(min_gain))
        poor = failing(STAGE, {"mean_iou_after": rep["mean_iou_after"]})
        if improved and poor and not accept_poor:
            improved, msg = False, f"{poor[0].line()}: the refined pose is not applied"
        rep["applied"], rep["min_gain"] = bool(improved), float(min_gain)
        rec = m.stages.get("robot_masks")
        rendered = bool(rec and rec.status in ("done", "stale") and any(rel in rec.outputs for _, rel, _ in views))
        rep["masks_rendered_by_robot_masks_stage"] = rendered
        if improved:
            m.cameras[camera] = CameraSpec.from_camera(m.cameras[camera].camera().with_pose(T1))  # run_stage marks its readers stale
        else:
            log.warning("camera_refine: %s", msg)
        if rep["robot_poses"] == 1 and dof == 6:
            log.warning("camera_refine: %s", ONE_POSE_NOTE)
            msg += "; " + ONE_POSE_NOTE
        if rendered:
            msg += ("; note: the robot masks were rendered by the robot_masks stage from a camera, not segmented "
                    "from the frames, so this recovers that camera")
        rep["message"] = msg
        pic = bundle.reports_dir() / f"{STAGE}.png"
        _picture(bundle, camera, rep, pic)
        rep["picture"] = bundle.rel(pic)
        outputs = [bundle.write_report(STAGE, rep), bundle.rel(pic)]
        metrics = {"mean_iou_before": rep["mean_iou_before"], "mean_iou_after": rep["mean_iou_after"],
                   "translation_mm": rep["pose_change"]["translation_mm"] if improved else 0.0,
                   "rotation_deg": rep["pose_change"]["rotation_deg"] if improved else 0.0,
                   "applied": bool(improved), "frames": len(rep["frames"]), "robot_poses": rep["robot_poses"]}
        return outputs, metrics, msg

    # the stage's input is the camera it would start from: the one it wrote
    return run_stage(bundle, STAGE, input_hash(), config, work, force, input_hash_after=input_hash,
                     accept_poor=accept_poor)
