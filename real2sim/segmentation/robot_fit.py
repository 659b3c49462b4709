"""The ``robot_fit`` stage: the robot found in every frame of the bundle (joints and ``masks/<frame>/robot.png``).

Three ways, chosen from what the bundle knows (:mod:`segmentation.robot_track` does the work):

- the frames carry **recorded joints** (the capture read them, e.g. from a LeRobot episode): the robot model is
  rendered at them (``method: recorded``);
- the **camera pose is known** (a camera file with a pose, ``--points`` calibration or ``refine-camera``): the
  joints are fitted frame by frame by render-and-compare, seeded by the previous frame, and written into
  ``capture.frames[i].joint_positions`` (``method: model``);
- the camera pose is **unknown** (no camera, a camera file without a pose) or the robot model cannot be made to
  match the frames from it: everything that moves and is not a prompted object (``method: motion``; no joints).

The other entities' masks (``masks/<frame>/<entity>.png``) are excluded from the robot's evidence. The background
is the bundle's plate when it has one, else the clip's own median without the robot. Reports
``reports/robot_fit.json`` (per-frame state, silhouette IoU with the frame's evidence, joints) and
``reports/robot_fit.png`` (a strip of frames: the mask tinted, the fitted silhouette outlined).

:func:`fit_robot_joints` is the single-frame fit the Bridge journey uses against a person-made plate.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.camera import Camera
from real2sim.core.errors import BundleError, SegmentationError
from real2sim.core.gates import failing
from real2sim.core.imaging import iou, read_gray, read_mask, read_rgb, write_mask, write_rgb
from real2sim.core.pictures import tiles
from real2sim.core.stages import files_hash, run_stage
from real2sim.render.robot import link_id_image, load_robot_model
from real2sim.robots import get_robot, list_robots, robot_for_spec
from real2sim.segmentation.core import Prompt, segment
from real2sim.segmentation.robot_track import (
    RobotTrack,
    TrackConfig,
    joint_space,
    motion_masks,
    render_recorded,
    track_robot,
)

log = logging.getLogger(__name__)


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


SETTLED_IOU = 0.98
"""A re-fit whose masks keep this IoU with the written ones on average over the frames (or move less than half its
own misfit) keeps the previous fit."""

MASK_STATE = {"prompt": "prompt", "tracked": "moved", "recorded": "moved", "motion": "moved",
              "out_of_view": "occluded", "lost": "lost"}
"""Robot track state -> ``capture.mask_states`` (whose vocabulary is the objects'): the robot moves; out of view it
is ``occluded`` (an empty mask); ``lost`` masks are wide guesses."""


def robot_entity_names(robot_name=None) -> set[str]:
    """Entity names that mean the robot: ``robot``, and the bundle robot's name and aliases (every registered
    robot's when ``robot_name`` is None)."""
    names = {"robot"}
    for r in ([robot_name] if robot_name else list_robots()):
        rd = get_robot(r)
        names |= {rd.name, *rd.aliases}
    return names


def check_robot_prompt(bundle: Bundle, entity: str) -> bool:
    """Whether ``entity`` names the robot; a robot prompt in a bundle without a robot is an error that says how
    to add one."""
    m = bundle.manifest
    if m.robot is not None:
        return entity in robot_entity_names(robot_for_spec(m.robot, bundle.root))
    if entity in robot_entity_names():
        raise SegmentationError(
            f"the prompt for entity '{entity}' names the robot, but the bundle {bundle.root} has no robot; "
            f"create it with one: 'real2sim init {bundle.root} --frames PATH --robot NAME' (robots: "
            f"{', '.join(list_robots())}), or rename the entity if it is an object")
    return False


def camera_pose_known(bundle: Bundle, camera: str) -> tuple[bool, str]:
    """(known, why not): a camera whose pose was never given (no camera file, or one without a pose: the loader
    puts it at the world origin, the identity) cannot place the robot in the image."""
    spec = bundle.manifest.cameras.get(camera)
    if spec is None:
        return False, f"the bundle has no camera '{camera}' (init without --camera)"
    if np.allclose(np.asarray(spec.T_world_camera, float), np.eye(4)):
        return False, (f"camera '{camera}' has no pose (its camera file gave intrinsics only); calibrate it with "
                       "'real2sim init ... --points clicks.json' or 'real2sim calibrate'")
    return True, ""


def can_track(bundle: Bundle) -> bool:
    """Whether the robot can be told from the background: the bundle has a plate, or frames to make one from."""
    m = bundle.manifest
    return bool(m.capture.plate and bundle.path(m.capture.plate).is_file()) or len(m.capture.frames) > 1


def _exclusions(bundle: Bundle, frames: list[int], shape) -> np.ndarray:
    """``(n, h, w) bool`` the other entities' masks on the given frames."""
    out = np.zeros((len(frames), *shape), bool)
    masks = bundle.manifest.capture.masks
    for k, i in enumerate(frames):
        for ent, rel in masks.get(f"{i:06d}", {}).items():
            if ent != "robot" and bundle.path(rel).is_file():
                out[k] |= read_mask(bundle.path(rel), shape)
    return out


def _recorded(bundle: Bundle, dof: int) -> bool:
    """Whether the frames' joints were recorded with them (the capture read joint states), not fitted."""
    m = bundle.manifest
    cap = m.stages.get("capture")
    return bool(cap and cap.metrics.get("joint_states")) and all(
        f.joint_positions is not None and len(f.joint_positions) == dof for f in m.capture.frames)


def robot_fit_stage(bundle: Bundle, frame: int | None = None, force: bool = False,
                    prompt: tuple[int, Prompt] | None = None, config: TrackConfig | None = None,
                    accept_poor: bool = False):
    """Find the robot in every frame (``frame``: in that frame only); returns (record, ran).

    Quality gate (:mod:`real2sim.core.gates`, ``robot_fit``): a fit whose silhouette IoU misses the bar writes
    its report and picture but neither joints nor masks (the record is 'poor', not applied) unless ``accept_poor``.

    ``prompt``: (frame, :class:`Prompt`) a box or clicks on the robot: tracking starts on that frame, and the
    evidence the prompt's mask touches is the robot's there; without one, the last run's prompt is kept. See the module docstring for the three ways and the outputs."""
    m = bundle.manifest
    if m.robot is None:
        raise BundleError(f"{bundle.root}: the bundle has no robot; create it with 'real2sim init DIR --robot widowx'")
    n_all = len(m.capture.frames)
    if n_all == 0:
        raise BundleError(f"{bundle.root}: no frames; add them with 'real2sim init DIR --frames PATH'")
    if frame is not None and not 0 <= frame < n_all:
        raise BundleError(f"{bundle.root}: no frame {frame} (the bundle has {n_all}); "
                          "add frames with 'real2sim init DIR --frames PATH'")
    if prompt is not None and not 0 <= prompt[0] < n_all:
        raise BundleError(f"{bundle.root}: the robot prompt is on frame {prompt[0]}; the bundle has frames 0..{n_all - 1}")
    prev = m.stages.get("robot_fit")
    if prompt is None and prev is not None and prev.config.get("prompt") and frame is None:
        f, p = prev.config["prompt"]  # the robot was prompted before (segment): a re-run ('build') keeps the prompt
        prompt = (int(f), Prompt.from_dict(p))
    idx = list(range(n_all)) if frame is None else [frame]
    cams = {m.capture.frames[i].camera for i in idx}
    if len(cams) > 1:
        raise BundleError(f"{bundle.root}: the frames come from cameras {sorted(cams)}; fit the robot per camera "
                          "with --frame, or capture one camera per bundle")
    cam_name = cams.pop()
    plate = m.capture.plate if m.capture.plate and bundle.path(m.capture.plate).is_file() else None
    if plate is None and len(idx) < 2:
        raise BundleError(f"{bundle.root}: no background plate; run 'real2sim build {bundle.root}' first "
                          "(the robot's pixels are where the frame differs from the plate)")
    start = idx.index(prompt[0]) if prompt is not None and prompt[0] in idx else 0
    fr = [m.capture.frames[i] for i in idx]
    q0 = fr[start].joint_positions or m.robot.joint_positions or None
    others = sorted({rel for i in idx for e, rel in m.capture.masks.get(f"{i:06d}", {}).items() if e != "robot"})
    # one frame: time for the fit at half size (the gripper's fingers are a few pixels wide at a quarter)
    cfg = config or (TrackConfig(fit_scale=0.5) if len(idx) == 1 else TrackConfig())
    config_rec = {"frame": frame, "prompt": None if prompt is None else [prompt[0], prompt[1].to_dict()],
                  "track": cfg.__dict__}
    input_hash = hash_jsonable([files_hash(bundle, [f.image for f in fr] + ([plate] if plate else []) + others),
                                q0, m.robot.name, m.robot.base_pose.__dict__, config_rec,
                                m.cameras[cam_name].T_world_camera if cam_name in m.cameras else None,
                                _recorded(bundle, robot_for_spec(m.robot, bundle.root).dof)])

    def work():
        frames = np.stack([read_rgb(bundle.path(f.image)) for f in fr])
        bg = read_rgb(bundle.path(plate)) if plate else None
        track, rep = _find_robot(bundle, idx, frames, bg, cam_name, q0, start, prompt, cfg)
        _trust_model_where_plate_is_unsure(bundle, track, rep)
        metrics = {k: rep[k] for k in ("method", "frames", "iou_start", "iou_fitted", "iou_min", "lost_frames",
                                       "motion_explained", "seconds_per_frame")}
        apply = accept_poor or not failing("robot_fit", metrics)
        previous = m.stages.get("robot_fit")
        if previous is not None and _repeats_previous(bundle, idx, track, cam_name, previous.metrics, apply):
            # a re-fit (after the plate changed) that lands where the last fit did: keep it, so the
            # plate <-> robot loop of 'real2sim build' ends here
            log.info("robot_fit: settled (moved less than the fit's own misfit); keeping the previous fit")
            return list(previous.outputs), {k: v for k, v in previous.metrics.items() if k != "seconds"}, \
                previous.message
        outputs = _write_track(bundle, idx, track) if apply else []
        pic = bundle.reports_dir() / "robot_fit.png"
        write_rgb(pic, track_picture(frames, track, idx))
        rep["picture"], rep["applied"] = bundle.rel(pic), apply
        report = bundle.write_report("robot_fit", rep)
        return outputs + [report, bundle.rel(pic)], {**metrics, "applied": apply}, _message(rep)

    return run_stage(bundle, "robot_fit", input_hash, config_rec, work, force, accept_poor=accept_poor)


def _find_robot(bundle, idx, frames, bg, cam_name, q0, start, prompt, cfg) -> tuple[RobotTrack, dict]:
    """The track (recorded, model or motion) and the report's numbers."""
    m = bundle.manifest
    rdef = robot_for_spec(m.robot, bundle.root)
    excl = _exclusions(bundle, idx, frames.shape[1:3])
    known, why = camera_pose_known(bundle, cam_name)
    pmask = _prompt_mask(frames[start], prompt, bg, idx[start])
    rep: dict = {"camera_pose": "known" if known else f"unknown: {why}"}
    seen = _plate_seen(bundle, frames.shape[1:3]) if bg is not None else None
    if not known:
        track = motion_masks(frames, bg, excl, cfg, reason=f"camera pose unknown ({why})", background_seen=seen)
        return track, _report(track, idx, None, rep)
    model = load_robot_model(m.robot, bundle.root)
    space = joint_space(rdef, model)
    camera = m.cameras[cam_name].camera()
    if _recorded(bundle, rdef.dof):
        track = render_recorded(frames, camera, model, space, np.array([m.capture.frames[i].joint_positions for i in idx]),
                                bg, excl, cfg)
        return track, _report(track, idx, None, rep)
    q_start = np.asarray(q0 if q0 is not None else model.default_q, float)
    track = track_robot(frames, camera, model, space, q_start, start, bg, excl, pmask, cfg)
    if track.states[start] == "out_of_view":
        reason = (f"frame {idx[start]} from camera '{cam_name}' shows too few pixels that differ from the background "
                  "for the robot model to be fitted (the robot is out of view there, or its colours are the "
                  "background's); prompt a frame where the robot stands out")
    elif track.states[start] == "lost" or not np.isfinite(track.iou[start]) or track.iou[start] < cfg.lost_iou:
        reason = (f"the robot model does not match frame {idx[start]} from camera '{cam_name}' (best silhouette IoU "
                  f"{track.iou[start]:.2f}); its pose is probably wrong for this clip: calibrate it "
                  "('real2sim init ... --points', 'real2sim refine-camera')")
    else:
        reason = None
    if reason is not None:
        log.warning("robot_fit: %s; falling back to motion segmentation", reason)
        rep["camera_pose"] = f"does not fit: {reason}"
        fallback = motion_masks(frames, bg, excl, cfg, reason=reason, background_seen=seen)
        return fallback, _report(fallback, idx, None, rep)
    return track, _report(track, idx, q_start, rep)


def _prompt_mask(frame: np.ndarray, prompt, bg, frame_index: int) -> np.ndarray | None:
    """The robot's prompted mask on the start frame, or None: no prompt, or one that gives no mask (a box over the
    whole image, where the robot fills the view) is only a hint, so the robot is then found without it."""
    if prompt is None:
        return None
    try:
        return segment(frame, prompt[1], plate=bg)
    except SegmentationError as exc:
        log.warning("robot_fit: the robot's prompt on frame %d gives no mask (%s); the robot is found without it",
                    frame_index, exc)
        return None


def _plate_confidence(bundle: Bundle, shape: tuple[int, int]) -> np.ndarray | None:
    """The bundle plate's confidence map (``(h, w) uint8``, ``plate.py`` codes), or None without one of that size."""
    rel = bundle.manifest.capture.plate_confidence
    if not rel or not bundle.path(rel).is_file():
        return None
    conf = read_gray(bundle.path(rel))
    return conf if conf.shape == tuple(shape) else None


def _plate_seen(bundle: Bundle, shape: tuple[int, int]) -> np.ndarray | None:
    """``(h, w) bool`` where the bundle's plate was seen in some frame (its confidence > 0, not inpainted), or None."""
    conf = _plate_confidence(bundle, shape)
    return None if conf is None else conf > 0


def _report(track: RobotTrack, idx: list[int], q_start, rep: dict) -> dict:
    n = len(idx)
    ok = [v for v, st in zip(track.iou, track.states) if np.isfinite(v)]
    rep.update({
        "method": track.method, "frames": n,
        "iou_start": None if track.iou_start is None else round(float(track.iou_start), 4),
        "iou_fitted": round(float(np.mean(ok)), 4) if ok else None,
        "iou_min": round(float(np.min(ok)), 4) if ok else None,
        "lost_frames": [idx[i] for i, st in enumerate(track.states) if st == "lost"],
        "out_of_view_frames": [idx[i] for i, st in enumerate(track.states) if st == "out_of_view"],
        "seconds_per_frame": round(track.seconds / max(1, n), 3),
        "motion_explained": None if track.motion_explained_clip is None else round(track.motion_explained_clip, 4),
        "notes": list(track.notes),
        "per_frame": [{"frame": idx[i], "state": track.states[i],
                       "iou": None if not np.isfinite(track.iou[i]) else round(float(track.iou[i]), 4),
                       "mask_px": int(track.masks[i].sum()), "evaluations": int(track.evaluations[i]),
                       "motion_explained": track.motion_explained[i] if track.motion_explained else None,
                       **({"joints": [round(float(v), 5) for v in track.joints[i]]} if track.joints.shape[1] else {})}
                      for i in range(n)]})
    rep["iou_default"] = rep["iou_start"]  # the name the single-frame fit reported
    if q_start is not None and n == 1:
        rep["q_default"] = [round(float(v), 4) for v in q_start]
        rep["q_fitted"] = [round(float(v), 4) for v in track.joints[0]]
    return rep


def _write_track(bundle: Bundle, idx: list[int], track: RobotTrack) -> list[str]:
    """Joints into the frames (model fits; frame 0's also the robot's start pose), masks and states into the
    capture. Returns the written paths."""
    m = bundle.manifest
    outputs = []
    for k, i in enumerate(idx):
        key = f"{i:06d}"
        if track.method == "model":
            m.capture.frames[i].joint_positions = [round(float(v), 6) for v in track.joints[k]]
            if i == 0:
                m.robot.joint_positions = list(m.capture.frames[i].joint_positions)
        rel = f"masks/{key}/robot.png"
        write_mask(bundle.path(rel), track.masks[k])
        m.capture.masks.setdefault(key, {})["robot"] = rel
        m.capture.mask_states.setdefault(key, {})["robot"] = MASK_STATE[track.states[k]]
        outputs.append(rel)
    return outputs


def _trust_model_where_plate_is_unsure(bundle: Bundle, track: RobotTrack, rep: dict) -> None:
    """Add the fitted silhouette to the masks where the plate was not seen as background in many frames
    (``plate_confidence`` < 255: a one-frame plate is the frame itself, robot parts an earlier mask missed
    included, so the difference cannot show them; the plate made next, without the whole silhouette, can)."""
    conf = None if track.method == "motion" else _plate_confidence(bundle, track.masks[0].shape)
    if conf is None or not (conf < 255).any():
        return
    unsure = conf < 255
    for k, st in enumerate(track.states):
        if st not in ("lost", "out_of_view"):
            track.masks[k] = track.masks[k] | (track.silhouettes[k] & unsure)
    rep["notes"] = list(rep.get("notes", [])) + [
        f"the plate is unsure in {100 * unsure.mean():.0f}% of the image (seen in few frames or inpainted): the "
        "fitted silhouette is part of the robot mask there"]


def _repeats_previous(bundle: Bundle, idx: list[int], track: RobotTrack, cam_name: str, previous: dict,
                      apply: bool) -> bool:
    """Whether ``track`` lands where the last fit (its record's ``previous`` metrics) did: an applied one by its
    written masks (:func:`_settled`); one under the gate, not applied, by the silhouettes of its report's joints,
    which the plate drew (:func:`_repeats_unapplied`), when this fit is not applied either."""
    if previous.get("applied") is False:
        return not apply and _repeats_unapplied(bundle, idx, track, cam_name)
    return _settled(bundle, idx, track)


def _settled(bundle: Bundle, idx: list[int], track: RobotTrack) -> bool:
    """Whether ``track`` repeats what the bundle holds: its robot masks' mean IoU with the written ones is at least
    :func:`_settle_bar`. The joints are not compared: a redundant arm's can wander where its image does not (a
    Google Robot clip's 11 joints moved up to 0.09 rad a round with its masks at mean IoU 0.97-0.98, its fit at
    0.86, and 'build' never settled in 4 rounds)."""
    m = bundle.manifest
    ious = []
    for k, i in enumerate(idx):
        rel = m.capture.masks.get(f"{i:06d}", {}).get("robot")
        if not rel or not bundle.path(rel).is_file():
            return False
        if track.method == "model" and m.capture.frames[i].joint_positions is None:
            return False
        ious.append(iou(track.masks[k], read_mask(bundle.path(rel))))
        log.debug("robot_fit: frame %d mask IoU with the last fit %.4f", i, ious[-1])
    return float(np.mean(ious)) >= _settle_bar(track)


def _settle_bar(track: RobotTrack) -> float:
    """The mean IoU with the last fit at which a re-fit counts as the same: ``SETTLED_IOU``, or less when the fit
    itself is less sure: it moved less than half its own misfit (1 - its mean silhouette IoU)."""
    fitted = [v for v in track.iou if np.isfinite(v)]
    misfit = 1.0 - float(np.mean(fitted)) if fitted else 0.0
    return min(SETTLED_IOU, 1.0 - 0.5 * misfit)


def _repeats_unapplied(bundle: Bundle, idx: list[int], track: RobotTrack, cam_name: str) -> bool:
    """Whether a model fit repeats the last one, which was under the gate and not applied (its joints are in its
    report only): the silhouettes at both joints agree as :func:`_settled` asks of masks."""
    report = bundle.read_report("robot_fit")
    m = bundle.manifest
    if track.method != "model" or report is None or cam_name not in m.cameras:
        return False
    last = {p["frame"]: p.get("joints") for p in report.get("per_frame", [])}
    model = load_robot_model(m.robot, bundle.root)
    camera = m.cameras[cam_name].camera()
    ious = []
    for k, i in enumerate(idx):
        q = last.get(i)
        if q is None or len(q) != track.joints.shape[1]:
            return False
        ious.append(iou(link_id_image(model, camera, np.asarray(q, float))[0] >= 0,
                        link_id_image(model, camera, track.joints[k])[0] >= 0))
    return float(np.mean(ious)) >= _settle_bar(track)


def _message(rep: dict) -> str:
    msg = []
    if rep["method"] == "motion":
        msg.append("robot masks by motion segmentation (" + rep["camera_pose"] + ")")
    if rep["lost_frames"]:
        msg.append(f"robot lost in frames {rep['lost_frames']} (wide masks there); prompt the robot on one of them "
                   "or check for occluders")
    if rep["method"] == "model" and rep["iou_start"] is not None and rep["iou_fitted"] is not None \
            and rep["frames"] == 1 and rep["iou_fitted"] <= rep["iou_start"]:
        msg.append("the fit did not beat the start pose; check the plate and the camera")
    return "; ".join(msg)


def track_picture(frames: np.ndarray, track: RobotTrack, idx: list[int], count: int = 8) -> np.ndarray:
    """``(H, W, 3) uint8`` up to ``count`` evenly spaced frames: the robot mask tinted magenta, the fitted
    silhouette outlined green, each labelled with frame, state and IoU."""
    import cv2

    sel = np.unique(np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int))
    out, labels = [], []
    for i in sel:
        img = frames[i].astype(np.float32)
        m = track.masks[i]
        img[m] = img[m] * 0.5 + np.array([255, 0, 255], np.float32) * 0.5
        img = img.astype(np.uint8)
        cnts, _ = cv2.findContours(track.silhouettes[i].astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        cv2.drawContours(img, cnts, -1, (0, 255, 0), max(1, frames.shape[2] // 320))
        out.append(img)
        v = track.iou[i]
        labels.append(f"{idx[i]} {track.states[i]}" + ("" if not np.isfinite(v) else f" IoU {v:.2f}"))
    return tiles(out, labels, cols=min(4, len(out)), tile_width=320)
