"""Unstructured (novelty-threshold) archive of policy elites, as immutable JAX pytrees.

Paper: Sec. 3.2 (task archives of N_k <= 384 elites kept near 256 by an adaptive spacing
threshold), App. "MAP-Elites" (Algorithm "MAP-Elites for task-local archive
construction"), App. "Online latent-space maintenance" (re-express and repack), Sec. 4
(recorded lineage; the elites' normalised novelty is `telapa.analysis.novelty`).

Layout (capacity C, P flat parameters, descriptor dim d, raw latent dim r, W lineage
words; every array has leading axis C and is meaningful only where ``valid``):

=================  ==================  ==========================================
field              shape / dtype       meaning
=================  ==================  ==========================================
params             (C, P) float32      flat policy parameters (ravel_pytree order)
fitness            (C,) float32        F: mean episodic return over m episodes
sr                 (C,) float32        success rate over the same episodes
raw_latent         (C, r) float32      raw policy-level latent summary (un-normalized)
descriptor         (C, d) float32      z_bd = N_t(z_mean): normalized descriptor
sigma              (C,) float32        self-adapted mutation scale of the elite
task               (C,) int32          visit index on which the elite was evaluated
elite_id           (C,) int32          unique id (``next_id`` counter + offset)
parent_id          (C,) int32          id of the elite it was mutated / trained from, -1
lineage            (C, W) uint32       bitmask over visit indices (see below)
valid              (C,) bool           slot holds an elite
=================  ==================  ==========================================

Scalars: ``d_min`` (spacing threshold), ``ref_descriptor`` (d,), ``ref_sr``,
``ref_fitness`` (the archive's reference = base elite), ``tag`` (the archive's base-tag
index), ``embedding_version``, ``normalizer_id`` ((2,) uint32: the 64-bit normalizer hash
of `telapa.latent.normalizer.normalizer_id` as two big-endian words), ``next_id`` and the
counters ``n_proposed`` / ``n_added`` / ``n_replaced``. Static: the `ArchiveSpec`.

**Lineage** (`telapa.qd.lineage`): a bitmask over the curriculum's visit indices.
**Trajectories** (`telapa.qd.trajectories`): each elite's evaluation episodes, in a
separate `Trajectories` block ``archive.traj`` that `drop_trajectories` removes.

**Insertion rule** (`insert`): see its docstring. Insertion is deterministic and
sequential; `insert_batch` scans candidates in proposal order.
"""

from __future__ import annotations

import dataclasses
import enum
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.qd.trajectories import FeatureCodec, Trajectories

# --- normalizer ids ---------------------------------------------------------------------


def normalizer_words(hex_id: str | None) -> np.ndarray:
    """A 16-hex-digit normalizer id as (2,) uint32 (big-endian words); None -> zeros."""
    if not hex_id:
        return np.zeros(2, np.uint32)
    if len(hex_id) != 16:
        raise ValueError(f"normalizer id must have 16 hex digits, got {hex_id!r}")
    value = int(hex_id, 16)
    return np.array([value >> 32, value & 0xFFFFFFFF], np.uint32)


def normalizer_hex(words: np.ndarray | jax.Array) -> str | None:
    """Inverse of `normalizer_words` (zeros -> None: no normalizer yet)."""
    hi, lo = (int(w) for w in np.asarray(words, np.uint32))
    return None if hi == lo == 0 else f"{(hi << 32) | lo:016x}"


# --- elites -----------------------------------------------------------------------------


@struct.dataclass
class Elites:
    """Struct of arrays for elites: leading axes (C,) in an archive, (B,) for a batch of
    candidates, () for one candidate. See the module docstring for fields."""

    params: jax.Array
    fitness: jax.Array
    sr: jax.Array
    raw_latent: jax.Array
    descriptor: jax.Array
    sigma: jax.Array
    task: jax.Array
    elite_id: jax.Array
    parent_id: jax.Array
    lineage: jax.Array


