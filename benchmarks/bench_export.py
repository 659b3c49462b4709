"""Export of a 10-object scene to MJCF, USD and SAPIEN (each loaded back), against copying the same files.

    .venv/bin/python benchmarks/bench_export.py
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def ten_object_bundle(root: Path):
    from conftest import give_simple_collision

    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    base = builtin_recipe().parent
    recipe = json.loads(builtin_recipe().read_text())
    objs = recipe["objects"]
    extra = {}
    for i, oid in enumerate(["cube", "can", "mug", "bracket", "domino"]):
        o = dict(objs[oid])
        o["pose"] = {"position": [objs[oid]["pose"]["position"][0] - 0.25, objs[oid]["pose"]["position"][1] + 0.05 * (i - 2),
                                  objs[oid]["pose"]["position"][2]], "quaternion_wxyz": objs[oid]["pose"]["quaternion_wxyz"]}
        extra[f"{oid}_2"] = o
    objs.update(extra)
    for o in objs.values():
        o["mesh"] = str(base / o["mesh"])
        o["texture"] = str(base / o["texture"])
    (root / "recipe.json").write_text(json.dumps(recipe))
    b = bundle_from_recipe(root / "recipe.json", root / "scene")
    return give_simple_collision(b)  # the copies get single convex hulls, the originals primitives


def main() -> None:
    from real2sim.engines import get_exporter

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundle = ten_object_bundle(tmp)
        n = len([o for o in bundle.manifest.objects.values()])
        times = {}
        for name in ("mjcf", "usd", "sapien"):
            get_exporter(name).export(bundle)  # warm imports
            t0 = time.perf_counter()
            get_exporter(name).export(bundle)
            times[name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(3):
            dst = tmp / f"copy{i}"
            shutil.copytree(bundle.root / "objects", dst)
        copy = (time.perf_counter() - t0) / 3
        total = sum(times.values())
        print(f"export of a {n}-object scene (each format loaded back in its engine):")
        for k, v in times.items():
            print(f"  {k:7s} {v:6.3f} s")
        print(f"  total   {total:6.3f} s  (target < 5 s)")
        print(f"  ratio: all three exports / plain copy of the bundle's object files = {total / copy:.1f}x (copy {copy * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
