"""GoToObject, Fetch and RedBlueDoors: rules on hand-built states, generation vs Farama."""

from __future__ import annotations

import jax.numpy as jnp
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
import pytest
from level_statistics import assert_homogeneous
from minigrid_levels import N_LEVELS, farama_levels, port_levels
from minigrid_rules import outcome, step

from telapa.envs.minigrid import State, all_tasks
from telapa.envs.minigrid.constants import (
    BALL,
    BLUE,
    BOX,
    CLOSED,
    DOOR,
    EMPTY,
    GREEN,
    KEY,
    OPEN,
    RED,
    WALL,
    Action,
)
from telapa.envs.minigrid.layout import put, walled_grid
from telapa.envs.minigrid.objects import WALL_CELL, cell

GOTO = "MiniGrid-GoToObject-8x8-N2-v0"
FETCH = "MiniGrid-Fetch-6x6-N2-v0"
REDBLUE = "MiniGrid-RedBlueDoors-8x8-v0"
RIGHT, DOWN, LEFT, UP = range(4)


def _state(env_id: str, objects: dict, agent_pos, agent_dir, mission, **kwargs) -> State:
    """A fresh state of ``env_id``'s empty walled grid with ``objects`` ({pos: cell})."""
    task = all_tasks()[env_id]
    grid = walled_grid(task.width, task.height)
    for pos, obj in objects.items():
        grid = put(grid, pos, obj)
    return State.create(grid, agent_pos, agent_dir, mission, task.max_steps, **kwargs)


# GoToObject ----------------------------------------------------------------------------

GREEN_BALL = cell(BALL, GREEN)


def _goto(agent_pos, agent_dir=RIGHT, objects=None, target=(3, 3)) -> State:
    objects = {(3, 3): GREEN_BALL} if objects is None else objects
    task_data = jnp.array([*target, 0, 0])
    return _state(GOTO, objects, agent_pos, agent_dir, (GREEN, BALL), task_data=task_data)


@pytest.mark.parametrize("agent_pos", [(2, 3), (4, 3), (3, 2), (3, 4)])
def test_goto_done_next_to_target_succeeds(agent_pos) -> None:
    success, terminated, reward = outcome(GOTO, _goto(agent_pos, UP), Action.DONE)
    assert success and terminated and reward > 0


@pytest.mark.parametrize("agent_pos", [(2, 2), (4, 4), (1, 3), (3, 5)])
def test_goto_done_elsewhere_ends_unrewarded(agent_pos) -> None:
    assert outcome(GOTO, _goto(agent_pos), Action.DONE) == (False, True, 0.0)


def test_goto_target_is_where_it_was_generated() -> None:
    moved = {(5, 5): GREEN_BALL}  # the ball was carried away from (3, 3)
    assert outcome(GOTO, _goto((2, 3), objects=moved), Action.DONE)[0]
    assert outcome(GOTO, _goto((4, 5), objects=moved), Action.DONE) == (False, True, 0.0)


def test_goto_toggle_ends_unrewarded() -> None:
    next_to_box = _goto((2, 3), objects={(3, 3): cell(BOX, GREEN)})
    assert outcome(GOTO, next_to_box, Action.TOGGLE) == (False, True, 0.0)
    assert outcome(GOTO, _goto((5, 5)), Action.TOGGLE) == (False, True, 0.0)


@pytest.mark.parametrize("action", [Action.LEFT, Action.FORWARD, Action.PICKUP, Action.DROP])
def test_goto_other_actions_go_on(action) -> None:
    assert outcome(GOTO, _goto((2, 3)), action) == (False, False, 0.0)


# Fetch ---------------------------------------------------------------------------------


def _fetch(front: np.ndarray | None) -> State:
    """Agent at (2, 2) facing right at ``front``; the mission is the red ball."""
    objects = {} if front is None else {(3, 2): front}
    return _state(FETCH, objects, (2, 2), RIGHT, (RED, BALL))


def test_fetch_picking_up_the_mission_object_succeeds() -> None:
    success, terminated, reward = outcome(FETCH, _fetch(cell(BALL, RED)), Action.PICKUP)
    assert success and terminated and reward > 0


@pytest.mark.parametrize("wrong", [cell(KEY, RED), cell(BALL, BLUE)])
def test_fetch_picking_up_anything_else_fails(wrong) -> None:
    assert outcome(FETCH, _fetch(wrong), Action.PICKUP) == (False, True, 0.0)


@pytest.mark.parametrize("action", [Action.PICKUP, Action.FORWARD, Action.TOGGLE, Action.DONE])
def test_fetch_goes_on_with_empty_hands(action) -> None:
    assert outcome(FETCH, _fetch(None), action) == (False, False, 0.0)


# RedBlueDoors --------------------------------------------------------------------------

RED_POS, BLUE_POS = (4, 3), (11, 5)


def _redblue(red: int, blue: int, facing: str) -> State:
    """Doors in the given states; the agent in the room, in front of one door."""
    objects = {(x, y): WALL_CELL for x in (4, 11) for y in range(8)}
    objects |= {RED_POS: cell(DOOR, RED, red), BLUE_POS: cell(DOOR, BLUE, blue)}
    agent_pos, agent_dir = {"red": ((5, 3), LEFT), "blue": ((10, 5), RIGHT)}[facing]
    task_data = jnp.array([*RED_POS, *BLUE_POS])
    return _state(REDBLUE, objects, agent_pos, agent_dir, (BLUE, DOOR), task_data=task_data)


