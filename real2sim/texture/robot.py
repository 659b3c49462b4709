"""Robot appearance: per-link colours and UV textures of the robot, back-projected from real frames at recorded joints.

The robot (registry URDF, base pose from the bundle) is posed at each frame's joint positions
(``capture.frames[i].joint_positions``, else ``robot.joint_positions``, else the robot's default), its visual
meshes are rasterised together into the frame's camera (depth-tested, so links hide each other correctly) and
every pixel gets a link id, a face and barycentrics. Pixels away from link boundaries (eroded) and, when the bundle
has a ``robot`` mask for the frame, inside it (so objects in front of the robot do not leak in) are used.

- **Flat colour** of a link: the per-channel median of its pixels over all frames (``robot.appearance``,
  link -> rgba). Links seen in too few pixels keep their current colour.
- **Texture** of a link: each link's visual meshes (welded, UV-unwrapped with xatlas, in the link frame) get a
  texture into which every used pixel deposits its colour at its UV (bilinear splat, weighted by
  ``cos(view angle) ** 4 x (fx / depth) ** 2``, as the object texture back-projection). Texels on faces no frame
  saw get the link's flat colour; gaps between samples on seen faces are filled in UV space (push-pull). The size
  of each link's texture follows how many pixels the link covers. Written to ``robot/textures/`` (content-addressed
  names) and recorded in ``robot.textures`` (link -> {mesh, texture}); every exporter replaces the link's URDF
  visuals by that textured mesh.

**Measured, not assumed.** With frames of more than one robot pose, the last ``holdout_fraction`` of them (in
time) are held out: colours and textures fitted on the others are scored there, as the robot region of the
composite (plate + rendered robot) against the real frame (PSNR over the real robot mask united with the rendered
silhouette). The textures are kept only when they score at least as well as the flat colours (held-out frames, or
the fitted frames when there is only one pose); otherwise the flat colours stay and the report says why. Then
both are fitted on all frames. "Flat" here means what the exports draw without a back-projected texture: a link
whose visual meshes carry their own materials (``real2sim.robots.materials``: the mesh's textures or diffuse
colours) is drawn in them, the others in their flat colour (precedence: back-projected texture > the mesh's own
material > flat colour).

The fitted colours and textures are what the camera saw (lighting baked in, as SIMPLER's recolouring of the robot
in an image editor, here done from the frames); they are not albedo estimates.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes, hash_bytes, hash_jsonable
from real2sim.core.errors import Real2SimError
from real2sim.core.imaging import erode, png_bytes, psnr, read_mask, read_rgb_float, to_float, write_rgb
from real2sim.core.objio import obj_text
from real2sim.core.stages import files_hash, run_stage
from real2sim.core.views import frame_key
from real2sim.render.mesh import TexMesh, unwrap
from real2sim.render.overlay import overlay_panels, titled
from real2sim.render.raster import rasterize, rasterize_uv
from real2sim.render.robot import (
    RobotModel,
    link_id_image,
    load_robot_model,
    posed_mesh,
    render_appearance,
    render_links,
)
from real2sim.texture.backproject import _bilinear, push_pull_fill

log = logging.getLogger(__name__)
ROBOT_STAGE = "robot_appearance"
ROBOT_MASK_ENTITY = "robot"
ROBOT_TEXTURE_DIR = "robot/textures"


@dataclass
class RobotAppearanceConfig:
    """Settings of robot colour and texture fitting."""

    min_pixels: int = 40
    """A link needs at least this many (eroded) pixels over all frames to get a fitted colour and a texture."""
    erode_px: int = 2
    """Link regions are eroded by this many pixels (edges mix neighbouring links and background)."""
    max_frames: int = 20
    """At most this many frames are used (evenly spaced)."""
    backend: str = "auto"
    """Rasteriser backend ('auto', 'gl', 'numpy')."""
    textures: bool = True
    """Back-project a UV texture per link (False: flat colours only, and ``robot.textures`` is cleared)."""
    texture_max_size: int = 512
    """Largest texture of a link (square, pixels). Each link's size is the power of two (32 up to this) that gives
    about one texel per pixel of the frame that shows the link largest. With held-out frames, the cap itself is
    chosen among the powers of two up to this by the held-out score (finer textures also learn the fit's
    misregistration, which does not carry over to other poses)."""
    min_cos: float = 0.15
    """Pixels that see a face more obliquely than this cosine are not used for textures."""
    holdout_fraction: float = 0.25
    """With frames of more than one robot pose, this fraction of them (the last ones, in time; at least one) is held
    out: colours and textures fitted on the others are scored there before the final fit on all frames."""
    keep_worse_textures: bool = False
    """Keep textures that score below the flat colours (held-out frames, else the fitted ones). Default: such
    textures are not written and the report says so."""

    def __post_init__(self):
        if not 32 <= int(self.texture_max_size) <= 8192:
            raise Real2SimError(f"texture_max_size {self.texture_max_size}: must be 32..8192 pixels (e.g. 512)")
        if not 0.0 < float(self.holdout_fraction) < 1.0:
            raise Real2SimError(f"holdout_fraction {self.holdout_fraction}: must be between 0 and 1 (e.g. 0.25)")


def fit_link_colours(model: RobotModel, views: list, config: RobotAppearanceConfig | None = None) -> dict:
    """``views``: [(camera, image (h, w, 3) float, q, robot mask or None)]. Returns link -> {rgba, pixels, spread}."""
    from scipy.ndimage import binary_erosion

    cfg = config or RobotAppearanceConfig()
    samples: dict[str, list] = {}
    for cam, img, q, rmask in views:
        ids, names = link_id_image(model, cam, q)
        for k, name in enumerate(names):
            m = ids == k
            if cfg.erode_px:
                m = binary_erosion(m, iterations=cfg.erode_px)
            if rmask is not None:
                m &= rmask
            if m.any():
                samples.setdefault(name, []).append(np.asarray(img, np.float32)[m][:, :3])
    out = {}
    for name in sorted(model.links):
        px = np.concatenate(samples[name]) if name in samples else np.zeros((0, 3), np.float32)
        if len(px) < cfg.min_pixels:
            out[name] = {"pixels": int(len(px)), "rgba": None}
            continue
        med = np.median(px, 0)
        spread = np.median(np.abs(px - med), 0)  # MAD: how uniform the link looks
        out[name] = {"pixels": int(len(px)), "rgba": [round(float(c), 4) for c in med] + [1.0],
                     "mad": [round(float(c), 4) for c in spread]}
    return out


# -- textured robot: UV meshes per link, back-projection, rendering ------------------------------------------------
@dataclass
class RobotUV:
    """The robot's visual meshes with a UV layout per link (link frame), and a model that poses them."""

    model: RobotModel
    """``links`` are the UV meshes' (vertices, faces): rasterising it gives faces of :attr:`meshes`."""
    meshes: dict[str, TexMesh]
    source: RobotModel | None = None
    """The model the UV meshes were made from (its links' own mesh materials, drawn where no texture was
    back-projected)."""


