"""Synthetic clips with a known robot: the robot rendered moving along a joint trajectory over a background plate.

The truth of every frame is known (joints, silhouette), so robot tracking can be graded against it. The robot is
drawn as the real WidowX looks in the Bridge frames: near-black links (the robot definition's appearance) with
Lambert shading and a little specular sheen, a soft shadow on the table plane, sensor noise and per-frame
exposure drift. Optional disturbances: an occluder (a grey block, as a passing hand) pasted over the arm in some
frames, and a stretch where the arm lifts mostly out of view.

>>> clip = make_robot_clip(read_rgb("bridge_real_1_cleanup.png"), bridge_camera(), n_frames=16, seed=0)
>>> clip.frames.shape, clip.masks.shape, clip.joints.shape   # (16, h, w, 3) uint8, (16, h, w) bool, (16, dof)
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.geometry import camera_pose_from_convention, make_pose
from real2sim.core.manifest import RobotSpec
from real2sim.render.raster import rasterize
from real2sim.render.robot import RobotModel, link_id_image, load_robot_model, posed_mesh
from real2sim.robots import get_robot

log = logging.getLogger(__name__)

BRIDGE_CAMERA = {"width": 640, "height": 480, "fx": 623.588, "fy": 623.588, "cx": 319.501, "cy": 239.545,
                 "position": (0.0, -0.16, 0.336), "quaternion_wxyz": (0.909182, -0.0819809, 0.347277, 0.214629)}
"""The Bridge camera of ``../shared/data/README.md`` (SAPIEN convention pose, WidowX base frame)."""
LIGHT = np.array([0.15, -0.1, 1.0]) / np.linalg.norm([0.15, -0.1, 1.0])
"""Direction towards the (distant) light in the world."""


def bridge_camera(width: int = 640, height: int = 480) -> Camera:
    """The Bridge camera (README intrinsics and pose), scaled to ``width`` x ``height``."""
    c = BRIDGE_CAMERA
    sx, sy = width / c["width"], height / c["height"]
    K = np.array([[c["fx"] * sx, 0, (c["cx"] + 0.5) * sx - 0.5], [0, c["fy"] * sy, (c["cy"] + 0.5) * sy - 0.5], [0, 0, 1]])
    T = camera_pose_from_convention(make_pose(c["position"], c["quaternion_wxyz"]), "sapien")
    return Camera(width, height, K, T)


def mounted_camera(robot: str, width: int = 640, height: int = 512) -> Camera:
    """The robot's own camera (the first of its definition's mounted cameras: the Google Robot's head camera) at
    the robot's default pose, its intrinsics scaled to ``width`` x ``height``."""
    from real2sim.robots.scene import link_poses

    rdef = get_robot(robot)
    link, cam = next(iter(rdef.mounted_cameras().values()))  # (cam's pose: in the link's frame)
    model = load_robot_model(RobotSpec(rdef.name))
    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, model.default_q)))
    K = np.diag([width / cam.width, height / cam.height, 1.0]) @ np.asarray(cam.K, float)
    return Camera(width, height, K, model.base @ poses[link] @ cam.T_world_camera)


@dataclass
class RobotClip:
    """A synthetic clip and its truth."""

    frames: np.ndarray
    """``(n, h, w, 3) uint8``."""
    masks: np.ndarray
    """``(n, h, w) bool`` the robot's visible pixels (occluder excluded)."""
    joints: np.ndarray
    """``(n, dof)`` joint vector per frame (``RobotDef.joint_names`` order)."""
    plate: np.ndarray
    """``(h, w, 3) uint8`` the background without robot, shadow or noise."""
    camera: Camera
    robot: str
    occluded: list[int] = field(default_factory=list)
    """Frames with the occluder pasted over the arm."""
    out_of_view: list[int] = field(default_factory=list)
    """Frames where the lift of ``out_of_view`` leaves less than half of the arm's pixels in the image."""


def procedural_plate(width: int = 640, height: int = 480, seed: int = 0) -> np.ndarray:
    """``(h, w, 3) uint8`` a wood-like table under a grey wall, for machines without the shared data."""
    import cv2

    rng = np.random.default_rng(seed)
    y = np.linspace(0, 1, height)[:, None]
    x = np.linspace(0, 1, width)[None]
    grain = cv2.GaussianBlur(rng.normal(0, 1, (height, width)).astype(np.float32), (0, 0), sigmaX=25, sigmaY=2)
    grain /= grain.std() + 1e-6
    table = np.stack([170 + 14 * grain, 100 + 9 * grain, 60 + 6 * grain], -1)
    wall = np.stack([np.full_like(grain, 150), np.full_like(grain, 150), np.full_like(grain, 155)], -1)
    edge = 0.25 + 0.1 * x
    img = np.where((y < edge)[..., None], wall, table) * (0.85 + 0.3 * y[..., None])
    return np.clip(img + rng.normal(0, 2, img.shape), 0, 255).astype(np.uint8)


