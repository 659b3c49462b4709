"""Review-time edits (real2sim.apps.review: edits, preview, views): validation, atomic saves, undo, staleness, concurrent edits, preview."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from real2sim.apps.review import edits, preview, views
from real2sim.core.bundle import Bundle
from real2sim.core.errors import ExportError
from real2sim.pipeline.check import check_bundle


@pytest.fixture
def exported(exportable_bundle):
    from real2sim.pipeline import export_bundle

    export_bundle(exportable_bundle, engines=("mjcf",))
    return Bundle.load(exportable_bundle.root)


def pose(root, oid):
    return json.loads((root / "scene.json").read_text())["objects"][oid]["pose"]


def test_set_object_pose_saves_marks_stale_and_undoes(exported):
    root = exported.root
    assert exported.manifest.stages["export"].status == "done"
    before = (root / "scene.json").read_bytes()
    v0 = edits.manifest_version(root)
    res = edits.set_object_pose(root, "cube", [0.05, -0.02, 0.0225], np.radians([0, 0, 90]), expected_version=v0)
    assert res.version != v0 and res.version == edits.manifest_version(root)
    assert res.stale == ["export"]
    p = pose(root, "cube")
    assert p["position"] == [0.05, -0.02, 0.0225]
    assert p["quaternion_wxyz"] == pytest.approx([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], abs=1e-8)
    b = Bundle.load(root)
    assert b.manifest.stages["export"].status == "stale"
    xyz, rpy = edits.pose_to_xyz_rpy(b.manifest.objects["cube"].pose)
    assert rpy == pytest.approx([0, 0, np.pi / 2], abs=1e-8)
    assert [h["edit"] for h in edits.history(root)] == [res.message]
    edits.undo(root, res.version)
    assert (root / "scene.json").read_bytes() == before
    assert edits.history(root) == []
    with pytest.raises(edits.EditError, match="nothing to undo"):
        edits.undo(root)


@pytest.mark.parametrize("position,rpy,match", [
    ([6.0, 0, 0], [0, 0, 0], "out of range"),
    ([0, 0, float("nan")], [0, 0, 0], "finite"),
    ([0, 0, float("inf")], [0, 0, 0], "finite"),
    ([0, 0], [0, 0, 0], "3 numbers"),
    ("abc", [0, 0, 0], "3 numbers"),
    ([0, 0, 0], [0, 0, 4.0], r"229.18\] deg is out of range: each angle must be within \+-180 deg"),
    ([0, 0, 0], [0, float("nan"), 0], "finite"),
])
def test_bad_values_are_refused_and_nothing_is_written(recipe_bundle, position, rpy, match):
    root = recipe_bundle.root
    before = (root / "scene.json").read_bytes()
    with pytest.raises(edits.EditError, match=match):
        edits.set_object_pose(root, "cube", position, rpy)
    assert (root / "scene.json").read_bytes() == before
    assert edits.history(root) == []


def test_unknown_names_and_missing_robot(recipe_bundle):
    root = recipe_bundle.root
    with pytest.raises(edits.EditError, match="did you mean 'cube'"):
        edits.set_object_pose(root, "cub", [0, 0, 0], [0, 0, 0])
    with pytest.raises(edits.EditError, match="unknown camera"):
        edits.set_camera_pose(root, "side", [0, 0, 1], [0, 0, 0])
    recipe_bundle.manifest.robot = None  # the bundled scene has a WidowX; a bundle without one:
    recipe_bundle.save()
    with pytest.raises(edits.EditError, match="has no robot.*--robot"):
        edits.set_robot_base_pose(root, [0, 0, 0], [0, 0, 0])
    with pytest.raises(edits.EditError, match="not close to unit"):
        edits.set_object_pose(root, "cube", [0, 0, 0], quaternion_wxyz=[0, 0, 0, 0.01])


def test_concurrent_edit_is_refused(recipe_bundle):
    root = recipe_bundle.root
    v_tab1 = v_tab2 = edits.manifest_version(root)
    edits.set_object_pose(root, "cube", [0.1, 0, 0.0225], [0, 0, 0], expected_version=v_tab1)
    with pytest.raises(edits.ConcurrentEditError, match="changed since this page loaded it"):
        edits.set_object_pose(root, "cube", [-0.1, 0, 0.0225], [0, 0, 0], expected_version=v_tab2)
    assert pose(root, "cube")["position"] == [0.1, 0, 0.0225]
    with pytest.raises(edits.ConcurrentEditError):
        edits.undo(root, v_tab2)


def test_own_quick_edits_are_not_concurrent(recipe_bundle):
    """A tab's slider events may carry the version from before its own previous edit: not a conflict."""
    root = recipe_bundle.root
    v0 = edits.manifest_version(root)
    edits.set_object_pose(root, "cube", [0.1, 0, 0.0225], [0, 0, 0], expected_version=v0, writer="tab-a")
    edits.set_object_pose(root, "cube", [0.11, 0, 0.0225], [0, 0, 0], expected_version=v0, writer="tab-a")
    assert pose(root, "cube")["position"] == [0.11, 0, 0.0225]
    with pytest.raises(edits.ConcurrentEditError):
        edits.set_object_pose(root, "cube", [0.2, 0, 0.0225], [0, 0, 0], expected_version=v0, writer="tab-b")
    with pytest.raises(edits.ConcurrentEditError):
        edits.set_object_pose(root, "cube", [0.2, 0, 0.0225], [0, 0, 0], expected_version=v0)
    assert pose(root, "cube")["position"] == [0.11, 0, 0.0225]


