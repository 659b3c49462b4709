"""Table plane in a bundle: from the objects resting on it (aligned with a free height) or a board lying on it.

The board detection, the estimate and the picture are in :mod:`real2sim.capture.table_board`; this module adds what needs the
texture stage's render-and-compare alignment (:func:`table_from_objects`) and the bundle stage
(:func:`table_stage`), both used by ``real2sim table``.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from real2sim.capture.camera_file import fit_plane
from real2sim.capture.table_board import (
    CharucoSpec,
    TableConfig,
    TableEstimate,
    _tilt,
    require_pose,
    table_from_board,
    table_picture,
)
from real2sim.core.bundle import hash_file, hash_jsonable
from real2sim.core.errors import CalibrationError, CaptureError, Real2SimError
from real2sim.core.gates import failing
from real2sim.core.imaging import read_rgb, write_rgb
from real2sim.core.meshes import load_mesh
from real2sim.core.stages import files_hash, run_stage
from real2sim.core.views import object_views
from real2sim.render.align import AlignConfig, align_pose
from real2sim.render.mesh import load_texmesh

log = logging.getLogger(__name__)

STAGE = "table"
METHODS = ("objects", "board")

# ---------------------------------------------------------------------------------------------
# objects resting on the table
# ---------------------------------------------------------------------------------------------

def _masked_objects(bundle) -> list[str]:
    masked = {e for m in bundle.manifest.capture.masks.values() for e in m}
    return [oid for oid, o in bundle.manifest.objects.items() if not o.fixed and oid in masked]


def _target_objects(bundle, objects) -> list[str]:
    if not objects:
        oids = _masked_objects(bundle)
        if not oids:
            raise CaptureError(f"{bundle.root}: no object resting on the table has masks; segment them first "
                               "('real2sim masks DIR --entity ID --point X,Y'), or use a board "
                               "('real2sim table DIR --board IMG')")
        return oids
    masked = {e for m in bundle.manifest.capture.masks.values() for e in m}
    for oid in objects:
        bundle.object(oid)  # UnknownNameError with suggestions
        if oid not in masked:
            raise CaptureError(f"{bundle.root}: object '{oid}' has no masks in scene.json capture.masks; segment it "
                               f"first ('real2sim masks DIR --entity {oid} --point X,Y')")
    return list(objects)


def object_contact(bundle, oid: str, config: TableConfig | None = None) -> dict:
    """Align ``oid`` to its masks with a free height and return where it touches the table.

    Keys: ``bottom`` (m, lowest world Z), ``contact`` ``(3,)`` (footprint centre at that Z), ``pose`` ``(4, 4)``,
    ``mean_iou``, ``residual_px``, ``converged``, ``message``.
    """

    cfg = config or TableConfig()
    mesh = load_texmesh(bundle.path(bundle.object(oid).visual.mesh))
    res = align_pose(mesh.vertices, mesh.faces, object_views(bundle, oid, with_images=False), None,
                     bundle.manifest.table_height, AlignConfig(init="search", dof="planar_z"))
    v = np.asarray(mesh.vertices, float) @ res.pose[:3, :3].T + res.pose[:3, 3]
    bottom = float(v[:, 2].min())
    foot = v[v[:, 2] <= bottom + cfg.contact_band_m]
    return {"bottom": bottom, "contact": np.array([foot[:, 0].mean(), foot[:, 1].mean(), bottom]), "pose": res.pose,
            "mean_iou": round(res.mean_iou, 4), "residual_px": float(res.residual_px), "converged": bool(res.converged),
            "message": res.message}


def _contact_or_failure(bundle, oid: str, cfg: TableConfig) -> dict:
    """:func:`object_contact`, or a not-converged entry saying why the object could not be aligned at all."""

    try:
        return object_contact(bundle, oid, cfg)
    except Real2SimError as exc:
        log.warning("table from objects: '%s' could not be aligned: %s", oid, exc)
        return {"bottom": None, "contact": None, "pose": None, "mean_iou": 0.0, "residual_px": None,
                "converged": False, "message": f"could not be aligned: {exc}"}


def _source_entry(c: dict, used: bool, start: float) -> dict:
    r = lambda v, k=6: None if v is None else round(float(v), k)  # noqa: E731
    return {"bottom_m": r(c["bottom"]), "contact": None if c["contact"] is None else [r(v) for v in c["contact"]],
            "mean_iou": c["mean_iou"], "residual_px": r(c["residual_px"], 4), "converged": c["converged"],
            "used": used, "message": c["message"], "search_start_height_m": r(start)}


def table_from_objects(bundle, objects: Sequence[str] | None = None, config: TableConfig | None = None) -> TableEstimate:
    """Table plane from the objects resting on it (each aligned to its masks with a free height).

    ``objects``: object ids (default: every non-fixed object with masks). The height is the median of the objects'
    bottoms (robust to one bad mask); with >= 3 objects a least-squares plane through their contacts gives the
    normal and tilt (``height`` stays the median: the level ``table_height``). The alignment's search starts on
    the bundle's current ``table_height``; from one view a small object's distance along its viewing ray is only
    weakly fixed by its size in the image, so another start can move a bottom by a few tenths of a mm. Raises
    :class:`~capture.errors.CaptureError` when no object has masks or none aligns.
    """
    cfg = config or TableConfig()
    oids = _target_objects(bundle, objects)
    for name in sorted({f.camera for f in bundle.manifest.capture.frames if f.camera in bundle.manifest.cameras}):
        require_pose(bundle.manifest.cameras[name].camera(), f"{bundle.root}: camera '{name}'")
    contacts = {oid: _contact_or_failure(bundle, oid, cfg) for oid in oids}
    used = [o for o in oids if contacts[o]["converged"] or not cfg.require_converged]
    left_out = [o for o in oids if o not in used]
    if not used:
        why = "; ".join(f"{o}: {contacts[o]['message']} (IoU {contacts[o]['mean_iou']:.3f})" for o in oids)
        raise CaptureError(f"{bundle.root}: no object aligned to its masks, so no table contact was found ({why}). "
                           "Check the masks ('real2sim masks'), the object meshes and the camera pose")
    pts = np.array([contacts[o]["contact"] for o in used])
    bottoms = pts[:, 2]
    height = float(np.median(bottoms))
    normal, centre = np.array([0.0, 0.0, 1.0]), np.array([pts[:, 0].mean(), pts[:, 1].mean(), height])
    warnings, plane_rms = [], None
    if len(used) >= 3:
        try:
            plane = fit_plane(pts)
            normal, plane_rms = plane.normal, plane.rms_m
            centre = np.array([centre[0], centre[1], plane.height_at(centre[0], centre[1])])
        except CalibrationError:
            warnings.append(f"the contacts of {', '.join(used)} lie on a line: no plane through them, tilt not measured "
                            "(place objects around the table)")
    tilt = _tilt(normal)
    spread = float(np.ptp(bottoms))
    if spread > cfg.max_spread_m:
        lo, hi = used[int(np.argmin(bottoms))], used[int(np.argmax(bottoms))]
        warnings.append(f"the objects' bottoms differ by {spread * 1e3:.1f} mm ({lo} {bottoms.min() * 1e3:+.1f} mm, "
                        f"{hi} {bottoms.max() * 1e3:+.1f} mm); on one flat table they agree to a few mm, so the camera "
                        "pose (or the intrinsics) is likely off: refine it ('real2sim calibrate DIR --points', "
                        "'real2sim refine-camera DIR') or check that every object rests on the table and its mask is "
                        "tight")
    if tilt > cfg.max_tilt_deg:
        warnings.append(f"the plane through the contacts is tilted {tilt:.1f} deg from world +Z: the camera pose is "
                        "likely rotated (the bundle assumes a level table)")
    if left_out:
        warnings.append(f"left out (alignment did not converge): {', '.join(left_out)}; fix their masks or meshes")
    for w in warnings:
        log.warning("table from objects: %s", w)
    sources = {o: _source_entry(contacts[o], o in used, bundle.manifest.table_height) for o in oids}
    return TableEstimate(height, normal, tilt, "objects", centre, pts, list(used),
                         {o: float(b - height) for o, b in zip(used, bottoms)}, spread,
                         float(np.mean([contacts[o]["residual_px"] for o in used])), plane_rms, sources, warnings)


# ---------------------------------------------------------------------------------------------
# bundle stage
# ---------------------------------------------------------------------------------------------

def _table_top(bundle, obj) -> float:

    m = load_mesh(bundle.path(obj.visual.mesh))
    T = obj.pose.matrix()
    return float((np.asarray(m.vertices) @ T[:3, :3].T + T[:3, 3])[:, 2].max())


def move_table_object(bundle, old: float, new: float, tolerance: float = 0.002) -> dict:
    """Move a fixed object ``table`` vertically so that its top follows ``table_height`` from ``old`` to ``new``.

    Only when its visual top (highest world vertex) lies on the old or the new plane (within ``tolerance`` m);
    otherwise it is left where it is and the note says why. Returns a note for the report.
    """
    obj = bundle.manifest.objects.get("table")
    if obj is None:
        return {"moved": False, "why": "no object 'table'"}
    if not obj.fixed:
        return {"moved": False, "why": "object 'table' is not fixed"}
    try:
        top = _table_top(bundle, obj)
    except Exception as exc:  # noqa: BLE001 - a mesh we cannot read is reported, the height is still written
        return {"moved": False, "why": f"its mesh could not be read ({exc})"}
    if min(abs(top - old), abs(top - new)) > tolerance:
        return {"moved": False, "top_m": round(top, 6),
                "why": f"its top is at {top * 1e3:+.1f} mm, on neither the old ({old * 1e3:+.1f} mm) nor the new "
                       f"table height: move it by hand (objects.table.pose.position) if it should be the table top"}
    dz = new - top
    obj.pose.position = [obj.pose.position[0], obj.pose.position[1], float(obj.pose.position[2] + dz)]
    return {"moved": True, "dz_m": round(dz, 6), "top_m": round(new, 6)}


def _board_image_for(board) -> Path:
    p = Path(board)
    if not p.is_file():
        raise CaptureError(f"{p}: no such board image; give the photo of the board lying on the table (--board IMG)")
    return p.resolve()


def table_stage(bundle, method: str = "objects", objects: Sequence[str] | None = None,
                board: str | Path | None = None, pattern: tuple[int, int] = (9, 6), square: float = 0.025,
                charuco=None, camera: str = "main", config: TableConfig | None = None, force: bool = False,
                accept_poor: bool = False):
    """Stage ``table``: estimate the table plane and write ``table_height``. Returns ``(record, ran)``.

    ``method="objects"`` uses :func:`table_from_objects` (``objects`` or every masked object); ``"board"`` uses
    :func:`table_from_board` on the image ``board`` seen by bundle camera ``camera``. Writes ``table_height``, moves a
    fixed object ``table`` with it when its top was on the plane (:func:`move_table_object`), and writes
    ``reports/table.json`` and ``reports/table.png``. Alignment, texture and export become stale. On an error the
    bundle keeps its table height, objects and earlier reports.

    Quality gate (:mod:`real2sim.core.gates`, ``table``): an estimate whose spread (objects) or corner RMS (board)
    misses the bar is reported but not applied unless ``accept_poor`` (the record is 'poor').
    """

    cfg = config or TableConfig()
    m = bundle.manifest
    if method not in METHODS:
        raise CaptureError(f"table stage: method must be one of {', '.join(METHODS)}, got {method!r}")
    spec = CharucoSpec.coerce(charuco)
    stage_cfg = {"method": method, "table": cfg.to_dict(), "camera": camera}
    if method == "board":
        if board is None:
            raise CaptureError("table stage: method 'board' needs the image of the board on the table (--board IMG)")
        board = _board_image_for(board)
        if camera not in m.cameras:
            raise CaptureError(f"{bundle.root}: no camera '{camera}' in scene.json; add one with "
                               "'real2sim init DIR --camera camera.json' or name another with --camera")
        stage_cfg.update(board=str(board), pattern=list(pattern), square=float(square),
                         charuco=None if spec is None else dataclasses.asdict(spec))
    else:
        oids = _target_objects(bundle, objects)
        stage_cfg["objects"] = oids

    def input_hash() -> str:
        if method == "board":
            inputs = [hash_file(board), dataclasses.asdict(m.cameras[camera])]
        else:
            rels = [m.objects[o].visual.mesh for o in oids]
            rels += sorted(p for fm in m.capture.masks.values() for e, p in fm.items() if e in oids)
            inputs = [files_hash(bundle, rels), {k: dataclasses.asdict(c) for k, c in m.cameras.items()},
                      [dataclasses.asdict(f) for f in m.capture.frames]]
        table = m.objects.get("table")
        return hash_jsonable([inputs, stage_cfg, m.table_height, None if table is None else dataclasses.asdict(table.pose)])

    def work():
        if method == "board":
            img = read_rgb(board)
            est = table_from_board(img, m.cameras[camera].camera(), pattern, square, spec, cfg, name=str(board))
            pic_img, pic_cam = img, m.cameras[camera].camera()
        else:
            est = table_from_objects(bundle, oids, cfg)
            frame = m.capture.frames[0]
            pic_img, pic_cam = read_rgb(bundle.path(frame.image)), m.cameras[frame.camera].camera()
        picture = table_picture(pic_img, pic_cam, est, cfg)
        old = float(m.table_height)
        pic = bundle.reports_dir() / f"{STAGE}.png"
        write_rgb(pic, picture)
        metrics = {"height_m": round(est.height, 6), "change_mm": round((est.height - old) * 1e3, 3),
                   "tilt_deg": round(est.tilt_deg, 4), "spread_mm": round(est.spread_m * 1e3, 3),
                   "sources": len(est.labels), "rms_px": None if est.rms_px is None else round(est.rms_px, 4),
                   "warnings": len(est.warnings)}
        apply = accept_poor or not failing(STAGE, metrics)
        table_note = (move_table_object(bundle, old, est.height) if apply else
                      {"moved": False, "why": "the estimate is poor and was not applied"})
        if apply:
            m.table_height = float(est.height)
        rep = {**est.to_dict(), "previous_height_m": round(old, 6), "change_m": round(est.height - old, 6),
               "table_object": table_note, "picture": bundle.rel(pic), "config": stage_cfg, "applied": apply}
        outputs = [bundle.write_report(STAGE, rep), bundle.rel(pic)]
        metrics["applied"] = apply
        msg = (f"table_height {old * 1e3:+.1f} -> {est.height * 1e3:+.1f} mm ({method}: {len(est.labels)} "
               f"{'corners' if method == 'board' else 'objects'}); tilt {est.tilt_deg:.2f} deg; spread "
               f"{est.spread_m * 1e3:.1f} mm")
        if est.warnings:
            msg += "; warning: " + " | ".join(est.warnings)
        return outputs, metrics, msg

    # the stage's inputs include the height it writes
    return run_stage(bundle, STAGE, input_hash(), stage_cfg, work, force, input_hash_after=input_hash,
                     accept_poor=accept_poor)
