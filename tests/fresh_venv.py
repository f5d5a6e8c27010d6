"""A fresh virtual environment outside the checkout with telapa's wheel (and packages
such as the examples') installed, for the tests that use telapa as a user would
(tests/test_wheel.py, tests/test_examples.py).

The environment gets only what is installed into it; the dependencies (JAX, gymnasium,
...) are borrowed from the test's own environment through a ``.pth`` line, so building
one takes seconds, not a download of JAX. A ``.pth`` path line does not run the editable
install's finder, so the only telapa it can import is the wheel's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc", "build")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, **extra}


def build_wheel(work: Path) -> Path:
    """telapa's wheel, built in ``work`` from a copy of the sources (the checkout is not
    written)."""
    source = work / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=COPY_IGNORE, symlinks=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(dist), str(source)], check=True, env=clean_env(),
                   cwd=work)
    (found,) = dist.glob("telapa-*.whl")
    return found


def make_venv(folder: Path, *packages: Path) -> Path:
    """A virtual environment in ``folder`` with the dependencies borrowed and
    ``packages`` (wheels, or project folders, each built from a copy so the checkout is
    not written) installed without downloading anything; returns ``folder``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, env=clean_env()).stdout.strip()
    borrowed = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(purelib, "borrowed-deps.pth").write_text("".join(f"{p}\n" for p in borrowed))
    targets = []
    for package in packages:
        if package.is_dir():
            copy = folder.parent / "sources" / package.name
            shutil.copytree(package, copy, ignore=COPY_IGNORE)
            package = copy
        targets.append(str(package))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--no-index", "--no-build-isolation", "--quiet", *targets],
                   check=True, env=clean_env())
    return folder
