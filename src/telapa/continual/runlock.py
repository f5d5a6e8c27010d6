"""The lock of a run directory (``RUN_DIR/.lock``): held (``flock``) by the one process
working on the run, and probed without writing by a sweep asking whether a cell runs.
`telapa.continual.rundir.RunDir` holds one `RunLock`."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

from telapa.continual.runformat import RunDirError

LOCK_NAME = ".lock"


def _flock_exclusive(handle: IO[str], tries: int = 5, wait_s: float = 0.02) -> None:
    """``flock(LOCK_EX | LOCK_NB)``, tried again a few times over ~0.1 s: a reader's
    probe (`RunLock.held_elsewhere`) holds a shared lock for a moment and is not a
    holder."""
    for attempt in range(tries):
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES) or attempt == tries - 1:
                raise
            time.sleep(wait_s)


class RunLock:
    """The lock of the run directory ``path``, and this process's hold of it."""

    def __init__(self, path: Path):
        self.path = path
        self._file: IO[str] | None = None

    def take(self) -> None:
        """Takes the exclusive lock of the run directory for this process (released by
        `release` or when the process ends, whatever the way: the kernel drops an
        ``flock`` of a dead process, so a lock file left behind is taken over).
        `RunDirError` names the holder (pid, host) when another process has it."""
        if self._file is not None:
            return
        target = self.path / LOCK_NAME
        try:
            handle = open(target, "a+")  # noqa: SIM115 - held until release
        except OSError as err:
            raise RunDirError(f"cannot lock run directory {self.path}: {err.strerror}") from None
        try:
            _flock_exclusive(handle)
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                handle.close()
                raise RunDirError(f"cannot lock run directory {self.path}: {err}") from None
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunDirError(
                f"run directory {self.path} is in use by {holder} ({target} is locked); wait "
                "for it to finish or stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock. Writes nothing: no lock file is
        created, and a read-only run directory is read correctly (a shared lock is tried
        and dropped at once; `take` retries over such a probe)."""
        try:
            handle = open(self.path / LOCK_NAME, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return False
        except OSError as err:
            raise RunDirError(f"cannot read the lock of {self.path}: {err.strerror}") from None
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno in (errno.EAGAIN, errno.EACCES):
                    return True
                raise RunDirError(f"cannot read the lock of {self.path}: {err}") from None
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False
