"""Textured level of detail of rendered object visuals (real2sim/render/lod.py): the decimated copy keeps the
texture (seams included), is made only where the mesh has far more triangles than its size on the bundle's cameras
shows (scale-aware), is content-addressed and deterministic, and is what the MJCF/SAPIEN exports render."""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

pytest.importorskip("open3d", reason="the level-of-detail copy needs open3d (the 'scan' extra)")

from real2sim.core.bundle import Bundle  # noqa: E402
from real2sim.core.camera import Camera  # noqa: E402
from real2sim.core.manifest import CameraSpec, ObjectSpec, Pose, VisualSpec  # noqa: E402
from real2sim.core.meshes import load_mesh  # noqa: E402
from real2sim.core.objio import write_obj  # noqa: E402
from real2sim.render import lod  # noqa: E402

W, H, F = 640, 512, 425.0


def can_mesh(n_around: int = 128, n_up: int = 80, r: float = 0.033, h: float = 0.12):
    """A can-sized cylinder with caps: ``2 * n_around * n_up`` side faces plus the caps; the side unwrapped onto
    v in [0.3, 1] with a seam at u = 0/1, each cap in its own square of the atlas below it."""
    a = np.linspace(0, 2 * np.pi, n_around + 1)
    z = np.linspace(-h / 2, h / 2, n_up + 1)
    A, Z = np.meshgrid(a, z, indexing="ij")
    side_v = np.stack([r * np.cos(A), r * np.sin(A), Z], -1).reshape(-1, 3)
    side_uv = np.stack([A / (2 * np.pi), 0.3 + 0.7 * (Z + h / 2) / h], -1).reshape(-1, 2)
    idx = np.arange((n_around + 1) * (n_up + 1)).reshape(n_around + 1, n_up + 1)
    q = np.stack([idx[:-1, :-1], idx[1:, :-1], idx[1:, 1:], idx[:-1, 1:]], -1).reshape(-1, 4)
    faces = [np.concatenate([q[:, [0, 1, 2]], q[:, [0, 2, 3]]])]
    verts, uvs = [side_v], [side_uv]
    for sign, u0 in ((1, 0.05), (-1, 0.55)):  # caps: fans around a centre vertex
        base = sum(len(v) for v in verts)
        ring = np.stack([r * np.cos(a[:-1]), r * np.sin(a[:-1]), np.full(n_around, sign * h / 2)], -1)
        cv = np.concatenate([[[0, 0, sign * h / 2]], ring])
        cuv = np.concatenate([[[u0 + 0.12, 0.14]], np.stack([u0 + 0.12 + 0.12 * np.cos(a[:-1]),
                                                             0.14 + 0.12 * np.sin(a[:-1])], -1)])
        k = np.arange(n_around)
        fan = np.stack([np.zeros(n_around, int), 1 + k, 1 + (k + 1) % n_around], -1) + base
        faces.append(fan if sign > 0 else fan[:, ::-1])
        verts.append(cv)
        uvs.append(cuv)
    return np.concatenate(verts), np.concatenate(faces), np.concatenate(uvs)


def label_texture(size: int = 256) -> np.ndarray:
    """Smooth stripes and a band on the side's part of the atlas, a saturated colour everywhere else (so a triangle
    that samples across a seam or outside its chart shows)."""
    y, x = np.mgrid[0:size, 0:size] / size
    v = 1.0 - y  # OBJ v runs up
    side = v >= 0.3
    img = np.zeros((size, size, 3))
    img[..., 0] = 0.55 + 0.35 * np.sin(2 * np.pi * 3 * x)
    img[..., 1] = 0.35 + 0.25 * np.cos(2 * np.pi * 2 * x) * (v > 0.6)
    img[..., 2] = 0.3 + 0.3 * ((v > 0.5) & (v < 0.6))
    img[~side] = [0.1, 0.9, 0.2]
    return img.astype(np.float32)


