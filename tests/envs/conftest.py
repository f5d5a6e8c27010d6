"""Env tests: Farama's reference levels computed once per session, not once per worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from minigrid_levels import share_between_workers


@pytest.fixture(scope="session", autouse=True)
def _farama_levels_shared_between_workers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under xdist each worker's base temporary directory is a child of the session's,
    so their common parent is one folder per session that every worker sees."""
    if hasattr(request.config, "workerinput"):
        share_between_workers(tmp_path_factory.getbasetemp().parent / "farama-levels")
    yield
    share_between_workers(None)