def weld(vertices, faces, decimals: int = 9) -> tuple[np.ndarray, np.ndarray]:
    """Vertices at the same position merged (an STL is a triangle soup: unwrapping it would make one chart per
    triangle); degenerate faces dropped."""
    key = np.round(np.asarray(vertices, float), decimals)
    vw, inv = np.unique(key, axis=0, return_inverse=True)
    f = inv.ravel()[np.asarray(faces, np.int64)]
    keep = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    return vw, f[keep]


def _same_points(a: np.ndarray, b: np.ndarray, tol: float = 1e-6) -> bool:
    """Every point of ``a`` within ``tol`` of one of ``b`` and the other way round (duplicates allowed)."""
    from scipy.spatial import cKDTree

    if not len(a) or not len(b):
        return len(a) == len(b)
    return bool(cKDTree(b).query(a)[0].max() <= tol and cKDTree(a).query(b)[0].max() <= tol)


def robot_uv(model: RobotModel, meshes: dict[str, TexMesh] | None = None) -> RobotUV:
    """UV-unwrapped link meshes (``meshes``: link -> an existing UV mesh to reuse, e.g. the bundle's)."""
    out = {}
    for name, (v, f) in sorted(model.links.items()):
        vw, fw = weld(v, f)
        old = (meshes or {}).get(name)
        # reuse a stored layout only when it is this link's geometry (same welded vertices and face count)
        if old is not None and len(old.faces) == len(fw) and _same_points(np.asarray(old.vertices, float), vw):
            out[name] = old
        else:
            out[name] = unwrap(TexMesh(vw, fw))
    links = {n: (np.asarray(m.vertices, float), np.asarray(m.faces, np.int64)) for n, m in out.items() if n in model.links}
    return RobotUV(dataclasses.replace(model, links=links, materials={}), {n: out[n] for n in links}, model)


