"""Anchor / replay banks (store rule, FIFO eviction, union bank) and the online
latent-space maintenance (skip below B_min, boundary update, normalizer refit,
re-embedding, re-evaluation, reference refresh, stamps) on tiny synthetic data."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.continual.methods.telapa import maintenance as maintenance_module
from telapa.continual.methods.telapa.banks import (
    EpisodeBanks,
    bank_seq,
    fit_episodes,
    store,
    to_bank,
)
from telapa.continual.methods.telapa.embedding import EmbeddingState, describe
from telapa.continual.methods.telapa.maintenance import (
    DESCRIBE_CHUNK,
    fit_initial_normalizer,
    maintain,
    maintain_seeds,
    reembed_archive,
    refit_indices,
)
from telapa.latent import LatentConfig, normalizer, policy_summary
from telapa.qd.archive import (
    ArchiveSpec,
    InsertStatus,
    init_archive,
    insert_batch,
    make_elites,
    repack,
    set_reference,
)
from telapa.qd.trajectories import FeatureCodec, Trajectories

D, T, E, P = 4, 16, 3, 6
CONFIG = LatentConfig(
    feature_dim=D,
    latent_dim=4,
    t_max=T,
    step_hidden=(16, 16),
    gru_hidden=16,
    proj_hidden=16,
    steps=5,
    batch_size=8,
    min_anchors=2,
    min_bank_sets=4,
)
LD = CONFIG.latent_dim
CODEC = FeatureCodec((255,) * D)
"""Exact codec: the synthetic features are multiples of 1/255 in [0, 1]."""
SPEC = ArchiveSpec(n_params=P, desc_dim=LD, raw_dim=3 * LD, capacity=8, target_size=6)
"""N* = 6: the six elites of archive "A" are at target, so the repack trims none for size."""


def episodes(rng: np.random.Generator, n: int = E, t: int = T, min_len: int = 3):
    """(n, t, D) features k/255 (random k, zero past the length) and (n,) lengths."""
    k = rng.integers(0, 256, (n, t, D))
    f = k.astype(np.float32) * (np.float32(1) / np.float32(255))
    lengths = rng.integers(min_len, t + 1, n).astype(np.int32)
    f[np.arange(t)[None, :] >= lengths[:, None]] = 0.0
    return f, lengths


def held_seq(store_) -> list[int]:
    return np.asarray(store_.seq)[store_.held_slots()].tolist()


# --- banks --------------------------------------------------------------------------------


def test_store_rule_by_hand():
    rng = np.random.default_rng(0)
    banks = EpisodeBanks.create(CODEC, capacity=4, episodes=E, t_max=T)
    for sr, tag in [(0.2, 7), (0.5, 8), (0.9, 9), (0.49, 10)]:
        banks = store(banks, *episodes(rng), sr, tag)
    # every set in R; SR >= 0.5 (inclusive) also in A, with the same sequence number
    assert held_seq(banks.replay) == [0, 1, 2, 3]
    assert held_seq(banks.anchor) == [1, 2]
    assert int(banks.count) == 4
    a = banks.anchor.held_slots()
    np.testing.assert_allclose(np.asarray(banks.anchor.sr)[a], [0.5, 0.9])
    np.testing.assert_array_equal(np.asarray(banks.anchor.tag)[a], [8, 9])
    np.testing.assert_array_equal(np.asarray(banks.replay.tag)[banks.replay.held_slots()],
                                  [7, 8, 9, 10])
    # a custom threshold
    banks = store(banks, *episodes(rng), 0.7, 11, anchor_threshold=0.8)
    assert held_seq(banks.anchor) == [1, 2]
    banks = store(banks, *episodes(rng), 0.8, 12, anchor_threshold=0.8)
    assert held_seq(banks.anchor) == [1, 2, 5]


def test_fifo_eviction_keeps_the_newest_sets():
    rng = np.random.default_rng(1)
    banks = EpisodeBanks.create(CODEC, capacity=3, episodes=E, t_max=T)
    sets = [episodes(rng) for _ in range(5)]
    for i, (f, n) in enumerate(sets):
        banks = store(banks, f, n, 1.0 if i % 2 == 0 else 0.0, i)
    # R: 5 writes into 3 slots -> seq 3, 4 overwrote slots 0, 1; oldest first = 2, 3, 4
    np.testing.assert_array_equal(np.asarray(banks.replay.seq), [3, 4, 2])
    assert held_seq(banks.replay) == [2, 3, 4]
    # A got seq 0, 2, 4 (SR 1): not full, nothing evicted
    assert held_seq(banks.anchor) == [0, 2, 4]
    assert banks.replay.size == 3 and int(banks.replay.written) == 5
    # the stored features decode exactly
    f, n = jax.tree.map(lambda a: a[0], banks.replay.traj).decode()
    np.testing.assert_array_equal(f, sets[3][0])
    np.testing.assert_array_equal(n, sets[3][1])
    # one more anchor evicts the oldest anchor (seq 0)
    banks = store(banks, *sets[0], 1.0, 5)
    assert held_seq(banks.anchor) == [2, 4, 5]


def test_store_cuts_and_pads_episodes():
    rng = np.random.default_rng(2)
    banks = EpisodeBanks.create(CODEC, capacity=2, episodes=E, t_max=T)
    f, n = episodes(rng, n=5, t=T + 4, min_len=T + 1)  # more episodes, longer than T_max
    banks = store(banks, f, n, 0.0, 0)
    g, m = jax.tree.map(lambda a: a[0], banks.replay.traj).decode()
    np.testing.assert_array_equal(m, [T] * E)
    np.testing.assert_array_equal(g, f[:E, :T])
    f, n = episodes(rng, n=1)
    banks = store(banks, f, n, 0.0, 1)
    g, m = jax.tree.map(lambda a: a[1], banks.replay.traj).decode()
    np.testing.assert_array_equal(m, [n[0], 0, 0])
    np.testing.assert_array_equal(g[0], f[0])
    with pytest.raises(ValueError, match="length > 0"):
        store(banks, f, np.zeros(1, np.int32), 0.0, 2)
    with pytest.raises(ValueError, match="D="):
        store(banks, np.zeros((1, T, D + 1)), np.ones(1), 0.0, 2)


def test_to_bank_is_the_union_with_anchors_flagged():
    rng = np.random.default_rng(3)
    banks = EpisodeBanks.create(CODEC, capacity=4, episodes=E, t_max=T)
    sets = [episodes(rng) for _ in range(4)]
    for i, sr in enumerate([0.0, 1.0, 0.0, 0.6]):
        banks = store(banks, *sets[i], sr, i)
    bank = to_bank(banks)
    # seq 1, 3 are in both stores but appear once, as anchors, first
    np.testing.assert_array_equal(bank_seq(banks), [1, 3, 0, 2])
    np.testing.assert_array_equal(bank.is_anchor, [True, True, False, False])
    assert bank.features.shape == (4, E, T, D) and bank.features.dtype == jnp.float32
    assert bank.lengths.shape == (4, E)
    for row, s in enumerate([1, 3, 0, 2]):
        np.testing.assert_array_equal(bank.features[row], sets[s][0])
        np.testing.assert_array_equal(bank.lengths[row], sets[s][1])
    # an anchor whose replay copy was evicted stays an anchor; no duplicates
    banks = EpisodeBanks.create(CODEC, capacity=2, episodes=E, t_max=T)
    for i, sr in enumerate([1.0, 0.0, 0.0]):
        banks = store(banks, *sets[i], sr, i)
    np.testing.assert_array_equal(bank_seq(banks), [0, 1, 2])
    np.testing.assert_array_equal(to_bank(banks).is_anchor, [True, False, False])
    empty = to_bank(EpisodeBanks.create(CODEC, capacity=2, episodes=E, t_max=T))
    assert empty.num_sets == 0


def test_banks_are_a_checkpointable_pytree():
    banks = EpisodeBanks.create(CODEC, capacity=2, episodes=E, t_max=T)
    banks = store(banks, *episodes(np.random.default_rng(4)), 1.0, 0)
    leaves, treedef = jax.tree.flatten(banks)
    assert all(isinstance(x, jax.Array) for x in leaves)
    back = jax.tree.unflatten(treedef, [np.asarray(x) for x in leaves])
    assert held_seq(back.anchor) == [0] and int(back.count) == 1


def test_refit_indices_anchor_fraction_by_hand():
    key = jax.random.key(0)
    # N = 12: round(0.33 * 12) = 4 anchors, 8 replay
    rows = refit_indices(10, 30, key, fraction=0.33, size=12)
    assert len(rows) == 12 and np.sum(rows < 10) == 4 and len(set(rows)) == 12
    assert np.all(rows < 40)
    # too few anchors: all 2, replay fills in; too few replay: anchors fill in
    assert np.sum(refit_indices(2, 30, key, fraction=0.33, size=12) < 2) == 2
    rows = refit_indices(10, 3, key, fraction=0.33, size=12)
    assert np.sum(rows < 10) == 9 and np.sum(rows >= 10) == 3
    # size above the bank: every set
    np.testing.assert_array_equal(refit_indices(3, 4, key, fraction=0.33, size=100), range(7))


# --- maintenance --------------------------------------------------------------------------


def make_banks(n_sets: int, seed: int, capacity: int = 16) -> EpisodeBanks:
    rng = np.random.default_rng(seed)
    banks = EpisodeBanks.create(CODEC, capacity=capacity, episodes=E, t_max=T)
    for i in range(n_sets):
        banks = store(banks, *episodes(rng), 1.0 if i % 3 == 0 else 0.1, i % 4)
    return banks


_describe_jit = jax.jit(describe, static_argnames="config")


def _describe(state, features, lengths, config):
    """`describe` of n <= `DESCRIBE_CHUNK` episode sets, in a batch padded to
    `DESCRIBE_CHUNK` rows (repeating the last): the shape maintenance embeds in, so one
    compiled program serves the tests and `maintain` (rows are embedded independently;
    only float rounding depends on the batch)."""
    n = features.shape[0]
    take = np.minimum(np.arange(DESCRIBE_CHUNK), n - 1)
    raw, desc = _describe_jit(state, features[take], lengths[take], config)
    return raw[:n], desc[:n]


def new_state(seed: int) -> EmbeddingState:
    return EmbeddingState.create(jax.random.key(seed), CONFIG)


def reevaluated_episodes(params) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic fresh episodes of an elite (E episodes, longer than T_max)."""
    seed = int(abs(float(params[0])) * 1e6) % 2**31
    return episodes(np.random.default_rng(seed), n=E, t=T + 3)


