"""Host glue between compiled programs is one program per call, not one per leaf: a
pytree stacked, split, copied, joined or padded leaf by leaf, eagerly, compiled a tiny
program for every leaf shape (a tiny TeLAPA run compiled 300 programs, 76 of them
such glue; a Finetune run 65, 31 of them). The values are the eager ones, exactly."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import monitoring

from telapa.latent.losses import Bank, pad_bank
from telapa.pytrees import concatenate, stack, unstack
from telapa.qd.archive import copy_archive

LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"
"""Recorded once for each program a process makes, compiled or loaded from the
persistent cache."""


@contextlib.contextmanager
def compiles():
    """Counts the programs made inside the block (``count[0]``)."""
    count = [0]

    def listen(event: str, duration: float, **_) -> None:
        if event == LOWERING:
            count[0] += 1

    monitoring.register_event_duration_secs_listener(listen)
    try:
        yield count
    finally:
        monitoring.unregister_event_duration_listener(listen)


def _tree(seed: int) -> dict:
    """Five leaves of five shapes and three dtypes (a key among them)."""
    rng = np.random.default_rng(seed)
    return {"w": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=(7,)), jnp.float32),
            "n": jnp.asarray(rng.integers(0, 9, (2, 5)), jnp.int32),
            "s": jnp.asarray(seed, jnp.int32),
            "key": jax.random.key(seed)}


def _same(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_stacking_and_splitting_states_is_one_program_each():
    trees = [_tree(s) for s in range(3)]
    with compiles() as count:
        stacked = stack(trees)
    assert count[0] == 1
    _same(stacked, jax.tree.map(lambda *xs: jnp.stack(xs), *trees))
    with compiles() as count:
        members = unstack(stacked)
    assert count[0] == 1 and len(members) == 3
    for member, tree in zip(members, trees, strict=True):
        _same(member, tree)
    with compiles() as count:  # the same shapes again: nothing new
        unstack(stack([_tree(5), _tree(6), _tree(7)]))
    assert count[0] == 0


def test_a_copied_archive_is_one_program_into_fresh_buffers():
    tree = _tree(1)
    with compiles() as count:
        copy = copy_archive(tree)
    assert count[0] == 1
    _same(copy, tree)
    for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(copy), strict=True):
        if not jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            assert a.unsafe_buffer_pointer() != b.unsafe_buffer_pointer()


def test_joining_and_padding_banks_is_one_program_each():
    rng = np.random.default_rng(0)
    first = (jnp.asarray(rng.normal(size=(2, 3, 4, 5)), jnp.float32),
             jnp.asarray(rng.integers(0, 4, (2, 3)), jnp.int32))
    second = (jnp.asarray(rng.normal(size=(1, 3, 4, 5)), jnp.float32),
              jnp.asarray(rng.integers(0, 4, (1, 3)), jnp.int32))
    with compiles() as count:
        features, lengths = concatenate([first, second])
    assert count[0] == 1
    np.testing.assert_array_equal(features, np.concatenate([first[0], second[0]]))
    np.testing.assert_array_equal(lengths, np.concatenate([first[1], second[1]]))
    bank = Bank(features=features, lengths=lengths,
                is_anchor=jnp.asarray([True, True, False]))
    with compiles() as count:
        padded = pad_bank(bank, rows=8)
    assert count[0] == 1
    assert padded.features.shape == (8, 3, 4, 5) and padded.num_sets == 8
    np.testing.assert_array_equal(padded.features[:3], features)
    assert not np.asarray(padded.features[3:]).any() and not np.asarray(padded.lengths[3:]).any()
    assert np.asarray(padded.is_anchor).tolist() == [True, True] + [False] * 6
