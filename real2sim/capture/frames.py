"""Frames in: an image folder, a video file, or a LeRobot-format episode (parquet + mp4).

Everything ends up as ``(n, h, w, 3) uint8`` RGB frames plus per-frame timestamps (s) and, when the source
records them, joint positions. ``init_bundle`` writes them into ``capture/frames/000000.png ...`` of a bundle.

LeRobot on-disk format (v2.x): ``<root>/meta/info.json`` (``fps``, ``data_path``, ``video_path``,
``features``), ``<root>/data/chunk-000/episode_000000.parquet`` (columns ``timestamp``, ``frame_index``,
``observation.state`` ...) and ``<root>/videos/chunk-000/<video_key>/episode_000000.mp4``. The episode's
``observation.state`` rows (as recorded: arm joints, then the gripper) become ``joint_positions``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.errors import CaptureError, UnknownNameError, require
from real2sim.core.imaging import IMAGE_SUFFIXES, image_files, read_rgb

log = logging.getLogger(__name__)
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v")


@dataclass
class FrameSource:
    """Frames read from one source."""

    frames: np.ndarray
    """``(n, h, w, 3) uint8`` RGB."""
    timestamps: list[float]
    """Seconds from the start of the source, one per frame."""
    source: str
    """What was read (path, and episode/camera for LeRobot)."""
    joint_positions: list[list[float]] | None = None
    """Per-frame joint state when the source records it."""
    names: list[str] = field(default_factory=list)
    """Per-frame source names (file names for folders)."""
    fps: float | None = None


def read_image_folder(folder: Path, stride: int = 1, max_frames: int | None = None) -> FrameSource:
    """All images of ``folder`` in name order (timestamps = index / 1 s unless a video fps is known)."""
    folder = Path(folder)
    files = image_files(folder)
    if not files:
        raise CaptureError(f"{folder}: no image files ({', '.join(IMAGE_SUFFIXES)}) in this folder; "
                           "point --frames at a folder of frames, a video file or a LeRobot dataset")
    files = files[::stride][:max_frames] if max_frames else files[::stride]
    imgs, shape0 = [], None
    for p in files:
        im = read_rgb(p)
        if shape0 is None:
            shape0 = im.shape
        elif im.shape != shape0:
            raise CaptureError(f"{p}: frame is {im.shape[1]}x{im.shape[0]} but {files[0].name} is {shape0[1]}x{shape0[0]}; "
                               "all frames of a fixed camera must have one size. Remove or resize the odd frames")
        imgs.append(im)
    return FrameSource(np.stack(imgs), [float(i * stride) for i in range(len(imgs))], str(folder),
                       names=[p.name for p in files])


def read_video(path: Path, stride: int = 1, max_frames: int | None = None, start_s: float = 0.0,
               end_s: float | None = None) -> FrameSource:
    """Decode a video with OpenCV (bundled FFmpeg). Timestamps from the container (s)."""
    import cv2

    path = Path(path)
    if not path.is_file():
        raise CaptureError(f"{path}: no such video file; check the path")
    if path.stat().st_size == 0:
        raise CaptureError(f"{path}: the video file is empty (0 bytes); re-export or re-download it")
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise CaptureError(f"{path}: cannot be opened as a video (corrupt, or a codec OpenCV's FFmpeg cannot decode, "
                           "e.g. AV1). Re-encode it: ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4, "
                           "or extract frames to a folder of PNGs")
    fps = cap.get(cv2.CAP_PROP_FPS) or None
    frames, stamps, i, shape0 = [], [], -1, None
    try:
        while True:
            ok, bgr = cap.read()
            if not ok:
                break
            i += 1
            t = i / fps if fps else cap.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
            if t + 1e-9 < start_s or i % stride:
                continue
            if end_s is not None and t > end_s:
                break
            if shape0 is None:
                shape0 = bgr.shape
            elif bgr.shape != shape0:
                raise CaptureError(f"{path}: frame {i} is {bgr.shape[1]}x{bgr.shape[0]}, earlier frames {shape0[1]}x{shape0[0]}; "
                                   "re-encode the video at one size")
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            stamps.append(round(float(t), 6))
            if max_frames and len(frames) >= max_frames:
                break
    finally:
        cap.release()
    if not frames:
        raise CaptureError(f"{path}: no frames could be decoded (empty or unreadable video, or start/end outside it). "
                           "Re-encode it with ffmpeg -i IN -c:v libx264 -pix_fmt yuv420p OUT.mp4")
    return FrameSource(np.stack(frames), stamps, str(path), fps=fps)


def _lerobot_root(path: Path) -> Path | None:
    path = Path(path)
    for p in [path, *path.parents][:4]:
        if (p / "meta" / "info.json").is_file():
            return p
    return None


def read_lerobot(path: Path, episode: int = 0, video_key: str | None = None, stride: int = 1,
                 max_frames: int | None = None) -> FrameSource:
    """One episode of a LeRobot v2 dataset (root folder, or a path inside it such as the episode parquet)."""

    root = _lerobot_root(path)
    if root is None:
        raise CaptureError(f"{path}: not a LeRobot dataset (no meta/info.json in it or above it)")
    info_path = root / "meta" / "info.json"
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{info_path}: invalid JSON ({exc.msg}); restore the dataset's meta/info.json") from exc
    Path_ = Path(path)
    if Path_.suffix == ".parquet":  # episode index from the file name
        try:
            episode = int(Path_.stem.split("_")[-1])
        except ValueError:
            pass
    chunk = episode // int(info.get("chunks_size", 1000))
    data_tpl = info.get("data_path", "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet")
    video_tpl = info.get("video_path", "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4")
    feats = info.get("features", {})
    video_keys = [k for k, v in feats.items() if isinstance(v, dict) and v.get("dtype") == "video"]
    if not video_keys:
        raise CaptureError(f"{info_path}: no video features (dtype 'video'); this reader needs an episode with an mp4 camera stream")
    if video_key is None:
        video_key = video_keys[0]
        if len(video_keys) > 1:
            log.info("LeRobot %s: cameras %s; using %s", root, video_keys, video_key)
    elif video_key not in video_keys:
        raise UnknownNameError("LeRobot camera", video_key, video_keys)
    parquet = root / data_tpl.format(episode_chunk=chunk, episode_index=episode)
    video = root / video_tpl.format(episode_chunk=chunk, episode_index=episode, video_key=video_key)
    if not parquet.is_file():
        raise CaptureError(f"{parquet}: missing; episode {episode} is not in {root} (check --episode)")
    pq = require("pyarrow.parquet", "capture", "pyarrow")
    table = pq.read_table(parquet).to_pydict()
    vid = read_video(video)
    fps = float(info.get("fps") or vid.fps or 1.0)
    n_rows = len(next(iter(table.values()))) if table else 0
    idx = table.get("frame_index", list(range(n_rows)))
    stamps = table.get("timestamp", [i / fps for i in idx])
    state = table.get("observation.state")
    rows = list(range(0, min(n_rows, vid.frames.shape[0]), stride))
    if n_rows != vid.frames.shape[0]:
        log.warning("LeRobot %s: %d parquet rows but %d video frames; using the first %d", parquet, n_rows,
                    vid.frames.shape[0], min(n_rows, vid.frames.shape[0]))
    if max_frames:
        rows = rows[:max_frames]
    frames = vid.frames[[int(idx[r]) if int(idx[r]) < vid.frames.shape[0] else r for r in rows]]
    joints = [[float(x) for x in state[r]] for r in rows] if state is not None else None
    return FrameSource(frames, [round(float(stamps[r]), 6) for r in rows], f"{root} (lerobot episode {episode}, {video_key})",
                       joints, fps=fps)


def read_frames(path, stride: int = 1, max_frames: int | None = None, episode: int = 0,
                video_key: str | None = None) -> FrameSource:
    """Dispatch on what ``path`` is: LeRobot dataset, video file, or image folder."""
    path = Path(path)
    if stride < 1:
        raise CaptureError(f"stride must be >= 1, got {stride}")
    if not path.exists():
        raise CaptureError(f"{path}: does not exist; --frames takes an image folder, a video file or a LeRobot dataset")
    if _lerobot_root(path) is not None and (path.is_dir() or path.suffix == ".parquet"):
        return read_lerobot(path, episode, video_key, stride, max_frames)
    if path.is_dir():
        return read_image_folder(path, stride, max_frames)
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return read_video(path, stride, max_frames)
    if path.suffix.lower() in IMAGE_SUFFIXES:
        im = read_rgb(path)
        return FrameSource(im[None], [0.0], str(path), names=[path.name])
    raise CaptureError(f"{path}: unknown frame source type '{path.suffix}'; use an image folder, a video "
                       f"({', '.join(VIDEO_SUFFIXES)}) or a LeRobot dataset root")
