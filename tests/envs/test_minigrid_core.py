"""The MiniGrid port's core on hand-built states: actions, view, conventions, batching."""

from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import minigrid.core.actions
import minigrid.core.constants as farama_constants
import numpy as np
import pytest
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Door, Wall

from telapa.envs import make
from telapa.envs.minigrid import FLAG_NAMES, NO_TARGET, TARGET_CARRIED, State
from telapa.envs.minigrid.constants import (
    BALL,
    BLUE,
    BOX,
    CLOSED,
    COLOR_TO_IDX,
    DIR_TO_VEC,
    DOOR,
    GREEN,
    KEY,
    LOCKED,
    OBJECT_TO_IDX,
    OPEN,
    PURPLE,
    RED,
    STATE_TO_IDX,
    YELLOW,
    Action,
)
from telapa.envs.minigrid.env import success_reward
from telapa.envs.minigrid.farama import parse_mission
from telapa.envs.minigrid.gym_wrappers import is_minigrid_id, wrap_farama
from telapa.envs.minigrid.layout import put, walled_grid
from telapa.envs.minigrid.objects import EMPTY_CELL, GOAL_CELL, LAVA_CELL, WALL_CELL, cell
from telapa.envs.minigrid.observation import AGENT_VIEW_POS, visibility

ENV = make("MiniGrid-DoorKey-5x5-v0")
STEP = jax.jit(ENV.step)
OBSERVE = jax.jit(ENV.observe)
AGENT = (1, 2)  # facing right (dir 0), so the front cell is (2, 2)
FRONT = (2, 2)

YELLOW_KEY = cell(KEY, YELLOW)
RED_KEY = cell(KEY, RED)
LOCKED_DOOR = cell(DOOR, YELLOW, LOCKED)


def room(front=None, carrying=None, inside=None, target_pos=NO_TARGET, max_steps=250) -> State:
    """A 5x5 room, the agent at (1, 2) facing ``front`` at (2, 2)."""
    grid = walled_grid(5, 5)
    contents = np.broadcast_to(EMPTY_CELL, grid.shape).copy()
    if front is not None:
        grid = put(grid, FRONT, front)
    if inside is not None:
        contents[FRONT] = inside
    state = State.create(
        grid, AGENT, 0, (GREEN, 8), max_steps, contents=contents, target_pos=target_pos
    )
    if carrying is not None:
        state = state.replace(carrying=jnp.asarray(carrying))
    return state


def act(state: State, *actions: int):
    for action in actions:
        state, obs, reward, terminated, truncated, info = STEP(state, action)
    return state, obs, reward, terminated, truncated, info


def front_of(state: State) -> list[int]:
    return np.asarray(state.grid[FRONT]).tolist()


def test_constants_match_farama() -> None:
    assert OBJECT_TO_IDX == farama_constants.OBJECT_TO_IDX
    assert COLOR_TO_IDX == farama_constants.COLOR_TO_IDX
    assert STATE_TO_IDX == farama_constants.STATE_TO_IDX
    np.testing.assert_array_equal(DIR_TO_VEC, np.array(farama_constants.DIR_TO_VEC))
    assert {a.name: a.value for a in Action} == {
        a.name.upper(): a.value for a in minigrid.core.actions.Actions
    }


def test_locked_door_opens_only_with_its_key_which_is_kept() -> None:
    state, *_ = act(room(LOCKED_DOOR), Action.TOGGLE)
    assert front_of(state) == LOCKED_DOOR.tolist()  # no key
    state, *_ = act(room(LOCKED_DOOR, carrying=RED_KEY), Action.TOGGLE)
    assert front_of(state) == LOCKED_DOOR.tolist()  # wrong colour
    state, *_ = act(room(LOCKED_DOOR, carrying=YELLOW_KEY), Action.TOGGLE)
    assert front_of(state) == [DOOR, YELLOW, OPEN]
    assert np.asarray(state.carrying).tolist() == YELLOW_KEY.tolist()
    state, *_ = act(state, Action.TOGGLE)
    assert front_of(state) == [DOOR, YELLOW, CLOSED]  # unlocked doors just close...
    state, *_ = act(state.replace(carrying=jnp.asarray(EMPTY_CELL)), Action.TOGGLE)
    assert front_of(state) == [DOOR, YELLOW, OPEN]  # ...and reopen without a key


def test_forward_only_into_overlappable_cells() -> None:
    for front, passes in [
        (None, True),
        (cell(DOOR, BLUE, OPEN), True),
        (cell(DOOR, BLUE, CLOSED), False),
        (LOCKED_DOOR, False),
        (WALL_CELL, False),
        (YELLOW_KEY, False),
    ]:
        state, *_ = act(room(front), Action.FORWARD)
        assert np.asarray(state.agent_pos).tolist() == list(FRONT if passes else AGENT)


