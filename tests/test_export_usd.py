"""USD exporter: structure, compliance, mass properties, camera projection, determinism, atomicity."""
from __future__ import annotations

import numpy as np
import pytest

pxr = pytest.importorskip("pxr")

from pxr import Gf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade  # noqa: E402

from real2sim.core.errors import (  # noqa: E402
    ExportError,
    MeshError,
    Real2SimError,
    UnsupportedCapability,
)
from real2sim.core.geometry import look_at_opencv, transform_points  # noqa: E402
from real2sim.core.meshes import load_mesh  # noqa: E402
from real2sim.engines import get_exporter  # noqa: E402
from real2sim.engines.usd.writer import (  # noqa: E402
    MAIN_FILE,
    UsdExporter,
    _prim_name,
    _principal_axes,
    check_compliance,
)


@pytest.fixture
def exported(exportable_bundle):
    result = UsdExporter().export(exportable_bundle)
    return exportable_bundle, result


def _stage(result):
    stage = Usd.Stage.Open(str(result.main_file))
    assert stage is not None
    return stage


def _obj_prim(stage, oid):
    prim = stage.GetPrimAtPath(f"/World/{oid}")
    assert prim.IsValid(), oid
    return prim


def test_registered_and_metadata(exported):
    bundle, result = exported
    assert isinstance(get_exporter("usd"), UsdExporter)
    assert result.engine == "usd" and result.main_file.name == MAIN_FILE
    assert result.main_file == bundle.root / "exports" / "usd" / MAIN_FILE
    assert all(p.is_file() for p in result.files) and result.main_file in result.files
    stage = _stage(result)
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0
    assert stage.GetDefaultPrim().GetPath() == "/World"
    scene = UsdPhysics.Scene(stage.GetPrimAtPath("/World/PhysicsScene"))
    g = np.array(scene.GetGravityDirectionAttr().Get()) * scene.GetGravityMagnitudeAttr().Get()
    assert np.allclose(g, bundle.manifest.physics.gravity, atol=1e-6)
    errors, _ = check_compliance(result.main_file)
    assert errors == []


def test_objects_visuals_textures_uvs(exported):
    bundle, result = exported
    stage = _stage(result)
    with UsdExporter().load(result.main_file.parent) as scene:
        assert scene.object_ids() == list(bundle.manifest.objects)
    for oid, obj in bundle.manifest.objects.items():
        prim = _obj_prim(stage, oid)
        vis = UsdGeom.Mesh(prim.GetChild("Visual"))
        src = load_mesh(bundle.path(obj.visual.mesh))
        assert len(vis.GetPointsAttr().Get()) == len(src.vertices)
        assert list(vis.GetFaceVertexCountsAttr().Get()) == [3] * len(src.faces)
        st = UsdGeom.PrimvarsAPI(vis).GetPrimvar("st")
        assert st and st.GetInterpolation() == UsdGeom.Tokens.faceVarying
        assert st.GetTypeName() == "texCoord2f[]"
        uv = np.array(st.Get())
        assert uv.shape == (3 * len(src.faces), 2)
        assert np.allclose(uv, np.asarray(src.visual.uv)[np.asarray(src.faces).ravel()], atol=1e-6)
        material, _ = UsdShade.MaterialBindingAPI(vis.GetPrim()).ComputeBoundMaterial()
        assert material
        shaders = {UsdShade.Shader(c).GetIdAttr().Get(): UsdShade.Shader(c) for c in material.GetPrim().GetChildren()}
        assert {"UsdPreviewSurface", "UsdUVTexture", "UsdPrimvarReader_float2"} <= set(shaders)
        asset = shaders["UsdUVTexture"].GetInput("file").Get()
        assert asset.path.startswith("./textures/") and asset.resolvedPath
        assert open(asset.resolvedPath, "rb").read() == bundle.path(obj.visual.texture).read_bytes()
        (src_conn,), _ = shaders["UsdPreviewSurface"].GetInput("diffuseColor").GetConnectedSources()
        assert src_conn.source.GetPath() == shaders["UsdUVTexture"].GetPath()


