"""The paper's Table 1 claims, checked on a set of runs (paper Sec. 4.1 and the caption of
Table "TeLAPA against single-model baselines"; Table "Revisit Mean SR" for D' and E').

Each claim compares the per-run values of methods with Welch's one-sided t-test
(unequal variances, `scipy.stats.ttest_ind`) at level ``alpha`` = 0.05:

- *best* ("TeLAPA has the highest Coverage"): **holds** when the method's mean is the
  best and it beats every other method with p < alpha; **does not hold** when some other
  method beats it with p < alpha; otherwise **inconclusive** (the reported p is the
  largest of its comparisons with the others when it leads, else the smallest p of a
  method beating it);
- *pair* ("TeLAPA beats TeLAPA-Static on D'"): holds when p < alpha, does not hold when
  the reverse test has p < alpha, else inconclusive.

An inconclusive claim also gets *seeds to decide*: the runs per method at which the
comparison that left it open (the leader against its closest rival, or the best other
method against the claimed one) would be detected with power 0.8 at ``alpha``, if the
observed difference and spread are the true ones. With Cohen's

    d = |mean_a - mean_b| / s_p,    s_p = sqrt((s_a^2 + s_b^2) / 2)    (s: sample SD),

it is the smallest n >= 2 with

    1 - F_{t(2n - 2, delta)}(t_{1 - alpha, 2n - 2}) >= 0.8,    delta = d sqrt(n / 2),

the one-sided two-sample t-test's power under the noncentral t, equal n (the exact
computation G*Power makes: d = 0.5 needs 51 runs a method, d = 0.8 needs 21, d = 1
needs 14). No difference at all gives "never".

A claim whose methods have fewer than two runs with a value each is "not measurable".
Runs without a value (a NaN TTT: no revisit reached its threshold) are left out, as in
the main table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from telapa.continual.results import CurriculumResults
from telapa.metrics.continual import RunMetrics
from telapa.metrics.summary import TTT_UNIT
from telapa.report.tables import ReportTable, frame_table


@dataclass(frozen=True)
class Claim:
    """One claim of the paper about its Table 1 or its revisit table."""

    text: str
    kind: Literal["best", "pair"]
    method: str
    value: str
    """A `RunMetrics` field (``mean_sr``, ``ttt``, ...) or ``revisit:TAG``."""
    better: Literal["higher", "lower"] = "higher"
    other: str | None = None
    """The method a *pair* claim compares against."""


CLAIMS: tuple[Claim, ...] = (
    Claim("TeLAPA has the best Mean SR", "best", "telapa", "mean_sr"),
    Claim("TeLAPA has the lowest TTT", "best", "telapa", "ttt", "lower"),
    Claim("TeLAPA has the highest Coverage", "best", "telapa", "coverage"),
    Claim("TeLAPA has the highest TR", "best", "telapa", "tr"),
    Claim("Scratch-Reuse has the best nBWT", "best", "scratch-reuse", "nbwt"),
    Claim("TeLAPA beats TeLAPA-Static on D'", "pair", "telapa", "revisit:D'",
          other="telapa-static"),
    Claim("TeLAPA beats TeLAPA-Static on E'", "pair", "telapa", "revisit:E'",
          other="telapa-static"),
)
"""Paper Sec. 4.1: "the highest mean success rate, the lowest standardized
time-to-threshold, the highest coverage, and the highest threshold retention"; Table 1
marks Scratch-Reuse's nBWT best; revisit discussion: "the full online-maintained variant
is substantially better on D' and E'"."""


def run_values(runs: Sequence[RunMetrics], value: str) -> np.ndarray:
    """Per-run values of ``value`` (NaNs dropped); TTT in millions of env steps."""
    if value.startswith("revisit:"):
        tag = value.split(":", 1)[1]
        raw = [r.revisit_sr.get(tag, math.nan) for r in runs]
    else:
        scale = TTT_UNIT if value == "ttt" else 1.0
        raw = [getattr(r, value) / scale for r in runs]
    values = np.asarray(raw, dtype=float)
    return values[~np.isnan(values)]


def welch_p(a: np.ndarray, b: np.ndarray, better: str) -> float:
    """One-sided p that ``a`` is better than ``b`` (Welch). Two constant samples give
    0 or 1 by their means (1 when equal)."""
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        wins = a[0] > b[0] if better == "higher" else a[0] < b[0]
        return 0.0 if wins else 1.0
    alternative = "greater" if better == "higher" else "less"
    return float(stats.ttest_ind(a, b, equal_var=False, alternative=alternative).pvalue)


POWER = 0.8
MAX_SEEDS = 10_000