def elites(rng, state, params, fitness, features, lengths, lacking=()):
    """A batch of candidates described under ``state``; rows in ``lacking`` get a random
    far-away descriptor (they have no episodes)."""
    raw, desc = _describe(state, jnp.asarray(features), jnp.asarray(lengths), CONFIG)
    desc = np.array(desc)
    desc[list(lacking)] = rng.normal(size=(len(lacking), LD)) + 50.0
    return make_elites(
        params=params, fitness=np.asarray(fitness), sr=1.0,
        descriptor=desc, raw_latent=raw, sigma=0.05, task=0,
        lineage=jnp.zeros((len(fitness), 1), jnp.uint32),
    )


def make_archives(state: EmbeddingState):
    rng = np.random.default_rng(5)
    # "A": stored trajectories for slots 0-4; slot 5 has none (re-evaluated, written back)
    f, n = episodes(rng, n=6 * E)
    f, n = f.reshape(6, E, T, D), n.reshape(6, E)
    n[5] = 0
    a = init_archive(SPEC, tag=0, d_min=1e-3, codec=CODEC, episodes=E, steps=T)
    fitness = [10.0, 9.0, 8.0, 7.0, 6.0, 1.0]
    cands = elites(rng, state, rng.normal(size=(6, P)), fitness, f, n, lacking=[5])
    a, info = insert_batch(a, cands, traj=Trajectories.encode(CODEC, f, n))
    assert np.all(np.asarray(info.status) == InsertStatus.ADDED)
    a = set_reference(a, descriptor=a.elites.descriptor[0], sr=1.0, fitness=10.0)
    # "B": no trajectory block at all; every elite is re-evaluated
    b = init_archive(SPEC, tag=1, d_min=1e-3)
    params = rng.normal(size=(3, P)).astype(np.float32)
    fresh = [fit_episodes(*reevaluated_episodes(p), E, T) for p in params]
    cands = elites(rng, state, params, [5.0, 4.0, 3.0], jnp.stack([x[0] for x in fresh]),
                   jnp.stack([x[1] for x in fresh]))
    b, info = insert_batch(b, cands)
    assert np.all(np.asarray(info.status) == InsertStatus.ADDED)
    b = set_reference(b, descriptor=b.elites.descriptor[0], sr=1.0, fitness=5.0)
    return {"A": a, "B": b}