def test_collision_and_physics_schemas(exported):
    bundle, result = exported
    stage = _stage(result)
    for oid, obj in bundle.manifest.objects.items():
        prim = _obj_prim(stage, oid)
        assert prim.HasAPI(UsdPhysics.RigidBodyAPI) == (not obj.fixed)
        assert prim.HasAPI(UsdPhysics.MassAPI) == (not obj.fixed)
        assert not prim.GetChild("Visual").HasAPI(UsdPhysics.CollisionAPI)  # visual and collision are separate
        colliders = prim.GetChild("Collision").GetChildren()
        assert colliders
        for c in colliders:
            assert c.HasAPI(UsdPhysics.CollisionAPI)
            assert UsdGeom.Imageable(c).ComputePurpose() == UsdGeom.Tokens.guide
            pm, _ = UsdShade.MaterialBindingAPI(c).ComputeBoundMaterial("physics")
            api = UsdPhysics.MaterialAPI(pm.GetPrim())
            assert pm.GetPrim().HasAPI(UsdPhysics.MaterialAPI)
            assert api.GetStaticFrictionAttr().Get() == pytest.approx(obj.friction)
            assert api.GetDynamicFrictionAttr().Get() == pytest.approx(obj.friction)
            assert api.GetRestitutionAttr().Get() == pytest.approx(obj.restitution)
        col = obj.collision
        if col.kind == "hulls":
            assert len(colliders) == len(col.hulls)
            for c, rel in zip(colliders, col.hulls):
                assert c.IsA(UsdGeom.Mesh)
                assert UsdPhysics.MeshCollisionAPI(c).GetApproximationAttr().Get() == UsdPhysics.Tokens.convexHull
                assert len(UsdGeom.Mesh(c).GetPointsAttr().Get()) == len(load_mesh(bundle.path(rel)).vertices)
        else:
            (c,) = colliders
            # world-space bound of the primitive == the bundle primitive placed by object pose @ primitive pose
            T = obj.pose.matrix() @ col.pose.matrix()
            local = UsdGeom.Xformable(c).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
            if col.kind == "box":
                assert c.IsA(UsdGeom.Cube)
                corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
                got = np.array([local.Transform(Gf.Vec3d(*p)) for p in corners])
                assert np.allclose(got, transform_points(T, corners * col.size), atol=1e-9)
            elif col.kind == "cylinder":
                cyl = UsdGeom.Cylinder(c)
                assert cyl.GetAxisAttr().Get() == "Z"
                assert cyl.GetRadiusAttr().Get() == pytest.approx(col.size[0])
                assert cyl.GetHeightAttr().Get() == pytest.approx(2 * col.size[1])
                assert np.allclose(np.array(local).T, T, atol=1e-9)


def test_mass_properties_round_trip(exported):
    bundle, result = exported
    with UsdExporter().load(result.main_file.parent) as scene:
        assert "mass" in scene.capabilities
        n = 0
        for oid, obj in bundle.dynamic_objects().items():
            m, com, I = scene.mass_properties(oid)
            ref = obj.inertial
            assert m == pytest.approx(ref.mass, rel=1e-6)
            assert np.allclose(com, ref.com, rtol=1e-6, atol=1e-9)
            Iref = np.array(ref.inertia)
            assert np.linalg.norm(I - Iref) <= 1e-6 * np.linalg.norm(Iref), oid
            n += 1
        assert n == 5
        with pytest.raises(ExportError, match="MassAPI"):
            scene.mass_properties("table")  # fixed: collider only


def test_principal_axes_are_a_proper_rotation():
    rng = np.random.default_rng(0)
    for _ in range(50):
        A = rng.normal(size=(3, 3))
        I = A @ A.T + 0.1 * np.eye(3)
        d, R = _principal_axes(I)
        assert np.linalg.det(R) == pytest.approx(1.0)
        assert np.allclose(R @ np.diag(d) @ R.T, I, atol=1e-12)


def test_object_pose_round_trip(exported):
    bundle, result = exported
    with UsdExporter().load(result.main_file.parent) as scene:
        for oid, obj in bundle.manifest.objects.items():
            assert np.allclose(scene.object_pose(oid), obj.pose.matrix(), atol=1e-6)


