"""``real2sim scan``: an object mesh from photos (or RGB-D frames) of it standing on a ChArUco board.

Capture folder (``docs/scan.md``)::

    DIR/frames/*.png        RGB frames (or DIR itself holds them, or DIR is a video file)
    DIR/camera.json         intrinsics (the camera-file format of ``real2sim init``; its pose is not used)
    DIR/board.json          the printed board: {"squares": [cols, rows], "square": m, "marker": m, "dictionary": ...}
    DIR/masks/*.png         the object's mask per frame (same names; object 255), unless a prompt (--point) is given
    DEPTH_DIR/*.png         optional (--depth): uint16 depth per frame, millimetres, aligned with the RGB frames

Steps: camera pose per frame from the board (frames without a board are skipped and counted), exposure levelled on
the board's paper, masks, geometry (visual hull by carving, or TSDF fusion of masked depth with open3d), open3d
cleanup, xatlas UVs and multi-view texture (texture stage), CoACD collision (collision stage, in its subprocess),
mass from a density, and a report with numbers and pictures. This orchestration lives in the pipeline because it
uses several stage packages (capture, texture, collision, scan), which must not import each other.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.capture.undistort import pinhole, undistort_box, undistort_pixels
from real2sim.core.camera import Camera
from real2sim.core.errors import CalibrationError, CaptureError
from real2sim.core.imaging import image_files, read_mask, read_rgb, write_mask, write_rgb
from real2sim.scan.carve import ScanError, carve

log = logging.getLogger(__name__)

VIDEO_FRAMES = 36
"""A video is sampled to about this many frames."""


@dataclass
class ScanConfig:
    """Settings of :func:`scan_object`."""

    resolution: int = 128
    """Voxels along the object's longest side (visual hull)."""
    refine_top: bool = True
    """Lower the hull's top where photo consistency allows (flat tops seen only from above leave a roof)."""
    tolerance: int = 1
    """Carving keeps a voxel that is outside the mask in at most this many views (a bad mask does not cut)."""
    face_budget: int = 10000
    smooth_iterations: int = 5
    texture_size: int = 1024
    density: float = 1000.0
    """kg/m^3, for the mass (the hull of a mug is solid: give the effective density of the filled shape)."""
    collision: bool = True
    collision_threshold: float = 0.1
    """CoACD concavity threshold for the scan's pieces: 0.1 (coarse) measured on a scanned mug: 9 pieces, occupancy
    IoU 0.973 in 14 s; the collision stage's 0.05: 28 pieces, 0.980 in 35 s (2 busy cores). A scan is ~1 mm
    accurate: the finer pieces buy little."""
    min_views: int = 8
    """Fewer usable frames is an error."""
    warn_views: int = 16
    """Fewer usable frames gives a warning (the hull is loose where views are missing)."""
    warn_azimuth_gap_deg: float = 90.0
    """A larger gap between camera azimuths around the object gives a one-sided-capture warning."""
    warn_seen_fraction: float = 0.9
    tsdf_voxel_m: float = 0.0015
    tsdf_trunc_voxels: float = 4.0
    depth_scale: float | None = None
    """Depth PNG units per metre; None = millimetres (1000), checked against the board's distance."""
    max_depth_m: float = 1.5
    min_board_corners: int = 6
    seed: int = 0
    turntable_views: int = 8
    reference: str | None = None
    """A reference mesh (same world frame: board centre, +Z up) to grade against: Chamfer and volume IoU."""
    board: dict | None = None
    """Overrides DIR/board.json."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ScanFrame:
    name: str
    image: np.ndarray
    """``(h, w, 3) float32`` exposure-levelled RGB in [0, 1]."""
    camera: Camera
    mask: np.ndarray
    gain: float = 1.0
    depth: np.ndarray | None = None
    """``(h, w) float32`` metres (0 = none)."""


@dataclass
class ScanResult:
    out: Path
    report: dict
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# reading the capture
# ---------------------------------------------------------------------------------------------

def read_capture_frames(src: Path) -> tuple[list[str], list[np.ndarray], Path]:
    """Frame names, ``(h, w, 3) uint8`` frames and the capture folder (where camera.json / board.json are)."""
    from real2sim.capture.frames import VIDEO_SUFFIXES, count_frames, read_video

    src = Path(src)
    if not src.exists():
        raise CaptureError(f"{src}: does not exist; 'real2sim scan' takes a capture folder (frames/, camera.json, "
                           "board.json) or a video file next to them")
    if src.is_file() and src.suffix.lower() in VIDEO_SUFFIXES:
        n = count_frames(src)  # the container's count: only the kept frames are decoded
        if n is None:
            n = len(read_video(src).frames)
        frames = list(read_video(src, stride=max(1, n // VIDEO_FRAMES)).frames)
        return [f"{i:04d}" for i in range(len(frames))], frames, src.parent
    if not src.is_dir():
        raise CaptureError(f"{src}: not a folder or a video ({', '.join(VIDEO_SUFFIXES)})")
    folder = src / "frames" if (src / "frames").is_dir() else src
    files = image_files(folder)
    if not files:
        raise CaptureError(f"{folder}: no frames (PNG/JPEG); put the photos in {src / 'frames'}")
    return [p.stem for p in files], [read_rgb(p) for p in files], src


def read_board(capture: Path, override: dict | None):
    from real2sim.capture.table_board import CharucoSpec

    if override is not None:
        return CharucoSpec.coerce(override)
    path = capture / "board.json"
    if not path.is_file():
        raise CaptureError(f"{path}: no board description. Scanning needs a ChArUco board under the object for the "
                           "camera poses and the scale (structure from motion without a board needs pycolmap, which "
                           "is not installed here): write board.json as {\"squares\": [8, 6], \"square\": 0.03, "
                           "\"marker\": 0.022, \"dictionary\": \"DICT_5X5_100\"} or pass --board")
    try:
        return CharucoSpec.coerce(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc


def board_world(spec) -> np.ndarray:
    """``T_world_board``: scan world = board centre, +Z up (see real2sim.scan.synthetic.board_to_world)."""
    w, h = spec.squares[0] * spec.square, spec.squares[1] * spec.square
    T = np.diag([1.0, -1.0, -1.0, 1.0])
    T[:3, 3] = (-w / 2, h / 2, 0.0)
    return T


def board_poses(names, frames, camera: Camera, spec, min_corners: int) -> tuple[dict, dict]:
    """Per frame ``T_world_camera`` from the board; frames without a board go into the second dict with why."""
    from real2sim.capture.calibrate import extrinsics_from_charuco

    T_wb = board_world(spec)
    poses, skipped = {}, {}
    for name, img in zip(names, frames):
        try:
            res = extrinsics_from_charuco(img, camera, spec, T_wb, name=name, min_corners=min_corners)
        except CalibrationError as exc:
            skipped[name] = str(exc).split(";")[0]
            continue
        if res.rms_px > 2.0:
            skipped[name] = f"board corners reproject {res.rms_px:.2f} px RMS off"
            continue
        poses[name] = (res.T_world_camera, res)
    return poses, skipped


def board_gain(image: np.ndarray, camera: Camera, spec, mask: np.ndarray | None) -> float:
    """The brightness of the board's white paper in this frame (90th percentile of grey over the board, outside the
    object): frames are divided by it over the median, so auto-exposure changes do not reach the texture."""
    import cv2

    w, h = spec.squares[0] * spec.square, spec.squares[1] * spec.square
    quad = np.array([[-w / 2, -h / 2, 0], [w / 2, -h / 2, 0], [w / 2, h / 2, 0], [-w / 2, h / 2, 0]])
    uv = camera.project(quad)
    area = np.zeros(image.shape[:2], np.uint8)
    cv2.fillConvexPoly(area, np.rint(uv).astype(np.int32), 1)
    sel = area.astype(bool)
    if mask is not None:
        sel &= ~mask
    if sel.sum() < 100:
        return float("nan")
    return float(np.percentile(image[sel].mean(1), 90))


# ---------------------------------------------------------------------------------------------
# depth
# ---------------------------------------------------------------------------------------------

def read_depths(depth_dir: Path, names: list[str]) -> dict[str, np.ndarray]:
    import cv2

    depth_dir = Path(depth_dir)
    if not depth_dir.is_dir():
        raise CaptureError(f"{depth_dir}: not a folder; --depth takes a folder of uint16 depth PNGs named like the "
                           "frames")
    out = {}
    for name in names:
        p = depth_dir / f"{name}.png"
        if not p.is_file():
            raise CaptureError(f"{p}: missing; every frame needs its depth PNG (uint16, same name) with --depth")
        d = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
        if d is None or d.ndim != 2 or d.dtype != np.uint16:
            raise CaptureError(f"{p}: expected a single-channel 16-bit PNG of depth (millimetres), got "
                               f"{None if d is None else (d.dtype, d.shape)}")
        out[name] = d
    return out


def check_depth_units(frames: list[ScanFrame], raw: dict[str, np.ndarray], scale: float | None,
                      warnings: list[str]) -> float:
    """Units per metre of the depth PNGs: the board (z = 0) seen by each camera at a known distance says whether
    millimetres is right; a power-of-ten mismatch is corrected with a warning, anything else is an error."""
    ratios = []
    for f in frames:
        d = raw[f.name].astype(np.float64) / (scale or 1000.0)
        ys, xs = np.nonzero((d > 0) & ~f.mask)
        if len(ys) < 50:
            continue
        sel = np.random.default_rng(0).choice(len(ys), min(2000, len(ys)), replace=False)
        ys, xs = ys[sel], xs[sel]
        o = f.camera.T_world_camera[:3, 3]
        rays = np.stack([(xs - f.camera.cx) / f.camera.fx, (ys - f.camera.cy) / f.camera.fy, np.ones(len(xs))], 1)
        R = f.camera.T_world_camera[:3, :3]
        dw = rays @ R.T
        t = -o[2] / dw[:, 2]  # camera-z depth of the table plane z = 0 along each ray (rays have unit camera z)
        ok = t > 0
        if ok.sum() < 50:
            continue
        ratios.append(np.median(d[ys[ok], xs[ok]] / t[ok]))
    if not ratios:
        raise CaptureError("depth: no table pixels with depth to check the units against; are the depth PNGs "
                           "aligned with the RGB frames?")
    r = float(np.median(ratios))
    used = scale or 1000.0
    if abs(r - 1) < 0.05:
        return used
    k = np.log10(r)
    if abs(k - round(k)) < 0.03 and round(k) != 0:
        fixed = used * 10 ** round(k)
        warnings.append(f"depth PNGs are not in the stated unit ({used:g} per metre): the table measures {r:.3g}x "
                        f"its distance from the board pose; reading them as {fixed:g} units per metre (pass "
                        f"--depth-scale {fixed:g} to say so)")
        return fixed
    raise CaptureError(f"depth: the table measures {r:.3g}x its distance from the board pose (expected 1); the depth "
                       "is not aligned with the RGB camera or its unit is wrong (give --depth-scale UNITS_PER_METRE)")


def tsdf_fuse(frames: list[ScanFrame], cfg: ScanConfig, box: np.ndarray):
    """TSDF fusion (open3d) of the depth masked to the object inside ``box`` ((2, 3) world, m); returns the
    (vertices, faces) of its zero level, open where no depth saw the object (its bottom).

    open3d's ``ScalableTSDFVolume`` is the natural choice, but in the ``open3d-cpu`` 0.20.0 wheel it integrates
    nothing (an empty mesh even for a flat wall in front of the camera; measured, see docs/scan.md), so the
    ``UniformTSDFVolume`` over the object's box (from a coarse visual hull) is used: same fusion, bounded memory."""
    from real2sim.scan.o3d import open3d

    o3d = open3d()
    lo = np.asarray(box[0], float)
    length = float((box[1] - box[0]).max())
    res = int(np.ceil(length / cfg.tsdf_voxel_m))
    integ = o3d.pipelines.integration
    vol = integ.UniformTSDFVolume(length=length, resolution=res, sdf_trunc=cfg.tsdf_voxel_m * cfg.tsdf_trunc_voxels,
                                  color_type=integ.TSDFVolumeColorType.RGB8, origin=lo)
    for f in frames:
        cam = f.camera
        d = np.ascontiguousarray(np.where(f.mask, f.depth, 0.0).astype(np.float32))
        intr = o3d.camera.PinholeCameraIntrinsic(cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy)
        color = o3d.geometry.Image(np.ascontiguousarray((f.image * 255).astype(np.uint8)))
        rgbd = o3d.geometry.RGBDImage.create_from_color_and_depth(
            color, o3d.geometry.Image(d), depth_scale=1.0, depth_trunc=cfg.max_depth_m, convert_rgb_to_intensity=False)
        vol.integrate(rgbd, intr, np.linalg.inv(cam.T_world_camera))
    mesh = vol.extract_triangle_mesh()
    v, fc = np.asarray(mesh.vertices).copy(), np.asarray(mesh.triangles).copy()
    if not len(fc):
        raise ScanError("TSDF fusion gave no surface: the masked depth is empty (check the masks and the depth "
                        "alignment)")
    return v, fc


