"""MultiRoom-N2-S4: room placement against ``_placeRoom``, generated layouts, and rules.

Distribution against Farama: tests/envs/test_minigrid_generation.py; step-by-step
dynamics against Farama: tests/envs/test_minigrid_differential.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from minigrid_levels import generate_levels
from minigrid_solvability import solvable

from telapa.envs import make
from telapa.envs.minigrid import FLAG_NAMES, GOAL_MISSION, State, all_tasks
from telapa.envs.minigrid.constants import CLOSED, DOOR, GOAL, OPEN, RED, Action
from telapa.envs.minigrid.layout import put
from telapa.envs.minigrid.objects import EMPTY_CELL, GOAL_CELL, WALL_CELL, cell
from telapa.envs.minigrid.tasks.multiroom import RING, room_fits, room_layouts, sample_rooms

ENV_ID = "MiniGrid-MultiRoom-N2-S4-v0"
SIZE = 25


def test_room_fits_the_grid_as_place_room_checks() -> None:
    # topX + 4 > 25 fails but topY + 4 >= 25 fails: the right edge may be touched.
    for top, fits in [((21, 20), True), ((22, 20), False), ((21, 21), False), ((-1, 3), False)]:
        assert room_fits(top, SIZE, SIZE) == fits, top


def test_second_room_follows_place_room() -> None:
    keys = jax.random.split(jax.random.PRNGKey(0), 2000)
    rooms = jax.device_get(jax.jit(jax.vmap(lambda k: sample_rooms(k, SIZE, SIZE)))(keys))
    for corners in (rooms.first, rooms.second):
        assert all(room_fits(tuple(top), SIZE, SIZE) for top in corners)
    # _placeRoom's branches, exit wall right (0), south (1) or north (3), door offset d
    # in _rand_int(1, 3), next room offset _rand_int(door - 4 + 2, door) = door - k:
    offsets = (1, 2)
    right = {((3, d), (3, d - k)) for d in offsets for k in offsets}
    south = {((d, 3), (d - k, 3)) for d in offsets for k in offsets}
    north = {((d, 0), (d - k, -3)) for d in offsets for k in offsets}
    seen = {
        (tuple(door), tuple(second))
        for door, second in zip(rooms.door - rooms.first, rooms.second - rooms.first, strict=True)
    }
    assert seen == right | south | north


def _layout_probabilities() -> dict[tuple, float]:
    """``(first, second, door) -> probability`` of the sampling table."""
    edges, first, second, door = room_layouts(SIZE, SIZE)
    shares = np.diff(np.concatenate([[0], edges.astype(np.float64), [2.0**32]])) / 2.0**32
    keys = [tuple(map(tuple, row)) for row in zip(first, second, door, strict=True)]
    return dict(zip(keys, shares, strict=True))


def test_layout_table_by_hand() -> None:
    probability = _layout_probabilities()
    # An inner corner: all 12 tries fit, so each of its 12 layouts is equally likely.
    inner = [p for (first, _, _), p in probability.items() if first == (5, 5)]
    assert len(inner) == 12 and np.ptp(inner) < 1e-9
    # (21, 20) touches the right edge and the last allowed row: right and south exits
    # leave the grid; north ones put the second room at x = 21 + d - k, which fits for
    # (d, k) in {(1, 1), (1, 2), (2, 2)} but not (2, 1) (x = 22). With 3 of 12 tries
    # fitting, 1 - (3/4)^8 of attempts from it succeed, each fitting try equally likely.
    corner = {key: p for key, p in probability.items() if key[0] == (21, 20)}
    assert sorted(second for _, second, _ in corner) == [(20, 17), (21, 17), (21, 17)]
    ratio = sum(corner.values()) / sum(inner)
    assert ratio == pytest.approx(1 - 0.75**8, abs=1e-6)
    assert np.ptp(list(corner.values())) < 1e-9
    # Corners whose room does not fit never occur; the shares add up to one.
    assert not [first for first, _, _ in probability if not room_fits(first, SIZE, SIZE)]
    assert sum(probability.values()) == pytest.approx(1.0)


def test_generated_levels_need_the_door() -> None:
    levels = generate_levels(all_tasks()[ENV_ID].generate, n=500)
    kinds = levels.grid[..., 0]
    assert ((kinds == DOOR).sum((1, 2)) == 1).all() and ((kinds == GOAL).sum((1, 2)) == 1).all()
    assert (levels.grid[kinds == DOOR][:, 2] == CLOSED).all()
    assert (levels.mission == np.array(GOAL_MISSION)).all() and (levels.max_steps == 40).all()
    walled = levels.replace(grid=np.where((kinds == DOOR)[..., None], WALL_CELL, levels.grid))
    assert solvable(levels).all() and not solvable(walled).any()


def _two_rooms() -> State:
    """Rooms at (2, 2) and (5, 2), a closed red door at (5, 3), the goal at (6, 3); the
    agent at (4, 3) facing the door."""
    walls = np.concatenate([np.array([2, 2]) + RING, np.array([5, 2]) + RING])
    grid = np.broadcast_to(EMPTY_CELL, (SIZE, SIZE, 3)).copy()
    grid[walls[:, 0], walls[:, 1]] = WALL_CELL
    grid = put(put(grid, (5, 3), cell(DOOR, RED, CLOSED)), (6, 3), GOAL_CELL)
    return State.create(grid, (4, 3), 0, GOAL_MISSION, 40)


def _run(actions: list[Action]):
    """``(state, reward, terminated, truncated, info)`` after each action from `_two_rooms`."""
    step = jax.jit(make(ENV_ID).step)
    state = _two_rooms()
    outputs = []
    for action in actions:
        state, _, reward, terminated, truncated, info = step(state, jnp.int32(action))
        outputs.append((state, float(reward), bool(terminated), bool(truncated), info))
    return outputs


def test_open_the_door_then_reach_the_goal() -> None:
    steps = _run([Action.FORWARD, Action.TOGGLE, Action.FORWARD, Action.FORWARD])
    blocked, opened, in_door, at_goal = steps
    assert tuple(blocked[0].agent_pos) == (4, 3) and not blocked[2]
    assert opened[0].grid[5, 3, 2] == OPEN and opened[0].flags[FLAG_NAMES.index("door_open")]
    assert tuple(in_door[0].agent_pos) == (5, 3) and in_door[1] == 0 and not in_door[2]
    state, reward, terminated, truncated, info = at_goal
    assert terminated and not truncated and bool(info["success"])
    assert reward == pytest.approx(1 - 0.9 * 4 / 40) and state.flags[FLAG_NAMES.index("delivered")]


def test_nothing_but_the_goal_ends_an_episode() -> None:
    actions = [Action.PICKUP, Action.DROP, Action.DONE, Action.TOGGLE, Action.TOGGLE] + [
        Action.LEFT
    ] * 35
    steps = _run(actions)
    assert not any(terminated for _, _, terminated, _, _ in steps)
    assert [truncated for _, _, _, truncated, _ in steps] == [False] * 39 + [True]
    last = steps[-1][0]
    assert last.grid[5, 3, 2] == CLOSED and last.flags[FLAG_NAMES.index("door_open")]
