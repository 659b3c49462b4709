"""Robot definition files: a robot this project has never seen, from a URDF and a TOML/JSON file, in every engine;
bundles and exports that carry it; bad robots refused with the file, link or joint and the fix."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from robotfiles import DEFINITION, two_link_urdf, write_two_link_robot  # noqa: E402

from real2sim.core.errors import RobotError  # noqa: E402
from real2sim.robots import get_robot  # noqa: E402


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "cache"))


def _run(*args, cwd=None, env_extra=None, check=True):
    env = {**os.environ, "MUJOCO_GL": "egl", "COLUMNS": "200", **(env_extra or {})}
    proc = subprocess.run([sys.executable, "-m", "real2sim", *args], capture_output=True, text=True, env=env,
                          timeout=600, cwd=cwd)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _angle_deg(Ra, Rb) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(Ra.T @ Rb) - 1) / 2, -1, 1))))


# -- a new robot in all three engines ---------------------------------------------------------------------------
@pytest.mark.slow
def test_two_link_robot_file_loads_and_steps_in_every_engine(tmp_path):
    """The done-when item: a two-link arm with a gripper, written here as URDF + TOML, loads in MuJoCo, SAPIEN and USD
    (exported and read back) with FK equal to pinocchio's; in the two simulators the controller moves its hand."""
    from real2sim.engines import get_exporter
    from real2sim.engines.robot_check import check_robot
    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.robots.control import Controller, ControllerConfig
    from real2sim.robots.kinematics import Kinematics

    path = write_two_link_robot(tmp_path / "arm")
    r = get_robot(str(path))
    assert r.name == "twolink" and r.dof == 5 and r.source["kind"] == "file"
    assert get_robot("twolink") is r  # registered under its name for the rest of the process
    rep = check_robot(path, samples=30, work_dir=tmp_path / "check")
    assert rep.ok, rep.lines()
    assert [e["engine"] for e in rep.engines] == ["mjcf", "sapien", "usd"]
    for e in rep.engines:
        assert e["loaded"] and e["fk_samples"] >= 4 and e["fk_worst_mm"] < 1.0 and e["camera_worst_mm"] < 1.0
    assert rep.engines[0]["hold_error"] < 1e-3 and rep.engines[1]["hold_error"] < 1e-3

    kin = Kinematics(r)
    b = robot_only_bundle(path, tmp_path / "b")
    moved = {}
    for eng in ("mjcf", "sapien", "usd"):
        ex = get_exporter(eng)
        sc = ex.load(ex.export(b).main_file.parent)
        assert sc.robot_name() == "twolink" and sc.robot_joint_names() == r.joint_names
        np.testing.assert_allclose(sc.robot_qpos(), r.default_qpos, atol=1e-6)
        ref = kin.fk(r.default_qpos)
        np.testing.assert_allclose(sc.link_pose("hand") @ kin.T_link_ee, ref, atol=1e-5)
        if "physics" in sc.capabilities:
            ctl = Controller(sc, ControllerConfig(mode="joint_pos"))
            assert ctl.substeps == 50  # the file's 10 Hz control at 500 Hz physics
            ctl.reset(np.asarray(r.default_qpos))
            target = np.array([0.4, 0.3, 0.5])
            for _ in range(15):
                ctl.step(np.concatenate([target, [0.0]]))
            q = sc.robot_qpos()
            assert np.abs(q[:3] - target).max() < 0.02, (eng, q)
            assert q[3] < 0.005  # gripper closed
            moved[eng] = sc.link_pose("hand")[:3, 3]
        sc.close()
    assert np.linalg.norm(moved["mjcf"] - moved["sapien"]) < 0.005


def test_json_toml_and_yaml_definitions_are_the_same_robot(tmp_path):
    a = get_robot(str(write_two_link_robot(tmp_path / "t", "toml")))
    b = get_robot(str(write_two_link_robot(tmp_path / "j", "json", format=1)))
    c = get_robot(str(write_two_link_robot(tmp_path / "y", "yaml", format=1)))
    da, db, dc = (json.loads(r.fingerprint()) for r in (a, b, c))
    da.pop("source"), db.pop("source"), dc.pop("source")
    assert da == db == dc
    assert a.default_force_limit() == [60.0, 40.0, 20.0, 30.0, 30.0]
    assert a.camera_mounts["wrist"]["fx"] == 120.0


