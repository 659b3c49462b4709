"""Sim-vs-real agreement metrics from SIMPLER (MMRV, Pearson r) with uncertainty.

Inputs are tables with **named columns** (``policy``, ``task``, and either
``successes`` + ``trials`` or ``rate`` / ``success_rate`` [+ ``trials``]), so nothing depends on
argument order. A table of rates without trials (what papers publish, e.g. SIMPLER's) gives the
point MMRV and Pearson r; their intervals and the Kruskal-Wallis p need the number of trials and are
reported as unavailable, with that reason. Definitions follow the SIMPLER paper (arXiv 2405.05941, Sec. 4):

* Rank violation between policies i, j: ``|R_i - R_j|`` when the strict orderings
  disagree, ``(S_i > S_j) != (R_i > R_j)``, else 0. **Tie rule** (strict comparisons,
  as in SIMPLER's code): equal sim rates with different real rates count as a
  violation; equal real rates never cost anything (the weight ``|R_i - R_j|`` is 0).
* MMRV = mean over i of max over j of the rank violation. Lower is better; 0 means
  simulation ranks the policies exactly as the real robot does.
* Pearson r between real and sim success rates. Higher is better; undefined (NaN,
  reported with the reason) when either side has no variance.

Uncertainty: Wilson score intervals per success rate; bootstrap intervals for MMRV
and Pearson r by resampling each policy's trials (binomial resampling of its rate),
seeded. Per policy, a Kruskal-Wallis test of real vs sim per-trial outcomes.
"""
from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from real2sim.core.errors import Real2SimError, did_you_mean, require

log = logging.getLogger(__name__)


class MetricsInputError(Real2SimError):
    """A results table is malformed (names the file, row and column)."""


@dataclass(frozen=True)
class Result:
    """Success of one policy on one task."""

    policy: str
    task: str
    successes: float | None
    trials: int | None
    given_rate: float | None = None
    """The rate as published when the table has no trials (then successes and trials are None)."""

    @property
    def rate(self) -> float:
        return self.given_rate if self.trials is None else self.successes / self.trials


RATE_COLUMNS = ("rate", "success_rate")


def _parse_rate(text: str, path: Path, line: int) -> float:
    t = text.strip()
    pct = t.endswith("%")
    try:
        v = float(t[:-1] if pct else t)
    except ValueError as exc:
        raise MetricsInputError(f"{path}: line {line}: cannot read the rate {text!r} ({exc})") from exc
    if pct:
        v /= 100.0
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        hint = "; percentages need a '%' sign (57.3%) or divide them by 100" if 1.0 < v <= 100.0 else ""
        raise MetricsInputError(f"{path}: line {line}: a rate is a fraction in [0, 1], got {text!r}{hint}")
    return v


def read_results(path: Path) -> list[Result]:
    """Read a CSV with columns policy, task, and successes + trials, or rate (or success_rate) [+ trials].

    Rates may be fractions (0.573) or percentages with a sign (57.3%). Without ``trials`` the rows are
    rate-only (``Result.trials is None``): point metrics only (see :func:`compare`).
    """
    path = Path(path)
    if not path.is_file():
        raise MetricsInputError(f"{path}: file not found")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        cols = [c.strip() for c in (reader.fieldnames or [])]
        rows = [{k.strip(): (v or "").strip() for k, v in r.items() if k} for r in reader]
    known = {"policy", "task", "successes", "trials", *RATE_COLUMNS}
    for c in cols:
        if c not in known:
            raise MetricsInputError(f"{path}: unknown column '{c}'{did_you_mean(c, known)}; columns are policy, task, "
                                    "successes, trials, rate (or success_rate)")
    for need in ("policy",):
        if need not in cols:
            raise MetricsInputError(f"{path}: missing column '{need}' (have: {', '.join(cols)})")
    rate_cols = [c for c in RATE_COLUMNS if c in cols]
    if len(rate_cols) > 1:
        raise MetricsInputError(f"{path}: has both 'rate' and 'success_rate' columns; keep one")
    rate_col = rate_cols[0] if rate_cols else None
    if not ({"successes", "trials"} <= set(cols) or rate_col):
        raise MetricsInputError(f"{path}: needs columns 'successes' and 'trials', or 'rate' (or 'success_rate') "
                                f"with 'trials' when known (have: {', '.join(cols)})")
    out, seen = [], set()
    for i, r in enumerate(rows, start=2):
        if "trials" not in r or r["trials"] == "":
            if rate_col is None or r.get(rate_col, "") == "":
                raise MetricsInputError(f"{path}: line {i}: needs 'successes' and 'trials' or a '{rate_col or 'rate'}'")
            res = (None, None, _parse_rate(r[rate_col], path, i))
        else:
            try:
                trials = int(r["trials"])
                has_succ = "successes" in r and r["successes"] != ""
                succ = float(r["successes"]) if has_succ else _parse_rate(r[rate_col], path, i) * trials
            except (ValueError, KeyError, TypeError) as exc:
                raise MetricsInputError(f"{path}: line {i}: cannot read numbers ({exc})") from exc
            if trials <= 0 or not math.isfinite(succ) or not (0 <= succ <= trials):
                raise MetricsInputError(f"{path}: line {i}: need 0 <= successes <= trials and trials > 0, got {succ} / {trials}")
            res = (succ, trials, None)
        key = (r["policy"], r.get("task", "") or "default")
        if key in seen:
            raise MetricsInputError(f"{path}: line {i}: policy '{key[0]}' task '{key[1]}' appears twice")
        seen.add(key)
        out.append(Result(key[0], key[1], *res))
    if not out:
        raise MetricsInputError(f"{path}: no rows")
    return out