@dataclass
class _Frags:
    ids: np.ndarray
    """(h, w) index into ``names`` (-1: no robot)."""
    names: list
    local_face: np.ndarray
    """(h, w) face index in its link's mesh (-1: none)."""
    bary: np.ndarray
    depth: np.ndarray
    cos: np.ndarray
    """(h, w) |cos| between the face normal and the pixel's ray."""


def _fragments(ruv: RobotUV, camera, q, backend: str = "auto") -> _Frags:
    verts, faces, owner, names = posed_mesh(ruv.model, q)
    fr = rasterize(camera, verts, faces, backend)
    hit = fr.mask
    g = np.maximum(fr.face_id, 0)
    starts = np.cumsum([0] + [len(ruv.meshes[n].faces) for n in names[:-1]])
    ids = np.where(hit, owner[g], -1)
    local = np.where(hit, g - starts[np.maximum(ids, 0)], -1)
    tri = verts[faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-20)
    cos = np.zeros(hit.shape, np.float32)
    ys, xs = np.nonzero(hit)
    if len(ys):
        p = np.einsum("nk,nkd->nd", fr.bary[ys, xs].astype(float), tri[g[ys, xs]])
        ray = np.asarray(camera.T_world_camera, float)[:3, 3] - p
        cos[ys, xs] = np.abs(np.einsum("nd,nd->n", n[g[ys, xs]], ray)) / np.maximum(np.linalg.norm(ray, axis=1), 1e-12)
    return _Frags(ids, names, local, fr.bary, fr.depth, cos)


def _pixel_uv(mesh: TexMesh, local_face: np.ndarray, bary: np.ndarray) -> np.ndarray:
    return np.einsum("nk,nkd->nd", np.asarray(bary, float), np.asarray(mesh.uv, float)[np.asarray(mesh.face_uv)[local_face]])


@dataclass
class LinkTexture:
    """One link's back-projected texture."""

    texture: np.ndarray
    """``(S, S, 3) float32`` RGB in [0, 1], row 0 = v 1 (PNG orientation)."""
    seen: float
    """Fraction of the link's UV layout on faces that some frame saw (the rest has the flat colour)."""
    pixels: int


def _texture_size(pixels: int, mesh: TexMesh, max_size: int) -> int:
    """Power of two giving ~1 texel per pixel of the link's largest view (about half its surface is seen)."""
    t = np.asarray(mesh.uv, float)[np.asarray(mesh.face_uv)]
    a, c = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]
    fill = max(0.5 * float(np.abs(a[:, 0] * c[:, 1] - a[:, 1] * c[:, 0]).sum()), 0.05)
    side = np.sqrt(2.0 * max(pixels, 1) / fill)
    return int(np.clip(2 ** int(np.ceil(np.log2(side))), 32, max_size))


def backproject_links(ruv: RobotUV, views: list, colours: dict, config: RobotAppearanceConfig | None = None,
                      default=(0.7, 0.7, 0.7, 1.0), max_size: int | None = None) -> dict[str, LinkTexture]:
    """Per-link textures from ``views`` [(camera, image, q, robot mask or None)]; ``colours``: link -> rgba used where
    no frame saw the surface. Links with fewer than ``min_pixels`` used pixels get none. ``max_size``: the largest
    texture (default ``texture_max_size``)."""
    cfg = config or RobotAppearanceConfig()
    return splat_link_samples(ruv, *link_samples(ruv, views, cfg), colours, cfg, default, max_size)