def cut_and_close(v, fc, table_z: float, margin: float, hole_size: float = 1.0):
    """The fused surface cut just above the table (depth near the contact mixes object and table) and closed by
    open3d's hole filling (the bottom becomes a cap on the cut)."""
    from real2sim.scan.cleanup import fill_holes, largest_component, to_o3d

    m = to_o3d(v, fc)
    m.remove_duplicated_vertices()
    m, _, _ = largest_component(m)
    m.remove_vertices_by_mask(np.asarray(m.vertices)[:, 2] < table_z + margin)
    m = fill_holes(m, hole_size)
    vv = np.asarray(m.vertices).copy()
    low = vv[:, 2] < table_z + margin * 1.5
    vv[low, 2] = table_z  # the cap lies on the table
    return vv, np.asarray(m.triangles).copy()


# ---------------------------------------------------------------------------------------------
# the scan
# ---------------------------------------------------------------------------------------------

def _region(spec) -> np.ndarray:
    w, h = spec.squares[0] * spec.square, spec.squares[1] * spec.square
    return np.array([[-w / 2, -h / 2, 0.0], [w / 2, h / 2, max(w, h)]])


def _load_masks(capture: Path, names, frames) -> tuple[list[np.ndarray], str]:
    mdir = capture / "masks"
    if not mdir.is_dir():
        raise CaptureError(f"{mdir}: no object masks. Carving needs the object's mask in every frame: give one "
                           f"click on the object in one photo ('real2sim scan {capture} --point X,Y [--frame NAME]'), "
                           "and the masks are made from it through the board's poses; or write masks/ yourself, "
                           "one PNG per frame with the frame's name, object 255, rest 0 (e.g. from SAM)")
    out = []
    for name, img in zip(names, frames):
        p = mdir / f"{name}.png"
        if not p.is_file():
            raise CaptureError(f"{p}: missing; masks/ must hold one mask per frame (same name as the frame)")
        out.append(read_mask(p, img.shape[:2]))
    return out, "given"


