"""Parameter-space variation for illumination (App. Algorithm "MAP-Elites for
task-local archive construction"): parent selection, optional cross-archive elite
injection, log-normal self-adaptation of the per-elite mutation scale, Gaussian
mutation, and the competence gate g_i.

Self-adaptation (Schwefel's log-normal rule for one step size per individual):

    sigma' = clip(sigma_p * exp(tau * xi), sigma_lo, sigma_hi),   xi ~ N(0, 1)
    theta' = theta_p + sigma' * eps,                               eps ~ N(0, I_P)

The child's sigma' is stored with it, so scales that produce accepted children spread.
Everything is a pure function of an explicit PRNG key (same key, same result).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from telapa.qd.archive import Archive, Elites, make_elites
from telapa.qd.lineage import with_visit
from telapa.qd.selection import ElitePool, sample_injection


def schwefel_tau(n_params: int) -> float:
    """tau = 1 / sqrt(2 P), the textbook learning rate for one self-adapted step size
    (Beyer & Schwefel 2002). For policy-sized P it is tiny (P = 2e4 -> 0.005); the
    default ``tau`` of `telapa.qd.config.IlluminationConfig` is a fixed 0.2 instead."""
    return 1.0 / math.sqrt(2.0 * n_params)


def adapt_sigma(
    key: jax.Array, sigma: jax.Array, *, tau: float, sigma_min: float, sigma_max: float
) -> jax.Array:
    """sigma' = clip(sigma * exp(tau * N(0, 1)), sigma_min, sigma_max), elementwise."""
    sigma = jnp.asarray(sigma, jnp.float32)
    xi = jax.random.normal(key, sigma.shape, jnp.float32)
    return jnp.clip(sigma * jnp.exp(tau * xi), sigma_min, sigma_max)


