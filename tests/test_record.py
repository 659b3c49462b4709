"""Rollouts as LeRobot datasets: record, read back (pyarrow + PyAV against the v3.0 rules), replay in both engines."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("gymnasium")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
av = pytest.importorskip("av")

from envbundle import make_env_bundle  # noqa: E402

TASK = "lift_cube"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_env_bundle(tmp_path_factory.mktemp("record"))


@pytest.fixture(scope="module", autouse=True)
def _close_cached_envs():
    yield
    from real2sim.evaluation.envs.runner import clear_cache

    clear_cache()


def _record(bundle, root, out, backend, policy="scripted", episodes=2, resume=False, **kw):
    from real2sim.evaluation.envs.runner import evaluate
    from real2sim.evaluation.record import open_dataset

    ds = open_dataset("lerobot", root, resume=resume)
    try:
        return evaluate(bundle.root, TASK, policy, episodes, out_dir=out, backend=backend, record=ds, **kw)
    finally:
        ds.close()


@pytest.fixture(scope="module", params=["mujoco", "sapien"])
def recorded(request, bundle, tmp_path_factory):
    """Two scripted episodes with composited image observations, recorded in one engine."""
    tmp = tmp_path_factory.mktemp(f"ds_{request.param}")
    summary = _record(bundle, tmp / "ds", tmp / "out", request.param)
    return request.param, tmp / "ds", summary


def _psnr(a, b) -> float:
    mse = np.mean((a.astype(float) - b.astype(float)) ** 2)
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))


def test_dataset_reads_back_by_the_lerobot_v30_rules(recorded, bundle):
    """Read with pyarrow + PyAV only: info, features, columns and types, indices, timestamps at the control rate,
    tasks, the success column, and one video frame per data row showing what the policy saw."""
    from real2sim.evaluation.envs.env import Real2SimEnv
    from real2sim.evaluation.envs.runner import read_results

    backend, root, summary = recorded
    info = json.loads((root / "meta/info.json").read_text())
    env = Real2SimEnv(bundle.root, task=TASK, backend=backend)
    try:
        assert info["codebase_version"] == "v3.0"
        assert info["fps"] == env.controller.control_hz == 5
        assert (info["total_episodes"], info["total_tasks"]) == (2, 1)
        feats = info["features"]
        cam = f"observation.images.{env.camera}"
        assert feats[cam]["dtype"] == "video" and feats[cam]["shape"] == [env.obs_size[1], env.obs_size[0], 3]
        assert feats["observation.state"]["shape"] == [env.controller.robot.dof]
        assert feats["observation.state"]["names"] == list(env.scene.robot_joint_names())
        assert feats["action"]["shape"] == [7]
        assert feats["observation.environment_state"]["shape"] == [7 * len(env.movable)]

        tasks = pq.read_table(root / "meta/tasks.parquet").to_pandas()
        assert list(tasks.index) == ["pick up the cube"] and list(tasks["task_index"]) == [0]
        eps = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
        results = {r["seed"]: r for r in read_results(summary.results_path)}
        total = 0
        for ep in eps:
            assert ep["dataset_from_index"] == total and ep["dataset_to_index"] == total + ep["length"]
            total += ep["length"]
            assert ep["success"] == results[ep["seed"]]["success"] and ep["length"] == results[ep["seed"]]["steps"]
            assert results[ep["seed"]]["recorded_episode"] == ep["episode_index"]
            data = pq.read_table(root / info["data_path"].format(chunk_index=ep["data/chunk_index"],
                                                                file_index=ep["data/file_index"]))
            names = {f.name for f in data.schema}
            assert names == {k for k, f in feats.items() if f["dtype"] != "video"}
            assert data.schema.field("observation.state").type == pa.list_(pa.float32(), env.controller.robot.dof)
            assert data.schema.field("timestamp").type == pa.float32()
            fi = data.column("frame_index").to_numpy()
            assert list(fi) == list(range(ep["length"]))
            np.testing.assert_allclose(data.column("timestamp").to_numpy(), fi / info["fps"], atol=1e-6)
            assert list(data.column("index").to_numpy()) == list(range(ep["dataset_from_index"], ep["dataset_to_index"]))
            done = data.column("next.done").to_numpy(zero_copy_only=False)
            assert done[-1] and not done[:-1].any()
            assert data.column("next.success").to_numpy(zero_copy_only=False)[-1] == ep["success"]

            video = root / info["video_path"].format(video_key=cam, chunk_index=ep[f"videos/{cam}/chunk_index"],
                                                     file_index=ep[f"videos/{cam}/file_index"])
            with av.open(str(video)) as box:
                stream = box.streams.video[0]
                frames = [(f.pts * stream.time_base, f.to_ndarray(format="rgb24")) for f in box.decode(stream)]
            assert len(frames) == ep["length"]
            np.testing.assert_allclose([float(t) for t, _ in frames], fi / info["fps"], atol=1e-6)
            first = env.reset(seed=ep["seed"])[0]["image"]  # what the policy saw at frame 0
            other = env.reset(seed=ep["seed"] + 100)[0]["image"]  # the cube elsewhere
            assert _psnr(frames[0][1], first) > 27  # H.264 4:2:0 on a saturated noise plate
            moved = np.abs(first.astype(int) - other).sum(-1) > 60
            err = lambda ref: np.abs(frames[0][1].astype(int) - ref)[moved].mean()  # noqa: E731
            assert moved.sum() > 100 and err(first) < 0.5 * err(other)
            if ep["episode_index"] == 0:  # every frame shows the observation before its action, not after
                env.reset(seed=ep["seed"])
                seen = [first] + [env.step(a)[0]["image"].copy() for a in np.stack(data.column("action").to_pylist())]
                ordered = 0
                for t, (_, img) in enumerate(frames):
                    assert _psnr(img, seen[t]) > 27, t
                    step = np.abs(seen[t].astype(int) - seen[t + 1]).sum(-1) > 60  # what moved in this step
                    if step.sum() > 100:
                        d = lambda ref: np.abs(img.astype(int) - ref)[step].mean()  # noqa: E731
                        assert d(seen[t]) < d(seen[t + 1]), t
                        ordered += 1
                assert ordered >= len(frames) // 2
        assert total == info["total_frames"]
        stats = json.loads((root / "meta/stats.json").read_text())
        acts = np.concatenate([np.stack(pq.read_table(root / info["data_path"].format(chunk_index=0, file_index=i))
                                        .column("action").to_pylist()) for i in range(2)])
        np.testing.assert_allclose(stats["action"]["mean"], acts.mean(0), atol=1e-5)
        assert np.array(stats[cam]["mean"]).shape == (3, 1, 1)
    finally:
        env.close()


def test_checker_finds_no_problem_and_replay_reproduces_the_states(recorded):
    from real2sim.evaluation.lerobot import check_dataset
    from real2sim.evaluation.replay import replay_episode

    backend, root, _ = recorded
    assert check_dataset(root) == []
    for ep in (0, 1):
        r = replay_episode(root, ep)
        assert (r.backend, r.start_state_set) == (backend, False)
        assert r.joint_error < 1e-5 and r.object_error_m < 1e-5 and r.ee_error_m < 1e-5
        assert r.replay_success == r.recorded_success


def test_capture_reads_a_recorded_episode_as_frames_with_joints(recorded):
    """A recorded dataset is a LeRobot v3.0 one: ``real2sim init --frames DATASET --episode 1`` reads that episode."""
    from real2sim.capture.frames import read_frames
    from real2sim.evaluation.lerobot import episode_video, read_episode

    _, root, _ = recorded
    src = read_frames(root, episode=1)
    rec = read_episode(root, 1)
    key = next(k for k in rec["info"]["features"] if k.startswith("observation.images."))
    frames, _ = episode_video(root, 1, key)
    assert src.frames.shape == frames.shape
    assert _psnr(src.frames, frames) > 40  # the same decoded frames (two decoders)
    np.testing.assert_allclose(src.joint_positions, rec["frames"]["observation.state"], atol=1e-6)


def test_replay_in_the_other_engine_stays_close(recorded):
    """Open loop across engines from the recorded start state: millimetres, not centimetres; same outcome."""
    from real2sim.evaluation.replay import replay_episode

    backend, root, _ = recorded
    other = {"mujoco": "sapien", "sapien": "mujoco"}[backend]
    r = replay_episode(root, 0, backend=other)
    assert r.backend == other and r.start_state_set
    assert r.per_frame["joint"][0] < 1e-4  # the recorded start state was set
    assert r.joint_error < 0.02 and r.object_error_m < 0.01
    assert r.replay_success == r.recorded_success


def test_a_replay_of_other_actions_is_caught(recorded, tmp_path):
    """The replay compares states for real: actions swapped between episodes leave the recording."""
    from real2sim.evaluation.replay import replay_episode

    _, root, _ = recorded
    copy = tmp_path / "ds"
    shutil.copytree(root, copy)
    a, b = (copy / f"data/chunk-000/file-00{i}.parquet" for i in (0, 1))
    ta, tb = pq.read_table(a), pq.read_table(b)
    n = min(ta.num_rows, tb.num_rows)
    acts = tb.column("action").to_pylist()[:n] + ta.column("action").to_pylist()[n:]
    pq.write_table(ta.set_column(ta.schema.get_field_index("action"), "action",
                                 pa.array(acts, type=ta.schema.field("action").type)), a)
    assert replay_episode(copy, 0).ee_error_m > 0.005


def test_checker_names_broken_datasets(recorded, tmp_path):
    from real2sim.evaluation.lerobot import check_dataset

    _, root, _ = recorded

    def broken(edit) -> list[str]:
        d = tmp_path / f"b{len(list(tmp_path.iterdir()))}"
        shutil.copytree(root, d)
        edit(d)
        return check_dataset(d)

    def timestamps(d):
        p = d / "data/chunk-000/file-001.parquet"
        t = pq.read_table(p)
        ts = (t.column("timestamp").to_numpy() * 2).astype(np.float32)
        pq.write_table(t.set_column(t.schema.get_field_index("timestamp"), "timestamp", pa.array(ts)), p)

    def short_video(d):
        (p,) = d.glob("videos/*/chunk-000/file-000.mp4")
        from real2sim.evaluation.lerobot import VideoWriter, read_video

        frames, _ = read_video(p)
        w = VideoWriter(p, 5, frames.shape[2], frames.shape[1])
        for f in frames[:-2]:
            w.add(f)
        w.close()

    def totals(d):
        info = json.loads((d / "meta/info.json").read_text())
        info["total_frames"] += 1
        (d / "meta/info.json").write_text(json.dumps(info))

    assert any("timestamps" in p for p in broken(timestamps))
    assert any("episode 0" in p and "frames" in p for p in broken(short_video))
    assert any("total_frames" in p for p in broken(totals))
    assert any("file-000.parquet missing" in p for p in broken(lambda d: (d / "data/chunk-000/file-000.parquet").unlink()))
    assert any("codebase_version" in p for p in broken(lambda d: (d / "meta/info.json").write_text(
        (d / "meta/info.json").read_text().replace('"v3.0"', '"v2.1"'))))


def test_existing_folder_is_refused_and_resume_adds_only_new_episodes(bundle, tmp_path):
    from real2sim.apps.cli import main
    from real2sim.evaluation.lerobot import check_dataset, episodes_table

    root, out = tmp_path / "ds", tmp_path / "out"
    base = [str(bundle.root), "--task", TASK, "--episodes", "1", "--obs-mode", "state", "--out", str(out),
            "--record", "lerobot", str(root)]
    assert main(["eval", "--policy", "scripted", *base]) == 0
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    assert main(["eval", "--policy", "random", *base]) == 2  # refused before any episode ran
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert main(["eval", "--policy", "random", *base, "--record-resume"]) == 0
    base[base.index("--episodes") + 1] = "2"
    assert main(["eval", "--policy", "scripted", *base, "--record-resume"]) == 0  # seed 0 is there: only seed 1 added
    rows = episodes_table(root)
    assert [(r["policy"], r["seed"]) for r in rows] == [("scripted", 0), ("random", 0), ("scripted", 1)]
    assert check_dataset(root) == []
    info = json.loads((root / "meta/info.json").read_text())
    assert not any(f["dtype"] == "video" for f in info["features"].values())  # state observations: no camera


def test_resume_refuses_a_run_with_other_features(bundle, tmp_path):
    from real2sim.evaluation.lerobot import DatasetError

    _record(bundle, tmp_path / "ds", tmp_path / "out", "mujoco", episodes=1, obs_mode="state")
    with pytest.raises(DatasetError, match="observation.images"):
        _record(bundle, tmp_path / "ds", tmp_path / "out2", "mujoco", episodes=1, resume=True, obs_size=(160, 120))


def test_resume_needs_a_dataset_and_record_needs_a_known_format(tmp_path):
    from real2sim import UnknownNameError
    from real2sim.evaluation.lerobot import DatasetError
    from real2sim.evaluation.record import open_dataset

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not a LeRobot dataset"):
        open_dataset("lerobot", tmp_path, resume=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(UnknownNameError):
        open_dataset("rlds", tmp_path / "new")


def test_pool_workers_record_into_one_dataset(bundle, tmp_path):
    from real2sim.evaluation.lerobot import check_dataset, episodes_table

    s = _record(bundle, tmp_path / "ds", tmp_path / "out", "mujoco", episodes=3, workers=2, obs_mode="state")
    assert s.ran == 3
    rows = episodes_table(tmp_path / "ds")
    assert sorted(r["seed"] for r in rows) == [0, 1, 2]
    assert check_dataset(tmp_path / "ds") == []
    assert not (tmp_path / "ds" / ".staging").exists()


def test_replay_of_a_missing_episode_names_the_range(recorded):
    from real2sim.evaluation.lerobot import DatasetError
    from real2sim.evaluation.replay import replay_episode

    with pytest.raises(DatasetError, match=r"no episode 7; it holds episodes 0\.\.1"):
        replay_episode(recorded[1], 7)


def test_replay_rebuilds_the_variants_that_shape_physics(bundle, tmp_path):
    """Distractors drawn per episode are placed again by the seed; image-only variants are left out of the replay."""
    from real2sim.evaluation.lerobot import episodes_table
    from real2sim.evaluation.record import replay_env_kwargs
    from real2sim.evaluation.replay import replay_episode

    variants = {"distractors": {"objects": ["can", "mug", "domino"], "count": [2, 3], "xy": [[0.0, 0.05], [0.2, 0.2]]},
                "robot_tint": 0.2}
    assert replay_env_kwargs({"variants": variants, "shading": "unlit"}) == {"variants": {"distractors": variants["distractors"]}}
    assert replay_env_kwargs({"variants": {"lighting": [0.5, 1.5]}}) == {}
    _record(bundle, tmp_path / "ds", tmp_path / "out", "mujoco", episodes=1, obs_mode="state", seed=3,
            env_kwargs={"variants": variants})
    assert json.loads(episodes_table(tmp_path / "ds")[0]["env_config"])["env_kwargs"]["variants"] == variants
    r = replay_episode(tmp_path / "ds", 0)
    assert r.object_error_m < 1e-5 and r.joint_error < 1e-5


def test_resume_after_a_kill_between_files_and_table_redoes_that_episode(bundle, tmp_path):
    """A run killed after writing an episode's files but before its row: the row is the commit point, so resuming
    writes that episode index again over the leftovers (and clears what workers had staged)."""
    from real2sim.evaluation.lerobot import check_dataset, episodes_table

    root = tmp_path / "ds"
    _record(bundle, root, tmp_path / "out", "mujoco", episodes=1, obs_mode="state")
    (root / "data/chunk-000/file-001.parquet").write_bytes(b"half a parquet file")
    (root / ".staging" / "123-abc").mkdir(parents=True)
    _record(bundle, root, tmp_path / "out", "mujoco", episodes=2, obs_mode="state", resume=True)
    assert [r["seed"] for r in episodes_table(root)] == [0, 1]
    assert check_dataset(root) == []
    assert not (root / ".staging").exists()


@pytest.mark.parametrize("size", [(64, 48), (33, 25)])
@pytest.mark.parametrize("background", [False, True])
def test_video_frames_come_back_at_their_times(tmp_path, size, background):
    """Even sides: 4:2:0 (what players expect); odd sides (an --obs-size like 33x25): 4:4:4, no padding. The
    background writer (the recorder's: encoding on its own thread) writes the same frames in the same order."""
    from real2sim.evaluation.lerobot import BackgroundVideoWriter, VideoWriter, read_video

    VideoWriter = BackgroundVideoWriter if background else VideoWriter  # noqa: N806

    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    frames = [np.stack([(xx * 4 + 20 * i) % 256, yy * 5 % 256, np.full_like(xx, 40 * i)], -1).astype(np.uint8)
              for i in range(6)]
    vw = VideoWriter(tmp_path / "v.mp4", 5, w, h)
    for f in frames:
        vw.add(f)
    vw.close()
    got, ts = read_video(tmp_path / "v.mp4")
    assert got.shape == (6, h, w, 3) and vw.pix_fmt == ("yuv420p" if w % 2 == 0 else "yuv444p")
    np.testing.assert_allclose(ts, np.arange(6) / 5, atol=1e-6)
    assert all(_psnr(a, b) > 25 for a, b in zip(got, frames))  # H.264 at crf 23 (LeRobot's default: crf 30)
    assert all(_psnr(got[i], frames[i]) > _psnr(got[i], frames[i + 1]) + 5 for i in range(5))  # in order


def test_background_encoder_failure_reaches_the_caller(tmp_path):
    from real2sim.evaluation.lerobot import BackgroundVideoWriter, DatasetError

    vw = BackgroundVideoWriter(tmp_path / "v.mp4", 5, 64, 48)
    vw.add(np.zeros((48, 64, 3), np.float64))  # not uint8 RGB: the encoder thread fails
    with pytest.raises(DatasetError, match="v.mp4: video encoding failed"):
        vw.close()