def test_parallel_writers_never_lose_an_edit(recipe_bundle):
    """Threads editing different objects without version checks: every edit lands, the file stays valid."""
    root = recipe_bundle.root
    ids = ["cube", "can", "domino", "mug"]
    errors = []

    def work(oid, k):
        try:
            for i in range(5):
                edits.set_object_pose(root, oid, [0.01 * i, 0.1 * k, 0.05], [0, 0, 0])
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(oid, k)) for k, oid in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    b = Bundle.load(root)
    for k, oid in enumerate(ids):
        assert b.manifest.objects[oid].pose.position == pytest.approx([0.04, 0.1 * k, 0.05])


def test_slider_drag_coalesces_into_one_undo_step(recipe_bundle):
    root = recipe_bundle.root
    before = pose(root, "cube")
    for i in range(6):
        edits.set_object_pose(root, "cube", [0.01 * i, 0, 0.0225], [0, 0, 0])
    edits.set_object_pose(root, "can", [0.2, 0.2, 0.061], [0, 0, 0])
    assert len(edits.history(root)) == 2
    edits.undo(root)
    edits.undo(root)
    assert pose(root, "cube") == before


def test_camera_pose_round_trip_and_staleness(exported):
    root = exported.root
    T0 = np.array(exported.manifest.cameras["main"].T_world_camera)
    xyz, rpy = edits.camera_xyz_rpy(T0)
    res = edits.set_camera_pose(root, "main", np.array(xyz) + [0, 0, 0.05], rpy)
    T1 = np.array(Bundle.load(root).manifest.cameras["main"].T_world_camera)
    assert np.allclose(T1[:3, :3], T0[:3, :3], atol=1e-8)
    assert T1[:3, 3] == pytest.approx(T0[:3, 3] + [0, 0, 0.05])
    assert res.stale == ["export"]


