"""``real2sim init``: a new bundle from frames (+ camera file, + robot name)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from real2sim.capture.camera_file import (
    camera_to_dict,
    check_camera_matches_frames,
    load_camera,
)
from real2sim.capture.frames import FrameSource, count_frames, read_frames
from real2sim.capture.undistort import has_distortion, pinhole, undistort_frames
from real2sim.core.bundle import (
    Bundle,
    atomic_write_json,
    hash_file,
    hash_jsonable,
    replace_dir_atomically,
)
from real2sim.core.camera import Camera
from real2sim.core.errors import BundleError, CaptureError
from real2sim.core.imaging import read_rgb, write_rgb
from real2sim.core.manifest import CameraSpec, CaptureSpec, FrameSpec, RobotSpec
from real2sim.core.pictures import tiles
from real2sim.core.stages import run_stage
from real2sim.robots import get_robot
from real2sim.robots.robotfile import install_in_bundle

log = logging.getLogger(__name__)
FRAMES_DIR = "capture/frames"


def _source_hash(path: Path) -> str:
    path = Path(path)
    if path.is_file():
        return hash_file(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    return hash_jsonable([(p.relative_to(path).as_posix(), hash_file(p)) for p in files])


def contact_sheet(frames: np.ndarray, count: int = 8, cols: int = 4, labels=None) -> np.ndarray:
    """Evenly spaced frames in a grid (uint8 RGB)."""
    idx = np.unique(np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int))
    labs = [labels[i] if labels else f"frame {i}" for i in idx]
    return tiles([frames[i] for i in idx], labs, cols=min(cols, len(idx)), tile_width=240)


AUTO_MAX_FRAMES = 300
"""A clip of more frames than this, given without ``stride`` or ``max_frames``, is thinned by the smallest stride that
keeps at most this many (with a warning): every frame is written to the bundle, segmented and fitted, so a minute
of 30 fps video would take hours and its frames' memory; the plate uses 64 frames anyway."""


