"""Robot textures vs flat colours in the engines' composites, on real frames.

For a bundle whose ``robot_appearance`` stage ran: the robot's colours and textures are fitted on the stage's fit
frames (the held-out split of its report; all frames when the bundle has one robot pose), exported twice (flat
colours only; with the textures) to MJCF and SAPIEN, and rendered **unlit** (the stored colours, as
``shading='unlit'``) at each scored frame's joints. Composite = plate + rendered robot where the engine's
segmentation shows it; robot region = the frame's real robot mask united with that rendered mask; PSNR pooled over
the scored frames (the held-out ones when there are).

``python -m real2sim.demos.robot_texture BUNDLE OUT`` writes ``OUT/robot_texture.json``.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_json
from real2sim.core.errors import Real2SimError
from real2sim.core.imaging import read_rgb_float, to_float
from real2sim.engines import get_engine, get_exporter, simulator_names
from real2sim.evaluation.envs.observation import apply_shading
from real2sim.render.robot import load_robot_model
from real2sim.texture.robot import (
    ROBOT_STAGE,
    RobotAppearanceConfig,
    fit_appearance,
    frame_views,
    read_uv_meshes,
    robot_uv,
    write_link_texture,
)

log = logging.getLogger("real2sim.demos.robot_texture")


def engine_robot_psnr(bundle_dir, out_dir, engines=None) -> dict:
    """Robot-region PSNR of the engines' unlit composites, flat colours vs textures (see the module doc)."""
    src = Bundle.load(Path(bundle_dir))
    rep_path = src.reports_dir() / f"{ROBOT_STAGE}.json"
    if not rep_path.is_file():
        raise Real2SimError(f"{rep_path} is missing: run 'real2sim robot-appearance {bundle_dir}' first")
    rep = json.loads(rep_path.read_text())
    cfg = RobotAppearanceConfig(**{k: v for k, v in src.manifest.stages[ROBOT_STAGE].config.items()
                                   if k in RobotAppearanceConfig.__dataclass_fields__}) \
        if ROBOT_STAGE in src.manifest.stages and src.manifest.stages[ROBOT_STAGE].config else RobotAppearanceConfig()
    held = (rep.get("textures") or {}).get("robot_region_psnr_db", {}).get("held_out")
    n = len(src.manifest.capture.frames)
    fit_frames, score_frames = (held["fit_frames"], held["held_out_frames"]) if held else (list(range(n)), list(range(n)))
    if len(score_frames) > cfg.max_frames:
        score_frames = [score_frames[int(round(j))] for j in np.linspace(0, len(score_frames) - 1, cfg.max_frames)]
    out = Path(out_dir).resolve()
    work = out / "bundle"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src.root, work, ignore=shutil.ignore_patterns("exports", "results"))
    b = Bundle.load(work)
    m = b.manifest
    model = load_robot_model(m.robot, b.root)
    ruv = robot_uv(model, read_uv_meshes(b, m.robot))
    colours, texs = fit_appearance(model, ruv, frame_views(b, model, fit_frames), dict(m.robot.appearance), cfg,
                                   max_size=held.get("texture_max_size") if held else None)
    m.robot.appearance = colours
    textured = {k: write_link_texture(b, k, ruv.meshes[k], t.texture) for k, t in texs.items()}
    plate = read_rgb_float(b.path(m.capture.plate)) if m.capture.plate else None
    if plate is None:
        raise Real2SimError(f"{bundle_dir}: the bundle has no plate (capture.plate); the composite needs one")
    views = frame_views(b, model, score_frames)
    result = {"bundle": str(src.root), "fit_frames": fit_frames, "scored_frames": score_frames,
              "split": "held-out" if held else "in-sample (one robot pose)", "shading": "unlit", "engines": {}}
    for engine in engines or simulator_names():
        exp = get_exporter(get_engine(engine).name)
        row = {}
        for variant, tex in (("flat", {}), ("textured", textured)):
            m.robot.textures = tex
            d = out / f"export_{exp.name}_{variant}"
            exp.export(b, out_dir=d)
            se, cnt = 0.0, 0
            with exp.load(d) as scene:
                apply_shading(scene, "unlit")
                for (cam, img, q, rmask), i in zip(views, score_frames):
                    cam_name = m.capture.frames[i].camera
                    scene.set_robot_qpos(q)
                    rgb, mask, _ = scene.render_layers(cam_name, [], robot=True)
                    comp = np.where(mask[..., None], to_float(rgb)[..., :3], plate)
                    region = mask | (rmask if rmask is not None else mask)
                    se += float(((comp - img[..., :3]) ** 2)[region].sum())
                    cnt += int(region.sum()) * 3
            row[f"{variant}_db"] = round(float(10 * np.log10(cnt / se)), 3) if se > 0 else float("inf")
        row["gain_db"] = round(row["textured_db"] - row["flat_db"], 3)
        result["engines"][exp.name] = row
        log.info("%s: robot region %.2f dB flat -> %.2f dB textured", exp.name, row["flat_db"], row["textured_db"])
    atomic_write_json(out / "robot_texture.json", result)
    return result


def main(argv=None) -> int:
    """``python -m real2sim.demos.robot_texture BUNDLE OUT``: flat colours vs textures in MuJoCo and SAPIEN."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m real2sim.demos.robot_texture", description=main.__doc__)
    p.add_argument("bundle", help="a bundle whose robot_appearance stage ran")
    p.add_argument("out", help="output folder (robot_texture.json, the temporary exports)")
    p.add_argument("--engine", action="append", help="mujoco, sapien (default: both)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    log.info("%s", json.dumps(engine_robot_psnr(a.bundle, a.out, a.engine)["engines"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
