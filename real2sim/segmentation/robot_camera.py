"""The camera's pose in the robot's frame, estimated from a clip of the robot moving (intrinsics known).

One frame of an arm pins where the arm lands in the image, not the camera (docs/journey.md, "Camera refinement on
the real frame"): the joints take up most of a wrong camera. Many frames with the arm in different configurations
do pin it, since one camera has to explain all of them. :func:`camera_from_clip` alternates:

1. track the joints through the clip with the current camera (:func:`robot_track.track_robot`);
2. on up to ``frames`` well-fitted frames spread over the clip, move the camera so that the robot, at those
   frames' joints, covers their evidence best (pooled 1 - IoU, :func:`render.robot_camera.align_camera`), then
   re-fit those frames' joints from where they were with the camera there; repeat until the camera moves less than
   ``settle_mm`` / ``settle_deg`` in a round;
3. track the whole clip again with the new camera, and keep it only when the tracked fit (mean silhouette IoU over
   the frames) improves by at least ``min_gain``.

What the silhouettes cannot tell: the camera's yaw about the robot's first joint axis (the WidowX's waist). Turning
the camera about that axis and the waist by the same angle gives the same images of every link the waist moves,
and the links it does not move are in the background (plate or clip median), not in the evidence. That direction
is left out of the search: the camera keeps the start pose's yaw (a camera file's pose), or, when it came from the
coarse viewpoint search (:func:`viewpoint_search`, no pose at all), the yaw at which the start frame's waist is the
start joints' (``robot.joint_positions``, else the robot's rest pose).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from real2sim.core.camera import Camera
from real2sim.render.robot import RobotModel
from real2sim.render.robot_camera import (
    SurfacePoints,
    chamfer_align,
    first_joint_axis,
    gauge_free_basis,
    pose_change,
    with_pose,
)
from real2sim.segmentation.robot_track import (
    Fitter,
    JointSpace,
    RobotTrack,
    TrackConfig,
    track_robot,
)

log = logging.getLogger(__name__)


@dataclass
class CameraFromClipConfig:
    """Settings of the camera estimate from a clip."""

    frames: int = 12
    """Frames pooled in the camera steps (well-fitted ones, spread over the clip)."""
    rounds: int = 3
    """Rounds of tracking and camera steps at most."""
    scale: float = 0.25
    """Image scale of the silhouettes compared."""
    chamfer_iterations: int = 100
    """Least-squares evaluations of a camera step."""
    joint_evals: int = 120
    """Nelder-Mead evaluations of each pooled frame's joint re-fit after a camera step."""
    settle_mm: float = 2.0
    """The rounds stop when one moves the camera less than this and ``settle_deg``."""
    settle_deg: float = 0.2
    min_gain: float = 0.01
    """The new camera is kept only when the tracked fit (mean silhouette IoU) gains at least this."""


def _spread(track: RobotTrack, k: int, lost_iou: float) -> list[int]:
    """Up to ``k`` frames, evenly spread over the clip, among those fitted (not lost / out of view)."""
    good = [i for i, (st, v) in enumerate(zip(track.states, track.iou))
            if st in ("prompt", "tracked") and np.isfinite(v) and v >= lost_iou]
    if len(good) <= k:
        return good
    return [good[int(round(j))] for j in np.linspace(0, len(good) - 1, k)]


def _pooled(fitter: Fitter, joints, evs) -> float:
    inter = union = 0.0
    for q, ev in zip(joints, evs):
        s = fitter.sil_small(q).astype(np.float32)
        inter += float((ev.weight * np.minimum(s, ev.target)).sum())
        union += float((ev.weight * np.maximum(s, ev.target)).sum())
    return 1.0 if union < 1e-9 else inter / union


def refine_camera_on_track(camera: Camera, model: RobotModel, space: JointSpace, track: RobotTrack,
                           config: CameraFromClipConfig | None = None, track_config: TrackConfig | None = None,
                           axis=None, points: SurfacePoints | None = None) -> tuple[Camera, dict]:
    """One camera step on well-fitted frames of ``track`` (made with ``camera``): the camera and those frames'
    joints together by least squares on silhouette distances (:func:`render.robot_camera.chamfer_align`; the
    joints follow the camera, so it can leave where the joints were compensating for it), then each frame's joints
    re-fitted by render-and-compare (IoU) there.

    ``axis``: (point, direction) of the yaw the silhouettes do not see (None: the robot's first joint axis at the
    first pooled frame's joints). Returns (camera, record: pooled frames, pooled IoU before / after, pose change,
    joints of the pooled frames)."""
    cfg = config or CameraFromClipConfig()
    tcfg = track_config or TrackConfig(fit_scale=cfg.scale)
    sel = _spread(track, cfg.frames, tcfg.lost_iou)
    if len(sel) < 2:
        return camera, {"frames": sel, "stopped": "fewer than 2 fitted frames"}
    fitter = Fitter(model, camera, space, tcfg)
    evs = [track.evidence[i] for i in sel]
    Q = np.array([track.joints[i] for i in sel], float)
    point, direction = axis if axis is not None else first_joint_axis(model, Q[0])
    before = _pooled(fitter, Q, evs)
    T1, Q1, rec = chamfer_align(points or SurfacePoints(model), camera, Q, space.arm, space.lower, space.upper,
                                [ev.fg for ev in evs], [ev.ignore for ev in evs],
                                gauge_free_basis(camera.T_world_camera, point, direction), scale=cfg.scale,
                                max_iter=cfg.chamfer_iterations)
    fitter.set_pose(T1)
    mid = _pooled(fitter, Q1, evs)
    for k, ev in enumerate(evs):
        Q1[k] = fitter.fit(ev, Q1[k], cfg.joint_evals)[0]
    after = _pooled(fitter, Q1, evs)
    return with_pose(camera, T1), {"frames": [int(i) for i in sel], "pooled_iou_before": round(before, 4),
                                   "pooled_iou_camera_step": round(mid, 4), "pooled_iou_after": round(after, 4),
                                   "chamfer": rec, "camera_moved": pose_change(camera.T_world_camera, T1),
                                   "joints": Q1}


