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
    return _collide_plate_export(b, plate, engines, tasks=TASKS)


def _collide_plate_export(b, plate: bool, engines, tasks: dict | None = None):
    """Simple collision, ``tasks`` (when given) and a noise plate (when asked and the bundle has a camera), saved,
    reloaded and exported to ``engines``."""
    from conftest import give_simple_collision

    from real2sim.core.bundle import Bundle
    from real2sim.core.manifest import Manifest
    from real2sim.pipeline import export_bundle

    give_simple_collision(b)
    d = b.manifest.to_dict()
    if tasks is not None:
        d["tasks"] = tasks
    if plate and b.manifest.cameras:
        _noise_plate(b, d)
    b.manifest = Manifest.from_dict(d, str(b.root / "scene.json"))
    b.save()
    b = Bundle.load(b.root)
    export_bundle(b, engines=engines)
    return b


def _noise_plate(b, d: dict) -> None:
    """A blocky noise background plate for the bundle's first camera, named in the manifest dict ``d``."""
    import cv2

    cam = b.manifest.cameras[sorted(b.manifest.cameras)[0]]
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (max(1, cam.height // 8), max(1, cam.width // 8), 3), dtype=np.uint8)
    img = cv2.resize(img, (cam.width, cam.height), interpolation=cv2.INTER_NEAREST)
    (b.root / "background").mkdir(exist_ok=True)
    cv2.imwrite(str(b.root / "background" / "plate.png"), img[..., ::-1])
    d["capture"]["plate"] = "background/plate.png"


def make_scene_bundle(root: Path, scene: str, engines=("mjcf",)):
    """The registry scene ``scene`` (its recipe, robot and tasks as shipped) with simple collision and a noise plate
    when it has a camera, exported to ``engines``."""
    from real2sim.pipeline.recipe import bundle_from_recipe
    from real2sim.scenes import scene_recipe

    b = bundle_from_recipe(scene_recipe(scene), Path(root) / scene, overwrite=True)
    return _collide_plate_export(b, True, engines)


INF_BOX_WARNINGS = ("A Box observation space minimum value is -infinity", "A Box observation space maximum value is infinity")
UNBOUNDED_KEYS = {"qpos", "objects", "depth"}
"""The only observation keys of Real2SimEnv allowed infinite bounds, each for a reason:
``qpos``: the engines hold joint limits softly (MuJoCo's WidowX fingers leave their URDF range by up to 0.12 m under
random joint targets); ``objects`` (privileged): free bodies, and parked distractors fall freely outside the table;
``depth``: the engines' far planes differ (MuJoCo's is the model extent times ``vis.map.zfar``, not the camera's far)."""
NO_SPEC_WARNING = "Not able to test alternative render modes due to the environment not having a spec"


def check_env_strict(env, allow_no_spec: bool = False) -> None:
    """gymnasium's real ``check_env`` on ``env`` (unwrapped; built by gymnasium.make it also builds one env per render
    mode and closes twice); fails on every warning it raises but the justified infinite bounds of UNBOUNDED_KEYS (and
    the 'no spec' note when ``allow_no_spec``: an env built directly, reused because a new one costs seconds)."""
    import warnings

    from gymnasium.spaces import Box
    from gymnasium.utils.env_checker import check_env

    assert allow_no_spec or env.spec is not None
    unbounded = {k for k, s in env.observation_space.spaces.items()
                 if isinstance(s, Box) and not (np.isfinite(s.low).all() and np.isfinite(s.high).all())}
    assert unbounded <= UNBOUNDED_KEYS, f"unjustified infinite bounds on {unbounded - UNBOUNDED_KEYS}"
    assert np.isfinite(env.action_space.low).all() and np.isfinite(env.action_space.high).all()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    allowed = (INF_BOX_WARNINGS if unbounded else ()) + ((NO_SPEC_WARNING,) if allow_no_spec else ())
    left = [str(w.message) for w in caught if not any(m in str(w.message) for m in allowed)]
    assert not left, left
