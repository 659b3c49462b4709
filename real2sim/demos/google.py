"""SIMPLER's Google Robot scenes rebuilt from their real overlays: pick coke can (three can orientations), move near.

Input (``shared_data_dir``, the layout of ``../shared/data``): ``google_robot/description`` (the robot),
``google_robot/overlays/*.png`` (SIMPLER's person-made background plates of the real evaluation scenes),
``objects/coke_can`` and ``google_robot/objects/*`` (meshes). The scene recipes are
``real2sim/scenes/google/<scene>.json``: SIMPLER's robot placement (position, yaw), its rest pose (arm and head
joints), the table height, the objects and their placements, the orientation variants and the task.

What :func:`build_google_scene` does::

    recipe (table, objects, Google Robot at SIMPLER's placement and rest pose)
    -> camera = robot base pose x forward kinematics of link_camera at the head joints (SIMPLER's intrinsics),
       a fixed bundle camera 'main' (the head does not move during an episode)
    -> init (the overlay, resized to the camera's 640 x 512 as SIMPLER does, is frame 0 and the plate)
    -> table check: the cabinet top segmented in the overlay vs a rectangle of the cabinet's known size fitted on
       the table plane through this camera (IoU: how well the camera explains the real table's perspective)
    -> collision (primitives) -> inertial -> export (MJCF, SAPIEN, USD; each loaded back)
    -> first frame composited (plate + rendered robot and objects) next to the overlay (reports/google.png)
    -> scripted oracle in MuJoCo and SAPIEN through the Google Robot's end-effector delta-pose control at 3 Hz.

The overlays are plates: the real robot was removed from them by hand (as the objects were), so the rendered
robot cannot be compared with the real robot's silhouette in them; the table top is what is left to check the
camera against (:func:`table_check`).

``python -m real2sim.demos.google SHARED_DATA OUT --scene pick_coke_can [--variant all] [--episodes N]``.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from real2sim import capture, collision, pipeline
from real2sim.collision.stage import collision_stage, inertial_stage
from real2sim.core.bundle import Bundle, atomic_write_json
from real2sim.core.camera import Camera
from real2sim.core.errors import Real2SimError, UnknownNameError
from real2sim.core.geometry import make_pose, quat_wxyz_to_matrix
from real2sim.core.imaging import iou, read_rgb, write_rgb
from real2sim.core.objio import write_obj
from real2sim.engines import simulator_names
from real2sim.evaluation.envs.runner import evaluate, write_sim_csv
from real2sim.pipeline.recipe import bundle_from_recipe
from real2sim.scenes import BUILTIN_DIR

log = logging.getLogger("real2sim.demos.google")

RECIPES_DIR = BUILTIN_DIR / "google"
ROBOT_DIR = "google_robot/description"
URDF = "google_robot_meta_sim_fix_wheel_fix_fingertip.urdf"
CAMERA_MOUNT = "overhead_camera"
STAGES = ["camera + table", "bundle", "collision + export", "first frame", "evaluate"]
"""The steps of :func:`build_google_scene`, in order (``reports/google.json``'s ``stage_seconds``)."""
PLATE_INTERPOLATION = "linear"  # SIMPLER: cv2.resize(overlay, (640, 512)) with OpenCV's default (bilinear)


def scene_names() -> list[str]:
    """The Google scene recipes shipped in ``real2sim/scenes/google``."""
    return sorted(p.stem for p in RECIPES_DIR.glob("*.json"))


def load_scene(name: str) -> dict:
    """The recipe of Google scene ``name`` (``real2sim/scenes/google/<name>.json``). A drawer scene's variants are
    made from its ``placements`` (SIMPLER's robot placements, each with its overlay; or ``placements_from`` another
    recipe) and its ``drawers``: ``<drawer>_<placement>`` (``variant_names: "placement"``: the placement alone)."""
    path = RECIPES_DIR / f"{name}.json"
    if not path.is_file():
        raise UnknownNameError("Google scene", name, scene_names())
    spec = json.loads(path.read_text())
    if "placements_from" in spec:
        spec["placements"] = load_scene(spec["placements_from"])["placements"]
    if "placements" in spec and "variants" not in spec:
        names = spec.get("placement_names", list(spec["placements"]))
        by_placement = spec.get("variant_names") == "placement"
        spec["variants"] = {
            (p if by_placement else f"{d}_{p}"): {"placement": p, "drawer": d,
                                                   "instruction": spec["instruction"].format(drawer=d)}
            for d in spec["drawers"] for p in names}
    return spec


def _fill_drawer(v, drawer: str):
    """``{drawer}`` in every string (keys too) of ``v`` replaced by ``drawer``."""
    if isinstance(v, str):
        return v.replace("{drawer}", drawer)
    if isinstance(v, dict):
        return {_fill_drawer(k, drawer): _fill_drawer(x, drawer) for k, x in v.items()}
    if isinstance(v, list):
        return [_fill_drawer(x, drawer) for x in v]
    return v


def resolve_variant(spec: dict, variant: str) -> dict:
    """The recipe with ``variant``'s placement applied (a drawer scene: the robot's pose and the overlay of the
    placement, ``{drawer}`` filled in the cabinet's joints and the task)."""
    var = spec["variants"][variant]
    if "placement" not in var:
        return spec
    pl = spec["placements"][var["placement"]]
    out = _fill_drawer({k: v for k, v in spec.items() if k not in ("variants", "placements")}, var["drawer"])
    out["variants"] = {variant: var}
    out["overlay"] = pl["overlay"]
    out["robot"] = {"name": spec["robot"]["name"], "position": [*pl["xy"], spec["robot"]["z"]],
                    "yaw": float(np.pi + pl["yaw"])}  # SIMPLER: euler(0, 0, yaw) * the base turned by pi
    return out


def demo_scenes() -> dict[str, str]:
    """``real2sim demo --scene`` name (the recipe's ``name``, e.g. ``google_pick_coke_can``) -> Google scene name."""
    return {load_scene(n)["name"]: n for n in scene_names()}


DATA_ENV = "REAL2SIM_DATA"
"""Environment variable naming the shared data folder (``../shared/data``) for the scenes built from real data."""


def default_data_dir() -> Path:
    """``$REAL2SIM_DATA`` when set, else ``../shared/data`` relative to the working directory."""
    import os

    return Path(os.environ.get(DATA_ENV) or Path("..") / "shared" / "data")


def required_files(spec: dict) -> list[str]:
    """The files (relative to the shared data folder) a Google scene recipe reads: the robot's URDF, the overlay and
    every object's mesh and collision mesh, the cabinet's URDF. ``spec`` is one variant's (:func:`resolve_variant`)."""
    rel = [f"{ROBOT_DIR}/{URDF}", spec["overlay"]]
    for od in spec["objects"].values():
        rel += [od["mesh"]] + ([od["collision"]] if od.get("collision") else [])
    if spec.get("cabinet"):
        rel.append(spec["cabinet"]["urdf"])
    return rel


def check_shared_data(shared_data_dir, scene: str, variant: str | None = None) -> Path:
    """The resolved shared data folder, after checking it holds every file Google scene ``scene`` reads (for
    ``variant``, or every variant when None); otherwise a :class:`Real2SimError` naming the folder, the missing
    files and the fix."""
    spec = load_scene(scene)
    given = Path(shared_data_dir).expanduser()
    data = given.resolve()
    shown = str(data) if given.is_absolute() else f"{given} (= {data})"
    how = (f"pass --data PATH (or set {DATA_ENV}) to the shared data folder that holds google_robot/ and objects/ "
           "(../shared/data next to the repository; see google_robot/README.md there)")
    if not data.is_dir():
        raise Real2SimError(f"scene '{spec['name']}' is built from the shared data, but {shown} is not a folder: {how}")
    needed = dict.fromkeys(r for v in ([variant] if variant else spec["variants"])
                           for r in required_files(resolve_variant(spec, v)))
    missing = [r for r in needed if not (data / r).is_file()]
    if missing:
        raise Real2SimError(f"scene '{spec['name']}': {shown} lacks {len(missing)} file(s) it needs "
                            f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}): {how}")
    return data


