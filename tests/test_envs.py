"""Real2SimEnv on real engines (MuJoCo and SAPIEN): check_env, compositing, predicates, seeding, capabilities."""
from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from envbundle import check_env_strict, make_env_bundle  # noqa: E402

SMALL = (80, 60)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_env_bundle(tmp_path_factory.mktemp("envs"))


@pytest.fixture(scope="module")
def envs(bundle):
    """One env per backend, reused (a SAPIEN render scene costs seconds to create)."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    # both engines are project dependencies: an env that cannot be built is a failure, not a skip
    out = {backend: Real2SimEnv(bundle.root, task="lift_cube", backend=backend, privileged=True, obs_size=SMALL,
                                depth=True) for backend in ("mujoco", "sapien")}
    yield out
    for e in out.values():
        e.close()


def _env(envs, backend):
    return envs[backend]


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_check_env_passes(envs, backend):
    env = _env(envs, backend)
    check_env_strict(env, allow_no_spec=True)  # every checker warning fails but the justified ones
    obs, info = env.reset(seed=1)
    assert obs["image"].shape == (SMALL[1], SMALL[0], 3) and obs["image"].dtype == np.uint8
    assert obs["depth"].shape == (SMALL[1], SMALL[0], 1) and obs["depth"].max() > 0.3
    assert obs["objects"].shape == (len(info["object_ids"]), 7)
    assert info["instruction"] == "pick up the cube" and "cube" in info["init"]


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_composite_is_plate_outside_masks_and_sim_inside(envs, backend):
    env = _env(envs, backend)
    env.reset(seed=0)
    rgb, mask, _ = env.scene.render_layers(env.camera, env.movable, robot=True)
    saved = env.obs_size
    env.obs_size = env.native_size  # compare at the camera's resolution
    try:
        img, _ = env._image()
    finally:
        env.obs_size = saved
    assert 0.005 < mask.mean() < 0.8
    assert np.array_equal(img[~mask], env.plate[~mask])
    assert np.abs(img[mask].astype(int) - rgb[mask].astype(int)).max() <= 2  # lavapipe/EGL re-render
    assert not np.array_equal(img, rgb)  # the table/background really is the plate


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_observation_rendered_at_obs_size_matches_a_resized_full_render(envs, backend):
    """Rendering at the observation size (scaled intrinsics) shows what resizing the full composite shows."""
    import cv2

    env = _env(envs, backend)
    env.reset(seed=1)
    small, _ = env._image()
    saved = env.obs_size
    env.obs_size = env.native_size
    try:
        full, _ = env._image()
    finally:
        env.obs_size = saved
    ref = cv2.resize(full, env.obs_size, interpolation=cv2.INTER_AREA)
    assert small.shape == ref.shape == (env.obs_size[1], env.obs_size[0], 3)
    psnr = 10 * np.log10(255.0 ** 2 / np.mean((small.astype(float) - ref) ** 2))
    assert psnr > 25, psnr
    for size in ((160, 120), (96, 96)):  # also another aspect ratio: stretched per axis like a resize
        rgb, mask, _ = env.scene.render_layers(env.camera, env.movable, robot=True, size=size)
        _, mfull, _ = env.scene.render_layers(env.camera, env.movable, robot=True)
        mref = cv2.resize(mfull.astype(np.float32), size, interpolation=cv2.INTER_AREA) > 0.5
        assert rgb.shape == (size[1], size[0], 3) and (mask & mref).sum() / (mask | mref).sum() > 0.9


def test_robot_and_object_both_in_mask(envs):
    env = _env(envs, "mujoco")
    env.reset(seed=0)
    robot = env.scene.robot_mask(env.camera)
    cube = env.scene.object_mask(env.camera, "cube")
    fg = env.scene.foreground_mask(env.camera, env.movable)
    assert robot.any() and cube.any()
    assert np.all(fg[robot]) and np.all(fg[cube])
    table = env.scene.object_mask(env.camera, "table")
    assert not np.any(fg & table)


def test_no_plate_falls_back_to_render_with_a_note(tmp_path, caplog):
    from real2sim.evaluation.envs.env import Real2SimEnv

    b = make_env_bundle(tmp_path, plate=False, engines=("mjcf",))
    with caplog.at_level(logging.WARNING):
        env = Real2SimEnv(b.root, task="lift_cube", obs_size=SMALL)
    assert env.obs_mode == "render" and "no background plate" in caplog.text
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (60, 80, 3)
    env.close()


def test_unsupported_requests_raise(bundle, envs):
    from real2sim import UnsupportedCapability
    from real2sim.engines.sapien.scene import load_sapien_scene
    from real2sim.evaluation.envs.env import Real2SimEnv

    _env(envs, "sapien")
    with pytest.raises(UnsupportedCapability, match="textures"):
        Real2SimEnv(bundle.root, task="lift_cube", variants={"table_texture": True}, obs_size=SMALL)
    with pytest.raises(UnsupportedCapability, match="plate"):  # the table is the plate in composited observations
        Real2SimEnv(bundle.root, task="lift_cube", variants={"table_tint": 0.2}, obs_size=SMALL)
    from real2sim.core.errors import Real2SimError

    with pytest.raises(Real2SimError, match=r"\[min_scale, max_scale\]"):
        Real2SimEnv(bundle.root, task="lift_cube", variants={"lighting": True}, obs_size=SMALL)
    with pytest.raises(UnsupportedCapability, match="composited"):
        Real2SimEnv(bundle.root, task="lift_cube", obs_mode="render", variants={"background": "noise"})
    scene = load_sapien_scene(bundle.root / "exports/sapien/scene.sapien.json", render=False)
    with pytest.raises(UnsupportedCapability, match="render"):
        Real2SimEnv(bundle.root, task="lift_cube", backend="sapien", scene=scene)
    with pytest.raises(UnsupportedCapability, match="depth"):
        Real2SimEnv(bundle.root, task="lift_cube", backend="sapien", scene=scene, obs_mode="state", depth=True,
                    render_mode=None)
    with pytest.raises(UnsupportedCapability, match="appearance"):  # no renderer, no lights to change
        Real2SimEnv(bundle.root, task="lift_cube", backend="sapien", scene=scene, obs_mode="state",
                    render_mode=None, variants={"lighting": [0.5, 1.5]})
    env = Real2SimEnv(bundle.root, task="lift_cube", backend="sapien", scene=scene, obs_mode="state", render_mode=None)
    obs, _ = env.reset(seed=0)
    assert "image" not in obs and obs["qpos"].shape == (8,)
    opened = {"instruction": "open", "success": {"type": "joint_opened", "object": "mug", "joint": "lid", "fraction": 0.5}}
    with pytest.raises(UnsupportedCapability, match="articulated"):
        Real2SimEnv(bundle.root, task=opened, obs_mode="state", render_mode=None)


def test_variants_background_and_jitter_change_only_what_they_say(bundle):
    from real2sim.evaluation.envs.env import Real2SimEnv

    plain = Real2SimEnv(bundle.root, task="lift_cube", obs_size=SMALL)
    jit = Real2SimEnv(bundle.root, task="lift_cube", obs_size=SMALL,
                      variants={"background": "plate_jitter", "camera_jitter_px": 6})
    a, _ = plain.reset(seed=2)
    b, _ = jit.reset(seed=2)
    c, _ = jit.reset(seed=2)
    assert np.array_equal(b["image"], c["image"])  # seeded
    assert not np.array_equal(a["image"], b["image"])
    np.testing.assert_array_equal(a["qpos"], b["qpos"])
    plain.close(), jit.close()


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_lighting_and_tint_variants_change_the_rendered_foreground_only(bundle, backend):
    """SIMPLER's variant aggregation: lights and robot/table colours drawn per episode, seeded, physics untouched."""
    import cv2

    from real2sim.evaluation.envs.env import Real2SimEnv

    plain = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, obs_size=SMALL)
    var = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, obs_size=SMALL,
                      variants={"lighting": [0.4, 0.6], "robot_tint": 0.5}, scene=plain.scene)
    a, _ = plain.reset(seed=3)
    b, info = var.reset(seed=3)
    c, _ = var.reset(seed=3)
    assert np.array_equal(b["image"], c["image"]) and info["variant"]["light_scale"] <= 0.6  # seeded
    fg = var.scene.foreground_mask(var.camera, var.movable, robot=True)
    fg_small = cv2.resize(fg.astype(np.uint8), SMALL, interpolation=cv2.INTER_NEAREST) > 0
    bg = ~cv2.dilate(fg_small.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    assert np.array_equal(a["image"][bg], b["image"][bg])  # the plate is the plate
    assert b["image"][fg_small].mean() < 0.85 * a["image"][fg_small].mean()  # dimmer lights on the sim objects
    np.testing.assert_array_equal(a["qpos"], b["qpos"])
    plain.reset(seed=3)  # an env without appearance variants leaves the scene as exported
    var.scene.set_lighting(1.0), var.scene.set_tint("robot", (1, 1, 1))
    np.testing.assert_array_equal(plain.reset(seed=3)[0]["image"], a["image"])

    render = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, obs_size=SMALL, obs_mode="render",
                         variants={"table_tint": 0.6}, scene=plain.scene)
    imgs = [render.reset(seed=s)[0]["image"] for s in (0, 1)]
    assert np.abs(imgs[0].astype(int) - imgs[1]).mean() > 2  # the table's colour changes between episodes
    render.scene.set_tint(render._fixed[0], (1, 1, 1))
    plain.close()


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_unlit_shading_shows_the_stored_colours_in_both_engines(bundle, backend):
    """Unlit, a flat-coloured link shows its colour value (SAPIEN's linear materials get the sRGB conversion)."""
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.robots import get_robot

    env = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, obs_mode="render", shading="unlit")
    env.reset(seed=0)
    img = env.scene.render(env.camera)
    link_rgb = get_robot("widowx250s").link_rgba("upper_arm_link", {})[:3]
    robot = env.scene.robot_mask(env.camera)
    import cv2

    core = cv2.erode(robot.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)  # away from anti-aliased edges
    med = np.median(img[core], axis=0)
    # SAPIEN adds a small ambient specular term: a 0.08 grey shows as 27 instead of 20.4 (as 82 before its
    # colours were converted from sRGB to linear); MuJoCo shows the value itself
    assert np.abs(med - np.asarray(link_rgb) * 255).max() <= 8, (med, link_rgb)
    env.scene.set_lighting(1.0)  # the shared scene back to lit for the other tests
    env.close()