def make_elites(
    *,
    params: jax.Array,
    fitness: jax.Array,
    sr: jax.Array,
    descriptor: jax.Array,
    sigma: jax.Array,
    task: jax.Array | int,
    lineage: jax.Array,
    raw_latent: jax.Array | None = None,
    parent_id: jax.Array | int = -1,
    elite_id: jax.Array | int = -1,
) -> Elites:
    """Candidate(s) with canonical dtypes; scalar ``task`` / ``parent_id`` / ``elite_id``
    broadcast to the batch shape of ``fitness``. ``raw_latent`` defaults to an empty
    (..., 0) array; ``elite_id`` of a candidate is ignored (assigned on acceptance)."""
    fitness = jnp.asarray(fitness, jnp.float32)
    lead = fitness.shape
    if raw_latent is None:
        raw_latent = jnp.zeros((*lead, 0), jnp.float32)

    def ids(x: jax.Array | int) -> jax.Array:
        return jnp.broadcast_to(jnp.asarray(x, jnp.int32), lead)

    return Elites(
        params=jnp.asarray(params, jnp.float32),
        fitness=fitness,
        sr=jnp.broadcast_to(jnp.asarray(sr, jnp.float32), lead),
        raw_latent=jnp.asarray(raw_latent, jnp.float32),
        descriptor=jnp.asarray(descriptor, jnp.float32),
        sigma=jnp.broadcast_to(jnp.asarray(sigma, jnp.float32), lead),
        task=ids(task),
        elite_id=ids(elite_id),
        parent_id=ids(parent_id),
        lineage=jnp.asarray(lineage, jnp.uint32),
    )


# --- the archive ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArchiveSpec:
    """Static shape and control constants of an archive (hashable; a jit static). The one
    source of the archive defaults (`telapa.qd.config.ArchiveConfig` reads them here).

    **Size control.** The spacing threshold is adapted after every *competent* candidate
    (one that passed the gate), whether or not it entered. With N the size before the
    candidate, N* the target, r_0 = ``fill_rate`` and a = ``d_min_step``:

        r     = r_0 * max(0, 1 - N / N*)            target add rate at this size
        d_min <- d_min * exp(a)                     if the candidate was added
        d_min <- d_min * exp(-a * r / (1 - r))      otherwise (rejected as near, or a
                                                    replacement)
        d_min <- clip(d_min, d_floor, d_ceil)

    log d_min is a stochastic-approximation iterate whose fixed point is an add rate of r:
    it only moves when the observed add rate differs from r, and by multiplicative steps,
    so it settles on the descriptor scale of whatever the mutants produce (0.001 or 1)
    within tens of candidates. With the add rate tracking r, the size follows
    dN/dt = r_0 (1 - N/N*), i.e. N(t) ~ N* (1 - exp(-r_0 t / N*)): 242 of 256 after 1000
    candidates at r_0 = 0.8, and at N >= N* every addition raises d_min by e^a while
    rejections leave it alone, so the archive stops growing a few elites past N* instead
    of running to capacity (the capacity stays a hard bound).
    """

    n_params: int
    desc_dim: int = 8
    raw_dim: int = 24
    capacity: int = 384
    target_size: int = 256
    lineage_words: int = 1
    d_min0: float = 0.10
    """Initial spacing threshold (paper: 0.10)."""
    d_min_step: float = 0.05
    """a: log-step of d_min per competent candidate."""
    fill_rate: float = 0.8
    """r_0: target add rate of an empty archive, in (0, 1)."""
    d_min_floor: float = 1e-3
    d_min_ceil: float = 10.0

    def __post_init__(self) -> None:
        if not 1 <= self.target_size <= self.capacity:
            raise ValueError(
                f"need 1 <= target_size <= capacity, got {self.target_size}, {self.capacity}"
            )
        if not 0 < self.d_min_floor <= self.d_min_ceil:
            raise ValueError("need 0 < d_min_floor <= d_min_ceil")
        if not 0 < self.fill_rate < 1:
            raise ValueError(f"need 0 < fill_rate < 1, got {self.fill_rate}")
        if not self.d_min_step > 0:
            raise ValueError(f"need d_min_step > 0, got {self.d_min_step}")
        if not self.d_min0 > 0:
            raise ValueError(f"need d_min0 > 0, got {self.d_min0}")