def camera_from_clip(frames: np.ndarray, camera: Camera, model: RobotModel, space: JointSpace, q_start,
                     start: int = 0, background: np.ndarray | None = None, exclude: np.ndarray | None = None,
                     prompt_mask: np.ndarray | None = None, config: CameraFromClipConfig | None = None,
                     track_config: TrackConfig | None = None) -> tuple[Camera, RobotTrack, dict]:
    """The camera pose that explains the robot through the clip best, from ``camera``'s (a rough start).

    Arguments as :func:`robot_track.track_robot`. Rounds of: track the clip with the current camera (foreground
    at the frames' noise threshold: the threshold the tracker would pick on the start frame depends on the camera
    it is given), then :func:`refine_camera_on_track`; until a round moves the camera less than ``settle_mm`` and
    ``settle_deg``. Returns (camera, the track made with it by ``track_config``, report). The camera returned is
    ``camera`` itself unless the new one's tracked fit gains at least ``min_gain`` (``report["applied"]``)."""
    cfg = config or CameraFromClipConfig()
    tcfg = track_config or TrackConfig()
    t0 = time.perf_counter()
    ecfg = TrackConfig(**{**tcfg.__dict__, "threshold_ladder": (1.0,)})
    axis = first_joint_axis(model, q_start)
    points = SurfacePoints(model)
    cam, rounds, stopped = camera, [], f"{cfg.rounds} rounds"
    for r in range(cfg.rounds):
        tr = track_robot(frames, cam, model, space, q_start, start, background, exclude, prompt_mask, ecfg)
        cam_new, rec = refine_camera_on_track(cam, model, space, tr, cfg, TrackConfig(**{**ecfg.__dict__,
                                              "fit_scale": cfg.scale}), axis, points)
        rec.pop("joints", None)
        rec.update({"round": r + 1, "iou_fitted": round(_fit(tr), 4)})
        rounds.append(rec)
        log.info("camera from clip, round %d: tracked fit %.4f; pooled IoU %.4f -> %.4f; camera moved %.1f mm "
                 "%.2f deg", r + 1, rec["iou_fitted"], rec.get("pooled_iou_before", np.nan),
                 rec.get("pooled_iou_after", np.nan), rec.get("camera_moved", {}).get("translation_mm", 0.0),
                 rec.get("camera_moved", {}).get("rotation_deg", 0.0))
        if "camera_moved" not in rec:
            stopped = rec["stopped"]
            break
        if rec["pooled_iou_after"] <= rec["pooled_iou_before"]:
            stopped = "the camera step did not improve the pooled fit"
            break
        cam = cam_new
        if rec["camera_moved"]["translation_mm"] < cfg.settle_mm and rec["camera_moved"]["rotation_deg"] < cfg.settle_deg:
            stopped = "settled"
            break
    track0 = track_robot(frames, camera, model, space, q_start, start, background, exclude, prompt_mask, tcfg)
    track1 = track_robot(frames, cam, model, space, q_start, start, background, exclude, prompt_mask, tcfg) \
        if cam is not camera else track0
    fit0, fit1 = _fit(track0), _fit(track1)
    applied = cam is not camera and fit1 >= fit0 + cfg.min_gain
    rep = {"applied": applied, "iou_fitted_before": round(fit0, 4), "iou_fitted_after": round(fit1, 4),
           "min_gain": cfg.min_gain, "pose_change": pose_change(camera.T_world_camera, cam.T_world_camera),
           "per_frame_iou_before": _rounded(track0.iou), "per_frame_iou_after": _rounded(track1.iou),
           "T_world_camera_before": np.round(camera.T_world_camera, 6).tolist(),
           "T_world_camera_after": np.round(cam.T_world_camera, 6).tolist(),
           "rounds": rounds, "stopped": stopped,
           "unobserved": "the camera's yaw about the robot's first joint axis (kept from the start pose)",
           "seconds": round(time.perf_counter() - t0, 2)}
    log.info("camera from clip: tracked fit %.4f -> %.4f, camera moved %s: %s", fit0, fit1, rep["pose_change"],
             "applied" if applied else "kept the start pose")
    return (cam, track1, rep) if applied else (camera, track0, rep)


def _fit(track: RobotTrack) -> float:
    v = [x for x, st in zip(track.iou, track.states) if np.isfinite(x) and st != "out_of_view"]
    return float(np.mean(v)) if v else 0.0


def _rounded(v) -> list:
    return [None if not np.isfinite(x) else round(float(x), 4) for x in v]


__all__ = ["CameraFromClipConfig", "camera_from_clip", "refine_camera_on_track"]
