"""collision/: repair, primitive fits, CoACD in a subprocess (timeout, crash), cache, determinism."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

trimesh = pytest.importorskip("trimesh")
pytest.importorskip("coacd")
pytest.importorskip("manifold3d")

from real2sim.collision import (  # noqa: E402
    CollisionConfig,
    CollisionResult,
    collide_command,
    decompose,
    decompose_many,
    hull_quality,
    write_result,
)
from real2sim.core.errors import CollisionError, MeshError  # noqa: E402

ASSETS = Path(__file__).resolve().parents[1] / "real2sim" / "scenes" / "tabletop" / "assets"
COACD = CollisionConfig(method="coacd", timeout_s=60)


@pytest.fixture(scope="module")
def l_shape():
    a = trimesh.creation.box(extents=(0.1, 0.03, 0.03), transform=trimesh.transformations.translation_matrix((0.05, 0.015, 0.015)))
    b = trimesh.creation.box(extents=(0.03, 0.1, 0.03), transform=trimesh.transformations.translation_matrix((0.015, 0.05, 0.015)))
    return trimesh.boolean.union([a, b], engine="manifold")


def _inside_hulls(hulls, pts: np.ndarray) -> np.ndarray:
    """Points inside any convex hull, from the hull's own half-spaces (scipy's qhull, not the library's test)."""
    from scipy.spatial import ConvexHull

    inside = np.zeros(len(pts), bool)
    for h in hulls:
        eq = ConvexHull(np.asarray(h.vertices)).equations
        inside |= (pts @ eq[:, :3].T + eq[:, 3] <= 1e-9).all(1)
    return inside


def _l_grid():
    """A 2 mm grid over the L's box and 1 cm around it, and which of its points are in the L (the two boxes the
    fixture unites: x 0..0.1, y 0..0.03 and x 0..0.03, y 0..0.1; z 0..0.03)."""
    g = np.arange(-0.009, 0.11, 0.002)
    x, y, z = np.meshgrid(g, g, np.arange(-0.009, 0.04, 0.002), indexing="ij")
    pts = np.stack([x.ravel(), y.ravel(), z.ravel()], 1)
    x, y, z = pts.T
    slab = (z > 0) & (z < 0.03) & (x > 0) & (y > 0)
    return pts, slab & (((x < 0.1) & (y < 0.03)) | ((x < 0.03) & (y < 0.1)))


@pytest.fixture(scope="module")
def l_result(l_shape, tmp_path_factory):
    return decompose(l_shape, COACD, tmp_path_factory.mktemp("cache"), name="L")


def test_cube_is_exact_box():
    r = decompose(trimesh.creation.box(extents=(0.2, 0.1, 0.06)), CollisionConfig())
    assert r.kind == "box" and r.hulls == []
    assert r.size == [0.1, 0.05, 0.03]
    np.testing.assert_array_equal(r.pose, np.eye(4))
    assert r.report["method"] == "primitive" and r.report["occupancy_iou"] == 1.0


def test_rotated_box_uses_oriented_frame():
    T = trimesh.transformations.rotation_matrix(0.4, (1, 2, 3))
    T[:3, 3] = (0.3, -0.2, 0.1)
    r = decompose(trimesh.creation.box(extents=(0.2, 0.1, 0.06), transform=T), CollisionConfig())
    assert r.kind == "box"
    np.testing.assert_allclose(sorted(r.size), [0.03, 0.05, 0.1], atol=1e-9)
    np.testing.assert_allclose(r.pose[:3, 3], T[:3, 3], atol=1e-9)


def test_cylinder_is_cylinder():
    r = decompose(trimesh.creation.cylinder(radius=0.03, height=0.12, sections=32), CollisionConfig())
    assert r.kind == "cylinder"
    np.testing.assert_allclose(r.size, [0.03, 0.06], rtol=1e-9)
    np.testing.assert_allclose(np.abs(r.pose[:3, 2]), [0, 0, 1], atol=1e-9)  # axis = mesh Z


def test_demo_can_is_cylinder():
    from real2sim.core.meshes import load_mesh

    r = decompose(load_mesh(ASSETS / "can" / "visual.obj"), CollisionConfig())
    assert r.kind == "cylinder" and "merged" in r.report["repair"][0]


