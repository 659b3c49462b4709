"""Articulated objects (issue #15 item 4): a URDF with joints in the bundle, exported to MJCF, SAPIEN and USD and
loaded back, its joint tasks, and its bad input. Core tests use a tiny drawer box the test writes
(tests/articulated.py); the shared mk_station cabinet is checked when ../shared/data is present."""
from __future__ import annotations

import json

import numpy as np
import pytest
from articulated import DRAWER_TRAVEL, run_policy_episode, write_drawer_urdf

from real2sim.core.articulation import ArticulatedModel, ArticulationError
from real2sim.core.camera import Camera
from real2sim.core.errors import ManifestError, UnknownNameError, UnsupportedCapability
from real2sim.core.geometry import look_at_opencv
from real2sim.core.manifest import CameraSpec

CABINET_AT = [0.05, -0.32, 0.0]


def _bundle_with_drawer(root, q=0.05, tabletop=True, **kw):
    """The tabletop scene (robot, objects) with the drawer box at CABINET_AT; ``tabletop=False``: the drawer box
    alone in an empty bundle (fast to export: no robot)."""
    from conftest import give_simple_collision

    from real2sim.core.bundle import Bundle
    from real2sim.pipeline.articulated import add_articulated_object
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    if tabletop:
        b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), root / "scene"))
    else:
        b = Bundle.create(root / "scene", name="drawer")
    add_articulated_object(b, "cabinet", write_drawer_urdf(root / "src", **kw), {"drawer_joint": q}, CABINET_AT)
    # a small camera in front of the cabinet, looking at its drawer
    K = np.array([[150.0, 0, 79.5], [0, 150.0, 59.5], [0, 0, 1]])
    eye, target = np.add(CABINET_AT, [0.75, 0.25, 0.5]), np.add(CABINET_AT, [0.15, 0.0, 0.1])
    b.manifest.cameras["cab"] = CameraSpec.from_camera(Camera(160, 120, K, look_at_opencv(eye, target)))
    b.save()
    return b


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from real2sim.pipeline import export_bundle

    b = _bundle_with_drawer(tmp_path_factory.mktemp("art"))
    res = export_bundle(b)
    assert not [k for k, v in res.items() if isinstance(v, Exception)], res
    return b


# -- bad input ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case,needle", [
    ("planar", "joint 'drawer_joint' has type 'planar'"),
    ("floating", "type 'floating'"),
    ("mimic", "mimics another joint"),
    ("loop", "kinematic loop"),
    ("mesh", "nosuch.obj"),
    ("nolimit", "has no <limit"),
])
def test_bad_urdf_is_refused_naming_the_file_and_joint(tmp_path, case, needle):
    if case in ("planar", "floating"):
        path = write_drawer_urdf(tmp_path, joint_type=case)
    elif case == "mimic":
        path = write_drawer_urdf(tmp_path, extra='  <link name="lid"/>\n  <joint name="lid_joint" type="prismatic">'
                                 '<parent link="drawer"/><child link="lid"/><limit lower="0" upper="1"/>'
                                 '<mimic joint="drawer_joint"/></joint>\n')
    elif case == "loop":
        path = write_drawer_urdf(tmp_path, extra='  <joint name="second" type="fixed"><parent link="body"/>'
                                 '<child link="drawer"/></joint>\n')
    elif case == "mesh":
        path = write_drawer_urdf(tmp_path, mesh="nosuch.obj")
    else:
        path = write_drawer_urdf(tmp_path)
        path.write_text(path.read_text().replace('<limit lower="0" upper="0.15" effort="100" velocity="1"/>', ""))
    with pytest.raises(ArticulationError) as err:
        ArticulatedModel.load(path)
    assert needle in str(err.value) and str(path) in str(err.value) and "Fix:" in str(err.value)


def test_add_object_refuses_unknown_joints_and_out_of_range_values(tmp_path, recipe_bundle):
    from real2sim.pipeline.articulated import add_articulated_object

    urdf = write_drawer_urdf(tmp_path / "src")
    with pytest.raises(UnknownNameError, match="drawer_jiont.*did you mean 'drawer_joint'"):
        add_articulated_object(recipe_bundle, "cabinet", urdf, {"drawer_jiont": 0.1})
    with pytest.raises(ArticulationError, match=r"drawer_joint' = 0.5 is outside its limits \[0.0, 0.15\]"):
        add_articulated_object(recipe_bundle, "cabinet", urdf, {"drawer_joint": 0.5})
    with pytest.raises(UnknownNameError, match="--joint-damping"):
        add_articulated_object(recipe_bundle, "cabinet", urdf, damping={"lid": 1.0})
    assert "cabinet" not in recipe_bundle.manifest.objects and not (recipe_bundle.root / "objects/cabinet").exists()


