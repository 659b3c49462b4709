"""Multi-view texture back-projection: one weighted splat pass, optional Adam refinement, fill in UV space.

For every texel of the UV layout (rasterised in UV space) its 3D point and normal are
known. Each view contributes the colour at the texel's projection where the texel is
visible: in front (depth test against the object's own rendered depth), inside the
object's (eroded) mask, facing the camera. Weights are ``cos(view angle) ** angle_power * (fx / depth) ** resolution_power``.
The splat is the weighted mean. Optionally the texture is then refined by Adam so that
re-renders (differentiable texture sampling, texture.interp) match the pixels, with a
total-variation regulariser, as in SIMPLER's texture matching. Texels that no view saw
are filled from their neighbours in UV space (push-pull), so seams do not sample black.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.errors import MaskError, TextureStageError, require
from real2sim.core.geometry import transform_points
from real2sim.core.imaging import erode
from real2sim.core.views import View
from real2sim.render.interp import interpolate, render_texture, sample_texture
from real2sim.render.mesh import TexMesh
from real2sim.render.raster import rasterize, rasterize_uv

log = logging.getLogger(__name__)


@dataclass
class TextureConfig:
    """Settings of texture back-projection."""

    size: int = 1024
    """Texture resolution (square, pixels)."""
    method: str = "auto"
    """'gather': every texel looks its colour up in each view (bilinear, best where the texture is not finer than
    the images); 'splat': every object pixel deposits its colour at its UV (cost follows the pixels; gaps between
    samples are filled); 'auto': gather while the layout has at most gather_max_points (texel, surface point)
    pairs (overlapping charts count once per layer), else splat."""
    gather_max_points: int = 300_000
    """See ``method``: above this the gather costs more than ~0.1 s per view on a CPU."""
    angle_power: float = 4.0
    """View weight = cos(angle between normal and view ray) ** angle_power."""
    resolution_power: float = 2.0
    """... times (focal length / depth) ** resolution_power: views that see the surface sharper count more."""
    min_cos: float = 0.15
    """Texels seen more obliquely than this cosine are ignored in that view."""
    depth_tol_m: float = 0.003
    """A texel counts as visible when it is at most this far behind the rendered depth."""
    mask_erode_px: int = 1
    """Erode each object mask by this many pixels first (boundary pixels mix object and background)."""
    refine_iters: int = 0
    """Adam iterations of the gradient refinement after the splat (0 = splat only)."""
    lr: float = 0.01
    """Adam learning rate (texture values in [0, 1])."""
    tv_weight: float = 1e-4
    """Weight of the total-variation regulariser in the refinement."""
    fill: bool = True
    """Fill texels that no view saw (push-pull in UV space)."""
    seed: int = 0
    """Seed of torch (refinement) for determinism."""
    backend: str = "auto"
    """Rasteriser backend ('auto', 'gl', 'numpy')."""

    def __post_init__(self):
        if not 8 <= int(self.size) <= 16384:
            raise TextureStageError(f"texture size {self.size}: must be 8..16384 pixels (e.g. 1024)")
        if self.refine_iters < 0 or self.mask_erode_px < 0:
            raise TextureStageError(f"refine_iters ({self.refine_iters}) and mask_erode_px ({self.mask_erode_px}) "
                                    "must be >= 0")


@dataclass
class TextureResult:
    """Outcome of :func:`backproject`."""

    texture: np.ndarray
    """``(size, size, 3) float32`` RGB in [0, 1], row 0 = v 1 (PNG orientation)."""
    seen: np.ndarray
    """``(size, size) bool`` texels that some view saw."""
    weight: np.ndarray
    """``(size, size) float32`` accumulated view weight."""
    coverage: float
    """Seen texels / texels inside the UV layout. 'gather' tests each texel (depth, mask, angle); 'splat' counts the
    texels of every face that had a sample (an upper bound where faces are only partly visible)."""
    texels_in_layout: int
    seconds_splat: float
    seconds_refine: float = 0.0
    refine_loss: list[float] = field(default_factory=list)
    per_view_seconds: list[float] = field(default_factory=list)
    method: str = "gather"
    """'gather' (texels look up the views) or 'splat' (pixels deposit into the texture)."""


@dataclass
class UVTexels:
    """The texels of a UV layout: where each lies on the surface."""

    ys: np.ndarray
    xs: np.ndarray
    points: np.ndarray
    """``(n, 3)`` object-frame positions."""
    normals: np.ndarray
    """``(n, 3)`` object-frame unit face normals."""
    size: int
    face: np.ndarray | None = None
    """``(n,)`` face index of each texel point."""


def uv_texels(mesh: TexMesh, size: int, backend: str = "auto", max_layers: int = 16) -> UVTexels:
    """Every (texel, surface point) pair of the UV layout. Layouts where charts overlap (a cube whose six faces
    share one image) are peeled in layers, so a texel gets a point on every face that maps to it."""
    tri = np.asarray(mesh.vertices)[np.asarray(mesh.faces)]  # (F, 3, 3)
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-20)
    # Outward normals: flip when the winding is inward (negative signed volume about the centroid).
    c = tri.reshape(-1, 3).mean(0)
    if np.einsum("fd,fd->f", np.cross(tri[:, 1] - c, tri[:, 2] - c), tri[:, 0] - c).sum() < 0:
        n = -n
    remaining = np.arange(len(mesh.faces))
    parts = []
    for _ in range(max_layers):
        if not len(remaining):
            break
        fr = rasterize_uv(mesh.uv, np.asarray(mesh.face_uv)[remaining], size, backend)
        ys, xs = np.nonzero(fr.mask)
        if not len(ys):
            break
        fid = remaining[fr.face_id[ys, xs]]
        pts = np.einsum("nk,nkd->nd", fr.bary[ys, xs].astype(float), tri[fid])
        parts.append((ys, xs, pts, n[fid], fid))
        won = np.unique(fr.face_id[ys, xs])
        remaining = np.delete(remaining, won)
    if len(remaining):
        log.info("UV layout: %d faces cover no texel of their own at %dx%d (tiny or fully overlapped)", len(remaining), size, size)
    if not parts:
        z = np.zeros(0, int)
        return UVTexels(z, z, np.zeros((0, 3)), np.zeros((0, 3)), size, z)
    ys, xs, pts, nn, fid = (np.concatenate(x) for x in zip(*parts))
    return UVTexels(ys, xs, pts, nn, size, fid)


def _bilinear(img: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Bilinear lookup of ``img (h, w, c)`` at OpenCV pixel coordinates ``uv (n, 2)`` (edges clamped)."""
    img = np.asarray(img, np.float32)
    if img.ndim == 2:
        img = img[..., None]
    h, w = img.shape[:2]
    x = np.clip(uv[:, 0], 0, w - 1)
    y = np.clip(uv[:, 1], 0, h - 1)
    x0 = np.minimum(np.floor(x).astype(int), w - 2) if w > 1 else np.zeros(len(x), int)
    y0 = np.minimum(np.floor(y).astype(int), h - 2) if h > 1 else np.zeros(len(y), int)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    x1, y1 = np.minimum(x0 + 1, w - 1), np.minimum(y0 + 1, h - 1)
    return ((img[y0, x0] * (1 - fx) + img[y0, x1] * fx) * (1 - fy) + (img[y1, x0] * (1 - fx) + img[y1, x1] * fx) * fy)


