"""Any mesh format in, every engine out; stages that hash geometry; the add-object / align command line.

- add-object turns OBJ, DAE, GLB/GLTF, PLY and STL (with their embedded textures) into the bundle's canonical
  visual mesh (visual.obj + texture.png, UVs kept), which the MJCF export reads and MuJoCo loads;
- alignment and texturing hash the geometry, so `build` after texturing (which rewrites the mesh with UVs) re-runs
  nothing;
- results on stdout, warnings and errors on stderr; --orientation; negative coordinates.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tabletop(tmp_path):
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    return bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene")


def _textured_box_glb(path: Path) -> np.ndarray:
    """A 4 cm box with per-face UVs and an embedded 64x64 texture (red left half, blue right half) as GLB; returns
    the texture."""
    import trimesh
    from PIL import Image

    from real2sim.core.objio import box_project_uv

    box = trimesh.creation.box((0.04, 0.04, 0.04))
    v, f, uv = box_project_uv(box)
    tex = np.zeros((64, 64, 3), np.uint8)
    tex[:, :32] = (220, 30, 30)
    tex[:, 32:] = (30, 30, 220)
    mesh = trimesh.Trimesh(v, f, visual=trimesh.visual.TextureVisuals(uv=uv, image=Image.fromarray(tex)), process=False)
    mesh.export(path)
    return tex


@pytest.mark.parametrize("fmt", ["glb", "ply", "stl", "obj"])
def test_any_format_becomes_the_canonical_obj(tabletop, tmp_path, fmt):
    """Each format lands as objects/<id>/visual.obj with the same triangles; the GLB's texture and UVs come along."""
    import trimesh

    from real2sim.core.meshes import geometry_hash, load_mesh
    from real2sim.core.objio import mesh_uv
    from real2sim.pipeline.recipe import add_object

    glb = tmp_path / "box.glb"
    tex = _textured_box_glb(glb)
    src = glb
    if fmt != "glb":
        src = tmp_path / f"box.{fmt}"
        trimesh.load(glb, force="mesh", process=False).export(src)
    obj = add_object(tabletop, "box", src)
    assert obj.visual.mesh == "objects/box/visual.obj"
    got = load_mesh(tabletop.path(obj.visual.mesh))
    assert geometry_hash(tabletop.path(obj.visual.mesh)) == geometry_hash(src)
    assert np.allclose(sorted(got.bounds.ravel()), sorted(load_mesh(src).bounds.ravel()), atol=1e-6)
    if fmt == "glb":
        assert obj.visual.texture == "objects/box/texture.png"
        from PIL import Image

        assert np.array_equal(np.asarray(Image.open(tabletop.path(obj.visual.texture)).convert("RGB")), tex)
        assert mesh_uv(got) is not None
    # nothing outside the bundle is referenced: no material library next to the OBJ
    assert "mtllib" not in tabletop.path(obj.visual.mesh).read_text()


def _mujoco_colour(bundle, oid: str) -> np.ndarray:
    """Mean RGB (0-255) of ``oid``'s pixels in MuJoCo's render of the bundle's MJCF export from camera 'main'."""
    from conftest import give_simple_collision

    from real2sim.engines import get_exporter

    give_simple_collision(bundle)
    ex = get_exporter("mjcf")
    scene = ex.load(ex.export(bundle).main_file.parent)
    try:
        img, mask = scene.render("main"), scene.object_mask("main", oid)
    finally:
        scene.close()
    assert mask.sum() > 200, "the object is not in view"
    return img[mask].reshape(-1, 3).mean(0)


@pytest.mark.render
def test_glb_texture_reaches_mujoco(tabletop, tmp_path):
    """The GLB's embedded texture is what MuJoCo draws (red/blue box: red and blue, little green)."""
    from real2sim.pipeline.recipe import add_object

    glb = tmp_path / "box.glb"
    _textured_box_glb(glb)
    add_object(tabletop, "box", glb, position=[0.0, -0.12, 0.02])
    rgb = _mujoco_colour(tabletop, "box")
    print(f"box in MuJoCo: mean RGB {rgb.round(1)}")
    assert rgb[0] > 1.5 * rgb[1] or rgb[2] > 1.5 * rgb[1]


