"""The scene bundle: manifest validation names the field, saves are atomic, nothing is lost."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from real2sim import Bundle, ManifestError, UnknownNameError
from real2sim.core.bundle import atomic_write_json
from real2sim.core.manifest import SCHEMA_VERSION, Manifest


def _manifest_dict(bundle):
    return json.loads((bundle.root / "scene.json").read_text())


def test_round_trip_preserves_everything(exportable_bundle):
    again = Bundle.load(exportable_bundle.root)
    assert again.manifest == exportable_bundle.manifest
    assert again.manifest.to_dict() == _manifest_dict(exportable_bundle)
    assert _manifest_dict(exportable_bundle)["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda d: d["objects"]["cube"]["pose"].__setitem__("positon", [0, 0, 0]), "objects.cube.pose.positon", "position"),
        (lambda d: d["objects"]["cube"]["pose"].__setitem__("quaternion_wxyz", [2, 0, 0, 0]), "objects.cube.pose.quaternion_wxyz", "unit quaternion"),
        (lambda d: d["objects"]["can"].__setitem__("density", -5), "objects.can.density", "> 0.0"),
        (lambda d: d["objects"]["mug"]["collision"].__setitem__("kind", "hull"), "objects.mug.collision.kind", "hulls"),
        (lambda d: d["cameras"]["main"]["K"][0].__setitem__(0, "600"), "cameras.main.K[0][0]", "finite number"),
        (lambda d: d.__setitem__("schema_version", 99), "schema_version", "version 1"),
        (lambda d: d["units"].__setitem__("length", "mm"), "units", "SI"),
        (lambda d: d["objects"]["cube"].pop("visual"), "objects.cube.visual", "missing"),
    ],
)
def test_malformed_manifest_names_the_field(exportable_bundle, mutate, field, words):
    d = _manifest_dict(exportable_bundle)
    mutate(d)
    atomic_write_json(exportable_bundle.root / "scene.json", d)
    with pytest.raises(ManifestError) as info:
        Bundle.load(exportable_bundle.root)
    assert info.value.field == field
    assert words in str(info.value)
    assert "scene.json" in str(info.value)


def test_invalid_json_names_line(recipe_bundle):
    (recipe_bundle.root / "scene.json").write_text('{"schema_version": 1,\n "name": }')
    with pytest.raises(ManifestError, match="line 2"):
        Bundle.load(recipe_bundle.root)


def test_interrupted_save_keeps_previous_manifest(recipe_bundle, monkeypatch):
    before = (recipe_bundle.root / "scene.json").read_bytes()
    recipe_bundle.manifest.objects["cube"].pose.position = [9.0, 9.0, 9.0]

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        recipe_bundle.save()
    assert (recipe_bundle.root / "scene.json").read_bytes() == before
    assert not [p for p in recipe_bundle.root.iterdir() if p.name.endswith(".tmp")]
    assert Bundle.load(recipe_bundle.root).manifest.objects["cube"].pose.position != [9.0, 9.0, 9.0]


def test_unknown_object_suggests_close_names(recipe_bundle):
    with pytest.raises(UnknownNameError, match="did you mean 'cube'"):
        recipe_bundle.object("cub")


def test_paths_cannot_leave_the_bundle(recipe_bundle):
    from real2sim import BundleError

    with pytest.raises(BundleError, match="outside the bundle"):
        recipe_bundle.path("../../etc/passwd")


def test_missing_texture_warns_and_records_flat_colour(tmp_path, caplog):
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    base = builtin_recipe().parent
    recipe = json.loads(builtin_recipe().read_text())
    for obj in recipe["objects"].values():  # the copied recipe points at the real assets
        obj["mesh"] = str(base / obj["mesh"])
        obj["texture"] = str(base / obj["texture"])
    recipe["objects"]["cube"].update(texture=str(base / "assets/cube/nope.png"), rgba=[0.1, 0.2, 0.3, 1.0])
    (tmp_path / "recipe.json").write_text(json.dumps(recipe))
    with caplog.at_level("WARNING"):
        b = bundle_from_recipe(tmp_path / "recipe.json", tmp_path / "b")
    assert "nope.png" in caplog.text
    saved = Bundle.load(b.root).manifest.objects["cube"].visual
    assert saved.texture is None and saved.rgba == [0.1, 0.2, 0.3, 1.0]


def test_unreadable_mesh_is_refused_with_the_file_named(tmp_path):
    import shutil

    from real2sim import MeshError
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    bad = tmp_path / "broken.obj"
    bad.write_text("this is not an obj\n")
    recipe = {"name": "bad", "objects": {"thing": {"mesh": str(bad), "pose": {"position": [0, 0, 0], "quaternion_wxyz": [1, 0, 0, 0]}}}}
    (tmp_path / "r.json").write_text(json.dumps(recipe))
    with pytest.raises(MeshError, match="broken.obj"):
        bundle_from_recipe(tmp_path / "r.json", tmp_path / "b")
    assert not (tmp_path / "b").exists()  # nothing half-made left behind
    shutil.copyfile(builtin_recipe().parent / "assets" / "cube" / "visual.obj", bad)  # the user fixes the mesh
    assert list(bundle_from_recipe(tmp_path / "r.json", tmp_path / "b").manifest.objects) == ["thing"]


def test_same_recipe_gives_identical_bundle_bytes(tmp_path):
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    a = bundle_from_recipe(builtin_recipe(), tmp_path / "a")
    b = bundle_from_recipe(builtin_recipe(), tmp_path / "b")
    files = sorted(p.relative_to(a.root) for p in a.root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b.root) for p in b.root.rglob("*") if p.is_file())
    for f in files:
        assert (a.root / f).read_bytes() == (b.root / f).read_bytes(), f


def test_inertia_from_density_matches_closed_form(exportable_bundle):
    cube = exportable_bundle.object("cube")
    a = 0.045
    assert cube.inertial.mass == pytest.approx(600 * a**3)
    np.testing.assert_allclose(np.diag(cube.inertial.inertia), [cube.inertial.mass * a * a / 6] * 3, rtol=1e-9)
    mug = exportable_bundle.object("mug")  # hollow mesh: lighter than its convex hull
    assert 0.1 < mug.inertial.mass < 0.3
    # its density times its mesh's volume and centre of mass, as trimesh computes them here (0.197 kg)
    import trimesh

    ref = trimesh.load(exportable_bundle.path(mug.visual.mesh), force="mesh")
    assert mug.inertial.mass == pytest.approx(mug.density * ref.volume, rel=1e-3)
    np.testing.assert_allclose(mug.inertial.com, ref.center_mass, atol=1e-5)


def test_manifest_defaults_are_valid():
    d = Manifest(name="empty").to_dict()
    assert Manifest.from_dict(d) == Manifest(name="empty")


def test_timings_never_change_a_digest_whatever_their_name(tmp_path):
    """Two identical builds of a texture stage once differed by 'splat_seconds' alone (it was not a volatile key)."""
    import json as _json

    from real2sim.core.bundle import content_hash

    report = {"objects": {"cube": {"psnr_db": 31.5, "splat_seconds": 0.41, "refine_seconds": 0.0, "seconds": 1.2}},
              "stage_seconds": {"texture": 3.1}, "total_seconds": 9.0, "cache_hit": False}
    rerun = _json.loads(_json.dumps(report))
    rerun["objects"]["cube"].update(splat_seconds=0.57, refine_seconds=0.01, seconds=1.9)
    rerun.update(stage_seconds={"texture": 4.2}, total_seconds=11.0, cache_hit=True)
    other = _json.loads(_json.dumps(report))
    other["objects"]["cube"]["psnr_db"] = 30.0
    for name, data in (("a", report), ("b", rerun), ("c", other)):
        (tmp_path / f"{name}.json").write_text(_json.dumps(data))
    assert content_hash(tmp_path / "a.json") == content_hash(tmp_path / "b.json")
    assert content_hash(tmp_path / "a.json") != content_hash(tmp_path / "c.json")  # results still count


def test_every_timing_key_the_code_writes_is_volatile():
    """Scan the package for JSON keys that name a duration: each must be one the digest leaves out."""
    import re
    from pathlib import Path

    import real2sim
    from real2sim.core.bundle import is_volatile_key

    keys = set()
    for py in Path(real2sim.__file__).parent.rglob("*.py"):
        keys |= set(re.findall(r"""["'](\w*seconds\w*)["']\s*:""", py.read_text()))
        keys |= {m for m in re.findall(r"""\[["'](\w*seconds\w*)["']\]\s*=""", py.read_text())}
    assert keys, "the scan found no timing keys at all: the pattern is broken"
    assert "splat_seconds" in keys
    assert not [k for k in keys if not is_volatile_key(k)]
