"""Warm episode workers: a pool started once per evaluation, each worker keeping its loaded envs.

A worker (:class:`EpisodeWorker`; a local spawned process or a Ray actor, the same class) holds an
:class:`~real2sim.evaluation.envs.runner.EnvCache`: the scene, its engines and its renderer are loaded once and
*reset* for every episode, and for every task of the same bundle (``Real2SimEnv.set_task``). The pool
(:class:`WorkerPool` locally, :class:`RayPool` on a Ray cluster) hands out one episode at a time to an idle worker and
streams each result back as it finishes.

Start-up is measured apart from the episodes: :meth:`Pool.prepare` has every worker load the env and render once
(SAPIEN's first picture costs seconds) and returns the wall time that took.

Failures of a worker (not of the policy): a worker process that dies (segfault, ``os._exit``, the OOM killer) or
gives no answer within ``episode_timeout_s + hang_grace_s`` (a hung engine or policy call: killed) costs its episode
one retry on a fresh worker; a second loss is reported through ``on_lost`` (the runner writes it to
``errors.jsonl``, not as a policy failure) and the run goes on. Errors the episode raises (a policy returning NaN, an
unreachable policy server) stop the run as before.
"""
from __future__ import annotations

import logging
import os
import pickle
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from real2sim.core.errors import Real2SimError, require
from real2sim.evaluation.envs.runner import EnvCache, EvalConfig, run_episode

log = logging.getLogger(__name__)

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "LP_NUM_THREADS")
"""Per-worker thread counts set (unless the user set them) to the machine's cores / workers: BLAS pools and Mesa's
llvmpipe rasteriser otherwise start one thread per core in every worker and the workers fight over the cores."""
STARTUP_TIMEOUT_S = 600.0
"""Longest a worker may take to load an env and render once before it counts as hung."""


class WorkerLost(Real2SimError):
    """A worker process died or hung (raised for start-up failures that repeat; episodes are retried instead)."""


class EpisodeWorker:
    """Runs episodes in one process (a pool worker or a Ray actor) with its envs kept warm."""

    def __init__(self):
        self.cache = EnvCache()

    def prepare(self, cfg: EvalConfig) -> dict:
        """Load the env and policy for ``cfg`` and render once; {"pid", "seconds", "built"}."""
        return self.cache.warm(cfg)

    def run(self, cfg: EvalConfig, seed: int) -> dict:
        """One episode's result record."""
        return run_episode(cfg, seed, cache=self.cache)

    def close(self) -> None:
        self.cache.close()


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (it crosses a process boundary), else a Real2SimError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any exception type can refuse pickling
        return Real2SimError(f"{type(exc).__name__}: {exc}")


def _worker_main(conn) -> None:
    """A local worker process: answers (method, args) requests until it receives None."""
    logging.basicConfig(level=logging.WARNING)
    worker = EpisodeWorker()
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                break
            method, args = msg
            try:
                conn.send(("ok", getattr(worker, method)(*args)))
            except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
                log.debug("worker %d: %s", os.getpid(), traceback.format_exc())
                conn.send(("err", _portable(exc)))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        worker.close()


