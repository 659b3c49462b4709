"""Robots: registry, resolved URDFs, kinematics agreement (MuJoCo / SAPIEN / USD / pinocchio), one controller."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pinocchio")
pytest.importorskip("xacro")

from real2sim.core.errors import UnknownNameError  # noqa: E402
from real2sim.core.manifest import Pose  # noqa: E402
from real2sim.robots import get_robot, list_robots  # noqa: E402

ROBOTS = ["widowx250s", "panda"]
BASE = Pose([-0.35, 0.1, 0.02], [0.9238795, 0.0, 0.0, 0.3826834])  # 45 deg about z


def _angle_deg(Ra, Rb) -> float:
    c = np.clip((np.trace(Ra.T @ Rb) - 1) / 2, -1, 1)
    return float(np.degrees(np.arccos(c)))


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """{robot: {engine: LoadedScene}} of robot-only bundles (physics only), built once."""
    from real2sim.engines.sandbox import robot_scene

    out = {}
    for r in ROBOTS:
        out[r] = {e: robot_scene(r, e, tmp_path_factory.mktemp(f"{r}_{e}"), base_pose=BASE) for e in ("mjcf", "sapien")}
    yield out
    for d in out.values():
        for s in d.values():
            s.close()


def test_registry_names_and_aliases():
    assert set(ROBOTS) <= set(list_robots())
    assert get_robot("widowx").name == "widowx250s"
    assert get_robot("franka").name == "panda"
    with pytest.raises(UnknownNameError, match="did you mean 'panda'"):
        get_robot("pandaa")


def test_resolved_urdf_is_deterministic_and_self_contained(tmp_path, monkeypatch):
    import xml.etree.ElementTree as ET
    from pathlib import Path

    from real2sim.robots.spec import resolve_urdf

    r = get_robot("widowx250s")
    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "a"))
    a = resolve_urdf(r)
    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "b"))
    b = resolve_urdf(r)
    assert a != b and a.read_bytes() == b.read_bytes()
    root = ET.parse(a).getroot()
    assert not root.findall("transmission") and "interbotix_gazebo" not in a.read_text()
    for m in root.iter("mesh"):
        assert Path(m.get("filename")).is_absolute() and Path(m.get("filename")).is_file()
    types = {j.get("name"): j.get("type") for j in root.findall("joint")}
    assert types["gripper"] == "fixed"  # the cosmetic prop joint is frozen
    assert all(types[j] != "fixed" for j in r.joint_names)


@pytest.mark.parametrize("robot", ROBOTS)
def test_kinematics_agree_mujoco_sapien_pinocchio(scenes, robot):
    from real2sim.robots.kinematics import Kinematics

    k = Kinematics(robot)
    r = k.robot
    rng = np.random.default_rng(42)
    base = BASE.matrix()
    worst_mm, worst_deg = 0.0, 0.0
    for _ in range(100):
        q = rng.uniform(k.lower, k.upper)
        ref = base @ k.fk(q)
        for eng, sc in scenes[robot].items():
            sc.set_robot_qpos(q)
            T = sc.link_pose(r.ee_link) @ k.T_link_ee
            worst_mm = max(worst_mm, 1e3 * float(np.linalg.norm(T[:3, 3] - ref[:3, 3])))
            worst_deg = max(worst_deg, _angle_deg(T[:3, :3], ref[:3, :3]))
            np.testing.assert_allclose(sc.robot_qpos(), q, atol=1e-5)
    assert worst_mm < 1.0 and worst_deg < 0.5, (worst_mm, worst_deg)


@pytest.mark.parametrize("robot", ROBOTS)
def test_usd_articulation_matches_kinematics(tmp_path, robot):
    pytest.importorskip("pxr")
    from pxr import UsdPhysics

    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.engines.usd.writer import UsdExporter
    from real2sim.robots.kinematics import Kinematics

    k = Kinematics(robot)
    q = np.random.default_rng(3).uniform(k.lower, k.upper)
    b = robot_only_bundle(robot, tmp_path, base_pose=BASE, qpos=q)
    res = UsdExporter().export(b)
    sc = UsdExporter().load(res.main_file.parent)
    assert "robot" in sc.capabilities and sc.robot_name() == robot
    np.testing.assert_allclose(sc.robot_qpos(), q, atol=1e-9)
    T = sc.link_pose(k.robot.ee_link) @ k.T_link_ee
    ref = BASE.matrix() @ k.fk(q)
    assert np.linalg.norm(T[:3, 3] - ref[:3, 3]) < 1e-6 and _angle_deg(T[:3, :3], ref[:3, :3]) < 1e-4
    stage = sc.stage
    robot_prim = stage.GetPrimAtPath("/World/Robot")
    assert robot_prim.HasAPI(UsdPhysics.ArticulationRootAPI)
    joints = list(stage.GetPrimAtPath("/World/Robot/Joints").GetChildren())
    revolute = [j for j in joints if j.IsA(UsdPhysics.RevoluteJoint)]
    prismatic = [j for j in joints if j.IsA(UsdPhysics.PrismaticJoint)]
    assert len(revolute) == k.robot.n_arm and len(prismatic) == len(k.robot.gripper_joints)
    j0 = revolute[0]
    drive = UsdPhysics.DriveAPI(j0, "angular")
    kd = dict(zip(k.robot.joint_names, k.robot.default_stiffness()))
    name = j0.GetCustomDataByKey("real2sim:id")
    assert drive.GetStiffnessAttr().Get() == pytest.approx(kd[name] * np.pi / 180)
    assert UsdPhysics.RevoluteJoint(j0).GetUpperLimitAttr().Get() == pytest.approx(
        np.degrees(k.upper[k.robot.joint_names.index(name)]))
    for link in stage.GetPrimAtPath("/World/Robot").GetChildren():
        if link.GetName() != "Joints":
            assert link.HasAPI(UsdPhysics.RigidBodyAPI) and link.HasAPI(UsdPhysics.MassAPI)


def _actions(n, seed=1):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.uniform(-0.02, 0.02, (n, 3)), rng.uniform(-0.06, 0.06, (n, 3)),
                           (rng.uniform(size=(n, 1)) > 0.5).astype(float)], 1)


@pytest.mark.parametrize("robot", ROBOTS)
def test_controller_replay_agrees_across_engines(scenes, robot):
    from real2sim.robots.control import Controller, replay

    acts = _actions(15)
    paths = {}
    for eng, sc in scenes[robot].items():
        ctl = Controller(sc)
        poses, _ = replay(ctl, acts, get_robot(robot).default_qpos)
        paths[eng] = poses[:, :3, 3]
        # the arm follows its targets: the last measured pose is near the last target
        assert np.linalg.norm(poses[-1, :3, 3] - ctl.T_target[:3, 3]) < 0.02
    travel = np.linalg.norm(np.diff(paths["mjcf"], axis=0), axis=1).sum()
    gap = np.linalg.norm(paths["mjcf"] - paths["sapien"], axis=1).max()
    assert travel > 0.05, travel  # it really moved
    assert gap < 0.005, gap


def test_replay_is_deterministic(scenes):
    from real2sim.robots.control import Controller, replay

    sc = scenes["widowx250s"]["mjcf"]
    ctl = Controller(sc)
    a, qa = replay(ctl, _actions(8, 5), get_robot("widowx").default_qpos)
    b, qb = replay(ctl, _actions(8, 5), get_robot("widowx").default_qpos)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(qa, qb)


def test_controller_rates_and_modes(scenes):
    from real2sim.core.errors import Real2SimError
    from real2sim.robots.control import Controller, ControllerConfig

    sc = scenes["widowx250s"]["mjcf"]
    ctl = Controller(sc)
    assert ctl.substeps == 100 and sc.physics_timestep == pytest.approx(0.002)  # WidowX: 5 Hz / 500 Hz
    ctl = Controller(sc, ControllerConfig(mode="joint_pos", control_hz=10, physics_hz=1000))
    assert ctl.substeps == 100 and sc.physics_timestep == pytest.approx(0.001)
    q = np.array(get_robot("widowx").default_qpos)
    ctl.reset(q)
    target = q[:6] + 0.1
    for _ in range(10):
        ctl.step(np.concatenate([target, [0.0]]))
    assert np.abs(sc.robot_qpos()[:6] - target).max() < 0.01
    assert sc.robot_qpos()[6] == pytest.approx(0.015, abs=2e-3)  # gripper closed
    with pytest.raises(Real2SimError, match="whole multiple"):
        Controller(sc, ControllerConfig(control_hz=3, physics_hz=500))
    with pytest.raises(Real2SimError, match="7 finite numbers"):
        Controller(sc).step([0.0] * 6)


@pytest.mark.parametrize("robot", ROBOTS)
def test_ik_reaches_and_is_fast(robot):
    from real2sim.robots.kinematics import Kinematics

    k = Kinematics(robot)
    q0 = np.array(k.robot.default_qpos)
    rng = np.random.default_rng(0)
    for _ in range(50):  # IK speed is measured in benchmarks/bench_robots.py, not asserted here
        q = q0.copy()
        q[: k.robot.n_arm] += rng.normal(0, 0.05, k.robot.n_arm)
        T = k.fk(q)
        qa, ok = k.ik(T, q0)
        assert ok
        assert np.linalg.norm(k.fk(np.concatenate([qa, q0[k.robot.n_arm:]]))[:3, 3] - T[:3, 3]) < 1e-4


def test_scene_export_with_robot_keeps_objects(exportable_bundle):
    from real2sim.core.manifest import RobotSpec
    from real2sim.engines import get_exporter

    before = {}
    for eng in ("mjcf", "sapien"):
        ex = get_exporter(eng)
        sc = ex.load(ex.export(exportable_bundle).main_file.parent)
        before[eng] = {o: sc.object_pose(o) for o in sc.object_ids()}
        sc.close()
    exportable_bundle.manifest.robot = RobotSpec(name="widowx", base_pose=Pose([-0.35, 0, 0], [1, 0, 0, 0]))
    exportable_bundle.save()
    for eng in ("mjcf", "sapien", "usd"):
        ex = get_exporter(eng)
        sc = ex.load(ex.export(exportable_bundle).main_file.parent)
        assert "robot" in sc.capabilities
        if eng in before:
            assert sorted(sc.object_ids()) == sorted(before[eng])
            for o, T in before[eng].items():
                np.testing.assert_allclose(sc.object_pose(o), T, atol=1e-9)
        np.testing.assert_allclose(sc.robot_base_pose()[:3, 3], [-0.35, 0, 0], atol=1e-6)
        sc.close()


def test_bad_robot_gains_length(exportable_bundle):
    from real2sim.core.errors import ExportError
    from real2sim.core.manifest import RobotSpec
    from real2sim.engines import get_exporter

    exportable_bundle.manifest.robot = RobotSpec(name="widowx", stiffness=[1.0, 2.0])
    with pytest.raises(ExportError, match="robot.stiffness has 2 values"):
        get_exporter("mjcf").export(exportable_bundle)


def test_recipe_robot_entry(tmp_path):
    import json
    import shutil

    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    src = builtin_recipe("tabletop")
    shutil.copytree(src.parent, tmp_path / "rec")
    data = json.loads(src.read_text())
    data["robot"] = {"name": "widowx", "base_pose": {"position": [-0.35, 0, 0], "quaternion_wxyz": [1, 0, 0, 0]}}
    (tmp_path / "rec" / "recipe.json").write_text(json.dumps(data))
    b = bundle_from_recipe(tmp_path / "rec" / "recipe.json", tmp_path / "b")
    assert b.manifest.robot.name == "widowx250s"
    assert b.manifest.robot.joint_positions == pytest.approx(list(get_robot("widowx").default_qpos))
    data["robot"]["name"] = "widowy"
    (tmp_path / "rec" / "recipe.json").write_text(json.dumps(data))
    with pytest.raises(UnknownNameError, match="did you mean"):
        bundle_from_recipe(tmp_path / "rec" / "recipe.json", tmp_path / "c")
    assert not (tmp_path / "c").exists()  # nothing written for a refused recipe


def test_camera_mount_follows_the_link():
    from real2sim.robots.kinematics import Kinematics, camera_mount_pose

    k = Kinematics("widowx")
    q = np.array(k.robot.default_qpos)
    T = camera_mount_pose(k, "wrist", q)
    L = k.link_pose(q, "gripper_bar_link")
    np.testing.assert_allclose(np.linalg.inv(L) @ T, np.array([[1, 0, 0, 0.02], [0, 1, 0, 0], [0, 0, 1, 0.04], [0, 0, 0, 1]]),
                               atol=1e-12)
    with pytest.raises(UnknownNameError):
        camera_mount_pose(k, "nope", q)


def test_robot_mask_in_both_renderers(exportable_bundle):
    from real2sim.core.manifest import RobotSpec
    from real2sim.engines import get_exporter

    exportable_bundle.manifest.robot = RobotSpec(name="widowx", base_pose=Pose([-0.35, 0, 0], [1, 0, 0, 0]))
    exportable_bundle.save()
    masks = {}
    for eng in ("mjcf", "sapien"):
        ex = get_exporter(eng)
        sc = ex.load(ex.export(exportable_bundle).main_file.parent)
        if "render" not in sc.capabilities:
            sc.close()
            continue
        masks[eng] = sc.robot_mask("main")
        assert not (masks[eng] & sc.object_mask("main", "cube")).any()
        sc.close()
    if len(masks) < 1:
        pytest.skip("no renderer available")
    for m in masks.values():
        assert m.sum() > 500  # the arm is in view
    if len(masks) == 2:
        iou = (masks["mjcf"] & masks["sapien"]).sum() / (masks["mjcf"] | masks["sapien"]).sum()
        assert iou > 0.9, iou


def test_drive_force_limits_reach_both_engines(scenes):
    """A robot definition's drive limits (Panda: ManiSkill's 100 N m / 100 N) become MuJoCo actuator force ranges
    and SAPIEN drive force limits."""
    r = get_robot("panda")
    want = np.asarray(r.default_force_limit())
    assert np.all(np.isfinite(want)) and len(want) == r.dof
    mj = scenes["panda"]["mjcf"]
    act = [mj.model.actuator(f"robot/{n}").id for n in r.joint_names]
    assert np.all(mj.model.actuator_forcelimited[act] == 1)
    np.testing.assert_allclose(mj.model.actuator_forcerange[act], np.c_[-want, want])
    sp = scenes["panda"]["sapien"]
    np.testing.assert_allclose([j.force_limit for j in sp._joints], want, rtol=1e-6)
