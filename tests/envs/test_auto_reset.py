"""`AutoReset`: batched envs that start a fresh, independent level when an episode ends."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.envs import AutoReset, make
from telapa.envs.minigrid import State
from telapa.envs.minigrid.constants import Action

ENV = make("MiniGrid-DoorKey-8x8-v0")

# Every env function runs jitted: eagerly (op by op) a batch's reset of DoorKey-8x8 took
# 4 s and a vmapped step 1.7 s, against 1 s and 0.5 s jitted. XLA's settings stay the
# defaults: these tests check the programs users run.
_plain_step = jax.jit(jax.vmap(ENV.step))  # shared by the tests where the shapes agree
_observe = jax.jit(jax.vmap(ENV.observe))


@partial(jax.jit, static_argnums=0)
def _reset(n: int, key: jax.Array):
    """`AutoReset.reset` of ``n`` envs (it depends on neither chunks nor trip counts)."""
    return AutoReset(ENV, n).reset(key)


def _about_to_truncate(state, which: np.ndarray):
    """Puts the envs in ``which`` one step before truncation."""
    env_state: State = state.env_state
    step_count = jnp.where(which, env_state.max_steps - 1, env_state.step_count)
    return state.replace(env_state=env_state.replace(step_count=step_count))


def _levels(env_state: State, which: np.ndarray) -> np.ndarray:
    """One row per env in ``which``: its grid, agent position and direction."""
    return np.concatenate(
        [
            np.asarray(env_state.grid[which]).reshape(int(which.sum()), -1),
            np.asarray(env_state.agent_pos[which]),
            np.asarray(env_state.agent_dir[which])[:, None],
        ],
        axis=1,
    )


def _step(env: AutoReset, state, n: int):
    return jax.jit(env.step)(state, jnp.full((n,), Action.LEFT, jnp.int32))


@pytest.mark.parametrize("chunks", [(1,), (2,), (4,), (2, 1)])
def test_finished_envs_restart_and_the_others_continue(chunks: tuple[int, ...]) -> None:
    n = 5
    env = AutoReset(ENV, n, chunks=chunks)
    state, _ = _reset(n, jax.random.key(0))
    ending = np.array([False, True, False, True, True])
    before = _about_to_truncate(state, ending)
    after, obs, reward, terminated, truncated, info = _step(env, before, n)

    np.testing.assert_array_equal(truncated, ending)
    assert not np.asarray(terminated).any() and not np.asarray(reward).any()
    np.testing.assert_array_equal(after.env_state.step_count, [1, 0, 1, 0, 0])
    continued = ~ending
    # Continuing envs keep their level; restarted ones get a fresh level each.
    np.testing.assert_array_equal(
        after.env_state.grid[continued], before.env_state.grid[continued]
    )
    fresh, old = _levels(after.env_state, ending), _levels(before.env_state, ending)
    assert len({level.tobytes() for level in fresh}) == 3
    assert all((new != previous).any() for new, previous in zip(fresh, old, strict=True))
    # The returned observation starts the new episode; the final one is kept in info.
    first_obs = _observe(after.env_state)
    np.testing.assert_array_equal(obs["image"], first_obs["image"])
    stepped = _plain_step(before.env_state, jnp.full((n,), Action.LEFT, jnp.int32))
    np.testing.assert_array_equal(info["final_obs"]["image"], stepped[1]["image"])
    np.testing.assert_array_equal(info["features"], stepped[5]["features"])


def test_no_episode_ends_means_plain_steps() -> None:
    n = 5  # the batch above: its reset and plain step are compiled already
    env = AutoReset(ENV, n)
    state, _ = _reset(n, jax.random.key(1))
    after, obs, *_ = _step(env, state, n)
    expected_state, expected_obs, *_ = _plain_step(
        state.env_state, jnp.full((n,), Action.LEFT, jnp.int32)
    )
    np.testing.assert_array_equal(after.env_state.grid, expected_state.grid)
    np.testing.assert_array_equal(after.env_state.agent_dir, expected_state.agent_dir)
    np.testing.assert_array_equal(obs["image"], expected_obs["image"])


def test_rejects_an_empty_batch_and_empty_chunks() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        AutoReset(ENV, 0)
    with pytest.raises(ValueError, match="chunks"):
        AutoReset(ENV, 4, chunks=(2, 0))


def _reference_step(env: AutoReset, state, action):
    """`AutoReset.step` as it was before issue 25: loops whose trip counts are the
    step's chunk counts (data-dependent), the same keys and targets."""
    env_state, obs, reward, terminated, truncated, info = env._step(state.env_state, action)
    done = jnp.logical_or(terminated, truncated)
    key, reset_key = jax.random.split(state.key)
    (finished,) = jnp.nonzero(done, size=env.num_envs + env.chunks[0],
                              fill_value=env.num_envs)

    def refill(size):
        def draw(_, carry):
            drawn, current = carry
            targets = jax.lax.dynamic_slice(finished, (drawn,), (size,))
            fresh = env._reset(jax.random.split(jax.random.fold_in(reset_key, drawn), size))
            return drawn + size, jax.tree.map(lambda x, new: x.at[targets].set(new, mode="drop"),
                                              current, fresh)
        return draw

    left, carry = done.sum(), (jnp.int32(0), (env_state, obs))
    for n, size in enumerate(env.chunks):
        count = (left + size - 1) // size if n == len(env.chunks) - 1 else left // size
        carry = jax.lax.fori_loop(0, count, refill(size), carry)
        left = left - count * size
    return (type(state)(carry[1][0], key), carry[1][1], reward, terminated, truncated,
            {**info, "final_obs": obs})