def threads_per_worker(workers: int) -> int:
    """Cores of this machine (those this process may use) divided among ``workers``, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, workers))


@dataclass
class _Job:
    kind: str  # "prepare" or "run"
    cfg: EvalConfig
    seed: int | None = None
    attempt: int = 1
    first_loss: str | None = None
    deadline: float = 0.0
    started: float = 0.0


@dataclass
class _Slot:
    """One worker place in a pool: the live worker handle and what it is doing."""

    index: int
    handle: object = None
    job: _Job | None = None
    prepared: set = field(default_factory=set)
    token: object = None  # Ray: the object ref of the job in flight


class Pool:
    """Scheduling shared by the local and the Ray pool: subclasses start, talk to and kill workers."""

    def __init__(self, workers: int):
        if workers < 1:
            raise Real2SimError(f"workers must be >= 1, got {workers}")
        self.workers = int(workers)
        self.slots = [_Slot(i) for i in range(self.workers)]
        self.closed = False
        self.restarts = 0
        self.env_builds = 0
        """Envs loaded by the workers so far (one per worker and env configuration while none is lost)."""
        for slot in self.slots:
            slot.handle = self._start()

    # -- what a backend provides ----------------------------------------------------------------
    def _start(self):
        raise NotImplementedError

    def _submit(self, slot: _Slot, method: str, args: tuple) -> None:
        raise NotImplementedError

    def _wait(self, busy: list[_Slot], timeout: float) -> list[tuple[_Slot, str, object]]:
        """Slots whose job ended within ``timeout`` s: (slot, "ok" | "err" | "lost", value / exception / reason)."""
        raise NotImplementedError

    def _kill(self, handle) -> None:
        raise NotImplementedError

    def _stop(self, handle) -> None:
        self._kill(handle)

    # -- scheduling -----------------------------------------------------------------------------
    def _key(self, cfg: EvalConfig) -> tuple:
        return EnvCache.key(cfg) + (cfg.policy,)

    def prepare(self, cfg: EvalConfig) -> float:
        """Every worker loads the env for ``cfg`` and renders once; returns the wall seconds (the start-up)."""
        if all(self._key(cfg) in s.prepared for s in self.slots):
            return 0.0
        t0 = time.perf_counter()
        self._schedule(deque(), cfg, on_record=None, on_lost=None, prepare_all=True)
        return time.perf_counter() - t0

    def run(self, cfg: EvalConfig, seeds, on_record: Callable[[dict], None],
            on_lost: Callable[[int, str], None], hang_grace_s: float = 30.0) -> None:
        """Episodes ``seeds`` of ``cfg``, one per idle worker; ``on_record(rec)`` as each finishes;
        ``on_lost(seed, reason)`` for an episode whose worker died or hung twice."""
        jobs = deque(_Job("run", cfg, int(s)) for s in seeds)
        self._schedule(jobs, cfg, on_record, on_lost, hang_grace_s=hang_grace_s)

    def _schedule(self, jobs: deque, cfg: EvalConfig, on_record, on_lost, prepare_all: bool = False,
                  hang_grace_s: float = 30.0) -> None:
        if self.closed:
            raise Real2SimError("this worker pool is closed; start a new one")
        key = self._key(cfg)
        start_failures = 0
        try:
            while True:
                for slot in self.slots:
                    if slot.job is None:
                        self._give_work(slot, jobs, cfg, key, prepare_all, hang_grace_s)
                busy = [s for s in self.slots if s.job is not None]
                if not busy:
                    return
                now = time.perf_counter()
                timeout = max(0.0, min(s.job.deadline for s in busy) - now)
                for slot, status, value in self._wait(busy, min(timeout, 1.0)):
                    job, slot.job = slot.job, None
                    if status == "ok":
                        if job.kind == "prepare":
                            slot.prepared.add(key)
                            self.env_builds += int(bool(value.get("built")))
                            start_failures = 0
                        else:
                            if job.first_loss:
                                value["retried_after"] = job.first_loss
                            on_record(value)
                    elif status == "err":
                        raise value
                    else:
                        start_failures += self._lost(slot, job, str(value), jobs, on_lost)
                now = time.perf_counter()
                for slot in self.slots:
                    if slot.job is not None and now > slot.job.deadline:
                        job, slot.job = slot.job, None
                        self._kill(slot.handle)
                        start_failures += self._lost(slot, job, f"no answer within {job.deadline - job.started:.0f} s "
                                                     "(hung; worker killed)", jobs, on_lost)
                if start_failures >= 2:
                    raise WorkerLost("workers died twice in a row while loading the scene (see the log above); "
                                     "run with --workers 1 to see the error in this process")
        except BaseException:
            self.close()
            raise

    def _give_work(self, slot: _Slot, jobs: deque, cfg: EvalConfig, key, prepare_all: bool,
                   hang_grace_s: float) -> None:
        now = time.perf_counter()
        if key not in slot.prepared and (jobs or prepare_all):
            slot.job = _Job("prepare", cfg, deadline=now + STARTUP_TIMEOUT_S, started=now)
            self._submit(slot, "prepare", (cfg,))
            return
        if jobs:
            job = jobs.popleft()
            job.started, job.deadline = now, now + float(cfg.episode_timeout_s) + float(hang_grace_s)
            slot.job = job
            self._submit(slot, "run", (job.cfg, job.seed))

    def _lost(self, slot: _Slot, job: _Job, reason: str, jobs: deque, on_lost) -> int:
        """Replace the lost worker; retry the episode once, then report it. Returns 1 for a lost start-up."""
        self.restarts += 1
        log.warning("worker %d lost (%s) during %s%s; starting a new one", slot.index, reason, job.kind,
                    f" of episode {job.seed}" if job.seed is not None else "")
        try:
            self._stop(slot.handle)
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        slot.handle, slot.prepared, slot.token = self._start(), set(), None
        if job.kind == "prepare":
            return 1
        if job.attempt == 1:
            job.attempt, job.first_loss = 2, reason
            jobs.appendleft(job)
        else:
            on_lost(job.seed, f"{job.first_loss}; retried: {reason}")
        return 0

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for slot in self.slots:
            try:
                (self._kill if slot.job is not None else self._stop)(slot.handle)
            except Exception:  # noqa: BLE001 - closing what may already be gone
                log.debug("closing worker %d", slot.index, exc_info=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class WorkerPool(Pool):
    """Local spawned worker processes (engines and GL/Vulkan contexts do not survive fork)."""

    def __init__(self, workers: int):
        import multiprocessing as mp

        self._ctx = mp.get_context("spawn")
        self._threads = str(threads_per_worker(workers))
        super().__init__(workers)

    def _start(self):
        parent, child = self._ctx.Pipe()
        saved = {k: os.environ.get(k) for k in THREAD_VARS}
        try:
            for k in THREAD_VARS:
                os.environ.setdefault(k, self._threads)
            proc = self._ctx.Process(target=_worker_main, args=(child,), daemon=True)
            proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
        child.close()
        return proc, parent

    def _submit(self, slot: _Slot, method: str, args: tuple) -> None:
        _, conn = slot.handle
        try:
            conn.send((method, args))
        except (BrokenPipeError, OSError):
            pass  # the worker is gone: its sentinel says so at the next wait

    def _wait(self, busy, timeout):
        from multiprocessing.connection import wait

        by_fd = {}
        for slot in busy:
            proc, conn = slot.handle
            by_fd[conn] = slot
            by_fd[proc.sentinel] = slot
        ready = wait(list(by_fd), timeout)
        out, seen = [], set()
        for r in ready:
            slot = by_fd[r]
            if slot.index in seen:
                continue
            proc, conn = slot.handle
            try:
                if conn.poll():
                    status, value = conn.recv()
                    out.append((slot, status, value))
                    seen.add(slot.index)
                    continue
            except (EOFError, OSError):
                pass
            if not proc.is_alive():
                proc.join(1)
                out.append((slot, "lost", f"worker process {proc.pid} exited with code {proc.exitcode}"))
                seen.add(slot.index)
        return out

    def _kill(self, handle) -> None:
        proc, conn = handle
        proc.kill()
        proc.join(5)
        conn.close()

    def _stop(self, handle) -> None:
        proc, conn = handle
        try:
            conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()


class RayPool(Pool):
    """The same :class:`EpisodeWorker` as Ray actors (one CPU each), on a local Ray or a cluster."""

    def __init__(self, workers: int, address=True):
        self.ray = require("ray", "ray")
        if not self.ray.is_initialized():
            if address in (True, "local", "", None):
                self.ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
            else:
                self.ray.init(address=address, log_to_driver=False)
        self._actor = self.ray.remote(num_cpus=1, max_restarts=0)(EpisodeWorker)
        super().__init__(workers)

    def _start(self):
        return self._actor.remote()

    def _submit(self, slot: _Slot, method: str, args: tuple) -> None:
        slot.token = getattr(slot.handle, method).remote(*args)

    def _wait(self, busy, timeout):
        ray = self.ray
        by_ref = {s.token: s for s in busy}
        ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            slot = by_ref[ref]
            try:
                out.append((slot, "ok", ray.get(ref)))
            except ray.exceptions.RayActorError as exc:
                out.append((slot, "lost", f"Ray actor died ({type(exc).__name__})"))
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc
                out.append((slot, "err", getattr(exc, "cause", None) or cause))
        return out

    def _kill(self, handle) -> None:
        self.ray.kill(handle, no_restart=True)


def make_pool(workers: int, ray=None) -> Pool:
    """A Ray pool when ``ray`` is given (True / "local" or a cluster address), else local worker processes."""
    if ray is not None and ray is not False:
        return RayPool(workers, ray)
    return WorkerPool(workers)


__all__ = ["EpisodeWorker", "Pool", "RayPool", "WorkerLost", "WorkerPool", "make_pool", "threads_per_worker"]