def test_preview_renderer_moves_bodies_without_reexport(exported):
    root = exported.root
    xml = root / "exports" / "mjcf" / "scene.xml"
    mtime = xml.stat().st_mtime_ns
    pr = preview.PreviewRenderer(exported)
    try:
        pr.sync(exported.manifest)
        img0 = pr.render("main")
        m0 = pr.mask("main", ["cube"])
        assert img0.shape == (480, 640, 3) and m0.sum() > 100
        edits.set_object_pose(root, "cube", np.add(exported.manifest.objects["cube"].pose.position, [0.05, 0, 0]), [0, 0, 0])
        b = Bundle.load(root)
        pr.sync(b.manifest)
        img1, m1 = pr.render("main"), pr.mask("main", ["cube"])
        assert np.abs(img1.astype(int) - img0).max(-1).__gt__(30).sum() > 100
        assert np.argwhere(m1).mean(0)[1] != pytest.approx(np.argwhere(m0).mean(0)[1], abs=2)
        # the engine's own pose equals the manifest's
        T = pr.scene.object_pose("cube")
        assert T[:3, 3] == pytest.approx(b.manifest.objects["cube"].pose.position, abs=1e-9)
        # the table is fixed (no free joint): it moves through body_pos
        edits.set_object_pose(root, "table", [0, 0, -0.1], [0, 0, 0])
        pr.sync(Bundle.load(root).manifest)
        assert pr.scene.object_pose("table")[2, 3] == pytest.approx(-0.1)
        # the camera moves too
        xyz, rpy = edits.camera_xyz_rpy(b.manifest.cameras["main"].T_world_camera)
        edits.set_camera_pose(root, "main", np.add(xyz, [0, 0.1, 0]), rpy)
        b = Bundle.load(root)
        pr.sync(b.manifest)
        cam = b.manifest.cameras["main"].camera()
        pts = np.array([[0.0, 0.0, 0.0], [0.1, -0.05, 0.03]])
        assert pr.scene.project("main", pts) == pytest.approx(cam.project(pts), abs=1e-3)
        # the robot base follows an edit before any re-export
        base0 = pr.scene.robot_base_pose()[:3, 3].copy()
        r = b.manifest.robot
        edits.set_robot_base_pose(root, np.add(r.base_pose.position, [0.0, 0.04, 0.0]), [0, 0, 0])
        pr.sync(Bundle.load(root).manifest)
        assert pr.scene.robot_base_pose()[:3, 3] == pytest.approx(base0 + [0.0, 0.04, 0.0], abs=1e-9)
    finally:
        pr.close()
    assert xml.stat().st_mtime_ns == mtime, "the preview must not re-export"


def test_preview_exports_when_missing_or_says_what_to_run(tmp_path, exportable_bundle):
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    bare = bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "bare")
    with pytest.raises(ExportError, match="real2sim build"):
        preview.PreviewRenderer(bare)
    pr = preview.PreviewRenderer(exportable_bundle)
    try:
        assert pr.exported_now and (exportable_bundle.root / "exports" / "mjcf" / "scene.xml").is_file()
    finally:
        pr.close()


def test_compose_overlay_modes():
    render = np.zeros((4, 6, 3), np.uint8)
    real = np.full((4, 6, 3), 200, np.uint8)
    assert (preview.compose_overlay(render, None) == render).all()
    assert (preview.compose_overlay(render, real, 0.0) == real).all()
    assert (preview.compose_overlay(render, real, 1.0) == render).all()
    assert (preview.compose_overlay(render, real, 0.5) == 100).all()
    mask = np.zeros((4, 6), bool)
    mask[1, 2] = True
    comp = preview.compose_overlay(render, real, 1.0, "composite", mask)
    assert comp[1, 2].tolist() == [0, 0, 0] and comp[0, 0].tolist() == [200, 200, 200]
    heat = preview.compose_overlay(render, real, mode="difference")
    assert heat.shape == (4, 6, 3) and heat[..., 0].min() == 255
    assert preview.difference_heatmap(real, real).max() == 0
    # a real image of another size is resized to the render
    assert preview.compose_overlay(render, np.zeros((8, 12, 3), np.uint8), 0.5).shape == (4, 6, 3)


def test_real_image_falls_back_frame_then_plate(recipe_bundle):
    from PIL import Image

    from real2sim.core.manifest import FrameSpec

    b = recipe_bundle
    img, note = preview.real_image(b)
    assert img is None and "real2sim init" in note
    (b.root / "background").mkdir()
    Image.fromarray(np.full((480, 640, 3), 7, np.uint8)).save(b.root / "background" / "plate.png")
    b.manifest.capture.plate = "background/plate.png"
    img, note = preview.real_image(b)
    assert img[0, 0, 0] == 7 and "plate" in note
    (b.root / "capture" / "frames").mkdir(parents=True)
    Image.fromarray(np.full((480, 640, 3), 9, np.uint8)).save(b.root / "capture" / "frames" / "000000.png")
    b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png")]
    img, note = preview.real_image(b, frame=5)
    assert img[0, 0, 0] == 9 and "frame 0" in note


