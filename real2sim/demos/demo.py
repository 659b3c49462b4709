"""``real2sim demo``: the whole journey on the bundled tabletop scene, with no input.

A ground-truth scene (``<out>/ground_truth``, the recipe as written) is rendered into a
synthetic capture (frame + masks, with sensor noise and an exposure change). The demo
bundle starts from the same recipe with the objects misplaced, as a person's rough
placement would be, and then runs what a user runs on real frames:

plate -> pose alignment -> texture -> collision -> mass -> export (MJCF, USD, SAPIEN,
each loaded back) -> drop test and camera checks across engines -> evaluation of
scripted policies of graded quality in MuJoCo and SAPIEN -> MMRV / Pearson between
the engines, with a plot. Because the truth is kept, every recovered quantity is
reported against it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from real2sim import collision, pipeline
from real2sim.collision.stage import default_cache_dir
from real2sim.core.bundle import Bundle, atomic_write_json
from real2sim.core.errors import BundleError
from real2sim.core.geometry import euler_xyz_to_matrix, transform_points
from real2sim.core.manifest import Pose
from real2sim.core.meshes import load_mesh
from real2sim.demos.synthetic import SyntheticCaptureConfig, synthesize_capture
from real2sim.engines import engine_for, get_exporter, simulator_names
from real2sim.evaluation import crosscheck
from real2sim.evaluation.envs.env import resolve_task
from real2sim.evaluation.envs.runner import evaluate, write_sim_csv
from real2sim.evaluation.metrics import compare, plot, read_results, to_json
from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

log = logging.getLogger(__name__)
STAGES = ["ground truth", "capture", "build", "export", "drop test", "cameras", "render", "evaluate", "metrics"]
POLICIES = ("scripted", "scripted:noise=0.03", "random")


@dataclass
class DemoConfig:
    """What ``real2sim demo`` runs (its flags and defaults)."""

    scene: str = "tabletop"
    """Scene recipe: a bundled scene, one from an installed pack (real2sim.scenes), or a scene rebuilt from the shared
    data (google_pick_coke_can, google_move_near: SIMPLER's Google Robot scenes, read from --data)."""
    task: str | None = None
    """Task of the scene to evaluate (default: the scene's first)."""
    workers: int = 2
    """Objects decomposed in parallel (CoACD runs in subprocesses)."""
    episodes: int = 6
    """Episodes per policy and engine."""
    data: str | None = None
    """Shared data folder the google_* scenes are built from (default: $REAL2SIM_DATA, else ../shared/data)."""
    variant: str | None = None
    """Variant of a google_* scene (pick coke can: horizontal, vertical, standing) or 'all' (default: the recipe's)."""


@dataclass
class DemoReport:
    out_dir: Path
    task: str = ""
    """The task evaluated (the scene's first unless chosen)."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stages_ran: dict[str, bool] = field(default_factory=dict)
    """Build stage -> whether it ran (False: its inputs were unchanged, the bundle's result was kept)."""
    episodes_ran: dict[str, int] = field(default_factory=dict)
    """Engine -> episodes run now (a re-run resumes from the results already on disk: 0)."""
    exports: dict[str, str] = field(default_factory=dict)
    pose_error_mm: dict[str, dict[str, float]] = field(default_factory=dict)
    """object -> {"before": ADD-S mm of the rough placement, "after": after alignment}."""
    build: dict[str, dict] = field(default_factory=dict)
    """stage -> its metrics (plate coverage, alignment IoU, texture PSNR, hull counts)."""
    drop_position_mm: dict[str, float] = field(default_factory=dict)
    drop_angle_deg: dict[str, float] = field(default_factory=dict)
    projection_px: dict[str, float] = field(default_factory=dict)
    success: dict[str, dict[str, float]] = field(default_factory=dict)
    """engine -> policy -> success rate on the demo task."""
    mmrv: float | None = None
    pearson: float | None = None
    pictures: dict[str, str] = field(default_factory=dict)
    render_notes: dict[str, str] = field(default_factory=dict)


# The rough placement the demo starts from on the bundled scene (metres, radians): what alignment must undo.
MISPLACEMENT = {"cube": (0.018, -0.012, 0.17), "domino": (-0.015, 0.014, -0.15), "bracket": (0.012, 0.015, 0.12),
                "mug": (-0.014, -0.01, 0.2), "can": (0.015, 0.01, 0.0)}


def misplacement(bundle: Bundle) -> dict[str, tuple[float, float, float]]:
    """(dx, dy, dyaw) per dynamic object: :data:`MISPLACEMENT` where it names the object, else 1-1.8 cm and up to
    0.17 rad drawn from a generator seeded by the object's id (the same every run)."""
    out = {}
    for oid in sorted(bundle.dynamic_objects()):
        if oid in MISPLACEMENT:
            out[oid] = MISPLACEMENT[oid]
            continue
        rng = np.random.default_rng(int.from_bytes(oid.encode()[:8].ljust(8, b"\0"), "little"))
        r, a = rng.uniform(0.010, 0.018), rng.uniform(0, 2 * np.pi)
        out[oid] = (round(r * np.cos(a), 4), round(r * np.sin(a), 4), round(rng.uniform(-0.17, 0.17), 3))
    return out


def run_demo(out_dir: Path, scene: str = DemoConfig.scene, workers: int = DemoConfig.workers,
             episodes: int = DemoConfig.episodes, task: str | None = DemoConfig.task,
             on_stage: Callable[[str], None] | None = None) -> DemoReport:
    """Run the demo on a registered scene into ``out_dir``; ``on_stage(name)`` is called as each stage starts.

    ``task``: a task of the scene's recipe (default: its first). Re-running on an existing demo bundle skips every
    unchanged stage.
    """

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise BundleError(f"{out_dir}: is a file; the demo writes a bundle folder there (choose another --out)")
    rep = DemoReport(out_dir)
    notify = on_stage or (lambda name: None)
    cache = default_cache_dir()
    cfg = collision.CollisionConfig(workers=workers)

    def timed(name, fn):
        notify(name)
        t0 = time.perf_counter()
        value = fn()
        rep.stage_seconds[name] = round(time.perf_counter() - t0, 2)
        return value

    truth = timed("ground truth", lambda: _truth(out_dir / "ground_truth", scene, cfg, cache))
    bundle = timed("capture", lambda: _capture(out_dir, scene, truth))
    moved = misplacement(truth)
    rep.pose_error_mm = {oid: {"before": round(_add_s_mm(bundle, truth, oid), 2)} for oid in moved}
    rep.stages_ran = timed("build", lambda: pipeline.build(bundle, cfg, cache_dir=cache))
    bundle = Bundle.load(bundle.root)
    for oid in moved:
        rep.pose_error_mm[oid]["after"] = round(_add_s_mm(bundle, truth, oid), 2)
    rep.build = {k: bundle.manifest.stages[k].metrics for k in ("plate", "alignment", "texture", "collision", "inertial")
                 if k in bundle.manifest.stages}
    results = timed("export", lambda: pipeline.export_bundle(bundle))
    rep.exports = {k: (str(v.main_file) if hasattr(v, "main_file") else str(v)) for k, v in results.items()}
    drop = timed("drop test", lambda: crosscheck.drop_test(bundle, seconds=1.0))
    rep.drop_position_mm = {k: round(v, 3) for k, v in drop.position_error_mm.items()}
    rep.drop_angle_deg = {k: round(v, 3) for k, v in drop.angle_error_deg.items()}
    cam = next(iter(bundle.manifest.cameras))
    rep.projection_px = timed("cameras", lambda: crosscheck.projection_errors(bundle, cam))
    img, rep.render_notes = timed("render", lambda: crosscheck.render_side_by_side(bundle, cam))
    from PIL import Image

    pic = bundle.reports_dir() / f"demo_{'_vs_'.join(simulator_names()[:2])}.png"
    Image.fromarray(img).save(pic)
    rep.pictures["engines"] = bundle.rel(pic)
    rep.task = resolve_task(bundle.manifest, task)[0]
    csvs = timed("evaluate", lambda: _evaluate(bundle, rep.task, episodes, rep))
    timed("metrics", lambda: _metrics(bundle, csvs, rep))
    for stage, name in (("plate", "plate.png"), ("segment", "segment.png")):
        if (bundle.reports_dir() / name).is_file():
            rep.pictures[stage] = f"reports/{name}"
    atomic_write_json(bundle.reports_dir() / "demo.json", {
        "stage_seconds": rep.stage_seconds, "stages_ran": rep.stages_ran, "episodes_ran": rep.episodes_ran,
        "exports": rep.exports, "pose_error_mm": rep.pose_error_mm,
        "build": rep.build, "drop_position_mm": rep.drop_position_mm, "drop_angle_deg": rep.drop_angle_deg,
        "projection_px": rep.projection_px, "success": rep.success, "mmrv": rep.mmrv, "pearson": rep.pearson,
        "render": rep.render_notes, "pictures": rep.pictures})
    return rep


def _truth(root: Path, scene: str, cfg, cache) -> Bundle:
    """The ground-truth scene: the recipe as written, built and exported to MuJoCo (for rendering)."""

    b = _fresh_or_existing(root, scene)
    pipeline.build(b, cfg, cache_dir=cache)
    renderer = engine_for("render").name
    pipeline.export_bundle(b, engines=(renderer,))
    if not b.manifest.provenance.get("settled"):
        _settle(b)
        pipeline.export_bundle(b, engines=(renderer,))
    return b


def _settle(b: Bundle, seconds: float = 1.0) -> None:
    """The recipe drops objects from 5 mm; the true scene is where they come to rest (the first physics engine)."""

    engine = engine_for("physics")
    exp = get_exporter(engine.name)
    with exp.load(exp.out_dir(b)) as scene:
        scene.step(seconds)
        for oid in b.dynamic_objects():
            b.object(oid).pose = Pose.from_matrix(scene.object_pose(oid))
    b.manifest.provenance["settled"] = f"{seconds} s in {engine.title}"
    b.save()


def _capture(out_dir: Path, scene: str, truth: Bundle) -> Bundle:
    """The demo bundle: recipe with misplaced objects + a synthetic capture of the truth."""

    b = _fresh_or_existing(out_dir, scene)
    if b.manifest.capture.frames:
        return b  # an earlier run made it; alignment has already moved the objects
    moved = misplacement(b)
    for oid, (dx, dy, dyaw) in moved.items():  # resting on the table, but misplaced
        T = truth.object(oid).pose.matrix()
        T[:3, 3] += [dx, dy, 0.0]
        T[:3, :3] = euler_xyz_to_matrix(0.0, 0.0, dyaw) @ T[:3, :3]
        b.object(oid).pose = Pose.from_matrix(T)
    b.save()
    synthesize_capture(b, truth, SyntheticCaptureConfig(masked=tuple(moved), noise_std=2.0, gain=0.95))
    return Bundle.load(b.root)


def _add_s_mm(bundle: Bundle, truth: Bundle, oid: str) -> float:
    """Mean distance (mm) from the object's surface as placed to the true surface (symmetry-aware)."""
    from scipy.spatial import cKDTree

    pts = load_mesh(truth.path(truth.object(oid).visual.mesh)).sample(1500, seed=0)
    true_pts = transform_points(truth.object(oid).pose.matrix(), pts)
    placed = transform_points(bundle.object(oid).pose.matrix(), pts)
    return float(cKDTree(true_pts).query(placed)[0].mean() * 1000)


def _evaluate(bundle: Bundle, task: str | None, episodes: int, rep: DemoReport) -> dict[str, Path]:
    """Graded scripted policies in every simulator (state observations: fast); returns simulator -> sim CSV."""

    csvs = {}
    for engine in simulator_names():
        out = bundle.root / "results" / engine
        rep.success[engine] = {}
        rep.episodes_ran[engine] = 0
        for policy in POLICIES:
            s = evaluate(bundle.root, task, policy, episodes, workers=1, backend=engine, out_dir=out, obs_mode="state")
            rep.success[engine][policy] = round(s.rate, 3)
            rep.episodes_ran[engine] += s.ran
        csvs[engine] = write_sim_csv(out / "episodes.jsonl", out / "sim.csv")
    return csvs


def _metrics(bundle: Bundle, csvs: dict[str, Path], rep: DemoReport) -> None:
    """The first simulator as the reference ranking, the second as the one checked (both simulated here)."""

    ref, checked = list(csvs)[:2]
    ms = compare(read_results(csvs[ref]), read_results(csvs[checked]), n_boot=500, real_name=ref, sim_name=checked)
    rep.mmrv = round(float(np.mean([m.mmrv for m in ms])), 4)
    finite = [m.pearson for m in ms if not np.isnan(m.pearson)]
    rep.pearson = round(float(np.mean(finite)), 4) if finite else None
    atomic_write_json(bundle.reports_dir() / f"metrics_{ref}_vs_{checked}.json", to_json(ms))
    rep.pictures["metrics"] = bundle.rel(plot(ms, bundle.reports_dir() / f"metrics_{ref}_vs_{checked}.png"))


def _fresh_or_existing(out_dir: Path, scene: str) -> Bundle:
    """Re-use a previous demo bundle of the same recipe (stages then skip), else create one."""
    recipe = builtin_recipe(scene)
    if (out_dir / "scene.json").exists():
        try:
            b = Bundle.load(out_dir)
            if b.manifest.provenance.get("recipe") == recipe.name and b.manifest.name == scene:
                return b
        except Exception as exc:  # a broken old demo bundle is simply rebuilt
            log.warning("rebuilding demo bundle: %s", exc)
    return bundle_from_recipe(recipe, out_dir, overwrite=True)


def worst(values: dict) -> float:
    return float(np.max(list(values.values()))) if values else 0.0
