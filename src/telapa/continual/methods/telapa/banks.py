"""Anchor / replay episode banks of TeLAPA (paper Algorithm "TeLAPA", steps 2 "Elite
Storage" / "Final Storage"; App. "Trajectory features, episodes, and episode sets").

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
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa import pytrees
from telapa.latent import Bank, pad_or_truncate
from telapa.qd.trajectories import FeatureCodec, Trajectories

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
def decode_rows(traj: Trajectories, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Decoded episodes ``(features, lengths)`` of the given rows of a trajectory block."""
    return jax.tree.map(lambda a: a[rows], traj).decode()


def to_bank(banks: EpisodeBanks) -> Bank:
    """B = A u R as a `latent.Bank`: features (S, E, T_max, D) float32, lengths (S, E),
    is_anchor (S,); anchors first (module docstring)."""
    anchor, replay = _union_slots(banks)
    f_anc, n_anc = decode_rows(banks.anchor.traj, anchor)
    f_rep, n_rep = decode_rows(banks.replay.traj, replay)
    is_anchor = np.concatenate([np.ones(len(anchor), bool), np.zeros(len(replay), bool)])
    features, lengths = pytrees.concatenate([(f_anc, n_anc), (f_rep, n_rep)])
    return Bank(features=features, lengths=lengths, is_anchor=jnp.asarray(is_anchor))


