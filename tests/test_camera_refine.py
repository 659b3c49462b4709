"""Camera extrinsics refined by aligning the robot rendered at the frames' joint states to its mask."""
from __future__ import annotations

import json

import numpy as np
import pytest

from real2sim import Bundle, BundleError
from real2sim.capture.camera_refine import _perturb, pose_change, refine_camera_stage
from real2sim.core.manifest import CameraSpec, FrameSpec


def _add_frames(b):
    from real2sim.core.bundle import atomic_write_bytes
    from real2sim.core.imaging import png_bytes as _png

    cam = b.manifest.cameras["main"]
    frame = np.zeros((cam.height, cam.width, 3), np.uint8)
    for i in range(2):
        atomic_write_bytes(b.path(f"capture/frames/{i:06d}.png"), _png(frame))
    q0 = [0.0, -0.2, 0.3, 0.0, 0.9, 0.0, 0.037, -0.037]
    q1 = [0.8, -0.3, 0.3, 0.0, 0.5, 0.0, 0.02, -0.02]  # waist turned
    b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png", 0.0, "main", q0),
                                 FrameSpec("capture/frames/000001.png", 0.2, "main", q1)]
    b.save()


@pytest.mark.render
def test_recovers_a_perturbed_camera(exportable_bundle):
    from real2sim.engines import get_exporter
    from real2sim.segmentation.robot_masks import robot_masks_stage

    b = exportable_bundle
    _add_frames(b)
    get_exporter("mjcf").export(b)
    T_true = np.array(b.manifest.cameras["main"].T_world_camera, float)
    robot_masks_stage(b)  # the masks the true camera sees
    # ~1.5 cm and ~1.5 deg off, in a direction mixing all six
    x = np.array([0.009, -0.008, 0.009, *np.radians([0.9, -0.8, 0.9])])
    T_bad = _perturb(T_true, x)
    off = pose_change(T_true, T_bad)
    assert 14 < off["translation_mm"] < 16 and 1.4 < off["rotation_deg"] < 1.6
    cam = b.manifest.cameras["main"].camera()
    cam.T_world_camera = T_bad
    b.manifest.cameras["main"] = CameraSpec.from_camera(cam)
    b.save()

    rec, ran = refine_camera_stage(b)
    assert ran and rec.status == "done" and rec.metrics["applied"]
    b = Bundle.load(b.root)
    err = pose_change(T_true, b.manifest.cameras["main"].T_world_camera)
    rep = json.loads(b.path("reports/camera_refine.json").read_text())
    print("recovered error", err, "iou", rep["iou_before"], "->", rep["iou_after"], rep["seconds"], "s")
    assert err["translation_mm"] < 3.0 and err["rotation_deg"] < 0.2, err  # measured: 1.0 mm, 0.05 deg
    assert rep["mean_iou_after"] > rep["mean_iou_before"] + 0.1 and min(rep["iou_after"]) > 0.98
    assert rep["masks_rendered_by_robot_masks_stage"] and "recovers that camera" in rec.message
    assert b.path("reports/camera_refine.png").is_file()
    assert not refine_camera_stage(b)[1]  # unchanged: skipped


@pytest.mark.render
def test_keeps_the_camera_when_the_iou_does_not_improve(exportable_bundle):
    from real2sim.engines import get_exporter
    from real2sim.segmentation.robot_masks import robot_masks_stage

    b = exportable_bundle
    _add_frames(b)
    get_exporter("mjcf").export(b)
    robot_masks_stage(b)
    T = b.manifest.cameras["main"].T_world_camera
    rec, ran = refine_camera_stage(b, dof=3, max_evals=10)  # already exact: IoU 1, nothing to gain
    assert ran and not rec.metrics["applied"] and "previous camera pose kept" in rec.message
    assert Bundle.load(b.root).manifest.cameras["main"].T_world_camera == T


def test_needs_robot_masks(exportable_bundle):
    b = exportable_bundle
    _add_frames(b)
    with pytest.raises(BundleError, match=r"real2sim masks .* --entity robot.*real2sim robot-masks"):
        refine_camera_stage(b)
