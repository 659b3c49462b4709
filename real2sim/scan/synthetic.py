"""Synthetic scan captures: procedural objects (mug, can, box, banana) on a ChArUco board, rendered from many views
with sensor noise, exposure changes, mask errors and (optionally) RealSense-like depth.

Everything a real capture has is written in the layout ``real2sim scan`` reads (``docs/scan.md``), plus a
``truth/`` folder (the reference mesh in the board's world frame, the true camera poses, the exact masks, held-out views) that only a
synthetic capture has, so the reconstruction can be graded.

World frame of a scan: origin at the board centre, +Z up out of the board, +X along the board's columns, +Y against
its rows (the OpenCV board frame turned face up, see :func:`board_to_world`). The table (board surface) is ``z = 0``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import Real2SimError
from real2sim.core.geometry import look_at_opencv
from real2sim.core.imaging import write_mask, write_rgb

log = logging.getLogger(__name__)

SHAPES = ("mug", "can", "box", "banana")
"""Procedural objects :func:`make_object` builds (each ~10 cm, resting on z = 0)."""


@dataclass
class BoardSpec:
    """A ChArUco board as printed (same fields as ``capture.table_board.CharucoSpec``)."""

    squares: tuple[int, int] = (8, 6)
    """Squares (cols, rows)."""
    square: float = 0.03
    """Side of a square (m)."""
    marker: float = 0.022
    """Side of a marker (m)."""
    dictionary: str = "DICT_5X5_100"

    def to_dict(self) -> dict:
        return {"squares": list(self.squares), "square": self.square, "marker": self.marker,
                "dictionary": self.dictionary}

    @property
    def size(self) -> tuple[float, float]:
        """(width, height) of the board (m)."""
        return self.squares[0] * self.square, self.squares[1] * self.square


def board_to_world(board: BoardSpec) -> np.ndarray:
    """``(4, 4)`` ``T_world_board``: OpenCV's board frame (origin at the top-left outer corner, +X along columns, +Y
    down rows, +Z into the board) -> the scan world (origin at the board centre, +Z up)."""
    w, h = board.size
    T = np.diag([1.0, -1.0, -1.0, 1.0])
    T[:3, 3] = (-w / 2, h / 2, 0.0)
    return T


# ---------------------------------------------------------------------------------------------
# objects
# ---------------------------------------------------------------------------------------------

def _tube(centre: np.ndarray, radius: np.ndarray, up: np.ndarray, segments: int = 48):
    """Watertight tube along the polyline ``centre (n, 3)`` with radii ``(n,)``, capped at both ends."""
    import trimesh

    n = len(centre)
    t = np.gradient(centre, axis=0)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    a = np.cross(t, up)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = np.cross(a, t)
    ang = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring = np.cos(ang)[None, :, None] * a[:, None] + np.sin(ang)[None, :, None] * b[:, None]
    verts = (centre[:, None] + radius[:, None, None] * ring).reshape(-1, 3)
    faces = []
    for i in range(n - 1):
        for j in range(segments):
            p, q = i * segments + j, i * segments + (j + 1) % segments
            faces += [[p, p + segments, q], [q, p + segments, q + segments]]
    c0, c1 = len(verts), len(verts) + 1
    verts = np.vstack([verts, centre[0], centre[-1]])
    last = (n - 1) * segments
    for j in range(segments):
        faces.append([c0, j, (j + 1) % segments])
        faces.append([c1, last + (j + 1) % segments, last + j])
    m = trimesh.Trimesh(verts, np.asarray(faces), process=True)
    trimesh.repair.fix_normals(m)
    return m


def make_object(shape: str, sections: int = 64, filled: bool = False):
    """A procedural object (trimesh, metres, resting on z = 0, centred on the z axis), about 10 cm:

    - ``mug``: 8 cm across, 9.5 cm tall, 4 mm wall, open top, a handle (the visual hull fills its inside);
    - ``can``: 6.6 cm across, 10 cm tall; - ``box``: 9 x 6 x 5 cm, turned 20 deg;
    - ``banana``: a curved tapered tube 11 cm long (chord), lying on the table.

    ``filled``: the mug with its inside filled up to the rim (the most a visual hull can recover: no silhouette
    shows the inside of a cup); the other shapes have no such cavity and are returned as they are.
    """
    import trimesh

    if shape == "can":
        m = trimesh.creation.cylinder(radius=0.033, height=0.10, sections=sections)
        m.apply_translation([0, 0, 0.05])
    elif shape == "box":
        m = trimesh.creation.box(extents=(0.09, 0.06, 0.05))
        m.apply_translation([0, 0, 0.025])
        m.apply_transform(trimesh.transformations.rotation_matrix(np.radians(20), [0, 0, 1]))
    elif shape == "mug":
        outer = trimesh.creation.cylinder(radius=0.04, height=0.095, sections=sections)
        outer.apply_translation([0, 0, 0.0475])
        inner = trimesh.creation.cylinder(radius=0.036, height=0.095, sections=sections)
        inner.apply_translation([0, 0, 0.006 + 0.0475])
        s = np.linspace(-np.pi / 2 * 0.95, np.pi / 2 * 0.95, 40)
        handle_c = np.stack([0.038 + 0.026 * np.cos(s), np.zeros_like(s), 0.05 + 0.03 * np.sin(s)], 1)
        handle = _tube(handle_c, np.full(len(s), 0.0055), np.array([0, 1.0, 0]), 24)
        body = outer if filled else trimesh.boolean.difference([outer, inner], engine="manifold")
        m = trimesh.boolean.union([body, handle], engine="manifold")
    elif shape == "banana":
        s = np.linspace(-1, 1, 60)
        ang = s * np.radians(55)
        R = 0.07
        r = 0.017 * np.sqrt(np.clip(1 - s ** 2, 0, 1)) ** 0.6 + 0.004
        c = np.stack([R * np.sin(ang), R * (np.cos(ang) - np.cos(ang).mean()), r + 0.0], 1)
        m = _tube(c, r, np.array([0, 0, 1.0]), 40)
    else:
        raise Real2SimError(f"unknown synthetic object '{shape}'; one of {', '.join(SHAPES)}")
    m.apply_translation([-m.bounds[:, 0].mean(), -m.bounds[:, 1].mean(), -m.bounds[0, 2]])
    return m


def object_colour(shape: str, points: np.ndarray) -> np.ndarray:
    """``(n, 3) float`` albedo in [0, 1] of ``shape`` at object-frame ``points (n, 3)``: a base colour with stripes
    and a smooth pattern, so multi-view texturing has something to place (a solid texture: no UVs needed)."""
    base = {"mug": (0.85, 0.35, 0.25), "can": (0.25, 0.55, 0.85), "box": (0.85, 0.75, 0.35),
            "banana": (0.92, 0.82, 0.25)}.get(shape, (0.7, 0.7, 0.7))
    p = np.asarray(points, float)
    stripes = 0.5 + 0.5 * np.sin(p[:, 2] * 2 * np.pi / 0.02)
    ang = np.arctan2(p[:, 1], p[:, 0])
    pattern = 0.5 + 0.5 * np.sin(3 * ang + p[:, 2] * 60.0)
    col = np.asarray(base)[None] * (0.55 + 0.3 * stripes[:, None] + 0.15 * pattern[:, None])
    col[:, 2] += 0.15 * pattern
    return np.clip(col, 0, 1)


# ---------------------------------------------------------------------------------------------
# cameras
# ---------------------------------------------------------------------------------------------

def ring_cameras(n: int, width: int = 640, height: int = 480, f: float | None = None, distance: float = 0.36,
                 elevations_deg=(30.0, 50.0, 72.0), target=(0.0, 0.0, 0.035), seed: int = 0,
                 azimuth_range_deg: float = 360.0, overhead: int | None = None) -> list[Camera]:
    """``n`` cameras around the board centre (handheld-like: jittered distance, aim and roll): ``overhead`` (default
    2 when ``n`` >= 12) from nearly straight above (they bound flat tops, which a ring of oblique views leaves
    as a roof), the rest on rings at ``elevations_deg``. ``azimuth_range_deg`` < 360 puts the rings on one side (a
    capture that misses the back)."""
    rng = np.random.default_rng(seed)
    f = f or 600.0 * width / 640
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1.0]])
    n_over = (2 if n >= 12 else 0) if overhead is None else int(overhead)
    n_ring = n - n_over
    rings = len(elevations_deg)
    per = int(np.ceil(n_ring / rings)) if n_ring else 1
    cams = []
    for i in range(n):
        if i < n_ring:
            ring, k = i % rings, i // rings
            az = np.radians(azimuth_range_deg * (k + ring / rings) / per) + rng.normal(0, 0.05)
            el = np.radians(elevations_deg[ring] + rng.normal(0, 2.0))
        else:
            j = i - n_ring
            az = np.radians(azimuth_range_deg * (j + 0.25) / max(n_over, 1))
            el = np.radians(86.0 + rng.normal(0, 1.0))
        d = distance * (1 + rng.normal(0, 0.04))
        eye = np.array([d * np.cos(el) * np.cos(az), d * np.cos(el) * np.sin(az), d * np.sin(el)])
        aim = np.asarray(target, float) + rng.normal(0, 0.006, 3)
        cams.append(Camera(width, height, K.copy(), look_at_opencv(eye, aim), np.zeros(5), 0.02, 5.0))
    return cams


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------

@dataclass
class SyntheticScanConfig:
    """How a synthetic scan capture is made."""

    shape: str = "mug"
    views: int = 24
    width: int = 640
    height: int = 480
    heldout: int = 4
    """Extra views (other azimuths and elevations) written to ``truth/heldout`` for texture grading."""
    noise_std: float = 0.012
    """Gaussian sensor noise (fraction of full scale)."""
    blur_px: float = 0.6
    """Gaussian blur sigma (px): lens and demosaicing softness."""
    exposure: tuple[float, float] = (0.8, 1.15)
    """Per-frame exposure gain drawn from this range (auto-exposure changing as the camera moves)."""
    mask_jitter_px: int = 1
    """Object masks grown or shrunk by up to this many pixels per frame (a segmenter's boundary error)."""
    mask_bite_frames: int = 1
    """This many frames get a mask with a chunk of the object missing (a segmenter that loses part of it)."""
    depth: bool = False
    """Also write ``depth/*.png`` (uint16 millimetres), RealSense-like noise."""
    depth_scale: float = 1000.0
    """Depth PNG units per metre (1000 = mm; 10000 writes 0.1 mm units, a wrong-unit capture)."""
    depth_noise_m: float = 0.0008
    """Depth noise sigma at 0.4 m (m); grows with distance squared."""
    azimuth_range_deg: float = 360.0
    distance: float = 0.36
    board: BoardSpec = field(default_factory=BoardSpec)
    board_px_per_m: float = 6000.0
    """Resolution of the board's texture (px per metre)."""
    supersample: int = 2
    """Render at this multiple of the resolution and average down (anti-aliasing)."""
    light_dir: tuple[float, float, float] = (0.4, -0.3, 0.85)
    seed: int = 0


def _board_image(board: BoardSpec, px_per_m: float) -> np.ndarray:
    import cv2

    w, h = board.size
    W, H = int(round(w * px_per_m)), int(round(h * px_per_m))
    d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, board.dictionary))
    b = cv2.aruco.CharucoBoard(tuple(board.squares), board.square, board.marker, d)
    img = b.generateImage((W, H), marginSize=0, borderBits=1)
    return (img.astype(np.float32) / 255.0) * 0.88 + 0.06  # printed paper: not pure black/white


