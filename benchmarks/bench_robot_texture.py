"""Robot appearance: link textures vs flat colours, time and held-out quality.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_robot_texture.py [BUNDLE]

Default: the WidowX painted with 4 cm stripes on its surface, seen at four poses at 320x240 (tests/test_robot_texture.py's
scene); with BUNDLE, that bundle's frames (a bundle whose robot has joints per frame, e.g. the tracked Bridge clip).
Fits on all frames but the last, scores the last. Prints the seconds of each step and the ratios to the flat-colour fit
(the simplest alternative) measured in this run, and the robot-region PSNR of both (no asserts).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    from real2sim.core.bundle import Bundle
    from real2sim.core.imaging import read_rgb_float
    from real2sim.render.robot import load_robot_model
    from real2sim.texture.robot import (
        RobotAppearanceConfig,
        backproject_links,
        fit_link_colours,
        frame_views,
        robot_uv,
        score_robot_region,
    )

    if len(sys.argv) > 1:
        b = Bundle.load(Path(sys.argv[1]))
    else:
        from test_robot_texture import make_painted

        b = make_painted(Path(tempfile.mkdtemp(prefix="bench_robot_texture")))
    m = b.manifest
    cfg = RobotAppearanceConfig()
    model = load_robot_model(m.robot, b.root)
    t_uv, ruv = timed(lambda: robot_uv(model))
    n = len(m.capture.frames)
    idx = list(np.linspace(0, n - 1, min(n, cfg.max_frames)).round().astype(int))
    views = frame_views(b, model, idx)
    fit, held = views[:-1], views[-1:]
    t_flat, fitted = timed(lambda: fit_link_colours(model, fit, cfg))
    colours = {k: v["rgba"] for k, v in fitted.items() if v["rgba"] is not None}
    t_tex, texs = timed(lambda: backproject_links(ruv, fit, colours, cfg))
    plate = [read_rgb_float(b.path(m.capture.plate))] if m.capture.plate else None
    t_score, s = timed(lambda: score_robot_region(ruv, held, colours, {k: t.texture for k, t in texs.items()}, plate))
    key = "composite" if plate else "under_mask"
    print(f"bundle {b.root} ({len(fit)} fit frames, 1 held out, {views[0][1].shape[1]}x{views[0][1].shape[0]})")
    print(f"UV unwrap of {len(ruv.meshes)} links (once per robot, reused from the bundle): {t_uv:.2f} s")
    print(f"flat colours: {t_flat:.2f} s; textures: {t_tex:.2f} s ({t_tex / max(t_flat, 1e-9):.1f}x the flat fit); "
          f"scoring one frame (two renders): {t_score:.2f} s")
    print(f"held-out robot region ({key}): flat {s[key + '_flat_db']:.2f} dB, textured {s[key + '_textured_db']:.2f} dB "
          f"({s[key + '_textured_db'] - s[key + '_flat_db']:+.2f} dB)")


if __name__ == "__main__":
    main()