def _ending_states(env: AutoReset, members: int):
    """``members`` states of ``env`` in which different numbers of envs (0 to all) are
    one step before truncation."""
    rng = np.random.default_rng(0)
    states = []
    for m in range(members):
        state, _ = _reset(env.num_envs, jax.random.key(10 + m))
        ending = rng.permutation(env.num_envs) < (m * 5) % (env.num_envs + 1)
        states.append(_about_to_truncate(state, ending))
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def test_static_and_shared_trip_counts_give_the_levels_of_each_members_loops() -> None:
    """Every number of finished envs, alone and under ``vmap`` (with and without the
    batch axis named), with static trip counts or the batch's largest count: the same
    states, observations and keys as loops of each member's own count (before issue 25).
    Static counts leave no while loop; a named axis makes the loop one of the batch's
    largest count, without the per-member selects of a batched loop."""
    n = 12
    static, shared = (AutoReset(ENV, n, chunks=(8, 4), static=s) for s in (True, False))
    assert static.max_counts == (1, 2)  # 5 ends: 0 x 8 + 2 x 4 (3 drawn, unused); 10: 8 + 4
    states = _ending_states(static, 4)
    action = jnp.full((4, n), Action.LEFT, jnp.int32)

    def named(env):
        return jax.vmap(partial(env.step, batch_axes=("seeds",)), axis_name="seeds")

    steps = {"reference": jax.vmap(partial(_reference_step, static)),
             "static": jax.vmap(static.step), "static named": named(static),
             "shared": jax.vmap(shared.step), "shared named": named(shared)}
    # each jitted alone, so that make_jaxpr below reuses the trace; all in one program,
    # whose compiler merges the step they share
    steps = {name: jax.jit(f) for name, f in steps.items()}
    out = jax.jit(lambda s, a: {k: f(s, a) for k, f in steps.items()})(states, action)
    expected = out.pop("reference")
    assert set(np.asarray(expected[4].sum(axis=1)).tolist()) == {0, 5, 10, 2}  # ends
    for got in out.values():
        for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(got), strict=True):
            np.testing.assert_array_equal(jax.random.key_data(a) if _is_key(a) else a,
                                          jax.random.key_data(b) if _is_key(b) else b)
    # the predicates of the while loops: per member (a batched loop selects every member's
    # state at every iteration), one for the batch, or none (static trip counts)
    predicates = {name: _while_predicates(jax.make_jaxpr(f)(states, action).jaxpr)
                  for name, f in steps.items()}
    assert predicates["reference"] == predicates["shared"] == [(4,)] * 2
    assert predicates["shared named"] == [()] * 2
    assert predicates["static"] == predicates["static named"] == []
    # member 2 stepped alone by each env (one program: they share the step)
    alone = jax.jit(lambda s, a: [env.step(s, a) for env in (static, shared)])(
        jax.tree.map(lambda x: x[2], states), action[2])
    for got in alone:
        np.testing.assert_array_equal(got[0].env_state.grid, expected[0].env_state.grid[2])


def _while_predicates(jaxpr) -> list[tuple[int, ...]]:
    """The shape of the predicate of every while loop in ``jaxpr`` and its sub-jaxprs."""
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            shapes.append(tuple(eqn.params["cond_jaxpr"].jaxpr.outvars[0].aval.shape))
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    shapes += _while_predicates(inner)
    return shapes


def _is_key(x) -> bool:
    return jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
