"""Analysis tables and figures of in-memory TeLAPA runs, including degenerate ones."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from telapa.analysis.data import TeLAPARun
from telapa.analysis.panels import analysis_figures, analysis_panels, analysis_tables

FIGURES = {"local_transfer", "qd_structure", "lineage", "lineage_utility", "geometry"}
VISITS = pd.DataFrame({"visit": range(4), "tag": ["A", "B", "A'", "B'"],
                       "task": ["A", "B", "A", "B"]})


def cand(elite_id: int, visit: int, fitness: float, y: float, z: tuple[float, float],
         lineage: list[int]) -> dict:
    return {"elite_id": elite_id, "task": visit, "fitness": fitness, "descriptor": list(z),
            "lineage": lineage, "sr0": 0.0, "sr_final": y, "slope": 0.0, "auc": 0.0}


def transfer(visit: int, candidates: list[dict], index: int = 0) -> dict:
    return {"event": "transfer", "visit": visit, "index": index, "candidates": candidates}


def make_run(seed: int, final_sr: float, shift: float) -> TeLAPARun:
    """Curriculum A B A' B'; 4 elites per archive; transfers into B, A' and B'.

    Pairs: B <- A (3 candidates), A' <- A (2), A' <- B (2), B' <- A (2, from visit A'),
    B' <- B (1: excluded).
    """
    rng = np.random.default_rng(seed)
    elites = pd.DataFrame({
        "task": ["A"] * 4 + ["B"] * 4, "visit": [0, 0, 2, 2, 1, 1, 3, 3],
        "fitness": rng.uniform(0, 1, 8), "lineage": [[0], [0], [0, 2], [0, 2], [0, 1]] + [[1]] * 3,
        "d_0": np.r_[rng.normal(0, 1, 4), rng.normal(shift, 1, 4)],
        "d_1": rng.normal(0, 1, 8),
    })
    transfers = [
        transfer(1, [cand(1, 0, 0.9, 0.2, (0, 0), [0]), cand(2, 0, 0.85, 0.6, (1, 0), [0]),
                     cand(3, 0, 0.8, 1.0, (4, 0), [0])]),
        transfer(2, [cand(1, 0, 0.9, 0.5, (0, 0), [0]), cand(2, 0, 0.88, 0.7, (0, 1), [0]),
                     cand(5, 1, 0.6, 0.1, (5, 5), [0, 1]), cand(6, 1, 0.3, 0.3, (5, 6), [1])],
                 index=1),
        transfer(3, [cand(7, 2, 1.0, 0.9, (0, 0), [0, 2]), cand(8, 2, 0.2, 0.4, (2, 0), [0, 2]),
                     cand(5, 1, 0.6, 0.3, (5, 5), [0, 1])]),
    ]
    final = pd.DataFrame({"task": ["A", "B"], "sr": [final_sr, final_sr]})
    return TeLAPARun(Path(f"runs/seed{seed}"), "smoke", "telapa", seed, VISITS, final, elites,
                     transfers)


def degenerate_run() -> TeLAPARun:
    """Visits A, B; one elite per archive; one transfer with a single candidate."""
    visits = VISITS.iloc[:2]
    elites = pd.DataFrame({"task": ["A", "B"], "visit": [0, 1], "fitness": [0.0, 0.0],
                           "lineage": [[0], [0, 1]], "d_0": [0.0, 1.0], "d_1": [0.0, 0.0]})
    final = pd.DataFrame({"task": ["A", "B"], "sr": [0.0, 0.0]})
    return TeLAPARun(Path("runs/degenerate"), "smoke", "telapa", 9, visits, final, elites,
                     [transfer(1, [cand(1, 0, 0.0, 0.0, (0, 0), [0])])])


def texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_tables_pool_runs() -> None:
    runs = [make_run(0, 0.8, 6.0), make_run(1, 0.2, 3.0)]
    tables = analysis_tables(runs, gamma=0.8, tau=0.5)
    assert {"local_transfer_pairs", "local_transfer_summary", "separation_ratio",
            "immediate_sources", "ancestry", "novelty_summary"} <= set(tables)

    pairs = tables["local_transfer_pairs"]
    assert pairs["run"].tolist() == ["telapa seed 0"] * 5 + ["telapa seed 1"] * 5
    assert pairs["n_candidates"].tolist() == [3, 2, 2, 2, 1] * 2
    # B <- A: pi* = 1 (y 0.2); gamma 0.8: G = {f >= 0.72} = {1, 2, 3} at d = 0, 1, 4
    # -> rho = 0, 0.5, 1; Delta_good = 1.0 - 0.2; tau 0.5: B = {1, 2}, Delta_local = 0.6 - 0.2
    assert pairs["delta_good"].iloc[0] == pytest.approx(0.8)
    assert pairs["delta_local"].iloc[0] == pytest.approx(0.4)
    # delta_i of elite 2 (rho 0.5, bin (0.375, 0.5]) in each run
    deltas = tables["local_deltas"]
    assert deltas["elite_id"].tolist() == [2, 2] and deltas["rank_bin"].tolist() == [3, 3]
    summary = tables["local_transfer_summary"]
    assert summary.loc["delta_good", "n"] == 8 and summary.loc["delta_good", "n_excluded"] == 2

    # per run: A -> B 3, A -> A' 2, B -> A' 2, A' -> B' 2, B -> B' 1; two runs: doubled
    expected = pd.DataFrame([[6, 4, 0], [0, 4, 2], [0, 0, 4]],
                            index=["A", "B", "A'"], columns=["B", "A'", "B'"])
    pd.testing.assert_frame_equal(tables["immediate_sources"], expected, check_names=False)
    # ancestry of B': lineages [0, 2], [0, 2], [0, 1] -> A 3, B 1, A' 2, per run
    assert tables["ancestry"]["B'"].to_dict() == {"A": 6, "B": 2, "A'": 4}

    assert list(tables["separation_ratio"].index) == ["A", "B"]
    novelty = tables["novelty_summary"]
    assert novelty.loc["A", "n_elites"] == 8 and novelty.loc["A", "n_runs"] == 2
    assert set(tables["lineage_utility"]["property"]) == {
        "breadth_rich", "has_target_family", "non_adjacent"}

    # probes per run: into B (chosen 0.2, best 1.0), A' (chosen 0.7 = index 1, best 0.7),
    # B' (chosen 0.9); no transfer is flat
    outcomes = tables["probe_outcomes"]
    assert outcomes["run"].tolist() == ["telapa seed 0"] * 3 + ["telapa seed 1"] * 3
    assert outcomes["chosen_y"].tolist() == [0.2, 0.7, 0.9] * 2
    probes = tables["probe_summary"]
    assert probes.index.tolist() == ["B", "A'", "B'"]
    assert probes["transfers"].tolist() == [2, 2, 2] and probes["flat"].tolist() == [0, 0, 0]
    assert probes.loc["B", "best_y"] == pytest.approx(1.0)


def test_figures_render() -> None:
    runs = [make_run(0, 0.8, 6.0), make_run(1, 0.2, 3.0)]
    figures = analysis_figures(runs, gamma=0.8, tau=0.6, seed=1)
    assert set(figures) == FIGURES
    for fig in figures.values():
        assert isinstance(fig, Figure) and fig.axes
        fig.savefig(io.BytesIO(), format="png")
    title = figures["local_transfer"].get_suptitle()
    assert "gamma = 0.8" in title and "tau = 0.6" in title
    geometry = [ax.get_title() for ax in figures["geometry"].axes]
    assert "best run: telapa seed 0" in geometry[0] and "worst run: telapa seed 1" in geometry[1]


def test_panels_are_the_tables_and_figures_in_one_pass() -> None:
    runs = [make_run(0, 0.8, 6.0), make_run(1, 0.2, 3.0)]
    tables, figures = analysis_panels(runs, gamma=0.8, tau=0.6)
    expected = analysis_tables(runs, gamma=0.8, tau=0.6)
    assert set(tables) == set(expected) and set(figures) == FIGURES
    for name, table in expected.items():
        pd.testing.assert_frame_equal(tables[name], table)


@pytest.mark.parametrize("runs", [
    pytest.param([degenerate_run()], id="one-candidate"),
    pytest.param([TeLAPARun(Path("runs/empty"), "smoke", "telapa", 0, VISITS.iloc[:1],
                            pd.DataFrame({"task": ["A"], "sr": [1.0]}),
                            pd.DataFrame({"task": ["A"], "visit": [0], "fitness": [0.5],
                                          "lineage": [[0]], "d_0": [0.0], "d_1": [0.0]}), [])],
                 id="no-transfer"),
])
def test_degenerate_figures_say_no_data(runs: list[TeLAPARun]) -> None:
    figures = analysis_figures(runs)
    assert set(figures) == FIGURES
    for fig in figures.values():
        assert fig.axes
        fig.savefig(io.BytesIO(), format="png")
    assert "no pair with >= 2 candidates" in texts(figures["local_transfer"])
    assert "no archive with >= 2 elites" in texts(figures["qd_structure"])


def test_no_runs_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one TeLAPA run"):
        analysis_tables([])
