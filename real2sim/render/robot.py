"""Robot appearance: per-link colours of the robot fitted from real frames at recorded joint states.

The robot (registry URDF, base pose from the bundle) is posed at each frame's joint
positions (``capture.frames[i].joint_positions``, else ``robot.joint_positions``, else the
robot's default), its visual meshes are rasterised together into the frame's camera
(depth-tested, so links hide each other correctly) and every pixel gets a link id. A link's
colour is the per-channel median of the real pixels it covers, over all frames, away from
link boundaries (eroded) and, when the bundle has a ``robot`` mask for the frame, inside it
(so objects in front of the robot do not leak in). Links seen in too few pixels keep their
current colour. The colours go to ``robot.appearance`` (link -> rgba), which every exporter
reads.

The fitted colour is what the camera saw (lighting baked in, as SIMPLER's recolouring);
it is not an albedo estimate.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.errors import Real2SimError
from real2sim.core.geometry import transform_points
from real2sim.core.stages import files_hash, run_stage

from real2sim.render.raster import rasterize
from real2sim.render.overlay import overlay_panels, write_png

log = logging.getLogger(__name__)
ROBOT_STAGE = "robot_appearance"
ROBOT_MASK_ENTITY = "robot"


@dataclass
class RobotAppearanceConfig:
    """Settings of robot colour fitting."""

    min_pixels: int = 40
    """A link needs at least this many (eroded) pixels over all frames to get a fitted colour."""
    erode_px: int = 2
    """Link regions are eroded by this many pixels (edges mix neighbouring links and background)."""
    max_frames: int = 20
    """At most this many frames are used (evenly spaced)."""
    backend: str = "auto"
    """Rasteriser backend ('auto', 'gl', 'numpy')."""


@dataclass
class RobotModel:
    """The robot's visual meshes per link (link frame) and what poses them."""

    links: dict
    """link name -> (vertices (n, 3), faces (m, 3)) in the link frame."""
    joints: list
    root: str
    base: np.ndarray
    joint_names: list
    default_q: np.ndarray


def _geometry_mesh(T, geom):
    import trimesh

    from real2sim.core.meshes import load_mesh

    tag = geom.tag
    if tag == "mesh":
        m = load_mesh(Path(geom.get("filename")))
        v = np.asarray(m.vertices, float) * np.array([float(s) for s in (geom.get("scale") or "1 1 1").split()])
        f = np.asarray(m.faces)
    elif tag == "box":
        m = trimesh.creation.box([float(s) for s in geom.get("size").split()])
        v, f = m.vertices, m.faces
    elif tag == "cylinder":
        m = trimesh.creation.cylinder(float(geom.get("radius")), float(geom.get("length")), sections=24)
        v, f = m.vertices, m.faces
    elif tag == "sphere":
        m = trimesh.creation.icosphere(2, float(geom.get("radius")))
        v, f = m.vertices, m.faces
    else:
        return None
    return transform_points(T, v), np.asarray(f, np.int64)


def load_robot_model(spec) -> RobotModel:
    """Visual meshes of the bundle's robot (``manifest.robot``), from the registry's resolved URDF."""
    from real2sim.robots.scene import parse_urdf, robot_setup

    rs = robot_setup(spec)
    links, joints, root = parse_urdf(rs.urdf)
    meshes = {}
    for name, link in links.items():
        parts = [p for p in (_geometry_mesh(T, g) for T, g in link.visuals) if p is not None]
        if parts:
            off = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
            meshes[name] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] + o for p, o in zip(parts, off)]))
    return RobotModel(meshes, joints, root, rs.base, list(rs.robot.joint_names), np.asarray(rs.qpos, float))


def link_id_image(model: RobotModel, camera, q) -> tuple[np.ndarray, list[str]]:
    """``(h, w) int`` index into the returned link names (-1: no robot) for joint vector ``q``."""
    from real2sim.robots.scene import link_poses

    poses = link_poses(model.joints, model.root, dict(zip(model.joint_names, np.asarray(q, float))))
    names, verts, faces, owner = [], [], [], []
    off = 0
    for i, (name, (v, f)) in enumerate(sorted(model.links.items())):
        if name not in poses:
            continue
        names.append(name)
        verts.append(transform_points(model.base @ poses[name], v))
        faces.append(f + off)
        owner.append(np.full(len(f), len(names) - 1))
        off += len(v)
    fr = rasterize(camera, np.concatenate(verts), np.concatenate(faces))
    owner = np.concatenate(owner)
    return np.where(fr.mask, owner[np.maximum(fr.face_id, 0)], -1), names


