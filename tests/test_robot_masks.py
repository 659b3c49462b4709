"""Robot masks rendered from the simulator at each frame's joint state."""
from __future__ import annotations

import numpy as np
import pytest

from real2sim import Bundle, BundleError
from real2sim.core.manifest import FrameSpec
from real2sim.segmentation.robot_masks import robot_masks_stage


@pytest.mark.render
def test_masks_follow_the_recorded_joints(exportable_bundle):
    from real2sim.core.imaging import png_bytes as _png
    from real2sim.engines import get_exporter

    b = exportable_bundle
    get_exporter("mjcf").export(b)
    cam = b.manifest.cameras["main"]
    frame = np.zeros((cam.height, cam.width, 3), np.uint8)
    for i in range(2):
        from real2sim.core.bundle import atomic_write_bytes

        atomic_write_bytes(b.path(f"capture/frames/{i:06d}.png"), _png(frame))
    q0 = [0.0] * 8
    q1 = [0.8, -0.3, 0.3, 0.0, 0.5, 0.0, 0.02, -0.02]  # waist turned
    b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png", 0.0, "main", q0),
                                 FrameSpec("capture/frames/000001.png", 0.2, "main", q1)]
    b.save()
    rec, ran = robot_masks_stage(b)
    assert ran and rec.metrics["frames_without_robot"] == 0
    b = Bundle.load(b.root)
    from PIL import Image

    m0, m1 = (np.asarray(Image.open(b.path(b.manifest.capture.masks[k]["robot"]))) > 127 for k in ("000000", "000001"))
    assert m0.sum() > 1000 and m1.sum() > 1000
    assert (m0 ^ m1).sum() > 0.2 * m0.sum()  # the arm moved between the frames
    assert not robot_masks_stage(b)[1]  # unchanged: skipped


def test_needs_a_robot_and_frames(exportable_bundle):
    exportable_bundle.manifest.robot = None
    with pytest.raises(BundleError, match="no robot"):
        robot_masks_stage(exportable_bundle)
