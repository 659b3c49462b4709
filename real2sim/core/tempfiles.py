"""Temp files and folders that name their writer, so that the next run can remove what a killed one left.

A temp name carries the writing process's id (``.<name>.<pid>.XXXXXXXX.tmp``, ``r2s_<topic>_<pid>_<random>``). A
process that is gone (killed with -9, the machine rebooted) can never finish its temp file, so whoever next writes
beside it removes it; a live writer's temp files, in this process or another, are left alone.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (this process counts)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process: alive
    return True


def temp_file_prefix(name: str) -> str:
    """``mkstemp`` prefix of a temp file that will replace ``name``: ``.<name>.<pid>.``."""
    return f".{name}.{os.getpid()}."


def sweep_matching(folder: Path, pattern: str, keep: Callable[[re.Match], bool] = lambda m: False,
                   why: str = "by an interrupted run") -> list[str]:
    """Remove entries of ``folder`` whose name fully matches the regex ``pattern``, unless ``keep(match)``. Links
    are unlinked, never followed; folders are removed with their contents. Returns the names removed."""
    rx = re.compile(pattern)
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError, PermissionError):
        for p in Path(folder).iterdir():
            m = rx.fullmatch(p.name)
            if not m or keep(m):
                continue
            if p.is_symlink() or not p.is_dir():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            else:
                shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    if removed:
        log.info("removed %s left in %s %s", ", ".join(sorted(removed)), folder, why)
    return removed


def sweep_dead_temps(folder: Path, pattern: str) -> list[str]:
    """Remove entries of ``folder`` whose name fully matches ``pattern`` (a regex with a group ``pid``) and whose
    writer is gone. Returns the names removed."""
    return sweep_matching(folder, pattern, keep=lambda m: pid_alive(int(m.group("pid"))), why="by a killed run")


def sweep_temp_files(folder: Path, name: str) -> list[str]:
    """Remove the temp files of ``folder/name`` whose writers are gone (see :func:`temp_file_prefix`)."""
    return sweep_dead_temps(folder, rf"\.{re.escape(name)}\.(?P<pid>\d+)\.[A-Za-z0-9_]{{8}}\.tmp")


SCRATCH_PATTERN = r"r2s_(?P<topic>[a-z]+)_(?P<pid>\d+)_[a-z0-9_]{8}"
"""Name of a scratch folder in the temp folder (:func:`scratch_dir`, :func:`scratch_prefix`)."""


def scratch_prefix(topic: str) -> str:
    """``mkdtemp`` prefix of a scratch folder of this process: ``r2s_<topic>_<pid>_`` (``topic``: lowercase letters)."""
    if not re.fullmatch(r"[a-z]+", topic):
        raise ValueError(f"scratch topic {topic!r}: lowercase letters only")
    return f"r2s_{topic}_{os.getpid()}_"


def sweep_dead_scratch() -> list[str]:
    """Remove the scratch folders that killed processes left in the temp folder. Returns the names removed."""
    return sweep_dead_temps(Path(tempfile.gettempdir()), SCRATCH_PATTERN)


@contextlib.contextmanager
def scratch_dir(topic: str) -> Iterator[Path]:
    """A temp folder ``r2s_<topic>_<pid>_<random>``, removed on exit; a run killed inside it leaves a name that the
    next scratch folder (or the next ``real2sim`` command) removes."""
    sweep_dead_scratch()
    with tempfile.TemporaryDirectory(prefix=scratch_prefix(topic)) as tmp:
        yield Path(tmp)


__all__ = ["SCRATCH_PATTERN", "pid_alive", "scratch_dir", "scratch_prefix", "sweep_dead_scratch", "sweep_dead_temps",
           "sweep_matching", "sweep_temp_files", "temp_file_prefix"]
