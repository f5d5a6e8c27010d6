"""Anchor / replay episode banks and the online latent-space maintenance of TeLAPA.

Paper: Algorithm "TeLAPA" (steps 2 "Elite Storage" / "Final Storage" and 4 "Online Latent
Space Maintenance"), App. "Learned trajectory embedding under drift": Algorithm "Online
latent-space maintenance", "Trajectory features, episodes, and episode sets",
"Teacher--student boundary update", "Global latent normalization".

**Banks.** `EpisodeBanks` holds the anchor store A and the replay store R. Each is a ring
buffer of ``capacity`` episode sets (an episode set = the E evaluation episodes of one
policy evaluation, eq. S_i = {E_i1, ..., E_in}), each set kept as its first ``episodes``
episodes, each episode as its first T_max steps, with the set's success rate, task tag
and a run-wide sequence number (the order in which sets were stored). When a store is
full the oldest set is overwritten (FIFO). Features are stored through an archive
`FeatureCodec` (MiniGrid: exact integer numerators; MuJoCo: float16).

Store rule (`store`): every evaluated set goes to R; a set with SR >= the anchor
threshold also goes to A (Algorithm TeLAPA: "Add resulting trajectories to R and
high-success/diverse ones to A", "Append final trajectories to R, and successful ones to
A"). "Diverse" is not a second test here: the sets stored at "Elite Storage" are the
evaluations of the latent-diverse (farthest-point) candidate pool of few-shot selection,
so diversity comes from what the caller evaluates, and the paper defines no diversity
measure for an episode set.

The bank of the boundary update is B = A u R as a set union (`to_bank`): a set stored in
both stores appears once, flagged as an anchor; replay sets whose anchor copy was
evicted (or never existed) are replay items. Anchors come first, each group in storage
order.

**Maintenance** (`maintain`) follows Algorithm "Online latent-space maintenance": with
|B| < B_min it returns E_t = E_{t-1} and the archives unchanged (no version bump, no
normalizer refit, no re-embedding: the algorithm's early ``return``). Otherwise it
trains the student from the teacher snapshot, bumps the version, refits the global
normalizer on a representative bank (`refit_indices`) and re-embeds, re-references,
repacks and stamps every archive.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.continual.telapa.embedding import EmbeddingState, describe
from telapa.latent import Bank, LatentConfig, bank_ready, boundary_update, pad_or_truncate
from telapa.latent import normalizer as latent_normalizer
from telapa.qd.archive import Archive, repack
from telapa.qd.trajectories import FeatureCodec, Trajectories

DESCRIBE_CHUNK = 32
"""Policies (episode sets) embedded per jitted call when re-embedding and refitting; the
last chunk is padded by repeating a row, so every call has the same shape."""

REFIT_SETS = 256
"""Default size of the normalizer refit bank (paper silent: "a representative bank")."""

Reevaluate = Callable[[str, jax.Array], tuple[Any, Any]]
"""``reevaluate(archive_tag, flat_params (P,)) -> (features (M, T, D), lengths (M,))``:
fresh evaluation episodes of one elite on its native task."""


# --- episode banks ----------------------------------------------------------------------


@struct.dataclass
class EpisodeStore:
    """One ring buffer of K episode sets (leading axis K everywhere).

    ``traj``: episodes (K, E, T_max, ·) with lengths (K, E) (`Trajectories`); ``sr`` (K,)
    float32; ``tag`` (K,) int32 task tag; ``seq`` (K,) int32 sequence number, -1 for a
    never-written slot; ``written`` () int32, sets ever written (the next slot is
    ``written % K``).
    """

    traj: Trajectories
    sr: jax.Array
    tag: jax.Array
    seq: jax.Array
    written: jax.Array

    @property
    def capacity(self) -> int:
        return self.seq.shape[0]

    @property
    def size(self) -> int:
        """Sets held, min(written, K)."""
        return min(int(self.written), self.capacity)

    @classmethod
    def empty(
        cls, codec: FeatureCodec, *, capacity: int, episodes: int, t_max: int
    ) -> EpisodeStore:
        return cls(
            traj=Trajectories.empty(codec, episodes=episodes, steps=t_max, lead=(capacity,)),
            sr=jnp.zeros((capacity,), jnp.float32),
            tag=jnp.full((capacity,), -1, jnp.int32),
            seq=jnp.full((capacity,), -1, jnp.int32),
            written=jnp.asarray(0, jnp.int32),
        )

    def held_slots(self) -> np.ndarray:
        """Slots holding a set, oldest first."""
        seq = np.asarray(self.seq)
        slots = np.flatnonzero(seq >= 0)
        return slots[np.argsort(seq[slots], kind="stable")]

    def push(
        self,
        traj: Trajectories,
        sr: jax.Array,
        tag: jax.Array,
        seq: jax.Array,
        where: jax.Array | bool = True,
    ) -> EpisodeStore:
        """Writes one set (``traj`` without the K axis) over the oldest slot when
        ``where`` (jittable: unchanged otherwise)."""
        slot = self.written % self.capacity

        def put(a: jax.Array, r: jax.Array) -> jax.Array:
            return a.at[slot].set(jnp.where(where, jnp.asarray(r, a.dtype), a[slot]))

        return self.replace(
            traj=jax.tree.map(put, self.traj, traj),
            sr=put(self.sr, sr),
            tag=put(self.tag, tag),
            seq=put(self.seq, seq),
            written=self.written + jnp.asarray(where, jnp.int32),
        )


@struct.dataclass
class EpisodeBanks:
    """Anchor store A and replay store R (`EpisodeStore`) and ``count`` () int32, the sets
    stored so far (= the next sequence number). A pytree of fixed-shape arrays (the codec
    is static), so it checkpoints like any other method state."""

    anchor: EpisodeStore
    replay: EpisodeStore
    count: jax.Array

    @classmethod
    def create(
        cls,
        codec: FeatureCodec,
        *,
        capacity: int = 256,
        episodes: int = 50,
        t_max: int = 256,
    ) -> EpisodeBanks:
        """Empty banks of ``capacity`` sets each, ``episodes`` x ``t_max`` steps per set."""
        if min(capacity, episodes, t_max) < 1:
            raise ValueError("capacity, episodes and t_max must be >= 1")
        store = EpisodeStore.empty(codec, capacity=capacity, episodes=episodes, t_max=t_max)
        return cls(anchor=store, replay=store, count=jnp.asarray(0, jnp.int32))

    @property
    def codec(self) -> FeatureCodec:
        return self.replay.traj.codec

    @property
    def episodes(self) -> int:
        return self.replay.traj.lengths.shape[1]

    @property
    def t_max(self) -> int:
        return self.replay.traj.u8.shape[2]


def fit_episodes(
    features: Any, lengths: Any, episodes: int, t_max: int
) -> tuple[jax.Array, jax.Array]:
    """(M, T, D), (M,) -> (episodes, t_max, D) float32, (episodes,) int32: the first
    ``t_max`` steps (`pad_or_truncate`) of the first ``episodes`` episodes, padded with
    absent (length 0) episodes."""
    f = jnp.asarray(features, jnp.float32)
    n = jnp.asarray(lengths, jnp.int32)
    if f.ndim != 3 or n.shape != f.shape[:1]:
        raise ValueError(f"need features (M, T, D) and lengths (M,), got {f.shape}, {n.shape}")
    f, n = pad_or_truncate(f[:episodes], n[:episodes], t_max)
    pad = episodes - f.shape[0]
    return jnp.pad(f, ((0, pad), (0, 0), (0, 0))), jnp.pad(n, (0, pad))


@jax.jit
def _store(
    banks: EpisodeBanks,
    features: jax.Array,
    lengths: jax.Array,
    sr: jax.Array,
    tag: jax.Array,
    anchor_threshold: jax.Array,
) -> EpisodeBanks:
    traj = Trajectories.encode(
        banks.codec, *fit_episodes(features, lengths, banks.episodes, banks.t_max)
    )
    return banks.replace(
        anchor=banks.anchor.push(traj, sr, tag, banks.count, where=sr >= anchor_threshold),
        replay=banks.replay.push(traj, sr, tag, banks.count),
        count=banks.count + 1,
    )


def store(
    banks: EpisodeBanks,
    features: Any,
    lengths: Any,
    sr: float,
    tag: int,
    *,
    anchor_threshold: float = 0.5,
) -> EpisodeBanks:
    """Stores one evaluated episode set, features (E, T, D) and lengths (E,): always in R,
    and also in A when ``sr >= anchor_threshold`` (module docstring; Algorithm TeLAPA,
    "Elite Storage" / "Final Storage"). Both copies share one sequence number. Episodes
    beyond the banks' ``episodes`` and steps beyond T_max are cut (`fit_episodes`).
    Raises ValueError for a set with no non-empty episode among those kept (the paper
    discards empty sets)."""
    features = np.asarray(features, np.float32)
    lengths = np.asarray(lengths, np.int32)
    if features.ndim != 3 or features.shape[-1] != banks.codec.dim:
        raise ValueError(
            f"need features (E, T, D={banks.codec.dim}), got shape {features.shape}"
        )
    if not np.any(lengths[: banks.episodes] > 0):
        raise ValueError("an episode set needs at least one episode with length > 0")
    return _store(
        banks,
        features,
        lengths,
        jnp.float32(sr),
        jnp.int32(tag),
        jnp.float32(anchor_threshold),
    )


def _union_slots(banks: EpisodeBanks) -> tuple[np.ndarray, np.ndarray]:
    """(anchor slots, replay slots) of A u R: all held anchors, then the held replay sets
    whose sequence number is not among them; each group oldest first."""
    anchor = banks.anchor.held_slots()
    replay = banks.replay.held_slots()
    in_anchor = np.isin(np.asarray(banks.replay.seq)[replay], np.asarray(banks.anchor.seq)[anchor])
    return anchor, replay[~in_anchor]


def bank_seq(banks: EpisodeBanks) -> np.ndarray:
    """Sequence numbers of the sets of `to_bank`, in its order."""
    anchor, replay = _union_slots(banks)
    return np.concatenate(
        [np.asarray(banks.anchor.seq)[anchor], np.asarray(banks.replay.seq)[replay]]
    ).astype(np.int64)


@jax.jit
def _decode_rows(traj: Trajectories, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jax.tree.map(lambda a: a[rows], traj).decode()


def to_bank(banks: EpisodeBanks) -> Bank:
    """B = A u R as a `latent.Bank`: features (S, E, T_max, D) float32, lengths (S, E),
    is_anchor (S,); anchors first (module docstring)."""
    anchor, replay = _union_slots(banks)
    f_anc, n_anc = _decode_rows(banks.anchor.traj, anchor)
    f_rep, n_rep = _decode_rows(banks.replay.traj, replay)
    is_anchor = np.concatenate([np.ones(len(anchor), bool), np.zeros(len(replay), bool)])
    return Bank(
        features=jnp.concatenate([f_anc, f_rep]),
        lengths=jnp.concatenate([n_anc, n_rep]),
        is_anchor=jnp.asarray(is_anchor),
    )


# --- normalizer refit bank --------------------------------------------------------------


def refit_indices(
    n_anchor: int, n_replay: int, key: jax.Array, *, fraction: float, size: int = REFIT_SETS
) -> np.ndarray:
    """Rows of the representative refit bank (Algorithm "Online latent-space maintenance",
    step 3: "sample a representative bank from A and R"), for a bank whose first
    ``n_anchor`` rows are anchors and next ``n_replay`` rows replay sets.

    N = min(size, n_anchor + n_replay) rows, of which
    n_anc = min(n_anchor, max(round_half_up(fraction * N), N - n_replay)) are anchors
    (the anchor bank fraction, 0.33; the other pool fills in when one runs short, as in
    the boundary batches), each pool drawn uniformly without replacement by a host numpy
    generator seeded with the key's data (no device work per bank size). Sorted.
    """
    n = min(size, n_anchor + n_replay)
    n_anc = min(n_anchor, max(int(np.floor(fraction * n + 0.5)), n - n_replay))
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    anc = rng.permutation(n_anchor)[:n_anc]
    rep = n_anchor + rng.permutation(n_replay)[: n - n_anc]
    return np.sort(np.concatenate([anc, rep]).astype(np.int64))


# --- embedding in chunks ----------------------------------------------------------------

_describe = jax.jit(describe, static_argnames="config")


def _describe_rows(
    state: EmbeddingState,
    rows: Callable[[np.ndarray], tuple[jax.Array, jax.Array]],
    n: int,
    config: LatentConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """`describe` of n policies whose episodes ``rows(indices)`` returns as (B, M, T, D),
    (B, M), in chunks of `DESCRIBE_CHUNK`: ``(raw (n, 3d), descriptor (n, d))``."""
    raws = [np.zeros((0, 3 * config.latent_dim), np.float32)]
    descs = [np.zeros((0, config.latent_dim), np.float32)]
    for start in range(0, n, DESCRIBE_CHUNK):
        take = np.minimum(np.arange(start, start + DESCRIBE_CHUNK), n - 1)
        raw, desc = _describe(state, *rows(take), config)
        k = min(DESCRIBE_CHUNK, n - start)
        raws.append(np.asarray(raw)[:k])
        descs.append(np.asarray(desc)[:k])
    return np.concatenate(raws), np.concatenate(descs)


# --- maintenance ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArchiveLog:
    """What maintenance did to one archive."""

    size_before: int
    size_after: int
    """Elites before and after the repack."""
    reembedded: int
    """Valid elites re-embedded from their stored trajectories (re-evaluated ones included)."""
    reevaluated: tuple[int, ...]
    """Slots that lacked trajectories and were re-evaluated through the callback."""
    stale: tuple[int, ...]
    """Slots that lacked trajectories and kept their old descriptor (no callback)."""
    dropped: int
    """Elites removed by the repack's spacing rule."""
    base_slot: int
    """Slot taken as the base elite for the reference descriptor (-1: empty archive)."""
    base_distance: float
    """Pre-maintenance distance from the old reference descriptor to that elite (0: the
    base elite itself; > 0: it is gone and the nearest elite stands in)."""
    seconds: float


