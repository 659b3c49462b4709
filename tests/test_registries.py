"""Registries that installed packs extend: a lab's pack (tests/data/testpack) adds a robot, a scene and a segmenter."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACK = Path(__file__).resolve().parent / "data" / "testpack"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def installed_pack(tmp_path_factory):
    """``pip install`` the pack (into a target folder put on the path of the commands below, so that the shared
    venv of parallel test workers is left as it is)."""
    tmp = tmp_path_factory.mktemp("pack")
    src = tmp / "src"
    shutil.copytree(PACK, src)
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(tmp / "site"), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(tmp / "site"), "MUJOCO_GL": "egl", "COLUMNS": "200",
           "REAL2SIM_CACHE": str(tmp / "cache")}
    return tmp, env


def test_pack_robot_is_listed_and_loads(installed_pack):
    _, env = installed_pack
    out = subprocess.run([str(VENV_BIN / "real2sim"), "robots"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "testpack_arm" in out.stdout and "lab_arm" in out.stdout
    code = ("from real2sim.robots import get_robot; from real2sim.segmentation import BACKENDS; "
            "print(get_robot('lab_arm').name, 'testpack_threshold' in BACKENDS)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["testpack_arm", "True"], out.stderr


def test_pack_scene_runs_the_demo(installed_pack):
    tmp, env = installed_pack
    out_dir = tmp / "demo"
    out = subprocess.run([str(VENV_BIN / "real2sim"), "demo", "--scene", "testpack_mini", "--out", str(out_dir),
                          "--episodes", "1", "--workers", "1"], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = json.loads((out_dir / "reports" / "demo.json").read_text())
    assert set(report["pose_error_mm"]) == {"block"}  # the pack's scene, not the bundled one
    assert report["pose_error_mm"]["block"]["after"] < 3.0 < report["pose_error_mm"]["block"]["before"]
    scene = json.loads((out_dir / "scene.json").read_text())
    assert scene["robot"]["name"] == "testpack_arm"


def test_unknown_scene_suggests_close_names():
    from real2sim.core.errors import UnknownNameError
    from real2sim.scenes import list_scenes, scene_recipe

    assert "tabletop" in list_scenes()
    with pytest.raises(UnknownNameError, match="did you mean 'tabletop'"):
        scene_recipe("tabeltop")
