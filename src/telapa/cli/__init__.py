"""The ``telapa`` command line: ``train``, ``run``, ``metrics``, ``report``, ``inspect``,
``play``, ``sweep``, ``demo``.

Subcommands live in their own modules; user errors are `CLIError`, printed as
``telapa: error: ...`` with exit status 2; errors of the command line itself are one line
too (`Parser`).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from telapa import envvars
from telapa.cli import demo, play, report, run, sweep, train
from telapa.cli.common import CLIError, import_plugins
from telapa.config import ConfigError
from telapa.jaxcache import enable_persistent_cache


class Parser(argparse.ArgumentParser):
    """The parser of ``telapa`` and of each subcommand (`add_subparsers` makes subparsers
    of its parser's class): an error is one line, ``telapa run: error: MESSAGE (see
    telapa run --help)``, exit status 2, as every other error of the command line
    (docs/reliability.md), not argparse's usage block then the error; a misspelt option
    or choice gets the closest valid one ("did you mean --curriculum?")."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}{_choice_hint(message)} "
                     f"(see {self.prog} --help)\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but arguments no parser took are reported by the subcommand's
        parser (argparse leaves them to the top level, which would say ``telapa: error``
        with no hint), with the subcommand's option closest to a misspelt one."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._command_parser(ns)
            parser.error(f"unrecognized arguments: {' '.join(extras)}"
                         f"{_option_hint(parser, extras)}")
        return ns

    def _command_parser(self, ns: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the subcommand ``ns`` names (this one without a subcommand)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(ns, action.dest, None), self)
        return self


def _option_hint(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """"; did you mean --X?" for the first unknown option of ``extras`` close to one of
    ``parser``'s long options, or ""."""
    options = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.partition("=")[0], options, n=1)
            if close:
                return f"; did you mean {close[0]}?"
    return ""


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>.*)' \(choose from (?P<choices>.*)\)$")
"""argparse's (3.11) message for a value not among an argument's choices."""


def _choice_hint(message: str) -> str:
    """"; did you mean 'X'?" for an invalid choice close to a valid one, or ""."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return ""
    choices = [c.strip("'") for c in found["choices"].split(", ")]  # quoted in 3.11 only
    close = difflib.get_close_matches(found["value"], choices, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="telapa", description="Continual RL with latent-aligned policy archives."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train.add_parser(sub)
    run.add_parsers(sub)
    demo.add_parser(sub)
    report.add_parsers(sub)
    play.add_parser(sub)
    sweep.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        envvars.check()  # a bad TELAPA_* variable: one line, before any work
        enable_persistent_cache()
        import_plugins(getattr(ns, "imports", None))  # before any config is validated
        ns.func(ns)
    except (CLIError, ConfigError) as err:
        parser.exit(getattr(err, "status", 2), f"telapa: error: {err}\n")
    except OSError as err:  # a full disk, a read-only mount, a vanished file: one line
        parser.exit(2, f"telapa: error: {os_error_text(err)}\n")
    except KeyboardInterrupt:  # a command without its own stop (report, play, metrics)
        parser.exit(130, f"telapa: error: interrupted; telapa {ns.command} stopped\n")
    return 0


STOPPED = (130, 143)
"""Exit statuses of a run stopped by Ctrl-C (130) or SIGTERM (143)."""


def console_main() -> None:
    """The ``telapa`` command (and ``python -m telapa.cli``): `main`; after a stop by
    Ctrl-C or SIGTERM the process ends at once, its streams flushed (``os._exit``), not
    through the interpreter's finalization, which tore down JAX's runtime while its
    threads had been interrupted and crashed with SIGSEGV after the resume hint (exit
    139, not 130, in a probe's 5 of 7 tries). Everything a run keeps is written and
    closed by then: the stop unwinds the run (checkpoint, lock, trackers) before
    `main` returns."""
    try:
        code = main()
    except SystemExit as stop:
        code = stop.code
    if code in STOPPED:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    sys.exit(code)


def os_error_text(err: OSError) -> str:
    """One line for an `OSError`: what failed, on which file, and, for a full disk or a
    read-only place, what to do (every write is atomic, so what was there is intact)."""
    what = err.strerror or str(err)
    where = f" ({err.filename})" if err.filename else ""
    text = f"{what}{where}"
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        text += ("; nothing written before was damaged: make room or choose another "
                 "place, then run the same command again (a run resumes from its last "
                 "checkpoint)")
    return text


if __name__ == "__main__":
    console_main()
