"""Evaluation clips for background plates, with exact (synthetic) or person-made (real) ground-truth plates.

Every real plate in ``../shared/data`` (the Bridge cleanup, the Bridge stack-cube plate, the 11 Google Robot
overlays) becomes the static background of synthetic clips: occluders are composited over it frame by frame, so
the plate is known exactly. Occluders: the real WidowX 250s (registry model) and Google Robot (URDF from
``google_robot/description``) rendered by :mod:`real2sim.render.robot` with flat Lambert shading, a 2-D
articulated arm, a person's hand with forearm, an object that is carried from one place to another; with cast
shadows, exposure drift / flicker, sensor noise, JPEG compression, low and high resolution, 5 to 60 frames, and
occluders that *linger* (hold still over a region for most of the clip: the plain median keeps them there).

The real clip ``bridge/bridge_real_1.mp4`` is scored against the person-made ``bridge_real_1_cleanup.png`` where
the cleanup is confirmed by the clip (see :func:`bridge_real_case`).

>>> cases = plate_cases(Path("../shared/data"))          # the benchmark's suite
>>> c = cases[1]; c.frames.shape, c.truth.shape           # (n, h, w, 3) uint8, (h, w, 3) uint8
"""
from __future__ import annotations

import logging
import tempfile
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from real2sim.capture.frames import read_video
from real2sim.core.camera import Camera
from real2sim.core.geometry import camera_pose_from_convention, make_pose, transform_points
from real2sim.core.imaging import read_rgb
from real2sim.core.manifest import RobotSpec
from real2sim.demos.mask_cases import camera_look, recorded
from real2sim.render.raster import rasterize
from real2sim.render.robot import RobotModel, _geometry_mesh, load_robot_model
from real2sim.robots.scene import link_poses, parse_urdf

log = logging.getLogger(__name__)

GOOGLE_URDF = "google_robot/description/google_robot_meta_sim_fix_wheel_fix_fingertip.urdf"
GOOGLE_JOINTS = ("joint_torso", "joint_shoulder", "joint_bicep", "joint_elbow", "joint_forearm", "joint_wrist",
                 "joint_gripper", "joint_finger_right", "joint_finger_left", "joint_head_pan", "joint_head_tilt")
GOOGLE_Q0 = (-0.2639, 0.0832, 0.5018, 1.1569, -0.0286, 1.5926, -1.0807, 0.0, 0.0, -0.0029, 0.7851)
"""SIMPLER's initial Google Robot joints (static base, head looking at the table)."""
BRIDGE_CAMERA = {"K": ((623.588, 0.0, 319.501), (0.0, 623.588, 239.545), (0.0, 0.0, 1.0)), "size": (640, 480),
                 "position": (0.0, -0.16, 0.336), "quaternion_wxyz": (0.909182, -0.0819809, 0.347277, 0.214629)}
BRIDGE_CAN_BOX = (180, 215, 300, 360)
"""x0, y0, x1, y1 of the can in frame 0 of bridge_real_1.mp4: it is carried away, so the cleanup (frame 0 edited)
shows it where the clip mostly shows the table; left out of the score."""


@dataclass
class PlateCase:
    """One clip with its ground-truth plate."""

    name: str
    frames: np.ndarray
    """``(n, h, w, 3) uint8``."""
    truth: np.ndarray
    """``(h, w, 3) uint8`` the background at the exposure of frame 0."""
    valid: np.ndarray
    """``(h, w) bool`` where the truth is known (all pixels for synthetic clips)."""
    occluded: np.ndarray
    """``(h, w) bool`` pixels something covered in at least one frame."""
    unseen: np.ndarray | None = None
    """``(h, w) bool`` pixels covered in every frame (no frame shows the background); synthetic only."""
    masks: np.ndarray | None = None
    """``(n, h, w) bool`` given foreground masks (cases that test the masked path), else None."""
    kind: str = "synthetic"
    notes: str = ""
    spec: dict = field(default_factory=dict)
    occluder_masks: np.ndarray | None = None
    """``(n, h, w) bool`` the occluder's own pixels per frame (the robot, without its shadow); synthetic only."""


def look_of(seed: int, name: str):
    """The :func:`real2sim.demos.mask_cases.camera_look` (white balance, saturation, tone curve, vignetting) of
    ``seed`` and a clip's ``name``: the same look for a clip whichever clips are run with it."""
    return camera_look(np.random.default_rng([seed, zlib.crc32(name.encode())]))


def robot_clip_through_another_camera(clip, name: str, seed: int):
    """A rendered robot clip (:class:`real2sim.demos.robot_clips.RobotClip`: its ``frames`` and its background
    ``plate``) recorded through the look of ``seed`` and the clip's ``name`` (:func:`look_of`); its masks and camera
    are the clip's own."""
    look = look_of(seed, name)
    return replace(clip, frames=np.stack([recorded(look, f) for f in clip.frames]), plate=recorded(look, clip.plate))


def through_another_camera(case: PlateCase, seed: int) -> PlateCase:
    """``case`` recorded through another camera: its frames and its truth alike through :func:`look_of` ``seed``
    and the case's name; the masks and regions are the case's own."""
    look = look_of(seed, case.name)
    return replace(case, name=f"{case.name}@camera{seed}", frames=np.stack([recorded(look, f) for f in case.frames]),
                   truth=recorded(look, case.truth), kind=f"{case.kind}, another camera")


def through_a_shaking_camera(case: PlateCase, amplitude: float) -> PlateCase:
    """``case`` from a camera that shook (:func:`shaken`, drawn from the case's name); the truth, frame 0 and the
    regions stay where they are (the plate is the first frame's view). Pixels within ``amplitude`` + 1 of the border
    are left out of ``valid`` (a shifted frame has no content there)."""
    frames, masks = shaken(case.frames, case.masks, case.name, amplitude)
    valid = case.valid.copy()
    b = int(np.ceil(amplitude)) + 1
    valid[:b], valid[-b:], valid[:, :b], valid[:, -b:] = False, False, False, False
    return replace(case, name=f"{case.name}@shake{amplitude:g}", frames=frames, masks=masks, valid=valid,
                   kind=f"{case.kind}, shaking camera")