@struct.dataclass
class Archive:
    """An unstructured archive (module docstring). Build with `init_archive`."""

    elites: Elites
    valid: jax.Array
    d_min: jax.Array
    ref_descriptor: jax.Array
    ref_sr: jax.Array
    ref_fitness: jax.Array
    tag: jax.Array
    embedding_version: jax.Array
    normalizer_id: jax.Array
    next_id: jax.Array
    n_proposed: jax.Array
    n_added: jax.Array
    n_replaced: jax.Array
    spec: ArchiveSpec = struct.field(pytree_node=False)
    traj: Trajectories | None = None

    @property
    def size(self) -> jax.Array:
        """Number of elites N = sum(valid)."""
        return jnp.sum(self.valid.astype(jnp.int32))

    @property
    def normalizer_hex(self) -> str | None:
        return normalizer_hex(self.normalizer_id)


ELITE_ID_BITS = 24
"""An elite id is its archive's tag ``<< ELITE_ID_BITS`` plus its number in that archive
(`elite_id_offset`): 2^24 elites per archive, 2^7 archives in an int32."""


def elite_id_offset(tag: int) -> int:
    """The first elite id of the archive tagged ``tag``: ``tag << ELITE_ID_BITS``."""
    return int(tag) << ELITE_ID_BITS


def split_elite_id(elite_id: int) -> tuple[int, int]:
    """``(tag, number)`` of an elite id: its archive's tag and its number in that archive."""
    return elite_id >> ELITE_ID_BITS, elite_id & ((1 << ELITE_ID_BITS) - 1)


def init_archive(
    spec: ArchiveSpec,
    *,
    tag: int = 0,
    d_min: float | None = None,
    id_offset: int = 0,
    codec: FeatureCodec | None = None,
    episodes: int = 50,
    steps: int = 256,
    embedding_version: int = 0,
    normalizer_id: str | None = None,
) -> Archive:
    """An empty archive with spacing ``d_min`` (default ``spec.d_min0``). ``id_offset`` starts
    the elite-id counter: give each archive of a run a distinct offset (`elite_id_offset`
    of its tag) so ids are unique run-wide.
    With a ``codec``, a `Trajectories` block of (capacity, episodes, steps) is allocated
    and every insertion must then bring the candidate's episodes."""
    c = spec.capacity
    elites = Elites(
        params=jnp.zeros((c, spec.n_params), jnp.float32),
        fitness=jnp.full((c,), -jnp.inf, jnp.float32),
        sr=jnp.zeros((c,), jnp.float32),
        raw_latent=jnp.zeros((c, spec.raw_dim), jnp.float32),
        descriptor=jnp.zeros((c, spec.desc_dim), jnp.float32),
        sigma=jnp.zeros((c,), jnp.float32),
        task=jnp.full((c,), -1, jnp.int32),
        elite_id=jnp.full((c,), -1, jnp.int32),
        parent_id=jnp.full((c,), -1, jnp.int32),
        lineage=jnp.zeros((c, spec.lineage_words), jnp.uint32),
    )
    traj = None
    if codec is not None:
        traj = Trajectories.empty(codec, episodes=episodes, steps=steps, lead=(c,))
    i32 = jnp.int32
    return Archive(
        elites=elites,
        valid=jnp.zeros((c,), bool),
        d_min=jnp.asarray(spec.d_min0 if d_min is None else d_min, jnp.float32),
        ref_descriptor=jnp.zeros((spec.desc_dim,), jnp.float32),
        ref_sr=jnp.asarray(0.0, jnp.float32),
        ref_fitness=jnp.asarray(0.0, jnp.float32),
        tag=jnp.asarray(tag, i32),
        embedding_version=jnp.asarray(embedding_version, i32),
        normalizer_id=jnp.asarray(normalizer_words(normalizer_id)),
        next_id=jnp.asarray(id_offset, i32),
        n_proposed=jnp.asarray(0, i32),
        n_added=jnp.asarray(0, i32),
        n_replaced=jnp.asarray(0, i32),
        spec=spec,
        traj=traj,
    )


