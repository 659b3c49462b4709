"""Capture: frame sources, camera files, calibration (synthetic boards), PnP, table plane, init_bundle."""
from __future__ import annotations

import json

import numpy as np
import pytest

from real2sim.capture import CalibrationError, CaptureError
from real2sim.capture.camera_file import (
    calibrate_charuco,
    calibrate_checkerboard,
    camera_from_dict,
    charuco_board,
    fit_plane,
    load_camera,
    pixels_to_table,
    scale_camera,
    solve_pnp,
    table_height_from_points,
)
from real2sim.core.camera import Camera
from real2sim.core.geometry import look_at_opencv, rotation_angle_between

K = np.array([[600.0, 0, 319.5], [0, 600.0, 239.5], [0, 0, 1]])


def render_plane_pattern(K, T_camera_board, size, texel):
    """Render a planar board (board frame z = 0) seen by a pinhole camera; ``texel(x, y) -> grey`` (2x supersampled)."""
    import cv2

    w, h = size
    K2 = K.copy()
    K2[:2] *= 2
    K2[0, 2] = 2 * (K[0, 2] + 0.5) - 0.5
    K2[1, 2] = 2 * (K[1, 2] + 0.5) - 0.5
    u, v = np.meshgrid(np.arange(2 * w), np.arange(2 * h))
    d = np.stack([u, v, np.ones_like(u)], -1).reshape(-1, 3) @ np.linalg.inv(K2).T
    R, t = T_camera_board[:3, :3], T_camera_board[:3, 3]
    o = -R.T @ t
    db = d @ R  # R^T d
    lam = -o[2] / db[:, 2]
    p = o[None, :2] + lam[:, None] * db[:, :2]
    img = texel(p[:, 0], p[:, 1]).reshape(2 * h, 2 * w).astype(np.float32)
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA).round().astype(np.uint8)


def board_pose(rx, ry, dist, shift=(0.0, 0.0)):
    from scipy.spatial.transform import Rotation

    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xy", [rx, ry], degrees=True).as_matrix()
    T[:3, 3] = [shift[0], shift[1], dist]
    return T


def checker_texel(cols, rows, s):
    def f(x, y):
        i, j = np.floor(x / s + 1).astype(int), np.floor(y / s + 1).astype(int)  # inner corners at multiples of s
        inside = (i >= 0) & (i <= cols) & (j >= 0) & (j <= rows)
        c = np.where((i + j) % 2 == 0, 30, 225)
        return np.where(inside, c, 255)
    return f


def test_checkerboard_calibration_recovers_K():
    pattern, s = (8, 6), 0.03
    poses = [board_pose(rx, ry, d, sh) for rx, ry, d, sh in
             [(0, 0, 0.45, (-0.1, -0.07)), (25, 0, 0.5, (-0.12, -0.08)), (-25, 10, 0.5, (-0.1, -0.06)),
              (10, 30, 0.55, (-0.13, -0.07)), (-15, -30, 0.5, (-0.08, -0.09)), (30, 20, 0.6, (-0.1, -0.1))]]
    imgs = [render_plane_pattern(K, T, (640, 480), checker_texel(*pattern, s)) for T in poses]
    res = calibrate_checkerboard(imgs, pattern, s)
    assert len(res.used) >= 5
    assert res.rms_px < 0.3
    assert abs(res.K[0, 0] - 600) < 3 and abs(res.K[1, 1] - 600) < 3
    assert abs(res.K[0, 2] - 319.5) < 3 and abs(res.K[1, 2] - 239.5) < 3
    t_err = np.linalg.norm(res.T_camera_board[0][:3, 3] - poses[res.used[0]][:3, 3] - poses[res.used[0]][:3, :3] @ [0, 0, 0])
    assert t_err < 0.01


