"""What a continual run reports while it works, and the sinks that are not a terminal.

`Progress` is the protocol the runner (`telapa.continual.runner`) and a seed batch
(`telapa.continual.batch`) report to; `SilentProgress` drops everything; `PlainProgress`
prints plain log lines (a cluster job's log, a sweep cell's ``status/NAME.log``). The
live terminal bars (`telapa.cli.run.RichProgress`) belong to the command line.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from telapa.io.clock import running

if TYPE_CHECKING:
    from telapa.continual.curriculum import Visit


class Progress(Protocol):
    """What the runner reports while it works (the CLI draws it with rich)."""

    def visit(self, visit: Visit, budget: int, done: int) -> None: ...
    def advance(self, steps: int, metrics: dict[str, float]) -> None: ...
    def evaluated(self, visit: Visit, step: int, sr: float) -> None: ...
    def note(self, text: str) -> None: ...
    def phase(self, name: str, done: int, total: int) -> None:
        """A method phase outside PPO (TeLAPA: ``illumination`` batches, transfer
        ``probes``, latent ``maintenance``) has done ``done`` of ``total`` units."""


class SilentProgress:
    """Reports nothing."""

    def visit(self, visit: Visit, budget: int, done: int) -> None:
        pass

    def advance(self, steps: int, metrics: dict[str, float]) -> None:
        pass

    def evaluated(self, visit: Visit, step: int, sr: float) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def phase(self, name: str, done: int, total: int) -> None:
        pass


def score_symbol(visit: Visit) -> str:
    """``"SR"`` where the visit's task counts successes, ``"SR~"`` where its competence
    is graded (`Competence.counts` false: a ``success: {normalized_return: ...}`` task,
    MuJoCo): its own ``success`` or its env family's, as `Curriculum.score_symbol`
    decides for the whole curriculum. For a sink told no symbol (a sweep cell's log)."""
    return visit.scored_by().symbol


def eta_text(seconds: float) -> str:
    """``H:MM:SS``, or ``?`` for an unknown (non-finite or negative) time."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PlainProgress:
    """Progress as plain log lines (for logs that are not a terminal): one line when a
    visit or a phase starts, then at most one every ``interval_s`` seconds, and one when
    it ends::

        [12:00:01] visit 1 (B, ...) starts: 4,096 steps
        [12:00:05] visit 1 (B, ...) train 2,048/4,096 steps, 812 steps/s, ETA 0:00:02
        [12:00:09] visit 1 (B) illumination 3/6, ETA 0:00:04

    ``score``: the name of the evaluations' score, ``SR`` or ``SR~``
    (`Curriculum.score_symbol`, the name the run's summary table gives it, so that the
    log and the table agree); None: each visit's task's own (`score_symbol`).
    """

    def __init__(self, stream=None, interval_s: float = 30.0, score: str | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self.score = score
        self._visit: Visit | None = None
        self._budget = 0
        self._start: tuple[float, int] = (running(), 0)
        self._last = -math.inf
        self._phase: tuple[str, float] | None = None

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.flush()

    def _line(self, text: str) -> None:
        print(f"[{datetime.now():%H:%M:%S}] {text}", file=self.stream, flush=True)

    def _where(self) -> str:
        v = self._visit
        return "run" if v is None else f"visit {v.index} ({v.tag}, {v.env_id})"

    def _due(self, final: bool) -> bool:
        now = running()
        if final or now - self._last >= self.interval_s:
            self._last = now
            return True
        return False

    def visit(self, visit: Visit, budget: int, done: int) -> None:
        """A line when a visit starts (or a resumed run's first visit goes on): what
        comes before its first step count, its programs' compiles and the evaluation at
        step 0, can take minutes (an MJX visit on a CPU: 2.5), which a log showed as
        nothing."""
        first = self._visit is None or self._visit.index != visit.index
        self._visit, self._budget = visit, budget
        self._start = (running(), done)
        if first:
            self._last = -math.inf
            self._line(f"{self._where()} starts: {budget:,} steps" if done == 0 else
                       f"{self._where()} goes on at {done:,} of {budget:,} steps")

    def advance(self, steps: int, metrics: dict[str, float]) -> None:
        if not self._due(steps >= self._budget):
            return
        start, done = self._start
        rate = (steps - done) / max(running() - start, 1e-9)
        eta = (self._budget - steps) / rate if rate > 0 else math.inf
        self._line(f"{self._where()} train {steps:,}/{self._budget:,} steps, "
                   f"{rate:,.0f} steps/s, ETA {eta_text(eta)}")

    def evaluated(self, visit: Visit, step: int, sr: float) -> None:
        if step == 0 or step >= self._budget:
            score = self.score or score_symbol(visit)
            self._line(f"{self._where()} eval at step {step:,}: {score} {sr:.2f}")

    def note(self, text: str) -> None:
        self._line(text)

    def phase(self, name: str, done: int, total: int) -> None:
        now = running()
        if self._phase is None or self._phase[0] != name or done == 0:
            self._phase = (name, now)
            self._last = -math.inf
        if not self._due(done >= total):
            return
        elapsed = now - self._phase[1]
        eta = elapsed / done * (total - done) if done else math.inf
        self._line(f"{self._where()} {name} {done}/{total}, ETA {eta_text(eta)}")
        if done >= total:
            self._phase = None


__all__ = ["PlainProgress", "Progress", "SilentProgress", "eta_text", "score_symbol"]
