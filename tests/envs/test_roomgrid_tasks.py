"""BlockedUnlockPickup, ObstructedMaze-1Dlh, KeyCorridorS3R3: rules, generation, layout."""

from __future__ import annotations

import gymnasium as gym
import jax
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
import pytest
from level_statistics import assert_homogeneous
from minigrid_levels import N_LEVELS, farama_levels, port_levels
from minigrid_rules import outcome, step

from telapa.envs.minigrid import NO_TARGET, State, all_tasks
from telapa.envs.minigrid.constants import (
    BALL,
    BLUE,
    BOX,
    CLOSED,
    DIR_TO_VEC,
    DOOR,
    EMPTY,
    GREEN,
    GREY,
    KEY,
    LOCKED,
    PURPLE,
    RED,
    WALL,
    Action,
)
from telapa.envs.minigrid.layout import put, walled_grid
from telapa.envs.minigrid.objects import cell
from telapa.envs.minigrid.roomgrid import RoomGrid
from telapa.envs.minigrid.tasks.obstructedmaze import ObstructedMaze1D

BLOCKED = "MiniGrid-BlockedUnlockPickup-v0"
MAZE = "MiniGrid-ObstructedMaze-1Dlh-v0"
CORRIDOR = "MiniGrid-KeyCorridorS3R3-v0"
IDS = (BLOCKED, MAZE, CORRIDOR)
TARGET = {BLOCKED: cell(BOX, GREEN), MAZE: cell(BALL, BLUE), CORRIDOR: cell(BALL, GREEN)}
"""A target object of each task (its mission's kind)."""
RIGHT, DOWN, LEFT, UP = range(4)


def _state(env_id: str, objects: dict, target_pos=NO_TARGET, agent_dir: int = RIGHT) -> State:
    """The agent at (1, 1) in ``env_id``'s empty walled grid holding ``objects``."""
    task = all_tasks()[env_id]
    grid = walled_grid(task.width, task.height)
    for pos, obj in objects.items():
        grid = put(grid, pos, obj)
    mission = TARGET[env_id][1::-1]
    return State.create(grid, (1, 1), agent_dir, mission, task.max_steps, target_pos=target_pos)


# Rules: success is picking up env.obj, by identity -------------------------------------


@pytest.mark.parametrize("env_id", IDS)
def test_picking_up_the_target_succeeds(env_id: str) -> None:
    state = _state(env_id, {(2, 1): TARGET[env_id]}, target_pos=(2, 1))
    success, terminated, reward = outcome(env_id, state, Action.PICKUP)
    assert success and terminated
    assert reward == pytest.approx(1 - 0.9 / all_tasks()[env_id].max_steps)


@pytest.mark.parametrize("env_id", IDS)
def test_picking_up_the_targets_twin_goes_on(env_id: str) -> None:
    """Same type and colour, but not ``env.obj``: Farama compares by identity."""
    twins = {(2, 1): TARGET[env_id], (1, 3): TARGET[env_id]}
    state = _state(env_id, twins, target_pos=(1, 3))
    assert outcome(env_id, state, Action.PICKUP) == (False, False, 0.0)


@pytest.mark.parametrize("env_id", IDS)
def test_picking_up_with_the_target_in_hand_succeeds(env_id: str) -> None:
    """Farama's test is ``action == pickup and carrying == obj``, whatever the pickup did."""
    state = _state(env_id, {(2, 1): TARGET[env_id]}, target_pos=(2, 1))
    state, *_ = step(env_id)(state, Action.PICKUP)  # the target is now in hand
    for action in (Action.FORWARD, Action.DROP, Action.TOGGLE, Action.DONE):
        assert outcome(env_id, state, action) == (False, False, 0.0)
    assert outcome(env_id, state, Action.PICKUP)[:2] == (True, True)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("obj", [cell(KEY, BLUE), cell(BALL, PURPLE), cell(BOX, RED)])
def test_picking_up_other_objects_goes_on(env_id: str, obj: np.ndarray) -> None:
    state = _state(env_id, {(2, 1): obj, (1, 3): TARGET[env_id]}, target_pos=(1, 3))
    assert outcome(env_id, state, Action.PICKUP) == (False, False, 0.0)


def test_opened_target_box_can_no_longer_be_picked_up() -> None:
    """Toggling BlockedUnlockPickup's box replaces it by its (empty) contents."""
    state = _state(BLOCKED, {(2, 1): TARGET[BLOCKED]}, target_pos=(2, 1))
    state, _, _, terminated, _, info = step(BLOCKED)(state, Action.TOGGLE)
    assert not info["success"] and not terminated
    assert tuple(state.target_pos) == NO_TARGET
    assert outcome(BLOCKED, state, Action.PICKUP) == (False, False, 0.0)


# Generated levels ----------------------------------------------------------------------

