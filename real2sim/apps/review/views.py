"""What the review page's tabs show, computed from a bundle (no Gradio here, so it is testable without a browser).

Overview (stage table, what is missing, undo history, report pictures), the pose fields of the Objects and
Camera & robot tabs, the Collision tab's 3D view and numbers, and the Export & evaluate tab's results.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from real2sim.apps.review.edits import camera_xyz_rpy, pose_to_xyz_rpy
from real2sim.apps.review.versions import history
from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.errors import Real2SimError
from real2sim.core.gates import judge
from real2sim.core.manifest import Manifest
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import poor_line


def ok_md(msg: str) -> str:
    """A status line saying ``msg`` worked."""
    return f"**OK:** {msg}"


def err_md(msg: str) -> str:
    """A status line saying ``msg`` went wrong."""
    return f"**Error:** {msg}"


# -- overview ---------------------------------------------------------------------------------
def stage_table(bundle: Bundle) -> list[list[str]]:
    """Rows ``[stage, status, quality, key metrics, message]`` for every stage the bundle has run; ``quality`` is
    the stage's gate (:mod:`real2sim.core.gates`): its number against the bar, POOR when it misses it."""
    rows = []
    for name, rec in bundle.manifest.stages.items():
        metrics = ", ".join(f"{k}={_short(v)}" for k, v in rec.metrics.items() if k not in ("seconds", "gate"))
        status = rec.status.upper() if rec.status == "poor" else rec.status
        rows.append([name, status, _quality(name, rec), metrics, rec.message])
    return rows


def _quality(name: str, rec) -> str:
    """'0.83 (>= 0.6) ok' / '0.24 (>= 0.6) POOR, not applied' for a gated stage; '' for the others."""
    verdicts = judge(name, rec.metrics)
    if not verdicts:
        return ""
    parts = [f"{v.gate.metric} {v.value:.4g}{v.gate.unit} ({'>=' if v.gate.higher_is_better else '<='} "
             f"{v.gate.bar:g}) {'ok' if v.passed else 'POOR'}" for v in verdicts]
    if rec.status == "poor":
        parts.append("applied anyway" if rec.metrics.get("applied") else "not applied")
    return ", ".join(parts)


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    s = str(v)
    return s if len(s) < 60 else s[:57] + "..."


# Which command produces each piece the review app can show.
PRODUCERS = {
    "frames": "real2sim init DIR --frames PATH",
    "plate": "real2sim build DIR (plate stage)",
    "masks": "real2sim masks DIR --entity NAME --point X,Y (or 'real2sim init DIR --prompts prompts.json')",
    "collision": "real2sim build DIR",
    "inertial": "real2sim build DIR",
    "export": "real2sim export DIR",
    "robot": "real2sim init DIR --frames PATH --robot NAME",
}


def missing_pieces(bundle: Bundle) -> list[str]:
    """Human-readable list of what the bundle lacks and the command that produces it."""
    m = bundle.manifest
    out = []
    root = str(bundle.root)
    if not m.capture.frames:
        out.append(f"no camera frames: run '{PRODUCERS['frames'].replace('DIR', root)}'")
    if not m.capture.plate:
        out.append(f"no background plate: run '{PRODUCERS['plate'].replace('DIR', root)}'")
    if not m.capture.masks:
        out.append(f"no masks: run '{PRODUCERS['masks'].replace('DIR', root)}' or click objects in the Masks tab")
    for st in ("collision", "inertial", "export"):
        rec = m.stages.get(st)
        if rec is None or rec.status != "done":
            why = "not run" if rec is None else rec.status
            out.append(f"stage '{st}' is {why}: run '{PRODUCERS[st].replace('DIR', root)}'")
    if m.robot is None:
        out.append(f"no robot: run '{PRODUCERS['robot'].replace('DIR', root)}'")
    return out


def overview_summary(bundle: Bundle) -> str:
    """Markdown: the scene in one line, what is stale or failed, what is missing."""
    m = bundle.manifest
    lines = [f"**{m.name}** — {len(m.objects)} objects, cameras: {', '.join(m.cameras) or 'none'}, "
             f"{len(m.capture.frames)} frames, robot: {m.robot.name if m.robot else 'none'}"]
    poor = [poor_line(bundle, n) for n, r in m.stages.items() if r.status == "poor"]
    if poor:
        lines.append("**Poor (below its quality bar):**\n" + "\n".join(f"- {x}" for x in poor))
    stale = [n for n, r in m.stages.items() if r.status in ("stale", "failed")]
    if stale:
        lines.append("**Stale or failed:** " + ", ".join(f"`{n}` ({m.stages[n].status})" for n in stale))
    missing = missing_pieces(bundle)
    if missing:
        lines.append("**Missing:**\n" + "\n".join(f"- {x}" for x in missing))
    return "\n\n".join(lines)


