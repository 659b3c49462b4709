"""capture/calibrate.py: the camera pose from an ArUco marker (or a ChArUco board) at a known world pose.

Ground truth: markers drawn by ``cv2.aruco.generateImageMarker`` on a white paper lying on the table, warped into a
synthetic 640x480 camera at a known pose (a homography from the marker plane, rendered at 4x and area-averaged
down), on a textured background, blurred and noised. The camera comes back through ``real2sim calibrate DIR
--marker IMG ...``.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

K = np.array([[600.0, 0, 322.3], [0, 600.0, 236.8], [0, 0, 1]])
TARGET = [0.1, 0.05, 0.0]


# -- synthetic images -----------------------------------------------------------------------------------------
def _camera(eye=(0.35, -0.3, 0.45), target=TARGET, distortion=None):
    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv

    return Camera(640, 480, K.copy(), look_at_opencv(eye, target), np.zeros(5) if distortion is None
                  else np.asarray(distortion, float))


def _supersampled(K_, ss):
    """Intrinsics of the same camera at ``ss`` times the resolution (OpenCV pixel centres: c' = (c + 0.5) ss - 0.5)."""
    Ks = K_.copy()
    Ks[:2] *= ss
    Ks[:2, 2] = (K_[:2, 2] + 0.5) * ss - 0.5
    return Ks


def _marker_texture(marker_id, dictionary="DICT_4X4_50", px=240):
    """The marker (``px`` pixels across its black square) on white paper half a marker wide each side. Returns the
    texture and the 3x3 map from texture pixels to the marker frame in units of the marker side (+X right, +Y up,
    origin at the centre; pixel centres at integers, so the black square's left edge is at u = margin - 0.5)."""
    import cv2

    d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, dictionary))
    m = px // 2
    tex = np.pad(cv2.aruco.generateImageMarker(d, marker_id, px, borderBits=1), m, constant_values=255)
    c0 = m - 0.5
    S = np.array([[1 / px, 0, -c0 / px - 0.5], [0, -1 / px, c0 / px + 0.5], [0, 0, 1]])
    return tex, S


def _render(camera, markers, dictionary="DICT_4X4_50", seed=0, blur=0.8, noise=3.0, ss=4):
    """``markers``: [(id, side m, T_world_marker)]. uint8 RGB image of them seen by ``camera`` (no distortion)."""
    import cv2

    rng = np.random.default_rng(seed)
    W, H = camera.width * ss, camera.height * ss
    bg = cv2.GaussianBlur(rng.integers(60, 200, (camera.height, camera.width)).astype(np.uint8), (0, 0), 2)
    big = cv2.resize(bg, (W, H), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    Ks = _supersampled(camera.K, ss)
    for marker_id, size, T_wm in markers:
        tex, S = _marker_texture(marker_id, dictionary)
        T_cm = np.linalg.inv(camera.T_world_camera) @ T_wm
        Hm = Ks @ np.column_stack([T_cm[:3, 0] * size, T_cm[:3, 1] * size, T_cm[:3, 3]]) @ S
        warped = cv2.warpPerspective(tex, Hm, (W, H), flags=cv2.INTER_LINEAR)
        cover = cv2.warpPerspective(np.full_like(tex, 255), Hm, (W, H), flags=cv2.INTER_NEAREST) > 0
        big = np.where(cover, warped, big)
    img = cv2.resize(big, (camera.width, camera.height), interpolation=cv2.INTER_AREA)
    img = cv2.GaussianBlur(img, (0, 0), blur) + rng.normal(0, noise, img.shape)
    return np.repeat(np.clip(img, 0, 255).astype(np.uint8)[..., None], 3, -1)


def _distort(img, camera):
    """The undistorted image ``img`` as ``camera``'s lens (its distortion) sees it."""
    import cv2

    h, w = img.shape[:2]
    uv = np.stack(np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)), -1).reshape(-1, 1, 2)
    src = cv2.undistortPoints(uv, camera.K, camera.distortion, P=camera.K).reshape(h, w, 2).astype(np.float32)
    return cv2.remap(img, src[..., 0], src[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def _bundle(tmp_path, camera):
    """A bundle whose camera 'main' has ``camera``'s intrinsics and a pose 5 cm and ~3 deg off."""
    from real2sim.core.bundle import Bundle
    from real2sim.core.geometry import look_at_opencv
    from real2sim.core.manifest import CameraSpec, StageRecord

    b = Bundle.create(tmp_path / "scene")
    guess = camera.__class__(camera.width, camera.height, camera.K.copy(),
                             look_at_opencv(camera.T_world_camera[:3, 3] + [0.03, 0.04, 0.0], [0.12, 0.03, 0.0]),
                             camera.distortion.copy())
    b.manifest.cameras["main"] = CameraSpec.from_camera(guess)
    b.manifest.stages["alignment"] = StageRecord("done", "x", {}, [], {}, "")
    b.save()
    return b


def _errors(T, truth):
    from real2sim.core.geometry import rotation_angle_between

    return (float(np.linalg.norm(T[:3, 3] - truth[:3, 3])),
            float(np.degrees(rotation_angle_between(T[:3, :3], truth[:3, :3]))))


def _cli(bundle, image, marker_id, size, at, *extra):
    from real2sim.apps.cli import main

    return main(["calibrate", str(bundle.root), "--marker", str(image), "--marker-id", str(marker_id),
                 "--marker-size", str(size), "--marker-at", ",".join(str(v) for v in at), *extra])


# -- through the CLI ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eye, at", [((0.35, -0.3, 0.45), (0.1, 0.05, 0.0, 30.0)),
                                     ((0.5, 0.2, 0.35), (0.08, 0.02, 0.012, -120.0)),
                                     ((0.15, 0.05, 0.65), (0.1, 0.05, 0.0))])