def set_reference(
    archive: Archive, *, descriptor: jax.Array, sr: float | jax.Array, fitness: float | jax.Array
) -> Archive:
    """Stores the reference (base elite) descriptor z_ref, SR_base and F_base; the
    competence gate is computed from ``ref_sr`` (`telapa.qd.mutation.competence_gate`)."""
    return archive.replace(
        ref_descriptor=jnp.asarray(descriptor, jnp.float32),
        ref_sr=jnp.asarray(sr, jnp.float32),
        ref_fitness=jnp.asarray(fitness, jnp.float32),
    )


@jax.jit
def copy_archive(archive: Archive) -> Archive:
    """A deep copy (fresh buffers): a snapshot that survives ``donate=True`` insertions.
    One program for the whole archive (leaf by leaf, eagerly, each leaf's shape compiled
    one of its own)."""
    return jax.tree.map(jnp.copy, archive)


def drop_trajectories(archive: Archive) -> Archive:
    """The archive without its trajectory block (insertion then takes no episodes)."""
    return archive.replace(traj=None)


class InsertStatus(enum.IntEnum):
    """Outcome of one insertion (`InsertInfo.status`)."""

    REJECTED_GATE = 0
    """SR below the competence gate, or a non-finite fitness / SR / descriptor."""
    REJECTED_NEAR = 1
    """Within d_min of its nearest elite and not allowed to replace it."""
    REJECTED_FULL = 2
    """Farther than d_min from every elite, but the archive is full and it is not fitter
    than its nearest elite."""
    ADDED = 3
    REPLACED = 4


class InsertInfo(NamedTuple):
    """Per-candidate result; batched (B,) from `insert_batch`."""

    status: jax.Array
    """`InsertStatus` as int32."""
    slot: jax.Array
    """Slot written, -1 when rejected."""
    elite_id: jax.Array
    """Id given to the new elite, -1 when rejected."""
    replaced_id: jax.Array
    """Id of the elite it replaced, -1 otherwise."""
    distance: jax.Array
    """Distance d_1 to the nearest elite before insertion (inf in an empty archive)."""
    d_min: jax.Array
    """Spacing threshold after the insertion (and its adaptation)."""


def _two_nearest(desc: jax.Array, valid: jax.Array, z: jax.Array) -> tuple:
    dist = jnp.linalg.norm(desc - z, axis=-1)
    dist = jnp.where(valid, dist, jnp.inf)
    i1 = jnp.argmin(dist)
    d1 = dist[i1]
    d2 = jnp.min(jnp.where(jnp.arange(dist.shape[0]) == i1, jnp.inf, dist))
    return i1, d1, d2


def _write_row(tree, slot: jax.Array, new, cond: jax.Array):
    def one(a: jax.Array, n: jax.Array) -> jax.Array:
        return a.at[slot].set(jnp.where(cond, jnp.asarray(n, a.dtype), a[slot]))

    return jax.tree.map(one, tree, new)


def adapt_d_min(
    spec: ArchiveSpec, d_min: jax.Array, size: jax.Array, added: jax.Array
) -> jax.Array:
    """One step of the size controller (see `ArchiveSpec`) after a competent candidate:
    ``size`` is N before it, ``added`` whether it entered as a new elite."""
    fill = 1.0 - size.astype(jnp.float32) / spec.target_size
    rate = spec.fill_rate * jnp.maximum(fill, 0.0)
    step = jnp.where(added, spec.d_min_step, -spec.d_min_step * rate / (1.0 - rate))
    return jnp.clip(d_min * jnp.exp(step), spec.d_min_floor, spec.d_min_ceil)


