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

Coverage, the other quantity the paper's ablation reads, is a column of the main table;
the settings-pairs table tests it against the same seeds without injection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from telapa.continual.rundir import RunDir
from telapa.report.results import CurriculumResults, RunRecord
from telapa.report.tables import Column, ReportTable

INJECTION_KEY = ".qd.injection.p_inj"
COUNTS = ("candidates", "accepted", "injected", "injected_accepted")
"""The illumination event's count fields, summed per method."""


def injection_counts(runs: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """Methods whose runs proposed any injected parent x (runs, `COUNTS` summed over runs
    and illuminations, and the three rates of the module docstring; NaN for 0/0)."""
    rows = {}
    for method, records in runs.items():
        totals = dict.fromkeys(COUNTS, 0)
        for record in filter(injects, records):
            for event in RunDir(record.path).method_log():
                if event.get("event") == "illumination":
                    for key in COUNTS:
                        totals[key] += int(event.get(key, 0))
        if totals["injected"] == 0:
            continue
        own = totals["candidates"] - totals["injected"]
        rows[method] = {
            "runs": len(records), **totals,
            "injected_share": _rate(totals["injected"], totals["candidates"]),
            "injected_yield": _rate(totals["injected_accepted"], totals["injected"]),
            "own_yield": _rate(totals["accepted"] - totals["injected_accepted"], own),
        }
    columns = ["runs", *COUNTS, "injected_share", "injected_yield", "own_yield"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("method")


def injects(record: RunRecord) -> bool:
    """Whether the run's settings give a method's illumination an injection probability
    above 0 (``methods.<section>.qd.injection.p_inj``); only those runs' logs are read."""
    return any(key.endswith(INJECTION_KEY) and json.loads(value) not in (None, 0, 0.0)
               for key, value in record.settings.items())


def _rate(k: int, n: int) -> float:
    return k / n if n else np.nan


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
             Column("own_yield", "elites per own parent", better="higher", ci=False)]
    return ReportTable(
        f"{prefix}-injection", "Cross-archive elite injection",
        "Illumination candidates summed over runs and visits: how many parents were "
        "injected from the other tasks' archives and how many elites their children "
        "added, beside the children of the visit's own elites (rates are ratios of these "
        "counts). Coverage is in the main table.",
        values, tuple(counts + rates))


__all__ = ["COUNTS", "injection_counts", "injection_table", "injects"]
