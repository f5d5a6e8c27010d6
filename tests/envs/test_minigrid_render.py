"""The MiniGrid renderer against Farama's ``env.render()`` (``rgb_array``), pixel for pixel.

Episodes: Farama plays the differential test's random policy from a seeded reset and
renders every step; the port replays the same actions from `from_farama`'s start state
and renders the whole episode in one call. Random hand-built grids cover every object,
colour and door state, lava and floors (no ported task has them), and the agent standing
on any object.
"""

from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
import pytest
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Box, Door, Floor, Goal, Key, Lava, Wall
from minigrid_reference import ACTION_PROBS

from telapa.envs import make
from telapa.envs.minigrid import State, all_tasks, from_farama
from telapa.envs.minigrid.constants import (
    BALL,
    BOX,
    CLOSED,
    DOOR,
    GOAL,
    KEY,
    LOCKED,
    OPEN,
)
from telapa.envs.minigrid.render import render
from telapa.envs.minigrid.task import GOAL_MISSION

COLOR_NAMES = ("red", "green", "blue", "purple", "yellow", "grey")


def _farama_episode(env_id: str, seed: int, cap: int) -> tuple[State, np.ndarray, np.ndarray]:
    """Farama's start state (as the port's), actions and frames (start included): the
    differential test's random policy from ``reset(seed=seed)``, for at most ``cap`` steps."""
    env = gym.make(env_id, render_mode="rgb_array")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    start, frames, actions = from_farama(env), [env.render()], []
    for _ in range(cap):
        action = int(rng.choice(len(ACTION_PROBS), p=ACTION_PROBS))
        _, _, terminated, truncated, _ = env.step(action)
        actions.append(action)
        frames.append(env.render())
        if terminated or truncated:
            break
    env.close()
    return start, np.array(actions, np.int32), np.stack(frames)


def _port_states(env_id: str, starts: State, actions: np.ndarray) -> State:
    """The port's states from ``starts`` (B,) through ``actions`` (B, T): ``(B, T + 1)``,
    the start included, as numpy arrays."""
    env = make(env_id)

    def rollout(start, episode_actions):
        def step(state, action):
            state = env.step(state, action)[0]
            return state, state

        states = jax.lax.scan(step, start, episode_actions)[1]
        return jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]),
                            start, states)

    return jax.device_get(jax.jit(jax.vmap(rollout))(starts, actions))


def _stack(states: list[State]) -> State:
    return jax.tree.map(lambda *xs: np.stack(xs), *states)


def _assert_frames_equal(ours: np.ndarray, farama: np.ndarray) -> None:
    assert ours.shape == farama.shape and ours.dtype == np.uint8
    differs = [t for t in range(len(farama)) if not np.array_equal(ours[t], farama[t])]
    assert not differs, f"{len(differs)} of {len(farama)} frames differ, first at step {differs[0]}"


DOORKEY, GOTO, MAZE = (
    "MiniGrid-DoorKey-5x5-v0",
    "MiniGrid-GoToObject-8x8-N2-v0",
    "MiniGrid-ObstructedMaze-1Dlh-v0",
)
EPISODES = {
    DOORKEY: ((0, 13), 250),
    GOTO: (tuple(range(12)), 100),
    "MiniGrid-Fetch-6x6-N2-v0": ((1, 2, 3), 100),
    MAZE: ((9,), 150),
}
"""Seeds and a step cap per id (default: seed 0, 100 steps)."""
COVERED = {
    DOORKEY: ({(DOOR, LOCKED), (DOOR, OPEN), (DOOR, CLOSED)}, {KEY}, {DOOR, GOAL}),
    GOTO: ({(BALL, 0), (KEY, 0), (BOX, 0)}, set(), set()),
    MAZE: ({(DOOR, LOCKED), (BALL, 0), (BOX, 0), (KEY, 0)}, {KEY}, set()),
}
"""What some frame of an id's episodes shows: cells ``(type, state)`` in the grid,
object types carried, object types the agent stands on (the open door, the goal)."""


