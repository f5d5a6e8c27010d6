"""The paper's claims checked with Welch's one-sided t-test: t and its degrees of freedom
by hand, and each verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from telapa.continual.results import CurriculumResults
from telapa.metrics.continual import RunMetrics
from telapa.report.claims import CLAIMS, Claim, check, claims_table, seeds_to_decide, welch_p


def _run(mean_sr: float, *, d: float = 0.0, ttt: float = 1e6) -> RunMetrics:
    return RunMetrics(mean_sr=mean_sr, ttt=ttt, ttt_censored=0, revisits=2, bwt=0.0,
                      coverage=mean_sr, nbwt=0.0, tr=0.0, revisit_sr={"D'": d})


def _result(**methods: list[RunMetrics]) -> CurriculumResults:
    return CurriculumResults("toy", {}, "test", runs={},
                             metrics={m.replace("_", "-"): r for m, r in methods.items()})


def test_welch_p_by_hand():
    # a = 1, 2, 3: mean 2, variance 1; b = 0, 0, 1: mean 1/3, variance 1/3
    # se^2 = 1/3 + 1/9 = 4/9, t = (5/3) / (2/3) = 2.5
    # df = (4/9)^2 / ((1/3)^2 / 2 + (1/9)^2 / 2) = 3.2
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 1.0])
    assert welch_p(a, b, "higher") == pytest.approx(stats.t.sf(2.5, 3.2))
    assert welch_p(b, a, "lower") == pytest.approx(stats.t.sf(2.5, 3.2))
    assert welch_p(b, a, "higher") == pytest.approx(1 - stats.t.sf(2.5, 3.2))
    # constant samples: decided by the means, equal means never "better"
    assert welch_p(np.ones(3), np.zeros(3), "higher") == 0.0
    assert welch_p(np.zeros(3), np.zeros(3), "higher") == 1.0


BEST_SR = CLAIMS[0]


def test_best_claim_verdicts():
    strong = _result(telapa=[_run(0.9), _run(0.85), _run(0.8)],
                     finetune=[_run(0.2), _run(0.25), _run(0.3)])
    row = check(BEST_SR, strong)
    assert row["verdict"] == "holds" and row["p"] < 0.05
    assert row["ours"] == "telapa 0.850 (n=3); best other: finetune 0.250 (n=3)"
    weak = _result(telapa=[_run(0.2), _run(0.25), _run(0.3)],
                   finetune=[_run(0.9), _run(0.85), _run(0.8)])
    assert check(BEST_SR, weak)["verdict"] == "does not hold"
    close = _result(telapa=[_run(0.5), _run(0.9), _run(0.3)],
                    finetune=[_run(0.4), _run(0.8), _run(0.2)])
    row = check(BEST_SR, close)
    assert row["verdict"] == "inconclusive"
    assert row["p"] == pytest.approx(welch_p(np.array([0.5, 0.9, 0.3]),
                                             np.array([0.4, 0.8, 0.2]), "higher"))
    # TTT: lower is better, values in millions of steps
    ttt = Claim("TeLAPA has the lowest TTT", "best", "telapa", "ttt", "lower")
    fast = _result(telapa=[_run(0, ttt=1e6), _run(0, ttt=1.1e6), _run(0, ttt=0.9e6)],
                   scratch=[_run(0, ttt=5e6), _run(0, ttt=6e6), _run(0, ttt=math.nan),
                            _run(0, ttt=5.5e6)])
    row = check(ttt, fast)
    assert row["verdict"] == "holds" and "scratch 5.500 (n=3)" in row["ours"]


def test_pair_claims_and_missing_runs():
    d_claim = CLAIMS[5]
    assert d_claim.value == "revisit:D'" and d_claim.other == "telapa-static"
    better = _result(telapa=[_run(0, d=0.4), _run(0, d=0.5), _run(0, d=0.45)],
                     telapa_static=[_run(0, d=0.0), _run(0, d=0.1), _run(0, d=0.05)])
    assert check(d_claim, better)["verdict"] == "holds"
    worse = _result(telapa=[_run(0, d=0.0), _run(0, d=0.1), _run(0, d=0.05)],
                    telapa_static=[_run(0, d=0.4), _run(0, d=0.5), _run(0, d=0.45)])
    assert check(d_claim, worse)["verdict"] == "does not hold"
    tied = _result(telapa=[_run(0)] * 3, telapa_static=[_run(0)] * 3)
    assert check(d_claim, tied)["verdict"] == "inconclusive"
    alone = _result(telapa=[_run(0.5)], finetune=[_run(0.1), _run(0.2)])
    assert check(BEST_SR, alone)["verdict"] == "not measurable"
    assert check(CLAIMS[4], alone)["verdict"] == "not measurable"  # no scratch-reuse runs


def test_claims_table_only_with_telapa():
    assert claims_table(_result(finetune=[_run(0.1), _run(0.2)]), prefix="toy") is None
    table = claims_table(_result(telapa=[_run(0.9), _run(0.8)],
                                 finetune=[_run(0.1), _run(0.2)]), prefix="toy")
    assert table.id == "toy-claims" and len(table.values) == len(CLAIMS)
    assert table.values["verdict"].tolist()[4:] == ["not measurable"] * 3
    # claim, ours, verdict and seeds are text (left-aligned); p is a number
    assert table.to_markdown().splitlines()[1] == "|:---|:---|---:|:---|:---|"


def test_seeds_to_decide_matches_the_power_tables():
    """Unit-variance samples a shift d apart: the runs per method a one-sided t-test at
    0.05 needs for power 0.8 (G*Power, exact noncentral t: d = 0.5 -> 51, 0.8 -> 21,
    1 -> 14)."""
    base = np.array([-1.0, 0.0, 1.0])  # sample SD 1
    assert seeds_to_decide(base + 0.5, base) == 51
    assert seeds_to_decide(base, base + 0.8) == 21
    assert seeds_to_decide(base + 1.0, base) == 14
    # by hand for n = 2 (df = 2): d = 10 gives delta = 10, far beyond t_0.95,2 = 2.92
    assert seeds_to_decide(base + 10.0, base) == 2
    assert seeds_to_decide(base, base) is None                 # no difference: never
    assert seeds_to_decide(np.ones(3), np.zeros(3)) == 2       # no spread at all
    assert seeds_to_decide(base + 1e-3, base) is None          # more than 10,000


def test_inconclusive_claims_say_how_many_seeds_would_decide_them():
    close = _result(telapa=[_run(0.5), _run(0.9), _run(0.3)],
                    finetune=[_run(0.4), _run(0.8), _run(0.2)],
                    scratch=[_run(0.1), _run(0.0), _run(0.05)])
    row = check(BEST_SR, close)
    # TeLAPA leads; the open comparison is against its closest rival, Finetune
    expected = seeds_to_decide(np.array([0.5, 0.9, 0.3]), np.array([0.4, 0.8, 0.2]))
    assert row["verdict"] == "inconclusive" and row["seeds to decide"] == str(expected)
    # d = 0.1 / sqrt(0.0933) = 0.327; normal approximation 2 (1.645 + 0.842)^2 / d^2 = 116,
    # one more for the t distribution's heavier tails
    assert expected == 117
    decided = _result(telapa=[_run(0.9), _run(0.85), _run(0.8)],
                      finetune=[_run(0.2), _run(0.25), _run(0.3)])
    assert check(BEST_SR, decided)["seeds to decide"] == ""
    tied = _result(telapa=[_run(0)] * 3, telapa_static=[_run(0)] * 3)
    assert check(CLAIMS[5], tied)["seeds to decide"] == "never"
