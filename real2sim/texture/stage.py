"""Bundle stages 'alignment' and 'texture': read frames, cameras and masks from a bundle, write poses, UV meshes,
textures and reports back. A failed object keeps its previous pose / texture; the report says why, with numbers."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes, hash_bytes, hash_jsonable
from real2sim.core.errors import MaskError, MeshError, Real2SimError, UVError
from real2sim.core.gates import gate, passes
from real2sim.core.geometry import transform_points
from real2sim.core.imaging import iou, png_bytes, psnr, read_rgb_float, write_rgb
from real2sim.core.manifest import Pose
from real2sim.core.stages import files_hash, meshes_hash, run_stage
from real2sim.core.views import object_views
from real2sim.render.align import AlignConfig, AlignResult, align_pose
from real2sim.render.mesh import TexMesh, ensure_uv, load_texmesh, write_texmesh
from real2sim.render.overlay import overlay_panels
from real2sim.render.pose_search import Appearance
from real2sim.render.raster import rasterize
from real2sim.texture.backproject import TextureConfig, backproject, render_textured

log = logging.getLogger(__name__)
ALIGN_STAGE = "alignment"
TEXTURE_STAGE = "texture"


def _mask_files(bundle: Bundle, oids) -> list[str]:
    return sorted(p for m in bundle.manifest.capture.masks.values() for e, p in m.items() if e in oids)


def _targets(bundle: Bundle, object_ids, articulated: bool = False) -> list[str]:
    """Masked dynamic objects (or ``object_ids``); ``articulated``: also masked articulated objects, fixed or not
    (alignment places them as one mesh, their links posed at the stored joints; texturing leaves them: their
    colours come from their URDF)."""
    if object_ids:
        for oid in object_ids:
            bundle.object(oid)  # UnknownNameError with suggestions
        return list(object_ids)
    masked = {e for m in bundle.manifest.capture.masks.values() for e in m}
    return [oid for oid, o in bundle.manifest.objects.items() if oid in masked
            and ((not o.fixed and o.articulation is None) or (articulated and o.articulation is not None))]


def shaded_render(camera, mesh: TexMesh, pose: np.ndarray, texture: np.ndarray | None, rgba) -> tuple[np.ndarray, np.ndarray]:
    """Render for reports: textured when there is a texture and UVs, else the flat colour shaded by view angle."""
    if texture is not None and mesh.has_uv:
        return render_textured(camera, mesh, pose, texture)

    v = transform_points(pose, mesh.vertices)
    fr = rasterize(camera, v, mesh.faces)
    tri = v[mesh.faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-20)
    d = tri.mean(1) - camera.T_world_camera[:3, 3]
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    shade = 0.35 + 0.65 * np.abs(np.einsum("fd,fd->f", n, d))
    img = np.zeros((camera.height, camera.width, 3), np.float32)
    ys, xs = np.nonzero(fr.mask)
    img[ys, xs] = np.asarray(rgba[:3], np.float32) * shade[fr.face_id[ys, xs], None]
    return img, fr.mask


def _object_texture(bundle: Bundle, oid: str) -> np.ndarray | None:
    t = bundle.object(oid).visual.texture
    return read_rgb_float(bundle.path(t)) if t and bundle.path(t).is_file() else None


# -- alignment -----------------------------------------------------------------------------------------------
def align_stage(bundle: Bundle, object_ids=None, config: AlignConfig | None = None, force: bool = False,
                accept_poor: bool = False):
    """Align every masked dynamic object (or ``object_ids``) to its masks. Returns (StageRecord, ran).

    Quality gate (:mod:`real2sim.core.gates`, ``alignment``): an object whose silhouette IoU misses the bar keeps
    its previous pose unless ``accept_poor``; the record is then 'poor'."""
    cfg = config or AlignConfig()
    oids = _targets(bundle, object_ids, articulated=True)
    m = bundle.manifest
    input_hash = hash_jsonable([
        meshes_hash(bundle, [m.objects[o].visual.mesh for o in oids]), files_hash(bundle, _mask_files(bundle, oids)),
        {k: dataclasses.asdict(c) for k, c in m.cameras.items()}, m.table_height, dataclasses.asdict(cfg), oids,
        [dataclasses.asdict(f) for f in m.capture.frames]])

    def work():
        report, outputs, failed, poor = {}, [], {}, {}
        for oid in oids:
            obj = bundle.object(oid)
            try:
                mesh = load_texmesh(bundle.path(obj.visual.mesh))
                views = object_views(bundle, oid)
                res = align_pose(mesh.vertices, mesh.faces, views, obj.pose.matrix(), m.table_height, cfg,
                                 _appearance(bundle, oid, mesh))
            except (MaskError, MeshError, Real2SimError) as exc:
                failed[oid] = str(exc)
                report[oid] = {"status": "failed", "error": str(exc), "pose_kept": True}
                log.warning("alignment of '%s' failed: %s (previous pose kept)", oid, exc)
                continue
            entry = _align_entry(res)
            applied = res.status == "aligned" or (accept_poor and res.status == "poor")
            if applied:
                obj.pose = Pose.from_matrix(res.pose)
            if res.status != "aligned":
                poor[oid] = (f"{res.message} (IoU {res.mean_iou:.3f}, contour distance {res.contour_px:.2f} px, "
                             f"residual {res.residual_px:.2f} px)")
                log.warning("alignment of '%s' is POOR: %s; %s", oid, poor[oid],
                            "applied (--accept-poor)" if applied else
                            "previous pose kept (the found pose is in the report)")
            entry["status"], entry["pose_kept"] = res.status, not applied
            pic = bundle.reports_dir() / f"{ALIGN_STAGE}_{oid}.png"
            ref = int(np.argmax([v.mask.sum() for v in views]))
            v = views[ref]
            tex = _object_texture(bundle, oid)
            img, sil = shaded_render(v.camera, mesh, res.pose, tex, obj.visual.rgba)
            write_rgb(pic, overlay_panels(v.image, img, v.mask, sil, title=(
                f"alignment of '{oid}' ({entry['status']}, frame {v.name}): silhouette IoU {res.mean_iou:.3f} "
                f"(aligned at {res.required_iou:.2f}), contour distance {res.contour_px:.2f} px")))
            entry["picture"], entry["picture_frame"] = bundle.rel(pic), v.name
            outputs.append(bundle.rel(pic))
            report[oid] = entry
        outputs.append(bundle.write_report(ALIGN_STAGE, {"objects": report, "failed": failed, "poor": poor,
                                                         "status_rule": _status_rule(cfg),
                                                         "config": dataclasses.asdict(cfg)}))
        ok = [r for r in report.values() if r.get("status") == "aligned"]
        metrics = {"objects": len(oids), "aligned": len(ok), "poor": sorted(poor), "failed": sorted(failed),
                   "unaligned_objects": len(oids) - len(ok),
                   "min_iou": min((r["mean_iou"] for r in report.values() if "mean_iou" in r), default=None),
                   "applied": not failed and (not poor or accept_poor)}
        msg = "; ".join(f"{k}: {v}" for k, v in sorted({**poor, **failed}.items()))
        return outputs, metrics, msg

    return run_stage(bundle, ALIGN_STAGE, input_hash, dataclasses.asdict(cfg), work, force, accept_poor=accept_poor)


def _align_entry(res: AlignResult) -> dict:
    p = Pose.from_matrix(res.pose)
    entry = {"pose": {"position": p.position, "quaternion_wxyz": p.quaternion_wxyz}, "iou_per_frame": res.ious,
             "mean_iou": round(res.mean_iou, 5), "required_iou": res.required_iou, "contour_px": res.contour_px,
             "residual_px": res.residual_px,
             "converged": res.converged, "message": res.message, "init": res.init, "init_iou": res.init_iou,
             "rounds": res.iterations, "seconds": res.seconds}
    if res.search:
        entry["search"] = res.search
    return entry


def _status_rule(cfg: AlignConfig) -> str:
    return (f"aligned: mean silhouette IoU >= {cfg.aligned_iou} (lowered for small masks to what a "
            f"{cfg.mask_tolerance_px} px boundary error allows, (A - tP)/(A + tP)) or two-way contour distance <= "
            f"{cfg.aligned_contour_px} px, and contour residual <= {cfg.max_residual_px} px; else poor (the "
            "previous pose is kept); failed: unusable input (empty mask, object behind the camera)")


def _appearance(bundle: Bundle, oid: str, mesh: TexMesh) -> Appearance | None:
    """The object's texture for colour scoring in the pose search (None without a texture or UVs)."""
    tex = _object_texture(bundle, oid)
    if tex is None or not mesh.has_uv:
        return None
    return Appearance(np.asarray(mesh.uv, float), np.asarray(mesh.face_uv), tex)


