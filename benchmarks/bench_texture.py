"""Texture stage: GL vs numpy raster, pose alignment per object, texture splat per view vs Adam refinement.

    .venv/bin/python benchmarks/bench_texture.py

Ground truth: the tabletop scene rendered by MuJoCo (MJCF export) at 640x480; objects start
3 cm / 15 degrees off. Prints times and ratios measured in this run (no asserts).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402  (this folder)


def main() -> None:
    import trimesh
    from conftest import give_simple_collision

    from real2sim.core.camera import Camera
    from real2sim.core.geometry import look_at_opencv, transform_points
    from real2sim.core.manifest import CameraSpec
    from real2sim.core.meshes import load_mesh
    from real2sim.engines import get_exporter
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe
    from real2sim.render.align import AlignConfig, View, _rz, align_pose, pose_error
    from real2sim.render.mesh import load_texmesh
    from real2sim.render.raster import rasterize, resolve_backend
    from real2sim.texture.backproject import TextureConfig, backproject

    tmp = Path(tempfile.mkdtemp())
    b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), tmp / "scene"))
    c = np.array(b.manifest.objects["cube"].pose.position)
    K = np.array([[1000.0, 0, 319.5], [0, 1000.0, 239.5], [0, 0, 1]])
    for i, az in enumerate(np.radians([20, 110, 200, 290])):
        eye = c + 0.22 * np.array([0.8 * np.cos(az), 0.8 * np.sin(az), 0.6])
        b.manifest.cameras[f"close{i}"] = CameraSpec.from_camera(Camera(640, 480, K, look_at_opencv(eye, c)))
    b.save()
    ex = get_exporter("mjcf")
    scene = ex.load(ex.export(b).main_file.parent)
    renders = {cam: (scene.render(cam).astype(np.float32) / 255, {o: scene.object_mask(cam, o) for o in ("cube", "mug", "bracket", "domino", "can")})
               for cam in b.manifest.cameras}
    scene.close()
    cam = b.manifest.cameras["main"].camera()

    # 1) rasterisers on a ~20k-face mesh at 640x480
    gl = resolve_backend("auto") == "gl"
    o = b.manifest.objects["mug"]
    mug = load_mesh(b.path(o.visual.mesh))
    v, f = mug.vertices, mug.faces
    for _ in range(2):
        v, f = trimesh.remesh.subdivide(v, f)
    sphere = trimesh.creation.icosphere(5, radius=0.05)
    vs = sphere.vertices + [0.0, 0.0, 0.05]
    print(f"raster at {cam.width}x{cam.height}:")
    for name, (vv, ff) in {"mug x16": (transform_points(o.pose.matrix(), v), f), "icosphere": (vs, sphere.faces)}.items():
        t_np, _ = best_of(lambda: rasterize(cam, vv, ff, "numpy"), 1)
        line = f"  {name:9s} {len(ff):6d} faces: numpy {t_np * 1e3:8.1f} ms"
        if gl:
            rasterize(cam, vv, ff, "gl")
            t_gl, _ = best_of(lambda: rasterize(cam, vv, ff, "gl"), 5)
            line += f", gl {t_gl * 1e3:6.1f} ms, ratio numpy/gl = {t_np / t_gl:.1f}x"
        print(line)

    # 2) pose alignment per object, 3 cm / 15 deg off, one 640x480 frame
    img, masks = renders["main"]
    print("pose alignment (start 3 cm / 15 deg off; target <= 2 s per object):")
    for oid in ("cube", "mug", "bracket", "domino"):
        ob = b.manifest.objects[oid]
        m = load_mesh(b.path(ob.visual.mesh))
        vv, ff = m.vertices, m.faces
        if oid == "mug":
            vv, ff = v, f  # the 7.7k-face subdivided mug
        T = ob.pose.matrix()
        T0 = T.copy()
        T0[:3, 3] += 0.03 * np.array([np.cos(1.0), np.sin(1.0), 0])
        T0[:3, :3] = _rz(np.radians(15)) @ T[:3, :3]
        view = [View(cam, masks[oid], img, "main")]
        t, res = best_of(lambda: align_pose(vv, ff, view, T0, 0.0, AlignConfig(init="bundle")), 1)
        dt, dr = pose_error(res.pose, T)
        ts, res_s = best_of(lambda: align_pose(vv, ff, view, None, 0.0, AlignConfig(init="search")), 1)
        print(f"  {oid:8s} {len(ff):5d} faces: {t:5.2f} s ({res.iterations} rounds), error {dt * 1e3:.3f} mm / {dr:.3f} deg, "
              f"IoU {res.ious[0]:.4f}; from a global search {ts:5.2f} s, IoU {res_s.ious[0]:.4f}")

    # 3) texture: one splat pass per view vs 100 Adam iterations; 'gather' (texels look up) vs 'splat' (pixels deposit)
    from PIL import Image

    from real2sim.core.imaging import psnr
    from real2sim.render.mesh import ensure_uv

    gain_free_gt = np.asarray(Image.open(b.path(b.manifest.objects["cube"].visual.texture)).convert("RGB"), np.float32) / 255
    ob = b.manifest.objects["cube"]
    mesh = load_texmesh(b.path(ob.visual.mesh))
    views = [View(b.manifest.cameras[k].camera(), renders[k][1]["cube"], renders[k][0], k) for k in renders]
    print(f"texture of the cube from {len(views)} views (its 6 faces share one UV square):")
    for size in (128, 512, 1024):
        for method in ("gather", "splat"):
            cfg = TextureConfig(size=size, method=method)
            t_pass, res = best_of(lambda: backproject(mesh, ob.pose.matrix(), views, cfg), 2 if size < 1024 else 1)
            line = (f"  {size:4d}^2 {method:6s}: {np.median(res.per_view_seconds) * 1e3:7.1f} ms per view (target <= 100), "
                    f"whole pass with fill {t_pass:5.2f} s, coverage {res.coverage:.3f}")
            if size == 128:
                import cv2

                gt = cv2.resize(gain_free_gt, (size, size), interpolation=cv2.INTER_AREA)
                gain = np.median(res.texture[res.seen] / np.maximum(gt[res.seen], 1e-3), 0)  # lighting of the renders
                line += f", PSNR vs the true texture x lighting {psnr(res.texture, gt * gain, res.seen):.1f} dB"
            print(line)
    size = 512
    cfg_r = TextureConfig(size=size, refine_iters=100)
    t_ref, res_r = best_of(lambda: backproject(mesh, ob.pose.matrix(), views, cfg_r), 1)
    t_sp, _ = best_of(lambda: backproject(mesh, ob.pose.matrix(), views, TextureConfig(size=size)), 1)
    print(f"  {size}^2: 100 Adam iterations {res_r.seconds_refine:.2f} s vs the splat pass {t_sp:.2f} s: "
          f"ratio Adam/splat = {res_r.seconds_refine / t_sp:.0f}x")
    # a one-layer xatlas layout: the mug, unwrapped, textured from the main view
    ob = b.manifest.objects["mug"]
    from real2sim.render.mesh import TexMesh

    mug0 = load_texmesh(b.path(ob.visual.mesh))
    mug_uv, _ = ensure_uv(TexMesh(mug0.vertices, mug0.faces))  # drop its UVs: xatlas unwraps
    mv = [View(cam, renders["main"][1]["mug"], renders["main"][0], "main")]
    for size in (512, 1024):
        t_pass, res = best_of(lambda: backproject(mug_uv, ob.pose.matrix(), mv, TextureConfig(size=size)), 3)
        print(f"mug (xatlas, {len(mug_uv.faces)} faces) {size}^2, 1 view ({res.method}): "
              f"{np.median(res.per_view_seconds) * 1e3:.1f} ms per view, whole pass with fill {t_pass:.2f} s, "
              f"coverage {res.coverage:.2f}")


if __name__ == "__main__":
    main()
