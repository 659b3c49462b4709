"""Timing helpers shared by the benchmarks (run as scripts: this folder is on ``sys.path``)."""
from __future__ import annotations

import time


def best_of(fn, n: int = 3):
    """``(fastest seconds of n calls of fn, the last call's result)``: the minimum is the least noisy estimate on
    a shared machine."""
    ts, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def best_of_both(fn, n: int = 3):
    """``(fastest wall seconds, fastest process CPU seconds, the last call's result)`` of n calls of fn. On a shared
    machine the CPU time (``time.process_time``: this process's threads only) is the steadier of the two."""
    walls, cpus, out = [], [], None
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out
