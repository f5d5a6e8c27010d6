"""The lockstep driver of per-seed hooks (`telapa.continual.lockstep.run_hooks`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from telapa.continual.lockstep import run_hooks
from telapa.io import PhaseTimer

ANSWERED: list[tuple[str, tuple[int, ...]]] = []
"""(kind, the values of the requests answered together), in answer order."""


@dataclass(frozen=True)
class Double:
    phase: ClassVar[str] = "double"
    value: int

    @classmethod
    def answer(cls, requests):
        ANSWERED.append(("double", tuple(r.value for r in requests)))
        return [2 * r.value for r in requests]


@dataclass(frozen=True)
class Negate:
    phase: ClassVar[str] = "negate"
    value: int

    @classmethod
    def answer(cls, requests):
        ANSWERED.append(("negate", tuple(r.value for r in requests)))
        return [-r.value for r in requests]


def _two_steps(seed: int):
    """Doubles the seed, then negates the double plus one."""
    doubled = yield Double(seed)
    negated = yield Negate(doubled + 1)
    return (seed, doubled, negated)


def _timers(n: int) -> list[PhaseTimer]:
    return [PhaseTimer() for _ in range(n)]


@pytest.fixture(autouse=True)
def _clear():
    ANSWERED.clear()


def test_requests_of_one_kind_are_answered_together_in_seed_order():
    values = run_hooks([lambda s=s: _two_steps(s) for s in (3, 1, 2)], _timers(3))
    assert values == [(3, 6, -7), (1, 2, -3), (2, 4, -5)]
    assert ANSWERED == [("double", (3, 1, 2)), ("negate", (7, 3, 5))]


def test_one_seed_is_its_hook_alone():
    assert run_hooks([lambda: _two_steps(5)], _timers(1)) == [(5, 10, -11)]
    assert ANSWERED == [("double", (5,)), ("negate", (11,))]


def test_plain_hooks_and_seeds_that_ask_nothing_take_no_part():
    def maybe(seed: int):
        if seed == 0:
            return "plain"  # a generator hook that returns at once
            yield  # pragma: no cover - makes it a generator
        return (yield Double(seed))

    values = run_hooks([lambda: maybe(0), lambda: "no generator", lambda: maybe(4)],
                       _timers(3))
    assert values == ["plain", "no generator", 8]
    assert ANSWERED == [("double", (4,))]


def test_seeds_at_different_steps_are_answered_kind_by_kind():
    """Seed 0 asks Negate first, seed 1 Double first: the lowest waiting seed's kind is
    answered first, then the other; each kind's requests together."""
    def negate_first():
        a = yield Negate(1)
        b = yield Double(a)
        return a, b

    def double_first():
        a = yield Double(1)
        b = yield Negate(a)
        return a, b

    values = run_hooks([negate_first, double_first], _timers(2))
    assert values == [(-1, -2), (2, -2)]
    assert ANSWERED == [("negate", (1,)), ("double", (-1, 1)), ("negate", (2,))]


def test_each_answer_time_is_shared_among_the_seeds_that_asked():
    timers = _timers(3)
    run_hooks([lambda s=s: _two_steps(s) for s in range(3)], timers)
    for timer in timers:
        assert set(timer.totals) == {"double", "negate"}
        assert all(v >= 0 for v in timer.totals.values())


def test_a_hook_that_yields_something_else_is_refused():
    def wrong():
        yield 42

    with pytest.raises(TypeError, match="yielded int, not a lockstep Request"):
        run_hooks([wrong], _timers(1))


def test_an_error_in_a_hook_stops_the_batch():
    def broken():
        yield Double(1)
        raise RuntimeError("seed failed")

    with pytest.raises(RuntimeError, match="seed failed"):
        run_hooks([lambda: _two_steps(0), broken], _timers(2))


def test_the_request_kinds_of_telapa_are_requests():
    from telapa.continual.methods.telapa.illumination import Illumination
    from telapa.continual.methods.telapa.maintenance import MaintenanceRequest
    from telapa.continual.methods.telapa.transfer import OriginRequest

    for kind, phase in [(OriginRequest, "few_shot"), (Illumination, "illumination"),
                        (MaintenanceRequest, "maintenance")]:
        assert callable(kind.answer) and kind.phase == phase
