"""Episodes as a LeRobot dataset (LeRobot's v3.0 on-disk format), written, read back and checked without LeRobot.

Layout (``ROOT``)::

    meta/info.json                        codebase_version "v3.0", fps (the control rate), features, totals, paths
    meta/tasks.parquet                    index: task instruction; column task_index
    meta/episodes/chunk-000/file-000.parquet
                                          one row per episode: episode_index, tasks, length, dataset_from/to_index,
                                          data/..., videos/<key>/... (chunk, file, from/to_timestamp), stats/<key>/<stat>,
                                          and real2sim's columns: success, seed, policy, backend, task_id, env_config
    meta/stats.json                       min/max/mean/std/count of every feature over all episodes
    meta/real2sim.json                    what replay needs: the bundle, the action space, the env settings
    data/chunk-CCC/file-FFF.parquet       one file per episode (file index = episode index mod 1000)
    videos/<camera key>/chunk-CCC/file-FFF.mp4   one file per episode and camera, frame i at i / fps

Frame ``t`` of an episode holds the observation before action ``t`` (``observation.images.<camera>`` in the video,
``observation.state`` = joint positions ``(dof,)``, ``observation.ee_pose`` ``(7,)`` position + quaternion wxyz in the
robot base frame, ``observation.environment_state`` ``(n * 7,)`` the movable objects' poses in the base frame), the
action taken (``action``, the env's action after clipping), and the step's outcome (``next.reward`` = success after
the step, ``next.success``, ``next.done``). ``timestamp`` = ``frame_index / fps``.

LeRobot's own writer packs many episodes into one file up to a size; the format's readers follow the per-episode
chunk/file indices in ``meta/episodes`` either way, and one file per episode lets a killed run resume without
rewriting video. :func:`check_dataset` checks a folder against the format's rules with pyarrow and PyAV.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np

from real2sim.core.bundle import atomic_write_bytes, atomic_write_json
from real2sim.core.errors import Real2SimError, require

log = logging.getLogger(__name__)

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
INFO = "meta/info.json"
STATS = "meta/stats.json"
TASKS = "meta/tasks.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
EXTRA = "meta/real2sim.json"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
STAGING = ".staging"
DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
RUN_COLUMNS = ("success", "seed", "policy", "backend", "task_id", "env_config")
"""real2sim's own per-episode columns in meta/episodes (LeRobot's readers keep unknown columns)."""
VIDEO_CODEC = "h264"
VIDEO_ENCODER = "libx264"
VIDEO_OPTIONS = {"preset": "ultrafast", "crf": "23", "g": "2"}
"""A key frame every 2 frames, as LeRobot's own encoder sets it (random access for training loaders)."""


class DatasetError(Real2SimError):
    """A LeRobot dataset folder that cannot be written to or read as asked."""


def _pa():
    return require("pyarrow", "record")


def _pq():
    require("pyarrow", "record")
    import pyarrow.parquet as pq

    return pq


def _av():
    return require("av", "record")


def chunk_file(episode_index: int) -> tuple[int, int]:
    return episode_index // CHUNKS_SIZE, episode_index % CHUNKS_SIZE


def data_path(root: Path, episode_index: int) -> Path:
    c, f = chunk_file(episode_index)
    return Path(root) / DATA_PATH.format(chunk_index=c, file_index=f)


def video_path(root: Path, key: str, episode_index: int) -> Path:
    c, f = chunk_file(episode_index)
    return Path(root) / VIDEO_PATH.format(video_key=key, chunk_index=c, file_index=f)


# -- video ------------------------------------------------------------------------------------------------------------
class VideoWriter:
    """Frames ``(h, w, 3)`` uint8 RGB -> mp4 (H.264), frame ``i`` at pts ``i`` in time base ``1 / fps``."""

    def __init__(self, path: Path, fps: float, width: int, height: int):
        from fractions import Fraction

        av = _av()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.pix_fmt = "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"  # 4:2:0 needs even sides
        self._box = av.open(str(self.path), "w")
        rate = Fraction(fps).limit_denominator(1000)
        self._stream = self._box.add_stream(VIDEO_ENCODER, rate=rate, options=dict(VIDEO_OPTIONS))
        self._stream.width, self._stream.height, self._stream.pix_fmt = width, height, self.pix_fmt
        self._stream.codec_context.time_base = 1 / rate
        self._av = av
        self.frames = 0

    def add(self, rgb: np.ndarray) -> None:
        frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = self.frames
        for packet in self._stream.encode(frame):
            self._box.mux(packet)
        self.frames += 1

    def close(self) -> None:
        for packet in self._stream.encode():
            self._box.mux(packet)
        self._box.close()