def test_cli_add_object_urdf_and_set_joints(tmp_path, recipe_bundle, capsys):
    from real2sim.apps.cli import main
    from real2sim.core.bundle import Bundle
    from real2sim.core.meshes import load_mesh
    from real2sim.pipeline.check import check_bundle

    urdf = write_drawer_urdf(tmp_path / "src", damping=3.0)
    root = str(recipe_bundle.root)
    assert main(["add-object", root, "cabinet", "--urdf", str(urdf), "--joints", "drawer_joint=0.1",
                 "--joint-friction", "0.5", "--position", ",".join(map(str, CABINET_AT))]) == 0
    b = Bundle.load(recipe_bundle.root)
    obj = b.object("cabinet")
    assert obj.fixed and obj.collision.kind == "urdf"
    assert obj.articulation.joint_positions == {"drawer_joint": 0.1}
    assert (obj.articulation.joint_dynamics["drawer_joint"].damping,
            obj.articulation.joint_dynamics["drawer_joint"].friction) == (3.0, 0.5)
    # the posed mesh (what alignment, masks and task boxes see) has the drawer 0.1 m out: the handle reaches 0.27 m
    hi = load_mesh(b.path(obj.visual.mesh)).bounds[1]
    assert hi[0] == pytest.approx(0.17 + 0.1, abs=1e-6)
    assert main(["set-joints", root, "cabinet", "drawer_joint=0"]) == 0
    b = Bundle.load(recipe_bundle.root)
    assert load_mesh(b.path(b.object("cabinet").visual.mesh)).bounds[1][0] == pytest.approx(0.17, abs=1e-6)
    assert not [f for f in check_bundle(b.root) if f.level == "error" and "cabinet" in f.field]
    capsys.readouterr()
    for argv, needle in ((["set-joints", root, "cabinet", "drawer=0.1"], "drawer"),
                         (["add-task", root, "t", "--instruction", "x", "--success",
                           '{"type": "joint_closed", "object": "cabinet", "joint": "drawer"}'], "did you mean 'drawer_joint'"),
                         (["set-joints", root, "cube", "x=0"], "rigid"),
                         (["add-object", root, "c2", "--urdf", str(urdf), "--joints", "drawer_joint"], "NAME=NUMBER"),
                         (["add-object", root, "c3", "--mesh", str(urdf), "--joints", "a=1"], "go with --urdf")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert "t" not in Bundle.load(recipe_bundle.root).manifest.tasks  # the bundle still loads: nothing was saved


def test_tasks_naming_unknown_joints_are_refused_by_the_manifest(tmp_path):
    from real2sim.core.bundle import Bundle

    b = _bundle_with_drawer(tmp_path)
    d = json.loads((b.root / "scene.json").read_text())
    d["tasks"]["open"] = {"instruction": "open the drawer",
                          "success": {"type": "joint_opened", "object": "cabinet", "joint": "drawer"}}
    (b.root / "scene.json").write_text(json.dumps(d))
    with pytest.raises(ManifestError, match=r"tasks.open.success.joint.*'drawer' is not a movable joint.*drawer_joint"):
        Bundle.load(b.root)
    d["tasks"]["open"]["success"] = {"type": "joint_opened", "object": "cube", "joint": "drawer_joint"}
    (b.root / "scene.json").write_text(json.dumps(d))
    with pytest.raises(ManifestError, match="rigid object"):
        Bundle.load(b.root)


# -- export then reload --------------------------------------------------------------------------------------------
def test_every_engine_loads_the_links_where_the_bundle_puts_them(exported):
    from real2sim.engines import get_exporter

    model = ArticulatedModel.load(exported.path(exported.object("cabinet").articulation.urdf))
    T_obj = exported.object("cabinet").pose.matrix()
    want = T_obj @ model.link_poses({"drawer_joint": 0.05})["drawer"]
    for engine in ("mjcf", "sapien", "usd"):
        scene = get_exporter(engine).load(exported.exports_dir(engine))
        try:
            assert "articulation" in scene.capabilities
            assert scene.object_joint_names("cabinet") == ["drawer_joint"]
            assert scene.object_joint_positions("cabinet")["drawer_joint"] == pytest.approx(0.05, abs=1e-6)
            np.testing.assert_allclose(scene.object_link_pose("cabinet", "drawer"), want, atol=1e-5, err_msg=engine)
            np.testing.assert_allclose(scene.object_pose("cabinet"), T_obj, atol=1e-6, err_msg=engine)
            assert scene.object_joint_names("cube") == []
            with pytest.raises(UnknownNameError, match="did you mean .drawer"):
                scene.object_link_pose("cabinet", "drawr") if engine == "usd" else \
                    scene.set_object_joint_force("cabinet", "drawer_jiont", 1.0)
        finally:
            scene.close()


def test_usd_holds_joint_limits_and_dynamics(exported):
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(exported.exports_dir("usd") / "scene.usda"))
    prim = stage.GetPrimAtPath("/World/cabinet")
    assert prim.HasAPI(UsdPhysics.ArticulationRootAPI)
    joint = UsdPhysics.PrismaticJoint(stage.GetPrimAtPath("/World/cabinet/Joints/drawer_joint"))
    assert (joint.GetLowerLimitAttr().Get(), joint.GetUpperLimitAttr().Get()) == (0.0, pytest.approx(DRAWER_TRAVEL))
    drive = UsdPhysics.DriveAPI(joint.GetPrim(), "linear")
    assert drive.GetStiffnessAttr().Get() == 0.0 and drive.GetDampingAttr().Get() == pytest.approx(5.0)
    assert stage.GetPrimAtPath("/World/cabinet/drawer").HasAPI(UsdPhysics.MassAPI)


