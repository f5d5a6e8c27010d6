"""``make test`` runs the SB3 tests instead of skipping them: it sets ``TELAPA_REQUIRE``
(tests/conftest.py), and a session missing a required module stops at its start, naming
the module and how to install it; the Makefile installs the bench extra before the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_required_module_that_is_missing_stops_the_session_naming_it(tmp_path):
    # numpy, which every environment of the suite has, stands for a present module (SB3
    # did, and the test failed in a checkout without `make sb3`)
    env = {**os.environ, "TELAPA_REQUIRE": "numpy, telapa_no_such_module"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
         str(ROOT / "tests" / "test_import.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    text = out.stdout + out.stderr
    assert "telapa_no_such_module" in text and "make sb3" in text
    assert "numpy" not in text.split("asks for")[-1]  # only the missing one


def test_make_test_requires_sb3_and_installs_it_first():
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test: (.*)\n\t(.*)$", makefile, re.M)
    assert rule, "no test rule in the Makefile"
    assert "$(SB3_STAMP)" in rule.group(1).split()
    assert "TELAPA_REQUIRE=stable_baselines3,torch" in rule.group(2)
    # the stamp's rule installs the bench extra (SB3 and torch are in it)
    assert re.search(r"^\$\(SB3_STAMP\): .*\n(\t.*\n)*\t.*\.\[[a-z,]*bench", makefile, re.M)
