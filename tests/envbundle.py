"""A tabletop bundle with a WidowX, a synthetic background plate and tasks, for the env/eval tests."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROBOT = {"name": "widowx250s", "base_pose": {"position": [-0.35, 0.0, 0.0], "quaternion_wxyz": [1, 0, 0, 0]}}
TASKS = {
    "lift_cube": {"instruction": "pick up the cube", "time_limit_s": 8.0,
                  "success": {"type": "lifted", "object": "cube", "height": 0.04},
                  "init": {"objects": {"cube": {"xy": [[0.06, -0.14], [0.14, -0.08]], "yaw": [-0.4, 0.4]}}}},
    "push_cube": {"instruction": "push the cube forward", "time_limit_s": 8.0,
                  "success": {"type": "near", "object": "cube", "position": [0.1, 0.0, 0.0], "distance": 0.035,
                              "xy_only": True},
                  "init": {"objects": {"cube": {"xy": [[0.08, -0.14], [0.12, -0.1]], "yaw": [-0.2, 0.2]}}}},
}


def make_env_bundle(root: Path, plate: bool = True, engines=("mjcf", "sapien")):
    """Recipe bundle + robot + simple collision + tasks (+ a noise plate), exported to ``engines``."""
    import cv2
    from conftest import give_simple_collision

    from real2sim.core.bundle import Bundle
    from real2sim.core.manifest import Manifest
    from real2sim.pipeline import export_bundle
    from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = builtin_recipe().parent
    recipe = json.loads(builtin_recipe().read_text())
    for obj in recipe["objects"].values():
        obj["mesh"] = str(base / obj["mesh"])
        obj["texture"] = str(base / obj["texture"])
    recipe["robot"] = ROBOT
    (root / "recipe.json").write_text(json.dumps(recipe))
    b = bundle_from_recipe(root / "recipe.json", root / "bundle", overwrite=True)
    give_simple_collision(b)
    d = b.manifest.to_dict()
    d["tasks"] = TASKS
    if plate:
        cam = b.manifest.cameras["main"]
        rng = np.random.default_rng(0)
        img = rng.integers(0, 256, (cam.height // 8, cam.width // 8, 3), dtype=np.uint8)
        img = cv2.resize(img, (cam.width, cam.height), interpolation=cv2.INTER_NEAREST)
        (b.root / "background").mkdir(exist_ok=True)
        cv2.imwrite(str(b.root / "background" / "plate.png"), img[..., ::-1])
        d["capture"]["plate"] = "background/plate.png"
    b.manifest = Manifest.from_dict(d, str(b.root / "scene.json"))
    b.save()
    b = Bundle.load(b.root)
    export_bundle(b, engines=engines)
    return b
