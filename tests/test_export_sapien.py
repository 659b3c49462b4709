"""SAPIEN 3 exporter: URDFs + scene.sapien.json, loaded back in SAPIEN and checked against the bundle."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sapien")

from real2sim.core.errors import ExportError, MeshError  # noqa: E402
from real2sim.engines.sapien.scene import _sapien_camera_extrinsic, load_sapien_scene  # noqa: E402
from real2sim.engines.sapien.writer import SCENE_FILE, SapienExporter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One exported tabletop bundle shared by the read-only tests of this module."""
    from conftest import give_simple_collision

    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    bundle = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), tmp_path_factory.mktemp("sapien") / "scene"))
    result = SapienExporter().export(bundle)
    return bundle, result


@pytest.fixture(scope="module")
def render_scene(exported):
    """The export loaded with rendering; skips when SAPIEN finds no Vulkan device."""
    bundle, result = exported
    scene = SapienExporter().load(result.main_file.parent)
    if "render" not in scene.capabilities:
        scene.close()
        pytest.skip(f"SAPIEN has no rendering device here ({scene.render_unavailable}); CPU rendering needs Mesa >= 24.3 "
                    "(mesa-vulkan-drivers from bookworm-backports)")
    yield scene
    scene.close()


def test_export_writes_urdfs_and_scene(exported):
    bundle, result = exported
    out = result.main_file.parent
    assert result.engine == "sapien" and result.main_file.name == SCENE_FILE
    assert out == bundle.root / "exports" / "sapien"
    assert sorted(p.relative_to(out).as_posix() for p in result.files) == sorted(_files(out))
    data = json.loads(result.main_file.read_text())
    assert list(data["objects"]) == list(bundle.manifest.objects)
    for oid, od in data["objects"].items():
        obj = bundle.object(oid)
        assert (out / od["urdf"]).is_file()
        assert od["fixed"] == obj.fixed and od["dynamic_friction"] == obj.friction
        assert od["pose"]["quaternion_wxyz"] == pytest.approx(obj.pose.quaternion_wxyz, abs=1e-9)
    # textured visual: OBJ -> MTL -> texture next to it
    mesh = out / "meshes"
    for obj_file in mesh.glob("*.obj"):
        mtl = obj_file.with_suffix(".mtl")
        assert f"mtllib {mtl.name}" in obj_file.read_text()
        assert f"map_Kd {obj_file.stem}.png" in mtl.read_text()
        assert obj_file.with_suffix(".png").is_file()
    cam = data["cameras"]["main"]
    K = bundle.manifest.cameras["main"].K
    assert (cam["cx"], cam["cy"]) == pytest.approx((K[0][2] + 0.5, K[1][2] + 0.5))  # SAPIEN pixel edges at integers
    can = (out / "objects" / "can.urdf").read_text()
    assert '<cylinder radius="0.033" length="0.122"/>' in can
    assert '<box size="0.9 0.7 0.04"/>' in (out / "objects" / "table.urdf").read_text()  # full extents
    assert "<inertial>" not in (out / "objects" / "table.urdf").read_text()  # static body: no mass


def test_load_objects_mass_and_materials(exported):
    bundle, result = exported
    with load_sapien_scene(result.main_file, render=False) as scene:
        assert set(scene.object_ids()) == set(bundle.manifest.objects)
        assert {"physics", "mass", "project"} <= scene.capabilities and "render" not in scene.capabilities
        for oid, obj in bundle.manifest.objects.items():
            np.testing.assert_allclose(scene.object_pose(oid), obj.pose.matrix(), atol=1e-6)
            shapes = scene.body(oid).get_collision_shapes()
            assert len(shapes) == max(1, len(obj.collision.hulls))
            for s in shapes:
                mat = s.physical_material
                assert mat.static_friction == pytest.approx(obj.friction) and mat.dynamic_friction == pytest.approx(obj.friction)
                assert mat.restitution == pytest.approx(obj.restitution)
            if obj.fixed:
                continue
            mass, com, inertia = scene.mass_properties(oid)
            ref = obj.inertial
            assert mass == pytest.approx(ref.mass, rel=1e-6), oid
            np.testing.assert_allclose(com, ref.com, atol=1e-7, err_msg=oid)
            I = np.asarray(ref.inertia)
            assert np.abs(inertia - I).max() <= 1e-4 * np.abs(I).max(), (oid, inertia, I)


