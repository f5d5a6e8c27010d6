"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse

from rich.console import Console

from telapa import envs


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
