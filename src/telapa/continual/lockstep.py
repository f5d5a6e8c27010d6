"""A method's per-seed hooks, run in lockstep over the seeds of a batch.

A method writes each hook once, for one seed (`telapa.continual.methods.Method`). Most
hooks are plain functions. A hook with a step that has a batched form (TeLAPA's few-shot
probes, its illumination, its maintenance) is a generator: it yields a `Request` for that
step and is sent the step's result,

    choice = yield OriginRequest(...)        # inside TeLAPA.start_task

`run_hooks` drives the hooks of all seeds that stand at one phase. Each seed runs until it
yields a request or returns; then the requests of one kind are answered together by that
kind's `Request.answer` (one batched program for several seeds, the per-seed function for
one), each seed is sent its answer and runs on, and so on until every hook has returned.
So the batching of a step lives in one place, the request kind beside the function it
batches, never in a method: a subclass that overrides a hook does the same thing alone
(``telapa run --seed S``) and in a batch (``--seeds``), and with one seed a hook is exactly
its per-seed self. A subclass that extends a generator hook delegates with
``yield from super().start_task(state, ctx)``.

Order. Requests are answered kind by kind, the kind the lowest waiting seed asks for first;
inside a kind, in seed order. Seeds share nothing but the answers' programs, so the order
changes no result. The time of an answer is shared equally among the seeds that asked,
under the request's ``phase`` in each method's timer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from telapa.io import PhaseTimer
from telapa.io.clock import running
from telapa.plugins import PluginError


class HookError(PluginError, TypeError):
    """A method's hook gave telapa what its signature does not allow (a wrong return
    value, a yield that is not a `Request`): one line naming the method, the hook and
    what it gave (`telapa.continual.registry.checked`). A `PluginError`, so the command
    line prints it as one line; a `TypeError` too, as what a hook gave has the wrong
    type."""


@runtime_checkable
class Request(Protocol):
    """A step of a hook with a batched form; `answer` computes several seeds' at once."""

    phase: ClassVar[str]
    """The method-timer phase the step's time counts towards (e.g. ``"few_shot"``)."""

    @classmethod
    def answer(cls, requests: Sequence[Any]) -> list[Any]:
        """The results of ``requests`` (all of this kind, one per seed, seed order), in
        the same order: with one request exactly the per-seed step."""
        ...


Hook = Callable[[], Any]
"""A seed's hook with its arguments bound: returns the hook's value, or a generator that
yields `Request`s and returns it."""


def run_hooks(hooks: Sequence[Hook], timers: Sequence[PhaseTimer],
              names: Sequence[str] | None = None) -> list[Any]:
    """Runs the hooks of a batch's seeds in lockstep (module docstring) and returns their
    values in seed order; ``timers[i]``: seed i's method timer (the answers' shares).
    An exception in a hook or an answer stops the batch and propagates; a hook that
    yields something other than a `Request` is a `HookError` naming it (``names[i]``,
    e.g. ``method 'ewc' (telapa.continual.methods.EWC): end_task``)."""
    if len(hooks) != len(timers):
        raise ValueError(f"{len(hooks)} hooks and {len(timers)} timers")
    values: list[Any] = [None] * len(hooks)
    waiting: dict[int, tuple[Generator[Any, Any, Any], Any]] = {}

    def advance(i: int, hook: Generator[Any, Any, Any], sent: Any) -> None:
        try:
            request = hook.send(sent)
        except StopIteration as stop:
            values[i] = stop.value
            return
        if not isinstance(request, Request):
            hook.close()
            who = "a method hook" if names is None else names[i]
            raise HookError(f"{who} yielded {type(request).__name__}, not a lockstep "
                            "Request (a class with `phase` and `answer`)")
        waiting[i] = (hook, request)

    for i, hook in enumerate(hooks):
        value = hook()
        if inspect.isgenerator(value):
            advance(i, value, None)
        else:
            values[i] = value
    while waiting:
        kind = type(waiting[min(waiting)][1])
        seeds = [i for i in sorted(waiting) if type(waiting[i][1]) is kind]
        start = running()
        answers = kind.answer([waiting[i][1] for i in seeds])
        if len(answers) != len(seeds):
            raise RuntimeError(f"{kind.__name__}.answer gave {len(answers)} results for "
                               f"{len(seeds)} requests")
        share = (running() - start) / len(seeds)
        for i, answer in zip(seeds, answers, strict=True):
            timers[i].add(kind.phase, share)
            hook, _ = waiting.pop(i)
            advance(i, hook, answer)
    return values


__all__ = ["Hook", "HookError", "Request", "run_hooks"]
