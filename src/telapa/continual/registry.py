"""Every continual method by name (`telapa run --method NAME`), and what follows from
each method's declared settings section (`Method.section`)."""

from __future__ import annotations

import jax

from telapa.continual.methods import (
    DFF,
    EWC,
    Finetune,
    FinetuneReset,
    L2Init,
    Method,
    Scratch,
    ScratchReuse,
    ShrinkPerturb,
)
from telapa.continual.preset import MethodsConfig, RunConfig
from telapa.continual.telapa.method import TeLAPA, TeLAPAStatic

METHODS: dict[str, type[Method]] = {
    m.name: m
    for m in (
        TeLAPA, TeLAPAStatic, Scratch, ScratchReuse, Finetune, FinetuneReset, EWC, L2Init, DFF,
        ShrinkPerturb,
    )
}

METHOD_SECTIONS: dict[str, str] = {name: m.section for name, m in METHODS.items()
                                   if m.section is not None}
"""Method -> the ``methods.*`` section of `RunConfig` it reads (the others ignore it),
as the methods declare it."""

_unknown = {n: s for n, s in METHOD_SECTIONS.items() if s not in MethodsConfig.model_fields}
if _unknown:
    raise TypeError(f"methods {_unknown} declare settings sections that MethodsConfig "
                    f"lacks (it has {sorted(MethodsConfig.model_fields)})")


def method_section(name: str) -> str | None:
    """The settings section the method ``name`` reads; None for a method without one,
    or one not (or no longer) registered."""
    method = METHODS.get(name)
    return None if method is None else method.section


def make_method(name: str, config: RunConfig, *, key: jax.Array | None = None) -> Method:
    """The method registered as ``name`` (see `METHODS`), with its own randomness ``key``
    (the runner derives it from the run seed)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    return METHODS[name](config, key=key)