def test_l_shape_coacd(l_result):
    r = l_result
    assert r.kind == "hulls" and len(r.hulls) >= 2
    assert all(h.is_convex and h.is_watertight for h in r.hulls)
    assert r.report["occupancy_iou"] >= 0.85
    assert r.report["hull_count"] == len(r.hulls)
    assert r.report["method"] == "coacd" and r.report["cache_hit"] is False
    np.testing.assert_array_equal(r.pose, np.eye(4))
    # graded here, not by the report's own occupancy: the hulls, where they are, against the two boxes of the L
    pts, in_l = _l_grid()
    got = _inside_hulls(r.hulls, pts)
    iou = (got & in_l).sum() / (got | in_l).sum()
    assert iou >= 0.95, iou  # measured 1.0: CoACD cuts the L into its two boxes


def test_auto_falls_back_to_coacd(l_shape):
    r = decompose(l_shape, CollisionConfig(timeout_s=60))
    assert r.kind == "hulls" and r.report["method"] == "coacd" and "primitive_fits" in r.report


def test_cache_hit(l_shape, l_result, tmp_path):
    cache = tmp_path / "cache"
    miss = decompose(l_shape, COACD, cache, name="L")
    hit = decompose(l_shape, COACD, cache, name="L")
    assert miss.report["cache_hit"] is False and hit.report["cache_hit"] is True
    assert len(hit.hulls) == len(miss.hulls)
    for a, b in zip(hit.hulls, miss.hulls):
        np.testing.assert_array_equal(a.vertices, b.vertices)
        np.testing.assert_array_equal(a.faces, b.faces)
    assert hit.report["occupancy_iou"] == miss.report["occupancy_iou"]
    # the speed-up itself is measured in benchmarks/bench_collision.py, not asserted here
    assert len(list(cache.glob("*.npz"))) == 1 and not list(cache.glob("*.tmp"))
    # a different relevant config field is a different entry
    decompose(l_shape, CollisionConfig(method="convex"), cache)
    assert len(list(cache.glob("*.npz"))) == 2


def test_deterministic_bytes(l_shape, l_result, tmp_path):
    again = decompose(l_shape, COACD, name="L")  # no cache: a fresh CoACD run
    a = write_result(l_result, tmp_path / "a")
    b = write_result(again, tmp_path / "b")
    objs = sorted(p.name for p in a if p.suffix == ".obj")
    assert objs == sorted(p.name for p in b if p.suffix == ".obj") and objs[0] == "hull_000.obj"
    for name in objs:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_write_result_files(l_result, tmp_path):
    from PIL import Image

    out = tmp_path / "col"
    out.mkdir()
    (out / "hull_099.obj").write_text("stale")
    paths = write_result(l_result, out)
    names = {p.name for p in paths}
    assert {"report.json", "quality.png", "hull_000.obj", "hull_001.obj"} <= names
    assert not (out / "hull_099.obj").exists()
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "hulls" and doc["report"]["occupancy_iou"] >= 0.85
    with Image.open(out / "quality.png") as im:
        assert im.size[0] > 300 and im.mode == "RGB"
    hull = trimesh.load(out / "hull_000.obj", process=False)
    assert hull.is_convex


def test_timeout_is_collision_error():
    torus = trimesh.creation.torus(0.1, 0.03, major_sections=16, minor_sections=8)
    with pytest.raises(CollisionError, match="timeout") as ei:
        decompose(torus, CollisionConfig(method="coacd", timeout_s=0.01), name="torus")
    assert "torus" in str(ei.value) and "timeout_s" in str(ei.value)


def test_crash_is_collision_error(monkeypatch):
    import real2sim.collision.decomposition as dec

    monkeypatch.setattr(dec, "_WORKER_MODULE", "real2sim.collision.no_such_worker")
    with pytest.raises(CollisionError, match="crashed") as ei:
        decompose(trimesh.creation.torus(0.1, 0.03, major_sections=16, minor_sections=8), COACD, name="torus")
    assert "torus" in str(ei.value) and "seed" in str(ei.value)


def test_decompose_many_isolates_failures():
    flat = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], process=False)
    meshes = {"cube": trimesh.creation.box(extents=(0.05, 0.05, 0.05)), "flat": flat,
              "can": trimesh.creation.cylinder(radius=0.02, height=0.1, sections=32),
              "torus": trimesh.creation.torus(0.1, 0.03, major_sections=16, minor_sections=8)}
    out = decompose_many(meshes, CollisionConfig(workers=2, timeout_s=60))
    assert list(out) == list(meshes)
    assert isinstance(out["flat"], CollisionError) and "flat" in str(out["flat"])
    assert isinstance(out["flat"].__cause__, MeshError)
    assert out["cube"].kind == "box" and out["can"].kind == "cylinder"
    assert out["torus"].kind == "hulls" and len(out["torus"].hulls) >= 4