def test_drop_comes_to_rest_on_table(exported):
    bundle, result = exported
    with load_sapien_scene(result.main_file, render=False) as scene:
        start = {oid: scene.object_pose(oid) for oid in scene.object_ids()}
        scene.step(1.0)
        table = bundle.manifest.table_height
        for oid, obj in bundle.manifest.objects.items():
            T = scene.object_pose(oid)
            if obj.fixed:
                np.testing.assert_allclose(T, start[oid], atol=1e-9)
                continue
            lin, ang = scene.object_velocity(oid)
            assert np.linalg.norm(lin) < 1e-3 and np.linalg.norm(ang) < 1e-2, (oid, lin, ang)
            assert np.linalg.norm(T[:2, 3] - start[oid][:2, 3]) < 0.003, oid
            com_z = (T @ np.r_[obj.inertial.com, 1.0])[2]
            assert table < com_z < start[oid][2, 3] + 0.05, oid
            # objects start 5 mm above the table: they fell (a step that moves nothing passes every check above)
            assert 0.003 < start[oid][2, 3] - T[2, 3] < 0.006, (oid, start[oid][2, 3] - T[2, 3])


def test_gravity_comes_from_the_bundle(exported, tmp_path):
    bundle, _ = exported
    bundle.manifest.physics.gravity = [0.0, 0.0, 2.0]  # upwards: the cube must rise 0.5 * 2 * 0.2^2 = 4 cm
    try:
        res = SapienExporter().export(bundle, tmp_path / "up")
    finally:
        bundle.manifest.physics.gravity = [0.0, 0.0, -9.81]
    with load_sapien_scene(res.main_file, render=False) as scene:
        z0 = scene.object_pose("cube")[2, 3]
        scene.step(0.2)
        assert scene.object_pose("cube")[2, 3] - z0 == pytest.approx(0.04, rel=0.05)


def test_project_matches_bundle_camera(exported):
    bundle, result = exported
    cam = bundle.manifest.cameras["main"].camera()
    rng = np.random.default_rng(0)
    # random points in front of the camera, inside its view
    uv = rng.uniform([0, 0], [cam.width, cam.height], (50, 2))
    depth = rng.uniform(0.2, 1.5, 50)
    pc = np.c_[(uv - [cam.cx, cam.cy]) / [cam.fx, cam.fy] * depth[:, None], depth]
    pw = pc @ cam.T_world_camera[:3, :3].T + cam.T_world_camera[:3, 3]
    with load_sapien_scene(result.main_file, render=False) as scene:
        got = scene.project("main", pw)
        np.testing.assert_allclose(got, cam.project(pw), atol=0.5)
        assert np.abs(got - cam.project(pw)).max() < 0.01
        # SAPIEN's extrinsic matrix is the documented world -> OpenCV-axes transform of the SAPIEN-frame pose
        np.testing.assert_allclose(scene.camera("main").get_extrinsic_matrix(),
                                   _sapien_camera_extrinsic(cam.pose_in("sapien")), atol=1e-5)