# -- texture -------------------------------------------------------------------------------------------------
def texture_object(bundle: Bundle, oid: str, cfg: TextureConfig, accept_poor: bool = False) -> tuple[dict, list[str]]:
    """Back-project one object's texture into the bundle. Raises on unusable input (bundle untouched).

    A texture whose re-render PSNR misses the ``texture`` quality gate is written only with ``accept_poor``;
    otherwise the entry says 'poor' and the bundle keeps the object's previous texture."""
    obj = bundle.object(oid)
    src = bundle.path(obj.visual.mesh)
    mesh0 = load_texmesh(src)
    mesh, unwrapped = ensure_uv(mesh0)
    views = object_views(bundle, oid)
    if not views:
        raise MaskError(f"object '{oid}' has no masks in any frame; make masks first")
    pose = obj.pose.matrix()
    res = backproject(mesh, pose, views, cfg)
    if res.coverage <= 0:
        raise MaskError(f"no texel of '{oid}' is visible in any masked frame (coverage 0); check the pose "
                        "(run 'real2sim align') and the masks")
    per_view = []
    for v in views:
        img, cov = render_textured(v.camera, mesh, pose, res.texture, cfg.backend)
        m = cov & v.mask
        per_view.append({"frame": v.name, "psnr_db": round(psnr(img, v.image, m), 3), "iou": round(iou(cov, v.mask), 5),
                         "pixels": int(m.sum())})
    psnr_db = round(float(np.mean([p["psnr_db"] for p in per_view])), 3)
    if not accept_poor and not passes(TEXTURE_STAGE, "min_psnr_db", psnr_db):
        log.warning("texture of '%s' is poor (re-render PSNR %.1f dB); previous texture kept", oid, psnr_db)
        return {"status": "poor", "psnr_db": psnr_db, "coverage": round(res.coverage, 5), "per_frame": per_view,
                "texture_kept": obj.visual.texture}, []
    out_dir = bundle.object_dir(oid)
    png = png_bytes(res.texture)
    # Content-addressed names: the previous texture stays on disk untouched, and the manifest (committed last,
    # atomically, by the stage runner) switches to the new files in one step.
    tex_path = out_dir / f"texture_bp_{hash_bytes(png)[:10]}.png"
    outputs = []
    atomic_write_bytes(tex_path, png)
    outputs.append(bundle.rel(tex_path))
    if unwrapped or src.suffix.lower() != ".obj":
        mesh_path = out_dir / "visual_uv.obj"
        write_texmesh(mesh_path, mesh, tex_path.name)
        obj.visual.mesh = bundle.rel(mesh_path)
        outputs.append(bundle.rel(mesh_path))
    obj.visual.texture = bundle.rel(tex_path)
    # report picture from the view that saw most of the object
    ref = int(np.argmax([p["pixels"] for p in per_view]))
    v = views[ref]
    img, cov = render_textured(v.camera, mesh, pose, res.texture, cfg.backend)
    pic = bundle.reports_dir() / f"{TEXTURE_STAGE}_{oid}.png"
    write_rgb(pic, overlay_panels(v.image, img, v.mask, cov, title=(
        f"texture of '{oid}' (frame {v.name}): re-render PSNR {psnr_db:.1f} dB (bar "
        f"{gate('texture', 'min_psnr_db').bar:g} dB), {100 * res.coverage:.0f}% of the surface seen")))
    outputs.append(bundle.rel(pic))
    entry = {"status": "textured", "texture": bundle.rel(tex_path), "mesh": obj.visual.mesh, "unwrapped": unwrapped,
             "coverage": round(res.coverage, 5), "texels_in_layout": res.texels_in_layout,
             "psnr_db": psnr_db, "per_frame": per_view,
             "splat_seconds": res.seconds_splat, "refine_seconds": res.seconds_refine, "picture": bundle.rel(pic)}
    if res.refine_loss:
        entry["refine_loss"] = res.refine_loss
    return entry, outputs