def test_charuco_calibration_recovers_K():
    import cv2

    board = charuco_board((7, 5), 0.04, 0.03)
    px_per_m = 4000
    W, H = 7 * 0.04, 5 * 0.04
    tex = board.generateImage((int(W * px_per_m), int(H * px_per_m)), marginSize=0)

    def texel(x, y):
        xi, yi = np.floor(x * px_per_m).astype(int), np.floor(y * px_per_m).astype(int)
        inside = (xi >= 0) & (xi < tex.shape[1]) & (yi >= 0) & (yi < tex.shape[0])
        return np.where(inside, tex[np.clip(yi, 0, tex.shape[0] - 1), np.clip(xi, 0, tex.shape[1] - 1)], 255)

    poses = [board_pose(rx, ry, d, (-0.14, -0.1)) for rx, ry, d in [(0, 0, 0.5), (25, 5, 0.5), (-20, 15, 0.55), (10, -25, 0.5), (-15, -20, 0.6), (30, -15, 0.5), (-25, 25, 0.55)]]
    imgs = [render_plane_pattern(K, T, (640, 480), texel) for T in poses]
    res = calibrate_charuco(imgs, (7, 5), 0.04, 0.03)
    assert len(res.used) >= 4
    assert abs(res.K[0, 0] - 600) < 6 and abs(res.K[0, 2] - 319.5) < 6
    del cv2


def test_calibration_needs_views():
    blank = np.full((480, 640), 255, np.uint8)
    with pytest.raises(CalibrationError, match="at least 3 views"):
        calibrate_checkerboard([blank, blank], (8, 6), 0.03)


def test_pnp_recovers_known_pose():
    T_true = look_at_opencv([0.6, -0.4, 0.5], [0.0, 0.0, 0.0])
    cam = Camera(640, 480, K, T_true)
    rng = np.random.default_rng(0)
    pts = rng.uniform([-0.2, -0.2, 0.0], [0.2, 0.2, 0.15], (8, 3))
    uv = cam.project(pts) + rng.normal(0, 0.2, (8, 2))
    res = solve_pnp(uv, pts, K)
    assert np.linalg.norm(res.T_world_camera[:3, 3] - T_true[:3, 3]) < 0.01
    assert np.degrees(rotation_angle_between(res.T_world_camera[:3, :3], T_true[:3, :3])) < 0.5
    assert res.rms_px < 0.5
    with pytest.raises(CalibrationError, match="at least 4"):
        solve_pnp(uv[:3], pts[:3], K)
    with pytest.raises(CalibrationError, match="pairs"):
        solve_pnp(uv[:5], pts[:6], K)


def test_table_plane():
    pts = np.array([[0.1, 0.1, 0.02], [0.5, 0.1, 0.02], [0.5, -0.3, 0.02], [0.1, -0.3, 0.0201]])
    h, plane = table_height_from_points(pts)
    assert abs(h - 0.02) < 1e-3 and plane.tilt_deg < 0.5
    cam = Camera(640, 480, K, look_at_opencv([0.0, 0.0, 0.6], [0.3, 0.0, 0.0]))
    world = np.array([[0.3, 0.05, 0.02], [0.4, -0.1, 0.02]])
    back = pixels_to_table(cam, cam.project(world), 0.02)
    assert np.abs(back - world).max() < 1e-6
    with pytest.raises(CalibrationError):
        fit_plane(pts[:2])


def test_bridge_camera_file_sapien_pose(tmp_path):
    """The Bridge camera from ../shared/data/README.md (SAPIEN convention, wxyz) converts to an OpenCV pose."""
    d = {"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545,
         "pose": {"position": [0.0, -0.16, 0.336], "quaternion_wxyz": [0.909182, -0.0819809, 0.347277, 0.214629],
                  "convention": "sapien"}}
    p = tmp_path / "camera.json"
    p.write_text(json.dumps(d))
    cam = load_camera(p)
    fwd = cam.T_world_camera[:3, 2]  # OpenCV +Z = viewing direction
    assert fwd[2] < -0.5 and fwd[0] > 0.3  # looks down and forward (+X of the robot base) at the table
    # the point 0.5 m ahead along SAPIEN +X projects to the principal point
    from real2sim.core.geometry import make_pose

    T_sapien = make_pose(d["pose"]["position"], d["pose"]["quaternion_wxyz"])
    ahead = T_sapien[:3, 3] + 0.5 * T_sapien[:3, 0]
    assert np.allclose(cam.project(ahead[None])[0], [319.501, 239.545], atol=1e-6)


