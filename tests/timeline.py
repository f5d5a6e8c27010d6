"""Where the suite's time goes between its workers: ``pytest --timeline PATH`` writes one
JSON line per test phase (``worker``, ``nodeid``, ``when``: setup, call or teardown,
``start`` and ``stop`` in seconds since the epoch), and

    python tests/timeline.py PATH

prints each worker's busy and idle time and the longest idle gaps with the phases around
them. ``make test`` must stay under 15 minutes on a 2-core machine; a worker idle while
the other makes a fixture both need (a quick run, the wheel) is wall time no profile of a
single test shows.

A worker's idle time is its span (first start to last stop of the whole suite) less the
union of its phases; gaps shorter than ``min_gap_s`` are xdist's hand-offs and not
listed."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

OPTION = "--timeline"


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, metavar="PATH", default=None,
                     help="write each test phase's worker, start and stop to PATH (JSON "
                          "lines; summary: python tests/timeline.py PATH)")


class _Writer:
    """Appends a line per test report the controller receives (with xdist, every
    worker's, tagged with its gateway id; without, ``main``).

    The file is made at the first report, not when the session starts: xdist's workers
    parse the command line again, and pytest takes an argument that names an existing
    file for a test path (before conftest.py has declared ``--timeline``), so a file
    made by then put the workers' root directory in its folder, where they found no
    conftest.py and stopped with "unrecognized arguments: --timeline"."""

    def __init__(self, path: Path):
        self.path = path
        self._made = False

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # xdist's WorkerController
        worker = node.gateway.id if node is not None else "main"
        line = {"worker": worker, "nodeid": report.nodeid, "when": report.when,
                "start": report.start, "stop": report.stop}
        if not self._made:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a" if self._made else "x") as out:
            out.write(json.dumps(line) + "\n")
        self._made = True


def configure(config: pytest.Config) -> None:
    """Registers the writer in the controlling process when ``--timeline`` is given (an
    xdist worker's reports reach the controller, which writes them all). A path that
    exists is a usage error before any test runs: a timeline is written fresh, and the
    file may be another run's (or anything else)."""
    path = config.getoption(OPTION.lstrip("-"), default=None)
    if path and not hasattr(config, "workerinput"):
        if Path(path).exists():
            raise pytest.UsageError(f"{OPTION} {path}: the file exists (a timeline is "
                                    "written fresh); remove it or name another")
        config.pluginmanager.register(_Writer(Path(path)), "telapa-timeline")


@dataclass(frozen=True)
class Phase:
    """One test phase as the timeline file has it."""

    worker: str
    nodeid: str
    when: str
    start: float
    stop: float


@dataclass(frozen=True)
class Gap:
    """``seconds`` idle on ``worker`` from ``start``, between the phases named."""

    worker: str
    start: float
    seconds: float
    before: str
    after: str


@dataclass(frozen=True)
class Summary:
    """The suite's span (``begin``, ``wall_s``), each worker's busy and idle seconds and
    the gaps, longest first (`summarize`)."""

    begin: float
    wall_s: float
    busy_s: dict[str, float]
    idle_s: dict[str, float]
    gaps: list[Gap]


def read(path: Path) -> list[Phase]:
    return [Phase(**json.loads(line)) for line in path.read_text().splitlines() if line]


def summarize(phases: list[Phase], *, min_gap_s: float = 1.0) -> Summary:
    """Per worker: busy = the union of its phases' intervals; idle = the suite's span
    (first start to last stop over all workers) less busy; gaps = intervals of at least
    ``min_gap_s`` between a phase's stop and the next start on the worker, and from the
    suite's start to the worker's first phase and from its last to the suite's end,
    longest first."""
    if not phases:
        raise ValueError("no test phases in the timeline")
    begin = min(p.start for p in phases)
    end = max(p.stop for p in phases)
    busy: dict[str, float] = {}
    gaps: list[Gap] = []
    for worker in sorted({p.worker for p in phases}):
        own = sorted((p for p in phases if p.worker == worker), key=lambda p: p.start)
        total, reach, last = 0.0, begin, "(the suite's start)"
        for phase in own:
            if phase.start - reach >= min_gap_s:
                gaps.append(Gap(worker, reach, phase.start - reach, last,
                                f"{phase.nodeid} ({phase.when})"))
            total += max(0.0, phase.stop - max(phase.start, reach))
            if phase.stop > reach:
                reach, last = phase.stop, f"{phase.nodeid} ({phase.when})"
        if end - reach >= min_gap_s:
            gaps.append(Gap(worker, reach, end - reach, last, "(the suite's end)"))
        busy[worker] = total
    wall = end - begin
    return Summary(begin, wall, busy, {w: wall - b for w, b in busy.items()},
                   sorted(gaps, key=lambda g: -g.seconds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--gaps", type=int, default=15, help="longest gaps to list")
    parser.add_argument("--min-gap-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    summary = summarize(read(args.path), min_gap_s=args.min_gap_s)
    print(f"span {summary.wall_s:.1f} s")
    for worker, busy in summary.busy_s.items():
        print(f"  {worker}: busy {busy:.1f} s, idle {summary.idle_s[worker]:.1f} s")
    print(f"longest idle gaps (of {len(summary.gaps)} of at least {args.min_gap_s:g} s):")
    for gap in summary.gaps[:args.gaps]:
        print(f"  {gap.worker} at +{gap.start - summary.begin:.0f} s: "
              f"{gap.seconds:.1f} s after {gap.before}, before {gap.after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
