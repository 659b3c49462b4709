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
