"""Object scanning: a 24-view 640x480 capture to a textured, decomposed object (target <= 60 s on 2 cores), and
carving at 128^3 against 256^3 (time and Chamfer) in the same run; with depth, TSDF fusion against the hull.

The capture is synthetic (``real2sim.scan.synthetic``: mug and box on a ChArUco board, noise, exposure changes, mask
errors), so every reconstruction is graded against the true mesh (the mug against its inside filled up to the rim
too: the visual hull's limit). Prints numbers and ratios; asserts nothing. Run: ``python benchmarks/bench_scan.py``.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    from real2sim.scan.o3d import open3d

    open3d()  # before coacd (DESIGN.md)
    from real2sim.pipeline.scan import ScanConfig, heldout_psnr, scan_object
    from real2sim.scan.synthetic import SyntheticScanConfig, write_synthetic_scan

    cache = tempfile.mkdtemp(prefix="r2s_bench_scan_cache_")
    os.environ["REAL2SIM_CACHE"] = cache  # a cold CoACD cache: the full cost is measured
    with tempfile.TemporaryDirectory(prefix="r2s_bench_scan_") as tmp:
        tmp = Path(tmp)
        for shape in ("mug", "box"):
            cap = tmp / shape
            t0 = time.perf_counter()
            write_synthetic_scan(cap, SyntheticScanConfig(shape=shape, depth=True))
            t_render = time.perf_counter() - t0
            ref = cap / "truth" / ("reference_filled.obj" if shape == "mug" else "reference.obj")
            print(f"-- {shape}: 24 views 640x480 rendered in {t_render:.1f} s (not part of the scan)")
            full = scan_object(cap, tmp / f"{shape}_obj", ScanConfig(reference=str(ref)))
            r = full.report
            held = heldout_psnr(tmp / f"{shape}_obj", cap / "truth" / "heldout" / "frames",
                                cap / "truth" / "heldout" / "masks", cap / "camera.json")
            print(f"full scan (board poses, 128^3 hull + top refinement, cleanup, texture 1024, CoACD): "
                  f"{r['timing']['total_s']:.1f} s (target <= 60 s); stages {r['timing']}")
            print(f"  Chamfer {r['grade']['chamfer_mm']:.2f} mm, volume IoU {r['grade']['volume_iou']:.3f} vs "
                  f"{ref.name}; held-out texture PSNR {held['psnr_db']:.1f} dB; {r['collision']['hulls']} hulls")
            rows = {}
            for res in (128, 256):
                t0 = time.perf_counter()
                out = scan_object(cap, tmp / f"{shape}_{res}", ScanConfig(resolution=res, reference=str(ref),
                                                                           collision=False, texture_size=256))
                rows[res] = (out.report["timing"]["geometry_s"], out.report["grade"], time.perf_counter() - t0)
                print(f"  carving {res}^3: geometry {rows[res][0]:.1f} s, Chamfer {rows[res][1]['chamfer_mm']:.2f} mm, "
                      f"IoU {rows[res][1]['volume_iou']:.3f} (whole scan without CoACD {rows[res][2]:.1f} s)")
            print(f"  256^3 / 128^3: geometry time x{rows[256][0] / rows[128][0]:.1f}, Chamfer "
                  f"{rows[256][1]['chamfer_mm'] / rows[128][1]['chamfer_mm']:.2f}x")
            d = scan_object(cap, tmp / f"{shape}_depth", ScanConfig(reference=str(cap / "truth" / "reference.obj"),
                                                                    collision=False, texture_size=256), cap / "depth")
            print(f"  RGB-D (TSDF 1.5 mm): geometry {d.report['timing']['geometry_s']:.1f} s, Chamfer "
                  f"{d.report['grade']['chamfer_mm']:.2f} mm, IoU {d.report['grade']['volume_iou']:.3f} vs the real "
                  f"{shape} (reference.obj)")
            if shape == "mug":
                import trimesh

                from real2sim.scan.metrics import chamfer, volume_iou

                m = trimesh.load(tmp / f"{shape}_obj" / "visual.obj", force="mesh")
                v = m.vertices + [r["T_world_object"][0][3], r["T_world_object"][1][3], 0.0]
                mug = trimesh.load(cap / "truth" / "reference.obj", force="mesh")
                print(f"  the hull's limit: against the open mug Chamfer "
                      f"{chamfer(v, m.faces, mug.vertices, mug.faces)['mean_m'] * 1e3:.2f} mm, IoU "
                      f"{volume_iou(v, m.faces, mug.vertices, mug.faces):.3f} (the inside is filled)")


if __name__ == "__main__":
    main()
