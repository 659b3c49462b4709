"""Nothing outside a bundle is read, written or deleted through a symlinked folder inside it (issue 16, item 3).

A user (or a careless `ln -s`) makes `exports/`, `reports/` or `objects/<id>/` a symlink to a folder elsewhere;
`export` / `build` must refuse with a BundleError that names the path, and the outside folder must be byte-for-byte
what it was."""
from __future__ import annotations

import os
import shutil

import pytest

from real2sim.core.bundle import Bundle
from real2sim.core.errors import BundleError, Real2SimError
from real2sim.pipeline.check import check_bundle


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "precious"
    (d / "mjcf").mkdir(parents=True)
    (d / "keep.txt").write_text("a user's file")
    (d / "mjcf" / "scene.xml").write_text("<mujoco/> (someone else's)")
    (d / "collision.json").write_text("{}")
    return d


def test_symlinked_exports_folder_is_refused_and_left_untouched(exportable_bundle, outside):
    from real2sim.export import export_bundle

    before = _snapshot(outside)
    os.symlink(outside, exportable_bundle.root / "exports")
    with pytest.raises(BundleError, match="exports") as exc:
        export_bundle(exportable_bundle, engines=["mujoco"])
    assert "outside the bundle" in str(exc.value)
    assert _snapshot(outside) == before
    assert not any(p.name.startswith(".") for p in outside.iterdir())  # no temp folders left there


def test_symlinked_engine_folder_is_refused(exportable_bundle, outside):
    from real2sim.engines import get_exporter

    (exportable_bundle.root / "exports").mkdir()
    os.symlink(outside / "mjcf", exportable_bundle.root / "exports" / "mjcf")
    before = _snapshot(outside)
    with pytest.raises(BundleError, match="exports/mjcf"):
        get_exporter("mujoco").export(exportable_bundle)
    assert _snapshot(outside) == before


def test_symlinked_reports_folder_is_refused(exportable_bundle, outside):
    before = _snapshot(outside)
    os.symlink(outside, exportable_bundle.root / "reports")
    with pytest.raises(BundleError, match="reports"):
        exportable_bundle.write_report("collision", {"objects": {}})
    with pytest.raises(BundleError, match="reports"):
        exportable_bundle.reports_dir()
    assert _snapshot(outside) == before


def test_symlinked_object_folder_is_refused_for_reads_writes_and_check(recipe_bundle, outside):
    from real2sim.collision.stage import collision_stage
    from real2sim.collision.types import CollisionConfig

    b = recipe_bundle
    cube = b.root / "objects" / "cube"
    shutil.copytree(cube, outside / "cube")
    shutil.rmtree(cube)
    os.symlink(outside / "cube", cube)
    before = _snapshot(outside)
    with pytest.raises(BundleError, match="objects/cube"):
        b.object_dir("cube")
    with pytest.raises(BundleError, match="objects/cube/visual.obj"):
        b.path(b.object("cube").visual.mesh)
    with pytest.raises(BundleError, match="objects/cube"):
        collision_stage(b, CollisionConfig(method="convex"), cache_dir=b.root.parent / "cache")
    assert _snapshot(outside) == before
    errors = [f for f in check_bundle(b.root, load_meshes=False) if f.level == "error"]
    assert any(f.where == "objects.cube.visual.mesh" and "outside the bundle" in f.message for f in errors)


def test_rel_of_an_outside_path_is_a_bundle_error_not_a_crash(recipe_bundle, tmp_path):
    with pytest.raises(BundleError, match="outside the bundle"):
        recipe_bundle.rel(tmp_path / "elsewhere.png")
    assert recipe_bundle.rel(recipe_bundle.root / "objects" / "cube" / "visual.obj") == "objects/cube/visual.obj"


@pytest.mark.parametrize("rel", ["a\x00b.png", "x" * 5000 + ".png", "objects/" + "y" * 300 + "/v.obj"])
def test_unresolvable_paths_are_bundle_errors(recipe_bundle, rel):
    with pytest.raises(Real2SimError):
        recipe_bundle.path(rel)


def test_symlink_inside_the_bundle_is_allowed(recipe_bundle):
    b = recipe_bundle
    os.symlink(b.root / "objects" / "cube", b.root / "cube_link")
    assert b.path("cube_link/visual.obj") == (b.root / "objects" / "cube" / "visual.obj").resolve()
    assert isinstance(Bundle.load(b.root), Bundle)
