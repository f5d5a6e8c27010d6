"""Across-seed tables and cell formatting, checked against hand-computed t intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from telapa.metrics import (
    RunMetrics,
    format_cell,
    metric_scores,
    revisit_summary,
    revisit_table,
    summarize,
)

T975_DF1 = math.tan(math.pi * 0.475)  # 12.706204736...
T975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.302652729...


def rm(mean_sr=0.5, ttt=1e6, bwt=-0.1, coverage=0.5, nbwt=-0.2, tr=0.25, revisit_sr=None):
    return RunMetrics(
        mean_sr=mean_sr,
        ttt=ttt,
        ttt_censored=0,
        revisits=len(revisit_sr or {}),
        bwt=bwt,
        coverage=coverage,
        nbwt=nbwt,
        tr=tr,
        revisit_sr=dict(revisit_sr or {}),
        sr_post={},
        sr_end={},
    )


def test_summarize_by_hand():
    runs = {
        "TeLAPA": [
            rm(mean_sr=0.5, ttt=1e6, nbwt=math.nan),
            rm(mean_sr=0.6, ttt=2e6, nbwt=-0.5),
            rm(mean_sr=0.7, ttt=3e6, nbwt=-0.3),
        ],
        "Scratch": [rm(mean_sr=0.4)],
    }
    table = summarize(runs)
    assert list(table.index) == ["TeLAPA", "Scratch"]
    assert table.index.name == "method"
    row = table.loc["TeLAPA"]
    # Mean SR: mean 0.6, s = 0.1, half = 4.302653 * 0.1 / sqrt(3) = 0.248414
    assert row["mean_sr"] == pytest.approx(0.6)
    assert row["mean_sr_ci"] == pytest.approx(T975_DF2 * 0.1 / math.sqrt(3))
    assert row["mean_sr_n"] == 3
    # TTT in millions: [1, 2, 3] -> mean 2, s = 1, half = 4.302653 / sqrt(3) = 2.484138
    assert row["ttt"] == pytest.approx(2.0)
    assert row["ttt_ci"] == pytest.approx(2.4841377118)
    # nBWT: NaN dropped -> [-0.5, -0.3]: mean -0.4, s = sqrt(0.02), half = 12.7062 * 0.1
    assert row["nbwt"] == pytest.approx(-0.4)
    assert row["nbwt_ci"] == pytest.approx(T975_DF1 * 0.1)
    assert row["nbwt_n"] == 2
    # Identical values: zero width.
    assert (row["bwt"], row["bwt_ci"]) == pytest.approx((-0.1, 0.0))
    # One run: mean, NaN half width, n = 1.
    single = table.loc["Scratch"]
    assert single["mean_sr"] == pytest.approx(0.4)
    assert math.isnan(single["mean_sr_ci"]) and single["mean_sr_n"] == 1
    assert table["runs"].tolist() == [3, 1]
    for m in ("mean_sr", "ttt", "bwt", "coverage", "nbwt", "tr", "coverage_last"):
        assert {m, f"{m}_ci", f"{m}_n", f"{m}_lo", f"{m}_hi"} <= set(table.columns)
    # bootstrap over the three runs (no per-task terms): a resample mean is 0.5 with chance
    # 1/27 > 2.5% (and 0.7 likewise), so the interval is [0.5, 0.7]; TTT [1, 3]
    assert (row["mean_sr_lo"], row["mean_sr_hi"]) == pytest.approx((0.5, 0.7))
    assert (row["ttt_lo"], row["ttt_hi"]) == pytest.approx((1.0, 3.0))
    assert math.isnan(single["mean_sr_lo"])  # one run: nothing to resample


def test_summarize_all_nan_metric():
    table = summarize({"L2Init": [rm(nbwt=math.nan), rm(nbwt=math.nan)]})
    assert math.isnan(table.loc["L2Init", "nbwt"]) and table.loc["L2Init", "nbwt_n"] == 0


def test_revisit_table_by_hand():
    runs = {
        "TeLAPA": [
            rm(revisit_sr={"A'": 0.5, "B'": 1.0}),
            rm(revisit_sr={"A'": 0.7}),
            rm(revisit_sr={"A'": 0.9, "B'": 0.0}),
        ],
        "EWC": [rm(revisit_sr={"C'": 0.3}), rm(revisit_sr={"C'": 0.1})],
    }
    table = revisit_table(runs)
    assert list(table.index) == ["TeLAPA", "EWC"]
    assert list(table.columns) == ["A'", "B'", "C'"]
    # A': (0.5 + 0.7 + 0.9) / 3 = 0.7; B': over the two runs that have it, (1.0 + 0.0) / 2
    assert table.loc["TeLAPA", "A'"] == pytest.approx(0.7)
    assert table.loc["TeLAPA", "B'"] == pytest.approx(0.5)
    assert math.isnan(table.loc["TeLAPA", "C'"])
    assert table.loc["EWC", "C'"] == pytest.approx(0.2)
    assert table.loc[:, "A'"].isna().tolist() == [False, True]


def test_revisit_summary_by_hand():
    runs = {"TeLAPA": [rm(revisit_sr={"A'": 0.2, "B'": 1.0}), rm(revisit_sr={"A'": 0.6})],
            "EWC": [rm(revisit_sr={"B'": 0.3})]}
    table = revisit_summary(runs)
    # A' over two runs: mean 0.4, s = sqrt(0.08) = 0.2828, se = 0.2, t_{0.975, 1} = 12.706
    assert table.loc["TeLAPA", "A'"] == pytest.approx(0.4)
    assert table.loc["TeLAPA", "A'_ci"] == pytest.approx(12.7062 * 0.2, rel=1e-4)
    assert table.loc["TeLAPA", "A'_n"] == 2
    # one run: a mean without a half width; no run: NaN, n = 0
    assert table.loc["TeLAPA", "B'"] == 1.0 and math.isnan(table.loc["TeLAPA", "B'_ci"])
    assert math.isnan(table.loc["EWC", "A'"]) and table.loc["EWC", "A'_n"] == 0
    # bootstrap of the mean of {0.2, 0.6}: resample means 0.2, 0.4, 0.6 with chances
    # 1/4, 1/2, 1/4, so the 2.5% and 97.5% quantiles are 0.2 and 0.6; one run: none
    assert (table.loc["TeLAPA", "A'_lo"], table.loc["TeLAPA", "A'_hi"]) == (0.2, 0.6)
    assert math.isnan(table.loc["TeLAPA", "B'_lo"])
    assert list(table.columns) == [f"{t}{s}" for t in ("A'", "B'")
                                   for s in ("", "_ci", "_n", "_lo", "_hi")]
    plain = revisit_table(runs)  # the same means
    assert np.allclose(table[list(plain.columns)].to_numpy(), plain.to_numpy(),
                       equal_nan=True)


def test_revisit_table_without_revisits():
    table = revisit_table({"Scratch": [rm(), rm()]})
    assert list(table.index) == ["Scratch"] and table.columns.empty
    assert isinstance(table, pd.DataFrame)


def test_format_cell():
    assert format_cell(0.70612, 0.0812, 3, ci_digits=2) == "0.706 ± 0.08"
    assert format_cell(-0.2834, 0.0521, 3) == "-0.283 ± 0.052"
    assert format_cell(7.7549, 2.19) == "7.755 ± 2.190"
    assert format_cell(0.5, math.nan, 2) == "0.50 ± n/a"
    assert format_cell(math.nan, math.nan) == "n/a"


def test_summary_bootstrap_resamples_runs_or_stratifies_over_task_terms():
    # Four runs of two revisits X, Y; runs 0 and 2 score (0, 1), runs 1 and 3 (1, 0): each
    # run's Mean SR is 0.5, and so is every whole-run resample. Stratified (rliable) it
    # resamples X's and Y's runs apart and varies. The censored revisits are summed.
    def run(x: float, y: float) -> RunMetrics:
        return RunMetrics(mean_sr=0.5, ttt=2e6, ttt_censored=1, revisits=2, bwt=0.0,
                          coverage=0.5, nbwt=math.nan, tr=0.0, revisit_sr={"X": x, "Y": y},
                          task_terms={"mean_sr": {"X": x, "Y": y},
                                      "ttt": {"X": 1e6, "Y": 3e6}})
    runs = [run(0.0, 1.0), run(1.0, 0.0), run(0.0, 1.0), run(1.0, 0.0)]
    assert metric_scores(runs, "mean_sr").tolist() == [[0.0, 1.0], [1.0, 0.0]] * 2
    assert metric_scores(runs, "ttt").tolist() == [[1.0, 3.0]] * 4  # millions of steps
    assert metric_scores(runs, "bwt").tolist() == [0.0] * 4  # no terms: per run
    assert metric_scores(runs, "nbwt").size == 0  # undefined on every run
    row = summarize({"m": runs}, n_resamples=500).loc["m"]
    assert (row["mean_sr_lo"], row["mean_sr_hi"]) == (0.5, 0.5)
    assert (row["ttt_lo"], row["ttt_hi"]) == (2.0, 2.0)
    assert (row["ttt_censored"], row["revisits"]) == (4, 8)
    stratified = summarize({"m": runs}, n_resamples=500, resample="tasks").loc["m"]
    assert stratified["mean_sr_lo"] < 0.5 < stratified["mean_sr_hi"]
    assert (stratified["ttt_lo"], stratified["ttt_hi"]) == (2.0, 2.0)


def test_format_cell_with_an_interval():
    assert format_cell(0.6, 0.68, 3, interval=(0.2, 1.0)) == "0.600 ± 0.680 [0.200, 1.000]"
    assert format_cell(0.6, math.nan, 2, interval=(math.nan, math.nan)) == "0.60 ± n/a"


def test_cells_round_the_decimal_a_float_reads_as_not_the_binary_float():
    """An exact mean rounded once to a float (359/400 = 0.8975: Scratch-Reuse's E' over
    the paper-budget seeds) is shown as that decimal rounds, half to even: 0.898, where
    formatting the binary float (just below 0.8975) gave 0.897; 0.7585 stays 0.758 (8
    is even), 0.7395 reads 0.740, and the interval's bounds follow the same rule."""
    from fractions import Fraction

    from telapa.metrics import fixed

    assert f"{float(Fraction(359, 400)):.3f}" == "0.897"  # what the tables showed
    assert fixed(float(Fraction(359, 400)), 3) == "0.898"
    assert fixed(float(Fraction(1517, 2000)), 3) == "0.758"
    assert fixed(float(Fraction(1479, 2000)), 3) == "0.740"
    assert fixed(0.1234, 2) == "0.12" and fixed(2.5, 0) == "2" and fixed(3.5, 0) == "4"
    assert fixed(float("nan"), 3) == "nan"
    assert format_cell(0.8975, 0.0125, interval=(0.1125, 0.9995)) == \
        "0.898 ± 0.012 [0.112, 1.000]"
