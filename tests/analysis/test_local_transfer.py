"""Local transfer statistics on hand-made candidate sets (arithmetic in comments)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from telapa.analysis.local_transfer import (
    local_deltas,
    pair_statistics,
    rank_bin_labels,
    summarize_pairs,
)


def frame(rows: list[tuple]) -> pd.DataFrame:
    cols = ["target_visit", "target", "source_family", "elite_id", "fitness", "y", "z_0", "z_1"]
    return pd.DataFrame(rows, columns=cols)


# Pair (C <- A): pi* = elite 10 (f* = 1.0) at z* = (0, 0).
# gamma = 0.9: G = {f >= 0.9} = {10, 11, 12, 14}; elite 13 (f = 0.5) is not competent.
# d: 10 -> 0, 11 -> ||(3,4)|| = 5, 12 -> 1, 13 -> 10, 14 -> 2.
# Ranks in G by d: 10 (0), 12 (1), 14 (2), 11 (5) -> rho = 0, 1/3, 2/3, 1.
PAIR_CA = [
    (2, "C", "A", 10, 1.00, 0.5, 0.0, 0.0),
    (2, "C", "A", 11, 0.95, 0.7, 3.0, 4.0),
    (2, "C", "A", 12, 0.90, 0.4, 1.0, 0.0),
    (2, "C", "A", 13, 0.50, 0.9, 0.0, 10.0),
    (2, "C", "A", 14, 0.92, 0.6, 0.0, 2.0),
]
# Pair (C <- B): a single candidate, no local information.
PAIR_CB = [(2, "C", "B", 20, 0.8, 0.3, 5.0, 5.0)]
# Pair (A' <- A): f* = 0 (tie: the first is pi*), both at the same point.
# G = {f >= 0.9 * 0} = both; d = 0, 0; ties put pi* first: rho = 0, 1.
PAIR_AA = [
    (3, "A'", "A", 30, 0.0, 0.2, 1.0, 1.0),
    (3, "A'", "A", 31, 0.0, 0.6, 1.0, 1.0),
]


def test_pair_statistics_hand_computed() -> None:
    pairs = pair_statistics(frame(PAIR_CA + PAIR_CB + PAIR_AA), gamma=0.9, tau=0.5)
    assert list(pairs["source_family"]) == ["A", "B", "A"]
    ca, cb, aa = (pairs.iloc[i] for i in range(3))

    assert (ca["n_candidates"], ca["n_good"]) == (5, 4)
    # B = {rho <= 0.5} = {10 (rho 0), 12 (rho 1/3)}
    assert ca["n_basin"] == 2
    assert (ca["f_star"], ca["y_star"]) == (1.0, 0.5)
    # Delta_good = max(0.5, 0.7, 0.4, 0.6) - 0.5 = 0.2 (elite 13's y = 0.9 is not in G)
    assert ca["delta_good"] == pytest.approx(0.2)
    # d over G sorted: 0, 1, 2, 5; Q_0.75 at position 0.75 * 3 = 2.25: 2 + 0.25 * (5 - 2)
    # = 2.75; max over C = 10 (elite 13) -> Span = 0.275
    assert ca["span_75"] == pytest.approx(0.275)
    # Delta_local = max(0.5, 0.4) - 0.5 = 0
    assert ca["delta_local"] == pytest.approx(0.0)

    assert cb["n_candidates"] == 1
    assert all(math.isnan(cb[s]) for s in ("delta_good", "span_75", "delta_local"))

    # Delta_good = 0.6 - 0.2 = 0.4; Span = Q / max d = 0 / 0 -> NaN; B = {pi*} -> 0
    assert aa["delta_good"] == pytest.approx(0.4)
    assert math.isnan(aa["span_75"])
    assert aa["delta_local"] == pytest.approx(0.0)


def test_wider_basin_finds_the_local_gain() -> None:
    # tau = 0.7: B = {10, 12, 14 (rho 2/3)}; Delta_local = max(0.5, 0.4, 0.6) - 0.5 = 0.1
    pairs = pair_statistics(frame(PAIR_CA), gamma=0.9, tau=0.7)
    assert pairs["n_basin"].iloc[0] == 3
    assert pairs["delta_local"].iloc[0] == pytest.approx(0.1)
    # gamma = 1: G = {pi*} -> Delta_good = 0, Span = Q_0.75({0}) / 10 = 0
    strict = pair_statistics(frame(PAIR_CA), gamma=1.0, tau=0.7).iloc[0]
    assert (strict["n_good"], strict["delta_good"], strict["span_75"]) == (1, 0.0, 0.0)


def test_negative_source_best_keeps_itself_competent() -> None:
    # f* = -1: threshold (2 - 0.9) * -1 = -1.1 -> G = {-1.0, -1.05}; -2.0 is out.
    # (gamma * f* = -0.9 would exclude pi* itself.)
    rows = [(1, "B", "A", i, f, 0.0, float(i), 0.0) for i, f in enumerate((-1.0, -1.05, -2.0))]
    assert pair_statistics(frame(rows), gamma=0.9, tau=0.5)["n_good"].iloc[0] == 2


def test_local_deltas_and_rank_bins() -> None:
    # tau = 0.5, 4 bins of (0, 0.5]: (0, .125], (.125, .25], (.25, .375], (.375, .5].
    # B \ {pi*} = {12}: rho 1/3 -> bin 2, delta = 0.4 - 0.5 = -0.1. The C <- B pair adds
    # nothing; in A' <- A, elite 31 has rho 1 > 0.5.
    deltas = local_deltas(frame(PAIR_CA + PAIR_CB + PAIR_AA), gamma=0.9, tau=0.5, bins=4)
    assert list(deltas["elite_id"]) == [12]
    row = deltas.iloc[0]
    assert (row["d"], row["rho"], row["rank_bin"]) == (1.0, pytest.approx(1 / 3), 2)
    assert row["delta"] == pytest.approx(-0.1)
    # tau = 0.7, 2 bins (0, .35], (.35, .7]: 12 (rho 1/3) -> bin 0, delta -0.1;
    # 14 (rho 2/3) -> bin 1, delta 0.6 - 0.5 = +0.1
    wide = local_deltas(frame(PAIR_CA), gamma=0.9, tau=0.7, bins=2)
    assert list(wide["elite_id"]) == [12, 14]
    assert list(wide["rank_bin"]) == [0, 1]
    np.testing.assert_allclose(wide["delta"], [-0.1, 0.1])
    assert rank_bin_labels(tau=0.7, bins=2) == ["(0.00, 0.35]", "(0.35, 0.70]"]


def test_rank_bins_are_right_closed() -> None:
    # G of 5 at d = 0..4: rho = 0, .25, .5, .75, 1; tau = 0.5, 2 bins (0, .25], (.25, .5]:
    # rho .25 -> bin 0 (closed on the right), rho .5 -> bin 1.
    rows = [(1, "B", "A", i, 1.0, 0.0, float(i), 0.0) for i in range(5)]
    deltas = local_deltas(frame(rows), gamma=0.9, tau=0.5, bins=2)
    assert list(deltas["rho"]) == [0.25, 0.5]
    assert list(deltas["rank_bin"]) == [0, 1]


def test_summarize_pairs() -> None:
    # Used pairs: C <- A (0.2, 0.275, 0) and A' <- A (0.4, NaN, 0); C <- B is excluded.
    summary = summarize_pairs(pair_statistics(frame(PAIR_CA + PAIR_CB + PAIR_AA)))
    good, span, local = (summary.loc[s] for s in ("delta_good", "span_75", "delta_local"))
    assert (good["n"], good["n_excluded"]) == (2, 1)
    assert good["mean"] == pytest.approx(0.3)  # (0.2 + 0.4) / 2
    assert good["frac_positive"] == 1.0
    assert (span["n"], span["median"]) == (1, pytest.approx(0.275))
    assert math.isnan(span["frac_positive"])
    assert (local["n"], local["frac_positive"]) == (2, 0.0)


def test_empty_and_invalid_inputs() -> None:
    empty = frame([])
    assert pair_statistics(empty).empty
    assert local_deltas(empty).empty
    assert summarize_pairs(pair_statistics(empty))["n"].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="gamma"):
        pair_statistics(frame(PAIR_CA), gamma=0.0)
    with pytest.raises(ValueError, match="tau"):
        local_deltas(frame(PAIR_CA), tau=1.5)
    with pytest.raises(ValueError, match="bins"):
        local_deltas(frame(PAIR_CA), bins=0)
    with pytest.raises(ValueError, match=r"\['fitness'\]"):
        pair_statistics(frame(PAIR_CA).drop(columns="fitness"))