def scene_variants(scene: str, variant: str | None = None) -> list[str]:
    """The variants ``variant`` names in Google scene ``scene``: itself, every one for ``'all'``, the recipe's
    default for None; an unknown one raises :class:`Real2SimError` listing the scene's variants."""
    spec = load_scene(scene)
    variants = list(spec["variants"]) if variant == "all" else [variant or spec["default_variant"]]
    for v in variants:
        if v not in spec["variants"]:
            raise Real2SimError(f"scene '{spec['name']}' has no variant '{v}'; variants: "
                                f"{', '.join(spec['variants'])} (or 'all')")
    return variants


def _yaw_quat(yaw: float) -> list[float]:
    return [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]


def robot_base_pose(scene: dict) -> np.ndarray:
    """SIMPLER's robot placement: the base at ``robot.position`` turned by ``robot.yaw`` about world z."""
    r = scene["robot"]
    return make_pose(r["position"], _yaw_quat(float(r["yaw"])))


def overlay_camera(scene: dict, robot_def, qpos=None) -> Camera:
    """The fixed camera of an overlay: robot base pose x FK of the head camera at the head joints (SIMPLER's
    intrinsics from the robot definition's ``overhead_camera`` mount)."""
    from real2sim.robots.kinematics import Kinematics, camera_mount_pose

    kin = Kinematics(robot_def)
    q = np.asarray(robot_def.default_qpos if qpos is None else qpos, float)
    _, intr = robot_def.mounted_cameras()[CAMERA_MOUNT]
    T = robot_base_pose(scene) @ camera_mount_pose(kin, CAMERA_MOUNT, q)
    return Camera(intr.width, intr.height, np.asarray(intr.K, float), T)