def robot_box(mask: np.ndarray, pad: float = 0.05) -> list[int]:
    """``[x0, y0, x1, y1]`` the box a person would draw around the robot's ``(h, w) bool`` mask: its extent and
    ``pad`` times the image's size (sqrt of its area) more on each side, clipped to the image."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    p = pad * np.sqrt(h * w)
    return [int(max(0, xs.min() - p)), int(max(0, ys.min() - p)), int(min(w, xs.max() + p)), int(min(h, ys.max() + p))]


def shade_robot(model: RobotModel, camera: Camera, q, rgba: dict, default=(0.08, 0.08, 0.08, 1.0),
                light=LIGHT) -> tuple[np.ndarray, np.ndarray]:
    """(``(h, w, 3) float`` shaded robot colours in [0, 1], ``(h, w) bool`` robot pixels) at joints ``q``.

    Flat-shaded faces: albedo x (ambient 0.6 + diffuse 1.2) plus a grey specular lobe seen from the camera."""
    verts, faces, owner, names = posed_mesh(model, q, camera.T_world_camera[:3, 3])  # (a head camera: not its head)
    fr = rasterize(camera, verts, faces)
    mask = fr.mask
    fid = np.maximum(fr.face_id, 0)
    tri = verts[faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
    view = camera.T_world_camera[:3, 3] - tri.mean(1)
    view /= np.linalg.norm(view, axis=1, keepdims=True) + 1e-12
    n = np.where((n * view).sum(1, keepdims=True) < 0, -n, n)  # faces are two-sided
    diffuse = np.clip(n @ light, 0, None)
    half = light[None] + view
    half /= np.linalg.norm(half, axis=1, keepdims=True)
    spec = np.clip((n * half).sum(1), 0, None) ** 24
    albedo = np.array([list(rgba.get(nm, default))[:3] for nm in names], np.float32)[owner]
    col = albedo * (0.6 + 1.2 * diffuse[:, None]) + 0.35 * spec[:, None]
    img = np.where(mask[..., None], col[fid], 0.0)
    return img.astype(np.float32), mask


def table_shadow(model: RobotModel, camera: Camera, q, table_z: float = 0.0, light=LIGHT) -> np.ndarray:
    """``(h, w) bool`` where the robot's shadow (cast along ``-light``) falls on the plane ``z = table_z``."""
    verts, faces, _, _ = posed_mesh(model, q)
    above = verts[:, 2] - table_z
    flat = verts - (np.maximum(above, 0) / light[2])[:, None] * light[None]
    flat[:, 2] = table_z
    return rasterize(camera, flat, faces).mask


def _visible_fraction(model: RobotModel, camera: Camera, q, border: float = 0.08) -> float:
    """Fraction of the image's inner part (``border`` of each side cut away) rows the robot reaches into, times
    whether its lowest point (the gripper in a tabletop view) is inside that inner part: 0 when out of view."""
    small = camera.scaled(0.125)
    m = link_id_image(model, small, q)[0] >= 0
    if not m.any():
        return 0.0
    ys, xs = np.nonzero(m)
    h, w = m.shape
    lo = ys.max()
    inside = border * h < lo < (1 - border) * h and border * w < np.median(xs[ys >= lo - 2]) < (1 - border) * w
    return float(inside) * lo / h