def auto_stride(frames, max_frames: int | None = None) -> int:
    """The stride :func:`init_bundle` uses when none is given (:data:`AUTO_MAX_FRAMES`)."""
    n = None if max_frames else count_frames(frames)
    if not n or n <= AUTO_MAX_FRAMES:
        return 1
    stride = -(-n // AUTO_MAX_FRAMES)
    log.warning("%s: %d frames; keeping one in %d (%d frames; frame numbers in --prompts count the kept frames). "
                "Pass --stride 1 to keep them all, or --stride N / --max-frames N to choose", frames, n, stride,
                -(-n // stride))
    return stride


def init_bundle(directory, frames, camera=None, robot: str | None = None, name: str | None = None,
                stride: int | None = None,
                max_frames: int | None = None, episode: int = 0, video_key: str | None = None,
                overwrite: bool = False) -> Bundle:
    """Create a bundle in ``directory`` from ``frames`` (image folder, video file or LeRobot dataset).

    ``camera``: a camera file (see :mod:`capture.camera`); stored as ``cameras.main``. A camera with lens
    distortion: the frames are undistorted to its intrinsics without distortion, which ``cameras.main`` then is
    (:mod:`real2sim.capture.undistort`; ``capture/camera.json`` keeps the camera as given). Everything is read and
    checked before the bundle is touched, so bad input leaves nothing half-written.
    """
    directory = Path(directory)
    if robot:

        get_robot(robot)  # refuse an unknown robot (with close matches) before anything is written
    if (directory / "scene.json").exists() and not overwrite:
        raise BundleError(f"{directory}: already holds a bundle (scene.json); choose a new directory, or pass "
                          "--force to re-initialise its capture")
    if stride is None:
        stride = auto_stride(frames, max_frames)
    src: FrameSource = read_frames(frames, stride=stride, max_frames=max_frames, episode=episode, video_key=video_key)
    n, h, w, _ = src.frames.shape
    cam = None
    images, undistorted = src.frames, None
    if camera is not None:
        cam = load_camera(camera)
        check_camera_matches_frames(cam, w, h, camera, f"the frames of {frames}")
        if has_distortion(cam):
            images, undistorted = undistort_frames(src.frames, cam)
            log.info("%s: lens distortion %s: the frames are undistorted to the camera's intrinsics (pixels moved up "
                     "to %.1f px)", camera, undistorted["distortion"], undistorted["max_shift_px"])
            if undistorted["outside_fraction"] > 0.001:
                log.warning("%s: with this lens (pincushion) %.1f %% of the pinhole frame lies outside the source "
                            "frames, at their corners; those pixels repeat the frames' edge (reports/capture.json "
                            "'undistortion')", camera, 100 * undistorted["outside_fraction"])
    if (directory / "scene.json").exists():
        bundle = Bundle.load(directory)
    else:
        bundle = Bundle.create(directory, name=name)
    cfg = {"frames": str(frames), "stride": stride, "max_frames": max_frames, "episode": episode, "video_key": video_key,
           "camera": None if camera is None else str(camera), "robot": robot}
    robot_file = robot and Path(robot).is_file()
    input_hash = hash_jsonable([_source_hash(frames), None if camera is None else hash_file(camera), cfg,
                                hash_file(Path(robot)) if robot_file else None])

    def run():
        with replace_dir_atomically(bundle.path(FRAMES_DIR)) as tmp:
            for i, f in enumerate(images):
                write_rgb(tmp / f"{i:06d}.png", f)
        specs = [FrameSpec(f"{FRAMES_DIR}/{i:06d}.png", float(src.timestamps[i]), "main",
                           None if src.joint_positions is None else list(src.joint_positions[i])) for i in range(n)]
        bundle.manifest.capture = CaptureSpec(source=src.source, frames=specs)
        outputs = [s.image for s in specs]
        if cam is not None:
            bundle.manifest.cameras["main"] = CameraSpec.from_camera(pinhole(cam) if undistorted else cam)
            atomic_write_json(bundle.path("capture/camera.json"), camera_to_dict(cam))  # as given
            outputs.append("capture/camera.json")
        if robot:

            rdef = get_robot(robot)  # unknown names suggest the close ones; a definition file is read and checked
            q0 = list(specs[0].joint_positions) if specs and specs[0].joint_positions else list(rdef.default_qpos)
            # a robot from a definition file is copied into the bundle (robot/): the bundle never points at the
            # user's original files
            definition = install_in_bundle(rdef, bundle.root)
            if definition:
                outputs.append(definition)
            bundle.manifest.robot = RobotSpec(name=rdef.name, joint_positions=[float(x) for x in q0],
                                              source=f"real2sim init --robot {robot}", definition=definition)
            bundle.manifest.provenance["robot"] = rdef.name
        bundle.manifest.provenance["capture_source"] = src.source
        pic = bundle.reports_dir() / "capture.png"
        write_rgb(pic, contact_sheet(images))
        metrics = {"frames": n, "width": w, "height": h, "fps": src.fps, "joint_states": src.joint_positions is not None,
                   "camera": cam is not None, "duration_s": float(src.timestamps[-1] - src.timestamps[0]),
                   "undistorted": undistorted is not None}
        rep = bundle.write_report("capture", {**metrics, "source": src.source,
                                              "frame_mean_rgb": [round(float(x), 2) for x in images.mean((0, 1, 2))],
                                              **({"undistortion": undistorted} if undistorted else {})})
        lens = (f", undistorted (pixels moved up to {undistorted['max_shift_px']:.1f} px)" if undistorted else "")
        return outputs + [rep, bundle.rel(pic)], metrics, f"{n} frames {w}x{h} from {src.source}{lens}"

    run_stage(bundle, "capture", input_hash, cfg, run, force=True)
    return bundle


def source_camera(bundle: Bundle) -> Camera | None:
    """The camera as the capture's camera file gave it when ``init`` undistorted the frames (its pixels are those
    of the source frames, a marker photo's or the prompts written for ``init``); ``None`` when the bundle's frames
    are the source frames."""
    path = bundle.path("capture/camera.json")
    stage = bundle.manifest.stages.get("capture")
    if stage is None or not stage.metrics.get("undistorted") or not path.is_file():
        return None
    return load_camera(path)


def load_frames(bundle: Bundle) -> np.ndarray:
    """``(n, h, w, 3) uint8`` frames of a bundle's capture."""

    specs = bundle.manifest.capture.frames
    if not specs:
        raise CaptureError(f"{bundle.root}: the bundle has no captured frames; run 'real2sim init DIR --frames PATH' first")
    imgs = [read_rgb(bundle.path(s.image)) for s in specs]
    shapes = {i.shape for i in imgs}
    if len(shapes) > 1:
        raise CaptureError(f"{bundle.root}: captured frames have mixed sizes {sorted(shapes)}; re-run 'real2sim init'")
    return np.stack(imgs)
