"""``PACKAGE:FILE.yaml`` names a file shipped in an installed package: it is found, never
imported (a probe's ``this:x.yaml`` printed the Zen of Python, ``telapa.cli.__main__:x.yaml``
ran the CLI again, ``__main__:x.yaml`` ended in a traceback), and a name that leaves the
package (``telapa:../../../../tmp/x.yaml``) is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("preset", "message"), [
    ("this:x.yaml", "no installed package 'this'"),
    ("telapa.cli.__main__:x.yaml", "no installed package 'telapa.cli.__main__'"),
    ("__main__:x.yaml", "no installed package '__main__'"),
    ("telapa:../../../../tmp/x.yaml", "leaves the package 'telapa'"),
])
def test_a_packaged_name_runs_no_code_and_stays_in_its_package(preset, message, tmp_path):
    outside = tmp_path / "x.yaml"
    outside.write_text("steps_per_visit: 4096\n")
    done = subprocess.run([sys.executable, "-m", "telapa.cli", "run", "--curriculum", "smoke",
                           "--method", "scratch", "--preset", preset, "--out",
                           str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert "Beautiful is better" not in done.stdout + done.stderr  # `this` never ran
    assert "usage: telapa" not in done.stdout  # nor the CLI a second time
    assert not (tmp_path / "run").exists()


def test_a_packaged_file_inside_its_package_still_resolves():
    from telapa.config import _packaged_file

    path = _packaged_file("telapa.configs", "runs/quick.yaml", "preset")
    assert path.is_file() and path.parent.name == "runs"
    assert "this" not in sys.modules
