"""The elite-injection table of one curriculum (paper App. "Cross-Archive Elite Injection
Ablation": "how often injected parents produced elites").

Each illumination event of a TeLAPA run's ``method_log.json`` counts its candidates (C),
the elites they added (A), the candidates whose parent was injected from another task's
archive (I) and the elites those added (A_I) (`telapa.continual.methods.telapa
.illumination`). Per method (or setting) the table sums them over runs and visits, so
every rate is a ratio of exact counts:

    injected share        I / C
    elites per injected    A_I / I          (parents from the other archives)
    elites per own         (A - A_I) / (C - I)   (parents from the visit's own archive)

When some run injected, every archive method of the report gets a row, those without
injection (p_inj = 0) included, so a setting reads beside its partner: its own parents'
yield, and the size of the archives the run ended with, E / R (E the elites of the runs'
final archives, ``elites.csv``, summed over its R runs with archives). Runs logged before
the illumination events counted their candidates (2026-11) have no counts: their row
reads n/a there, never 0.

Coverage, the other quantity the paper's ablation reads, is a column of the main table;
the settings-pairs table tests it against the same seeds without injection.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir
from telapa.report.results import CurriculumResults, RunRecord
from telapa.report.tables import Column, ReportTable

INJECTION_KEY = ".qd.injection.p_inj"
COUNTS = ("candidates", "accepted", "injected", "injected_accepted")
"""The illumination event's count fields, summed per method."""


COLUMNS = ("runs", *COUNTS, "injected_share", "injected_yield", "own_yield",
           "final_elites")


def injection_counts(runs: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """Archive methods x (runs, `COUNTS` summed over runs and illuminations, the three
    rates of the module docstring, and the final archives' elites per run; NaN for 0/0),
    when some run proposed an injected parent (else empty): every method with archives
    (``elites.csv``) gets a row, the ones that injected nothing included."""
    if not any(_injected(record) for records in runs.values() for record in records):
        return pd.DataFrame(columns=list(COLUMNS)).rename_axis("method")
    rows = {}
    for method, records in runs.items():
        kept = [run for run in map(RunDir, (record.path for record in records))
                if run.has_elites()]
        if not kept:
            continue
        totals: dict[str, float] = dict.fromkeys(COUNTS, 0)
        for run in kept:
            for event in _illuminations(run):
                for key in COUNTS:  # a log older than the counts: unknown, not 0
                    totals[key] += int(event[key]) if key in event else math.nan
        own = totals["candidates"] - totals["injected"]
        rows[method] = {
            "runs": len(records), **totals,
            "injected_share": _rate(totals["injected"], totals["candidates"]),
            "injected_yield": _rate(totals["injected_accepted"], totals["injected"]),
            "own_yield": _rate(totals["accepted"] - totals["injected_accepted"], own),
            "final_elites": _rate(sum(len(run.elites()) for run in kept), len(kept)),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(COLUMNS)).rename_axis(
        "method")


def _injected(record: RunRecord) -> bool:
    """Whether the run injected (`injects`) and its log counts an injected parent."""
    return injects(record) and any(int(event.get("injected", 0)) > 0
                                   for event in _illuminations(RunDir(record.path)))


def _illuminations(run: RunDir) -> list[dict]:
    """The illumination events of the run's ``method_log.json``."""
    return [event for event in run.method_log() if event.get("event") == "illumination"]


def injection_visits(runs: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """(method, visit) x `COUNTS` summed over the runs of each method that injected
    (`_injected`), per visit of the curriculum (labelled ``method · tag``, in visit order):
    where injected parents were drawn and where their children entered the archive."""
    rows: dict[str, dict[str, int]] = {}
    for method, records in runs.items():
        per_visit: dict[tuple[int, str], dict[str, int]] = {}
        for record in filter(_injected, records):
            for event in _illuminations(RunDir(record.path)):
                totals = per_visit.setdefault(
                    (int(event["visit"]), str(event.get("visit_tag", event["visit"]))),
                    dict.fromkeys(COUNTS, 0))
                for key in COUNTS:
                    totals[key] += int(event.get(key, 0))
        for (_, tag), totals in sorted(per_visit.items()):
            rows[f"{method} · {tag}"] = totals
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(COUNTS)).rename_axis(
        "method · visit")


def injects(record: RunRecord) -> bool:
    """Whether the run's settings give a method's illumination an injection probability
    above 0 (``methods.<section>.qd.injection.p_inj``); only those runs' logs are read."""
    return any(key.endswith(INJECTION_KEY) and json.loads(value) not in (None, 0, 0.0)
               for key, value in record.settings.items())


def _rate(k: float, n: float) -> float:
    return k / n if n and not math.isnan(n) else np.nan


def injection_table(result: CurriculumResults, *, prefix: str) -> ReportTable | None:
    """The counts and rates of `injection_counts`; None when no run injected a parent."""
    values = injection_counts(result.runs)
    if values.empty:
        return None
    counts = [Column("runs", "runs", ci=False, digits=0),
              Column("candidates", "candidates", ci=False, digits=0),
              Column("accepted", "elites added", ci=False, digits=0),
              Column("injected", "injected parents", ci=False, digits=0),
              Column("injected_accepted", "elites from injected parents", ci=False,
                     digits=0)]
    rates = [Column("injected_share", "injected share", ci=False),
             Column("injected_yield", "elites per injected parent", better="higher", ci=False),
             Column("own_yield", "elites per own parent", better="higher", ci=False),
             Column("final_elites", "final archives' elites per run", ci=False, digits=1)]
    return ReportTable(
        f"{prefix}-injection", "Cross-archive elite injection",
        "Illumination candidates summed over runs and visits: how many parents were "
        "injected from the other tasks' archives and how many elites their children "
        "added, beside the children of the visit's own elites (rates are ratios of these "
        "counts), for every archive method of the report, those without injection "
        "included; and the elites of the archives each run ended with (all tasks, "
        "mean over runs). Coverage is in the main table.",
        values, tuple(counts + rates))


def injection_visits_table(result: CurriculumResults, *, prefix: str) -> ReportTable | None:
    """`injection_visits` as a table; None when no run injected a parent."""
    values = injection_visits(result.runs)
    if values.empty:
        return None
    labels = {"candidates": "candidates", "accepted": "elites added",
              "injected": "injected parents", "injected_accepted": "elites from injected parents"}
    return ReportTable(
        f"{prefix}-injection-visits", "Cross-archive elite injection per visit",
        "The counts of the injection table per visit, summed over each injecting "
        "method's runs: at the first visit no other archive exists, so nothing is "
        "injected.",
        values, tuple(Column(key, label, ci=False, digits=0) for key, label in labels.items()))


__all__ = ["COLUMNS", "COUNTS", "injection_counts", "injection_table", "injection_visits",
           "injection_visits_table", "injects"]
