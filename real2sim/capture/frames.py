"""Frames in: an image folder, a video file, or a LeRobot-format episode (parquet + mp4).

Everything ends up as ``(n, h, w, 3) uint8`` RGB frames plus per-frame timestamps (s) and, when the source
records them, joint positions. ``init_bundle`` writes them into ``capture/frames/000000.png ...`` of a bundle.

LeRobot on-disk format (v2.x; v3.0 below): ``<root>/meta/info.json`` (``fps``, ``data_path``, ``video_path``,
``features``), ``<root>/data/chunk-000/episode_000000.parquet`` (columns ``timestamp``, ``frame_index``,
``observation.state`` ...) and ``<root>/videos/chunk-000/<video_key>/episode_000000.mp4``. The episode's
``observation.state`` rows (as recorded: arm joints, then the gripper) become ``joint_positions``.
LeRobot v3.0 (``codebase_version`` "v3.0") packs many episodes into one data file
(``data/chunk-CCC/file-FFF.parquet``, column ``episode_index``) and one video per camera
(``videos/<video_key>/chunk-CCC/file-FFF.mp4``); ``meta/episodes/chunk-*/file-*.parquet`` says where each episode is
(``data/chunk_index``, ``data/file_index``, ``videos/<key>/chunk_index|file_index|from_timestamp|to_timestamp``).
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
    """All images of ``folder`` in natural name order (:func:`core.imaging.image_files`; timestamps = index / 1 s)."""
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
        while cap.grab():  # frames left out are not decoded to pixels: a long clip costs only what is kept
            i += 1
            t = i / fps if fps else cap.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
            if t + 1e-9 < start_s or i % stride:
                continue
            if end_s is not None and t > end_s:
                break
            ok, bgr = cap.retrieve()
            if not ok:
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
    if _is_v3(info):
        return _read_lerobot_v3(root, info, episode, video_key, stride, max_frames)
    chunk = episode // int(info.get("chunks_size", 1000))
    data_tpl = info.get("data_path", "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet")
    video_tpl = info.get("video_path", "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4")
    video_key = _video_key(info, info_path, video_key)
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


def count_frames(path) -> int | None:
    """How many frames ``path`` holds without decoding them (an image folder's files, a video's frame count as its
    container says); ``None`` for a LeRobot dataset or when the container does not say."""
    import cv2

    path = Path(path)
    if _lerobot_root(path) is not None and (path.is_dir() or path.suffix == ".parquet"):
        return None
    if path.is_dir():
        return len(image_files(path))
    if path.suffix.lower() in VIDEO_SUFFIXES and path.is_file():
        cap = cv2.VideoCapture(str(path))
        try:
            n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
        finally:
            cap.release()
        return n if n > 0 else None
    return None


def _is_v3(info: dict) -> bool:
    """LeRobot v3.0: many episodes per data / video file, located through ``meta/episodes``."""
    return str(info.get("codebase_version", "")).startswith("v3") or "{file_index" in str(info.get("data_path", ""))


def _video_key(info: dict, info_path: Path, video_key: str | None) -> str:
    feats = info.get("features", {})
    keys = [k for k, v in feats.items() if isinstance(v, dict) and v.get("dtype") == "video"]
    if not keys:
        raise CaptureError(f"{info_path}: no video features (dtype 'video'); this reader needs an episode with an mp4 camera stream")
    if video_key is None:
        if len(keys) > 1:
            log.info("LeRobot %s: cameras %s; using %s", info_path.parents[1], keys, keys[0])
        return keys[0]
    if video_key not in keys:
        raise UnknownNameError("LeRobot camera", video_key, keys)
    return video_key


def _episode_row(root: Path, episode: int, key: str, pq) -> dict:
    """The ``meta/episodes`` row of ``episode``: where its data rows and its video stretch are."""
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise CaptureError(f"{root / 'meta' / 'episodes'}: no episode index (chunk-*/file-*.parquet); the LeRobot v3 "
                           "dataset is incomplete: copy its meta/ folder too")
    want = ["episode_index", "data/chunk_index", "data/file_index", f"videos/{key}/chunk_index",
            f"videos/{key}/file_index", f"videos/{key}/from_timestamp", f"videos/{key}/to_timestamp"]
    seen = 0
    for f in files:
        names = pq.read_schema(f).names
        missing = [c for c in want if c not in names]
        if missing:
            raise CaptureError(f"{f}: episode index without column(s) {', '.join(missing)}; not a LeRobot v3 episode index")
        rows = pq.read_table(f, columns=want).to_pylist()
        seen += len(rows)
        for r in rows:
            if int(r["episode_index"]) == episode:
                return r
    raise CaptureError(f"{root}: episode {episode} is not in this dataset ({seen} episodes: 0-{seen - 1}); check --episode")


def _read_lerobot_v3(root: Path, info: dict, episode: int, video_key: str | None, stride: int,
                     max_frames: int | None) -> FrameSource:
    """One episode of a LeRobot v3.0 dataset: its rows of a shared data file, its stretch of a shared video."""
    pq = require("pyarrow.parquet", "capture", "pyarrow")
    key = _video_key(info, root / "meta" / "info.json", video_key)
    ep = _episode_row(root, episode, key, pq)
    data = root / info.get("data_path", "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet").format(
        chunk_index=int(ep["data/chunk_index"]), file_index=int(ep["data/file_index"]))
    video = root / info.get("video_path", "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4").format(
        video_key=key, chunk_index=int(ep[f"videos/{key}/chunk_index"]), file_index=int(ep[f"videos/{key}/file_index"]))
    if not data.is_file():
        raise CaptureError(f"{data}: missing; the data file of episode {episode} (per meta/episodes) is not in {root}")
    fps = float(info.get("fps") or 0) or None
    t0, t1 = float(ep[f"videos/{key}/from_timestamp"]), float(ep[f"videos/{key}/to_timestamp"])
    vid = read_video(video, start_s=t0, end_s=t1 - 0.5 / fps if fps else t1)
    table = pq.read_table(data).to_pydict()
    rows = [i for i, e in enumerate(table.get("episode_index", [])) if int(e) == episode]
    if not rows:
        raise CaptureError(f"{data}: no rows of episode {episode}; the data file and meta/episodes disagree")
    idx = table.get("frame_index")
    rows.sort(key=lambda r: int(idx[r]) if idx else r)
    n = min(len(rows), vid.frames.shape[0])
    if len(rows) != vid.frames.shape[0]:
        log.warning("LeRobot %s episode %d: %d data rows but %d video frames; using the first %d", root, episode,
                    len(rows), vid.frames.shape[0], n)
    rows = rows[:n][::stride][:max_frames] if max_frames else rows[:n][::stride]
    first = rows[0] if idx is None else None
    picks = [int(idx[r]) if idx else r - first for r in rows]
    picks = [p if p < vid.frames.shape[0] else i for i, p in enumerate(picks)]
    stamps = table.get("timestamp") or [i / (fps or 1.0) for i in range(len(table.get("episode_index", [])))]
    state = table.get("observation.state")
    return FrameSource(vid.frames[picks], [round(float(stamps[r]), 6) for r in rows],
                       f"{root} (lerobot v3 episode {episode}, {key})",
                       [[float(x) for x in state[r]] for r in rows] if state is not None else None,
                       fps=fps or vid.fps)


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