def test_goal_succeeds_and_lava_fails() -> None:
    state, _, reward, terminated, _, info = act(room(GOAL_CELL), Action.FORWARD)
    assert terminated and info["success"] and reward == np.float32(1 - 0.9 * 1 / 250)
    assert info["features"][5 + FLAG_NAMES.index("delivered")] == 1
    state, _, reward, terminated, _, info = act(room(LAVA_CELL), Action.FORWARD)
    assert terminated and not info["success"] and reward == 0
    assert np.asarray(state.agent_pos).tolist() == list(FRONT)


def test_pickup_only_pickable_objects_with_empty_hands() -> None:
    state, *_ = act(room(cell(BALL, BLUE)), Action.PICKUP)
    assert np.asarray(state.carrying).tolist() == [BALL, BLUE, 0]
    assert front_of(state) == EMPTY_CELL.tolist()
    state, *_ = act(room(cell(BALL, BLUE), carrying=RED_KEY), Action.PICKUP)
    assert np.asarray(state.carrying).tolist() == RED_KEY.tolist()
    assert front_of(state) == [BALL, BLUE, 0]
    for unpickable in (WALL_CELL, GOAL_CELL, LOCKED_DOOR):
        state, *_ = act(room(unpickable), Action.PICKUP)
        assert np.asarray(state.carrying).tolist() == EMPTY_CELL.tolist()


def test_drop_only_into_an_empty_cell() -> None:
    for occupied in (WALL_CELL, GOAL_CELL, cell(BALL, BLUE), cell(DOOR, BLUE, OPEN)):
        state, *_ = act(room(occupied, carrying=RED_KEY), Action.DROP)
        assert np.asarray(state.carrying).tolist() == RED_KEY.tolist()
        assert front_of(state) == occupied.tolist()
    state, *_ = act(room(carrying=RED_KEY), Action.DROP)
    assert np.asarray(state.carrying).tolist() == EMPTY_CELL.tolist()
    assert front_of(state) == RED_KEY.tolist()


def test_box_toggle_yields_its_contents_which_travel_with_the_box() -> None:
    box = cell(BOX, PURPLE)
    state, _, _, _, _, info = act(room(box, inside=cell(KEY, BLUE)), Action.TOGGLE)
    assert front_of(state) == [KEY, BLUE, 0]
    assert np.asarray(state.contents[FRONT]).tolist() == EMPTY_CELL.tolist()
    assert info["features"][5 + FLAG_NAMES.index("box_toggled")] == 1
    state, *_ = act(room(box), Action.TOGGLE)
    assert front_of(state) == EMPTY_CELL.tolist()
    # Carried away and dropped elsewhere, a box keeps what it holds.
    state, *_ = act(
        room(box, inside=cell(BALL, RED)),
        Action.PICKUP,
        Action.RIGHT,
        Action.DROP,
        Action.TOGGLE,
    )
    assert np.asarray(state.grid[1, 3]).tolist() == [BALL, RED, 0]


def test_target_is_tracked_through_pickup_drop_and_box_opening() -> None:
    state, *_ = act(room(cell(BALL, RED), target_pos=FRONT), Action.PICKUP)
    assert np.asarray(state.target_pos).tolist() == list(TARGET_CARRIED)
    state, *_ = act(state, Action.RIGHT, Action.DROP)
    assert np.asarray(state.target_pos).tolist() == [1, 3]
    state, *_ = act(room(cell(BOX, RED), target_pos=FRONT), Action.TOGGLE)
    assert np.asarray(state.target_pos).tolist() == list(NO_TARGET)


def test_view_shows_the_carried_object_in_the_agent_cell() -> None:
    assert np.asarray(OBSERVE(room())["image"][AGENT_VIEW_POS]).tolist() == [1, 0, 0]
    carrying = OBSERVE(room(carrying=RED_KEY))["image"]
    assert np.asarray(carrying[AGENT_VIEW_POS]).tolist() == RED_KEY.tolist()
    # Standing in an open doorway, the agent's cell still shows its hands, not the door.
    state, *_ = act(room(cell(DOOR, BLUE, OPEN)), Action.FORWARD)
    assert np.asarray(OBSERVE(state)["image"][AGENT_VIEW_POS]).tolist() == [1, 0, 0]


