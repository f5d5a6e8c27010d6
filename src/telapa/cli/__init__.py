"""The ``telapa`` command line: ``train``, ``run``, ``metrics``, ``report``, ``inspect``,
``play``, ``sweep``, ``demo``.

Subcommands live in their own modules; user errors are `CLIError`, printed as
``telapa: error: ...`` with exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

from telapa.cli import demo, play, report, run, sweep, train
from telapa.cli.common import CLIError, import_plugins
from telapa.jaxcache import enable_persistent_cache


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    enable_persistent_cache()
    try:
        import_plugins(getattr(ns, "imports", None))  # before any config is validated
        ns.func(ns)
    except CLIError as err:
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