def test_masks_accept_reject_and_undo(recipe_bundle):
    root = recipe_bundle.root
    m = np.zeros((48, 64), bool)
    m[10:20, 5:15] = True
    edits.set_mask(root, "000000", "cube", m)
    b = Bundle.load(root)
    assert b.manifest.capture.masks == {"000000": {"cube": "masks/000000/cube.png"}}
    assert (preview.read_rgb(root / "masks/000000/cube.png")[..., 0] > 127).sum() == 100
    with pytest.raises(edits.EditError, match="empty"):
        edits.set_mask(root, "000000", "cube", np.zeros((4, 4), bool))
    with pytest.raises(edits.EditError, match="alphanumeric"):
        edits.set_mask(root, "../x", "cube", m)
    edits.remove_mask(root, "000000", "cube")
    assert Bundle.load(root).manifest.capture.masks == {}
    edits.undo(root)
    assert Bundle.load(root).manifest.capture.masks["000000"]["cube"] == "masks/000000/cube.png"


def test_collision_glb_and_stats(exportable_bundle):
    import trimesh

    for oid in ("cube", "mug", "can"):
        path = views.collision_glb(exportable_bundle, oid)
        assert path == exportable_bundle.root / "reports" / f"collision_{oid}.glb"
        scene = trimesh.load(path)
        assert len(scene.geometry) == 2  # visual + one hull / primitive
    assert views.collision_stats(exportable_bundle, "cube") == {}  # no collision report in this fixture


def test_overview_helpers(exported):
    rows = views.stage_table(exported)
    assert [r[0] for r in rows] == ["export"] and rows[0][1] == "done"
    missing = views.missing_pieces(exported)
    assert any("real2sim init" in m for m in missing)
    assert not any("stage 'export'" in m for m in missing)
    assert any("stage 'collision' is not run" in m for m in missing)


def test_edits_keep_the_bundle_valid(exported):
    root = exported.root
    edits.set_object_pose(root, "mug", [0.1, 0.1, 0.0], np.radians([10, -20, 30]))
    edits.set_camera_pose(root, "main", [0.6, 0.2, 0.4], np.radians([-120, 0, 100]))
    errors = [f for f in check_bundle(root) if f.level == "error"]
    assert not errors, errors


def test_export_failing_midway_keeps_bundle_and_previous_export(exported):
    from real2sim.pipeline import export_bundle

    root = exported.root
    hull = next(h for o in exported.manifest.objects.values() for h in o.collision.hulls)
    exported.path(hull).unlink()
    edits.set_object_pose(root, "cube", [0.0, 0.0, 0.0225], [0, 0, 0])  # makes the export input change
    with pytest.raises(ExportError, match="hull_000.obj"):
        export_bundle(Bundle.load(root), engines=("mjcf",))
    b = Bundle.load(root)
    assert b.manifest.stages["export"].status == "failed"
    assert (root / "exports" / "mjcf" / "scene.xml").is_file()


def test_real2sim_import_does_not_import_gradio():
    code = "import sys, real2sim, real2sim.apps.review, real2sim.apps.cli.review; assert 'gradio' not in sys.modules, 'gradio imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_parser_registers_review():
    import argparse

    from real2sim.apps.cli.review import add_parsers

    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers(dest="command"))
    args = ap.parse_args(["review", "some/dir", "--port", "7999", "--auth", "bob:pw:with:colons"])
    assert (args.dir, args.port, args.host, args.auth) == ("some/dir", 7999, "127.0.0.1", ("bob", "pw:with:colons"))
    with pytest.raises(SystemExit):
        ap.parse_args(["review", "d", "--auth", "nocolon"])


