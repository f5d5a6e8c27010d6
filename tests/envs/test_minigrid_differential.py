"""Every ported MiniGrid task against Farama, step by step, on random episodes."""

from __future__ import annotations

import numpy as np
import pytest
from minigrid_reference import mismatches, record, replay

from telapa.envs.minigrid import FLAG_NAMES, all_tasks

N_EPISODES = 100
LONG_EPISODES = 50
LONG_LIMIT = 500
"""Episodes per task: ``LONG_EPISODES`` where the time limit is >= ``LONG_LIMIT`` steps.
Random episodes there mostly run to the limit, so 50 of them hold 28-34k Farama steps
(DoorKey-8x8, BlockedUnlockPickup, RedBlueDoors); the short tasks' 100 hold up to 29k
(KeyCorridorS3R3, ObstructedMaze-1Dlh). Every expected event below is raised by then (the
last to appear: ObstructedMaze's delivery, in episode 61). Stepping Farama in Python
(its ``gen_obs``) is what this test spends its time on: twice these counts took 100 s of
the suite."""

EXPECTED_EVENTS = {
    "MiniGrid-Empty-5x5-v0": ("delivered",),
    "MiniGrid-DoorKey-5x5-v0": ("has_key", "door_open", "delivered"),
    "MiniGrid-DoorKey-8x8-v0": ("has_key", "door_open"),
    "MiniGrid-BlockedUnlockPickup-v0": ("has_key", "has_ball", "door_open", "delivered"),
    "MiniGrid-KeyCorridorS3R3-v0": ("has_key", "door_open"),
    "MiniGrid-ObstructedMaze-1Dlh-v0": (
        "has_key",
        "has_box",
        "door_open",
        "box_toggled",
        "delivered",
    ),
    "MiniGrid-GoToObject-8x8-N2-v0": ("has_key", "has_ball", "has_box", "box_toggled", "delivered"),
    "MiniGrid-Fetch-6x6-N2-v0": ("has_key", "has_ball", "delivered"),
    "MiniGrid-RedBlueDoors-8x8-v0": ("door_open", "delivered"),
    "MiniGrid-MultiRoom-N2-S4-v0": ("door_open", "delivered"),
}
"""Flags some of the random episodes must raise, so the comparison covers them."""


@pytest.mark.parametrize("env_id", sorted(all_tasks()))
def test_port_matches_farama(env_id: str) -> None:
    long = all_tasks()[env_id].max_steps >= LONG_LIMIT
    episodes = record(env_id, range(LONG_EPISODES if long else N_EPISODES))
    first_obs, steps = replay(env_id, episodes)
    found = mismatches(episodes, first_obs, steps)
    assert not found, f"{len(found)} mismatches, first ones:\n" + "\n".join(found[:10])

    final_flags = np.stack([e.steps["features"][-1, 5:] for e in episodes]).astype(bool)
    for name in EXPECTED_EVENTS.get(env_id, ()):
        assert final_flags[:, FLAG_NAMES.index(name)].any(), f"no episode had {name}"
