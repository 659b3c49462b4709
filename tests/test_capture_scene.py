"""One command (`real2sim init ... --points --prompts`) from a fixed-camera clip to a bundle with a calibrated
camera, propagated masks and a plate, on the real Bridge clip."""
from __future__ import annotations

import json

import numpy as np
import pytest

from real2sim.apps.cli import main
from real2sim.core.bundle import Bundle

README_POSE = {"position": [0.0, -0.16, 0.336], "quaternion_wxyz": [0.909182, -0.0819809, 0.347277, 0.214629],
               "convention": "sapien"}
INTRINSICS = {"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545}
PROMPTS = {"can": {"points": [[240, 300]]}, "pot": {"points": [[300, 150]]}, "eggplant": {"frame": 0, "points": [[410, 230]]}}


def _psnr(a, b, m):
    return float(10 * np.log10(255.0 ** 2 / np.mean((a[m].astype(float) - b[m]) ** 2)))


def _clicks(tmp_path, rng):
    """Pixel <-> world pairs of points on the table, clicked (0.3 px noise) in the camera of the README."""
    from real2sim.capture.camera_file import camera_from_dict

    cam = camera_from_dict({**INTRINSICS, "pose": README_POSE})
    world = np.array([[0.25, -0.15, 0.0], [0.25, 0.15, 0.0], [0.45, -0.2, 0.0], [0.45, 0.2, 0.0], [0.35, 0.0, 0.0],
                      [0.3, 0.1, 0.05]])
    px = cam.project(world) + rng.normal(0, 0.3, (len(world), 2))
    path = tmp_path / "clicks.json"
    path.write_text(json.dumps({"pixels": px.tolist(), "world": world.tolist()}))
    return path, cam


@pytest.fixture(scope="module")
def clip_bundle(tmp_path_factory, shared_data):
    tmp = tmp_path_factory.mktemp("clip")
    rng = np.random.default_rng(0)
    clicks, true_cam = _clicks(tmp, rng)
    off = {**INTRINSICS, "pose": {**README_POSE, "position": [0.03, -0.13, 0.36]}}  # a tape-measure guess, 4.6 cm off
    (tmp / "camera.json").write_text(json.dumps(off))
    (tmp / "prompts.json").write_text(json.dumps(PROMPTS))
    root = tmp / "clip"
    assert main(["init", str(root), "--frames", str(shared_data / "bridge" / "bridge_real_1.mp4"), "--camera",
                 str(tmp / "camera.json"), "--robot", "widowx", "--points", str(clicks), "--prompts",
                 str(tmp / "prompts.json")]) == 0
    return Bundle.load(root), true_cam, shared_data


def test_one_command_gives_a_calibrated_camera(clip_bundle):
    b, true_cam, _ = clip_bundle
    T = np.array(b.manifest.cameras["main"].camera().T_world_camera)
    T0 = np.asarray(true_cam.T_world_camera)
    assert np.linalg.norm(T[:3, 3] - T0[:3, 3]) < 0.01
    cosang = (np.trace(T[:3, :3].T @ T0[:3, :3]) - 1) / 2
    assert np.degrees(np.arccos(np.clip(cosang, -1, 1))) < 1.0
    summary = json.loads((b.root / "reports" / "capture_summary.json").read_text())
    assert summary["calibration"]["points"] == 6 and summary["calibration"]["rms_px"] < 1.0


def test_one_command_gives_masks_on_every_frame_with_states(clip_bundle):
    b, _, _ = clip_bundle
    cap = b.manifest.capture
    assert len(cap.frames) == 37
    for i in range(37):
        key = f"{i:06d}"
        assert set(cap.masks[key]) == {"can", "pot", "eggplant"}
    states = {e: [cap.mask_state(f"{i:06d}", e) for i in range(37)] for e in PROMPTS}
    assert states["can"][-1] == "moved" and states["pot"].count("moved") == 0 and states["eggplant"].count("moved") == 0
    summary = json.loads((b.root / "reports" / "capture_summary.json").read_text())
    assert summary["masks"]["entities"]["can"]["states"]["moved"] >= 15
    assert (b.root / summary["masks"]["picture"]).is_file()


def test_one_command_plate_shows_the_table_where_the_can_stood(clip_bundle):
    from PIL import Image

    from real2sim.core.imaging import read_mask, read_rgb

    b, _, _ = clip_bundle
    cap = b.manifest.capture
    plate = read_rgb(b.path(cap.plate))
    conf = np.asarray(Image.open(b.path(cap.plate_confidence))) > 0  # seen in some frame, not inpainted
    can0 = read_mask(b.path(cap.masks["000000"]["can"]), plate.shape[:2])
    pot0 = read_mask(b.path(cap.masks["000000"]["pot"]), plate.shape[:2])
    last = read_rgb(b.path(cap.frames[-1].image))  # the can hangs in the gripper elsewhere: its place is bare
    first = read_rgb(b.path(cap.frames[0].image))
    assert conf[can0].mean() > 0.95  # seen once the can was carried away, not invented
    assert _psnr(plate, last, can0) > 22 and _psnr(first, last, can0) < 16
    assert not conf[pot0].any()  # the pot never moved: its place is inpainted (the simulator draws the pot)
    summary = json.loads((b.root / "reports" / "capture_summary.json").read_text())
    assert summary["plate"]["inpainted_fraction"] > 0


def test_bad_prompts_file_names_the_entity_and_field_and_writes_nothing(tmp_path, capsys):
    frames = tmp_path / "frames"
    frames.mkdir()
    from real2sim.core.imaging import write_rgb

    for i in range(2):
        write_rgb(frames / f"{i}.png", np.full((48, 64, 3), 100 + i, np.uint8))
    (tmp_path / "p.json").write_text(json.dumps({"cube": {"points": [[10, 10]], "colour": "red"}}))
    args = ["init", str(tmp_path / "scene"), "--frames", str(frames), "--prompts", str(tmp_path / "p.json")]
    assert main(args) == 2
    assert "'cube' has unknown field(s) ['colour']" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "scene").exists()
    (tmp_path / "p.json").write_text(json.dumps({"cube": {"points": [[10, 10]], "frame": 5}}))
    assert main(args) == 2
    assert "the clip has frames 0..1" in " ".join(capsys.readouterr().err.split())