def camera_at(distance: float) -> Camera:
    """Looking along -X at the origin from ``distance`` m, level (OpenCV axes: +Z forward, +Y down)."""
    T = np.eye(4)
    T[:3, :3] = np.array([[0, 0, -1], [1, 0, 0], [0, -1, 0]], float)  # columns: camera x, y, z in the world
    T[:3, 3] = [distance, 0.0, 0.02]
    return Camera(W, H, np.array([[F, 0, W / 2 - 0.5], [0, F, H / 2 - 0.5], [0, 0, 1]]), T)


def render(cam: Camera, v, f, uv, fuv, tex, T_obj) -> np.ndarray:
    """Unlit textured render (the project's rasteriser, bilinear lookup), (h, w, 3) float, 0 where empty."""
    import torch

    from real2sim.core.geometry import transform_points
    from real2sim.render.interp import render_texture
    from real2sim.render.raster import rasterize

    frags = rasterize(cam, transform_points(T_obj, v), np.asarray(f))
    img = render_texture(frags, uv, torch.as_tensor(np.asarray(fuv)), torch.as_tensor(tex).permute(2, 0, 1))
    return img.numpy(), frags.mask


def tilt() -> np.ndarray:
    from scipy.spatial.transform import Rotation

    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("xyz", [0.25, 0.0, 0.4]).as_matrix()
    return T