def robot_clip_through_a_shaking_camera(clip, name: str, amplitude: float):
    """A rendered robot clip (:class:`real2sim.demos.robot_clips.RobotClip`) from a camera that shook
    (:func:`shaken`, drawn from ``name``): its frames and robot masks moved; its plate, frame 0 and camera stay."""
    frames, masks = shaken(clip.frames, clip.masks, name, amplitude)
    return replace(clip, frames=frames, masks=masks)


def shaken(frames: np.ndarray, masks: np.ndarray | None, name: str, amplitude: float
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(frames, masks)`` (``(n, h, w, 3) uint8``, optional ``(n, h, w) bool``) as a camera that shook shot them:
    every frame after the first moved by a translation drawn uniformly within +-``amplitude`` px on each axis (from
    ``name``), resampled bicubically (a shift of the image the lens forms, not a blur); the masks with them."""
    import cv2

    from real2sim.capture.shake import shift_frames

    rng = np.random.default_rng([zlib.crc32(name.encode()), int(round(amplitude * 1000))])
    shifts = np.zeros((len(frames), 2))
    shifts[1:] = rng.uniform(-amplitude, amplitude, (len(frames) - 1, 2))
    moved = shift_frames(frames, shifts, back=False, border=cv2.BORDER_REFLECT)
    return moved, None if masks is None else shift_frames(masks, shifts, back=False, border=cv2.BORDER_REFLECT)


def through_motion_blur(case: PlateCase, exposure: float) -> PlateCase:
    """``case`` as a camera with a longer exposure shot it: each frame's occluder (``occluder_masks``) smeared along
    its motion over ``exposure`` of the time between frames (:func:`motion_blurred`); the background, the truth and
    the regions stay. A case without occluder masks (the real clip, whose arm is blurred as recorded) is returned
    as it is."""
    if case.occluder_masks is None or exposure <= 0:
        return case
    frames = motion_blurred(case.frames, case.occluder_masks, case.truth, exposure, case.name,
                            float(case.spec.get("noise", ClipSpec.noise)))  # (the spec holds what is not default)
    return replace(case, name=f"{case.name}@blur{exposure:g}", frames=frames, kind=f"{case.kind}, motion blur")


def robot_clip_through_motion_blur(clip, name: str, exposure: float, noise: float = 3.0):
    """A rendered robot clip (:class:`real2sim.demos.robot_clips.RobotClip`) shot with a longer exposure: the robot
    and its shadow smeared along the robot's motion (:func:`motion_blurred`, seeded by ``name``; ``noise`` the
    clip's sensor noise, ``make_robot_clip``'s default); its masks (the sharp robot), plate and camera stay."""
    if exposure <= 0:
        return clip
    return replace(clip, frames=motion_blurred(clip.frames, clip.masks, clip.plate, exposure, name, noise))


def motion_blurred(frames: np.ndarray, occluder: np.ndarray, background: np.ndarray, exposure: float, name: str,
                   noise: float) -> np.ndarray:
    """``(n, h, w, 3) uint8`` frames whose moving layer is smeared along a line: the occluder's motion (its
    centroid's (``occluder`` ``(n, h, w) bool``), from the frame before to the frame after, per frame interval)
    times ``exposure``. The layer is what the frame changes from its background (``background`` ``(h, w, 3)`` at
    the frame's exposure: a per-channel gain fitted where nothing covers it): the occluder and its cast shadow
    (the pixels that change by more than the noise, near the occluder). The layer's own pixels get fresh Gaussian
    noise of ``noise`` levels (the background there is the noiseless one; the smear averages the noise away)."""
    import cv2

    n = len(frames)
    rng = np.random.default_rng([zlib.crc32(name.encode()), int(round(exposure * 1000))])
    cent = np.array([np.argwhere(m).mean(0)[::-1] if m.any() else (np.nan, np.nan) for m in occluder])  # (x, y)
    out = frames.copy()
    bg_f = background.astype(np.float32)
    free = ~occluder.any(0)
    near = np.ones((31, 31), np.uint8)  # the renders' cast shadows lie within 15 px of their occluder
    for t in range(n):
        a, b = max(0, t - 1), min(n - 1, t + 1)
        if b == a or not occluder[t].any():
            continue
        kernel = _line_kernel((cent[b] - cent[a]) / (b - a) * exposure)
        if kernel is None:
            continue
        f = frames[t].astype(np.float32)
        back = bg_f * (np.median(f[free] + 1.0, 0) / np.median(bg_f[free] + 1.0, 0))
        change = f - back
        moving = occluder[t] | ((np.abs(change).max(-1) > 3 * noise + 6)
                                & (cv2.dilate(occluder[t].view(np.uint8), near) > 0))
        layer = change * moving[..., None]
        smeared = cv2.filter2D(layer, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        reached = moving | (cv2.filter2D(moving.astype(np.float32), -1, kernel) > 0.01)
        blurred = f - layer + smeared + rng.normal(0, noise, f.shape).astype(np.float32) * moving[..., None]
        out[t] = np.clip(np.rint(np.where(reached[..., None], blurred, f)), 0, 255).astype(np.uint8)
    return out


def _line_kernel(v: np.ndarray) -> np.ndarray | None:
    """A normalised ``(k, k) float32`` kernel along the segment ``v`` ``(2,)`` (x, y) px centred on the origin
    (antialiased); ``None`` when it is shorter than a pixel."""
    import cv2

    length = float(np.hypot(*v))
    if not np.isfinite(length) or length < 1.0:
        return None
    size = int(np.ceil(length)) | 1
    kernel = np.zeros((size, size), np.float32)
    c, (hx, hy) = size // 2, v / 2
    cv2.line(kernel, (int(round(c - hx)), int(round(c - hy))), (int(round(c + hx)), int(round(c + hy))), 1.0, 1,
             cv2.LINE_AA)
    return kernel / kernel.sum()


@dataclass(frozen=True)
class Framing:
    """Another lens and sensor on a recorded clip: a crop zoomed ``zoom`` times about an anchor, resampled to
    another size, turned to portrait, with fresh sensor noise (a zoomed crop is smoother than any sensor)."""

    zoom: float = 1.0
    """The crop's size is the clip's over this (1: the whole frame)."""
    at: tuple[float, float] = (0.5, 0.5)
    """Where the crop lies: 0 the left (top) side, 1 the right (bottom)."""
    size: tuple[int, int] | None = None
    """(w, h) the crop is resampled to (None: the clip's)."""
    portrait: bool = False
    """Turned a quarter (the sensor held upright)."""
    noise: float = 0.0
    """Gaussian sensor noise (8-bit levels) added to the frames (not to the truth)."""
    seed: int = 0


REFRAMINGS: tuple[tuple[str, Framing], ...] = (
    ("closeup_1.5_centre", Framing(1.5, (0.5, 0.5), noise=1.5, seed=1)),
    ("closeup_1.5_top_right", Framing(1.5, (1.0, 0.0), noise=1.5, seed=2)),
    ("closeup_1.5_bottom_right", Framing(1.5, (1.0, 1.0), noise=1.5, seed=3)),
    ("closeup_2_top_left", Framing(2.0, (0.0, 0.0), noise=1.5, seed=4)),
    ("closeup_2_top_right", Framing(2.0, (1.0, 0.0), noise=1.5, seed=5)),
    ("closeup_2_centre", Framing(2.0, (0.5, 0.5), noise=1.5, seed=6)),
    ("portrait", Framing(portrait=True)),
    ("half_320x240", Framing(size=(320, 240))),
    ("upscaled_1280x960", Framing(size=(1280, 960), noise=2.0, seed=7)),
    ("closeup_1.5_at_1280x960", Framing(1.5, (0.5, 0.25), size=(1280, 960), noise=2.0, seed=8)),
)
"""The real clip through other framings (:func:`reframed`): the issue's unseen clips came from other cameras at
other distances and resolutions. Only measured (``bench_capture_plates.py --reframe``), never tuned on."""


def _crop_box(framing: Framing, size: tuple[int, int]) -> tuple[float, float, float, float]:
    """(x0, y0, width, height) of the crop in a ``size`` (w, h) frame."""
    w, h = size
    cw, ch = w / framing.zoom, h / framing.zoom
    return framing.at[0] * (w - cw), framing.at[1] * (h - ch), cw, ch


def framing_map(framing: Framing, size: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """``(2, 3)`` affine map of a ``size`` (w, h) frame's pixels (OpenCV centres) onto the crop's output, and the
    output's (w, h) before the quarter turn: the crop's corners onto the output's."""
    x0, y0, cw, ch = _crop_box(framing, size)
    out_w, out_h = framing.size or size
    M = np.array([[out_w / cw, 0.0, -x0 * out_w / cw], [0.0, out_h / ch, -y0 * out_h / ch]])
    M[:, 2] += 0.5 * (M[0, 0] - 1), 0.5 * (M[1, 1] - 1)  # pixel centres
    return M, (out_w, out_h)


def reframed_intrinsics(framing: Framing, K, size: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """The ``(3, 3)`` intrinsics and (w, h) of a camera ``K`` of ``size`` seen through ``framing`` (a crop and a
    resampling scale and shift the image: K' = A K). A quarter turn also turns the camera's pose: not supported."""
    if framing.portrait:
        raise ValueError("a portrait framing turns the camera about its axis: its pose changes too (not supported)")
    M, out = framing_map(framing, size)
    return np.vstack([M, [0.0, 0.0, 1.0]]) @ np.asarray(K, float), out


def reframed(case: PlateCase, name: str, framing: Framing) -> PlateCase:
    """``case`` (frames, truth, regions) through ``framing``: one crop and resampling for all, nearest for the
    regions; noise on the frames only."""
    import cv2

    n, h, w = case.frames.shape[:3]
    M, (out_w, out_h) = framing_map(framing, (w, h))
    x0, y0, cw, ch = _crop_box(framing, (w, h))
    shrink = out_w < cw

    def warp(img, nearest=False):
        flags = cv2.INTER_NEAREST if nearest else (cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
        if shrink and not nearest:  # INTER_AREA is a resize, not a warp: crop first, then resize
            xi, yi = int(round(x0)), int(round(y0))
            img = cv2.resize(img[yi:yi + int(round(ch)), xi:xi + int(round(cw))], (out_w, out_h), interpolation=flags)
        else:
            img = cv2.warpAffine(img, M, (out_w, out_h), flags=flags, borderMode=cv2.BORDER_REPLICATE)
        return np.ascontiguousarray(np.rot90(img)) if framing.portrait else img

    rng = np.random.default_rng(framing.seed)

    def sensed(f):
        if framing.noise <= 0:
            return f
        return np.clip(f + rng.normal(0, framing.noise, f.shape).astype(np.float32) + 0.5, 0, 255).astype(np.uint8)

    frames = np.stack([sensed(warp(f)) for f in case.frames])

    def region(m):
        return None if m is None else warp(m.view(np.uint8), nearest=True) > 0

    masks = None if case.masks is None else np.stack([region(m) for m in case.masks])
    return replace(case, name=f"{case.name}/{name}", frames=frames, truth=warp(case.truth), valid=region(case.valid),
                   occluded=region(case.occluded), unseen=region(case.unseen), masks=masks,
                   kind=f"{case.kind}, another framing", occluder_masks=None)


def reframed_cases(data: Path, names: list[str] | None = None) -> list[PlateCase]:
    """The real clip through every :data:`REFRAMINGS` (``names``: only those framings); empty without the data."""
    real = bridge_real_case(Path(data))
    if real is None:
        return []
    return [reframed(real, name, f) for name, f in REFRAMINGS if names is None or name in names]


@dataclass
class ClipSpec:
    """How a synthetic clip is made over a real plate."""

    occluder: str = "widowx"
    """'widowx', 'google_robot', 'arm2d' or 'hand'."""
    n: int = 24
    linger: float = 0.0
    """Fraction of the frames (a contiguous stretch in the middle) the occluder holds still."""
    moved_object: bool = False
    """An object rests at one place, is carried (with the occluder) and rests at another."""
    hand: bool = False
    """A person's hand passes through as well (in addition to ``occluder``)."""
    noise: float = 2.0
    """Gaussian sensor noise (8-bit levels)."""
    jpeg: int = 0
    """JPEG quality of each frame (0: none)."""
    drift: float = 0.0
    """Exposure drifts linearly to 1 + drift over the clip."""
    flicker: float = 0.0
    """Per-frame random exposure change (std)."""
    size: tuple[int, int] | None = None
    """(w, h) the plate is resized (and centre-cropped) to; None keeps it."""
    contrast: float = 1.0
    """The plate's contrast about its mean (0.5: a low-contrast scene)."""
    shadow: float = 0.35
    """Darkening of the occluders' cast shadows (0: none)."""
    zoom: float = 1.0
    """The robot's camera's focal length times this: over 1, the robot close to the camera (2.6: the WidowX covers
    up to a third of the image, its upper arm a corner in most frames)."""
    seed: int = 0


# ---------------------------------------------------------------------------------------------------------
# robots
# ---------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def widowx_model() -> RobotModel:
    """The registry WidowX 250s visual model (base at the origin)."""
    return load_robot_model(RobotSpec("widowx250s"))


@lru_cache(maxsize=None)
def google_robot_model(data: str) -> RobotModel:
    """The Google Robot's visual model from ``google_robot/description`` (head links dropped: the camera is in
    them). Links without ``<inertial>`` get a zero one so :func:`parse_urdf` reads the file."""
    path = Path(data) / GOOGLE_URDF
    tree = ET.parse(path)
    for link in tree.getroot().findall("link"):
        if link.find("inertial") is None:
            link.append(ET.fromstring('<inertial><mass value="0"/><inertia ixx="0" iyy="0" izz="0"/></inertial>'))
        for m in link.iter("mesh"):
            m.set("filename", str((path.parent / m.get("filename")).resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        fixed = Path(tmp) / "google_robot.urdf"
        tree.write(fixed)
        links, joints, root = parse_urdf(fixed)
        meshes = {}
        for name, link in links.items():
            if name.startswith("link_head"):
                continue
            parts = [p for p in (_geometry_mesh(T, g) for T, g in link.visuals) if p is not None]
            if parts:
                off = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
                meshes[name] = (np.concatenate([p[0] for p in parts]),
                                np.concatenate([p[1] + o for p, o in zip(parts, off)]))
    return RobotModel(meshes, joints, root, np.eye(4), list(GOOGLE_JOINTS), np.asarray(GOOGLE_Q0, float))


def scaled_K(K, src: tuple[int, int], dst: tuple[int, int]) -> np.ndarray:
    """``(3, 3)`` intrinsics of size ``src`` (w, h) stretched to ``dst``."""
    sx, sy = dst[0] / src[0], dst[1] / src[1]
    K = np.array(K, float)
    K[0] *= sx
    K[1] *= sy
    return K


def robot_camera(kind: str, model: RobotModel, size: tuple[int, int]) -> Camera:
    """The camera each robot is seen from: the Bridge camera (WidowX) or the Google Robot's head camera."""
    if kind == "widowx":
        T = camera_pose_from_convention(make_pose(BRIDGE_CAMERA["position"], BRIDGE_CAMERA["quaternion_wxyz"]), "sapien")
        return Camera(size[0], size[1], scaled_K(BRIDGE_CAMERA["K"], BRIDGE_CAMERA["size"], size), T)
    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, model.default_q)))
    T = camera_pose_from_convention(poses["link_camera"] @ make_pose((0, 0, 0), (0.5, 0.5, -0.5, 0.5)), "sapien")
    K = ((425.0, 0.0, 305.0), (0.0, 413.1, 233.0), (0.0, 0.0, 1.0))
    return Camera(size[0], size[1], scaled_K(K, (640, 512), size), T)


def render_robot(model: RobotModel, camera: Camera, q, albedo: dict, default: float) -> tuple[np.ndarray, np.ndarray]:
    """Lambert-shaded robot: (``(h, w, 3) float32`` colour in [0, 255], ``(h, w) bool`` robot pixels)."""
    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))
    verts, faces, grey, off = [], [], [], 0
    for name, (v, f) in sorted(model.links.items()):
        if name not in poses:
            continue
        verts.append(transform_points(model.base @ poses[name], v))
        faces.append(f + off)
        grey.append(np.full(len(f), albedo.get(name, default), np.float32))
        off += len(v)
    V, Fc = np.concatenate(verts), np.concatenate(faces)
    fr = rasterize(camera, V, Fc)
    Vc = transform_points(np.linalg.inv(camera.T_world_camera), V)
    n = np.cross(Vc[Fc[:, 1]] - Vc[Fc[:, 0]], Vc[Fc[:, 2]] - Vc[Fc[:, 0]])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    light = np.array([-0.4, -0.6, -0.7]) / np.linalg.norm([-0.4, -0.6, -0.7])
    shade = (0.35 + 0.65 * np.abs(n @ light)).astype(np.float32) * np.concatenate(grey)
    fid = np.maximum(fr.face_id, 0)
    img = np.where(fr.mask, shade[fid], 0.0)[..., None] * np.array([255, 255, 255], np.float32)
    return img.astype(np.float32), fr.mask


def robot_keyposes(kind: str, model: RobotModel, camera: Camera, count: int, rng,
                   cover: tuple[float, float] = (0.02, 0.35)) -> list[np.ndarray]:
    """``count`` joint vectors whose robot covers ``cover`` (2-35 %) of the image (rejection sampling, seeded)."""
    if kind == "widowx":
        lo = np.array([-0.6, -0.2, -0.4, -0.5, 0.6, -1.0, 0.015, -0.037])
        hi = np.array([0.6, 0.7, 0.4, 0.5, 1.6, 1.0, 0.037, -0.015])
        base = np.zeros(8)
    else:
        lo = np.array([-0.4, -0.4, -0.3, -0.4, -0.5, -0.5, -0.5, 0, 0, 0, 0])
        hi = np.abs(lo)
        base = model.default_q
    small = Camera(camera.width // 4, camera.height // 4, scaled_K(camera.K, (camera.width, camera.height),
                                                                    (camera.width // 4, camera.height // 4)),
                   camera.T_world_camera)
    out = []
    for _ in range(400):
        q = base + rng.uniform(lo, hi)
        covered = render_robot(model, small, q, {}, 1.0)[1].mean()
        if cover[0] < covered < cover[1]:
            out.append(q)
        if len(out) == count:
            break
    if len(out) < count:
        raise RuntimeError(f"robot_keyposes: only {len(out)} of {count} poses of the {kind} are in view")
    return out


# ---------------------------------------------------------------------------------------------------------
# 2-D occluders
# ---------------------------------------------------------------------------------------------------------
def arm2d_layer(size, t: np.ndarray, rng_state: dict) -> tuple[np.ndarray, np.ndarray]:
    """A three-link articulated arm with a two-finger gripper from the top border; ``t`` = 3 joint angles."""
    import cv2

    w, h = size
    s = min(w, h)
    img = np.zeros((h, w, 3), np.float32)
    m = np.zeros((h, w), np.uint8)
    base = np.array([rng_state["base_x"] * w, -0.05 * h])
    lens = np.array([0.42, 0.34, 0.16]) * s
    thick = [int(0.09 * s), int(0.07 * s), int(0.05 * s)]
    cols = [(55, 55, 60), (75, 75, 80), (40, 40, 45)]
    ang, p = np.pi / 2, base
    for k in range(3):
        ang += t[k]
        q = p + lens[k] * np.array([np.cos(ang), np.sin(ang)])
        cv2.line(img, tuple(int(v) for v in p), tuple(int(v) for v in q), cols[k], thick[k], cv2.LINE_AA)
        cv2.line(m, tuple(int(v) for v in p), tuple(int(v) for v in q), 255, thick[k], cv2.LINE_AA)
        cv2.circle(img, tuple(int(v) for v in q), int(thick[k] * 0.7), (95, 95, 100), -1, cv2.LINE_AA)
        cv2.circle(m, tuple(int(v) for v in q), int(thick[k] * 0.7), 255, -1, cv2.LINE_AA)
        p = q
    for side in (-1, 1):  # fingers
        d = np.array([np.cos(ang + side * 0.35), np.sin(ang + side * 0.35)])
        f = p + 0.12 * s * d
        cv2.line(img, tuple(int(v) for v in p), tuple(int(v) for v in f), (30, 30, 32), int(0.025 * s) + 1, cv2.LINE_AA)
        cv2.line(m, tuple(int(v) for v in p), tuple(int(v) for v in f), 255, int(0.025 * s) + 1, cv2.LINE_AA)
    return img, m > 127


def hand_layer(size, pos: np.ndarray, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """A person's forearm from the bottom border with a palm and five fingers at ``pos`` (pixels)."""
    import cv2

    w, h = size
    s = min(w, h)
    img = np.zeros((h, w, 3), np.float32)
    m = np.zeros((h, w), np.uint8)
    skin, sleeve = (205, 150, 120), (40, 70, 140)
    wrist = pos + np.array([0.0, 0.1 * s])
    elbow = wrist + np.array([0.12 * s, 0.6 * s])
    for im, c in ((img, sleeve), (m, 255)):
        cv2.line(im, tuple(int(v) for v in wrist), tuple(int(v) for v in elbow), c, int(0.11 * s), cv2.LINE_AA)
    for im, c in ((img, skin), (m, 255)):
        cv2.ellipse(im, tuple(int(v) for v in pos), (int(0.06 * s), int(0.075 * s)), 0, 0, 360, c, -1, cv2.LINE_AA)
        for k, a in enumerate(np.linspace(-2.2, -0.9, 4)):
            a += (k - 1.5) * spread
            tip = pos + 0.13 * s * np.array([np.cos(a), np.sin(a)])
            cv2.line(im, tuple(int(v) for v in pos), tuple(int(v) for v in tip), c, int(0.022 * s) + 1, cv2.LINE_AA)
        thumb = pos + 0.1 * s * np.array([np.cos(-0.2), np.sin(-0.2)])
        cv2.line(im, tuple(int(v) for v in pos), tuple(int(v) for v in thumb), c, int(0.026 * s) + 1, cv2.LINE_AA)
    return img, m > 127


def object_patch(plate: np.ndarray, rng, size) -> tuple[np.ndarray, np.ndarray]:
    """A box-shaped object (textured with a region of the plate, recoloured, with a dark rim): (rgb, mask)."""
    import cv2

    w, h = size
    s = min(w, h)
    ow, oh = int(0.14 * s), int(0.2 * s)
    y, x = rng.integers(0, h - oh), rng.integers(0, w - ow)
    tex = plate[y:y + oh, x:x + ow].astype(np.float32)
    tint = rng.uniform(0.3, 1.6, 3).astype(np.float32)
    rgb = np.clip(tex * tint + rng.uniform(-40, 40, 3), 0, 255)
    m = np.zeros((oh, ow), np.uint8)
    cv2.ellipse(m, (ow // 2, oh // 2), (ow // 2 - 1, oh // 2 - 1), 0, 0, 360, 255, -1, cv2.LINE_AA)
    rim = (m > 0) & (cv2.erode(m, np.ones((5, 5), np.uint8)) == 0)
    rgb[rim] *= 0.4
    return rgb, m > 127


# ---------------------------------------------------------------------------------------------------------
# clip synthesis
# ---------------------------------------------------------------------------------------------------------
def timeline(n: int, linger: float, rng) -> tuple[np.ndarray, int, int]:
    """Per-frame interpolation parameter in [0, k] through k+1 keyposes, held still over ``linger`` of the frames
    (a contiguous stretch). Returns (params ``(n,)``, hold start, hold end)."""
    hold = int(round(linger * n))
    a = (n - hold) // 2 if hold else n
    moving = n - hold
    k = 3
    ramp = np.linspace(0, k, max(moving, 1))
    if hold:
        mid = ramp[a] if a < len(ramp) else float(k)
        ramp = np.concatenate([ramp[:a], np.full(hold, mid), ramp[a:]])
    return ramp[:n], a, a + hold


def _interp(keys: list, u: float):
    i = min(int(np.floor(u)), len(keys) - 2)
    f = u - i
    f = f * f * (3 - 2 * f)
    return keys[i] * (1 - f) + keys[i + 1] * f


def _fit_plate(plate: np.ndarray, spec: ClipSpec) -> np.ndarray:
    import cv2

    p = plate.astype(np.float32)
    if spec.contrast != 1.0:
        p = (p - p.mean((0, 1))) * spec.contrast + p.mean((0, 1))
    if spec.size is not None:
        w, h = spec.size
        sc = max(w / p.shape[1], h / p.shape[0])
        p = cv2.resize(p, (int(round(p.shape[1] * sc)), int(round(p.shape[0] * sc))),
                       interpolation=cv2.INTER_AREA if sc < 1 else cv2.INTER_CUBIC)
        y0, x0 = (p.shape[0] - h) // 2, (p.shape[1] - w) // 2
        p = p[y0:y0 + h, x0:x0 + w]
    return np.clip(p + 0.5, 0, 255).astype(np.uint8)


def synth_clip(name: str, plate: np.ndarray, spec: ClipSpec, data: Path | None = None) -> PlateCase:
    """A clip of ``spec.n`` frames over ``plate`` (see :class:`ClipSpec`), with its exact plate."""
    import cv2

    rng = np.random.default_rng(spec.seed)
    truth = _fit_plate(plate, spec)
    h, w = truth.shape[:2]
    n = spec.n
    u, h0, h1 = timeline(n, spec.linger, rng)
    layers: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    if spec.occluder in ("widowx", "google_robot"):
        model = widowx_model() if spec.occluder == "widowx" else google_robot_model(str(data))
        cam = robot_camera(spec.occluder, model, (w, h))
        if spec.zoom != 1.0:  # the focal lengths only: the principal point stays
            K = np.array(cam.K, float)
            K[0, 0] *= spec.zoom
            K[1, 1] *= spec.zoom
            cam = Camera(cam.width, cam.height, K, cam.T_world_camera)
        keys = robot_keyposes(spec.occluder, model, cam, 4, rng, cover=(0.02, 0.35) if spec.zoom <= 1 else (0.05, 0.7))
        albedo = ({"left_finger_link": 0.15, "right_finger_link": 0.15} if spec.occluder == "widowx" else
                  {"link_gripper": 0.25, "link_finger_right": 0.2, "link_finger_left": 0.2, "link_wrist": 0.3})
        default = 0.1 if spec.occluder == "widowx" else 0.85
        for i in range(n):
            layers[i].append(render_robot(model, cam, _interp(keys, u[i]), albedo, default))
    elif spec.occluder == "arm2d":
        keys = [rng.uniform([-0.5, -0.8, -0.8], [0.5, 0.8, 0.8]) for _ in range(4)]
        st = {"base_x": rng.uniform(0.25, 0.75)}
        for i in range(n):
            layers[i].append(arm2d_layer((w, h), _interp(keys, u[i]), st))
    elif spec.occluder == "hand":
        keys = [rng.uniform([0.2 * w, 0.3 * h], [0.8 * w, 0.8 * h]) for _ in range(4)]
        for i in range(n):
            layers[i].append(hand_layer((w, h), _interp(keys, u[i]), 0.08 * np.sin(i)))
    else:
        raise ValueError(f"unknown occluder {spec.occluder!r}")
    own = np.stack([layers[i][0][1] > 0.5 for i in range(n)])  # the occluder's pixels (its layer is first)
    if spec.hand:  # a hand passing through the middle third of the clip
        a, b = n // 3, max(n // 3 + 1, 2 * n // 3)
        p0, p1 = rng.uniform([0.2 * w, 0.4 * h], [0.8 * w, 0.8 * h], (2, 2))
        for i in range(a, b):
            layers[i].append(hand_layer((w, h), p0 + (p1 - p0) * (i - a) / max(b - a - 1, 1), 0.05))
    if spec.moved_object:
        rgb, om = object_patch(truth, rng, (w, h))
        oh, ow = om.shape
        pa = (rng.integers(0, h - oh), rng.integers(0, w - ow))
        pb = (rng.integers(0, h - oh), rng.integers(0, w - ow))
        a, b = int(0.4 * n), max(int(0.6 * n), int(0.4 * n) + 1)
        for i in range(n):
            y, x = pa if i < a else (pb if i >= b else tuple(int(v) for v in np.add(pa, np.subtract(pb, pa) * (i - a + 1) / (b - a + 1))))
            L = np.zeros((h, w, 3), np.float32)
            M = np.zeros((h, w), bool)
            L[y:y + oh, x:x + ow] = rgb
            M[y:y + oh, x:x + ow] = om
            layers[i].insert(0, (L, M))
    gains = 1.0 + spec.drift * np.linspace(0, 1, n) + spec.flicker * rng.standard_normal(n)
    gains = gains[:, None] * (1 + 0.01 * rng.standard_normal((n, 3)))
    gains[0] = 1.0
    frames = np.empty((n, h, w, 3), np.uint8)
    covered = np.zeros((n, h, w), bool)
    sh_dx, sh_dy, sh_sig = int(0.03 * w), int(0.05 * h), 0.015 * min(w, h)
    for i in range(n):
        img = truth.astype(np.float32)
        alpha_all = np.zeros((h, w), np.float32)
        for L, M in layers[i]:
            a = cv2.GaussianBlur(M.astype(np.float32), (0, 0), 0.6)
            alpha_all = np.maximum(alpha_all, a)
        if spec.shadow > 0 and alpha_all.any():
            shadow = cv2.GaussianBlur(np.roll(alpha_all, (sh_dy, sh_dx), (0, 1)), (0, 0), sh_sig)
            img *= (1 - spec.shadow * shadow)[..., None]
            covered[i] |= shadow > 0.1
        for L, M in layers[i]:
            a = cv2.GaussianBlur(M.astype(np.float32), (0, 0), 0.6)[..., None]
            tex = L + rng.normal(0, 3, L.shape).astype(np.float32)
            img = img * (1 - a) + tex * a
            covered[i] |= a[..., 0] > 0.02
        img = img * gains[i] + rng.normal(0, spec.noise, img.shape)
        f = np.clip(img + 0.5, 0, 255).astype(np.uint8)
        if spec.jpeg:
            ok, buf = cv2.imencode(".jpg", f[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, spec.jpeg])
            f = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
        frames[i] = f
    return PlateCase(name, frames, truth, np.ones((h, w), bool), covered.any(0), covered.all(0), None, "synthetic",
                     spec=_spec_dict(spec), occluder_masks=own)


def _spec_dict(spec: ClipSpec) -> dict:
    from dataclasses import asdict

    return {k: v for k, v in asdict(spec).items() if v != getattr(ClipSpec, k, None)}


# ---------------------------------------------------------------------------------------------------------
# real clip and the suite
# ---------------------------------------------------------------------------------------------------------
def gain_to(frames: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Each frame with per-channel gains fitted to ``target`` on pixels that agree (the clip's auto-exposure)."""
    c = target.astype(np.float32) + 1
    out = []
    for f in frames:
        f32 = f.astype(np.float32) + 1
        ok = np.abs(f32 - c).max(-1) < 40
        g = np.median(c[ok] / f32[ok], 0)
        ok = np.abs(f32 * g - c).max(-1) < 12
        g = np.median(c[ok] / f32[ok], 0)
        out.append(np.clip(f32 * g - 0.5, 0, 255).astype(np.uint8))
    return np.stack(out)


def bridge_real_case(data: Path) -> PlateCase | None:
    """``bridge_real_1.mp4`` against the person-made cleanup (None when the data is absent).

    The cleanup is a person's edit of frame 0, so it is ground truth only where the clip confirms it: ``valid`` =
    pixels where at least 2 frames (exposure-matched to the cleanup) agree with it within 20 levels, minus the
    can's place in frame 0 (:data:`BRIDGE_CAN_BOX`: carried away, the clip mostly shows the table there).
    ``occluded`` = valid pixels some frame differs from the cleanup by more than 40 (the robot passed)."""
    import cv2

    video, plate = Path(data) / "bridge" / "bridge_real_1.mp4", Path(data) / "bridge" / "bridge_real_1_cleanup.png"
    if not (video.is_file() and plate.is_file()):
        return None
    frames = read_video(video).frames
    clean = read_rgb(plate)
    d = np.abs(gain_to(frames, clean).astype(np.int16) - clean).max(-1)
    valid = (d < 20).sum(0) >= 2
    x0, y0, x1, y1 = BRIDGE_CAN_BOX
    valid[y0:y1, x0:x1] = False
    occl = cv2.morphologyEx((d > 40).any(0).astype(np.uint8), cv2.MORPH_OPEN, np.ones((5, 5), np.uint8)) > 0
    return PlateCase("bridge_real_1", frames, clean, valid, occl & valid, None, None, "real",
                     "real WidowX clip, 37 frames 640x480; person-made plate where the clip confirms it")


def real_plates(data: Path) -> dict[str, np.ndarray]:
    """Every person-made plate in ``data``: name -> ``(h, w, 3) uint8``."""
    data = Path(data)
    out = {}
    for rel in ("bridge/bridge_real_1_cleanup.png", "bridge/stack_cube_plate.png"):
        if (data / rel).is_file():
            out[Path(rel).stem] = read_rgb(data / rel)
    for p in sorted((data / "google_robot" / "overlays").glob("*.png")):
        out[p.stem] = read_rgb(p)
    return out


SUITE: tuple[tuple[str, str, ClipSpec], ...] = (
    ("widowx_moving", "bridge_real_1_cleanup", ClipSpec("widowx", 37, noise=2.0, jpeg=85, drift=0.08, seed=1)),
    ("widowx_linger_most", "bridge_real_1_cleanup", ClipSpec("widowx", 30, linger=0.7, noise=2.0, jpeg=85, seed=2)),
    ("widowx_object_moved", "stack_cube_plate", ClipSpec("widowx", 30, linger=0.3, moved_object=True, seed=3)),
    ("widowx_few_5", "stack_cube_plate", ClipSpec("widowx", 5, noise=2.0, seed=4)),
    ("widowx_lowres_linger", "bridge_real_1_cleanup", ClipSpec("widowx", 24, linger=0.5, size=(320, 240), seed=5)),
    ("widowx_highres", "bridge_real_1_cleanup", ClipSpec("widowx", 20, size=(1280, 720), jpeg=90, seed=6)),
    ("google_coke_can", "google_coke_can_real_eval_1", ClipSpec("google_robot", 30, linger=0.4, seed=7)),
    ("google_move_near_few_5", "google_move_near_real_eval_1", ClipSpec("google_robot", 5, seed=8)),
    ("google_a0_many_60", "open_drawer_a0", ClipSpec("google_robot", 60, noise=4.0, seed=9)),
    ("google_a1_hand", "open_drawer_a1", ClipSpec("hand", 24, seed=10)),
    ("google_a2_flicker", "open_drawer_a2", ClipSpec("arm2d", 24, flicker=0.05, seed=11)),
    ("google_b0_linger_most", "open_drawer_b0", ClipSpec("arm2d", 24, linger=0.7, seed=12)),
    ("google_b1_object_hand", "open_drawer_b1", ClipSpec("arm2d", 24, moved_object=True, hand=True, seed=13)),
    ("google_b2_noisy_jpeg", "open_drawer_b2", ClipSpec("google_robot", 24, noise=8.0, jpeg=70, seed=14)),
    ("google_c0_low_contrast", "open_drawer_c0", ClipSpec("arm2d", 24, contrast=0.5, drift=0.1, seed=15)),
    ("google_c1_hand_few_5", "open_drawer_c1", ClipSpec("hand", 5, seed=16)),
    ("google_c2_640x512", "open_drawer_c2", ClipSpec("google_robot", 24, linger=0.6, size=(640, 512), seed=17)),
)
"""(case name, plate name, clip spec): every real plate is used at least once."""


HELD_OUT: tuple[tuple[str, str, ClipSpec], ...] = (
    ("held_b2_seed21", "open_drawer_b2", ClipSpec("google_robot", 24, noise=8.0, jpeg=70, seed=21)),
    ("held_b1_seed22", "open_drawer_b1", ClipSpec("arm2d", 24, moved_object=True, hand=True, seed=22)),
    ("held_c2_seed23", "open_drawer_c2", ClipSpec("google_robot", 24, linger=0.6, size=(640, 512), seed=23)),
    ("held_noisy_640", "google_coke_can_real_eval_1", ClipSpec("google_robot", 20, noise=6.0, jpeg=75, size=(640, 512),
                                                                 seed=24)),
    ("held_dim_noisy", "stack_cube_plate", ClipSpec("widowx", 24, noise=5.0, jpeg=80, contrast=0.6, drift=-0.2, seed=25)),
    ("held_arm_lowres", "open_drawer_a2", ClipSpec("arm2d", 16, linger=0.4, size=(240, 192), noise=3.0, seed=26)),
    ("held_object_few_9", "open_drawer_c0", ClipSpec("arm2d", 9, moved_object=True, seed=27)),
)
"""Variations no parameter was tuned on (other seeds, sizes, noise, lighting): ``plate_cases(..., held_out=True)``."""


HELD_OUT_2: tuple[tuple[str, str, ClipSpec], ...] = (
    ("held2_arm_top_few_7", "open_drawer_a0", ClipSpec("arm2d", 7, linger=0.6, noise=3.0, seed=41)),
    ("held2_widowx_few_8_jpeg", "stack_cube_plate", ClipSpec("widowx", 8, noise=5.0, jpeg=75, seed=42)),
    ("held2_google_linger_jpeg", "google_move_near_real_eval_1", ClipSpec("google_robot", 16, linger=0.5, noise=5.0,
                                                                           jpeg=70, seed=43)),
    ("held2_hand_object_12", "open_drawer_b0", ClipSpec("hand", 12, moved_object=True, seed=44)),
    ("held2_arm_flicker_lowc", "open_drawer_c1", ClipSpec("arm2d", 20, contrast=0.6, flicker=0.04, noise=4.0, seed=45)),
    ("held2_widowx_960_linger", "bridge_real_1_cleanup", ClipSpec("widowx", 14, linger=0.5, size=(960, 540), noise=3.0,
                                                                  jpeg=85, seed=46)),
)
"""A second held-out list, added when :data:`HELD_OUT` had been looked at (issue #13): few frames, an arm lingering
at the top border, noise with JPEG, flicker, other sizes and seeds. Only measured, never tuned on:
``plate_cases(..., held_out=2)``."""


def plate_cases(data: Path, names: list[str] | None = None, held_out: bool | int = False) -> list[PlateCase]:
    """The benchmark suite: the real Bridge clip plus :data:`SUITE` (only the cases whose plate is present);
    ``held_out``: True or 1 for :data:`HELD_OUT` instead, 2 for :data:`HELD_OUT_2`.

    ``names`` restricts it to those case names."""
    data = Path(data)
    if held_out:
        plates = real_plates(data)
        held = HELD_OUT_2 if held_out == 2 else HELD_OUT
        return [synth_clip(name, plates[p], spec, data) for name, p, spec in held
                if p in plates and (names is None or name in names)]
    out = []
    if names is None or "bridge_real_1" in names:
        real = bridge_real_case(data)
        if real is not None:
            out.append(real)
    plates = real_plates(data)
    for name, plate_name, spec in SUITE:
        if names is not None and name not in names:
            continue
        if plate_name not in plates:
            log.info("plate case %s skipped: %s not in %s", name, plate_name, data)
            continue
        out.append(synth_clip(name, plates[plate_name], spec, data))
    return out
