"""Segmentation cases with exact ground truth: textured object meshes rendered into real background plates.

Each :class:`MaskCase` holds an image, the perfect plate it was made from, the ground-truth object mask, the
ground-truth cast-shadow mask, a click inside the object (sampled, not always the centre) and a box.

Sources:

- ``real``: the real Bridge photo ``stack_cube_first_frame.png`` with its person-made plate. Reference masks of
  the two cubes: the pixels of each cube's hue (saturation > 35) that differ from the plate, plus the differing
  pixels within 3 px of them (the pale anti-aliased edge; not the cast shadow farther out), holes filled. A
  *reference* made with knowledge of the cubes' colours and checked by eye, never a pipeline input. Three clicks
  per cube.
- ``hand``: real objects in real photos (the Bridge clip's first frame: pot, can, eggplant; the Google Robot
  overlays: bins, a cup, a toy carrot, a lying can, the cabinet) with outlines drawn by hand
  (:mod:`real2sim.demos.hand_outlines`); no plate (none exists for them): one-click columns only.
- synthetic families, one case per real plate (the two Bridge plates, the eleven Google Robot overlays): an object
  mesh from ``shared/data`` (coke can, cubes, apple, 7up and pepsi cans) rendered at a random pose, lit by a
  directional light (so a can has a bright and a dark half), scaled to a random size, composited with an
  anti-aliased edge (ground truth = coverage >= 0.5) over a soft cast shadow (the silhouette projected onto the
  table from its base, blurred, darkening the plate). Families vary what a camera does between the plate and the
  frame: ``base`` (sensor noise 1.5), ``exposure`` (gain, gamma, white balance), ``noise`` (sigma 6-10), ``blur``,
  ``jpeg`` (quality 25-45), ``lowres`` (320x256), ``highres`` (1280x720), ``lowcontrast`` (the texture recoloured
  toward the local plate colour), ``misreg`` (the plate handed to a method is not pixel-perfect, as a person-made
  plate never is: shifted by 0.5-2 px, rotated by up to 0.3 degrees and scaled by up to 0.5 % about a random point,
  in half of the cases also locally displaced by a smooth field of up to 1.5 px, in half of them taken at another
  exposure (gain 0.85-1.15, white balance +-3 %), always with its own sensor noise; :attr:`MaskCase.plate` is that
  plate).
  ``textured``: the object stands on a textured surface laid on the real plate's table (:func:`textured_plate`:
  a ChArUco board with its white margin, a black-and-white or coloured checkerboard, a plaid cloth, a dotted
  cloth or wood grain, procedurally made and seen in perspective, lit by the plate's own light): the surface's
  strong edges next to the object's outline, as on a scanning board.
  ``support``: the object stands on something smaller than the table that a person clicking the object does not
  mean (:func:`support_plate`: a towel, a cloth, a cutting board, a plate or a tray, 1.4-2.6x the object's width):
  the composition of a pot on its towel or a bowl on a cloth, where the support's outline competes with the
  object's. The support is part of the plate (it is background to the object).
  ``closeup``: the object close to the camera, 45-75 % of the image's height (a cabinet or a bin in front of a
  Google Robot's camera, a pot in a close-up Bridge view): larger than every box a click's usual sizes try.
  ``thin``: a long, thin object lying on the table (:func:`thin_object`: a metal, wooden or plastic spoon, a carrot,
  a pen; procedural, flat-coloured), 15-40 % of the image's smaller side long, seen from any direction: a handle a
  few pixels wide, as the Bridge tasks' spoons and carrots are.
  ``camera``: plate and frame alike as another camera records them (:func:`camera_look`: white balance, a tone
  curve from crushed shadows to lifted ones, saturation, vignetting): the same scene through a camera the method
  was not made on, with the plate still perfect.
- :func:`touching_cases`: two objects touching, neither in the plate (a can against a cube, an apple beside a
  can: both clicked, as ``init --prompts`` does for each object of a cluttered table), one per real plate; the
  nearer one occludes the farther one; ground truth per object = its visible coverage >= 0.5.
- :func:`procedural_case`: a data-free case (textured procedural plate, a shaded cylinder with a bright and a
  dark half, a cast shadow) for tests on machines without ``shared/data``.

Everything is seeded: the same arguments give the same cases.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.imaging import component_at, dilate, fill_holes, inside_distance, read_rgb
from real2sim.render.raster import rasterize

log = logging.getLogger(__name__)

FAMILIES = ("base", "exposure", "noise", "blur", "jpeg", "lowres", "highres", "lowcontrast", "misreg", "textured",
            "support", "closeup", "thin", "edited", "camera")
"""Synthetic case families (see the module docstring)."""

OBJECTS = {  # name -> (path under shared/data, up axis of the mesh, specular strength)
    "coke_can": ("objects/coke_can/textured.dae", 1, 0.35),
    "green_cube": ("objects/green_cube_3cm/textured.dae", 2, 0.05),
    "yellow_cube": ("objects/yellow_cube_3cm/textured.dae", 2, 0.05),
    "apple": ("google_robot/objects/apple/textured.dae", 2, 0.15),
    "7up_can": ("google_robot/objects/opened_7up_can/textured.dae", 1, 0.35),
    "pepsi_can": ("google_robot/objects/opened_pepsi_can/textured.dae", 1, 0.35),
}


@dataclass
class MaskCase:
    """One segmentation case with exact ground truth."""

    name: str
    """Unique name ``family/plate/object``."""
    family: str
    """Case family (``real`` or one of :data:`FAMILIES`)."""
    image: np.ndarray
    """``(h, w, 3) uint8`` RGB frame."""
    plate: np.ndarray | None
    """``(h, w, 3) uint8`` the plate: the frame without the object and its shadow (before the camera effects of
    the family; perfect except in the ``misreg`` family, where it is misregistered, see :func:`misregister`); None
    for the ``hand`` family (no plate exists)."""
    mask: np.ndarray
    """``(h, w) bool`` ground-truth object mask."""
    shadow: np.ndarray
    """``(h, w) bool`` ground-truth cast shadow (darkened by at least half its strength), outside the object."""
    click: tuple[float, float]
    """A click (x, y) inside the object."""
    box: tuple[float, float, float, float]
    """A box (x0, y0, x1, y1) around the object, loosely drawn."""


# -- meshes ----------------------------------------------------------------------------------------------------
@dataclass
class _Part:
    vertices: np.ndarray  # (V, 3)
    faces: np.ndarray  # (F, 3)
    normals: np.ndarray  # (V, 3)
    uv: np.ndarray | None  # (V, 2)
    texture: np.ndarray | None  # (H, W, 3) float32 [0, 1], row 0 = v 1
    colour: np.ndarray  # (3,) float32 flat colour when there is no texture


@lru_cache(maxsize=8)
def load_object(path: str, up_axis: int) -> tuple[_Part, ...]:
    """A textured mesh as parts in a z-up frame centred on its base (cached)."""
    import trimesh

    scene = trimesh.load(path, force="scene")
    rot = np.eye(3)
    if up_axis == 1:  # mesh Y up -> Z up
        rot = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], float)
    parts = []
    for g in scene.dump(concatenate=False):
        v = np.asarray(g.vertices, float) @ rot.T
        n = np.asarray(g.vertex_normals, float) @ rot.T
        mat = getattr(g.visual, "material", None)
        tex, uv = None, getattr(g.visual, "uv", None)
        img = getattr(mat, "baseColorTexture", None) or getattr(mat, "image", None)
        if img is not None and uv is not None:
            t = np.asarray(img.convert("RGB"), np.float32) / 255.0
            if max(t.shape[:2]) > 1024:
                import cv2

                s = 1024 / max(t.shape[:2])
                t = cv2.resize(t, (int(t.shape[1] * s), int(t.shape[0] * s)), interpolation=cv2.INTER_AREA)
            tex = t
        c = getattr(mat, "baseColorFactor", None) if mat is not None else None
        c = np.asarray([200, 200, 200, 255] if c is None else c, float)
        c = c[:3] / (255.0 if c.max() > 1 else 1.0)
        parts.append(_Part(v, np.asarray(g.faces, np.int64), n, None if tex is None else np.asarray(uv, float), tex,
                           c.astype(np.float32)))
    lo = np.min([p.vertices.min(0) for p in parts], 0)
    hi = np.max([p.vertices.max(0) for p in parts], 0)
    base = np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]])
    for p in parts:
        p.vertices = p.vertices - base
    return tuple(parts)


def _look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``(4, 4)`` OpenCV camera pose (x right, y down, z forward) at ``eye`` looking at ``target`` (world z up)."""
    f = (target - eye) / np.linalg.norm(target - eye)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    T = np.eye(4)
    T[:3, :3] = np.stack([r, d, f], 1)
    T[:3, 3] = eye
    return T


