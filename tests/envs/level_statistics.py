"""Two-sample comparison of MiniGrid level generators, one categorical statistic at a time.

`level_statistics` reduces each level to named categorical values (integer codes): the
agent's cell, x, y and direction; the mission's (colour, type); the target's cell, x
and y; each ``task_data`` entry; and per object category (every grid object type, and
every type found inside boxes) the number of such objects and, for the objects ranked
``0 .. MAX_RANKS - 1`` and last in reading order (row by row), their cell, x, y and
(colour, state). Every statistic has exactly one value per level, so two samples of
levels give two independent samples of it, as the test below assumes (pooled cell
counts would not: the objects of one level are correlated).

`compare` runs Pearson's chi-square test of homogeneity (no continuity correction) on
the 2 x B contingency table of each statistic, after pooling every bin whose expected
count is below `MIN_EXPECTED` into one bin (itself merged into the smallest other bin
if still below). Constant statistics, and statistics that split the levels exactly as
an earlier one does, are dropped. `rejections` applies Bonferroni's correction: the
generators differ, at family-wise level ``alpha``, when some statistic's p-value is
below ``alpha / K`` for K statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
from scipy.stats import chi2_contingency

from telapa.envs.minigrid import State
from telapa.envs.minigrid.constants import EMPTY, OBJECT_TO_IDX

FAMILY_ALPHA = 1e-3
"""Family-wise significance level of one comparison (all statistics of one id)."""
MIN_EXPECTED = 5.0
"""Smallest expected count of a bin before it is pooled."""
MAX_RANKS = 8
"""Objects of a category described individually, in reading order (and the last one)."""
ABSENT = -1
"""Code of a statistic about an object the level does not have."""

OBJECT_NAMES = {index: name for name, index in OBJECT_TO_IDX.items()}


@dataclass(frozen=True)
class Homogeneity:
    """The chi-square test of one statistic."""

    name: str
    chi2: float
    dof: int
    p_value: float


def _positions(
    prefix: str, present: np.ndarray, x: np.ndarray, y: np.ndarray, height: int
) -> dict[str, np.ndarray]:
    """Cell, x and y of an object, `ABSENT` where not ``present``."""
    return {
        f"{prefix} cell": np.where(present, x * height + y, ABSENT),
        f"{prefix} x": np.where(present, x, ABSENT),
        f"{prefix} y": np.where(present, y, ABSENT),
    }


def _category(name: str, mask: np.ndarray, codes: np.ndarray) -> dict[str, np.ndarray]:
    """Count and ranked objects of one category: ``mask``/``codes`` are ``(n, W, H)``."""
    n, width, height = mask.shape
    reading = mask.transpose(0, 2, 1).reshape(n, -1)  # flat index y * W + x
    codes = codes.transpose(0, 2, 1).reshape(n, -1)
    order = np.argsort(~reading, axis=1, kind="stable")  # objects first, in reading order
    count = reading.sum(1)
    out = {f"{name} count": count}
    max_count = int(count.max())
    ranks = {str(r): np.full(n, r) for r in range(min(max_count, MAX_RANKS))}
    if max_count > 1:
        ranks["last"] = count - 1
    for label, rank in ranks.items():
        present = (rank >= 0) & (rank < count)  # "last" of no object is rank -1
        index = order[np.arange(n), np.clip(rank, 0, None)]
        x, y = index % width, index // width
        out |= _positions(f"{name} {label}", present, x, y, height)
        out[f"{name} {label} (colour, state)"] = np.where(
            present, codes[np.arange(n), index], ABSENT
        )
    return out


def level_statistics(levels: State) -> dict[str, np.ndarray]:
    """Named int64 codes ``(n,)`` of a batch of levels (see the module docstring)."""
    grid, contents = np.asarray(levels.grid, np.int64), np.asarray(levels.contents, np.int64)
    height = grid.shape[2]
    agent, target = np.asarray(levels.agent_pos), np.asarray(levels.target_pos)
    mission = np.asarray(levels.mission)
    stats = _positions("agent", np.ones(len(agent), bool), agent[:, 0], agent[:, 1], height)
    stats["agent direction"] = np.asarray(levels.agent_dir)
    stats["mission (colour, type)"] = mission[:, 0] * len(OBJECT_TO_IDX) + mission[:, 1]
    stats |= _positions("target", target[:, 0] >= 0, target[:, 0], target[:, 1], height)
    for i, column in enumerate(np.asarray(levels.task_data).T):
        stats[f"task_data[{i}]"] = column
    for layer, suffix in ((grid, ""), (contents, " in box")):
        codes = layer[..., 1] * 3 + layer[..., 2]
        for obj_type in np.unique(layer[..., 0]):
            if obj_type != EMPTY:
                name = OBJECT_NAMES[int(obj_type)] + suffix
                stats |= _category(name, layer[..., 0] == obj_type, codes)
    return {name: np.asarray(value, np.int64) for name, value in stats.items()}


def pool_rare_bins(table: np.ndarray) -> np.ndarray:
    """Merges the bins (columns) of a 2 x B table whose expected count is below
    `MIN_EXPECTED` (see the module docstring)."""
    smaller = table.sum(1).min()
    expected = table.sum(0) * smaller / table.sum()
    rare = expected < MIN_EXPECTED
    if not rare.any():
        return table
    kept, pool = table[:, ~rare], table[:, rare].sum(1)
    if pool.sum() * smaller / table.sum() >= MIN_EXPECTED or kept.shape[1] == 0:
        return np.column_stack([kept, pool])
    kept = kept.copy()
    kept[:, np.argmin(kept.sum(0))] += pool
    return kept


def chi_square_homogeneity(a: np.ndarray, b: np.ndarray) -> tuple[float, int, float]:
    """``(chi2, dof, p)`` of Pearson's test that codes ``a`` and ``b`` share a distribution."""
    values, bins = np.unique(np.concatenate([a, b]), return_inverse=True)
    table = np.zeros((2, len(values)))
    np.add.at(table, (np.repeat([0, 1], [len(a), len(b)]), bins), 1)
    table = pool_rare_bins(table)
    if table.shape[1] < 2:
        return 0.0, 0, 1.0
    chi2, p_value, dof, _ = chi2_contingency(table, correction=False)
    return float(chi2), int(dof), float(p_value)


