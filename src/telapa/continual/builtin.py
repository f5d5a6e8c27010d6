"""The methods telapa ships, each a class with its settings model beside it
(`telapa.continual.methods`, `telapa.continual.methods.telapa.method`). Their order is that of
the sections of `telapa.continual.preset.MethodsConfig`, which is built from them when
the preset module is defined (and so of ``methods:`` in every ``config.yaml``); the
registry (`telapa.continual.registry`) adds the plug-ins."""

from __future__ import annotations

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
from telapa.continual.methods.telapa.method import TeLAPA, TeLAPAFresh, TeLAPAStatic

BUILTIN_METHODS: dict[str, type[Method]] = {
    m.name: m
    for m in (
        TeLAPA, TeLAPAStatic, TeLAPAFresh, Scratch, Finetune, FinetuneReset, EWC, L2Init,
        DFF, ShrinkPerturb, ScratchReuse,
    )
}
"""Every built-in method by name."""

__all__ = ["BUILTIN_METHODS"]