def test_cli_marker_recovers_the_camera_pose(tmp_path, capsys, eye, at):
    from PIL import Image

    from real2sim.capture.calibrate import marker_pose_flat
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_rgb

    cam = _camera(eye)
    write_rgb(tmp_path / "marker.png", _render(cam, [(7, 0.10, marker_pose_flat(*at)), (3, 0.06, marker_pose_flat(
        -0.05, 0.12, 0.0, 10.0))]))
    b = _bundle(tmp_path, cam)
    assert _cli(b, tmp_path / "marker.png", 7, 0.10, at) == 0
    out = capsys.readouterr().out
    b = Bundle.load(b.root)
    got = np.array(b.manifest.cameras["main"].T_world_camera)
    dp, da = _errors(got, cam.T_world_camera)
    rep = json.loads((b.root / "reports" / "calibration.json").read_text())
    print(f"marker at {at}, camera {eye}: {rep['side_px']:.1f} px, {rep['distance_m']:.2f} m, RMS {rep['rms_px']:.3f} "
          f"px -> position off {dp * 1e3:.2f} mm, rotation off {da:.3f} deg")
    assert dp < 0.01 and da < 1.0
    assert rep["method"] == "marker" and rep["marker_id"] == 7 and rep["ids_found"] == [3, 7]
    assert rep["rms_px"] < 0.5 and 60 < rep["side_px"] < 120 and not rep["warnings"]
    assert np.allclose(rep["camera_position"], got[:3, 3], atol=1e-6) and rep["change_m"] > 0.03
    pic = np.asarray(Image.open(b.root / rep["picture"]))
    assert pic.shape == (480, 640, 3)
    assert "RMS" in out and "camera at" in out and "warning" not in out
    assert b.manifest.stages["alignment"].status == "stale"  # made with the old camera pose


def test_cli_wrong_id_names_the_ids_found_and_keeps_the_bundle(tmp_path, capsys):
    from real2sim.capture.calibrate import marker_pose_flat
    from real2sim.core.imaging import write_rgb

    cam = _camera()
    write_rgb(tmp_path / "marker.png", _render(cam, [(7, 0.10, marker_pose_flat(0.1, 0.05, 0.0)),
                                                     (3, 0.06, marker_pose_flat(-0.05, 0.12, 0.0))]))
    b = _bundle(tmp_path, cam)
    before = (b.root / "scene.json").read_bytes()
    assert _cli(b, tmp_path / "marker.png", 8, 0.10, (0.1, 0.05, 0.0)) == 2
    out = " ".join(capsys.readouterr().err.split())  # errors go to stderr; rich wraps long lines
    assert "marker.png" in out and "id 8" in out and "found id(s) 3, 7" in out and "Did you mean 7?" in out
    assert (b.root / "scene.json").read_bytes() == before
    assert not (b.root / "reports" / "calibration.json").exists()


