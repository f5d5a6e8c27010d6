"""The one check of a destination directory that every writer shares (a run directory,
a sweep directory, an export, a report), made before any work."""

from __future__ import annotations

import os
from pathlib import Path

from .atomic import broken_link


def destination_problem(path: str | os.PathLike[str], *, what: str, choose: str,
                        renamed_into_place: bool = False, example: str | None = None
                        ) -> str | None:
    """Why ``path`` cannot be the directory ``what`` (e.g. ``"sweep directory"``), in one
    line that names it and ends in what to do (``choose``, e.g. ``"choose another
    --out"``); None when nothing here stops it. Refused:

    - ``path``, or a folder above it, is a symbolic link that leads nowhere
      (`telapa.io.atomic.broken_link`): nothing can be created at it;
    - ``path`` exists and is not a directory;
    - with ``renamed_into_place`` (the writer builds the directory beside ``path`` and
      renames it there), ``path`` is a mount point: nothing can be renamed onto one
      (EBUSY, read-only or not). ``example`` shows a directory inside it to use instead.

    What a directory may already hold is the writer's own rule (an empty directory, an
    earlier report, a sweep's own cells), checked after this."""
    path = Path(path)
    if (link := broken_link(path)) is not None:
        return f"cannot use {what} {path}: {link}; remove the link or {choose}"
    if path.exists() and not path.is_dir():
        return f"{what} {path} exists and is not a directory; {choose}"
    if renamed_into_place and os.path.ismount(path):
        inside = f", e.g. {example}" if example else ""
        return (f"{what} {path} is a mount point, which cannot be replaced by a directory "
                f"renamed into place; choose a new directory inside it{inside}")
    return None


__all__ = ["destination_problem"]
