"""The behaviour matrix: MuJoCo, SAPIEN and USD see the same scene.

Capabilities are declared per engine; what an engine does not support raises
UnsupportedCapability (USD has no physics), it never returns zeros.
"""
from __future__ import annotations

import numpy as np
import pytest

from real2sim import crosscheck
from real2sim.errors import UnsupportedCapability
from real2sim.pipeline import export_bundle

ENGINES = ("mjcf", "usd", "sapien")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from conftest import give_simple_collision
    from real2sim.recipe import builtin_recipe, bundle_from_recipe

    bundle = give_simple_collision(bundle_from_recipe(builtin_recipe(), tmp_path_factory.mktemp("x") / "scene"))
    results = export_bundle(bundle)
    failed = {k: v for k, v in results.items() if isinstance(v, Exception)}
    assert not failed, failed
    return bundle


def test_scene_has_at_least_four_dynamic_objects(exported):
    assert len(exported.dynamic_objects()) >= 4


def test_drop_comes_to_rest_at_the_same_poses(exported):
    res = crosscheck.drop_test(exported, ("mjcf", "sapien"), seconds=1.0)
    for oid in exported.dynamic_objects():
        assert res.position_error_mm[oid] < 5.0, (oid, res.position_error_mm)
        assert res.angle_error_deg[oid] < 5.0, (oid, res.angle_error_deg)
        for engine in ("mjcf", "sapien"):  # it really fell and rests on the table
            z0 = exported.object(oid).pose.position[2]
            z = res.poses[engine][oid][2, 3]
            assert z < z0 - 0.003 and z > exported.manifest.table_height - 0.003, (engine, oid, z0, z)


def test_masses_and_inertias_agree(exported):
    table = crosscheck.mass_table(exported, ENGINES)
    for oid, obj in exported.dynamic_objects().items():
        for engine in ENGINES:
            mass, com, inertia = table[engine][oid]
            assert mass == pytest.approx(obj.inertial.mass, rel=1e-5), (engine, oid)
            np.testing.assert_allclose(com, obj.inertial.com, atol=1e-6, err_msg=f"{engine} {oid}")
            np.testing.assert_allclose(inertia, obj.inertial.inertia, rtol=1e-4, atol=1e-10, err_msg=f"{engine} {oid}")


def test_known_points_project_to_the_same_pixels(exported):
    errors = crosscheck.projection_errors(exported, "main", ENGINES)
    assert set(errors) == set(ENGINES)
    for engine, err in errors.items():
        assert err < 0.5, (engine, err)


def test_usd_declares_no_physics(exported):
    scene = crosscheck.load_engines(exported, ("usd",))["usd"]
    assert "physics" not in scene.capabilities
    with pytest.raises(UnsupportedCapability):
        scene.step(0.1)


@pytest.mark.render
def test_side_by_side_render_shows_the_same_scene(exported):
    img, notes = crosscheck.render_side_by_side(exported, "main", ("mjcf", "sapien"))
    if notes["sapien"] != "ok":
        pytest.skip(f"SAPIEN cannot render here: {notes['sapien']}")
    w = img.shape[1] // 2
    a, b = img[40:, :w].astype(float), img[40:, w:].astype(float)  # below the labels
    # same geometry from the same camera: the table edge (bright vs black background) lines up
    fa, fb = a.mean(2) > 20, b.mean(2) > 20
    inter, union = (fa & fb).sum(), (fa | fb).sum()
    assert inter / union > 0.95
