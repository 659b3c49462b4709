"""The review page's joint sliders and robot-mounted camera views, without a browser: joint edits of an articulated
object and of the robot's start joints go through ``set-joints``' code (limits checked in the unit shown, the posed mesh
rewritten), undo brings the mesh back, the preview follows, a mounted camera renders at the robot's start joints."""
from __future__ import annotations

import json

import numpy as np
import pytest
from articulated import DRAWER_TRAVEL, robot_and_drawer_bundle

from real2sim.apps.review import edits, views
from real2sim.core.errors import Real2SimError


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return robot_and_drawer_bundle(tmp_path_factory.mktemp("joints")).root


def _manifest(root) -> dict:
    return json.loads((root / "scene.json").read_text())


def _drawer(root) -> float:
    return _manifest(root)["objects"]["cabinet"]["articulation"]["joint_positions"]["drawer_joint"]


def test_drawer_edit_is_set_joints_undoable_and_refuses_out_of_range(scene):
    from real2sim.core.meshes import load_mesh

    root = scene
    visual = root / "objects" / "cabinet" / "visual.obj"
    mesh0, scene0 = visual.read_bytes(), (root / "scene.json").read_bytes()
    # the posed mesh is in the object frame: the drawer (and its handle, the front-most point) comes out along +x
    x0 = load_mesh(visual).vertices[:, 0].max()
    res = edits.set_object_joints(root, "cabinet", {"drawer_joint": 0.12}, expected_version=edits.manifest_version(root))
    assert _drawer(root) == pytest.approx(0.12)
    assert load_mesh(visual).vertices[:, 0].max() == pytest.approx(x0 + 0.10, abs=1e-6)  # the posed mesh follows
    assert "drawer_joint=0.12 m" in res.message and "export" in res.stale
    # out of range: refused naming the joint, the value and the limits in m; nothing written
    before = (root / "scene.json").read_bytes(), visual.read_bytes()
    with pytest.raises(Real2SimError, match=rf"joint 'drawer_joint' = 0.3 m is outside its limits \[0, {DRAWER_TRAVEL:g}\] m"):
        edits.set_object_joints(root, "cabinet", {"drawer_joint": 0.3}, expected_version=res.version)
    with pytest.raises(Real2SimError, match="did you mean 'drawer_joint'"):
        edits.set_object_joints(root, "cabinet", {"drawer": 0.1}, expected_version=res.version)
    assert ((root / "scene.json").read_bytes(), visual.read_bytes()) == before
    # undo: the joint and the posed mesh are back
    edits.undo(root)
    assert (root / "scene.json").read_bytes() == scene0 and visual.read_bytes() == mesh0


def test_robot_joint_edit_checks_limits_in_deg_and_undoes(scene):
    root = scene
    q0 = _manifest(root)["robot"]["joint_positions"]
    res = edits.set_robot_joints(root, {"waist": 0.5})
    assert _manifest(root)["robot"]["joint_positions"] == pytest.approx([0.5, *q0[1:]])
    assert "waist=0.5 rad (28.65 deg)" in res.message
    with pytest.raises(Real2SimError, match=r"joint 'elbow' = 2.5 rad \(143.2 deg\) is outside its limits \[-2, 2\] rad "
                                            r"\(\[-114.6, 114.6\] deg\)"):
        edits.set_robot_joints(root, {"elbow": 2.5})
    with pytest.raises(Real2SimError, match="did you mean 'elbow'"):
        edits.set_robot_joints(root, {"elbo": 0.1})
    edits.undo(root)
    assert _manifest(root)["robot"]["joint_positions"] == q0


def test_sliders_show_the_limits_in_the_unit_and_keep_exact_values(scene):
    from real2sim.core.bundle import Bundle

    b = Bundle.load(scene)
    (drawer,) = views.object_joint_controls(b)
    assert (drawer.owner, drawer.joint.unit, drawer.bounds()) == ("cabinet", "m", (0.0, DRAWER_TRAVEL))
    assert drawer.label == f"drawer_joint (m, prismatic, 0 to {DRAWER_TRAVEL:g} m)"
    robot, why = views.robot_joint_controls(b)
    assert not why and [c.joint.name for c in robot] == ["waist", "elbow", "wrist", "finger_left", "finger_right"]
    waist, elbow = robot[0], robot[1]
    # limits +-3 rad = +-171.887 deg: the slider's ends are rounded inwards, so both ends are inside the limits
    assert waist.bounds() == (-171.88, 171.88) and waist.label.startswith("waist (deg, revolute, -171.88 to 171.88 deg")
    assert abs(waist.joint.stored(waist.bounds()[1])) <= 3.0
    assert robot[3].joint.unit == "m"
    # a slider still at the shown rounding keeps the exact stored value; a moved one converts deg -> rad
    assert elbow.to_store(elbow.shown(1.2), 1.2) == 1.2
    assert elbow.to_store(60.0, 1.2) == pytest.approx(np.radians(60.0))
    assert views.joint_values(b, [drawer, *robot]) == pytest.approx([0.02, 0.0, 1.2, 1.2, 0.03, 0.03])