def wilson_interval(successes: float, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion."""
    if trials <= 0:
        raise ValueError("trials must be > 0")
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mmrv(real, sim) -> float:
    """Mean Maximum Rank Violation of sim rates against real rates (same policy order)."""
    real, sim = np.asarray(real, float), np.asarray(sim, float)
    if real.shape != sim.shape or real.ndim != 1:
        raise ValueError(f"real and sim must be equal-length 1-D arrays, got {real.shape} and {sim.shape}")
    disagree = (sim[:, None] > sim[None, :]) != (real[:, None] > real[None, :])
    viol = np.abs(real[:, None] - real[None, :]) * disagree
    return float(viol.max(axis=1).mean())


def pearson(real, sim) -> float:
    """Pearson correlation; NaN when either side is constant."""
    real, sim = np.asarray(real, float), np.asarray(sim, float)
    if real.std() == 0 or sim.std() == 0:
        return float("nan")
    return float(np.corrcoef(real, sim)[0, 1])


@dataclass
class TaskMetrics:
    task: str
    policies: list[str]
    real: list[float]
    sim: list[float]
    real_ci: list[tuple[float, float]]
    sim_ci: list[tuple[float, float]]
    mmrv: float
    mmrv_ci: tuple[float, float]
    pearson: float
    pearson_ci: tuple[float, float]
    kruskal_p: dict[str, float | None] = field(default_factory=dict)
    unavailable: str | None = None
    """Why intervals and Kruskal-Wallis p are missing (a table without trials), else None."""


def _pair(real: list[Result], sim: list[Result], real_name: str, sim_name: str) -> dict[str, list[tuple[Result, Result]]]:
    r = {(x.policy, x.task): x for x in real}
    s = {(x.policy, x.task): x for x in sim}
    only_r, only_s = sorted(set(r) - set(s)), sorted(set(s) - set(r))
    if only_r or only_s:
        def name(key, other):
            pol = did_you_mean(key[0], sorted({k[0] for k in other if k[1] == key[1]}))
            task = "" if any(k[1] == key[1] for k in other) else did_you_mean(key[1], sorted({k[1] for k in other}))
            return f"policy '{key[0]}'{pol} task '{key[1]}'{task}"

        parts = ([f"only in real ({real_name}): " + "; ".join(name(k, s) for k in only_r)] if only_r else []) + \
                ([f"only in sim ({sim_name}): " + "; ".join(name(k, r) for k in only_s)] if only_s else [])
        raise MetricsInputError(f"real and sim list different policy/task pairs: {'; '.join(parts)}. Fix: give both "
                                "files the same policy and task names (or drop the rows one side lacks)")
    by_task: dict[str, list] = {}
    for key in sorted(r):
        by_task.setdefault(key[1], []).append((r[key], s[key]))
    return by_task


def _kruskal(a: Result, b: Result) -> float:
    from scipy.stats import kruskal

    xa = np.r_[np.ones(int(round(a.successes))), np.zeros(a.trials - int(round(a.successes)))]
    xb = np.r_[np.ones(int(round(b.successes))), np.zeros(b.trials - int(round(b.successes)))]
    if np.concatenate([xa, xb]).std() == 0:
        return 1.0  # identical outcomes everywhere: no evidence of a difference
    return float(kruskal(xa, xb).pvalue)


def compare(real: list[Result], sim: list[Result], n_boot: int = 2000, seed: int = 0,
            real_name: str = "real", sim_name: str = "sim") -> list[TaskMetrics]:
    """Per task: rates with Wilson CIs, MMRV and Pearson r with bootstrap CIs, Kruskal-Wallis p per policy."""
    rng = np.random.default_rng(seed)
    out = []
    for task, pairs in _pair(real, sim, real_name, sim_name).items():
        if len(pairs) < 2:
            raise MetricsInputError(f"task '{task}': need at least 2 policies to compare rankings, got {len(pairs)}")
        R = np.array([a.rate for a, _ in pairs])
        S = np.array([b.rate for _, b in pairs])
        rate_only = [nm for nm, side in ((real_name, [a for a, _ in pairs]), (sim_name, [b for _, b in pairs]))
                     if any(x.trials is None for x in side)]
        if rate_only:
            why = (f"intervals and Kruskal-Wallis p need the number of trials; {' and '.join(rate_only)} "
                   f"give{'s' if len(rate_only) == 1 else ''} rates only (add a 'trials' column)")
            nan2 = (float("nan"), float("nan"))
            out.append(TaskMetrics(
                task=task, policies=[a.policy for a, _ in pairs], real=R.tolist(), sim=S.tolist(),
                real_ci=[nan2 if a.trials is None else wilson_interval(a.successes, a.trials) for a, _ in pairs],
                sim_ci=[nan2 if b.trials is None else wilson_interval(b.successes, b.trials) for _, b in pairs],
                mmrv=mmrv(R, S), mmrv_ci=nan2, pearson=pearson(R, S), pearson_ci=nan2,
                kruskal_p={a.policy: None for a, _ in pairs}, unavailable=why))
            continue
        nr = np.array([a.trials for a, _ in pairs])
        ns = np.array([b.trials for _, b in pairs])
        br = rng.binomial(nr, R, size=(n_boot, len(pairs))) / nr
        bs = rng.binomial(ns, S, size=(n_boot, len(pairs))) / ns
        boot_m = np.array([mmrv(x, y) for x, y in zip(br, bs)])
        boot_p = np.array([pearson(x, y) for x, y in zip(br, bs)])
        boot_p = boot_p[np.isfinite(boot_p)]
        pci = tuple(np.percentile(boot_p, [2.5, 97.5]).tolist()) if len(boot_p) else (float("nan"), float("nan"))
        out.append(TaskMetrics(
            task=task, policies=[a.policy for a, _ in pairs], real=R.tolist(), sim=S.tolist(),
            real_ci=[wilson_interval(a.successes, a.trials) for a, _ in pairs],
            sim_ci=[wilson_interval(b.successes, b.trials) for _, b in pairs],
            mmrv=mmrv(R, S), mmrv_ci=tuple(np.percentile(boot_m, [2.5, 97.5]).tolist()),
            pearson=pearson(R, S), pearson_ci=pci,
            kruskal_p={a.policy: _kruskal(a, b) for a, b in pairs}))
    return out


def to_json(metrics: list[TaskMetrics]) -> dict:
    def num(x):
        return None if x is None or math.isnan(x) else x

    tasks = {}
    for m in metrics:
        tasks[m.task] = {
            "mmrv": m.mmrv, "mmrv_ci95": [num(x) for x in m.mmrv_ci], "pearson_r": num(m.pearson),
            "pearson_ci95": [num(x) for x in m.pearson_ci],
            "policies": {p: {"real": r, "sim": s, "real_ci95": [num(x) for x in rc], "sim_ci95": [num(x) for x in sc],
                             "kruskal_p": m.kruskal_p[p]}
                         for p, r, s, rc, sc in zip(m.policies, m.real, m.sim, m.real_ci, m.sim_ci)}}
        if m.unavailable:
            tasks[m.task]["unavailable"] = m.unavailable
    finite = [m.pearson for m in metrics if not math.isnan(m.pearson)]
    return {"tasks": tasks, "mean_mmrv": float(np.mean([m.mmrv for m in metrics])),
            "mean_pearson_r": float(np.mean(finite)) if finite else None,
            "definitions": "MMRV and Pearson r as in SIMPLER (strict comparisons; see real2sim.evaluation.metrics)"}


def plot(metrics: list[TaskMetrics], out: Path, real_label: str = "real", sim_label: str = "sim") -> Path:
    """Real-vs-sim scatter per task with 95% Wilson intervals (like SIMPLER's Figure 4). ``real_label`` and
    ``sim_label`` name the two sides on the axes (two engines compared: their names, not 'real' and 'sim')."""

    mpl = require("matplotlib", "metrics")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.2), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        for i, p in enumerate(m.policies):
            # max(0, .): a Wilson bound can sit a rounding error inside the rate (e.g. 2/6), which matplotlib refuses
            xerr = [[max(0.0, m.real[i] - m.real_ci[i][0])], [max(0.0, m.real_ci[i][1] - m.real[i])]]
            yerr = [[max(0.0, m.sim[i] - m.sim_ci[i][0])], [max(0.0, m.sim_ci[i][1] - m.sim[i])]]
            xerr = None if math.isnan(m.real_ci[i][0]) else xerr  # rate-only table: no interval to draw
            yerr = None if math.isnan(m.sim_ci[i][0]) else yerr
            ax.errorbar(m.real[i], m.sim[i], xerr=xerr, yerr=yerr, fmt="o", capsize=3, label=p)
        ax.plot([0, 1], [0, 1], "k--", lw=0.8)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(f"{real_label} success rate")
        ax.set_ylabel(f"{sim_label} success rate")
        r = "n/a" if math.isnan(m.pearson) else f"{m.pearson:.2f}"
        ci = "(no CI: rates only)" if math.isnan(m.mmrv_ci[0]) else f"[{m.mmrv_ci[0]:.2f}, {m.mmrv_ci[1]:.2f}]"
        ax.set_title(f"{m.task}\nMMRV {m.mmrv:.3f} {ci}  r {r}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return out
