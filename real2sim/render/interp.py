"""Differentiable attribute interpolation and texture sampling in torch (the "interpolate" and "texture" steps).

Rasterisation (texture.raster) is not differentiable; what flows gradients is what
comes after it, as in nvdiffrast: vertex attributes interpolated with the fixed
barycentrics, and a texture looked up with ``grid_sample`` (bilinear). Gradients reach
the texture and the attributes.

Texture images are ``(C, H, W)`` with row 0 = the top (v = 1): the OBJ/PNG convention
the exporters use. UVs follow OBJ (v up).
"""
from __future__ import annotations

import numpy as np

from real2sim.core.errors import require
from real2sim.render.raster import Fragments


def _torch():
    return require("torch", "texture", "torch")


def pixel_index(frags: Fragments, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """(ys, xs) of covered pixels (optionally only where ``mask`` is true)."""
    m = frags.mask if mask is None else (frags.mask & np.asarray(mask, bool))
    return np.nonzero(m)


def interpolate(attr, faces, face_id, bary):
    """Interpolate per-vertex ``attr (V, C)`` over pixels with ``face_id (N,)`` and ``bary (N, 3)``: ``(N, C)``.

    ``attr`` and ``bary`` may be torch tensors requiring grad; ``faces`` ``(F, 3)`` indexes ``attr``.
    """
    torch = _torch()
    attr = attr if isinstance(attr, torch.Tensor) else torch.as_tensor(np.asarray(attr), dtype=torch.float32)
    faces = torch.as_tensor(np.asarray(faces), dtype=torch.long)
    fid = torch.as_tensor(np.asarray(face_id), dtype=torch.long)
    bary = bary if isinstance(bary, torch.Tensor) else torch.as_tensor(np.asarray(bary), dtype=attr.dtype)
    corners = attr[faces[fid]]  # (N, 3, C)
    return (corners * bary[..., None]).sum(-2)


def uv_to_grid(uv):
    """OBJ UVs (..., 2) -> ``grid_sample`` coordinates (x = 2u - 1, y = 1 - 2v), align_corners=False."""
    torch = _torch()
    return torch.stack([uv[..., 0] * 2 - 1, 1 - uv[..., 1] * 2], -1)


def sample_texture(texture, uv, mode: str = "bilinear"):
    """Look up ``texture (C, H, W)`` at UVs ``(N, 2)`` -> ``(N, C)``; differentiable in both (bilinear, border clamp)."""
    torch = _torch()
    F = torch.nn.functional
    grid = uv_to_grid(uv).reshape(1, 1, -1, 2).to(texture.dtype)
    out = F.grid_sample(texture[None], grid, mode=mode, padding_mode="border", align_corners=False)
    return out[0, :, 0].T


def render_texture(frags: Fragments, uv, face_uv, texture, background=None):
    """Full-image textured render ``(H, W, C)`` from fragments: interpolate UVs, sample the texture."""
    torch = _torch()
    ys, xs = pixel_index(frags)
    h, w = frags.face_id.shape
    C = texture.shape[0]
    img = torch.zeros((h, w, C), dtype=texture.dtype) if background is None else torch.as_tensor(background).clone()
    if len(ys):
        uvp = interpolate(torch.as_tensor(np.asarray(uv), dtype=texture.dtype), face_uv, frags.face_id[ys, xs],
                          frags.bary[ys, xs])
        img[torch.as_tensor(ys), torch.as_tensor(xs)] = sample_texture(texture, uvp)
    return img
