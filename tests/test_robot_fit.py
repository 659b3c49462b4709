"""`real2sim fit-robot` on the real Bridge frame: the arm's joints from its pixels."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from real2sim import Bundle, BundleError
from real2sim.apps.cli import main

CAMERA = {"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545,
          "pose": {"position": [0.0, -0.16, 0.336], "quaternion_wxyz": [0.909182, -0.0819809, 0.347277, 0.214629],
                   "convention": "sapien"}}


def test_fit_robot_on_the_bridge_frame(tmp_path, shared_data):
    (tmp_path / "camera.json").write_text(json.dumps(CAMERA))
    root = tmp_path / "bridge"
    assert main(["init", str(root), "--frames", str(shared_data / "bridge" / "stack_cube_first_frame.png"),
                 "--camera", str(tmp_path / "camera.json"), "--robot", "widowx"]) == 0
    b = Bundle.load(root)
    (root / "background").mkdir(exist_ok=True)
    shutil.copyfile(shared_data / "bridge" / "stack_cube_plate.png", root / "background" / "plate.png")
    b.manifest.capture.plate = "background/plate.png"  # the person-made plate of this frame
    b.save()
    q_start = list(b.manifest.robot.joint_positions)
    assert main(["fit-robot", str(root)]) == 0
    b = Bundle.load(root)
    rec = b.manifest.stages["robot_fit"]
    assert rec.metrics["iou_fitted"] > rec.metrics["iou_start"] + 0.3, rec.metrics
    assert rec.metrics["iou_fitted"] > 0.7
    assert b.manifest.robot.joint_positions != q_start
    assert np.allclose(b.manifest.capture.frames[0].joint_positions, b.manifest.robot.joint_positions)
    # graded by the gripper's dark pixels, found without the model or the plate, with the test's own IoU
    from reference import bridge_frame, bridge_gripper_iou, bridge_gripper_mask, ref_iou

    from real2sim.core.imaging import read_mask

    fitted = bridge_gripper_iou(b, shared_data, b.manifest.robot.joint_positions)
    start = bridge_gripper_iou(b, shared_data, q_start)
    assert fitted >= 0.7 and fitted > start + 0.3, (fitted, start)
    robot_mask = read_mask(b.path(b.manifest.capture.masks["000000"]["robot"]))
    truth = bridge_gripper_mask(bridge_frame(shared_data)[0])
    assert ref_iou(robot_mask, truth) >= 0.7, ref_iou(robot_mask, truth)  # the mask the plate will leave out


def test_fit_robot_needs_a_plate(tmp_path, shared_data):
    (tmp_path / "camera.json").write_text(json.dumps(CAMERA))
    root = tmp_path / "b"
    main(["init", str(root), "--frames", str(shared_data / "bridge" / "stack_cube_first_frame.png"),
          "--camera", str(tmp_path / "camera.json"), "--robot", "widowx"])
    from real2sim.segmentation.robot_fit import robot_fit_stage

    with pytest.raises(BundleError, match="no background plate; run 'real2sim build"):
        robot_fit_stage(Bundle.load(root))
