"""Collision stage throughput: cache hit vs miss, and 2 workers vs 1.

Objects: the demo's non-primitive assets (mug, bracket) plus a generated torus and
L-shape, all with method='coacd'. Prints times and ratios; asserts nothing.
Run: ``python benchmarks/bench_collision.py``.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[1] / "real2sim" / "scenes" / "tabletop" / "assets"


def objects() -> dict:
    import trimesh

    from real2sim.core.meshes import load_mesh

    a = trimesh.creation.box(extents=(0.1, 0.03, 0.03), transform=trimesh.transformations.translation_matrix((0.05, 0.015, 0.015)))
    b = trimesh.creation.box(extents=(0.03, 0.1, 0.03), transform=trimesh.transformations.translation_matrix((0.015, 0.05, 0.015)))
    return {"mug": load_mesh(ASSETS / "mug" / "visual.obj"), "bracket": load_mesh(ASSETS / "bracket" / "visual.obj"),
            "torus": trimesh.creation.torus(0.1, 0.03, major_sections=32, minor_sections=16),
            "l_shape": trimesh.boolean.union([a, b], engine="manifold")}


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    from real2sim.collision import CollisionConfig, decompose, decompose_many

    meshes = objects()
    one = CollisionConfig(method="coacd", workers=1)
    two = CollisionConfig(method="coacd", workers=2)
    print(f"collision benchmark over {', '.join(meshes)} (method=coacd, default CoACD settings)")

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        print(f"{'object':10s} {'miss s':>8s} {'hit s':>9s} {'ratio':>8s} {'hulls':>6s} {'IoU':>6s}")
        for oid, mesh in meshes.items():
            t_miss, r = _timed(lambda: decompose(mesh, one, cache, name=oid))
            t_hit, h = _timed(lambda: decompose(mesh, one, cache, name=oid))
            print(f"{oid:10s} {t_miss:8.3f} {t_hit:9.5f} {t_miss / t_hit:7.0f}x {len(r.hulls):6d} {r.report['occupancy_iou']:6.3f}"
                  + ("" if h.report["cache_hit"] else "  (no cache hit!)"))

    t1, res1 = _timed(lambda: decompose_many(meshes, one))
    t2, res2 = _timed(lambda: decompose_many(meshes, two))
    bad = [k for k, v in {**res1, **res2}.items() if isinstance(v, Exception)]
    print(f"decompose_many: 1 worker {t1:.2f} s, 2 workers {t2:.2f} s -> speed-up {t1 / t2:.2f}x"
          + (f" (failures: {bad})" if bad else ""))


if __name__ == "__main__":
    main()