def report_pictures(bundle: Bundle, limit: int = 24) -> list[tuple[str, str]]:
    """``(path, caption)`` of the report pictures (``reports/**/*.png``, collision quality plots)."""
    reports = bundle.root / "reports"
    pics = sorted(p for p in reports.glob("**/*.png")) if reports.is_dir() else []
    pics += sorted((bundle.root / "objects").glob("*/collision/quality.png"))
    return [(str(p), bundle.rel(p)) for p in pics[:limit]]


def overview(bundle: Bundle) -> tuple[str, list[list[str]], list[list[str]], list[tuple[str, str]]]:
    """The Overview tab: summary, stage rows, undo history rows, report pictures."""
    rows = stage_table(bundle) or [["(none)", "", "", "", "run 'real2sim build'"]]
    hist = [[h["file"].split(".")[0], h["edit"]] for h in history(bundle.root)] or [["", "(no edits yet)"]]
    return overview_summary(bundle), rows, hist, report_pictures(bundle)


# -- poses ------------------------------------------------------------------------------------
def object_pose_fields(manifest: Manifest, oid: str | None) -> list[float] | None:
    """x, y, z (m, 0.1 mm) and roll, pitch, yaw (deg, 0.01 deg) of object ``oid``; None when there is no such object."""
    if not oid or oid not in manifest.objects:
        return None
    xyz, rpy = pose_to_xyz_rpy(manifest.objects[oid].pose)
    return [round(v, 4) for v in xyz] + [round(float(np.degrees(a)), 2) for a in rpy]


def pose_text(values) -> str:
    """The exact-pose text field: ``x, y, z, roll, pitch, yaw``."""
    return ", ".join(f"{v:g}" for v in values)


def pose_text_quat(pose) -> str:
    """The exact-pose text field as the page shows it: ``x, y, z`` (m) and the quaternion ``qw, qx, qy, qz``
    (exact: no Euler angles, which lose a degree of freedom at pitch +-90 deg)."""
    return ", ".join(f"{float(v):.6g}" for v in [*pose.position, *pose.quaternion_wxyz])


def camera_pose_fields(manifest: Manifest, camera: str | None) -> list[float] | None:
    """Camera position (m) and roll, pitch, yaw (deg) as the sliders show them; None when there is no such camera."""
    if not camera or camera not in manifest.cameras:
        return None
    xyz, rpy = camera_xyz_rpy(manifest.cameras[camera].T_world_camera)
    return [round(v, 4) for v in xyz] + [round(float(np.degrees(a)), 2) for a in rpy]


def robot_fields(bundle: Bundle) -> tuple:
    """(note, base x, y, z (m), base yaw (deg)) for the Camera & robot tab."""
    r = bundle.manifest.robot
    if r is None:
        return (f"No robot in this bundle: run `real2sim init {bundle.root} --frames PATH --robot NAME`. "
                "Link colours come from `real2sim robot-appearance`."), 0, 0, 0, 0
    xyz, rpy = pose_to_xyz_rpy(r.base_pose)
    return (f"Robot **{r.name}**. Base pose edits are saved to scene.json; the overlay draws the robot at the "
            "frame's joints from the edited base."), *[round(v, 4) for v in xyz], round(float(np.degrees(rpy[2])), 2)


def keep_exact(shown, exact, decimals: int) -> np.ndarray:
    """Slider values back to numbers: a component still equal to the rounded current value keeps its exact value.

    The page shows positions to 0.1 mm and angles to 0.01 deg; without this, moving one slider would
    also snap the other five components to their rounded values.
    """
    shown = np.asarray(shown, dtype=float)
    exact = np.asarray(exact, dtype=float)
    same = np.isclose(shown, np.round(exact, decimals), atol=0.5 * 10.0 ** -decimals * 1e-3)
    return np.where(same, exact, shown)