def test_cli_no_marker_names_the_image_and_the_dictionary_it_may_be(tmp_path, capsys):
    from real2sim.capture.calibrate import marker_pose_flat
    from real2sim.core.imaging import write_rgb

    cam = _camera()
    b = _bundle(tmp_path, cam)
    before = (b.root / "scene.json").read_bytes()
    write_rgb(tmp_path / "blank.png", np.full((480, 640, 3), 128, np.uint8))
    assert _cli(b, tmp_path / "blank.png", 0, 0.1, (0, 0, 0)) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "blank.png: no ArUco marker of DICT_4X4_50 found" in out and "white border" in out
    # a 5x5 marker, looked for as 4x4: the error says which dictionary it is
    write_rgb(tmp_path / "five.png", _render(cam, [(12, 0.1, marker_pose_flat(0.1, 0.05, 0.0))], "DICT_5X5_100"))
    assert _cli(b, tmp_path / "five.png", 12, 0.1, (0.1, 0.05, 0.0)) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "five.png" in out and "DICT_5X5_1000" in out and "ids 12" in out
    assert _cli(b, tmp_path / "five.png", 12, 0.1, (0.1, 0.05, 0.0), "--marker-dictionary", "DICT_5X5_10") == 2
    assert "did you mean" in capsys.readouterr().err
    assert (b.root / "scene.json").read_bytes() == before
    # and with the right dictionary it works
    assert _cli(b, tmp_path / "five.png", 12, 0.1, (0.1, 0.05, 0.0), "--marker-dictionary", "DICT_5X5_100") == 0


def test_cli_marker_needs_its_id_size_and_place(tmp_path, capsys):
    cam = _camera()
    b = _bundle(tmp_path, cam)
    from real2sim.apps.cli import main

    assert main(["calibrate", str(b.root), "--marker", "m.png", "--marker-id", "3"]) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "--marker-size, --marker-at" in out
    with pytest.raises(SystemExit):
        main(["calibrate", str(b.root), "--marker", "m.png", "--marker-at", "0.1,0.2"])
    assert "X,Y,Z[,YAW_DEG]" in capsys.readouterr().err


def test_cli_tiny_marker_warns(tmp_path, capsys):
    from real2sim.capture.calibrate import marker_pose_flat
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_rgb

    cam = _camera()
    at = (0.1, 0.05, 0.0, 30.0)
    write_rgb(tmp_path / "tiny.png", _render(cam, [(7, 0.025, marker_pose_flat(*at))]))
    b = _bundle(tmp_path, cam)
    assert _cli(b, tmp_path / "tiny.png", 7, 0.025, at) == 0
    out = " ".join(capsys.readouterr().out.split())
    rep = json.loads((b.root / "reports" / "calibration.json").read_text())
    dp, da = _errors(np.array(Bundle.load(b.root).manifest.cameras["main"].T_world_camera), cam.T_world_camera)
    print(f"tiny marker: {rep['side_px']:.1f} px, position off {dp * 1e3:.1f} mm, rotation off {da:.2f} deg; "
          f"warnings: {rep['warnings']}")
    assert rep["side_px"] < 40 and "px across" in rep["warnings"][0]
    assert "warning:" in out and "poorly determined" in out and "bigger marker" in out and "--points" in out


# -- library --------------------------------------------------------------------------------------------------
def test_marker_with_lens_distortion():
    """Edges are curved by the lens: the corners are refined in undistorted pixels and the distortion is used."""
    from real2sim.capture.calibrate import extrinsics_from_marker, marker_pose_flat

    cam = _camera(distortion=[-0.25, 0.08, 0.0005, -0.0003, 0.0])
    T_wm = marker_pose_flat(0.1, 0.05, 0.0, 45.0)
    flat = _camera()
    flat.T_world_camera = cam.T_world_camera
    img = _distort(_render(flat, [(5, 0.1, T_wm)], blur=0.01, noise=0.0), cam)
    import cv2

    img = np.clip(cv2.GaussianBlur(img.astype(np.float32), (0, 0), 0.8)
                  + np.random.default_rng(2).normal(0, 3.0, img.shape), 0, 255).astype(np.uint8)
    res = extrinsics_from_marker(img, cam, 5, 0.1, T_wm)
    dp, da = _errors(res.T_world_camera, cam.T_world_camera)
    print(f"distorted: position off {dp * 1e3:.2f} mm, rotation off {da:.3f} deg, RMS {res.rms_px:.3f} px")
    assert dp < 0.01 and da < 1.0 and res.rms_px < 0.5


