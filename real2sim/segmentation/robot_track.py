"""The articulated robot found in every frame of a fixed-camera clip.

Three ways, best first (:func:`track_robot` picks none; the stage does, :mod:`segmentation.robot_fit`):

- **Recorded joints** (a LeRobot episode): the robot model is rendered at each frame's joints
  (:func:`render_recorded`); the frames' evidence only grades it.
- **Model tracking** (camera pose known, joints not): per frame, the joints are fitted by render-and-compare of the
  robot's silhouette against the frame's foreground evidence, seeded by the previous frame (:func:`track_robot`).
  Which joints are fitted comes from the robot definition: every arm joint, plus the gripper's opening (one number
  between ``gripper_closed`` and ``gripper_open``). Nelder-Mead on ``1 - IoU`` (soft, at ``fit_scale`` of the
  frame) plus a small pull towards the seed, so that joints the silhouette cannot see (a roll about a link's own
  axis) stay where they were instead of wandering. A frame whose fit stays below ``lost_iou`` is searched again
  from a coarse grid over the first three arm joints; still below, it is reported ``lost`` and the next frame is
  seeded from the last good one. After the clip, a frame whose fit fell short of the clip's is fitted again from
  each well-fitted neighbour (tracking reached it from one side only), the better fit kept. Joints no silhouette
  can tell (a head's pan and tilt seen from the camera in the head) are not fitted.
- **Motion** (camera pose unknown): everything that differs from the background or moves, minus the prompted
  objects (:func:`motion_masks`).

Foreground evidence (:func:`foreground`): the frame's difference to a background (the plate when there is one; else
the per-pixel median of the clip's distinct views, :func:`distinct_views` (a robot that stops counts once), then
of the clip without the pixels the tracked robot covers, :func:`clip_background`),
after per-channel exposure gains, thresholded at the frame's own noise level (median + ``noise_k`` robust standard
deviations of the difference). Pixels whose background was never seen, and the prompted objects' masks, count
neither way ("ignore").

The robot mask written per frame is the evidence within a few pixels of the fitted silhouette (the real robot's
pixels, cables included), plus the silhouette where the evidence is ignored.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.imaging import channel_max, channel_mean, channel_min, clean_mask, dilate, erode
from real2sim.core.imaging import iou as iou_of
from real2sim.render.robot import RobotModel, RobotSilhouette, link_id_image
from real2sim.robots.scene import moved_links
from real2sim.robots.spec import RobotDef

log = logging.getLogger(__name__)

STATES = ("prompt", "tracked", "recorded", "out_of_view", "lost", "motion")
"""Per-frame states of a robot track: the prompted (or first) frame, fitted from the previous one, rendered at
recorded joints, out of view (neither the fit nor the evidence shows it), not found (IoU below the bar: the mask
is a guess, made wide), found by motion (no robot model)."""

IN_VIEW_SHARE = 0.002
"""Evidence with fewer pixels than this share of the image shows no robot: the frame is ``out_of_view``, and a
fit to it means nothing (an empty silhouette matches empty evidence perfectly)."""


def shows_robot(ev: Evidence) -> bool:
    """Whether ``ev`` holds at least :data:`IN_VIEW_SHARE` of the image: enough to show a robot."""
    return ev.fg.sum() >= IN_VIEW_SHARE * ev.fg.size


@dataclass
class TrackConfig:
    """Settings of robot tracking."""

    fit_scale: float = 0.25
    """Image scale of the silhouettes compared while fitting (speed; the mask is made at full size)."""
    fit_faces_per_pixel: float = 0.5
    """The silhouettes the fit compares (at ``fit_scale`` and ``polish_scale``) come from meshes coarsened to at
    most this many faces per image pixel (:class:`render.robot.RobotSilhouette`); the grid search's (at
    ``search_scale``, a few pixels per link), the robot's masks and its reported silhouettes keep 2 faces per
    pixel. The fit's cost is its renders, and a render's cost its faces: the Panda's 103k-triangle meshes at 0.5
    instead of 2 cost 1.3 instead of 3.1 ms a silhouette at 160x120, and its masks stay within 0.002
    (docs/capture.md)."""
    fit_min_faces: int = 10000
    """...but a mesh is not coarsened below this many faces for the fit: at 80x64 (a 320x256 clip) the Google
    Robot's 8.3k faces at 0.5 per pixel (2.6k) fitted worse (a 60-frame clip's masks 0.877 / 0.952 -> 0.470 / 0.903
    min / mean); the WidowX (9.4k) and the Google Robot are then never coarsened for the fit, the Panda (103k) is."""
    repair_sweeps: int = 2
    """After tracking, frames whose fit falls short of the clip's (IoU under ``refit_below`` x its median) are fitted
    again from each well-fitted neighbour (:func:`_repair_from_neighbours`), in up to this many sweeps (0: off)."""
    skip_unseen_joints: bool = True
    """Arm joints no silhouette can tell are not fitted (they keep the seed's value, :meth:`Fitter.unseen_joints`):
    the Google Robot's head pan and tilt, driven with its arm, move only its head, which its camera sits in. Fitted,
    they were two of ten dimensions the Nelder-Mead search spent evaluations on."""
    fit_one_side: bool = True
    """The fit's and the grid search's silhouettes draw only the faces turned towards the camera where the robot's
    meshes are closed (:func:`render.robot.closed_enough`: the same silhouettes as both sides within 1 % at five
    poses): about 30 % less a render (the Panda at 160x120 1.66 -> 1.05-1.17 ms). Its masks keep both sides."""
    search_scale: float = 0.125
    """Image scale of the coarse grid search (first frame, and recovery after a bad fit)."""
    max_evals: int = 200
    """Nelder-Mead evaluations per frame."""
    lost_iou: float = 0.5
    """A fitted silhouette whose IoU with the evidence stays below this is ``lost`` (measured on the synthetic
    clips: tracked frames score 0.75-0.95, frames with an unknown occluder over half the arm 0.4-0.6)."""
    prior: float = 0.05
    """Weight of the pull towards the seed joints (per rad^2; the gripper opening counts in its 0..1 units)."""
    noise_k: float = 5.0
    """Foreground threshold: median + noise_k robust standard deviations of the frame-minus-background difference."""
    min_threshold: float = 8.0
    """Lowest foreground threshold (grey levels), for frames identical to the background."""
    near_frac: float = 0.012
    """The robot mask is the evidence within this fraction of the image diagonal of the fitted silhouette."""
    threshold_ladder: tuple = (1.0, 2.0, 4.0, 8.0)
    """Foreground thresholds tried on the start frame, as multiples of its noise threshold (see
    :func:`_start_frame`)."""
    polish_scale: float = 0.5
    """Image scale of a last, short fit of the start frame, where tracking begins (thin parts, a gripper's
    fingers, show there)."""
    polish_evals: int = 150
    """Nelder-Mead evaluations of that last fit (0: none)."""
    other_seeds_below: float = 0.97
    """With a plate: a frame's fit from its best-looking seed (the previous frame's joints, or those moved on at
    their last velocity) that falls below this fraction of the clip's typical IoU so far is fitted from the other
    seeds too, the best fit kept (the seed that overlaps best at the start can lead into a worse local fit).
    Without a plate the clip-median evidence is partial and its IoU does not rank such fits: the best-looking
    seed's fit is kept."""
    refit_below: float = 0.9
    """A frame whose fit falls below this fraction of the clip's typical IoU so far is searched again (grid over
    the first three arm joints around the last good pose, then a second fit)."""
    reach_frac: float = 0.1
    """Evidence counts for a frame's fit when its connected component comes within this fraction of the image
    diagonal of the robot at the seed pose (the previous frame's)."""
    refit_background: bool = True
    """Without a plate: fit, recompute the clip's median without the robot's pixels, fit again."""
    min_motion_explained: float = 0.45
    """A clip whose fitted motion explains less of the image change around the robot than this (pooled over its
    frames, :func:`motion_explained`) gets a note that the fit may be stuck or drifting. Measured (synthetic clips,
    truth known): 0.14 for the Panda without a plate (a white arm lingering in the clip's median, the fit standing
    still, masks 0.47-0.96), 0.33 for the WidowX without a plate on a noisy clip (masks 0.63-0.87); 0.58-0.81 for
    the clips whose fits hold, with a plate or without."""
    start_candidates: int = 4
    """With a plate, a start frame whose seed joints fit worse than ``lost_iou`` is fitted from this many of the grid
    search's best poses (distinct ones), the best fit kept. Without a plate, from the best one only: the clip
    median's evidence is partial and its IoU does not rank such fits (whole clips then gained and lost about as
    much, and a synthetic clip's start frame fitted worse and was sent to motion)."""
    still_frac: float = 0.003
    """Without a plate, consecutive frames that differ from each other in less than this fraction of their pixels
    (beyond the noise) show one view, counted once in the clip's median (:func:`distinct_views`). Measured on the
    plate benchmark's clips: a held robot 0.00-0.19 % (JPEG), a moving one 0.2-18 % (below 0.5 % only at the turns
    of its path, where neighbouring frames are nearly one view anyway)."""
    prompt_fit_iou: float = 0.8
    """Without a plate, when the start frame does not fit against the clip's median (the robot stands in the median:
    a large arm moving little), the robot is fitted to the prompt's mask instead if it matches it this well (IoU);
    a model that cannot (a wrong camera pose) leaves the robot to motion segmentation."""


