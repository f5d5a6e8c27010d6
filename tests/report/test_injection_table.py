"""The elite-injection table (`telapa.report.injection`): counts summed from the runs'
illumination events, rates as ratios of those counts, computed by hand below."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from telapa.report.injection import (
    injection_counts,
    injection_table,
    injection_visits,
    injection_visits_table,
)
from telapa.report.results import score

from .records import record

ELITES = ("task,archive_tag,slot,elite_id,parent_id,visit,fitness,sr,sigma,lineage,"
          "embedding_version,d_min,d_0\n")


def _run(tmp_path, method, seed, events, p_inj=0.5, elites=None):
    """A run of ``method`` with its illumination ``events`` and, for an archive method
    (``elites``: how many), final archives of that many elites."""
    path = tmp_path / f"{method}-{seed}-{p_inj}"
    path.mkdir()
    (path / "method_log.json").write_text(json.dumps(events))
    if elites is not None:
        (path / "elites.csv").write_text(ELITES + "".join(
            f"A,0,{k},{k},-1,0,0.5,0.5,0.05,0,0,0.1,0.0\n" for k in range(elites)))
    settings = {"methods.telapa.qd.injection.p_inj": json.dumps(p_inj)}
    return dataclasses.replace(record(method, seed, [[0.0, 0.5, 1.0]] * 3), path=path,
                               settings=settings)


def _illumination(visit, candidates, accepted, injected, injected_accepted):
    return {"event": "illumination", "visit": visit, "candidates": candidates,
            "accepted": accepted, "injected": injected,
            "injected_accepted": injected_accepted, "wall_s": 1.0}


def test_counts_and_rates_by_hand(tmp_path):
    # seed 0: visit 0 has no pool; visit 1 proposes 20 injected of 100, 3 of them kept,
    # 30 kept in all. seed 1: 10 injected of 50, 0 kept, 12 kept in all.
    runs = {"telapa": [
        _run(tmp_path, "telapa", 0, [_illumination(0, 100, 40, 0, 0),
                                     {"event": "transfer", "visit": 1},
                                     _illumination(1, 100, 30, 20, 3)], elites=7),
        _run(tmp_path, "telapa", 1, [_illumination(1, 50, 12, 10, 0)], elites=4)],
        "finetune": [_run(tmp_path, "finetune", 0, [])],
        # TeLAPA without injection, the partner: a row with no injected parent
        "telapa [p_inj=0]": [_run(tmp_path, "telapa", 2, [_illumination(0, 80, 20, 0, 0)],
                                  p_inj=0.0, elites=9)]}
    counts = injection_counts(runs)
    # finetune keeps no archive: no row
    assert list(counts.index) == ["telapa", "telapa [p_inj=0]"]
    row = counts.loc["telapa"]
    assert (row["runs"], row["candidates"], row["accepted"], row["injected"],
            row["injected_accepted"]) == (2, 250, 82, 30, 3)
    assert row["injected_share"] == 30 / 250
    assert row["injected_yield"] == 3 / 30           # A_I / I
    assert row["own_yield"] == (82 - 3) / (250 - 30)  # (A - A_I) / (C - I)
    assert row["final_elites"] == (7 + 4) / 2         # E / R
    plain = counts.loc["telapa [p_inj=0]"]
    assert (plain["runs"], plain["candidates"], plain["accepted"], plain["injected"],
            plain["injected_accepted"]) == (1, 80, 20, 0, 0)
    assert plain["injected_share"] == 0 and np.isnan(plain["injected_yield"])
    assert plain["own_yield"] == 20 / 80 and plain["final_elites"] == 9
    # a partner logged before the illumination events counted (the paper-budget study's
    # TeLAPA cells): its counts are unknown, not 0; its archives are still counted
    old = {"telapa": runs["telapa"], "telapa [p_inj=0]": [_run(
        tmp_path, "telapa", 3, [{"event": "illumination", "visit": 0, "archive_size": 5}],
        p_inj=0.0, elites=5)]}
    unknown = injection_counts(old).loc["telapa [p_inj=0]"]
    assert all(np.isnan(unknown[key]) for key in ("candidates", "accepted", "injected",
                                                  "injected_share", "own_yield"))
    assert unknown["final_elites"] == 5


def test_no_table_without_injected_parents_and_nan_for_empty_ratios(tmp_path):
    plain = {"telapa": [_run(tmp_path, "telapa", 0, [_illumination(0, 10, 4, 0, 0)],
                             elites=3)]}
    assert injection_counts(plain).empty
    # without p_inj > 0 the log is not read (a synthetic record has none)
    off = {"telapa": [_run(tmp_path, "telapa", 1, [_illumination(1, 10, 4, 3, 1)], 0.0)]}
    assert injection_counts(off).empty
    result = score([r for rs in plain.values() for r in rs])["toy"]
    assert injection_table(result, prefix="toy") is None
    only = {"telapa": [_run(tmp_path, "telapa", 2, [_illumination(1, 5, 2, 5, 2)], elites=2)]}
    row = injection_counts(only).loc["telapa"]
    assert row["injected_yield"] == pytest.approx(0.4) and np.isnan(row["own_yield"])


def test_the_report_shows_the_table_when_runs_injected(tmp_path):
    runs = [_run(tmp_path, "telapa", s, [_illumination(1, 40, 10, 8, 1 + s)], elites=3 + s)
            for s in range(2)]
    result = score(runs)["toy"]
    table = injection_table(result, prefix="toy")
    assert table is not None and table.id == "toy-injection"
    cells = table.cells()
    assert cells.loc["telapa", "injected parents"] == "16"
    assert cells.loc["telapa", "elites from injected parents"] == "3"
    assert cells.loc["telapa", "elites per injected parent"].startswith("0.188")  # 3/16
    assert cells.loc["telapa", "final archives' elites per run"] == "3.5"  # (3 + 4) / 2


def test_per_visit_counts_by_hand(tmp_path):
    """The per-visit table sums each visit's counts over the injecting method's runs, in
    visit order under the visit's tag; a method that injected nothing has no rows."""
    def event(visit, tag, *counts):
        return {**_illumination(visit, *counts), "visit_tag": tag}

    runs = {"telapa": [
        _run(tmp_path, "telapa", 0, [event(0, "A", 100, 40, 0, 0),
                                     event(1, "B", 100, 30, 20, 3)], elites=2),
        _run(tmp_path, "telapa", 1, [event(0, "A", 100, 35, 0, 0),
                                     event(1, "B", 50, 12, 10, 1)], elites=2)],
        "telapa [p_inj=0]": [_run(tmp_path, "telapa", 2, [event(0, "A", 80, 20, 0, 0)],
                                  p_inj=0.0, elites=1)]}
    visits = injection_visits(runs)
    assert list(visits.index) == ["telapa · A", "telapa · B"]
    assert visits.loc["telapa · A"].tolist() == [200, 75, 0, 0]
    assert visits.loc["telapa · B"].tolist() == [150, 42, 30, 4]
    table = injection_visits_table(score([r for rs in runs.values() for r in rs])["toy"],
                                   prefix="toy")
    assert table is not None and table.id == "toy-injection-visits"
    # the report labels each setting (telapa [p_inj=0.0] has no rows)
    assert list(table.values.index) == ["telapa [p_inj=0.5] · A", "telapa [p_inj=0.5] · B"]
    assert table.cells().loc["telapa [p_inj=0.5] · B", "elites from injected parents"] == "4"