def _check_masks(frames: list[ScanFrame], warnings: list[str]) -> list[ScanFrame]:
    areas = np.array([f.mask.sum() for f in frames], float)
    med = float(np.median(areas)) if len(areas) else 0.0
    keep = []
    for f, a in zip(frames, areas):
        if a < 0.25 * med or a < 50:
            warnings.append(f"frame {f.name}: the mask lost the object ({int(a)} px against a median of {med:.0f}); "
                            "frame left out")
            continue
        m = f.mask
        if m[0].any() or m[-1].any() or m[:, 0].any() or m[:, -1].any():
            warnings.append(f"frame {f.name}: the object touches the image border; it is cut there - keep the "
                            "whole object in view")
        keep.append(f)
    return keep


def scan_object(src: Path, out: Path, config: ScanConfig | None = None, depth_dir: Path | None = None,
                prompt=None, mask_config=None) -> ScanResult:
    """Scan the object of capture ``src`` into the object folder ``out`` (visual.obj, texture.png, collision/,
    object.json, report.json, turntable.png, frames.png). Returns the report.

    ``prompt`` (:class:`real2sim.pipeline.scan_masks.ClickPrompt`: one click or box on one photo): the masks are made
    from it (:func:`real2sim.pipeline.scan_masks.one_click_masks`, settings ``mask_config``) instead of read from
    ``masks/``, written to ``out/masks/``, and frames whose mask disagrees with the other views are left out."""
    cfg = config or ScanConfig()
    from real2sim.scan.o3d import open3d

    open3d()  # before anything imports coacd (DESIGN.md)
    from real2sim.capture.camera_file import camera_from_dict

    t0 = time.perf_counter()
    timing = {}
    warnings: list[str] = []
    names, images, capture = read_capture_frames(Path(src))
    cam_path = capture / "camera.json"
    if not cam_path.is_file():
        raise CaptureError(f"{cam_path}: no camera intrinsics; write camera.json (width, height, fx, fy, cx, cy; "
                           "from 'real2sim calibrate --checkerboard' or the camera's factory calibration)")
    try:
        cam_dict = json.loads(cam_path.read_text())
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{cam_path}: invalid JSON ({exc.msg} at line {exc.lineno})") from exc
    if isinstance(cam_dict, dict) and not {"T_world_camera", "pose"} & set(cam_dict):
        cam_dict["T_world_camera"] = np.eye(4).tolist()  # each frame's pose comes from the board
    camera = camera_from_dict(cam_dict, cam_path)
    h, w = images[0].shape[:2]
    if (w, h) != (camera.width, camera.height):
        raise CaptureError(f"{cam_path}: the camera is {camera.width}x{camera.height} but the frames are {w}x{h}")
    spec = read_board(capture, cfg.board)
    poses, skipped = board_poses(names, images, camera, spec, cfg.min_board_corners)
    timing["poses_s"] = round(time.perf_counter() - t0, 3)
    for name, why in skipped.items():
        log.warning("frame %s skipped: %s", name, why)
    if skipped:
        warnings.append(f"{len(skipped)} of {len(names)} frames skipped: no usable board ({', '.join(sorted(skipped))})")
    if len(poses) < cfg.min_views:
        raise ScanError(f"{src}: only {len(poses)} of {len(names)} frames show the board (need >= {cfg.min_views}); "
                        "keep the board visible around the object in every photo, with even light and no glare")
    all_names = list(names)
    keep = [i for i, n in enumerate(names) if n in poses]
    names = [names[i] for i in keep]
    images = [images[i] for i in keep]
    cams = []
    for n in names:
        c = Camera(camera.width, camera.height, camera.K.copy(), poses[n][0], camera.distortion.copy())
        cams.append(c)
    if prompt is None:
        masks, mask_source = _load_masks(capture, names, images)
    else:
        masks, mask_source = [np.zeros(img.shape[:2], bool) for img in images], "one-click"
    undistorted = bool(np.any(camera.distortion))
    if undistorted:  # carving and texturing use pinhole projection: undistort frames and masks
        images, masks, cams = _undistort(images, masks, cams)
    one_click = None
    if prompt is not None:
        from real2sim.pipeline.scan_masks import one_click_masks

        if undistorted:
            prompt = _undistort_prompt(prompt, camera)
        masks, one_click = one_click_masks(names, images, cams, prompt, _region(spec), mask_config, all_names)
    frames = []
    for n, img, cam, m in zip(names, images, cams, masks):
        fimg = img.astype(np.float32) / 255.0
        frames.append(ScanFrame(n, fimg, cam, m, board_gain(fimg, cam, spec, m)))
    gains = np.array([f.gain for f in frames])
    ref_gain = float(np.nanmedian(gains))
    for f in frames:
        g = f.gain if np.isfinite(f.gain) and f.gain > 0 else ref_gain
        f.image = np.clip(f.image * (ref_gain / g), 0, 1)
        f.gain = round(float(g / ref_gain), 4)
    frames = _check_masks(frames, warnings)
    mask_conf = one_click["confidence"] if one_click else None
    if one_click:
        low = [f for f in frames if mask_conf.get(f.name, 1.0) < one_click["threshold"]]
        for f in low:
            warnings.append(f"frame {f.name}: its one-click mask disagrees with the other views (confidence "
                            f"{mask_conf[f.name]:.2f} < {one_click['threshold']:.2f}); frame left out")
        frames = [f for f in frames if f not in low]
    elif len(frames) >= 3:
        from real2sim.pipeline.scan_masks import mask_consistency

        try:
            mask_conf = mask_consistency([f.name for f in frames], [f.camera for f in frames],
                                         [f.mask for f in frames], _region(spec))
        except ScanError:
            mask_conf = None  # the masks agree on nothing: carving below says so
        for n, c in sorted((mask_conf or {}).items()):
            if c < (mask_config.min_confidence if mask_config else 0.85):
                warnings.append(f"frame {n}: its mask disagrees with the other views (confidence {c:.2f}); carving "
                                "forgives one such mask, check masks/ if there are more")
    if len(frames) < cfg.min_views:
        raise ScanError(f"{src}: only {len(frames)} frames with a usable mask (need >= {cfg.min_views})")
    timing["masks_s"] = round(time.perf_counter() - t0 - timing["poses_s"], 3)

    t1 = time.perf_counter()
    method = "visual_hull"
    depth_scale = None
    info_top = None
    if depth_dir is not None:
        raw = read_depths(Path(depth_dir), [f.name for f in frames])
        depth_scale = check_depth_units(frames, raw, cfg.depth_scale, warnings)
        for f in frames:
            f.depth = raw[f.name].astype(np.float32) / np.float32(depth_scale)
        coarse = carve([f.camera for f in frames], [f.mask for f in frames], _region(spec), 48, cfg.tolerance)
        box = coarse.bounds + np.array([[-1.0], [1.0]]) * 4 * cfg.tsdf_voxel_m
        tv, tf = tsdf_fuse(frames, cfg, box)
        v, fc = cut_and_close(tv, tf, 0.0, 2 * cfg.tsdf_voxel_m)
        method = "tsdf"
        voxel = cfg.tsdf_voxel_m
    else:
        res = carve([f.camera for f in frames], [f.mask for f in frames], _region(spec), cfg.resolution, cfg.tolerance,
                    images=[f.image for f in frames] if cfg.refine_top else None)
        v, fc, voxel = res.vertices, res.faces, res.voxel_m
        info_top = res.top
    timing["geometry_s"] = round(time.perf_counter() - t1, 3)

    from real2sim.scan.cleanup import CleanupConfig, clean_mesh

    t1 = time.perf_counter()
    v, fc, clean = clean_mesh(v, fc, CleanupConfig(cfg.face_budget, cfg.smooth_iterations))
    timing["cleanup_s"] = round(time.perf_counter() - t1, 3)
    out = Path(out)
    return _finish(out, v, fc, frames, clean, cfg, dict(
        method=method, voxel_m=voxel, mask_source=mask_source, skipped=skipped, names_total=len(names) + len(skipped),
        depth_scale=depth_scale, warnings=warnings, timing=timing, t0=t0, board=spec, capture=str(src),
        exposure_reference=ref_gain, top=info_top, mask_confidence=mask_conf, one_click=one_click,
        all_masks=dict(zip(names, masks)) if one_click else None))