def _insert(
    archive: Archive,
    candidate: Elites,
    gate: jax.Array,
    traj: Trajectories | None,
    force: bool = False,
) -> tuple[Archive, InsertInfo]:
    spec = archive.spec
    el = archive.elites
    valid = archive.valid
    size = archive.size
    z = candidate.descriptor

    i1, d1, d2 = _two_nearest(el.descriptor, valid, z)
    finite = jnp.isfinite(candidate.fitness) & jnp.isfinite(candidate.sr) & jnp.all(jnp.isfinite(z))
    competent = finite & (candidate.sr >= gate)
    full = size >= spec.capacity
    novel = d1 > archive.d_min
    fitter = (size > 0) & (candidate.fitness > el.fitness[i1])
    add = competent & novel & ~full
    replace = competent & ~add & ((fitter & (d2 > archive.d_min)) | force)
    changed = add | replace

    free = jnp.argmin(valid)  # lowest free slot (valid is False there)
    slot = jnp.where(add, free, i1).astype(jnp.int32)
    new_id = archive.next_id
    row = candidate.replace(elite_id=new_id)
    replaced_id = jnp.where(replace, el.elite_id[i1], -1)

    elites = _write_row(el, slot, row, changed)
    valid = valid.at[slot].set(valid[slot] | changed)
    new_traj = archive.traj
    if archive.traj is not None:
        new_traj = _write_row(archive.traj, slot, traj, changed)
    d_min = jnp.where(competent, adapt_d_min(spec, archive.d_min, size, add), archive.d_min)

    status = jnp.select(
        [~competent, add, replace, novel & full],
        [
            int(InsertStatus.REJECTED_GATE),
            int(InsertStatus.ADDED),
            int(InsertStatus.REPLACED),
            int(InsertStatus.REJECTED_FULL),
        ],
        int(InsertStatus.REJECTED_NEAR),
    ).astype(jnp.int32)
    new = archive.replace(
        elites=elites,
        valid=valid,
        d_min=d_min,
        traj=new_traj,
        next_id=archive.next_id + changed.astype(jnp.int32),
        n_proposed=archive.n_proposed + 1,
        n_added=archive.n_added + add.astype(jnp.int32),
        n_replaced=archive.n_replaced + replace.astype(jnp.int32),
    )
    info = InsertInfo(
        status=status,
        slot=jnp.where(changed, slot, -1).astype(jnp.int32),
        elite_id=jnp.where(changed, new_id, -1).astype(jnp.int32),
        replaced_id=replaced_id.astype(jnp.int32),
        distance=d1.astype(jnp.float32),
        d_min=d_min,
    )
    return new, info


def _check_candidate(archive: Archive, candidate: Elites, batched: bool) -> None:
    spec = archive.spec
    want = {
        "params": spec.n_params,
        "raw_latent": spec.raw_dim,
        "descriptor": spec.desc_dim,
        "lineage": spec.lineage_words,
    }
    ndim = 2 if batched else 1
    for name, n in want.items():
        shape = getattr(candidate, name).shape
        if len(shape) != ndim or shape[-1] != n:
            lead = "(B, " if batched else "("
            raise ValueError(f"candidate {name} has shape {shape}, archive wants {lead}{n})")


def _check_traj(archive: Archive, traj: Trajectories | None) -> None:
    if archive.traj is not None and traj is None:
        raise ValueError(
            "this archive stores trajectories: pass traj= (Trajectories.empty(...) for an "
            "elite without episodes) or drop_trajectories(archive) first"
        )
    if archive.traj is None and traj is not None:
        raise ValueError("traj given but the archive has no trajectory block")
    if traj is not None and traj.codec != archive.traj.codec:
        raise ValueError("candidate trajectories use a different FeatureCodec")
    if traj is not None and traj.lengths.shape[-1:] + traj.u8.shape[-2:-1] != (
        archive.traj.lengths.shape[-1:] + archive.traj.u8.shape[-2:-1]
    ):
        m, t = archive.traj.u8.shape[1:3]
        raise ValueError(
            f"candidate trajectories are (M, T) = {traj.u8.shape[-3:-1]}, archive wants {(m, t)}"
        )


