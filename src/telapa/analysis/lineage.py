"""Stepping-stone lineages across task archives (paper Sec. "Stepping-Stone Lineages
Across Task Archives"), over the probed transfer candidates of `candidates_frame`.

Archive tags are visit tags: a candidate evaluated on visit ``C'`` comes from archive tag
``C'``; its lineage lists the visits in its recorded ancestry (the lineage bitmask,
which includes the visit the elite was evaluated on). Families are the per-task archives
(first-visit tags, ``A`` for ``A`` and ``A'``); the curriculum's family order is the order
of their first visits (e.g. A B C D E).

Choices where the paper is silent:
- Counts are of evaluated (probed) candidates, chosen or not; ancestry counts overlap: a
  candidate adds 1 to every distinct tag of its lineage.
- breadth = number of distinct families among the lineage visits (0 for an empty lineage).
- breadth_rich = breadth >= the median breadth of the same transfer's candidates (one
  run, one target visit), so at least half of each transfer is breadth-rich.
- has_target_family = some lineage visit belongs to the target's family (always False for
  a first visit, which has no earlier visit of its task).
- non_adjacent: the lineage visits, in time order, form transitions u -> v between
  consecutive entries. A transition is adjacent if both visits belong to the same family
  or v's family is the next family after u's in the curriculum's family order, cyclically
  (the last family is followed by the first, as a new cycle begins: E -> A' is adjacent,
  A -> C, C -> B' and B -> A' are not). non_adjacent = some transition is not adjacent; a
  lineage of fewer than 2 visits has none.
- Rows and columns follow visit order; rows list the tags that occur, columns every
  target of the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from telapa.analysis.data import family_order, visit_families


def _ordered_counts(
    rows: Sequence[str], cols: Sequence[str], targets: Sequence[str], rank: dict[str, int]
) -> pd.DataFrame:
    table = pd.crosstab(pd.Series(list(rows), dtype=object), pd.Series(list(cols), dtype=object))
    index = sorted(table.index, key=rank.__getitem__)
    columns = sorted(set(targets), key=rank.__getitem__)
    out = table.reindex(index=index, columns=columns, fill_value=0).astype(int)
    out.index.name, out.columns.name = "source", "target"
    return out


def immediate_source_matrix(candidates: pd.DataFrame) -> pd.DataFrame:
    """Counts of evaluated candidates: rows = source archive tag (tag of ``source_visit``),
    columns = target visit tag."""
    rank = {**dict(zip(candidates["source"], candidates["source_visit"], strict=True)),
            **dict(zip(candidates["target"], candidates["target_visit"], strict=True))}
    targets = candidates["target"]
    return _ordered_counts(candidates["source"], targets, targets, rank)


def ancestry_matrix(candidates: pd.DataFrame, visits: pd.DataFrame) -> pd.DataFrame:
    """Counts of lineage visits: rows = archive tags anywhere in a candidate's lineage,
    columns = target visit tag (overlapping: one count per distinct tag per candidate;
    a target whose candidates have empty lineages keeps a zero column)."""
    tags = visits.set_index("visit")["tag"]
    rank = {str(t): int(v) for v, t in tags.items()}
    rows, cols = [], []
    for target, lineage in zip(candidates["target"], candidates["lineage"], strict=True):
        for tag in dict.fromkeys(tags[v] for v in lineage):
            rows.append(tag)
            cols.append(target)
    out = _ordered_counts(rows, cols, candidates["target"], rank)
    out.index.name = "ancestor"
    return out


def _non_adjacent(families: list[str], position: dict[str, int]) -> bool:
    k = len(position)
    return any(f != g and (position[g] - position[f]) % k != 1
               for f, g in zip(families[:-1], families[1:], strict=True))


def lineage_properties(candidates: pd.DataFrame, visits: pd.DataFrame) -> pd.DataFrame:
    """Per candidate of one run: its transfer (target_visit, target), elite_id, y, breadth,
    breadth_rich, has_target_family and non_adjacent."""
    family = visit_families(visits)
    position = {f: i for i, f in enumerate(family_order(visits))}
    out = candidates[["target_visit", "target", "elite_id", "y"]].reset_index(drop=True)
    lineages = [[family[v] for v in sorted(lin)] for lin in candidates["lineage"]]
    out["breadth"] = np.array([len(set(f)) for f in lineages], dtype=int)
    median = out.groupby("target_visit", sort=False)["breadth"].transform("median")
    out["breadth_rich"] = out["breadth"] >= median
    targets = family[candidates["target_visit"].to_numpy()].to_numpy()
    out["has_target_family"] = [t in f for t, f in zip(targets, lineages, strict=True)]
    out["non_adjacent"] = [_non_adjacent(f, position) for f in lineages]
    return out


__all__ = ["ancestry_matrix", "immediate_source_matrix", "lineage_properties"]
