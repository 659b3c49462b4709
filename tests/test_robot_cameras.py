"""Robot-mounted cameras: cameras of every export (MuJoCo camera in the link body, SAPIEN camera that follows the link,
USD camera under the link prim) that project like the OpenCV model at every pose, render from the moving link, and
serve as env observations in render mode (compositing refused: a moving camera has no plate)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from robotfiles import write_two_link_robot  # noqa: E402

from real2sim.core.camera import Camera  # noqa: E402
from real2sim.robots import get_robot  # noqa: E402

# a camera on the upper arm looking back at it and the forearm (its +Z along the link's -X, image down along the
# link's -Z); the base (below z = 0.09 m in this link) stays out of its view
ELBOW_CAM = {"link": "upper", "position": [0.6, 0.0, 0.45], "quaternion_wxyz": [0.5, -0.5, -0.5, 0.5],
             "width": 128, "height": 96, "fx": 80.0, "fy": 82.0, "cx": 62.0, "cy": 49.5}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "cache"))


def _robot_file(tmp_path):
    from robotfiles import DEFINITION

    mounts = {**DEFINITION["camera_mounts"], "elbow_cam": ELBOW_CAM}
    return write_two_link_robot(tmp_path / "arm", "json", camera_mounts=mounts)


def _points_in_view(T_world_cam, rng, n=40):
    """``n`` world points in front of a camera at ``T_world_cam`` (OpenCV axes), 0.2-1.5 m away."""
    pc = np.c_[rng.uniform(-0.3, 0.3, (n, 2)), rng.uniform(0.2, 1.5, n)]
    return pc @ T_world_cam[:3, :3].T + T_world_cam[:3, 3]


def test_mounted_camera_projects_like_the_opencv_model_in_every_engine(tmp_path):
    """At random joint values, each engine's own camera (MuJoCo's cam_xpos/intrinsics, SAPIEN's intrinsic and
    extrinsic matrices, USD's camera attributes under the link) projects like the OpenCV model placed at the
    mount's pose from pinocchio's FK: within 0.5 px (measured: < 1e-3 px)."""
    from real2sim.engines import get_exporter
    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.robots.kinematics import Kinematics, camera_mount_pose

    path = _robot_file(tmp_path)
    r = get_robot(str(path))
    kin = Kinematics(r)
    assert sorted(r.mounted_cameras()) == ["elbow_cam", "wrist"]
    rng = np.random.default_rng(7)
    worst = {}
    for eng in ("mjcf", "sapien", "usd"):
        ex = get_exporter(eng)
        b = robot_only_bundle(path, tmp_path / eng)
        sc = ex.load(ex.export(b).main_file.parent)
        assert sc.mounted_cameras() == {"elbow_cam": "upper", "wrist": "hand"}
        poses = [np.asarray(r.default_qpos)] + ([rng.uniform(kin.lower, kin.upper) for _ in range(5)]
                                                 if "physics" in sc.capabilities else [])
        err = 0.0
        for q in poses:
            if "physics" in sc.capabilities:
                sc.set_robot_qpos(q)
            for name, (_, cam) in r.mounted_cameras().items():
                T = camera_mount_pose(kin, name, q)  # robot base at the world origin
                ref = Camera(cam.width, cam.height, cam.K, T)
                pts = _points_in_view(T, rng)
                err = max(err, float(np.abs(sc.project(name, pts) - ref.project(pts)).max()))
        sc.close()
        worst[eng] = err
    assert max(worst.values()) < 0.5, worst
    # USD: exported at another pose, the camera under the link moves with it
    q = rng.uniform(kin.lower, kin.upper)
    b = robot_only_bundle(path, tmp_path / "usd_q", qpos=q)
    ex = get_exporter("usd")
    sc = ex.load(ex.export(b).main_file.parent)
    T = camera_mount_pose(kin, "wrist", q)
    pts = _points_in_view(T, rng)
    cam = r.mounted_cameras()["wrist"][1]
    assert np.abs(sc.project("wrist", pts) - Camera(cam.width, cam.height, cam.K, T).project(pts)).max() < 0.5
    params = sc.camera_params("wrist")
    assert (params["width"], params["height"]) == (160, 120)


def test_mounted_camera_renders_from_the_moving_link(tmp_path):
    """The elbow camera rides on the upper arm: turning the waist (which carries the upper arm) leaves its view of
    the arm unchanged, bending the elbow changes it; MuJoCo and SAPIEN see the same arm (mask IoU)."""
    from real2sim.engines import get_exporter
    from real2sim.engines.sandbox import robot_only_bundle

    path = _robot_file(tmp_path)
    r = get_robot(str(path))
    masks = {}
    for eng in ("mjcf", "sapien"):
        ex = get_exporter(eng)
        sc = ex.load(ex.export(robot_only_bundle(path, tmp_path / eng)).main_file.parent)
        if "render" not in sc.capabilities:
            sc.close()
            continue
        q = np.asarray(r.default_qpos, float)
        sc.set_robot_qpos(q)
        m0 = sc.robot_mask("elbow_cam")
        img = sc.render("elbow_cam")
        assert img.shape == (96, 128, 3)
        sc.set_robot_qpos(q + [1.2, 0, 0, 0, 0])  # waist
        m1 = sc.robot_mask("elbow_cam")
        sc.set_robot_qpos(q + [0, -1.2, 0, 0, 0])  # elbow
        m2 = sc.robot_mask("elbow_cam")
        sc.close()
        assert m0.sum() > 300, (eng, m0.sum())
        same = (m0 & m1).sum() / (m0 | m1).sum()
        changed = (m0 & m2).sum() / (m0 | m2).sum()
        assert same > 0.97 and changed < 0.9, (eng, same, changed)
        masks[eng] = m0
    if len(masks) < 2:
        pytest.skip("needs both renderers (EGL for MuJoCo, Vulkan for SAPIEN)")
    iou = (masks["mjcf"] & masks["sapien"]).sum() / (masks["mjcf"] | masks["sapien"]).sum()
    assert iou > 0.85, iou


def test_mounted_camera_name_clash_and_set_pose_refused(tmp_path):
    from real2sim.core.errors import ExportError, UnsupportedCapability
    from real2sim.core.manifest import CameraSpec
    from real2sim.engines import get_exporter
    from real2sim.engines.sandbox import robot_only_bundle

    path = _robot_file(tmp_path)
    b = robot_only_bundle(path, tmp_path / "b")
    sc = get_exporter("mjcf").load(get_exporter("mjcf").export(b).main_file.parent)
    with pytest.raises(UnsupportedCapability, match="'wrist' is mounted on robot link 'hand'"):
        sc.set_camera_pose("wrist", np.eye(4))
    sc.close()
    cam = Camera(64, 48, np.array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]]), np.eye(4))
    b.manifest.cameras["wrist"] = CameraSpec.from_camera(cam)
    b.save()
    for eng in ("mjcf", "sapien", "usd"):
        with pytest.raises(ExportError, match=r"camera\(s\) wrist share a name with camera mounts.*Fix: rename"):
            get_exporter(eng).export(b)


def test_env_observes_through_a_mounted_camera_in_render_mode(tmp_path):
    """An env on a bundle whose robot has a wrist camera: camera='wrist' gives the wrist's images (its own size) in
    render mode, and they change as the arm moves; composited mode is refused for it (no plate for a moving
    camera), and a fixed camera still composites."""
    pytest.importorskip("gymnasium")
    from envbundle import TASKS, _collide_plate_export

    from real2sim.core.errors import UnsupportedCapability
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    src = builtin_recipe()
    shutil.copytree(src.parent, tmp_path / "rec")
    _robot_file(tmp_path / "rec")
    recipe = json.loads(src.read_text())
    recipe["robot"] = {"definition": "arm/robot.json",
                       "base_pose": {"position": [-0.35, 0.0, 0.0], "quaternion_wxyz": [1, 0, 0, 0]}}
    (tmp_path / "rec" / "recipe.json").write_text(json.dumps(recipe))
    b = bundle_from_recipe(tmp_path / "rec" / "recipe.json", tmp_path / "bundle")
    b = _collide_plate_export(b, plate=True, engines=("mjcf", "sapien"), tasks=TASKS)
    seen = {}
    for backend in ("mujoco", "sapien"):
        env = Real2SimEnv(b.root, task="lift_cube", backend=backend, obs_mode="render", camera="wrist",
                          control_mode="joint_pos")
        if "render" not in env.scene.capabilities:
            env.close()
            continue
        obs, _ = env.reset(seed=0)
        assert obs["image"].shape == (120, 160, 3)
        frames = []
        for waist in (0.0, 0.6):  # the hand pointing down at the table, then turned with the waist
            for _ in range(4):
                obs, *_ = env.step(np.array([waist, 1.5, 1.5, 1.0], np.float32))
            frames.append(obs["image"])
        assert env.render().shape == (120, 160, 3)
        assert frames[0].mean() > 20, backend  # it sees the lit table, not the empty sky
        assert np.abs(frames[1].astype(int) - frames[0].astype(int)).mean() > 5.0, backend  # the view moved
        seen[backend] = frames[0]
        env.close()
    if not seen:
        pytest.skip("no renderer here")
    with pytest.raises(UnsupportedCapability, match="'wrist' is mounted on the robot.*no background plate.*"
                                                    "obs_mode='render'"):
        Real2SimEnv(b.root, task="lift_cube", backend="mujoco", obs_mode="composited", camera="wrist")
    env = Real2SimEnv(b.root, task="lift_cube", backend="mujoco", obs_mode="composited", control_mode="joint_pos")
    assert env.obs_mode == "composited" and env.camera == "main"
    env.close()