def texture_stage(bundle: Bundle, object_ids=None, config: TextureConfig | None = None, force: bool = False,
                  accept_poor: bool = False):
    """Back-project textures of every masked dynamic object (or ``object_ids``). Returns (StageRecord, ran).

    Quality gate (:mod:`real2sim.core.gates`, ``texture``): an object whose re-render PSNR misses the bar keeps
    its previous texture unless ``accept_poor``; the record is then 'poor'."""
    cfg = config or TextureConfig()
    oids = _targets(bundle, object_ids)
    m = bundle.manifest
    input_hash = hash_jsonable([
        meshes_hash(bundle, [m.objects[o].visual.mesh for o in oids]),
        files_hash(bundle, _mask_files(bundle, oids) + [f.image for f in m.capture.frames]),
        {o: dataclasses.asdict(m.objects[o].pose) for o in oids},
        {k: dataclasses.asdict(c) for k, c in m.cameras.items()}, dataclasses.asdict(cfg), oids])

    def work():
        report, outputs, failed = {}, [], {}
        for oid in oids:
            try:
                entry, outs = texture_object(bundle, oid, cfg, accept_poor)
            except (UVError, MaskError, MeshError, Real2SimError) as exc:
                failed[oid] = str(exc)
                report[oid] = {"status": "failed", "error": str(exc), "texture_kept": bundle.object(oid).visual.texture}
                log.warning("texture of '%s' failed: %s (previous texture kept)", oid, exc)
                continue
            report[oid] = entry
            outputs += outs
        outputs.append(bundle.write_report(TEXTURE_STAGE, {"objects": report, "failed": failed,
                                                           "config": dataclasses.asdict(cfg)}))
        ok = [r for r in report.values() if r.get("status") == "textured"]
        rated = [r for r in report.values() if "psnr_db" in r]
        kept = sorted(k for k, r in report.items() if r.get("status") == "poor")
        metrics = {"objects": len(oids), "textured": len(ok), "failed": sorted(failed), "failed_objects": len(failed),
                   "min_coverage": min((r["coverage"] for r in rated), default=None),
                   "min_psnr_db": min((r["psnr_db"] for r in rated), default=None),
                   "applied": not failed and not kept}
        notes = {**failed, **{k: f"poor ({report[k]['psnr_db']:.1f} dB), previous texture kept" for k in kept}}
        return outputs, metrics, "; ".join(f"{k}: {v}" for k, v in sorted(notes.items()))

    return run_stage(bundle, TEXTURE_STAGE, input_hash, dataclasses.asdict(cfg), work, force, accept_poor=accept_poor)