def test_marker_corners_refined_against_blur():
    """OpenCV's sub-pixel corners are pulled inwards by blur; the edge-line corners are not."""
    from real2sim.capture.calibrate import (
        detect_markers,
        marker_object_points,
        marker_pose_flat,
        refine_marker_corners,
    )
    from real2sim.core.geometry import transform_points

    cam = _camera()
    T_wm = marker_pose_flat(0.1, 0.05, 0.0, 30.0)
    true = cam.project(transform_points(T_wm, marker_object_points(0.1)))
    img = _render(cam, [(7, 0.1, T_wm)], blur=1.5)[..., 0]
    ((mid, det),) = detect_markers(img, "DICT_4X4_50")
    ref = refine_marker_corners(img, det, cam.K, cam.distortion)
    e_det, e_ref = (float(np.linalg.norm(c - true, axis=1).mean()) for c in (det, ref))
    print(f"corner error, blur 1.5 px: detector {e_det:.3f} px, edge lines {e_ref:.3f} px")
    assert mid == 7 and e_ref < 0.1 and e_ref < e_det / 2


def test_marker_pose_flat_convention():
    from real2sim.capture.calibrate import marker_pose_flat

    T = marker_pose_flat(0.1, 0.2, 0.03, 90.0)
    assert np.allclose(T[:3, 0], [0, 1, 0]) and np.allclose(T[:3, 2], [0, 0, 1]) and np.allclose(T[:3, 3], [0.1, 0.2, 0.03])


def test_bad_marker_inputs():
    from real2sim.capture.calibrate import extrinsics_from_marker, marker_pose_flat
    from real2sim.core.errors import CalibrationError, CaptureError

    cam = _camera()
    img = np.zeros((480, 640, 3), np.uint8)
    with pytest.raises(CalibrationError, match="positive side"):
        extrinsics_from_marker(img, cam, 0, -0.1, marker_pose_flat(0, 0, 0))
    with pytest.raises(CalibrationError, match="rigid 4x4"):
        extrinsics_from_marker(img, cam, 0, 0.1, np.eye(4) * 2)
    with pytest.raises(CaptureError, match="320x240 but the camera is 640x480"):
        extrinsics_from_marker(np.zeros((240, 320, 3), np.uint8), cam, 0, 0.1, np.eye(4), name="small.png")


def test_charuco_board_at_a_known_pose(tmp_path):
    """A ChArUco board lying face up at a known pose gives the camera pose too (library, calibrate_charuco_pose)."""
    import cv2

    from real2sim.capture.calibrate import calibrate_charuco_pose, marker_pose_flat
    from real2sim.capture.camera_file import charuco_board
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import write_rgb

    cam = _camera((0.45, -0.25, 0.5))
    board = charuco_board((7, 5), 0.04, 0.03)
    px = 60
    tex = board.generateImage((9 * px, 7 * px), marginSize=px)
    # OpenCV board frame: origin at the outer top-left corner, +X along the columns, +Y down the rows, +Z into the
    # board. Face up on the table: board +Y is world -Y (turned by the yaw), board +Z is world -Z
    T_wb = marker_pose_flat(-0.04, 0.12, 0.0, 20.0) @ np.diag([1.0, -1.0, -1.0, 1.0])
    s = 0.04 / px
    S = np.array([[s, 0, -(px - 0.5) * s], [0, s, -(px - 0.5) * s], [0, 0, 1]])
    ss = 4
    T_cb = np.linalg.inv(cam.T_world_camera) @ T_wb
    H = _supersampled(cam.K, ss) @ np.column_stack([T_cb[:3, 0], T_cb[:3, 1], T_cb[:3, 3]]) @ S
    big = cv2.warpPerspective(tex, H, (640 * ss, 480 * ss), flags=cv2.INTER_LINEAR, borderValue=120)
    img = cv2.resize(big.astype(np.float32), (640, 480), interpolation=cv2.INTER_AREA)
    img = np.clip(cv2.GaussianBlur(img, (0, 0), 0.8) + np.random.default_rng(1).normal(0, 3.0, img.shape), 0, 255)
    write_rgb(tmp_path / "board.png", np.repeat(img.astype(np.uint8)[..., None], 3, -1))
    b = _bundle(tmp_path, cam)
    rep = calibrate_charuco_pose(b, tmp_path / "board.png", {"squares": [7, 5], "square": 0.04, "marker": 0.03}, T_wb)
    dp, da = _errors(np.array(Bundle.load(b.root).manifest.cameras["main"].T_world_camera), cam.T_world_camera)
    print(f"charuco: {rep['corners']} corners, RMS {rep['rms_px']:.3f} px -> position off {dp * 1e3:.2f} mm, "
          f"rotation off {da:.3f} deg")
    assert rep["method"] == "charuco" and rep["corners"] >= 12 and dp < 0.01 and da < 1.0