@pytest.mark.render
@pytest.mark.realdata
def test_dae_with_embedded_texture_reaches_mujoco(tabletop, shared_data):
    """SIMPLER's coke can (Collada + JPEG): added without --texture, exported to MJCF and loaded by MuJoCo, drawn
    red (its label), not in the flat grey it got before."""
    import mujoco

    from real2sim.pipeline.recipe import add_object

    obj = add_object(tabletop, "coke", shared_data / "objects" / "coke_can" / "textured.dae", position=[0.0, -0.12, 0.0615])
    assert obj.visual.mesh.endswith("visual.obj") and obj.visual.texture == "objects/coke/texture.png"
    rgb = _mujoco_colour(tabletop, "coke")
    print(f"coke can in MuJoCo: mean RGB {rgb.round(1)}")
    assert rgb[0] > 1.6 * rgb[1] and rgb[0] > 1.6 * rgb[2]
    xml = tabletop.root / "exports" / "mjcf" / "scene.xml"
    model = mujoco.MjModel.from_xml_path(str(xml))
    assert model.ntex >= 1


def _frame_with_mask(bundle, oid: str, camera: str = "main") -> None:
    """Frame 0 = a flat-shaded render of the object at its pose over grey; its exact silhouette as the mask."""
    from PIL import Image

    from real2sim.core.geometry import transform_points
    from real2sim.core.manifest import FrameSpec
    from real2sim.core.meshes import load_mesh
    from real2sim.render.silhouette import silhouette

    cam = bundle.manifest.cameras[camera].camera()
    m = load_mesh(bundle.path(bundle.object(oid).visual.mesh))
    mask = silhouette(cam, transform_points(bundle.object(oid).pose.matrix(), m.vertices), m.faces)
    img = np.full((cam.height, cam.width, 3), 110, np.uint8)
    ys, xs = np.nonzero(mask)
    img[ys, xs] = np.stack([200 - (xs % 40), 120 + (ys % 30), 60 + 0 * xs], 1).astype(np.uint8)
    p = bundle.root / "capture" / "frames" / "000000.png"
    p.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img).save(p)
    bundle.manifest.capture.frames.append(FrameSpec(bundle.rel(p), 0.0, camera))
    mp = bundle.root / "masks" / "000000" / f"{oid}.png"
    mp.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask.astype(np.uint8) * 255).save(mp)
    bundle.manifest.capture.masks.setdefault("000000", {})[oid] = bundle.rel(mp)
    bundle.save()


