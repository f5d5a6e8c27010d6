"""rliable's aggregates in the report and in `telapa metrics`: the revisit scores, mean and
IQM, performance profile and probability of improvement, checked by hand on synthetic runs;
and the tables and figure in a report and in `telapa metrics --json` of real runs."""

from __future__ import annotations

import json
import math

import pytest

from telapa.cli import main
from telapa.metrics.aggregates import performance_profile_interval
from telapa.metrics.stats import bootstrap_interval
from telapa.report.aggregates import (
    PROFILE_TAUS,
    aggregates_table,
    improvement_table,
    profile_table,
    revisit_scores,
)
from telapa.report.build import curriculum_tables
from telapa.report.curves import profile_figure
from telapa.report.results import score

from .records import record

FINETUNE = (0.0, 0.2, 0.4, 1.0)  # A' post SR of seeds 0..3
TELAPA = (0.5, 0.7, 0.9, 0.3)


@pytest.fixture(scope="module")
def result():
    runs = [record("finetune", s, [[0.0, 0.5, 0.9], [0.0, 0.5, 0.8], [0.0, v / 2, v]])
            for s, v in enumerate(FINETUNE)]
    runs += [record("telapa", s, [[0.0, 0.5, 0.9], [0.0, 0.5, 0.8], [0.0, v / 2, v]])
             for s, v in enumerate(TELAPA)]
    return score(runs)["toy"]


def test_revisit_scores_are_runs_by_revisits(result):
    scores = revisit_scores(result)
    assert scores["finetune"].tolist() == [[v] for v in FINETUNE]
    assert scores["telapa"].tolist() == [[v] for v in TELAPA]


def test_mean_and_iqm_by_hand(result):
    values = aggregates_table(result, prefix="toy", n_resamples=500).values
    # finetune 0, 0.2, 0.4, 1: mean 0.4; IQM cuts one at each end: (0.2 + 0.4) / 2 = 0.3
    assert values.loc["finetune", "mean"] == pytest.approx(0.4)
    assert values.loc["finetune", "iqm"] == pytest.approx(0.3)
    assert values.loc["finetune", "scores"] == 4
    for statistic in ("mean", "iqm"):
        lo, hi = values.loc["finetune", [f"{statistic}_lo", f"{statistic}_hi"]]
        assert 0.0 <= lo <= values.loc["finetune", statistic] <= hi <= 1.0


def test_profile_by_hand(result):
    table = profile_table(result, prefix="toy", n_resamples=500)
    # tau 0: finetune 3 of 4 above (0 is not above 0); tau 0.25: {0.4, 1} 2 of 4;
    # telapa: all above 0 and 0.25, {0.7, 0.9} above 0.5
    assert table.values.loc["finetune", ["sr>0", "sr>0.25", "sr>0.5"]].tolist() == [
        0.75, 0.5, 0.25]
    assert table.values.loc["telapa", ["sr>0", "sr>0.25", "sr>0.5"]].tolist() == [
        1.0, 1.0, 0.5]
    assert table.cells().at["telapa", "SR > 0"] == "1.00 [1.00, 1.00]"


def test_probability_of_improvement_by_hand(result):
    values = improvement_table(result, prefix="toy", n_resamples=200).values
    # pairs (telapa, finetune) with telapa above: 0.5, 0.7, 0.9 beat 0, 0.2, 0.4 (9);
    # 0.3 beats 0 and 0.2 (2) -> 11 of 16
    assert values.loc["telapa", "finetune"] == pytest.approx(11 / 16)
    assert values.loc["finetune", "telapa"] == pytest.approx(5 / 16)
    assert math.isnan(values.loc["telapa", "telapa"])
    assert values.loc["telapa", "finetune_lo"] <= 11 / 16 <= values.loc["telapa", "finetune_hi"]


def test_report_tables_and_figure(result):
    ids = [t.id for t in curriculum_tables(result, prefix="toy")]
    assert {"toy-aggregates", "toy-profile", "toy-improvement", "toy-claims",
            "toy-claim-tests"} <= set(ids)
    fig = profile_figure(result, title="toy", n_resamples=200)
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["finetune", "telapa"]


def test_metrics_command_prints_the_aggregates(quick_runs, capsys):
    runs = [str(p) for p in quick_runs.values()]
    assert main(["metrics", *runs, "--json"]) == 0
    smoke = json.loads(capsys.readouterr().out)["smoke"]
    assert set(smoke["aggregates"]) == set(smoke["profile"]) == {"finetune", "telapa"}
    p = smoke["improvement"]
    assert p["telapa"]["finetune"] + p["finetune"]["telapa"] == pytest.approx(1.0)
    assert p["telapa"]["telapa"] is None  # NaN on the diagonal -> null
    summary = smoke["summary"]["telapa"]
    assert {"coverage_last", "mean_sr_lo", "mean_sr_hi", "ttt_censored"} <= set(summary)
    assert main(["metrics", *runs]) == 0
    shown = capsys.readouterr().out
    for title in ("Continual-transfer metrics", "Aggregate revisit success rate",
                  "Performance profile", "Probability of improvement", "TTT censored"):
        assert title in shown


def test_the_stratified_bootstrap_is_one_option_away(result, quick_runs, capsys):
    """``resample="tasks"`` (``--resample tasks``) reaches every interval: each equals the
    metrics' own stratified interval, and the notes say what was resampled."""
    scores = revisit_scores(result)["finetune"]
    table = aggregates_table(result, prefix="toy", n_resamples=300, resample="tasks")
    for statistic in ("mean", "iqm"):
        lo, hi = bootstrap_interval(scores, statistic=statistic, n_resamples=300,
                                    resample="tasks")
        assert table.values.loc["finetune", [f"{statistic}_lo", f"{statistic}_hi"]].tolist() \
            == [lo, hi]
    assert "stratified bootstrap" in table.caption
    assert "whole runs" in aggregates_table(result, prefix="toy", n_resamples=300).caption
    profile = profile_table(result, prefix="toy", n_resamples=300, resample="tasks")
    lo, _ = performance_profile_interval(scores, taus=PROFILE_TAUS, n_resamples=300,
                                         resample="tasks")
    assert profile.values.loc["finetune", "sr>0_lo"] == lo[0]
    assert "runs per revisit" in improvement_table(result, prefix="toy", n_resamples=100,
                                                   resample="tasks").caption
    ids = {t.id: t for t in curriculum_tables(result, prefix="toy", resample="tasks")}
    assert "stratified bootstrap" in ids["toy-aggregates"].caption
    runs = [str(p) for p in quick_runs.values()]
    assert main(["metrics", *runs, "--json", "--resample", "tasks"]) == 0
    assert set(json.loads(capsys.readouterr().out)["smoke"]["aggregates"]) == {
        "finetune", "telapa"}
