"""The hybrid backend (physics from one engine, pictures from another through pose sync): its pictures equal the
drawing engine's own for the same states; compositions the registry cannot make, and scenes the renderer cannot
show, are refused by name."""
from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("sapien")

from envbundle import make_env_bundle  # noqa: E402

HYBRID = "mujoco+sapien"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_env_bundle(tmp_path_factory.mktemp("hybrid"))


def _states(bundle, n_steps: int = 24, every: int = 6):
    """(object poses, robot qpos, layers) at several states of a SAPIEN episode driven by the scripted oracle: the
    states SAPIEN reached and the pictures SAPIEN took of them."""
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies import make_policy

    env = Real2SimEnv(bundle.root, task="lift_cube", backend="sapien", privileged=True, depth=True)
    scene = env.scene
    pol = make_policy("scripted")
    obs, info = env.reset(seed=3)
    pol.reset(info["instruction"], info, 3)
    out, chunk = [], []
    for k in range(n_steps):
        if not len(chunk):
            chunk = list(pol.act(obs))
        obs, *_ = env.step(chunk.pop(0))
        if k % every == every - 1:
            poses = {o: scene.object_pose(o) for o in env.movable}
            layers = scene.render_layers(env.camera, env.movable, robot=True, depth=True)
            out.append((poses, scene.robot_qpos(), layers))
    camera, movable = env.camera, list(env.movable)
    env.close()
    return camera, movable, out


def test_hybrid_pictures_equal_the_drawing_engines_own_for_the_same_states(bundle):
    from real2sim.evaluation.envs.env import Real2SimEnv

    camera, movable, states = _states(bundle)
    hyb = Real2SimEnv(bundle.root, task="lift_cube", backend=HYBRID, privileged=True, depth=True)
    assert hyb.scene.engine == HYBRID and {"physics", "render", "segmentation", "depth"} <= hyb.scene.capabilities
    hyb.reset(seed=0)
    moved = 0
    for poses, qpos, (rgb, mask, depth) in states:
        for oid, pose in poses.items():  # the state goes into the *physics* engine; pictures come via pose sync
            hyb.scene.physics.set_object_pose(oid, pose)
        hyb.scene.physics.set_robot_qpos(qpos)
        hyb.scene.set_robot_qpos(qpos)  # through the hybrid: marks the pictures stale
        h_rgb, h_mask, h_depth = hyb.scene.render_layers(camera, movable, robot=True, depth=True)
        assert np.abs(h_rgb.astype(int) - rgb).max() <= 2
        assert (h_mask != mask).sum() <= 0.0005 * mask.size and mask.sum() > 0
        assert np.abs(h_depth - depth).max() < 1e-3
        moved += int(np.abs(h_rgb.astype(int) - states[0][2][0]).max() > 20)
    assert moved >= 2  # the states differ visibly: the comparison is not one picture repeated
    hyb.close()


@pytest.mark.parametrize("backend", [HYBRID, "sapien+mujoco"])
def test_hybrid_steps_in_the_physics_engine_and_syncs_once_per_picture(bundle, backend):
    from real2sim.evaluation.envs.env import Real2SimEnv

    env = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, obs_size=(160, 120))
    env.reset(seed=0)
    syncs = env.scene.syncs
    before = env.scene.physics.robot_qpos()
    for _ in range(3):
        obs, *_ = env.step(np.array([0.02, 0, 0, 0, 0, 0, 1.0]))
    assert np.abs(env.scene.physics.robot_qpos() - before).max() > 1e-3  # the physics engine moved the arm
    assert env.scene.syncs == syncs + 3 and obs["image"].shape == (120, 160, 3)
    # the renderer's robot stands where the physics put it
    assert np.allclose(env.scene.renderer.robot_qpos(), env.scene.physics.robot_qpos(), atol=1e-5)
    env.close()


