"""Build and export stages on a bundle: caching, staleness, failures that lose nothing, determinism."""
from __future__ import annotations

import json

import pytest

from real2sim import Bundle, MeshError, collision
from real2sim.collision.stage import collision_stage
from real2sim.core.bundle import bundle_digest
from real2sim.pipeline import build, export_bundle


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_build_fills_collision_and_inertia_and_reports(recipe_bundle, cache):
    ran = build(recipe_bundle, collision.CollisionConfig(workers=2), cache_dir=cache)
    assert ran == {"collision": True, "inertial": True}
    b = Bundle.load(recipe_bundle.root)
    kinds = {oid: o.collision.kind for oid, o in b.manifest.objects.items()}
    assert kinds == {"table": "box", "cube": "box", "can": "cylinder", "domino": "box", "mug": "hulls", "bracket": "hulls"}
    assert len(b.object("mug").collision.hulls) >= 4  # hollow with a handle: many pieces
    report = json.loads((b.root / "reports" / "collision.json").read_text())
    assert report["objects"]["mug"]["occupancy_iou"] > 0.85
    assert (b.root / report["objects"]["mug"]["picture"]).is_file()
    assert b.manifest.stages["collision"].status == "done"
    assert all(o.inertial for o in b.dynamic_objects().values())


def test_unchanged_stages_are_skipped_and_edits_mark_downstream(recipe_bundle, cache):
    cfg = collision.CollisionConfig(workers=2)
    build(recipe_bundle, cfg, cache_dir=cache)
    export_bundle(recipe_bundle, engines=("mjcf",))
    assert build(recipe_bundle, cfg, cache_dir=cache) == {"collision": False, "inertial": False}
    assert export_bundle(recipe_bundle, engines=("mjcf",)) == {"mjcf": "unchanged"}
    recipe_bundle.object("cube").density = 900.0
    recipe_bundle.save()
    assert build(recipe_bundle, cfg, cache_dir=cache) == {"collision": False, "inertial": True}
    assert recipe_bundle.object("cube").inertial.mass == pytest.approx(900 * 0.045**3)
    assert recipe_bundle.manifest.stages["export"].status == "stale"
    assert export_bundle(recipe_bundle, engines=("mjcf",))["mjcf"] != "unchanged"


def test_coacd_timeout_falls_back_and_the_scene_still_exports(recipe_bundle, cache):
    cfg = collision.CollisionConfig(timeout_s=0.05, workers=2)  # primitives fit; CoACD (mug, bracket) times out
    collision_stage(recipe_bundle, cfg, cache_dir=cache)
    rec = recipe_bundle.manifest.stages["collision"]
    assert "mug" in rec.metrics["failed"] and "mug" in rec.message
    report = json.loads((recipe_bundle.root / "reports" / "collision.json").read_text())
    assert "timed out" in report["failed"]["mug"] or "timeout" in report["failed"]["mug"].lower()
    assert recipe_bundle.object("cube").collision.kind == "box"
    assert recipe_bundle.object("mug").collision.kind == "hulls"
    assert len(recipe_bundle.object("mug").collision.hulls) == 1  # the convex-hull fallback
    build(recipe_bundle, cfg, cache_dir=cache)
    results = export_bundle(recipe_bundle)
    assert not [k for k, v in results.items() if isinstance(v, Exception)]


def test_failed_stage_keeps_what_the_bundle_had(recipe_bundle, cache):
    build(recipe_bundle, collision.CollisionConfig(workers=2), cache_dir=cache)
    before = bundle_digest(recipe_bundle.root)
    hulls_before = list(recipe_bundle.object("mug").collision.hulls)
    recipe_bundle.path(recipe_bundle.object("bracket").visual.mesh).write_text("garbage\n")
    with pytest.raises(MeshError, match="visual.obj"):
        collision_stage(recipe_bundle, collision.CollisionConfig(workers=2), cache_dir=cache)
    b = Bundle.load(recipe_bundle.root)
    assert b.manifest.stages["collision"].status == "failed"
    assert "visual.obj" in b.manifest.stages["collision"].message
    assert b.object("mug").collision.hulls == hulls_before
    after = bundle_digest(recipe_bundle.root)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {"scene.json", "objects/bracket/visual.obj"}


