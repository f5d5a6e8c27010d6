"""Test session set-up: one persistent JAX compilation cache for every worker and every
subprocess a test starts (``TELAPA_JAX_CACHE``), so each program compiles once."""

from __future__ import annotations

import os

import pytest

from telapa.jaxcache import ENV_VAR, enable_persistent_cache


def pytest_configure(config: pytest.Config) -> None:
    cache = getattr(config, "cache", None)  # absent under ``-p no:cacheprovider``
    folder = cache.mkdir("telapa-jax") if cache is not None else None
    if folder is not None:
        os.environ[ENV_VAR] = str(folder)
        enable_persistent_cache(folder)