def _undistort_prompt(prompt, camera: Camera):
    """The prompt's pixels moved into the undistorted photo."""
    from real2sim.pipeline.scan_masks import ClickPrompt

    point = None if prompt.point is None else tuple(float(x) for x in undistort_pixels([prompt.point], camera)[0])
    return ClickPrompt(point, None if prompt.box is None else undistort_box(prompt.box, camera), prompt.frame)


def _undistort(images, masks, cams):
    import cv2

    out_i, out_m, out_c = [], [], []
    for img, m, c in zip(images, masks, cams):
        K = np.asarray(c.K, np.float64)
        out_i.append(cv2.undistort(img, K, c.distortion))
        out_m.append(cv2.undistort(m.astype(np.uint8) * 255, K, c.distortion) > 127)
        out_c.append(pinhole(c))
    return out_i, out_m, out_c


def _finish(out: Path, v, fc, frames: list[ScanFrame], clean, cfg: ScanConfig, info: dict) -> ScanResult:
    import trimesh

    from real2sim.core.meshes import mass_properties
    from real2sim.core.views import View
    from real2sim.render.mesh import TexMesh, unwrap, write_texmesh
    from real2sim.scan import metrics
    from real2sim.texture.backproject import TextureConfig, backproject

    warnings = info["warnings"]
    timing = info["timing"]
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t1 = time.perf_counter()
    # the object's own frame: centred on its footprint, bottom at z = 0 (T_world_object says where it stood)
    T_world_object = np.eye(4)
    T_world_object[:2, 3] = (v[:, :2].min(0) + v[:, :2].max(0)) / 2
    v = v - T_world_object[:3, 3]
    tex_mesh = unwrap(TexMesh(v, fc), seed=cfg.seed)
    views = [View(f.camera, f.mask, f.image, f.name) for f in frames]
    tex = backproject(tex_mesh, T_world_object, views, TextureConfig(size=cfg.texture_size, seed=cfg.seed))
    write_rgb(tmp / "texture.png", np.clip(np.rint(tex.texture * 255), 0, 255).astype(np.uint8))
    write_texmesh(tmp / "visual.obj", tex_mesh)
    timing["texture_s"] = round(time.perf_counter() - t1, 3)

    tm = trimesh.Trimesh(v, fc, process=False)
    centre = (v.min(0) + v.max(0)) / 2
    vw = v + T_world_object[:3, 3]  # world-frame vertices for the checks against the views and the reference
    seen, counts = metrics.seen_fraction(vw, fc, [f.camera for f in frames], seed=cfg.seed, table_z=0.0)
    gap = metrics.azimuth_gap_deg([f.camera for f in frames], centre)
    if len(frames) < cfg.warn_views:
        warnings.append(f"only {len(frames)} views: the hull is loose between them (take >= {cfg.warn_views}, "
                        "24 recommended)")
    if gap > cfg.warn_azimuth_gap_deg:
        warnings.append(f"the views leave a {gap:.0f} deg gap around the object: it was seen from one side only; "
                        f"{seen:.0%} of its surface was seen face-on, the rest is the hull's guess")
    elif seen < cfg.warn_seen_fraction:
        warnings.append(f"only {seen:.0%} of the surface was seen face-on by some view; add views from lower or "
                        "higher angles")
    mass = com = inertia = None
    if clean.watertight:
        mass, com, inertia = mass_properties(tm, cfg.density)
    t1 = time.perf_counter()
    collision = None
    if cfg.collision:
        from real2sim.collision.decomposition import decompose, write_result
        from real2sim.collision.stage import default_cache_dir
        from real2sim.collision.types import CollisionConfig

        res = decompose(tm, CollisionConfig(threshold=cfg.collision_threshold, seed=cfg.seed),
                        cache_dir=default_cache_dir(), name="scan")
        (tmp / "collision").mkdir()
        write_result(res, tmp / "collision")
        collision = {"kind": res.kind, "hulls": len(res.hulls),
                     "occupancy_iou": res.report.get("occupancy_iou"), "seconds": res.report.get("seconds")}
    timing["collision_s"] = round(time.perf_counter() - t1, 3)

    grade = None
    if cfg.reference:
        ref = trimesh.load(cfg.reference, force="mesh")
        ch = metrics.chamfer(vw, fc, ref.vertices, ref.faces, seed=cfg.seed)
        grade = {"reference": str(cfg.reference), "chamfer_mm": round(ch["mean_m"] * 1e3, 3),
                 "chamfer_p95_mm": round(ch["p95_m"] * 1e3, 3),
                 "scan_to_ref_mm": round(ch["scan_to_ref_m"] * 1e3, 3),
                 "ref_to_scan_mm": round(ch["ref_to_scan_m"] * 1e3, 3),
                 "volume_iou": round(metrics.volume_iou(vw, fc, ref.vertices, ref.faces), 4)}
    pictures = _pictures(tmp, tex_mesh, tex.texture, frames, cfg, info.get("mask_confidence"))
    if info.get("all_masks"):  # the one-click masks, every frame's (also those left out), for a look or a re-run
        (tmp / "masks").mkdir()
        for n, m in info["all_masks"].items():
            write_mask(tmp / "masks" / f"{n}.png", m)
        pictures["masks"] = "masks/"
    timing["total_s"] = round(time.perf_counter() - info["t0"], 3)
    extent = (v.max(0) - v.min(0))
    report = {
        "capture": info["capture"], "method": info["method"], "voxel_mm": round(info["voxel_m"] * 1e3, 3),
        "frames_total": info["names_total"], "frames_used": [f.name for f in frames],
        "frames_skipped": info["skipped"], "mask_source": info["mask_source"],
        "mask_area_px": {f.name: int(f.mask.sum()) for f in frames},
        "mask_confidence": info.get("mask_confidence"),
        "mask_confidence_mean": (round(float(np.mean(list(info["mask_confidence"].values()))), 4)
                                 if info.get("mask_confidence") else None),
        "frames_low_confidence": (info["one_click"]["low_confidence"] if info.get("one_click") else None),
        "one_click": info.get("one_click"),
        "exposure_gain": {f.name: f.gain for f in frames},
        "exposure_reference": round(float(info["exposure_reference"]), 5),
        "depth_units_per_m": info["depth_scale"],
        "top_refinement": info.get("top"),
        "seen_fraction": round(seen, 4), "azimuth_gap_deg": round(gap, 1),
        "size_m": [round(float(x), 5) for x in extent], "faces": int(len(fc)),
        "cleanup": clean.to_dict(), "watertight": clean.watertight,
        "volume_m3": clean.volume_m3, "density_kg_m3": cfg.density,
        "mass_kg": None if mass is None else round(float(mass), 6),
        "texture": {"coverage": round(tex.coverage, 4), "size": cfg.texture_size, "method": tex.method},
        "collision": collision, "grade": grade, "T_world_object": np.round(T_world_object, 9).tolist(), "timing": timing, "pictures": pictures,
        "board": {"squares": list(info["board"].squares), "square": info["board"].square,
                  "marker": info["board"].marker, "dictionary": info["board"].dictionary},
        "config": cfg.to_dict(), "warnings": warnings,
    }
    obj = {"source": "scan", "mesh": "visual.obj", "texture": "texture.png", "density": cfg.density,
           "mass": report["mass_kg"], "size_m": report["size_m"],
           "collision": sorted(p.name for p in (tmp / "collision").glob("hull_*.obj")) if collision else [],
           "frame": "the object's own: centred on its footprint, +Z up, its bottom on z = 0",
           "T_world_object": np.round(T_world_object, 9).tolist(),
           "world": "T_world_object places it where it stood in the scan's world (board centre, +Z up)"}
    if com is not None:
        obj["com"] = [round(float(x), 6) for x in com]
    (tmp / "object.json").write_text(json.dumps(obj, indent=1))
    (tmp / "report.json").write_text(json.dumps(report, indent=1))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    for wmsg in warnings:
        log.warning("scan: %s", wmsg)
    return ScanResult(out, report, warnings)