def test_an_evaluation_runs_on_the_hybrid_and_records_it(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import clear_cache, evaluate, read_results

    try:
        s = evaluate(bundle.root, "lift_cube", "scripted", 2, backend=HYBRID, out_dir=tmp_path, obs_size=(160, 120))
    finally:
        clear_cache()
    assert s.backend == HYBRID and s.trials == 2 and s.successes >= 1
    assert {r["backend"] for r in read_results(tmp_path / "episodes.jsonl")} == {HYBRID}


def test_the_registry_composes_only_what_can_simulate_and_draw():
    from real2sim.core.errors import UnsupportedCapability
    from real2sim.engines import backend_names, get_engine, get_exporter

    spec = get_engine(HYBRID)
    assert spec.parts == ("mjcf", "sapien") and "physics" in spec.capabilities and "render" in spec.capabilities
    assert "preview" not in spec.capabilities  # what neither half's role gives is not claimed
    assert get_engine("mjcf+sapien").simulator == HYBRID and HYBRID in backend_names()
    with pytest.raises(UnsupportedCapability, match="does not simulate"):
        get_engine("usd+sapien")
    with pytest.raises(UnsupportedCapability, match="does not render"):
        get_engine("mujoco+usd")
    with pytest.raises(UnsupportedCapability, match="both halves"):
        get_engine("mujoco+mjcf")
    with pytest.raises(UnsupportedCapability, match="no files of its own"):
        get_exporter(HYBRID)


def test_a_renderer_that_cannot_draw_or_lacks_an_object_is_refused(bundle, tmp_path):
    from real2sim.core.bundle import Bundle
    from real2sim.core.errors import UnsupportedCapability
    from real2sim.core.manifest import Manifest
    from real2sim.engines import HybridScene, get_exporter

    mj = get_exporter("mjcf").load(get_exporter("mjcf").out_dir(bundle))
    sp_exp = get_exporter("sapien")
    no_render = sp_exp.load(sp_exp.out_dir(bundle), render=False)
    with pytest.raises(UnsupportedCapability, match="cannot render"):
        HybridScene(mj, no_render)
    # an export of the same bundle less one movable object: that object would be simulated but never drawn
    d = copy.deepcopy(bundle.manifest.to_dict())
    dropped = next(o for o, obj in bundle.manifest.objects.items() if not obj.fixed)
    del d["objects"][dropped]
    d["tasks"] = {}
    other = Bundle.load(bundle.root)
    other.manifest = Manifest.from_dict(d, str(bundle.root / "scene.json"))
    sp_exp.export(other, tmp_path / "sapien_less_one")
    fewer = sp_exp.load(tmp_path / "sapien_less_one")
    with pytest.raises(UnsupportedCapability, match=rf"objects \['{dropped}'\] are simulated but not in"):
        HybridScene(mj, fewer)
    for s in (mj, no_render, fewer):
        s.close()


def test_a_drawer_opened_in_the_physics_is_drawn_open(tmp_path):
    """Articulated objects are synced too: after MuJoCo pulls the drawer out, the hybrid's picture equals SAPIEN's own
    picture of the drawer at that opening (and not the drawer where it started)."""
    from articulated import robot_and_drawer_bundle

    from real2sim.engines import HybridScene, get_exporter
    from real2sim.pipeline import export_bundle

    b = robot_and_drawer_bundle(tmp_path)
    export_bundle(b, engines=("sapien",))
    mj_exp, sp_exp = get_exporter("mjcf"), get_exporter("sapien")
    fixed = [o for o, obj in b.manifest.objects.items() if obj.fixed]
    hybrid = HybridScene(mj_exp.load(mj_exp.out_dir(b)), sp_exp.load(sp_exp.out_dir(b)), fixed_ids=fixed)
    own = sp_exp.load(sp_exp.out_dir(b))
    try:
        assert hybrid.object_joint_names("cabinet") == ["drawer_joint"]
        closed = hybrid.render("main").copy()
        hybrid.set_object_joint_force("cabinet", "drawer_joint", 2.0)
        hybrid.step(0.4)
        q = hybrid.object_joint_positions("cabinet")["drawer_joint"]
        assert q > 0.05  # MuJoCo moved it
        opened = hybrid.render("main")
        assert abs(hybrid.renderer.object_joint_positions("cabinet")["drawer_joint"] - q) < 1e-6
        own.set_robot_qpos(hybrid.physics.robot_qpos())
        own.set_object_joint_positions("cabinet", {"drawer_joint": q})
        ref = own.render("main")
        assert np.abs(opened.astype(int) - closed.astype(int)).max(-1).__gt__(30).sum() > 200  # the picture changed
        assert np.mean(np.abs(opened.astype(int) - ref.astype(int)).max(-1) > 30) < 0.002  # and shows what SAPIEN shows
    finally:
        hybrid.close()
        own.close()