@pytest.fixture(scope="module")
def run():
    state0 = new_state(1)
    archives = make_archives(state0)
    banks = make_banks(10, seed=6)
    calls: list[tuple[str, np.ndarray]] = []

    def reevaluate(tag, params):
        calls.append((tag, np.asarray(params)))
        return reevaluated_episodes(params)

    state, out, log = maintain(
        state0, banks, archives, config=CONFIG, key=jax.random.key(2), reevaluate=reevaluate,
        refit_sets=6,
    )
    return dict(state0=state0, archives=archives, banks=banks, state=state, out=out, log=log,
                calls=calls)


def test_no_update_below_min_bank_sets():
    state0 = new_state(1)
    banks = make_banks(3, seed=7)  # 3 < min_bank_sets = 4
    archives = {"x": init_archive(SPEC)}
    state, out, log = maintain(state0, banks, archives, config=CONFIG, key=jax.random.key(0))
    assert state is state0 and out["x"] is archives["x"]
    assert not log.updated and log.version == 0 and log.bank_sets == 3
    assert log.normalizer_id == state0.normalizer_id and log.archives == {}


def test_update_changes_encoder_and_bumps_version(run):
    log, state, state0 = run["log"], run["state"], run["state0"]
    assert log.updated and int(state.version) == 1 == log.version
    diff = jax.tree.map(lambda x, y: float(jnp.max(jnp.abs(x - y))), state.encoder,
                        state0.encoder)
    assert max(jax.tree.leaves(diff)) > 0
    assert log.bank_sets == 10 and log.anchor_sets == 4 and log.replay_sets == 10
    assert log.losses["steps"] == CONFIG.steps
    assert np.isfinite(log.losses["loss_last"]) and log.losses["distill_active_frac"] == 1.0
    assert set(log.seconds) == {"update", "refit", "reembed", "total"}