def link_samples(ruv: RobotUV, views: list, config: RobotAppearanceConfig | None = None) -> tuple[dict, dict]:
    """What the frames show of each link: (link -> [(uv, colour, weight, face)] per view, link -> its most pixels
    in one view)."""
    cfg = config or RobotAppearanceConfig()
    samples: dict[str, list] = {}
    biggest: dict[str, int] = {}
    for cam, img, q, rmask in views:
        fr = _fragments(ruv, cam, q, cfg.backend)
        img = np.asarray(img, np.float32)
        for k, name in enumerate(fr.names):
            region = fr.ids == k
            biggest[name] = max(biggest.get(name, 0), int(region.sum()))
            m = erode(region, cfg.erode_px) & (fr.cos > cfg.min_cos)
            if rmask is not None:
                m &= rmask
            ys, xs = np.nonzero(m)
            if not len(ys):
                continue
            mesh = ruv.meshes[name]
            lf = fr.local_face[ys, xs]
            uv = _pixel_uv(mesh, lf, fr.bary[ys, xs])
            w = fr.cos[ys, xs].astype(float) ** 4 * (cam.fx / fr.depth[ys, xs].astype(float) / 1000.0) ** 2
            samples.setdefault(name, []).append((uv, img[ys, xs, :3], w, lf))
    return samples, biggest


