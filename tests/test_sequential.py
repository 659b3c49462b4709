"""Sequential evaluation and planning: the stop rule on simulated Bernoulli policies with known rates, the
plan against closed forms and simulation, bad options, and one real ``eval --until settled`` run."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from real2sim.evaluation.sequential import (
    SequentialInputError,
    StopRule,
    episodes_for_ci,
    episodes_for_difference,
    holm,
    run_sequential,
    simulate,
)

RUNS = 1000
SETTLE = StopRule(round_size=10, max_episodes=100, confidence=0.95, settle=True)


def test_equal_policies_are_ranked_at_most_at_the_stated_rate():
    """True rates equal: any declared order is wrong. Over 1000 sequential runs (10 looks each) the fraction of runs
    that declare one stays <= alpha = 0.05 (a test at 0.05 per look would declare one in ~20% of runs)."""
    for rates in ((0.5, 0.5), (0.2, 0.2, 0.2)):
        s = simulate(rates, SETTLE, runs=RUNS, seed=3)
        assert s["wrong_order_rate"] <= 0.05, (rates, s["wrong_order_rate"])
        assert s["settled_rate"] <= 0.05


def test_the_naive_rule_would_fail_the_same_check():
    """The check above can fail: testing each look at the full 0.05 (no correction for 10 looks) exceeds 0.05."""
    rng = np.random.default_rng(3)
    from real2sim.evaluation.sequential import fisher_p

    wrong = 0
    for _ in range(RUNS):
        a, b = rng.random(100) < 0.5, rng.random(100) < 0.5
        wrong += any(fisher_p(int(a[:n].sum()), n, int(b[:n].sum()), n) <= 0.05 for n in range(10, 101, 10))
    assert wrong / RUNS > 0.06


def test_different_policies_are_ordered_correctly_and_clear_ones_stop_sooner():
    clear = simulate((0.9, 0.1), SETTLE, runs=RUNS, seed=4)
    close = simulate((0.65, 0.35), SETTLE, runs=RUNS, seed=5)
    three = simulate((0.9, 0.5, 0.1), SETTLE, runs=RUNS, seed=6)
    for s in (clear, close, three):
        assert s["wrong_order_rate"] <= 0.05
    assert clear["settled_rate"] == 1.0 and three["settled_rate"] > 0.9
    assert max(clear["mean_episodes_per_policy"]) <= 30  # 0.9 vs 0.1: two or three rounds
    assert np.mean(close["mean_episodes_per_policy"]) > 2 * np.mean(clear["mean_episodes_per_policy"])
    assert (clear["episodes"] <= close["episodes"].mean()).mean() > 0.95


@pytest.mark.parametrize("rate", [0.05, 0.5, 0.85])
def test_target_ci_interval_covers_the_true_rate_and_is_narrow(rate):
    rule = StopRule(round_size=10, max_episodes=200, confidence=0.9, target_ci=0.25)
    s = simulate((rate,), rule, runs=RUNS, seed=7)
    assert s["ci_miss_rate"] <= 0.10
    assert s["mean_episodes_per_policy"][0] < 200  # it stopped on the width, not on the cap


def test_run_sequential_stops_a_policy_on_its_width_and_reports_why():
    draws = {"good": [1] * 200, "coin": [1, 0] * 100}
    rule = StopRule(round_size=10, max_episodes=200, target_ci=0.3)
    res = run_sequential(["good", "coin"], lambda p, n: (sum(draws[p][:n]), n), rule)
    assert res.counts["good"][1] < res.counts["coin"][1] <= 200  # 100% narrows faster than 50%
    assert "interval" in res.stopped["good"]
    lo, hi = res.final.intervals["coin"]
    assert hi - lo < 0.3


def test_plan_matches_the_closed_form_and_a_simulation():
    # Fleiss' formula by hand, 0.6 vs 0.4 at alpha 0.05, power 0.8: (1.96 sqrt(0.5) + 0.8416 sqrt(0.48))^2 / 0.04
    by_hand = (1.959964 * math.sqrt(0.5) + 0.841621 * math.sqrt(0.48)) ** 2 / 0.04
    n = episodes_for_difference(0.6, 0.4)
    assert n == math.ceil(by_hand) == 97
    # simulated power of the two-proportion z-test at that n
    rng = np.random.default_rng(0)
    a, b = rng.binomial(n, 0.6, 20000) / n, rng.binomial(n, 0.4, 20000) / n
    pooled = (a + b) / 2
    z = (a - b) / np.sqrt(2 * pooled * (1 - pooled) / n)
    assert abs((np.abs(z) > 1.959964).mean() - 0.8) < 0.02
    assert episodes_for_difference(0.6, 0.4, comparisons=3) > n  # Bonferroni costs episodes
    # Wilson width at p = 0.5: w = z / sqrt(n + z^2)  ->  n = z^2 / w^2 - z^2
    z95 = 1.959964
    assert episodes_for_ci(0.5, 0.2) == math.ceil(z95 ** 2 / 0.2 ** 2 - z95 ** 2) == 93


def test_holm_against_a_hand_example():
    assert holm([0.01, 0.04, 0.03], 0.05) == [True, False, False]  # 0.01 <= 0.05/3; 0.03 > 0.05/2
    assert holm([0.01, 0.02, 0.04], 0.05) == [True, True, True]


@pytest.mark.parametrize("kw, words", [
    (dict(round_size=0), "round size"),
    (dict(round_size=10, max_episodes=5, settle=True), "at least one round"),
    (dict(target_ci=1.5), "interval width"),
    (dict(), "--until settled"),
])
def test_bad_rules_are_refused(kw, words):
    with pytest.raises(SequentialInputError, match=words):
        StopRule(**kw)


def test_until_settled_with_one_policy_is_one_line_exit_2(capsys, tmp_path):
    from real2sim.apps.cli import main

    code = main(["eval", str(tmp_path), "--policy", "scripted", "--until", "settled"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "at least two --policy" in err


def test_plan_cli_prints_the_numbers(capsys):
    from real2sim.apps.cli import main

    assert main(["plan", "--rates", "0.6", "0.4", "--target-ci", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "97" in out and "89" in out  # 89: Wilson width < 0.2 at 0.6 or 0.4


def test_eval_until_settled_on_the_tabletop_scene(tmp_path_factory, capsys):
    """The real ``eval``: scripted vs random on lift_cube (state observations) settles in a few rounds of 3."""
    pytest.importorskip("gymnasium")
    from envbundle import make_env_bundle

    from real2sim.apps.cli import main
    from real2sim.evaluation.envs.runner import clear_cache

    bundle = make_env_bundle(tmp_path_factory.mktemp("seq"), plate=False, engines=("mjcf",))
    out = tmp_path_factory.mktemp("seqout")
    try:
        code = main(["eval", str(bundle.root), "--policy", "scripted", "--policy", "random", "--task", "lift_cube",
                     "--obs-mode", "state", "--backend", "mujoco", "--until", "settled", "--round", "3",
                     "--episodes", "24", "--out", str(out)])
    finally:
        clear_cache()
    assert code == 0
    rec = json.loads((out / "sequential.json").read_text())
    assert rec["settled"] and rec["order"] == ["scripted", "random"]
    n = rec["policies"]["scripted"]["episodes"]
    assert n < 24 and n % 3 == 0  # stopped on a round boundary before the cap
    lines = [ln for ln in (out / "episodes.jsonl").read_text().splitlines() if ln.strip()]
    assert len(lines) == rec["total_episodes"]
    assert "ranking settled" in capsys.readouterr().out
