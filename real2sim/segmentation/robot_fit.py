"""The ``robot_fit`` stage: a frame's robot joints fitted to the robot's pixels (frame minus plate).

For clips without recorded joint states. The robot's pixels are where the frame differs
from the background plate near the robot's silhouette, objects' masks excluded; the arm
joints are fitted by rendering the robot's silhouette (see
:func:`fit_robot_joints`). Writes the joints into the frame (and the
robot's start pose when it is frame 0) and ``masks/<frame>/robot.png``.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.camera import Camera
from real2sim.core.errors import BundleError
from real2sim.core.imaging import iou, read_mask, read_rgb, write_mask
from real2sim.core.stages import files_hash, run_stage
from real2sim.render.robot import link_id_image, load_robot_model

log = logging.getLogger(__name__)

SETTLED_RAD = 0.005
"""A re-fit whose joints move less than this (and whose mask keeps IoU > SETTLED_IOU) keeps the previous fit."""
SETTLED_IOU = 0.98


def fit_robot_joints(model, camera, img: np.ndarray, plate: np.ndarray, exclude: np.ndarray, q0,
                     scale: float = 0.25, max_evals: int = 150,
                     fit_joints=(0, 1, 2, 4, 5)) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit the WidowX arm joints so that its rendered silhouette covers the robot in ``img``.

    The robot's pixels are where ``img`` differs from ``plate`` (the person-made plate), in the connected
    regions near the robot's silhouette at ``q0``; ``exclude`` (the cubes) is removed. A waist sweep, then
    Nelder-Mead on 1 - IoU at ``scale`` resolution over ``fit_joints`` (default: the WidowX's waist, shoulder,
    elbow, wrist angle and wrist rotation; fingers and forearm roll stay at ``q0``). Returns (q, robot mask (h, w)
    bool, report).
    """
    import cv2
    from scipy.optimize import minimize

    t0 = time.perf_counter()
    h, w = img.shape[:2]
    q0 = np.asarray(q0, float)
    sil0 = link_id_image(model, camera, q0)[0] >= 0
    near = cv2.dilate(sil0.astype(np.uint8), np.ones((121, 121), np.uint8)) > 0
    diff = np.abs(img.astype(int) - plate.astype(int)).max(-1)
    fg = cv2.morphologyEx((diff > 40).astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    fg[exclude] = 0
    n, lab, st, _ = cv2.connectedComponentsWithStats(fg)
    keep = [i for i in range(1, n) if st[i, cv2.CC_STAT_AREA] > 200 and (near & (lab == i)).sum() > 0.5 * st[i, 4]]
    raw = np.isin(lab, keep)
    K = camera.K.copy()
    K[:2] *= scale
    small = Camera(int(round(w * scale)), int(round(h * scale)), K, camera.T_world_camera)
    target = cv2.resize(raw.astype(np.uint8), (small.width, small.height), interpolation=cv2.INTER_AREA) > 0
    idx = list(fit_joints)

    def loss(x):
        q = q0.copy()
        q[idx] = x
        m = link_id_image(model, small, q)[0] >= 0
        return 1.0 - (m & target).sum() / max((m | target).sum(), 1)

    start = min((q0[idx] + np.eye(len(idx))[0] * dw for dw in np.linspace(-0.4, 0.4, 9)), key=loss)
    res = minimize(loss, start, method="Nelder-Mead", options={"maxfev": max_evals, "xatol": 1e-3, "fatol": 1e-4})
    q = q0.copy()
    q[idx] = res.x
    sil = link_id_image(model, camera, q)[0] >= 0
    # The plate difference also holds changes that are not the robot (the person-made plate differs along the
    # table edge, which touches the gripper): the robot mask is the difference within 7 px of the fitted silhouette.
    mask = raw & (cv2.dilate(sil.astype(np.uint8), np.ones((15, 15), np.uint8)) > 0)
    rep = {"q_default": [round(float(v), 4) for v in q0], "q_fitted": [round(float(v), 4) for v in q],
           "iou_default": round(iou(sil0, mask), 4), "iou_fitted": round(iou(sil, mask), 4),
           "iou_fitted_vs_raw_difference": round(iou(sil, raw), 4), "evaluations": int(res.nfev),
           "seconds": round(time.perf_counter() - t0, 2)}
    return q, mask, rep


def robot_fit_stage(bundle: Bundle, frame: int = 0, force: bool = False):
    """Fit the robot's joints in ``frame``; returns (record, ran)."""
    m = bundle.manifest
    if m.robot is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; create it with 'real2sim init DIR --robot widowx'")
    if not 0 <= frame < len(m.capture.frames):
        raise BundleError(f"{bundle.root}: no frame {frame} (the bundle has {len(m.capture.frames)}); "
                          "add frames with 'real2sim init DIR --frames PATH'")
    if not m.capture.plate:
        raise BundleError(f"{bundle.root}: no background plate; run 'real2sim build {bundle.root}' first "
                          "(the robot's pixels are where the frame differs from the plate)")
    fr = m.capture.frames[frame]
    key = f"{frame:06d}"
    objects = {e: p for e, p in m.capture.masks.get(key, {}).items() if e in m.objects}
    q0 = fr.joint_positions or m.robot.joint_positions or None
    inputs = [fr.image, m.capture.plate, *objects.values()]
    input_hash = hash_jsonable([files_hash(bundle, inputs), q0, m.robot.name, m.cameras[fr.camera].T_world_camera])

    def work():
        model = load_robot_model(m.robot)
        q_start = np.asarray(q0 if q0 is not None else model.default_q, float)
        img, plate = read_rgb(bundle.path(fr.image)), read_rgb(bundle.path(m.capture.plate))
        exclude = np.zeros(img.shape[:2], bool)
        for rel in objects.values():
            exclude |= read_mask(bundle.path(rel))
        q, mask, rep = fit_robot_joints(model, m.cameras[fr.camera].camera(), img, plate, exclude, q_start)
        previous = m.stages.get("robot_fit")
        old_rel = m.capture.masks.get(key, {}).get("robot")
        if (previous is not None and q0 is not None and old_rel and bundle.path(old_rel).is_file()
                and np.abs(q - q_start).max() < SETTLED_RAD and iou(mask, read_mask(bundle.path(old_rel))) > SETTLED_IOU):
            # a re-fit (after the plate changed) that lands where the last fit did: keep it, so the
            # plate <-> robot loop of 'real2sim build' ends here
            log.info("robot_fit: settled (joints moved < %.3f rad); keeping the previous fit", SETTLED_RAD)
            return list(previous.outputs), {k: v for k, v in previous.metrics.items() if k != "seconds"}, \
                previous.message
        fr.joint_positions = [round(float(v), 6) for v in q]
        if frame == 0:
            m.robot.joint_positions = list(fr.joint_positions)
        rel = f"masks/{key}/robot.png"
        write_mask(bundle.path(rel), mask)
        m.capture.masks.setdefault(key, {})["robot"] = rel
        report = bundle.write_report("robot_fit", {"frame": frame, **rep})
        msg = "" if rep["iou_fitted"] > rep["iou_default"] else "the fit did not beat the start pose; check the plate and the camera"
        return [rel, report], {"iou_start": rep["iou_default"], "iou_fitted": rep["iou_fitted"]}, msg

    return run_stage(bundle, "robot_fit", input_hash, {"frame": frame}, work, force)