@dataclasses.dataclass(frozen=True)
class MaintenanceLog:
    """Summary of one `maintain` call (host values only)."""

    updated: bool
    """Whether the boundary update ran (|A u R| >= B_min)."""
    version: int
    normalizer_id: str
    """Embedding version and normalizer id after maintenance."""
    bank_sets: int
    anchor_sets: int
    replay_sets: int
    """|A u R| and the sizes of the two stores."""
    losses: dict[str, float]
    """Boundary-update metrics: ``<metric>_first / _last / _mean`` for loss, contrast,
    distill, distill_dir, distill_scale, plus ``distill_active_frac`` and ``steps``."""
    refit_seq: tuple[int, ...]
    """Sequence numbers of the episode sets the normalizer was refit on."""
    refit_anchors: int
    archives: dict[str, ArchiveLog]
    seconds: dict[str, float]
    """Wall time of ``update``, ``refit``, ``reembed`` and ``total``."""


def _loss_summary(metrics: Mapping[str, jax.Array]) -> dict[str, float]:
    out: dict[str, float] = {"steps": float(np.asarray(metrics["loss"]).shape[0])}
    for name in ("loss", "contrast", "distill", "distill_dir", "distill_scale"):
        v = np.asarray(metrics[name], np.float64)
        out |= {f"{name}_first": v[0], f"{name}_last": v[-1], f"{name}_mean": v.mean()}
    out["distill_active_frac"] = float(np.mean(np.asarray(metrics["distill_active"])))
    return {k: float(v) for k, v in out.items()}


