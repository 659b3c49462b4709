"""`build` on a bundle with frames and masks: plate, poses, textures, collision, all from the capture."""
from __future__ import annotations

import numpy as np

from real2sim import Bundle, collision
from real2sim.core.geometry import euler_xyz_to_matrix
from real2sim.demos.synthetic import SyntheticCaptureConfig, synthesize_capture
from real2sim.pipeline import build, export_bundle
from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe


def add_s(bundle, oid, Ta, Tb) -> float:
    """Mean distance from each surface sample placed by Ta to the nearest sample placed by Tb (m)."""
    from scipy.spatial import cKDTree

    from real2sim.core.geometry import transform_points
    from real2sim.core.meshes import load_mesh

    pts = load_mesh(bundle.path(bundle.object(oid).visual.mesh)).sample(2000, seed=0)
    return float(cKDTree(transform_points(Tb, pts)).query(transform_points(Ta, pts))[0].mean())


def test_build_recovers_perturbed_poses_from_a_synthetic_capture(tmp_path):
    cache = tmp_path / "cache"
    truth = bundle_from_recipe(builtin_recipe(), tmp_path / "truth")
    for oid in ("cube", "domino"):  # true poses rest on the table
        truth.object(oid).pose.position[2] -= 0.005
    truth.save()
    build(truth, collision.CollisionConfig(workers=2), cache_dir=cache)
    export_bundle(truth, engines=("mjcf",))

    work = bundle_from_recipe(builtin_recipe(), tmp_path / "work")
    synthesize_capture(work, truth, SyntheticCaptureConfig(masked=("cube", "domino"), gain=0.9, noise_std=3.0))
    for oid in ("cube", "domino"):  # the user's rough placement: 2 cm and 10 degrees off
        T = work.object(oid).pose.matrix()
        T[:3, 3] += [0.02, -0.015, -0.005]
        T[:3, :3] = euler_xyz_to_matrix(0, 0, np.radians(10)) @ T[:3, :3]
        from real2sim.core.manifest import Pose

        work.object(oid).pose = Pose.from_matrix(T)
    work.save()
    ran = build(work, collision.CollisionConfig(workers=2), cache_dir=cache)
    assert ran["alignment"] and ran["texture"] and ran["plate"]
    work = Bundle.load(work.root)
    for oid in ("cube", "domino"):
        got, want = work.object(oid).pose.matrix(), truth.object(oid).pose.matrix()
        assert np.linalg.norm(got[:3, 3] - want[:3, 3]) < 0.003, oid
        # boxes are symmetric: compare the placed surfaces (ADD-S), not the rotation matrices
        assert add_s(work, oid, got, want) < 0.002, oid
    assert work.manifest.stages["texture"].status == "done"
    assert work.path(work.object("cube").visual.texture).is_file()
    # the rest of the journey still works on what build produced
    results = export_bundle(work)
    assert not [k for k, v in results.items() if isinstance(v, Exception)]
