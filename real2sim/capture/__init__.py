"""Capture: frames in, cameras (file, checkerboard/ChArUco calibration, PnP, table plane), background plates.

Entry points: :func:`init_bundle`, :func:`make_plate`, :func:`plate_stage`, :mod:`capture.camera`,
:mod:`real2sim.capture.table_board` (the table stage itself: :mod:`real2sim.capture.table`).
"""
from __future__ import annotations

from real2sim.capture.camera_file import (
                     calibrate_charuco,
                     calibrate_checkerboard,
                     check_camera_matches_frames,
                     fit_plane,
                     load_camera,
                     pixels_to_table,
                     scale_camera,
                     solve_pnp,
                     table_height_from_points,
)
from real2sim.capture.frames import read_frames
from real2sim.capture.init import init_bundle, load_frames
from real2sim.capture.inpaint import PatchMatchConfig, inpaint
from real2sim.capture.plate import (
                     PlateConfig,
                     make_plate,
                     make_plate_full,
                     plain_median,
                     plate_stage,
)
from real2sim.capture.table_board import (
                     CharucoSpec,
                     TableConfig,
                     TableEstimate,
                     table_from_board,
)
from real2sim.core.errors import CalibrationError, CaptureError

__all__ = ["init_bundle", "load_frames", "read_frames", "make_plate", "make_plate_full", "plain_median", "plate_stage",
           "PlateConfig", "inpaint", "PatchMatchConfig", "load_camera", "calibrate_checkerboard", "calibrate_charuco",
           "solve_pnp", "fit_plane", "table_height_from_points", "pixels_to_table", "scale_camera",
           "check_camera_matches_frames", "CaptureError", "CalibrationError", "table_from_board",
           "TableConfig", "TableEstimate", "CharucoSpec"]
