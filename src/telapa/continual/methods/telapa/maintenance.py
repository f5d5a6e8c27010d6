"""The online latent-space maintenance of TeLAPA (the episode banks it trains on are
`telapa.continual.methods.telapa.banks`).

Paper: Algorithm "TeLAPA" (steps 2 "Elite Storage" / "Final Storage" and 4 "Online Latent
Space Maintenance"), App. "Learned trajectory embedding under drift": Algorithm "Online
latent-space maintenance", "Trajectory features, episodes, and episode sets",
"Teacher--student boundary update", "Global latent normalization".

**Maintenance** (`maintain`) follows Algorithm "Online latent-space maintenance": with
|B| < B_min it returns E_t = E_{t-1} and the archives unchanged (no version bump, no
normalizer refit, no re-embedding: the algorithm's early ``return``). Otherwise it
trains the student from the teacher snapshot, bumps the version, refits the global
normalizer on a representative bank (`refit_indices`) and re-embeds, re-references,
repacks and stamps every archive.

**Cost** (paper settings: B = 64 sets per step, K = 700 steps, T_max = 256, encoder
64-64 / GRU 64 / 64-8; `telapa.latent.embedder` gives 59 kFLOP per episode step forward,
68 kFLOP with the per-step projections of the summaries). One step embeds 3B = 192
sequences (two views and the original of each episode) with gradient (about 3x the
forward), the teacher's latents of the bank are computed once per boundary: at full
length 192 x 256 x 59k x 3 = 8.7 GFLOP per step, 6.1 TFLOP for the 700 steps. Re-embedding
five archives of 256 elites x 50 episodes is 64,000 episodes: 64,000 x 256 x 68k = 1.1
TFLOP at full length. Only the valid steps are needed: with episodes of mean length l
both scale by about l / 256 (views are crops of 60-100% of l). The 2-core CPU this was
measured on does 200-210 GFLOP/s in large f32 matmuls ((12800 x 64) x (64 x 192) or
2048^3) but 40-70 GFLOP/s in one jitted call of the GRU's (256 x 64) x (64 x 192) shape,
and the recurrence is a chain of such small products. Before the length grouping of
`telapa.latent.embedder.encode`, training ran every sequence over all 256 steps at about
35 GFLOP/s (276 ms per step) and re-embedding at about 40 GFLOP/s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from telapa.continual.methods.telapa.banks import (
    EpisodeBanks,
    bank_seq,
    decode_rows,
    fit_episodes,
    to_bank,
)
from telapa.continual.methods.telapa.embedding import EmbeddingState, describe
from telapa.io.clock import running
from telapa.latent import (
    Bank,
    LatentConfig,
    bank_ready,
    boundary_update,
    boundary_updates,
    pad_or_truncate,
)
from telapa.latent import normalizer as latent_normalizer
from telapa.qd.archive import Archive, repack
from telapa.qd.trajectories import Trajectories

DESCRIBE_CHUNK = 32
"""Policies (episode sets) embedded per jitted call when re-embedding and refitting; the
last chunk is padded by repeating a row, so every call has the same shape."""

REFIT_SETS = 256
"""Default size of the normalizer refit bank (paper silent: "a representative bank")."""

Reevaluate = Callable[[str, jax.Array], tuple[Any, Any]]
"""``reevaluate(archive_tag, flat_params (P,)) -> (features (M, T, D), lengths (M,))``:
fresh evaluation episodes of one elite on its native task."""


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


# --- normalizer fit -------------------------------------------------------------------


def _refit(
    state: EmbeddingState, bank: Bank, key: jax.Array, config: LatentConfig, size: int
) -> tuple[EmbeddingState, np.ndarray]:
    """``state`` with N fit (`normalizer.fit`: median / IQR, sigma_min, eps of ``config``)
    on the raw policy-level means z_mean(S_i) under ``state``'s encoder, over the refit
    bank rows of `refit_indices`; and those rows."""
    n_anchor = int(np.sum(np.asarray(bank.is_anchor)))
    rows = refit_indices(
        n_anchor, bank.num_sets - n_anchor, key, fraction=config.anchor_fraction, size=size
    )
    raw, _ = _describe_rows(
        state,
        lambda take: (bank.features[rows[take]], bank.lengths[rows[take]]),
        len(rows),
        config,
    )
    norm = latent_normalizer.fit(raw[:, : config.latent_dim], config.sigma_min, config.eps)
    return state.replace(normalizer=norm), rows


def fit_initial_normalizer(
    embedding: EmbeddingState,
    banks: EpisodeBanks,
    *,
    config: LatentConfig,
    key: jax.Array,
    refit_sets: int = REFIT_SETS,
) -> EmbeddingState:
    """N_0 for the first archives: the global normalizer fit, under the current encoder
    (version unchanged), on the episode sets banked so far (the current task's
    evaluations), exactly as `maintain` refits it after a boundary update.

    The paper starts with "no normalizer" (Algorithm TeLAPA) and refits N_t only after a
    boundary update, which leaves the first archives (and every TeLAPA-Static archive) in
    raw encoder units while later ones are robust-standardised; fitting N_0 before the
    first illumination puts every archive, and both variants, in the same units from the
    start (docs/assumptions.md, "Latent units"). Raises ValueError without a banked set."""
    bank = to_bank(banks)
    if bank.num_sets == 0:
        raise ValueError("fit_initial_normalizer needs at least one banked episode set")
    state, _ = _refit(embedding, bank, key, config, refit_sets)
    return state


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
    t0 = running()
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
            return pad_or_truncate(*decode_rows(traj, slots[take]), config.t_max)
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
        seconds=running() - t0,
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
    insertion into its successor. `maintain_seeds` maintains the seeds of a batch.
    """
    (result,) = maintain_seeds([embedding], [banks], [archives], config=config, keys=[key],
                               reevaluate=reevaluate, refit_sets=refit_sets)
    return result


