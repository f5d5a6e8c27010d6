"""The solvability checker on hand-drawn levels (the test of a test's instrument)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from minigrid_levels import port_levels
from minigrid_solvability import pickups_end_episode, solvable

from telapa.envs.minigrid import GOAL_MISSION, NO_TARGET, State, all_tasks
from telapa.envs.minigrid.constants import (
    BALL,
    BOX,
    CLOSED,
    COLOR_TO_IDX,
    DOOR,
    GOAL,
    GREY,
    KEY,
    LAVA,
    LOCKED,
    WALL,
)
from telapa.envs.minigrid.objects import EMPTY_CELL, cell

COLORS = {name[0]: index for name, index in COLOR_TO_IDX.items() if name != "grey"} | {"e": GREY}
OBJECTS = {
    "#": (WALL, GREY, 0),
    "G": (GOAL, COLOR_TO_IDX["green"], 0),
    "V": (LAVA, COLOR_TO_IDX["red"], 0),
}
KINDS = {"D": (DOOR, CLOSED), "L": (DOOR, LOCKED), "K": (KEY, 0), "A": (BALL, 0), "B": (BOX, 0)}


def _cell(code: str) -> np.ndarray:
    if code[0] in OBJECTS:
        return cell(*OBJECTS[code[0]])
    obj_type, state = KINDS[code[0]]
    return cell(obj_type, COLORS[code[1]], state)


def draw(
    *rows: str,
    mission: tuple[int, int] = GOAL_MISSION,
    boxed: dict[tuple[int, int], str] | None = None,
    target: tuple[int, int] = NO_TARGET,
) -> State:
    """A one-level batch from rows of two-character cells: ``".."`` empty, ``"@."`` the
    agent, ``"##"`` wall, ``"G."`` goal, ``"V."`` lava, else a kind letter (``D`` closed
    door, ``L`` locked door, ``K`` key, ``A`` ball, ``B`` box) and a colour initial
    (``r g b p y``, ``e`` grey); ``boxed`` maps a box's ``(x, y)`` to its contents."""
    width, height = len(rows[0]) // 2, len(rows)
    grid = np.broadcast_to(EMPTY_CELL, (width, height, 3)).copy()
    contents = grid.copy()
    agent = None
    for y, row in enumerate(rows):
        for x in range(width):
            code = row[2 * x : 2 * x + 2]
            if code[0] == "@":
                agent = (x, y)
            elif code != "..":
                grid[x, y] = _cell(code)
    for (x, y), code in (boxed or {}).items():
        contents[x, y] = _cell(code)
    level = State.create(grid, agent, 0, mission, 100, contents=contents, target_pos=target)
    return jax.tree.map(lambda leaf: np.asarray(leaf)[None], level)


def test_locked_door_needs_a_reachable_key_of_its_colour() -> None:
    key_before = draw("##########", "##@.KyLyG.", "##########")
    key_behind = draw("##########", "##@.LyKyG.", "##########")
    key_wrong = draw("##########", "##@.KrLyG.", "##########")
    assert solvable(key_before)[0] and not solvable(key_behind)[0]
    assert not solvable(key_wrong)[0]


def test_keys_in_boxes_and_closed_doors() -> None:
    level = draw("##############", "##@.BbLyDrG.##", "##############", boxed={(2, 1): "Ky"})
    assert solvable(level)[0]


@pytest.mark.parametrize("movable, expected", [(True, True), (False, False)])
def test_balls_block_unless_movable(movable: bool, expected: bool) -> None:
    level = draw("########", "##@.ArG.", "########")
    assert solvable(level, movable)[0] == expected


def test_lava_is_never_crossed() -> None:
    assert not solvable(draw("########", "##@.V.G.", "########"))[0]


def test_objective_is_the_target_else_the_missions_object() -> None:
    rows = ("##########", "##@.AbLr..", "########Ab")  # no red key: (4, 2) out of reach
    blue_ball, green_ball = (COLOR_TO_IDX["blue"], BALL), (COLOR_TO_IDX["green"], BALL)
    assert not solvable(draw(*rows, mission=blue_ball, target=(4, 2)))[0]
    assert solvable(draw(*rows, mission=blue_ball))[0]  # any blue ball: the one at (2, 1)
    assert not solvable(draw(*rows, mission=green_ball))[0]


@pytest.mark.parametrize(
    "env_id, ends", [("MiniGrid-Fetch-6x6-N2-v0", True), ("MiniGrid-DoorKey-5x5-v0", False)]
)
def test_pickups_end_the_episode_only_in_fetch(env_id: str, ends: bool) -> None:
    level = jax.tree.map(lambda leaf: leaf[0], port_levels(env_id))
    assert pickups_end_episode(all_tasks()[env_id], level) == ends
