"""MJCF export: loads in MuJoCo, steps without warnings, matches the bundle camera pixel for pixel."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from reference import ref_iou as iou

from real2sim.core.errors import ExportError, UnsupportedCapability
from real2sim.core.geometry import transform_points
from real2sim.core.meshes import load_mesh
from real2sim.engines import get_exporter
from real2sim.render.silhouette import mask_centroid, silhouette


@pytest.fixture
def mjcf(exportable_bundle):
    exp = get_exporter("mjcf")
    res = exp.export(exportable_bundle)
    scene = exp.load(res.main_file.parent)
    yield exportable_bundle, res, scene
    scene.close()


def test_loads_and_steps_half_a_second_without_warnings(mjcf):
    bundle, res, scene = mjcf
    assert res.main_file.name == "scene.xml"
    assert set(scene.object_ids()) == set(bundle.manifest.objects)
    scene.step(0.5)
    assert scene.warnings() == {}
    for oid in bundle.dynamic_objects():
        assert scene.object_pose(oid)[2, 3] > bundle.manifest.table_height - 0.002, oid


def test_visual_and_collision_geoms_are_separate_classes(mjcf):
    _, res, scene = mjcf
    root = ET.parse(res.main_file).getroot()
    classes = {d.get("class"): d.find("geom").attrib for d in root.iter("default") if d.get("class")}
    assert classes["visual"]["contype"] == "0" and classes["visual"]["conaffinity"] == "0"
    m = scene.model
    for g in range(m.ngeom):  # objects' and the robot's geoms alike: group 2 draws, group 3 collides
        name = m.geom(g).name
        if m.geom_group[g] == 2:
            assert m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0, name
        else:
            assert m.geom_group[g] == 3 and m.geom_contype[g] != 0, name
        if name:
            assert name.endswith("_visual") == (m.geom_group[g] == 2), name
    # content-addressed asset file names: 16 hex digits
    for mesh in root.iter("mesh"):
        stem = mesh.get("file").split(".")[0]
        assert len(stem) == 16 and int(stem, 16) >= 0


def test_masses_and_inertias_are_the_bundles(mjcf):
    bundle, _, scene = mjcf
    for oid, obj in bundle.dynamic_objects().items():
        mass, com, inertia = scene.mass_properties(oid)
        assert mass == pytest.approx(obj.inertial.mass, rel=1e-6)
        np.testing.assert_allclose(com, obj.inertial.com, atol=1e-7)
        np.testing.assert_allclose(inertia, obj.inertial.inertia, rtol=1e-5, atol=1e-12)


def test_camera_projection_matches_bundle(mjcf):
    bundle, _, scene = mjcf
    from real2sim.evaluation.crosscheck import projection_errors

    assert projection_errors(bundle, engines=("mjcf",))["mjcf"] < 1e-3


@pytest.mark.render
def test_rendered_silhouettes_match_bundle_camera(mjcf):
    """Independent of the projection code: MuJoCo's own rendering vs an exact rasterisation."""
    import mujoco

    bundle, _, scene = mjcf
    cam = bundle.manifest.cameras["main"].camera()
    seg = scene.render("main", segmentation=True)
    assert seg.shape[:2] == (cam.height, cam.width)
    m = scene.model
    for oid in ("cube", "can", "mug", "domino"):
        bid = m.body(oid).id
        geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == bid]
        rendered = np.isin(seg[..., 0], geoms) & (seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM))
        mesh = load_mesh(bundle.path(bundle.object(oid).visual.mesh))
        expected = silhouette(cam, transform_points(scene.object_pose(oid), mesh.vertices), mesh.faces)
        assert rendered.sum() > 500, oid
        assert iou(rendered, expected) > 0.98, oid
        assert np.abs(mask_centroid(rendered) - mask_centroid(expected)).max() < 0.5, oid


@pytest.mark.render
def test_rgb_render_shows_textures(mjcf):
    bundle, _, scene = mjcf
    img = scene.render("main")
    assert img.shape == (480, 640, 3) and img.dtype == np.uint8
    cam = bundle.manifest.cameras["main"].camera()
    u, v = np.round(cam.project([bundle.object("can").pose.position])[0]).astype(int)
    patch = img[v - 10:v + 10, u - 6:u + 6].reshape(-1, 3).astype(float)
    assert patch[:, 0].mean() > patch[:, 2].mean() + 30  # the can's red stripes, not the table


def test_export_is_deterministic(exportable_bundle, tmp_path):
    exp = get_exporter("mjcf")
    a = exp.export(exportable_bundle, tmp_path / "a")
    b = exp.export(exportable_bundle, tmp_path / "b")
    rel = lambda r, root: sorted(p.relative_to(root) for p in r.files)  # noqa: E731
    assert rel(a, tmp_path / "a") == rel(b, tmp_path / "b")
    for f in rel(a, tmp_path / "a"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_failed_export_keeps_previous_export(exportable_bundle):
    exp = get_exporter("mjcf")
    first = exp.export(exportable_bundle)
    before = {p: p.read_bytes() for p in first.files}
    hull = exportable_bundle.object("bracket").collision.hulls[0]
    exportable_bundle.path(hull).unlink()
    with pytest.raises(ExportError, match="hull_000.obj"):
        exp.export(exportable_bundle)
    assert {p: p.read_bytes() for p in first.files} == before


def test_unfinished_bundle_is_refused_with_the_fix(recipe_bundle):
    with pytest.raises(ExportError, match="real2sim build"):
        get_exporter("mjcf").export(recipe_bundle)


def test_unknown_exporter_suggests():
    from real2sim.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="did you mean 'mjcf'"):
        get_exporter("mjfc")


def test_unknown_camera_is_refused(mjcf):
    from real2sim.core.errors import UnknownNameError

    _, _, scene = mjcf
    with pytest.raises(UnknownNameError, match="main"):
        scene.project("mian", np.zeros((1, 3)))
    assert "render" in scene.capabilities
    scene.capabilities = frozenset({"physics"})
    with pytest.raises(UnsupportedCapability):
        scene.render("main")


def test_an_obj_material_library_never_travels_into_the_bundle_or_the_exports(exportable_bundle, tmp_path):
    """An OBJ's 'mtllib /abs/path' was copied into exports unchanged (a reader would open a file outside them)."""
    from real2sim.core.bundle import Bundle
    from real2sim.pipeline import build, export_bundle
    from real2sim.pipeline.recipe import add_object

    b = exportable_bundle
    outside = tmp_path / "outside.mtl"
    outside.write_text("newmtl m\nmap_Kd /etc/hostname\n")
    src = tmp_path / "block.obj"
    src.write_text(f"mtllib {outside}\n  mtllib   ../../x.mtl\nv 0 0 0\nv 0.02 0 0\nv 0 0.02 0\nv 0 0 0.02\n"
                   "usemtl m\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    add_object(b, "block", src, position=[0.1, 0.1, 0.0])
    visual = b.path(b.object("block").visual.mesh).read_text()
    assert "mtllib" not in visual and "usemtl" not in visual and visual.count("\nf ") == 4
    build(Bundle.load(b.root))
    b = Bundle.load(b.root)
    b.path(b.object("block").visual.mesh).write_text(src.read_text())  # a hand-edited bundle file, same geometry
    export_bundle(b, engines=("mjcf",), force=True)
    objs = list((b.root / "exports" / "mjcf").rglob("*.obj"))
    assert objs and not [p for p in objs if b"mtllib" in p.read_bytes() or b"usemtl" in p.read_bytes()]
    assert not list((b.root / "exports" / "mjcf").rglob("*.mtl"))