def read_overlay(path: Path, width: int, height: int) -> np.ndarray:
    """The overlay as uint8 RGB at the camera's size (SIMPLER's overlays are 320 x 256; it resizes them)."""
    import cv2

    img = read_rgb(path)[..., :3]
    if img.shape[:2] != (height, width):
        img = cv2.resize(img, (width, height), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(img)


# -- the table check ----------------------------------------------------------------------------------------------
def table_top_mask(plate: np.ndarray) -> np.ndarray:
    """The cabinet top in an overlay (bool mask at the plate's size).

    The top's shading varies across it (a lamp's reflection, a brightness gradient), so a colour threshold leaks
    or falls short; its outline is long straight edges, but its far edge is faint against the wall. So: long
    straight edges (Canny with thresholds from the image's median gradient, Hough segments) close a region around
    the image centre; GrabCut, seeded with that region as probable top, the centre as sure top and the rest as
    background, then learns the top's colours against the wall's and cuts at the faint edge. The result, convex
    (a top seen in perspective is a convex quadrilateral), is the mask.
    """
    import cv2

    gray = cv2.cvtColor(plate, cv2.COLOR_RGB2GRAY)
    blur = cv2.GaussianBlur(gray, (5, 5), 1.5)
    mag = np.hypot(cv2.Sobel(blur, cv2.CV_32F, 1, 0), cv2.Sobel(blur, cv2.CV_32F, 0, 1))
    med = float(np.median(mag))
    edges = cv2.Canny(blur, max(4.0, med), max(8.0, 3.0 * med))
    h, w = gray.shape
    lines = cv2.HoughLinesP(edges, 1, np.pi / 360, threshold=60, minLineLength=w // 8, maxLineGap=12)
    wall = np.zeros((h, w), np.uint8)
    for x0, y0, x1, y1 in (lines.reshape(-1, 4) if lines is not None else []):
        cv2.line(wall, (int(x0), int(y0)), (int(x1), int(y1)), 1, 3)
    _, lab = cv2.connectedComponents((wall == 0).astype(np.uint8), connectivity=4)
    region = np.zeros((h, w), np.uint8)  # convex: a reflection's straight edge inside the top must not cut it
    cv2.fillPoly(region, [cv2.convexHull(np.argwhere(lab == lab[h // 2, w // 2])[:, ::-1].astype(np.int32))], 1)
    gm = np.where(region > 0, cv2.GC_PR_FGD, cv2.GC_BGD).astype(np.uint8)
    gm[h // 2 - h // 12: h // 2 + h // 12, w // 2 - w // 10: w // 2 + w // 10] = cv2.GC_FGD
    cv2.grabCut(plate, gm, None, np.zeros((1, 65)), np.zeros((1, 65)), 5, cv2.GC_INIT_WITH_MASK)
    m = ((gm == cv2.GC_FGD) | (gm == cv2.GC_PR_FGD)).astype(np.uint8)
    m = cv2.morphologyEx(m, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (9, 9)))
    _, lab = cv2.connectedComponents(m)
    m = lab == lab[h // 2, w // 2]
    out = np.zeros((h, w), np.uint8)
    pts = np.argwhere(m)[:, ::-1].astype(np.int32)
    if len(pts) >= 3:
        cv2.fillPoly(out, [cv2.convexHull(pts)], 1)
    return out.astype(bool)


def rectangle_mask(cam: Camera, centre_xy, yaw: float, size, height: float) -> np.ndarray:
    """Mask of a horizontal rectangle (``size`` = x, y extents in its frame) at ``height`` seen by ``cam``."""
    import cv2

    c, s = np.cos(yaw), np.sin(yaw)
    hx, hy = size[0] / 2, size[1] / 2
    pts = np.array([[centre_xy[0] + c * u * hx - s * v * hy, centre_xy[1] + s * u * hx + c * v * hy, height]
                    for u, v in ((-1, -1), (1, -1), (1, 1), (-1, 1))])
    uv = cam.project(pts)
    out = np.zeros((cam.height, cam.width), np.uint8)
    cv2.fillPoly(out, [np.round(uv * 8).astype(np.int32)], 1, shift=3)
    return out.astype(bool)


def fit_table(mask: np.ndarray, cam: Camera, size, height: float, guess_xy) -> dict:
    """The pose (x, y, yaw) of a table top of known ``size`` at ``height`` whose image best covers ``mask``
    (IoU, Nelder-Mead from a few yaws). With the right camera a rigid rectangle of the right size explains the
    real top's perspective: the IoU says how well the camera does."""
    from scipy.optimize import minimize

    best = None
    for a0 in np.linspace(-0.3, 0.3, 5):
        x0 = np.array([guess_xy[0], guess_xy[1], a0])
        simplex = np.array([x0, x0 + [0.05, 0, 0], x0 + [0, 0.05, 0], x0 + [0, 0, 0.1]])
        res = minimize(lambda x: -iou(rectangle_mask(cam, x[:2], x[2], size, height), mask), x0,
                       method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-5, "initial_simplex": simplex})
        if best is None or res.fun < best.fun:
            best = res
    x, y, yaw = (float(v) for v in best.x)
    return {"xy": [round(x, 4), round(y, 4)], "yaw": round(yaw, 4), "iou": round(-float(best.fun), 4)}


def table_check(plate: np.ndarray, cam: Camera, table: dict, guess_xy) -> tuple[dict, np.ndarray, np.ndarray]:
    """(report, segmented top, fitted rectangle's mask): the camera checked against the real cabinet top."""
    seg = table_top_mask(plate)
    rep = {"segmented_px": int(seg.sum())}
    if seg.sum() < 0.02 * seg.size:
        rep["error"] = "no table top found in the overlay"
        return rep, seg, np.zeros_like(seg)
    fit = fit_table(seg, cam, table["size"], float(table["height"]), guess_xy)
    rep.update(fit)
    return rep, seg, rectangle_mask(cam, fit["xy"], fit["yaw"], table["size"], float(table["height"]))


def refine_head(seg: np.ndarray, scene: dict, robot_def, table: dict, start: dict, span: float = 0.1) -> dict:
    """The head pan/tilt (within +-``span`` rad of SIMPLER's) and table pose that best explain the segmented top:
    the camera refined against the real table (the overlays hold no robot to refine it against). Returns the
    joints, the table pose and the IoU."""
    from scipy.optimize import minimize

    from real2sim.robots.kinematics import Kinematics, camera_mount_pose

    kin = Kinematics(robot_def)
    q0 = np.asarray(robot_def.default_qpos, float)
    _, intr = robot_def.mounted_cameras()[CAMERA_MOUNT]
    base = robot_base_pose(scene)
    size, height = table["size"], float(table["height"])

    def cam_at(dpan, dtilt):
        q = q0.copy()
        q[7] += dpan
        q[8] += dtilt
        return Camera(intr.width, intr.height, np.asarray(intr.K, float), base @ camera_mount_pose(kin, CAMERA_MOUNT, q))

    def cost(x):
        if np.any(np.abs(x[3:]) > span):
            return 1.0
        return -iou(rectangle_mask(cam_at(x[3], x[4]), x[:2], x[2], size, height), seg)

    x0 = np.array([*start["xy"], start["yaw"], 0.0, 0.0])
    simplex = np.array([x0] + [x0 + d for d in np.diag([0.03, 0.03, 0.05, 0.02, 0.02])])
    res = minimize(cost, x0, method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-6, "maxiter": 2000,
                                                              "initial_simplex": simplex})
    x = res.x
    return {"head_pan": round(float(q0[7] + x[3]), 5), "head_tilt": round(float(q0[8] + x[4]), 5),
            "delta_pan": round(float(x[3]), 5), "delta_tilt": round(float(x[4]), 5),
            "xy": [round(float(x[0]), 4), round(float(x[1]), 4)], "yaw": round(float(x[2]), 4),
            "iou": round(-float(res.fun), 4), "camera": cam_at(x[3], x[4])}


# -- the recipe ---------------------------------------------------------------------------------------------------
def _box_obj(path: Path, size) -> None:
    import trimesh

    box = trimesh.creation.box(extents=size)
    write_obj(path, np.asarray(box.vertices), np.asarray(box.faces))


def _resting_z(mesh_path: Path, quat, table_height: float) -> float:
    from real2sim.core.meshes import load_mesh

    v = np.asarray(load_mesh(mesh_path).vertices, float) @ quat_wxyz_to_matrix(quat).T
    return float(table_height - v[:, 2].min())


def write_recipe(scene: dict, variant: str, data: Path, inputs: Path, table_pose: dict) -> Path:
    """The scene recipe for ``variant`` (absolute mesh paths into ``data``): the table slab at ``table_pose``, the
    objects resting on it at the recipe's placements and the variant's orientations, the robot, the task."""
    if "cabinet" in scene:  # the articulated cabinet is the table (its top plate)
        cab = scene["cabinet"]
        urdf = (data / cab["urdf"]).resolve()
        if not urdf.is_file():
            raise FileNotFoundError(f"{urdf} is missing: point shared_data_dir at ../shared/data (see its README.md)")
        th = float(scene.get("table_height", 0.882))
        objects = {"cabinet": {"urdf": str(urdf), "joints": cab.get("joints", {}),
                               "joint_friction": cab["joint_friction"], "joint_damping": cab["joint_damping"],
                               "collide_visuals": cab.get("collide_visuals", []),
                               "pose": {"position": cab["position"], "quaternion_wxyz": [1.0, 0.0, 0.0, 0.0]}}}
    else:
        table = scene["table"]
        th, thick = float(table["height"]), float(table["thickness"])
        _box_obj(inputs / "table.obj", (table["size"][0], table["size"][1], thick))
        objects = {"table": {"mesh": "table.obj", "rgba": table["rgba"], "fixed": True,
                             "pose": {"position": [*table_pose["xy"], th - thick / 2],
                                      "quaternion_wxyz": _yaw_quat(table_pose["yaw"])}}}
    var = scene["variants"][variant]
    for oid, od in scene["objects"].items():
        mesh = (data / od["mesh"]).resolve()
        if not mesh.is_file():
            raise FileNotFoundError(f"{mesh} is missing: point shared_data_dir at ../shared/data (see its README.md)")
        ov = var.get("objects", {}).get(oid, {})
        q = ov.get("quaternion_wxyz", od.get("quaternion_wxyz", [1.0, 0, 0, 0]))
        z = _resting_z(mesh, q, th) + 0.001
        objects[oid] = {"mesh": str(mesh), "density": od["density"], "friction": od.get("friction", 0.5),
                        "pose": {"position": [*od["xy"], z], "quaternion_wxyz": q}}
    t = scene["task"]
    task = {"instruction": var["instruction"], "time_limit_s": t["time_limit_s"], "success": t["success"],
            "init": t["init"]}
    r = scene["robot"]
    recipe = {"name": f"{scene['name']}_{variant}", "table_height": th,
              "description": f"{scene['description']} ({variant})",
              "physics": {"timestep": 1.0 / 513.0, "gravity": [0, 0, -9.81]},
              "objects": objects,
              "robot": {"name": r["name"], "base_pose": {"position": r["position"],
                                                         "quaternion_wxyz": _yaw_quat(float(r["yaw"]))}},
              "tasks": {t["id"]: task}}
    path = inputs / "recipe.json"
    path.write_text(json.dumps(recipe, indent=1))
    return path


# -- the scene ----------------------------------------------------------------------------------------------------
def build_google_scene(shared_data_dir, out_dir, scene: str = "pick_coke_can", variant: str | None = None,
                       episodes: int = 5, engines=None, evaluate_in=None, obs_mode: str = "state",
                       refine_camera: bool = False, policy: str | None = None,
                       on_stage=None) -> tuple[Bundle, dict]:
    """Build, export and evaluate one Google scene into ``out_dir`` (the bundle is ``out_dir/scene``).

    ``episodes`` per engine of the scripted oracle (seeds 0..episodes-1; in pick coke can the seed walks SIMPLER's
    5 x 5 grid of can positions); ``evaluate_in``: the simulators to evaluate in (default: every one; empty: none).
    ``refine_camera``: use the camera refined against the real table top (head pan/tilt, :func:`refine_head`)
    instead of SIMPLER's (both are reported). ``policy``: the policy spec (default: the recipe's scripted oracle).
    ``on_stage(name)`` is called as each of :data:`STAGES` starts. A shared data folder without the files the scene
    reads raises :class:`Real2SimError` naming them (:func:`check_shared_data`). Returns (bundle, report); the report is also ``reports/google.json``, the picture ``reports/google.png``.
    """
    from real2sim.robots import get_robot

    t_all = time.perf_counter()
    spec = load_scene(scene)
    variant = variant or spec["default_variant"]
    if variant not in spec["variants"]:
        raise UnknownNameError(f"variant of Google scene '{scene}'", variant, spec["variants"])
    spec = resolve_variant(spec, variant)
    data, out = check_shared_data(shared_data_dir, scene, variant), Path(out_dir).resolve()
    desc = data / ROBOT_DIR
    overlay = data / spec["overlay"]
    notify = on_stage or (lambda name: None)
    notify(STAGES[0])
    import os

    os.environ.setdefault("REAL2SIM_GOOGLE_ROBOT", str(desc))
    robot = get_robot(spec["robot"]["name"])
    inputs = out / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()

    def step(name):
        nonlocal t0
        seconds[name] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        log.info("google %s/%s: %s done (%.1f s)", scene, variant, name, seconds[name])
        if name != STAGES[-1]:
            notify(STAGES[STAGES.index(name) + 1])

    # 1) camera from SIMPLER's placement + head joints; the overlay at its size; the table checked against it
    cam = overlay_camera(spec, robot)
    plate = read_overlay(overlay, cam.width, cam.height)
    write_rgb(inputs / "overlay.png", plate)
    objs_xy = np.array([o["xy"] for o in spec["objects"].values()], float).reshape(-1, 2)
    box = spec["task"]["init"].get("objects", {})
    pts = [*objs_xy] + [p for o in box.values() for p in np.asarray(o["xy"], float)]
    guess = np.mean(pts, 0) if pts else np.zeros(2)
    if "cabinet" in spec:  # the drawer overlays were painted without the cabinet: nothing to check the camera on
        trep = {"error": "the overlay holds no cabinet (painted out with the robot): no table check",
                "not_applicable": True}
        seg = fitted = np.zeros((cam.height, cam.width), bool)
    else:
        trep, seg, fitted = table_check(plate, cam, spec["table"], guess)
    table_pose = {"xy": trep.get("xy", [float(guess[0]), float(guess[1])]), "yaw": trep.get("yaw", 0.0)}
    if "cabinet" in spec:
        pass
    elif "error" in trep or trep["iou"] < 0.8:
        log.warning("table top: %s; the table is placed under the objects instead", trep)
        table_pose = {"xy": [float(guess[0]), float(guess[1])], "yaw": 0.0}
    trep["used_pose"] = table_pose
    if "error" not in trep:  # the camera refined against the table: head pan/tilt within 0.1 rad of SIMPLER's
        ref = refine_head(seg, spec, robot, spec["table"], trep)
        refined_cam = ref.pop("camera")
        trep["refined"] = ref
        if refine_camera:  # the refined camera, and the table where it sees it
            cam = refined_cam
            trep["used_camera"] = "refined"
            table_pose = trep["used_pose"] = {"xy": ref["xy"], "yaw": ref["yaw"]}
            fitted = rectangle_mask(cam, ref["xy"], ref["yaw"], spec["table"]["size"], float(spec["table"]["height"]))
    trep.setdefault("used_camera", "simpler")
    (inputs / "camera.json").write_text(json.dumps(
        {"width": cam.width, "height": cam.height, "fx": cam.fx, "fy": cam.fy, "cx": cam.cx, "cy": cam.cy,
         "distortion": [0, 0, 0, 0, 0], "T_world_camera": np.round(cam.T_world_camera, 9).tolist()}, indent=1))
    step("camera + table")

    # 2) bundle: recipe, then the overlay as frame 0 and as the plate (it is a person-made plate)
    recipe = write_recipe(spec, variant, data, inputs, table_pose)
    bundle = bundle_from_recipe(recipe, out / "scene", overwrite=True)
    bundle = capture.init_bundle(bundle.root, inputs / "overlay.png", camera=inputs / "camera.json", overwrite=True)
    m = bundle.manifest
    m.capture.plate = m.capture.frames[0].image
    m.provenance["plate"] = f"SIMPLER's person-made overlay {spec['overlay']} (resized to {cam.width}x{cam.height})"
    pan, tilt = ((trep["refined"]["head_pan"], trep["refined"]["head_tilt"]) if trep["used_camera"] == "refined"
                 else (robot.default_qpos[7], robot.default_qpos[8]))
    m.provenance["camera"] = (f"robot base {spec['robot']['position']} yaw {spec['robot']['yaw']:.4f} x FK of "
                              f"{CAMERA_MOUNT} at the rest pose, head pan/tilt {pan:.4f}/{tilt:.4f} "
                              f"({trep['used_camera']})")
    m.provenance["google_scene"] = {"scene": scene, "variant": variant, "source": spec["source"]}
    bundle.save()
    step("bundle")

    # 3) collision (SIMPLER's own collision meshes where the recipe names them), inertial, export
    collision_stage(bundle, collision.CollisionConfig(method="primitive"))
    bundle = Bundle.load(bundle.root)
    for oid, od in spec["objects"].items():
        if od.get("collision"):
            use_collision_mesh(bundle, oid, data / od["collision"])
    inertial_stage(bundle)
    bundle = Bundle.load(bundle.root)
    results = pipeline.export_bundle(bundle, engines=engines)
    exports = {k: (str(v.main_file) if hasattr(v, "main_file") else f"failed: {v}" if isinstance(v, Exception)
                   else str(v)) for k, v in results.items()}
    step("collision + export")

    # 4) the first frame composited, next to the overlay
    frame, fg = first_frame(bundle, seed=int(spec.get("first_frame_seed", 0)))
    picture = bundle.reports_dir() / "google.png"
    write_picture(picture, plate, frame, seg, fitted, f"{scene} ({variant})", trep)
    step("first frame")

    # 5) the scripted oracle in both engines
    rep = {"scene": scene, "variant": variant, "overlay": str(overlay), "camera": {
        "K": np.round(cam.K, 4).tolist(), "T_world_camera": np.round(cam.T_world_camera, 6).tolist()},
        "table_check": trep, "exports": exports, "success": {}}
    task_id = spec["task"]["id"]
    policy = policy or spec["variants"][variant].get("policy") or spec.get("policy", "scripted")
    rep["policy"] = policy
    for engine in (simulator_names() if evaluate_in is None else evaluate_in):
        res_dir = bundle.root / "results" / engine
        s = evaluate(bundle.root, task_id, policy, episodes, workers=1, backend=engine, out_dir=res_dir,
                     obs_mode=obs_mode)
        rows = [json.loads(x) for x in (res_dir / "episodes.jsonl").read_text().splitlines() if x.strip()]
        rep["success"][engine] = {"rate": round(s.rate, 3), "trials": s.trials,
                                  "steps": [r.get("steps") for r in rows]}
        write_sim_csv(res_dir / "episodes.jsonl", res_dir / "sim.csv")
    step("evaluate")
    rep["foreground_px"] = int(fg.sum())
    rep["stage_seconds"] = seconds
    rep["total_seconds"] = round(time.perf_counter() - t_all, 2)
    rep["picture"] = bundle.rel(picture)
    atomic_write_json(bundle.reports_dir() / "google.json", rep)
    return bundle, rep


def use_collision_mesh(bundle: Bundle, oid: str, mesh: Path) -> None:
    """Object ``oid`` collides with the convex hull of ``mesh`` (SIMPLER's ``collision.obj``) instead of the hull the
    collision stage made from its visual mesh. Measured: the opened coke can lying on the table with the hull made from
    its visual mesh (1147 vertices) rocks and rolls away in SAPIEN by itself (+-12 cm in 1 s; nothing damps rolling in
    PhysX) and SAPIEN's oracle picked it in 1 of 25 cells; with SIMPLER's (404 vertices) it stays within 2 mm."""
    import trimesh

    if not mesh.is_file():
        raise FileNotFoundError(f"{mesh} is missing: the recipe of this scene names it as '{oid}''s collision mesh")
    hull = trimesh.load(mesh, force="mesh").convex_hull
    rel = f"objects/{oid}/collision/hull_000.obj"
    out = bundle.path(rel)
    for old in out.parent.glob("hull_*.obj"):
        old.unlink()
    write_obj(out, np.asarray(hull.vertices), np.asarray(hull.faces))
    o = bundle.manifest.objects[oid]
    o.collision.kind, o.collision.hulls, o.collision.size = "hulls", [rel], []
    bundle.manifest.provenance[f"collision.{oid}"] = f"convex hull of {mesh.name} (SIMPLER's collision mesh)"
    bundle.save()


def first_frame(bundle: Bundle, backend: str | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The env's first composited observation (plate + simulated robot and objects) and its foreground mask."""
    from real2sim.evaluation.envs.env import Real2SimEnv

    env = Real2SimEnv(bundle.root, backend=backend, obs_mode="composited", camera="main", render_mode=None)
    try:
        obs, _ = env.reset(seed=seed)
        plate = env.plate
        fg = np.any(obs["image"] != plate, axis=-1)
        return obs["image"], fg
    finally:
        env.close()


def write_picture(path: Path, plate, frame, seg, fitted, title: str, trep: dict) -> None:
    """overlay | composited first frame | table check (segmented top vs fitted rectangle)."""
    import cv2

    from real2sim.render.overlay import titled

    check = plate.copy()
    check[seg & ~fitted] = (255, 60, 60)
    check[fitted & ~seg] = (60, 60, 255)
    check[seg & fitted] = (check[seg & fitted] * 0.5 + np.array([0, 110, 0])).astype(np.uint8)
    tiles = [cv2.resize(t, (320, 256), interpolation=cv2.INTER_AREA) for t in (plate, frame, check)]
    after = trep.get("refined", {}).get("iou")
    labels = ["real overlay (SIMPLER's plate)", "composited first frame",
              f"table top IoU {trep['iou']:.3f}" + (f", head refined {after:.3f}" if after else "") if "iou" in trep
              else "no table check: " + ("the overlay holds no cabinet" if "cabinet" in trep.get("error", "")
                                         else trep.get("error", "?"))[:60]]
    write_rgb(path, titled(np.concatenate(tiles, 1), f"{title}: table top real (red), known size via camera (blue), "
                           "both (green)", labels))


def main(argv=None) -> int:
    """``python -m real2sim.demos.google SHARED_DATA OUT [--scene S] [--variant V|all] [--episodes N]``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m real2sim.demos.google", description=__doc__.split("\n")[0])
    p.add_argument("shared_data", help="the shared data folder (../shared/data)")
    p.add_argument("out", help="output folder (one bundle per variant: OUT/<scene>_<variant>/scene)")
    p.add_argument("--scene", default="pick_coke_can", choices=scene_names())
    p.add_argument("--variant", default=None, help="a variant of the scene (pick_coke_can: horizontal, vertical, "
                   "standing), or 'all'")
    p.add_argument("--episodes", type=int, default=5, help="scripted-oracle episodes per engine")
    p.add_argument("--refine-camera", action="store_true", help="use the camera refined against the real table top "
                   "(head pan/tilt) instead of SIMPLER's")
    p.add_argument("--policy", default=None, help="policy spec (default: the recipe's scripted oracle)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for v in scene_variants(a.scene, a.variant):
        bundle, rep = build_google_scene(a.shared_data, Path(a.out) / f"{a.scene}_{v}", a.scene, v,
                                         episodes=a.episodes, refine_camera=a.refine_camera, policy=a.policy)
        log.info("%s/%s: table IoU %s, oracle %s; picture %s", a.scene, v, rep["table_check"].get("iou"),
                 {k: s["rate"] for k, s in rep["success"].items()}, bundle.reports_dir() / "google.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