class BackgroundVideoWriter(VideoWriter):
    """A :class:`VideoWriter` that encodes on a thread of its own (PyAV releases the GIL while encoding), so an
    episode's physics, rendering and policy calls go on meanwhile. ``add`` takes ownership of the frame (pass a copy
    if the caller reuses the buffer); ``close`` waits for the last frame and raises what the encoder raised."""

    def __init__(self, path: Path, fps: float, width: int, height: int, queue_size: int = 8):
        import queue
        import threading

        super().__init__(path, fps, width, height)
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)  # bounded: a slow encoder slows the episode down
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"encode {self.path.name}", daemon=True)
        self._thread.start()
        self.queued = 0

    def _run(self) -> None:
        while True:
            frame = self._queue.get()
            if frame is None:
                return
            if self._error is None:
                try:
                    VideoWriter.add(self, frame)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller by add/close
                    self._error = exc

    def add(self, rgb: np.ndarray) -> None:
        if self._error is not None:
            raise DatasetError(f"{self.path}: video encoding failed: {self._error}") from self._error
        self._queue.put(rgb)
        self.queued += 1

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            try:
                self._box.close()
            except Exception:  # noqa: BLE001 - the encoder's error is the one to report
                pass
            raise DatasetError(f"{self.path}: video encoding failed: {self._error}") from self._error
        super().close()


def read_video(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(frames ``(n, h, w, 3)`` uint8 RGB, their timestamps ``(n,)`` in seconds) of an mp4."""
    av = _av()
    frames, times = [], []
    with av.open(str(path)) as box:
        stream = box.streams.video[0]
        for frame in box.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(float(frame.pts * stream.time_base))
    return np.asarray(frames), np.asarray(times)


# -- stats --------------------------------------------------------------------------------------------------------------
def vector_stats(x: np.ndarray) -> dict:
    """min/max/mean/std over frames of ``x`` ``(T, d)`` (LeRobot's per-feature stats), each ``(d,)``; count ``(1,)``."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return {"min": x.min(0).tolist(), "max": x.max(0).tolist(), "mean": x.mean(0).tolist(), "std": x.std(0).tolist(),
            "count": [int(len(x))]}


def image_stats(frames: list[np.ndarray], step: int = 4) -> dict:
    """Per-channel stats of uint8 frames scaled to [0, 1], shaped ``(3, 1, 1)`` as LeRobot stores them (every
    ``step``-th pixel per axis)."""
    px = np.stack([f[::step, ::step].reshape(-1, 3) for f in frames]).reshape(-1, 3).astype(np.float64) / 255.0
    shape = lambda v: [[[float(c)]] for c in v]  # noqa: E731
    return {"min": shape(px.min(0)), "max": shape(px.max(0)), "mean": shape(px.mean(0)), "std": shape(px.std(0)),
            "count": [int(len(frames))]}


def aggregate_stats(per_episode: list[dict]) -> dict:
    """Merge per-episode stats ({feature: {stat: values}}) into dataset stats (count-weighted mean and variance)."""
    out: dict = {}
    for key in per_episode[0]:
        parts = [ep[key] for ep in per_episode if key in ep]
        n = np.array([p["count"][0] for p in parts], float)
        mean = np.array([p["mean"] for p in parts], float)
        std = np.array([p["std"] for p in parts], float)
        w = (n / n.sum()).reshape((-1,) + (1,) * (mean.ndim - 1))
        mu = (w * mean).sum(0)
        var = (w * (std ** 2 + mean ** 2)).sum(0) - mu ** 2
        out[key] = {"min": np.min([p["min"] for p in parts], 0).tolist(),
                    "max": np.max([p["max"] for p in parts], 0).tolist(),
                    "mean": mu.tolist(), "std": np.sqrt(np.maximum(var, 0)).tolist(), "count": [int(n.sum())]}
    return out


# -- features ----------------------------------------------------------------------------------------------------------
def vector_feature(n: int, names: list[str] | None, dtype: str = "float32") -> dict:
    return {"dtype": dtype, "shape": [int(n)], "names": list(names) if names is not None else None}


def video_feature(height: int, width: int, fps: float, pix_fmt: str) -> dict:
    return {"dtype": "video", "shape": [int(height), int(width), 3], "names": ["height", "width", "channels"],
            "info": {"video.height": int(height), "video.width": int(width), "video.codec": VIDEO_CODEC,
                     "video.pix_fmt": pix_fmt, "video.is_depth_map": False, "video.fps": _fps_value(fps),
                     "video.channels": 3, "has_audio": False}}


def _fps_value(fps: float):
    return int(round(fps)) if abs(fps - round(fps)) < 1e-9 else float(fps)


def _arrow_type(ft: dict):
    pa = _pa()
    base = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}[ft["dtype"]]
    return base if list(ft["shape"]) == [1] else pa.list_(base, int(ft["shape"][0]))