def test_auto_shading_is_unlit_when_the_textures_came_from_the_frames(bundle):
    import copy

    from real2sim.core.errors import UnknownNameError
    from real2sim.core.manifest import StageRecord
    from real2sim.evaluation.envs.env import Real2SimEnv, resolve_shading

    m = copy.deepcopy(bundle.manifest)
    assert resolve_shading(m) == "lit"  # synthetic textures, never back-projected
    if m.robot is not None:  # the robot's link textures come from the frames too
        m.robot.textures = {"wrist_link": {"mesh": "robot/textures/w.obj", "texture": "robot/textures/w.png"}}
        assert resolve_shading(m) == "unlit"
        m.robot.textures = {}
    m.stages["texture"] = StageRecord(status="done")
    assert resolve_shading(m) == "unlit" and resolve_shading(m, "lit") == "lit"
    with pytest.raises(UnknownNameError, match="did you mean 'unlit'"):
        resolve_shading(m, "unlt")
    env = Real2SimEnv(bundle.root, task="lift_cube", obs_mode="state", render_mode=None)
    assert env.shading == "lit"
    env.close()


def test_distractor_variant_places_some_bundle_objects_and_parks_the_others(bundle):
    from real2sim.core.errors import Real2SimError, UnknownNameError
    from real2sim.evaluation.envs.env import Real2SimEnv

    box = [[-0.06, 0.03], [0.2, 0.2]]
    spec = {"objects": ["mug", "domino", "bracket"], "count": [0, 2], "xy": box}
    env = Real2SimEnv(bundle.root, task="lift_cube", obs_mode="state", render_mode=None,
                      variants={"distractors": spec})
    seen = set()
    for seed in range(6):
        _, info = env.reset(seed=seed)
        chosen = info["variant"]["distractors"]
        seen.add(tuple(chosen))
        for oid in spec["objects"]:
            x, y = env.scene.object_pose(oid)[:2, 3]
            if oid in chosen:  # on the table inside the box (it may settle a little)
                assert box[0][0] - 0.01 <= x <= box[1][0] + 0.01 and box[0][1] - 0.01 <= y <= box[1][1] + 0.01, (oid, x, y)
            else:
                assert x > 40, (oid, x)  # parked far outside the camera
        cube = env.scene.object_pose("cube")[:2, 3]
        assert all(np.linalg.norm(env.scene.object_pose(o)[:2, 3] - cube) > 0.05 for o in chosen)
    assert len(seen) >= 3  # the number and the choice vary per episode
    _, a = env.reset(seed=4)
    _, b = env.reset(seed=4)
    assert a["variant"] == b["variant"]  # seeded
    env.close()
    for bad, match in (({**spec, "objects": ["cube"]}, "part of task"), ({**spec, "count": [1, 4]}, "count"),
                       ({**spec, "xy": [[0.1, 0.1], [0.0, 0.2]]}, "x1 > x0")):
        with pytest.raises(Real2SimError, match=match):
            Real2SimEnv(bundle.root, task="lift_cube", obs_mode="state", render_mode=None, variants={"distractors": bad})
    with pytest.raises(UnknownNameError, match="did you mean 'mug'"):
        Real2SimEnv(bundle.root, task="lift_cube", obs_mode="state", render_mode=None,
                    variants={"distractors": {**spec, "objects": ["mugg"]}})