def _sample(tex: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Bilinear texture lookup: ``(N, 2)`` OBJ UVs (wrapped) -> ``(N, 3)``."""
    h, w = tex.shape[:2]
    u = np.mod(uv[:, 0], 1.0) * w - 0.5
    v = (1.0 - np.mod(uv[:, 1], 1.0)) * h - 0.5
    x0, y0 = np.floor(u).astype(int), np.floor(v).astype(int)
    fx, fy = (u - x0)[:, None], (v - y0)[:, None]
    x1, y1 = (x0 + 1) % w, (y0 + 1) % h
    x0, y0 = x0 % w, y0 % h
    return ((tex[y0, x0] * (1 - fx) + tex[y0, x1] * fx) * (1 - fy) + (tex[y1, x0] * (1 - fx) + tex[y1, x1] * fx) * fy)


def render_sprite(parts, yaw: float, elevation: float, light: np.ndarray, specular: float, size: int = 320,
                  backend: str = "auto") -> tuple[np.ndarray, np.ndarray, float]:
    """Render an object alone: ``(size, size, 3)`` float RGB, ``(size, size)`` coverage in [0, 1] (2x supersampled),
    and the image row of its base centre (for the cast shadow)."""
    import cv2

    ss = 2 * size
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    allv = np.concatenate([p.vertices @ R.T for p in parts])
    centre = (allv.min(0) + allv.max(0)) / 2
    radius = float(np.linalg.norm(allv - centre, axis=1).max())
    dist = 8 * radius
    eye = centre + dist * np.array([np.cos(elevation), 0.0, np.sin(elevation)])
    T = _look_at(eye, centre)
    f = 0.45 * ss * dist / radius
    cam = Camera(ss, ss, np.array([[f, 0, ss / 2 - 0.5], [0, f, ss / 2 - 0.5], [0, 0, 1]]), T, near=dist / 4,
                 far=dist * 4)
    rgb = np.zeros((ss, ss, 3), np.float32)
    depth = np.full((ss, ss), np.inf)
    view = (eye - centre) / dist
    half = (light + view) / np.linalg.norm(light + view)
    for p in parts:
        fr = rasterize(cam, p.vertices @ R.T, p.faces, backend)
        ys, xs = np.nonzero(fr.mask & (fr.depth < depth))
        if not len(ys):
            continue
        depth[ys, xs] = fr.depth[ys, xs]
        fid, bary = fr.face_id[ys, xs], fr.bary[ys, xs]
        tri = p.faces[fid]
        n = np.einsum("nk,nkc->nc", bary, (p.normals @ R.T)[tri])
        n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-9
        n *= np.where((n @ view) < 0, -1.0, 1.0)[:, None]
        if p.texture is not None:
            col = _sample(p.texture, np.einsum("nk,nkc->nc", bary, p.uv[tri]))
        else:
            col = np.broadcast_to(p.colour, (len(ys), 3))
        diff = 0.35 + 0.75 * np.clip(n @ light, 0, 1)
        spec = specular * np.clip(n @ half, 0, 1) ** 30
        rgb[ys, xs] = col * diff[:, None] + spec[:, None]
    cov = np.isfinite(depth).astype(np.float32)
    rgb = cv2.resize(rgb * cov[..., None], (size, size), interpolation=cv2.INTER_AREA)
    alpha = cv2.resize(cov, (size, size), interpolation=cv2.INTER_AREA)
    rgb = np.where(alpha[..., None] > 1e-3, rgb / np.maximum(alpha[..., None], 1e-3), 0)
    base_row = float(cam.project(np.array([[0.0, 0.0, 0.0]]))[0, 1]) / 2
    return np.clip(rgb, 0, 1.2), alpha, base_row


# -- compositing -----------------------------------------------------------------------------------------------
def _fit_sprite(rgb, alpha, base_row, height_px: float):
    """Crop the sprite to its object and scale it so the object is ``height_px`` tall."""
    import cv2

    ys, xs = np.nonzero(alpha > 0.01)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    s = height_px / (y1 - y0)
    w, h = max(2, int(round((x1 - x0) * s))), max(2, int(round((y1 - y0) * s)))
    rgb = cv2.resize(np.ascontiguousarray(rgb[y0:y1, x0:x1]), (w, h), interpolation=cv2.INTER_AREA)
    alpha = cv2.resize(np.ascontiguousarray(alpha[y0:y1, x0:x1]), (w, h), interpolation=cv2.INTER_AREA)
    return rgb, alpha, (base_row - y0) * s


def _shadow(alpha: np.ndarray, base_row: float, shear: float, squash: float, blur: float) -> tuple[np.ndarray, int, int]:
    """Cast shadow of a sprite: its silhouette projected from its base row onto the table (``(h', w')`` float),
    with the offset of the shadow image's origin relative to the sprite's."""
    import cv2

    h, w = alpha.shape
    pad = int(2 * h + 4 * blur) + 4
    M = np.array([[1.0, -shear, shear * base_row + pad], [0.0, squash, (1 - squash) * base_row + pad]])
    sh = cv2.warpAffine(alpha, M, (w + 2 * pad, h + 2 * pad), flags=cv2.INTER_LINEAR)
    if blur > 0:
        sh = cv2.GaussianBlur(sh, (0, 0), blur)
    return np.clip(sh, 0, 1), pad, pad


def _paste(canvas: np.ndarray, layer: np.ndarray, x0: int, y0: int) -> None:
    """``canvas[y0:, x0:] = layer`` where they overlap (in place; layer ``(h, w)`` or ``(h, w, c)``)."""
    H, W = canvas.shape[:2]
    h, w = layer.shape[:2]
    cy0, cx0 = max(0, y0), max(0, x0)
    cy1, cx1 = min(H, y0 + h), min(W, x0 + w)
    if cy1 <= cy0 or cx1 <= cx0:
        return
    canvas[cy0:cy1, cx0:cx1] = layer[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]


@dataclass
class Look:
    """How an object sits in a plate: brightness, recolouring and cast shadow."""

    gain: float = 1.0
    """Object brightness factor (times the plate's local brightness / 0.55 when ``relative``)."""
    relative: bool = True
    """Scale the object's brightness with the plate's brightness around it."""
    recolour: float = 0.0
    """Move the object's mean colour this far toward the local plate colour (0 = none, 1 = onto it)."""
    keep_variation: float = 1.0
    """Scale of the object's colour variation about its (moved) mean."""
    shadow: float = 0.0
    """Darkening of the cast shadow's core (0 = no shadow)."""
    shear: float = 0.5
    """Horizontal shift of the shadow per pixel of object height."""
    squash: float = 0.3
    """Vertical extent of the shadow per pixel of object height (negative: toward the camera)."""
    softness: float = 0.03
    """Blur of the shadow as a fraction of the object height."""

    @classmethod
    def sample(cls, rng: np.random.Generator, low_contrast: bool = False) -> "Look":
        return cls(gain=rng.uniform(0.85, 1.15), recolour=rng.uniform(0.6, 0.8) if low_contrast else 0.0,
                   keep_variation=rng.uniform(0.6, 0.9) if low_contrast else 1.0,
                   shadow=rng.uniform(0.1, 0.6) if rng.random() < 0.85 else 0.0, shear=rng.uniform(-1.0, 1.0),
                   squash=rng.choice([-1, 1]) * rng.uniform(0.15, 0.5), softness=rng.uniform(0.01, 0.05))


def composite(plate: np.ndarray, rgb: np.ndarray, alpha: np.ndarray, base_row: float, x: int, y_base: int,
              look: Look):
    """Object sprite ``(h, w, 3)`` float with coverage ``(h, w)`` over a ``(H, W, 3) uint8`` plate with its cast
    shadow, base centre at ``(x, y_base)``.

    Returns the float image ``(H, W, 3)`` in [0, 1], object coverage ``(H, W)`` and shadow darkening ``(H, W)``
    outside the object (0 = none)."""
    H, W = plate.shape[:2]
    pf = plate.astype(np.float32) / 255.0
    h, w = alpha.shape
    ox, oy = int(round(x - w / 2)), int(round(y_base - base_row))
    cov = np.zeros((H, W), np.float32)
    _paste(cov, alpha, ox, oy)
    obj = np.zeros((H, W, 3), np.float32)
    _paste(obj, rgb, ox, oy)
    inside = cov > 0.5
    near = cv2_dilate(inside, max(3, h // 2)) & (cov < 0.01)
    local = pf[near].mean(0) if near.any() else pf.reshape(-1, 3).mean(0)
    obj *= look.gain * (float(np.clip(local.mean() / 0.55, 0.55, 1.25)) if look.relative else 1.0)
    if look.recolour > 0 and inside.any():
        mu = obj[inside].mean(0)
        obj = (mu + look.recolour * (local - mu)) + look.keep_variation * (obj - mu)
    dark = np.zeros((H, W), np.float32)
    if look.shadow > 0:
        sh, px, py = _shadow(alpha, base_row, look.shear, look.squash, look.softness * h)
        _paste(dark, sh * look.shadow, ox - px, oy - py)
    out = pf * (1 - dark[..., None])
    out = out * (1 - cov[..., None]) + np.clip(obj, 0, 1) * cov[..., None]
    return out, cov, dark * (1 - cov)


def cv2_dilate(m: np.ndarray, r: int) -> np.ndarray:
    """``(h, w) bool`` dilated by a square of half-size ``r`` (fast)."""
    import cv2

    return cv2.dilate(m.astype(np.uint8), np.ones((2 * r + 1, 2 * r + 1), np.uint8)) > 0


# -- camera effects --------------------------------------------------------------------------------------------
def camera_effect(img: np.ndarray, family: str, rng: np.random.Generator) -> np.ndarray:
    """Apply the family's difference between plate and frame to a float ``(h, w, 3)`` image -> uint8."""
    import cv2

    sigma = 1.5
    if family == "exposure":
        gain = rng.choice([rng.uniform(0.7, 0.85), rng.uniform(1.15, 1.3)])
        img = np.clip(img * gain * rng.uniform(0.95, 1.05, 3), 0, 1) ** rng.uniform(0.9, 1.1)
    elif family == "noise":
        sigma = rng.uniform(6, 10)
    elif family == "blur":
        img = cv2.GaussianBlur(img, (0, 0), rng.uniform(1.2, 2.2))
    out = np.clip(img * 255 + rng.normal(0, sigma, img.shape), 0, 255).round().astype(np.uint8)
    if family == "jpeg":
        ok, enc = cv2.imencode(".jpg", out[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(25, 46))])
        out = np.ascontiguousarray(cv2.imdecode(enc, cv2.IMREAD_COLOR)[..., ::-1])
    return out


def camera_look(rng: np.random.Generator):
    """A camera's rendering of light (``camera`` family) as a function of a float ``(h, w, 3)`` image in [0, 1]:
    white balance (channel gains 0.8-1.2 about their mean), saturation 0.5-1.2, a tone curve ``x ** g`` with
    ``g`` in 0.6-1.8 (log-uniform: lifted to crushed shadows) and vignetting (0-45 % darker in the corners)."""
    gains = rng.uniform(0.8, 1.2, 3)
    gains = (gains / gains.mean()).astype(np.float32)
    saturation = rng.uniform(0.5, 1.2)
    gamma = float(np.exp(rng.uniform(np.log(0.6), np.log(1.8))))
    vignette = rng.uniform(0.0, 0.45)

    def look(img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        x = img * gains
        grey = x.mean(-1, keepdims=True)
        x = np.clip(grey + saturation * (x - grey), 0, 1) ** gamma
        yy, xx = np.mgrid[:h, :w]
        r2 = ((xx - (w - 1) / 2) / (w / 2)) ** 2 + ((yy - (h - 1) / 2) / (h / 2)) ** 2
        return (x * (1 - vignette * r2 / 2)[..., None]).astype(np.float32)

    return look


def recorded(look, image: np.ndarray) -> np.ndarray:
    """A ``uint8`` image (any shape ``(..., 3)``) through a :func:`camera_look`, back in ``uint8``."""
    return np.clip(np.round(look(image.astype(np.float32) / 255.0) * 255.0), 0, 255).astype(np.uint8)


def edited_plate(image: np.ndarray, plate: np.ndarray, covered: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The frame ``image`` with ``covered`` (``(h, w) bool``: an object and its shadow) removed as a person removes
    it from a photo (``edited`` family): over it and a margin of 10-30 % of its size, in half of the cases the frame
    cloned from beside it (a clone stamp), in the others the true ``plate`` smoothed by 1 px and offset by up to
    2 levels (a healing brush or an inpainting that got the table right). ``(h, w, 3) uint8``."""
    import cv2

    edit = dilate(covered, max(2, int(round(rng.uniform(0.1, 0.3) * np.sqrt(covered.sum())))))
    if rng.uniform() < 0.5:
        xs = np.nonzero(edit)[1]
        span = int(xs.max() - xs.min()) + 8
        fill = np.roll(image, -span if xs.max() + span < image.shape[1] else span, axis=1).astype(np.float32)
    else:
        fill = cv2.GaussianBlur(plate.astype(np.float32), (0, 0), 1.0) + rng.uniform(-2, 2, 3)
    out = image.copy()
    out[edit] = np.clip(np.rint(fill[edit]), 0, 255).astype(np.uint8)
    return out


def misregister(plate: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The plate as a person would hand it over (``misreg`` family): a small affine misregistration (shift 0.5-2 px,
    rotation up to 0.3 degrees, scale up to 0.5 % about a random point), in half of the cases a smooth local
    displacement of up to 1.5 px, in half of them another exposure (gain 0.85-1.15, white balance +-3 %), and its
    own sensor noise (sigma 1.5). ``(h, w, 3) uint8`` in and out."""
    import cv2

    h, w = plate.shape[:2]
    ang, d = rng.uniform(0, 2 * np.pi), rng.uniform(0.5, 2.0)
    centre = (float(rng.uniform(0, w)), float(rng.uniform(0, h)))
    M = cv2.getRotationMatrix2D(centre, float(rng.uniform(-0.3, 0.3)), float(1 + rng.uniform(-0.005, 0.005)))
    M[:, 2] += [d * np.cos(ang), d * np.sin(ang)]
    xx, yy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    mx = (M[0, 0] * xx + M[0, 1] * yy + M[0, 2]).astype(np.float32)
    my = (M[1, 0] * xx + M[1, 1] * yy + M[1, 2]).astype(np.float32)
    if rng.random() < 0.5:
        field = rng.normal(0, 1, (2, 4, 5)).astype(np.float32)
        field *= rng.uniform(0.5, 1.5) / max(float(np.abs(field).max()), 1e-6)
        mx += cv2.resize(field[0], (w, h), interpolation=cv2.INTER_CUBIC)
        my += cv2.resize(field[1], (w, h), interpolation=cv2.INTER_CUBIC)
    out = cv2.remap(plate.astype(np.float32), mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    if rng.random() < 0.5:
        out = out * rng.uniform(0.85, 1.15) * rng.uniform(0.97, 1.03, 3)
    return np.clip(out + rng.normal(0, 1.5, out.shape), 0, 255).round().astype(np.uint8)


def resize_plate(plate: np.ndarray, family: str) -> np.ndarray:
    """The plate at the family's resolution (``lowres`` 320x256, ``highres`` 1280x720 from a 16:9 crop)."""
    import cv2

    if family == "lowres":
        return cv2.resize(plate, (320, 256), interpolation=cv2.INTER_AREA)
    if family == "highres":
        h, w = plate.shape[:2]
        ch = int(round(w * 9 / 16))
        y0 = (h - ch) // 2
        return cv2.resize(plate[y0:y0 + ch], (1280, 720), interpolation=cv2.INTER_CUBIC)
    return plate


TEXTURES = ("charuco", "checker", "plaid", "dots", "wood")
"""Surfaces of the ``textured`` family (:func:`surface_texture`)."""


def surface_texture(kind: str, rng: np.random.Generator, size: tuple[int, int] = (720, 960)) -> np.ndarray:
    """A flat surface's texture ``(h, w, 3)`` float in [0, 1] (``kind`` in :data:`TEXTURES`), seeded by ``rng``:

    - ``charuco``: a printed ChArUco board (5-9 squares across, markers of a random dictionary) with a white margin;
    - ``checker``: a checkerboard, black and white or two random colours, 4-10 squares across;
    - ``plaid``: a woven cloth: bands of 2-4 colours across and along, multiplied, with thread grain;
    - ``dots``: a cloth of one colour with dots of another on a grid, jittered;
    - ``wood``: wood grain: warped growth rings of two browns, with fibres along the board.
    """
    import cv2

    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if kind in ("charuco", "checker"):
        n = int(rng.integers(5, 10)) if kind == "charuco" else int(rng.integers(4, 11))
        m = max(3, int(round(n * h / w)))
        margin = 0.06 * min(h, w) if kind == "charuco" else 0.0
        sq = (min((w - 2 * margin) / n, (h - 2 * margin) / m))
        if kind == "charuco":
            d = cv2.aruco.getPredefinedDictionary(int(rng.choice([cv2.aruco.DICT_4X4_50, cv2.aruco.DICT_5X5_100,
                                                                   cv2.aruco.DICT_6X6_250])))
            board = cv2.aruco.CharucoBoard((n, m), 1.0, float(rng.uniform(0.6, 0.8)), d)
            bw, bh = int(round(sq * n)), int(round(sq * m))
            g = board.generateImage((bw, bh)).astype(np.float32) / 255.0
            img = np.ones((h, w), np.float32)
            y0, x0 = (h - bh) // 2, (w - bw) // 2
            img[y0:y0 + bh, x0:x0 + bw] = g
            img = np.repeat((0.06 + 0.88 * img)[..., None], 3, -1)
        else:
            chk = ((np.floor(xx / sq) + np.floor(yy / sq)) % 2).astype(np.float32)[..., None]
            if rng.random() < 0.5:
                a, b = np.full(3, 0.08, np.float32), np.full(3, 0.92, np.float32)
            else:
                a, b = rng.uniform(0.05, 0.95, 3).astype(np.float32), rng.uniform(0.05, 0.95, 3).astype(np.float32)
            img = a + (b - a) * chk
    elif kind == "plaid":
        img = np.ones((h, w, 3), np.float32)
        for axis in (xx, yy):
            period = rng.uniform(0.08, 0.2) * w
            bands = rng.uniform(0.25, 1.0, (int(rng.integers(2, 5)), 3)).astype(np.float32)
            widths = rng.dirichlet(np.ones(len(bands)))
            phase = np.mod(axis / period + rng.uniform(0, 1), 1.0)
            idx = np.searchsorted(np.cumsum(widths), phase.ravel()).clip(0, len(bands) - 1).reshape(axis.shape)
            img = img * bands[idx]
        img = np.sqrt(img) * (0.9 + 0.1 * np.sin(xx * 1.7 + yy * 1.7)[..., None])
    elif kind == "dots":
        base = rng.uniform(0.2, 0.9, 3).astype(np.float32)
        dot = rng.uniform(0.05, 0.95, 3).astype(np.float32)
        period = rng.uniform(0.05, 0.12) * w
        jx, jy = xx + rng.uniform(0, period), yy + rng.uniform(0, period)
        dx, dy = np.mod(jx, period) - period / 2, np.mod(jy + (np.floor(jx / period) % 2) * period / 2, period) - period / 2
        r = rng.uniform(0.18, 0.35) * period
        cov = np.clip(r + 0.5 - np.sqrt(dx ** 2 + dy ** 2), 0, 1)[..., None]
        img = base + (dot - base) * cov
    elif kind == "wood":
        light_c = np.array([0.72, 0.52, 0.32], np.float32) * rng.uniform(0.8, 1.15)
        dark_c = light_c * rng.uniform(0.45, 0.7)
        warp = cv2.resize(rng.normal(0, 1, (4, 6)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
        rings = np.sin((yy / (rng.uniform(0.02, 0.05) * h) + 3.0 * warp + 0.002 * xx) * np.pi) ** 2
        fib = cv2.GaussianBlur(rng.normal(0, 1, (h, w)).astype(np.float32), (0, 0), sigmaX=25, sigmaY=0.8)
        t = np.clip(rings + 2.0 * fib, 0, 1)[..., None]
        img = light_c + (dark_c - light_c) * t
    else:
        raise ValueError(f"surface_texture: unknown kind {kind!r}; one of {TEXTURES}")
    return np.clip(img, 0, 1).astype(np.float32)


def textured_plate(plate: np.ndarray, rng: np.random.Generator, kind: str | None = None) -> np.ndarray:
    """The real ``plate`` with a textured surface (:func:`surface_texture`, ``kind`` or a random one) laid on its
    table: seen in perspective (narrower far away), covering the lower 55-65 % of the frame and most of its width,
    rotated a little, shaded by the plate's own low-frequency light. ``(h, w, 3) uint8`` in and out."""

    H, W = plate.shape[:2]
    kind = kind or str(rng.choice(TEXTURES))
    tex = surface_texture(kind, rng)
    tw = tex.shape[1]
    top, bottom = rng.uniform(0.35, 0.45) * H, rng.uniform(1.0, 1.15) * H
    half_far, half_near = rng.uniform(0.3, 0.42) * W, rng.uniform(0.5, 0.65) * W
    cx = W / 2 + rng.uniform(-0.08, 0.08) * W
    skew = rng.uniform(-0.1, 0.1) * W
    dst = np.float32([[cx - half_far + skew, top], [cx + half_far + skew, top], [cx + half_near, bottom],
                      [cx - half_near, bottom]])
    pf, laid, cover = _lay_flat(plate, tex, dst, W < tw)
    out = pf * (1 - cover) + laid * cover
    return np.clip(out * 255, 0, 255).round().astype(np.uint8)


def _lay_flat(plate: np.ndarray, tex: np.ndarray, dst: np.ndarray, shrink: bool, shape: np.ndarray | None = None):
    """A texture ``(th, tw, 3)`` float laid on the plate's table: its corners warped to ``dst`` ``(4, 2)``
    (clockwise from top-left), shaded by the plate's own low-frequency light. ``shape``: its coverage ``(th, tw)``
    (default all of it); ``shrink``: it is seen smaller than it is (area resampling). Returns the plate as float in
    [0, 1], the laid texture ``(H, W, 3)`` and its coverage ``(H, W, 1)``."""
    import cv2

    H, W = plate.shape[:2]
    th, tw = tex.shape[:2]
    src = np.float32([[0, 0], [tw - 1, 0], [tw - 1, th - 1], [0, th - 1]])
    M = cv2.getPerspectiveTransform(src, dst)
    warped = cv2.warpPerspective(tex, M, (W, H), flags=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    shape = np.ones((th, tw), np.float32) if shape is None else shape
    cover = cv2.warpPerspective(shape, M, (W, H), flags=cv2.INTER_LINEAR)[..., None]
    pf = plate.astype(np.float32) / 255.0
    lum = cv2.GaussianBlur(pf.mean(-1), (0, 0), 0.05 * max(H, W))
    shade = np.clip(lum / max(float(lum[int(0.6 * H):].mean()), 1e-3), 0.6, 1.4)[..., None]
    return pf, np.clip(warped * shade, 0, 1), cover


SUPPORTS = ("towel", "plaid", "dots", "wood", "dish")
"""Supports of the ``support`` family (:func:`support_plate`)."""


def _support_texture(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A support's texture ``(h, w, 3)`` float in [0, 1]: ``towel`` (one colour with a woven grain and a darker
    hem), ``dish`` (a light or coloured glaze with a rim), or a :func:`surface_texture` (cloths, wood)."""
    import cv2

    if kind not in ("towel", "dish"):
        return surface_texture(kind, rng, (240, 320))
    h, w = 240, 320
    col = rng.uniform(0.1, 0.95, 3).astype(np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if kind == "towel":
        grain = 0.9 + 0.1 * np.sin(xx * 2.3) * np.sin(yy * 2.3) + rng.normal(0, 0.04, (h, w)).astype(np.float32)
        hem = ((np.minimum(np.minimum(xx, w - 1 - xx), np.minimum(yy, h - 1 - yy)) < 10) * 0.15).astype(np.float32)
        return np.clip(col * (grain - hem)[..., None], 0, 1)
    col = col if rng.random() < 0.5 else np.full(3, rng.uniform(0.8, 0.95), np.float32)
    r = np.sqrt(((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2)
    rim = cv2.GaussianBlur(((r > 0.72) & (r < 0.8)).astype(np.float32), (0, 0), 3) * 0.25
    return np.clip(col * (1 - rim)[..., None] + 0.05 * (1 - r)[..., None], 0, 1)


def support_plate(plate: np.ndarray, rng: np.random.Generator, x: float, y_base: float, width_px: float,
                  kind: str | None = None) -> np.ndarray:
    """The real ``plate`` with a support (``kind`` in :data:`SUPPORTS`, or a random one) under an object whose base
    centre is ``(x, y_base)`` and which is ``width_px`` wide: 1.4-2.6x that wide, 0.3-0.65x as deep as wide (seen
    in perspective), turned by up to 20 degrees, the base inside it off its centre; a dish is an ellipse. Shaded
    by the plate's own low-frequency light, with an anti-aliased edge and a faint contact shadow around it.
    ``(h, w, 3) uint8`` in and out."""
    import cv2

    kind = kind or str(rng.choice(SUPPORTS))
    tex = _support_texture(kind, rng)
    th, tw = tex.shape[:2]
    sw = width_px * rng.uniform(1.4, 2.6)
    sd = sw * rng.uniform(0.3, 0.65)
    c = np.array([x + rng.uniform(-0.15, 0.15) * sw, y_base - rng.uniform(0.0, 0.3) * sd])
    a = np.radians(rng.uniform(-20, 20))
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    far, near = rng.uniform(0.8, 0.95), 1.0
    corners = np.array([[-far, -1], [far, -1], [near, 1], [-near, 1]]) * [sw / 2, sd / 2]
    dst = (corners @ rot.T + c).astype(np.float32)
    shape = None
    if kind == "dish":
        yy, xx = np.mgrid[0:th, 0:tw].astype(np.float32)
        shape = (((xx - tw / 2) / (tw / 2)) ** 2 + ((yy - th / 2) / (th / 2)) ** 2 <= 1).astype(np.float32)
        shape = cv2.GaussianBlur(shape, (0, 0), 1.0)
    pf, laid, cover = _lay_flat(plate, tex, dst, sw < tw, shape)
    contact = cv2.GaussianBlur(cover[..., 0], (0, 0), max(1.0, 0.02 * sw))[..., None] * rng.uniform(0.0, 0.25)
    out = pf * (1 - contact) * (1 - cover) + laid * cover
    return np.clip(out * 255, 0, 255).round().astype(np.uint8)


# -- clicks and boxes ------------------------------------------------------------------------------------------
def sample_click(mask: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """A click inside ``mask``: a random pixel at least a third of the largest inner distance from the edge."""
    d = inside_distance(mask)
    ys, xs = np.nonzero(d >= d.max() / 3)
    i = int(rng.integers(len(ys)))
    return float(xs[i]), float(ys[i])


def sample_box(mask: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float, float]:
    """A loosely drawn box: the tight box grown by 3-10 % of its size on each side (clipped to the image)."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    bw, bh = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
    g = rng.uniform(0.03, 0.10, 4) * [bw, bh, bw, bh]
    return (float(max(0, xs.min() - g[0])), float(max(0, ys.min() - g[1])),
            float(min(w - 1, xs.max() + g[2])), float(min(h - 1, ys.max() + g[3])))


# -- cases -----------------------------------------------------------------------------------------------------
def plates(data: Path) -> dict[str, np.ndarray]:
    """Every real person-made plate in ``data`` (Bridge and Google Robot), by name."""
    out = {}
    for p in [data / "bridge" / "stack_cube_plate.png", data / "bridge" / "bridge_real_1_cleanup.png",
              *sorted((data / "google_robot" / "overlays").glob("*.png"))]:
        if p.is_file():
            out[p.stem] = read_rgb(p)
    return out


THIN = ("spoon", "carrot", "marker")
"""Objects of the ``thin`` family (:func:`thin_object`)."""


def thin_object(kind: str, rng: np.random.Generator) -> tuple[tuple[_Part, ...], float]:
    """A procedural long, thin object (``kind`` in :data:`THIN`) as flat-coloured parts in a z-up frame centred on
    its base, and its specular strength: a spoon of steel, wood or coloured plastic, an orange carrot, a pen of any
    colour."""
    import trimesh

    from real2sim.demos import shapes

    if kind == "spoon":
        v, f = shapes.spoon(length=rng.uniform(0.14, 0.2), bowl=rng.uniform(0.04, 0.055), seed=int(rng.integers(1000)))
        material = int(rng.integers(3))
        colour = ([0.72, 0.73, 0.76], [0.62, 0.44, 0.27], list(rng.uniform(0.1, 0.9, 3)))[material]
        spec = (0.8, 0.05, 0.3)[material]
    elif kind == "carrot":
        v, f = shapes.carrot(length=rng.uniform(0.12, 0.2), radius=rng.uniform(0.012, 0.02),
                             seed=int(rng.integers(1000)))
        colour, spec = [0.92, 0.42, 0.08], 0.15
    elif kind == "marker":
        v, f = shapes.marker(length=rng.uniform(0.12, 0.16), radius=rng.uniform(0.005, 0.009))
        colour, spec = list(rng.uniform(0.05, 0.95, 3)), 0.35
    else:
        raise ValueError(f"unknown thin object {kind!r}; one of {', '.join(THIN)}")
    lo, hi = v.min(0), v.max(0)
    v = v - [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]]
    n = np.asarray(trimesh.Trimesh(v, f, process=False).vertex_normals, float)
    return (_Part(v, f, n, None, None, np.asarray(colour, np.float32)),), spec


def _placement(plate: np.ndarray, rng: np.random.Generator, height_px: float, width_px: float) -> tuple[int, int]:
    """Base centre (x, y) on the lower part of the image (tables and floors), fully inside it."""
    H, W = plate.shape[:2]
    x = rng.uniform(width_px / 2 + 0.03 * W, W - width_px / 2 - 0.03 * W)
    y = rng.uniform(max(0.4 * H, height_px + 0.03 * H), 0.95 * H)
    return int(round(x)), int(round(y))


def synthetic_case(data: Path, plate_name: str, plate: np.ndarray, family: str, obj: str, seed: int,
                   backend: str = "auto") -> MaskCase:
    """One synthetic case (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if family == "thin":
        obj = THIN[seed % len(THIN)]
        parts, spec = thin_object(obj, rng)
    else:
        path, up, spec = OBJECTS[obj]
        parts = load_object(str(data / path), up)
    el = rng.uniform(np.radians(20), np.radians(65))
    light = np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.4, 1.2)])
    light /= np.linalg.norm(light)
    rgb, alpha, base_row = render_sprite(parts, rng.uniform(0, 2 * np.pi), el, light, spec, backend=backend)
    plate = resize_plate(plate, family)
    if family == "textured":
        plate = textured_plate(plate, rng, TEXTURES[seed % len(TEXTURES)])
    H, W = plate.shape[:2]
    height = rng.uniform(0.45, 0.75) if family == "closeup" else rng.uniform(0.09, 0.22)
    if family == "thin":  # its length, whichever way it lies in the image
        ys, xs = np.nonzero(alpha > 0.01)
        extent = max(np.ptp(ys), np.ptp(xs)) + 1
        height = rng.uniform(0.15, 0.4) * min(H, W) / H * (np.ptp(ys) + 1) / extent
    rgb, alpha, base_row = _fit_sprite(rgb, alpha, base_row, height * H)
    if alpha.shape[1] > 0.9 * W:  # a wide object (a lying can) close up: as wide as fits
        rgb, alpha, base_row = _fit_sprite(rgb, alpha, base_row, alpha.shape[0] * 0.9 * W / alpha.shape[1])
    x, y = _placement(plate, rng, alpha.shape[0], alpha.shape[1])
    if family == "support":
        plate = support_plate(plate, rng, x, y, alpha.shape[1], SUPPORTS[seed % len(SUPPORTS)])
    img, cov, dark = composite(plate, rgb, alpha, base_row, x, y, Look.sample(rng, family == "lowcontrast"))
    mask = cov >= 0.5
    shadow = (dark >= 0.5 * dark.max()) & ~mask if dark.max() > 0.05 else np.zeros_like(mask)
    if family == "camera":
        look = camera_look(rng)
        img = look(img)
        plate = recorded(look, plate)
    image = camera_effect(img, family, rng)
    click, box = sample_click(mask, rng), sample_box(mask, rng)
    if family == "misreg":
        plate = misregister(plate, rng)
    if family == "edited":
        plate = edited_plate(image, plate, mask | shadow, rng)
    return MaskCase(f"{family}/{plate_name}/{obj}", family, image, plate, mask, shadow, click, box)


def real_cases(data: Path) -> list[MaskCase]:
    """The real Bridge cubes photo with hue-restricted plate-difference reference masks (see module docstring)."""
    import cv2

    f, p = data / "bridge" / "stack_cube_first_frame.png", data / "bridge" / "stack_cube_plate.png"
    if not (f.is_file() and p.is_file()):
        return []
    img, plate = read_rgb(f), read_rgb(p)
    diff = np.abs(img.astype(int) - plate.astype(int)).max(-1)
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    fg = cv2.morphologyEx((diff > 45).astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    rng = np.random.default_rng(0)
    out = []
    for name, (lo, hi) in {"green_cube": (50, 95), "yellow_cube": (18, 40)}.items():
        hue = (diff > 40) & (hsv[..., 0] >= lo) & (hsv[..., 0] <= hi) & (hsv[..., 1] > 35)
        hue = cv2.morphologyEx(hue.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        hue = cv2.morphologyEx(hue, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
        n, hl, st, _ = cv2.connectedComponentsWithStats(hue)
        seed = hl == 1 + np.argmax(st[1:, cv2.CC_STAT_AREA])
        ys, xs = np.nonzero(seed)
        blob = component_at(fg, [(xs[i], ys[i]) for i in range(0, len(ys), 7)], 0)
        # the cube's hue, plus the differing blob's pixels within 3 px of it (its pale anti-aliased edge), not the
        # blob's cast shadow farther out
        ref = fill_holes(seed | (blob & (cv2.dilate(seed.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0)))
        for k in range(3):
            out.append(MaskCase(f"real/stack_cube/{name}/{k}", "real", img, plate, ref, np.zeros_like(ref),
                                sample_click(ref, rng), sample_box(ref, rng)))
    return out


def hand_cases(data: Path) -> list[MaskCase]:
    """Real objects in real photos with hand-drawn outlines (:data:`real2sim.demos.hand_outlines.OUTLINES`), one
    person-like click each; sources missing from ``data`` are left out."""
    import cv2

    from real2sim.demos.hand_outlines import OUTLINES

    out, images = [], {}
    for name, (src, click, polygon) in OUTLINES.items():
        if src not in images:
            path = data / src
            if not path.is_file():
                continue
            images[src] = _first_frame(path)
        img = images[src]
        h, w = img.shape[:2]
        s = 8  # coverage >= 0.5 of a polygon through pixel centres, from an 8x raster
        fine = np.zeros((h * s, w * s), np.uint8)
        cv2.fillPoly(fine, [((np.asarray(polygon, float) + 0.5) * s).astype(np.int32)], 1)
        ref = cv2.resize(fine.astype(np.float32), (w, h), interpolation=cv2.INTER_AREA) >= 0.5
        ys, xs = np.nonzero(ref)
        box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
        out.append(MaskCase(f"hand/{name}", "hand", img, None, ref, np.zeros_like(ref), tuple(map(float, click)), box))
    return out


OBJECT_PLATES = {"bridge/bridge_real_1.mp4": "bridge_real_1_cleanup"}
"""The person-made plate a hand outline's source photo matches where the objects are (the Bridge clip's first frame:
its cleanup keeps the objects); any other source is a plate itself (its file's stem, ``plate_cases.real_plates``)."""
NOT_PROMPTED = ("cabinet",)
"""Outlined objects :func:`plate_objects` leaves out: the cabinet is the Google scenes' working surface."""


def plate_objects(data: Path, plate: str, size: tuple[int, int]) -> dict[str, tuple[list[float], np.ndarray]]:
    """The hand-outlined objects (:func:`hand_cases`) in the real plate named ``plate`` (a key of
    ``plate_cases.real_plates``), scaled to ``size`` ``(w, h)``: entity name (``pot``, ``bin``, ...) -> (the
    person-like click ``[x, y]``, the outline ``(h, w) bool``). Empty when the plate has none or the data is absent."""
    import cv2

    from real2sim.demos.hand_outlines import OUTLINES

    out = {}
    for case in hand_cases(data):
        name = case.name.removeprefix("hand/")
        src = OUTLINES[name][0]
        entity = name.rsplit("/", 1)[1]
        if OBJECT_PLATES.get(src, Path(src).stem) != plate or entity in NOT_PROMPTED:
            continue
        h0, w0 = case.mask.shape
        mask = cv2.resize(case.mask.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST) > 0
        out[entity] = ([case.click[0] * size[0] / w0, case.click[1] * size[1] / h0], mask)
    return out


def _first_frame(path: Path) -> np.ndarray:
    if path.suffix.lower() in (".mp4", ".avi", ".mov", ".mkv", ".webm"):
        from real2sim.capture.frames import read_video

        return read_video(path, max_frames=1).frames[0]
    return read_rgb(path)


def mask_cases(data: Path, families=None, seed: int = 0, backend: str = "auto") -> list[MaskCase]:
    """Every case: the real ones, the hand-outlined ones, then one synthetic case per real plate and family (objects
    cycle).

    ``families``: subset of ``("real", "hand") + FAMILIES`` (default all)."""
    data = Path(data)
    families = tuple(families or ("real", "hand") + FAMILIES)
    out = real_cases(data) if "real" in families else []
    out += hand_cases(data) if "hand" in families else []
    pl = plates(data)
    objs = [o for o in OBJECTS if (data / OBJECTS[o][0]).is_file()]
    if not objs:
        return out
    for fi, fam in enumerate(FAMILIES):  # seeds and objects by the family's place in FAMILIES: a subset gives the same cases
        if fam not in families:
            continue
        out += [_nth_case(data, pl, objs, fi, pi, seed, backend) for pi in range(len(pl))]
    return out


def _nth_case(data: Path, pl: dict, objs: list[str], fi: int, pi: int, seed: int, backend: str) -> MaskCase:
    """The case of family ``FAMILIES[fi]`` on the ``pi``-th plate of ``pl``: object and seed by both places."""
    name = list(pl)[pi]
    return synthetic_case(data, name, pl[name], FAMILIES[fi], objs[(pi + 3 * fi) % len(objs)],
                          seed * 100003 + 1000 * fi + pi, backend)


def family_case(data: Path, family: str, plate: str, seed: int = 0, backend: str = "auto") -> MaskCase | None:
    """The one case :func:`mask_cases` makes for ``family`` (one of :data:`FAMILIES`) on the real plate ``plate``
    with ``seed`` (the same object, image and click), without making the others; ``None`` when the plate or one of
    the benchmark's meshes is missing from ``data`` (the objects would cycle differently)."""
    data = Path(data)
    pl = plates(data)
    objs = [o for o in OBJECTS if (data / OBJECTS[o][0]).is_file()]
    if plate not in pl or len(objs) < len(OBJECTS):
        return None
    return _nth_case(data, pl, objs, FAMILIES.index(family), list(pl).index(plate), seed, backend)


@dataclass
class TouchingCase:
    """Two objects touching in one image, both absent from the plate (see :func:`touching_cases`)."""

    name: str
    """``touching/<plate>/<object>+<object>``."""
    image: np.ndarray
    """``(h, w, 3) uint8``."""
    plate: np.ndarray
    """``(h, w, 3) uint8``: the table without either object."""
    masks: tuple[np.ndarray, np.ndarray]
    """``(h, w) bool`` each object's visible pixels."""
    clicks: tuple[tuple[float, float], tuple[float, float]]
    """A click inside each object (x, y)."""


def touching_case(data: Path, plate_name: str, plate: np.ndarray, objs: tuple[str, str], seed: int,
                  backend: str = "auto") -> TouchingCase | None:
    """Two objects side by side on ``plate``, touching or overlapping by up to 15 % of the narrower one's width,
    their bases up to 15 % of the first one's height apart in depth; ``None`` when one of them ends up hidden."""
    rng = np.random.default_rng(seed)
    H, W = plate.shape[:2]
    sprites = []
    for obj in objs:
        path, up, spec = OBJECTS[obj]
        el = rng.uniform(np.radians(20), np.radians(65))
        light = np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.4, 1.2)])
        rgb, alpha, base_row = render_sprite(load_object(str(data / path), up), rng.uniform(0, 2 * np.pi), el,
                                             light / np.linalg.norm(light), spec, backend=backend)
        sprites.append(_fit_sprite(rgb, alpha, base_row, rng.uniform(0.09, 0.22) * H))
    (ha, wa), (hb, wb) = sprites[0][1].shape, sprites[1][1].shape
    xa, ya = _placement(plate, rng, ha, wa + wb)
    side = rng.choice([-1, 1])
    xb = xa + side * ((wa + wb) / 2 + rng.uniform(-0.15, 0.05) * min(wa, wb))
    yb = ya + rng.uniform(-0.15, 0.15) * ha
    places = [(xa, ya), (int(np.clip(round(xb), wb // 2 + 2, W - wb // 2 - 2)), int(np.clip(round(yb), hb + 2, H - 2)))]
    image, covs = plate, [None, None]
    for i in sorted((0, 1), key=lambda k: places[k][1]):  # the farther base first
        out, cov, _ = composite(image, *sprites[i], *places[i], Look.sample(rng))
        image, covs[i] = np.clip(np.rint(out * 255), 0, 255).astype(np.uint8), cov >= 0.5
    masks = (covs[0] & ~covs[1], covs[1]) if places[1][1] >= places[0][1] else (covs[0], covs[1] & ~covs[0])
    if not (masks[0].any() and masks[1].any()):
        return None
    image = camera_effect(image.astype(np.float32) / 255.0, "base", rng)
    return TouchingCase(f"touching/{plate_name}/{objs[0]}+{objs[1]}", image, plate, masks,
                        (sample_click(masks[0], rng), sample_click(masks[1], rng)))


def touching_cases(data: Path, seed: int = 0, backend: str = "auto") -> list[TouchingCase]:
    """One :func:`touching_case` per real plate in ``data``, the pair of objects cycling with the plate and seed."""
    data = Path(data)
    objs = [o for o in OBJECTS if (data / OBJECTS[o][0]).is_file()]
    if len(objs) < 2:
        return []
    out = []
    for pi, (name, plate) in enumerate(plates(data).items()):
        k = seed * 7 + pi
        pair = (objs[k % len(objs)], objs[(k + 1 + (k // len(objs)) % (len(objs) - 1)) % len(objs)])
        case = touching_case(data, name, plate, pair, seed * 100003 + 50000 + pi, backend)
        if case is not None:
            out.append(case)
    return out


# -- data-free cases -------------------------------------------------------------------------------------------
def procedural_plate(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A table-like plate ``(h, w, 3) uint8``: smooth colour variation, grain, a few darker stripes."""
    import cv2

    base = rng.uniform(90, 190) + rng.uniform(-25, 25, 3)
    low = cv2.resize(rng.normal(0, 12, (6, 8, 1)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)[..., None]
    low = low + cv2.resize(rng.normal(0, 4, (6, 8, 3)).astype(np.float32), (w, h), interpolation=cv2.INTER_CUBIC)
    grain = cv2.GaussianBlur(rng.normal(0, 6, (h, w, 1)).astype(np.float32), (0, 0), 1.0)[..., None]
    stripes = 8 * np.sin(np.arange(w)[None, :] / max(4.0, w / 40) + rng.uniform(0, 6))[..., None]
    return np.clip(base + low + grain + stripes, 0, 255).astype(np.uint8)


def procedural_case(seed: int = 0, size: tuple[int, int] = (240, 320), contrast: float = 1.0, noise: float = 1.5,
                    shadow: float = 0.45, colour=None, surface: str | None = None,
                    support: str | None = None) -> MaskCase:
    """A shaded upright cylinder (bright left half, dark right half) with a cast shadow on a procedural plate.

    ``contrast`` scales the object's colour distance from the local plate colour (1 = a saturated colour);
    ``surface``: a textured surface on the table (one of :data:`TEXTURES`, :func:`textured_plate`); ``support``:
    the cylinder stands on a support (one of :data:`SUPPORTS`, :func:`support_plate`), part of the plate."""
    import cv2

    rng = np.random.default_rng(seed)
    h, w = size
    plate = procedural_plate(h, w, rng)
    if surface is not None:
        plate = textured_plate(plate, rng, surface)
    oh, ow = int(rng.uniform(0.25, 0.4) * h), int(rng.uniform(0.12, 0.2) * w)
    yy, xx = np.mgrid[0:oh * 2, 0:ow * 2] / 2.0
    u = (xx - ow / 2) / (ow / 2)
    body = (np.abs(u) <= 1) & (yy >= ow * 0.15) & (yy <= oh - ow * 0.15)
    caps = ((u ** 2 + ((yy - ow * 0.15) / (ow * 0.15)) ** 2) <= 1) | ((u ** 2 + ((yy - oh + ow * 0.15) / (ow * 0.15)) ** 2) <= 1)
    sil = (body | caps).astype(np.float32)
    alpha = cv2.resize(sil, (ow, oh), interpolation=cv2.INTER_AREA)
    shade = np.clip(0.45 + 0.75 * np.cos(np.clip(np.linspace(-1, 1, ow) * 1.4 + 0.5, -np.pi / 2, np.pi / 2)), 0, 1.2)
    col = np.array(colour if colour is not None else rng.uniform(0, 1, 3) * [1, 0.5, 0.5] + [0.0, 0.1, 0.1], np.float32)
    x, yb = int(rng.uniform(0.25, 0.75) * w), int(rng.uniform(0.55, 0.85) * h)
    if support is not None:
        plate = support_plate(plate, rng, x, yb, ow, support)
    local = plate[max(0, yb - oh):yb, max(0, x - ow):x + ow].reshape(-1, 3).mean(0) / 255.0
    col = local + contrast * (col - local)
    rgb = np.clip(col[None, None, :] * shade[None, :, None] * np.ones((oh, 1, 1)), 0, 1).astype(np.float32)
    rgb[: max(2, oh // 8)] = np.clip(rgb[: max(2, oh // 8)] * 1.25 + 0.1, 0, 1)  # a lid
    look = Look(relative=False, shadow=shadow, shear=rng.uniform(0.4, 0.9) * rng.choice([-1, 1]),
                squash=rng.uniform(0.2, 0.4), softness=0.03)
    img, cov, dark = composite(plate, rgb, alpha, float(oh - 1), x, yb, look)
    mask = cov >= 0.5
    sm = (dark >= 0.5 * dark.max()) & ~mask if dark.max() > 0.05 else np.zeros_like(mask)
    out = np.clip(img * 255 + rng.normal(0, noise, img.shape), 0, 255).round().astype(np.uint8)
    return MaskCase(f"procedural/{seed}", "procedural", out, plate, mask, sm, sample_click(mask, rng), sample_box(mask, rng))