def test_camera_file_errors(tmp_path):
    base = {"width": 640, "height": 480, "fx": 600, "fy": 600, "cx": 319.5, "cy": 239.5}
    with pytest.raises(CaptureError, match="principal point"):
        camera_from_dict({**base, "cx": 900}, tmp_path / "c.json")
    with pytest.raises(CaptureError, match="convention"):
        camera_from_dict({**base, "pose": {"position": [0, 0, 0], "quaternion_wxyz": [1, 0, 0, 0]}}, "c.json")
    with pytest.raises(CaptureError, match="missing fx"):
        camera_from_dict({"width": 640, "height": 480, "fy": 1, "cx": 1, "cy": 1}, "c.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(CaptureError, match="bad.json.*invalid JSON"):
        load_camera(bad)
    half = scale_camera(camera_from_dict(base, "c.json"), 320, 240)
    assert abs(half.cx - 159.5) < 1e-9 and abs(half.fx - 300) < 1e-9


def test_camera_file_refuses_a_pose_outside_pose_and_a_misspelt_field(tmp_path, caplog):
    """A pose written at the top level (position, quaternion_wxyz) was silently dropped: the camera sat at the
    origin and the robot was found by motion instead of its model. Now it is refused, naming the field and the fix;
    a misspelt field gets "did you mean"; a field of another tool is ignored with a warning."""
    base = {"width": 640, "height": 480, "fx": 600, "fy": 600, "cx": 319.5, "cy": 239.5}
    pose = {"position": [0, -0.16, 0.336], "quaternion_wxyz": [1, 0, 0, 0], "convention": "sapien"}
    with pytest.raises(CaptureError, match=r"c.json: field 'position' is not read: a camera pose goes under 'pose'"):
        camera_from_dict({**base, **pose}, tmp_path / "c.json")
    with pytest.raises(CaptureError, match=r"'T_world_cam'.*did you mean 'T_world_camera'"):
        camera_from_dict({**base, "T_world_cam": np.eye(4).tolist()}, "c.json")
    with pytest.raises(CaptureError, match=r"unknown field 'distrotion' \(did you mean 'distortion'\?\)"):
        camera_from_dict({**base, "distrotion": [0.1, 0, 0, 0, 0]}, "c.json")
    with caplog.at_level("WARNING", logger="real2sim"):
        cam = camera_from_dict({**base, "pose": pose, "serial": "A1234"}, "c.json")
    assert "field 'serial' is not a camera-file field; ignored" in caplog.text
    assert abs(cam.T_world_camera[2, 3] - 0.336) < 1e-9


def _write_frames(folder, n=4, size=(64, 48)):
    from real2sim.core.imaging import write_rgb

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = np.zeros((size[1], size[0], 3), np.uint8)
        img[..., 0] = 40 * i
        img[10:20, 5 + 5 * i:15 + 5 * i] = 255
        write_rgb(folder / f"f{i:03d}.png", img)


def _write_video(path, n=6, size=(64, 48), fps=10):
    import cv2

    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    for i in range(n):
        w.write(np.full((size[1], size[0], 3), 30 * i, np.uint8))
    w.release()


def test_init_from_image_folder_and_camera(tmp_path):
    from real2sim.capture import init_bundle
    from real2sim.core.bundle import Bundle

    _write_frames(tmp_path / "frames")
    cam = tmp_path / "camera.json"
    cam.write_text(json.dumps({"width": 64, "height": 48, "fx": 60, "fy": 60, "cx": 31.5, "cy": 23.5,
                               "T_world_camera": np.eye(4).tolist()}))
    b = init_bundle(tmp_path / "scene", tmp_path / "frames", camera=cam, robot="widowx")
    b = Bundle.load(b.root)
    assert len(b.manifest.capture.frames) == 4
    # each stored frame is its source image, in order (PNG in, PNG out: bit for bit)
    from PIL import Image

    for f, src in zip(b.manifest.capture.frames, sorted((tmp_path / "frames").glob("*.png")), strict=True):
        assert np.array_equal(np.asarray(Image.open(b.path(f.image)).convert("RGB")),
                              np.asarray(Image.open(src).convert("RGB"))), f.image
    assert b.manifest.cameras["main"].width == 64
    assert b.manifest.robot.name == "widowx250s" and len(b.manifest.robot.joint_positions) == 8
    assert b.manifest.stages["capture"].status == "done"
    assert (b.root / "reports" / "capture.png").is_file()


def test_init_from_video_and_lerobot(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from real2sim.capture import init_bundle

    _write_video(tmp_path / "clip.mp4")
    b = init_bundle(tmp_path / "v", tmp_path / "clip.mp4")
    assert len(b.manifest.capture.frames) == 6
    assert abs(b.manifest.capture.frames[2].timestamp - 0.2) < 1e-6
    from PIL import Image

    # frame i of the clip is grey level 30 i (mp4 compression moves it a few levels)
    means = [np.asarray(Image.open(b.path(f.image)).convert("RGB"), float).mean() for f in b.manifest.capture.frames]
    assert np.abs(np.array(means) - 30 * np.arange(6)).max() < 6, means

    root = tmp_path / "lerobot"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({
        "fps": 10, "chunks_size": 1000,
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
        "features": {"observation.images.top": {"dtype": "video", "shape": [48, 64, 3]},
                     "observation.state": {"dtype": "float32", "shape": [7]}}}))
    (root / "data" / "chunk-000").mkdir(parents=True)
    vdir = root / "videos" / "chunk-000" / "observation.images.top"
    vdir.mkdir(parents=True)
    _write_video(vdir / "episode_000000.mp4")
    state = [[0.1 * i + j for j in range(7)] for i in range(6)]
    pq.write_table(pa.table({"timestamp": [i / 10 for i in range(6)], "frame_index": list(range(6)),
                             "observation.state": state}), root / "data" / "chunk-000" / "episode_000000.parquet")
    b = init_bundle(tmp_path / "l", root)
    fr = b.manifest.capture.frames
    assert len(fr) == 6 and fr[3].joint_positions == pytest.approx(state[3])


def test_bad_inputs_name_the_file_and_keep_the_bundle(tmp_path):
    from real2sim.capture import init_bundle
    from real2sim.core.imaging import write_rgb

    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(CaptureError, match="empty.mp4.*empty"):
        init_bundle(tmp_path / "a", empty)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video" * 50)
    with pytest.raises(CaptureError, match="junk.mp4.*(cannot be opened|no frames)"):
        init_bundle(tmp_path / "a", junk)
    assert not (tmp_path / "a").exists()
    _write_frames(tmp_path / "mixed")
    write_rgb(tmp_path / "mixed" / "f999.png", np.zeros((40, 30, 3), np.uint8))
    with pytest.raises(CaptureError, match="f999.png.*one size"):
        init_bundle(tmp_path / "a", tmp_path / "mixed")
    # an existing bundle is untouched by a bad camera file
    _write_frames(tmp_path / "ok")
    b = init_bundle(tmp_path / "s", tmp_path / "ok")
    before = (b.root / "scene.json").read_text()
    cam = tmp_path / "camera.json"
    cam.write_text(json.dumps({"width": 640, "height": 480, "fx": 600, "fy": 600, "cx": 319.5, "cy": 239.5}))
    with pytest.raises(CaptureError, match="camera.json.*640x480.*64x48.*scale"):
        init_bundle(tmp_path / "s", tmp_path / "ok", camera=cam, overwrite=True)
    assert (b.root / "scene.json").read_text() == before


ROS_CALIBRATION = """image_width: 640
image_height: 480
camera_name: wrist
camera_matrix:
  rows: 3
  cols: 3
  data: [615.2, 0.0, 321.5, 0.0, 614.8, 238.9, 0.0, 0.0, 1.0]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [0.11, -0.23, 0.001, -0.002, 0.05]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]
projection_matrix:
  rows: 3
  cols: 4
  data: [615.2, 0.0, 321.5, 0.0, 0.0, 614.8, 238.9, 0.0, 0.0, 0.0, 1.0, 0.0]
"""

ROS2_ECHO = """header:
  stamp:
    sec: 12
    nanosec: 0
  frame_id: camera_color_optical_frame
height: 480
width: 640
distortion_model: plumb_bob
d: [0.11, -0.23, 0.001, -0.002, 0.05]
k: [615.2, 0.0, 321.5, 0.0, 614.8, 238.9, 0.0, 0.0, 1.0]
r: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
p: [615.2, 0.0, 321.5, 0.0, 0.0, 614.8, 238.9, 0.0, 0.0, 0.0, 1.0, 0.0]
binning_x: 0
binning_y: 0
"""


def _opencv_calibration(path):
    import cv2

    fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_WRITE)
    fs.write("image_width", 640)
    fs.write("image_height", 480)
    fs.write("camera_matrix", np.array([[615.2, 0, 321.5], [0, 614.8, 238.9], [0, 0, 1]]))
    fs.write("distortion_coefficients", np.array([[0.11, -0.23, 0.001, -0.002, 0.05]]))
    fs.write("avg_reprojection_error", 0.21)
    fs.release()
    return path


