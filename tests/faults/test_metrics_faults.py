"""Faults of scoring runs together (`telapa metrics`, `telapa report`): runs of two
different curricula that share a name were scored with one tau_T, and runs with
different tau_min at the lowest."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from telapa.continual.rundir import RunDirError
from telapa.report.results import RunRecord, score


def _record(path: str, tasks: dict[str, str], sr: float, seed: int = 0) -> RunRecord:
    """A finished Scratch run of a one-task curriculum named ``smoke`` (visited twice)
    whose every evaluation scored ``sr`` of 50 episodes."""
    k = round(sr * 50)
    visits = pd.DataFrame({"visit": [0, 1], "tag": ["A", "A'"], "task": "A", "cycle": [0, 1],
                           "budget": 100, "post_sr": sr, "post_successes": k,
                           "post_episodes": 50, "pre_sr": sr, "pre_successes": k,
                           "pre_episodes": 50})
    curve = pd.DataFrame({"visit": [0, 1], "task": "A", "step": [100, 100], "sr": sr,
                          "successes": k, "episodes": 50})
    final = pd.DataFrame({"task": ["A"], "sr": [sr], "successes": [k], "episodes": [50]})
    definition = {"name": "smoke", "order": ["A"], "cycles": 2, "tasks": tasks}
    return RunRecord(path=Path(path), curriculum="smoke", method="scratch", seed=seed,
                     tau_min=0.2, tables={"visits": visits, "curve": curve, "final": final},
                     accounting={}, settings={"curriculum": json.dumps(definition)})


def test_curricula_that_share_a_name_are_told_apart_by_content():
    # A copy of smoke.yaml with other tasks under the same name: A = DoorKey there was
    # scored with Empty-5x5's tau (0.9 x mean(1.0, 0.1) = 0.495 for both), so the DoorKey
    # run's 0.1 missed and the Empty run's counted against a bar it did not set.
    empty = _record("/runs/empty", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 1.0)
    doorkey = _record("/runs/doorkey", {"A": {"env_id": "MiniGrid-DoorKey-5x5-v0"}}, 0.1, 1)
    results = score([empty, doorkey])
    assert len(results) == 2 and all(key.startswith("smoke@") for key in results)
    taus = sorted(r.tau_exact["A"] for r in results.values())
    assert taus == [Fraction(1, 5), Fraction(9, 10)]  # max(0.9 x 0.1, 0.2); 0.9 x 1.0
    # the same curriculum twice keeps its name and pools its Scratch runs
    again = _record("/runs/empty-1", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 0.5, 1)
    (pooled,) = score([empty, again]).values()
    assert pooled.curriculum == "smoke" and pooled.tau_exact["A"] == Fraction(27, 40)


def test_runs_that_disagree_on_tau_min_are_refused_not_scored_at_the_lowest():
    # a tau_min=0.9 row mixed with others was scored at 0.2, only tau_source said so
    low = _record("/runs/low", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 1.0)
    high = dataclasses.replace(_record("/runs/high", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}},
                                       0.5, 1), tau_min=0.9)
    with pytest.raises(RunDirError, match=r"set different tau_min \(0.2 in /runs/low, 0.9 in "
                                          r"/runs/high\)"):
        score([low, high])


def test_tau_from_takes_the_bar_from_other_runs_only():
    # an ablation's runs (a bonus that lets Scratch reach 1.0) scored against the bar of
    # the runs without it (Scratch 0.5): tau_T = 0.9 x 0.5, not 0.9 x 1.0
    plain = _record("/runs/plain", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 0.5)
    ablated = _record("/runs/ablated", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 1.0)
    (result,) = score([ablated], tau_from=[plain]).values()
    assert result.tau_exact["A"] == Fraction(9, 20)
    assert result.tau_source == "1 scratch run(s) of --tau-from"
    # the ablated Scratch's own bar is kept beside it, unused (reproduction.md promised
    # the intrinsic study's second tau_T "shown beside it")
    assert result.own_tau == {"scratch": {"A": Fraction(9, 10)}}
    (own,) = score([ablated]).values()
    assert own.tau_exact["A"] == Fraction(9, 10) and own.own_tau == {}
    with pytest.raises(RunDirError, match="--tau-from holds no scratch run"):
        score([ablated], tau_from=[dataclasses.replace(plain, method="finetune")])


def test_a_report_shows_the_unused_tau_of_its_own_scratch_runs_beside_the_one_used():
    from telapa.report.build import _curriculum_section

    plain = _record("/runs/plain", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 0.5)
    ablated = _record("/runs/ablated", {"A": {"env_id": "MiniGrid-Empty-5x5-v0"}}, 1.0)
    ablated = dataclasses.replace(ablated, accounting={
        "wall_s": 1.0, "extra_env_steps": 0, "peak_rss_bytes": 0, "method_state_bytes": 0,
        "run_dir_bytes": 0, "method_phase_s": {}})
    (result,) = score([ablated], tau_from=[plain]).values()
    section, _ = _curriculum_section(result, {}, prefix="smoke", gamma=0.99, tau=0.5,
                                     resample="runs")
    assert ("Competence targets tau_T: A 0.450 (from 1 scratch run(s) of --tau-from). Not "
            "used, beside it: the tau_T of this report's own Scratch runs, scratch (1 "
            "run(s)): A 0.900.") in section.notes
