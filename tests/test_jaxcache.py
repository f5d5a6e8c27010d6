"""The persistent compilation cache keeps every compiled program, so a new process (a
resume, a sweep worker, a test worker) compiles nothing a finished one already did."""

from __future__ import annotations

import subprocess
import sys

import pytest

from telapa.cli import main
from telapa.config import ConfigError
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


def test_a_cache_folder_that_cannot_be_made_is_named(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TELAPA_JAX_CACHE", str(blocker / "cache"))
    with pytest.raises(ConfigError, match=r"^TELAPA_JAX_CACHE='.*/file/cache': cannot make "
                                          r"the compilation cache folder .*\(Not a directory\)$"):
        enable_persistent_cache()


def test_telapa_names_a_bad_cache_folder_in_one_line(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TELAPA_JAX_CACHE", str(blocker / "cache"))
    with pytest.raises(SystemExit) as stop:
        main(["metrics", str(tmp_path / "no-run")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("telapa: error: TELAPA_JAX_CACHE=") and err.count("\n") == 1


def test_an_unwritable_default_folder_warns_and_caches_nothing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.write_text("a file where the home folder should be")
    monkeypatch.delenv("TELAPA_JAX_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    with pytest.warns(RuntimeWarning, match="JAX's compilation cache is off: cannot make"):
        assert enable_persistent_cache() is None


def test_a_blank_cache_variable_is_unset(tmp_path, monkeypatch):
    """``TELAPA_JAX_CACHE=' '`` means the default folder, as every TELAPA_* variable
    reads a blank value (`telapa.envvars`); it made a folder named ' ' in the working
    directory. (The default is made unwritable here, so that nothing changes where this
    test worker's JAX caches.)"""
    home = tmp_path / "home"
    home.write_text("a file where the home folder should be")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TELAPA_JAX_CACHE", " ")
    monkeypatch.setenv("HOME", str(home))
    with pytest.warns(RuntimeWarning, match="JAX's compilation cache is off: cannot make"):
        assert enable_persistent_cache() is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