def splat_link_samples(ruv: RobotUV, samples: dict, biggest: dict, colours: dict,
                       config: RobotAppearanceConfig | None = None, default=(0.7, 0.7, 0.7, 1.0),
                       max_size: int | None = None) -> dict[str, LinkTexture]:
    """Textures from :func:`link_samples` (bilinear splat, push-pull on seen faces, flat colour elsewhere)."""
    from scipy.ndimage import binary_dilation

    cfg = config or RobotAppearanceConfig()
    out = {}
    for name, parts in sorted(samples.items()):
        uv, col, w, lf = (np.concatenate(x) for x in zip(*parts))
        if len(uv) < cfg.min_pixels:
            continue
        mesh = ruv.meshes[name]
        S = _texture_size(biggest[name], mesh, max_size or cfg.texture_max_size)
        tx = np.clip(uv[:, 0] * S - 0.5, 0, S - 1)
        ty = np.clip((1 - uv[:, 1]) * S - 0.5, 0, S - 1)
        x0, y0 = np.minimum(np.floor(tx).astype(int), S - 2), np.minimum(np.floor(ty).astype(int), S - 2)
        fx, fy = tx - x0, ty - y0
        acc, wsum = np.zeros((S * S, 3)), np.zeros(S * S)
        for dx, dy, wk in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)), (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
            idx = (y0 + dy) * S + (x0 + dx)
            for ch in range(3):
                acc[:, ch] += np.bincount(idx, col[:, ch] * w * wk, minlength=S * S)
            wsum += np.bincount(idx, w * wk, minlength=S * S)
        seen = wsum > 1e-6 * wsum.max()
        tex = np.zeros((S * S, 3), np.float32)
        tex[seen] = acc[seen] / wsum[seen, None]
        tex, seen = tex.reshape(S, S, 3), seen.reshape(S, S)
        layout = rasterize_uv(mesh.uv, mesh.face_uv, S, cfg.backend).mask
        faces_seen = np.unique(lf)
        covered = rasterize_uv(mesh.uv, np.asarray(mesh.face_uv)[faces_seen], S, cfg.backend).mask | seen
        flat = np.asarray(list(colours.get(name) or default)[:3], np.float32)
        filled = push_pull_fill(tex, seen)
        # seen faces (and a 2-texel gutter, so bilinear lookups at chart edges stay on them) from the frames;
        # the rest of the layout, never seen, the link's flat colour
        near = binary_dilation(covered, iterations=2)
        tex = np.where(near[..., None], filled, flat).astype(np.float32)
        out[name] = LinkTexture(np.clip(tex, 0, 1), round(float((covered & layout).sum() / max(layout.sum(), 1)), 4),
                                int(len(uv)))
    return out


def render_robot(ruv: RobotUV, camera, q, colours: dict, textures: dict | None = None,
                 default=(0.7, 0.7, 0.7, 1.0), backend: str = "auto", frags=None) -> tuple[np.ndarray, np.ndarray]:
    """(``(h, w, 3) float32`` unlit render, ``(h, w) bool`` robot pixels): links with a texture in ``textures``
    (link -> ``(S, S, 3)`` image) textured, the others in their meshes' own materials where they have them (as the
    exports draw them), else in their flat ``colours`` (link -> rgba)."""
    fr = frags if frags is not None else _fragments(ruv, camera, q, backend)
    img = np.zeros((*fr.ids.shape, 3), np.float32)
    own = None
    src = ruv.source
    if src is not None and any(n in src.materials and n not in (textures or {}) for n in fr.names):
        own = render_appearance(src, camera, q, colours, default, backend)[0]  # a second raster of the same surface
    for k, name in enumerate(fr.names):
        m = fr.ids == k
        if not m.any():
            continue
        tex = (textures or {}).get(name)
        if tex is None:
            img[m] = own[m] if own is not None and name in src.materials else \
                np.asarray(list(colours.get(name) or default)[:3], np.float32)
            continue
        ys, xs = np.nonzero(m)
        uv = _pixel_uv(ruv.meshes[name], fr.local_face[ys, xs], fr.bary[ys, xs])
        S = tex.shape[0]
        img[ys, xs] = _bilinear(tex, np.stack([uv[:, 0] * S - 0.5, (1 - uv[:, 1]) * S - 0.5], 1))[:, :3]
    return img, fr.ids >= 0


def score_robot_region(ruv: RobotUV, views: list, colours: dict, textures: dict, plates: list | None = None,
                       backend: str = "auto", frags: list | None = None) -> dict:
    """Robot-region PSNR of flat colours vs textures on ``views`` [(camera, image, q, robot mask or None)].

    With ``plates`` (one per view, or None): the composite ``plate + rendered robot`` against the real frame over the
    real robot mask united with the rendered silhouette (what a policy sees of the robot); and, always, the render
    against the frame under the real robot mask and the silhouette (the colours alone). Pooled over the views."""
    acc = {k: [0.0, 0] for k in ("composite_flat", "composite_textured", "under_mask_flat", "under_mask_textured")}
    per = []
    for i, (cam, img, q, rmask) in enumerate(views):
        img = to_float(np.asarray(img))[..., :3]
        fr = frags[i] if frags is not None else _fragments(ruv, cam, q, backend)
        flat, sil = render_robot(ruv, cam, q, colours, None, frags=fr)
        tex, _ = render_robot(ruv, cam, q, colours, textures, frags=fr)
        real = rmask if rmask is not None else sil
        plate = None if plates is None else plates[i]
        row = {}
        for kind, rend in (("flat", flat), ("textured", tex)):
            regions = {"under_mask": (rend, sil & real)}
            if plate is not None:
                regions["composite"] = (np.where(sil[..., None], rend, to_float(plate)[..., :3]), sil | real)
            for reg, (im, m) in regions.items():
                se = float(((im - img) ** 2)[m].sum())
                acc[f"{reg}_{kind}"][0] += se
                acc[f"{reg}_{kind}"][1] += int(m.sum()) * 3
                row[f"{reg}_{kind}_db"] = round(psnr(im, img, m), 3)
        per.append(row)
    out = {"frames": len(views), "per_frame": per}
    for k, (se, n) in acc.items():
        if n:
            out[f"{k}_db"] = round(float(10 * np.log10(n / se)) if se > 0 else float("inf"), 3)
    return out


# -- the bundle stage ----------------------------------------------------------------------------------------------
def read_uv_meshes(bundle: Bundle, spec) -> dict[str, TexMesh]:
    """The bundle's existing link UV meshes (reused so a re-fit keeps the layout), where readable."""
    from real2sim.render.mesh import load_texmesh

    out = {}
    for link, d in (spec.textures or {}).items():
        try:
            m = load_texmesh(bundle.path(d["mesh"]))
        except Exception as exc:  # a missing or broken file: unwrap again
            log.info("robot texture mesh of %s not reused (%s)", link, exc)
            continue
        if m.has_uv:
            out[link] = m
    return out


def write_link_texture(bundle: Bundle, link: str, mesh: TexMesh, tex: np.ndarray) -> dict:
    """Content-addressed ``robot/textures/<link>_<hash>.obj|png``; returns the manifest entry."""
    out_dir = bundle.root / ROBOT_TEXTURE_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    png = png_bytes(tex)
    obj = obj_text(mesh.vertices, mesh.faces, mesh.uv, mesh.face_uv).encode()
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in link)[:80]
    mp = out_dir / f"{safe}_{hash_bytes(obj)[:10]}.obj"
    tp = out_dir / f"{safe}_{hash_bytes(png)[:10]}.png"
    if not mp.exists():
        atomic_write_bytes(mp, obj)
    if not tp.exists():
        atomic_write_bytes(tp, png)
    return {"mesh": bundle.rel(mp), "texture": bundle.rel(tp)}


