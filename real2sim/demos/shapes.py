"""Procedurally generated objects for alignment evidence: shapes no one tuned the search on.

Every function returns ``(vertices (V, 3) float, faces (F, 3) int)`` in metres, a closed outward-facing surface
with its own (arbitrary) object frame, deterministic for a given ``seed``:

- :func:`carrot`: a bent, tapered tube with an uneven cross-section (elongated, many resting poses of similar
  probability; the one it lies in on a real table is often not among the most probable few);
- :func:`plate`: a shallow dish (flat, rotationally symmetric);
- :func:`can`: a cylinder (symmetric about its axis; two resting families: upright and on its side);
- :func:`mug`: a cylinder with a handle (non-convex, one visible feature breaks the symmetry);
- :func:`wedge`: a flat, irregular slab (sponge-like, few distinct sides);
- :func:`spoon`: a shallow oval bowl on a long, flat, thin handle (lying on its back);
- :func:`marker`: a capsule-ended pen (a long thin cylinder).
"""
from __future__ import annotations

import numpy as np

SHAPES = ("carrot", "plate", "can", "mug", "wedge")


def _tube(centres: np.ndarray, frames: np.ndarray, radii: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A closed tube: ``centres (n, 3)``, per-ring ``frames (n, 2, 3)`` (two unit axes spanning the ring's plane) and
    ``radii (n, m)`` (ring ``i``'s radius at angle ``2 pi j / m``); both ends capped by a centre vertex."""
    n, m = radii.shape
    ang = 2 * np.pi * np.arange(m) / m
    ring = (np.cos(ang)[None, :, None] * frames[:, None, 0] + np.sin(ang)[None, :, None] * frames[:, None, 1])
    verts = centres[:, None] + radii[..., None] * ring  # (n, m, 3)
    v = np.concatenate([verts.reshape(-1, 3), centres[:1], centres[-1:]])
    faces = []
    for i in range(n - 1):
        for j in range(m):
            a, b = i * m + j, i * m + (j + 1) % m
            c, d = a + m, b + m
            faces += [(a, b, d), (a, d, c)]
    s, e = n * m, n * m + 1
    for j in range(m):
        faces.append((s, (j + 1) % m, j))
        faces.append((e, (n - 1) * m + j, (n - 1) * m + (j + 1) % m))
    f = np.array(faces, np.int64)
    return _outward(v, f)


def _outward(v: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flip every face when the signed volume is negative (consistent winding assumed)."""
    tri = v[f]
    vol = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    return (v, f[:, ::-1].copy()) if vol < 0 else (v, f)


def carrot(length: float = 0.16, radius: float = 0.016, bend: float = 0.02, seed: int = 0):
    """A bent, tapered root with an uneven (lumpy, slightly flattened) cross-section and a blunt top."""
    rng = np.random.default_rng(seed)
    n, m = 40, 24
    t = np.linspace(0, 1, n)
    centres = np.stack([length * (t - 0.5), bend * np.sin(np.pi * t), np.zeros(n)], 1)
    tangent = np.gradient(centres, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    z = np.array([0, 0, 1.0])
    a = np.cross(tangent, z)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = np.cross(a, tangent)
    frames = np.stack([a, b], 1)
    profile = radius * (0.18 + 0.82 * np.clip(1 - t, 0, 1) ** 0.6) * np.minimum(1.0, 0.55 + 3 * t)
    ang = 2 * np.pi * np.arange(m) / m
    lumps = 1 + 0.07 * np.cos(3 * ang + rng.uniform(0, 2 * np.pi)) + 0.05 * np.cos(5 * ang + rng.uniform(0, 2 * np.pi))
    flatten = 1 + 0.18 * np.cos(2 * (ang - 0.4))
    radii = profile[:, None] * lumps[None] * flatten[None] * (1 + 0.03 * rng.standard_normal((n, 1)))
    return _tube(centres, frames, radii)


def _lathe(profile_rz: np.ndarray, m: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """Surface of revolution about +Z of a closed profile ``(n, 2)`` of (radius, height), first and last radius 0."""
    n = len(profile_rz)
    ang = 2 * np.pi * np.arange(m) / m
    centres = np.stack([np.zeros(n), np.zeros(n), profile_rz[:, 1]], 1)
    frames = np.tile(np.array([[[1.0, 0, 0], [0, 1.0, 0]]]), (n, 1, 1))
    radii = np.repeat(np.maximum(profile_rz[:, :1], 1e-5), m, 1)
    v, f = _tube(centres, frames, radii)
    del ang
    return v, f


def plate(radius: float = 0.09, height: float = 0.018, rim: float = 0.012):
    """A shallow dish: flat foot, sloped wall, a rim ``rim`` wide, hollow top ``height`` high."""
    prof = np.array([[1e-5, 0], [radius * 0.55, 0], [radius * 0.6, 0.004], [radius - rim, height * 0.8],
                     [radius, height], [radius - 0.004, height], [radius - rim, height * 0.9],
                     [radius * 0.6, 0.006], [1e-5, 0.006]])
    return _lathe(prof)


def can(radius: float = 0.033, height: float = 0.12):
    """A closed cylinder with bevelled edges."""
    e = 0.003
    prof = np.array([[1e-5, 0], [radius - e, 0], [radius, e], [radius, height - e], [radius - e, height],
                     [1e-5, height]])
    return _lathe(prof)


def mug(radius: float = 0.04, height: float = 0.09, handle: float = 0.03):
    """A cylinder with a torus-segment handle on its +X side (one mesh of two closed parts)."""
    vb, fb = can(radius, height)
    n, m = 24, 12
    t = np.linspace(-0.45 * np.pi, 0.45 * np.pi, n)
    r_path = height * 0.32
    centres = np.stack([radius - 0.004 + handle * np.cos(t) * 0.9, np.zeros(n), height / 2 + r_path * np.sin(t)], 1)
    tangent = np.gradient(centres, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    a = np.tile([0, 1.0, 0], (n, 1))
    b = np.cross(tangent, a)
    vh, fh = _tube(centres, np.stack([a, b], 1), np.full((n, m), 0.006))
    return np.concatenate([vb, vh]), np.concatenate([fb, fh + len(vb)])


def wedge(size=(0.09, 0.06, 0.025), slope: float = 0.4, seed: int = 1):
    """A sponge-like slab: a box whose top slopes along X and whose corners are moved a little (irregular)."""
    rng = np.random.default_rng(seed)
    sx, sy, sz = size
    v = np.array([[x, y, z] for z in (0, 1) for y in (-1, 1) for x in (-1, 1)], float) * [sx / 2, sy / 2, 1.0]
    v[:, 2] *= sz
    v[4:, 2] -= slope * sz * (v[4:, 0] + sx / 2) / sx
    v[:, :2] += rng.uniform(-0.004, 0.004, (8, 2))
    f = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4], [2, 6, 3], [3, 6, 7],
                  [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]])
    v, f = _outward(v, f)
    return _subdivide(v, f, 3)


def _along_x(centres_x: np.ndarray, half_width: np.ndarray, half_height: np.ndarray, z: np.ndarray, m: int = 20):
    """A straight tube along +X with elliptic rings: ring ``i`` at ``(centres_x[i], 0, z[i])`` with half-axes
    ``half_width[i]`` (Y) and ``half_height[i]`` (Z)."""
    n = len(centres_x)
    centres = np.stack([centres_x, np.zeros(n), z], 1)
    frames = np.tile(np.array([[[0, 1.0, 0], [0, 0, 1.0]]]), (n, 1, 1))
    ang = 2 * np.pi * np.arange(m) / m
    # an ellipse as a radius per angle of the ring
    radii = 1 / np.sqrt((np.cos(ang)[None] / half_width[:, None]) ** 2 + (np.sin(ang)[None] / half_height[:, None]) ** 2)
    return _tube(centres, frames, radii)


def spoon(length: float = 0.17, bowl: float = 0.045, seed: int = 0):
    """A spoon lying on its back: an oval bowl ``bowl`` long (0.55x as wide, a quarter as deep) joined to a flat
    handle ``length - bowl`` long, 6-9 mm wide and 2 mm thick that rises a little towards its end."""
    rng = np.random.default_rng(seed)
    n = 48
    t = np.linspace(0, 1, n)
    x = length * t
    in_bowl = x < bowl
    u = np.clip(x / bowl, 0, 1)
    bw = np.where(in_bowl, 0.55 * bowl / 2 * np.sqrt(np.clip(1 - (2 * u - 1) ** 2, 0.02, 1)), 0.0)
    hw = 0.003 + 0.0015 * rng.uniform(0.5, 1) * (x - bowl) / max(length - bowl, 1e-6)
    half_w = np.maximum(bw, np.where(in_bowl, 0, hw))
    half_w[0] = half_w[-1] = 1e-4
    half_h = np.where(in_bowl, np.maximum(bw * 0.45, 0.001), 0.001)
    z = np.where(in_bowl, half_h, 0.004 + 0.012 * np.clip((x - bowl) / (length - bowl), 0, 1) ** 1.5)
    return _along_x(x - length / 2, half_w, half_h, z)


def marker(length: float = 0.14, radius: float = 0.008):
    """A pen: a cylinder with rounded ends lying along X."""
    n = 40
    t = np.linspace(0, 1, n)
    end = np.minimum(t, 1 - t) * length / radius  # distance from the nearer end in radii
    r = radius * np.sqrt(np.clip(1 - np.clip(1 - end, 0, 1) ** 2, 1e-4, 1))
    return _along_x(length * (t - 0.5), r, r, np.full(n, radius))


def _subdivide(v, f, times: int):
    """Midpoint subdivision (more triangles, same shape) so that renders and contours have detail to work on."""
    import trimesh

    m = trimesh.Trimesh(v, f, process=False)
    for _ in range(times):
        m = m.subdivide()
    return np.asarray(m.vertices, float), np.asarray(m.faces, np.int64)


def make_shape(name: str, seed: int = 0):
    """``(vertices, faces)`` of one of :data:`SHAPES`."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; one of {', '.join(SHAPES)}")
    if name == "carrot":
        return carrot(seed=seed)
    return {"plate": plate, "can": can, "mug": mug, "wedge": wedge}[name]()