def _pictures(folder: Path, mesh, texture, frames: list[ScanFrame], cfg: ScanConfig,
              confidence: dict | None = None) -> dict:
    """turntable.png (the textured result from ``turntable_views`` azimuths) and frames.png (frames with masks,
    labelled with their mask confidence when known)."""
    from real2sim.core.pictures import overlay, tiles
    from real2sim.scan.metrics import turntable_cameras
    from real2sim.texture.backproject import render_textured

    shots = []
    for cam in turntable_cameras(mesh.vertices, cfg.turntable_views):
        img, m = render_textured(cam, mesh, np.eye(4), texture)
        shots.append(np.where(m[..., None], img, 1.0))
    from real2sim.core.imaging import to_uint8

    write_rgb(folder / "turntable.png", tiles([to_uint8(np.clip(s, 0, 1)) for s in shots], cols=4, tile_width=240))
    pick = frames[:: max(1, len(frames) // 8)][:8]
    write_rgb(folder / "frames.png", tiles([overlay((f.image * 255).astype(np.uint8), f.mask) for f in pick],
                                           [f.name if not confidence or f.name not in confidence else
                                            f"{f.name}  mask {confidence[f.name]:.2f}" for f in pick],
                                           cols=4, tile_width=240))
    return {"turntable": "turntable.png", "frames": "frames.png"}


# ---------------------------------------------------------------------------------------------
# into a scene
# ---------------------------------------------------------------------------------------------

def read_scan_folder(obj_dir: Path) -> dict:
    """``object.json`` of a scanned object folder (what ``real2sim scan --out`` wrote), checked."""
    obj_dir = Path(obj_dir)
    path = obj_dir / "object.json"
    if not path.is_file():
        raise CaptureError(f"{obj_dir}: not a scanned object (no object.json); make one with 'real2sim scan CAPTURE "
                           f"--out {obj_dir}'")
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno}); re-run 'real2sim scan'") from exc
    for key in ("mesh", "texture"):
        if not isinstance(info.get(key), str) or not (obj_dir / info[key]).is_file():
            raise CaptureError(f"{path}: '{key}' names no file in {obj_dir} ({info.get(key)!r}); re-run 'real2sim scan'")
    return info


