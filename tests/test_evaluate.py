"""Policies and the episode runner on real engines: oracle vs random, resume, remote, pool, Ray, cross-engine metrics."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from envbundle import make_env_bundle  # noqa: E402

N = 6  # episodes per policy in the ranking checks


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_env_bundle(tmp_path_factory.mktemp("eval"))


@pytest.fixture(scope="module", autouse=True)
def _close_cached_envs():
    yield
    from real2sim.evaluation.envs.runner import clear_cache

    clear_cache()


def _eval(bundle, out, policy, episodes=N, **kw):
    from real2sim.evaluation.envs.runner import evaluate

    kw.setdefault("obs_mode", "state")
    return evaluate(bundle.root, "lift_cube", policy, episodes, out_dir=out, **kw)


def test_oracle_beats_noisy_beats_random_on_lift(bundle, tmp_path):
    rates = {p: _eval(bundle, tmp_path, p).rate for p in ("scripted", "scripted:noise=0.04", "random")}
    assert rates["scripted"] >= 5 / 6
    assert rates["random"] == 0.0
    assert rates["scripted"] > rates["scripted:noise=0.04"] >= rates["random"]
    rows = (tmp_path / "sim.csv").read_text().splitlines()
    assert rows[0] == "policy,task,successes,trials" and len(rows) == 4


def test_push_oracle_succeeds_more_than_random(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import evaluate

    s = evaluate(bundle.root, "push_cube", "scripted", 4, out_dir=tmp_path, obs_mode="state")
    r = evaluate(bundle.root, "push_cube", "random", 4, out_dir=tmp_path, obs_mode="state")
    assert s.successes >= 2 and r.successes == 0


def test_resume_skips_done_seeds_and_ignores_a_torn_line(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import RESULTS, read_results

    first = _eval(bundle, tmp_path, "scripted", episodes=2)
    assert (first.ran, first.skipped) == (2, 0)
    with (tmp_path / RESULTS).open("a") as f:
        f.write('{"policy": "scripted", "task": "lift_cu')  # a run killed mid-write
    seen = []
    second = _eval(bundle, tmp_path, "scripted", episodes=4, progress=lambda d, t, r: seen.append((d, t, r["seed"])))
    assert (second.ran, second.skipped, second.trials) == (2, 2, 4)
    assert seen == [(3, 4, 2), (4, 4, 3)]
    recs = read_results(tmp_path / RESULTS)
    assert sorted(r["seed"] for r in recs) == [0, 1, 2, 3]
    assert {"success", "steps", "seed", "init", "seconds"} <= set(recs[0])


def test_same_seed_same_result_record(bundle, tmp_path):
    a = _eval(bundle, tmp_path / "a", "scripted:noise=0.04", episodes=3)
    b = _eval(bundle, tmp_path / "b", "scripted:noise=0.04", episodes=3)
    from real2sim.evaluation.envs.runner import read_results

    strip = lambda rs: sorted((r["seed"], r["success"], r["steps"], json.dumps(r["init"])) for r in rs)  # noqa: E731
    assert strip(read_results(a.results_path)) == strip(read_results(b.results_path))


def test_unknown_policy_suggests_close_names(bundle, tmp_path):
    from real2sim import UnknownNameError

    with pytest.raises(UnknownNameError, match="scripted"):
        _eval(bundle, tmp_path, "scriptd")


def test_remote_policy_through_a_server(bundle, tmp_path):
    from real2sim.evaluation.policies import PolicyServer

    calls = []

    def act(obs, instruction):
        calls.append(instruction)
        assert obs["qpos"].shape == (8,)
        return np.tile([0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 1.0], (4, 1))  # a 4-step chunk

    with PolicyServer(act, name="up") as srv:
        s = _eval(bundle, tmp_path, srv.url, episodes=2)
    assert s.trials == 2 and s.successes == 0
    assert calls and calls[0] == "pick up the cube"
    assert len(calls) == 2 * 10  # 40 steps per episode in chunks of 4


def test_unreachable_server_fails_clearly_and_writes_nothing(bundle, tmp_path):
    import socket

    from real2sim.evaluation.policies import RemotePolicyError
    from real2sim.evaluation.policies.base import make_policy

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(RemotePolicyError, match=str(port)):
        _eval(bundle, tmp_path, url, episodes=2)
    assert not (tmp_path / "episodes.jsonl").exists() or not (tmp_path / "episodes.jsonl").read_text().strip()
    assert make_policy(url).name == url


def test_replay_of_recorded_actions(bundle, tmp_path):
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.policies.base import make_policy

    env = Real2SimEnv(bundle.root, task="lift_cube", obs_mode="state", privileged=True, render_mode=None)
    pol = make_policy("scripted")
    obs, info = env.reset(seed=0)
    pol.reset(info["instruction"], info, 0)
    actions, done = [], False
    while not done:
        a = pol.act(obs)[0]
        actions.append(a)
        obs, _, term, trunc, info = env.step(a)
        done = term or trunc
    assert info["success"]
    env.close()
    np.save(tmp_path / "actions.npy", np.asarray(actions))
    s = _eval(bundle, tmp_path / "out", f"replay:path={tmp_path / 'actions.npy'}", episodes=1)
    assert s.successes == 1  # open loop, same seed, same engine: the same lift


def test_local_pool_two_workers(bundle, tmp_path):
    s = _eval(bundle, tmp_path, "scripted", episodes=2, workers=2)
    from real2sim.evaluation.envs.runner import read_results

    recs = read_results(s.results_path)
    assert s.trials == 2 and s.successes >= 1
    # the episodes ran in the pool's processes, not in this one (a pool that runs them in-process passes the rest)
    import os

    assert all(r["worker_pid"] for r in recs) and os.getpid() not in {r["worker_pid"] for r in recs}, recs


def test_ray_path(bundle, tmp_path):
    ray = pytest.importorskip("ray")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"Ray cannot start here: {exc}")
    try:
        s = _eval(bundle, tmp_path, "scripted", episodes=2, workers=2, ray=True)
        assert s.trials == 2 and s.successes >= 1
    finally:
        ray.shutdown()


def test_videos_and_composited_obs(bundle, tmp_path):
    s = _eval(bundle, tmp_path, "scripted", episodes=1, obs_mode="composited", obs_size=(80, 60), videos=True)
    from real2sim.evaluation.envs.runner import read_results

    rec = read_results(s.results_path)[0]
    assert rec["obs_mode"] == "composited"
    from pathlib import Path

    assert Path(rec["video"]).is_file() and Path(rec["video"]).stat().st_size > 1000


def test_cross_engine_ranking_feeds_metrics(bundle, tmp_path):
    from real2sim.evaluation.metrics import compare
    from real2sim.evaluation.metrics import read_results as read_csv

    policies = ("scripted", "scripted:noise=0.04", "random")
    for backend in ("mujoco", "sapien"):
        for p in policies:
            _eval(bundle, tmp_path / backend, p, backend=backend)
    mj = read_csv(tmp_path / "mujoco" / "sim.csv")
    sp = read_csv(tmp_path / "sapien" / "sim.csv")
    (m,) = compare(mj, sp, n_boot=200, real_name="mujoco", sim_name="sapien")
    assert set(m.policies) == set(policies)
    assert m.mmrv <= 0.2  # oracle and random rank the same in both engines
    order = {p: r for p, r in zip(m.policies, m.sim)}
    assert order["scripted"] > order["random"]


def test_cli_eval(bundle, tmp_path):
    import argparse

    from real2sim.apps.cli.evaluate import add_parsers

    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers())
    args = ap.parse_args(["eval", str(bundle.root), "--policy", "scripted", "--episodes", "2", "--task", "lift_cube",
                          "--obs-mode", "state", "--out", str(tmp_path)])
    assert args.fn(args) == 0
    assert "scripted,lift_cube" in (tmp_path / "sim.csv").read_text()
    args = ap.parse_args(["eval", str(bundle.root), "--policy", "random", "--ray"])
    assert args.ray == "local"


def test_cli_eval_with_variants_records_them_and_resumes_per_variant_set(bundle, tmp_path, capsys):
    import argparse

    from real2sim.apps.cli.evaluate import add_parsers
    from real2sim.evaluation.envs.runner import RESULTS, read_results

    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers())
    base = ["eval", str(bundle.root), "--policy", "scripted", "--episodes", "2", "--task", "lift_cube",
            "--obs-size", "80x60", "--out", str(tmp_path)]
    args = ap.parse_args(base + ["--variants", '{"lighting": [0.5, 1.5], "robot_tint": 0.3}'])
    assert args.fn(args) == 0
    recs = read_results(tmp_path / RESULTS)
    assert len(recs) == 2 and all({"light_scale", "robot_tint"} <= set(r["variant"]) for r in recs)
    assert recs[0]["variant"]["light_scale"] != recs[1]["variant"]["light_scale"]  # drawn per episode
    again = ap.parse_args(base[:-1] + [str(tmp_path / "again"), "--variants", '{"lighting": [0.5, 1.5], "robot_tint": 0.3}'])
    assert again.fn(again) == 0  # seeded: another run draws the same variants
    assert [r["variant"] for r in read_results(tmp_path / "again" / RESULTS)] == [r["variant"] for r in recs]
    args = ap.parse_args(base)  # the same seeds without variants are another run, not "already done"
    assert args.fn(args) == 0
    assert len(read_results(tmp_path / RESULTS)) == 4
    from real2sim.core.errors import Real2SimError

    with pytest.raises(Real2SimError, match="JSON object"):
        args = ap.parse_args(base + ["--variants", "lighting=0.5"])
        args.fn(args)


def test_empty_action_chunk_from_a_real_server_ends_the_run_with_a_clear_error(bundle, tmp_path):
    """A server answering (0, 7) chunks once spun the episode loop forever (no step, so no time limit)."""
    from hostile import HostileServer

    from real2sim.evaluation.policies import RemotePolicyError
    from real2sim.evaluation.policies.remote import pack

    with HostileServer(pack({"actions": np.zeros((0, 7))})) as srv:
        with pytest.raises(RemotePolicyError, match=r"field 'actions' has shape \(0, 7\)"):
            _eval(bundle, tmp_path, srv.url, episodes=1)
    assert srv.calls == 1


class _Odd:
    privileged = False

    def __init__(self, reply, delay_s=0.0):
        self.name, self.reply, self.delay_s = "odd", reply, delay_s

    def reset(self, *a, **k):
        pass

    def act(self, obs):
        import time

        time.sleep(self.delay_s)
        return self.reply


@pytest.mark.parametrize("reply,message", [(np.zeros((0, 7)), r"shape \(0, 7\)"), ([], r"shape \(1, 0\)|shape \(0,\)"),
                                           (np.full(7, np.inf), "NaN or inf"), ("up", "not numbers")])
def test_a_local_policy_returning_no_action_is_refused_not_looped(bundle, tmp_path, reply, message):
    from real2sim.evaluation.envs.runner import EvalConfig, PolicyOutputError, run_episode

    cfg = EvalConfig(str(bundle.root), "odd", "lift_cube", "mujoco", "state", out_dir=str(tmp_path))
    with pytest.raises(PolicyOutputError, match=message):
        run_episode(cfg, 0, policy=_Odd(reply))


def test_a_slow_policy_is_stopped_by_the_episode_wall_time_limit(bundle, tmp_path):
    from real2sim.evaluation.envs.runner import EvalConfig, run_episode

    cfg = EvalConfig(str(bundle.root), "odd", "lift_cube", "mujoco", "state", out_dir=str(tmp_path),
                     episode_timeout_s=0.3)
    rec = run_episode(cfg, 0, policy=_Odd(np.zeros((1, 7)), delay_s=0.1))
    assert rec["timed_out"] is True and rec["success"] is False
    assert 1 <= rec["steps"] < 40  # 40 = the task's step limit; the wall-time limit came first