@dataclass
class JointSpace:
    """Which joints are fitted and how: arm joints by index, the gripper as one opening in [0, 1]."""

    arm: np.ndarray
    """``(k,) int`` indices of the arm joints in the joint vector."""
    lower: np.ndarray
    """``(k,)`` joint limits of the arm joints (rad or m)."""
    upper: np.ndarray
    gripper: np.ndarray
    """``(g,) int`` indices of the gripper joints (may be empty)."""
    closed: np.ndarray
    """``(g,)`` gripper joints closed and open."""
    open: np.ndarray

    @property
    def size(self) -> int:
        return len(self.arm) + (1 if len(self.gripper) else 0)

    def to_x(self, q) -> np.ndarray:
        """Fit parameters ``(size,)`` of joint vector ``q``."""
        q = np.asarray(q, float)
        x = list(q[self.arm])
        if len(self.gripper):
            d = self.open - self.closed
            x.append(float(np.dot(q[self.gripper] - self.closed, d) / max(np.dot(d, d), 1e-12)))
        return np.array(x)

    def to_q(self, x, q_base) -> np.ndarray:
        """Joint vector: ``q_base`` with the fitted joints set from ``x`` (clamped to the limits)."""
        q = np.array(q_base, float)
        q[self.arm] = np.clip(x[:len(self.arm)], self.lower, self.upper)
        if len(self.gripper):
            o = float(np.clip(x[-1], 0.0, 1.0))
            q[self.gripper] = self.closed + o * (self.open - self.closed)
        return q

    def without_arm(self, drop) -> "JointSpace":
        """This space without the arm joints where ``drop`` ``(k,) bool`` is True (they keep the seed's value)."""
        keep = ~np.asarray(drop, bool)
        return JointSpace(self.arm[keep], self.lower[keep], self.upper[keep], self.gripper, self.closed, self.open)

    def steps(self) -> np.ndarray:
        """Initial simplex steps: 0.12 rad per arm joint, 0.3 of the gripper's range."""
        return np.array([0.12] * len(self.arm) + ([0.3] if len(self.gripper) else []))


def joint_space(robot: RobotDef, model: RobotModel) -> JointSpace:
    """The fitted joints of ``robot``: its ``arm_joints`` within their URDF limits and its gripper opening."""
    names = list(model.joint_names)
    limits = {j.name: (j.lower, j.upper) for j in model.joints}
    arm = np.array([names.index(j) for j in robot.arm_joints], int)
    lo = np.array([limits.get(j, (-np.pi, np.pi))[0] for j in robot.arm_joints], float)
    hi = np.array([limits.get(j, (-np.pi, np.pi))[1] for j in robot.arm_joints], float)
    unlimited = hi <= lo
    lo[unlimited], hi[unlimited] = -np.pi, np.pi
    grip = np.array([names.index(j) for j in robot.gripper_joints], int)
    return JointSpace(arm, lo, hi, grip, np.asarray(robot.gripper_closed, float), np.asarray(robot.gripper_open, float))


# -- evidence --------------------------------------------------------------------------------------------------
def exposure_gains(frame: np.ndarray, background: np.ndarray) -> np.ndarray:
    """``(3,)`` per-channel gains mapping ``background`` ``(h, w, 3)`` to ``frame``'s exposure (median ratio)."""
    a = frame[::4, ::4].reshape(-1, 3).astype(np.float32) + 1.0
    b = background[::4, ::4].reshape(-1, 3).astype(np.float32) + 1.0
    return np.median(a / b, axis=0)


