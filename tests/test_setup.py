"""The Makefile's set-up: its recipes write bytecode where the machine says not to, and
its warm-up (``WARM_BYTECODE``, run once after the install) imports every telapa module,
so later ``telapa`` processes find the .pyc of all they import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _make(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_recipes_write_bytecode_even_where_the_machine_says_not_to():
    """With PYTHONDONTWRITEBYTECODE set, every process compiled jax & co. again (2 s ->
    5 s each) unless the install had compiled all 23k files (24 s of a fresh set-up):
    the recipes unset it, so each module is compiled once, when first imported."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    shown = _make("--eval", "telapa-show-env: ; @env", "telapa-show-env", env=env)
    assert "HOME=" in shown  # the recipe's environment, printed
    assert "PYTHONDONTWRITEBYTECODE" not in shown


def test_the_warm_up_imports_every_telapa_module():
    """The warm-up is the Makefile's own text, run here: every module imports with the
    set-up's extras (a module that needs another, or fails at import, fails the set-up);
    the one left out, telapa.envs.sb3, needs the bench extra, which the set-up does not
    install."""
    code = _make("--eval", "telapa-warm: ; $(info $(WARM_BYTECODE))", "telapa-warm").strip()
    assert "walk_packages" in code and '".sb3"' in code
    probe = (code + "\nimport sys\nmods = [m for m in sys.modules if m.startswith('telapa.')]"
             "\nprint(len(mods), 'telapa.envs.sb3' in mods, 'telapa.report.build' in mods)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    count, sb3, report = done.stdout.split()[-3:]
    assert int(count) > 150 and report == "True" and sb3 == "False"