def test_camera_files_of_ros_and_opencv_give_the_same_intrinsics(tmp_path):
    """What a robotics engineer already has: ROS camera_calibration's YAML, a topic echo of camera_info, OpenCV's
    calibration sample output (YAML and XML)."""
    (tmp_path / "ros.yaml").write_text(ROS_CALIBRATION)
    (tmp_path / "echo.yaml").write_text(ROS2_ECHO)
    files = [tmp_path / "ros.yaml", tmp_path / "echo.yaml", _opencv_calibration(tmp_path / "cv.yml"),
             _opencv_calibration(tmp_path / "cv.xml")]
    for f in files:
        cam = load_camera(f)
        assert (cam.width, cam.height) == (640, 480), f.name
        np.testing.assert_allclose([cam.fx, cam.fy, cam.cx, cam.cy], [615.2, 614.8, 321.5, 238.9], err_msg=f.name)
        np.testing.assert_allclose(cam.distortion, [0.11, -0.23, 0.001, -0.002, 0.05], err_msg=f.name)
        np.testing.assert_allclose(cam.T_world_camera, np.eye(4))  # no pose in these files: given by --points later


def test_a_fisheye_camera_info_is_refused_with_the_fix(tmp_path):
    f = tmp_path / "fish.yaml"
    f.write_text(ROS2_ECHO.replace("plumb_bob", "equidistant").replace("d: [0.11, -0.23, 0.001, -0.002, 0.05]",
                                                                        "d: [0.1, 0.01, 0.0, 0.0]"))
    with pytest.raises(CaptureError, match=r"fish.yaml.*equidistant.*undistort"):
        load_camera(f)
    f.write_text(ROS_CALIBRATION.replace("image_width: 640\n", ""))
    with pytest.raises(CaptureError, match="image_width"):
        load_camera(f)