def _first(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per level, ``values`` at the first cell of ``mask`` (-1 where there is none)."""
    return np.where(mask.any(1), values[np.arange(len(mask)), np.argmax(mask, axis=1)], -1)


def _statistics(levels: State) -> dict[str, np.ndarray]:
    """Categorical per-level statistics of the generator's choices, ``(N, k)`` each."""
    n_levels = len(levels.grid)
    types, colors, states = np.moveaxis(np.asarray(levels.grid).reshape(n_levels, -1, 3), 2, 0)
    hidden = np.asarray(levels.contents).reshape(n_levels, -1, 3)
    agent = np.column_stack([levels.agent_pos, levels.agent_dir])
    front = levels.agent_pos + DIR_TO_VEC[levels.agent_dir]
    stats = {
        "agent": agent,
        "agent's front": np.asarray(levels.grid)[np.arange(n_levels), *front.T, 0],
        "agent and target": np.column_stack([agent, levels.target_pos]),
        "mission": levels.mission,
        "target": levels.target_pos,
        "doors' states": np.where(types == DOOR, states, -1),
        "hidden objects": np.column_stack(
            [hidden[..., 0] != EMPTY, _first(hidden[..., 0] == KEY, hidden[..., 1])]
        ),
    }
    for name, kind in (("door", DOOR), ("key", KEY), ("ball", BALL), ("box", BOX)):
        stats[f"{name} cells"] = types == kind
        stats[f"{name} colour"] = _first(types == kind, colors)[:, None]
    doors, keys = stats["door cells"], stats["key cells"]
    stats["agent and doors"] = np.column_stack([agent, doors])
    stats["key and doors"] = np.column_stack([keys, doors])
    stats["key and door colours"] = np.column_stack([stats["key colour"], stats["door colour"]])
    return stats


@pytest.mark.parametrize("env_id", IDS)
def test_generation_matches_farama_in_distribution(env_id: str) -> None:
    """Two-sample chi-square tests, port levels against Farama's (fixed seeds)."""
    assert_homogeneous(_statistics(port_levels(env_id)), _statistics(farama_levels(env_id)))


def _at(levels: State, pos: np.ndarray) -> np.ndarray:
    """The encoded cell at each level's ``pos`` (``(N, 2)``)."""
    return levels.grid[np.arange(len(pos)), pos[:, 0], pos[:, 1]]


def _check_agent_start(levels: State, room: np.ndarray) -> None:
    """``RoomGrid.place_agent``: an empty cell of ``room``, facing an empty cell or a wall."""
    x, y = levels.agent_pos.T
    assert room[x, y].all()
    assert (_at(levels, levels.agent_pos)[:, 0] == EMPTY).all()
    front = _at(levels, levels.agent_pos + DIR_TO_VEC[levels.agent_dir])
    assert np.isin(front[:, 0], [EMPTY, WALL]).all()


def _cells(levels: State, kind: int) -> np.ndarray:
    """``(N, 2)`` position of each level's single object of type ``kind``."""
    mask = levels.grid[..., 0] == kind
    assert (mask.sum((1, 2)) == 1).all()
    return np.argwhere(mask)[:, 1:]


TWO_ROOMS = RoomGrid(room_size=6, num_cols=2, num_rows=1)
LEFT_ROOM = np.asarray(TWO_ROOMS.room_region(0, 0))
RIGHT_INSIDE = np.zeros((11, 6), bool)
RIGHT_INSIDE[6:10, 1:5] = True
RIGHT_INSIDE[[7, 8, 8, 8, 9], [3, 2, 3, 4, 3]] = False  # (8, 3), the start, and next to it


def _check_two_rooms(levels: State) -> np.ndarray:
    """The locked door between the rooms; returns its position."""
    door = _cells(levels, DOOR)
    assert (door[:, 0] == 5).all() and set(door[:, 1]) == {1, 2, 3, 4}
    assert (_at(levels, door)[:, 2] == LOCKED).all()
    _check_agent_start(levels, LEFT_ROOM)
    return door


def test_blocked_unlock_pickup_layout() -> None:
    levels = port_levels(BLOCKED)
    door = _check_two_rooms(levels)
    key, ball, box = (_cells(levels, kind) for kind in (KEY, BALL, BOX))
    np.testing.assert_array_equal(ball, door - [1, 0])
    np.testing.assert_array_equal(_at(levels, key)[:, 1], _at(levels, door)[:, 1])
    assert LEFT_ROOM[key[:, 0], key[:, 1]].all()
    assert RIGHT_INSIDE[box[:, 0], box[:, 1]].all()
    np.testing.assert_array_equal(levels.target_pos, box)
    np.testing.assert_array_equal(
        levels.mission, np.column_stack([_at(levels, box)[:, 1], [BOX] * N_LEVELS])
    )


def test_obstructed_maze_layout() -> None:
    levels = port_levels(MAZE)
    door = _check_two_rooms(levels)
    box, ball = _cells(levels, BOX), _cells(levels, BALL)
    assert not (levels.grid[..., 0] == KEY).any()
    assert (_at(levels, box)[:, 1] == GREY).all()
    assert LEFT_ROOM[box[:, 0], box[:, 1]].all()
    hidden = levels.contents[np.arange(N_LEVELS), box[:, 0], box[:, 1]]
    np.testing.assert_array_equal(
        hidden[:, :2], np.column_stack([[KEY] * N_LEVELS, _at(levels, door)[:, 1]])
    )
    assert (levels.contents[..., 0] != EMPTY).sum((1, 2)).max() == 1
    assert (_at(levels, ball)[:, 1] == BLUE).all()
    assert RIGHT_INSIDE[ball[:, 0], ball[:, 1]].all()
    np.testing.assert_array_equal(levels.target_pos, ball)
    np.testing.assert_array_equal(levels.mission, [[BLUE, BALL]] * N_LEVELS)


@pytest.mark.parametrize("key_in_box, blocked", [(False, False), (True, True)])
def test_obstructed_maze_variants(key_in_box: bool, blocked: bool) -> None:
    """The entry point's other options (1Dl, 1Dlhb): a bare key, a green ball at the door."""
    task = ObstructedMaze1D("1D", 11, 6, 288, key_in_box=key_in_box, blocked=blocked)
    keys = jax.random.split(jax.random.key(1), 64)
    levels = jax.device_get(jax.jit(jax.vmap(task.generate))(keys))
    door = _cells(levels, DOOR)
    balls = levels.grid[..., 0] == BALL
    assert (balls.sum((1, 2)) == 1 + blocked).all()
    blocker = _at(levels, door - [1, 0])
    assert ((blocker[:, 0] == BALL) & (blocker[:, 1] == GREEN)).all() == blocked
    assert (levels.grid[..., 0] == KEY).any((1, 2)).all() != key_in_box


def _reachable_cells(grid: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """Cells reachable from ``start`` through anything but walls (doors opened)."""
    reach = np.zeros(grid.shape[:2], bool)
    stack = [start]
    while stack:
        x, y = stack.pop()
        if reach[x, y] or grid[x, y, 0] == WALL:
            continue
        reach[x, y] = True
        stack += [(x + dx, y + dy) for dx, dy in DIR_TO_VEC]
    return reach


def test_key_corridor_layout() -> None:
    levels = port_levels(CORRIDOR)
    types, states = levels.grid[..., 0], levels.grid[..., 2]
    assert (types[:, 3, [2, 4]] == EMPTY).all()  # the corridor's removed walls
    ball, key = _cells(levels, BALL), _cells(levels, KEY)
    assert (ball[:, 0] == 5).all() and set(ball[:, 1]) == {1, 3, 5}
    assert (key[:, 0] == 1).all() and set(key[:, 1]) == {1, 3, 5}
    np.testing.assert_array_equal(levels.target_pos, ball)
    locked = (types == DOOR) & (states == LOCKED)
    assert (locked.sum((1, 2)) == 1).all()
    np.testing.assert_array_equal(np.argwhere(locked)[:, 1:], ball - [1, 0])
    lock = _at(levels, ball - [1, 0])
    np.testing.assert_array_equal(_at(levels, key)[:, 1], lock[:, 1])
    assert (states[(types == DOOR) & ~locked] == CLOSED).all()
    mission = np.column_stack([_at(levels, ball)[:, 1], [BALL] * N_LEVELS])
    np.testing.assert_array_equal(levels.mission, mission)
    x, y = levels.agent_pos.T
    assert (x == 3).all() and set(y) == {2, 3, 4}  # removed walls belong to the room
    interiors = np.zeros((7, 7), bool)
    interiors[1::2, 1::2] = True
    for grid, agent, row in zip(
        levels.grid[:200], levels.agent_pos[:200], ball[:200, 1], strict=True
    ):
        assert _reachable_cells(grid, tuple(agent))[interiors].all()
        assert (grid[5, [row - 1, row + 1], 0] == WALL).all()  # no side door to the lock


def test_task_constants_match_farama() -> None:
    for env_id in IDS:
        task, env = all_tasks()[env_id], gym.make(env_id).unwrapped
        assert (task.width, task.height, task.max_steps) == (env.width, env.height, env.max_steps)
        assert task.see_through_walls == env.see_through_walls


@pytest.mark.parametrize("rooms", [RoomGrid(3, 3, 3), RoomGrid(6, 2, 1), RoomGrid(5, 4, 2)])
def test_wall_numbering(rooms: RoomGrid) -> None:
    """Wall ``k`` of room ``(i, j)`` joins it to its neighbour in direction ``k``."""
    joined, corners, axes = rooms.shared_walls()
    for j in range(rooms.num_rows):
        for i in range(rooms.num_cols):
            for k, (dx, dy) in enumerate(DIR_TO_VEC):
                if 0 <= i + dx < rooms.num_cols and 0 <= j + dy < rooms.num_rows:
                    wall = rooms.wall_index(i, j, k)
                    pair = {rooms.room_index(i, j), rooms.room_index(i + dx, j + dy)}
                    assert set(joined[wall]) == pair
                    door = corners[wall] + axes[wall]  # a cell of the wall, off its corners
                    assert rooms.room_of(door - [dx, dy]) == rooms.room_index(i, j)
                    assert rooms.room_of(door + [dx, dy]) == rooms.room_index(i + dx, j + dy)
