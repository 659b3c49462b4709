"""docs/journey.md agrees with what its commands do (real2sim/demos/journey.py runs them as written).

- Always (no data, instant): every generated block of the page is the script's, command for command, and the
  checker fails naming the line when a command or a number on a copy of the page is changed.
- The fast part (../shared/data; ~1-2 min on 2 cores): camera file, table mesh, bundle, both tasks, masks and the
  table gate, run through the real ``real2sim`` entry point by ``python -m real2sim.demos.journey --check``.
- Everything else (build, robot appearance, check, export, both tasks x three policies x two engines, metrics, the
  all-at-once function, the clip capture and ``real2sim demo``; 10-20 min on 2 cores) only with
  ``REAL2SIM_JOURNEY_FULL=1``: too long for every CI run, and ``tests/test_journey_cli.py``,
  ``tests/test_bridge_real.py`` and ``tests/test_capture_scene.py`` already run those steps each time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from real2sim.demos import journey

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "journey.md"


def _run_check(tmp_path, data, parts):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    args = [sys.executable, "-m", "real2sim.demos.journey", "--check", "--data", str(data), "--out",
            str(tmp_path / "journey"), "--json", str(tmp_path / "values.json")]
    for p in parts:
        args += ["--part", p]
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    assert "agrees with the run" in proc.stderr
    return json.loads((tmp_path / "values.json").read_text())


def test_every_generated_block_of_the_page_is_the_scripts():
    """The page's sections, with no number measured: commands and text match line for line, numbers only in form."""
    names = [s.name for s in journey.parse_doc(DOC.read_text())]
    assert names == list(journey.SECTIONS)  # each once, in the order the script runs them
    assert journey.check_doc(DOC, {}) == []
    # every command the script runs is on the page
    text = DOC.read_text()
    for block in journey.BLOCKS:
        assert block.text() in text, block.name


def test_a_changed_command_or_a_drifted_number_is_named_with_its_line(tmp_path, caplog):
    lines = DOC.read_text().split("\n")
    sec = {s.name: s for s in journey.parse_doc(DOC.read_text())}
    # what the page quotes now is what a run measured: feed those numbers back as the run's
    _, quoted = journey.compare_section(sec["masks-numbers"], {})
    values = {k: (int(v) if v.isdigit() else float(v)) for k, v in quoted.items()}
    assert journey.check_doc(DOC, values) == []
    masks = sec["masks"]
    i = next(i for i, ln in enumerate(masks.lines) if "--entity yellow_cube" in ln)
    lines[masks.start + i] = lines[masks.start + i].replace("464,195", "465,195")
    doc = tmp_path / "journey.md"
    doc.write_text("\n".join(lines))
    values["mask.iou.yellow_cube"] += 0.05  # the run measures 0.05 more than the page says
    (tmp_path / "values.json").write_text(json.dumps(values))
    assert journey.main(["--values", str(tmp_path / "values.json"), "--doc", str(doc), "--check"]) == 1
    log = caplog.text
    assert f"journey.md:{masks.start + i + 1}: stale line in section masks" in log and "465,195" in log
    assert "mask.iou.yellow_cube is quoted as" in log and "tolerance 0.01" in log
    values["mask.iou.yellow_cube"] -= 0.045  # within the tolerance: not a drift
    values.pop("mask.px.robot")
    problems = journey.check_doc(doc, values)
    assert len(problems) == 1 and "465,195" in problems[0], problems
    # --write-doc puts the run's numbers in (and keeps the page's where the run did not measure one)
    doc.write_text(DOC.read_text())
    values["mask.px.green_cube"] += 7
    journey.write_doc(doc, values)
    assert journey.check_doc(doc, values) == [] and journey.check_doc(DOC, values) != []
    new = {s.name: s for s in journey.parse_doc(doc.read_text())}["masks-numbers"]
    assert journey.compare_section(new, {})[1]["mask.px.robot"] == quoted["mask.px.robot"]


@pytest.mark.slow
def test_fast_part_of_the_journey_agrees_with_the_page(tmp_path, shared_data):
    """The commands of steps 1-4 as a person pastes them, and the numbers the page quotes for them."""
    values = _run_check(tmp_path, shared_data, ["fast"])
    assert values["table.refused_spread_mm"] > 10  # the gate refused it (exit 2) before --accept-poor applied it
    assert abs(values["table.height_mm"]) < 10


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("REAL2SIM_JOURNEY_FULL") != "1",
                    reason="the whole journey takes 10-20 min on 2 cores: set REAL2SIM_JOURNEY_FULL=1 to run it")
def test_whole_journey_agrees_with_the_page(tmp_path, shared_data):
    values = _run_check(tmp_path, shared_data, ["fast", "slow", "demo"])
    for e in journey.ENGINES:  # both tasks ran in both engines, six seeded episodes per policy
        for t in journey.TASKS:
            assert all(values[f"trials.{t}.{p}.{e}"] == 6 for p in journey.POLICIES)
