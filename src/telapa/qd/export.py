"""Archives as plain tables, for reports and inspection (no weights, no trajectories)."""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd

from telapa.qd.archive import Archive
from telapa.qd.lineage import lineage_visits

ELITE_COLUMNS = (
    "task", "archive_tag", "slot", "elite_id", "parent_id", "visit", "fitness", "sr",
    "sigma", "lineage", "embedding_version", "d_min",
)
"""Leading columns of `archive_frame`; the normalized descriptor follows as d_0..d_{d-1}."""


def archive_frame(archive: Archive, *, task: str) -> pd.DataFrame:
    """One row per valid elite of ``archive`` (the archive of ``task``).

    ``visit`` is the visit on which the elite was evaluated, ``lineage`` its recorded
    ancestry as visit indices joined by ``;`` (the bitmask of `lineage_visits`), and
    ``d_0..`` its normalized descriptor z~ under the archive's embedding version.
    """
    host = jax.device_get({
        "valid": archive.valid, "e": archive.elites.replace(params=archive.elites.params[:0]),
        "d_min": archive.d_min, "tag": archive.tag, "version": archive.embedding_version,
    })
    e = host["e"]
    slots = np.flatnonzero(host["valid"])
    frame = pd.DataFrame({
        "task": task,
        "archive_tag": int(host["tag"]),
        "slot": slots,
        "elite_id": e.elite_id[slots],
        "parent_id": e.parent_id[slots],
        "visit": e.task[slots],
        "fitness": e.fitness[slots],
        "sr": e.sr[slots],
        "sigma": e.sigma[slots],
        "lineage": [";".join(map(str, lineage_visits(e.lineage[s]))) for s in slots],
        "embedding_version": int(host["version"]),
        "d_min": float(host["d_min"]),
    }, columns=list(ELITE_COLUMNS))
    desc = np.asarray(e.descriptor[slots], np.float64)
    for j in range(desc.shape[1]):
        frame[f"d_{j}"] = desc[:, j]
    return frame


def parse_lineage(cell: object) -> list[int]:
    """Inverse of the ``lineage`` column encoding (an empty cell -> [])."""
    if cell is None or (isinstance(cell, float) and np.isnan(cell)) or cell == "":
        return []
    return [int(v) for v in str(cell).split(";")]


__all__ = ["ELITE_COLUMNS", "archive_frame", "parse_lineage"]
