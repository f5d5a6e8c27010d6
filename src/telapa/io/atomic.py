"""Crash-safe file writes: a reader sees either the old file or the new one, never a part.

Every write goes to a temporary file in the target's directory (``.NAME.PID.TOKEN.tmp``),
is flushed and fsync'ed, renamed over the target with :func:`os.replace` and the directory
is fsync'ed. Temporaries that a killed process left behind never match the target's name
or extension; the next write to the same target deletes those whose process is gone.

``TELAPA_FSYNC=off`` skips the fsyncs (`fsync`): writes stay atomic for readers and
survive a killed process (the page cache outlives it), but not a power loss or a crash of
the OS. For scratch runs on slow or networked disks, and the test suite (tests/conftest.py),
whose checkpoint commits spent a tenth of their time in fsync.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from telapa import envvars

__all__ = [
    "atomic_open",
    "broken_link",
    "pid_alive",
    "fsync",
    "fsync_dir",
    "remove_stale",
    "read_json",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_table_atomic",
    "write_text_atomic",
]

_TMP_SUFFIX = ".tmp"
FSYNC_ENV = envvars.FSYNC
"""``off`` (``0``, ``false``, ``no``): no fsync (see the module's docstring)."""


def fsync(fd: int) -> None:
    """`os.fsync` of ``fd``, unless ``$TELAPA_FSYNC`` is off (`telapa.envvars.fsync`)."""
    if envvars.fsync():
        os.fsync(fd)


def _temp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _remove_stale_temps(target: Path) -> None:
    """Delete temporaries of ``target`` whose writing process no longer exists."""
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(_TMP_SUFFIX)):
            continue
        parts = name[len(prefix) : -len(_TMP_SUFFIX)].split(".")
        if len(parts) != 2 or not parts[0].isdigit() or len(parts[1]) != 8:
            continue
        if not pid_alive(int(parts[0])):
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def fsync_dir(directory: Path) -> None:
    """Flushes ``directory``'s entries to disk (after a rename into it), where the
    platform can."""
    if not envvars.fsync():
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Open a binary file whose content replaces ``path`` only when the block exits cleanly.

    If the block raises, the temporary is deleted and ``path`` is left untouched (an
    `OSError` of a write, e.g. a full disk, is raised again naming ``path``). The parent
    directory must exist. A new file gets the usual permissions (0o666 minus umask).
    """
    target = Path(path)
    _remove_stale_temps(target)
    tmp = _temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError) and err.errno is not None and err.filename is None:
            # a write (a full disk...): name the file
            raise OSError(err.errno, err.strerror, str(target)) from err
        raise
    fsync_dir(target.parent)


def broken_link(path: Path) -> str | None:
    """What is wrong with ``path`` when it, or a folder above it, is a symbolic link that
    leads nowhere (its target does not exist, or the links loop); None otherwise. Such a
    path is not there for `Path.exists`, yet nothing can be created at it (``mkdir`` and
    ``rename`` fail with "File exists" or "Not a directory"), so a destination that is
    one is refused by name before any work."""
    for place in (path, *path.parents):
        if place.is_symlink() and not place.exists():
            target = os.readlink(place)
            try:
                place.resolve(strict=True)
            except FileNotFoundError:
                return f"{place} is a symbolic link to {target}, which does not exist"
            except (RuntimeError, OSError):  # a loop (RuntimeError before Python 3.13)
                return f"{place} is a symbolic link to {target}, which loops back"
    return None


def remove_stale(folder: Path, prefix: str, suffixes: tuple[str, ...]) -> None:
    """Removes the entries ``PREFIX.PID.TOKEN.SUFFIX`` of ``folder`` (files or folders)
    whose process ``PID`` is gone: what a writer killed part way left behind."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        suffix = next((s for s in suffixes if name.endswith(s)), None)
        if suffix is None or not name.startswith(prefix + "."):
            continue
        pid = name[len(prefix) + 1:-len(suffix)].split(".")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            path = Path(entry.path)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Atomically replace ``path`` with ``data``."""
    with atomic_open(path) as f:
        f.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Atomically replace ``path`` with ``text`` encoded as UTF-8 (no newline translation)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def _json_default(obj: Any) -> Any:
    """Serialise numpy/JAX scalars and arrays and paths, which ``json`` rejects."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "__array__"):
        return np.asarray(obj).tolist()
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serializable")


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON (NaN/Infinity allowed, trailing newline).

    numpy/JAX scalars and arrays become numbers and lists, paths become strings. The object
    is serialised before the file is touched, so an unserialisable object changes nothing.
    """
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=True, default=_json_default)
    write_text_atomic(path, text + "\n")


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """Read a JSON file; ``what`` names it in errors ("run manifest", "metrics", ...).

    Raises FileNotFoundError when the file is missing and ValueError when it is not valid
    UTF-8 JSON, both naming ``what`` and the path.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} file {p} does not exist") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{what} file {p} is corrupt (not valid JSON): {e}") from e


def write_table_atomic(path: str | os.PathLike[str], df: pd.DataFrame, index: bool = False) -> None:
    """Atomically write ``df`` as CSV (without the index unless ``index``)."""
    write_text_atomic(path, df.to_csv(index=index))