def test_rerun_alignment_for_one_object_is_undoable(tmp_path):
    """A misplaced object is re-fitted to its mask from the review page, and the fit can be undone."""
    from real2sim import collision
    from real2sim.demos.synthetic import SyntheticCaptureConfig, synthesize_capture
    from real2sim.pipeline import build, export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    truth = bundle_from_recipe(builtin_recipe(), tmp_path / "truth")
    truth.object("domino").pose.position[2] -= 0.005
    truth.save()
    build(truth, collision.CollisionConfig(workers=2), cache_dir=tmp_path / "cache")
    export_bundle(truth, engines=("mjcf",))
    work = bundle_from_recipe(builtin_recipe(), tmp_path / "work")
    synthesize_capture(work, truth, SyntheticCaptureConfig(masked=("domino",)))
    moved = edits.set_object_pose(work.root, "domino", [0.05, 0.02, 0.01], [0.0, np.pi / 2, 0.0])
    res = edits.rerun_object_stage(work.root, "alignment", "domino", expected_version=moved.version)
    from real2sim import Bundle

    got = Bundle.load(work.root).object("domino").pose.position
    assert np.linalg.norm(np.subtract(got, truth.object("domino").pose.position)) < 0.003, res.message
    edits.undo(work.root, expected_version=res.version)
    assert Bundle.load(work.root).object("domino").pose.position == pytest.approx([0.05, 0.02, 0.01])
    with pytest.raises(edits.EditError, match="no mask"):
        edits.rerun_object_stage(work.root, "texture", "cube")


def test_an_event_sent_before_an_undo_does_not_redo_the_undone_edit(exported):
    """ABA: undo restores the old content; an event the page sent before it, carrying the old version, is refused."""
    root = exported.root
    p0 = list(exported.manifest.objects["cube"].pose.position)
    v0 = edits.manifest_version(root)
    r1 = edits.set_object_pose(root, "cube", np.add(p0, [0.02, 0, 0]), [0, 0, 0], expected_version=v0, writer="tab")
    # a drag: the next event still carries v0 (sent before the first answer came back): the same page may go on
    r2 = edits.set_object_pose(root, "cube", np.add(p0, [0.03, 0, 0]), [0, 0, 0], expected_version=v0, writer="tab")
    assert r2.version != r1.version != v0
    edits.undo(root, expected_version=r2.version, writer="tab")
    assert Bundle.load(root).manifest.objects["cube"].pose.position == pytest.approx(p0)
    assert edits.manifest_version(root) != v0  # same content as before the drag, a new version
    with pytest.raises(edits.ConcurrentEditError):
        edits.set_object_pose(root, "cube", np.add(p0, [0.03, 0, 0]), [0, 0, 0], expected_version=v0, writer="tab")
    assert Bundle.load(root).manifest.objects["cube"].pose.position == pytest.approx(p0)


@pytest.mark.parametrize("spec", ["replay:path=/etc/passwd", "http://169.254.169.254/latest", "https://example.com:1",
                                  "scripted:path=/etc/passwd", "nosuch", "", "file:///etc/passwd"])
def test_the_page_refuses_policies_that_read_files_or_reach_servers(exported, spec):
    """The page's evaluate action once took replay:path= (probing any file on the server) and URLs (making the server
    send requests anywhere); now only the built-in, file-free policies run, and the message says where the rest go."""
    pytest.importorskip("gradio")
    from types import SimpleNamespace

    from real2sim.apps.review.app import _evaluator

    def must_not_run(*a, **k):
        raise AssertionError("the page started an evaluation")

    do_eval = _evaluator(SimpleNamespace(srv=SimpleNamespace(root=exported.root, on_render_thread=must_not_run)))
    msg = do_eval(spec, 1, "state", progress=lambda *a, **k: None)
    assert "cannot be run from the review page" in msg or "must be numbers" in msg
    assert "real2sim eval" in msg or "must be numbers" in msg


def test_the_page_accepts_the_builtin_policies():
    from real2sim.evaluation.policies.base import check_page_policy

    for spec in ("scripted", "scripted:noise=0.02", "random", " random:scale=0.5 "):
        assert check_page_policy(spec) == spec.strip()