def video_keys(features: dict) -> list[str]:
    return [k for k, ft in features.items() if ft["dtype"] == "video"]


# -- writing ----------------------------------------------------------------------------------------------------------
class LeRobotWriter:
    """A LeRobot v3.0 dataset folder that episodes are added to (in the process that owns the folder).

    ``resume=False`` refuses a folder that exists and is not empty; ``resume=True`` adds to a dataset this writer
    made before (same features, same fps), skipping episodes it already holds (same policy, task, backend, seed and
    env settings). Each :meth:`add` leaves a complete dataset on disk: data and video first, then the episode table
    (the commit point), then info and stats.
    """

    def __init__(self, root, resume: bool = False):
        self.root = Path(root)
        self.resume = bool(resume)
        self.info: dict | None = None
        self.rows: list[dict] = []
        self.tasks: list[str] = []
        if self.root.exists() and (not self.root.is_dir() or any(self.root.iterdir())):
            if not resume:
                raise DatasetError(f"{self.root}: record folder exists. Fix: choose a new folder, or add "
                                   "--record-resume to add this run's episodes to the dataset there")
            self._load_existing()
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.staging, ignore_errors=True)  # episodes staged by a killed run are not in the dataset
        self.staging.mkdir(parents=True, exist_ok=True)
        self._done = {self._key(r) for r in self.rows}

    @property
    def staging(self) -> Path:
        """Where workers leave finished episodes for :meth:`add` (inside the dataset folder: same file system)."""
        return self.root / STAGING

    def _load_existing(self) -> None:
        info_path = self.root / INFO
        if not info_path.is_file():
            if (self.root / STAGING).is_dir() and not (self.root / EPISODES).exists():
                return  # made by a run that recorded no episode yet
            raise DatasetError(f"{self.root}: not a LeRobot dataset (no {INFO}); --record-resume adds only to a dataset "
                               "real2sim recorded. Fix: choose a new folder")
        self.info = json.loads(info_path.read_text())
        if self.info.get("codebase_version") != CODEBASE_VERSION:
            raise DatasetError(f"{info_path}: codebase_version {self.info.get('codebase_version')!r}; real2sim adds "
                               f"episodes only to {CODEBASE_VERSION} datasets. Fix: record into a new folder")
        if (self.root / EPISODES).is_file():
            self.rows = _pq().read_table(self.root / EPISODES).to_pylist()
        if (self.root / TASKS).is_file():
            t = _pq().read_table(self.root / TASKS).to_pandas()
            self.tasks = [str(x) for x in t.sort_values("task_index").index]
        # the episode table is the commit point: an episode whose files were written but whose row was not is redone
        self.info["total_episodes"] = len(self.rows)
        self.info["total_frames"] = int(sum(r["length"] for r in self.rows))

    @staticmethod
    def _key(row: dict) -> tuple:
        return tuple(row.get(k) for k in ("policy", "task_id", "backend", "seed", "env_config"))

    def add(self, staged: Path, run: dict) -> int | None:
        """Move a staged episode (:class:`real2sim.evaluation.record.EpisodeRecorder`'s folder) into the dataset;
        returns its episode index, or None when the dataset already holds it (a resumed run)."""
        staged = Path(staged)
        meta = json.loads((staged / "episode.json").read_text())
        arrays = dict(np.load(staged / "frames.npz"))
        row_run = {"success": bool(run["success"]), "seed": int(run["seed"]), "policy": str(run["policy"]),
                   "backend": str(run["backend"]), "task_id": str(run["task"]),
                   "env_config": json.dumps(meta["env_config"], sort_keys=True)}
        if self._key(row_run) in self._done:
            log.info("episode %s seed %d is in %s already; not added twice", run["policy"], run["seed"], self.root)
            shutil.rmtree(staged, ignore_errors=True)
            return None
        features = self._features(meta, arrays)
        if self.info is None:
            self.info = self._new_info(meta, features)
            atomic_write_json(self.root / EXTRA, meta["dataset"])
        else:
            self._check_compatible(features, meta)
        ep = len(self.rows)
        n = len(arrays["action"])
        start = int(sum(r["length"] for r in self.rows))
        instruction = meta["instruction"]
        if instruction not in self.tasks:
            self.tasks.append(instruction)
        task_index = self.tasks.index(instruction)

        row = {"episode_index": ep, "tasks": [instruction], "length": n}
        for key in video_keys(features):
            dst = video_path(self.root, key, ep)
            dst.parent.mkdir(parents=True, exist_ok=True)
            (staged / meta["videos"][key]["file"]).replace(dst)
            c, f = chunk_file(ep)
            row.update({f"videos/{key}/chunk_index": c, f"videos/{key}/file_index": f,
                        f"videos/{key}/from_timestamp": 0.0, f"videos/{key}/to_timestamp": n / float(self.info["fps"])})
        self._write_data(ep, start, task_index, arrays, features)
        c, f = chunk_file(ep)
        row.update({"data/chunk_index": c, "data/file_index": f, "dataset_from_index": start,
                    "dataset_to_index": start + n, "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        stats = self._episode_stats(arrays, features, meta, start, ep, task_index)
        for key, st in stats.items():
            for name, value in st.items():
                row[f"stats/{key}/{name}"] = value
        row.update(row_run)
        self._commit(row)
        shutil.rmtree(staged, ignore_errors=True)
        return ep

    # -- pieces of add -------------------------------------------------------------------------------------------
    def _features(self, meta: dict, arrays: dict) -> dict:
        feats = {}
        for key, v in meta["videos"].items():
            feats[key] = video_feature(v["height"], v["width"], meta["fps"], v["pix_fmt"])
        for key, names in meta["names"].items():
            feats[key] = vector_feature(arrays[key].shape[1], names)
        feats["next.reward"] = vector_feature(1, None)
        feats["next.success"] = vector_feature(1, None, "bool")
        feats["next.done"] = vector_feature(1, None, "bool")
        feats.update(json.loads(json.dumps(DEFAULT_FEATURES)))
        return feats

    def _new_info(self, meta: dict, features: dict) -> dict:
        return {"codebase_version": CODEBASE_VERSION, "robot_type": meta["robot_type"], "total_episodes": 0,
                "total_frames": 0, "total_tasks": 0, "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100,
                "video_files_size_in_mb": 200, "fps": _fps_value(meta["fps"]), "splits": {"train": "0:0"},
                "data_path": DATA_PATH, "video_path": VIDEO_PATH if video_keys(features) else None,
                "features": features}

    def _check_compatible(self, features: dict, meta: dict) -> None:
        have = self.info["features"]
        if abs(float(self.info["fps"]) - float(meta["fps"])) > 1e-9:
            raise DatasetError(f"{self.root / INFO}: fps is {self.info['fps']} but this run steps at {meta['fps']} Hz. "
                               "Fix: record into a new folder")
        for key in sorted(set(have) | set(features)):
            a, b = have.get(key), features.get(key)
            if a is None or b is None or a["dtype"] != b["dtype"] or list(a["shape"]) != list(b["shape"]):
                raise DatasetError(
                    f"{self.root / INFO}: feature '{key}' is {_desc(a)} there but this run records {_desc(b)} "
                    "(another robot, camera, observation size or object set). Fix: record into a new folder")

    def _write_data(self, ep: int, start: int, task_index: int, arrays: dict, features: dict) -> None:
        pa, pq = _pa(), _pq()
        n = len(arrays["action"])
        fps = float(self.info["fps"])
        frame = np.arange(n, dtype=np.int64)
        cols = {k: arrays[k] for k in arrays}
        cols.update({"timestamp": (frame / fps).astype(np.float32), "frame_index": frame,
                     "episode_index": np.full(n, ep, np.int64), "index": start + frame,
                     "task_index": np.full(n, task_index, np.int64)})
        fields, data = [], []
        for key, ft in features.items():
            if ft["dtype"] == "video":
                continue
            typ = _arrow_type(ft)
            x = np.asarray(cols[key])
            if list(ft["shape"]) == [1]:
                data.append(pa.array(x.reshape(n), type=typ))
            else:
                flat = pa.array(x.astype(ft["dtype"]).reshape(-1), type=typ.value_type)
                data.append(pa.FixedSizeListArray.from_arrays(flat, int(ft["shape"][0])))
            fields.append(pa.field(key, typ))
        table = pa.Table.from_arrays(data, schema=pa.schema(fields))
        path = data_path(self.root, ep)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)

    def _episode_stats(self, arrays: dict, features: dict, meta: dict, start: int, ep: int, task_index: int) -> dict:
        n = len(arrays["action"])
        fps = float(self.info["fps"])
        frame = np.arange(n)
        stats = {k: meta["videos"][k]["stats"] for k in video_keys(features)}
        for key in arrays:
            stats[key] = vector_stats(np.asarray(arrays[key], float))
        stats["timestamp"] = vector_stats((frame / fps)[:, None])
        stats["frame_index"] = vector_stats(frame[:, None])
        stats["episode_index"] = vector_stats(np.full((n, 1), ep))
        stats["index"] = vector_stats((start + frame)[:, None])
        stats["task_index"] = vector_stats(np.full((n, 1), task_index))
        return stats

    def _commit(self, row: dict) -> None:
        pa, pq = _pa(), _pq()
        import io

        self.rows.append(row)
        self._done.add(self._key(row))
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(self.rows), buf)
        (self.root / EPISODES).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.root / EPISODES, buf.getvalue())
        self._write_tasks()
        info = self.info
        info["total_episodes"] = len(self.rows)
        info["total_frames"] = int(sum(r["length"] for r in self.rows))
        info["total_tasks"] = len(self.tasks)
        info["splits"] = {"train": f"0:{len(self.rows)}"}
        atomic_write_json(self.root / INFO, info)
        per_ep = [{k.split("/")[1]: {} for k in r if k.startswith("stats/")} for r in self.rows]
        for r, st in zip(self.rows, per_ep):
            for k, v in r.items():
                if k.startswith("stats/"):
                    _, feat, name = k.split("/", 2)
                    st[feat][name] = v
        atomic_write_json(self.root / STATS, aggregate_stats(per_ep))

    def _write_tasks(self) -> None:
        import io

        pd = require("pandas", "record")
        buf = io.BytesIO()
        pd.DataFrame({"task_index": list(range(len(self.tasks)))}, index=list(self.tasks)).to_parquet(buf)
        atomic_write_bytes(self.root / TASKS, buf.getvalue())

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def _desc(ft: dict | None) -> str:
    return "absent" if ft is None else f"{ft['dtype']} {list(ft['shape'])}"