def splat_view(tx: UVTexels, mesh: TexMesh, pose: np.ndarray, view: View, cfg: TextureConfig,
               world: tuple[np.ndarray, np.ndarray] | None = None):
    """One view's (texel point index, colour, weight) for the texel points it sees.

    Only points on faces that the view's own raster shows inside the mask are looked at (cost follows
    what the view sees, not the whole texture). ``world``: the texel points and normals already in world frame.
    """
    cam = view.camera
    vw = transform_points(pose, mesh.vertices)
    fr = rasterize(cam, vw, mesh.faces, cfg.backend)
    mask = erode(np.asarray(view.mask, bool), cfg.mask_erode_px) & fr.mask
    face_seen = np.zeros(len(mesh.faces), bool)
    face_seen[np.unique(fr.face_id[mask])] = True
    cand = np.flatnonzero(face_seen[tx.face]) if tx.face is not None else np.arange(len(tx.ys))
    if world is None:
        pw, nw = transform_points(pose, tx.points[cand]), tx.normals[cand] @ pose[:3, :3].T
    else:
        pw, nw = world[0][cand], world[1][cand]
    Tcw = np.linalg.inv(cam.T_world_camera)
    pc = pw @ Tcw[:3, :3].T + Tcw[:3, 3]
    z = pc[:, 2]
    ray = cam.T_world_camera[:3, 3] - pw
    cos = np.einsum("nd,nd->n", nw, ray) / np.maximum(np.sqrt(np.einsum("nd,nd->n", ray, ray)), 1e-12)
    ok = (cos > cfg.min_cos) & (z > cam.near)
    zs = np.where(ok, z, 1.0)
    uv = np.stack([pc[:, 0] / zs * cam.fx + cam.cx, pc[:, 1] / zs * cam.fy + cam.cy], 1)
    xi, yi = np.rint(uv[:, 0]).astype(int), np.rint(uv[:, 1]).astype(int)
    ok &= (xi >= 0) & (yi >= 0) & (xi < cam.width) & (yi < cam.height)
    idx = np.flatnonzero(ok)
    yi, xi = yi[idx], xi[idx]
    vis = mask[yi, xi] & (z[idx] <= fr.depth[yi, xi] + cfg.depth_tol_m)
    idx = idx[vis]
    col = _bilinear(view.image, uv[idx])
    # sharper views count more: cos^p times (pixels per metre on the surface)^q, relative to 1000 px/m
    w = cos[idx] ** cfg.angle_power * (cam.fx / z[idx] / 1000.0) ** cfg.resolution_power
    return cand[idx], col, w


