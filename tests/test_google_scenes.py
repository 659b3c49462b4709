"""SIMPLER's Google Robot scenes rebuilt from the real overlays (real2sim.demos.google): the coke-can scene builds and
exports, its camera (SIMPLER's robot placement + head joints) explains the real cabinet top in the overlay, the first
composited frame is the overlay plus the simulated robot and can, and the scripted oracle picks the can in MuJoCo
and SAPIEN. The pieces that need no data (table fit, the oracle's grasp orientation and gentle closing) are tested on
synthetic input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from real2sim.core.camera import Camera
from real2sim.core.geometry import look_at_opencv


# -- no data --------------------------------------------------------------------------------------------------------
def test_table_fit_recovers_a_known_rectangle_through_the_camera():
    """A 0.63 x 0.615 m top at z 0.87 drawn through a camera, on a textured background with a lamp's reflection on
    it: segmented and fitted back to its pose within 1 cm / 1 degree, IoU > 0.97; a camera 0.1 rad off in tilt
    explains it worse."""
    from real2sim.demos.google import fit_table, rectangle_mask, table_top_mask

    K = np.array([[425.0, 0, 305.0], [0, 413.1, 233.0], [0, 0, 1]])
    cam = Camera(640, 512, K, look_at_opencv([0.25, 0.2, 1.45], [-0.3, 0.2, 0.87]))
    truth = rectangle_mask(cam, (-0.28, 0.22), 0.04, (0.63, 0.615), 0.87)
    rng = np.random.default_rng(0)
    img = rng.integers(40, 90, (512, 640, 3)).astype(np.uint8)  # a dark, textured wall and floor
    yy, xx = np.mgrid[:512, :640]
    top = np.stack([150 + xx * 0.08, 140 + xx * 0.08, 128 + xx * 0.06], -1)  # a brightness gradient across the top
    img[truth] = top[truth].astype(np.uint8)
    img[truth & (np.abs(yy - 330) < 6) & (xx > 350)] = 250  # a reflection with straight edges inside the top
    seg = table_top_mask(img)
    from real2sim.core.imaging import iou

    assert iou(seg, truth) > 0.97
    fit = fit_table(seg, cam, (0.63, 0.615), 0.87, (-0.25, 0.2))
    assert np.linalg.norm(np.subtract(fit["xy"], (-0.28, 0.22))) < 0.01 and abs(fit["yaw"] - 0.04) < 0.0175, fit
    assert fit["iou"] > 0.97
    T = cam.T_world_camera.copy()
    c, s = np.cos(0.1), np.sin(0.1)
    T[:3, :3] = T[:3, :3] @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]])  # tilted 0.1 rad about the camera x axis
    worse = fit_table(seg, Camera(640, 512, K, T), (0.63, 0.615), 0.87, (-0.25, 0.2))
    assert worse["iou"] < fit["iou"] - 0.02, (worse, fit)


def test_oracle_grasp_orientation_follows_the_hand_frame():
    """WidowX-like hands (approach along x, nearly vertical) keep the former grasp exactly; a hand approaching along z
    that starts tilted (the Google Robot, 19 degrees) keeps its tilt and only turns about its approach axis; a lying can is
    gripped across its body (closing direction perpendicular to its long axis), a cube across a face pair."""
    from real2sim.evaluation.policies.scripted import ScriptedPolicy, _rot_y, _rot_z, _top_down

    widowx = _rot_z(0.02) @ _rot_y(np.pi / 2 - 0.05)
    np.testing.assert_allclose(_top_down(widowx), _rot_y(np.pi / 2), atol=1e-12)
    google = np.array([[-0.219, -0.932, 0.289], [-0.953, 0.269, 0.143], [-0.211, -0.244, -0.947]])
    google = np.linalg.qr(google)[0] * np.sign(np.diag(np.linalg.qr(google)[1]))
    np.testing.assert_allclose(_top_down(google), google)
    pol = ScriptedPolicy()
    pol.bounds = {"can": np.array([[-0.033, -0.0615, -0.033], [0.033, 0.0615, 0.033]]),
                  "cube": np.array([[-0.015] * 3, [0.015] * 3])}
    for R_top in (_rot_y(np.pi / 2), google):
        pol.R_top = R_top
        lying = _rot_z(0.3)  # the can's long axis (its y) turned 0.3 rad about z
        Rg = pol._grasp_R(lying, "can")
        closing = Rg[:, 1]
        assert abs(closing @ lying[:, 1]) < 0.35, closing  # across the can's long axis
        k = int(np.argmin(R_top[2]))  # the approach axis: kept (the hand turns about it, like a wrist's roll)
        np.testing.assert_allclose(Rg[:, k], R_top[:, k], atol=1e-9)
        Rc = pol._grasp_R(_rot_z(0.1), "cube")
        assert max(abs(Rc[:, 1] @ _rot_z(0.1)[:, k]) for k in (0, 1)) > 0.95  # across a face pair
    pol.R_top = _rot_y(np.pi / 2)  # the old rule, unchanged for a cube: yaw of the closest face pair
    np.testing.assert_allclose(pol._grasp_R(_rot_z(0.1), "cube"), _rot_z(0.1) @ _rot_y(np.pi / 2), atol=1e-12)


def test_oracle_closes_gently_until_the_fingers_stall():
    """close_step: the gripper command falls step by step while the fingers follow freely, one step more once they
    stall on the object, then holds (not the force limit); opening is immediate; without it, the command snaps."""
    from real2sim.evaluation.policies.scripted import ScriptedPolicy

    pol = ScriptedPolicy(close_step=0.1)
    pol.reset("pick", {"task": {"success": {"type": "lifted", "object": "a"}}, "object_ids": ["a"]}, seed=0)
    fingers = [0.0, 0.0, 0.13, 0.26, 0.39, 0.45, 0.47, 0.47]  # a step's lag, free, ..., then blocked by the object
    cmds = []
    for f in fingers:
        pol._gripper(0.0, {"qpos": np.array([0.0, f, f])})
        cmds.append(round(pol.grip_cmd, 3))
    assert cmds == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.4, 0.4], cmds  # stalled at 0.45 (a 0.06 step after 0.13 ones)
    assert pol.stalled
    pol._gripper(1.0, {"qpos": np.array([0.0, 0.47, 0.47])})
    assert pol.grip_cmd == 1.0 and not pol.stalled
    snap = ScriptedPolicy()
    assert snap._gripper(0.0, {"qpos": np.zeros(3)}) is False


def _picking_oracle(**kw):
    from real2sim.evaluation.policies.scripted import ScriptedPolicy

    pol = ScriptedPolicy(close_step=0.1, **kw)
    pol.reset("pick", {"task": {"success": {"type": "lifted", "object": "a"}}, "object_ids": ["a"]}, seed=0)
    obs = {"objects": np.array([[0.5, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0]]), "ee_pose": np.r_[0.5, 0.0, 0.3, 1.0, 0, 0, 0],
           "qpos": np.zeros(3)}
    pol.act(obs)
    return pol, obs


def test_oracle_counts_stalled_fingers_as_arrived_only_where_they_close():
    """Fingers that stall on the object count the hand as arrived at the waypoint where they close (the object pushes
    the hand back), not at a later closed-hand waypoint (there it once let the apple go 7 cm above the drawer)."""
    pol, obs = _picking_oracle()
    R = pol.plan[0][1]
    A, B, C = np.r_[0.5, 0.0, 0.2], np.r_[0.5, 0.0, 0.1], np.r_[0.3, 0.0, 0.3]
    pol.plan = [(A, R, 1.0, 0), (B, R, 0.0, 0), (C, R, 0.0, 0), (C, R, 1.0, 0)]
    pol.grip_cmd, pol.stalled = 0.4, True
    far = {**obs, "ee_pose": np.r_[0.5, 0.0, 0.15, 1.0, 0, 0, 0]}  # 5 cm from the commanded waypoint
    pol.phase, pol.hold, pol.cmd_p, pol.cmd_R = 1, 0, B.copy(), R.copy()
    pol.act(far)
    assert pol.phase == 2  # closing on the object, pushed back: arrived
    pol.cmd_p = C.copy()
    far = {**obs, "ee_pose": np.r_[0.3, 0.0, 0.25, 1.0, 0, 0, 0]}
    for _ in range(5):
        pol.act(far)
    assert pol.phase == 2  # carrying: not there until the hand is


def test_oracle_grasp_waypoints_follow_the_object_while_the_hand_is_open():
    """While the hand goes open to the approach waypoint over the object, it and the grasp waypoint are re-aimed at
    the object's measured x, y each step (an object nudged on the way is gripped where it is); heights stay; on the
    way down to the grasp (fingers near the object) the waypoints stay put."""
    pol, obs = _picking_oracle()
    z0, z1 = pol.plan[0][0][2], pol.plan[1][0][2]
    moved = {**obs, "objects": np.array([[0.55, 0.04, 0.1, 1.0, 0.0, 0.0, 0.0]])}
    pol.act(moved)
    np.testing.assert_allclose(pol.plan[0][0], [0.55, 0.04, z0])
    np.testing.assert_allclose(pol.plan[1][0], [0.55, 0.04, z1])
    pol.phase = 1
    pol.act({**obs, "objects": np.array([[0.56, 0.05, 0.1, 1.0, 0.0, 0.0, 0.0]])})
    np.testing.assert_allclose(pol.plan[1][0], [0.55, 0.04, z1])


def test_oracle_holds_sideways_motion_while_the_hand_sags_below_its_command():
    """A hand measured more than SAG_HOLD below its command gets no sideways step (it would sweep low over what it
    passes) but still rises; after SAG_HOLD_STEPS steps in a row it moves on (a height it cannot reach must not stop
    it)."""
    from real2sim.evaluation.policies.scripted import SAG_HOLD, SAG_HOLD_STEPS

    pol, obs = _picking_oracle()
    R = pol.plan[0][1]
    pol.plan, pol.phase = [(np.r_[0.5, 0.3, 0.4], R, 1.0, 0)], 0
    pol.cmd_p, pol.cmd_R = np.r_[0.5, 0.0, 0.3], R.copy()
    sag = {**obs, "ee_pose": np.r_[0.5, 0.0, 0.3 - SAG_HOLD - 0.05, 1.0, 0, 0, 0]}
    steps = [pol.act(sag)[0] for _ in range(SAG_HOLD_STEPS + 1)]
    for a in steps[:SAG_HOLD_STEPS]:
        assert a[1] == 0.0 and a[2] > 0.0, a
    assert steps[-1][1] > 0.0
    level = {**obs, "ee_pose": np.r_[pol.cmd_p, 1.0, 0, 0, 0]}
    assert pol.act(level)[0][1] > 0.0


# -- real data ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def coke_can(shared_data, tmp_path_factory):
    """``real2sim demo --scene google_pick_coke_can`` as a user runs it (a subprocess), standing can, one episode per
    engine: (bundle, reports/google.json, the command's completed process)."""
    pytest.importorskip("pinocchio")
    data = shared_data
    for rel in ("google_robot/description/google_robot_meta_sim_fix_wheel_fix_fingertip.urdf",
                "google_robot/overlays/google_coke_can_real_eval_1.png", "objects/coke_can/textured.dae"):
        if not (data / rel).is_file():
            pytest.skip(f"{data / rel} is missing (the Google Robot scenes need the google_robot folder of the data)")
    from real2sim.core.bundle import Bundle

    out = tmp_path_factory.mktemp("google")
    env = {**os.environ, "REAL2SIM_CACHE": str(out / "cache"), "MUJOCO_GL": "egl", "COLUMNS": "200"}
    env.pop("REAL2SIM_DATA", None)
    proc = subprocess.run([sys.executable, "-m", "real2sim", "demo", "--scene", "google_pick_coke_can", "--variant",
                           "standing", "--episodes", "1", "--data", str(data), "--out", str(out / "demo")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bundle = Bundle.load(out / "demo" / "pick_coke_can_standing" / "scene")
    return bundle, json.loads((bundle.reports_dir() / "google.json").read_text()), proc


def test_coke_can_scene_builds_exports_and_matches_the_overlay(coke_can):
    """The bundle holds the overlay as its plate, SIMPLER's camera and the robot at SIMPLER's placement; MJCF and SAPIEN
    exports load; the camera explains the real cabinet top (a rectangle of its known size on the table plane) with
    IoU >= 0.88 (measured 0.910; refining the head pan/tilt against it: 0.968), and the first composited frame is the
    overlay wherever the robot and the can are not."""
    from real2sim.core.imaging import read_rgb

    bundle, rep, _ = coke_can
    m = bundle.manifest
    assert m.capture.plate and m.robot.name == "google_robot"
    np.testing.assert_allclose(m.robot.base_pose.position, [0.35, 0.20, 0.07905])
    assert {"mjcf", "sapien", "usd"} <= set(rep["exports"]) and not any(str(v).startswith("failed") for v in
                                                                  rep["exports"].values())
    t = rep["table_check"]
    assert t["iou"] >= 0.88, t
    assert t["refined"]["iou"] >= t["iou"] and abs(t["refined"]["delta_tilt"]) <= 0.1, t
    plate = read_rgb(bundle.path(m.capture.plate))
    assert plate.shape == (512, 640, 3)
    assert 2000 < rep["foreground_px"] < 0.5 * 640 * 512  # the arm and the can are drawn, the rest is the overlay
    assert bundle.path(rep["picture"]).is_file()


def test_scripted_oracle_picks_the_standing_can_in_both_engines(coke_can):
    """SIMPLER's end-effector delta-pose control at 3 Hz: the recipe's oracle (docs/google.md) lifts the standing can
    at the first cell of SIMPLER's grid (x -0.35, y -0.02, the far row) in MuJoCo and in SAPIEN. Measured over the 25
    cells: 25/25 in both, as for the lying cans (docs/google.md)."""
    _, rep, _ = coke_can
    for engine in ("mujoco", "sapien"):
        assert rep["success"][engine]["rate"] == 1.0, rep["success"]


def test_demo_command_reports_both_engines(coke_can):
    """``real2sim demo --scene google_pick_coke_can`` (the issue's Done-when) builds, exports and evaluates the scene
    from the shared data: its table on stdout has the oracle's result in MuJoCo and in SAPIEN and says demo OK; the
    report names the policy the recipe chose and one episode per engine."""
    bundle, rep, proc = coke_can
    assert set(rep["success"]) == {"mujoco", "sapien"} and all(s["trials"] == 1 for s in rep["success"].values())
    assert rep["policy"].startswith("scripted:") and rep["variant"] == "standing"
    out = proc.stdout
    assert "oracle mujoco" in out and "oracle sapien" in out and "demo OK" in out, out
    assert "standing" in out and "1/1" in out and str(bundle.root) in out, out


def test_bad_scene_variant_or_data_folder_is_refused_naming_it(tmp_path):
    """An unknown scene or variant names the known ones; a data folder without the Google Robot names the missing
    file (nothing is written)."""
    from real2sim.core.errors import Real2SimError, UnknownNameError
    from real2sim.demos.google import build_google_scene, load_scene, scene_names

    assert {"pick_coke_can", "move_near"} <= set(scene_names())
    with pytest.raises(UnknownNameError, match="pick_coke_can"):
        load_scene("pick_coke")
    with pytest.raises(UnknownNameError, match="standing"):
        build_google_scene(tmp_path, tmp_path / "out", "pick_coke_can", "upside_down")
    with pytest.raises(Real2SimError, match="google_robot_meta_sim_fix_wheel_fix_fingertip.urdf.*--data"):
        build_google_scene(tmp_path, tmp_path / "out", "pick_coke_can", "standing")
    assert not (tmp_path / "out" / "scene").exists()


def test_demo_command_without_the_data_names_the_folder_and_the_fix(tmp_path, capsys):
    """``real2sim demo --scene google_pick_coke_can`` where the shared data is not: one error line naming the folder it
    looked in and how to point it at the data (--data or REAL2SIM_DATA), exit 2, nothing written; the bundled demo's
    scene refuses --data (it has no use for it)."""
    from real2sim.apps.cli import main

    missing = tmp_path / "no_data"
    out = tmp_path / "out"
    env = {**os.environ, "REAL2SIM_DATA": str(missing), "COLUMNS": "300"}
    proc = subprocess.run([sys.executable, "-m", "real2sim", "demo", "--scene", "google_pick_coke_can", "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).parents[1])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert str(missing) in err and "--data" in err and "REAL2SIM_DATA" in err, err
    assert not out.exists()
    (missing / "google_robot").mkdir(parents=True)  # a folder, but not the data: the missing files are named
    assert main(["demo", "--scene", "google_pick_coke_can", "--data", str(missing), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "google_robot_meta_sim_fix_wheel_fix_fingertip.urdf" in err and "--data" in err, err
    assert main(["demo", "--scene", "tabletop", "--data", str(missing), "--out", str(out)]) == 2
    assert "bundled scene" in " ".join(capsys.readouterr().err.split())
    assert not out.exists()
