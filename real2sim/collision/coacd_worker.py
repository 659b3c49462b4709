"""Run CoACD in its own process: ``python -m real2sim.collision.coacd_worker IN.npz OUT.npz``.

IN holds ``vertices``, ``faces`` and ``params`` (JSON of ``coacd.run_coacd`` keyword
arguments); OUT gets ``count`` and ``v{i}``/``f{i}`` per convex part. Isolated so that a
CoACD crash or a runaway decomposition cannot take the caller down (and so that
``import coacd`` never precedes ``import open3d`` in the caller). Exit code 0 = success.
Keep imports minimal: this runs once per object.
"""
from __future__ import annotations

import json
import os
import sys

PARENT_ENV = "REAL2SIM_COACD_PARENT"
"""Tells a worker its parent's pid: it exits when that process is gone."""
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Exit when the process that started this worker is gone (killed with -9 included): on Linux the kernel sends
    SIGKILL (prctl PR_SET_PDEATHSIG); elsewhere a thread polls the parent's pid (CoACD may hold the GIL, so this is
    the weaker fallback). ``$REAL2SIM_COACD_PARENT`` names the parent; without it nothing is armed."""
    want = os.environ.get(PARENT_ENV, "")
    if not want.isdigit():
        return
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != int(want):  # the parent died before the signal was armed
        os._exit(3)
    if not armed:
        import threading
        import time

        def watch() -> None:
            while os.getppid() == int(want):
                time.sleep(0.5)
            os._exit(3)

        threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.stderr.write("usage: python -m real2sim.collision.coacd_worker IN.npz OUT.npz\n")
        return 2
    _die_with_parent()
    import numpy as np

    with np.load(argv[0], allow_pickle=False) as d:
        vertices = np.asarray(d["vertices"], np.float64)
        faces = np.asarray(d["faces"], np.int64)
        params = json.loads(str(d["params"]))
    import coacd

    coacd.set_log_level("error")
    parts = coacd.run_coacd(coacd.Mesh(vertices, faces), **params)
    out = {"count": np.array(len(parts))}
    for i, (pv, pf) in enumerate(parts):
        out[f"v{i}"] = np.asarray(pv, np.float64)
        out[f"f{i}"] = np.asarray(pf, np.int64)
    tmp = argv[1] + ".tmp"
    with open(tmp, "wb") as fh:
        np.savez(fh, **out)
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
