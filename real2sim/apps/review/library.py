"""Review-time editing of a scene bundle and a fast preview renderer (the library side of ``real2sim review``).

Everything the browser app (``apps/review.py``) changes goes through this module, so the
same edits are scriptable and unit-tested without a browser.

Edits
    :func:`set_object_pose`, :func:`set_camera_pose`, :func:`set_robot_base_pose` and :func:`undo`
    each take the bundle directory and the *version* of ``scene.json`` the caller last saw
    (:func:`manifest_version`, a content hash). If the file on disk is no longer that version
    (another browser tab or process saved in between) the edit is refused with
    :class:`ConcurrentEditError` instead of silently overwriting. The check and the write
    happen under an exclusive lock file (``.history/lock``), so two writers cannot interleave.
    An edit may name its ``writer`` (the app passes one token per browser tab): a writer whose
    own edit made the newer version is not refused (its slider events overtake their answers).
    Values are validated (finite, positions within :data:`MAX_POSITION_M` of the origin,
    angles within +-pi) before anything is written; ``scene.json`` is written atomically and
    the stages whose outputs depend on the edited value are marked stale.

Undo history
    Before each edit the previous ``scene.json`` is copied to ``.history/NNNNNN.json`` together
    with a one-line description (``{"edit": ..., "time": ..., "manifest": {...}}``).
    :func:`undo` restores the newest snapshot and removes it. Successive changes to the same
    field within :data:`COALESCE_S` seconds (a slider being dragged) share one snapshot, so
    one undo reverts the whole drag. At most :data:`MAX_HISTORY` snapshots are kept.

Preview
    :class:`PreviewRenderer` keeps one MuJoCo model of the MJCF export loaded and moves bodies
    (free-joint ``qpos``; ``body_pos``/``body_quat`` for fixed bodies) and cameras
    (``cam_pos``/``cam_quat``) to the manifest values instead of re-exporting; shadows,
    reflections and the skybox are off. :func:`compose_overlay` blends the real frame (or the
    background plate) with the render.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

import real2sim.texture.stage as ts
from real2sim.core import imaging
from real2sim.core.bundle import MANIFEST, Bundle, atomic_write_bytes, atomic_write_json
from real2sim.core.errors import BundleError, Real2SimError, UnknownNameError
from real2sim.core.geometry import euler_xyz_to_matrix, matrix_to_quat_wxyz
from real2sim.core.manifest import Manifest, Pose
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import downstream, mark_changed
from real2sim.engines import engine_for, get_exporter

log = logging.getLogger(__name__)

HISTORY_DIR = ".history"
MAX_POSITION_M = 5.0
MAX_ANGLE_RAD = math.pi + 1e-6
COALESCE_S = 2.0
MAX_HISTORY = 200

# Stages whose outputs depend on the edited quantity (names of stages that do not exist yet
# are harmless: Bundle.mark_stale only touches stages the bundle has run).
# what each kind of edit changes (artifacts of real2sim.core.stages.ARTIFACTS); the stages reading them go stale
POSE_CHANGES = ("object_poses",)
CAMERA_CHANGES = ("camera",)
ROBOT_CHANGES = ("robot",)


class EditError(Real2SimError):
    """An edit was refused (bad value, unknown name); the bundle is unchanged."""


class ConcurrentEditError(EditError):
    """``scene.json`` changed on disk since the caller loaded it; the edit was refused."""


@dataclass
class EditResult:
    version: str
    """The new :func:`manifest_version` of ``scene.json``."""
    message: str
    stale: list[str]
    """Stages now marked stale."""


# -- versions, locking, history ----------------------------------------------------------------
GENERATION = "generation"


def _generation(root: Path) -> int:
    try:
        return int((Path(root) / HISTORY_DIR / GENERATION).read_text())
    except (OSError, ValueError):
        return 0


def manifest_version(root: Path) -> str:
    """Hash of ``scene.json``'s content and of the count of review writes (changes with every save).

    The count makes an undo that restores earlier content a new version: an event a page sent before
    the undo, carrying the earlier version, is then refused instead of re-applying the undone edit."""
    path = Path(root) / MANIFEST
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; this directory is not a scene bundle") from None
    return hashlib.sha256(content + f"\0{_generation(root)}".encode()).hexdigest()[:16]


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    d = Path(root) / HISTORY_DIR
    d.mkdir(exist_ok=True)
    with open(d / "lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


LAST_WRITER = "last_writer.json"


def _check_version(root: Path, expected: str | None, writer: str | None = None) -> None:
    """Refuse when ``scene.json`` is not ``expected`` any more, unless ``writer`` itself made the newer version.

    (A page sends slider events faster than their answers come back: an event may still carry the
    version from before the page's own previous edit; that is not a conflict.)
    """
    if expected is None:
        return
    now = manifest_version(root)
    if now != expected and writer:
        try:
            last = json.loads((Path(root) / HISTORY_DIR / LAST_WRITER).read_text())
        except (OSError, json.JSONDecodeError):
            last = {}
        if last.get("writer") == writer and last.get("version") == now and last.get("kind") != "undo":
            return  # (events a page sent before its own undo are stale: they would redo what it undid)
    if now != expected:
        raise ConcurrentEditError(
            f"{Path(root) / MANIFEST} changed since this page loaded it (version {expected} -> {now}): another tab or "
            "process saved the scene. Nothing was written. Press 'Reload from disk' to see the latest scene, then redo the edit")


def _entries(root: Path) -> list[Path]:
    d = Path(root) / HISTORY_DIR
    return sorted(d.glob("[0-9]" * 6 + ".json")) if d.is_dir() else []


def history(root: Path) -> list[dict]:
    """Undo snapshots, oldest first: ``[{"file", "edit", "time", "key"}]``."""
    out = []
    for p in _entries(root):
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        out.append({"file": p.name, "edit": d.get("edit", ""), "time": d.get("time", 0.0), "key": d.get("key", "")})
    return out


def _snapshot(root: Path, description: str, key: str) -> None:
    """Save the current ``scene.json`` as the newest undo entry (unless a drag of ``key`` is in progress)."""
    entries = _entries(root)
    if entries and key:
        try:
            last = json.loads(entries[-1].read_text())
            if last.get("key") == key and time.time() - float(last.get("last_time", last.get("time", 0))) < COALESCE_S:
                last["last_time"] = time.time()
                atomic_write_json(entries[-1], last)
                return
        except (OSError, json.JSONDecodeError, ValueError):
            pass
    n = int(entries[-1].stem) + 1 if entries else 0
    data = json.loads((Path(root) / MANIFEST).read_text())
    now = time.time()
    atomic_write_json(Path(root) / HISTORY_DIR / f"{n:06d}.json",
                      {"edit": description, "key": key, "time": now, "last_time": now, "manifest": data})
    for old in _entries(root)[:-MAX_HISTORY]:
        old.unlink(missing_ok=True)


def _record_writer(root: Path, writer: str | None, kind: str = "edit") -> str:
    gen = Path(root) / HISTORY_DIR / GENERATION
    gen.parent.mkdir(exist_ok=True)
    atomic_write_bytes(gen, str(_generation(root) + 1).encode())
    version = manifest_version(root)
    atomic_write_json(Path(root) / HISTORY_DIR / LAST_WRITER, {"writer": writer or "", "version": version, "kind": kind})
    return version


def _mask_changes(entity: str) -> tuple[str, ...]:
    return ("robot_masks",) if entity == "robot" else ("object_masks",)


def _edit(root: Path, expected_version: str | None, description: str, key: str, changes: Sequence[str], change,
          writer: str | None = None) -> EditResult:
    """Load, apply ``change(bundle)``, snapshot, mark stale and save, all under the lock."""
    root = Path(root)
    with _locked(root):
        _check_version(root, expected_version, writer)
        bundle = Bundle.load(root)
        before_change = bundle.manifest.to_dict()
        change(bundle)  # raises before anything is written
        if bundle.manifest.to_dict() == before_change:
            # a repeated event with the same values (e.g. a number box's change + submit): no new undo step
            return EditResult(manifest_version(root), f"{description} (unchanged)", [])
        # the edited manifest must still be valid
        Manifest.from_dict(json.loads(json.dumps(bundle.manifest.to_dict())), str(root / MANIFEST))
        stale = mark_changed(bundle, *changes)
        _snapshot(root, description, key)
        bundle.save()
        log.info("review edit: %s (stale: %s)", description, ", ".join(stale) or "none")
        return EditResult(_record_writer(root, writer), description, stale)


def undo(root: Path, expected_version: str | None = None, writer: str | None = None) -> EditResult:
    """Restore the newest snapshot of ``scene.json`` and drop it from the history."""
    root = Path(root)
    with _locked(root):
        _check_version(root, expected_version, writer)
        entries = _entries(root)
        if not entries:
            raise EditError("nothing to undo: no earlier version of scene.json is stored in .history/")
        entry = json.loads(entries[-1].read_text())
        Manifest.from_dict(entry["manifest"], str(entries[-1]))  # refuse a corrupt snapshot
        atomic_write_json(root / MANIFEST, entry["manifest"])
        entries[-1].unlink()
        log.info("review undo: %s", entry.get("edit"))
        return EditResult(_record_writer(root, writer, "undo"), f"undid: {entry.get('edit', '')}", [])


# -- validation -------------------------------------------------------------------------------
def _finite(values, what: str, n: int) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise EditError(f"{what} must be {n} numbers, got {values!r}") from None
    if a.size != n:
        raise EditError(f"{what} must be {n} numbers, got {a.size}")
    if not np.isfinite(a).all():
        raise EditError(f"{what} must be finite numbers, got {a.tolist()}")
    return a


def validate_position(position, what: str = "position") -> np.ndarray:
    p = _finite(position, f"{what} (m)", 3)
    if np.abs(p).max() > MAX_POSITION_M:
        raise EditError(f"{what} {np.round(p, 4).tolist()} m is out of range: each coordinate must be within "
                        f"+-{MAX_POSITION_M:g} m of the world origin")
    return p


def validate_rpy(rpy, what: str = "roll/pitch/yaw") -> np.ndarray:
    a = _finite(rpy, f"{what} (rad)", 3)
    if np.abs(a).max() > MAX_ANGLE_RAD:
        raise EditError(f"{what} {np.round(a, 4).tolist()} rad is out of range: each angle must be within +-pi "
                        f"(+-180 deg)")
    return a


def rpy_to_quat_wxyz(rpy) -> list[float]:
    return [round(float(x), 9) for x in matrix_to_quat_wxyz(euler_xyz_to_matrix(*rpy))]


def matrix_to_rpy(R) -> np.ndarray:
    """``(3, 3)`` rotation -> extrinsic x-y-z angles (rad), the inverse of ``euler_xyz_to_matrix``."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(np.asarray(R, float)).as_euler("xyz")


def pose_to_xyz_rpy(pose: Pose) -> tuple[list[float], list[float]]:
    """A manifest pose as position (m) and roll/pitch/yaw (rad, extrinsic xyz)."""
    return [float(x) for x in pose.position], [float(x) for x in matrix_to_rpy(pose.matrix()[:3, :3])]


# -- edits ------------------------------------------------------------------------------------
def set_object_pose(root: Path, oid: str, position, rpy=None, quaternion_wxyz=None,
                    expected_version: str | None = None, writer: str | None = None) -> EditResult:
    """Move object ``oid`` to ``position`` (m) with orientation ``rpy`` (rad, extrinsic xyz) or a wxyz quaternion."""
    p = validate_position(position, f"object '{oid}' position")
    if quaternion_wxyz is not None:
        q = _finite(quaternion_wxyz, f"object '{oid}' quaternion_wxyz", 4)
        if not 0.5 < np.linalg.norm(q) < 2.0:
            raise EditError(f"object '{oid}' quaternion_wxyz {q.tolist()} is not close to unit length; order is w, x, y, z")
        q = [round(float(x), 9) for x in q / np.linalg.norm(q)]
    else:
        q = rpy_to_quat_wxyz(validate_rpy(rpy if rpy is not None else (0, 0, 0), f"object '{oid}' roll/pitch/yaw"))

    def change(bundle: Bundle):
        if oid not in bundle.manifest.objects:
            raise EditError(str(UnknownNameError("object", oid, bundle.manifest.objects)))
        bundle.manifest.objects[oid].pose = Pose([round(float(x), 9) for x in p], q)

    desc = f"object {oid}: position {np.round(p, 4).tolist()} m, quaternion_wxyz {np.round(q, 4).tolist()}"
    return _edit(root, expected_version, desc, f"object:{oid}", POSE_CHANGES, change, writer)


def camera_xyz_rpy(T_world_camera) -> tuple[list[float], list[float]]:
    """Camera position (m) and roll/pitch/yaw (rad, extrinsic xyz) of its OpenCV frame in the world."""
    T = np.asarray(T_world_camera, float)
    return [float(x) for x in T[:3, 3]], [float(x) for x in matrix_to_rpy(T[:3, :3])]


def set_camera_pose(root: Path, camera: str, position, rpy, expected_version: str | None = None,
                    writer: str | None = None) -> EditResult:
    """Set the extrinsics of ``camera``: its OpenCV frame (+Z forward, +Y down) at ``position`` with ``rpy`` (rad)."""
    p = validate_position(position, f"camera '{camera}' position")
    a = validate_rpy(rpy, f"camera '{camera}' roll/pitch/yaw")
    T = np.eye(4)
    T[:3, :3] = euler_xyz_to_matrix(*a)
    T[:3, 3] = p

    def change(bundle: Bundle):
        if camera not in bundle.manifest.cameras:
            raise EditError(str(UnknownNameError("camera", camera, bundle.manifest.cameras)))
        bundle.manifest.cameras[camera].T_world_camera = np.round(T, 9).tolist()

    desc = f"camera {camera}: position {np.round(p, 4).tolist()} m, rpy {np.round(a, 4).tolist()} rad"
    return _edit(root, expected_version, desc, f"camera:{camera}", CAMERA_CHANGES, change, writer)


def set_robot_base_pose(root: Path, position, rpy, expected_version: str | None = None,
                        writer: str | None = None) -> EditResult:
    """Set the robot base pose (m, rad)."""
    p = validate_position(position, "robot base position")
    q = rpy_to_quat_wxyz(validate_rpy(rpy, "robot base roll/pitch/yaw"))

    def change(bundle: Bundle):
        if bundle.manifest.robot is None:
            raise EditError(f"{bundle.root}: the bundle has no robot; add one with 'real2sim init DIR --frames ... --robot NAME'")
        bundle.manifest.robot.base_pose = Pose([round(float(x), 9) for x in p], q)

    desc = f"robot base: position {np.round(p, 4).tolist()} m, quaternion_wxyz {np.round(q, 4).tolist()}"
    return _edit(root, expected_version, desc, "robot:base", ROBOT_CHANGES, change, writer)


def set_mask(root: Path, frame_key: str, entity: str, mask: np.ndarray, expected_version: str | None = None,
             source: str = "review", writer: str | None = None) -> EditResult:
    """Store ``mask`` (``(h, w) bool``) as ``masks/<frame_key>/<entity>.png`` and record it in the manifest."""
    import io

    from PIL import Image

    m = np.asarray(mask).astype(bool)
    if m.ndim != 2 or not m.any():
        raise EditError(f"mask for '{entity}' in frame {frame_key} is empty or not 2-D; nothing was saved")
    if not frame_key.isalnum() or not entity.replace("_", "").replace("-", "").isalnum():
        raise EditError(f"frame key {frame_key!r} / entity {entity!r} must be alphanumeric ([A-Za-z0-9_-])")
    rel = f"masks/{frame_key}/{entity}.png"
    buf = io.BytesIO()
    Image.fromarray((m * 255).astype(np.uint8), mode="L").save(buf, format="PNG")

    def change(bundle: Bundle):
        atomic_write_bytes(bundle.path(rel), buf.getvalue())
        cap = bundle.manifest.capture
        cap.masks.setdefault(frame_key, {})[entity] = rel
        if entity in cap.mask_states.get(frame_key, {}):
            cap.mask_states[frame_key][entity] = "prompt"  # a mask a person accepted is taken as at the scene pose

    return _edit(root, expected_version, f"mask {frame_key}/{entity} ({source}, {int(m.sum())} px)", "",
                 _mask_changes(entity), change, writer)


def remove_mask(root: Path, frame_key: str, entity: str, expected_version: str | None = None,
                writer: str | None = None) -> EditResult:
    """Reject a mask: drop it from the manifest (the PNG stays on disk so that undo can bring it back)."""
    def change(bundle: Bundle):
        masks = bundle.manifest.capture.masks
        if entity not in masks.get(frame_key, {}):
            raise EditError(f"frame {frame_key} has no mask for '{entity}'")
        del masks[frame_key][entity]
        if not masks[frame_key]:
            del masks[frame_key]
        states = bundle.manifest.capture.mask_states
        states.get(frame_key, {}).pop(entity, None)
        if frame_key in states and not states[frame_key]:
            del states[frame_key]

    return _edit(root, expected_version, f"rejected mask {frame_key}/{entity}", "", _mask_changes(entity), change, writer)


# -- real images ------------------------------------------------------------------------------
def read_rgb(path: Path) -> np.ndarray:
    """``(h, w, 3) uint8`` RGB of an image file (decoded once per file version, then cached)."""
    st = Path(path).stat()
    return _read_rgb_cached(str(Path(path).resolve()), st.st_mtime_ns, st.st_size).copy()


@functools.lru_cache(maxsize=16)
def _read_rgb_cached(path: str, mtime_ns: int, size: int) -> np.ndarray:
    return imaging.read_rgb(path)


def real_image(bundle: Bundle, frame: int = 0) -> tuple[np.ndarray | None, str]:
    """The real picture to compare against: capture frame ``frame``, else the background plate.

    Returns ``(image or None, description)``; the description says which command makes what is missing.
    """
    frames = bundle.manifest.capture.frames
    if frames:
        i = int(np.clip(frame, 0, len(frames) - 1))
        p = bundle.path(frames[i].image)
        if p.is_file():
            return read_rgb(p), f"capture frame {i} ({frames[i].image})"
        return None, f"{frames[i].image} is missing; re-run 'real2sim init {bundle.root} --frames ... --force'"
    plate = bundle.manifest.capture.plate
    if plate and bundle.path(plate).is_file():
        return read_rgb(bundle.path(plate)), f"background plate ({plate}); no frames"
    return None, (f"no real frames: run 'real2sim init {bundle.root} --frames PATH' (and 'real2sim build' for the "
                  "background plate); showing the simulated render only")


# -- preview ----------------------------------------------------------------------------------
class PreviewRenderer:
    """The bundle's export loaded once in the preview engine (the registry's first with capability 'preview'),
    re-posed from the manifest for each preview.

    ``sync(manifest)`` moves objects, cameras and the robot to the manifest's values without re-exporting;
    ``render(camera)`` draws RGB, ``mask(camera, ids)`` the pixels of the given objects.
    """

    def __init__(self, bundle: Bundle, export_if_missing: bool = True):
        self.bundle = bundle
        self.engine = engine_for("preview")
        exporter = get_exporter(self.engine.name)
        main = exporter.main_file(bundle)
        self.exported_now = False
        if not main.is_file() or self._missing_names(main):
            if not export_if_missing:
                raise BundleError(f"{main}: no {self.engine.title} export; run 'real2sim export {bundle.root}'")
            log.info("preview: exporting %s for %s", self.engine.title, bundle.root)
            exporter.export(bundle)  # raises ExportError naming 'real2sim build' when not ready
            self.exported_now = True
        self.scene = exporter.load(exporter.out_dir(bundle))
        self.scene.set_fast_rendering(True)
        self._objects = set(self.scene.object_ids())

    def _missing_names(self, main: Path) -> bool:
        """An object or camera the export does not have yet (added since): export again."""
        text = main.read_text()
        m = self.bundle.manifest
        return any(f'"{name}"' not in text for name in [*m.objects, *m.cameras])

    def sync(self, manifest: Manifest) -> None:
        """Move objects, cameras and the robot to the manifest's values (no re-export)."""
        for oid, obj in manifest.objects.items():
            if oid in self._objects:
                self.scene.place_object(oid, obj.pose.matrix())
        for name, spec in manifest.cameras.items():
            try:
                self.scene.set_camera_pose(name, spec.camera().T_world_camera)
            except UnknownNameError:
                continue  # a camera added after the export
        self._sync_robot(manifest)

    def _sync_robot(self, manifest: Manifest) -> None:
        """The robot's base pose and joints from the manifest (a base edit shows before the next export)."""
        r = manifest.robot
        if r is None or "robot" not in self.scene.capabilities:
            return
        self.scene.set_robot_base_pose(r.base_pose.matrix())
        q = list(r.joint_positions or [])
        if len(q) == len(self.scene.robot_joint_names()):
            self.scene.set_robot_qpos(q)

    def render(self, camera: str) -> np.ndarray:
        """``(h, w, 3) uint8`` preview from the named bundle camera."""
        return self.scene.render(camera)[..., :3]

    def mask(self, camera: str, ids: Sequence[str]) -> np.ndarray:
        """``(h, w) bool``: pixels where any of the objects ``ids`` is visible."""
        return self.scene.foreground_mask(camera, [i for i in ids if i in self._objects], robot=False)

    def close(self) -> None:
        self.scene.close()


def difference_heatmap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(h, w, 3) uint8`` heat map of the per-pixel colour difference (black = equal, yellow = far apart)."""
    d = np.abs(a.astype(np.float32) - b.astype(np.float32)).mean(-1) / 255.0
    d = np.clip(d * 3.0, 0.0, 1.0)
    return (np.stack([np.clip(d * 2, 0, 1), np.clip(d * 2 - 1, 0, 1) * 0.9 + d * 0.1, np.zeros_like(d)], -1) * 255).astype(np.uint8)


def compose_overlay(render: np.ndarray, real: np.ndarray | None, blend: float = 0.5, mode: str = "blend",
                    objects_mask: np.ndarray | None = None) -> np.ndarray:
    """The picture shown in the review app.

    ``mode``: 'blend' (``blend`` 0 = real, 1 = simulation), 'composite' (real picture with the rendered
    objects pasted where ``objects_mask`` is set, then blended), 'difference' (heat map),
    'render' (simulation only). Without a real picture the render is returned.
    """
    if real is None or mode == "render":
        return render
    if real.shape != render.shape:
        from PIL import Image

        real = np.asarray(Image.fromarray(real).resize((render.shape[1], render.shape[0]), Image.BILINEAR))
    if mode == "difference":
        return difference_heatmap(real, render)
    sim = render
    if mode == "composite" and objects_mask is not None:
        sim = np.where(objects_mask[..., None], render, real)
    t = float(np.clip(blend, 0.0, 1.0))
    return (real.astype(np.float32) * (1 - t) + sim.astype(np.float32) * t).round().astype(np.uint8)


# -- collision view ---------------------------------------------------------------------------
def collision_glb(bundle: Bundle, oid: str) -> Path:
    """Write ``reports/collision_<oid>.glb``: the visual mesh (grey, translucent) and each hull or primitive in colour."""
    import trimesh

    obj = bundle.object(oid)
    scene = trimesh.Scene()
    vis = load_mesh(bundle.path(obj.visual.mesh)).copy()
    vis.visual = trimesh.visual.ColorVisuals(vis, face_colors=[180, 180, 180, 90])
    scene.add_geometry(vis, node_name=f"{oid}_visual")
    col = obj.collision
    rng = np.random.default_rng(0)
    parts = []
    if col.kind == "hulls":
        parts = [load_mesh(bundle.path(h)) for h in col.hulls]
    elif col.kind == "box":
        parts = [trimesh.creation.box(extents=2 * np.asarray(col.size), transform=col.pose.matrix())]
    elif col.kind == "cylinder":
        parts = [trimesh.creation.cylinder(radius=col.size[0], height=2 * col.size[1], transform=col.pose.matrix())]
    elif col.kind == "sphere":
        parts = [trimesh.creation.icosphere(radius=col.size[0]).apply_transform(col.pose.matrix())]
    for i, m in enumerate(parts):
        m = m.copy()
        c = np.r_[rng.integers(60, 255, 3), 200]
        m.visual = trimesh.visual.ColorVisuals(m, face_colors=c)
        scene.add_geometry(m, node_name=f"{oid}_collision_{i:03d}")
    # glTF is +Y up: rotate the scene so that world +Z shows up
    scene.apply_transform(trimesh.transformations.rotation_matrix(-np.pi / 2, [1, 0, 0]))
    path = bundle.reports_dir() / f"collision_{oid}.glb"
    atomic_write_bytes(path, scene.export(file_type="glb"))
    return path


def collision_stats(bundle: Bundle, oid: str) -> dict:
    """What ``reports/collision.json`` says about one object (empty when the stage has not run)."""
    p = bundle.root / "reports" / "collision.json"
    if not p.is_file():
        return {}
    try:
        return json.loads(p.read_text()).get("objects", {}).get(oid, {})
    except (OSError, json.JSONDecodeError):
        return {}


# -- overview ---------------------------------------------------------------------------------
def stage_table(bundle: Bundle) -> list[list[str]]:
    """Rows ``[stage, status, key metrics, message]`` for every stage the bundle has run."""
    rows = []
    for name, rec in bundle.manifest.stages.items():
        metrics = ", ".join(f"{k}={_short(v)}" for k, v in rec.metrics.items() if k != "seconds")
        rows.append([name, rec.status, metrics, rec.message])
    return rows


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
    "masks": "real2sim build DIR (segment stage)",
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


# -- re-running stages for one object -----------------------------------------------------------
RERUNNABLE = ("alignment", "texture")


def rerun_object_stage(root: Path, stage: str, oid: str, expected_version: str | None = None,
                       writer: str | None = None) -> EditResult:
    """Re-run alignment or texturing for one object (forced), undoable like an edit.

    The stage keeps the previous pose/texture when it fails (its report says why).
    """
    if stage not in RERUNNABLE:
        raise EditError(f"cannot re-run '{stage}' from the review page (can: {', '.join(RERUNNABLE)})")
    root = Path(root)
    with _locked(root):
        _check_version(root, expected_version, writer)
        bundle = Bundle.load(root)
        if oid not in bundle.manifest.objects:
            raise EditError(f"object '{oid}' is not in the bundle")
        if not any(oid in m for m in bundle.manifest.capture.masks.values()):
            raise EditError(f"object '{oid}' has no mask in any frame: draw one in the Masks tab "
                            f"or run 'real2sim masks {root} --entity {oid} --point X,Y'")

        _snapshot(root, f"re-run {stage} for {oid}", f"rerun-{stage}-{oid}")
        fn = ts.align_stage if stage == "alignment" else ts.texture_stage
        rec, _ = fn(bundle, [oid], force=True)
        report = rec.metrics
        log.info("review: re-ran %s for %s: %s", stage, oid, rec.message)
        return EditResult(_record_writer(root, writer), f"{stage} for {oid}: {rec.message or rec.status} {report}",
                          downstream(stage))
