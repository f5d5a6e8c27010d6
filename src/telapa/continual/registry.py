"""Every continual method by name (`telapa run --method NAME`)."""

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
from telapa.continual.preset import RunConfig
from telapa.continual.telapa.method import TeLAPA, TeLAPAStatic

METHODS: dict[str, type[Method]] = {
    m.name: m
    for m in (
        TeLAPA, TeLAPAStatic, Scratch, ScratchReuse, Finetune, FinetuneReset, EWC, L2Init, DFF,
        ShrinkPerturb,
    )
}


def make_method(name: str, config: RunConfig, *, key: jax.Array | None = None) -> Method:
    """The method registered as ``name`` (see `METHODS`), with its own randomness ``key``
    (the runner derives it from the run seed)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    return METHODS[name](config, key=key)
