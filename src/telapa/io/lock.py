"""An exclusive lock of a place that is replaced as a whole (a report directory): a lock
file beside it, held (``flock``) by the one process writing it, removed on release.

The lock of a run directory lives inside it (`telapa.continual.runlock`); a report
directory cannot hold its own lock, since it is renamed into place, so its lock is the
file ``.NAME.lock`` in the folder that holds it. The kernel drops an ``flock`` of a
process that dies however it dies, so a lock file left by a killed writer is taken
over. A lock file removed by its holder's release while another process waited on it
is detected (its inode is no longer the one at the path) and the lock is taken again
on the new file, so two processes never both hold it."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LockHeld(RuntimeError):
    """Another process holds the lock; the message names it (pid, host) and the file."""


def lock_path(place: str | os.PathLike[str]) -> Path:
    """The lock file of ``place``: ``.NAME.lock`` beside it."""
    place = Path(place)
    return place.parent / f".{place.name}.lock"


_HELD: set[Path] = set()
"""Lock files this process holds (`exclusive_lock` is re-entrant within a process)."""


@contextmanager
def exclusive_lock(place: str | os.PathLike[str], what: str) -> Iterator[Path]:
    """Holds the lock of ``place`` (`lock_path`; its folder is created) for the block,
    or raises `LockHeld` at once, naming ``what`` (e.g. "report directory out"), the
    holder and the lock file, when another process holds it. Re-entrant: a block inside
    another one of the same process on the same place does nothing more. OSError when
    the lock file cannot be made."""
    path = lock_path(place)
    key = path.absolute()
    if key in _HELD:
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")  # noqa: SIM115 - held until the block ends
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise LockHeld(f"{what} is being written by {holder} ({path} is locked); "
                           "wait for it to finish, or choose another place") from None
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()  # its holder removed it as we opened it: take the new one
    try:
        try:  # who holds it, for the message of a refused process; the lock holds without
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
            handle.flush()
        except OSError:  # a full disk: the writer's own files will say so
            pass
        _HELD.add(key)
        yield path
    finally:
        _HELD.discard(key)
        try:
            path.unlink(missing_ok=True)  # while still held: no one else holds this file
        finally:
            handle.close()


__all__ = ["LockHeld", "exclusive_lock", "lock_path"]
