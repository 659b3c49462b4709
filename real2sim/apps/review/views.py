"""What the review page's tabs show, computed from a bundle (no Gradio here, so it is testable without a browser).

Overview (stage table, what is missing, undo history, report pictures), the pose fields of the Objects and
Camera & robot tabs, the Collision tab's 3D view and numbers, and the Export & evaluate tab's results.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
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
from real2sim.pipeline.check import poor_alignments

log = logging.getLogger(__name__)


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
    poor_objects = poor_alignments(bundle)
    if poor_objects:
        lines.append("**Poor alignment (check the mask and the pose):**\n"
                     + "\n".join(f"- `{oid}`: {why}" for oid, why in poor_objects.items()))
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


# -- joint sliders ------------------------------------------------------------------------------
@dataclass(frozen=True)
class JointControl:
    """One joint slider: the articulated object it belongs to (``owner``), or the robot's start joints (``robot``),
    the joint (limits in m or rad) and the slider's element id. The slider shows m (prismatic) or deg (revolute)."""

    owner: str
    joint: object  # real2sim.pipeline.articulated.JointRange
    elem_id: str
    robot: bool = False

    @property
    def decimals(self) -> int:
        return 4 if self.joint.unit == "m" else 2

    @property
    def step(self) -> float:
        return 0.0005 if self.joint.unit == "m" else 0.1

    def bounds(self) -> tuple[float, float]:
        """The slider's range in the shown unit, rounded inwards (its ends are inside the joint's limits)."""
        if not self.joint.limited:
            return -180.0, 180.0
        f = 10.0 ** self.decimals
        lo, hi = self.joint.shown(self.joint.lower), self.joint.shown(self.joint.upper)
        return float(np.ceil(lo * f - 1e-6) / f) + 0.0, float(np.floor(hi * f + 1e-6) / f) + 0.0  # no -0

    @property
    def label(self) -> str:
        j = self.joint
        lo, hi = self.bounds()
        rng = f"{lo:g} to {hi:g} {j.unit}" if j.limited else f"continuous, shown {lo:g} to {hi:g} deg"
        return f"{j.name} ({j.unit}, {j.type}, {rng})"

    def shown(self, value: float | None) -> float | None:
        """A stored value (m or rad) as the slider shows it (rounded to the slider's decimals)."""
        return None if value is None else round(self.joint.shown(value), self.decimals)

    def to_store(self, shown: float, current: float | None) -> float:
        """The slider's value in m or rad; the current value when the slider still shows it (no rounding drift)."""
        if current is not None and abs(float(shown) - round(self.joint.shown(current), self.decimals)) < 1e-9:
            return float(current)
        return self.joint.stored(float(shown))


def _elem(*parts: str) -> str:
    import re

    return "joint_" + "__".join(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in parts)


def object_joint_controls(bundle: Bundle) -> list[JointControl]:
    """A slider per movable joint of every articulated object (objects in manifest order, joints in URDF order)."""
    from real2sim.pipeline.articulated import object_joint_ranges

    out = []
    for oid, obj in bundle.manifest.objects.items():
        if obj.articulation is None:
            continue
        try:
            ranges = object_joint_ranges(bundle, oid)
        except Real2SimError as exc:
            log.warning("no joint sliders for '%s': %s", oid, exc)
            continue
        out += [JointControl(oid, j, _elem(oid, j.name)) for j in ranges]
    return out


def robot_joint_controls(bundle: Bundle) -> tuple[list[JointControl], str]:
    """(a slider per actuated robot joint, a note); no sliders (the note says why) when the robot cannot be read."""
    from real2sim.pipeline.articulated import robot_joint_ranges

    if bundle.manifest.robot is None:
        return [], "no robot in this bundle"
    try:
        ranges = robot_joint_ranges(bundle)
    except Real2SimError as exc:
        return [], f"no robot joint sliders: {exc}"
    return [JointControl("robot", j, _elem("robot", j.name), robot=True) for j in ranges], ""


def joint_values(bundle: Bundle, controls: list[JointControl]) -> list[float | None]:
    """The stored value (m or rad) of each control's joint: the object's joint position, or the robot's start joint
    (``robot.joint_positions``, else the robot's default pose; robot controls are in the robot's joint order).
    None where the object or robot is gone."""
    m = bundle.manifest
    robot_q = None
    if any(c.robot for c in controls) and m.robot is not None:
        from real2sim.pipeline.articulated import robot_start_joints

        try:
            robot_q = robot_start_joints(bundle)
        except Real2SimError:
            robot_q = None
    out, k = [], 0
    for c in controls:
        if c.robot:
            out.append(float(robot_q[k]) if robot_q is not None and k < len(robot_q) else None)
            k += 1
            continue
        obj = m.objects.get(c.owner)
        out.append(None if obj is None or obj.articulation is None
                   else float(obj.articulation.joint_positions.get(c.joint.name, 0.0)))
    return out