_insert_jit = jax.jit(_insert, static_argnames="force")
_insert_jit_donate = jax.jit(_insert, static_argnames="force", donate_argnums=0)


def insert(
    archive: Archive,
    candidate: Elites,
    *,
    gate: float | jax.Array = 0.0,
    traj: Trajectories | None = None,
    donate: bool = False,
    force: bool = False,
) -> tuple[Archive, InsertInfo]:
    """Inserts one candidate; returns the new archive and an `InsertInfo`.

    With d_1, d_2 the distances from the candidate's descriptor z to its nearest and
    second-nearest elites (Euclidean, normalized latent space; inf when absent), N the
    size, C the capacity and F the fitness (mean return):

    1. gate: rejected unless SR >= ``gate`` (g_i) and F, SR, z are finite;
    2. add: if d_1 > d_min and N < C, it is written to the lowest free slot;
    3. replace: otherwise it replaces its nearest elite n_1 iff F > F(n_1) (strictly)
       and d_2 > d_min; the second condition (Cully & Demiris 2018, QDax's unstructured
       repertoire) stops a replacement from moving an elite into another's d_min ball.
       A novel candidate in a full archive falls under this rule too (d_2 >= d_1 > d_min),
       so at capacity the nearest elite is evicted only by a fitter candidate;
    4. else rejected; with ``force=True`` a competent candidate that steps 2-3 reject
       replaces its nearest elite instead (RefreshArchive's theta_t, which must be part
       of the refreshed archive).

    The new elite gets ``elite_id = next_id`` (then ``next_id += 1``); the candidate's
    other fields are stored as given (set ``parent_id`` and ``lineage`` before).
    After every candidate that passed step 1, added or not, d_min is adapted
    (`ArchiveSpec`, "Size control").

    ``donate=True`` hands the input archive's buffers to XLA so the update is in place
    (no copy of the (C, P) parameters and the trajectory block per call). The input
    archive, and every earlier archive value that shares arrays with it (results of
    `insert`, `repack`, `set_reference` share unchanged fields), must not be used
    afterwards: keep snapshots with `copy_archive`. Use it in illumination loops.
    """
    _check_candidate(archive, candidate, batched=False)
    _check_traj(archive, traj)
    fn = _insert_jit_donate if donate else _insert_jit
    return fn(archive, candidate, jnp.asarray(gate, jnp.float32), traj, force=force)


def _insert_scan(archive, candidates, gates, traj, force=False):
    def step(arc, xs):
        cand, g, tr = xs
        return _insert(arc, cand, g, tr, force)

    return jax.lax.scan(step, archive, (candidates, gates, traj))


_insert_batch_jit = jax.jit(_insert_scan, static_argnames="force")
_insert_batch_jit_donate = jax.jit(_insert_scan, static_argnames="force", donate_argnums=0)


def insert_batch(
    archive: Archive,
    candidates: Elites,
    *,
    gate: float | jax.Array = 0.0,
    traj: Trajectories | None = None,
    donate: bool = False,
    force: bool = False,
) -> tuple[Archive, InsertInfo]:
    """`insert` for a batch (leading axis B), one candidate after the other in proposal
    order (``lax.scan``), so the result equals B calls of `insert` and does not depend on
    how proposals were batched. ``gate`` is a scalar or (B,); ``donate`` and ``force`` as
    in `insert`."""
    _check_candidate(archive, candidates, batched=True)
    _check_traj(archive, traj)
    b = candidates.fitness.shape[0]
    gates = jnp.broadcast_to(jnp.asarray(gate, jnp.float32), (b,))
    fn = _insert_batch_jit_donate if donate else _insert_batch_jit
    return fn(archive, candidates, gates, traj, force=force)


