"""MMRV / Pearson exactly as SIMPLER defines them, with named columns and uncertainty."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from real2sim.evaluation.metrics import (
    MetricsInputError,
    compare,
    mmrv,
    pearson,
    read_results,
    wilson_interval,
)


def simpler_reference_mmrv(real, sim):
    """SIMPLER's published loop, written out literally as the reference."""
    n = len(real)
    worst = []
    for i in range(n):
        v = 0.0
        for j in range(n):
            if (sim[i] > sim[j]) != (real[i] > real[j]):
                v = max(v, abs(real[i] - real[j]))
        worst.append(v)
    return sum(worst) / n


def test_mmrv_matches_the_reference_loop_on_random_inputs():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = rng.integers(2, 8)
        real = rng.integers(0, 5, n) / 4  # coarse values -> many ties
        sim = rng.integers(0, 5, n) / 4
        assert mmrv(real, sim) == pytest.approx(simpler_reference_mmrv(real, sim))


def test_mmrv_values_and_tie_rule():
    assert mmrv([0.1, 0.5, 0.9], [0.2, 0.4, 0.8]) == 0.0  # same ranking
    # swap of the top two: policies 1 and 2 each see a violation of 0.4
    assert mmrv([0.1, 0.5, 0.9], [0.2, 0.8, 0.4]) == pytest.approx((0 + 0.4 + 0.4) / 3)
    # sim ties where real differs: a violation
    assert mmrv([0.2, 0.6], [0.5, 0.5]) == pytest.approx(0.4 / 2)  # only policy 1 sees it
    # real ties where sim differs: costs nothing
    assert mmrv([0.5, 0.5], [0.1, 0.9]) == 0.0
    # argument order matters (that is why the CLI takes named columns)
    assert mmrv([0.2, 0.6], [0.5, 0.5]) != mmrv([0.5, 0.5], [0.2, 0.6])


def test_pearson_and_constant_input():
    assert pearson([0, 0.5, 1], [0.1, 0.6, 1.1]) == pytest.approx(1.0)
    assert math.isnan(pearson([0.5, 0.5], [0.1, 0.2]))


def test_wilson_interval_known_value():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 10)[0] == 0.0
    with pytest.raises(ValueError, match="trials"):  # no episodes: no interval (not a division by zero)
        wilson_interval(0, 0)


def _csv(path, rows, header="policy,task,successes,trials"):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


def test_compare_with_named_columns_in_any_order(tmp_path):
    real = _csv(tmp_path / "real.csv", [("a", "pick", 2, 10), ("b", "pick", 5, 10), ("c", "pick", 9, 10)])
    sim = _csv(tmp_path / "sim.csv", [(10, "pick", 3, "a"), (20, "pick", 12, "b"), (10, "pick", 8, "c")],
               header="trials,task,successes,policy")
    (m,) = compare(read_results(real), read_results(sim), n_boot=500)
    assert m.policies == ["a", "b", "c"]
    assert m.sim == [0.3, 0.6, 0.8]
    assert m.mmrv == 0.0 and m.pearson > 0.95
    assert m.mmrv_ci[0] == 0.0 and m.mmrv_ci[1] > 0.0  # 10 trials leave rank swaps possible
    assert m.kruskal_p["c"] > 0.5  # 9/10 vs 8/10: no evidence the rates differ
    again = compare(read_results(real), read_results(sim), n_boot=500)[0]
    assert again.mmrv_ci == m.mmrv_ci  # seeded


def test_kruskal_p_tells_equal_rates_from_opposite_ones(tmp_path):
    """Per policy, real and simulated episodes (0/1) compared by Kruskal-Wallis: equal rates give p = 1 (H = 0),
    0/10 against 10/10 H = 19.0 (ties corrected), whose chi-square (1 dof) tail is 1.3e-5."""
    real = _csv(tmp_path / "real.csv", [("same", "t", 5, 10), ("opposite", "t", 0, 10)])
    sim = _csv(tmp_path / "sim.csv", [("same", "t", 10, 20), ("opposite", "t", 10, 10)])
    (m,) = compare(read_results(real), read_results(sim), n_boot=100)
    assert m.kruskal_p["same"] == pytest.approx(1.0)
    assert m.kruskal_p["opposite"] < 1e-4


@pytest.mark.parametrize("header, rows, words", [
    ("policy,task,sucesses,trials", [("a", "t", 1, 2)], "did you mean 'successes'"),
    ("policy,task,successes", [("a", "t", 1)], "'trials'"),
    ("policy,task,successes,trials", [("a", "t", 3, 2)], "line 2"),
    ("policy,task,successes,trials", [("a", "t", 1, 2), ("a", "t", 1, 2)], "appears twice"),
])
def test_bad_tables_name_the_problem(tmp_path, header, rows, words):
    with pytest.raises(MetricsInputError, match=words):
        read_results(_csv(tmp_path / "x.csv", rows, header))


