"""`settings_pairs_table`: a method beside itself with one setting changed (the
intrinsic-reward study: each method with the bonus against its bonus-free cells), paired
by seed over the seeds both have, computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from telapa.report.claims import settings_pairs_table
from telapa.report.results import RunRecord, score


def _record(seed: int, sr_k: int, beta: float | None) -> RunRecord:
    """A Scratch run of a one-task curriculum visited twice whose revisit scored sr_k/50
    (every other evaluation 50/50)."""
    visits = pd.DataFrame({"visit": [0, 1], "tag": ["A", "A'"], "task": "A", "cycle": [0, 1],
                           "budget": 100, "post_sr": [1.0, sr_k / 50],
                           "post_successes": [50, sr_k], "post_episodes": 50})
    curve = pd.DataFrame({"visit": [0, 1], "task": "A", "step": [100, 100],
                          "sr": [1.0, sr_k / 50], "successes": [50, sr_k], "episodes": 50})
    final = pd.DataFrame({"task": ["A"], "sr": [1.0], "successes": [50], "episodes": [50]})
    definition = {"name": "one", "order": ["A"], "cycles": 2}
    return RunRecord(path=Path(f"/runs/{beta}-s{seed}"), curriculum="one", method="scratch",
                     seed=seed, tau_min=0.2,
                     tables={"visits": visits, "curve": curve, "final": final},
                     accounting={}, settings={"curriculum": json.dumps(definition),
                                              "intrinsic_beta": json.dumps(beta)})


def test_a_method_with_and_without_a_setting_is_paired_by_the_seeds_both_have():
    # with the bonus, seeds 0-2 score 40, 45, 50 of 50 on A'; without it, seeds 0-4
    # score 30, 35, 50, 10, 10: only seeds 0-2 are paired. Differences 10/50, 10/50, 0:
    # of the 8 sign patterns, sums >= 20/50 come from (+, +, +) and (+, +, -): p = 2/8.
    bonus = [_record(s, k, 0.005) for s, k in enumerate((40, 45, 50))]
    plain = [_record(s, k, None) for s, k in enumerate((30, 35, 50, 10, 10))]
    (result,) = score(bonus + plain).values()
    table = settings_pairs_table(result, prefix="one")
    assert table is not None and table.id == "one-settings-pairs"
    row = table.values[table.values["value"] == "Mean SR"].iloc[0]
    assert row["first"] == "scratch [intrinsic_beta=0.005]"
    assert row["second"] == "scratch [intrinsic_beta=none]"
    assert row["test"] == "paired sign-flip, n=3 (exact)"
    assert row["first mean"] == pytest.approx(135 / 150)
    assert row["second mean"] == pytest.approx(115 / 150)
    assert row["p first better"] == 2 / 8 and row["p second better"] == 1.0
    assert row["verdict"] == "inconclusive"
    # one setting only: no pair to show
    (alone,) = score(plain).values()
    assert settings_pairs_table(alone, prefix="one") is None


def test_a_method_under_three_settings_has_its_first_against_each_other():
    """Three settings (the injection study: p_inj 0, 0.1, 0.2): the first in label order
    against each of the two others, never the others against each other. Mean SR on
    seeds 0-2: beta 0.005 scores 40, 45, 50 of 50; beta 0.01 35, 40, 45 (differences
    +5/50 on every seed: p = 1/8, only the all-plus pattern reaches it); none 30, 35, 50
    (as above: p = 2/8)."""
    records = ([_record(s, k, 0.005) for s, k in enumerate((40, 45, 50))]
               + [_record(s, k, 0.01) for s, k in enumerate((35, 40, 45))]
               + [_record(s, k, None) for s, k in enumerate((30, 35, 50))])
    (result,) = score(records).values()
    table = settings_pairs_table(result, prefix="one")
    assert table is not None
    rows = table.values[table.values["value"] == "Mean SR"]
    assert list(zip(rows["first"], rows["second"], strict=True)) == [
        ("scratch [intrinsic_beta=0.005]", "scratch [intrinsic_beta=0.01]"),
        ("scratch [intrinsic_beta=0.005]", "scratch [intrinsic_beta=none]")]
    assert list(rows["p first better"]) == [1 / 8, 2 / 8]
    assert list(rows["p second better"]) == [1.0, 1.0]
    assert list(rows["second mean"]) == pytest.approx([120 / 150, 115 / 150])
