"""The floor plan: one installed namespace, imports in one direction, engine names in one place, one stage graph."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from real2sim.core.errors import UnknownNameError
from real2sim.core.stages import GRAPH, STAGES, downstream, mark_changed, readers_of, stage_decl
from real2sim.engines import engine_for, engine_names, get_engine, simulator_names
from real2sim.pipeline import BUILD_STEPS

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def test_import_linter_contract_is_kept():
    exe = VENV_BIN / "lint-imports"
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install 'real2sim[test]')")
    out = subprocess.run([str(exe)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def test_the_distribution_installs_only_real2sim(tmp_path):
    """A wheel of the project holds one top-level package; no generic names (capture, export, ...) leak out."""
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "tests", "demo_out", "build", "*.egg-info",
                                                             "__pycache__", "test-artifacts"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("real2sim-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"real2sim"}, tops
    names = zipfile.ZipFile(wheel).namelist()
    assert "real2sim/scenes/tabletop/recipe.json" in names  # package data travels with it


def test_the_installed_distribution_names_one_top_level_package():
    """What ``pip show -f real2sim`` reports for this (editable) install: one top-level name."""
    from importlib import metadata

    top = metadata.distribution("real2sim").read_text("top_level.txt")
    if top is None:
        pytest.skip("this install carries no top_level.txt")
    assert top.split() == ["real2sim"]


# Camera-file conventions are named after the frames they describe ("sapien": +X forward, +Y left, +Z up); they are
# input formats, not engines, and may be spelled where camera files are read.
_CONVENTION = re.compile(r"convention|CONVENTIONS|R_OPENCV_FROM|conv!r|axes|\+X forward")
_ENGINE_NAME = re.compile(r"""["'](mjcf|mujoco|sapien|usd)["']""")


def test_engine_names_appear_only_in_the_engine_registry():
    offenders = []
    for path in sorted((REPO / "real2sim").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("real2sim/engines/"):
            continue  # the registry and each engine's own writer/runtime
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _ENGINE_NAME.search(line) and not _CONVENTION.search(line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "engine names outside real2sim/engines/:\n" + "\n".join(offenders)


def test_engine_registry_resolves_names_aliases_and_capabilities():
    assert get_engine("mujoco") is get_engine("mjcf")  # simulator name and alias of one engine
    assert set(simulator_names()) <= {get_engine(n).simulator for n in engine_names("physics")}
    assert "physics" in engine_for("physics").capabilities
    with pytest.raises(UnknownNameError, match="did you mean 'sapien'"):
        get_engine("sapein")


def test_stage_graph_is_declared_once_and_build_walks_it_in_order():
    assert len(STAGES) == len(GRAPH)
    assert [s.name for s in BUILD_STEPS] == [s.name for s in GRAPH if s.name in {b.name for b in BUILD_STEPS}]
    # every stage the code runs is declared: run_stage(bundle, "<name>", ...) or a module's STAGE constant
    used = set()
    for path in (REPO / "real2sim").rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r'run_stage\(bundle, "(\w+)"', text))
        used |= set(re.findall(r'^(?:\w+_)?STAGE = "(\w+)"', text, flags=re.M))
    assert used and used <= set(STAGES), used - set(STAGES)
    with pytest.raises(UnknownNameError, match="did you mean 'plate'"):
        stage_decl("plates")


def test_staleness_follows_the_declared_reads_and_writes(recipe_bundle):
    # the robot loop: a new robot mask re-makes the plate, a new plate re-fits the robot
    assert "plate" in downstream("robot_fit", transitive=False)
    assert "robot_fit" in downstream("plate", transitive=False)
    assert "robot_fit" not in downstream("robot_fit")
    # a camera edit outdates everything computed from the camera, and what depends on that
    assert {"table", "alignment", "texture", "robot_appearance", "export"} <= set(readers_of(["camera"]))
    for name in ("alignment", "collision", "export"):
        recipe_bundle.stage(name).status = "done"
    went_stale = mark_changed(recipe_bundle, "camera")
    assert set(went_stale) == {"alignment", "export"}  # collision does not read the camera
    assert recipe_bundle.manifest.stages["collision"].status == "done"
    with pytest.raises(UnknownNameError):
        mark_changed(recipe_bundle, "cameras")
