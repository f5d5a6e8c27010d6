"""A progress sink that simulates a crash, for the resume tests."""

from __future__ import annotations


class Crash(Exception):
    """The simulated crash."""


class CrashAfter:
    """Raises `Crash` after ``n`` training updates; ignores everything else."""

    def __init__(self, n: int):
        self.n = n

    def visit(self, visit, budget, done):
        pass

    def advance(self, steps, metrics):
        self.n -= 1
        if self.n < 0:
            raise Crash

    def evaluated(self, visit, step, sr):
        pass

    def note(self, text):
        pass

    def phase(self, name, done, total):
        pass