@pytest.mark.parametrize("env_id", sorted(all_tasks()))
def test_episodes_render_as_farama(env_id: str) -> None:
    """All of an id's episodes replayed and rendered at once: ``(episodes, T + 1)`` states,
    the shorter episodes padded with turns that are not compared."""
    seeds, cap = EPISODES.get(env_id, ((0,), 100))
    episodes = [_farama_episode(env_id, seed, cap) for seed in seeds]
    horizon = max(len(actions) for _, actions, _ in episodes)
    padded = np.zeros((len(episodes), horizon), np.int32)
    for i, (_, actions, _) in enumerate(episodes):
        padded[i, : len(actions)] = actions
    states = _port_states(env_id, _stack([start for start, _, _ in episodes]), padded)
    see_through_walls = all_tasks()[env_id].see_through_walls
    ours = np.asarray(render(states, see_through_walls=see_through_walls))

    shown: set[tuple[int, int]] = set()
    carried: set[int] = set()
    stood_on: set[int] = set()
    for i, (_, _, farama) in enumerate(episodes):
        _assert_frames_equal(ours[i, : len(farama)], farama)
        grids = states.grid[i, : len(farama)]
        shown |= {(int(t), int(s)) for t, _, s in grids.reshape(-1, 3)}
        carried |= set(states.carrying[i, : len(farama), 0].tolist())
        x, y = states.agent_pos[i, : len(farama)].T
        stood_on |= set(grids[np.arange(len(x)), x, y, 0].tolist())
    cells, carried_types, under_agent = COVERED.get(env_id, (set(), set(), set()))
    assert cells <= shown and carried_types <= carried and under_agent <= stood_on


def _random_objects(rng: np.random.Generator) -> list:
    """Every Farama object the ports encode, each colour and door state, and nothing."""
    objects: list = [None] * 20 + [Lava()]
    for color in COLOR_NAMES:
        objects += [Wall(color), Floor(color), Goal(color), Key(color), Ball(color), Box(color)]
        objects += [Door(color, is_open=True), Door(color), Door(color, is_locked=True)]
    return [objects[i] for i in rng.integers(len(objects), size=64)]


@pytest.mark.parametrize(
    ("tile_size", "highlight", "see_through_walls"),
    [(8, True, False), (8, True, True), (12, False, False)],
)
def test_hand_built_grids_render_as_farama(
    tile_size: int, highlight: bool, see_through_walls: bool
) -> None:
    """10 x 10 walled grids with random objects inside, the agent anywhere inside."""
    env = gym.make("MiniGrid-Empty-8x8-v0", size=10, render_mode="rgb_array",
                   tile_size=tile_size, highlight=highlight).unwrapped
    env.reset(seed=0)
    env.see_through_walls = see_through_walls
    rng = np.random.default_rng(tile_size)
    states, farama = [], []
    for _ in range(24):
        grid = Grid(10, 10)
        grid.wall_rect(0, 0, 10, 10)
        for i, obj in enumerate(_random_objects(rng)):
            grid.set(1 + i % 8, 1 + i // 8, obj)
        env.grid = grid
        env.agent_pos = tuple(int(v) for v in rng.integers(1, 9, size=2))
        env.agent_dir = int(rng.integers(4))
        farama.append(env.render())
        states.append(State.create(grid.encode(), env.agent_pos, env.agent_dir, GOAL_MISSION,
                                   env.max_steps))
    ours = render(_stack(states), see_through_walls=see_through_walls, tile_size=tile_size,
                  highlight=highlight)
    _assert_frames_equal(np.asarray(ours), np.stack(farama))


def test_batched_render_equals_per_state_renders() -> None:
    env_id = "MiniGrid-DoorKey-5x5-v0"
    start, actions, _ = _farama_episode(env_id, 1, 30)
    states = jax.tree.map(lambda x: x[0], _port_states(env_id, _stack([start]), actions[None]))
    frames = np.asarray(render(states, see_through_walls=False))
    for t in (0, 10, len(actions)):
        one = render(jax.tree.map(lambda x, t=t: x[t], states), see_through_walls=False)
        assert np.array_equal(one, frames[t])
    two_axes = jax.tree.map(lambda x: np.stack([x, x[::-1]]), states)
    both = np.asarray(render(two_axes, see_through_walls=False))
    assert both.shape == (2, *frames.shape)
    assert np.array_equal(both[0], frames) and np.array_equal(both[1], frames[::-1])


def test_render_is_jittable_and_vmappable() -> None:
    """Inside a caller's ``jit`` and ``vmap`` (e.g. of a rollout), over three levels."""
    starts = [_farama_episode("MiniGrid-DoorKey-8x8-v0", seed, 0)[0] for seed in range(3)]
    states = _stack(starts)
    draw = jax.jit(jax.vmap(lambda s: render(s, see_through_walls=False, tile_size=8)))
    frames = draw(states)
    assert frames.shape == (3, 64, 64, 3) and frames.dtype == jnp.uint8
    assert np.array_equal(frames, render(states, see_through_walls=False, tile_size=8))