def test_link_masses_agree_across_engines(exported):
    """Both simulators get the same link mass (from the box geometry at 1000 kg/m^3): 1.09 kg for the drawer."""
    from real2sim.engines import get_exporter

    want = ArticulatedModel.load(exported.path(exported.object("cabinet").articulation.urdf)).link_inertials(1000.0)
    mj = get_exporter("mjcf").load(exported.exports_dir("mjcf"))
    sp = get_exporter("sapien").load(exported.exports_dir("sapien"))
    b = mj._mj.mj_name2id(mj.model, mj._mj.mjtObj.mjOBJ_BODY, "cabinet/drawer")
    assert mj.model.body_mass[b] == pytest.approx(want["drawer"][0], rel=1e-6)
    assert sp._art_links["cabinet"]["drawer"].mass == pytest.approx(want["drawer"][0], rel=1e-5)
    assert want["drawer"][0] == pytest.approx(0.26 * 0.26 * 0.01 * 1000 + 0.01 * 0.28 * 0.1 * 1000 + 0.01 * 0.26 * 0.05 * 1000)
    mj.close(), sp.close()


def _masks_follow_the_joint(exported, engine):
    """The object's mask includes the drawer where the joint puts it."""
    from real2sim.engines import get_exporter

    for engine in (engine,):
        scene = get_exporter(engine).load(exported.exports_dir(engine))
        if "render" not in scene.capabilities:
            scene.close()
            pytest.skip(f"{engine} cannot render here")
        # a point on the tray's floor when the drawer is fully out; empty space in front of the box when it is in
        p = exported.object("cabinet").pose.matrix() @ [0.1 + DRAWER_TRAVEL, 0.0, 0.065, 1.0]
        u, v = np.round(scene.project("cab", p[None, :3])[0]).astype(int)
        scene.set_object_joint_positions("cabinet", {"drawer_joint": 0.0})
        closed = scene.object_mask("cab", "cabinet")
        scene.set_object_joint_positions("cabinet", {"drawer_joint": DRAWER_TRAVEL})
        opened = scene.object_mask("cab", "cabinet")
        assert opened[v, u] and not closed[v, u], (engine, u, v)
        assert (opened & ~closed).sum() > 300, (engine, (opened & ~closed).sum())
        scene.close()


@pytest.mark.render
def test_mujoco_masks_follow_the_joint(exported):
    _masks_follow_the_joint(exported, "mjcf")


@pytest.mark.render
@pytest.mark.slow
def test_sapien_masks_follow_the_joint(exported):
    """Slow alone: the first SAPIEN picture of a process compiles its shaders on lavapipe (37 s here), a cost every
    SAPIEN render test shares; the check itself takes 0.1 s."""
    _masks_follow_the_joint(exported, "sapien")


