"""The per-session cache that lets xdist workers share Farama's reference levels."""

from __future__ import annotations

import threading
import time

import minigrid_levels
import numpy as np
from minigrid_levels import computed_once


def test_computed_once_computes_once_and_everyone_reads_the_same_value(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.2)  # long enough for the other callers to reach the lock
        return {"levels": np.arange(5)}

    results = [None] * 4

    def worker(i):
        results[i] = computed_once(tmp_path, "levels", compute)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    for result in results:
        np.testing.assert_array_equal(result["levels"], np.arange(5))
    assert [p.name for p in tmp_path.glob("*.tmp")] == []


def test_farama_levels_read_the_shared_file(tmp_path, monkeypatch):
    """With a shared folder, `farama_levels` takes what another worker stored there."""
    monkeypatch.setattr(minigrid_levels, "_shared_folder", tmp_path)
    monkeypatch.setattr(minigrid_levels, "read_farama_levels", lambda env_id: f"read {env_id}")
    minigrid_levels.farama_levels.cache_clear()
    try:
        first = minigrid_levels.farama_levels("MiniGrid-Empty-5x5-v0")
        assert first == "read MiniGrid-Empty-5x5-v0"
        (stored,) = tmp_path.glob("MiniGrid-Empty-5x5-v0-n*.pkl")
        monkeypatch.setattr(minigrid_levels, "read_farama_levels", lambda env_id: "again")
        minigrid_levels.farama_levels.cache_clear()
        assert minigrid_levels.farama_levels("MiniGrid-Empty-5x5-v0") == first
        assert stored.exists()
    finally:
        minigrid_levels.farama_levels.cache_clear()