def test_preview_follows_the_joints_and_the_mounted_camera_renders_at_the_start_joints(scene):
    from real2sim.apps.review.server import ReviewServer

    root = scene
    srv = ReviewServer(root)
    try:
        assert srv.mounted_cameras() == {"wrist": "hand"} == views.mounted_camera_names(srv.bundle())
        img0, _ = srv.picture("main", 0, "composite", 0.5)
        wrist0, note = srv.mounted_view(None)
        assert wrist0.shape == (120, 160, 3) and wrist0.std() > 10  # not blank: the cabinet is in view
        assert "render only" in note and "no background plate" in note
        edits.set_object_joints(root, "cabinet", {"drawer_joint": 0.12})
        img1, _ = srv.picture("main", 0, "composite", 0.5)
        assert (np.abs(img1.astype(int) - img0).max(-1) > 30).sum() > 300  # the drawer came out in the preview
        edits.set_robot_joints(root, {"waist": 0.5})
        wrist1, _ = srv.mounted_view("wrist")
        assert (np.abs(wrist1.astype(int) - wrist0).max(-1) > 30).sum() > 1000  # the camera turned with the arm
        edits.undo(root)
        edits.undo(root)
        np.testing.assert_array_equal(srv.mounted_view("wrist")[0], wrist0)
        np.testing.assert_array_equal(srv.picture("main", 0, "composite", 0.5)[0], img0)
    finally:
        srv.close()


def test_cli_set_joints_robot(scene, capsys):
    from real2sim.apps.cli import main

    root = str(scene)
    q0 = _manifest(scene)["robot"]["joint_positions"]
    assert main(["set-joints", root, "robot", "wrist=0.25"]) == 0
    assert _manifest(scene)["robot"]["joint_positions"] == pytest.approx([*q0[:2], 0.25, *q0[3:]])
    assert main(["set-joints", root, "robot", "wrist=9"]) != 0
    assert "joint 'wrist' = 9 rad" in capsys.readouterr().err
    assert main(["set-joints", root, "robot", f"wrist={q0[2]}"]) == 0


def test_google_robot_overhead_camera_and_the_mk_station_drawers(shared_data, tmp_path, monkeypatch):
    """Real data: SIMPLER's cabinet (mk_station.urdf, three drawers) next to the Google Robot. The page offers a slider
    per drawer (m, 0 to 0.5 m) and per robot joint (deg), pulling the top drawer changes the preview, and the head's
    overhead camera renders and turns with joint_head_pan."""
    from real2sim.apps.review.server import ReviewServer
    from real2sim.core.bundle import Bundle
    from real2sim.engines.sandbox import robot_only_bundle
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.articulated import add_articulated_object

    g = shared_data / "google_robot"
    if not (g / "description" / "google_robot_meta_sim_fix_wheel_fix_fingertip.urdf").is_file():
        pytest.skip(f"{g / 'description'} has no Google Robot URDF")
    monkeypatch.setenv("REAL2SIM_GOOGLE_ROBOT", str(g / "description"))
    b = robot_only_bundle("google_robot", tmp_path)
    add_articulated_object(b, "cabinet", g / "cabinet" / "mk_station.urdf", {}, [0.75, 0.0, 0.0], (0.0, 0.0, 0.0, 1.0))
    export_bundle(b, engines=("mjcf",))
    b = Bundle.load(b.root)
    labels = [c.label for c in views.object_joint_controls(b)]
    assert labels == [f"{d}_drawer_joint (m, prismatic, 0 to 0.5 m)" for d in ("top", "middle", "bottom")]
    robot, _ = views.robot_joint_controls(b)
    assert robot[7].label.startswith("joint_head_pan (deg, revolute")
    srv = ReviewServer(b.root)
    try:
        assert srv.mounted_cameras() == {"overhead_camera": "link_camera"}
        head0, _ = srv.mounted_view("overhead_camera")
        assert head0.shape == (512, 640, 3) and head0.std() > 10
        edits.set_object_joints(b.root, "cabinet", {"top_drawer_joint": 0.2})
        head1, _ = srv.mounted_view("overhead_camera")
        assert (np.abs(head1.astype(int) - head0).max(-1) > 30).sum() > 1000  # the top drawer came out, in view
        edits.set_robot_joints(b.root, {"joint_head_pan": -0.3})
        head2, _ = srv.mounted_view("overhead_camera")
        assert (np.abs(head2.astype(int) - head1).max(-1) > 30).mean() > 0.2  # the head turned
    finally:
        srv.close()
