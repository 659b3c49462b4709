"""The command line, run as a user runs it (a subprocess)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from real2sim.pipeline.recipe import builtin_recipe


def run(*args, tmp_path, check=True):
    env = {**os.environ, "REAL2SIM_CACHE": str(tmp_path / "cache"), "MUJOCO_GL": "egl", "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "real2sim", *args], capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_demo_writes_three_exports_that_load_and_a_picture(tmp_path):
    out = tmp_path / "demo"
    proc = run("demo", "--out", str(out), tmp_path=tmp_path)
    assert "demo OK" in proc.stdout
    for rel in ("exports/mjcf/scene.xml", "exports/usd/scene.usda", "exports/sapien/scene.sapien.json",
                "reports/demo_mujoco_vs_sapien.png", "reports/collision.json", "reports/demo.json"):
        assert (out / rel).is_file(), rel
    report = json.loads((out / "reports" / "demo.json").read_text())
    assert max(report["drop_position_mm"].values()) < 5.0
    assert max(report["projection_px"].values()) < 0.5
    # the journey: misplaced objects are put back by alignment, and the engines rank policies alike
    assert all(v["after"] < 3.0 < v["before"] for v in report["pose_error_mm"].values()), report["pose_error_mm"]
    assert report["success"]["mujoco"]["scripted"] > report["success"]["mujoco"]["random"]
    assert report["mmrv"] is not None and report["mmrv"] <= 0.2
    for rel in ("metrics", "plate", "engines"):
        assert (out / report["pictures"][rel]).is_file()
    assert (out / "ground_truth" / "scene.json").is_file()
    from PIL import Image

    assert Image.open(out / "reports/demo_mujoco_vs_sapien.png").size == (1280, 480)
    assert any(report["stages_ran"].values()) and all(n > 0 for n in report["episodes_ran"].values()), report
    # second run: every build stage is unchanged and skipped, every episode resumed from disk (the records say so)
    again = run("demo", "--out", str(out), tmp_path=tmp_path)
    assert "demo OK" in again.stdout
    report2 = json.loads((out / "reports" / "demo.json").read_text())
    assert report2["stages_ran"] and not any(report2["stages_ran"].values()), report2["stages_ran"]
    assert set(report2["episodes_ran"]) == set(report["episodes_ran"])
    assert not any(report2["episodes_ran"].values()), report2["episodes_ran"]
    assert report2["success"] == report["success"]
    assert run("check", str(out), tmp_path=tmp_path).returncode == 0


def test_collide_one_mesh(tmp_path):
    mesh = builtin_recipe().parent / "assets" / "bracket" / "visual.obj"
    proc = run("collide", str(mesh), "--out", str(tmp_path / "hulls"), tmp_path=tmp_path)
    assert "hulls" in proc.stdout and "occupancy IoU" in proc.stdout
    assert len(list((tmp_path / "hulls").glob("hull_*.obj"))) >= 2
    assert (tmp_path / "hulls" / "quality.png").is_file()


def test_collide_names_a_bad_file(tmp_path):
    bad = tmp_path / "flat.obj"
    bad.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    proc = run("collide", str(bad), "--out", str(tmp_path / "o"), tmp_path=tmp_path, check=False)
    assert proc.returncode == 2
    assert "flat.obj" in proc.stderr


def test_build_then_export_from_the_command_line(tmp_path):
    from real2sim.pipeline.recipe import bundle_from_recipe

    b = bundle_from_recipe(builtin_recipe(), tmp_path / "scene")
    assert run("export", str(b.root), tmp_path=tmp_path, check=False).returncode == 2  # not built yet: says so
    run("build", str(b.root), tmp_path=tmp_path)
    proc = run("export", str(b.root), "--engine", "mjcf", "--engine", "usd", tmp_path=tmp_path)
    assert "scene.xml" in proc.stdout and "scene.usda" in proc.stdout
    assert not (Path(b.root) / "exports" / "sapien").exists()


def test_bad_bundle_gives_a_clear_error(tmp_path):
    proc = run("build", str(tmp_path / "missing"), tmp_path=tmp_path, check=False)
    assert proc.returncode == 2
    assert "not a directory" in proc.stderr and "error" in proc.stderr and not proc.stdout  # errors go to stderr


def test_add_object_to_a_bundle(tmp_path):
    from real2sim import Bundle
    from real2sim.pipeline.recipe import bundle_from_recipe

    b = bundle_from_recipe(builtin_recipe(), tmp_path / "scene")
    mesh = builtin_recipe().parent / "assets" / "cube" / "visual.obj"
    run("add-object", str(b.root), "cube2", "--mesh", str(mesh), "--density", "500", tmp_path=tmp_path)
    obj = Bundle.load(b.root).object("cube2")
    assert obj.pose.position[2] == pytest.approx(0.0225) and obj.density == 500  # resting on the table
    proc = run("add-object", str(b.root), "cube2", "--mesh", str(mesh), tmp_path=tmp_path, check=False)
    assert proc.returncode == 2 and "already in" in proc.stderr


def test_add_task_validates_and_records(tmp_path):
    from real2sim import Bundle
    from real2sim.pipeline.recipe import bundle_from_recipe

    b = bundle_from_recipe(builtin_recipe(), tmp_path / "scene")
    run("add-task", str(b.root), "lift_mug", "--instruction", "lift the mug",
        "--success", '{"type": "lifted", "object": "mug", "height": 0.05}', tmp_path=tmp_path)
    assert Bundle.load(b.root).manifest.tasks["lift_mug"].success["object"] == "mug"
    bad = run("add-task", str(b.root), "x", "--instruction", "x", "--success", '{"type": "lifted", "object": "mugg"}',
              tmp_path=tmp_path, check=False)
    assert bad.returncode == 2 and "did you mean 'mug'" in bad.stderr
    bad = run("add-task", str(b.root), "x", "--instruction", "x", "--success", '{"type": "lift"}', tmp_path=tmp_path, check=False)
    assert bad.returncode == 2 and "lifted" in bad.stderr