def joint_trajectory(robot: str, n: int, seed: int = 0, out_of_view: tuple[int, int] | None = None,
                     model: RobotModel | None = None, camera: Camera | None = None) -> np.ndarray:
    """``(n, dof)`` a smooth trajectory from the robot's default pose through random arm poses near it.

    Waypoints every 6 frames: each arm joint within +-0.35 rad (+-0.5 for the first, the base yaw) of the
    default, the gripper opening in [0, 1]; cosine-eased between. With ``model`` and ``camera`` given, a waypoint
    is drawn again until the gripper is inside the image (at least 8 % from its edges) and below a third of its
    height. ``out_of_view = (start, stop)``: the second arm joint (the shoulder) is pulled back by up to 0.9 rad
    over those frames, lifting the arm out of a tabletop view."""
    r = get_robot(robot)
    rng = np.random.default_rng(seed)
    q0 = np.asarray(r.default_qpos, float)
    n_way = max(2, int(np.ceil(n / 6)) + 1)
    span = np.full(r.n_arm, 0.35)
    span[0] = 0.5
    way = [q0]
    while len(way) < n_way:
        q = q0.copy()
        q[:r.n_arm] += rng.uniform(-1, 1, r.n_arm) * span
        q[r.n_arm:] = r.gripper_targets(rng.uniform(0, 1))
        if model is None or camera is None or _visible_fraction(model, camera, q) > 0.33:
            way.append(q)
    t = np.linspace(0, n_way - 1, n)
    k = np.minimum(t.astype(int), n_way - 2)
    s = 0.5 - 0.5 * np.cos(np.pi * (t - k))
    traj = np.array([way[i] * (1 - a) + way[i + 1] * a for i, a in zip(k, s)])
    if out_of_view is not None:
        a, b = out_of_view
        ramp = np.sin(np.pi * np.clip((np.arange(n) - a + 1) / (b - a + 2), 0, 1))
        traj[:, 1] -= 0.9 * ramp
    return traj


def _occluder(h: int, w: int, mask: np.ndarray, rng) -> np.ndarray:
    """``(h, w) bool`` a rectangle over about half of the robot's pixels (a hand passing in front)."""
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return np.zeros((h, w), bool)
    cy, cx = int(np.median(ys)), int(np.median(xs))
    bh, bw = int(0.6 * (ys.max() - ys.min() + 1)), int(0.6 * (xs.max() - xs.min() + 1))
    y0, x0 = max(0, cy - bh // 2 + rng.integers(-5, 6)), max(0, cx - bw // 2 + rng.integers(-5, 6))
    out = np.zeros((h, w), bool)
    out[y0:y0 + bh, x0:x0 + bw] = True
    return out


def make_robot_clip(plate: np.ndarray, camera: Camera | None = None, n_frames: int = 16, robot: str = "widowx",
                    seed: int = 0, noise: float = 3.0, exposure: float = 0.04, shadow: float = 0.3,
                    occlude: tuple[int, ...] = (), out_of_view: tuple[int, int] | None = None,
                    table_z: float = 0.0) -> RobotClip:
    """Render ``robot`` moving along :func:`joint_trajectory` over ``plate`` ``(h, w, 3) uint8``.

    ``camera``: the view (default the Bridge camera at the plate's size); ``noise``: Gaussian sensor noise (grey
    levels); ``exposure``: per-frame gain drift (std, fraction); ``shadow``: how much the shadow darkens the table
    (0 = none); ``occlude``: frames in which a grey block covers about half of the arm.
    """
    import cv2

    h, w = plate.shape[:2]
    camera = camera or bridge_camera(w, h)
    rdef = get_robot(robot)
    model = load_robot_model(RobotSpec(rdef.name))
    traj = joint_trajectory(robot, n_frames, seed, out_of_view, model, camera)
    steady = joint_trajectory(robot, n_frames, seed, None, model, camera)
    rgba = {ln: rdef.link_rgba(ln) for ln in model.links}
    rng = np.random.default_rng(seed + 1)
    frames, masks, occ, oov = [], [], [], []
    base = plate.astype(np.float32) / 255.0
    for i, q in enumerate(traj):
        img = base.copy()
        if shadow > 0:
            sh = cv2.GaussianBlur(table_shadow(model, camera, q, table_z).astype(np.float32), (0, 0), 3.0)
            img *= 1.0 - shadow * sh[..., None]
        col, m = shade_robot(model, camera, q, rgba)
        img = np.where(m[..., None], col, img)
        if i in occlude:
            box = _occluder(h, w, m, rng)
            img[box] = np.array([0.62, 0.55, 0.5]) * (0.9 + 0.1 * rng.random())
            m = m & ~box
            occ.append(i)
        if out_of_view and out_of_view[0] <= i <= out_of_view[1] and \
                m.sum() < 0.5 * (link_id_image(model, camera, steady[i])[0] >= 0).sum():
            oov.append(i)
        gain = 1.0 + exposure * rng.normal(size=3).clip(-2, 2)
        img = img * gain * 255.0 + rng.normal(0, noise, img.shape)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
        masks.append(m)
    return RobotClip(np.stack(frames), np.stack(masks), traj, plate.copy(), camera, rdef.name, occ, oov)