def _strip(panels, labels, title) -> np.ndarray:
    import cv2

    tiles = [cv2.resize(np.ascontiguousarray((np.clip(to_float(p)[..., :3], 0, 1) * 255 + 0.5).astype(np.uint8)),
                        (320, 240), interpolation=cv2.INTER_AREA) for p in panels]
    return titled(np.concatenate(tiles, 1), title, labels)


def frame_views(bundle: Bundle, model: RobotModel, indices) -> list:
    """[(camera, image (h, w, 3) float, q, robot mask or None)] of the bundle's frames ``indices``: each frame's
    joints (``capture.frames[i].joint_positions``, else ``robot.joint_positions``, else the default)."""
    m = bundle.manifest
    views = []
    for i in indices:
        f = m.capture.frames[i]
        q = f.joint_positions if f.joint_positions else (m.robot.joint_positions or model.default_q)
        if len(q) != len(model.joint_names):
            raise Real2SimError(f"frame {frame_key(i)}: {len(q)} joint positions but robot '{m.robot.name}' has "
                                f"{len(model.joint_names)} ({', '.join(model.joint_names)})")
        mk = m.capture.masks.get(frame_key(i), {}).get(ROBOT_MASK_ENTITY)
        views.append((m.cameras[f.camera].camera(), read_rgb_float(bundle.path(f.image)), np.asarray(q, float),
                      read_mask(bundle.path(mk)) if mk else None))
    return views


def fit_appearance(model: RobotModel, ruv: RobotUV, views: list, previous: dict,
                   config: RobotAppearanceConfig | None = None, max_size: int | None = None) -> tuple[dict, dict]:
    """Flat colours (``previous`` where a link is not seen) and textures (at most ``max_size`` texels a side)
    fitted on ``views``: (link -> rgba, link -> :class:`LinkTexture`)."""
    fit = fit_link_colours(model, views, config)
    colours = {**previous, **{k: v["rgba"] for k, v in fit.items() if v["rgba"] is not None}}
    return colours, backproject_links(ruv, views, colours, config, max_size=max_size)