def test_redblue_blue_after_red_succeeds() -> None:
    success, terminated, reward = outcome(REDBLUE, _redblue(OPEN, CLOSED, "blue"), Action.TOGGLE)
    assert success and terminated and reward > 0


def test_redblue_blue_first_fails() -> None:
    state = _redblue(CLOSED, CLOSED, "blue")
    assert outcome(REDBLUE, state, Action.TOGGLE) == (False, True, 0.0)


def test_redblue_red_closed_again_then_blue_fails() -> None:
    state = _redblue(OPEN, CLOSED, "red")
    state, *_ = step(REDBLUE)(state, Action.TOGGLE)  # closes the red door
    state = state.replace(agent_pos=jnp.array([10, 5]), agent_dir=jnp.array(RIGHT))
    assert outcome(REDBLUE, state, Action.TOGGLE) == (False, True, 0.0)


def test_redblue_opening_red_goes_on() -> None:
    assert outcome(REDBLUE, _redblue(CLOSED, CLOSED, "red"), Action.TOGGLE) == (False, False, 0.0)


def test_redblue_closing_blue_with_red_open_fails() -> None:
    """Farama's ``elif``: red open after the step, blue open before it, closed after."""
    state = _redblue(OPEN, OPEN, "blue")
    assert outcome(REDBLUE, state, Action.TOGGLE) == (False, True, 0.0)
    assert outcome(REDBLUE, _redblue(CLOSED, OPEN, "blue"), Action.TOGGLE)[1] is False


# Generation ----------------------------------------------------------------------------

def _objects(levels: State) -> np.ndarray:
    """bool ``(N, W, H)``: cells holding an object other than a wall."""
    kind = levels.grid[..., 0]
    return (kind != EMPTY) & (kind != WALL)


def _statistics(levels: State) -> dict[str, np.ndarray]:
    """Categorical per-level statistics of the generator's random choices.

    The target's (GoToObject) and the doors' (RedBlueDoors) positions are those of the
    mission's kind and of the first object; the tests below check that ``task_data``
    holds them.
    """
    grid = np.asarray(levels.grid)
    n_levels = len(grid)
    objects = _objects(levels).reshape(n_levels, -1)
    types, colors = grid[..., 0].reshape(n_levels, -1), grid[..., 1].reshape(n_levels, -1)
    same_type = objects & (types == levels.mission[:, 1:])
    same_kind = same_type & (colors == levels.mission[:, :1])
    two_types = np.sort(np.where(objects, types, 0), axis=1)[:, -2:]
    return {
        "agent cell": levels.agent_pos @ np.array([100, 1]),
        "agent dir": levels.agent_dir,
        "mission": levels.mission @ np.array([100, 1]),
        "objects of the mission's type": same_type.sum(1),
        "objects of the mission's kind": same_kind.sum(1),
        "first object's cell": np.argmax(objects, axis=1),
        "first cell of the mission's kind": np.argmax(same_kind, axis=1),
        "objects' types": two_types @ np.array([100, 1]),
    }


@pytest.mark.parametrize("env_id", [GOTO, FETCH, REDBLUE])
def test_generation_matches_farama_in_distribution(env_id: str) -> None:
    """Two-sample chi-square tests, port levels against Farama's (fixed seeds)."""
    assert_homogeneous(_statistics(port_levels(env_id)), _statistics(farama_levels(env_id)))


@pytest.mark.parametrize("env_id", [GOTO, FETCH])
def test_generated_objects_and_mission(env_id: str) -> None:
    levels = port_levels(env_id)
    objects = _objects(levels)
    assert (objects.sum((1, 2)) == 2).all()
    types = levels.grid[..., 0][objects].reshape(N_LEVELS, 2)
    colors = levels.grid[..., 1][objects].reshape(N_LEVELS, 2)
    allowed = (KEY, BALL, BOX) if env_id == GOTO else (KEY, BALL)
    assert np.isin(types, allowed).all()
    for t in allowed:
        assert (types == t).any()
    is_mission = (types == levels.mission[:, 1:]) & (colors == levels.mission[:, :1])
    assert is_mission.any(1).all()
    agent = levels.grid[np.arange(N_LEVELS), levels.agent_pos[:, 0], levels.agent_pos[:, 1]]
    assert (agent[:, 0] == EMPTY).all()
    if env_id == GOTO:
        distinct = (types[:, 0] != types[:, 1]) | (colors[:, 0] != colors[:, 1])
        assert distinct.all()
        target = levels.task_data[:, :2]
        at_target = levels.grid[np.arange(N_LEVELS), target[:, 0], target[:, 1]]
        np.testing.assert_array_equal(at_target[:, :2], levels.mission[:, ::-1])
    else:
        assert (~is_mission.all(1)).any() and is_mission.all(1).any()  # twins occur


def test_generated_redblue_layout() -> None:
    levels = port_levels(REDBLUE)
    red, blue = levels.task_data[:, :2], levels.task_data[:, 2:]
    assert (red[:, 0] == 4).all() and (blue[:, 0] == 11).all()
    assert set(red[:, 1]) == set(blue[:, 1]) == set(range(1, 7))
    rows = np.arange(N_LEVELS)
    assert (levels.grid[rows, red[:, 0], red[:, 1]] == [DOOR, RED, CLOSED]).all()
    assert (levels.grid[rows, blue[:, 0], blue[:, 1]] == [DOOR, BLUE, CLOSED]).all()
    x, y = levels.agent_pos.T
    assert (x >= 5).all() and (x <= 10).all() and (y >= 1).all() and (y <= 6).all()
    np.testing.assert_array_equal(levels.mission, [[BLUE, DOOR]] * N_LEVELS)
