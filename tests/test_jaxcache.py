"""The persistent compilation cache keeps every compiled program, so a new process (a
resume, a sweep worker, a test worker) compiles nothing a finished one already did."""

from __future__ import annotations

import subprocess
import sys

from telapa.jaxcache import enable_persistent_cache

PROGRAM = """
import sys
from telapa.jaxcache import enable_persistent_cache
enable_persistent_cache(sys.argv[1])
import jax
print(float(jax.jit(lambda x: 2.0 * x + 1.0)(1.0)))
"""


def test_a_program_that_compiles_in_milliseconds_is_cached(tmp_path):
    # a fresh process: the session's own cache is configured in tests/conftest.py
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.strip() == "3.0"
    assert [p for p in (tmp_path / "cache").iterdir() if p.name.startswith("jit_")]


def test_off_disables_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TELAPA_JAX_CACHE", "off")
    assert enable_persistent_cache() is None