def test_a_distorted_clip_is_undistorted_at_init_and_a_raw_marker_photo_still_gives_the_pose(tmp_path, capsys):
    """A camera file with lens distortion: init undistorts the frames to the same intrinsics without distortion
    (what the simulators render), moves the prompts' pixels with them, and a marker photo straight from the
    camera is still read with the lens's distortion."""
    from real2sim.capture.calibrate import calibrate_intrinsics, marker_pose_flat
    from real2sim.capture.init import source_camera
    from real2sim.core.bundle import Bundle
    from real2sim.core.errors import CalibrationError
    from real2sim.core.imaging import read_rgb, write_rgb
    from real2sim.pipeline.capture import capture_scene

    cam = _camera(distortion=[-0.25, 0.08, 0.0005, -0.0003, 0.0])
    flat = _camera()
    at = (-0.17, 0.08, 0.0, 45.0)  # seen near the frame's corner: read as a pinhole image, the pose is 5 cm off
    T_wm = marker_pose_flat(*at)
    pinhole_view = _render(flat, [(5, 0.1, T_wm)])
    raw = _distort(pinhole_view, cam)
    (tmp_path / "clip").mkdir()
    for i in range(2):
        write_rgb(tmp_path / "clip" / f"{i}.png", raw)
    write_rgb(tmp_path / "marker.png", raw)
    (tmp_path / "camera.json").write_text(json.dumps({"width": 640, "height": 480, "fx": 600.0, "fy": 600.0,
                                                      "cx": 322.3, "cy": 236.8, "distortion": list(cam.distortion)}))
    from real2sim.capture.undistort import undistort_pixels

    corner_true = np.array([70.0, 60.0])  # a click near the corner, where the lens moves pixels most
    corner_raw = _distorted_pixel(corner_true, cam)
    pins = np.array([(100, 80), (540, 80), (100, 400), (540, 400), (320, 240), (200, 300)], float)
    world = [_on_table(flat, uv) for uv in pins]  # clicked on the raw frame: where the lens shows them
    (tmp_path / "points.json").write_text(json.dumps({"pixels": [_distorted_pixel(uv, cam).tolist() for uv in pins],
                                                      "world": [w.tolist() for w in world]}))
    summary = capture_scene(tmp_path / "scene", tmp_path / "clip", camera=tmp_path / "camera.json",
                            points=tmp_path / "points.json",
                            prompts={"paper": {"frame": 0, "prompt": _prompt([corner_raw])}}, plate=False)
    b = Bundle.load(tmp_path / "scene")
    assert summary["capture"]["undistorted"] is True
    assert not np.any(b.manifest.cameras["main"].distortion)  # the bundle's frames are pinhole images
    assert np.allclose(source_camera(b).distortion, cam.distortion)  # the camera as given is kept
    rep = json.loads((b.root / "reports" / "capture.json").read_text())
    assert rep["undistortion"]["max_shift_px"] > 20 and rep["undistortion"]["outside_fraction"] == 0  # barrel: none
    frame = read_rgb(b.root / "capture" / "frames" / "000000.png").astype(float)
    inner = (slice(40, 440), slice(40, 600))
    err_now = np.abs(frame - pinhole_view)[inner].mean()
    err_raw = np.abs(raw.astype(float) - pinhole_view)[inner].mean()
    print(f"frame vs the pinhole view: {err_now:.2f} levels (the raw frame {err_raw:.2f})")
    assert err_now < 0.35 * err_raw
    stored = json.loads((b.root / "masks" / "prompts.json").read_text())["paper"]
    got = np.array(stored["prompt"]["points"][0])  # the click written for the raw frame, moved into the bundle's
    assert np.abs(got - corner_true).max() < 0.05 and np.abs(corner_raw - corner_true).max() > 10
    assert np.allclose(undistort_pixels([corner_raw], cam)[0], got)
    dp, da = _errors(np.array(b.manifest.cameras["main"].T_world_camera), cam.T_world_camera)
    assert summary["calibration"]["rms_px"] < 0.01 and dp < 1e-4 and da < 0.01  # the points moved with the frames

    def calibrate(image):
        from real2sim.apps.cli import main

        return main(["calibrate", str(b.root), "--marker", str(image), "--marker-id", "5", "--marker-size", "0.1",
                     "--marker-at=" + ",".join(map(str, at))])

    assert calibrate(tmp_path / "marker.png") == 0  # the raw photo
    got_T = np.array(Bundle.load(b.root).manifest.cameras["main"].T_world_camera)
    dp, da = _errors(got_T, cam.T_world_camera)
    print(f"raw marker photo: position off {dp * 1e3:.2f} mm, rotation off {da:.3f} deg")
    assert dp < 0.01 and da < 1.0
    assert not np.any(Bundle.load(b.root).manifest.cameras["main"].distortion)
    assert calibrate(b.root / "capture" / "frames" / "000001.png") == 0  # a frame of the bundle
    dp, da = _errors(np.array(Bundle.load(b.root).manifest.cameras["main"].T_world_camera), cam.T_world_camera)
    assert dp < 0.01 and da < 1.0
    capsys.readouterr()
    with pytest.raises(CalibrationError, match="undistorted by 'real2sim init'.*--force"):
        calibrate_intrinsics(b, tmp_path / "clip", (7, 5), 0.03)


