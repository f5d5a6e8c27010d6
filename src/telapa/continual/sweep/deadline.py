"""``telapa sweep --until WHEN``: a sweep on borrowed time (an allocation's wall-clock
limit, a working session, a night) that starts only the jobs it expects to finish.

A job still running at the deadline is stopped or lost with the machine, and everything
it did since its last checkpoint with it (a whole cell, where the machine goes and its
checkpoints go too). So a worker that comes free at time t takes, of the jobs left, one
whose estimate e (`telapa.continual.sweep.status.cell_estimates`, summed over the job's
cells) fits, t + e <= deadline, the longest such first: long jobs where the time allows
them, short ones in what is left (the longest-processing-time rule). A job no finished
cell can estimate is taken before those, in the sweep's order: its time cannot be
judged, and once it has run it estimates the others. A started job that fits (one of
its cells has checkpoints; its pace and its kind's time estimate it) is taken before
all of them: it is the nearest to its results, and what it has done is what a machine lost at the
deadline would take with it, so a deadline should leave as few partial jobs as it can
(a sweep resumed on 2026-12-06 took a fresh cell before two partial ones that fitted,
and would have left three partial where one was needed). When no job left fits, the
worker stays idle,
and the sweep ends when the others have; the jobs left stay as they were (not started,
or partial at their last checkpoint) for the next ``telapa sweep`` of the same command.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from telapa.continual.sweep.grammar import Cell
from telapa.continual.sweep.status import CellEstimate, format_duration

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([dhms]))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_until(text: str, *, now: float) -> float:
    """The deadline ``text`` names, in seconds since the epoch: a duration from ``now``
    (``2h30m``, ``90m``, ``1.5h``, ``45s``, ``1d``: numbers each followed by d, h, m or
    s) or an ISO 8601 time with its UTC offset (``2026-12-05T18:20Z``,
    ``2026-12-05T19:20+01:00``).

    Raises ValueError naming what is wrong: a time without its offset (whose meaning
    would depend on the machine's time zone), neither form, or a deadline not after
    ``now``."""
    value = text.strip()
    if _DURATION.fullmatch(value):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(value))
        if seconds <= 0:
            raise ValueError(f"{text!r} is no time from now: give a positive duration")
        return now + seconds
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither a duration (2h30m, 90m, 1.5h) nor an ISO "
                         "8601 time with its offset (2026-12-05T18:20Z)") from None
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset: write it as {value}Z (UTC) or with "
                         "its offset, e.g. +01:00")
    deadline = when.timestamp()
    if deadline <= now:
        raise ValueError(f"{text!r} is already past (it is "
                         f"{datetime.fromtimestamp(now).astimezone():%Y-%m-%dT%H:%M%z} now)")
    return deadline


class JobQueue:
    """The jobs of a sweep's round, handed to a backend's workers one at a time
    (`take`), in the sweep's order."""

    def __init__(self, jobs: Iterable[list[Cell]]):
        self.pending: list[list[Cell]] = list(jobs)

    def take(self) -> list[Cell] | None:
        """The next job to start, or None when none is to start now."""
        return self.pending.pop(0) if self.pending else None

    def __len__(self) -> int:
        return len(self.pending)


class DeadlineQueue(JobQueue):
    """A `JobQueue` that hands out only the jobs expected to finish before ``until``
    (seconds since the epoch), by the rule of this module's docstring.

    ``estimates()`` maps each cell's name to its `CellEstimate` (the wall clock still to
    go in seconds, nan where not estimated, and the rule that counted it: ``started``
    for a cell's own pace); it is read again at every `take`, so each finished cell
    sharpens the estimates of the jobs after it. ``clock``: the time now (``time.time``).
    ``on_event``: one line for each job taken and for the jobs left when none fits."""

    def __init__(self, jobs: Iterable[list[Cell]], *, until: float,
                 estimates: Callable[[], Mapping[str, CellEstimate]],
                 clock: Callable[[], float] = time.time,
                 on_event: Callable[[str], None] = lambda text: None):
        super().__init__(jobs)
        self.until = until
        self.estimates = estimates
        self.clock = clock
        self.on_event = on_event
        self._told = False  # whether the jobs left were said not to fit, since a take

    def take(self) -> list[Cell] | None:
        if not self.pending:
            return None
        now, estimates = self.clock(), self.estimates()
        left = self.until - now
        seconds = {name: e.seconds for name, e in estimates.items()}
        costs = [job_seconds(job, seconds) for job in self.pending]
        started = {i for i, job in enumerate(self.pending)
                   if any(estimates.get(c.name, _UNKNOWN).rule == "started" for c in job)}
        unknown = [i for i, cost in enumerate(costs) if math.isnan(cost)]
        fitting = sorted((i for i, cost in enumerate(costs) if cost <= left),
                         key=lambda i: -costs[i])
        order = ([i for i in fitting if i in started] + unknown
                 + [i for i in fitting if i not in started])
        if not order:
            if not self._told:
                self._told = True
                self.on_event(f"--until: {len(self.pending)} job(s) left, none fits: the "
                              f"shortest needs about {format_duration(min(costs))}, "
                              f"{format_duration(max(left, 0))} left")
            return None
        self._told = False
        job = self.pending.pop(order[0])
        cost = costs[order[0]]
        names = ", ".join(c.name for c in job)
        rules = {estimates.get(c.name, _UNKNOWN).rule for c in job}
        basis = next((f" ({_BASIS[rule]})" for rule in _BASIS if rule in rules), "")
        self.on_event(f"--until: {'resuming' if order[0] in started else 'starting'} "
                      f"{names}: "
                      + ("not estimated yet, so it may not finish" if math.isnan(cost) else
                         f"about {format_duration(cost)}{basis}")
                      + f", {format_duration(max(left, 0))} left")
        return job


_UNKNOWN = CellEstimate(math.nan, "unknown")

_BASIS = {
    "other_methods": "other methods' mean: a method's first cell, a rough guess",
    "other_settings": "its method under other settings",
    "other_curricula": "its method's pace on other curricula",
}
"""What a job's estimate rests on, said beside it where that is not its own cells' kind
(`cell_estimates`' rules 2-4, the roughest first): on 2026-12-06 a long-curriculum
TeLAPA cell was started as 'about 1.1 h', the mean of the baselines' cells, and took
1.6-1.9 h."""


def job_seconds(job: Sequence[Cell], seconds: dict[str, float]) -> float:
    """A job's estimate: the sum of its cells' (a seed batch's cells each count their
    share of its wall clock); nan where any is not estimated."""
    return sum(seconds.get(cell.name, math.nan) for cell in job)


__all__ = ["DeadlineQueue", "JobQueue", "job_seconds", "parse_until"]
