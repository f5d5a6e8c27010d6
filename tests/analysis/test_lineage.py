"""Lineage matrices and properties on a hand-made curriculum A B C A' B' C'."""

from __future__ import annotations

import pandas as pd

from telapa.analysis.lineage import ancestry_matrix, immediate_source_matrix, lineage_properties

VISITS = pd.DataFrame({
    "visit": range(6),
    "tag": ["A", "B", "C", "A'", "B'", "C'"],
    "task": ["A", "B", "C", "A", "B", "C"],
})
TAG = dict(enumerate(VISITS["tag"]))

# (target visit, source visit, lineage visits, y); families A=0 B=1 C=2 in curriculum order.
CANDIDATES = [
    (4, 3, [0, 3], 0.1),        # c1 -> B': A, A'          breadth 1, A->A same family
    (4, 1, [0, 1], 0.2),        # c2 -> B': A, B           breadth 2, A->B adjacent, has B
    (4, 2, [0, 2], 0.3),        # c3 -> B': A, C           breadth 2, A->C skips B
    (4, 3, [0, 1, 2, 3], 0.4),  # c4 -> B': A B C A'       breadth 3, C->A wraps: adjacent
    (5, 4, [1, 4], 0.5),        # c5 -> C': B, B'          breadth 1
    (5, 2, [2], 0.6),           # c6 -> C': C              breadth 1, has C, no transition
    (5, 4, [0, 2, 4], 0.7),     # c7 -> C': A C B'         breadth 3, A->C and C->B skip
    (3, 2, [], 0.8),            # c8 -> A': empty lineage  breadth 0
]


def frame() -> pd.DataFrame:
    rows = [
        {"target_visit": t, "target": TAG[t], "source_visit": s, "source": TAG[s],
         "elite_id": i, "y": y, "lineage": lin}
        for i, (t, s, lin, y) in enumerate(CANDIDATES, start=1)
    ]
    return pd.DataFrame(rows)


def test_immediate_source_matrix() -> None:
    # (C, A') c8; (A', B') c1, c4; (B, B') c2; (C, B') c3; (B', C') c5, c7; (C, C') c6
    expected = pd.DataFrame(
        [[0, 1, 0],
         [1, 1, 1],
         [0, 2, 0],
         [0, 0, 2]],
        index=["B", "C", "A'", "B'"], columns=["A'", "B'", "C'"],
    )
    m = immediate_source_matrix(frame())
    pd.testing.assert_frame_equal(m, expected, check_names=False)
    assert (m.index.name, m.columns.name) == ("source", "target")


def test_ancestry_matrix_counts_every_lineage_tag() -> None:
    # B': A in c1-c4 (4); B in c2, c4 (2); C in c3, c4 (2); A' in c1, c4 (2).
    # C': A in c7 (1); B in c5 (1); C in c6, c7 (2); B' in c5, c7 (2).
    # A': c8 has an empty lineage -> a zero column.
    expected = pd.DataFrame(
        [[0, 4, 1],
         [0, 2, 1],
         [0, 2, 2],
         [0, 2, 0],
         [0, 0, 2]],
        index=["A", "B", "C", "A'", "B'"], columns=["A'", "B'", "C'"],
    )
    m = ancestry_matrix(frame(), VISITS)
    pd.testing.assert_frame_equal(m, expected, check_names=False)
    assert m.index.name == "ancestor"


def test_lineage_properties() -> None:
    p = lineage_properties(frame(), VISITS).set_index("elite_id")
    assert p["breadth"].tolist() == [1, 2, 2, 3, 1, 1, 3, 0]
    # medians: B' [1, 2, 2, 3] -> 2; C' [1, 1, 3] -> 1; A' [0] -> 0
    assert p["breadth_rich"].tolist() == [False, True, True, True, True, True, True, True]
    # target families B, B, B, B, C, C, C, A
    assert p["has_target_family"].tolist() == [False, True, False, True, False, True, True,
                                               False]
    assert p["non_adjacent"].tolist() == [False, False, True, False, False, False, True, False]
    assert p["y"].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]


def test_lineage_order_is_by_visit_time() -> None:
    # lineage [2, 0] is time order A -> C: non-adjacent even though listed backwards; a
    # backward step C -> A' (positions 2 -> 0 over 3 families) is the cycle wrap: adjacent.
    cands = frame().iloc[:2].assign(lineage=[[2, 0], [2, 3]])
    assert lineage_properties(cands, VISITS)["non_adjacent"].tolist() == [True, False]


def test_empty_candidates() -> None:
    empty = frame().iloc[:0]
    assert immediate_source_matrix(empty).empty
    assert ancestry_matrix(empty, VISITS).empty
    assert lineage_properties(empty, VISITS).empty