def add_scanned_object(bundle, oid: str, obj_dir: Path, position=None, quaternion_wxyz=(1.0, 0.0, 0.0, 0.0), **props):
    """Add a scanned object (mesh, texture, density or mass from its scan) to ``bundle``; the scan's report and
    pictures go along into ``objects/<id>/scan/``. ``props`` (density, mass, friction, fixed) override the scan's."""
    from real2sim.pipeline.recipe import add_object

    obj_dir = Path(obj_dir)
    info = read_scan_folder(obj_dir)
    if "mass" not in props and "density" not in props:
        if info.get("mass"):
            props["mass"] = float(info["mass"])
        elif info.get("density"):
            props["density"] = float(info["density"])
    spec = add_object(bundle, oid, obj_dir / info["mesh"], obj_dir / info["texture"], position, quaternion_wxyz,
                      **props)
    keep = bundle.object_dir(oid) / "scan"
    keep.mkdir(parents=True, exist_ok=True)
    for name in ("report.json", "object.json", "turntable.png", "frames.png"):
        if (obj_dir / name).is_file():
            shutil.copyfile(obj_dir / name, keep / name)
    spec.source = f"scan:{obj_dir.name}"
    hulls = sorted((obj_dir / "collision").glob("hull_*.obj")) if (obj_dir / "collision").is_dir() else []
    if hulls:  # the scan's CoACD pieces (the collision stage would make the same ones from the mesh)
        from real2sim.core.manifest import CollisionSpec

        dst = bundle.object_dir(oid) / "collision"
        dst.mkdir(parents=True, exist_ok=True)
        for h in hulls:
            shutil.copyfile(h, dst / h.name)
        spec.collision = CollisionSpec(kind="hulls", hulls=[bundle.rel(dst / h.name) for h in hulls])
    bundle.save()
    return spec


