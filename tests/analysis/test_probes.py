"""Probe outcomes per transfer, against values computed by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from telapa.analysis.probes import (
    OUTCOME_COLUMNS,
    SUMMARY_COLUMNS,
    probe_outcomes,
    summarize_probe_outcomes,
)

VISITS = pd.DataFrame({"visit": range(4), "tag": ["A", "B", "A'", "B'"],
                       "task": ["A", "B", "A", "B"], "pre_sr": [0.0, 0.1, 0.5, 0.0],
                       "post_sr": [0.9, 0.0, 1.0, 0.0]})


def candidates(rows: list[tuple[int, str, float, float, bool]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["target_visit", "target", "y", "auc", "chosen"])


def test_outcomes_per_transfer() -> None:
    frame = candidates([
        # into B: every probe at 0 throughout -> flat; the first (fittest) chosen
        (1, "B", 0.0, 0.0, True), (1, "B", 0.0, 0.0, False), (1, "B", 0.0, 0.0, False),
        # into A': best 0.8, the chosen 0.6 (its score won inside the window)
        (2, "A'", 0.6, 0.4, True), (2, "A'", 0.8, 0.5, False),
        # into B': every final SR 0, but one probe saw success mid-way -> not flat
        (3, "B'", 0.0, 0.0, False), (3, "B'", 0.0, 0.1, True),
    ])
    out = probe_outcomes(frame, VISITS)
    assert list(out.columns) == list(OUTCOME_COLUMNS)
    assert out["target"].tolist() == ["B", "A'", "B'"]
    assert out["n_probes"].tolist() == [3, 2, 2]
    assert out["best_y"].tolist() == [0.0, 0.8, 0.0]
    assert out["chosen_y"].tolist() == [0.0, 0.6, 0.0]
    assert out["flat"].tolist() == [True, False, False]
    assert out["pre_sr"].tolist() == [0.1, 0.5, 0.0]
    assert out["post_sr"].tolist() == [0.0, 1.0, 0.0]


def test_missing_auc_counts_as_zero_and_missing_sr_columns_are_nan() -> None:
    frame = candidates([(1, "B", 0.0, math.nan, True), (1, "B", 0.0, math.nan, False)])
    out = probe_outcomes(frame, VISITS[["visit", "tag", "task"]])
    assert out["flat"].tolist() == [True]
    assert math.isnan(out["pre_sr"].iloc[0]) and math.isnan(out["post_sr"].iloc[0])


def test_a_transfer_needs_exactly_one_chosen_candidate() -> None:
    frame = candidates([(1, "B", 0.2, 0.1, True), (1, "B", 0.3, 0.1, True)])
    with pytest.raises(ValueError, match=r"visit 1 \(B\) has 2 chosen"):
        probe_outcomes(frame, VISITS)
    with pytest.raises(ValueError, match="missing column"):
        probe_outcomes(frame.drop(columns="auc"), VISITS)


def test_summary_pools_transfers_per_target_in_curriculum_order() -> None:
    run0 = probe_outcomes(candidates([
        (2, "A'", 0.6, 0.4, True), (2, "A'", 0.8, 0.5, False),
        (1, "B", 0.0, 0.0, True), (1, "B", 0.0, 0.0, False),
    ]), VISITS)
    run1 = probe_outcomes(candidates([
        (1, "B", 0.4, 0.2, False), (1, "B", 0.2, 0.1, True),
    ]), VISITS.assign(post_sr=[0.9, 1.0, 1.0, 0.0]))
    summary = summarize_probe_outcomes(pd.concat([run0, run1], ignore_index=True),
                                       {"A": 0, "B": 1, "A'": 2, "B'": 3})
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert summary.index.tolist() == ["B", "A'"]
    # B: run 0 flat (best 0, chosen 0, post 0.0), run 1 not (best 0.4, chosen 0.2, post 1.0)
    assert summary.loc["B", "transfers"] == 2 and summary.loc["B", "flat"] == 1
    assert summary.loc["B", "best_y"] == pytest.approx(0.2)
    assert summary.loc["B", "chosen_y"] == pytest.approx(0.1)
    assert summary.loc["B", "pre_sr"] == pytest.approx(0.1)
    assert summary.loc["B", "post_sr"] == pytest.approx(0.5)
    assert summary.loc["A'", "transfers"] == 1 and summary.loc["A'", "flat"] == 0


def test_no_transfers_give_empty_tables() -> None:
    out = probe_outcomes(candidates([]), VISITS)
    assert out.empty and list(out.columns) == list(OUTCOME_COLUMNS)
    summary = summarize_probe_outcomes(out, {})
    assert summary.empty and list(summary.columns) == list(SUMMARY_COLUMNS)


def test_a_fresh_probe_counts_as_one_more_candidate() -> None:
    frame = candidates([
        # into B: the elites flat, the fresh network flat too and chosen (no success)
        (1, "B", 0.0, 0.0, False), (1, "B", 0.0, 0.0, False),
        # into A': an elite ends at 0.8 and is chosen, the fresh network ends at 0.1
        (2, "A'", 0.8, 0.5, True), (2, "A'", 0.6, 0.4, False),
        # into B': every elite flat, the fresh network succeeded mid-way: not flat
        (3, "B'", 0.0, 0.0, False), (3, "B'", 0.0, 0.0, False),
    ])
    fresh = pd.DataFrame([(1, "B", 0.0, 0.0, 0.0, 0.0, True),
                          (2, "A'", 0.1, 0.0, 0.1, 0.05, False),
                          (3, "B'", 0.0, 0.0, 0.0, 0.2, True)],
                         columns=["target_visit", "target", "y", "sr0", "slope", "auc",
                                  "chosen"])
    out = probe_outcomes(frame, VISITS, fresh)
    assert list(out.columns) == [*OUTCOME_COLUMNS, "origin", "fresh_y"]
    assert out["n_probes"].tolist() == [3, 3, 3]
    assert out["origin"].tolist() == ["fresh", "elite", "fresh"]
    assert out["fresh_y"].tolist() == [0.0, 0.1, 0.0]
    assert out["chosen_y"].tolist() == [0.0, 0.8, 0.0]
    assert out["flat"].tolist() == [True, False, False]
    summary = summarize_probe_outcomes(out, {"A": 0, "B": 1, "A'": 2, "B'": 3})
    assert list(summary.columns) == [*SUMMARY_COLUMNS, "fresh_starts", "fresh_y"]
    assert summary["fresh_starts"].tolist() == [1, 0, 1]
    assert summary.loc["A'", "fresh_y"] == pytest.approx(0.1)
    # a transfer without its fresh probe, where the others have one, is an error
    with pytest.raises(ValueError, match=r"visit 3 \(B'\) has no fresh probe"):
        probe_outcomes(frame, VISITS, fresh.iloc[:2])