# -- tasks -----------------------------------------------------------------------------------------------------------
def test_joint_tasks_and_inside_a_drawer(exported):
    from real2sim.evaluation.envs.env import Real2SimEnv

    opened = {"instruction": "open the drawer", "success": {"type": "joint_opened", "object": "cabinet",
                                                             "joint": "drawer_joint", "fraction": 0.5}}
    closed = {"instruction": "close the drawer", "success": {"type": "joint_closed", "object": "cabinet",
                                                              "joint": "drawer_joint"}}
    inside = {"instruction": "put the cube in the drawer", "success": {"type": "inside", "object": "cube",
                                                                        "container": "cabinet", "link": "drawer"}}
    for backend in ("mujoco", "sapien"):
        env = Real2SimEnv(exported.root, task=opened, backend=backend, obs_mode="state", render_mode=None)
        env.reset(seed=0)
        for q, want in ((0.05, False), (0.08, True)):
            env.scene.set_object_joint_positions("cabinet", {"drawer_joint": q})
            assert env.success() is want, (backend, q)
        env.close()
        env = Real2SimEnv(exported.root, task=closed, backend=backend, obs_mode="state", render_mode=None)
        env.reset(seed=0)
        assert env.success() is False  # 0.05 m out; closed is within 10% of the range (0.015 m)
        env.scene.set_object_joint_positions("cabinet", {"drawer_joint": 0.01})
        assert env.success() is True
        env.close()
    env = Real2SimEnv(exported.root, task=inside, backend="mujoco", obs_mode="state", render_mode=None)
    env.reset(seed=0)
    assert env.success() is False
    drawer = env.scene.object_link_pose("cabinet", "drawer")
    T = env.scene.object_pose("cube").copy()
    T[:3, 3] = drawer[:3, :3] @ [0.0, 0.0, -0.01] + drawer[:3, 3]
    env.scene.set_object_pose("cube", T)
    assert env.success() is True
    env.close()
    bad = {"instruction": "x", "success": {"type": "joint_opened", "object": "cabinet", "joint": "lid"}}
    with pytest.raises(UnknownNameError, match="lid"):
        Real2SimEnv(exported.root, task=bad, obs_mode="state", render_mode=None)
    rigid = {"instruction": "x", "success": {"type": "joint_opened", "object": "cube", "joint": "lid"}}
    with pytest.raises(UnsupportedCapability, match="articulated"):
        Real2SimEnv(exported.root, task=rigid, obs_mode="state", render_mode=None)


# -- the shared cabinet ------------------------------------------------------------------------------------------------
def test_mk_station_cabinet_in_every_engine(shared_data, tmp_path):
    from conftest import give_simple_collision

    from real2sim.engines import get_exporter
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.articulated import add_articulated_object
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    urdf = shared_data / "google_robot" / "cabinet" / "mk_station.urdf"
    if not urdf.is_file():
        pytest.skip(f"{urdf} is absent")
    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene"))
    add_articulated_object(b, "cabinet", urdf, {"top_drawer_joint": 0.2}, [0.8, -0.6, 0.0])
    assert set(b.object("cabinet").articulation.joint_positions) == {"top_drawer_joint", "middle_drawer_joint",
                                                                      "bottom_drawer_joint"}
    res = export_bundle(b)
    assert not [k for k, v in res.items() if isinstance(v, Exception)], res
    for engine in ("mjcf", "sapien", "usd"):
        scene = get_exporter(engine).load(b.exports_dir(engine))
        q = scene.object_joint_positions("cabinet")
        assert q["top_drawer_joint"] == pytest.approx(0.2, abs=1e-6) and q["middle_drawer_joint"] == 0.0
        T = scene.object_link_pose("cabinet", "top_drawer")
        np.testing.assert_allclose(T[:3, 3], [0.8 + 0.2, -0.6, 0.668], atol=1e-5, err_msg=engine)
        scene.close()


def test_alignment_places_a_masked_articulated_object_and_texturing_leaves_it(tmp_path):
    """A masked cabinet is aligned as one mesh (its links at the stored joints) even though it is fixed; texturing
    leaves it (its colours come from the URDF); a rigid fixed object (the table) is in neither."""
    from real2sim.pipeline import _has_masked_aligned_objects
    from real2sim.texture.stage import _targets

    b = _bundle_with_drawer(tmp_path)
    b.manifest.capture.masks = {"000000": {"cabinet": "masks/000000/cabinet.png", "table": "masks/000000/table.png",
                                           "cube": "masks/000000/cube.png"}}
    assert _targets(b, None, articulated=True) == ["cube", "cabinet"]
    assert _targets(b, None) == ["cube"]
    b.manifest.capture.masks = {"000000": {"cabinet": "masks/000000/cabinet.png"}}
    assert _has_masked_aligned_objects(b)


