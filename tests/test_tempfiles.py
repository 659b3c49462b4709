"""Scratch folders name their process, so what a killed run left in the temp folder is removed by the next one."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from real2sim.apps.cli import main
from real2sim.core.tempfiles import scratch_dir


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _leftovers(root, dead: int) -> dict[str, bool]:
    """A killed run's scratch folder (with a file in it), a live run's, and someone else's folder."""
    made = {f"r2s_sapien_{dead}_abcd_123": False, f"r2s_texture_{os.getpid()}_zz9_zz9z": True, "tmpabcd1234": True}
    for name in made:
        (root / name).mkdir()
        (root / name / "m.obj").write_text("v 0 0 0\n")
    return made


def test_a_scratch_folder_removes_what_a_killed_run_left_and_nothing_else(temp_root):
    made = _leftovers(temp_root, _dead_pid())
    with scratch_dir("coacd") as d:
        assert d.parent == temp_root and d.name.startswith(f"r2s_coacd_{os.getpid()}_")
        (d / "in.npz").write_bytes(b"x")
        assert {p.name for p in temp_root.iterdir()} == {n for n, kept in made.items() if kept} | {d.name}
    assert not d.exists()


def test_any_command_removes_what_a_killed_run_left(temp_root):
    made = _leftovers(temp_root, _dead_pid())
    assert main(["check", str(temp_root / "no_such_bundle")]) == 2
    assert {p.name for p in temp_root.iterdir()} == {n for n, kept in made.items() if kept}


def test_a_scratch_topic_is_letters_only():
    with pytest.raises(ValueError, match="lowercase letters"), scratch_dir("robot-check"):
        pass
