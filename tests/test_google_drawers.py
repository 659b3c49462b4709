"""SIMPLER's Google Robot drawer scenes (real2sim.demos.google, scenes open_drawer / close_drawer /
place_apple_in_closed_top_drawer): the recipes hold SIMPLER's nine placements, the cabinet's handles get collision
boxes from their visuals (collide_visuals) and the env reports the handle; with the shared data, the top drawer scene
at placement a0 builds and the scripted oracle opens the drawer by its handle in MuJoCo and SAPIEN."""
from __future__ import annotations

import json

import numpy as np
import pytest
from articulated import run_policy_episode

from real2sim.core.articulation import ArticulatedModel, ArticulationError, package_urdf


def test_drawer_recipes_have_simplers_placements_and_thresholds():
    from real2sim.demos.google import load_scene, resolve_variant

    spec = load_scene("open_drawer")
    assert len(spec["variants"]) == 27 and "bottom_c2" in spec["variants"]
    v = resolve_variant(spec, "middle_b2")
    assert v["robot"]["position"] == [0.851, 0.035, 0.07905] and v["robot"]["yaw"] == pytest.approx(np.pi)
    assert v["overlay"].endswith("open_drawer_b2.png")
    assert v["task"]["success"]["joint"] == "middle_drawer_joint"
    assert v["task"]["success"]["fraction"] * 0.5 == pytest.approx(0.15)  # SIMPLER: qpos >= 0.15 m
    close = resolve_variant(load_scene("close_drawer"), "bottom_a1")
    assert close["cabinet"]["joints"] == {"bottom_drawer_joint": 0.2}
    assert resolve_variant(load_scene("close_drawer"), "bottom_a1")["robot"]["yaw"] == pytest.approx(np.pi - 0.02)
    apple = load_scene("place_apple_in_closed_top_drawer")
    assert sorted(apple["variants"]) == ["a0", "b0", "c0"]


def test_collide_visuals_gives_a_handle_a_collision_box(tmp_path):
    """A drawer whose handle is visual only: no handle to pull; with collide_visuals=['handle*'] the packaged copy
    collides with a box where the handle is drawn, and link_handle finds it in front of the drawer's front."""
    urdf = tmp_path / "d.urdf"
    box = '<geometry><box size="{}"/></geometry>'
    urdf.write_text(f"""<robot name="d"><link name="body"><collision>{box.format('0.3 0.3 0.3')}</collision></link>
<link name="drawer"><collision name="front"><origin xyz="0.15 0 0"/>{box.format('0.01 0.28 0.1')}</collision>
<visual name="handle_bar"><origin xyz="0.18 0 0.01"/>{box.format('0.005 0.08 0.005')}</visual></link>
<joint name="j" type="prismatic"><parent link="body"/><child link="drawer"/><axis xyz="1 0 0"/>
<limit lower="0" upper="0.2"/></joint></robot>""")
    assert ArticulatedModel.load(urdf).link_handle("drawer", [1, 0, 0]) is None
    model = ArticulatedModel.load(package_urdf(urdf, tmp_path / "pkg", ["handle*"]))
    (shape,) = [s for s in model.links["drawer"].collisions if s.name == "handle_bar_collision"]
    assert shape.geometry.size == [0.005, 0.08, 0.005]
    lo, hi = model.link_handle("drawer", [1, 0, 0])
    np.testing.assert_allclose((lo + hi) / 2, [0.18, 0.0, 0.01], atol=1e-9)
    with pytest.raises(ArticulationError, match="no <visual> is named like.*drawer/handle_bar"):
        package_urdf(urdf, tmp_path / "pkg2", ["knob*"])


@pytest.fixture(scope="module")
def top_drawer_a0(shared_data, tmp_path_factory):
    import real2sim.demos.google as g

    if not (shared_data / "google_robot" / "cabinet" / "mk_station.urdf").is_file():
        pytest.skip("google_robot/cabinet is absent from the shared data")
    bundle, rep = g.build_google_scene(shared_data, tmp_path_factory.mktemp("drawer"), "open_drawer", "top_a0",
                                       episodes=1, engines=["mjcf", "sapien"], evaluate_in=[])
    return bundle, rep


def test_top_drawer_scene_builds_with_handles_and_draws_the_cabinet(top_drawer_a0):
    bundle, rep = top_drawer_a0
    obj = bundle.object("cabinet")
    model = ArticulatedModel.load(bundle.path(obj.articulation.urdf))
    assert {s.name for s in model.links["top_drawer"].collisions} >= {"handle0_collision", "handle1_collision"}
    assert obj.articulation.joint_dynamics["top_drawer_joint"].friction == 0.05
    assert "mjcf" in rep["exports"] and "sapien" in rep["exports"]
    assert rep["foreground_px"] > 20000  # the cabinet (fixed but articulated) is drawn over the overlay
    assert json.loads((bundle.reports_dir() / "google.json").read_text())["scene"] == "open_drawer"


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_oracle_opens_the_top_drawer_by_its_handle(top_drawer_a0, backend):
    """The Google Robot's hand, level, grips the handle's bar and pulls: joint_opened (SIMPLER's >= 0.15 m) holds
    within SIMPLER's 113 steps (measured: MuJoCo 66 steps, SAPIEN 54)."""
    from real2sim.demos.google import load_scene
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies.base import make_policy

    bundle, _ = top_drawer_a0
    env = Real2SimEnv(bundle.root, backend=backend, obs_mode="state", render_mode=None, privileged=True)
    obs, info = env.reset(seed=0)
    (joint,) = info["joints"]
    # the handle: its bar and two posts (x 0.3225 to 0.345 in the drawer frame), 2 cm above the drawer centre
    np.testing.assert_allclose(joint["handle"], [-0.295 + (0.3225 + 0.345) / 2, 0.0, 0.017 + 0.668 + 0.02], atol=1e-6)
    info = run_policy_episode(env, make_policy(load_scene("open_drawer")["policy"]), obs, info)
    assert info["success"], info["object_joints"]
    assert info["object_joints"]["cabinet"]["top_drawer_joint"] >= 0.15