def difference(frame: np.ndarray, background: np.ndarray, shadow_ratio: float = 0.4,
               shadow_chroma: float = 0.12, lit_from: np.ndarray | None = None, shadows: bool = True) -> np.ndarray:
    """``(h, w) float32`` largest per-channel difference of ``frame`` to the exposure-matched ``background``
    (both ``(h, w, 3) uint8``, lightly blurred against sensor noise), 0 where the change is a shadow.

    A shadow darkens all channels by about the same ratio, and a shadow that has left (a background made while it
    was there) brightens them so: per-channel ratios frame / background between ``shadow_ratio`` and its inverse,
    within ``shadow_chroma`` of each other (relative), are illumination, not robot (brightening only up to the
    brightest background nearby: the lit surface). A dark robot on a coloured table changes the channels
    by different ratios; on a grey surface it is darker than ``shadow_ratio``. ``lit_from``: ``(h, w) bool`` the
    background pixels that tell how bright the surface is lit (default all; leave out those that may hold the
    robot itself); ``shadows``: False counts shadows as change too."""
    import cv2

    g = exposure_gains(frame, background)
    f = cv2.GaussianBlur(frame.astype(np.float32), (3, 3), 0)
    b = cv2.GaussianBlur(background.astype(np.float32), (3, 3), 0) * g
    d = channel_max(np.abs(f - b))
    if not shadows:
        return d
    ratio = (f + 1.0) / (b + 1.0)
    lo, hi = channel_min(ratio), channel_max(ratio)
    shadow = (lo > shadow_ratio) & (hi < 1.0 / shadow_ratio) & (hi - lo < shadow_chroma * hi)
    # brighter at the same chroma is a shadow that left only up to the brightest background nearby (the lit
    # surface): a white or grey robot in front of a plain grey wall is brighter than anything around it
    k = max(3, frame.shape[1] // 4) | 1
    bright = channel_mean(b)
    bright = bright if lit_from is None else np.where(lit_from, bright, 0.0).astype(np.float32)
    lit = cv2.dilate(bright, np.ones((k, k), np.uint8))
    shadow &= (lo < 1.05) | (channel_mean(f) <= 1.15 * lit + 4.0)
    d[shadow] = 0.0
    return d


def noise_threshold(diff: np.ndarray, k: float, floor: float, valid: np.ndarray | None = None) -> float:
    """Foreground threshold of a difference image: median + ``k`` x 1.4826 MAD over ``valid`` pixels."""
    d = diff[valid] if valid is not None and valid.any() else diff.ravel()
    d = d[:: max(1, d.size // 200000)]
    med = float(np.median(d))
    mad = float(np.median(np.abs(d - med)))
    return max(floor, med + k * 1.4826 * mad)


def foreground(frame: np.ndarray, background: np.ndarray, cfg: TrackConfig, valid: np.ndarray | None = None,
               floor: float | None = None, lit_from: np.ndarray | None = None, shadows: bool = True
               ) -> tuple[np.ndarray, float]:
    """(``(h, w) bool`` pixels that differ from ``background`` beyond the frame's noise (and ``floor``, when
    given), the threshold used). ``lit_from``, ``shadows``: see :func:`difference`."""
    d = difference(frame, background, lit_from=lit_from, shadows=shadows)
    thr = max(noise_threshold(d, cfg.noise_k, cfg.min_threshold, valid), floor or 0.0)
    r = max(1, round(min(frame.shape[:2]) / 400))
    return clean_mask(d > thr, open_px=r, close_px=r, fill=False, min_area=4 * r * r), thr


def clip_background(frames: np.ndarray, masks: np.ndarray | None = None, max_frames: int = 15
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(``(h, w, 3) uint8`` per-pixel median of the frames outside ``masks``, ``(h, w) bool`` pixels seen at all).

    ``frames``: ``(n, h, w, 3) uint8``; ``masks``: ``(n, h, w) bool`` foreground to leave out (None: none). At
    most ``max_frames`` evenly spaced frames are used. Where every frame is masked the plain median is kept and
    the pixel is reported unseen."""
    idx = np.unique(np.linspace(0, len(frames) - 1, min(max_frames, len(frames))).round().astype(int))
    lanes = np.moveaxis(frames[idx], 0, -1).astype(np.uint16)  # (h, w, 3, k): each pixel's samples contiguous
    plain = _middle_mean(np.sort(lanes, axis=-1), np.full(frames.shape[1:3], len(idx)))
    if masks is None:
        return plain.astype(np.uint8), np.ones(frames.shape[1:3], bool)
    m = np.moveaxis(np.asarray(masks, bool)[idx], 0, -1)  # (h, w, k)
    lanes[np.broadcast_to(m[:, :, None, :], lanes.shape)] = 256  # masked samples sort after every level
    lanes.sort(axis=-1)
    count = len(idx) - m.sum(-1)
    seen = count > 0
    med = np.where(seen[..., None], _middle_mean(lanes, count), plain)
    return np.clip(med, 0, 255).astype(np.uint8), seen


def _middle_mean(lanes: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``(h, w, 3) float32`` mean of the two middle values of each pixel's first ``count`` ``(h, w) int`` sorted
    samples ``lanes`` ``(h, w, 3, k)``: the median of those samples (``np.nanmedian``'s value, a sort of
    small integers instead of its masked-array path: about 4x faster)."""
    c = np.maximum(count, 1)[..., None, None]
    shape = lanes.shape[:3] + (1,)
    lo = np.take_along_axis(lanes, np.broadcast_to((c - 1) // 2, shape), -1)[..., 0]
    hi = np.take_along_axis(lanes, np.broadcast_to(c // 2, shape), -1)[..., 0]
    return (lo.astype(np.float32) + hi) / 2


def distinct_views(frames: np.ndarray, cfg: TrackConfig) -> np.ndarray:
    """``(k,) int`` frames of ``frames`` ``(n, h, w, 3) uint8`` for a median that counts each view once: of each
    stretch of consecutive frames that differ from the stretch's first by less than ``cfg.still_frac`` of their
    pixels (beyond the noise), only the first, where the stretch is long enough to sway a median (at least three
    frames and an eighth of the clip). A robot held still over half the clip is otherwise the clip's median there,
    and not found in those frames. Short stretches are kept: nearly equal neighbours at the turns of the robot's
    path bias no median, and dropping them would only change which frames the median samples."""
    stretches = [[0]]
    for i in range(1, len(frames)):
        if foreground(frames[i], frames[stretches[-1][0]], cfg)[0].mean() < cfg.still_frac:
            stretches[-1].append(i)
        else:
            stretches.append([i])
    long = max(3, len(frames) / 8)
    return np.array([i for s in stretches for i in (s[:1] if len(s) >= long else s)])


def motion_evidence(frames: np.ndarray, i: int, cfg: TrackConfig) -> np.ndarray:
    """``(h, w) bool`` pixels of frame ``i`` that change both from the previous and to the next frame (where a
    moving thing is *in* frame ``i``, not where it was); ``(h, w)`` False for a one-frame clip."""
    n = len(frames)
    if n < 2:
        return np.zeros(frames.shape[1:3], bool)
    out = None
    for j in (i - 1, i + 1):
        if 0 <= j < n:
            fg, _ = foreground(frames[i], frames[j], cfg)
            out = fg if out is None else out & fg
    return out


# -- fitting ---------------------------------------------------------------------------------------------------
def scaled_camera(camera: Camera, scale: float) -> Camera:
    """``camera`` for images ``scale`` times the size (same pose)."""
    K = np.array(camera.K, float)
    K[:2] *= scale
    return Camera(max(1, int(round(camera.width * scale))), max(1, int(round(camera.height * scale))), K,
                  np.asarray(camera.T_world_camera, float), near=camera.near, far=camera.far)


def silhouette(model: RobotModel, camera: Camera, q) -> np.ndarray:
    """``(h, w) bool`` the robot's pixels at joint vector ``q``."""
    return link_id_image(model, camera, q)[0] >= 0


def _small(mask: np.ndarray, cam: Camera) -> np.ndarray:
    """``(h', w') float32`` fraction of each low-resolution pixel that ``mask`` covers."""
    import cv2

    return cv2.resize(np.asarray(mask, np.float32), (cam.width, cam.height), interpolation=cv2.INTER_AREA)


def soft_iou(sil: np.ndarray, target: np.ndarray, weight: np.ndarray) -> float:
    """IoU of a binary silhouette and a soft target ``(h, w)`` in [0, 1], pixels weighted by ``weight`` (0 =
    ignored). 1 when both are empty."""
    s = sil.astype(np.float32)
    inter = float((weight * np.minimum(s, target)).sum())
    union = float((weight * np.maximum(s, target)).sum())
    return 1.0 if union < 1e-6 else inter / union


@dataclass
class Evidence:
    """One frame's evidence at full size and at the fitting scale."""

    fg: np.ndarray
    """``(h, w) bool`` foreground that may be robot (differs from the background, robot-coloured)."""
    ignore: np.ndarray
    """``(h, w) bool`` pixels that count neither way: objects, unseen background, foreground of colours the robot
    does not show (an occluder)."""
    unseen: np.ndarray
    """``(h, w) bool`` pixels whose background was never seen (the silhouette stands in for the evidence)."""
    target: np.ndarray
    """``(h', w') float32`` foreground fraction per low-resolution pixel."""
    weight: np.ndarray
    """``(h', w') float32`` 1 - ignored fraction per low-resolution pixel."""
    threshold: float = 0.0


def make_evidence(fg: np.ndarray, ignore: np.ndarray, cam_small: Camera, unseen: np.ndarray | None = None,
                  threshold: float = 0.0) -> Evidence:
    """:class:`Evidence` of a foreground mask and an ignore mask (``(h, w) bool`` each)."""
    unseen = np.zeros_like(fg) if unseen is None else unseen
    return Evidence(fg & ~ignore, ignore, unseen, _small(fg & ~ignore, cam_small), 1.0 - _small(ignore, cam_small),
                    threshold)


class ColourModel:
    """The colours the robot shows: a coarse RGB histogram of its pixels in one frame (``bins`` levels per
    channel; a bin holding at least ``min_frac`` of the pixels is the robot's, and so are its neighbours)."""

    def __init__(self, image: np.ndarray, mask: np.ndarray, bins: int = 8, min_frac: float = 0.002):
        from scipy.ndimage import binary_dilation

        self.bins = bins
        idx = self._index(image[np.asarray(mask, bool)])
        hist = np.bincount(idx, minlength=bins ** 3) / max(1, len(idx))
        seen = (hist >= min_frac).reshape(bins, bins, bins)
        self.table = binary_dilation(seen, np.ones((3, 3, 3), bool)).ravel()

    def _index(self, rgb: np.ndarray) -> np.ndarray:
        q = (np.asarray(rgb, np.int64) * self.bins) // 256
        return (q[..., 0] * self.bins + q[..., 1]) * self.bins + q[..., 2]

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """``(h, w) bool`` pixels of ``image`` ``(h, w, 3) uint8`` in the robot's colours."""
        return self.table[self._index(image)]


class Fitter:
    """Render-and-compare of the robot's joints against one frame's evidence at the fitting scale."""

    def __init__(self, model: RobotModel, camera: Camera, space: JointSpace, cfg: TrackConfig):
        self.model, self.space, self.cfg = model, space, cfg
        self.camera = camera
        self.small = scaled_camera(camera, cfg.fit_scale)
        self.coarse = scaled_camera(camera, cfg.search_scale)
        budget = dict(faces_per_pixel=cfg.fit_faces_per_pixel, min_faces=cfg.fit_min_faces, one_side=cfg.fit_one_side)
        self.sil_small = RobotSilhouette(model, self.small, **budget)
        self.sil_coarse = RobotSilhouette(model, self.coarse, one_side=cfg.fit_one_side)
        self.sil_full = RobotSilhouette(model, camera)
        self.fine = scaled_camera(camera, cfg.polish_scale)
        self.sil_fine = RobotSilhouette(model, self.fine, **budget)
        if cfg.skip_unseen_joints:
            self.space = space.without_arm(self.unseen_joints())

    def unseen_joints(self) -> np.ndarray:
        """``(k,) bool`` the arm joints no silhouette can tell: those that move no link the silhouettes draw, and
        those that move a link the camera sits in (a head's pan and tilt: the camera's pose is given, so the
        camera does not move with them, and the head is left out of the silhouettes)."""
        drawn, carrier = set(self.sil_full.names), self.sil_full.around
        moved = [moved_links(self.model.joints, self.model.joint_names[i]) for i in self.space.arm]
        return np.array([not (links & drawn) or bool(links & carrier) for links in moved], bool)

    def iou(self, q, ev: Evidence) -> float:
        return soft_iou(self.sil_small(q), ev.target, ev.weight)

    def fit(self, ev: Evidence, q_seed, max_evals: int | None = None) -> tuple[np.ndarray, float, int]:
        """(fitted joints, IoU at the fitting scale, evaluations): Nelder-Mead from ``q_seed``."""
        from scipy.optimize import minimize

        sp, cfg = self.space, self.cfg
        x0 = sp.to_x(q_seed)
        scale = np.r_[np.ones(len(sp.arm)), np.ones(sp.size - len(sp.arm))]

        def loss(x):
            q = sp.to_q(x, q_seed)
            return 1.0 - self.iou(q, ev) + cfg.prior * float((((x - x0) * scale) ** 2).sum())

        budget = max_evals or cfg.max_evals
        x, nfev, steps = x0, 0, sp.steps()
        for part in (0.5, 0.5):
            simplex = np.vstack([x, x + np.diag(steps)])
            res = minimize(loss, x, method="Nelder-Mead",
                           options={"maxfev": int(part * budget), "initial_simplex": simplex,
                                    "xatol": 2e-3, "fatol": 1e-3})
            x, nfev = res.x, nfev + int(res.nfev)
            if part == 0.5 and nfev < budget:  # probe each joint a big step either way (a gripper seen turned
                # a quarter turn, an elbow bent the other way) and go on from the best
                x, k = self._probe(loss, x, float(res.fun), steps * 3)
                nfev += k
            steps = steps * 0.5
        q = sp.to_q(x, q_seed)
        return q, self.iou(q, ev), nfev

    def polish(self, ev: Evidence, q, evals: int | None = None) -> np.ndarray:
        """Joints after a short Nelder-Mead (``evals``, default ``polish_evals``) at ``polish_scale`` from ``q``
        (small steps: the pose is close)."""
        from scipy.optimize import minimize

        sp, cfg = self.space, self.cfg
        evals = cfg.polish_evals if evals is None else evals
        if evals <= 0 or not ev.fg.any():
            return np.asarray(q, float)
        target, weight = _small(ev.fg, self.fine), 1.0 - _small(ev.ignore, self.fine)
        x0 = sp.to_x(q)

        def loss(x):
            return 1.0 - soft_iou(self.sil_fine(sp.to_q(x, q)), target, weight) + cfg.prior * float(((x - x0) ** 2).sum())

        res = minimize(loss, x0, method="Nelder-Mead",
                       options={"maxfev": evals, "initial_simplex": np.vstack([x0, x0 + np.diag(sp.steps() / 4)]),
                                "xatol": 1e-3, "fatol": 1e-4})
        return sp.to_q(res.x, q) if res.fun < loss(x0) else np.asarray(q, float)

    @staticmethod
    def _probe(loss, x, fx: float, steps) -> tuple[np.ndarray, int]:
        """(best of ``x`` and ``x`` +- ``steps`` along each axis, evaluations)."""
        best, best_f, n = x, fx, 0
        for j in range(len(x)):
            for sgn in (-1.0, 1.0):
                y = x.copy()
                y[j] += sgn * steps[j]
                f = loss(y)
                n += 1
                if f < best_f - 1e-3:
                    best, best_f = y, f
        return best, n

    def search(self, ev: Evidence, q_center, span=(0.8, 0.5, 0.5), steps=(9, 5, 5)) -> tuple[np.ndarray, int]:
        """(best joints, renders) of a grid over the first three arm joints around ``q_center`` at the coarse
        scale (the rest stay)."""
        found, n = self.search_top(ev, q_center, 1, span, steps)
        return found[0], n

    def search_top(self, ev: Evidence, q_center, count: int, span=(0.8, 0.5, 0.5), steps=(9, 5, 5)
                   ) -> tuple[list, int]:
        """(the ``count`` best joints of the grid of :meth:`search`, each at least two grid steps from the better
        ones in some joint, best first; renders)."""
        sp = self.space
        tgt = _small(ev.fg & ~ev.ignore, self.coarse)
        wgt = 1.0 - _small(ev.ignore, self.coarse)
        k = min(3, len(sp.arm))
        axes = [np.linspace(-span[j], span[j], steps[j]) for j in range(k)]
        grid = np.array(np.meshgrid(*axes, indexing="ij")).reshape(k, -1).T
        qs, scores = [], []
        for d in grid:
            q = np.array(q_center, float)
            q[sp.arm[:k]] = np.clip(q[sp.arm[:k]] + d, sp.lower[:k], sp.upper[:k])
            qs.append(q)
            scores.append(soft_iou(self.sil_coarse(q), tgt, wgt))
        cell = np.array([2 * span[j] / max(steps[j] - 1, 1) for j in range(k)])
        picked: list = []
        for i in np.argsort(scores, kind="stable")[::-1]:
            if all((np.abs(grid[i] - grid[j]) >= 2 * cell - 1e-9).any() for j in picked):
                picked.append(i)
                if len(picked) == count:
                    break
        return [qs[i] for i in picked], len(grid)


# -- tracking --------------------------------------------------------------------------------------------------
@dataclass
class RobotTrack:
    """The robot through a clip."""

    joints: np.ndarray
    """``(n, dof)`` joint vector per frame (the seed's value for a ``lost`` frame)."""
    masks: list
    """``(h, w) bool`` the robot's pixels per frame."""
    silhouettes: list
    """``(h, w) bool`` the robot model rendered at the frame's joints (empty for ``motion``)."""
    iou: np.ndarray
    """``(n,)`` silhouette IoU with the frame's evidence (NaN for ``motion``)."""
    states: list
    """Per frame, one of :data:`STATES`."""
    evaluations: list = field(default_factory=list)
    method: str = "model"
    """``model``, ``recorded`` or ``motion``."""
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    iou_start: float | None = None
    """Silhouette IoU of the start joints on the start frame (what the fit improved on)."""
    motion_explained: list = field(default_factory=list)
    """Per frame, the share of the image change around the robot since its neighbouring frame (towards the start)
    that the fitted motion explains (:func:`motion_explained`); None where too little changed to tell."""
    motion_explained_clip: float | None = None
    """The same pooled over the clip (None: too little change, or not a model fit)."""


def _order(n: int, start: int):
    """[(frame, seed frame)] from ``start`` outwards: forwards, then backwards."""
    return [(i, i - 1) for i in range(start + 1, n)] + [(i, i + 1) for i in range(start - 1, -1, -1)]


def robot_pixels(ev: Evidence, sil: np.ndarray, near_px: int) -> np.ndarray:
    """``(h, w) bool`` the evidence within ``near_px`` of the silhouette ``(h, w) bool``, plus the silhouette where
    the background was never seen."""
    return (ev.fg & dilate(sil, near_px)) | (sil & ev.unseen)


def _evidences(frames, background, excluded, fitter: Fitter, cfg: TrackConfig, unseen=None,
               colours: ColourModel | None = None, floor: float | None = None, lit_from=None) -> list[Evidence]:
    """Per frame: foreground against ``background`` (threshold at least ``floor``); ``excluded`` ``(n, h, w)
    bool`` and ``unseen`` ignored; foreground not in the robot's ``colours`` ignored too. ``lit_from``: ``(h, w)
    bool`` the background pixels that tell how bright the surface is lit (default all; see :func:`difference`)."""
    def one(i: int) -> Evidence:
        ign = excluded[i] if unseen is None else excluded[i] | unseen
        fg, thr = foreground(frames[i], background, cfg, ~ign, floor, lit_from)
        if colours is not None:
            ign = ign | (fg & ~colours(frames[i]))
        return make_evidence(fg, ign, fitter.small, unseen, thr)

    return _per_frame(one, range(len(frames)))


def _per_frame(fn, items) -> list:
    """``[fn(x) for x in items]`` on up to ``os.cpu_count()`` threads (frames are independent; OpenCV and numpy's
    array work release the GIL), in order."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    workers = min(len(items), os.cpu_count() or 1, 4)
    if workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="robot-track") as pool:
        return list(pool.map(fn, items))


def near_components(ev: Evidence, region: np.ndarray, cam_small: Camera) -> Evidence:
    """``ev`` with its foreground cut to the connected components that reach into ``region`` ``(h, w) bool``
    (where the robot can be: near its seed pose, or the prompt): other changes (objects nobody prompted, a plate
    that differs along an edge) count as background."""
    import cv2

    n, lab = cv2.connectedComponents(ev.fg.astype(np.uint8), connectivity=8)
    keep = np.zeros(n, bool)
    keep[np.unique(lab[region & ev.fg])] = True
    keep[0] = False
    fg = keep[lab]
    return Evidence(fg, ev.ignore, ev.unseen, _small(fg, cam_small), ev.weight, ev.threshold)


def _near(fitter: Fitter, ev: Evidence, q, extra: np.ndarray | None = None) -> Evidence:
    """``ev`` cut to the components within ``reach_frac`` of the image diagonal of the robot at ``q`` (and of
    ``extra``); the reach is drawn at the fitting scale (a wide dilation at full size costs more than the fit)."""
    import cv2

    small = fitter.sil_small(q)
    r = max(1, int(round(fitter.cfg.reach_frac * np.hypot(*small.shape))))
    h, w = ev.fg.shape
    region = cv2.resize(dilate(small, r).astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST) > 0
    return near_components(ev, region if extra is None else region | extra, fitter.small)


def _track_pass(fitter: Fitter, evs: list[Evidence], q_start, start: int, seeds=None, search_first: bool = True,
                max_evals: int | None = None, region: np.ndarray | None = None, all_seeds: bool = False
                ) -> tuple[np.ndarray, np.ndarray, list, list, list]:
    """Fit every frame from ``start`` outwards, each against its evidence near the seed pose (:func:`_near`).
    ``seeds``: ``(n, dof)`` per-frame seeds of an earlier pass (used besides the neighbour's joints); ``region``:
    where the robot may also be on the start frame (the prompt); ``all_seeds``: a frame whose fit falls short is
    fitted from every seed (``TrackConfig.other_seeds_below``), and a start frame whose seed does not fit from the
    grid's ``start_candidates`` best poses (for evidence against a plate, whose IoU can be trusted to rank fits).
    Returns (joints, IoU, states, evaluations, the evidences used)."""
    cfg, n = fitter.cfg, len(evs)
    Q = np.zeros((n, len(q_start)))
    iou = np.zeros(n)
    states, nev, used = [""] * n, [0] * n, list(evs)
    q0 = np.asarray(q_start, float)
    ev = used[start] = _near(fitter, evs[start], q0, region)
    if search_first and fitter.iou(q0, ev) < cfg.lost_iou:  # the seed is far off: fit from the grid's best few
        starts, renders = fitter.search_top(ev, q0, cfg.start_candidates if all_seeds else 1)
        fits = [fitter.fit(ev, q, max_evals) for q in starts]
        Q[start], iou[start], _ = max(fits, key=lambda f: f[1])
        nev[start] = renders + sum(f[2] for f in fits)
    else:
        Q[start], iou[start], nev[start] = fitter.fit(ev, q0, max_evals)
    states[start] = "prompt"
    good = {start: Q[start]}
    for i, j in _order(n, start):
        last = good.get(j, Q[j])
        cands = [last] + ([seeds[i]] if seeds is not None else [])
        prev = 2 * j - i  # the frame before the seed frame, in this direction of travel
        if j in good and prev in good:  # the seed moved on at its last velocity (a smooth trajectory)
            sp = fitter.space
            cands.append(sp.to_q(2 * sp.to_x(last) - sp.to_x(good[prev]), last))
        ev = used[i] = _near(fitter, evs[i], last)
        wide = (0.5, 0.4, 0.4)
        if ev.fg.sum() < IN_VIEW_SHARE * ev.fg.size < evs[i].fg.sum():  # nothing near where it was: back into view elsewhere
            ev = used[i] = evs[i]
            wide = (0.8, 0.6, 0.6)
        cands.sort(key=lambda q: fitter.iou(q, ev), reverse=True)
        q, v, k = fitter.fit(ev, cands[0], max_evals)
        typical = np.median([iou[f] for f in good]) if good else 1.0
        for other in cands[1:] if all_seeds and v < cfg.other_seeds_below * typical else ():
            q2, v2, k2 = fitter.fit(ev, other, max_evals)
            k += k2
            if v2 > v:
                q, v = q2, v2
        if v < max(cfg.lost_iou, cfg.refit_below * typical):  # search again around the last good pose
            qs, ks = fitter.search(ev, last, span=wide, steps=(5, 5, 5))
            q2, v2, k2 = fitter.fit(ev, qs, max_evals)
            k += ks + k2
            if v2 > v:
                q, v = q2, v2
        Q[i], iou[i], nev[i] = q, v, k
        states[i] = "tracked" if v >= cfg.lost_iou else "lost"
        good[i] = q if v >= cfg.lost_iou else last
    return Q, iou, states, nev, used


def track_robot(frames: np.ndarray, camera: Camera, model: RobotModel, space: JointSpace, q_start, start: int = 0,
                background: np.ndarray | None = None, exclude: np.ndarray | None = None,
                prompt_mask: np.ndarray | None = None, config: TrackConfig | None = None) -> RobotTrack:
    """Fit the robot's joints in every frame of a fixed camera's clip.

    ``frames``: ``(n, h, w, 3) uint8``; ``camera``: their camera (pose known); ``q_start``: joints to start the
    ``start`` frame from (the whole vector; the fitted ones move); ``background``: the plate ``(h, w, 3) uint8``
    (None: from the clip itself); ``exclude``: ``(n, h, w) bool`` pixels of other entities (prompted objects), not
    evidence either way; ``prompt_mask``: ``(h, w) bool`` the robot's prompted mask on frame ``start``: the
    evidence components it touches are the robot's there.
    """
    t0 = time.perf_counter()
    cfg = config or TrackConfig()
    frames = np.asarray(frames)
    n, h, w = frames.shape[:3]
    excl = np.zeros((n, h, w), bool) if exclude is None else np.stack([dilate(e, 2) for e in exclude])
    fitter = Fitter(model, camera, space, cfg)
    near = max(2, int(round(cfg.near_frac * np.hypot(h, w))))
    bg, unseen = (background, None) if background is not None else \
        (clip_background(frames[distinct_views(frames, cfg)])[0], None)
    refit = background is None and cfg.refit_background and n > 1
    by_prompt = background is None and prompt_mask is not None and n > 1
    first, stands = None, None  # stands: (joints, IoU) fitted to the prompt's mask
    if by_prompt:  # a start frame that does not fit against the clip's median: the median holds the robot there
        stands = _fit_to_mask(fitter, prompt_mask, excl[start], q_start)
        if stands[1] >= cfg.prompt_fit_iou:  # the median's evidence fitted from the prompt's pose: one fit
            first = _start_frame(fitter, frames[start], bg, excl[start], stands[0], prompt_mask, fitted=True)
        if first is None or first[3] >= cfg.lost_iou:  # the median may fit: the start frame as without a prompt
            first = _start_frame(fitter, frames[start], bg, excl[start], q_start, prompt_mask)
    prompt_fits = stands is not None and stands[1] >= cfg.prompt_fit_iou
    if not (prompt_fits and not first[3] >= cfg.lost_iou):  # against the median (or the plate)
        Q, iou, states, nev, evs, floor = _fit_clip(fitter, frames, bg, unseen, excl, q_start, start, prompt_mask,
                                                    all_seeds=background is not None, start_fit=first)
        notes = [f"foreground threshold at least {floor:.0f} grey levels (chosen on frame {start})"]
        if refit:
            Q, iou, states, nev, evs, floor = _refit(fitter, frames, bg, excl, Q, start, prompt_mask, nev, evs,
                                                     floor, notes, iou, states, near)
        # still no fit on the start frame: the median holds the robot where it hardly moves (a large arm, its base)
        from_prompt = prompt_fits and not iou[start] >= cfg.lost_iou
    else:  # tracking against that median is wasted: from the prompt's fit at once
        nev, from_prompt = [0] * n, True
        notes = [f"foreground threshold at least {first[1]:.0f} grey levels (chosen on frame {start}, against the "
                 "clip's median)"]
    if from_prompt:
        Q, iou, states, nev2, evs, floor = _track_from_prompt(fitter, frames, excl, *stands, start, prompt_mask,
                                                              notes, near, refit)
        nev = [a + b for a, b in zip(nev, nev2)]
    if cfg.repair_sweeps:
        nev = _repair_from_neighbours(fitter, evs, Q, iou, states, nev, start)
    if states[start] != "lost":
        Q[start] = fitter.polish(evs[start], Q[start])
    sils = [fitter.sil_full(q) for q in Q]
    masks = [robot_pixels(ev, sil, near) for ev, sil in zip(evs, sils)]
    iou, states = _grade(evs, sils, masks, states, cfg, notes)
    for i in range(n):
        if states[i] == "lost":
            masks[i] = masks[i] | dilate(sils[i], near)
        elif states[i] == "out_of_view":
            masks[i] = np.zeros((h, w), bool)
    explained, pooled = motion_explained(frames, sils, states, excl, floor, near, start, cfg)
    if pooled is not None and pooled < cfg.min_motion_explained:
        notes.append(f"the fitted motion explains {100 * pooled:.0f}% of the image change around the robot between "
                     f"neighbouring frames (fits that follow the arm: 58-81%): the fit may be stuck or drifting, "
                     "its IoU measured against evidence that misses the arm (a robot that lingers in the clip's "
                     "median); give a plate or recorded joints")
        log.warning("robot track: %s", notes[-1])
    secs = time.perf_counter() - t0
    graded = np.asarray(iou, float)[np.isfinite(iou)]  # (no frame graded: no median, and no numpy warning)
    log.info("robot track: %d frames, %d lost, IoU median %s, %.2f s/frame", n, states.count("lost"),
             f"{np.median(graded):.3f}" if graded.size else "-", secs / n)
    ev = evs[start]
    iou0 = soft_iou(fitter.sil_full(q_start), ev.fg.astype(np.float32), (~ev.ignore).astype(np.float32))
    return RobotTrack(Q, masks, sils, iou, states, nev, "model", secs, notes, iou0, explained, pooled)


def motion_explained(frames: np.ndarray, sils: list, states: list, excl: np.ndarray, floor: float, near: int,
                     start: int, cfg: TrackConfig) -> tuple[list, float | None]:
    """(per frame, pooled) share of the image change around the robot that the fitted motion explains.

    For each frame and its neighbour towards ``start`` (both fitted: not ``lost`` / ``out_of_view``): the pixels
    within ``near`` of either silhouette ``(h, w) bool`` whose difference between the two frames is beyond the
    noise (and ``floor``), other entities (``excl``) left out; explained are those within ``near // 4`` of where
    the silhouettes differ. This needs no background, so it checks a fit whose evidence came from a clip median that
    holds the arm: such a fit can agree with its evidence (high IoU) and still stand still while the arm moves.
    A pair with fewer changed pixels than 0.2 % of the image says nothing (None)."""
    n, h, w = frames.shape[:3]
    fitted = [st not in ("lost", "out_of_view") for st in states]
    pairs = [(i, j) for i, j in _order(n, start) if fitted[i] and fitted[j]]

    def counts(pair) -> tuple[int, int]:  # (changed, explained) pixels
        i, j = pair
        d = difference(frames[i], frames[j])
        around = dilate(sils[i] | sils[j], near) & ~excl[i] & ~excl[j]
        changed = (d > noise_threshold(d, cfg.noise_k, max(cfg.min_threshold, floor), ~around)) & around
        return int(changed.sum()), int((changed & dilate(sils[i] ^ sils[j], max(1, near // 4))).sum())

    out: list = [None] * n
    total = hit = 0
    for (i, _), (c, e) in zip(pairs, _per_frame(counts, pairs)):
        if c >= 0.002 * h * w:
            out[i] = round(e / c, 4)
            total, hit = total + c, hit + e
    return out, (hit / total if total else None)


def _refit(fitter: Fitter, frames, bg, excl, Q, start: int, prompt_mask, nev, evs, floor, notes: list, iou, states,
           near: int, by_prompt: bool = False):
    """No plate: the clip's median again, without the pixels the tracked robot covers (and, ``by_prompt``, what the
    prompt said is robot); where that changes the background (the robot lingered), fit again from there."""
    robot = np.stack([dilate(fitter.sil_full(q), near) for q in Q])
    if by_prompt:
        robot[start] |= prompt_mask
    bg2, seen = clip_background(frames, robot | excl)
    changed = float((difference(bg2, bg) > floor).mean())
    notes.append(f"no plate: background = median of the clip without the tracked robot ({100 * changed:.1f}% "
                 f"of pixels changed by leaving the robot out, {100 * (1 - seen.mean()):.1f}% never seen)")
    if changed <= 0.002:
        return Q, iou, states, nev, evs, floor
    Q, iou, states, nev2, evs, floor = _fit_clip(fitter, frames, bg2, ~seen, excl, Q[start], start, prompt_mask,
                                                 seeds=Q, prompt_where_unseen=by_prompt,
                                                 lit_from=_lit_without(seen, prompt_mask, near) if by_prompt else None,
                                                 fitted=iou[start] >= fitter.cfg.lost_iou)
    return Q, iou, states, [a + b for a, b in zip(nev, nev2)], evs, floor


def _track_from_prompt(fitter: Fitter, frames, excl, q_first, v: float, start: int, prompt_mask, notes: list,
                       near: int, refit: bool):
    """No plate, the clip's median holding the robot: the clip tracked from ``q_first``, the robot fitted to the
    prompt's mask on frame ``start`` (IoU ``v``), against the background of the frames that look as the start frame
    does away from the robot (:func:`_background_around`); then, ``refit``, against that background without the
    track. Returns what :func:`_fit_clip` does."""
    bg, seen = _background_around(frames, start, fitter.sil_full(q_first) | prompt_mask, excl, fitter.cfg)
    Q, iou, states, nev, evs, floor = _fit_clip(fitter, frames, bg, ~seen, excl, q_first, start, prompt_mask,
                                                prompt_where_unseen=True,
                                                lit_from=_lit_without(seen, prompt_mask, near), fitted=True)
    notes.append(f"the clip's median holds the robot (its fit on frame {start} failed): fitted to the prompt's mask "
                 f"there (IoU {v:.2f}), the background = the frames that look as frame {start} does away from the "
                 f"robot and those it moved off inside, {100 * (1 - seen.mean()):.1f}% of pixels never seen (the "
                 f"prompt's mask stands in on frame {start})")
    if refit:
        Q, iou, states, nev, evs, floor = _refit(fitter, frames, bg, excl, Q, start, prompt_mask, nev, evs, floor,
                                                 notes, iou, states, near, by_prompt=True)
    return Q, iou, states, nev, evs, floor


def _lit_without(seen: np.ndarray, robot: np.ndarray, near: int) -> np.ndarray:
    """``(h, w) bool`` background pixels that tell how bright the surface is lit: seen, and away from where the
    robot stood (``robot``, grown by ``near``): a background made where a white arm barely moved holds the arm
    there, and a lit level taken from it would make the arm elsewhere "a shadow that left"."""
    return seen & ~dilate(robot, near)


def _background_around(frames, start: int, region: np.ndarray, excl, cfg: TrackConfig) -> tuple[np.ndarray, np.ndarray]:
    """(background ``(h, w, 3) uint8``, seen ``(h, w) bool``) of a clip whose robot stood in ``region`` on frame
    ``start``: outside it, the median of the frames that look there as frame ``start`` does (shadows count as
    change: that frame shows the background there); inside, the median of the frames where the pixel changed from
    frame ``start`` (the robot moved off it); never seen where it never changed."""
    n, h, w = frames.shape[:3]
    def from_start(f) -> tuple[np.ndarray, np.ndarray]:  # (differs at all, changed beyond a shadow in region)
        return (foreground(f, frames[start], cfg, shadows=False)[0],
                foreground(f, frames[start], cfg)[0] & region)

    differs, changed = (np.stack(m) for m in zip(*_per_frame(from_start, frames)))
    # outside the robot's start region the start frame shows the background: a pixel's background is the median
    # of the frames that look as the start frame there (the median of all would hold an arm that lingers there)
    bg, seen = clip_background(frames, np.broadcast_to(region, (n, h, w)) | excl | differs)
    bg_moved, seen_moved = clip_background(frames, ~changed | excl)
    moved = region & seen_moved
    return np.where(moved[..., None], bg_moved, bg), seen | moved


def _repair_from_neighbours(fitter: Fitter, evs: list[Evidence], Q: np.ndarray, iou: np.ndarray, states: list,
                            nev: list, start: int) -> list:
    """Frames whose fit falls short (IoU under ``refit_below`` x the clip's median) fitted again from each
    neighbour that fits well: tracking reached a frame from one side only, and the frame on the other side may
    hold its pose. The better fit is kept (``Q``, ``iou``, ``states`` in place), in up to ``repair_sweeps``
    sweeps. Returns the evaluations per frame."""
    cfg, n = fitter.cfg, len(Q)
    nev = list(nev)
    tried: dict = {}  # (frame, neighbour): the neighbour's joints it was fitted from
    for _ in range(cfg.repair_sweeps):
        bar = cfg.refit_below * float(np.median(iou))
        changed = False
        for i in range(n):
            if i == start or iou[i] >= bar:
                continue
            for j in (i - 1, i + 1):
                if not (0 <= j < n and iou[j] >= bar) or ((i, j) in tried and np.array_equal(tried[i, j], Q[j])):
                    continue
                tried[i, j] = Q[j].copy()
                q, v, k = fitter.fit(evs[i], Q[j])
                nev[i] += k
                if v > iou[i] + 1e-3:
                    Q[i], iou[i], changed = q, v, True
                    states[i] = "tracked" if v >= cfg.lost_iou else "lost"
        if not changed:
            break
    return nev


def _fit_to_mask(fitter: Fitter, mask: np.ndarray, excluded: np.ndarray, q_start) -> tuple[np.ndarray, float]:
    """(joints, IoU) of the robot fitted to ``mask`` ``(h, w) bool`` (a prompt's mask) as the whole evidence."""
    ev = make_evidence(mask, excluded, fitter.small)
    Q, iou, _, _, _ = _track_pass(fitter, [ev], q_start, 0, region=mask)
    return Q[0], float(iou[0])


def _fit_clip(fitter: Fitter, frames, bg, unseen, excl, q_start, start: int, prompt_mask, seeds=None,
              prompt_where_unseen: bool = False, all_seeds: bool = False, lit_from=None, start_fit=None,
              fitted: bool = False):
    """One tracking round against background ``bg``: the start frame (threshold, colours), then the clip.
    ``seeds``: an earlier round's joints (this round then fits each frame with a third of the evaluations);
    ``prompt_where_unseen``: on the start frame, pixels of ``unseen`` background take the prompt's mask as their
    evidence; ``lit_from``: see :func:`_evidences`; ``start_fit``: :func:`_start_frame`'s result for these
    arguments, when the caller has it; ``fitted``: ``q_start`` is already fitted to the start frame (see
    :func:`_start_frame`). Returns (joints, IoU, states, evaluations, evidences, threshold floor)."""
    cfg = fitter.cfg
    stand_in = (unseen, prompt_mask) if prompt_where_unseen and unseen is not None and prompt_mask is not None else None
    q_first, floor, ev0, _ = start_fit or _start_frame(fitter, frames[start], bg, excl[start], q_start, prompt_mask,
                                                       stand_in, all_seeds, fitted)
    colours = ColourModel(frames[start], ev0.fg & erode(fitter.sil_full(q_first), 1))
    evs = _evidences(frames, bg, excl, fitter, cfg, unseen, colours, floor, lit_from)
    if stand_in is not None:
        evs[start] = _with_stand_in(evs[start], *stand_in, fitter)
        evs = _per_frame(lambda i: evs[i] if i == start else _unseen_from_start(
            evs[i], frames[i], frames[start], evs[start].fg, unseen, colours, fitter), range(len(evs)))
    Q, iou, states, nev, evs = _track_pass(fitter, evs, q_first, start, seeds=seeds, search_first=False,
                                           max_evals=None if seeds is None else cfg.max_evals // 3,
                                           region=prompt_mask, all_seeds=all_seeds)
    return Q, iou, states, nev, evs, floor


def _with_stand_in(ev: Evidence, unseen: np.ndarray, mask: np.ndarray, fitter: Fitter) -> Evidence:
    """``ev`` where the background was never seen (``unseen``) told by ``mask`` (the prompt's) instead of ignored."""
    fg = (ev.fg & ~unseen) | (mask & unseen)
    ignore = ev.ignore & ~unseen
    return make_evidence(fg, ignore, fitter.small, unseen, ev.threshold)


def _unseen_from_start(ev: Evidence, frame, start_frame, start_fg: np.ndarray, unseen: np.ndarray,
                       colours: ColourModel, fitter: Fitter) -> Evidence:
    """``ev`` where the background was never seen told by the start frame (``start_fg``: its robot pixels): a robot
    pixel there that still looks the same is the robot still, a pixel that did not change and was background
    there is background; one that changed counts neither way if it has a robot colour, else is background."""
    same = difference(frame, start_frame) <= ev.threshold
    fg = (ev.fg & ~unseen) | (unseen & same & start_fg)
    ignore = (ev.ignore & ~unseen) | (unseen & ~same & colours(frame))
    return make_evidence(fg, ignore, fitter.small, unseen, ev.threshold)


def _start_frame(fitter: Fitter, frame, bg, excluded, q_start, prompt_mask, stand_in=None, all_seeds: bool = False,
                 fitted: bool = False) -> tuple[np.ndarray, float, Evidence, float]:
    """(joints, threshold floor, evidence, IoU) on the start frame. The foreground threshold is the one, of the frame's
    noise threshold times ``threshold_ladder``, at which the fitted robot explains the evidence best (highest
    IoU): a clean plate keeps the noise threshold (dark robot parts on dark ground count), a plate that differs
    from the frame all over (a hand-made one, another exposure) gets a higher one. ``fitted``: ``q_start`` is
    already fitted to this frame (an earlier round's, the prompt's fit): the levels are ranked by its IoU, unfitted,
    and only the chosen one is fitted (a quarter of the renders)."""
    cfg = fitter.cfg
    base = foreground(frame, bg, cfg, ~excluded)[1]
    levels = []
    for f in cfg.threshold_ladder:
        ev = _evidences(frame[None], bg, excluded[None], fitter, cfg, floor=base * f)[0]
        levels.append((f, ev if stand_in is None else _with_stand_in(ev, *stand_in, fitter)))
    if fitted:  # the seed fits already: its IoU at each level ranks them, and only the chosen one is fitted
        levels = [levels[_ladder_pick([fitter.iou(q_start, _near(fitter, ev, q_start, prompt_mask))
                                       for _, ev in levels])]]
    fits = []
    for f, ev in levels:
        Q, iou, _, _, used = _track_pass(fitter, [ev], q_start, 0, region=prompt_mask, all_seeds=all_seeds)
        log.debug("start frame: threshold %.1f -> IoU %.3f", base * f, iou[0])
        fits.append((float(iou[0]), Q[0], base * f, used[0]))
    # a level too high to leave the robot any evidence "fits" by moving it out of view: never chosen over one with it
    scores = [v if shows_robot(ev) else -np.inf for v, _, _, ev in fits]
    iou, q, floor, ev = fits[_ladder_pick(scores)]
    return q, floor, ev, iou


def _ladder_pick(scores: list[float]) -> int:
    """Index of the threshold level chosen from the ladder's ``scores`` (IoU, lowest threshold first): a higher
    threshold has to earn its place, beating the best lower one by more than 0.05."""
    pick = 0
    for k, v in enumerate(scores):
        if v > scores[pick] + 0.05:
            pick = k
    return pick


def _grade(evs: list[Evidence], sils: list, masks: list, states: list, cfg: TrackConfig, notes: list
           ) -> tuple[np.ndarray, list]:
    """Per frame, the fit's quality: IoU of the silhouette with the robot's pixels (the evidence near it,
    :func:`robot_pixels`; ignored pixels left out), and the final states: ``out_of_view`` where the evidence
    does not show a robot (:func:`shows_robot`), ``lost`` below :func:`outlier_bar`."""
    iou = np.array([iou_of(s & ~ev.ignore, m & ~ev.ignore) for ev, s, m in zip(evs, sils, masks)])
    states = list(states)
    for i, ev in enumerate(evs):
        if not shows_robot(ev):  # nothing robot-like in the frame: out of view, or hidden whole
            states[i], iou[i] = "out_of_view", np.nan
    bar = outlier_bar(iou, states, cfg)
    for i in range(len(states)):
        if states[i] in ("tracked", "prompt", "recorded") and iou[i] < bar:
            states[i] = "lost"
            notes.append(f"frame {i}: silhouette IoU {iou[i]:.2f} is far below the clip's (bar {bar:.2f}): "
                         "occluded, or the fit failed")
    return iou, states


def outlier_bar(iou: np.ndarray, states: list, cfg: TrackConfig) -> float:
    """IoU below which a frame is ``lost``: ``lost_iou``, or well below the clip's typical fit (median - max(0.1,
    3 robust standard deviations) of the tracked frames), whichever is higher: a frame whose fit is much worse
    than the others' is occluded or mis-fitted even when its IoU looks passable."""
    v = np.array([x for x, st in zip(iou, states) if st in ("tracked", "prompt", "recorded") and np.isfinite(x)])
    if len(v) < 4:
        return cfg.lost_iou
    med = float(np.median(v))
    spread = 1.4826 * float(np.median(np.abs(v - med)))
    return max(cfg.lost_iou, med - max(0.1, 3 * spread))


def render_recorded(frames: np.ndarray, camera: Camera, model: RobotModel, space: JointSpace, joints: np.ndarray,
                    background: np.ndarray | None = None, exclude: np.ndarray | None = None,
                    config: TrackConfig | None = None) -> RobotTrack:
    """The robot rendered at recorded ``joints`` ``(n, dof)``: mask = silhouette plus the evidence near it; the
    evidence grades each frame (IoU)."""
    t0 = time.perf_counter()
    cfg = config or TrackConfig()
    n, h, w = frames.shape[:3]
    fitter = Fitter(model, camera, space, cfg)
    near = max(2, int(round(cfg.near_frac * np.hypot(h, w))))
    sils = [fitter.sil_full(q) for q in joints]
    excl = np.zeros((n, h, w), bool) if exclude is None else np.stack([dilate(e, 2) for e in exclude])
    unseen = None
    if background is None:
        background, seen = clip_background(frames, np.stack([dilate(s, near) for s in sils]) | excl)
        unseen = ~seen
    evs = _evidences(frames, background, excl, fitter, cfg, unseen)
    masks = [s | robot_pixels(ev, s, near) for ev, s in zip(evs, sils)]
    notes = ["joints recorded with the frames: the robot model rendered at them"]
    iou, states = _grade(evs, sils, [robot_pixels(ev, s, near) for ev, s in zip(evs, sils)], ["recorded"] * n, cfg,
                         notes)
    return RobotTrack(np.asarray(joints, float), masks, sils, iou, states, [0] * n, "recorded",
                      time.perf_counter() - t0, notes)


def motion_masks(frames: np.ndarray, background: np.ndarray | None = None, exclude: np.ndarray | None = None,
                 config: TrackConfig | None = None, reason: str = "", background_seen: np.ndarray | None = None
                 ) -> RobotTrack:
    """Everything that moves or differs from the background and is not an excluded (prompted) object, per frame.

    ``frames``: ``(n, h, w, 3) uint8``; ``background``: plate or None (the clip's median, recomputed without what
    moved); ``exclude``: ``(n, h, w) bool``; ``background_seen``: ``(h, w) bool`` where a plate's frames showed the
    background (its confidence > 0; elsewhere it is inpainted, and a difference from it says nothing). For clips
    whose camera pose is unknown: no joints are fitted."""
    t0 = time.perf_counter()
    cfg = config or TrackConfig()
    frames = np.asarray(frames)
    n, h, w = frames.shape[:3]
    excl = np.zeros((n, h, w), bool) if exclude is None else np.asarray(exclude, bool)
    r = max(2, int(round(0.006 * np.hypot(h, w))))
    moving = [motion_evidence(frames, i, cfg) for i in range(n)]
    counts = np.ones((h, w), bool)  # where a difference from the background counts
    if background is not None:
        bg = background
        known = counts = np.ones((h, w), bool) if background_seen is None else np.asarray(background_seen, bool)
    else:
        views = distinct_views(frames, cfg)  # a robot that stops is not the median where it stands
        bg, known = clip_background(frames[views], np.stack([dilate(moving[i], 2 * r) for i in views]))
    masks = []
    for i, f in enumerate(frames):
        fg, _ = foreground(f, bg, cfg, known & ~excl[i])
        m = ((fg & counts) | moving[i]) & ~dilate(excl[i], 2)
        masks.append(clean_mask(m, open_px=1, close_px=r, fill=True, min_area=int(0.0005 * h * w)))
    states = ["motion" if m.any() else "lost" for m in masks]
    return RobotTrack(np.zeros((n, 0)), masks, [np.zeros((h, w), bool)] * n, np.full(n, np.nan), states, [0] * n,
                      "motion", time.perf_counter() - t0,
                      [(reason + "; " if reason else "") + "robot masks by motion segmentation (everything that moves "
                       "and is not a prompted object); no joints fitted"])