def test_review_password_from_a_file_or_the_environment_not_argv(tmp_path, monkeypatch, exported):
    from real2sim.apps.cli import make_parser
    from real2sim.apps.cli.review import AUTH_ENV, review_auth
    from real2sim.core.errors import Real2SimError

    secret = tmp_path / "auth.txt"
    secret.write_text("ana:s3cret pass\n")
    parse = lambda *extra: make_parser().parse_args(["review", str(exported.root), *extra])  # noqa: E731
    monkeypatch.delenv(AUTH_ENV, raising=False)
    assert review_auth(parse()) is None
    assert review_auth(parse("--auth-file", str(secret))) == ("ana", "s3cret pass")
    monkeypatch.setenv(AUTH_ENV, "bo:pw:with:colons")
    assert review_auth(parse()) == ("bo", "pw:with:colons")
    assert review_auth(parse("--auth-file", str(secret))) == ("ana", "s3cret pass")  # the file wins over the variable
    (tmp_path / "bad.txt").write_text("no colon here\n")
    with pytest.raises(Real2SimError, match="bad.txt.*USER:PASSWORD"):
        review_auth(parse("--auth-file", str(tmp_path / "bad.txt")))
    with pytest.raises(Real2SimError, match="missing.txt"):
        review_auth(parse("--auth-file", str(tmp_path / "missing.txt")))


def test_failed_logins_over_the_limit_lock_the_name_for_the_window_over_http(tmp_path):
    """Three wrong passwords: the right one is refused too until the window has passed, then it logs in."""
    pytest.importorskip("gradio", reason="the review page needs gradio: pip install 'real2sim[review]'")
    import http.cookiejar
    import socket
    import time
    import urllib.error
    import urllib.parse
    import urllib.request

    from real2sim.apps.review.app import launch
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    root = tmp_path / "scene"
    bundle_from_recipe(builtin_recipe("tabletop"), root)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app, url = launch(root, port=port, auth="alice:s3cret", block=False, quiet=True, login_limit=(3, 3.0))
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def login(password: str) -> int:
        data = urllib.parse.urlencode({"username": "alice", "password": password}).encode()
        try:
            return opener.open(f"{url.rstrip('/')}/login", data=data, timeout=20).status
        except urllib.error.HTTPError as exc:
            return exc.code

    try:
        assert [login(f"guess{i}") for i in range(3)] == [400, 400, 400]
        t_locked = time.monotonic()
        assert login("s3cret") == 400  # locked: the right password is refused as well
        assert login("guess3") == 400
        time.sleep(max(0.0, 3.3 - (time.monotonic() - t_locked)) + 0.5)
        assert login("s3cret") == 200
        assert opener.open(f"{url.rstrip('/')}/config", timeout=20).status == 200
    finally:
        app.close()
        app.review_server.close()


def test_turn_about_world_z_has_no_gimbal_lock(exported, caplog):
    """A cube lying at pitch -90 deg (where roll and yaw sliders would be one axis) turns about world Z by the slider's
    angle, keeps its tilt, and the page's exact-pose text is the quaternion (no Euler angles in the round trip)."""
    pytest.importorskip("gradio")
    from real2sim.apps.review.app import _save_object_pose, _turned
    from real2sim.apps.review.server import ReviewServer
    from real2sim.core.geometry import quat_wxyz_to_matrix

    root = exported.root
    q_tilted = [float(np.cos(np.pi / 4)), 0.0, float(-np.sin(np.pi / 4)), 0.0]  # pitch -90 deg about y
    edits.set_object_pose(root, "cube", [0.1, 0.0, 0.03], quaternion_wxyz=q_tilted)
    srv = ReviewServer(root, export_if_missing=False)
    try:
        for turn in (10.0, 30.0, 60.0):  # a drag: every step from the same reference orientation
            _save_object_pose(srv, srv.version(), "cube", [0.1, 0.0, 0.03, turn], q_tilted, None)
        R = quat_wxyz_to_matrix(pose(root, "cube")["quaternion_wxyz"])
        R0 = quat_wxyz_to_matrix(q_tilted)
        delta = R @ R0.T
        assert np.allclose(delta[:3, 2], [0, 0, 1], atol=1e-6)  # a rotation about world Z only
        assert np.degrees(np.arctan2(delta[1, 0], delta[0, 0])) == pytest.approx(60.0, abs=1e-4)
        assert np.allclose(R[:, 2] @ [0, 0, 1], R0[:, 2] @ [0, 0, 1], atol=1e-9)  # the tilt is kept
        assert np.allclose(_turned(q_tilted, 0.0), q_tilted, atol=1e-9)
        text = views.pose_text_quat(Bundle.load(root).manifest.objects["cube"].pose)
        assert len(text.split(",")) == 7
        assert not [r for r in caplog.records if "gimbal" in r.getMessage().lower()]
    finally:
        srv.close()