# -- reading ------------------------------------------------------------------------------------------------------------
def load_info(root) -> dict:
    path = Path(root) / INFO
    if not path.is_file():
        raise DatasetError(f"{root}: not a LeRobot dataset (no {INFO}). Fix: give the folder 'real2sim eval --record "
                           "lerobot DIR' wrote")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not JSON ({exc})") from exc


def episodes_table(root) -> list[dict]:
    """meta/episodes rows (every file under meta/episodes, in episode order)."""
    files = sorted((Path(root) / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        raise DatasetError(f"{root}: no meta/episodes/*/*.parquet (the episode table). Fix: record again")
    rows = [r for f in files for r in _pq().read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: r["episode_index"])


def read_episode(root, episode_index: int) -> dict:
    """One episode's frames and metadata: ``{"row": episodes row, "frames": {column: (T, ...) array}}``."""
    root = Path(root)
    rows = episodes_table(root)
    ids = [r["episode_index"] for r in rows]
    if episode_index not in ids:
        raise DatasetError(f"{root}: no episode {episode_index}; it holds episodes {ids[0]}..{ids[-1]} "
                           f"({len(ids)} in all)")
    row = rows[ids.index(episode_index)]
    info = load_info(root)
    path = root / info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    if not path.is_file():
        raise DatasetError(f"{path}: data file of episode {episode_index} is missing. Fix: record the dataset again")
    t = _pq().read_table(path)
    sel = np.asarray(t.column("episode_index").to_numpy()) == episode_index
    frames = {}
    for name in t.column_names:
        col = t.column(name).combine_chunks()
        x = np.asarray(col.flatten().to_numpy(zero_copy_only=False)).reshape(len(col), -1) \
            if hasattr(col.type, "list_size") else np.asarray(col.to_numpy(zero_copy_only=False))
        frames[name] = x[sel]
    order = np.argsort(frames["frame_index"])
    return {"row": row, "frames": {k: v[order] for k, v in frames.items()}, "info": info}


def episode_video(root, episode_index: int, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(frames, timestamps relative to the episode start) of one camera of one episode."""
    root = Path(root)
    info = load_info(root)
    row = next(r for r in episodes_table(root) if r["episode_index"] == episode_index)
    path = root / info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                            file_index=row[f"videos/{key}/file_index"])
    frames, ts = read_video(path)
    lo, hi = row[f"videos/{key}/from_timestamp"], row[f"videos/{key}/to_timestamp"]
    keep = (ts >= lo - 1e-6) & (ts < hi - 1e-6)
    return frames[keep], ts[keep] - lo


# -- checking ------------------------------------------------------------------------------------------------------------
def check_dataset(root, decode_videos: bool = True) -> list[str]:
    """Problems of ``root`` against the LeRobot v3.0 rules (empty when it conforms): info fields and features, data
    columns and types, contiguous global indices, per-episode frame indices, timestamps at ``frame_index / fps``,
    task indices in meta/tasks, episode rows that point at existing files, and (``decode_videos``) videos with one
    frame per data row at the feature's size and the recorded timestamps."""
    root = Path(root)
    try:
        info = load_info(root)
    except DatasetError as exc:
        return [str(exc)]
    bad: list[str] = []
    for k in ("codebase_version", "fps", "features", "data_path", "total_episodes", "total_frames", "total_tasks",
              "chunks_size", "splits", "robot_type"):
        if k not in info:
            bad.append(f"{INFO}: no '{k}'")
    if bad:
        return bad
    if info["codebase_version"] != CODEBASE_VERSION:
        bad.append(f"{INFO}: codebase_version {info['codebase_version']!r}, expected {CODEBASE_VERSION!r}")
    fps = float(info["fps"])
    feats = info["features"]
    for k, ft in DEFAULT_FEATURES.items():
        if k not in feats or feats[k]["dtype"] != ft["dtype"] or list(feats[k]["shape"]) != ft["shape"]:
            bad.append(f"{INFO}: feature '{k}' must be {ft['dtype']} {ft['shape']}, got {feats.get(k)}")
    for k, ft in feats.items():
        if not {"dtype", "shape", "names"} <= set(ft):
            bad.append(f"{INFO}: feature '{k}' lacks dtype/shape/names")
        if ft.get("dtype") == "video":
            vi = ft.get("info", {})
            if list(ft["shape"]) != [vi.get("video.height"), vi.get("video.width"), 3] or vi.get("video.fps") != info["fps"]:
                bad.append(f"{INFO}: video feature '{k}': shape {ft['shape']} / info {vi} disagree (or fps != {info['fps']})")
            if not info.get("video_path"):
                bad.append(f"{INFO}: video feature '{k}' but no video_path")
    try:
        rows = episodes_table(root)
    except DatasetError as exc:
        return bad + [str(exc)]
    if [r["episode_index"] for r in rows] != list(range(len(rows))):
        bad.append("meta/episodes: episode_index is not 0..N-1")
    if len(rows) != info["total_episodes"]:
        bad.append(f"{INFO}: total_episodes {info['total_episodes']} but meta/episodes has {len(rows)} rows")
    try:
        tasks = _pq().read_table(root / TASKS).to_pandas()
    except Exception as exc:  # noqa: BLE001 - any unreadable tasks file is the finding
        return bad + [f"{TASKS}: unreadable ({exc})"]
    if "task_index" not in tasks or sorted(tasks["task_index"]) != list(range(len(tasks))):
        bad.append(f"{TASKS}: needs a task_index column 0..n-1 indexed by task text")
    elif len(tasks) != info["total_tasks"]:
        bad.append(f"{INFO}: total_tasks {info['total_tasks']} but {TASKS} has {len(tasks)}")
    task_of = {int(i): str(t) for t, i in zip(tasks.index, tasks["task_index"])} if "task_index" in tasks else {}
    expect = {k: _arrow_type(ft) for k, ft in feats.items() if ft["dtype"] != "video"}
    total = 0
    for r in rows:
        ep = r["episode_index"]
        where = f"episode {ep}"
        if r["dataset_from_index"] != total or r["dataset_to_index"] - r["dataset_from_index"] != r["length"]:
            bad.append(f"{where}: dataset_from/to_index {r['dataset_from_index']}..{r['dataset_to_index']} do not follow "
                       f"on {total} with length {r['length']}")
        total += r["length"]
        path = root / info["data_path"].format(chunk_index=r["data/chunk_index"], file_index=r["data/file_index"])
        if not path.is_file():
            bad.append(f"{where}: data file {path.relative_to(root)} missing")
            continue
        t = _pq().read_table(path)
        schema = {f.name: f.type for f in t.schema}
        if set(schema) != set(expect):
            bad.append(f"{path.relative_to(root)}: columns {sorted(schema)} != features {sorted(expect)}")
        for k, typ in expect.items():
            if k in schema and schema[k] != typ:
                bad.append(f"{path.relative_to(root)}: column '{k}' is {schema[k]}, feature says {typ}")
        mine = t.filter(_pa().compute.equal(t.column("episode_index"), ep))
        fi = mine.column("frame_index").to_numpy()
        if mine.num_rows != r["length"] or list(fi) != list(range(r["length"])):
            bad.append(f"{where}: {mine.num_rows} data rows with frame_index {fi[:3].tolist()}..; expected 0..{r['length'] - 1}")
            continue
        idx = mine.column("index").to_numpy()
        if list(idx) != list(range(r["dataset_from_index"], r["dataset_to_index"])):
            bad.append(f"{where}: index column is not {r['dataset_from_index']}..{r['dataset_to_index'] - 1}")
        ts = mine.column("timestamp").to_numpy().astype(float)
        if not np.allclose(ts, fi / fps, atol=1e-4):
            bad.append(f"{where}: timestamps are not frame_index / fps ({fps})")
        ti = set(mine.column("task_index").to_numpy().tolist())
        if not ti <= set(task_of) or [task_of[i] for i in sorted(ti)] != list(r["tasks"]):
            bad.append(f"{where}: task_index {sorted(ti)} does not name its tasks {r['tasks']} in {TASKS}")
        for key in video_keys(feats):
            bad += _check_video(root, info, r, key, feats[key], fps)
    if total != info["total_frames"]:
        bad.append(f"{INFO}: total_frames {info['total_frames']} but the episodes hold {total}")
    return bad


def _check_video(root: Path, info: dict, r: dict, key: str, ft: dict, fps: float) -> list[str]:
    ep = r["episode_index"]
    cols = [f"videos/{key}/{c}" for c in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")]
    if any(c not in r for c in cols):
        return [f"episode {ep}: meta/episodes lacks {', '.join(c for c in cols if c not in r)}"]
    path = root / info["video_path"].format(video_key=key, chunk_index=r[cols[0]], file_index=r[cols[1]])
    if not path.is_file():
        return [f"episode {ep}: video {path.relative_to(root)} missing"]
    frames, ts = read_video(path)
    lo, hi = r[cols[2]], r[cols[3]]
    keep = (ts >= lo - 1e-4) & (ts < hi - 1e-4)
    out = []
    if keep.sum() != r["length"]:
        out.append(f"episode {ep}: {path.relative_to(root)} has {int(keep.sum())} frames in [{lo}, {hi}), "
                   f"the data has {r['length']}")
    elif not np.allclose(ts[keep] - lo, np.arange(r["length"]) / fps, atol=1e-4):
        out.append(f"episode {ep}: {path.relative_to(root)} frame times are not i / fps")
    if len(frames) and list(frames.shape[1:]) != list(ft["shape"]):
        out.append(f"episode {ep}: {path.relative_to(root)} frames are {list(frames.shape[1:])}, feature says {ft['shape']}")
    return out


__all__ = ["BackgroundVideoWriter", "CODEBASE_VERSION", "DatasetError", "LeRobotWriter", "VideoWriter", "check_dataset", "episode_video",
           "episodes_table", "load_info", "read_episode", "read_video"]