def _distorted_pixel(uv, camera):
    """Where the lens of ``camera`` puts the pinhole pixel ``uv``."""
    import cv2

    ray = np.linalg.solve(camera.K, [uv[0], uv[1], 1.0])
    out, _ = cv2.projectPoints(ray.reshape(1, 1, 3), np.zeros(3), np.zeros(3), camera.K, camera.distortion)
    return out.reshape(2)


def _on_table(camera, uv):
    """The table point (z = 0) that the pinhole pixel ``uv`` of ``camera`` sees."""
    d = camera.T_world_camera[:3, :3] @ np.linalg.solve(camera.K, [uv[0], uv[1], 1.0])
    o = camera.T_world_camera[:3, 3]
    return o - o[2] / d[2] * d


def _prompt(points):
    from real2sim.segmentation import Prompt

    return Prompt([tuple(map(float, p)) for p in points])


def test_a_pincushion_lens_is_undistorted_with_its_corners_from_the_edge_and_a_warning(tmp_path, caplog):
    """k1 > 0: the pinhole frame's corners see past the source frame; they repeat its edge, init says how much."""
    import logging

    from real2sim.capture.init import init_bundle
    from real2sim.capture.undistort import undistort_frames
    from real2sim.core.imaging import write_rgb

    cam = _camera(distortion=[0.15, 0.0, 0.0, 0.0, 0.0])
    frame = np.full((480, 640, 3), 90, np.uint8)
    frame[:, :320] = 200
    out, rep = undistort_frames(frame[None], cam)
    assert 0.001 < rep["outside_fraction"] < 0.2 and rep["max_shift_px"] > 10
    assert out[0, 0, 0].tolist() == [200, 200, 200] and out[0, -1, -1].tolist() == [90, 90, 90]  # the edge repeated
    (tmp_path / "clip").mkdir()
    write_rgb(tmp_path / "clip" / "0.png", frame)
    (tmp_path / "camera.json").write_text(json.dumps({"width": 640, "height": 480, "fx": 600.0, "fy": 600.0,
                                                      "cx": 322.3, "cy": 236.8, "distortion": list(cam.distortion)}))
    with caplog.at_level(logging.WARNING, logger="real2sim.capture.init"):
        init_bundle(tmp_path / "scene", tmp_path / "clip", camera=tmp_path / "camera.json")
    assert any("pincushion" in r.getMessage() and "camera.json" in r.getMessage() for r in caplog.records)
