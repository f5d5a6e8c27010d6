"""`report.results.score` keeps runs with other settings apart (issue 12 item 6): rows
by curriculum, method and the settings that differ, with a short label; the same run
twice is refused, naming both directories."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from telapa.continual.methods import EWC
from telapa.continual.registry import METHODS
from telapa.continual.rundir import RunDirError
from telapa.report.results import flatten_settings, group_labels, score

from .records import record

SRS = [[0.0, 0.5, 1.0], [0.0, 0.5, 0.5], [0.5, 1.0, 1.0]]
LOW = [[0.0, 0.1, 0.2], [0.0, 0.1, 0.1], [0.0, 0.1, 0.1]]
BASE = {"steps_per_visit": 4096, "intrinsic_beta": None,
        "methods": {"ewc": {"lam": 10.0}, "telapa": {"qd": {"injection": {"p_inj": 0.0}}}}}


def _run(method: str, seed: int, srs=SRS, **changes) -> object:
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        node = data
        *parents, leaf = key.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    suffix = "-".join(f"{k}={v}" for k, v in changes.items())
    r = record(method, seed, srs)
    return dataclasses.replace(r, path=Path(f"/runs/{method}-{suffix}-{seed}"),
                               settings=flatten_settings(data))


def test_ablation_runs_are_not_pooled_with_main_runs():
    runs = [_run("telapa", s) for s in range(2)] + [
        _run("telapa", s, LOW, methods__telapa__qd__injection__p_inj=0.2) for s in range(2)
    ] + [_run("finetune", s) for s in range(2)]
    result = score(runs)["toy"]
    assert sorted(result.metrics) == ["finetune", "telapa [p_inj=0.0]", "telapa [p_inj=0.2]"]
    summary = result.summary()
    assert summary.loc["telapa [p_inj=0.0]", "runs"] == 2
    assert summary.loc["telapa [p_inj=0.2]", "runs"] == 2
    assert summary.loc["telapa [p_inj=0.0]", "mean_sr"] > summary.loc["telapa [p_inj=0.2]",
                                                                     "mean_sr"]


def test_other_methods_settings_do_not_split_a_method():
    # finetune ignores methods.ewc: its runs stay one group; EWC's lam splits EWC
    runs = [_run("finetune", 0), _run("finetune", 1, methods__ewc__lam=100.0),
            _run("ewc", 0), _run("ewc", 0, methods__ewc__lam=100.0)]
    labels = group_labels(runs)
    assert [labels[r.path] for r in runs] == ["finetune", "finetune", "ewc [lam=10.0]",
                                             "ewc [lam=100.0]"]


def test_a_new_methods_runs_are_grouped_by_the_section_it_declares(monkeypatch):
    class EWCVariant(EWC):
        name = "ewc-variant"  # reads methods.ewc because EWC declares that section

    monkeypatch.setitem(METHODS, EWCVariant.name, EWCVariant)
    runs = [_run("ewc-variant", 0), _run("ewc-variant", 0, methods__ewc__lam=100.0),
            _run("ewc-variant", 1, methods__telapa__qd__injection__p_inj=0.2)]
    labels = group_labels(runs)
    assert [labels[r.path] for r in runs] == ["ewc-variant [lam=10.0]",
                                             "ewc-variant [lam=100.0]",
                                             "ewc-variant [lam=10.0]"]


def test_global_settings_split_every_method_that_differs():
    runs = [_run("scratch", 0), _run("scratch", 1, intrinsic_beta=0.005),
            _run("scratch", 2, steps_per_visit=8192)]
    labels = sorted(group_labels(runs).values())
    assert labels == ["scratch [intrinsic_beta=0.005, steps_per_visit=4096]",
                      "scratch [intrinsic_beta=none, steps_per_visit=4096]",
                      "scratch [intrinsic_beta=none, steps_per_visit=8192]"]


def test_duplicate_runs_are_refused_naming_both_directories():
    a = _run("finetune", 0)
    b = dataclasses.replace(a, path=Path("/elsewhere/copy"))
    with pytest.raises(RunDirError, match=f"{a.path} and {b.path} are the same run"):
        score([a, b, _run("finetune", 1)])
    with pytest.raises(RunDirError, match="same run"):
        score([a, a])


def test_tau_source_names_the_value_used_without_scratch_runs():
    result = score([_run("finetune", 0)])["toy"]
    assert result.tau_source == "tau_min = 0.2 (no scratch runs of this curriculum in the set)"
    assert result.tau == {"A": 0.2, "B": 0.2}
