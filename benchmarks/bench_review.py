"""Review page: slider change -> updated overlay at 640x480, server side, against a bare render of the same scene.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_review.py

'slider change' is what the Objects tab does per slider event, without the HTTP hop:
validate + lock + version check + undo snapshot + atomic save of scene.json + reload the
manifest + move the bodies of the loaded MuJoCo model + render + foreground mask + the policy's composite over
the plate (the evaluation's render settings: shadows on) + each masked object's live IoU. 'bare render' is one render of the already-posed preview model. 'naive' is
what the preview avoids: re-export the MJCF, load it in MuJoCo and render.

Joint sliders (tests/articulated.py's arm with a hand camera and drawer box, 320x240 + the 160x120 hand camera): a drawer
slider event (the set-joints edit: limits, posed mesh rewritten, saved) + the preview, and a robot joint slider event +
the preview + the mounted camera's view, against a bare render of the same preview.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(n: int = 30) -> None:
    import numpy as np
    from conftest import give_simple_collision
    from PIL import Image

    from real2sim.apps.review import edits
    from real2sim.apps.review.server import ReviewServer
    from real2sim.core.bundle import Bundle
    from real2sim.core.manifest import FrameSpec
    from real2sim.engines import get_exporter
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "scene"
        b = give_simple_collision(bundle_from_recipe(builtin_recipe("tabletop"), root))
        export_bundle(b, engines=("mjcf",))
        (root / "capture" / "frames").mkdir(parents=True)
        Image.fromarray(np.full((480, 640, 3), 120, np.uint8)).save(root / "capture" / "frames" / "000000.png")
        (root / "background").mkdir(exist_ok=True)
        Image.fromarray(np.full((480, 640, 3), 110, np.uint8)).save(root / "background" / "plate.png")
        cube_mask = np.zeros((480, 640), np.uint8)
        cube_mask[200:260, 300:360] = 255
        (root / "masks" / "000000").mkdir(parents=True, exist_ok=True)
        Image.fromarray(cube_mask).save(root / "masks" / "000000" / "cube.png")
        b.manifest.capture.frames = [FrameSpec("capture/frames/000000.png")]
        b.manifest.capture.plate = "background/plate.png"
        b.manifest.capture.masks = {"000000": {"cube": "masks/000000/cube.png"}}
        b.save()

        srv = ReviewServer(root)
        srv.picture("main", 0, "composite", 0.5)  # warm: load the model, make the GL context
        x0 = b.manifest.objects["cube"].pose.position
        slider, bare = [], []
        for i in range(n):
            ver = edits.manifest_version(root)
            t0 = time.perf_counter()
            edits.set_object_pose(root, "cube", [x0[0] + 0.001 * (i + 1), x0[1], x0[2]], [0, 0, 0.1 * i / n],
                               expected_version=ver)
            img, _ = srv.picture("main", 0, "composite", 0.5)
            slider.append(time.perf_counter() - t0)
            assert img.shape == (480, 640, 3)

        def bare_render():
            return srv._preview.render("main")

        for _ in range(n):
            t0 = time.perf_counter()
            srv.on_render_thread(bare_render)
            bare.append(time.perf_counter() - t0)

        def naive_once():
            exp = get_exporter("mjcf")
            t0 = time.perf_counter()
            exp.export(Bundle.load(root), out_dir=Path(tmp) / "naive")
            sc = exp.load(Path(tmp) / "naive")
            sc.render("main")
            sc.close()
            return time.perf_counter() - t0

        naive = [srv.on_render_thread(naive_once) for _ in range(3)]
        srv.close()

    med = statistics.median
    s, r, nv = med(slider) * 1000, med(bare) * 1000, med(naive) * 1000
    p95 = sorted(slider)[int(0.95 * (len(slider) - 1))] * 1000
    print(f"review slider change -> overlay (640x480, server side): median {s:.1f} ms, p95 {p95:.1f} ms "
          f"(target <= 300 ms: {'OK' if p95 <= 300 else 'MISSED'})")
    print(f"bare render of the same scene (preview model, the evaluation's render settings): median {r:.1f} ms")
    print(f"ratio slider change / bare render: {s / r:.2f}x")
    print(f"naive re-export + load + render: median {nv:.1f} ms -> the preview path is {nv / s:.1f}x faster")


def joints(n: int = 20) -> None:
    from articulated import robot_and_drawer_bundle

    from real2sim.apps.review import edits
    from real2sim.apps.review.server import ReviewServer

    with tempfile.TemporaryDirectory() as tmp:
        root = robot_and_drawer_bundle(Path(tmp)).root
        srv = ReviewServer(root)
        srv.picture("main", 0, "composite", 0.5)
        srv.mounted_view(None)
        drawer, robot, bare = [], [], []
        for i in range(n):
            t0 = time.perf_counter()
            edits.set_object_joints(root, "cabinet", {"drawer_joint": 0.005 * (i + 1)})
            srv.picture("main", 0, "composite", 0.5)
            drawer.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            edits.set_robot_joints(root, {"waist": 0.01 * (i + 1)})
            srv.picture("main", 0, "composite", 0.5, robot_start=True)
            srv.mounted_view("wrist")
            robot.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            srv.on_render_thread(lambda: srv._preview.render("main"))
            bare.append(time.perf_counter() - t0)
        srv.close()
    med = statistics.median
    d, r, b = med(drawer) * 1000, med(robot) * 1000, med(bare) * 1000
    print(f"drawer joint slider -> saved + preview: median {d:.1f} ms ({d / b:.1f}x a bare render, {b:.1f} ms)")
    print(f"robot joint slider -> saved + preview + mounted camera view: median {r:.1f} ms ({r / b:.1f}x a bare render)")


if __name__ == "__main__":
    main()
    joints()