def _points_in_view(cam, n=50, seed=1):
    rng = np.random.default_rng(seed)
    uv = rng.uniform([0, 0], [cam.width - 1, cam.height - 1], size=(n, 2))
    z = rng.uniform(0.2, 2.0, size=n)
    pc = np.column_stack([(uv[:, 0] - cam.cx) / cam.fx * z, (uv[:, 1] - cam.cy) / cam.fy * z, z])
    return transform_points(cam.T_world_camera, pc)


def _gf_project(prim, width, height, points):
    """Independent projection through pxr's own Gf.Camera / GfFrustum matrices."""
    gfcam = UsdGeom.Camera(prim).GetCamera(Usd.TimeCode.Default())
    frustum = gfcam.frustum
    view, proj = frustum.ComputeViewMatrix(), frustum.ComputeProjectionMatrix()
    out = []
    for p in points:
        ndc = proj.Transform(view.Transform(Gf.Vec3d(*map(float, p))))
        out.append([(ndc[0] + 1) / 2 * width - 0.5, (1 - ndc[1]) / 2 * height - 0.5])
    return np.array(out)


def test_projection_matches_opencv_camera(exported):
    bundle, result = exported
    cam = bundle.manifest.cameras["main"].camera()
    assert (cam.cx, cam.cy) != ((cam.width - 1) / 2, (cam.height - 1) / 2)  # off-centre principal point
    pts = _points_in_view(cam)
    ref = cam.project(pts)
    with UsdExporter().load(result.main_file.parent) as scene:
        got = scene.project("main", pts)
        assert np.abs(got - ref).max() < 1e-3
        gf = _gf_project(scene.stage.GetPrimAtPath("/World/Cameras/main"), cam.width, cam.height, pts)
        assert np.abs(gf - ref).max() < 1e-3
        # the object origins land where the bundle camera puts them
        origins = np.array([o.pose.position for o in bundle.manifest.objects.values()])
        assert np.abs(scene.project("main", origins) - cam.project(origins)).max() < 1e-3


def test_projection_anisotropic_and_offset_camera(exportable_bundle):
    """fx != fy and a far off-centre principal point: signs and aspect handled."""
    from real2sim.core.camera import Camera
    from real2sim.core.manifest import CameraSpec

    T = look_at_opencv([0.5, -0.4, 0.6], [0.0, 0.0, 0.0])
    K = np.array([[510.0, 0, 250.0], [0, 530.0, 170.0], [0, 0, 1]])
    cam = Camera(400, 300, K, T, near=0.05, far=5.0)
    exportable_bundle.manifest.cameras["side-cam"] = CameraSpec.from_camera(cam)
    result = UsdExporter().export(exportable_bundle)
    assert any("fx != fy" in w for w in result.warnings)
    cam = exportable_bundle.manifest.cameras["side-cam"].camera()
    pts = _points_in_view(cam, seed=3)
    with UsdExporter().load(result.main_file.parent) as scene:
        assert np.abs(scene.project("side-cam", pts) - cam.project(pts)).max() < 1e-3
        prim = scene.stage.GetPrimAtPath("/World/Cameras/side_cam")  # '-' is not allowed in prim names
        assert UsdGeom.Camera(prim).GetClippingRangeAttr().Get() == Gf.Vec2f(0.05, 5.0)
        assert np.abs(_gf_project(prim, cam.width, cam.height, pts) - cam.project(pts)).max() < 1e-3


def test_lights_shine_along_bundle_direction(exported):
    bundle, result = exported
    stage = _stage(result)
    for i, light in enumerate(bundle.manifest.lights):
        prim = stage.GetPrimAtPath(f"/World/Lights/light_{i}")
        assert prim.IsA(UsdLux.DistantLight)
        M = np.array(UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())).T
        d = np.asarray(light.direction, float)
        assert np.allclose(M[:3, :3] @ [0, 0, -1], d / np.linalg.norm(d), atol=1e-9)
        assert np.allclose(UsdLux.DistantLight(prim).GetColorAttr().Get(), light.color, atol=1e-6)


def test_deterministic_output(exported, tmp_path):
    bundle, result = exported
    first = result.main_file.read_bytes()
    again = UsdExporter().export(bundle)
    assert again.main_file.read_bytes() == first
    elsewhere = UsdExporter().export(bundle, tmp_path / "other")
    assert elsewhere.main_file.read_bytes() == first
    assert sorted(p.name for p in elsewhere.files) == sorted(p.name for p in result.files)


