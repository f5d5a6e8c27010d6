"""Success rates as counts, end to end: the audit of the eight-seed study (an independent
recomputation from the committed visits.csv and curve.csv, each SR read as k successes of
n episodes) pinned on the committed results, the recovery of counts from tables written
before runs kept them, and the exact competence test over random k, n."""

from __future__ import annotations

import math
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from telapa.continual.rundir import RunDirError
from telapa.continual.sweep import expand_sweep_dirs
from telapa.metrics import competence_targets, run_metrics, time_to_threshold
from telapa.metrics.rates import as_exact, exact_rate, recover_successes
from telapa.report.claims import CLAIMS, FRESH_CLAIMS, evaluate
from telapa.report.results import load_run, score

ROOT = Path(__file__).resolve().parents[2]
EIGHT_SEEDS = [ROOT / "results" / name for name in
               ("table1-paper", "table1-paper-seeds5-7", "table1-paper-fresh")]


def f32(k: int, n: int) -> float:
    """k / n as the float32 runs stored it (45/50 -> 0.8999999761581421)."""
    return float(np.float32(k) / np.float32(n))


@pytest.fixture(scope="module")
def primary():
    records = [load_run(p) for p in expand_sweep_dirs(EIGHT_SEEDS)]
    return score(records)["primary"]


def _visits(post: list[float], counts: list[tuple[int, int]] | None = None) -> pd.DataFrame:
    frame = pd.DataFrame({"visit": range(len(post)), "tag": ["A", "A'"][:len(post)],
                          "task": ["A"] * len(post), "cycle": range(len(post)),
                          "budget": [100] * len(post), "post_sr": post})
    if counts is not None:
        frame["post_successes"] = [k for k, _ in counts]
        frame["post_episodes"] = [n for _, n in counts]
    return frame


def test_an_sr_that_reaches_tau_counts_as_reaching_it():
    # 45/50 stored as float32 is 0.8999999761581421 < 0.9: as a float it missed tau
    assert f32(45, 50) < 0.9
    visits = _visits([f32(45, 50), f32(45, 50)], [(45, 50), (45, 50)])
    curve = pd.DataFrame({"visit": [0, 1], "task": "A", "step": [0, 0],
                          "sr": [f32(45, 50)] * 2, "successes": [45, 45], "episodes": [50, 50]})
    final = pd.DataFrame({"task": ["A"], "sr": [f32(45, 50)], "successes": [45],
                          "episodes": [50]})
    m = run_metrics(visits, curve, final, {"A": 0.9})
    assert m.coverage == 1.0 and m.tr == 1.0 and m.ttt == 0.0 and m.ttt_censored == 0
    assert m.exact["mean_sr"] == Fraction(9, 10)
    # the audit's other cases, in time_to_threshold
    for (k, n), tau in (((9, 10), 0.9), ((18, 20), 0.9), ((27, 30), 0.9), ((7, 10), 0.7)):
        assert f32(k, n) < tau  # each one missed before
        one = pd.DataFrame({"step": [5], "sr": [f32(k, n)], "successes": [k], "episodes": [n]})
        assert time_to_threshold(one, tau, 100) == (5, False)
        one_less = one.assign(successes=[k - 1], sr=[f32(k - 1, n)])
        assert time_to_threshold(one_less, tau, 100) == (100, True)


def test_tau_is_exact():
    # 0.9 x mean(49/50, 1) = 0.9 x 99/100 = 891/1000
    tau = competence_targets([{"A": Fraction(49, 50)}, {"A": Fraction(1)}])
    assert tau == {"A": Fraction(891, 1000)}
    assert competence_targets([{"A": Fraction(1, 50)}]) == {"A": Fraction(1, 5)}  # tau_min


def test_recovering_counts_round_trips_and_refuses_what_is_no_rate():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        n = int(rng.integers(1, 5001))
        k = int(rng.integers(0, n + 1))
        assert recover_successes(f32(k, n), n) == k
        assert recover_successes(k / n, n) == k  # float64 too
        # the exact competence test is the integer one: k / n >= 9 / 10 iff 10 k >= 9 n
        assert (exact_rate(f32(k, n), k, n) >= as_exact(0.9)) == (10 * k >= 9 * n)
    assert recover_successes(0.123, 50) is None
    assert recover_successes(f32(1, 3), 50) is None
    assert recover_successes(1.5, 50) is None and recover_successes(math.nan, 50) is None


def test_a_committed_table_that_is_no_rate_is_refused(tmp_path):
    cell = ROOT / "results/table1-paper/cells/primary-scratch-s0"
    copy = tmp_path / "run"
    shutil.copytree(cell, copy)
    visits = pd.read_csv(copy / "visits.csv")
    visits.loc[2, "post_sr"] = 0.123
    visits.to_csv(copy / "visits.csv", index=False)
    with pytest.raises(RunDirError, match=r"visits.csv line 4, column post_sr: 0.123 is not "
                                          r"k / 50"):
        load_run(copy)


def test_the_committed_study_scores_exactly(primary):
    # the audit's numbers: exact TTT (M steps) and Coverage at the last visit
    def mean(method: str, value: str) -> Fraction:
        values = [m.exact[value] for m in primary.metrics[method]]
        return sum(values, Fraction(0)) / len(values)

    ttt = {"scratch": 4.735, "telapa": 4.685, "telapa-static": 5.160, "finetune": 8.158,
           "telapa-fresh": 3.061}
    for method, expected in ttt.items():
        assert round(float(mean(method, "ttt")) / 1e6, 3) == expected, method
    for method, expected in {"scratch": 0.725, "finetune": 0.250, "telapa-fresh": 0.725}.items():
        assert mean(method, "coverage_last") == Fraction(expected).limit_denominator(40)
    # Scratch-Reuse seed 0's Mean SR is 74/125 (0.5920000076 as float32 SRs summed)
    seed0 = primary.metrics["scratch-reuse"][[r.seed for r in primary.runs["scratch-reuse"]]
                                             .index(0)]
    assert seed0.exact["mean_sr"] == Fraction(74, 125)
    # Finetune's nBWT is defined on 7 seeds (a 45/50 of tau 0.9 counts as learned)
    assert sum(not math.isnan(m.nbwt) for m in primary.metrics["finetune"]) == 7


def test_the_published_p_values_are_exact(primary):
    by_text = {c.text: c for c in (*CLAIMS, *FRESH_CLAIMS)}
    mean_sr = evaluate(by_text["TeLAPA has the best Mean SR"], primary)
    assert mean_sr.comparisons["scratch-reuse"].p_reverse == 14 / 256
    ttt = evaluate(by_text["TeLAPA has the lowest TTT"], primary)
    assert ttt.comparisons["scratch-reuse"].p_reverse == 4 / 256
    assert ttt.holm_reverse["scratch-reuse"] == pytest.approx(0.0625, abs=1e-15)
    assert ttt.verdict == "inconclusive"  # was "does not hold" with float32 SRs
    fresh = evaluate(by_text["TeLAPA-Fresh beats TeLAPA on Mean SR"], primary)
    assert fresh.comparisons["telapa"].p == 12 / 256 and fresh.verdict == "holds"
    assert evaluate(by_text["TeLAPA has the highest TR"], primary).verdict == "does not hold"
    assert evaluate(by_text["Scratch-Reuse has the best nBWT"], primary).verdict == "holds"
