"""One command from a fixed-camera clip to a bundle with frames, a calibrated camera, masks and a plate.

``real2sim init DIR --frames clip.mp4 --camera camera.json [--points clicks.json] [--prompts prompts.json]``
runs, in order: the capture (frames, timestamps, joint states), the camera pose by PnP from clicked points, the
entity masks from one prompt each (propagated over the clip), and the background plate made with those masks.
Every input file is read and checked before the bundle is written. Each step reports its quality numbers;
:func:`capture_scene` returns them together (also written to ``reports/capture_summary.json``).

Prompts file (JSON): ``{entity: {"frame": 0, "points": [[x, y], ...], "labels": [1, ...], "box": [x0, y0, x1, y1],
"propagate": true}}`` (all but points-or-box optional; the ``masks/prompts.json`` a bundle writes has the same meaning with
the prompt under a ``"prompt"`` key, and is accepted too). An entity named ``robot`` (or the ``--robot``'s name)
is the articulated robot: tracked through the clip by its model (see :mod:`segmentation.robot_fit`), not
propagated as a rigid mask; it needs ``--robot``.

Pixels in the prompts and points files are those of the source frames: when the camera has lens distortion the
bundle's frames are undistorted (:mod:`real2sim.capture.undistort`) and these pixels are moved with them.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from real2sim.capture import init_bundle, plate_stage
from real2sim.capture.calibrate import calibrate_extrinsics, read_correspondences
from real2sim.capture.init import source_camera
from real2sim.capture.plate import motion_only_entities, unapplied_fit_joints
from real2sim.capture.undistort import undistort_box, undistort_pixels
from real2sim.core.errors import Real2SimError
from real2sim.robots import list_robots
from real2sim.segmentation import Prompt, SegmentationError
from real2sim.segmentation.robot_fit import check_robot_prompt, robot_entity_names, robot_fit_stage
from real2sim.segmentation.stage import segment_stage

log = logging.getLogger(__name__)


class PromptFileError(Real2SimError):
    """A prompts file that cannot be read or names a bad field."""


def read_prompts(path) -> dict[str, dict]:
    """``{entity: {"frame": int, "prompt": segmentation.Prompt}}`` from a prompts file (module docstring)."""

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PromptFileError(f"{path}: cannot read the prompts ({exc}); see 'real2sim init --help'") from exc
    if not isinstance(data, dict) or not data:
        raise PromptFileError(f"{path}: expected a JSON object {{entity: {{\"points\": [[x, y]]}}}} with at least one entity")
    out = {}
    for ent, spec in data.items():
        if not isinstance(spec, dict):
            raise PromptFileError(f"{path}: entity '{ent}' must map to an object with 'points' and/or 'box'")
        body = spec.get("prompt", spec)
        unknown = (set(body) | set(spec)) - {"points", "labels", "box", "frame", "propagate", "prompt"}
        if unknown:
            raise PromptFileError(f"{path}: entity '{ent}' has unknown field(s) {sorted(unknown)}; use points, labels, "
                                  "box, frame, propagate")
        frame = spec.get("frame", body.get("frame", 0))
        if isinstance(frame, bool) or not isinstance(frame, int) or frame < 0:
            raise PromptFileError(f"{path}: entity '{ent}' field 'frame' must be a frame index >= 0, got {frame!r}")
        try:
            prompt = Prompt([tuple(p) for p in body.get("points", [])], list(body.get("labels", [])),
                            None if body.get("box") is None else tuple(body["box"]))
        except (SegmentationError, TypeError, ValueError) as exc:
            raise PromptFileError(f"{path}: entity '{ent}': {exc}") from exc
        out[ent] = {"frame": frame, "prompt": prompt}
        if "propagate" in spec:
            out[ent]["propagate"] = bool(spec["propagate"])
    return out


def capture_scene(directory, frames, camera=None, points=None, prompts=None, robot: str | None = None,
                  backend: str = "auto", propagate: bool = True, plate: bool = True, overwrite: bool = False,
                  **init_options) -> dict:
    """Capture + camera pose + masks + plate into the bundle at ``directory``. Returns the summary of numbers.

    ``points``: clicked pixel <-> world pairs for PnP (see :func:`real2sim.capture.calibrate.read_correspondences`);
    ``prompts``: a prompts file or a dict as :func:`read_prompts` returns; ``plate``: make the background plate
    (done when the clip has more than one frame or there are masks). ``init_options`` go to
    :func:`capture.init_bundle` (``stride``, ``max_frames``, ``episode``, ``name``).

    A robot fit under its quality gate (fitted against the clip's median, which holds the robot where it lingers)
    is fitted once more against the plate its silhouettes made, and the plate made again from that fit (its masks
    when it passes; docs/capture.md, *A fit under its gate and the plate*).
    """

    if points is not None:
        read_correspondences(Path(points))  # a bad file is refused before anything is written
    if prompts is not None and not isinstance(prompts, dict):
        prompts = read_prompts(prompts)
    if prompts and not robot:
        named = sorted(set(prompts) & robot_entity_names())
        if named:  # refused before the bundle is touched
            raise PromptFileError(f"the prompt for entity '{named[0]}' names the robot, but no robot was given; add "
                                  f"--robot NAME (real2sim init DIR --frames ... --robot {list_robots()[-1]}; robots: "
                                  f"{', '.join(list_robots())}), or rename the entity if it is an object")
    if points is not None and camera is None:
        raise Real2SimError("--points needs the camera intrinsics: give --camera camera.json (see docs/capture.md)")
    bundle = init_bundle(directory, frames, camera=camera, robot=robot, overwrite=overwrite, **init_options)
    n = len(bundle.manifest.capture.frames)
    summary: dict = {"capture": dict(bundle.manifest.stages["capture"].metrics)}
    src_cam = source_camera(bundle)
    if src_cam is not None and prompts:
        prompts = {e: {**p, "prompt": undistort_prompt(p["prompt"], src_cam)} for e, p in prompts.items()}
    if points is not None:
        rep = calibrate_extrinsics(bundle, Path(points), source=src_cam)
        summary["calibration"] = {k: rep[k] for k in ("points", "rms_px", "max_px")}
    if prompts:
        summary["masks"] = _segment(bundle, prompts, backend, propagate)
    if plate and (n > 1 or prompts):
        summary["plate"] = _plate(bundle)
        if motion_only_entities(bundle):
            summary.setdefault("masks", {})["robot"] = _robot_against_plate(bundle)
        elif unapplied_fit_joints(bundle):
            summary.setdefault("masks", {})["robot"] = _refit_against_plate(bundle)
            summary["plate"] = _plate(bundle)  # from the new fit: its masks, or its silhouettes if still under the gate
    rel = bundle.write_report("capture_summary", summary)
    summary["report"] = rel
    return summary


def undistort_prompt(prompt: Prompt, cam) -> Prompt:
    """``prompt`` in pixels of the distorted frames of ``cam`` -> in pixels of the undistorted ones (a box: the box
    around its moved corners)."""
    points = [tuple(p) for p in undistort_pixels(prompt.points, cam)] if prompt.points else []
    return Prompt(points, list(prompt.labels), None if prompt.box is None else undistort_box(prompt.box, cam))


def _segment(bundle, prompts: dict, backend: str, propagate: bool) -> dict:

    for ent in prompts:
        if bundle.manifest.capture.frames and not 0 <= prompts[ent]["frame"] < len(bundle.manifest.capture.frames):
            raise PromptFileError(f"prompt for '{ent}' is on frame {prompts[ent]['frame']}; the clip has frames "
                                  f"0..{len(bundle.manifest.capture.frames) - 1}")
    segment_stage(bundle, prompts, backend=backend, propagate_masks=propagate)
    out: dict = {}
    seg = bundle.manifest.stages.get("segment")
    if any(not check_robot_prompt(bundle, e) for e in prompts) and seg is not None:
        rep = json.loads((bundle.reports_dir() / "segment.json").read_text())
        out = {"backend": seg.metrics["backend"],
               "entities": {e: {k: s[k] for k in ("states", "frames_at_prompted_pose", "flagged_frames", "area_px_min",
                                                 "area_px_max")} for e, s in rep["entities"].items()},
               "picture": rep["picture"]}
    if any(check_robot_prompt(bundle, e) for e in prompts):
        out["robot"] = _robot_summary(bundle)
    return out


def _robot_summary(bundle) -> dict:
    rep = json.loads((bundle.reports_dir() / "robot_fit.json").read_text())
    return {**{k: rep[k] for k in ("method", "camera_pose", "iou_fitted", "iou_min", "lost_frames",
                                   "out_of_view_frames", "motion_explained", "seconds_per_frame", "picture")},
            "applied": rep.get("applied", True)}


def _robot_against_plate(bundle) -> dict:
    """The robot's motion masks again, now against the plate (made without them): the clip's median they were
    first made against is the robot itself where it lingers."""
    robot_fit_stage(bundle)
    return _robot_summary(bundle)


def _refit_against_plate(bundle) -> dict:
    """A fit under its quality gate once more, against the plate its silhouettes made (the clip's median it was
    first fitted against holds the robot where it lingers); as 'real2sim build' would. Its summary keeps the first
    fit's number (``first_fit_iou``)."""
    first = bundle.manifest.stages["robot_fit"].metrics.get("iou_fitted")
    robot_fit_stage(bundle)
    return {**_robot_summary(bundle), "first_fit_iou": first}


def _plate(bundle) -> dict:

    rec, _ = plate_stage(bundle)
    rep = json.loads((bundle.reports_dir() / "plate.json").read_text())
    out = {k: rec.metrics[k] for k in ("coverage_many", "coverage_few", "inpainted_fraction")}
    out["picture"] = rep["picture"]
    if rep.get("warnings"):
        out["warnings"] = rep["warnings"]
    return out
