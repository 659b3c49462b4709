"""SysID: recovers hidden gains from simulated trajectories; bad trajectory files are refused clearly."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pinocchio")

from real2sim.evaluation.sysid import (  # noqa: E402
    Episode,
    TrajectoryError,
    fit_gains,
    load_trajectories,
    simulate_episode,
)
from real2sim.robots import get_robot  # noqa: E402


def _episodes(robot, k, d, n=4, T=10, noise=0.0005, seed=0):
    r = get_robot(robot)
    rng = np.random.default_rng(seed)
    eps = []
    for _ in range(n):
        a = np.concatenate([rng.uniform(-0.03, 0.03, (T, 3)), rng.uniform(-0.1, 0.1, (T, 3)), np.ones((T, 1))], 1)
        ep = Episode(a, None, np.tile(r.default_qpos, (T + 1, 1)), np.arange(T + 1) / r.control_hz)
        P = simulate_episode(robot, k, d, ep)
        P[:, :3, 3] += rng.normal(0, noise, (T + 1, 3))
        ep.ee_poses = P
        eps.append(ep)
    return eps


def _save(path, eps, space="ee_delta", robot=None):
    arrays = {"action_space": np.array(space)}
    if robot:
        arrays["robot"] = np.array(robot)
    for i, e in enumerate(eps):
        arrays.update({f"actions_{i}": e.actions, f"ee_poses_{i}": e.ee_poses, f"qpos_{i}": e.qpos,
                       f"timestamps_{i}": e.timestamps})
    np.savez(path, **arrays)
    return path


def test_sysid_recovers_hidden_gains():
    """Panda, one (stiffness, damping) pair shared by the arm: hidden 0.8x / 0.4x the defaults, 0.5 mm noise."""
    robot = "panda"
    r = get_robot(robot)
    k, d = np.array(r.default_stiffness()), np.array(r.default_damping())
    kh, dh = k.copy(), d.copy()
    kh[: r.n_arm] *= 0.8
    dh[: r.n_arm] *= 0.4
    eps = _episodes(robot, kh, dh)
    held = _episodes(robot, kh, dh, n=1, seed=7)
    res = fit_gains(eps, robot, share="arm", rounds=3, iters_per_round=30, heldout=held, seed=0)
    kf, df = np.array(res.stiffness), np.array(res.damping)
    assert np.all(np.abs(kf[: r.n_arm] / kh[: r.n_arm] - 1) < 0.10), kf[: r.n_arm] / kh[: r.n_arm]
    assert np.all(np.abs(df[: r.n_arm] / dh[: r.n_arm] - 1) < 0.10), df[: r.n_arm] / dh[: r.n_arm]
    assert res.train_loss < res.initial_train_loss and res.heldout_loss is not None
    for e in eps + held:  # fitted gains reproduce the noise-free trajectories within 2 mm
        gap = np.linalg.norm(simulate_episode(robot, kf, df, e)[:, :3, 3] - simulate_episode(robot, kh, dh, e)[:, :3, 3],
                             axis=1).max()
        assert gap < 0.002, gap


def test_sysid_cli_writes_gains_plot_and_bundle(tmp_path):
    import argparse
    import json

    from real2sim.apps.cli.robot import add_parsers
    from real2sim.core.bundle import Bundle
    from real2sim.engines.sandbox import robot_only_bundle

    r = get_robot("widowx")
    eps = _episodes("widowx", r.default_stiffness(), r.default_damping(), n=3, T=5)
    f = _save(tmp_path / "traj.npz", eps, robot="widowx250s")
    b = robot_only_bundle("widowx", tmp_path / "b")
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers())
    args = parser.parse_args(["sysid", "--trajectories", str(f), "--robot", "widowx", "--out", str(tmp_path / "g.json"),
                              "--bundle", str(b.root), "--rounds", "1", "--iters", "4", "--workers", "1"])
    assert args.fn(args) == 0
    g = json.loads((tmp_path / "g.json").read_text())
    assert len(g["stiffness"]) == r.dof and g["heldout_loss"] is not None
    m = Bundle.load(b.root).manifest
    assert m.robot.stiffness == pytest.approx(g["stiffness"]) and m.robot.damping == pytest.approx(g["damping"])
    assert (b.root / "reports" / "sysid.png").stat().st_size > 1000
    assert (b.root / "reports" / "sysid.json").is_file()


def _good(tmp_path):
    r = get_robot("widowx")
    T = 3
    a = np.zeros((T, 7))
    a[:, -1] = 1
    P = np.tile(np.eye(4), (T + 1, 1, 1))
    return [Episode(a.copy(), P.copy(), np.tile(r.default_qpos, (T + 1, 1)), np.arange(T + 1) * 0.2) for _ in range(2)]


@pytest.mark.parametrize("breakage, message", [
    (lambda e: e.actions.__setitem__((1, 0), np.nan), r"episode 1: actions_1 has NaN"),
    (lambda e: setattr(e, "qpos", e.qpos[:, :6]), r"episode 1: qpos_1 has shape \(4, 6\), expected \(4, 8\)"),
    (lambda e: e.timestamps.__setitem__(2, 0.1), r"episode 1: timestamps_1 are not strictly increasing"),
    (lambda e: e.actions.__setitem__((0, 6), 2.0), r"episode 1: action 0 gripper value 2.0 is outside"),
    (lambda e: e.actions.__setitem__((0, 0), 5.0), r"episode 1: action 0 asks for an EE step over 1 m"),
])
def test_bad_trajectories_name_file_and_episode(tmp_path, breakage, message):
    eps = _good(tmp_path)
    breakage(eps[1])
    f = _save(tmp_path / "bad.npz", eps)
    with pytest.raises(TrajectoryError, match=message) as ei:
        load_trajectories(f, "widowx")
    assert str(f) in str(ei.value)


def test_joint_actions_outside_limits_and_wrong_robot(tmp_path):
    r = get_robot("widowx")
    eps = _good(tmp_path)
    for e in eps:
        e.actions = np.tile(np.concatenate([r.default_qpos[:6], [1.0]]), (3, 1))
    eps[0].actions[1, 1] = 3.0  # shoulder limit is about +-1.9 rad
    f = _save(tmp_path / "j.npz", eps, space="joint_pos")
    with pytest.raises(TrajectoryError, match=r"episode 0: action 1 targets joint 'shoulder' at 3.0000, outside"):
        load_trajectories(f, "widowx")
    f = _save(tmp_path / "p.npz", _good(tmp_path), robot="panda")
    with pytest.raises(TrajectoryError, match="recorded with robot 'panda'"):
        load_trajectories(f, "widowx")
    assert len(load_trajectories(_save(tmp_path / "ok.npz", _good(tmp_path)), "widowx")[0]) == 2


def test_parallel_fit_equals_serial():
    r = get_robot("widowx")
    k = np.array(r.default_stiffness())
    k[: r.n_arm] *= 0.7
    eps = _episodes("widowx", k, r.default_damping(), n=4, T=4)
    a = fit_gains(eps, "widowx", share="arm", rounds=1, iters_per_round=3, workers=1, seed=3)
    b = fit_gains(eps, "widowx", share="arm", rounds=1, iters_per_round=3, workers=2, seed=3)
    assert a.stiffness == b.stiffness and a.damping == b.damping and a.train_loss == b.train_loss


def test_lerobot_episodes_are_read(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import json

    import pyarrow.parquet as pq

    r = get_robot("widowx")
    root = tmp_path / "ds"
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps({"fps": 5, "chunks_size": 1000}))
    (root / "data" / "chunk-000").mkdir(parents=True)
    n = 6
    state = np.tile(np.concatenate([r.default_qpos[:6], [1.0]]), (n, 1))  # arm + gripper opening
    for e in range(2):
        table = pa.table({"action": [[0.0] * 6 + [1.0]] * n, "observation.state": state.tolist(),
                          "timestamp": (np.arange(n) / 5.0).tolist(), "episode_index": [e] * n})
        pq.write_table(table, root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
    eps, space = load_trajectories(root, "widowx")
    assert len(eps) == 2 and space == "ee_delta"
    assert eps[0].actions.shape == (n - 1, 7) and eps[0].qpos.shape == (n, 8)
    np.testing.assert_allclose(eps[0].qpos[0, 6:], r.gripper_open)
    bad = pa.table({"action": [[0.0] * 7] * n, "observation.state": state[:, :5].tolist(),
                    "timestamp": (np.arange(n) / 5.0).tolist()})
    pq.write_table(bad, root / "data" / "chunk-000" / "episode_000002.parquet")
    with pytest.raises(TrajectoryError, match=r"episode_000002.parquet: episode 000002: observation.state has shape"):
        load_trajectories(root, "widowx")