def test_failed_export_keeps_previous(exported):
    bundle, result = exported
    out = result.main_file.parent
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    missing = bundle.path(bundle.manifest.objects["mug"].visual.mesh)
    missing.unlink()
    with pytest.raises(Real2SimError, match="visual.obj") as info:
        UsdExporter().export(bundle)
    assert isinstance(info.value, MeshError) and str(missing) in str(info.value)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["usd"]  # no temp directories left behind


def test_missing_texture_names_file(exportable_bundle):
    tex = exportable_bundle.path(exportable_bundle.manifest.objects["cube"].visual.texture)
    tex.unlink()
    with pytest.raises(ExportError, match=str(tex)):
        UsdExporter().export(exportable_bundle)


def test_load_refuses_broken_exports(tmp_path):
    with pytest.raises(ExportError, match="not found"):
        UsdExporter().load(tmp_path)
    (tmp_path / MAIN_FILE).write_text("#usda 1.0\nthis is not usd {{{\n")
    with pytest.raises(ExportError, match="refused"):
        UsdExporter().load(tmp_path)
    other = tmp_path / "nopw"
    other.mkdir()
    stage = Usd.Stage.CreateNew(str(other / MAIN_FILE))
    UsdGeom.Xform.Define(stage, "/Root")
    stage.GetRootLayer().Save()
    with pytest.raises(ExportError, match="/World"):
        UsdExporter().load(other)


def test_unsupported_capabilities(exported):
    _, result = exported
    with UsdExporter().load(result.main_file.parent) as scene:
        assert scene.engine == "usd" and {"project", "mass"} <= scene.capabilities
        assert not {"physics", "render"} & scene.capabilities  # the bundled scene also has a robot: "robot"
        with pytest.raises(UnsupportedCapability):
            scene.step(0.01)
        with pytest.raises(UnsupportedCapability):
            scene.render("main")


def test_flat_colour_sphere_and_no_collision_variants(exportable_bundle):
    from real2sim.core.manifest import CollisionSpec, Pose

    objs = exportable_bundle.manifest.objects
    objs["cube"].visual.texture = None
    objs["cube"].visual.rgba = [0.2, 0.4, 0.6, 0.5]
    objs["cube"].collision = CollisionSpec("sphere", size=[0.03], pose=Pose([0.0, 0.0, 0.01]))
    objs["domino"].collision = CollisionSpec("none")
    result = UsdExporter().export(exportable_bundle)
    assert any("domino" in w and "no collision" in w for w in result.warnings)
    assert check_compliance(result.main_file)[0] == []
    stage = _stage(result)
    vis = stage.GetPrimAtPath("/World/cube/Visual")
    assert not UsdGeom.PrimvarsAPI(vis).HasPrimvar("st")
    material, _ = UsdShade.MaterialBindingAPI(vis).ComputeBoundMaterial()
    surface = UsdShade.Shader(material.GetPrim().GetChild("PreviewSurface"))
    assert np.allclose(surface.GetInput("diffuseColor").Get(), [0.2, 0.4, 0.6])
    assert surface.GetInput("opacity").Get() == pytest.approx(0.5)
    assert not any(UsdShade.Shader(c).GetIdAttr().Get() == "UsdUVTexture" for c in material.GetPrim().GetChildren())
    sphere = stage.GetPrimAtPath("/World/cube/Collision/sphere")
    assert sphere.IsA(UsdGeom.Sphere) and sphere.HasAPI(UsdPhysics.CollisionAPI)
    assert UsdGeom.Sphere(sphere).GetRadiusAttr().Get() == pytest.approx(0.03)
    assert not stage.GetPrimAtPath("/World/domino/Collision").IsValid()


def test_prim_names_are_valid_and_unique():
    used = {"Cameras"}
    names = [_prim_name(n, used) for n in ["a-b", "a_b", "3d", "Cameras", "ok"]]
    assert names == ["a_b", "a_b_1", "_3d", "Cameras_1", "ok"]
    from pxr import Sdf

    assert all(Sdf.Path.IsValidIdentifier(n) for n in names)