@dataclasses.dataclass(frozen=True)
class MaintenanceRequest:
    """One seed's BoundaryMaintenance at a task end, as a lockstep request
    (`telapa.continual.lockstep`): the arguments of `maintain`. The requests of a batch
    are answered by one `maintain_seeds` (one request: exactly `maintain`);
    ``progress(done, total)`` is told 0 of 1 before and 1 of 1 after."""

    phase: ClassVar[str] = "maintenance"
    embedding: EmbeddingState
    banks: EpisodeBanks
    archives: Mapping[str, Archive]
    config: LatentConfig
    key: jax.Array
    progress: Callable[..., None] | None = None

    @classmethod
    def answer(cls, requests: Sequence[MaintenanceRequest]
               ) -> list[tuple[EmbeddingState, dict[str, Archive], MaintenanceLog]]:
        for request in requests:
            if request.progress is not None:
                request.progress(0, 1)
        maintained = maintain_seeds(
            [r.embedding for r in requests], [r.banks for r in requests],
            [r.archives for r in requests], config=requests[0].config,
            keys=[r.key for r in requests])
        for request in requests:
            if request.progress is not None:
                request.progress(1, 1)
        return maintained


def maintain_seeds(
    embeddings: Sequence[EmbeddingState],
    banks: Sequence[EpisodeBanks],
    archives: Sequence[Mapping[str, Archive]],
    *,
    config: LatentConfig,
    keys: Sequence[jax.Array],
    reevaluate: Reevaluate | None = None,
    refit_sets: int = REFIT_SETS,
    vmap: bool | None = None,
) -> list[tuple[EmbeddingState, dict[str, Archive], MaintenanceLog]]:
    """`maintain` of S seeds (seed i: ``embeddings[i]``, ``banks[i]``, ``archives[i]``,
    ``keys[i]``), with the boundary updates of every seed whose bank is ready as one
    program ``vmap``ped over those seeds (`boundary_updates`: their banks padded to one
    size; padding sets are never drawn), then each seed's refit and re-embedding. Each
    seed's result is its `maintain` alone up to float rounding (one seed: exactly); a
    seed's ``update`` time is its share of the batched update.

    ``vmap`` (default: on accelerators) chooses the one program; without it each ready
    seed's update is its own `boundary_update`, one after the other (exactly `maintain`
    alone). On a 2-core CPU the vmapped updates of 2 seeds took 123.6 s against 117.0 s
    seed after seed (the study preset's 700 steps on 32 sets of DoorKey-8x8 episodes,
    compilation included; BENCHMARKS.md, "Visits as compiled programs"): the CPU has no
    idle width for the batch to fill."""
    if not (len(embeddings) == len(banks) == len(archives) == len(keys)) or not banks:
        raise ValueError(f"maintain_seeds needs one embedding, bank, archive dict and key per "
                         f"seed; got {len(embeddings)}, {len(banks)}, {len(archives)}, "
                         f"{len(keys)}")
    t_start = running()
    unions = [to_bank(b) for b in banks]
    ready = [i for i, bank in enumerate(unions) if bank_ready(bank, config)]
    split = [jax.random.split(k) for k in keys]
    t0 = running()
    updates: dict[int, tuple[Any, Any]] = {}
    if vmap is None:
        vmap = jax.default_backend() != "cpu"
    if len(ready) == 1 or not vmap:
        for i in ready:
            updates[i] = boundary_update(embeddings[i].encoder, embeddings[i].encoder,
                                         unions[i], split[i][0], config)
    elif ready:
        encoders = [embeddings[i].encoder for i in ready]  # teacher snapshot = student
        done = boundary_updates(encoders, encoders, [unions[i] for i in ready],
                                [split[i][0] for i in ready], config)
        updates = dict(zip(ready, done, strict=True))
    updates = jax.block_until_ready(updates)
    t_update = (running() - t0) / max(len(ready), 1)
    t_prepare = (t0 - t_start) / len(banks)
    out = []
    for i, (embedding, seed_banks, seed_archives) in enumerate(
            zip(embeddings, banks, archives, strict=True)):
        if i in updates:
            out.append(_after_update(embedding, seed_banks, unions[i], seed_archives,
                                     *updates[i], split[i][1], config=config,
                                     reevaluate=reevaluate, refit_sets=refit_sets,
                                     spent={"update": t_update, "prepare": t_prepare}))
            continue
        log = MaintenanceLog(
            updated=False,
            version=int(embedding.version),
            normalizer_id=embedding.normalizer_id,
            **_bank_sizes(seed_banks, unions[i]),
            losses={},
            refit_seq=(),
            refit_anchors=0,
            archives={},
            seconds={"total": t_prepare},
        )
        out.append((embedding, dict(seed_archives), log))
    return out