def test_bad_actions_raise(envs):
    from real2sim import Real2SimError

    env = _env(envs, "mujoco")
    env.reset(seed=0)
    with pytest.raises(Real2SimError, match="shape"):
        env.step(np.zeros(6))
    with pytest.raises(Real2SimError, match="NaN"):
        env.step(np.r_[np.zeros(6), np.nan])


def test_predicates_by_hand():
    from real2sim.core.geometry import make_pose
    from real2sim.evaluation.envs.tasks import evaluate

    box = np.array([[-0.02, -0.02, -0.02], [0.02, 0.02, 0.02]])
    plate = np.array([[-0.1, -0.1, -0.01], [0.1, 0.1, 0.01]])
    bowl = np.array([[-0.08, -0.08, 0.0], [0.08, 0.08, 0.06]])
    bounds = {"cube": box, "plate": plate, "bowl": bowl}
    init = {"cube": make_pose([0, 0, 0.02]), "plate": make_pose([0.3, 0, 0.01]), "bowl": make_pose([-0.3, 0, 0])}
    poses = dict(init)
    lifted = {"type": "lifted", "object": "cube", "height": 0.05}
    assert not evaluate(lifted, poses, bounds, init)
    poses["cube"] = make_pose([0, 0, 0.08])
    assert evaluate(lifted, poses, bounds, init)
    on_top = {"type": "on_top", "object": "cube", "support": "plate"}
    poses["cube"] = make_pose([0.3, 0.05, 0.04])  # bottom 0.02 = plate top 0.02
    assert evaluate(on_top, poses, bounds, init)
    poses["cube"] = make_pose([0.3, 0.15, 0.04])  # off the footprint
    assert not evaluate(on_top, poses, bounds, init)
    poses["cube"] = make_pose([0.3, 0.05, 0.10])  # hovering
    assert not evaluate(on_top, poses, bounds, init)
    inside = {"type": "inside", "object": "cube", "container": "bowl"}
    poses["cube"] = make_pose([-0.3, 0.0, 0.03])
    assert evaluate(inside, poses, bounds, init)
    near = {"type": "near", "object": "cube", "target": "bowl", "distance": 0.05}
    assert evaluate(near, poses, bounds, init)
    far = {"type": "near", "object": "cube", "position": [1, 1, 0], "distance": 0.05}
    assert not evaluate(far, poses, bounds, init)
    assert evaluate({"type": "any_of", "terms": [far, inside]}, poses, bounds, init)
    assert not evaluate({"type": "all_of", "terms": [far, inside]}, poses, bounds, init)