def _write_rows(
    traj: Trajectories, slots: np.ndarray, episodes: list[tuple[Any, Any]]
) -> Trajectories:
    """Stores fresh episodes (fit to the block's (M, T)) at ``slots`` of a trajectory block."""
    m, t = traj.lengths.shape[1], traj.u8.shape[2]
    for slot, (f, n) in zip(slots, episodes, strict=True):
        row = Trajectories.encode(traj.codec, *fit_episodes(f, n, m, t))
        traj = jax.tree.map(lambda a, r, s=int(slot): a.at[s].set(r), traj, row)
    return traj


def reembed_archive(
    tag: str,
    archive: Archive,
    state: EmbeddingState,
    config: LatentConfig,
    reevaluate: Reevaluate | None = None,
) -> tuple[Archive, ArchiveLog]:
    """Step 4 of Algorithm "Online latent-space maintenance" for one archive.

    1. Every valid elite with stored episodes gets ``(raw, z_bd) = describe(E_t, episodes)``
       (main text: z^(t+1) = N_{t+1}(1/M sum_m phi_{t+1}(tau^(m)))), episodes cut to T_max.
    2. Valid elites without any stored episode are re-evaluated with ``reevaluate(tag,
       params)`` when given ("too many" lacking = any); the fresh episodes are written into
       the archive's trajectory block (when it has one) and embedded as in 1. Without a
       callback they keep their old descriptor and raw latent (``ArchiveLog.stale``).
    3. The reference descriptor is the new descriptor of the base elite, found as the valid
       elite nearest to the old reference in the old geometry (the base elite itself, at
       distance 0, while it is in the archive).
    4. `repack` with the new descriptors and raw latents, stamping ``E_t.version`` and the
       normalizer id.
    """
    t0 = time.perf_counter()
    spec = archive.spec
    if spec.desc_dim != config.latent_dim or spec.raw_dim != 3 * config.latent_dim:
        raise ValueError(
            f"archive {tag!r} has desc_dim={spec.desc_dim}, raw_dim={spec.raw_dim}; the "
            f"embedder gives {config.latent_dim} and {3 * config.latent_dim}"
        )
    valid = np.asarray(archive.valid)
    traj = archive.traj
    stored = np.zeros_like(valid) if traj is None else np.asarray(jnp.any(traj.lengths > 0, -1))
    lacking = np.flatnonzero(valid & ~stored)
    old_desc = np.asarray(archive.elites.descriptor)
    desc = old_desc.copy()
    raw = np.array(archive.elites.raw_latent)

    fresh: list[tuple[Any, Any]] = []
    if reevaluate is not None:
        fresh = [reevaluate(tag, archive.elites.params[int(s)]) for s in lacking]
    reevaluated = lacking if reevaluate is not None else lacking[:0]

    if traj is not None:
        traj = _write_rows(traj, reevaluated, fresh)
        slots = np.flatnonzero(valid & (stored | np.isin(np.arange(valid.size), reevaluated)))

        def rows(take: np.ndarray) -> tuple[jax.Array, jax.Array]:
            return pad_or_truncate(*_decode_rows(traj, slots[take]), config.t_max)
    else:
        slots = reevaluated
        m = max([np.shape(f)[0] for f, _ in fresh], default=0)
        padded = [fit_episodes(f, n, m, config.t_max) for f, n in fresh]

        def rows(take: np.ndarray) -> tuple[jax.Array, jax.Array]:
            return (
                jnp.stack([padded[i][0] for i in take]),
                jnp.stack([padded[i][1] for i in take]),
            )

    raw[slots], desc[slots] = _describe_rows(state, rows, len(slots), config)

    base, base_distance, ref = -1, float("nan"), None
    if valid.any():
        cand = np.flatnonzero(valid)
        dist = np.linalg.norm(old_desc[cand] - np.asarray(archive.ref_descriptor), axis=-1)
        base, base_distance = int(cand[np.argmin(dist)]), float(np.min(dist))
        ref = desc[base]

    out, dropped = repack(
        archive.replace(traj=traj),
        desc,
        embedding_version=int(state.version),
        normalizer_id=state.normalizer_id,
        raw_latent=raw,
        reference_descriptor=ref,
    )
    log = ArchiveLog(
        size_before=int(valid.sum()),
        size_after=int(out.size),
        reembedded=len(slots),
        reevaluated=tuple(int(s) for s in reevaluated),
        stale=() if reevaluate is not None else tuple(int(s) for s in lacking),
        dropped=int(np.sum(np.asarray(dropped))),
        base_slot=base,
        base_distance=base_distance,
        seconds=time.perf_counter() - t0,
    )
    return out, log


