"""Pytrees of arrays stacked, split and joined between compiled programs, each call one
program.

Stacked, split or joined leaf by leaf, eagerly, every leaf shape compiled a small program of its
own (a tiny TeLAPA run compiled 35 for stacking train states alone, a Finetune run 17);
jitted whole, a call compiles one program per tree structure, count and shapes, and the
values are the eager ones exactly (stacking, indexing and joining move data, they
compute nothing)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp


@jax.jit
def stack(trees: Sequence[Any]) -> Any:
    """S pytrees of the same structure -> one pytree with a leading axis S."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@functools.partial(jax.jit, static_argnames="size")
def _unstack(stacked: Any, size: int) -> list[Any]:
    return [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(size)]


def unstack(stacked: Any) -> list[Any]:
    """Inverse of `stack`: the S pytrees along the leaves' leading axis."""
    return _unstack(stacked, size=len(jax.tree.leaves(stacked)[0]))


@jax.jit
def concatenate(trees: Sequence[Any]) -> Any:
    """Pytrees of the same structure joined leaf by leaf along the leading axis."""
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *trees)


__all__ = ["concatenate", "stack", "unstack"]
