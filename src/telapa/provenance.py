"""Which code produced a run: the git commit of the telapa source tree, or the version
and a hash of the installed sources.

A run directory's ``run.json`` keeps ``code``, the list of code versions its segments ran
with (one entry per change: a run started on one commit and resumed on another lists
both). In a git work tree a version is the commit hash, with ``+dirty`` when tracked
files differ from it; outside one (an installed wheel) it is ``telapa-VERSION+src.HASH``,
HASH the first 12 hex digits of the SHA-256 of the package's Python sources and YAML
presets (each file's path relative to the package, then its bytes, in path order), so
two installs of the same sources record the same version and an edited install another.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path
from typing import Any

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


def source_hash(root: str | Path = SOURCE) -> str:
    """SHA-256 (12 hex digits) over the ``*.py`` and ``*.yaml`` files under ``root``:
    each file's relative POSIX path, a NUL, its bytes, a NUL, in path order."""
    root = Path(root)
    digest = hashlib.sha256()
    files = sorted(p for pattern in ("*.py", "*.yaml") for p in root.rglob(pattern)
                   if "__pycache__" not in p.parts)
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def installed_version(root: str | Path = SOURCE) -> str:
    """``telapa-VERSION+src.HASH`` of the sources under ``root`` (`source_hash`)."""
    from telapa import __version__

    return f"telapa-{__version__}+src.{source_hash(root)}"


@functools.cache
def current_code() -> str:
    """`code_version` of this process's telapa source, or outside a git work tree its
    `installed_version`; computed once."""
    return code_version() or installed_version()


def extend_code(recorded: list[str | None] | None, current: str | None, *,
                resumed: bool) -> list[str | None]:
    """The ``code`` list of a run after a segment ran with ``current``: appended when it
    differs from the last entry. A resumed run that recorded nothing started before runs
    recorded their code: its first entry is `UNRECORDED`."""
    codes = list(recorded) if recorded else ([UNRECORDED] if resumed else [])
    if not codes or codes[-1] != current:
        codes.append(current)
    return codes


def current_versions() -> dict[str, str]:
    """The telapa and jax versions of this process: what ``run.json`` records of a
    segment besides its code (``telapa``, ``jax`` at the start, ``versions`` per change)."""
    import jax

    from telapa import __version__

    return {"telapa": __version__, "jax": jax.__version__}


def recorded_versions(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The versions a run's segments ran with (``run.json`` ``versions``, one entry per
    change); a run started before that list was kept has its start's ``telapa`` and
    ``jax`` (or nothing, before those were kept)."""
    versions = manifest.get("versions")
    if isinstance(versions, list) and all(isinstance(v, dict) for v in versions):
        return list(versions)
    start = {k: manifest[k] for k in ("telapa", "jax") if k in manifest}
    return [start] if start else []


def extend_versions(manifest: dict[str, Any], current: dict[str, str]
                    ) -> list[dict[str, Any]]:
    """``run.json``'s ``versions`` after a segment ran with ``current``: appended when it
    differs from the last entry."""
    versions = recorded_versions(manifest)
    if not versions or versions[-1] != current:
        versions.append(dict(current))
    return versions


def version_change(manifest: dict[str, Any], current: dict[str, str]) -> str | None:
    """What differs between the versions a run last ran with and ``current`` (e.g.
    ``jax 0.4.30 -> 0.4.35``), or None: the same, or not recorded."""
    versions = recorded_versions(manifest)
    if not versions:
        return None
    last = versions[-1]
    changed = [f"{name} {last[name]} -> {current[name]}" for name in ("telapa", "jax")
               if name in last and last[name] != current[name]]
    return ", ".join(changed) or None


__all__ = ["UNRECORDED", "code_version", "current_code", "current_versions", "extend_code",
           "extend_versions", "installed_version", "recorded_versions", "source_hash",
           "version_change"]