# -- self-contained bundles and exports ------------------------------------------------------------------------
@pytest.mark.slow
def test_bundle_made_with_a_robot_file_is_self_contained(tmp_path):
    """'real2sim init --robot FILE' copies the definition, URDF and meshes into the bundle; with the original folder
    gone, a new process builds exports from the bundle, and another loads an export and drives the robot."""
    from PIL import Image

    src = write_two_link_robot(tmp_path / "user" / "arm")
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(2):
        Image.fromarray(np.full((48, 64, 3), 40 * i, np.uint8)).save(frames / f"{i:03d}.png")
    bundle = tmp_path / "scene"
    cache = {"REAL2SIM_CACHE": str(tmp_path / "cache1")}
    _run("init", str(bundle), "--frames", str(frames), "--robot", str(src), env_extra=cache)
    scene = json.loads((bundle / "scene.json").read_text())
    assert scene["robot"]["name"] == "twolink" and scene["robot"]["definition"] == "robot/robot.json"
    assert scene["robot"]["joint_positions"] == DEFINITION["default_qpos"]
    packaged = json.loads((bundle / "robot" / "robot.json").read_text())
    assert packaged["urdf"] == "robot.urdf" and "packages" not in packaged
    assert len(list((bundle / "robot" / "meshes").iterdir())) == 2
    shutil.rmtree(tmp_path / "user")  # the user's original robot files are gone

    code = f"""
import json, sys
import numpy as np
from real2sim.core.bundle import Bundle
from real2sim.engines import get_exporter
b = Bundle.load({str(bundle)!r})
out = {{}}
for eng in ("mjcf", "sapien", "usd"):
    ex = get_exporter(eng)
    sc = ex.load(ex.export(b).main_file.parent)
    out[eng] = [sc.robot_def().source["definition"], sc.link_pose("hand")[:3, 3].tolist()]
    sc.close()
print(json.dumps(out))
"""
    env = {**os.environ, "MUJOCO_GL": "egl", "REAL2SIM_CACHE": str(tmp_path / "cache2")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    for eng, (definition, hand) in out.items():
        assert definition.startswith(str(bundle / "exports")), definition  # read from the export's copy
        np.testing.assert_allclose(hand, out["mjcf"][1], atol=1e-4)
    # the exports alone (bundle sources gone too) still load and drive, in yet another process
    moved = tmp_path / "moved_exports"
    shutil.copytree(bundle / "exports", moved)
    shutil.rmtree(bundle)
    code = f"""
import numpy as np
from real2sim.engines import get_exporter
from real2sim.robots.control import Controller, ControllerConfig
for eng in ("mjcf", "sapien"):
    sc = get_exporter(eng).load({str(moved)!r} + "/" + eng)
    ctl = Controller(sc, ControllerConfig(mode="joint_pos"))
    ctl.reset(np.asarray(sc.robot_def().default_qpos))
    p0 = ctl.ee_pose()[:3, 3].copy()
    for _ in range(10):
        ctl.step([0.0, 1.0, 0.9, 1.0])
    print(eng, sc.robot_name(), round(float(np.linalg.norm(p0 - ctl.ee_pose()[:3, 3])), 4))
"""
    env["REAL2SIM_CACHE"] = str(tmp_path / "cache3")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    for line in res.stdout.strip().splitlines():
        eng, name, moved_m = line.split()
        assert name == "twolink" and float(moved_m) > 0.1, line  # the elbow turned 0.4 rad: the hand moved


# -- built-in robots as files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("builtin", ["widowx250s", "panda"])
def test_builtin_robot_as_a_definition_file_gives_the_same_fk(tmp_path, builtin):
    """WidowX and Panda are expressible as definition files: their expanded URDF + a file holding the same fields
    give the same forward kinematics (end-effector and camera mounts) as the built-in definitions."""
    pytest.importorskip("xacro")
    from real2sim.robots.kinematics import Kinematics, camera_mount_pose
    from real2sim.robots.robotfile import definition_dict
    from real2sim.robots.spec import _expand, _package_root

    ref = get_robot(builtin)
    (tmp_path / f"{builtin}.urdf").write_text(_expand(ref, _package_root(ref)))  # xacro expanded, absolute meshes
    d = definition_dict(ref, f"{builtin}.urdf")
    d["name"], d["aliases"] = f"my_{builtin}", []
    (tmp_path / "robot.json").write_text(json.dumps(d))
    mine = get_robot(str(tmp_path / "robot.json"))
    k_ref, k_mine = Kinematics(ref), Kinematics(mine)
    np.testing.assert_allclose(k_mine.lower, k_ref.lower)
    np.testing.assert_allclose(k_mine.upper, k_ref.upper)
    rng = np.random.default_rng(0)
    for _ in range(30):
        q = rng.uniform(k_ref.lower, k_ref.upper)
        np.testing.assert_allclose(k_mine.fk(q), k_ref.fk(q), atol=1e-12)
        for cam in ref.camera_mounts:
            np.testing.assert_allclose(camera_mount_pose(k_mine, cam, q), camera_mount_pose(k_ref, cam, q), atol=1e-12)
    assert mine.default_stiffness() == ref.default_stiffness()
    assert mine.default_force_limit() == ref.default_force_limit()


# -- what the check fixes and reports -----------------------------------------------------------------------------
def test_check_reports_what_it_fixed(tmp_path):
    """Links without <inertial>, a mimic joint that the definition drives itself, a continuous joint: fixed, and
    each fix named in the report (and the CLI's)."""
    from real2sim.robots.spec import urdf_fixes

    text = two_link_urdf(mimic=True, mesh="hand_box.glb")
    text = text.replace('<inertial><origin xyz="0 0 0"/><mass value="0.2"/>'
                        '<inertia ixx="0.002" iyy="0.002" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial>', "", 1)
    text = text.replace('<joint name="waist" type="revolute">', '<joint name="waist" type="continuous">')
    path = write_two_link_robot(tmp_path / "arm", urdf_text=text, default_qpos=[0.0, 0.6, 0.9, 0.03, 0.03])
    fixes = urdf_fixes(get_robot(str(path)))
    assert any("link 'hand' has no <inertial>" in f for f in fixes), fixes
    assert any("joint 'finger_right' mimics 'finger_left'" in f for f in fixes), fixes
    assert any("joint 'waist' is continuous" in f for f in fixes), fixes
    assert any("mesh hand_box.glb of link 'hand' converted to OBJ" in f for f in fixes), fixes
    proc = _run("robots", "check", str(path), "--samples", "5", env_extra={"REAL2SIM_CACHE": str(tmp_path / "c")})
    assert "fixed: link 'hand' has no <inertial>" in proc.stdout and "OK" in proc.stdout
    proc = _run("robots", "check", str(path), "--samples", "5", "--json",
                env_extra={"REAL2SIM_CACHE": str(tmp_path / "c")})
    rep = json.loads(proc.stdout)
    assert rep["ok"] and len(rep["fixes"]) == 4 and len(rep["engines"]) == 3


def test_robots_list_still_works_and_check_of_a_registry_robot(tmp_path):
    proc = _run("robots", env_extra={"REAL2SIM_CACHE": str(tmp_path / "c")})
    assert "widowx250s" in proc.stdout and "panda" in proc.stdout


# -- bad robots -----------------------------------------------------------------------------------------------------
BAD = [
    # (what, urdf text or None, definition changes, message parts)
    ("missing mesh", two_link_urdf(mesh="gone.stl"), {}, ["gone.stl", "link 'hand'", "is missing", "Fix:"]),
    ("unreadable mesh", two_link_urdf(mesh="hand.dae"), {}, ["hand.dae", "link 'hand'", "cannot be read",
                                                               "Fix: repair or re-export"]),
    ("unknown mesh format", two_link_urdf(mesh="hand.3ds"), {}, ["hand.3ds", "link 'hand'", ".stl, .obj",
                                                                  "Fix: convert it"]),
    ("no inertials", two_link_urdf(inertials=False), {}, ["twolink.urdf", "no moving link has an <inertial>",
                                                          "Fix: add <inertial>"]),
    ("loop", two_link_urdf(loop=True), {}, ["twolink.urdf", "link 'forearm' is the child of two joints", "'elbow'",
                                            "'closing'", "Fix: remove one"]),
    ("mimic joint not driven", two_link_urdf(mimic=True),
     {"gripper_joints": ["finger_left"], "gripper_open": [0.03], "gripper_closed": [0.0],
      "default_qpos": [0.0, 0.6, 0.9, 0.03]},
     ["joint 'finger_right' mimics 'finger_left'", "Fix: list 'finger_right' in gripper_joints", "fixed_joints"]),
    ("unknown joint", None, {"arm_joints": ["waist", "elbo", "wrist"]},
     ["robot.json", "field 'arm_joints' names joint 'elbo'", "did you mean 'elbow'"]),
    ("camera on a missing link", None, {"camera_mounts": {"head": {"link": "heda", "position": [0, 0, 0]}}},
     ["robot.json", "camera mount 'head' is on link 'heda'", "Fix:"]),
    ("unknown ee link", None, {"ee_link": "tool0"}, ["field 'ee_link' names link 'tool0'", "did you mean 'tool'"]),
    ("wrong length", None, {"default_qpos": [0.0, 0.1]}, ["robot.json", "default_qpos", "list of 5 numbers"]),
    ("unknown field", None, {"arm_joint": ["waist"]}, ["robot.json", "arm_joint", "rename it to 'arm_joints'"]),
    ("rates", None, {"control_hz": 3.0}, ["physics_hz", "whole multiple of control_hz"]),
    ("built-in name", None, {"name": "widowx"}, ["robot.json", "belong to a built-in robot", "Fix: give the definition"]),
    ("missing urdf", None, {"urdf": "nope.urdf"}, ["robot.json", "field 'urdf' names", "nope.urdf", "does not exist"]),
    ("unknown package", None, {"packages": {}}, ["twolink.urdf", "package://twolink", "Fix: add  packages"]),
]


@pytest.mark.parametrize("what,urdf,changes,parts", BAD, ids=[b[0] for b in BAD])
def test_bad_robot_definitions_are_refused_with_the_fix(tmp_path, what, urdf, changes, parts):
    path = write_two_link_robot(tmp_path / "arm", "json", urdf_text=urdf, **changes)
    with pytest.raises(RobotError) as e:
        get_robot(str(path))
    for p in parts:
        assert p in str(e.value), (p, str(e.value))
    # the CLI: one line on stderr, exit 2, nothing on stdout
    proc = _run("robots", "check", str(path), check=False, env_extra={"REAL2SIM_CACHE": str(tmp_path / "c")})
    assert proc.returncode == 2 and parts[0] in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_bad_yaml_definitions_name_the_file_and_the_fix(tmp_path):
    """A YAML definition that does not parse, or parses to a list, is refused naming the file; so is another suffix."""
    write_two_link_robot(tmp_path / "arm", "yaml")
    bad = {"broken.yaml": ("name: twolink\narm_joints: [waist, elbow\n", ["broken.yaml", "not valid YAML", "Fix"]),
           "list.yml": ("- name: twolink\n", ["list.yml", "is a list, not a table of fields", "Fix"]),
           "robot.xml": ("<robot/>", ["robot.xml", ".toml, .json or .yaml", "Fix"])}
    for name, (text, parts) in bad.items():
        (tmp_path / "arm" / name).write_text(text)
        with pytest.raises(RobotError) as e:
            get_robot(str(tmp_path / "arm" / name))
        for p in parts:
            assert p in str(e.value), (p, str(e.value))


def test_init_with_a_bad_robot_file_writes_nothing(tmp_path):
    from PIL import Image

    path = write_two_link_robot(tmp_path / "arm", "json", arm_joints=["waist", "elbo", "wrist"])
    frames = tmp_path / "frames"
    frames.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(frames / "000.png")
    proc = _run("init", str(tmp_path / "scene"), "--frames", str(frames), "--robot", str(path), check=False,
                env_extra={"REAL2SIM_CACHE": str(tmp_path / "c")})
    assert proc.returncode == 2 and "joint 'elbo'" in proc.stderr, proc.stderr
    assert not (tmp_path / "scene").exists()


def test_missing_packaged_definition_names_the_fix(tmp_path):
    from real2sim.core.bundle import Bundle
    from real2sim.engines import get_exporter
    from real2sim.engines.sandbox import robot_only_bundle

    b = robot_only_bundle(write_two_link_robot(tmp_path / "arm"), tmp_path / "b")
    shutil.rmtree(b.root / "robot")
    with pytest.raises(RobotError, match=r"robot/robot.json.*missing.*Fix: re-run 'real2sim init"):
        get_exporter("mjcf").export(Bundle.load(b.root))


def test_recipe_robot_from_a_definition_file(tmp_path):
    """A recipe's robot entry may be a definition file (relative to the recipe): the bundle gets its copy."""
    from real2sim.engines import get_exporter
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    src = builtin_recipe("tabletop")
    shutil.copytree(src.parent, tmp_path / "rec")
    write_two_link_robot(tmp_path / "rec" / "arm")
    data = json.loads(src.read_text())
    data["robot"] = {"definition": "arm/robot.toml",
                     "base_pose": {"position": [-0.4, 0, 0], "quaternion_wxyz": [1, 0, 0, 0]}}
    (tmp_path / "rec" / "recipe.json").write_text(json.dumps(data))
    b = bundle_from_recipe(tmp_path / "rec" / "recipe.json", tmp_path / "b")
    assert b.manifest.robot.name == "twolink" and b.manifest.robot.definition == "robot/robot.json"
    assert (b.root / "robot" / "robot.urdf").is_file()
    from conftest import give_simple_collision

    give_simple_collision(b)
    ex = get_exporter("mjcf")
    sc = ex.load(ex.export(b).main_file.parent)
    assert sc.robot_name() == "twolink" and len(sc.object_ids()) == len(data["objects"])
    np.testing.assert_allclose(sc.robot_base_pose()[:3, 3], [-0.4, 0, 0], atol=1e-9)
    sc.close()
    data["robot"] = {"definition": "arm/robot.toml", "name": "other"}
    (tmp_path / "rec" / "recipe.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="robot.name.*'other'.*definition file names the robot 'twolink'"):
        bundle_from_recipe(tmp_path / "rec" / "recipe.json", tmp_path / "c")
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_sysid_worker_processes_read_a_file_robot(tmp_path):
    """Gain fitting in 2 worker processes (spawned: they have not read the file) gives what 1 process gives."""
    from real2sim.evaluation.sysid import Episode, fit_gains, simulate_episode

    r = get_robot(str(write_two_link_robot(tmp_path / "arm")))
    rng = np.random.default_rng(0)
    eps = []
    for _ in range(2):
        T = 4
        a = np.concatenate([rng.uniform(-0.3, 0.3, (T, 3)) + r.default_qpos[:3], np.ones((T, 1))], 1)
        ep = Episode(a, None, np.tile(r.default_qpos, (T + 1, 1)), np.arange(T + 1) / r.control_hz)
        ep.ee_poses = simulate_episode(r.name, r.default_stiffness(), r.default_damping(), ep, "joint_pos")
        eps.append(ep)
    one = fit_gains(eps, r.name, "joint_pos", share="arm", rounds=1, iters_per_round=3, workers=1, seed=3)
    two = fit_gains(eps, r.name, "joint_pos", share="arm", rounds=1, iters_per_round=3, workers=2, seed=3)
    assert one.robot == two.robot == "twolink"
    np.testing.assert_allclose(two.stiffness, one.stiffness)
    assert two.train_loss == pytest.approx(one.train_loss, rel=1e-9)


def test_force_limited_drives_with_large_damping_track_alike_in_both_engines(tmp_path):
    """Large damping on light links with force limits that the step saturates (as SIMPLER's Google Robot gains):
    MuJoCo and SAPIEN follow a 0.1 rad step the same way. (MuJoCo does not integrate a force-limited actuator's damping implicitly: with the
    damping in the actuator it chattered between +-limit every step and ran away from the target.)"""
    from real2sim.engines.sandbox import robot_scene

    path = write_two_link_robot(tmp_path / "arm", "json", arm_stiffness=[2000.0, 2000.0, 2000.0],
                                arm_damping=[700.0, 700.0, 700.0], arm_force_limit=[100.0, 100.0, 100.0])
    r = get_robot(str(path))
    q0 = np.asarray(r.default_qpos, float)
    target = q0 + [0.1, 0.1, 0.1, 0.0, 0.0]
    traj = {}
    for eng in ("mjcf", "sapien"):
        sc = robot_scene(r, eng, tmp_path / eng)
        sc.set_robot_qpos(q0)
        sc.set_joint_targets(target)
        qs = []
        for _ in range(30):  # 1.5 s; the spring (200 N m) starts above the limit (100 N m)
            sc.step_physics(25)
            qs.append(sc.robot_qpos())
        traj[eng] = np.asarray(qs)
        sc.close()
    # measured 0.015 rad apart at most (MuJoCo clamps the spring, PhysX spring + damper); 0.05 with the damping in
    # the MuJoCo actuator
    assert np.abs(traj["mjcf"] - traj["sapien"]).max() < 0.025, np.abs(traj["mjcf"] - traj["sapien"]).max(axis=0)
    assert np.abs(traj["mjcf"][-1] - target).max() < 0.05
