"""Episode runner: many seeded episodes of one policy on one task, in this process or on a pool of warm workers
(local processes or Ray actors: :mod:`real2sim.evaluation.envs.workers`).

Results go to ``OUT/episodes.jsonl``, one JSON object per finished episode, appended as episodes
finish (``policy, task, backend, seed, success, steps, seconds, cpu_seconds, init``); a rerun with the same
``OUT`` skips (policy, task, backend, seed) already there, so an interrupted run resumes.
``OUT/sim.csv`` (columns policy, task, successes, trials; every policy and task of this backend in
the JSONL) feeds ``real2sim metrics --sim``. Episodes that fail because the policy server is
unreachable are not written (they are not policy failures); the run stops with the error. Episodes whose pool
worker died or hung twice go to ``OUT/errors.jsonl`` instead (not policy failures either) and the run goes on.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from real2sim.core.bundle import Bundle, atomic_write_bytes
from real2sim.core.errors import Real2SimError
from real2sim.engines import get_engine
from real2sim.evaluation.envs.env import Real2SimEnv, default_backend, resolve_shading, resolve_task
from real2sim.evaluation.policies.base import make_policy

log = logging.getLogger(__name__)
RESULTS = "episodes.jsonl"
ERRORS = "errors.jsonl"
SIM_CSV = "sim.csv"



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
    hang_grace_s: float = 30.0
    """A pool worker silent for episode_timeout_s + this (a hung engine or policy call) is killed; its episode is
    retried once on a fresh worker, then reported in OUT/errors.jsonl."""


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
    """Wall time of the episodes, after start-up."""
    results_path: Path
    csv_path: Path
    startup_s: float = 0.0
    """Wall time the workers took to load the env and render once (0 when they had it loaded already)."""
    lost: list = field(default_factory=list)
    """(seed, reason) of episodes whose worker died or hung twice (in OUT/errors.jsonl; a rerun tries them again)."""

    @property
    def episodes_per_s(self) -> float:
        """Steady-state throughput: episodes run per second after start-up."""
        return self.ran / self.seconds if self.seconds > 0 else float("nan")

    @property
    def rate(self) -> float:
        return self.successes / self.trials if self.trials else float("nan")


class EnvCache:
    """The loaded envs of one process, kept across episodes *and tasks* of the same bundle (reset, not rebuild).

    Keyed by everything that shapes an env except the task and the policy (bundle, backend, observation mode and size,
    env options); a job for another task of the same bundle switches the cached env with ``Real2SimEnv.set_task``.
    The envs are built ``privileged`` (object poses in the observation: a few microseconds a step) so that privileged
    and plain policies share one scene; :func:`run_episode` hides the poses from a policy that is not privileged.
    Policies are kept by spec too (an in-process model loads once per worker, not once per episode)."""

    def __init__(self):
        self._envs: dict = {}
        self._policies: dict = {}

    @staticmethod
    def key(cfg: "EvalConfig") -> tuple:
        return (cfg.bundle_dir, cfg.backend, cfg.obs_mode, tuple(cfg.obs_size or ()), bool(cfg.videos),
                json.dumps(cfg.env_kwargs, sort_keys=True))

    def policy(self, spec: str):
        pol = self._policies.get(spec)
        if pol is None:
            pol = self._policies[spec] = make_policy(spec)
        return pol

    def env(self, cfg: "EvalConfig") -> tuple[Real2SimEnv, bool]:
        """(the env for ``cfg``, switched to ``cfg.task``; whether it was built now)."""
        key = self.key(cfg)
        env = self._envs.get(key)
        built = env is None
        if built:
            kw = dict(cfg.env_kwargs)
            if cfg.obs_mode == "state" and not cfg.videos:
                kw.setdefault("render_mode", None)  # no camera work at all
            env = Real2SimEnv(cfg.bundle_dir, task=cfg.task, backend=cfg.backend, obs_mode=cfg.obs_mode,
                              obs_size=cfg.obs_size, privileged=True, **kw)
            self._envs[key] = env
        else:
            env.set_task(cfg.task)
        return env, built

    def warm(self, cfg: "EvalConfig") -> dict:
        """Load the env (and policy) ``cfg`` needs and render once (a renderer's first picture costs the most):
        the start-up a worker pays before its first episode. Returns {"pid", "seconds", "built"}."""
        t0 = time.perf_counter()
        self.policy(cfg.policy)
        env, built = self.env(cfg)
        if built:
            env.reset(seed=0)
            if cfg.videos:
                env.render()
        return {"pid": os.getpid(), "seconds": time.perf_counter() - t0, "built": built}

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._policies.clear()


_CACHE = EnvCache()  # this process's envs (the in-process runner; each pool worker has its own)


def clear_cache() -> None:
    """Close the envs this process keeps for reuse."""
    _CACHE.close()


def run_episode(cfg: EvalConfig, seed: int, policy=None, cache: EnvCache | None = None) -> dict:
    """One episode; returns its result record (the policy is built from ``cfg.policy`` unless given; the env comes
    from ``cache``, this process's :class:`EnvCache` by default)."""

    cache = cache if cache is not None else _CACHE
    pol = policy if policy is not None else cache.policy(cfg.policy)
    env, _ = cache.env(cfg)
    return _episode(cfg, seed, pol, env)


def _seen_by(pol, obs: dict) -> dict:
    """The observation as the policy may see it: object poses only for a privileged policy."""
    if "objects" in obs and not getattr(pol, "privileged", False):
        obs = {k: v for k, v in obs.items() if k != "objects"}
    return obs


def _episode(cfg: EvalConfig, seed: int, pol, env) -> dict:
    t0, cpu0 = time.perf_counter(), time.process_time()
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
        chunk = _chunk(pol.act(_seen_by(pol, obs)), cfg.policy)
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
           "steps": steps, "seconds": round(time.perf_counter() - t0, 4),
           "cpu_seconds": round(time.process_time() - cpu0, 4), "init": init, "obs_mode": env.obs_mode,
           "worker_pid": os.getpid()}
    if timed_out:
        rec["timed_out"] = True
    if cfg.env_kwargs.get("variants"):
        rec["variants_config"] = cfg.env_kwargs["variants"]
    if env.obs_mode != "state":
        rec["shading"] = env.shading
    if env.lens != "pinhole":
        rec["lens"] = env.lens
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


def evaluate(bundle_dir, task: str | None, policy: str, episodes: int = EvalOptions.episodes,
             workers: int = EvalOptions.workers, backend: str | None = EvalOptions.backend, ray=None,
             videos: bool = EvalOptions.videos, out_dir=EvalOptions.out_dir, seed: int = EvalOptions.seed,
             obs_mode: str = EvalOptions.obs_mode, obs_size=None, progress: Callable[[int, int, dict], None] | None = None,
             env_kwargs: dict | None = None, episode_timeout_s: float = EvalOptions.episode_timeout_s,
             hang_grace_s: float = EvalOptions.hang_grace_s, pool=None, record=None) -> EvalSummary:
    """Run ``episodes`` seeded episodes (seeds ``seed .. seed + episodes - 1``), resuming from ``out_dir``.

    ``pool`` (a :mod:`~real2sim.evaluation.envs.workers` pool the caller keeps across calls, so its workers stay
    warm across policies and tasks) runs them on its workers; without one, ``workers`` > 1 or ``ray`` (True /
    "local" for a local Ray instance, or a cluster address) start a pool for this call, and ``workers`` = 1 runs
    in this process (envs kept in this process's cache). ``progress(done, total, record)`` is called as episodes
    finish. The summary reports start-up (loading the scene, first render) apart from the episodes' time.
    ``record``: an open dataset (:func:`real2sim.evaluation.record.open_dataset`) that each finished episode is
    added to before its result is written (its result then names it: ``recorded_episode``).
    """

    if episodes < 1:
        raise Real2SimError(f"episodes must be >= 1, got {episodes}")
    if not episode_timeout_s > 0:
        raise Real2SimError(f"episode_timeout_s must be > 0, got {episode_timeout_s}")
    if not hang_grace_s > 0:
        raise Real2SimError(f"hang_grace_s must be > 0, got {hang_grace_s}")
    if workers < 1:
        raise Real2SimError(f"workers must be >= 1, got {workers}")
    backend = get_engine(backend).simulator if backend else default_backend()
    bundle_dir = str(Path(bundle_dir).resolve())
    manifest = Bundle.load(Path(bundle_dir)).manifest
    task_id, _ = resolve_task(manifest, task)
    _check_policy(policy)
    out = Path(out_dir).resolve()  # absolute: workers (Ray actors on other nodes too) write videos there
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
                and r.get("variants_config") == vcfg and r.get("shading") == shading
                and r.get("lens", "pinhole") == cfg.env_kwargs.get("lens", "pinhole"))

    done = {r["seed"] for r in read_results(results_path) if same_run(r)}
    seeds = [s for s in range(seed, seed + episodes) if s not in done]
    skipped = episodes - len(seeds)
    if skipped:
        log.info("resuming: %d of %d episodes already in %s", skipped, episodes, results_path)
    finished = 0
    record_to = record
    lost: list = []

    def record(rec: dict) -> None:
        nonlocal finished
        if "recording" in rec:
            rec["recorded_episode"] = record_to.add(rec.pop("recording"), rec)
        _append(results_path, rec)
        finished += 1
        if progress:
            progress(skipped + finished, episodes, rec)

    def on_lost(s: int, reason: str) -> None:
        log.error("episode %d of %s on %s: %s; reported in %s, the run goes on", s, policy, task_id, reason,
                  out / ERRORS)
        _append(out / ERRORS, {"policy": policy, "task": task_id, "backend": backend, "seed": int(s), "error": reason})
        lost.append((int(s), reason))

    startup = 0.0
    t0 = time.perf_counter()
    try:
        if seeds:
            own = pool is None and ((ray is not None and ray is not False) or workers > 1)
            if own:
                from real2sim.evaluation.envs.workers import make_pool

                t_pool = time.perf_counter()
                pool = make_pool(min(workers, len(seeds)), ray)
                startup += time.perf_counter() - t_pool
            try:
                if pool is not None:
                    startup += pool.prepare(cfg)
                    t0 = time.perf_counter()
                    pool.run(cfg, seeds, record, on_lost, hang_grace_s=hang_grace_s)
                else:
                    startup = _CACHE.warm(cfg)["seconds"]
                    t0 = time.perf_counter()
                    for s in seeds:
                        record(run_episode(cfg, s))
            finally:
                if own:
                    pool.close()
    finally:
        write_sim_csv(results_path, out / SIM_CSV, backend)
    seconds = time.perf_counter() - t0
    recs = [r for r in read_results(results_path) if same_run(r) and seed <= r["seed"] < seed + episodes]
    return EvalSummary(policy, task_id, backend, sum(bool(r["success"]) for r in recs), len(recs), finished, skipped,
                       seconds, results_path, out / SIM_CSV, startup, lost)


__all__ = ["EvalConfig", "EvalSummary", "clear_cache", "evaluate", "read_results", "run_episode", "write_sim_csv"]
