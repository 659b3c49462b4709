"""Cross-engine behaviour checks: do MuJoCo, SAPIEN and USD see the same scene?

Each check loads the exports through ``export.get_exporter(name).load`` and compares
engine-reported quantities, never the bundle's own numbers against themselves.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.bundle import Bundle
from real2sim.core.errors import Real2SimError, UnsupportedCapability
from real2sim.core.geometry import rotation_angle_between
from real2sim.engines import engine_names, get_exporter

log = logging.getLogger(__name__)


@dataclass
class DropResult:
    """Rest poses after a drop, per engine, and their pairwise disagreement."""

    seconds: float
    poses: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """engine -> object id -> ``(4, 4)`` final pose."""
    position_error_mm: dict[str, float] = field(default_factory=dict)
    """object id -> |p_a - p_b| in mm between the first two engines."""
    angle_error_deg: dict[str, float] = field(default_factory=dict)

    def worst(self) -> tuple[float, float]:
        return max(self.position_error_mm.values(), default=0.0), max(self.angle_error_deg.values(), default=0.0)


def load_engines(bundle: Bundle, engines=None) -> dict:
    """engine name -> the bundle's export loaded in it (default: every engine that simulates)."""

    loaded = {}
    for name in engines or engine_names("physics"):
        exp = get_exporter(name)
        loaded[name] = exp.load(exp.out_dir(bundle))
    return loaded


def drop_test(bundle: Bundle, engines=None, seconds: float = 1.0) -> DropResult:
    """Step each physics engine (default: all) for ``seconds`` from the bundle poses; compare the first two's rest poses."""
    res = DropResult(seconds)
    scenes = load_engines(bundle, engines)
    try:
        for name, sc in scenes.items():
            sc.step(seconds)
            res.poses[name] = {oid: sc.object_pose(oid) for oid in bundle.manifest.objects}
    finally:
        for sc in scenes.values():
            sc.close()
    a, b = list(res.poses)[:2]
    for oid in bundle.dynamic_objects():
        Ta, Tb = res.poses[a][oid], res.poses[b][oid]
        res.position_error_mm[oid] = float(np.linalg.norm(Ta[:3, 3] - Tb[:3, 3]) * 1000)
        res.angle_error_deg[oid] = float(np.degrees(rotation_angle_between(Ta[:3, :3], Tb[:3, :3])))
    return res


def joint_pull_test(bundle: Bundle, oid: str, joint: str, force: float, seconds: float, engines=None,
                    start: float | None = None) -> dict[str, float]:
    """Pull joint ``joint`` of articulated object ``oid`` with a constant generalised ``force`` (N or N m) for
    ``seconds`` from ``start`` (default: the bundle's position) at rest, in each physics engine (default: every
    engine that simulates); returns
    ``{engine: joint position}`` (m or rad). A drawer's travel under a known force checks that the engines agree on
    its mass, damping, friction and limits."""
    out = {}
    q0 = bundle.object(oid).articulation.joint_positions.get(joint, 0.0) if start is None else start
    for name, sc in load_engines(bundle, engines).items():
        with sc:
            sc.set_object_joint_positions(oid, {joint: q0})
            sc.set_object_joint_force(oid, joint, force)
            sc.step(seconds)
            out[name] = sc.object_joint_positions(oid)[joint]
    return out


def mass_table(bundle: Bundle, engines=None) -> dict[str, dict[str, tuple]]:
    """engine -> object -> (mass, com, inertia) as each engine (default: all that report mass) reports it."""
    out = {}
    for name, sc in load_engines(bundle, engines or engine_names("mass")).items():
        with sc:
            out[name] = {oid: sc.mass_properties(oid) for oid in bundle.dynamic_objects()}
    return out


def projection_errors(bundle: Bundle, camera: str = "main", engines=None, n: int = 50,
                      seed: int = 0) -> dict[str, float]:
    """Max pixel distance between each engine camera's projection (default: every engine that projects) and the
    bundle's OpenCV camera."""
    cam = bundle.manifest.cameras[camera].camera()
    rng = np.random.default_rng(seed)
    # points in front of the camera at 0.3-1.0 m, spread over the image
    uv = rng.uniform([0, 0], [cam.width - 1, cam.height - 1], (n, 2))
    depth = rng.uniform(0.3, 1.0, n)
    pc = np.c_[(uv - [cam.cx, cam.cy]) / [cam.fx, cam.fy] * depth[:, None], depth]
    pts = pc @ cam.T_world_camera[:3, :3].T + cam.T_world_camera[:3, 3]
    expected = cam.project(pts)
    out = {}
    for name, sc in load_engines(bundle, engines or engine_names("project")).items():
        with sc:
            out[name] = float(np.abs(sc.project(camera, pts) - expected).max())
    return out


def render_side_by_side(bundle: Bundle, camera: str = "main", engines=None) -> tuple[np.ndarray, dict[str, str]]:
    """``(h, w * len(engines), 3) uint8`` renders (default: every engine that renders) next to each other; a grey
    panel with the reason where one cannot render."""
    engines = list(engines or engine_names("render"))
    cam = bundle.manifest.cameras[camera].camera()
    panels, notes = [], {}
    for name in engines:
        try:
            sc = load_engines(bundle, [name])[name]
            with sc:
                panels.append(sc.render(camera)[..., :3])
                notes[name] = "ok"
        except (UnsupportedCapability, Real2SimError, RuntimeError) as exc:
            log.warning("%s cannot render: %s", name, exc)
            panels.append(np.full((cam.height, cam.width, 3), 90, np.uint8))
            notes[name] = f"no render: {exc}"
    img = np.concatenate(panels, axis=1)
    try:
        from PIL import Image, ImageDraw

        pil = Image.fromarray(img)
        draw = ImageDraw.Draw(pil)
        for i, name in enumerate(engines):
            draw.text((i * cam.width + 8, 8), f"{name}: {notes[name]}"[:90], fill=(255, 255, 0))
        img = np.asarray(pil)
    except ImportError:  # pragma: no cover
        pass
    return img, notes
