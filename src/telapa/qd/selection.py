"""Transfer-origin selection over the archive library (paper Sec. 3.2 "Candidate pooling"
and "Few-shot origin selection"; App. Algorithm "FewShotSelectElite") and the score of
cross-archive elite injection (App. "Cross-Archive Elite Injection Ablation").

All distances are Euclidean in the shared, globally normalized descriptor space; every
archive in a union must therefore be expressed under the same embedding version and
normalizer (`union` checks this). Ties are always broken by the lowest index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.qd.archive import Archive, Elites

# --- the union of archives ----------------------------------------------------------------


@struct.dataclass
class ElitePool:
    """The union U = (A_1, ..., A_n) as one struct of arrays, rows archive by archive,
    slot by slot (every slot, valid or not): ``elites`` (N,) with N = sum of capacities,
    ``valid`` (N,), ``source`` (N,) int32 position of the archive in the list, ``slot``
    (N,) int32 slot within it."""

    elites: Elites
    valid: jax.Array
    source: jax.Array
    slot: jax.Array

    @property
    def size(self) -> int:
        return int(self.valid.shape[0])


def union(archives: Sequence[Archive], *, check_geometry: bool = True) -> ElitePool:
    """U_{k+1} = union of the given archives (`ElitePool`). With ``check_geometry``,
    archives under different embedding versions or normalizers are an error: their
    descriptors are not comparable."""
    if not archives:
        raise ValueError("union of no archives")
    if check_geometry:
        stamps = {
            (int(a.embedding_version), tuple(np.asarray(a.normalizer_id).tolist()))
            for a in archives
        }
        if len(stamps) > 1:
            raise ValueError(
                f"archives are expressed under different geometries {sorted(stamps)}; "
                "repack them under the current embedder and normalizer first"
            )
    return _pool([a.elites for a in archives], [a.valid for a in archives])


@jax.jit
def _pool(elites: Sequence[Any], valid: Sequence[jax.Array]) -> ElitePool:
    """`union`'s arrays in one program (eagerly, each leaf's concatenation compiled one of
    its own); archive i's slots are its ``valid``'s length, its capacity."""
    return ElitePool(
        elites=jax.tree.map(lambda *xs: jnp.concatenate(xs), *elites),
        valid=jnp.concatenate(valid),
        source=jnp.concatenate([jnp.full(v.shape, i, jnp.int32) for i, v in enumerate(valid)]),
        slot=jnp.concatenate([jnp.arange(v.shape[0], dtype=jnp.int32) for v in valid]),
    )


# --- candidate pooling --------------------------------------------------------------------


@jax.jit
def _fps(desc: jax.Array, fitness: jax.Array, valid: jax.Array, k_arr: jax.Array) -> jax.Array:
    n = desc.shape[0]
    k = k_arr.shape[0]
    first = jnp.argmax(jnp.where(valid, fitness, -jnp.inf))
    any_valid = jnp.any(valid)

    def body(j: int, carry: tuple) -> tuple:
        chosen, selected, mind = carry
        score = jnp.where(valid & ~selected, mind, -jnp.inf)
        nxt = jnp.where(j == 0, first, jnp.argmax(score))
        ok = jnp.where(j == 0, any_valid, score[nxt] > -jnp.inf)
        chosen = chosen.at[j].set(jnp.where(ok, nxt, -1))
        selected = selected.at[nxt].set(selected[nxt] | ok)
        d = jnp.linalg.norm(desc - desc[nxt], axis=-1)
        mind = jnp.where(ok, jnp.minimum(mind, d), mind)
        return chosen, selected, mind

    init = (jnp.full((k,), -1, jnp.int32), jnp.zeros((n,), bool), jnp.full((n,), jnp.inf))
    chosen, _, _ = jax.lax.fori_loop(0, k, body, init)
    return chosen.astype(jnp.int32)


def farthest_point_indices(
    descriptors: jax.Array, fitness: jax.Array, valid: jax.Array, *, k: int
) -> jax.Array:
    """Greedy farthest-point selection of ``k`` rows (paper Sec. 3.2):

        eta_1 = argmax_{valid} f,
        eta_j = argmax_{valid, unselected} min_{l < j} || z - z_{eta_l} ||_2

    ties by the lowest index. Returns (k,) int32 row indices, padded with -1 when fewer
    than ``k`` rows are valid."""
    desc = jnp.asarray(descriptors, jnp.float32)
    return _fps(desc, jnp.asarray(fitness, jnp.float32), jnp.asarray(valid, bool), jnp.zeros(k))


def pool_candidates(archives: Sequence[Archive], *, k_pool: int) -> tuple[ElitePool, jax.Array]:
    """C_{k+1}: (the union, (k_pool,) indices into it by `farthest_point_indices`)."""
    u = union(archives)
    idx = farthest_point_indices(u.elites.descriptor, u.elites.fitness, u.valid, k=k_pool)
    return u, idx


# --- few-shot origin selection --------------------------------------------------------------


class ProbeResults(NamedTuple):
    """Per-candidate probe outcomes, each (K,): SR^0, SR^final, slope, AUC."""

    sr0: jax.Array
    sr_final: jax.Array
    slope: jax.Array
    auc: jax.Array


def probe_summary(sr_curve: jax.Array, *, times: jax.Array | None = None) -> ProbeResults:
    """Probe outcomes from success rates measured at n points of each probe, (K, n).

    ``times`` (n,) are the probe progress of each point in [0, 1] (default
    ``linspace(0, 1, n)``, i.e. before the first update ... after the last):

        SR^0     = SR(t_1),  SR^final = SR(t_n)
        slope    = least-squares slope of SR against t (SR gained per whole probe)
        AUC      = trapezoid(SR, t) / (t_n - t_1)   (mean SR over the probe, in [0, 1])

    With n = 1, slope = 0 and AUC = SR."""
    sr = jnp.asarray(sr_curve, jnp.float32)
    n = sr.shape[-1]
    t = jnp.linspace(0.0, 1.0, n) if times is None else jnp.asarray(times, jnp.float32)
    if n == 1:
        return ProbeResults(sr[..., 0], sr[..., 0], jnp.zeros_like(sr[..., 0]), sr[..., 0])
    tc = t - t.mean()
    slope = (sr * tc).sum(-1) / (tc * tc).sum()
    auc = ((sr[..., 1:] + sr[..., :-1]) * 0.5 * jnp.diff(t)).sum(-1) / (t[-1] - t[0])
    return ProbeResults(sr[..., 0], sr[..., -1], slope, auc)


WINDOW_TOL = 1e-6
"""Slack on the epsilon window so that SR values on a 1/m grid are not cut by rounding."""


def near_best(sr_final: jax.Array, *, epsilon: float, valid: jax.Array | None = None) -> jax.Array:
    """I = { j : SR^final_j >= SR* - epsilon }, SR* = max_j SR^final_j (valid j only);
    (K,) bool."""
    sr = jnp.asarray(sr_final, jnp.float32)
    valid = jnp.ones(sr.shape, bool) if valid is None else jnp.asarray(valid, bool)
    best = jnp.max(jnp.where(valid, sr, -jnp.inf))
    return valid & (sr >= best - epsilon - WINDOW_TOL)


def _minmax(x: jax.Array, mask: jax.Array) -> jax.Array:
    lo = jnp.min(jnp.where(mask, x, jnp.inf))
    hi = jnp.max(jnp.where(mask, x, -jnp.inf))
    span = hi - lo
    return jnp.where(mask & (span > 0), (x - lo) / jnp.where(span > 0, span, 1.0), 0.0)


def few_shot_select(
    probe: ProbeResults,
    *,
    epsilon: float,
    w_final: float,
    w_slope: float,
    w_auc: float,
    valid: jax.Array | None = None,
) -> tuple[int, jax.Array]:
    """``(j*, Score)``: the chosen candidate and the (K,) score of every candidate, -inf
    outside the near-best window I (`near_best`):

        Score_j = w_final * n(SR^final)_j + w_slope * n(slope)_j + w_auc * n(AUC)_j,
        n(x)_j  = (x_j - min_I x) / (max_I x - min_I x)   (0 when max_I x = min_I x)
        j*      = argmax_{j in I} Score_j                  (ties by the lowest index)

    min-max normalization within I puts the three terms on one [0, 1] scale. SR^0 is not
    used (the paper's Score takes SR^final, slope, AUC and SR*). ValueError when no
    candidate is valid. The caller returns the *original* archived weights of j*."""
    window = near_best(probe.sr_final, epsilon=epsilon, valid=valid)
    score = (
        w_final * _minmax(jnp.asarray(probe.sr_final, jnp.float32), window)
        + w_slope * _minmax(jnp.asarray(probe.slope, jnp.float32), window)
        + w_auc * _minmax(jnp.asarray(probe.auc, jnp.float32), window)
    )
    scores = jnp.where(window, score, -jnp.inf)
    if not bool(jnp.any(jnp.isfinite(scores))):
        raise ValueError("no valid candidate to select")
    return int(jnp.argmax(scores)), scores


# --- elite injection ----------------------------------------------------------------------


@jax.jit
def nearest_distance(z: jax.Array, descriptors: jax.Array, valid: jax.Array) -> jax.Array:
    """d_min(z, A) = min_{valid i} || z - z_i ||_2 for z (..., d); inf for an empty A."""
    d = jnp.linalg.norm(z[..., None, :] - descriptors, axis=-1)
    return jnp.min(jnp.where(valid, d, jnp.inf), axis=-1)


def injection_scores(
    descriptors: jax.Array,
    fitness: jax.Array,
    archive: Archive,
    *,
    lam: float,
    mask: jax.Array | None = None,
) -> jax.Array:
    """Injection score (paper eq. injection_elite) of pool candidates (N, d), (N,):

        score_i = d_min(z_i, A_curr) + lam * f~_i,
        f~_i    = (f_i - min_S f) / (max_S f - min_S f)   (0 when all equal)

    with S the candidates in ``mask`` (the sampled subset; default all). -inf outside S.
    """
    fitness = jnp.asarray(fitness, jnp.float32)
    mask = jnp.ones(fitness.shape, bool) if mask is None else jnp.asarray(mask, bool)
    dist = nearest_distance(
        jnp.asarray(descriptors, jnp.float32), archive.elites.descriptor, archive.valid
    )
    return jnp.where(mask, dist + lam * _minmax(fitness, mask), -jnp.inf)


def sample_injection(
    key: jax.Array, pool: ElitePool, archive: Archive, *, lam: float, subset: int
) -> jax.Array:
    """Index into ``pool`` of the injected parent: ``subset`` valid rows are drawn
    uniformly without replacement (all valid rows if fewer), and the one with the
    highest `injection_scores` wins (ties: lowest index). Jittable; -1 if the pool has
    no valid row."""
    n = pool.valid.shape[0]
    # Uniform subset without replacement: the `subset` valid rows with the smallest keys.
    u = jnp.where(pool.valid, jax.random.uniform(key, (n,)), jnp.inf)
    m = min(subset, n)
    _, idx = jax.lax.top_k(-u, m)
    in_subset = jnp.zeros((n,), bool).at[idx].set(jnp.isfinite(u[idx]))
    scores = injection_scores(
        pool.elites.descriptor, pool.elites.fitness, archive, lam=lam, mask=in_subset
    )
    best = jnp.argmax(scores)
    return jnp.where(jnp.any(in_subset), best, -1).astype(jnp.int32)
