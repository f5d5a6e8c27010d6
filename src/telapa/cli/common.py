"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.progress import track

from telapa import envs
from telapa.continual.results import RunRecord
from telapa.continual.rundir import RunDirError
from telapa.report.load import load_records


class CLIError(Exception):
    """A user error: printed as ``telapa: error: ...`` with exit status 2."""


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def check_env_id(env_id: str, backend: str) -> None:
    """Raises `CLIError` unless ``env_id`` exists on ``backend``."""
    try:
        envs.check_env_id(env_id, backend)
    except ValueError as err:
        raise CLIError(str(err)) from None


def stdout_console() -> Console:
    """A console for tables on stdout, wide enough for the metrics tables when piped."""
    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 120))


T = TypeVar("T")


def tracker(console: Console, description: str) -> Callable[[Sequence[T]], Iterable[T]]:
    """Wraps an iteration in a transient progress bar on ``console``."""

    def tracked(items: Sequence[T]) -> Iterable[T]:
        return track(items, description=description, console=console, transient=True)
    return tracked


def load_runs(paths: Sequence[str], *, skip_incomplete: bool, console: Console
              ) -> list[RunRecord]:
    """Complete runs of ``paths`` with a progress bar on ``console``; a missing or
    incomplete one is a `CLIError` naming it, or (``skip_incomplete``) a warning."""
    try:
        return load_records(
            paths, skip_incomplete=skip_incomplete,
            on_skip=lambda message: console.print(f"skipping {message}", style="yellow",
                                                  markup=False, soft_wrap=True),
            track=tracker(console, "loading runs"),
        )
    except RunDirError as err:
        raise CLIError(str(err) if skip_incomplete else f"{err} (or pass --skip-incomplete)"
                       ) from None