def _bank_sizes(banks: EpisodeBanks, bank: Bank) -> dict[str, int]:
    return {"bank_sets": bank.num_sets, "anchor_sets": banks.anchor.size,
            "replay_sets": banks.replay.size}


def _after_update(
    embedding: EmbeddingState,
    banks: EpisodeBanks,
    bank: Bank,
    archives: Mapping[str, Archive],
    student: Any,
    metrics: Mapping[str, jax.Array],
    k_refit: jax.Array,
    *,
    config: LatentConfig,
    reevaluate: Reevaluate | None,
    refit_sets: int,
    spent: dict[str, float],
) -> tuple[EmbeddingState, dict[str, Archive], MaintenanceLog]:
    """Steps 3 and 4 of `maintain` after the boundary update gave ``student``."""
    t0 = running()
    trained = embedding.replace(
        encoder=student, version=jnp.asarray(embedding.version + 1, jnp.int32)
    )
    state, rows = _refit(trained, bank, k_refit, config, refit_sets)
    t_refit = running() - t0

    t0 = running()
    out: dict[str, Archive] = {}
    logs: dict[str, ArchiveLog] = {}
    for tag, archive in archives.items():
        out[tag], logs[tag] = reembed_archive(tag, archive, state, config, reevaluate)
    t_reembed = running() - t0

    seq = bank_seq(banks)
    n_anchor = int(np.sum(np.asarray(bank.is_anchor)))
    log = MaintenanceLog(
        updated=True,
        version=int(state.version),
        normalizer_id=state.normalizer_id,
        **_bank_sizes(banks, bank),
        losses=_loss_summary(metrics),
        refit_seq=tuple(int(s) for s in seq[rows]),
        refit_anchors=int(np.sum(rows < n_anchor)),
        archives=logs,
        seconds={
            "update": spent["update"],
            "refit": t_refit,
            "reembed": t_reembed,
            "total": spent["prepare"] + spent["update"] + t_refit + t_reembed,
        },
    )
    return state, out, log