def maintain(
    embedding: EmbeddingState,
    banks: EpisodeBanks,
    archives: Mapping[str, Archive],
    *,
    config: LatentConfig,
    key: jax.Array,
    reevaluate: Reevaluate | None = None,
    refit_sets: int = REFIT_SETS,
) -> tuple[EmbeddingState, dict[str, Archive], MaintenanceLog]:
    """Algorithm "Online latent-space maintenance" (BoundaryMaintenance of Algorithm
    TeLAPA, step 4). Returns ``(E_t, archives, log)``.

    1. B = A u R (`to_bank`); if |B| < B_min (`bank_ready`): return E_{t-1} and the
       archives unchanged (no version bump, no refit, no re-embedding).
    2. Teacher snapshot = the current encoder; the student starts from it and takes K =
       ``config.steps`` steps of L_emb = w_contrast L_contrast + w_distill L_distill
       (`boundary_update`; distillation on anchors only).
    3. Version + 1; N_t = `normalizer.fit` (median / IQR, sigma_min, eps from ``config``)
       of the raw policy-level means z_mean(S_i) under the new encoder, over the refit
       bank of `refit_indices` (anchor fraction ``config.anchor_fraction``).
    4. Every archive is re-expressed under E_t (`reembed_archive`).

    The input archives are not modified (immutable pytrees): they are the stale
    pre-maintenance snapshots of step 4. The maintained archives share unchanged buffers
    (parameters) with them, so save or `copy_archive` a snapshot before a donating
    insertion into its successor.
    """
    t_start = time.perf_counter()
    bank = to_bank(banks)
    seq = bank_seq(banks)
    n_anchor = int(np.sum(np.asarray(bank.is_anchor)))
    sizes = {
        "bank_sets": bank.num_sets,
        "anchor_sets": banks.anchor.size,
        "replay_sets": banks.replay.size,
    }
    if not bank_ready(bank, config):
        log = MaintenanceLog(
            updated=False,
            version=int(embedding.version),
            normalizer_id=embedding.normalizer_id,
            **sizes,
            losses={},
            refit_seq=(),
            refit_anchors=0,
            archives={},
            seconds={"total": time.perf_counter() - t_start},
        )
        return embedding, dict(archives), log

    k_update, k_refit = jax.random.split(key)
    t0 = time.perf_counter()
    teacher = embedding.encoder
    student, metrics = boundary_update(embedding.encoder, teacher, bank, k_update, config)
    student = jax.block_until_ready(student)
    t_update = time.perf_counter() - t0

    t0 = time.perf_counter()
    rows = refit_indices(
        n_anchor, bank.num_sets - n_anchor, k_refit, fraction=config.anchor_fraction,
        size=refit_sets,
    )
    trained = embedding.replace(encoder=student)
    raw, _ = _describe_rows(
        trained,
        lambda take: (bank.features[rows[take]], bank.lengths[rows[take]]),
        len(rows),
        config,
    )
    norm = latent_normalizer.fit(raw[:, : config.latent_dim], config.sigma_min, config.eps)
    state = EmbeddingState(student, norm, jnp.asarray(embedding.version + 1, jnp.int32))
    t_refit = time.perf_counter() - t0

    t0 = time.perf_counter()
    out: dict[str, Archive] = {}
    logs: dict[str, ArchiveLog] = {}
    for tag, archive in archives.items():
        out[tag], logs[tag] = reembed_archive(tag, archive, state, config, reevaluate)
    t_reembed = time.perf_counter() - t0

    log = MaintenanceLog(
        updated=True,
        version=int(state.version),
        normalizer_id=state.normalizer_id,
        **sizes,
        losses=_loss_summary(metrics),
        refit_seq=tuple(int(s) for s in seq[rows]),
        refit_anchors=int(np.sum(rows < n_anchor)),
        archives=logs,
        seconds={
            "update": t_update,
            "refit": t_refit,
            "reembed": t_reembed,
            "total": time.perf_counter() - t_start,
        },
    )
    return state, out, log