@pytest.mark.render
def test_render_image_and_pixel_convention(exported, render_scene):
    bundle, _ = exported
    scene = render_scene
    cam = bundle.manifest.cameras["main"].camera()
    img = scene.render("main")
    assert img.shape == (480, 640, 3) and img.dtype == np.uint8
    assert img.std() > 10 and len(np.unique(img.reshape(-1, 3), axis=0)) > 100  # not blank

    # a whole object: silhouette centroid vs the projection of its centre (perspective bias ~1 px)
    mask = scene.object_mask("main", "cube")
    assert mask.sum() > 200
    v, u = np.nonzero(mask)
    centre = scene.object_pose("cube")[:3, 3]
    np.testing.assert_allclose([u.mean(), v.mean()], cam.project(centre[None])[0], atol=2.0)

    # small spheres: their pixel centroid is their projection to a fraction of a pixel,
    # which pins down the half-pixel convention between SAPIEN and OpenCV
    sapien = pytest.importorskip("sapien")
    uv = np.array([[150.0, 120.0], [500.0, 380.0], [322.3, 236.8]])
    depth = np.array([0.45, 0.35, 0.4])
    pc = np.c_[(uv - [cam.cx, cam.cy]) / [cam.fx, cam.fy] * depth[:, None], depth]
    pw = pc @ cam.T_world_camera[:3, :3].T + cam.T_world_camera[:3, 3]
    assert (pw[:, 2] > bundle.manifest.table_height + 0.01).all()  # above the table, in free space
    builder = scene.scene.create_actor_builder()
    builder.add_sphere_visual(radius=0.004, material=[1.0, 0.0, 1.0, 1.0])
    markers = []
    for p in pw:
        builder.set_initial_pose(sapien.Pose(p))
        markers.append(builder.build_kinematic(name="marker"))
    try:
        seg, _ = scene.segmentation("main")
        for m, expected in zip(markers, cam.project(pw)):
            v, u = np.nonzero(seg == m.per_scene_id)
            assert len(u) > 50
            np.testing.assert_allclose([u.mean(), v.mean()], expected, atol=0.25)
    finally:
        for m in markers:
            scene.scene.remove_entity(m)


def test_export_is_deterministic(exported, tmp_path):
    bundle, result = exported
    first = _files(result.main_file.parent)
    SapienExporter().export(bundle, tmp_path / "again")
    assert _files(tmp_path / "again") == first
    SapienExporter().export(bundle)  # in place
    assert _files(result.main_file.parent) == first


def test_missing_hull_keeps_previous_export(exportable_bundle):
    bundle = exportable_bundle
    exporter = SapienExporter()
    out = exporter.export(bundle).main_file.parent
    before = _files(out)
    hull = bundle.path(bundle.object("mug").collision.hulls[0])
    hull.unlink()
    with pytest.raises((ExportError, MeshError)) as err:
        exporter.export(bundle)
    assert str(hull) in str(err.value)
    assert _files(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["sapien"]  # no temp dirs left behind


def test_load_refuses_broken_files(exported, tmp_path):
    bundle, _ = exported
    out = tmp_path / "broken"
    SapienExporter().export(bundle, out)
    hull = next((out / "collision").glob("*.obj"))
    hull.rename(hull.with_suffix(".bak"))
    with pytest.raises(ExportError, match=str(hull)):
        SapienExporter().load(out, render=False)
    hull.with_suffix(".bak").rename(hull)
    urdf = out / "objects" / "cube.urdf"
    urdf.write_text(urdf.read_text().replace("</link>", ""))
    with pytest.raises(ExportError, match=str(urdf)):
        SapienExporter().load(out, render=False)
    with pytest.raises(ExportError, match="not found"):
        load_sapien_scene(tmp_path / "nowhere" / SCENE_FILE)


def test_without_render_device_physics_still_loads(exported):
    """With no Vulkan device (simulated by an empty ICD list) 'render' is left out, the rest works."""
    _, result = exported
    code = textwrap.dedent(f"""
        import numpy as np
        from real2sim.engines.sapien.scene import load_sapien_scene
        s = load_sapien_scene({str(result.main_file)!r}, render=True)
        assert "render" not in s.capabilities, s.capabilities
        assert "rendering device" in s.render_unavailable, s.render_unavailable
        s.step(0.1)
        uv = s.project("main", np.array([[0.0, 0.0, 0.0]]))
        assert np.isfinite(uv).all()
        print("OK", sorted(s.capabilities))
    """)
    env = dict(os.environ, VK_ICD_FILENAMES=str(REPO / "no-such-icd.json"))
    env.pop("VK_DRIVER_FILES", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