# --- geometry ---------------------------------------------------------------------------


@jax.jit
def pairwise_distances(x: jax.Array, y: jax.Array) -> jax.Array:
    """(N, d), (M, d) -> (N, M) Euclidean distances."""
    return jnp.linalg.norm(x[:, None, :] - y[None, :, :], axis=-1)


@jax.jit
def _novelty(desc: jax.Array, valid: jax.Array) -> jax.Array:
    """Per-row novelty proxy (paper Sec. "Intra-task archive structure"; its normalised
    form nu_i / (median_i(nu_i) + eps) is `telapa.analysis.novelty.normalized_novelty`):

        nu_i = min_{j != i, valid} || z_i - z_j ||_2

    (C,) float32; NaN at invalid rows, inf for a lone elite."""
    d = pairwise_distances(desc, desc)
    n = desc.shape[0]
    mask = valid[None, :] & ~jnp.eye(n, dtype=bool)
    nn = jnp.min(jnp.where(mask, d, jnp.inf), axis=1)
    return jnp.where(valid, nn, jnp.nan)


def fittest_first(fitness: jax.Array, valid: jax.Array) -> jax.Array:
    """Slot order by descending fitness, ties by lower slot; invalid slots last."""
    key = jnp.where(valid, -fitness, jnp.inf)
    return jnp.lexsort((jnp.arange(fitness.shape[0]), key))


@jax.jit
def _greedy_spacing(desc: jax.Array, fitness: jax.Array, valid: jax.Array, d_min: jax.Array):
    order = fittest_first(fitness, valid)
    ok = valid & jnp.all(jnp.isfinite(desc), axis=-1)

    def body(k: int, kept: jax.Array) -> jax.Array:
        i = order[k]
        dist = jnp.linalg.norm(desc - desc[i], axis=-1)
        crowded = jnp.any(kept & (dist <= d_min))
        return kept.at[i].set(ok[i] & ~crowded)

    return jax.lax.fori_loop(0, desc.shape[0], body, jnp.zeros_like(valid))


