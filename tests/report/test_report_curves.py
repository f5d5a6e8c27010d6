"""Learning-curve data: mean and 95% CI over seeds at each aligned global step, and the
figure's task boundaries and visit labels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from telapa.report.curves import curve_bands, curve_figure, learning_curves, visit_spans
from telapa.report.figures import render

from .records import BUDGET, record

SEEDS = {
    0: [[0.0, 0.5, 0.9], [0.1, 0.3, 0.6], [0.7, 0.8, 1.0]],
    1: [[0.2, 0.4, 1.0], [0.0, 0.5, 0.8], [0.6, 0.9, 0.9]],
    2: [[0.1, 0.9, 0.8], [0.0, 0.1, 0.4], [0.2, 0.6, 1.0]],
}


def test_bands_are_mean_and_t_interval_over_seeds_at_each_global_step():
    runs = {"finetune": [record("finetune", s, srs) for s, srs in SEEDS.items()]}
    bands = curve_bands(runs)
    assert len(bands) == 9  # 3 visits x 3 evaluations, seeds aligned
    for row in bands.itertuples():
        visit, k = row.visit, row.global_step // (BUDGET // 2) - 2 * row.visit
        values = np.array([SEEDS[s][visit][k] for s in SEEDS])
        half = stats.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
        assert (row.n, row.tag) == (3, ("A", "B", "A'")[visit])
        assert row.sr == pytest.approx(values.mean()) and row.sr_ci == pytest.approx(half)
    # the pre-evaluation of B and the last evaluation of A share a global step, not a point
    assert (bands["global_step"] == BUDGET).sum() == 2


def test_a_point_missing_in_one_seed_averages_the_seeds_that_have_it():
    runs = [record("telapa", s, SEEDS[s]) for s in (0, 1)]
    curve = runs[1].tables["curve"]
    runs[1].tables["curve"] = curve[~((curve["visit"] == 1) & (curve["step"] == BUDGET // 2))]
    bands = curve_bands({"telapa": runs}).set_index(["visit", "global_step"])
    lone = bands.loc[(1, BUDGET + BUDGET // 2)]
    assert (lone["n"], lone["sr"]) == (1, SEEDS[0][1][1]) and math.isnan(lone["sr_ci"])
    assert bands.loc[(0, 0), "n"] == 2


def test_figure_marks_task_boundaries_and_visit_tags():
    runs = {m: [record(m, s, SEEDS[s]) for s in SEEDS] for m in ("finetune", "telapa")}
    spans = visit_spans(runs["finetune"])
    assert spans["start"].tolist() == [0, BUDGET, 2 * BUDGET]
    fig = curve_figure(curve_bands(runs), spans, title="toy")
    ax = fig.axes[0]
    boundaries = sorted(line.get_xdata()[0] for line in ax.get_lines()
                        if len(set(line.get_xdata())) == 1)
    assert boundaries == [BUDGET, 2 * BUDGET]
    (top,) = ax.child_axes
    assert [t.get_text() for t in top.get_xticklabels()] == ["A", "B", "A'"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["finetune", "telapa"]
    shown = render(fig, figure_id="toy-curves", title="curves")
    assert shown.png.startswith(b"\x89PNG") and b"<svg" in shown.svg


def test_rendered_tick_labels_carry_no_additive_offset():
    """Near-constant data (every elite of an archive at novelty 1.0) keeps plain tick
    labels instead of matplotlib's "1e-8 + 9.99999e-1"."""
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([1 - 1e-9, 1.0, 1 + 1e-9], [0.0, 0.5, 1.0])
    formatter = ax.xaxis.get_major_formatter()
    formatter.set_locs([1 - 1e-9, 1 + 1e-9])
    assert formatter.get_offset() != ""  # what matplotlib would label
    render(fig, figure_id="flat", title="flat")
    assert formatter.get_useOffset() is False


def test_the_curves_name_the_competence_they_show():
    runs = {"finetune": [record("finetune", s, SEEDS[s]) for s in SEEDS]}
    assert learning_curves(runs, title="toy").axes[0].get_ylabel() == "success rate"
    fig = learning_curves(runs, title="toy", ylabel="SR~ (normalized return)")
    assert fig.axes[0].get_ylabel() == "SR~ (normalized return)"