@jax.jit
def mutate(
    key: jax.Array,
    params: jax.Array,
    sigma: jax.Array,
    *,
    tau: float,
    sigma_min: float,
    sigma_max: float,
) -> tuple[jax.Array, jax.Array]:
    """One child per parent of (B, P) parents with scales (B,): (theta' (B, P), sigma'
    (B,)). Row i draws with k_i = ``split(key, B)[i]``:

        k_sigma, k_eps = split(k_i)
        sigma'_i = adapt_sigma(k_sigma, sigma_i)
        theta'_i = theta_i + sigma'_i * eps,   eps ~ N(0, I_P) drawn with k_eps

    One parent is a batch of one (``params[None]``, ``sigma[None]``)."""

    def one(k: jax.Array, theta: jax.Array, s: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_sigma, k_eps = jax.random.split(k)
        new_sigma = adapt_sigma(k_sigma, s, tau=tau, sigma_min=sigma_min, sigma_max=sigma_max)
        eps = jax.random.normal(k_eps, theta.shape, jnp.float32)
        return jnp.asarray(theta, jnp.float32) + new_sigma * eps, new_sigma

    keys = jax.random.split(key, params.shape[0])
    return jax.vmap(one)(keys, params, sigma)


def select_parents(key: jax.Array, valid: jax.Array, *, n: int) -> jax.Array:
    """(n,) int32 slots drawn uniformly, with replacement, among valid slots."""
    valid = jnp.asarray(valid, bool)
    p = valid / jnp.maximum(valid.sum(), 1)
    return jax.random.choice(key, valid.shape[0], (n,), replace=True, p=p).astype(jnp.int32)


def competence_gate(ref_sr: float | jax.Array, *, gamma: float, floor: float) -> jax.Array:
    """g_i = max(floor, gamma * SR_ref): a candidate must keep at least ``gamma`` of the
    reference (base) policy's success rate, and at least ``floor`` in absolute terms."""
    return jnp.maximum(jnp.float32(floor), jnp.float32(gamma) * jnp.asarray(ref_sr, jnp.float32))


@struct.dataclass
class Offspring:
    """A batch of B mutated children before evaluation.

    ``params`` (B, P), ``sigma`` (B,) (the adapted sigma'), ``parent_index`` (B,) int32
    (slot in the archive, or row in the injection pool when ``injected``),
    ``parent_id`` (B,) int32, ``lineage`` (B, W) uint32 (the parent's with the current
    visit's bit set), ``injected`` (B,) bool."""

    params: jax.Array
    sigma: jax.Array
    parent_index: jax.Array
    parent_id: jax.Array
    lineage: jax.Array
    injected: jax.Array

    def candidates(
        self,
        *,
        fitness: jax.Array,
        sr: jax.Array,
        descriptor: jax.Array,
        visit: int | jax.Array,
        raw_latent: jax.Array | None = None,
    ) -> Elites:
        """The evaluated children as insertion candidates (`telapa.qd.archive.insert_batch`)."""
        return make_elites(
            params=self.params,
            fitness=fitness,
            sr=sr,
            descriptor=descriptor,
            raw_latent=raw_latent,
            sigma=self.sigma,
            task=visit,
            lineage=self.lineage,
            parent_id=self.parent_id,
        )


@partial(jax.jit, static_argnames=("n", "subset", "inject", "own_visit"))
def _propose(
    key, archive, pool, visit, tau, sigma_min, sigma_max, p_inj, lam, *, n, subset, inject,
    own_visit,
):
    k_sel, k_flag, k_pick, k_mut = jax.random.split(key, 4)
    eligible = archive.valid
    if own_visit:
        mine = archive.valid & (archive.elites.task == visit)
        eligible = jnp.where(jnp.any(mine), mine, archive.valid)
    slots = select_parents(k_sel, eligible, n=n)
    el = archive.elites
    params, sigma = el.params[slots], el.sigma[slots]
    parent_id, lineage = el.elite_id[slots], el.lineage[slots]
    index = slots
    injected = jnp.zeros((n,), bool)
    if inject:
        rows = jax.vmap(lambda k: sample_injection(k, pool, archive, lam=lam, subset=subset))(
            jax.random.split(k_pick, n)
        )
        injected = (jax.random.uniform(k_flag, (n,)) < p_inj) & (rows >= 0)
        safe = jnp.maximum(rows, 0)
        pe = pool.elites

        def pick(a: jax.Array, b: jax.Array) -> jax.Array:
            m = injected.reshape((n,) + (1,) * (a.ndim - 1))
            return jnp.where(m, b, a)

        params = pick(params, pe.params[safe])
        sigma = pick(sigma, pe.sigma[safe])
        parent_id = pick(parent_id, pe.elite_id[safe])
        lineage = pick(lineage, pe.lineage[safe])
        index = pick(index, safe)
    children, new_sigma = mutate(
        k_mut, params, sigma, tau=tau, sigma_min=sigma_min, sigma_max=sigma_max
    )
    return Offspring(
        params=children,
        sigma=new_sigma,
        parent_index=index.astype(jnp.int32),
        parent_id=parent_id.astype(jnp.int32),
        lineage=with_visit(lineage, visit),
        injected=injected,
    )


def propose(
    key: jax.Array,
    archive: Archive,
    *,
    n: int,
    visit: int,
    tau: float,
    sigma_min: float,
    sigma_max: float,
    pool: ElitePool | None = None,
    p_inj: float = 0.0,
    lam: float = 1.0,
    subset: int = 32,
    own_visit: bool = False,
) -> Offspring:
    """``n`` children (`Offspring`) of the current archive, for visit index ``visit``.

    Each parent is a uniform draw among valid elites (``own_visit=True``: among the elites
    created on ``visit``, all valid elites if there is none: RefreshArchive illuminates
    around the newly trained policy and its children, as BuildArchive does); with
    probability ``p_inj`` (and a non-empty ``pool`` of elites from other archives) it is
    replaced by the pool elite chosen by `telapa.qd.selection.sample_injection` (score
    d_min(z, A) + lam * f~ over a uniform subset of ``subset`` rows). Then sigma is
    self-adapted and the parameters are mutated (`mutate`). With ``n = 1`` this is the
    paper's steady-state step; larger ``n`` draws all parents from the same archive state.
    The archive must not be empty.
    """
    inject = pool is not None and p_inj > 0.0
    return _propose(
        key,
        archive,
        pool,
        jnp.asarray(visit, jnp.int32),
        jnp.float32(tau),
        jnp.float32(sigma_min),
        jnp.float32(sigma_max),
        jnp.float32(p_inj),
        jnp.float32(lam),
        n=n,
        subset=subset,
        inject=inject,
        own_visit=own_visit,
    )