def test_oracle_mirrors_the_controllers_ik_to_choose_a_reachable_hand(top_drawer_a0):
    """The oracle mirrors the ee_delta controller's local IK: the same commands sent to the env's controller end at
    the joint targets the mirror predicted; the opening plan it chose reaches every waypoint within REACH_TOL and, at
    top a0, is the recipe's own (pitch 0.3)."""
    from real2sim.core.geometry import quat_wxyz_to_matrix
    from real2sim.demos.google import load_scene
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies.base import make_policy
    from real2sim.evaluation.policies.scripted import REACH_TOL, so3_exp

    bundle, _ = top_drawer_a0
    env = Real2SimEnv(bundle.root, backend="mujoco", obs_mode="state", render_mode=None, privileged=True)
    obs, info = env.reset(seed=0)
    pol = make_policy(load_scene("open_drawer")["policy"])
    pol.reset(info["instruction"], info, 0)
    pol.act(obs)
    assert pol.chosen["reach_error"] < REACH_TOL and pol.chosen["level_pitch"] == 0.3, pol.chosen
    obs, info = env.reset(seed=0)
    plan = pol.plan[:2]  # turn level where the hand is, then back from the handle: ~0.6 m and a 1.5 rad turn
    err, _, q_mirror = pol._rollout(plan, obs["qpos"])
    ee = np.asarray(obs["ee_pose"], float)
    cmd_p, cmd_R = ee[:3].copy(), quat_wxyz_to_matrix(ee[3:7])
    for pos, R, _, _ in plan:
        for _ in range(100):
            d, r = pol._delta(pos, R, cmd_p, cmd_R)
            if np.linalg.norm(d) < 1e-3 and np.linalg.norm(r) < 0.02:
                break
            cmd_p, cmd_R = cmd_p + d, so3_exp(r) @ cmd_R
            env.step(np.r_[d, r, 1.0])
    n = env.controller.n_arm
    np.testing.assert_allclose(env.controller.q_target[:n], q_mirror[:n], atol=1e-4)
    assert err < REACH_TOL


def test_the_demo_does_not_ask_a_drawer_scene_for_a_table_check_but_still_checks_the_oracle():
    from real2sim.apps.cli.demo import google_ok

    rep = {"exports": {"mjcf": "ok"}, "success": {"mujoco": {"rate": 1.0}, "sapien": {"rate": 0.0}},
           "table_check": {"error": "the overlay holds no cabinet", "not_applicable": True}}
    assert google_ok(rep) == ["oracle in sapien 0.00 < 0.5"]
    rep["table_check"] = {"error": "no table top found in the overlay"}  # a coke-can overlay whose fit failed
    assert any("table top IoU None" in b for b in google_ok(rep))


def test_level_turn_first_turns_the_hand_where_it_is_before_it_travels():
    """level_turn='first' (open_drawer's oracle): the plan starts with the hand turned level at its own position, then
    the same approach as 'moving' (turning while it travelled 0.8 m down, the Google Robot's local IK wound a wrist
    joint onto its limit and stalled short of the bottom drawer's handle at b0 and c0); a bad value is refused."""
    from real2sim.core.errors import Real2SimError
    from real2sim.evaluation.policies.scripted import ScriptedPolicy

    info = {"task": {"success": {"type": "joint_opened", "object": "cab", "joint": "j", "fraction": 0.3}},
            "object_ids": [], "robot_base_pose": np.eye(4).tolist(),
            "joints": [{"object": "cab", "joint": "j", "type": "prismatic", "position": 0.0, "lower": 0.0,
                        "upper": 0.5, "axis": [-1.0, 0.0, 0.0], "face": [0.6, 0.0, 0.2], "handle": [0.58, 0.0, 0.2]}]}
    ee = np.r_[0.4, -0.2, 0.9, 1.0, 0.0, 0.0, 0.0]
    obs = {"ee_pose": ee, "objects": np.zeros((0, 7)), "qpos": np.zeros(9)}
    plans = {}
    for turn in ("moving", "first"):
        pol = ScriptedPolicy(drawer_hand="level", level_turn=turn, close_step=0.1)
        pol.reset("open", info, seed=0)
        pol.act(obs)
        plans[turn] = pol.plan
    first, moving = plans["first"], plans["moving"]
    assert len(first) == len(moving) + 1
    np.testing.assert_allclose(first[0][0], ee[:3])  # turns where the hand is ...
    np.testing.assert_allclose(first[0][1], moving[0][1])  # ... to the level hand of the approach
    for a, b in zip(first[1:], moving):
        np.testing.assert_allclose(a[0], b[0])
    with pytest.raises(Real2SimError, match="level_turn"):
        ScriptedPolicy(level_turn="later")