def compare(
    first: State, second: State, extra: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
) -> list[Homogeneity]:
    """Tests every non-constant, distinct statistic of two samples of levels.

    ``extra`` adds statistics computed elsewhere, as ``(codes of first, codes of second)``.
    """
    n = len(first.agent_dir)
    both = jax.tree.map(lambda a, b: np.concatenate([np.asarray(a), np.asarray(b)]), first, second)
    stats = level_statistics(both)
    for name, (a, b) in (extra or {}).items():
        stats[name] = np.concatenate([a, b]).astype(np.int64)
    results, seen = [], set()
    for name, codes in stats.items():
        relabelled = _by_first_appearance(codes)
        if relabelled.max() == 0 or relabelled.tobytes() in seen:
            continue
        seen.add(relabelled.tobytes())
        results.append(Homogeneity(name, *chi_square_homogeneity(codes[:n], codes[n:])))
    return results


def _by_first_appearance(codes: np.ndarray) -> np.ndarray:
    """``codes`` relabelled 0, 1, ... in order of first appearance: two statistics that
    split the levels alike (e.g. a wall's x and its right neighbour's) become equal."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    label = np.empty(len(first), np.int64)
    label[np.argsort(first)] = np.arange(len(first))
    return label[inverse]


def rejections(results: list[Homogeneity], alpha: float = FAMILY_ALPHA) -> list[Homogeneity]:
    """The statistics whose p-value is below Bonferroni's ``alpha / len(results)``."""
    return [r for r in results if r.p_value < alpha / max(len(results), 1)]


def describe(results: list[Homogeneity]) -> str:
    """One line per test, smallest p-value first."""
    return "\n".join(
        f"  {r.name}: chi2 {r.chi2:.1f}, dof {r.dof}, p {r.p_value:.2e}"
        for r in sorted(results, key=lambda r: r.p_value)
    )


def assert_homogeneous(
    first: dict[str, np.ndarray], second: dict[str, np.ndarray], alpha: float = 1e-3
) -> None:
    """Per named statistic (one value or row per level), Pearson's chi-square test of
    homogeneity on the unpooled table of distinct values must give ``p > alpha``."""
    for name, values in first.items():
        both = np.concatenate([values, second[name]]).reshape(len(values) + len(second[name]), -1)
        categories, index = np.unique(both, axis=0, return_inverse=True)
        if len(categories) == 1:
            continue
        table = np.zeros((2, len(categories)), int)
        np.add.at(table, (np.repeat([0, 1], [len(values), len(second[name])]), index.ravel()), 1)
        p_value = chi2_contingency(table).pvalue
        assert p_value > alpha, f"{name}: p = {p_value:.2g}\n{categories}\n{table}"