def robot_appearance_stage(bundle: Bundle, config: RobotAppearanceConfig | None = None, force: bool = False):
    """Fit ``robot.appearance`` (and ``robot.textures``) from the bundle's frames. Returns (StageRecord, ran)."""
    cfg = config or RobotAppearanceConfig()
    m = bundle.manifest
    if m.robot is None:
        raise Real2SimError("scene.json has no robot; add one ('real2sim init --robot NAME') before fitting its appearance")
    frames = [(i, f) for i, f in enumerate(m.capture.frames)]
    if not frames:
        raise Real2SimError("the bundle has no frames (capture.frames) to fit the robot's colours from")
    if len(frames) > cfg.max_frames:
        frames = [frames[int(round(j))] for j in np.linspace(0, len(frames) - 1, cfg.max_frames)]
    masks = [m.capture.masks.get(frame_key(i), {}).get(ROBOT_MASK_ENTITY) for i, _ in frames]
    spec_d = dataclasses.asdict(m.robot)
    spec_d.pop("appearance", None)  # the outputs
    spec_d.pop("textures", None)
    plate_rel = m.capture.plate or None
    input_hash = hash_jsonable([files_hash(bundle, [f.image for _, f in frames] + [x for x in masks if x]
                                           + ([plate_rel] if plate_rel and cfg.textures else [])), spec_d,
                                {k: dataclasses.asdict(c) for k, c in m.cameras.items()}, dataclasses.asdict(cfg),
                                [dataclasses.asdict(f) for _, f in frames]])

    def work():
        model = load_robot_model(m.robot, bundle.root)
        views = frame_views(bundle, model, [i for i, _ in frames])
        jointed = [bool(f.joint_positions) for _, f in frames]
        previous = dict(m.robot.appearance)
        fit = fit_link_colours(model, views, cfg)
        fitted = {k: v["rgba"] for k, v in fit.items() if v["rgba"] is not None}
        if not fitted:
            raise Real2SimError(f"no robot link is visible in {len(views)} frame(s) (with >= {cfg.min_pixels} pixels): "
                                "check robot.base_pose, the camera pose and the joint positions; appearance kept")
        colours = {**previous, **fitted}
        rep = {"links": fit, "fitted": sorted(fitted), "not_seen": sorted(k for k, v in fit.items() if v["rgba"] is None),
               "frames": len(views)}
        # the flat-colour number as before: the frame that shows most robot, under the robot mask
        best = int(np.argmax([link_id_image(model, c, q)[0].__ge__(0).sum() for c, _, q, _ in views]))
        outputs, metrics = [], {}
        textures_entry: dict = {}
        if cfg.textures:
            ruv = robot_uv(model, read_uv_meshes(bundle, m.robot))
            plate = read_rgb_float(bundle.path(plate_rel)) if plate_rel else None
            plates = None if plate is None else [plate] * len(views)
            # held-out frames: the last ones in time, among frames with their own recorded joints (distinct poses)
            idx_j = [k for k, j in enumerate(jointed) if j]
            poses = {tuple(np.round(views[k][2], 4)) for k in idx_j}
            held = None
            if len(poses) >= 2:
                n_hold = max(1, int(round(cfg.holdout_fraction * len(idx_j))))
                hold = idx_j[-n_hold:]
                train = [k for k in range(len(views)) if k not in hold]
                tv, hv = [views[k] for k in train], [views[k] for k in hold]
                fit_t = fit_link_colours(model, tv, cfg)
                col_t = {**previous, **{k: v["rgba"] for k, v in fit_t.items() if v["rgba"] is not None}}
                smp = link_samples(ruv, tv, cfg)
                hfr = [_fragments(ruv, c, q, cfg.backend) for c, _, q, _ in hv]
                hpl = None if plates is None else [plates[k] for k in hold]
                # the texture resolution that carries over to poses it was not fitted on: each size up to
                # texture_max_size scored on the held-out frames (finer textures also fit the fit's misregistration)
                sweep = {}
                for size in [s_ for s_ in (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if s_ <= cfg.texture_max_size]:
                    tex_t = splat_link_samples(ruv, *smp, col_t, cfg, max_size=size)
                    sweep[size] = score_robot_region(ruv, hv, col_t, {k: t.texture for k, t in tex_t.items()}, hpl,
                                                     frags=hfr)
                key0 = "composite" if plates is not None else "under_mask"
                chosen = max(sweep, key=lambda z: (sweep[z][f"{key0}_textured_db"], -z))
                held = sweep[chosen]
                held["texture_max_size"] = chosen
                held["size_sweep_db"] = {str(z): r[f"{key0}_textured_db"] for z, r in sweep.items()}
                held["fit_frames"] = [frames[k][0] for k in train]
                held["held_out_frames"] = [frames[k][0] for k in hold]
            texs = backproject_links(ruv, views, colours, cfg, max_size=held["texture_max_size"] if held else None)
            tmap = {k: t.texture for k, t in texs.items()}
            ins = score_robot_region(ruv, views, colours, tmap, plates, cfg.backend)
            ref = held if held is not None else ins
            key = "composite" if plates is not None else "under_mask"
            gain = ref[f"{key}_textured_db"] - ref[f"{key}_flat_db"]
            keep = bool(texs) and (gain >= 0 or cfg.keep_worse_textures)
            basis = "held-out frames" if held is not None else "the fitted frame(s) (one robot pose: in-sample only)"
            decision = (f"textures kept: {gain:+.2f} dB over the flat colours on {basis}" if keep and gain >= 0 else
                        f"textures kept although {-gain:.2f} dB below the flat colours on {basis} "
                        "(keep_worse_textures)" if keep else
                        "no link seen enough for a texture" if not texs else
                        f"textures not written: {-gain:.2f} dB below the flat colours on {basis}; flat colours used")
            if not keep and texs:
                log.warning("robot appearance: %s", decision)
            rep["textures"] = {"links": {k: {"size": int(t.texture.shape[0]), "seen_fraction": t.seen,
                                             "pixels": t.pixels} for k, t in texs.items()},
                               "kept": keep, "decision": decision, "region": key,
                               "robot_region_psnr_db": {"in_sample": ins, "held_out": held}}
            if keep:
                for link, t in texs.items():
                    textures_entry[link] = write_link_texture(bundle, link, ruv.meshes[link], t.texture)
                    outputs += [textures_entry[link]["mesh"], textures_entry[link]["texture"]]
            metrics.update({"psnr_db_composite_flat" if key == "composite" else "psnr_db_under_mask_flat":
                            ref[f"{key}_flat_db"],
                            "psnr_db_composite_textured" if key == "composite" else "psnr_db_under_mask_textured":
                            ref[f"{key}_textured_db"],
                            "textures_kept": keep, "scored_on": "held_out" if held is not None else "in_sample"})
            # report picture: real | flat colours | textures (composites when there is a plate)
            cam, img, q, rmask = views[best]
            fl, sil = render_robot(ruv, cam, q, colours, None, backend=cfg.backend)
            tx, _ = render_robot(ruv, cam, q, colours, tmap, backend=cfg.backend)
            if plate is not None:
                fl, tx = np.where(sil[..., None], fl, plate), np.where(sil[..., None], tx, plate)
            row = ins["per_frame"][best]
            pic = bundle.reports_dir() / f"{ROBOT_STAGE}_textures.png"
            base = "meshes' materials" if model.materials else "flat colours"  # what shows without the textures
            write_rgb(pic, _strip([img, fl, tx], ["real frame", f"{base}: {row[key + '_flat_db']:.1f} dB",
                                                  f"textures: {row[key + '_textured_db']:.1f} dB"],
                                  f"robot appearance, frame {frames[best][0]}: robot-region PSNR ({key.replace('_', ' ')}); "
                                  f"{decision}"))
            rep["textures"]["picture"] = bundle.rel(pic)
            outputs.append(bundle.rel(pic))
        m.robot.appearance = colours
        m.robot.textures = textures_entry
        cam, img, q, rmask = views[best]
        rend, sil = render_links(model, cam, q, m.robot.appearance)
        real_mask = sil if rmask is None else (rmask & sil)
        p = psnr(rend, img, real_mask)
        pic = bundle.reports_dir() / f"{ROBOT_STAGE}.png"
        write_rgb(pic, overlay_panels(img, rend, real_mask, sil, title=(
            f"robot appearance: {len(fitted)} links coloured from the frames, flat-colour PSNR {p:.1f} dB under the "
            "robot mask")))
        rep["psnr_db_flat_colours"] = round(p, 3)
        rep["picture"] = bundle.rel(pic)
        outputs = [bundle.write_report(ROBOT_STAGE, rep), bundle.rel(pic)] + outputs
        return outputs, {"links_fitted": len(fitted), "links_not_seen": len(rep["not_seen"]),
                         "links_textured": len(textures_entry), "psnr_db": round(p, 3), **metrics}, ""

    return run_stage(bundle, ROBOT_STAGE, input_hash, dataclasses.asdict(cfg), work, force)