def seeds_to_decide(a: np.ndarray, b: np.ndarray, *, alpha: float = 0.05,
                    power: float = POWER) -> int | None:
    """Runs per method for a one-sided two-sample t-test at ``alpha`` to detect the
    difference between ``a`` and ``b`` with ``power`` (module docstring); None when the
    means are equal, or more than `MAX_SEEDS` would be needed. Two constant samples with
    different means need the minimum, 2."""
    diff = abs(float(a.mean() - b.mean()))
    if diff == 0:
        return None
    spread = math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    if spread == 0:
        return 2
    d = diff / spread
    for n in range(2, MAX_SEEDS + 1):
        df = 2 * n - 2
        critical = stats.t.ppf(1 - alpha, df)
        if stats.nct.sf(critical, df, d * math.sqrt(n / 2)) >= power:
            return n
    return None


def _seeds_cell(a: np.ndarray, b: np.ndarray, alpha: float) -> str:
    n = seeds_to_decide(a, b, alpha=alpha)
    return "never" if n is None else str(n)


def _fmt(values: np.ndarray) -> str:
    return f"{values.mean():.3f} (n={len(values)})"


def check(claim: Claim, result: CurriculumResults, *, alpha: float = 0.05) -> dict[str, object]:
    """The row of ``claim``: what it compares, our numbers, p and the verdict."""
    values = {m: run_values(runs, claim.value) for m, runs in result.metrics.items()}
    row: dict[str, object] = {"claim": claim.text, "ours": "", "p": math.nan,
                              "verdict": "not measurable", "seeds to decide": ""}
    mine = values.get(claim.method, np.array([]))
    if claim.kind == "pair":
        theirs = values.get(claim.other or "", np.array([]))
        if len(mine) < 2 or len(theirs) < 2:
            return row
        forward = welch_p(mine, theirs, claim.better)
        backward = welch_p(theirs, mine, claim.better)
        row["ours"] = f"{claim.method} {_fmt(mine)} vs {claim.other} {_fmt(theirs)}"
        row["p"] = forward
        row["verdict"] = ("holds" if forward < alpha else
                          "does not hold" if backward < alpha else "inconclusive")
        if row["verdict"] == "inconclusive":
            row["seeds to decide"] = _seeds_cell(mine, theirs, alpha)
        return row
    others = {m: v for m, v in values.items() if m != claim.method and len(v) >= 2}
    if len(mine) < 2 or not others:
        return row
    sign = 1.0 if claim.better == "higher" else -1.0
    best_other = max(others, key=lambda m: sign * others[m].mean())
    row["ours"] = (f"{claim.method} {_fmt(mine)}; best other: {best_other} "
                   f"{_fmt(others[best_other])}")
    beaten_by = {m: welch_p(v, mine, claim.better) for m, v in others.items()}
    significant = {m: p for m, p in beaten_by.items() if p < alpha}
    if significant:
        row["p"] = min(significant.values())
        row["verdict"] = "does not hold"
    elif sign * mine.mean() > sign * others[best_other].mean():
        leads = {m: welch_p(mine, v, claim.better) for m, v in others.items()}
        rival = max(leads, key=leads.__getitem__)
        row["p"] = leads[rival]
        if row["p"] < alpha:
            row["verdict"] = "holds"
        else:
            row["verdict"] = "inconclusive"
            row["seeds to decide"] = _seeds_cell(mine, others[rival], alpha)
    else:
        row["p"] = beaten_by[best_other]
        row["verdict"] = "inconclusive"
        row["seeds to decide"] = _seeds_cell(mine, others[best_other], alpha)
    return row


def claims_table(result: CurriculumResults, *, prefix: str, alpha: float = 0.05
                 ) -> ReportTable | None:
    """The claims of `CLAIMS` checked on ``result`` (None without TeLAPA runs)."""
    if "telapa" not in result.metrics:
        return None
    frame = pd.DataFrame([check(c, result, alpha=alpha) for c in CLAIMS])
    return frame_table(
        f"{prefix}-claims", "The paper's Table 1 claims",
        f"Welch's one-sided t-test over runs at alpha = {alpha} (telapa.report.claims): "
        "holds = better than every other method with p < alpha; does not hold = another "
        "method is better with p < alpha; inconclusive = neither. Values: mean over runs "
        "(n runs); TTT in millions of env steps. Seeds to decide: runs per method at which "
        f"the open comparison would reach power {POWER} if the observed difference and "
        "spread held (Cohen's d, noncentral t).", frame)


__all__ = ["CLAIMS", "POWER", "Claim", "check", "claims_table", "run_values",
           "seeds_to_decide", "welch_p"]