def heldout_psnr(obj_dir: Path, frames_dir: Path, masks_dir: Path, camera_json: Path, board: dict | None = None,
                 erode_px: int = 2) -> dict:
    """Texture check on frames the scan did not use: each held-out frame's pose from the board, its exposure levelled
    like the scan's frames, the scanned textured object rendered there and compared inside the object's mask (eroded
    by ``erode_px``: edges mix object and background). Returns ``{"psnr_db": mean, "per_view": {name: dB}}``."""
    from real2sim.core.imaging import erode, psnr
    from real2sim.render.mesh import load_texmesh
    from real2sim.texture.backproject import render_textured

    obj_dir = Path(obj_dir)
    rep = json.loads((obj_dir / "report.json").read_text())
    info = read_scan_folder(obj_dir)
    spec = read_board(Path(camera_json).parent, board or rep["board"])
    cam_dict = json.loads(Path(camera_json).read_text())
    cam_dict.setdefault("T_world_camera", np.eye(4).tolist())
    from real2sim.capture.camera_file import camera_from_dict

    camera = camera_from_dict(cam_dict, camera_json)
    mesh = load_texmesh(obj_dir / info["mesh"])
    texture = read_rgb(obj_dir / info["texture"]).astype(np.float32) / 255.0
    T = np.asarray(info["T_world_object"], float)
    files = image_files(Path(frames_dir))
    images = [read_rgb(p) for p in files]
    poses, skipped = board_poses([p.stem for p in files], images, camera, spec, 6)
    out = {}
    for p, img in zip(files, images):
        if p.stem not in poses:
            continue
        cam = Camera(camera.width, camera.height, camera.K.copy(), poses[p.stem][0], camera.distortion.copy())
        mask = read_mask(Path(masks_dir) / f"{p.stem}.png", img.shape[:2])
        fimg = img.astype(np.float32) / 255.0
        g = board_gain(fimg, cam, spec, mask)
        fimg = np.clip(fimg * rep["exposure_reference"] / g, 0, 1)
        render, cover = render_textured(cam, mesh, T, texture)
        sel = erode(mask & cover, erode_px)
        out[p.stem] = round(float(psnr(render, fimg, sel)), 3)
    if not out:
        raise ScanError(f"{frames_dir}: no held-out frame shows the board")
    return {"psnr_db": round(float(np.mean(list(out.values()))), 3), "per_view": out, "skipped": sorted(skipped)}