def fit_link_colours(model: RobotModel, views: list, config: RobotAppearanceConfig | None = None) -> dict:
    """``views``: [(camera, image (h, w, 3) float, q, robot mask or None)]. Returns link -> {rgba, pixels, spread}."""
    from scipy.ndimage import binary_erosion

    cfg = config or RobotAppearanceConfig()
    samples: dict[str, list] = {}
    for cam, img, q, rmask in views:
        ids, names = link_id_image(model, cam, q)
        for k, name in enumerate(names):
            m = ids == k
            if cfg.erode_px:
                m = binary_erosion(m, iterations=cfg.erode_px)
            if rmask is not None:
                m &= rmask
            if m.any():
                samples.setdefault(name, []).append(np.asarray(img, np.float32)[m][:, :3])
    out = {}
    for name in sorted(model.links):
        px = np.concatenate(samples[name]) if name in samples else np.zeros((0, 3), np.float32)
        if len(px) < cfg.min_pixels:
            out[name] = {"pixels": int(len(px)), "rgba": None}
            continue
        med = np.median(px, 0)
        spread = np.median(np.abs(px - med), 0)  # MAD: how uniform the link looks
        out[name] = {"pixels": int(len(px)), "rgba": [round(float(c), 4) for c in med] + [1.0],
                     "mad": [round(float(c), 4) for c in spread]}
    return out


def render_links(model: RobotModel, camera, q, colours: dict, default=(0.7, 0.7, 0.7, 1.0)):
    """(``(h, w, 3)`` flat-coloured render, ``(h, w) bool`` robot pixels) with ``colours`` link -> rgba."""
    ids, names = link_id_image(model, camera, q)
    lut = np.array([list(colours.get(n) or default)[:3] for n in names] + [[0, 0, 0]], np.float32)
    img = lut[np.where(ids >= 0, ids, len(names))]
    return img, ids >= 0


def robot_appearance_stage(bundle: Bundle, config: RobotAppearanceConfig | None = None, force: bool = False):
    """Fit ``robot.appearance`` from the bundle's frames. Returns (StageRecord, ran)."""
    from real2sim.texture.stage import frame_key, read_mask, read_rgb

    cfg = config or RobotAppearanceConfig()
    m = bundle.manifest
    if m.robot is None:
        raise Real2SimError("scene.json has no robot; add one ('real2sim init --robot NAME') before fitting its appearance")
    frames = [(i, f) for i, f in enumerate(m.capture.frames)]
    if not frames:
        raise Real2SimError("the bundle has no frames (capture.frames) to fit the robot's colours from")
    if len(frames) > cfg.max_frames:
        frames = [frames[int(round(j))] for j in np.linspace(0, len(frames) - 1, cfg.max_frames)]
    masks = [m.capture.masks.get(frame_key(i), {}).get(ROBOT_MASK_ENTITY) for i, _ in frames]
    spec_d = dataclasses.asdict(m.robot)
    spec_d.pop("appearance", None)  # the output
    input_hash = hash_jsonable([files_hash(bundle, [f.image for _, f in frames] + [x for x in masks if x]), spec_d,
                                {k: dataclasses.asdict(c) for k, c in m.cameras.items()}, dataclasses.asdict(cfg),
                                [dataclasses.asdict(f) for _, f in frames]])

    def work():
        model = load_robot_model(m.robot)
        views = []
        for (i, f), mk in zip(frames, masks):
            q = f.joint_positions if f.joint_positions else (m.robot.joint_positions or model.default_q)
            if len(q) != len(model.joint_names):
                raise Real2SimError(f"frame {frame_key(i)}: {len(q)} joint positions but robot '{m.robot.name}' has "
                                    f"{len(model.joint_names)} ({', '.join(model.joint_names)})")
            views.append((m.cameras[f.camera].camera(), read_rgb(bundle.path(f.image)), np.asarray(q, float),
                          read_mask(bundle.path(mk)) if mk else None))
        fit = fit_link_colours(model, views, cfg)
        fitted = {k: v["rgba"] for k, v in fit.items() if v["rgba"] is not None}
        if not fitted:
            raise Real2SimError(f"no robot link is visible in {len(views)} frame(s) (with >= {cfg.min_pixels} pixels): "
                                "check robot.base_pose, the camera pose and the joint positions; appearance kept")
        m.robot.appearance = {**m.robot.appearance, **fitted}
        # report: real | robot with fitted colours | difference, for the frame that shows most robot
        best = int(np.argmax([link_id_image(model, c, q)[0].__ge__(0).sum() for c, _, q, _ in views]))
        cam, img, q, rmask = views[best]
        rend, sil = render_links(model, cam, q, m.robot.appearance)
        real_mask = sil if rmask is None else (rmask & sil)
        pic = bundle.reports_dir() / f"{ROBOT_STAGE}.png"
        write_png(pic, overlay_panels(img, rend, real_mask, sil))
        from real2sim.texture.backproject import psnr

        p = psnr(rend, img, real_mask)
        rep = {"links": fit, "fitted": sorted(fitted), "not_seen": sorted(k for k, v in fit.items() if v["rgba"] is None),
               "frames": len(views), "psnr_db_flat_colours": round(p, 3), "picture": bundle.rel(pic)}
        outputs = [bundle.write_report(ROBOT_STAGE, rep), bundle.rel(pic)]
        bundle.mark_stale("export")
        return outputs, {"links_fitted": len(fitted), "links_not_seen": len(rep["not_seen"]),
                         "psnr_db": round(p, 3)}, ""

    return run_stage(bundle, ROBOT_STAGE, input_hash, dataclasses.asdict(cfg), work, force)