def test_success_from_poses_placed_in_the_engine(envs):
    from real2sim.core.geometry import make_pose

    env = _env(envs, "mujoco")
    env.reset(seed=0)
    assert not env.success()
    T = env.scene.object_pose("cube")
    env.scene.set_object_pose("cube", make_pose(T[:3, 3] + [0, 0, 0.10]))
    assert env.success()
    env.reset(seed=0)
    assert not env.success()


def test_unknown_task_or_object_suggests_names(bundle):
    from real2sim import UnknownNameError
    from real2sim.evaluation.envs.env import Real2SimEnv

    with pytest.raises(UnknownNameError, match="lift_cube"):
        Real2SimEnv(bundle.root, task="lift_cub", obs_mode="state", render_mode=None)
    bad = {"instruction": "x", "success": {"type": "lifted", "object": "cubes"}}
    with pytest.raises(UnknownNameError, match="cube"):
        Real2SimEnv(bundle.root, task=bad, obs_mode="state", render_mode=None)


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_same_seed_same_episode(envs, backend):
    env = _env(envs, backend)
    acts = np.random.default_rng(0).uniform(env.action_space.low, env.action_space.high, (6, 7))

    def run(seed):
        obs, info = env.reset(seed=seed)
        out = [obs["objects"].copy()]
        for a in acts:
            obs, *_ = env.step(a)
            out.append(np.r_[obs["objects"].ravel(), obs["qpos"]])
        return info["init"], np.concatenate([np.ravel(x) for x in out])

    i1, t1 = run(5)
    i2, t2 = run(5)
    i3, _ = run(6)
    assert i1 == i2 and i1 != i3
    if backend == "mujoco":  # mj_resetData: bit-identical
        np.testing.assert_array_equal(t1, t2)
    else:  # PhysX on a reused scene: identical up to float32 rounding of the reset poses
        np.testing.assert_allclose(t1, t2, rtol=0, atol=1e-5)


