"""Which code produced a run: the git commit of the telapa source tree.

A run directory's ``run.json`` keeps ``code``, the list of code versions its segments ran
with (one entry per change: a run started on one commit and resumed on another lists
both). A version is the commit hash, with ``+dirty`` when tracked files differ from it;
None outside a git work tree (an installed wheel), where the package version in
``run.json`` is all there is.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent
UNRECORDED = "unrecorded"
"""Stands for the segments of a run started before runs recorded their code."""


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_version(root: str | Path = SOURCE) -> str | None:
    """``<commit>`` or ``<commit>+dirty`` of the git work tree holding ``root``; None
    when ``root`` is not in one or git is missing."""
    root = Path(root)
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        return None
    changed = _git(root, "status", "--porcelain", "--untracked-files=no")
    return f"{commit}+dirty" if changed else commit


@functools.cache
def current_code() -> str | None:
    """`code_version` of this process's telapa source, computed once."""
    return code_version()


def extend_code(recorded: list[str | None] | None, current: str | None, *,
                resumed: bool) -> list[str | None]:
    """The ``code`` list of a run after a segment ran with ``current``: appended when it
    differs from the last entry. A resumed run that recorded nothing started before runs
    recorded their code: its first entry is `UNRECORDED`."""
    codes = list(recorded) if recorded else ([UNRECORDED] if resumed else [])
    if not codes or codes[-1] != current:
        codes.append(current)
    return codes


__all__ = ["UNRECORDED", "code_version", "current_code", "extend_code"]
