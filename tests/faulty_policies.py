"""Policies that break their worker for real (for the worker-pool tests): importable by spec in spawned workers as
``faulty_policies.Crash:seed=1`` (tests/ is on the workers' sys.path)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

HOLD = np.array([0, 0, 0, 0, 0, 0, 1.0])


class _Hold:
    privileged = False

    def __init__(self, seed: int = -1, once: str = ""):
        self.name = type(self).__name__
        self.bad_seed, self.once = int(seed), once
        self.seed = None

    def _misbehaves(self) -> bool:
        """True on the chosen seed; with ``once`` (a file path) only the first time (the file marks it done)."""
        if self.seed != self.bad_seed:
            return False
        if self.once:
            if Path(self.once).exists():
                return False
            Path(self.once).write_text(str(os.getpid()))
        return True

    def reset(self, instruction, info=None, seed=None):
        self.seed = seed

    def act(self, obs):
        return HOLD


class Crash(_Hold):
    """Kills its own process (SIGKILL, as the OOM killer would) at the first action of episode ``seed``."""

    def act(self, obs):
        if self._misbehaves():
            os.kill(os.getpid(), signal.SIGKILL)
        return HOLD


class Hang(_Hold):
    """Never answers at the first action of episode ``seed`` (a stuck model server call, a deadlocked engine)."""

    def act(self, obs):
        if self._misbehaves():
            time.sleep(3600)
        return HOLD