def test_mismatched_policies_are_refused(tmp_path):
    real = read_results(_csv(tmp_path / "r.csv", [("a", "t", 1, 2), ("b", "t", 1, 2)]))
    sim = read_results(_csv(tmp_path / "s.csv", [("a", "t", 1, 2), ("c", "t", 1, 2)]))
    with pytest.raises(MetricsInputError, match="only in real"):
        compare(real, sim)


def test_cli_writes_json_and_plot(tmp_path):
    from real2sim.apps.cli import main

    real = _csv(tmp_path / "real.csv", [("a", "pick", 2, 10), ("b", "pick", 5, 10), ("c", "pick", 9, 10),
                                        ("a", "push", 1, 10), ("b", "push", 7, 10), ("c", "push", 4, 10)])
    sim = _csv(tmp_path / "sim.csv", [("a", "pick", 3, 10), ("b", "pick", 4, 10), ("c", "pick", 8, 10),
                                      ("a", "push", 2, 10), ("b", "push", 3, 10), ("c", "push", 6, 10)])
    code = main(["metrics", "--real", str(real), "--sim", str(sim), "--json", str(tmp_path / "m.json"),
                 "--plot", str(tmp_path / "m.png")])
    assert code == 0
    d = json.loads((tmp_path / "m.json").read_text())
    assert d["tasks"]["pick"]["mmrv"] == 0.0
    assert d["tasks"]["push"]["mmrv"] > 0.0
    # per task, SIMPLER's loop over the rates in the files (push: b and c swap ranks, 0.3 each for two of three)
    push_real, push_sim = [0.1, 0.7, 0.4], [0.2, 0.3, 0.6]
    assert d["tasks"]["push"]["mmrv"] == pytest.approx(simpler_reference_mmrv(push_real, push_sim)) == pytest.approx(0.2)
    assert d["tasks"]["push"]["pearson_r"] == pytest.approx(np.corrcoef(push_real, push_sim)[0, 1], abs=1e-6)
    from PIL import Image

    assert Image.open(tmp_path / "m.png").size[0] > 600


def test_rate_only_tables_give_point_metrics_and_say_why_no_intervals(tmp_path, capsys):
    """A published table of rates (SIMPLER's, no trials): point MMRV / Pearson as SIMPLER's loop gives them,
    intervals and Kruskal p unavailable with the reason; percentages and 'success_rate' are read."""
    from real2sim.apps.cli import main

    real_r, sim_r = [0.1, 0.7, 0.4], [0.2, 0.3, 0.6]
    real = _csv(tmp_path / "real.csv", [("a", "push", "10%"), ("b", "push", "70%"), ("c", "push", "40%")],
                header="policy,task,success_rate")
    sim = _csv(tmp_path / "sim.csv", [("a", "push", 2, 10), ("b", "push", 3, 10), ("c", "push", 6, 10)])
    (m,) = compare(read_results(real), read_results(sim), n_boot=100, real_name="real.csv")
    assert m.real == pytest.approx(real_r)
    assert m.mmrv == pytest.approx(simpler_reference_mmrv(real_r, sim_r))
    assert m.pearson == pytest.approx(np.corrcoef(real_r, sim_r)[0, 1])
    assert math.isnan(m.mmrv_ci[0]) and math.isnan(m.real_ci[0][0]) and m.kruskal_p["a"] is None
    assert not math.isnan(m.sim_ci[0][0])  # the side with trials keeps its Wilson intervals
    assert "need the number of trials" in m.unavailable and "real.csv" in m.unavailable
    code = main(["metrics", "--real", str(real), "--sim", str(sim), "--json", str(tmp_path / "m.json"),
                 "--plot", str(tmp_path / "m.png")])
    assert code == 0
    out = capsys.readouterr().out
    assert "n/a" in out and "trials" in out
    d = json.loads((tmp_path / "m.json").read_text())["tasks"]["push"]
    assert d["mmrv"] == pytest.approx(0.2) and d["mmrv_ci95"] == [None, None] and "trials" in d["unavailable"]


@pytest.mark.parametrize("header, rows, words", [
    ("policy,task,rate", [("a", "t", 57.3)], "percentages need a '%'"),
    ("policy,task,rate,success_rate", [("a", "t", 0.5, 0.5)], "keep one"),
    ("policy,task,rate", [("a", "t", "")], "line 2"),
])
def test_bad_rate_tables_name_the_problem(tmp_path, header, rows, words):
    with pytest.raises(MetricsInputError, match=words):
        read_results(_csv(tmp_path / "x.csv", rows, header))


def test_a_policy_in_one_file_only_is_named_with_a_suggestion(tmp_path, capsys):
    from real2sim.apps.cli import main

    real = _csv(tmp_path / "r.csv", [("RT-1 (Converged)", "t", 0.5), ("Octo-Base", "t", 0.2)], "policy,task,rate")
    sim = _csv(tmp_path / "s.csv", [("RT-1 (converged)", "t", 0.4), ("Octo-Base", "t", 0.1)], "policy,task,rate")
    code = main(["metrics", "--real", str(real), "--sim", str(sim)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "only in real" in err and "'RT-1 (Converged)'" in err and "did you mean 'RT-1 (converged)'" in err
    assert "only in sim" in err