# -- collision --------------------------------------------------------------------------------
def collision_glb(bundle: Bundle, oid: str) -> Path:
    """Write ``reports/collision_<oid>.glb``: the visual mesh (grey, translucent) and each hull or primitive in colour."""
    import trimesh

    obj = bundle.object(oid)
    scene = trimesh.Scene()
    vis = load_mesh(bundle.path(obj.visual.mesh)).copy()
    vis.visual = trimesh.visual.ColorVisuals(vis, face_colors=[180, 180, 180, 90])
    scene.add_geometry(vis, node_name=f"{oid}_visual")
    rng = np.random.default_rng(0)
    for i, m in enumerate(_collision_parts(bundle, oid)):
        m = m.copy()
        c = np.r_[rng.integers(60, 255, 3), 200]
        m.visual = trimesh.visual.ColorVisuals(m, face_colors=c)
        scene.add_geometry(m, node_name=f"{oid}_collision_{i:03d}")
    # glTF is +Y up: rotate the scene so that world +Z shows up
    scene.apply_transform(trimesh.transformations.rotation_matrix(-np.pi / 2, [1, 0, 0]))
    path = bundle.reports_dir() / f"collision_{oid}.glb"
    atomic_write_bytes(path, scene.export(file_type="glb"))
    return path


def _collision_parts(bundle: Bundle, oid: str) -> list:
    """The object's hulls, or its primitive, as trimesh meshes."""
    import trimesh

    col = bundle.object(oid).collision
    if col.kind == "hulls":
        return [load_mesh(bundle.path(h)) for h in col.hulls]
    if col.kind == "box":
        return [trimesh.creation.box(extents=2 * np.asarray(col.size), transform=col.pose.matrix())]
    if col.kind == "cylinder":
        return [trimesh.creation.cylinder(radius=col.size[0], height=2 * col.size[1], transform=col.pose.matrix())]
    if col.kind == "sphere":
        return [trimesh.creation.icosphere(radius=col.size[0]).apply_transform(col.pose.matrix())]
    return []


def collision_stats(bundle: Bundle, oid: str) -> dict:
    """What ``reports/collision.json`` says about one object (empty when the stage has not run)."""
    p = bundle.root / "reports" / "collision.json"
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text()).get("objects", {}).get(oid, {})
    except (OSError, json.JSONDecodeError):
        return {}


def collision_view(bundle: Bundle, oid: str | None) -> tuple[str | None, str, dict]:
    """The Collision tab: (GLB path for the 3D view or None, note, hull stats)."""
    if not oid or oid not in bundle.manifest.objects:
        return None, "no object selected", {}
    obj = bundle.manifest.objects[oid]
    if obj.collision.kind in ("pending", "none"):
        return None, f"object `{oid}` has no collision geometry ({obj.collision.kind}): run `real2sim build {bundle.root}`", {}
    try:
        glb = collision_glb(bundle, oid)
    except Real2SimError as exc:
        return None, err_md(str(exc)), {}
    stats = collision_stats(bundle, oid)
    n = len(obj.collision.hulls) if obj.collision.kind == "hulls" else 1
    if not stats:
        stats = {"kind": obj.collision.kind, "parts": n, "size": obj.collision.size,
                 "note": f"no reports/collision.json entry: run 'real2sim build {bundle.root}' for hull quality numbers"}
    return str(glb), f"`{oid}`: {obj.collision.kind}, {n} part(s); 3D view written to `{bundle.rel(glb)}`", stats


# -- export & evaluate --------------------------------------------------------------------------
def export_files(root: Path) -> list[list]:
    """``[file, bytes]`` rows of what is under ``exports/`` (at most 500)."""
    d = Path(root) / "exports"
    if not d.is_dir():
        return []
    return [[p.relative_to(root).as_posix(), p.stat().st_size] for p in sorted(d.rglob("*")) if p.is_file()][:500]


def export_lines(results: dict, root: Path) -> str:
    """Markdown list: one line per engine of ``pipeline.export_bundle``'s results."""
    lines = []
    for name, r in results.items():
        if isinstance(r, Exception):
            lines.append(f"- **{name}**: failed — {r}")
        elif hasattr(r, "main_file"):
            lines.append(f"- **{name}**: `{Path(r.main_file).relative_to(root)}` ({len(r.files)} files, "
                         f"{len(r.warnings)} warnings)")
        else:
            lines.append(f"- **{name}**: {r}")
    return "\n".join(lines)


def eval_summary(s, root: Path) -> str:
    """Markdown of an evaluation summary (``evaluation.envs.runner.evaluate``'s result)."""
    return (f"**{s.policy}** on task `{s.task}` ({s.backend}): **{s.successes}/{s.trials}** successes "
            f"({s.rate:.0%}); {s.ran} run, {s.skipped} already done, {s.seconds:.1f} s.  \n"
            f"Episodes: `{Path(s.results_path).relative_to(root)}`; summary for `real2sim metrics --sim`: "
            f"`{Path(s.csv_path).relative_to(root)}`")
