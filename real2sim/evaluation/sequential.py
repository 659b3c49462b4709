"""Sequential evaluation and sample-size planning: how many episodes are enough (pure numpy/scipy, no engine).

**Rounds.** Episodes run in rounds of ``round_size`` per policy, up to ``max_episodes`` per policy, so there
are at most ``K = ceil(max_episodes / round_size)`` looks at the data. After each round:

* ``target_ci=W``: a policy stops when its Wilson interval is narrower than ``W``.
* ``settle=True``: everything stops when the **ranking is decided**: every pair of policies differs by a
  two-sided Fisher exact test, Holm-corrected over the ``m = n(n-1)/2`` pairs.

**Repeated looks.** Looking after every round and stopping at the first "significant" look inflates the
error rate if each look used the full ``alpha``. The correction here is the simplest conservative one:
Bonferroni over the looks, i.e. every look uses ``alpha / K`` (both for the pairwise tests and for the
Wilson intervals, whose confidence is ``1 - alpha / K``). By the union bound the probability that **any**
look declares a wrong order (or that any look's interval misses the true rate) is at most ``alpha``, so the
declared order (and the interval reported at the stop) keeps the stated level whatever the stopping time.
It is more conservative than a Pocock or O'Brien-Fleming boundary (more episodes on close policies); the
measured error rates and episode counts are in docs/evaluation.md.

A Wilson interval is approximately, not exactly, at its nominal coverage; with ``K >= 2`` looks the union
bound leaves ample slack (the simulated miss rate is far below ``alpha``).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from real2sim.core.errors import Real2SimError
from real2sim.evaluation.metrics import wilson_interval


class SequentialInputError(Real2SimError):
    """Options of a sequential evaluation or of a plan are inconsistent (names the option and the fix)."""


def z_two_sided(alpha: float) -> float:
    """The normal quantile ``z`` with ``P(|Z| > z) = alpha``."""
    from scipy.stats import norm

    return float(norm.ppf(1.0 - alpha / 2.0))


@lru_cache(maxsize=1 << 18)
def fisher_p(s1: int, n1: int, s2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value of ``s1/n1`` against ``s2/n2`` successes."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[s1, n1 - s1], [s2, n2 - s2]]).pvalue)


def holm(pvalues: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level ``alpha``."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    reject = [False] * len(pvalues)
    m = len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] <= alpha / (m - rank):
            reject[i] = True
        else:
            break
    return reject


@dataclass(frozen=True)
class StopRule:
    """When a sequential evaluation stops (see the module docstring)."""

    round_size: int = 10
    max_episodes: int = 200
    confidence: float = 0.95
    target_ci: float | None = None
    settle: bool = False

    def __post_init__(self):
        if self.round_size < 1:
            raise SequentialInputError(f"round size must be >= 1 episode, got {self.round_size}")
        if self.max_episodes < self.round_size:
            raise SequentialInputError(
                f"--episodes (the cap per policy, {self.max_episodes}) must be at least one round ({self.round_size})")
        if not 0.5 <= self.confidence < 1.0:
            raise SequentialInputError(f"confidence must be in [0.5, 1), e.g. 0.95; got {self.confidence}")
        if self.target_ci is not None and not 0.0 < self.target_ci < 1.0:
            raise SequentialInputError(f"--target-ci is an interval width in (0, 1), e.g. 0.2; got {self.target_ci}")
        if self.target_ci is None and not self.settle:
            raise SequentialInputError("a sequential evaluation needs --until settled and/or --target-ci W")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def looks(self) -> int:
        return math.ceil(self.max_episodes / self.round_size)

    @property
    def alpha_look(self) -> float:
        """Per-look level: Bonferroni over the looks."""
        return self.alpha / self.looks


@dataclass
class Look:
    """What one look at the data concluded."""

    episodes: dict[str, int]
    successes: dict[str, int]
    intervals: dict[str, tuple[float, float]]
    pairs: list[dict]  # {"a", "b", "p", "decided", "better"}
    settled: bool


def assess(counts: dict[str, tuple[int, int]], rule: StopRule) -> Look:
    """Intervals (at ``1 - alpha/K``) and Holm-corrected Fisher tests (at ``alpha/K``) for the counts now."""
    z = z_two_sided(rule.alpha_look)
    intervals = {p: wilson_interval(s, n, z) if n else (0.0, 1.0) for p, (s, n) in counts.items()}
    names = list(counts)
    pairs = []
    for a, b in itertools.combinations(names, 2):
        (sa, na), (sb, nb) = counts[a], counts[b]
        p = fisher_p(int(sa), int(na), int(sb), int(nb)) if na and nb else 1.0
        pairs.append({"a": a, "b": b, "p": p})
    rejected = holm([q["p"] for q in pairs], rule.alpha_look) if pairs else []
    for q, r in zip(pairs, rejected):
        (sa, na), (sb, nb) = counts[q["a"]], counts[q["b"]]
        q["decided"] = bool(r)
        q["better"] = (q["a"] if sa / na > sb / nb else q["b"]) if r else None
    settled = bool(pairs) and all(q["decided"] for q in pairs)
    return Look({p: n for p, (_, n) in counts.items()}, {p: s for p, (s, _) in counts.items()}, intervals, pairs,
                settled)


@dataclass
class SequentialResult:
    """The outcome of a sequential evaluation."""

    rule: StopRule
    counts: dict[str, tuple[int, int]]
    stopped: dict[str, str]  # policy -> why it stopped
    settled: bool
    final: Look
    history: list[Look] = field(default_factory=list)

    @property
    def order(self) -> list[str]:
        """Policies by observed rate, best first."""
        return sorted(self.counts, key=lambda p: -self.counts[p][0] / max(1, self.counts[p][1]))

    @property
    def total_episodes(self) -> int:
        return sum(n for _, n in self.counts.values())

    def to_json(self) -> dict:
        return {
            "rule": {"round_size": self.rule.round_size, "max_episodes": self.rule.max_episodes,
                     "confidence": self.rule.confidence, "target_ci": self.rule.target_ci, "settle": self.rule.settle,
                     "looks": self.rule.looks, "alpha_per_look": self.rule.alpha_look,
                     "correction": "Bonferroni over looks (alpha/K), Holm over policy pairs, Fisher exact tests"},
            "settled": self.settled, "order": self.order, "total_episodes": self.total_episodes,
            "policies": {p: {"successes": s, "episodes": n, "rate": s / n if n else None,
                             "ci": list(self.final.intervals[p]), "stopped": self.stopped.get(p)}
                         for p, (s, n) in self.counts.items()},
            "pairs": self.final.pairs,
            "history": [{"episodes": h.episodes, "successes": h.successes, "settled": h.settled} for h in self.history],
        }


def run_sequential(policies: Sequence[str], run_to: Callable[[str, int], tuple[int, int]],
                   rule: StopRule, on_look: Callable[[int, Look], None] | None = None) -> SequentialResult:
    """Run rounds until the rule stops: ``run_to(policy, n)`` brings a policy to ``n`` episodes and returns
    its ``(successes, episodes)`` (episodes already on disk count: a rerun replays the same looks)."""
    policies = list(dict.fromkeys(policies))
    if rule.settle and len(policies) < 2:
        raise SequentialInputError(
            f"--until settled ranks policies: give at least two --policy values (got {len(policies)}: "
            f"{', '.join(policies) or 'none'}); for one policy use --target-ci W")
    counts: dict[str, tuple[int, int]] = {p: (0, 0) for p in policies}
    stopped: dict[str, str] = {}
    history: list[Look] = []
    look = None
    for k in range(1, rule.looks + 1):
        n_target = min(k * rule.round_size, rule.max_episodes)
        for p in policies:
            if p not in stopped:
                s, n = run_to(p, n_target)
                counts[p] = (int(s), int(n))
        look = assess(counts, rule)
        history.append(look)
        if on_look:
            on_look(k, look)
        if rule.settle and look.settled:
            for p in policies:
                stopped.setdefault(p, f"ranking settled after look {k}")
            break
        if rule.target_ci is not None:
            for p in policies:
                lo, hi = look.intervals[p]
                if p not in stopped and hi - lo < rule.target_ci:
                    stopped[p] = f"interval {hi - lo:.3f} < {rule.target_ci} after look {k}"
        if len(stopped) == len(policies):
            break
    for p in policies:
        stopped.setdefault(p, f"episode cap {rule.max_episodes} reached")
    return SequentialResult(rule, counts, stopped, bool(look and look.settled), look, history)


def simulate(rates: Sequence[float], rule: StopRule, runs: int = 1000, seed: int = 0) -> dict:
    """Run the stop rule on simulated Bernoulli policies with known ``rates``, ``runs`` times.

    Returns per run: episodes per policy, whether the ranking was declared settled, the pairs declared
    (``(better, worse)`` indices) and the final intervals; plus the error summary against the true rates."""
    rng = np.random.default_rng(seed)
    names = [f"p{i}" for i in range(len(rates))]
    episodes, wrong_order, ci_miss, settled = [], 0, 0, 0
    for _ in range(runs):
        draws = {p: rng.random(rule.max_episodes) < r for p, r in zip(names, rates)}
        res = run_sequential(names, lambda p, n: (int(draws[p][:n].sum()), n), rule)
        episodes.append([res.counts[p][1] for p in names])
        settled += res.settled
        wrong = False
        for q in res.final.pairs:
            if q["decided"]:
                i, j = names.index(q["a"]), names.index(q["b"])
                worse = q["b"] if q["better"] == q["a"] else q["a"]
                if rates[names.index(q["better"])] <= rates[names.index(worse)] or rates[i] == rates[j]:
                    wrong = True
        wrong_order += wrong
        ci_miss += any(not (res.final.intervals[p][0] <= r <= res.final.intervals[p][1]) for p, r in zip(names, rates))
    ep = np.array(episodes)
    return {"runs": runs, "wrong_order_rate": wrong_order / runs, "ci_miss_rate": ci_miss / runs,
            "settled_rate": settled / runs, "mean_episodes_per_policy": ep.mean(axis=0).tolist(),
            "median_total_episodes": float(np.median(ep.sum(axis=1))), "episodes": ep}


def episodes_for_difference(p1: float, p2: float, confidence: float = 0.95, power: float = 0.8,
                            comparisons: int = 1) -> int:
    """Episodes per policy for a two-sided two-proportion z-test at level ``(1 - confidence) / comparisons``
    (Bonferroni) to detect ``p1 != p2`` with the given power (Fleiss' formula, no continuity correction)."""
    for name, v in (("rate", p1), ("rate", p2)):
        if not 0.0 <= v <= 1.0:
            raise SequentialInputError(f"expected success {name}s are fractions in [0, 1]; got {v}")
    if p1 == p2:
        raise SequentialInputError(f"expected rates {p1} and {p2} are equal: no number of episodes tells them apart")
    if not 0.0 < power < 1.0:
        raise SequentialInputError(f"--power must be in (0, 1), e.g. 0.8; got {power}")
    from scipy.stats import norm

    za = z_two_sided((1.0 - confidence) / comparisons)
    zb = float(norm.ppf(power))
    pbar = (p1 + p2) / 2
    n = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p1 - p2) ** 2
    return max(1, math.ceil(n - 1e-9))


def wilson_width(rate: float, n: int, z: float) -> float:
    lo, hi = wilson_interval(rate * n, n, z)
    return hi - lo


def episodes_for_ci(rate: float, width: float, confidence: float = 0.95) -> int:
    """Fewest episodes whose Wilson interval at the expected ``rate`` is narrower than ``width``."""
    if not 0.0 <= rate <= 1.0:
        raise SequentialInputError(f"expected success rates are fractions in [0, 1]; got {rate}")
    if not 0.0 < width < 1.0:
        raise SequentialInputError(f"--target-ci is an interval width in (0, 1); got {width}")
    z = z_two_sided(1.0 - confidence)
    lo, hi = 1, 1
    while wilson_width(rate, hi, z) >= width:
        lo, hi = hi, hi * 2
    while lo < hi:  # the width at a fixed rate shrinks with n
        mid = (lo + hi) // 2
        if wilson_width(rate, mid, z) < width:
            hi = mid
        else:
            lo = mid + 1
    return hi


__all__ = ["Look", "SequentialInputError", "SequentialResult", "StopRule", "assess", "episodes_for_ci",
           "episodes_for_difference", "fisher_p", "holm", "run_sequential", "simulate", "z_two_sided"]
