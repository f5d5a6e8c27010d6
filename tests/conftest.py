"""Test session set-up: one persistent JAX compilation cache for every worker and every
subprocess a test starts (``TELAPA_JAX_CACHE``), so each program compiles once; and the
tiny-preset smoke runs that every test reading a finished run shares (`quick_runs`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from shared_runs import made_once, make_quick_runs, quick_paths

from telapa.jaxcache import ENV_VAR, enable_persistent_cache


def pytest_configure(config: pytest.Config) -> None:
    cache = getattr(config, "cache", None)  # absent under ``-p no:cacheprovider``
    folder = cache.mkdir("telapa-jax") if cache is not None else None
    if folder is not None:
        os.environ[ENV_VAR] = str(folder)
        enable_persistent_cache(folder)


@pytest.fixture(scope="session")
def quick_runs(tmp_path_factory) -> dict[tuple[str, int], Path]:
    """(method, seed) -> run directory of a finished smoke run (curriculum ``smoke``, run
    preset ``tests/continual/tiny_run.yaml`` named ``tiny``): Finetune and TeLAPA, seeds 0
    and 1, made once per session. Tests read them; a test that writes copies one first."""
    return quick_paths(made_once(tmp_path_factory, "quick-runs", make_quick_runs))


@pytest.fixture(scope="session")
def quick_run_phases(quick_runs) -> dict[tuple[str, int], list[tuple[str, int, int]]]:
    """(method, seed) -> the method phases ``(name, done, total)`` each quick run reported
    to its progress sink, in order."""
    def phases(path: Path) -> list[tuple[str, int, int]]:
        return [tuple(p) for p in json.loads(path.with_name(f"{path.name}.phases.json")
                                             .read_text())]

    return {key: phases(path) for key, path in quick_runs.items()}
