"""TeLAPA's runtime breakdown: hours per method phase, the rest as "other", mean and 95%
CI over seeds; methods without method phases have no row."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from telapa.report.compute import runtime_breakdown, runtime_table
from telapa.report.results import score

from .records import record

FLAT = [[0.0, 0.5, 1.0]] * 3


def _half(values):
    return stats.t.ppf(0.975, len(values) - 1) * stats.tstd(values) / math.sqrt(len(values))


def test_breakdown_in_hours_with_other_as_the_rest_of_the_wall_clock():
    runs = {
        "finetune": [record("finetune", 0, FLAT, wall_s=1800.0)],
        "telapa": [
            record("telapa", 0, FLAT, wall_s=3600.0,
                   method_phase_s={"illumination": 360.0, "few_shot": 720.0, "maintenance": 0.0}),
            record("telapa", 1, FLAT, wall_s=7200.0,
                   method_phase_s={"maintenance": 36.0, "illumination": 720.0,
                                   "few_shot": 360.0}),
        ],
    }
    table = runtime_breakdown(runs)
    assert table.index.tolist() == ["telapa"]
    assert [c for c in table.columns if not c.endswith("_ci")] == [
        "illumination", "few_shot", "maintenance", "other", "total"]
    expected = {"illumination": [0.1, 0.2], "few_shot": [0.2, 0.1], "maintenance": [0.0, 0.01],
                "other": [0.7, 2.0 - 0.31], "total": [1.0, 2.0]}
    for name, hours in expected.items():
        assert table.at["telapa", name] == pytest.approx(sum(hours) / 2)
        assert table.at["telapa", f"{name}_ci"] == pytest.approx(_half(hours))


def test_a_phase_of_some_runs_only_counts_zero_in_the_others_and_comes_last():
    runs = {"telapa-static": [
        record("telapa-static", 0, FLAT, wall_s=3600.0, method_phase_s={"illumination": 36.0}),
        record("telapa-static", 1, FLAT, wall_s=3600.0,
               method_phase_s={"illumination": 36.0, "extra": 360.0}),
    ]}
    table = runtime_breakdown(runs)
    assert [c for c in table.columns if not c.endswith("_ci")] == [
        "illumination", "extra", "other", "total"]
    assert table.at["telapa-static", "extra"] == pytest.approx(0.05)
    assert table.at["telapa-static", "other"] == pytest.approx((0.99 + 0.89) / 2)


def test_no_runtime_table_without_method_phases():
    result = score([record("finetune", s, FLAT) for s in (0, 1)])["toy"]
    assert runtime_breakdown(result.runs).empty
    assert runtime_table(result, prefix="toy") is None
