"""Textured level of detail of rendered object visuals (``real2sim/render/lod.py``): quality and cost, one run.

On the Google coke-can scene (SIMPLER's 25,000-triangle can at 640x512), for each engine: the env's composited
first observation with the exports' level-of-detail can vs the same bundle exported with the full mesh
(``REAL2SIM_VISUAL_LOD=off``): PSNR in the can's region (its mask in either image, dilated 2 px) over a few can
placements (seeds), and the render + segmentation time of the two (median wall and CPU time, interleaved).

Needs ``../shared/data`` (the Google Robot, the overlay, the coke can); without it says so and measures nothing.

    MUJOCO_GL=egl PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_lod.py [--seeds 3] [--backend B]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DATA = ROOT.parent / "shared" / "data"
BACKENDS = ("mujoco", "sapien")


def region_psnr(a: np.ndarray, b: np.ndarray, region: np.ndarray) -> float:
    d = (a.astype(np.float64) - b.astype(np.float64))[region] / 255.0
    mse = float(np.mean(d ** 2)) if d.size else 0.0
    return float("inf") if mse == 0 else float(10.0 * np.log10(1.0 / mse))


def compare(lod_root: Path, full_root: Path, backend: str, seeds: int, n: int) -> dict:
    from bench_google import round_robin
    from scipy import ndimage

    from real2sim.evaluation.envs.env import Real2SimEnv

    envs = {k: Real2SimEnv(r, backend=backend, obs_mode="composited", camera="main", render_mode=None)
            for k, r in (("lod", lod_root), ("full", full_root))}
    psnrs: list[float] = []
    for seed in range(seeds):
        img, mask = {}, {}
        for k, env in envs.items():
            obs, _ = env.reset(seed=seed)
            img[k] = obs["image"]
            mask[k] = env.scene.foreground_mask(env.camera, ["coke_can"], False)
        region = ndimage.binary_dilation(mask["lod"] | mask["full"], iterations=2)
        psnrs.append(round(region_psnr(img["lod"], img["full"], region), 2))
    fns = {k: (lambda env=env: env.scene.render_layers(env.camera, env.movable)) for k, env in envs.items()}
    wall, cpu = round_robin(fns, n)
    for env in envs.values():
        env.close()
    out = {"psnr_db": [round(p, 2) for p in psnrs], "psnr_median_db": round(float(np.median(psnrs)), 2),
           "render_ms": {k: round(v * 1e3, 1) for k, v in wall.items()},
           "render_cpu_ms": {k: round(v * 1e3, 1) for k, v in cpu.items()}}
    print(f"[{backend}] coke can, level of detail vs full mesh: can-region PSNR {out['psnr_median_db']:.2f} dB "
          f"(median of {seeds} placements: {out['psnr_db']}); render + segmentation {wall['lod'] * 1e3:.1f} vs "
          f"{wall['full'] * 1e3:.1f} ms ({wall['lod'] / wall['full']:.2f}x), CPU {cpu['lod'] * 1e3:.1f} vs "
          f"{cpu['full'] * 1e3:.1f} ms ({cpu['lod'] / cpu['full']:.2f}x)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3, help="can placements compared")
    ap.add_argument("--steps", type=int, default=15, help="renders timed per side")
    ap.add_argument("--backend", action="append", choices=BACKENDS, help="engine(s) (default: both)")
    ap.add_argument("--json", type=Path, help="write the numbers here")
    args, _ = ap.parse_known_args()
    logging.basicConfig(level=logging.ERROR)
    need = [DATA / "google_robot" / "description", DATA / "google_robot" / "overlays", DATA / "objects" / "coke_can"]
    if not all(p.is_dir() for p in need):
        print(f"bench_lod: {DATA} has no Google Robot data (google_robot/, objects/coke_can); nothing measured")
        return
    from bench_google import google_bundle

    from real2sim import pipeline
    from real2sim.core.bundle import Bundle
    from real2sim.render.lod import ENV_SWITCH, object_lod

    tmp = Path(tempfile.mkdtemp(prefix="bench_lod_"))
    os.environ.setdefault("REAL2SIM_CACHE", str(tmp / "cache"))
    lod_bundle = google_bundle(tmp)  # exported with the level-of-detail can
    res = object_lod(lod_bundle, "coke_can")
    print(f"coke can: {res.faces} of {res.source_faces} faces ({res.reason}; tolerance {res.tolerance_m * 1e3:.3f} mm, "
          f"measured {res.deviation_m * 1e3:.3f} mm)")
    full_root = tmp / "full"
    shutil.copytree(lod_bundle.root, full_root, symlinks=True)
    os.environ[ENV_SWITCH] = "off"
    try:
        pipeline.export_bundle(Bundle.load(full_root), engines=["mjcf", "sapien"])
    finally:
        del os.environ[ENV_SWITCH]
    report = {"faces": res.faces, "source_faces": res.source_faces, "tolerance_m": res.tolerance_m}
    for backend in args.backend or BACKENDS:
        report[backend] = compare(lod_bundle.root, full_root, backend, args.seeds, args.steps)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
