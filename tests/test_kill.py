"""kill -9 at random moments of ``build`` / ``export`` / ``eval``: the bundle still loads, checks clean and rebuilds
to the digest of an uninterrupted build, no temp folder survives the next run, nothing outside the bundle is written,
and no CoACD worker outlives its killed parent."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from real2sim.collision.decomposition import run_coacd
from real2sim.collision.types import CollisionConfig
from real2sim.core.bundle import Bundle, bundle_digest
from real2sim.pipeline.check import check_bundle
from real2sim.pipeline.recipe import builtin_recipe, bundle_from_recipe

ROOT = Path(__file__).resolve().parents[1]
KILLS = 10


def _env(tmp_path: Path) -> dict:
    """HOME, TMPDIR and the collision cache inside ``tmp_path``: every write a command makes lands where we look."""
    base = tmp_path / "env"
    dirs = {k: base / k.lower() for k in ("HOME", "TMPDIR", "REAL2SIM_CACHE")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "REAL2SIM"))}
    env.update({k: str(v) for k, v in dirs.items()})
    env.update(PYTHONPATH=str(ROOT), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"), XDG_CACHE_HOME=str(dirs["HOME"] / ".cache"))
    return env


def _commands(d: Path) -> dict[str, list[str]]:
    return {"build": ["build", str(d), "--method", "primitive", "--force"],
            "export": ["export", str(d), "--force"],
            "eval": ["eval", str(d), "--policy", "scripted", "--episodes", "2", "--obs-mode", "state",
                     "--out", str(d / "results")]}


def _run(args, env, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "real2sim", *args], env=env, capture_output=True, text=True, cwd=env["HOME"])
    if check:
        assert proc.returncode == 0, f"real2sim {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def _listing(folder: Path, skip: set[str]) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` (not under ``skip``) with its size and mtime."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if rel.split("/")[0] in skip:
            continue
        st = p.lstat()
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def _leftovers(d: Path) -> list[str]:
    """Temp files and folders an interrupted run may leave (dot-names, ``*.tmp``) anywhere in the bundle."""
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*")
                  if p.name.startswith(".") or p.name.endswith(".tmp"))


def _ready(d: Path) -> list[str]:
    """The commands whose inputs are there: export after a finished build, eval after a finished export."""
    stages = Bundle.load(d).manifest.stages
    done = {n for n, r in stages.items() if r.status == "done"}
    return ["build"] + (["export"] if {"collision", "inertial"} <= done else []) + (["eval"] if "export" in done else [])


def _digest(d: Path) -> dict[str, str]:
    return bundle_digest(d, exclude_dirs=("results",))  # exports included: they are byte-reproducible


def test_kill9_at_random_moments_leaves_a_bundle_that_loads_checks_and_rebuilds(tmp_path):
    env = _env(tmp_path)
    work = tmp_path / "work"
    ref, scene = work / "ref", work / "scene"
    bundle_from_recipe(builtin_recipe("tabletop"), ref)
    shutil.copytree(ref, scene)

    # The uninterrupted run: its digest is the truth, its durations set the kill moments.
    took = {}
    for name, args in _commands(ref).items():
        t0 = time.perf_counter()
        _run(args, env)
        took[name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _run(["--version"], env)
    start = time.perf_counter() - t0  # interpreter start: a kill before it ends tests nothing
    want = _digest(ref)
    shutil.rmtree(ref / "results")

    outside_before = _listing(tmp_path, skip={"work", "env"}) | _listing(work, skip={"scene", "ref"})
    rng = random.Random(16)
    kills, attempts, events = 0, 0, []
    while kills < KILLS and attempts < 3 * KILLS:
        attempts += 1
        name = rng.choice(_ready(scene))
        delay = start + rng.uniform(0.0, 1.0) * max(took[name] - start, 0.1)
        proc = subprocess.Popen([sys.executable, "-m", "real2sim", *_commands(scene)[name]], env=env, cwd=env["HOME"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        rc, err = proc.wait(), proc.stderr.read()
        proc.stderr.close()
        events.append(f"{name}@{delay:.2f}s:{'killed' if rc == -signal.SIGKILL else rc}")
        if rc == -signal.SIGKILL:
            kills += 1
        else:
            assert rc == 0, (err, events)
            took[name] = start + 0.8 * (took[name] - start)  # the machine is faster now: kill earlier
        Bundle.load(scene)  # never torn
        errors = [f for f in check_bundle(scene) if f.level == "error"]
        assert not errors, f"after {events[-1]}: {[str(e) for e in errors]} ({events})"
    assert kills >= KILLS, f"only {kills} kills landed in {attempts} attempts: {events}"

    # The next run finishes, sweeps what the kills left, and gives the uninterrupted build's bytes.
    _run(_commands(scene)["build"], env)
    _run(_commands(scene)["export"], env)
    proc = _run(["check", str(scene)], env)
    assert "0 error(s)" in proc.stdout, proc.stdout
    assert _leftovers(scene) == [], events
    got = _digest(scene)
    assert sorted(got) == sorted(want), (set(got) ^ set(want), events)
    assert {k for k in got if got[k] != want[k]} == set(), events
    _run(_commands(scene)["eval"], env)  # resumes the killed evaluations' records and completes them
    lines = (scene / "results" / "episodes.jsonl").read_text().splitlines()
    assert sorted({json.loads(x)["seed"] for x in lines}) == [0, 1], events
    assert not [p for p in (scene / "results").iterdir() if p.name != "episodes.jsonl" and p.name != "sim.csv"]

    # Nothing outside the bundle: the work folder and tmp_path hold what they held, the temp folder is empty.
    assert _listing(tmp_path, skip={"work", "env"}) | _listing(work, skip={"scene", "ref"}) == outside_before
    assert list(Path(env["TMPDIR"]).iterdir()) == [], events


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads processes from /proc (Linux)")
def test_coacd_workers_die_with_a_killed_parent_and_their_folders_go_at_the_next_run(tmp_path):
    pytest.importorskip("coacd")

    env = _env(tmp_path)
    bundle = bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene")
    mesh = bundle.path(bundle.object("mug").visual.mesh)  # concave: CoACD runs for seconds at this threshold
    proc = subprocess.Popen([sys.executable, "-m", "real2sim", "collide", str(mesh), "--out", str(tmp_path / "out"),
                             "--method", "coacd", "--threshold", "0.02", "--workers", "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    workers, t0 = [], time.monotonic()
    while not workers and time.monotonic() - t0 < 60 and proc.poll() is None:
        time.sleep(0.05)
        workers = _children(proc.pid)
    assert workers, f"no CoACD worker started: {proc.stderr.read()[-2000:]}"
    time.sleep(0.3)  # let it get into the decomposition
    proc.kill()
    proc.wait()
    proc.stderr.close()
    t0 = time.monotonic()
    while any(_alive(w) for w in workers) and time.monotonic() - t0 < 5:
        time.sleep(0.05)
    assert not [w for w in workers if _alive(w)], "a CoACD worker outlived its killed parent by 5 s"
    left = [p.name for p in Path(env["TMPDIR"]).iterdir()]
    assert left and all(n.startswith(f"r2s_coacd_{proc.pid}_") for n in left), left

    # the next CoACD run (this process, same temp folder) removes the dead run's folder and keeps nothing of its own
    import trimesh

    old = tempfile.tempdir
    tempfile.tempdir = env["TMPDIR"]
    try:
        hulls = run_coacd(trimesh.creation.box([0.05, 0.05, 0.05]), CollisionConfig(method="coacd", threshold=0.1))
    finally:
        tempfile.tempdir = old
    assert hulls
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_a_save_killed_mid_write_keeps_the_old_manifest_and_the_next_save_removes_its_temp_file(tmp_path):
    """A kill inside the write (here held in fsync, where a big file spends its time) leaves the old scene.json and a
    temp file named by the dead writer; the next save removes it."""
    bundle = bundle_from_recipe(builtin_recipe("tabletop"), tmp_path / "scene")
    before = (bundle.root / "scene.json").read_bytes()
    code = ("import os, sys, time\nfrom real2sim.core.bundle import Bundle\nb = Bundle.load(sys.argv[1])\n"
            "b.manifest.name = 'renamed'\nos.fsync = lambda fd: (print('writing', flush=True), time.sleep(60))\n"
            "b.save()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(bundle.root)], env=_env(tmp_path), stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.kill()
    proc.wait()
    proc.stdout.close()
    assert (bundle.root / "scene.json").read_bytes() == before
    assert [p.name for p in bundle.root.iterdir() if p.name.startswith(".scene.json.")]  # the dead writer's temp
    again = Bundle.load(bundle.root)
    again.save()
    assert sorted(p.name for p in bundle.root.iterdir() if p.is_file()) == ["scene.json"]