def test_same_inputs_give_the_same_bundle_digest(tmp_path):
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    digests = []
    for name in ("a", "b"):
        b = bundle_from_recipe(builtin_recipe(), tmp_path / name)
        build(b, collision.CollisionConfig(workers=2), cache_dir=tmp_path / f"cache_{name}")  # no shared cache
        digests.append(bundle_digest(b.root))
    assert digests[0] == digests[1]
    assert any(k.endswith("hull_000.obj") for k in digests[0])


def test_a_failed_engine_export_fails_the_stage_and_is_redone_once_fixed(exportable_bundle, capsys):
    """A corrupt texture breaks the MJCF export while USD and SAPIEN succeed: the stage is 'failed', `export` exits
    non-zero naming mjcf, `check` reports it, an env refuses the out-of-date MJCF, and after the fix it re-exports."""
    from real2sim.apps.cli import main
    from real2sim.core.errors import ExportError
    from real2sim.evaluation.envs.env import load_backend
    from real2sim.pipeline.check import check_bundle

    b = exportable_bundle
    export_bundle(b)
    tex = b.path(b.object("cube").visual.texture)
    good = tex.read_bytes()
    tex.write_bytes(good[:40])  # a truncated PNG
    results = export_bundle(b)
    assert isinstance(results["mjcf"], ExportError)
    assert not isinstance(results["usd"], Exception) and not isinstance(results["sapien"], Exception)
    rec = Bundle.load(b.root).manifest.stages["export"]
    assert rec.status == "failed" and rec.metrics["failed"] == ["mjcf"] and "mjcf" in rec.message
    errors = [f for f in check_bundle(b.root, load_meshes=False) if f.level == "error"]
    assert any(f.where == "stages.export" and "mjcf" in f.message for f in errors)
    with pytest.raises(ExportError, match="out of date.*mjcf"):
        load_backend(Bundle.load(b.root), "mujoco")

    capsys.readouterr()
    assert main(["export", str(b.root)]) != 0  # not 'unchanged': the failed stage runs again, and fails again
    out = capsys.readouterr().out
    assert "mjcf" in out and "PNG" in out and "unchanged" not in out

    tex.write_bytes(good)
    again = export_bundle(Bundle.load(b.root))
    assert all(not isinstance(v, (Exception, str)) for v in again.values())  # re-exported, not 'unchanged'
    assert Bundle.load(b.root).manifest.stages["export"].status == "done"
    assert not [f for f in check_bundle(b.root, load_meshes=False) if f.level == "error"]


def test_every_engine_failing_raises_one_error_naming_them(exportable_bundle):
    from real2sim.core.errors import ExportError

    b = exportable_bundle
    b.path(b.object("cube").visual.mesh).write_text("garbage\n")
    with pytest.raises(ExportError, match="export failed for mjcf, sapien, usd"):
        export_bundle(b)
    rec = Bundle.load(b.root).manifest.stages["export"]
    assert rec.status == "failed" and rec.metrics["failed"] == ["mjcf", "sapien", "usd"]


def test_temp_folders_of_a_killed_export_are_swept_by_the_next_export(exportable_bundle):
    b = exportable_bundle
    exports = b.root / "exports"
    for name in (".mjcf.k1ll3d_x", ".usd.old", ".sapien.a8b7c6d5"):
        (exports / name / "textures").mkdir(parents=True)
        (exports / name / "textures" / "big.png").write_bytes(b"\0" * 1000)
    keep = exports / ".mjcf.notes"  # not a temp folder's name: left alone
    keep.mkdir()
    export_bundle(b, engines=("usd",))
    assert sorted(p.name for p in exports.iterdir() if p.name.startswith(".")) == [".mjcf.notes"]


def test_add_object_refuses_an_unreadable_texture(exportable_bundle, tmp_path):
    from real2sim.core.errors import ImageError
    from real2sim.pipeline.recipe import add_object

    b = exportable_bundle
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    before = (b.root / "scene.json").read_text()
    with pytest.raises(ImageError, match="bad.png"):
        add_object(b, "thing", b.path(b.object("cube").visual.mesh), bad)
    assert (b.root / "scene.json").read_text() == before
