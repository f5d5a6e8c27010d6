"""Every port's level generator against Farama's, in distribution, and its levels solvable.

For each registered id, `N_LEVELS` = 2,000 port levels (one jitted ``vmap`` of
`Task.generate` over keys) and 2,000 Farama levels (``reset(seed=s)``, s = 0..1999,
read with `from_farama`) are compared statistic by statistic (`level_statistics`):
agent cell, x, y and direction; mission (colour, type); target cell; ``task_data``;
per object category (doors, keys, balls, boxes, goals, walls, objects in boxes) the
count and the cell, x, y and (colour, state) of the objects ranked in reading order;
and whether the level is solvable. Each statistic is one categorical value per level,
compared by Pearson's chi-square test of homogeneity on its 2 x B table after pooling
bins with expected count < 5; with K statistics, an id fails when some p-value is below
1e-3 / K (Bonferroni: family-wise alpha 1e-3 per id).

Tests of the test: deliberately wrong generators, each a plausible porting slip, are
rejected by the same procedure against the same Farama sample.

Solvability: `minigrid_solvability.solvable` must accept every Farama level (which
validates the checker: Farama's generators for the ported ids guarantee solvable
levels) and every port level.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from level_statistics import compare, describe, level_statistics, pool_rare_bins, rejections
from minigrid_levels import Generator, farama_levels, generate_levels, port_levels
from minigrid_solvability import pickups_end_episode, solvable

from telapa.envs.minigrid import GOAL_MISSION, State, Task, all_tasks
from telapa.envs.minigrid.constants import BLUE, DOOR, GREEN, KEY, LOCKED, RED, YELLOW
from telapa.envs.minigrid.layout import put, sample_empty_cell
from telapa.envs.minigrid.objects import EMPTY_CELL, WALL_CELL, cell
from telapa.envs.minigrid.tasks import multiroom

IDS = sorted(all_tasks())


@functools.cache
def solvable_levels(env_id: str) -> tuple[np.ndarray, np.ndarray]:
    """bool ``(N_LEVELS,)`` for the port's levels and for Farama's."""
    port = port_levels(env_id)
    task = all_tasks()[env_id]
    movable = not pickups_end_episode(task, jax.tree.map(lambda leaf: leaf[0], port))
    return solvable(port, movable), solvable(farama_levels(env_id), movable)


@pytest.mark.parametrize("env_id", IDS)
def test_generation_matches_farama(env_id: str) -> None:
    results = compare(
        port_levels(env_id), farama_levels(env_id), {"solvable": solvable_levels(env_id)}
    )
    rejected = rejections(results)
    assert not rejected, f"{len(results)} statistics, rejected:\n{describe(rejected)}"


@pytest.mark.parametrize("env_id", IDS)
def test_generated_levels_are_solvable(env_id: str) -> None:
    port, farama = solvable_levels(env_id)
    assert farama.all(), f"the checker rejects Farama's seeds {np.flatnonzero(~farama)[:10]}"
    assert port.all(), f"unsolvable port levels: {np.flatnonzero(~port)[:10]}"


def _fixed_direction(task: Task) -> Generator:
    """The agent always facing right (``place_agent(rand_dir=False)``)."""
    return lambda key: task.generate(key).replace(agent_dir=jnp.int32(0))


def _key_anywhere(task: Task) -> Generator:
    """DoorKey's key on any free cell, either side of the wall (``place_obj`` without
    its ``top`` and ``size``)."""

    def generate(key: jax.Array):
        level_key, key_key = jax.random.split(key)
        level = task.generate(level_key)
        grid = jnp.where((level.grid[..., 0] == KEY)[..., None], EMPTY_CELL, level.grid)
        anywhere = jnp.ones(grid.shape[:2], bool)
        pos = sample_empty_cell(key_key, grid, anywhere, avoid=level.agent_pos)
        return level.replace(grid=put(grid, pos, cell(KEY, YELLOW)))

    return generate


def _door_row_inclusive(task: Task) -> Generator:
    """DoorKey's door row from ``[1, height - 2]``: ``_rand_int``'s high read as inclusive."""

    def generate(key: jax.Array):
        level_key, row_key = jax.random.split(key)
        level = task.generate(level_key)
        is_door = level.grid[..., 0] == DOOR
        door_x = jnp.argmax(is_door.any(axis=1))
        grid = jnp.where(is_door[..., None], WALL_CELL, level.grid)
        door_y = jax.random.randint(row_key, (), 1, task.height - 1)
        return level.replace(grid=put(grid, (door_x, door_y), cell(DOOR, YELLOW, LOCKED)))

    return generate


def _room_may_touch_bottom(task: Task) -> Generator:
    """MultiRoom without ``_placeRoom``'s quirk: ``topY + sizeY > height`` fails, as for x."""

    def fits(top: tuple[int, int], width: int, height: int) -> bool:
        size = multiroom.ROOM_SIZE
        return min(top) >= 0 and top[0] + size <= width and top[1] + size <= height

    def generate(key: jax.Array):
        with mock.patch.object(multiroom, "room_fits", fits):  # in force while tracing
            return task.generate(key)

    return generate


MUTANTS: dict[str, tuple[str, Callable[[Task], Generator]]] = {
    "fixed direction": ("MiniGrid-DoorKey-8x8-v0", _fixed_direction),
    "key anywhere": ("MiniGrid-DoorKey-8x8-v0", _key_anywhere),
    "door row inclusive": ("MiniGrid-DoorKey-8x8-v0", _door_row_inclusive),
    "room may touch bottom": ("MiniGrid-MultiRoom-N2-S4-v0", _room_may_touch_bottom),
}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_wrong_generator_is_rejected(mutant: str) -> None:
    env_id, make_mutant = MUTANTS[mutant]
    results = compare(generate_levels(make_mutant(all_tasks()[env_id])), farama_levels(env_id))
    assert rejections(results), f"{mutant!r} passed as Farama's generator:\n{describe(results)}"


def test_rare_bins_are_pooled() -> None:
    table = np.array([[50, 40, 3, 1, 2], [45, 50, 2, 2, 2]], float)
    np.testing.assert_array_equal(pool_rare_bins(table), [[50, 40, 6], [45, 50, 6]])
    # A pool still below 5 expected joins the smallest bin.
    np.testing.assert_array_equal(
        pool_rare_bins(np.array([[50, 40, 1], [45, 50, 2]], float)), [[50, 41], [45, 52]]
    )


def test_statistics_rank_objects_in_reading_order() -> None:
    grids = np.broadcast_to(EMPTY_CELL, (3, 4, 3, 3)).copy()  # 3 levels of 4x3
    grids[1, 2, 0] = cell(KEY, RED)  # one key at (2, 0)
    grids[2, 0, 1] = cell(KEY, GREEN)  # two keys: (3, 0) comes first, row by row
    grids[2, 3, 0] = cell(KEY, BLUE)
    levels = [State.create(grid, (1, 1), 0, GOAL_MISSION, 10) for grid in grids]
    stats = level_statistics(jax.tree.map(lambda *leaves: np.stack(leaves), *levels))
    assert stats["key count"].tolist() == [0, 1, 2]
    assert stats["key 0 cell"].tolist() == [-1, 2 * 3 + 0, 3 * 3 + 0]  # x * height + y
    assert stats["key last cell"].tolist() == [-1, 2 * 3 + 0, 0 * 3 + 1]
    assert stats["key 1 (colour, state)"].tolist() == [-1, -1, GREEN * 3]
