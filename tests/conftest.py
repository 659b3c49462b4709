"""Shared fixtures. Bundles are built from the bundled 'tabletop' recipe."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def recipe_bundle(tmp_path):
    """The tabletop recipe imported into a fresh bundle (no collision yet)."""
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    return bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene")


def give_simple_collision(bundle):
    """Exact primitives where the object is one; a single convex hull otherwise. Fast (no CoACD)."""

    from real2sim.core.manifest import CollisionSpec, Pose
    from real2sim.core.meshes import load_mesh
    from real2sim.core.objio import write_obj

    prims = {"table": ("box", [0.45, 0.35, 0.02], [0, 0, -0.02]), "cube": ("box", [0.0225] * 3, [0, 0, 0]),
             "domino": ("box", [0.01, 0.03, 0.05], [0, 0, 0]), "can": ("cylinder", [0.033, 0.061], [0, 0, 0])}
    for oid, obj in bundle.manifest.objects.items():
        if oid in prims:
            kind, size, pos = prims[oid]
            obj.collision = CollisionSpec(kind=kind, size=size, pose=Pose(list(map(float, pos))))
        else:
            hull = load_mesh(bundle.path(obj.visual.mesh)).convex_hull
            path = bundle.object_dir(oid) / "collision" / "hull_000.obj"
            write_obj(path, hull.vertices, hull.faces)
            obj.collision = CollisionSpec(kind="hulls", hulls=[bundle.rel(path)])
    from real2sim.collision.inertia import compute_inertials

    compute_inertials(bundle)
    bundle.save()
    return bundle


@pytest.fixture
def exportable_bundle(recipe_bundle):
    """Tabletop bundle with collision geometry and inertials filled in: ready for every exporter."""
    return give_simple_collision(recipe_bundle)


@pytest.fixture(scope="session")
def shared_data():
    """``../shared/data`` (real frames, plates, meshes); the test is skipped, with the reason, when it is absent.
    Every test that reads it goes through this fixture, which marks it ``realdata`` (see below)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it ships with CI and ../shared)")
    return SHARED_DATA


@pytest.fixture
def google_robot_description(shared_data, tmp_path, monkeypatch):
    """The Google Robot's description folder in the shared data, set as ``REAL2SIM_GOOGLE_ROBOT`` (with a per-test
    ``REAL2SIM_CACHE``); skips with the folder named when it has no URDF."""
    desc = shared_data / "google_robot" / "description"
    if not (desc / "google_robot_meta_sim_fix_wheel_fix_fingertip.urdf").is_file():
        pytest.skip(f"{desc} has no Google Robot URDF")
    monkeypatch.setenv("REAL2SIM_GOOGLE_ROBOT", str(desc))
    monkeypatch.setenv("REAL2SIM_CACHE", str(tmp_path / "cache"))
    return desc


def pytest_collection_modifyitems(config, items):
    """``realdata`` on every test whose fixtures include ``shared_data`` (directly or through another fixture), so
    ``-m "not realdata"`` runs exactly the tests that need nothing outside the repository."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.realdata)
