"""Capture: frames in, cameras (file, checkerboard/ChArUco calibration, PnP, table plane), background plates.

Entry points: :func:`init_bundle`, :func:`make_plate`, :func:`plate_stage`, :mod:`capture.camera`,
:mod:`capture.table` (the table stage itself: :mod:`real2sim.table`).
"""
from __future__ import annotations

from .camera import (calibrate_charuco, calibrate_checkerboard, check_camera_matches_frames, fit_plane, load_camera,
                     pixels_to_table, scale_camera, solve_pnp, table_height_from_points)
from .errors import CalibrationError, CaptureError
from .frames import read_frames
from .init import init_bundle, load_frames
from .inpaint import PatchMatchConfig, inpaint
from .plate import PlateConfig, make_plate, make_plate_full, plain_median, plate_stage
from .table import CharucoSpec, TableConfig, TableEstimate, table_from_board

__all__ = ["init_bundle", "load_frames", "read_frames", "make_plate", "make_plate_full", "plain_median", "plate_stage",
           "PlateConfig", "inpaint", "PatchMatchConfig", "load_camera", "calibrate_checkerboard", "calibrate_charuco",
           "solve_pnp", "fit_plane", "table_height_from_points", "pixels_to_table", "scale_camera",
           "check_camera_matches_frames", "CaptureError", "CalibrationError", "table_from_board",
           "TableConfig", "TableEstimate", "CharucoSpec"]