def _lerobot_v3(root, lengths=(5, 7), fps=10):
    """A LeRobot v3.0 dataset as LeRobot's writer packs it: every episode in one data file and one video file, an
    episode index in meta/episodes saying where each one is. Frame j of episode e is grey 20 (e + 1) + 12 j."""
    import cv2
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = "observation.images.wrist"
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "videos" / key / "chunk-000").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({
        "codebase_version": "v3.0", "fps": fps, "chunks_size": 1000,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": {key: {"dtype": "video", "shape": [48, 64, 3]}, "observation.state": {"dtype": "float32", "shape": [3]}}}))
    w = cv2.VideoWriter(str(root / "videos" / key / "chunk-000" / "file-000.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), fps, (64, 48))
    data = {"episode_index": [], "frame_index": [], "index": [], "timestamp": [], "observation.state": []}
    eps = {c: [] for c in ("episode_index", "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index",
                           f"videos/{key}/chunk_index", f"videos/{key}/file_index", f"videos/{key}/from_timestamp",
                           f"videos/{key}/to_timestamp", "length")}
    start = 0
    for e, n in enumerate(lengths):
        for j in range(n):
            w.write(np.full((48, 64, 3), 20 * (e + 1) + 12 * j, np.uint8))
            data["episode_index"].append(e)
            data["frame_index"].append(j)
            data["index"].append(start + j)
            data["timestamp"].append(j / fps)
            data["observation.state"].append([float(e), float(j), 0.5])
        for c, v in zip(eps, (e, 0, 0, start, start + n, 0, 0, start / fps, (start + n) / fps, n)):
            eps[c].append(v)
        start += n
    w.release()
    pq.write_table(pa.table(data), root / "data" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.table(eps), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    return root


def test_lerobot_v3_episode_is_read_from_its_stretch_of_the_shared_files(tmp_path):
    from real2sim.capture.frames import read_frames

    root = _lerobot_v3(tmp_path / "ds")
    src = read_frames(root, episode=1)
    assert src.frames.shape == (7, 48, 64, 3)
    means = src.frames.reshape(7, -1).mean(1)
    assert np.abs(means - (40 + 12 * np.arange(7))).max() < 6, means  # episode 1's frames, not episode 0's
    assert src.joint_positions[3] == pytest.approx([1.0, 3.0, 0.5])
    assert src.timestamps[:3] == pytest.approx([0.0, 0.1, 0.2])
    assert read_frames(root / "data" / "chunk-000" / "file-000.parquet", episode=0).frames.shape[0] == 5
    with pytest.raises(CaptureError, match=r"episode 4 is not in this dataset \(2 episodes"):
        read_frames(root, episode=4)


def test_a_long_clip_is_thinned_with_a_warning_and_stride_1_keeps_every_frame(tmp_path, caplog):
    """A minute of video would be hours of fitting and gigabytes of frames: thinned to <= 300, saying how to keep all."""
    import cv2

    from real2sim.capture import init_bundle
    from real2sim.capture.frames import count_frames

    path = tmp_path / "long.mp4"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 30, (32, 16))
    for i in range(610):
        f = np.zeros((16, 32, 3), np.uint8)
        f[:, : 1 + i // 20] = 255  # the white band grows with time: frame order is visible
        w.write(f)
    w.release()
    assert count_frames(path) == 610
    with caplog.at_level("WARNING"):
        b = init_bundle(tmp_path / "thin", path)
    fr = b.manifest.capture.frames
    assert len(fr) == 204 and fr[1].timestamp == pytest.approx(3 / 30)  # every 3rd frame
    assert "610 frames; keeping one in 3 (204 frames" in caplog.text and "--stride 1" in caplog.text
    from PIL import Image

    band = [int((np.asarray(Image.open(b.path(f.image)))[8, :, 0] > 127).sum()) for f in fr[::40]]
    assert band == [1 + (3 * i * 40) // 20 for i in range(len(band))]
    assert len(init_bundle(tmp_path / "all", path, stride=1).manifest.capture.frames) == 610