def test_visibility_matches_farama_process_vis() -> None:
    rng = np.random.default_rng(0)
    batch = jax.jit(jax.vmap(visibility))
    views, expected = [], []
    for _ in range(500):
        grid = Grid(7, 7)
        kinds = rng.choice(4, size=(7, 7), p=[0.55, 0.25, 0.1, 0.1])
        for (x, y), kind in np.ndenumerate(kinds):
            if (x, y) != AGENT_VIEW_POS and kind:
                obj = [Wall(), Door("red", is_open=rng.random() < 0.5), Ball("blue")][kind - 1]
                grid.set(x, y, obj)
        views.append(grid.encode())
        expected.append(grid.process_vis(agent_pos=AGENT_VIEW_POS))
    np.testing.assert_array_equal(np.asarray(batch(jnp.asarray(np.stack(views)))), expected)


@pytest.mark.parametrize("action", [-1, 7, 100])
def test_out_of_range_actions_are_noops_that_count_a_step(action: int) -> None:
    before = room(cell(BALL, BLUE))
    after, _, reward, terminated, _, info = act(before, action)
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), before, after)
    assert [name for name, c in vars(changed).items() if c] == ["step_count"]
    assert reward == 0 and not terminated
    assert info["features"][4] == (0.0 if action < 0 else 1.0)  # action feature clipped


def test_truncation_at_max_steps() -> None:
    state, _, _, _, truncated, _ = act(room(max_steps=3), Action.LEFT, Action.LEFT)
    assert not truncated
    _, _, _, terminated, truncated, _ = act(state, Action.LEFT)
    assert truncated and not terminated


@pytest.mark.parametrize("max_steps", [1, 7, 100, 250, 256, 640, 2880])
def test_success_reward_is_float32_of_farama_float64(max_steps: int) -> None:
    steps = np.arange(1, max_steps + 1, dtype=np.int32)
    limits = np.full_like(steps, max_steps)  # per env, as in a batch of states
    reward = jax.jit(jax.vmap(success_reward))(steps, limits)
    expected = np.float32(1 - 0.9 * (steps / max_steps))
    np.testing.assert_array_equal(np.asarray(reward), expected)


def test_flags_are_sticky_within_an_episode() -> None:
    state, *_ = act(room(YELLOW_KEY), Action.PICKUP)
    state, _, _, _, _, info = act(state, Action.RIGHT, Action.DROP)
    assert not np.asarray(state.carrying[0] == KEY)
    assert info["features"][5 + FLAG_NAMES.index("has_key")] == 1


def test_make_unknown_id_lists_available_ids() -> None:
    with pytest.raises(ValueError, match="MiniGrid-DoorKey-8x8-v0"):
        make("MiniGrid-NoSuchTask-v0")


def test_make_options_and_spec() -> None:
    env = make("MiniGrid-DoorKey-8x8-v0", observe_mission=False)
    assert env.spec.max_steps == 640 and env.spec.n_actions == 7 and env.spec.feature_dim == 11
    _, obs = jax.eval_shape(env.reset, jax.random.key(0))  # traced, not run (4 s eagerly)
    assert set(obs) == {"image", "direction"} == set(env.spec.observation)


def test_jit_vmap_batch_of_64() -> None:
    env = make("MiniGrid-DoorKey-8x8-v0")
    keys = jax.random.split(jax.random.key(0), 64)
    state, obs = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))
    for t in range(5):
        actions = jax.random.randint(jax.random.key(t), (64,), 0, 7)
        state, obs, reward, terminated, truncated, info = step(state, actions)
    for name, spec in env.spec.observation.items():
        assert obs[name].shape == (64, *spec.shape) and obs[name].dtype == spec.dtype
    assert reward.shape == terminated.shape == truncated.shape == (64,)
    assert info["features"].shape == (64, 11) and info["features"].dtype == jnp.float32
    assert np.all(np.asarray(state.step_count) == 5)
    assert len({np.asarray(g).tobytes() for g in state.grid}) > 1  # levels differ


def test_parse_mission() -> None:
    assert parse_mission("use the key to open the door and then get to the goal") == (GREEN, 8)
    assert parse_mission("get to the green goal square") == (GREEN, 8)
    assert parse_mission("you must fetch a red ball") == (RED, BALL)
    assert parse_mission("open the red door then the blue door") == (BLUE, DOOR)
    with pytest.raises(ValueError):
        parse_mission("go to the matching object at the end of the hallway")


def test_gym_wrapper_spaces_and_ids() -> None:
    env = wrap_farama(gym.make("MiniGrid-DoorKey-5x5-v0"))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    obs, _, _, _, info = env.step(Action.LEFT)
    assert env.observation_space.contains(obs) and info["features"].shape == (11,)
    assert not info["success"]
    assert is_minigrid_id("MiniGrid-DoorKey-5x5-v0") and is_minigrid_id("BabyAI-GoToLocal-v0")
    assert not is_minigrid_id("CartPole-v1") and not is_minigrid_id("NoSuchEnv-v0")