def test_grid_init_enumerates_cells(bundle):
    from real2sim.evaluation.envs.env import Real2SimEnv

    task = {"instruction": "pick up the cube", "success": {"type": "lifted", "object": "cube"},
            "init": {"mode": "grid", "grid": [2, 2], "objects": {"cube": {"xy": [[0.05, -0.15], [0.15, -0.05]]}},
                     "settle_s": 0.0}}
    env = Real2SimEnv(bundle.root, task=task, obs_mode="state", render_mode=None)
    cells = [tuple(env.reset(seed=s)[1]["init"]["cube"][:2]) for s in range(5)]
    assert len(set(cells[:4])) == 4 and cells[4] == cells[0]
    assert {round(x, 3) for c in cells for x in c[:1]} == {0.05, 0.15}
    env.close()


def test_gymnasium_make_with_registered_ids(bundle):
    import gymnasium

    from real2sim.evaluation.envs import GENERIC_ID, register_bundle

    env_id = register_bundle(bundle.root, task="lift_cube", obs_mode="state", render_mode=None)
    assert env_id == "real2sim/tabletop-v0"
    env = gymnasium.make(env_id)
    obs, info = env.reset(seed=0)
    assert "qpos" in obs and info["task_id"] == "lift_cube"
    env.close()
    env = gymnasium.make(GENERIC_ID, bundle_dir=str(bundle.root), task="push_cube", obs_mode="state", render_mode=None)
    assert env.reset(seed=0)[1]["task_id"] == "push_cube"
    env.close()


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_joints_stay_in_range_under_random_joint_targets(bundle, backend):
    """Random joint targets drive the arm into the table; no joint may be pushed out of its range.

    MuJoCo's default soft limits once let the arm squeeze a finger 0.2 m out of its 2.2 cm slide (joint limits are
    now stiffer than contacts and drives carry the robot's force limits)."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    env = Real2SimEnv(bundle.root, task="lift_cube", backend=backend, control_mode="joint_pos", obs_mode="state")
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        lo, hi = env.controller.kin.lower, env.controller.kin.upper
        worst = np.zeros_like(lo)
        for _ in range(40):
            env.step(env.action_space.sample())
            q = env.scene.robot_qpos()
            worst = np.maximum(worst, np.maximum(lo - q, q - hi))
    finally:
        env.close()
    n_arm = env.controller.n_arm
    assert worst[n_arm:].max() < 0.008, f"gripper joints left their range by {worst[n_arm:]} m"
    assert worst[:n_arm].max() < 0.03, f"arm joints left their range by {worst[:n_arm]} rad"


def test_lens_source_shows_the_observation_through_the_real_cameras_lens(bundle, tmp_path):
    """A bundle whose frames init undistorted: ``lens='source'`` gives the image the real camera (and a policy
    trained on it) sees; a bundle captured without distortion refuses it, naming the fix."""
    import shutil

    from real2sim.capture.camera_file import camera_to_dict
    from real2sim.core.bundle import Bundle, atomic_write_json
    from real2sim.core.errors import UnsupportedCapability
    from real2sim.core.manifest import StageRecord
    from real2sim.evaluation.envs.env import Real2SimEnv

    root = tmp_path / "lens"
    shutil.copytree(bundle.root, root)
    b = Bundle.load(root)
    name = sorted(b.manifest.cameras)[0]
    with pytest.raises(UnsupportedCapability, match="lens='pinhole'"):
        Real2SimEnv(root, task="lift_cube", camera=name, obs_size=SMALL, lens="source")
    if name != "main":  # the camera file init reads is the bundle's 'main' camera
        b.manifest.cameras["main"] = b.manifest.cameras.pop(name)
    lens = b.manifest.cameras["main"].camera()
    lens.distortion = np.array([-0.25, 0.08, 0.0, 0.0, 0.0])
    atomic_write_json(b.path("capture/camera.json"), camera_to_dict(lens))
    b.manifest.stages["capture"] = StageRecord("done", metrics={"undistorted": True})
    b.save()
    flat = Real2SimEnv(root, task="lift_cube", obs_size=(160, 120))
    real = Real2SimEnv(root, task="lift_cube", obs_size=(160, 120), lens="source")
    check_env_strict(real, allow_no_spec=True)
    a, b_ = flat.reset(seed=3)[0]["image"], real.reset(seed=3)[0]["image"]
    assert a.shape == b_.shape
    centre, corner = (slice(55, 65), slice(75, 85)), (slice(0, 15), slice(0, 15))
    assert np.abs(a[centre].astype(int) - b_[centre]).mean() < 8  # the lens hardly moves the middle
    assert np.abs(a[corner].astype(int) - b_[corner]).mean() > 8  # and moves the corners
    flat.close(), real.close()


def test_lens_maps_send_a_pinhole_image_through_the_lens():
    """Against the forward lens model (OpenCV's projectPoints): the pinhole pixel p is where the lens puts it."""
    import cv2

    from real2sim.capture.undistort import lens_maps
    from real2sim.core.camera import Camera

    K = np.array([[300.0, 0, 161.0], [0, 300.0, 118.5], [0, 0, 1]])
    cam = Camera(320, 240, K, np.eye(4), np.array([-0.3, 0.1, 0.001, -0.002, 0.0]))
    for size in ((320, 240), (160, 100)):  # at the camera's size and at an observation size of another aspect
        w, h = size
        xs, ys = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
        smooth = np.stack([xs, ys, 0 * xs], -1)  # each pixel holds its own coordinates
        through = cv2.remap(smooth, *lens_maps(cam, size), cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        sx, sy = w / 320, h / 240
        Ks = np.array([[300 * sx, 0, (161.5) * sx - 0.5], [0, 300 * sy, 119 * sy - 0.5], [0, 0, 1]])
        p = np.array([[0.15 * w, 0.2 * h], [0.8 * w, 0.25 * h], [0.5 * w, 0.5 * h], [0.3 * w, 0.85 * h]])
        ray = np.linalg.solve(Ks, np.c_[p, np.ones(len(p))].T).T
        d, _ = cv2.projectPoints(ray.reshape(-1, 1, 3), np.zeros(3), np.zeros(3), Ks, cam.distortion)
        for (px, py), (dx, dy) in zip(p, d.reshape(-1, 2)):
            got = cv2.getRectSubPix(through, (1, 1), (float(dx), float(dy)))[0, 0]
            assert abs(got[0] - px) < 0.05 and abs(got[1] - py) < 0.05, (size, (px, py), (dx, dy), got)