def mounted_camera_names(bundle: Bundle) -> dict[str, str]:
    """``{camera: link}`` of the robot's mounted cameras with intrinsics (the exports' robot cameras)."""
    r = bundle.manifest.robot
    if r is None:
        return {}
    from real2sim.robots.scene import robot_for_spec

    try:
        return {n: link for n, (link, _) in robot_for_spec(r, bundle.root).mounted_cameras().items()}
    except Real2SimError as exc:
        log.warning("robot-mounted cameras unknown: %s", exc)
        return {}


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



# -- scanned objects ----------------------------------------------------------------------------
def scan_panel(bundle: Bundle, oid: str | None) -> dict | None:
    """What the Objects tab shows next to an object that came from ``real2sim scan`` (``add-object --scan`` keeps
    the scan's report and pictures in ``objects/<id>/scan/``): ``{"markdown", "turntable", "frames", "report"}``
    (the pictures as paths, None when missing: the turntable of the scanned mesh and a few capture frames with their
    masks); None when the object was not scanned."""
    if not oid or oid not in bundle.manifest.objects:
        return None
    folder = bundle.object_dir(oid) / "scan"
    path = folder / "report.json"
    if not path.is_file():
        return None
    try:
        r = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return {"markdown": f"**Scanned object**, but its report `{bundle.rel(path)}` is unreadable ({exc.msg}); "
                            f"re-run `real2sim add-object ... --scan`", "turntable": None, "frames": None, "report": {}}
    used = r.get("frames_used") or []
    skipped = r.get("frames_skipped") or {}
    oc = r.get("one_click") or {}
    low = r.get("frames_low_confidence") or []
    lines = [f"**Scanned** ({r.get('method', '?').replace('_', ' ')}) from `{Path(str(r.get('capture', '?'))).name}`: "
             f"{len(used)} of {r.get('frames_total', '?')} frames used, {len(skipped)} skipped (no board)"
             + (f", {len(low)} left out for their masks ({', '.join(low)})" if low else "")]
    conf = r.get("mask_confidence") or {}
    if conf:
        vals = list(conf.values())
        src = (f"one click in frame {oc.get('frame')}" if r.get("mask_source") == "one-click"
               else f"{r.get('mask_source', 'given')} masks")
        worst = min(conf, key=conf.get)
        lines.append(f"Masks: {src}; confidence (agreement with the other views) mean {np.mean(vals):.3f}, "
                     f"min {min(vals):.3f} (frame {worst})")
    size = r.get("size_m")
    if size:
        mass = r.get("mass_kg")
        lines.append(f"Size {size[0] * 100:.1f} x {size[1] * 100:.1f} x {size[2] * 100:.1f} cm, {r.get('faces')} faces, "
                     f"{'watertight' if r.get('watertight') else 'NOT watertight'}"
                     + (f", mass {mass:.3f} kg" if mass else "") + f", seen {r.get('seen_fraction', 0):.0%} face-on")
    g = r.get("grade")
    if g:
        lines.append(f"Against the reference `{Path(str(g.get('reference', ''))).name}`: Chamfer {g['chamfer_mm']:.2f} mm, "
                     f"volume IoU {g['volume_iou']:.3f}")
    if r.get("warnings"):
        lines.append("Warnings:\n" + "\n".join(f"- {w}" for w in r["warnings"]))
    pics = {k: (str(folder / name) if (folder / name).is_file() else None)
            for k, name in (("turntable", "turntable.png"), ("frames", "frames.png"))}
    return {"markdown": "\n\n".join(lines), **pics, "report": r}


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


# -- the whole scene in 3D ---------------------------------------------------------------------
FRUSTUM_DEPTH_M = 0.25
"""How far the camera frustums reach in the 3D view."""


def scene_glb(bundle: Bundle, frame: int = 0, collision: bool = True) -> tuple[Path, str]:
    """Write ``reports/scene.glb``: every object's visual mesh at its pose (its texture when it has one, else its
    colour), its collision geometry in place (translucent red, with ``collision``), the robot posed at frame
    ``frame``'s joints (else its start joints) and each camera's frustum (translucent yellow, apex at the camera).
    World +Z shows up (glTF's +Y). Returns (path, one-line summary)."""
    import trimesh

    m = bundle.manifest
    scene = trimesh.Scene()
    for oid, obj in m.objects.items():
        T = obj.pose.matrix()
        try:
            vis = trimesh.load(bundle.path(obj.visual.mesh), force="mesh", process=False)
        except Exception as exc:  # noqa: BLE001 - one unreadable mesh must not hide the scene
            log.warning("3D view: %s: %s", obj.visual.mesh, exc)
            continue
        if not _textured(vis):
            vis.visual = trimesh.visual.ColorVisuals(vis, face_colors=(np.asarray(obj.visual.rgba) * 255).astype(np.uint8))
        scene.add_geometry(vis, node_name=f"{oid}", transform=T)
        if collision:
            for i, part in enumerate(_collision_parts(bundle, oid)):
                part = part.copy()
                part.visual = trimesh.visual.ColorVisuals(part, face_colors=[255, 60, 60, 90])
                scene.add_geometry(part, node_name=f"{oid}_collision_{i:03d}", transform=T)
    robot_note = _add_robot(scene, bundle, frame)
    for name, spec in m.cameras.items():
        scene.add_geometry(_frustum(spec.camera()), node_name=f"camera_{name}")
    scene.apply_transform(trimesh.transformations.rotation_matrix(-np.pi / 2, [1, 0, 0]))
    path = bundle.reports_dir() / "scene.glb"
    atomic_write_bytes(path, scene.export(file_type="glb"))
    return path, (f"{len(m.objects)} objects{' with collision geometry (red)' if collision else ''}, {robot_note}, "
                  f"{len(m.cameras)} camera frustum(s) (yellow, {FRUSTUM_DEPTH_M:g} m deep); written to "
                  f"`{bundle.rel(path)}`")