def test_decompose_many_timeout_one_object():
    meshes = {"cube": trimesh.creation.box(extents=(0.05, 0.05, 0.05)),
              "torus": trimesh.creation.torus(0.1, 0.03, major_sections=16, minor_sections=8)}
    out = decompose_many(meshes, CollisionConfig(workers=2, timeout_s=0.01))
    assert isinstance(out["cube"], CollisionResult)
    assert isinstance(out["torus"], CollisionError) and "timeout" in str(out["torus"])


def test_flat_triangle_is_mesh_error():
    flat = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], process=False)
    with pytest.raises(MeshError, match="flat_tri"):
        decompose(flat, CollisionConfig(), name="flat_tri")


def test_flat_plane_and_nan_are_mesh_errors():
    plane = trimesh.creation.box(extents=(1, 1, 1))
    plane.vertices[:, 2] = 0.0
    with pytest.raises(MeshError, match="plane"):
        decompose(plane, CollisionConfig(), name="plane")
    bad = trimesh.creation.box()
    bad.vertices[0, 0] = np.nan
    with pytest.raises(MeshError, match="NaN"):
        decompose(bad, CollisionConfig(), name="nan")


def test_open_box_is_repaired():
    box = trimesh.creation.box(extents=(0.1, 0.1, 0.1))
    open_box = trimesh.Trimesh(box.vertices, box.faces[2:], process=False)  # one side missing
    assert not open_box.is_watertight
    r = decompose(open_box, CollisionConfig(), name="open_box")
    assert r.kind == "box" and r.report["occupancy_iou"] == 1.0
    assert any("hole" in n or "manifold" in n for n in r.report["repair"])


def test_unclosable_mesh_is_reported_or_hulled():
    sphere = trimesh.creation.icosphere(1, radius=0.05)
    keep = sphere.face_normals[:, 2] < 0.3  # a bowl: a big hole no filler closes
    bowl = trimesh.Trimesh(sphere.vertices, sphere.faces[keep], process=False)
    with pytest.raises(MeshError, match="bowl.obj.*watertight.*method='convex'"):
        decompose(bowl, CollisionConfig(method="coacd"), name="bowl.obj")
    r = decompose(bowl, CollisionConfig(method="convex"), name="bowl.obj")
    assert r.kind == "hulls" and len(r.hulls) == 1 and "convex hull" in " ".join(r.report["repair"])
    # that one hull is the bowl's convex hull (scipy's, of the vertices its faces use): same volume, every vertex in it
    from scipy.spatial import ConvexHull

    used = bowl.vertices[np.unique(bowl.faces)]
    assert r.hulls[0].volume == pytest.approx(ConvexHull(used).volume, rel=1e-6)
    assert _inside_hulls(r.hulls, used).all()


def test_hull_quality_of_convex_hull_on_torus():
    torus = trimesh.creation.torus(0.1, 0.03, major_sections=24, minor_sections=12)
    q = hull_quality(torus, [torus.convex_hull])
    assert q["hull_count"] == 1 and q["volume_ratio"] > 1.3 and q["occupancy_iou"] < 0.8
    assert 0.1 < q["hausdorff_rel"] < 0.3
    assert hull_quality(torus, [torus.convex_hull]) == q  # seeded


def test_collide_command(tmp_path):
    r = collide_command(ASSETS / "bracket" / "visual.obj", tmp_path / "out", CollisionConfig(timeout_s=60))
    assert r.kind == "hulls" and (tmp_path / "out" / "hull_000.obj").is_file()
    assert (tmp_path / "out" / "quality.png").is_file() and (tmp_path / "out" / "report.json").is_file()
    bad = tmp_path / "broken.obj"
    bad.write_text("this is not a mesh\n")
    with pytest.raises(MeshError, match="broken.obj"):
        collide_command(bad, tmp_path / "out2", CollisionConfig())
    with pytest.raises(MeshError, match="missing.obj"):
        collide_command(tmp_path / "missing.obj", tmp_path / "out3", CollisionConfig())


def test_unknown_method_suggests():
    with pytest.raises(KeyError, match="coacd"):
        CollisionConfig(method="coacdd")


def test_package_import_is_light():
    import subprocess
    import sys

    code = "import sys, real2sim.collision; bad = [m for m in ('trimesh', 'coacd', 'manifold3d', 'scipy') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"