def test_angle_errors_speak_degrees(recipe_bundle):
    with pytest.raises(edits.EditError, match=r"\[0.0, 0.0, 99999.0\] deg is out of range"):
        edits.set_object_pose(recipe_bundle.root, "cube", [0, 0, 0], np.radians([0, 0, 99999]))


def test_port_in_use_names_the_port_option(recipe_bundle, capsys):
    """A taken port: one line naming --port (not Gradio's GRADIO_SERVER_PORT traceback), exit 2."""
    pytest.importorskip("gradio")
    import socket

    from real2sim.apps.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert main(["review", str(recipe_bundle.root), "--port", str(port)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"127.0.0.1:{port}" in err and "--port N" in err and "GRADIO_SERVER_PORT" not in err, err


def test_a_scanned_object_shows_its_turntable_next_to_its_frames_and_the_scan_numbers(recipe_bundle, tmp_path):
    """Issue 18 item 5: an object from `real2sim scan` (add-object --scan keeps its report and pictures) gets the
    Objects tab's scan panel: the turntable of the mesh, capture frames with their masks, and the scan's numbers
    (frames used/skipped, mask confidence, Chamfer against the reference); other objects get none."""
    pytest.importorskip("open3d")
    pytest.importorskip("skimage")
    from real2sim.core.imaging import read_rgb
    from real2sim.pipeline.scan import ScanConfig, add_scanned_object, scan_object
    from real2sim.scan.synthetic import SyntheticScanConfig, write_synthetic_scan

    cap = tmp_path / "cap"
    write_synthetic_scan(cap, SyntheticScanConfig(shape="can", views=12, width=320, height=240, heldout=0,
                                                  supersample=1))
    res = scan_object(cap, tmp_path / "can_obj", ScanConfig(resolution=48, face_budget=3000, texture_size=128,
                                                            collision=False,
                                                            reference=str(cap / "truth" / "reference.obj")))
    add_scanned_object(recipe_bundle, "scanned_can", tmp_path / "can_obj", position=[0.1, 0.0, 0.0])
    b = Bundle.load(recipe_bundle.root)
    panel = views.scan_panel(b, "scanned_can")
    assert panel is not None and views.scan_panel(b, "cube") is None and views.scan_panel(b, None) is None
    md = panel["markdown"]
    r = res.report
    assert f"{len(r['frames_used'])} of 12 frames used" in md and "0 skipped" in md
    worst = min(r["mask_confidence"], key=r["mask_confidence"].get)
    assert f"min {r['mask_confidence'][worst]:.3f} (frame {worst})" in md
    assert f"Chamfer {r['grade']['chamfer_mm']:.2f} mm" in md and f"volume IoU {r['grade']['volume_iou']:.3f}" in md
    turntable, frames = read_rgb(panel["turntable"]), read_rgb(panel["frames"])
    assert (turntable < 200).any(-1).mean() > 0.03  # the object drawn on white
    assert frames.shape[1] >= 4 * 200 and frames.std() > 20  # tiles of capture frames with their masks
    pytest.importorskip("gradio")
    from real2sim.apps.review.app import _scan_values
    from real2sim.apps.review.server import ReviewServer

    srv = ReviewServer(recipe_bundle.root, export_if_missing=False)
    try:
        shown, note, tt, fr = _scan_values(srv, "scanned_can")
        assert shown["visible"] is True and note == md and tt == panel["turntable"] and fr == panel["frames"]
        assert _scan_values(srv, "cube")[0]["visible"] is False
    finally:
        srv.close()