def _scene(obj, board: BoardSpec):
    """World vertices/faces of object + board + table, and the face index where the board / table start."""
    w, h = board.size
    m = BOARD_MARGIN_M
    bq = np.array([[-w / 2 - m, -h / 2 - m, 0], [w / 2 + m, -h / 2 - m, 0], [w / 2 + m, h / 2 + m, 0],
                   [-w / 2 - m, h / 2 + m, 0]])
    tq = np.array([[-1, -1, -0.0005], [1, -1, -0.0005], [1, 1, -0.0005], [-1, 1, -0.0005]])
    quad = np.array([[0, 1, 2], [0, 2, 3]])
    V = np.vstack([obj.vertices, bq, tq])
    nv = len(obj.vertices)
    F = np.vstack([obj.faces, quad + nv, quad + nv + 4])
    return V, F, len(obj.faces), len(obj.faces) + 2


BOARD_MARGIN_M = 0.015
"""White paper margin around the printed board (m)."""


def _bilinear_gray(img: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    h, w = img.shape
    x = np.clip(x, 0, w - 1.001)
    y = np.clip(y, 0, h - 1.001)
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = x - x0, y - y0
    return ((img[y0, x0] * (1 - fx) + img[y0, x0 + 1] * fx) * (1 - fy)
            + (img[y0 + 1, x0] * (1 - fx) + img[y0 + 1, x0 + 1] * fx) * fy)


def render_view(obj, shape: str, cam: Camera, cfg: SyntheticScanConfig, board_img: np.ndarray,
                vertex_normals: np.ndarray):
    """Render one view: ``(h, w, 3) float`` linear RGB (before exposure and noise), ``(h, w) bool`` object mask,
    ``(h, w) float`` depth (m, inf where nothing)."""
    import cv2

    from real2sim.render.raster import rasterize

    s = cfg.supersample
    big = Camera(cam.width * s, cam.height * s, cam.K.copy(), cam.T_world_camera, cam.distortion, cam.near, cam.far)
    big.K[:2] *= s
    big.K[0, 2] = (cam.K[0, 2] + 0.5) * s - 0.5
    big.K[1, 2] = (cam.K[1, 2] + 0.5) * s - 0.5
    V, F, board0, table0 = _scene(obj, cfg.board)
    fr = rasterize(big, V, F)
    fid, bary = fr.face_id, fr.bary.astype(np.float64)
    ys, xs = np.nonzero(fid >= 0)
    f = fid[ys, xs]
    p = np.einsum("nk,nkd->nd", bary[ys, xs], V[F[f]])
    img = np.zeros((big.height, big.width, 3), np.float32)
    light = np.asarray(cfg.light_dir, float) / np.linalg.norm(cfg.light_dir)
    is_obj = f < board0
    n = np.einsum("nk,nkd->nd", bary[ys, xs][is_obj], vertex_normals[F[f[is_obj]]])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    shade = 0.35 + 0.65 * np.clip(n @ light, 0, 1)
    img[ys[is_obj], xs[is_obj]] = object_colour(shape, p[is_obj]) * shade[:, None]
    is_board = (f >= board0) & (f < table0)
    w, h = cfg.board.size
    bx = (p[is_board, 0] + w / 2) * cfg.board_px_per_m - 0.5
    by = (h / 2 - p[is_board, 1]) * cfg.board_px_per_m - 0.5
    inside = (bx >= 0) & (by >= 0) & (bx <= board_img.shape[1] - 1) & (by <= board_img.shape[0] - 1)
    g = np.where(inside, _bilinear_gray(board_img, bx, by), 0.94) * (0.35 + 0.65 * light[2])
    img[ys[is_board], xs[is_board]] = g[:, None]
    is_table = f >= table0
    wood = 0.45 + 0.05 * np.sin(p[is_table, 0] * 300) + 0.03 * np.sin(p[is_table, 1] * 77)
    img[ys[is_table], xs[is_table]] = (wood[:, None] * np.array([0.8, 0.62, 0.45])) * (0.35 + 0.65 * light[2])
    img = cv2.resize(img, (cam.width, cam.height), interpolation=cv2.INTER_AREA)
    objmask = np.zeros(fid.shape, np.float32)
    objmask[ys[is_obj], xs[is_obj]] = 1
    mask = cv2.resize(objmask, (cam.width, cam.height), interpolation=cv2.INTER_AREA) >= 0.5
    depth_big = np.where(fid >= 0, fr.depth, np.inf).astype(np.float32)
    depth = depth_big[s // 2::s, s // 2::s][:cam.height, :cam.width]
    return img, mask, depth


def _noisy_mask(mask: np.ndarray, rng, jitter: int, bite: bool) -> np.ndarray:
    from real2sim.core.imaging import dilate, erode

    m = mask.copy()
    k = int(rng.integers(-jitter, jitter + 1)) if jitter else 0
    if k > 0:
        m = dilate(m, k)
    elif k < 0:
        m = erode(m, -k)
    if bite and m.any():
        ys, xs = np.nonzero(m)
        i = int(rng.integers(len(ys)))
        r = max(4, int(0.25 * np.sqrt(m.sum())))
        yy, xx = np.mgrid[:m.shape[0], :m.shape[1]]
        m &= (yy - ys[i]) ** 2 + (xx - xs[i]) ** 2 > r * r
    return m


def _depth_png(depth: np.ndarray, cfg: SyntheticScanConfig, rng) -> np.ndarray:
    """RealSense-like depth: noise growing with z^2, 1 % dropouts, quantised to PNG units (uint16)."""
    z = np.where(np.isfinite(depth), depth, 0.0).astype(np.float64)
    noise = rng.normal(0, 1, z.shape) * cfg.depth_noise_m * (z / 0.4) ** 2
    z = np.where(z > 0, z + noise, 0.0)
    z[rng.random(z.shape) < 0.01] = 0.0
    return np.clip(np.rint(z * cfg.depth_scale), 0, 65535).astype(np.uint16)


def _finish(img: np.ndarray, gain: float, cfg: SyntheticScanConfig, rng) -> np.ndarray:
    import cv2

    out = img * gain
    if cfg.blur_px > 0:
        out = cv2.GaussianBlur(out, (0, 0), cfg.blur_px)
    out = out + rng.normal(0, cfg.noise_std, out.shape).astype(np.float32)
    return np.clip(np.rint(out * 255), 0, 255).astype(np.uint8)


def write_synthetic_scan(out: Path, config: SyntheticScanConfig | None = None) -> dict:
    """Render a synthetic capture into ``out`` (see the module docstring). Returns a summary dict:
    ``{"shape", "views", "gains", "mask_bites", "reference", "camera"}``."""
    import cv2

    cfg = config or SyntheticScanConfig()
    rng = np.random.default_rng(cfg.seed)
    out = Path(out)
    for sub in ("frames", "masks", "truth/masks", "truth/heldout/frames", "truth/heldout/masks") + (("depth",) if cfg.depth else ()):
        (out / sub).mkdir(parents=True, exist_ok=True)
    obj = make_object(cfg.shape)
    vn = np.asarray(obj.vertex_normals, float)
    if cfg.shape in ("can", "box", "mug"):  # hard edges: smooth normals would shade the caps oddly, use face normals
        obj = obj.copy()
        obj.unmerge_vertices()
        vn = np.repeat(np.asarray(obj.face_normals), 3, axis=0)
    board_img = _board_image(cfg.board, cfg.board_px_per_m)
    cams = ring_cameras(cfg.views, cfg.width, cfg.height, distance=cfg.distance, seed=cfg.seed,
                        azimuth_range_deg=cfg.azimuth_range_deg)
    held = ring_cameras(cfg.heldout, cfg.width, cfg.height, distance=cfg.distance * 1.05, seed=cfg.seed + 101,
                        elevations_deg=(35.0, 55.0), azimuth_range_deg=360.0, overhead=0) if cfg.heldout else []
    for c in held:  # between the capture's azimuths
        R = _rot_z(np.radians(360.0 / max(cfg.views, 1) / 2))
        c.T_world_camera = R @ c.T_world_camera
    gains = rng.uniform(*cfg.exposure, len(cams)).round(4).tolist()
    bites = set(rng.choice(len(cams), size=min(cfg.mask_bite_frames, len(cams)), replace=False).tolist()) \
        if cfg.mask_bite_frames else set()
    poses = {}
    for i, (cam, gain) in enumerate(zip(cams, gains)):
        img, mask, depth = render_view(obj, cfg.shape, cam, cfg, board_img, vn)
        name = f"{i:03d}"
        write_rgb(out / "frames" / f"{name}.png", _finish(img, gain, cfg, rng))
        write_mask(out / "masks" / f"{name}.png", _noisy_mask(mask, rng, cfg.mask_jitter_px, i in bites))
        write_mask(out / "truth" / "masks" / f"{name}.png", mask)  # the exact object mask, for grading segmenters
        if cfg.depth:
            cv2.imwrite(str(out / "depth" / f"{name}.png"), _depth_png(depth, cfg, rng))
        poses[name] = cam.T_world_camera.round(9).tolist()
    held_poses = {}
    for i, cam in enumerate(held):
        img, mask, _ = render_view(obj, cfg.shape, cam, cfg, board_img, vn)
        name = f"{i:03d}"
        write_rgb(out / "truth" / "heldout" / "frames" / f"{name}.png", _finish(img, 1.0, cfg, rng))
        write_mask(out / "truth" / "heldout" / "masks" / f"{name}.png", mask)
        held_poses[name] = cam.T_world_camera.round(9).tolist()
    camera = {"width": cfg.width, "height": cfg.height, "fx": float(cams[0].fx), "fy": float(cams[0].fy),
              "cx": float(cams[0].cx), "cy": float(cams[0].cy)}
    (out / "camera.json").write_text(json.dumps(camera, indent=1))
    (out / "board.json").write_text(json.dumps(cfg.board.to_dict(), indent=1))
    make_object(cfg.shape).export(out / "truth" / "reference.obj")
    make_object(cfg.shape, filled=True).export(out / "truth" / "reference_filled.obj")
    (out / "truth" / "poses.json").write_text(json.dumps({"frames": poses, "heldout": held_poses}))
    summary = {"shape": cfg.shape, "views": len(cams), "gains": gains, "mask_bites": sorted(int(b) for b in bites),
               "reference": str(out / "truth" / "reference.obj"), "camera": camera}
    (out / "truth" / "summary.json").write_text(json.dumps(summary, indent=1))
    log.info("synthetic %s capture: %d views in %s", cfg.shape, len(cams), out)
    return summary


def _rot_z(a: float) -> np.ndarray:
    T = np.eye(4)
    T[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return T