def _nn_stats(desc: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(median, min) nearest-neighbour distance among valid rows with finite descriptors
    (NaN when fewer than two)."""
    ok = valid & jnp.all(jnp.isfinite(desc), axis=-1)
    nn = _novelty(jnp.where(ok[:, None], desc, 0.0), ok)
    nn = jnp.where(jnp.isfinite(nn), nn, jnp.nan)
    return jnp.nanmedian(nn), jnp.nanmin(nn)


SPACING_SLACK = 1e-4
"""Relative margin below the smallest carried-over spacing, so float round-off in the
re-embedded distances never drops an elite that a pure rescale would keep."""


@partial(jax.jit, static_argnames=("spec", "iters"))
def _spacing(spec: ArchiveSpec, old, new, fitness, valid, d_min, *, iters: int = 40):
    med_old, min_old = _nn_stats(old, valid)
    med_new, _ = _nn_stats(new, valid)
    ratio = med_new / med_old
    usable = jnp.isfinite(ratio) & (ratio > 0)
    ratio = jnp.where(usable, ratio, 1.0)
    carry = jnp.clip(d_min * ratio, spec.d_min_floor, spec.d_min_ceil)
    smallest = jnp.where(jnp.isfinite(min_old), min_old * ratio * (1 - SPACING_SLACK), jnp.inf)
    prune0 = jnp.minimum(carry, smallest)

    def kept(d: jax.Array) -> jax.Array:
        return jnp.sum(_greedy_spacing(new, fitness, valid, d).astype(jnp.int32))

    def bisect(_, bounds):
        lo, hi = bounds
        mid = jnp.sqrt(lo * hi)
        over = kept(mid) > spec.target_size
        return jnp.where(over, mid, lo), jnp.where(over, hi, mid)

    def raised() -> jax.Array:
        ceil = jnp.asarray(spec.d_min_ceil, jnp.float32)
        return jax.lax.fori_loop(0, iters, bisect, (jnp.maximum(prune0, 1e-12), ceil))[1]

    # bisect only when the carried-over spacing keeps more than N* (usually it does not)
    prune = jax.lax.cond(kept(prune0) > spec.target_size, raised, lambda: prune0)
    return prune, jnp.maximum(carry, prune)


def derived_spacing(archive: Archive, descriptors: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(d_prune, d_min)`` for re-expressing ``archive`` under new descriptors (C, d).

    With s = median_nn(new) / median_nn(old), the median nearest-neighbour distances of
    the valid elites (s = 1 when undefined):

        d_min   = clip(d_min_old * s, d_floor, d_ceil)        the controller's threshold,
                                                              carried to the new scale
        d_prune = min(d_min, (1 - 1e-4) * s * min_nn(old))    the spacing the archive
                                                              actually had, rescaled

    Pruning at d_prune keeps every elite under a geometry that only rescales, and drops
    elites that collapsed onto each other relative to that scale (the fitter stays). When
    more than N* elites would stay, d_prune rises (bisection in log space) to the smallest
    value keeping at most N*, and d_min = max(d_min, d_prune): a repack brings an archive
    that overshot back to its target."""
    desc = jnp.asarray(descriptors, jnp.float32)
    return _spacing(
        archive.spec, archive.elites.descriptor, desc, archive.elites.fitness, archive.valid,
        archive.d_min,
    )


def repack(
    archive: Archive,
    descriptors: jax.Array,
    *,
    embedding_version: int,
    normalizer_id: str | None,
    raw_latent: jax.Array | None = None,
    reference_descriptor: jax.Array | None = None,
    d_min: float | jax.Array | None = None,
) -> tuple[Archive, jax.Array]:
    """Re-expresses the archive under a new latent geometry (Algorithm "Online
    latent-space maintenance", step 4). Returns (archive, dropped (C,) bool).

    ``descriptors`` (C, d) are the new z_bd of every slot (rows of invalid slots are
    ignored). The thresholds are derived under the new geometry (`derived_spacing`:
    rescaled by the change of the median nearest-neighbour distance, raised if needed so
    that at most N* elites stay) unless ``d_min`` is given (then it is both). Spacing is
    re-applied greedily, fittest first (ties: lower slot): an elite is kept iff its new
    descriptor is finite and farther than d_prune from every elite already kept. So when
    two elites collapse within d_min, the fitter one stays. Dropped slots become invalid
    (their stored episodes get length 0); kept elites stay in their slots. Stamps
    ``embedding_version`` and ``normalizer_id`` and, if given, the new raw latents and
    reference descriptor. Deterministic.
    """
    desc = jnp.asarray(descriptors, jnp.float32)
    if desc.shape != archive.elites.descriptor.shape:
        raise ValueError(f"descriptors {desc.shape} != {archive.elites.descriptor.shape}")
    if d_min is None:
        prune, dm = derived_spacing(archive, desc)
    else:
        prune = dm = jnp.asarray(d_min, jnp.float32)
    kept = _greedy_spacing(desc, archive.elites.fitness, archive.valid, prune)
    dropped = archive.valid & ~kept
    elites = archive.elites.replace(descriptor=jnp.where(archive.valid[:, None], desc, 0.0))
    if raw_latent is not None:
        elites = elites.replace(raw_latent=jnp.asarray(raw_latent, jnp.float32))
    traj = archive.traj
    if traj is not None:
        traj = traj.replace(lengths=jnp.where(kept[:, None], traj.lengths, 0))
    ref = archive.ref_descriptor if reference_descriptor is None else reference_descriptor
    new = archive.replace(
        elites=elites,
        valid=kept,
        d_min=dm,
        traj=traj,
        ref_descriptor=jnp.asarray(ref, jnp.float32),
        embedding_version=jnp.asarray(embedding_version, jnp.int32),
        normalizer_id=jnp.asarray(normalizer_words(normalizer_id)),
    )
    return new, dropped
