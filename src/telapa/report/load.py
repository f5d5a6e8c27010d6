"""Loading run directories for reports and scores: complete runs, or a clear error naming
the missing or incomplete one (optionally skipped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from telapa.continual.rundir import RunDirError, RunImportError
from telapa.continual.runformat import MANIFEST
from telapa.report.results import RunRecord, load_run

STARTED_FILES = ("config.yaml", "curriculum.yaml")
"""What a run directory holds before its manifest (`telapa.continual.rundir.RunDir.create`
writes them first): a folder with one of them is a run whose start died."""


class NotARunError(RunDirError):
    """A folder that holds files but neither a run manifest nor any file a starting run
    writes first (e.g. a report's folder): not a run directory at all, so finishing it or
    ``--skip-incomplete`` is no advice for it."""


def _named(path: str | Path, err: Exception) -> str:
    text = str(err)
    return text if str(path) in text else f"{path}: {text}"


def _not_a_run(path: str | Path) -> str | None:
    """Why ``path`` is not a run directory at all (`NotARunError`), or None: it is missing,
    empty, a run (complete or not) or a run whose start died."""
    folder = Path(path)
    try:
        if not folder.is_dir() or (folder / MANIFEST).exists():
            return None
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return None
    if not names or any(name in names for name in STARTED_FILES):
        return None
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{folder} is not a run directory: it holds no {MANIFEST} ({shown}); give run "
            "directories, sweep directories or --seeds folders")


def load_records(
    paths: Sequence[str | Path],
    *,
    skip_incomplete: bool = False,
    on_skip: Callable[[str], None] = lambda message: None,
    track: Callable[[Sequence[str | Path]], Iterable[str | Path]] = iter,
) -> list[RunRecord]:
    """Loads every complete run in ``paths``.

    A missing, foreign or incomplete directory raises `RunDirError` naming it (a folder
    that is no run at all, e.g. a report's, `NotARunError`), unless ``skip_incomplete``:
    then ``on_skip`` gets that message and the run is left out. A run whose recorded
    ``--import`` modules this process cannot import raises `RunImportError` either way (it
    is not incomplete).
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
                if (not_a_run := _not_a_run(path)) is not None:
                    raise NotARunError(not_a_run) from None
                raise RunDirError(_named(path, err)) from None
            on_skip(_named(path, err))
    if not records:
        raise RunDirError(f"no complete runs among {len(paths)} run director"
                          f"{'y' if len(paths) == 1 else 'ies'}")
    return records