def test_a_robot_box_alone_captures_and_the_summary_names_the_pictures(tmp_path, capsys):
    """``init --prompts`` with nothing but a box on the robot (no objects to click): the command used to do all the
    work and then fail printing its summary (KeyError: the masks' picture, which only object prompts make). A
    WidowX rendered over the procedural table, its camera known: exit 0, a robot mask in every frame, the robot
    fit's number and the robot fit's and the plate's pictures printed. (Seed 2's clip, used before, fits at 0.63,
    under the gate: no robot masks, and the loop over them checked nothing.)"""
    import cv2

    from real2sim.capture.camera_file import camera_to_dict
    from real2sim.core.imaging import read_mask, write_rgb
    from real2sim.demos.robot_clips import bridge_camera, make_robot_clip, procedural_plate

    camera = bridge_camera(320, 240)
    clip = make_robot_clip(cv2.resize(procedural_plate(), (320, 240), interpolation=cv2.INTER_AREA), camera,
                           n_frames=5, seed=0)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i, f in enumerate(clip.frames):
        write_rgb(frames / f"{i:06d}.png", f)
    (tmp_path / "camera.json").write_text(json.dumps(camera_to_dict(camera)))
    ys, xs = np.nonzero(clip.masks[0])
    box = [int(xs.min()) - 8, int(ys.min()) - 8, int(xs.max()) + 8, int(ys.max()) + 8]
    (tmp_path / "prompts.json").write_text(json.dumps({"robot": {"box": box}}))
    root = tmp_path / "scene"
    capsys.readouterr()
    assert main(["init", str(root), "--frames", str(frames), "--camera", str(tmp_path / "camera.json"),
                 "--robot", "widowx", "--prompts", str(tmp_path / "prompts.json")]) == 0
    out = "".join(capsys.readouterr().out.split())  # (the console wraps long paths)
    b = Bundle.load(root)
    summary = json.loads((root / "reports" / "capture_summary.json").read_text())
    assert str(root / summary["masks"]["robot"]["picture"]) in out
    assert str(root / summary["plate"]["picture"]) in out
    fit = summary["masks"]["robot"]
    assert fit["applied"], fit
    assert f"robot:bymodel,silhouetteIoU{fit['iou_fitted']:.2f}" in out  # the fit's number
    assert len(b.manifest.capture.masks) == 5
    for k, rel in enumerate(sorted(b.manifest.capture.masks)):
        robot = read_mask(b.path(b.manifest.capture.masks[rel]["robot"]))
        assert robot.any(), f"frame {k}: no robot mask"


