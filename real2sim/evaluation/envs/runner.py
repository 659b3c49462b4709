"""Episode runner: many seeded episodes of one policy on one task, locally (process pool) or on Ray.

Results go to ``OUT/episodes.jsonl``, one JSON object per finished episode, appended as episodes
finish (``policy, task, backend, seed, success, steps, seconds, init``); a rerun with the same
``OUT`` skips (policy, task, backend, seed) already there, so an interrupted run resumes.
``OUT/sim.csv`` (columns policy, task, successes, trials; every policy and task of this backend in
the JSONL) feeds ``real2sim metrics --sim``. Episodes that fail because the policy server is
unreachable are not written (they are not policy failures); the run stops with the error.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.errors import Real2SimError, require
from real2sim.engines import get_engine
from real2sim.evaluation.envs.env import Real2SimEnv, default_backend, resolve_shading, resolve_task
from real2sim.evaluation.policies.base import make_policy

log = logging.getLogger(__name__)
RESULTS = "episodes.jsonl"
SIM_CSV = "sim.csv"

_CACHE: dict = {}  # per process: env config key -> env (engines and renderers are slow to create)


@dataclass
class EvalOptions:
    """How an evaluation runs (the options of ``real2sim eval`` and the defaults of :func:`evaluate`)."""

    episodes: int = 10
    """Episodes per policy (seeds seed .. seed + episodes - 1)."""
    workers: int = 1
    """Local processes, each with its own env reused across episodes (or Ray CPUs with --ray)."""
    backend: str | None = None
    """Simulator (default: the engine registry's first that simulates)."""
    obs_mode: str = "composited"
    """'composited' (real plate + simulated foreground, what SIMPLER's visual matching shows), 'render' or 'state'."""
    out_dir: str = "results"
    """Results folder (episodes.jsonl, sim.csv); a re-run resumes from it."""
    seed: int = 0
    """First episode seed."""
    videos: bool = False
    """Write one mp4 per episode under OUT/videos."""
    episode_timeout_s: float = 600.0
    """Wall-clock limit of one episode; one still running then ends as a failure (recorded with timed_out)."""


@dataclass
class EvalConfig:
    bundle_dir: str
    policy: str
    task: str | None = None
    backend: str | None = None
    obs_mode: str = "composited"
    obs_size: tuple[int, int] | None = None
    videos: bool = False
    out_dir: str = "results"
    env_kwargs: dict = field(default_factory=dict)
    episode_timeout_s: float = EvalOptions.episode_timeout_s
    record_dir: str | None = None
    """Staging folder of the dataset this run records into (:mod:`real2sim.evaluation.record`); None: no recording."""


@dataclass
class EvalSummary:
    policy: str
    task: str
    backend: str
    successes: int
    trials: int
    ran: int
    skipped: int
    seconds: float
    results_path: Path
    csv_path: Path

    @property
    def rate(self) -> float:
        return self.successes / self.trials if self.trials else float("nan")


def _env_for(cfg: EvalConfig, privileged: bool):

    key = (cfg.bundle_dir, cfg.task, cfg.backend, cfg.obs_mode, tuple(cfg.obs_size or ()), privileged,
           json.dumps(cfg.env_kwargs, sort_keys=True))
    env = _CACHE.get(key)
    if env is None:
        kw = dict(cfg.env_kwargs)
        if cfg.obs_mode == "state" and not cfg.videos:
            kw.setdefault("render_mode", None)  # no camera work at all
        env = Real2SimEnv(cfg.bundle_dir, task=cfg.task, backend=cfg.backend, obs_mode=cfg.obs_mode,
                          obs_size=cfg.obs_size, privileged=privileged, **kw)
        _CACHE[key] = env
    return env


def clear_cache() -> None:
    """Close the envs this process keeps for reuse."""
    for env in _CACHE.values():
        env.close()
    _CACHE.clear()


def run_episode(cfg: EvalConfig, seed: int, policy=None) -> dict:
    """One episode; returns its result record (the policy is built from ``cfg.policy`` unless given)."""

    pol = policy if policy is not None else make_policy(cfg.policy)
    env = _env_for(cfg, bool(getattr(pol, "privileged", False)))
    t0 = time.perf_counter()
    obs, info = env.reset(seed=int(seed))
    pol.reset(info["instruction"], info, int(seed))
    frames = [env.render()] if cfg.videos else None
    recorder = _recorder(cfg, env, obs)
    init, variant = info["init"], info.get("variant") or None
    steps, done, timed_out = 0, False, False
    deadline = t0 + float(cfg.episode_timeout_s)
    # Bounded by steps (every act() yields >= 1 step, and env truncates at max_steps; the runner stops there too)
    # and by wall time (checked after each action), whatever the policy returns.
    while not done:
        chunk = _chunk(pol.act(obs), cfg.policy)
        for a in chunk:
            obs, _, term, trunc, info = env.step(a)
            steps += 1
            if recorder is not None:
                recorder.step(a, obs, info["success"])
            if frames is not None:
                frames.append(env.render())
            if term or trunc or steps >= env.max_steps:
                done = True
                break
            if time.perf_counter() > deadline:
                break
        if not done and time.perf_counter() > deadline:
            log.warning("episode %d of %s: still running after %.0f s (episode_timeout_s); ended as a failure",
                        seed, cfg.policy, cfg.episode_timeout_s)
            done = timed_out = True
    success = bool(info["success"]) and not timed_out
    rec = {"policy": cfg.policy, "task": env.task_id, "backend": cfg.backend, "seed": int(seed), "success": success,
           "steps": steps, "seconds": round(time.perf_counter() - t0, 4), "init": init, "obs_mode": env.obs_mode,
           "worker_pid": os.getpid()}
    if timed_out:
        rec["timed_out"] = True
    if cfg.env_kwargs.get("variants"):
        rec["variants_config"] = cfg.env_kwargs["variants"]
    if env.obs_mode != "state":
        rec["shading"] = env.shading
    if variant:
        rec["variant"] = variant
    if recorder is not None:
        rec["recording"] = recorder.finish()
    if frames is not None and frames[0] is not None:
        rec["video"] = write_video(frames, Path(cfg.out_dir) / "videos" / f"{_slug(cfg.policy)}_{env.task_id}_{cfg.backend}_{seed}.mp4")
    return rec


def _recorder(cfg: EvalConfig, env, obs):
    """The per-step recording hook of this episode (None when the run records nothing)."""
    if not cfg.record_dir:
        return None
    from real2sim.evaluation.record import EpisodeRecorder, env_config

    recorder = EpisodeRecorder(Path(cfg.record_dir), env, env_config(cfg, env))
    recorder.start(obs)
    return recorder


class PolicyOutputError(Real2SimError):
    """A policy returned something that is not an action chunk."""


def _chunk(actions, policy: str) -> np.ndarray:
    """A policy's reply as a finite ``(k, d)`` chunk with k >= 1 (a (d,) action is a chunk of one), or the error."""
    try:
        a = np.asarray(actions, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PolicyOutputError(f"policy '{policy}' returned {type(actions).__name__}, not numbers: {exc}") from exc
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise PolicyOutputError(f"policy '{policy}' returned actions of shape {a.shape}; "
                                "expected a (k, d) chunk with k >= 1 actions (an empty chunk would never end the episode)")
    if not np.isfinite(a).all():
        raise PolicyOutputError(f"policy '{policy}' returned NaN or inf actions")
    return a


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in s)[:80]


def write_video(frames, path: Path, fps: int = 5) -> str:
    """Frames -> mp4 (cv2 'mp4v'); falls back to a PNG strip when no mp4 writer is available."""
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames[0].shape[:2]
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    if vw.isOpened():
        for f in frames:
            vw.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
        vw.release()
        return str(path)
    strip = path.with_suffix(".png")
    log.warning("no mp4 writer (cv2 VideoWriter); writing a PNG strip %s", strip)
    cv2.imwrite(str(strip), cv2.cvtColor(np.concatenate(frames, axis=1), cv2.COLOR_RGB2BGR))
    return str(strip)


def read_results(path: Path) -> list[dict]:
    """Records in a results JSONL; a torn last line (a killed run) is skipped with a warning."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s: line %d is not complete JSON (interrupted write?); ignoring it", path, i + 1)
    return out


def _repair(path: Path) -> None:
    """Cut a torn last line (a run killed mid-write) so new records start on a line of their own."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        log.warning("%s: dropping an incomplete last record (%d bytes) from an interrupted run", path, len(data) - keep)
        with path.open("r+b") as f:
            f.truncate(keep)


def _append(path: Path, rec: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def write_sim_csv(results_path: Path, csv_path: Path, backend: str | None = None) -> Path:
    """Aggregate a results JSONL into (policy, task, successes, trials) rows."""
    agg: dict = {}
    for r in read_results(results_path):
        if backend is not None and r.get("backend") != backend:
            continue
        a = agg.setdefault((r["policy"], r["task"]), [0, 0])
        a[0] += int(bool(r["success"]))
        a[1] += 1
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["policy", "task", "successes", "trials"])
    for (p, t), (s, n) in sorted(agg.items()):
        w.writerow([p, t, s, n])
    atomic_write_bytes(csv_path, buf.getvalue().encode())
    return csv_path


def _check_policy(spec: str) -> str:
    """Build the policy once up front: unknown names and unreachable servers fail before any episode."""

    pol = make_policy(spec)
    if hasattr(pol, "check"):
        pol.check()  # RemotePolicyError with the URL after its timeout and retries
    return getattr(pol, "name", spec)


def _worker_init() -> None:
    logging.basicConfig(level=logging.WARNING)


def evaluate(bundle_dir, task: str | None, policy: str, episodes: int = EvalOptions.episodes,
             workers: int = EvalOptions.workers, backend: str | None = EvalOptions.backend, ray=None,
             videos: bool = EvalOptions.videos, out_dir=EvalOptions.out_dir, seed: int = EvalOptions.seed,
             obs_mode: str = EvalOptions.obs_mode, obs_size=None, progress: Callable[[int, int, dict], None] | None = None,
             env_kwargs: dict | None = None, episode_timeout_s: float = EvalOptions.episode_timeout_s,
             record=None) -> EvalSummary:
    """Run ``episodes`` seeded episodes (seeds ``seed .. seed + episodes - 1``), resuming from ``out_dir``.

    ``workers`` > 1 uses a local process pool (spawned processes, one env each, reused across
    episodes); ``ray`` (True / "local" for a local Ray instance, or a cluster address) runs the
    episodes as Ray tasks instead. ``progress(done, total, record)`` is called as episodes finish.
    ``record``: an open dataset (:func:`real2sim.evaluation.record.open_dataset`) that each finished episode is
    added to before its result is written (its result then names it: ``recorded_episode``).
    """

    if episodes < 1:
        raise Real2SimError(f"episodes must be >= 1, got {episodes}")
    if not episode_timeout_s > 0:
        raise Real2SimError(f"episode_timeout_s must be > 0, got {episode_timeout_s}")
    backend = get_engine(backend).simulator if backend else default_backend()
    bundle_dir = str(Path(bundle_dir).resolve())
    manifest = Bundle.load(Path(bundle_dir)).manifest
    task_id, _ = resolve_task(manifest, task)
    _check_policy(policy)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / RESULTS
    _repair(results_path)
    cfg = EvalConfig(bundle_dir, policy, task_id, backend, obs_mode, tuple(obs_size) if obs_size else None, videos,
                     str(out), dict(env_kwargs or {}), float(episode_timeout_s),
                     str(record.staging) if record is not None else None)
    vcfg = cfg.env_kwargs.get("variants") or None
    shading = None if obs_mode == "state" else resolve_shading(manifest, cfg.env_kwargs.get("shading", "auto"))

    def same_run(r: dict) -> bool:  # episodes of another variant set are not this run's (they aggregate in sim.csv)
        return (r.get("policy") == policy and r.get("task") == task_id and r.get("backend") == backend
                and r.get("variants_config") == vcfg and r.get("shading") == shading)

    done = {r["seed"] for r in read_results(results_path) if same_run(r)}
    seeds = [s for s in range(seed, seed + episodes) if s not in done]
    skipped = episodes - len(seeds)
    if skipped:
        log.info("resuming: %d of %d episodes already in %s", skipped, episodes, results_path)
    t0 = time.perf_counter()
    finished = 0
    record_to = record

    def record(rec: dict) -> None:
        nonlocal finished
        if "recording" in rec:
            rec["recorded_episode"] = record_to.add(rec.pop("recording"), rec)
        _append(results_path, rec)
        finished += 1
        if progress:
            progress(skipped + finished, episodes, rec)

    try:
        if seeds and ray is not None and ray is not False:
            _run_ray(cfg, seeds, workers, ray, record)
        elif seeds and workers > 1:
            _run_pool(cfg, seeds, workers, record)
        else:
            for s in seeds:
                record(run_episode(cfg, s))
    finally:
        write_sim_csv(results_path, out / SIM_CSV, backend)
    recs = [r for r in read_results(results_path) if same_run(r) and seed <= r["seed"] < seed + episodes]
    return EvalSummary(policy, task_id, backend, sum(bool(r["success"]) for r in recs), len(recs), finished, skipped,
                       time.perf_counter() - t0, results_path, out / SIM_CSV)


def _run_pool(cfg: EvalConfig, seeds, workers: int, record) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # engines and GL/Vulkan contexts do not survive fork
    with ProcessPoolExecutor(max_workers=min(workers, len(seeds)), mp_context=ctx, initializer=_worker_init) as ex:
        pending = {ex.submit(run_episode, cfg, s) for s in seeds}
        try:
            while pending:
                fin, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in fin:
                    record(f.result())
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def _run_ray(cfg: EvalConfig, seeds, workers: int, address, record) -> None:

    ray = require("ray", "ray")
    if not ray.is_initialized():
        if address in (True, "local", "", None):
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(run_episode)
    pending = [remote.remote(cfg, s) for s in seeds]
    try:
        while pending:
            fin, pending = ray.wait(pending, num_returns=1)
            for ref in fin:
                record(ray.get(ref))
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


__all__ = ["EvalConfig", "EvalSummary", "clear_cache", "evaluate", "read_results", "run_episode", "write_sim_csv"]
