"""Loading run directories for reports and scores: complete runs, or a clear error naming
the missing or incomplete one (optionally skipped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from telapa.continual.rundir import RunDirError, RunImportError
from telapa.report.results import RunRecord, load_run


def _named(path: str | Path, err: Exception) -> str:
    text = str(err)
    return text if str(path) in text else f"{path}: {text}"


def load_records(
    paths: Sequence[str | Path],
    *,
    skip_incomplete: bool = False,
    on_skip: Callable[[str], None] = lambda message: None,
    track: Callable[[Sequence[str | Path]], Iterable[str | Path]] = iter,
) -> list[RunRecord]:
    """Loads every complete run in ``paths``.

    A missing, foreign or incomplete directory raises `RunDirError` naming it, unless
    ``skip_incomplete``: then ``on_skip`` gets that message and the run is left out. A
    run whose recorded ``--import`` modules this process cannot import raises
    `RunImportError` either way (it is not incomplete).
    ``track`` wraps the iteration over ``paths`` (a progress bar). Raises `RunDirError`
    when no complete run is left.
    """
    records = []
    for path in track(paths):
        try:
            records.append(load_run(path))
        except RunImportError:  # complete, maybe: this process lacks the run's modules
            raise
        except (RunDirError, FileNotFoundError, ValueError) as err:
            if not skip_incomplete:
                raise RunDirError(_named(path, err)) from None
            on_skip(_named(path, err))
    if not records:
        raise RunDirError(f"no complete runs among {len(paths)} run director"
                          f"{'y' if len(paths) == 1 else 'ies'}")
    return records