@pytest.mark.render
def test_build_after_texture_reruns_nothing(tabletop, tmp_path):
    """A PLY without UVs: texturing unwraps it and switches the object to visual_uv.obj; the next `build` finds
    alignment and texture unchanged (geometry hashed, not file names): no pose moves, no second texture."""
    import trimesh

    from real2sim.collision import CollisionConfig
    from real2sim.core.bundle import Bundle
    from real2sim.demos.shapes import carrot
    from real2sim.pipeline import build
    from real2sim.pipeline.recipe import add_object

    v, f = carrot()
    ply = tmp_path / "carrot.ply"
    trimesh.Trimesh(v, f, process=False).export(ply)
    add_object(tabletop, "carrot", ply, position=[0.02, -0.1, 0.0], quaternion_wxyz=(1, 0, 0, 0))
    b = Bundle.load(tabletop.root)
    low = float((v @ b.object("carrot").pose.matrix()[:3, :3].T)[:, 2].min())
    b.object("carrot").pose.position[2] = b.manifest.table_height - low
    b.save()
    _frame_with_mask(b, "carrot")
    cfg = CollisionConfig(method="convex")
    first = build(b, cfg, cache_dir=tmp_path / "cache")
    assert first["alignment"] and first["texture"]
    b = Bundle.load(tabletop.root)
    assert b.object("carrot").visual.mesh.endswith("visual_uv.obj")  # texturing rewrote the mesh with UVs
    pose, textures = b.object("carrot").pose, sorted(p.name for p in b.object_dir("carrot").glob("texture_bp_*.png"))
    again = build(b, cfg, cache_dir=tmp_path / "cache")
    assert not any(again.values()), again
    b = Bundle.load(tabletop.root)
    assert b.object("carrot").pose == pose
    assert sorted(p.name for p in b.object_dir("carrot").glob("texture_bp_*.png")) == textures


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl"}
    return subprocess.run([sys.executable, "-m", "real2sim", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


def test_add_object_orientation_and_negative_position(tabletop, tmp_path):
    """--position -0.08,0,0 (no '=') and --orientation as roll,pitch,yaw degrees or a w,x,y,z quaternion; the
    result line is on stdout, nothing on stdout when the input is bad (the error is on stderr)."""
    from real2sim.core.bundle import Bundle
    from real2sim.core.geometry import quat_wxyz_to_matrix

    glb = tmp_path / "box.glb"
    _textured_box_glb(glb)
    r = _cli("add-object", tabletop.root, "a", "--mesh", glb, "--position", "-0.08,0,0.02", "--orientation", "0,0,90")
    assert r.returncode == 0, r.stderr
    assert "added 'a'" in r.stdout and "error" not in r.stdout
    o = Bundle.load(tabletop.root).object("a")
    assert o.pose.position == [-0.08, 0.0, 0.02]
    assert np.allclose(quat_wxyz_to_matrix(o.pose.quaternion_wxyz), [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-9)
    r = _cli("add-object", tabletop.root, "b", "--mesh", glb, "--orientation", "0.7071068,0.7071068,0,0")
    assert r.returncode == 0, r.stderr
    o = Bundle.load(tabletop.root).object("b")
    assert np.allclose(o.pose.quaternion_wxyz, [2 ** -0.5, 2 ** -0.5, 0, 0], atol=1e-6)
    assert abs(o.pose.position[2] - (Bundle.load(tabletop.root).manifest.table_height + 0.02)) < 1e-6  # rests on it
    r = _cli("add-object", tabletop.root, "c", "--mesh", glb, "--orientation", "1,2")
    assert r.returncode == 2 and r.stdout == "" and "--orientation" in r.stderr and "error" in r.stderr


def test_align_cli_reports_poor_on_stderr_and_numbers_on_stdout(tabletop, tmp_path):
    """A half mask: `align` exits 1, its result line (status 'poor', the IoU) on stdout, the warning on stderr; the
    search options are on the command line."""
    from PIL import Image

    from real2sim.core.bundle import Bundle

    b = tabletop
    _frame_with_mask(b, "cube")
    mp = b.path(b.manifest.capture.masks["000000"]["cube"])
    m = np.asarray(Image.open(mp)) > 0
    xs = np.nonzero(m)[1]
    m[:, int(np.median(xs)):] = False
    Image.fromarray(m.astype(np.uint8) * 255).save(mp)
    r = _cli("align", b.root, "--object", "cube", "--yaw-step-deg", "15", "--min-stable-probability", "0.01")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "cube: poor" in r.stdout and "mean IoU" in r.stdout
    assert "POOR" in r.stderr and "POOR" not in r.stdout
    rep = json.loads((b.root / "reports" / "alignment.json").read_text())
    assert rep["objects"]["cube"]["status"] == "poor" and rep["poor"] and "IoU" in rep["status_rule"]
    # check and the review overview flag it
    from real2sim.apps.review.views import overview_summary
    from real2sim.pipeline.check import check_bundle

    assert any("alignment is poor" in f.message for f in check_bundle(b.root, load_meshes=False))
    assert "Poor alignment" in overview_summary(Bundle.load(b.root))
