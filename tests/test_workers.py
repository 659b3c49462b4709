"""Warm worker pools: envs kept across episodes, tasks and policies; real worker crashes and hangs retried once, then
reported while the run goes on; the same results as the in-process runner."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("gymnasium")

from envbundle import make_env_bundle  # noqa: E402


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_env_bundle(tmp_path_factory.mktemp("workers"), engines=("mjcf",))


def _eval(bundle, out, policy, task="lift_cube", episodes=4, **kw):
    from real2sim.evaluation.envs.runner import evaluate

    kw.setdefault("obs_mode", "state")
    return evaluate(bundle.root, task, policy, episodes, out_dir=out, **kw)


def _strip(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in ("seconds", "cpu_seconds", "worker_pid", "retried_after")}


def test_one_pool_serves_every_policy_and_task_with_one_env_per_worker_and_same_results(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import clear_cache, read_results
    from real2sim.evaluation.envs.workers import WorkerPool

    with WorkerPool(2) as pool:
        runs = [_eval(bundle, tmp_path / "pool", pol, task, pool=pool)
                for task in ("lift_cube", "push_cube") for pol in ("scripted", "random")]
        pids = {p.pid for p, _ in (s.handle for s in pool.slots)}
    assert pool.env_builds == 2  # one env per worker, reset across 16 episodes of 2 tasks and 2 policies
    recs = read_results(tmp_path / "pool" / "episodes.jsonl")
    assert len(recs) == 16 and {r["worker_pid"] for r in recs} <= pids
    assert runs[0].startup_s > 0 and all(r.lost == [] for r in runs)
    # a warm env switched between tasks gives what a fresh one gives (per task, in this process)
    clear_cache()
    for task in ("push_cube", "lift_cube"):
        for pol in ("scripted", "random"):
            _eval(bundle, tmp_path / "fresh", pol, task)
            clear_cache()
    fresh = {(r["policy"], r["task"], r["seed"]): _strip(r) for r in read_results(tmp_path / "fresh" / "episodes.jsonl")}
    assert {(r["policy"], r["task"], r["seed"]): _strip(r) for r in recs} == fresh


def test_a_worker_killed_once_costs_one_retry_and_nothing_else(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import read_results

    marker = tmp_path / "crashed_once"
    s = _eval(bundle, tmp_path, f"faulty_policies.Crash:seed=1,once={json.dumps(str(marker))}", workers=2)
    assert marker.exists() and s.lost == [] and (s.ran, s.trials) == (4, 4)
    recs = {r["seed"]: r for r in read_results(tmp_path / "episodes.jsonl")}
    assert "exited with code -9" in recs[1]["retried_after"]
    assert all("retried_after" not in recs[k] for k in (0, 2, 3))
    assert not (tmp_path / "errors.jsonl").exists()


def test_a_worker_that_dies_every_time_is_reported_and_the_run_goes_on(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import read_results

    s = _eval(bundle, tmp_path, "faulty_policies.Crash:seed=2", workers=2)
    assert [seed for seed, _ in s.lost] == [2] and "exited with code -9" in s.lost[0][1]
    assert "retried" in s.lost[0][1]
    assert sorted(r["seed"] for r in read_results(tmp_path / "episodes.jsonl")) == [0, 1, 3]
    assert s.trials == 3  # a lost episode is not a policy failure: it is not in sim.csv's trials
    errors = read_results(tmp_path / "errors.jsonl")
    assert [(e["seed"], e["policy"]) for e in errors] == [(2, "faulty_policies.Crash:seed=2")]
    assert "policy,task,successes,trials" in (tmp_path / "sim.csv").read_text()


def test_a_hung_worker_is_killed_at_its_deadline_retried_then_reported(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import read_results

    s = _eval(bundle, tmp_path, "faulty_policies.Hang:seed=0", episodes=3, workers=2, episode_timeout_s=2.0,
              hang_grace_s=1.0)
    assert [seed for seed, _ in s.lost] == [0] and "hung; worker killed" in s.lost[0][1]
    assert sorted(r["seed"] for r in read_results(tmp_path / "episodes.jsonl")) == [1, 2]


def test_errors_of_the_episode_itself_still_stop_the_run(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import PolicyOutputError

    with pytest.raises(PolicyOutputError, match="NaN or inf"):
        _eval(bundle, tmp_path, "random:scale=NaN", workers=2)


def test_unimportable_policy_class_names_the_fix(bundle, tmp_path):
    from real2sim.evaluation.policies import PolicySpecError

    with pytest.raises(PolicySpecError, match="PYTHONPATH"):
        _eval(bundle, tmp_path, "no_such_pack.Policy", workers=2)


def test_one_eval_command_starts_one_pool_for_all_its_policies(bundle, tmp_path, capsys):
    import argparse
    import os

    from real2sim.apps.cli.evaluate import add_parsers
    from real2sim.evaluation.envs.runner import read_results

    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers())
    args = ap.parse_args(["eval", str(bundle.root), "--policy", "scripted", "--policy", "random", "--episodes", "3",
                          "--workers", "2", "--obs-mode", "state", "--out", str(tmp_path)])
    assert args.fn(args) == 0
    pids = {r["worker_pid"] for r in read_results(tmp_path / "episodes.jsonl")}
    assert len(pids) <= 2 and os.getpid() not in pids  # a pool per policy would have used up to 4 processes
    out = capsys.readouterr().out
    assert out.count("start-up") == 2 and "episodes/s" in out


def test_ray_workers_are_the_same_episode_workers_and_a_killed_actor_costs_one_retry(bundle, tmp_path):
    ray = pytest.importorskip("ray")
    import os
    from pathlib import Path

    from real2sim.evaluation.envs.runner import read_results
    from real2sim.evaluation.envs.workers import RayPool
    from real2sim.evaluation.record import open_dataset

    # Ray workers get their import path from the runtime env (as on a cluster), not from this process's sys.path
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"Ray cannot start here: {exc}")
    marker = tmp_path / "crashed_once"
    try:
        with RayPool(2) as pool:
            s = _eval(bundle, tmp_path, f"faulty_policies.Crash:seed=1,once={json.dumps(str(marker))}", pool=pool)
            again = _eval(bundle, tmp_path, "random", pool=pool)
            assert pool.env_builds == 3  # 2 actors, 1 restarted after the crash; the second policy reused them
            ds = open_dataset("lerobot", tmp_path / "ds")  # actors stage episodes, this process moves them in
            try:
                recorded = _eval(bundle, tmp_path / "rec", "random", pool=pool, record=ds)
            finally:
                ds.close()
    finally:
        ray.shutdown()
    assert marker.exists() and s.lost == [] and s.trials == 4 and again.trials == 4
    recs = {r["seed"]: r for r in read_results(tmp_path / "episodes.jsonl") if r["policy"].startswith("faulty")}
    assert "Ray actor died" in recs[1]["retried_after"]
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert recorded.trials == 4 and info["total_episodes"] == 4 and info["total_frames"] > 4
