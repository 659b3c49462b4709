"""Reference measures written in the tests, independent of the library's (``real2sim.core.imaging`` and the
renderers): what the real-data checks grade the pipeline with, so a bug in the library's IoU, PSNR or projection
cannot grade itself."""
from __future__ import annotations

import numpy as np


def ref_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two ``(h, w) bool`` masks; 1 when both are empty (the convention the suite's
    expectations use: no robot in a frame and no mask agree)."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.float64) / 255.0 if np.issubdtype(x.dtype, np.integer) else x.astype(np.float64)


def ref_psnr(a: np.ndarray, b: np.ndarray, region: np.ndarray | None = None) -> float:
    """PSNR (dB) of two images (``uint8``, or float in [0, 1]) over ``region`` (``(h, w) bool``; all pixels when
    None); identical images give 120 dB (an MSE floor of 1e-12) rather than infinity."""
    a, b = _unit(a), _unit(b)
    if region is not None:
        region = np.asarray(region, bool)
        a, b = a[region], b[region]
    return float(10 * np.log10(1.0 / max(np.mean((a - b) ** 2), 1e-12)))


def project(K: np.ndarray, T_world_camera: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(n, 2)`` pixels of world ``(n, 3)`` points through an OpenCV pinhole (x right, y down, z forward)."""
    T = np.linalg.inv(np.asarray(T_world_camera, float))
    X = np.asarray(points, float) @ T[:3, :3].T + T[:3, 3]
    uv = X @ np.asarray(K, float).T
    return uv[:, :2] / uv[:, 2:]


def convex_silhouette(K, T_world_camera, size: tuple[int, int], vertices: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """``(h, w) bool`` silhouette of a convex object (a cube): the convex hull of its projected vertices.
    ``size``: (width, height); ``pose``: ``(4, 4)`` object to world."""
    import cv2

    pose = np.asarray(pose, float)
    uv = project(K, T_world_camera, np.asarray(vertices, float) @ pose[:3, :3].T + pose[:3, 3])
    m = np.zeros((size[1], size[0]), np.uint8)
    cv2.fillConvexPoly(m, cv2.convexHull(np.round(uv * 16).astype(np.int32)), 1, shift=4)
    return m.astype(bool)


def bridge_cube_masks(img_u8: np.ndarray, plate_u8: np.ndarray) -> dict[str, np.ndarray]:
    """The Bridge stack-cube frame's cubes from the person-made plate: plate differencing (> 45 levels) plus the
    cubes' hues; the differing blob that holds the largest patch of each cube's colour. ``green``, ``yellow``."""
    import cv2
    from scipy.ndimage import binary_fill_holes

    diff = np.abs(img_u8.astype(int) - plate_u8.astype(int)).max(-1)
    hsv = cv2.cvtColor(img_u8, cv2.COLOR_RGB2HSV)
    fg = cv2.morphologyEx((diff > 45).astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    _, lab = cv2.connectedComponents(fg)
    out = {}
    for name, (lo, hi) in {"green": (50, 95), "yellow": (18, 40)}.items():
        hue = (diff > 40) & (hsv[..., 0] >= lo) & (hsv[..., 0] <= hi) & (hsv[..., 1] > 60)
        hue = cv2.morphologyEx(hue.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        hue = cv2.morphologyEx(hue, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
        n, hl, st, _ = cv2.connectedComponentsWithStats(hue)
        seed = hl == 1 + np.argmax(st[1:, cv2.CC_STAT_AREA])
        out[name] = binary_fill_holes(np.isin(lab, np.unique(lab[seed & (lab > 0)])))
    return out


def bridge_gripper_mask(img_u8: np.ndarray) -> np.ndarray:
    """The WidowX's gripper in the Bridge stack-cube frame, found without the robot model or any plate: it is the
    one large black thing in the picture (HSV value < 70 against a grey wall and an orange table); the largest
    such component, holes filled (the grey plate between the fingers)."""
    import cv2
    from scipy.ndimage import binary_fill_holes

    dark = cv2.cvtColor(img_u8, cv2.COLOR_RGB2HSV)[..., 2] < 70
    m = cv2.morphologyEx(dark.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    n, lab, st, _ = cv2.connectedComponentsWithStats(m)
    return binary_fill_holes(lab == 1 + int(np.argmax(st[1:, cv2.CC_STAT_AREA]))) if n > 1 else m.astype(bool)


# -- graders of a Bridge stack-cube bundle against the references above (the bundle's meshes and robot are loaded
# and rendered with the library; what they are compared with is not the library's) ------------------------------
def bridge_frame(data) -> tuple[np.ndarray, np.ndarray]:
    """``(frame, person-made plate)`` of the Bridge stack-cube photo, ``(h, w, 3) uint8`` each."""
    from PIL import Image

    return tuple(np.asarray(Image.open(data / "bridge" / name).convert("RGB"))
                 for name in ("stack_cube_first_frame.png", "stack_cube_plate.png"))


def bridge_cube_ious(bundle, data) -> dict[str, float]:
    """Per cube (``green``, ``yellow``): IoU of the bundle's ``<colour>_cube`` at its pose (the mesh's convex
    silhouette through the bundle's first camera) with the cube's pixels found with the person-made plate."""
    from real2sim.core.meshes import load_mesh

    truth = bridge_cube_masks(*bridge_frame(data))
    cam = next(iter(bundle.manifest.cameras.values())).camera()
    out = {}
    for name in ("green", "yellow"):
        o = bundle.object(f"{name}_cube")
        sil = convex_silhouette(cam.K, cam.T_world_camera, (cam.width, cam.height),
                                load_mesh(bundle.path(o.visual.mesh)).vertices, o.pose.matrix())
        out[name] = ref_iou(sil, truth[name])
    return out


def bridge_gripper_iou(bundle, data, q) -> float:
    """IoU of the bundle's robot rendered at joints ``q`` (its first camera) with the gripper's dark pixels."""
    from real2sim.render.robot import link_id_image, load_robot_model

    cam = next(iter(bundle.manifest.cameras.values())).camera()
    robot = link_id_image(load_robot_model(bundle.manifest.robot), cam, q)[0] >= 0
    return ref_iou(robot, bridge_gripper_mask(bridge_frame(data)[0]))