def push_pull_fill(tex: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Fill unknown texels from known ones by a mip pyramid (push-pull); known texels are kept."""
    tex = np.asarray(tex, np.float32)
    if known.all() or not known.any():
        return tex
    levels = [(tex * known[..., None], known.astype(np.float32))]
    while min(levels[-1][1].shape) > 1:
        c, w = levels[-1]
        h, wd = c.shape[:2]
        ph, pw = h % 2, wd % 2
        if ph or pw:
            c = np.pad(c, ((0, ph), (0, pw), (0, 0)))
            w = np.pad(w, ((0, ph), (0, pw)))
        c2 = c.reshape(c.shape[0] // 2, 2, c.shape[1] // 2, 2, -1).sum((1, 3))
        w2 = w.reshape(w.shape[0] // 2, 2, w.shape[1] // 2, 2).sum((1, 3))
        levels.append((c2, w2))
    # pull: from coarse to fine, fill texels with no weight by the upsampled coarser mean
    c, w = levels[-1]
    mean = c / np.maximum(w[..., None], 1e-12)
    for c, w in reversed(levels[:-1]):
        up = np.repeat(np.repeat(mean, 2, 0), 2, 1)[:c.shape[0], :c.shape[1]]
        m = c / np.maximum(w[..., None], 1e-12)
        mean = np.where(w[..., None] > 0, m, up)
    return np.where(known[..., None], tex, mean).astype(np.float32)


def pixel_splat_view(mesh: TexMesh, pose: np.ndarray, view: View, cfg: TextureConfig, normals: np.ndarray):
    """Forward splat of one view: each masked object pixel deposits its colour bilinearly at its UV.
    Cost follows the pixels, not the texels. Returns (flat texel index, colour, weight, faces seen)."""
    cam, S = view.camera, cfg.size
    vw = transform_points(pose, mesh.vertices)
    fr = rasterize(cam, vw, mesh.faces, cfg.backend)
    m = erode(np.asarray(view.mask, bool), cfg.mask_erode_px) & fr.mask
    ys, xs = np.nonzero(m)
    fid = fr.face_id[ys, xs]
    bary = fr.bary[ys, xs].astype(np.float64)
    uv = np.einsum("nk,nkd->nd", bary, np.asarray(mesh.uv, float)[np.asarray(mesh.face_uv)[fid]])
    # view weight per pixel: cos of the face normal with the pixel's ray, resolution at its depth
    nw = normals[fid] @ np.asarray(pose)[:3, :3].T
    p = np.einsum("nk,nkd->nd", bary, vw[np.asarray(mesh.faces)[fid]])
    ray = cam.T_world_camera[:3, 3] - p
    cos = np.einsum("nd,nd->n", nw, ray) / np.maximum(np.linalg.norm(ray, axis=1), 1e-12)
    keep = cos > cfg.min_cos
    ys, xs, uv, cos, z = ys[keep], xs[keep], uv[keep], cos[keep], fr.depth[ys[keep], xs[keep]].astype(float)
    w0 = cos ** cfg.angle_power * (cam.fx / z / 1000.0) ** cfg.resolution_power
    col = np.asarray(view.image, np.float32)[ys, xs, :3]
    tx = np.clip(uv[:, 0] * S - 0.5, 0, S - 1)
    ty = np.clip((1 - uv[:, 1]) * S - 0.5, 0, S - 1)
    x0, y0 = np.minimum(np.floor(tx).astype(int), S - 2), np.minimum(np.floor(ty).astype(int), S - 2)
    fx, fy = tx - x0, ty - y0
    idx, cols, ws = [], [], []
    for dx, dy, wk in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)), (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
        idx.append((y0 + dy) * S + (x0 + dx))
        cols.append(col)
        ws.append(w0 * wk)
    return np.concatenate(idx), np.concatenate(cols), np.concatenate(ws), np.unique(fid[keep])


def _face_normals(mesh: TexMesh) -> np.ndarray:
    tri = np.asarray(mesh.vertices)[np.asarray(mesh.faces)]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-20)
    c = tri.reshape(-1, 3).mean(0)
    if np.einsum("fd,fd->f", np.cross(tri[:, 1] - c, tri[:, 2] - c), tri[:, 0] - c).sum() < 0:
        n = -n
    return n


def backproject(mesh: TexMesh, pose: np.ndarray, views: list[View], config: TextureConfig | None = None,
                texels: UVTexels | None = None) -> TextureResult:
    """Texture ``mesh`` (with UVs) at ``pose`` from ``views`` (each with ``image`` and ``mask``)."""
    cfg = config or TextureConfig()
    if not mesh.has_uv:
        raise ValueError("mesh has no UVs; call texture.mesh.ensure_uv first")
    if cfg.method not in ("auto", "gather", "splat"):
        raise ValueError(f"method must be 'auto', 'gather' or 'splat', got {cfg.method!r}")
    for v in views:
        if v.image is None:
            raise MaskError(f"view {v.name or '?'} has no image to take colours from")
    t0 = time.perf_counter()
    S = cfg.size
    layout_fr = rasterize_uv(mesh.uv, mesh.face_uv, S, cfg.backend)
    layout = layout_fr.mask.ravel()  # every texel some face maps to
    method = cfg.method
    if method == "auto":  # (texel, point) pairs ~ total UV area of the faces x texels
        t = np.asarray(mesh.uv, float)[np.asarray(mesh.face_uv)]
        a, c = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
        uv_area = 0.5 * np.abs(a[:, 0] * c[:, 1] - a[:, 1] * c[:, 0]).sum()
        method = "gather" if uv_area * S * S <= cfg.gather_max_points else "splat"
    acc = np.zeros((S * S, 3))
    wsum = np.zeros(S * S)
    per_view = []
    if method == "gather":
        tx = texels or uv_texels(mesh, S, cfg.backend)
        flat = tx.ys * S + tx.xs
        world = (transform_points(pose, tx.points), tx.normals @ np.asarray(pose)[:3, :3].T)
    else:
        normals = _face_normals(mesh)
        face_seen = np.zeros(len(mesh.faces), bool)
    for v in views:
        tv = time.perf_counter()
        if method == "gather":
            idx, col, w = splat_view(tx, mesh, pose, v, cfg, world)
            idx = flat[idx]
        else:
            idx, col, w, faces_seen = pixel_splat_view(mesh, pose, v, cfg, normals)
            face_seen[faces_seen] = True
        for ch in range(3):
            acc[:, ch] += np.bincount(idx, col[:, ch] * w, minlength=S * S)
        wsum += np.bincount(idx, w, minlength=S * S)
        per_view.append(round(time.perf_counter() - tv, 4))
    seen_flat = wsum > 1e-6 * (wsum.max() if wsum.size else 1.0)
    tex = np.zeros((S * S, 3), np.float32)
    tex[seen_flat] = acc[seen_flat] / wsum[seen_flat, None]
    tex = tex.reshape(S, S, 3)
    weight = wsum.reshape(S, S).astype(np.float32)
    seen = seen_flat.reshape(S, S)
    if cfg.fill:
        tex = push_pull_fill(tex, seen)
    if method == "splat":
        # where the texture is finer than the images, samples leave gaps between them (filled above): a texel
        # counts as seen when a sample landed on it or it lies on a face that some view saw
        if face_seen.any():
            seen = seen | rasterize_uv(mesh.uv, np.asarray(mesh.face_uv)[face_seen], S, cfg.backend).mask
    coverage = float((seen.ravel() & layout).sum() / max(layout.sum(), 1))
    t_splat = time.perf_counter() - t0
    res = TextureResult(np.clip(tex, 0, 1), seen, weight, coverage, int(layout.sum()),
                        round(t_splat, 4), per_view_seconds=per_view, method=method)
    if cfg.refine_iters > 0:
        refine(res, mesh, pose, views, cfg)
    return res


def refine(res: TextureResult, mesh: TexMesh, pose: np.ndarray, views: list[View], cfg: TextureConfig) -> TextureResult:
    """Adam refinement of ``res.texture`` in place: L2 photometric loss over masked object pixels + TV."""

    torch = require("torch", "texture", "torch")

    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    targets, uvs = [], []
    for v in views:
        fr = rasterize(v.camera, transform_points(pose, mesh.vertices), mesh.faces, cfg.backend)
        m = fr.mask & erode(np.asarray(v.mask, bool), cfg.mask_erode_px)
        ys, xs = np.nonzero(m)
        if not len(ys):
            continue
        uv = interpolate(torch.as_tensor(mesh.uv, dtype=torch.float32), mesh.face_uv, fr.face_id[ys, xs], fr.bary[ys, xs])
        uvs.append(uv.detach())
        targets.append(torch.as_tensor(np.asarray(v.image, np.float32)[ys, xs, :3]))
    if not uvs:
        return res
    uv_all, tgt = torch.cat(uvs), torch.cat(targets)
    tex = torch.tensor(res.texture.transpose(2, 0, 1).copy(), requires_grad=True)
    opt = torch.optim.Adam([tex], lr=cfg.lr)
    losses = []
    for _ in range(cfg.refine_iters):
        opt.zero_grad()
        pred = sample_texture(tex, uv_all)
        loss = ((pred - tgt) ** 2).mean()
        tv = (tex[:, 1:, :] - tex[:, :-1, :]).abs().mean() + (tex[:, :, 1:] - tex[:, :, :-1]).abs().mean()
        (loss + cfg.tv_weight * tv).backward()
        opt.step()
        with torch.no_grad():
            tex.clamp_(0, 1)
        losses.append(float(loss.detach()))
    res.texture = tex.detach().numpy().transpose(1, 2, 0).copy()
    res.seconds_refine = round(time.perf_counter() - t0, 4)
    res.refine_loss = [round(x, 7) for x in losses[:: max(1, len(losses) // 10)]] + [round(losses[-1], 7)]
    return res


def render_textured(camera, mesh: TexMesh, pose: np.ndarray, texture: np.ndarray, backend: str = "auto"):
    """(``(h, w, 3) float32`` render of the textured mesh, ``(h, w) bool`` coverage) via the torch texture path."""

    torch = require("torch", "texture", "torch")

    fr = rasterize(camera, transform_points(pose, mesh.vertices), mesh.faces, backend)
    img = render_texture(fr, mesh.uv, mesh.face_uv, torch.as_tensor(np.asarray(texture, np.float32).transpose(2, 0, 1).copy()))
    return img.numpy(), fr.mask
