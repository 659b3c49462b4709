"""capture/table.py + real2sim/table.py: the table plane from a board on the table and from the objects resting on it.

Ground truth: a checkerboard drawn, warped into a camera at a known pose with the board on a known (tilted) plane,
blurred and noised; the tabletop scene rendered by MuJoCo with its objects resting on the table (z = 0); the
real Bridge stack-cube frame (the journey reports the table at about +4.2 mm there).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

K = np.array([[600.0, 0, 322.3], [0, 600.0, 236.8], [0, 0, 1]])


# -- synthetic board ------------------------------------------------------------------------------------------
def _board_texture(pattern=(9, 6), px=40, border=1):
    """Checkerboard of (cols + 1) x (rows + 1) squares of ``px`` pixels with a white border of ``border`` squares.
    Returns (texture uint8, pixel -> board metres scale factor is square/px; origin = first inner corner)."""
    cols, rows = pattern[0] + 1, pattern[1] + 1
    tex = np.full(((rows + 2 * border) * px, (cols + 2 * border) * px), 255, np.uint8)
    for r in range(rows):
        for c in range(cols):
            if (r + c) % 2 == 0:
                y, x = (r + border) * px, (c + border) * px
                tex[y:y + px, x:x + px] = 0
    return tex, (border + 1) * px  # texture pixel of the first inner corner, in x and in y


def _board_image(camera, T_world_board, pattern=(9, 6), square=0.025, seed=0):
    """The board (inner-corner origin at ``T_world_board``, board z = its normal) warped into ``camera``'s image,
    on a textured grey background, blurred and noised. Returns uint8 RGB."""
    import cv2

    px = 40
    tex, origin = _board_texture(pattern, px)
    s = square / px
    # texture pixel (u, v, 1) -> board point (x, y, 0) in metres -> camera -> image. Pixel centres are at integer
    # coordinates (OpenCV, both images): the first inner corner, between texture pixels origin - 1 and origin, is
    # at u = origin - 0.5
    c0 = origin - 0.5
    S = np.array([[s, 0, -c0 * s], [0, s, -c0 * s], [0, 0, 1]])
    T_cb = np.linalg.inv(camera.T_world_camera) @ T_world_board
    H = camera.K @ np.column_stack([T_cb[:3, 0], T_cb[:3, 1], T_cb[:3, 3]]) @ S
    rng = np.random.default_rng(seed)
    bg = cv2.GaussianBlur(rng.integers(90, 170, (camera.height, camera.width), dtype=np.uint8), (0, 0), 3)
    warped = cv2.warpPerspective(tex, H, (camera.width, camera.height), flags=cv2.INTER_AREA, borderValue=0)
    cover = cv2.warpPerspective(np.full_like(tex, 255), H, (camera.width, camera.height), flags=cv2.INTER_NEAREST) > 0
    img = np.where(cover, warped, bg).astype(np.float32)
    img = cv2.GaussianBlur(img, (0, 0), 0.8) + rng.normal(0, 3.0, img.shape)
    img = np.clip(img, 0, 255).astype(np.uint8)
    return np.repeat(img[..., None], 3, -1)


def _board_pose(centre, tilt_deg, tilt_axis_deg, yaw_deg, pattern=(9, 6), square=0.025):
    """T_world_board of a board lying face up: its inner-corner centre at ``centre``, its normal (up, out of the
    printed face) +Z tilted by ``tilt_deg`` about a horizontal axis at ``tilt_axis_deg``, turned ``yaw_deg`` about
    the normal. OpenCV's board frame has z into the board, so the board's z axis is minus that normal."""
    from scipy.spatial.transform import Rotation

    a = np.radians(tilt_axis_deg)
    R = (Rotation.from_rotvec(np.radians(tilt_deg) * np.array([np.cos(a), np.sin(a), 0]))
         * Rotation.from_euler("z", yaw_deg, degrees=True) * Rotation.from_euler("x", 180, degrees=True)).as_matrix()
    T = np.eye(4)
    T[:3, :3] = R
    half = np.array([(pattern[0] - 1) * square / 2, (pattern[1] - 1) * square / 2, 0])
    T[:3, 3] = np.asarray(centre, float) - R @ half
    return T


def _camera():
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv

    return Camera(640, 480, K.copy(), look_at_opencv([0.55, 0.22, 0.45], [0.05, 0.0, 0.0]))


@pytest.mark.parametrize("height, tilt, axis, yaw", [(0.0123, 1.5, 30.0, 10.0), (-0.031, 0.7, 120.0, -25.0)])
def test_board_recovers_height_and_normal(tmp_path, height, tilt, axis, yaw):
    from real2sim.capture.table_board import (
        TableConfig,
        table_from_board,
        table_picture,
    )

    cam = _camera()
    centre = np.array([0.06, 0.02, height])
    T = _board_pose(centre, tilt, axis, yaw)
    img = _board_image(cam, T)
    est = table_from_board(img, cam, (9, 6), 0.025, config=TableConfig())
    n_true = -T[:3, 2]
    angle = np.degrees(np.arccos(np.clip(est.normal @ n_true, -1, 1)))
    print(f"board: height {est.height * 1e3:+.2f} mm (true {height * 1e3:+.2f}), normal off {angle:.3f} deg, "
          f"tilt {est.tilt_deg:.3f} (true {tilt}), RMS {est.rms_px:.3f} px")
    assert abs(est.height - height) < 0.002
    assert angle < 1.0
    assert abs(est.tilt_deg - tilt) < 1.0
    assert est.method == "board" and est.points.shape == (54, 3) and est.rms_px < 0.5
    assert est.T_world_board is not None and not est.warnings
    pic = table_picture(img, cam, est)
    assert pic.shape == img.shape and pic.dtype == np.uint8 and (pic != img).any()


def test_board_thickness_lowers_the_table():
    from real2sim.capture.table_board import TableConfig, table_from_board

    cam = _camera()
    img = _board_image(cam, _board_pose([0.06, 0.02, 0.003], 0.0, 0.0, 0.0))
    est = table_from_board(img, cam, config=TableConfig(board_thickness_m=0.003))
    assert abs(est.height) < 0.002 and est.tilt_deg < 1.0


def test_board_not_found_names_the_image(tmp_path):
    from real2sim.capture.table_board import table_from_board
    from real2sim.core.errors import CalibrationError
    from real2sim.core.imaging import write_rgb

    cam = _camera()
    path = tmp_path / "no_board.png"
    write_rgb(path, np.full((480, 640, 3), 128, np.uint8))
    with pytest.raises(CalibrationError) as exc:
        table_from_board(path, cam)
    assert str(path) in str(exc.value) and "inner corners" in str(exc.value)
    # a wrong pattern count on a real board: same error, with the fix
    img_path = tmp_path / "board.png"
    write_rgb(img_path, _board_image(cam, _board_pose([0.06, 0.02, 0.0], 0.0, 0.0, 0.0)))
    with pytest.raises(CalibrationError, match="board.png: no 7x5 checkerboard"):
        table_from_board(img_path, cam, pattern=(7, 5))


def test_board_needs_a_camera_pose(tmp_path):
    from real2sim.capture.table_board import table_from_board
    from real2sim.core.camera import Camera
    from real2sim.core.errors import CaptureError

    cam = Camera(640, 480, K.copy(), np.eye(4))
    with pytest.raises(CaptureError, match="no pose.*real2sim calibrate"):
        table_from_board(np.zeros((480, 640, 3), np.uint8), cam, name="board.png")


def test_charuco_board(tmp_path):
    import cv2

    from real2sim.capture.camera_file import charuco_board
    from real2sim.capture.table_board import CharucoSpec, table_from_board

    spec = CharucoSpec((7, 5), 0.04, 0.03)
    board = charuco_board(spec.squares, spec.square, spec.marker, spec.dictionary)
    px = 60
    tex = board.generateImage((7 * px + 2 * px, 5 * px + 2 * px), marginSize=px)
    cam = _camera()
    # ChArUco board frame: origin at the board's outer corner, squares from there; texture pixel (u, v) ->
    # board ((u - px) s, (v - px) s) with s = square / px
    s = spec.square / px
    centre = np.array([0.05, 0.0, 0.008])
    T = _board_pose(centre, 1.0, 60.0, 5.0, pattern=(8, 6), square=spec.square)
    # _board_pose puts the centre of an (8 x 6)-corner grid, i.e. the centre of the 7 x 5 squares, at the centre
    T_img = np.linalg.inv(cam.T_world_camera) @ T
    S = np.array([[s, 0, -(px - 0.5) * s], [0, s, -(px - 0.5) * s], [0, 0, 1]])
    H = cam.K @ np.column_stack([T_img[:3, 0], T_img[:3, 1], T_img[:3, 3]]) @ S
    img = cv2.warpPerspective(tex, H, (640, 480), flags=cv2.INTER_AREA, borderValue=110)
    img = np.clip(cv2.GaussianBlur(img.astype(np.float32), (0, 0), 0.7)
                  + np.random.default_rng(1).normal(0, 2.0, img.shape), 0, 255).astype(np.uint8)
    est = table_from_board(np.repeat(img[..., None], 3, -1), cam, charuco={"squares": [7, 5], "square": 0.04,
                                                                             "marker": 0.03})
    n = -T[:3, 2]
    angle = np.degrees(np.arccos(np.clip(est.normal @ n, -1, 1)))
    # the height is taken at the centre of the corners found (a partial board): compare there
    x, y = est.centre[:2]
    true_h = centre[2] - (n[0] * (x - centre[0]) + n[1] * (y - centre[1])) / n[2]
    print(f"charuco: {len(est.labels)} corners, height {est.height * 1e3:+.2f} mm (true {true_h * 1e3:+.2f}), "
          f"normal off {angle:.3f} deg")
    assert est.sources["board"]["kind"] == "charuco" and len(est.labels) >= 12
    assert abs(est.height - true_h) < 0.002 and angle < 1.0


# -- objects resting on the table (MuJoCo render of the tabletop scene) ------------------------------------------
@pytest.fixture(scope="module")
def resting_capture(tmp_path_factory):
    """The tabletop recipe with every object resting on the table top (z = 0), rendered by MuJoCo (noise 2) into a
    second bundle with the masks of cube, can and domino. Returns (work bundle root, truth bundle)."""
    from conftest import give_simple_collision

    from real2sim.demos.synthetic import SyntheticCaptureConfig, synthesize_capture
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    base = tmp_path_factory.mktemp("table")
    truth = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), base / "truth"))
    for oid in truth.dynamic_objects():  # the recipe drops them from 5 mm: put them on the table
        truth.object(oid).pose.position[2] -= 0.005
    truth.save()
    export_bundle(truth, engines=("mjcf",))
    work = bundle_from_recipe(builtin_recipe("tabletop"), base / "work")
    synthesize_capture(work, truth, SyntheticCaptureConfig(masked=("cube", "can", "domino"), noise_std=2.0))
    return work.root, truth


def _shifted(root, tmp_path, dz=0.01):
    """A copy of the bundle whose table_height and table object are ``dz`` too high (a bad hand estimate)."""
    import shutil

    from real2sim.core.bundle import Bundle

    dst = tmp_path / "scene"
    shutil.copytree(root, dst)
    b = Bundle.load(dst)
    b.manifest.table_height += dz
    b.object("table").pose.position[2] += dz
    b.save()
    return b


@pytest.mark.render
def test_objects_recover_the_table(resting_capture, tmp_path):
    from real2sim.capture.table import table_from_objects

    b = _shifted(resting_capture[0], tmp_path)
    est = table_from_objects(b)
    print(f"objects: height {est.height * 1e3:+.2f} mm (true 0), tilt {est.tilt_deg:.3f} deg, spread "
          f"{est.spread_m * 1e3:.2f} mm, bottoms " + ", ".join(f"{k} {v * 1e3 + est.height * 1e3:+.2f}"
                                                               for k, v in est.residuals_m.items()))
    assert sorted(est.labels) == ["can", "cube", "domino"]
    assert abs(est.height) < 0.003
    assert est.tilt_deg < 1.0 and est.plane_rms_m < 0.002  # three objects: a plane is fitted
    assert est.spread_m < 0.003 and not est.warnings
    # one or two objects: median of the bottoms, normal +Z
    two = table_from_objects(b, ["cube", "domino"])
    assert abs(two.height) < 0.003 and two.tilt_deg == 0.0 and list(two.normal) == [0, 0, 1]
    assert two.plane_rms_m is None


@pytest.mark.render
def test_table_stage_writes_height_reports_and_marks_downstream_stale(resting_capture, tmp_path):
    from PIL import Image

    from real2sim.capture.table import table_stage
    from real2sim.core.bundle import Bundle
    from real2sim.core.manifest import StageRecord

    b = _shifted(resting_capture[0], tmp_path)
    for name in ("alignment", "texture", "export", "collision"):
        b.manifest.stages[name] = StageRecord("done", "x", {}, [], {}, "")
    b.save()
    rec, ran = table_stage(b)
    assert ran and rec.status == "done", rec.message
    b = Bundle.load(b.root)
    m = b.manifest
    assert abs(m.table_height) < 0.003
    assert [m.stages[n].status for n in ("alignment", "texture", "export", "collision")] == \
        ["stale", "stale", "stale", "done"]
    rep = json.loads((b.root / "reports" / "table.json").read_text())
    assert rep["method"] == "objects" and abs(rep["change_m"] + 0.01) < 0.003
    assert rep["table_object"]["moved"] and abs(m.objects["table"].pose.position[2] - m.table_height) < 1e-9
    assert set(rep["sources"]) >= {"cube", "can", "domino"}
    pic = np.asarray(Image.open(b.root / "reports" / "table.png"))
    assert pic.shape == (480, 640, 3)
    # unchanged inputs (and the height it wrote): skipped
    _, ran = table_stage(b)
    assert not ran


@pytest.mark.render
def test_table_stage_error_keeps_the_bundle(resting_capture, tmp_path):
    from real2sim.capture.table import table_stage
    from real2sim.core.bundle import Bundle
    from real2sim.core.errors import CaptureError, UnknownNameError

    b = _shifted(resting_capture[0], tmp_path)
    before = b.manifest.table_height
    with pytest.raises(CaptureError, match="no such board image"):
        table_stage(b, method="board", board=tmp_path / "missing.png")
    with pytest.raises(UnknownNameError, match="did you mean 'cube'"):
        table_stage(b, objects=["cubee"])
    with pytest.raises(CaptureError, match="'mug' has no masks"):
        table_stage(b, objects=["mug"])
    # a board image in which there is no board: the stage fails, the bundle keeps its height
    from real2sim.core.imaging import write_rgb

    write_rgb(tmp_path / "blank.png", np.full((480, 640, 3), 128, np.uint8))
    with pytest.raises(CaptureError, match="blank.png: no 9x6 checkerboard"):
        table_stage(b, method="board", board=tmp_path / "blank.png")
    b = Bundle.load(b.root)
    assert b.manifest.table_height == before and b.manifest.stages["table"].status == "failed"
    assert not (b.root / "reports" / "table.json").exists()


def test_cli_table_with_board(tmp_path):
    """``real2sim table DIR --board IMG``: a bundle whose camera sees a board lying at z = +7 mm."""
    from real2sim.apps.cli import main
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_rgb
    from real2sim.core.manifest import CameraSpec

    b = Bundle.create(tmp_path / "scene")
    cam = _camera()
    b.manifest.cameras["main"] = CameraSpec.from_camera(cam)
    b.save()
    write_rgb(tmp_path / "board.png", _board_image(cam, _board_pose([0.0, 0.03, 0.007], 0.5, 0.0, 15.0)))
    assert main(["table", str(b.root), "--board", str(tmp_path / "board.png"), "--pattern", "9x6",
                 "--square", "0.025"]) == 0
    b = Bundle.load(b.root)
    assert abs(b.manifest.table_height - 0.007) < 0.002
    assert (b.root / "reports" / "table.png").is_file()
    rep = json.loads((b.root / "reports" / "table.json").read_text())
    assert rep["method"] == "board" and rep["sources"]["board"]["corners"] == 54
    # the objects method on a bundle without masks: an error with the fix, exit code 2, the height kept
    assert main(["table", str(b.root)]) == 2
    assert Bundle.load(b.root).manifest.table_height == b.manifest.table_height


# -- the real Bridge frame ----------------------------------------------------------------------------------------
@pytest.mark.realdata
def test_bridge_frame_table_from_the_cubes(shared_data, tmp_path):
    """The two cubes of stack_cube_first_frame.png, one GrabCut click each (as the Bridge journey does), the table
    started 3 cm too high: it comes back to the WidowX's base (the camera pose is given relative to ``base_link``,
    and the Bridge arm stands on the table top: z = 0 up to its mount plate; measured +4.2 mm), and the 2 cm
    disagreement between the cubes is reported as a camera-pose warning."""
    import shutil

    from PIL import Image

    from real2sim.capture.camera_file import camera_from_dict
    from real2sim.capture.table import table_stage
    from real2sim.core.bundle import Bundle
    from real2sim.core.manifest import CameraSpec, FrameSpec
    from real2sim.demos import bridge
    from real2sim.pipeline.recipe import bundle_from_recipe
    from real2sim.segmentation import Prompt, segment

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    b = bundle_from_recipe(bridge._recipe(inputs, shared_data), tmp_path / "scene")
    m = b.manifest
    m.cameras["main"] = CameraSpec.from_camera(camera_from_dict(bridge.CAMERA))
    (b.root / "capture" / "frames").mkdir(parents=True)
    shutil.copyfile(shared_data / bridge.FRAME, b.root / "capture" / "frames" / "000000.png")
    m.capture.frames = [FrameSpec("capture/frames/000000.png", 0.0, "main")]
    m.table_height = 0.03  # the table object's top moves with it
    m.objects["table"].pose.position = [*m.objects["table"].pose.position[:2], m.objects["table"].pose.position[2] + 0.03]
    img = np.asarray(Image.open(shared_data / bridge.FRAME).convert("RGB"))
    (b.root / "masks" / "000000").mkdir(parents=True)
    for oid, xy in bridge.CLICKS.items():
        mask = segment(img, Prompt(points=[xy]), backend="grabcut")
        Image.fromarray(np.where(mask, 255, 0).astype(np.uint8)).save(b.root / "masks" / "000000" / f"{oid}.png")
        m.capture.masks.setdefault("000000", {})[oid] = f"masks/000000/{oid}.png"
    b.save()
    rec, _ = table_stage(b)  # the cubes disagree by ~2 cm: above the table gate's bar (10 mm), so not applied
    assert rec.status == "poor" and not rec.metrics["applied"] and "spread_mm" in rec.metrics["gate"][0]["metric"]
    assert Bundle.load(b.root).manifest.table_height == 0.03
    rec, _ = table_stage(b, accept_poor=True)  # applied when asked for, still marked poor
    assert rec.status == "poor" and rec.metrics["applied"]
    b = Bundle.load(b.root)
    rep = json.loads((b.root / "reports" / "table.json").read_text())
    print(f"bridge: table {rep['height_m'] * 1e3:+.2f} mm, spread {rep['spread_m'] * 1e3:.1f} mm, bottoms "
          + ", ".join(f"{k} {v['bottom_m'] * 1e3:+.2f}" for k, v in rep["sources"].items()))
    assert abs(b.manifest.table_height) < 0.01, rep
    assert set(rep["residuals_m"]) == {"green_cube", "yellow_cube"}
    assert rep["spread_m"] > 0.01 and any("camera" in w for w in rep["warnings"])
    assert "spread" in rec.message and rep["table_object"]["moved"]
    assert abs(b.manifest.objects["table"].pose.position[2] - b.manifest.table_height) < 1e-9