def test_normalizer_refit_on_the_refit_bank(run):
    log, state, banks = run["log"], run["state"], run["banks"]
    # refit bank: N = 6 sets, round(0.33 * 6) = 2 of them anchors
    assert len(log.refit_seq) == 6 and log.refit_anchors == 2
    anchors = set(held_seq(banks.anchor))
    assert sum(s in anchors for s in log.refit_seq) == 2
    bank, seq = to_bank(banks), bank_seq(banks).tolist()
    rows = np.array([seq.index(s) for s in log.refit_seq])
    z = jax.vmap(lambda f, n: policy_summary(state.encoder, f, n, CONFIG).z_mean)(
        bank.features[rows], bank.lengths[rows]
    )
    want = normalizer.fit(z, CONFIG.sigma_min, CONFIG.eps)
    np.testing.assert_allclose(state.normalizer.median, want.median, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.normalizer.sigma, want.sigma, rtol=1e-5, atol=1e-6)
    assert log.normalizer_id == state.normalizer_id != run["state0"].normalizer_id


def test_reembedding_with_stored_trajectories(run):
    state, a_in, a = run["state"], run["archives"]["A"], run["out"]["A"]
    # the block still holds the original episodes, plus the re-evaluated elite's episodes
    f_in, n_in = a_in.traj.decode()
    f_out, n_out = a.traj.decode()
    np.testing.assert_array_equal(f_out[:5], f_in[:5])
    fresh = fit_episodes(*reevaluated_episodes(a_in.elites.params[5]), E, T)
    np.testing.assert_array_equal(f_out[5], fresh[0])
    np.testing.assert_array_equal(n_out[5], fresh[1])
    # descriptors = describe(E_t, stored episodes), then repacked
    f_all = np.concatenate([f_in[:5], np.asarray(fresh[0])[None]])
    n_all = np.concatenate([n_in[:5], np.asarray(fresh[1])[None]])
    raw, desc = _describe(state, jnp.asarray(f_all), jnp.asarray(n_all), CONFIG)
    full = np.zeros((SPEC.capacity, LD), np.float32)
    full[:6] = desc
    want, _ = repack(a_in, full, embedding_version=1, normalizer_id=state.normalizer_id)
    np.testing.assert_array_equal(a.valid, want.valid)
    kept = np.flatnonzero(np.asarray(a.valid))
    assert len(kept) >= 5
    np.testing.assert_allclose(a.elites.descriptor[kept], full[kept], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.elites.raw_latent[kept], np.asarray(raw)[kept], rtol=1e-5,
                               atol=1e-5)
    # stamps and the reference (base elite = slot 0)
    assert int(a.embedding_version) == 1 and a.normalizer_hex == state.normalizer_id
    np.testing.assert_allclose(a.ref_descriptor, full[0], rtol=1e-5, atol=1e-5)
    la = run["log"].archives["A"]
    assert la.base_slot == 0 and la.base_distance == 0.0
    assert la.size_before == 6 and la.size_after == len(kept) and la.reevaluated == (5,)
    assert la.reembedded == 6 and la.stale == ()
    # the input archive is the untouched pre-maintenance snapshot
    assert int(a_in.embedding_version) == 0 and a_in.normalizer_hex is None
    assert np.asarray(a_in.traj.lengths)[5].sum() == 0