def test_a_recipe_can_hold_an_articulated_object_and_its_tasks(tmp_path):
    from real2sim.core.bundle import Bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    src = builtin_recipe("tabletop")
    data = json.loads(src.read_text())
    for od in data["objects"].values():  # the recipe's files stay where they are
        for k in ("mesh", "texture"):
            if k in od:
                od[k] = str((src.parent / od[k]).resolve())
    write_drawer_urdf(tmp_path / "cab")
    data["objects"]["cabinet"] = {"urdf": "cab/drawer_box.urdf", "joints": {"drawer_joint": 0.1}, "joint_damping": 2.0,
                                  "pose": {"position": CABINET_AT, "quaternion_wxyz": [1, 0, 0, 0]}}
    data["tasks"]["open_drawer"] = {"instruction": "open the drawer",
                                    "success": {"type": "joint_opened", "object": "cabinet", "joint": "drawer_joint"}}
    (tmp_path / "recipe.json").write_text(json.dumps(data))
    b = Bundle.load(bundle_from_recipe(tmp_path / "recipe.json", tmp_path / "scene").root)
    art = b.object("cabinet").articulation
    assert art.joint_positions == {"drawer_joint": 0.1} and art.joint_dynamics["drawer_joint"].damping == 2.0
    assert b.manifest.tasks["open_drawer"].success["joint"] == "drawer_joint"
    data["objects"]["cabinet"]["joints"] = {"drawer_joint": 1.0}
    (tmp_path / "recipe.json").write_text(json.dumps(data))
    with pytest.raises(ArticulationError, match="outside its limits"):
        bundle_from_recipe(tmp_path / "recipe.json", tmp_path / "scene2")
    assert not (tmp_path / "scene2").exists()


@pytest.mark.parametrize("joint_type", ["revolute", "continuous"])
def test_a_turning_joint_in_every_engine(tmp_path, joint_type):
    """The tray on a revolute (limits [0, 0.15] rad) or continuous joint about a tilted axis: every engine puts the
    link where the bundle's kinematics does, and a torque against Coulomb friction turns it the same in MuJoCo and
    SAPIEN (the friction uses the tray's inertia about the axis)."""
    from real2sim.engines import get_exporter
    from real2sim.evaluation import crosscheck
    from real2sim.pipeline import export_bundle

    b = _bundle_with_drawer(tmp_path, q=0.1, tabletop=False, joint_type=joint_type, axis="0.2 0 1", damping=0.05,
                            friction=0.002)
    res = export_bundle(b)
    assert not [k for k, v in res.items() if isinstance(v, Exception)], res
    model = ArticulatedModel.load(b.path(b.object("cabinet").articulation.urdf))
    want = b.object("cabinet").pose.matrix() @ model.link_poses({"drawer_joint": 0.1})["drawer"]
    for engine in ("mjcf", "sapien", "usd"):
        with get_exporter(engine).load(b.exports_dir(engine)) as scene:
            np.testing.assert_allclose(scene.object_link_pose("cabinet", "drawer"), want, atol=1e-5, err_msg=engine)
    q = crosscheck.joint_pull_test(b, "cabinet", "drawer_joint", 0.01, 0.3, start=0.0)
    assert abs(q["mjcf"] - q["sapien"]) < 0.002 and q["mjcf"] > 0.01, q  # rad (measured 0.0154 and 0.0153)


@pytest.mark.parametrize("backend", ["mujoco", "sapien"])
def test_scripted_oracle_closes_a_drawer(tmp_path, backend):
    """The WidowX pushes the open drawer (0.1 m of 0.15) shut from the env's joint info: joint_closed holds in both
    engines (measured: closed after 20-21 control steps, 0.0004 m / 0 m)."""
    from conftest import give_simple_collision

    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies.scripted import ScriptedPolicy
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.articulated import add_articulated_object
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene"))
    # turned to face the robot (its base at x = -0.35), the drawer opening towards it
    add_articulated_object(b, "cabinet", write_drawer_urdf(tmp_path / "src"), {"drawer_joint": 0.1}, [0.05, -0.3, 0.0],
                           (0.0, 0.0, 0.0, 1.0))
    export_bundle(b, ["mjcf" if backend == "mujoco" else backend])
    task = {"instruction": "close the drawer", "time_limit_s": 8.0,
            "success": {"type": "joint_closed", "object": "cabinet", "joint": "drawer_joint"}}
    env = Real2SimEnv(b.root, task=task, backend=backend, obs_mode="state", render_mode=None, privileged=True)
    obs, info = env.reset(seed=0)
    (joint,) = info["joints"]
    np.testing.assert_allclose(joint["axis"], [-1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(joint["face"], [0.05 - 0.15 - 0.1, -0.3, 0.1], atol=1e-6)  # the front's outer face
    info = run_policy_episode(env, ScriptedPolicy(), obs, info)
    assert info["success"], info["object_joints"]
    assert info["object_joints"]["cabinet"]["drawer_joint"] < 0.015