def psnr_region(a, b, region) -> float:
    mse = float(np.mean((a[region] - b[region]) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def make_bundle(tmp_path, v, f, uv, distance: float, texture: np.ndarray | None = None) -> Bundle:
    b = Bundle.create(tmp_path / "scene")
    d = b.root / "objects" / "can"
    d.mkdir(parents=True)
    write_obj(d / "visual.obj", v, f, uv)
    tex = None
    if texture is not None:
        from PIL import Image

        Image.fromarray((texture * 255).astype(np.uint8)).save(d / "texture.png")
        tex = "objects/can/texture.png"
    cam = camera_at(distance)
    b.manifest.cameras["main"] = CameraSpec(W, H, cam.K.tolist(), cam.T_world_camera.tolist())
    b.manifest.objects["can"] = ObjectSpec(pose=Pose([0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),
                                           visual=VisualSpec("objects/can/visual.obj", tex))
    b.save()
    return Bundle.load(b.root)


def test_lod_keeps_the_texture_across_seams_and_renders_like_the_full_mesh(tmp_path):
    v, f, uv = can_mesh()
    tex = label_texture()
    b = make_bundle(tmp_path, v, f, uv, 0.6, tex)
    res = lod.object_lod(b, "can")
    assert res.path is not None, res.reason
    assert res.faces * 4 <= len(f), f"{res.faces} of {len(f)} faces: a smooth can at 0.6 m needs far fewer"
    m = load_mesh(res.path)  # what an engine reads: positions, UVs (split at seams) and normals
    assert m.visual.uv is not None and len(m.visual.uv) == len(m.vertices)
    cam = camera_at(0.6)
    full, fmask = render(cam, v, f, uv, f, tex, tilt())
    low, lmask = render(cam, m.vertices, m.faces, np.asarray(m.visual.uv), m.faces, tex, tilt())
    from scipy import ndimage

    iou = (fmask & lmask).sum() / (fmask | lmask).sum()
    inner = ndimage.binary_erosion(fmask & lmask, iterations=2)  # the texture, away from the silhouette
    p_tex, p_all = psnr_region(full, low, inner), psnr_region(full, low, fmask | lmask)
    # the silhouette moves by at most a quarter pixel (each flipped edge pixel costs its full contrast against the
    # black background: the whole region's PSNR is lower, ~31 dB here; the texture inside must match closely)
    assert iou > 0.99 and p_tex > 35.0 and p_all > 28.0, (
        f"silhouette IoU {iou:.4f}, PSNR inside {p_tex:.1f} dB (bar 35), whole region {p_all:.1f} dB (bar 28)")
    # no pixel of the side shows the atlas colour outside the side's chart (a triangle sampling across a seam)
    green = (low[..., 1] > 0.8) & (low[..., 0] < 0.2)
    full_green = (full[..., 1] > 0.8) & (full[..., 0] < 0.2)
    assert (green & ~full_green).sum() <= 0.002 * fmask.sum()


def test_lod_is_content_addressed_and_deterministic(tmp_path):
    v, f, uv = can_mesh(96, 60)
    a = lod.decimate_textured(v, f, uv, f, 4e-4)
    b = lod.decimate_textured(v, f, uv, f, 4e-4)
    ta, tb = lod.obj_text(a), lod.obj_text(b)
    assert hashlib.sha256(ta.encode()).hexdigest() == hashlib.sha256(tb.encode()).hexdigest()
    bundle = make_bundle(tmp_path, v, f, uv, 0.8)
    r1 = lod.object_lod(bundle, "can")
    data = r1.path.read_bytes()
    r1.path.unlink()  # made again from the same inputs: the same name and the same bytes
    r2 = lod.object_lod(bundle, "can")
    assert r2.path == r1.path and r2.path.read_bytes() == data
    assert r1.path.parent == bundle.object_dir("can") / "lod"
    # the camera moved twice as far: a new, coarser copy replaces the old one in the bundle
    cam = camera_at(1.6)
    bundle.manifest.cameras["main"] = CameraSpec(W, H, cam.K.tolist(), cam.T_world_camera.tolist())
    r3 = lod.object_lod(bundle, "can")
    assert r3.path != r1.path and r3.faces < r1.faces
    assert sorted(p.name for p in r3.path.parent.iterdir()) == sorted([r3.path.name, r3.path.stem + ".json"])


def test_lod_is_scale_aware_and_not_made_for_small_or_close_meshes(tmp_path):
    v, f, uv = can_mesh()
    near = lod.object_lod(make_bundle(tmp_path / "near", v, f, uv, 0.3), "can")
    far = lod.object_lod(make_bundle(tmp_path / "far", v, f, uv, 1.2), "can")
    assert far.path is not None and (near.path is None or near.faces > 1.5 * far.faces), (near, far)
    # a mesh with few faces for its size on screen is left alone (no copy made at all)
    sv, sf, suv = can_mesh(24, 8)
    b = make_bundle(tmp_path / "small", sv, sf, suv, 0.6)
    small = lod.object_lod(b, "can")
    assert small.path is None and "not more than it can show" in small.reason
    assert not (b.object_dir("can") / "lod").exists()
    # a camera inside the object's reach: full detail
    close = lod.object_lod(make_bundle(tmp_path / "close", v, f, uv, 0.05), "can")
    assert close.path is None


def test_exports_render_the_lod_and_the_switch_turns_it_off(tmp_path, monkeypatch):
    v, f, uv = can_mesh()
    b = make_bundle(tmp_path, v, f, uv, 0.6)
    assert lod.render_mesh_path(b, "can") != b.path("objects/can/visual.obj")
    monkeypatch.setenv(lod.ENV_SWITCH, "off")
    assert lod.render_mesh_path(b, "can") == b.path("objects/can/visual.obj")


def test_screen_scale_follows_distance_and_focal_length():
    cam = camera_at(1.0)
    ppm, area = lod.screen_scale(np.zeros(3), 0.05, [cam], approach=1.0)
    assert ppm == pytest.approx(F / 0.95, rel=1e-6)
    assert area == pytest.approx(math.pi * (F * 0.05 / 1.0) ** 2, rel=1e-6)
    ppm2, _ = lod.screen_scale(np.zeros(3), 0.05, [cam], approach=2.0)
    assert ppm2 == pytest.approx(2 * ppm)
    behind = lod.screen_scale(np.array([3.0, 0, 0]), 0.05, [cam], approach=1.0)
    assert behind == (0.0, 0.0)
