"""Per-run metrics against a hand-worked 3-task, 2-cycle example (arithmetic in comments)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from telapa.metrics import (
    RunMetrics,
    best_sr,
    competence_targets,
    run_metrics,
    time_to_threshold,
)

# Curriculum A, B, C, A', B', C' (the final visit is C, so T_prev = {A, B}).
TAU = {"A": 0.5, "B": 0.8, "C": 0.6}


def make_visits() -> pd.DataFrame:
    rows = [
        # visit tag  task cycle budget post_sr
        (0, "A", "A", 0, 1000, 0.6),
        (1, "B", "B", 0, 1000, 0.5),
        (2, "C", "C", 0, 1000, 0.3),
        (3, "A'", "A", 1, 500, 0.9),
        (4, "B'", "B", 1, 500, 0.6),
        (5, "C'", "C", 1, 400, 0.8),
    ]
    df = pd.DataFrame(rows, columns=["visit", "tag", "task", "cycle", "budget", "post_sr"])
    df["env_id"] = "MiniGrid-" + df["task"]
    df["pre_sr"] = 0.0
    df["pre_return"] = df["post_return"] = 0.0
    df["train_steps"] = df["budget"]
    return df


def make_curve() -> pd.DataFrame:
    rows = [
        # visit 0 (A, first visit) reaches tau_A = 0.5 at step 50: it must not leak into A'.
        (0, "A", 0, 0.0),
        (0, "A", 50, 0.6),
        (1, "B", 0, 0.0),
        (1, "B", 1000, 0.5),
        (2, "C", 0, 0.0),
        (2, "C", 1000, 0.3),
        # A' (tau 0.5), rows out of order: first step with sr >= 0.5 is 200 (sr == tau counts),
        # not 500; TTT = 200.
        (3, "A'", 500, 0.9),
        (3, "A'", 0, 0.2),
        (3, "A'", 300, 0.3),
        (3, "A'", 100, 0.4),
        (3, "A'", 200, 0.5),
        # B' (tau 0.8) never reaches it: censored, TTT = budget = 500.
        (4, "B'", 0, 0.1),
        (4, "B'", 250, 0.5),
        (4, "B'", 500, 0.6),
        # C' (tau 0.6): the pre-evaluation (step 0) already meets it: TTT = 0.
        (5, "C'", 0, 0.7),
        (5, "C'", 200, 0.8),
        (5, "C'", 400, 0.8),
    ]
    df = pd.DataFrame(rows, columns=["visit", "tag", "step", "sr"])
    df["task"] = df["tag"].str.rstrip("'")
    df["global_step"] = df["step"]
    df["mean_return"] = 0.0
    return df


def make_final() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task": ["A", "B", "C"],
            "env_id": ["a", "b", "c"],
            "sr": [0.45, 0.2, 0.75],
            "mean_return": [0.0, 0.0, 0.0],
        }
    )


def test_run_metrics_last_post_by_hand():
    m = run_metrics(make_visits(), make_curve(), make_final(), TAU)
    # Mean SR = mean over the revisits A' B' C' = (0.9 + 0.6 + 0.8) / 3 = 2.3 / 3
    assert m.mean_sr == pytest.approx(2.3 / 3)
    # the all-visit mean (0.6 + 0.5 + 0.3 + 0.9 + 0.6 + 0.8) / 6 = 3.7 / 6 is kept apart
    assert m.mean_sr_all == pytest.approx(3.7 / 6)
    # SR_post (last visit): A 0.9, B 0.6, C 0.8; SR_end: A 0.45, B 0.2, C 0.75
    assert m.sr_post == pytest.approx({"A": 0.9, "B": 0.6, "C": 0.8})
    assert m.sr_end == pytest.approx({"A": 0.45, "B": 0.2, "C": 0.75})
    # BWT over T_prev = {A, B}: ((0.45 - 0.9) + (0.2 - 0.6)) / 2 = (-0.45 - 0.4) / 2
    assert m.bwt == pytest.approx(-0.425)
    # Coverage (the paper's: each task's FIRST visit): A 0.6 >= 0.5 yes, B 0.5 >= 0.8 no,
    # C 0.3 >= 0.6 no -> 1/3
    assert m.coverage == pytest.approx(1 / 3)
    # on the last visits: A 0.9 >= 0.5 yes, B 0.6 >= 0.8 no, C 0.8 >= 0.6 yes -> 2/3
    assert m.coverage_last == pytest.approx(2 / 3)
    # nBWT: E = {A} (C is the current task): (0.45 - 0.9) / 0.9 = -0.5
    assert m.nbwt == pytest.approx(-0.5)
    # TR: A 0.45 < 0.5, B 0.2 < 0.8, C 0.75 >= 0.6 -> 1/3
    assert m.tr == pytest.approx(1 / 3)
    # TTT: A' 200, B' 500 (censored), C' 0 -> 700 / 3
    assert m.ttt == pytest.approx(700 / 3)
    assert (m.ttt_censored, m.revisits) == (1, 3)
    assert m.revisit_sr == pytest.approx({"A'": 0.9, "B'": 0.6, "C'": 0.8})


def test_run_metrics_first_post_by_hand():
    m = run_metrics(make_visits(), make_curve(), make_final(), TAU, post="first")
    # SR_post (first visit): A 0.6, B 0.5, C 0.3
    assert m.sr_post == pytest.approx({"A": 0.6, "B": 0.5, "C": 0.3})
    # BWT: ((0.45 - 0.6) + (0.2 - 0.5)) / 2 = (-0.15 - 0.3) / 2
    assert m.bwt == pytest.approx(-0.225)
    # nBWT: E = {A}: (0.45 - 0.6) / 0.6 = -0.25
    assert m.nbwt == pytest.approx(-0.25)
    # Unaffected by the choice of SR_post: Coverage is always the first visits' (1/3),
    # coverage_last the last visits' (2/3)
    assert (m.coverage, m.coverage_last) == pytest.approx((1 / 3, 2 / 3))
    assert m.tr == pytest.approx(1 / 3)
    assert m.mean_sr == pytest.approx(2.3 / 3)
    assert m.ttt == pytest.approx(700 / 3)


def test_visit_order_comes_from_the_visit_column():
    shuffled = make_visits().sample(frac=1.0, random_state=3)
    assert run_metrics(shuffled, make_curve(), make_final(), TAU) == run_metrics(
        make_visits(), make_curve(), make_final(), TAU
    )


def test_nbwt_nan_when_no_previous_task_is_learned():
    # tau_A = 0.95: A (0.9) and B (0.6) both miss; C meets its tau but is the current task.
    tau = {"A": 0.95, "B": 0.8, "C": 0.6}
    m = run_metrics(make_visits(), make_curve(), make_final(), tau)
    assert math.isnan(m.nbwt)
    assert m.coverage_last == pytest.approx(1 / 3)  # C' alone (0.8)
    assert m.coverage == 0.0  # first visits A 0.6, B 0.5, C 0.3: none
    assert m.bwt == pytest.approx(-0.425)  # BWT does not depend on tau


def test_nbwt_denominator_floor():
    # Visits A, B; A learned with tau 0 and SR_post 0, SR_end 1e-9:
    # nBWT = (1e-9 - 0) / max(0, 1e-8) = 0.1 (no ZeroDivision).
    visits = make_visits().iloc[:2].assign(post_sr=[0.0, 0.5])
    final = make_final().assign(sr=[1e-9, 0.5, 0.5])
    m = run_metrics(visits, make_curve(), final, {"A": 0.0, "B": 0.8, "C": 0.6})
    assert m.nbwt == pytest.approx(0.1)


def test_single_task_bwt_nan():
    # Visits A, A': T_prev = {} -> BWT and nBWT NaN; Coverage and TR still defined.
    visits = make_visits().iloc[[0, 3]]
    m = run_metrics(visits, make_curve(), make_final(), TAU)
    assert math.isnan(m.bwt) and math.isnan(m.nbwt)
    assert m.coverage == 1.0  # SR_post(A) = 0.9 >= 0.5
    assert m.tr == 0.0  # SR_end(A) = 0.45 < 0.5
    assert (m.ttt, m.revisits) == (200.0, 1)


def test_no_revisits_gives_nan_ttt():
    m = run_metrics(make_visits().iloc[:3], make_curve(), make_final(), TAU)
    assert math.isnan(m.ttt)
    assert (m.ttt_censored, m.revisits, m.revisit_sr) == (0, 0, {})
    # Final visit is C: BWT = ((0.45 - 0.6) + (0.2 - 0.5)) / 2
    assert m.bwt == pytest.approx(-0.225)


def test_time_to_threshold_cases():
    curve = pd.DataFrame({"step": [300, 0, 100], "sr": [0.9, 0.2, 0.7]})
    assert time_to_threshold(curve, 0.7, 1000) == (100, False)  # sr == tau reaches it
    assert time_to_threshold(curve, 0.2, 1000) == (0, False)  # pre-eval already there
    assert time_to_threshold(curve, 0.95, 1000) == (1000, True)  # censored at the budget
    assert time_to_threshold(curve.iloc[:0], 0.1, 64) == (64, True)


def test_best_sr_takes_max_of_curve_and_post():
    visits = pd.DataFrame({"task": ["A", "B", "A"], "post_sr": [0.6, 0.4, 0.5]})
    curve = pd.DataFrame({"task": ["A", "A", "B", "B"], "sr": [0.2, 0.7, 0.3, 0.1]})
    # A: max(0.6, 0.5, 0.2, 0.7) = 0.7 (a curve row); B: max(0.4, 0.3, 0.1) = 0.4 (post_sr)
    assert best_sr(visits, curve) == {"A": Fraction(7, 10), "B": Fraction(2, 5)}


def test_competence_targets_mean_factor_and_floor():
    runs = [{"A": 1.0, "B": 0.1, "C": 0.5}, {"A": 0.8, "B": 0.2, "C": 0.7}]
    # A: 0.9 * 0.9 = 0.81; B: 0.9 * 0.15 = 0.135 -> floor 0.2; C: 0.9 * 0.6 = 0.54
    assert competence_targets(runs) == pytest.approx({"A": 0.81, "B": 0.2, "C": 0.54})
    # A lower floor lets B's own target through: 0.135
    assert competence_targets(runs, tau_min=0.1)["B"] == pytest.approx(0.135)
    assert competence_targets(runs, factor=1.0, tau_min=0.0) == pytest.approx(
        {"A": 0.9, "B": 0.15, "C": 0.6}
    )


def test_competence_targets_missing_task():
    with pytest.raises(ValueError, match="'B'"):
        competence_targets([{"A": 1.0, "B": 0.5}, {"A": 0.8}])
    with pytest.raises(ValueError, match="'D'"):
        competence_targets([{"A": 1.0}], tasks=["A", "D"])
    with pytest.raises(ValueError, match="'A'"):
        competence_targets([{"A": math.nan}])
    with pytest.raises(ValueError, match="at least one"):
        competence_targets([])


@pytest.mark.parametrize(
    ("table", "column"),
    [("visits", "budget"), ("visits", "post_sr"), ("curve", "step"), ("final", "sr")],
)
def test_missing_column_named(table, column):
    tables = {"visits": make_visits(), "curve": make_curve(), "final": make_final()}
    tables[table] = tables[table].drop(columns=[column])
    with pytest.raises(ValueError, match=rf"{table} is missing column\(s\) \['{column}'\]"):
        run_metrics(tables["visits"], tables["curve"], tables["final"], TAU)


def test_missing_tau_named():
    with pytest.raises(ValueError, match="tau for task 'B'"):
        run_metrics(make_visits(), make_curve(), make_final(), {"A": 0.5, "C": 0.6})


def test_missing_final_row_named():
    final = make_final().iloc[[0, 2]]
    with pytest.raises(ValueError, match="final has no row for task 'B'"):
        run_metrics(make_visits(), make_curve(), final, TAU)


def test_other_invalid_inputs():
    with pytest.raises(ValueError, match="post"):
        run_metrics(make_visits(), make_curve(), make_final(), TAU, post="middle")
    with pytest.raises(ValueError, match="empty"):
        run_metrics(make_visits().iloc[:0], make_curve(), make_final(), TAU)
    with pytest.raises(ValueError, match="several rows for task 'A'"):
        final = pd.concat([make_final(), make_final().iloc[:1]])
        run_metrics(make_visits(), make_curve(), final, TAU)


def test_as_dict_round_trip():
    m = run_metrics(make_visits(), make_curve(), make_final(), TAU)
    d = m.as_dict()
    assert RunMetrics(**d) == m
    d["revisit_sr"]["A'"] = 0.0  # a copy: the frozen result is untouched
    assert m.revisit_sr["A'"] == 0.9


def test_mean_sr_is_the_mean_of_the_revisit_table():
    # Paper, App. table "Revisit Mean SR", Finetune: A' 0.601, B' 0.822, C' 0.80, D' 0.168,
    # E' 0.55; its Table 1 Mean SR is (0.601 + 0.822 + 0.80 + 0.168 + 0.55) / 5 = 0.5882.
    first = [0.9, 0.95, 0.7, 0.1, 0.3]
    again = [0.601, 0.822, 0.80, 0.168, 0.55]
    tags = "ABCDE"
    visits = pd.DataFrame(
        {
            "visit": range(10),
            "tag": list(tags) + [t + "'" for t in tags],
            "task": list(tags) * 2,
            "cycle": [0] * 5 + [1] * 5,
            "budget": 100,
            "post_sr": first + again,
        }
    )
    curve = pd.DataFrame({"visit": range(10), "step": 0, "sr": first + again})
    final = pd.DataFrame({"task": list(tags), "sr": again})
    m = run_metrics(visits, curve, final, dict.fromkeys(tags, 0.5))
    assert m.mean_sr == pytest.approx(0.5882)
    assert round(m.mean_sr, 3) == 0.588
    # the all-visit mean would give (2.95 + 2.941) / 10 = 0.5891: a different number
    assert m.mean_sr_all == pytest.approx(0.5891)


def test_mean_sr_undefined_without_revisits():
    visits = make_visits().iloc[:3]
    curve = make_curve()
    m = run_metrics(visits, curve[curve["visit"] < 3], make_final(), TAU)
    assert math.isnan(m.mean_sr) and m.revisits == 0
    assert m.mean_sr_all == pytest.approx((0.6 + 0.5 + 0.3) / 3)


def test_coverage_first_visit_against_last_visit_on_a_tiny_table():
    # A B A' B' with tau 0.5 on both. A: first visit 0.2 (not learned), revisit 0.9;
    # B: first visit 0.7 (learned), revisit 0.1 (lost while training on it again).
    visits = pd.DataFrame({"visit": [0, 1, 2, 3], "tag": ["A", "B", "A'", "B'"],
                           "task": ["A", "B", "A", "B"], "cycle": [0, 0, 1, 1],
                           "budget": [100] * 4, "post_sr": [0.2, 0.7, 0.9, 0.1]})
    curve = pd.DataFrame({"visit": [2, 2, 3, 3], "step": [0, 100, 0, 100],
                          "sr": [0.0, 0.9, 0.0, 0.1]})
    final = pd.DataFrame({"task": ["A", "B"], "sr": [0.8, 0.1]})
    m = run_metrics(visits, curve, final, {"A": 0.5, "B": 0.5})
    assert m.coverage == 0.5        # first visits: B only
    assert m.coverage_last == 0.5   # last visits: A only
    assert m.task_terms["coverage"] == {"A": 0.0, "B": 1.0}
    assert m.task_terms["coverage_last"] == {"A": 1.0, "B": 0.0}
    # A' reached tau at step 100; B' never did: censored, counted as its budget 100
    assert (m.ttt, m.ttt_censored, m.revisits) == (100.0, 1, 2)
    assert m.task_terms["ttt"] == {"A'": 100.0, "B'": 100.0}


def test_task_terms_average_to_their_metric():
    m = run_metrics(make_visits(), make_curve(), make_final(), TAU)
    assert set(m.task_terms) == {"mean_sr", "ttt", "bwt", "coverage", "coverage_last", "tr",
                                 "boundary_drop", "revisit_jumpstart"}
    for metric, terms in m.task_terms.items():
        assert getattr(m, metric) == pytest.approx(sum(terms.values()) / len(terms)), metric
    assert set(m.task_terms["bwt"]) == {"A", "B"}  # T_prev: C is the current task
    assert set(m.task_terms["mean_sr"]) == {"A'", "B'", "C'"}


def test_boundary_drop_and_revisit_jumpstart_by_hand():
    # A B A' B' with pre_sr (the start of each visit, on its task) 0.1, 0.2, 0.7, 0.0 and
    # post_sr 0.6, 0.5, 0.9, 0.4. The curve falls at each boundary from the last post to
    # the next pre: A -> B 0.6 - 0.2 = 0.4; B -> A' 0.5 - 0.7 = -0.2 (it starts A' above
    # where B ended); A' -> B' 0.9 - 0.0 = 0.9. Mean (0.4 - 0.2 + 0.9) / 3 = 1.1 / 3.
    visits = pd.DataFrame({"visit": [0, 1, 2, 3], "tag": ["A", "B", "A'", "B'"],
                           "task": ["A", "B", "A", "B"], "cycle": [0, 0, 1, 1],
                           "budget": [100] * 4, "pre_sr": [0.1, 0.2, 0.7, 0.0],
                           "post_sr": [0.6, 0.5, 0.9, 0.4]})
    curve = pd.DataFrame({"visit": [0, 1, 2, 3], "step": 0, "sr": [0.1, 0.2, 0.7, 0.0]})
    final = pd.DataFrame({"task": ["A", "B"], "sr": [0.8, 0.4]})
    m = run_metrics(visits, curve, final, {"A": 0.5, "B": 0.5})
    assert m.exact["boundary_drop"] == Fraction(11, 30)
    assert m.boundary_drop == float(Fraction(11, 30))
    assert m.task_terms["boundary_drop"] == pytest.approx({"B": 0.4, "A'": -0.2, "B'": 0.9})
    assert m.as_dict()["boundary_drop"] == m.boundary_drop
    # the revisit jump-start: each revisit's pre_sr minus its task's first pre_sr,
    # A' 0.7 - 0.1 = 0.6, B' 0.0 - 0.2 = -0.2; mean 0.2
    assert m.exact["revisit_jumpstart"] == Fraction(1, 5)
    assert m.task_terms["revisit_jumpstart"] == pytest.approx({"A'": 0.6, "B'": -0.2})
    # without pre_sr, or with one visit, there is no boundary: NaN, no terms
    for table in (visits.drop(columns="pre_sr"), visits.iloc[:1]):
        m = run_metrics(table, curve, final, {"A": 0.5, "B": 0.5})
        assert math.isnan(m.boundary_drop) and not m.task_terms.get("boundary_drop")
        assert "boundary_drop" not in m.exact
        assert math.isnan(m.revisit_jumpstart) and "revisit_jumpstart" not in m.exact


def test_boundary_drop_from_counts_is_exact():
    # pre and post as counts of 50 episodes: 45/50 - 44/50 = 1/50 exactly, where the
    # float32 rates 0.9 and 0.88 differ by 0.01999998...
    visits = pd.DataFrame({"visit": [0, 1], "tag": ["A", "B"], "task": ["A", "B"],
                           "cycle": [0, 0], "budget": [100, 100],
                           "pre_sr": [float(np.float32(0.1)), float(np.float32(0.88))],
                           "pre_successes": [5, 44], "pre_episodes": [50, 50],
                           "post_sr": [float(np.float32(0.9)), float(np.float32(0.5))],
                           "post_successes": [45, 25], "post_episodes": [50, 50]})
    curve = pd.DataFrame({"visit": [0, 1], "step": 0, "sr": [0.1, 0.88]})
    final = pd.DataFrame({"task": ["A", "B"], "sr": [0.9, 0.5]})
    m = run_metrics(visits, curve, final, {"A": 0.5, "B": 0.5})
    assert m.exact["boundary_drop"] == Fraction(1, 50)
    assert float(np.float32(0.9)) - float(np.float32(0.88)) != 0.02