def test_elites_without_trajectories_go_through_reevaluate(run):
    state, b_in, b = run["state"], run["archives"]["B"], run["out"]["B"]
    calls = run["calls"]
    assert [t for t, _ in calls] == ["A", "B", "B", "B"]
    np.testing.assert_array_equal(calls[0][1], run["archives"]["A"].elites.params[5])
    for (_, params), slot in zip(calls[1:], range(3), strict=True):
        np.testing.assert_array_equal(params, b_in.elites.params[slot])
    fresh = [fit_episodes(*reevaluated_episodes(b_in.elites.params[s]), E, T) for s in range(3)]
    _, desc = _describe(state, jnp.stack([x[0] for x in fresh]), jnp.stack([x[1] for x in fresh]),
                       CONFIG)
    kept = np.flatnonzero(np.asarray(b.valid))
    np.testing.assert_allclose(b.elites.descriptor[kept], np.asarray(desc)[kept], rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(b.ref_descriptor, desc[0], rtol=1e-5, atol=1e-5)
    assert b.traj is None and int(b.embedding_version) == 1
    assert run["log"].archives["B"].reevaluated == (0, 1, 2)


def test_without_callback_elites_keep_their_descriptor_and_are_flagged(run):
    state, b_in = run["state"], run["archives"]["B"]
    # the reference no longer matches any elite: the nearest elite stands in for the base
    b_in = set_reference(b_in, descriptor=b_in.elites.descriptor[2] + 1e-2, sr=1.0, fitness=5.0)
    b, log = reembed_archive("B", b_in, state, CONFIG)
    assert log.stale == (0, 1, 2) and log.reevaluated == () and log.reembedded == 0
    valid = np.asarray(b.valid)
    np.testing.assert_array_equal(b.elites.descriptor[valid], b_in.elites.descriptor[valid])
    assert log.base_slot == 2 and 0 < log.base_distance < 0.03
    np.testing.assert_allclose(b.ref_descriptor, b_in.elites.descriptor[2])
    assert int(b.embedding_version) == 1 and b.normalizer_hex == state.normalizer_id


def test_initial_normalizer_is_fit_on_the_banked_sets_before_any_update():
    # N_0 (before the first illumination): the same robust fit as after a boundary update,
    # over every banked set (fewer than the refit bank's size), under the unchanged E_0.
    # (6 sets: the refit bank's shape in the test above, one compiled summary)
    rng = np.random.default_rng(7)
    banks = EpisodeBanks.create(CODEC, capacity=8, episodes=E, t_max=T)
    for i in range(6):
        banks = store(banks, *episodes(rng), sr=0.2 * i, tag=0)
    state0 = new_state(3)
    assert not state0.has_normalizer
    state = fit_initial_normalizer(state0, banks, config=CONFIG, key=jax.random.key(0))
    assert state.has_normalizer and int(state.version) == 0
    bank = to_bank(banks)
    z = jax.vmap(lambda f, n: policy_summary(state0.encoder, f, n, CONFIG).z_mean)(
        bank.features, bank.lengths
    )
    want = normalizer.fit(z, CONFIG.sigma_min, CONFIG.eps)
    np.testing.assert_allclose(state.normalizer.median, want.median, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.normalizer.sigma, want.sigma, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(state.encoder), jax.tree.leaves(state0.encoder), strict=True):
        np.testing.assert_array_equal(a, b)
    # Descriptors are now in standardised units: the banked policies' z_bd have median 0.
    np.testing.assert_allclose(
        np.median(np.asarray(normalizer.apply(state.normalizer, z)), axis=0), 0.0, atol=1e-5
    )
    with pytest.raises(ValueError, match="at least one banked"):
        fit_initial_normalizer(
            state0, EpisodeBanks.create(CODEC, capacity=8, episodes=E, t_max=T),
            config=CONFIG, key=jax.random.key(0),
        )


def test_seeds_maintained_together_as_each_alone(run, monkeypatch):
    """Four seeds: banks of 10 and 70 sets (padded to 64 and 128 rows alone; one size
    together), 5 sets (another batch size B) and 3 (below B_min: skipped). The ready
    seeds' boundary updates run as vmapped programs (one per B), and every seed's
    encoder, normalizer, archives and log are those of its `maintain` alone; on CPU, by
    default, seed after seed, exactly. The first seed is `run`'s (its `maintain` alone
    is the fixture's)."""
    seeds = [(70, 8, 80), (5, 9, 16), (3, 7, 16)]
    states = [run["state0"], *[new_state(11 + i) for i in range(len(seeds))]]
    archives = [run["archives"], *[make_archives(state) for state in states[1:]]]
    banks = [run["banks"], *[make_banks(n, seed, capacity) for n, seed, capacity in seeds]]
    keys = [jax.random.key(2), *[jax.random.key(21 + i) for i in range(len(seeds))]]

    def reevaluate(tag, params):
        return reevaluated_episodes(params)

    alone = [(run["state"], run["out"], run["log"])] + [
        maintain(st, b, a, config=CONFIG, key=k, reevaluate=reevaluate, refit_sets=6)
        for st, b, a, k in zip(states[1:], banks[1:], archives[1:], keys[1:], strict=True)]
    programs = []
    real = maintenance_module.boundary_updates

    def spy(students, teachers, banks_, keys_, config):
        programs.append([b.num_sets for b in banks_])
        return real(students, teachers, banks_, keys_, config)

    monkeypatch.setattr(maintenance_module, "boundary_updates", spy)
    together = maintain_seeds(states, banks, archives, config=CONFIG, keys=keys,
                              reevaluate=reevaluate, refit_sets=6, vmap=True)
    assert programs == [[10, 70, 5]]
    if jax.default_backend() == "cpu":  # the default there: seed after seed, exactly alone
        apart = maintain_seeds(states, banks, archives, config=CONFIG, keys=keys,
                               reevaluate=reevaluate, refit_sets=6)
        assert programs == [[10, 70, 5]]  # no batched program
        for (state, out, log), (state2, out2, log2) in zip(alone, apart, strict=True):
            for a, b in zip(jax.tree.leaves((state, out)), jax.tree.leaves((state2, out2)),
                            strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            assert (log.version, log.losses) == (log2.version, log2.losses)
    def values(out):  # the normalizer's content hash differs with its last float bit
        return {t: a.replace(normalizer_id=jnp.zeros_like(a.normalizer_id))
                for t, a in out.items()}

    for (state, out, log), (state2, out2, log2) in zip(alone, together, strict=True):
        for a, b in zip(jax.tree.leaves((state, values(out))),
                        jax.tree.leaves((state2, values(out2))), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
        for a in out2.values() if log2.updated else ():  # stamped with its seed's new N
            assert a.normalizer_hex == state2.normalizer_id
        assert (log.updated, log.version, log.bank_sets, log.refit_seq, log.refit_anchors) == \
            (log2.updated, log2.version, log2.bank_sets, log2.refit_seq, log2.refit_anchors)
        assert log.losses.keys() == log2.losses.keys()
        np.testing.assert_allclose(list(log.losses.values()), list(log2.losses.values()),
                                   rtol=1e-4, atol=1e-5)
        assert {t: (a.size_after, a.dropped) for t, a in log.archives.items()} == \
            {t: (a.size_after, a.dropped) for t, a in log2.archives.items()}
    assert [log.updated for _, _, log in together] == [True, True, True, False]
