"""Every bundled scene builds, exports, loads and steps in each engine without a warning (Menagerie-style)."""
from __future__ import annotations

import warnings

import pytest

from real2sim import collision
from real2sim.pipeline import build, export_bundle
from real2sim.pipeline.recipe import bundle_from_recipe
from real2sim.scenes import BUILTIN_DIR as SCENES_DIR

RECIPES = sorted(SCENES_DIR.glob("*/recipe.json"))


def test_there_is_a_bundled_scene():
    assert RECIPES, f"no recipes under {SCENES_DIR}"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.parent.name)
def test_scene_loads_and_steps_in_every_engine(recipe, tmp_path):
    bundle = bundle_from_recipe(recipe, tmp_path / "scene")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(bundle, collision.CollisionConfig(workers=2), cache_dir=tmp_path / "cache")
        results = export_bundle(bundle)
        assert not {k: v for k, v in results.items() if isinstance(v, Exception)}
        from real2sim.engines import get_exporter

        for engine in ("mjcf", "sapien"):
            exp = get_exporter(engine)
            with exp.load(exp.out_dir(bundle)) as scene:
                scene.step(0.5)
                if engine == "mjcf":
                    assert scene.warnings() == {}
                for oid in bundle.dynamic_objects():
                    assert abs(scene.object_pose(oid)[2, 3] - bundle.object(oid).pose.position[2]) < 0.05, (engine, oid)
    assert (recipe.parent / "README.md").is_file(), "each bundled scene documents its provenance"
