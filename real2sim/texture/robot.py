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

import numpy as np

from real2sim.core.bundle import Bundle, hash_jsonable
from real2sim.core.errors import Real2SimError
from real2sim.core.imaging import psnr, read_mask, read_rgb_float, write_rgb
from real2sim.core.stages import files_hash, run_stage
from real2sim.core.views import frame_key
from real2sim.render.overlay import overlay_panels
from real2sim.render.robot import (
    RobotModel,
    link_id_image,
    load_robot_model,
    render_links,
)

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


def robot_appearance_stage(bundle: Bundle, config: RobotAppearanceConfig | None = None, force: bool = False):
    """Fit ``robot.appearance`` from the bundle's frames. Returns (StageRecord, ran)."""
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
        model = load_robot_model(m.robot, bundle.root)
        views = []
        for (i, f), mk in zip(frames, masks):
            q = f.joint_positions if f.joint_positions else (m.robot.joint_positions or model.default_q)
            if len(q) != len(model.joint_names):
                raise Real2SimError(f"frame {frame_key(i)}: {len(q)} joint positions but robot '{m.robot.name}' has "
                                    f"{len(model.joint_names)} ({', '.join(model.joint_names)})")
            views.append((m.cameras[f.camera].camera(), read_rgb_float(bundle.path(f.image)), np.asarray(q, float),
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
        p = psnr(rend, img, real_mask)
        write_rgb(pic, overlay_panels(img, rend, real_mask, sil, title=(
            f"robot appearance: {len(fitted)} links coloured from the frames, flat-colour PSNR {p:.1f} dB under the "
            "robot mask")))
        rep = {"links": fit, "fitted": sorted(fitted), "not_seen": sorted(k for k, v in fit.items() if v["rgba"] is None),
               "frames": len(views), "psnr_db_flat_colours": round(p, 3), "picture": bundle.rel(pic)}
        outputs = [bundle.write_report(ROBOT_STAGE, rep), bundle.rel(pic)]
        return outputs, {"links_fitted": len(fitted), "links_not_seen": len(rep["not_seen"]),
                         "psnr_db": round(p, 3)}, ""

    return run_stage(bundle, ROBOT_STAGE, input_hash, dataclasses.asdict(cfg), work, force)