def _one_command_with_clicks(tmp_path, shared_data, plate_name: str, seed: int, look: int | None = None):
    """The issue's one-command capture (a box on the robot, a click on each hand-outlined object, the camera's
    intrinsics known and its pose not) on a WidowX rendered over the real plate ``plate_name`` (through camera look
    ``look``, as ``bench_capture_init_clips.py --camera``). Returns (frame 0's object masks by name, objects, gain of
    the plate over the plain median away from the objects, which the command takes out of the plate by design: they
    are simulated)."""
    import cv2

    from real2sim.capture.camera_file import camera_to_dict
    from real2sim.core.imaging import read_mask, read_rgb, write_rgb
    from real2sim.demos.mask_cases import plate_objects
    from real2sim.demos.plate_cases import gain_to, real_plates, robot_clip_through_another_camera
    from real2sim.demos.robot_clips import make_robot_clip, robot_box

    plate = real_plates(shared_data).get(plate_name)
    if plate is None:
        pytest.skip(f"the real plate {plate_name} is not in {shared_data}")
    h, w = plate.shape[:2]
    objects = plate_objects(shared_data, plate_name, (w, h))
    clip = make_robot_clip(plate, n_frames=16, seed=seed)
    if look is not None:
        clip = robot_clip_through_another_camera(clip, f"{plate_name}, {len(objects)} objects", look)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i, f in enumerate(clip.frames):
        write_rgb(frames / f"{i:06d}.png", f)
    camera = camera_to_dict(clip.camera)
    del camera["T_world_camera"]  # the intrinsics only
    (tmp_path / "camera.json").write_text(json.dumps(camera))
    prompts = {"robot": {"box": robot_box(clip.masks[0])}, **{n: {"points": [c]} for n, (c, _) in objects.items()}}
    (tmp_path / "prompts.json").write_text(json.dumps(prompts))
    root = tmp_path / "scene"
    assert main(["init", str(root), "--frames", str(frames), "--camera", str(tmp_path / "camera.json"),
                 "--robot", "widowx", "--prompts", str(tmp_path / "prompts.json")]) == 0
    b = Bundle.load(root)
    first = b.manifest.capture.masks[sorted(b.manifest.capture.masks)[0]]
    masks = {name: read_mask(b.path(first[name])) for name in objects}
    places = list(masks.values()) + [outline for _, outline in objects.values()]
    grow = max(7, round(7 * w / 640)) | 1
    away = cv2.dilate(np.any(places, axis=0).astype(np.uint8), np.ones((grow, grow), np.uint8)) == 0
    truth = gain_to(clip.plate[None], clip.frames[0])[0]
    median = np.median(clip.frames, axis=0).round().astype(np.uint8)
    made = read_rgb(b.path(b.manifest.capture.plate))
    return masks, objects, _psnr(made, truth, away) - _psnr(median, truth, away)


@pytest.mark.realdata
def test_object_clicks_with_the_intrinsics_only_keep_the_plate_over_the_median(tmp_path, shared_data):
    """The one command with object clicks on a WidowX over a real Google scene whose objects a person outlined
    (the bin and the can of open_drawer_a2, 320x256): each object gets a mask over its outline in frame 0, and the
    plate, away from the objects, is over the plain median by the issue's 1 dB."""
    from real2sim.core.imaging import iou

    masks, objects, gain = _one_command_with_clicks(tmp_path, shared_data, "open_drawer_a2", seed=102)
    assert sorted(objects) == ["bin", "can"]
    for name, (_, outline) in objects.items():
        assert iou(masks[name], outline) > 0.4, name
    assert gain >= 1.0


@pytest.mark.realdata
@pytest.mark.slow
def test_object_clicks_through_another_cameras_look_keep_the_plate_over_the_median(tmp_path, shared_data):
    """The same over the Bridge plate (the pot, the can and the eggplant clicked, 640x480) through camera look 2
    (`bench_capture_init_clips.py --camera 2`): the plate's step for a thing that stayed in most frames
    (`PlateConfig.foreign_majority`) replaced 3087 pixels of the orange table beside the can, which it judged the
    colour of the things in front by a small margin (log ratio 1.27), with the black of the gripper that stood
    there in several frames, judged the background's by a smaller one (-0.10): +0.58 dB over the median. A set
    replaces the plate only when its colour is more like the background's by twice the margin that called the
    plate's foreign."""
    _, objects, gain = _one_command_with_clicks(tmp_path, shared_data, "bridge_real_1_cleanup", seed=100, look=2)
    assert sorted(objects) == ["can", "eggplant", "pot"]
    assert gain >= 1.0, gain