def _textured(mesh) -> bool:
    vis = getattr(mesh, "visual", None)
    return getattr(vis, "kind", None) == "texture" and getattr(getattr(vis, "material", None), "image", None) is not None \
        or getattr(getattr(vis, "material", None), "baseColorTexture", None) is not None


def _add_robot(scene, bundle: Bundle, frame: int) -> str:
    """Add the robot's links posed at the frame's (else the start) joints; returns what was drawn."""
    import trimesh

    r = bundle.manifest.robot
    if r is None:
        return "no robot"
    from real2sim.render.robot import load_robot_model, posed_mesh

    frames = bundle.manifest.capture.frames
    q = (frames[int(np.clip(frame, 0, len(frames) - 1))].joint_positions if frames else None) or r.joint_positions
    try:
        model = load_robot_model(r)
        v, f, _, _ = posed_mesh(model, q if q is not None and len(q) == len(model.joint_names) else model.default_q)
    except Real2SimError as exc:
        return f"robot not drawn ({exc})"
    mesh = trimesh.Trimesh(v, f, process=False)
    mesh.visual = trimesh.visual.ColorVisuals(mesh, face_colors=[70, 70, 80, 255])
    scene.add_geometry(mesh, node_name="robot")
    return f"robot {r.name} at {'the frame' if frames and frames[0].joint_positions else 'its start'} joints"


def _frustum(camera, depth: float = FRUSTUM_DEPTH_M):
    """A translucent pyramid: apex at the camera, base the image rectangle ``depth`` m ahead (world frame)."""
    import trimesh

    w, h = camera.width, camera.height
    corners = np.array([[0, 0], [w, 0], [w, h], [0, h]], float)
    rays = np.c_[(corners[:, 0] - camera.cx) / camera.fx, (corners[:, 1] - camera.cy) / camera.fy, np.ones(4)] * depth
    T = np.asarray(camera.T_world_camera, float)
    pts = np.vstack([[0, 0, 0], rays]) @ T[:3, :3].T + T[:3, 3]
    faces = np.array([[0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 1], [1, 3, 2], [1, 4, 3]])
    mesh = trimesh.Trimesh(pts, np.vstack([faces, faces[:, ::-1]]), process=False)
    mesh.visual = trimesh.visual.ColorVisuals(mesh, face_colors=[255, 220, 0, 70])
    return mesh


# -- rollouts ------------------------------------------------------------------------------------
def rollout_videos(root: Path) -> list[str]:
    """Episode videos under the bundle's ``results/`` (``eval --videos``), bundle-relative, newest first."""
    res = Path(root) / "results"
    vids = sorted(res.rglob("videos/*.mp4"), key=lambda p: p.stat().st_mtime, reverse=True) if res.is_dir() else []
    return [p.relative_to(root).as_posix() for p in vids]


def playable_video(bundle: Bundle, rel: str) -> Path:
    """A browser-playable copy (WebM, VP9) of the episode video ``rel`` under ``reports/videos/`` (made once): the
    runner writes MPEG-4 part 2, which browsers do not play."""
    import cv2

    src = bundle.path(rel)
    if not src.is_file():
        raise Real2SimError(f"{rel}: no such video; record some with 'real2sim eval DIR --videos'")
    out = bundle.reports_dir() / "videos" / (src.stem + ".webm")
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    cap = cv2.VideoCapture(str(src))
    fps = cap.get(cv2.CAP_PROP_FPS) or 5
    frames = []
    while True:
        ok, img = cap.read()
        if not ok:
            break
        frames.append(img)
    cap.release()
    if not frames:
        raise Real2SimError(f"{rel}: no frames could be read from it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.webm")
    h, w = frames[0].shape[:2]
    vw = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"VP90"), float(fps), (w, h))
    if not vw.isOpened():
        raise Real2SimError(f"{rel}: this OpenCV cannot write WebM (VP9) for the browser; play the mp4 in a video player")
    for img in frames:
        vw.write(img)
    vw.release()
    tmp.replace(out)
    return out
