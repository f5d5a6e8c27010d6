"""MAP-Elites illumination (Algorithm "MAP-Elites for task-local archive construction"):
population evaluation, BuildArchive, RefreshArchive, batching, determinism, stored
episodes and env-step accounting, on MiniGrid-Empty-5x5 (jax backend) with tiny nets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import EvalConfig, NetworkConfig, PPOConfig, TrainConfig
from telapa.continual.methods.telapa import illumination as illumination_module
from telapa.continual.methods.telapa.embedding import EmbeddingState, describe
from telapa.continual.methods.telapa.illumination import (
    Illumination,
    evaluate_population,
    illuminate,
    illuminate_seeds,
    trajectory_codec,
)
from telapa.envs.minigrid.features import minigrid_codec
from telapa.latent import LatentConfig, Normalizer, pad_or_truncate
from telapa.qd import (
    ArchiveConfig,
    IlluminationConfig,
    InsertStatus,
    QDConfig,
    copy_archive,
    lineage_bit,
    lineage_visits,
)
from telapa.rl import Agent
from telapa.rl.networks import flatten_params

ENV = "MiniGrid-Empty-5x5-v0"
CONFIG = TrainConfig(
    ppo=PPOConfig(num_envs=4, n_steps=8, batch_size=32, epochs=1),
    network=NetworkConfig(hidden=(16,)),
)
LATENT = LatentConfig(step_hidden=(16, 16), gru_hidden=16, proj_hidden=16)
EPISODES = 4
ITERATIONS = 12
QD = QDConfig(
    archive=ArchiveConfig(target_size=2, capacity=3),
    illumination=IlluminationConfig(eval_episodes=EPISODES, gate_gamma=0.5),
)
VISIT, TAG = 2, 1
KEY = jax.random.key(8)  # its 12 candidates hit every insertion outcome and fill the archive


@pytest.fixture(scope="module")
def setup():
    """The agent, an encoder and the base policy: ``PPOTrainer(ENV, CONFIG, key=0)``'s
    initial parameters (``policy.init`` of the first of ``split(key, 4)``), without the
    trainer's optimizer state and env reset, which no test here uses."""
    agent = Agent(ENV, CONFIG)
    embedding = EmbeddingState.create(jax.random.key(1), LATENT)
    return agent, embedding, agent.policy.init(jax.random.split(jax.random.key(0), 4)[0])


def run(setup, *, key=KEY, batch_size=1, iterations=ITERATIONS, **kwargs):
    agent, embedding, base = setup
    calls = []
    archive, log = illuminate(
        agent, base, visit=VISIT, tag=TAG, embedding=embedding,
        latent_config=LATENT, qd_config=QD, key=key, iterations=iterations,
        batch_size=batch_size, progress=lambda *a: calls.append(a), **kwargs,
    )
    return archive, log, calls


@pytest.fixture(scope="module")
def built(setup):
    return run(setup, parent_id=7)


def host(archive):
    return jax.tree.map(np.asarray, archive)


def assert_consistent(archive, log, calls, *, batch_size, size_before=0, iterations=ITERATIONS):
    """Invariants of any illumination log and its archive."""
    cap = QD.archive.max_size
    col = log.columns()
    assert len(log.rows) == iterations
    assert col["index"].tolist() == list(range(iterations))
    assert (col["archive_size"] <= cap).all() and int(archive.size) <= cap
    added = col["status"] == InsertStatus.ADDED
    replaced = col["status"] == InsertStatus.REPLACED
    base_added = log.base.status == InsertStatus.ADDED
    assert int(archive.size) == size_before + base_added + added.sum() == col["archive_size"][-1]
    assert np.array_equal(np.diff(col["archive_size"], prepend=log.base.archive_size), added)
    # the gate: rejected on it iff SR < g_i = max(0.1, 0.5 SR_base)
    assert log.gate == pytest.approx(max(0.1, 0.5 * log.base.sr))
    assert np.array_equal(col["status"] == InsertStatus.REJECTED_GATE, col["sr"] < log.gate)
    assert ((col["elite_id"] >= 0) == (added | replaced)).all()
    assert ((col["replaced_id"] >= 0) == replaced).all()
    # accepted ids are in the archive unless replaced later; replaced ids are gone
    ids = set(np.asarray(archive.elites.elite_id)[np.asarray(archive.valid)].tolist())
    gone = set(col["replaced_id"][replaced].tolist())
    assert set(col["elite_id"][added | replaced].tolist()) - gone <= ids
    assert not gone & ids
    # spacing: every pair farther apart than the smallest d_min ever in force
    desc = np.asarray(archive.elites.descriptor)[np.asarray(archive.valid)]
    dist = np.linalg.norm(desc[:, None] - desc[None], axis=-1)[np.triu_indices(len(desc), 1)]
    assert (dist > min(QD.archive.d_min, col["d_min"].min(), log.base.d_min)).all()
    # progress after every batch; extra env steps = every evaluated episode
    ends = [min(b, iterations) for b in range(batch_size, iterations + batch_size, batch_size)]
    assert [c[0] for c in calls] == ends and all(c[1] == iterations for c in calls)
    assert calls[-1][2] == int(archive.size)
    assert log.env_steps == log.base.env_steps + col["env_steps"].sum()
    assert (col["env_steps"] >= EPISODES).all()
    assert log.wall_s > 0


def test_evaluate_population_matches_per_candidate_evaluate(setup):
    agent, _, base = setup
    flat, unravel = flatten_params(base)
    noise = jax.random.normal(jax.random.key(3), (3, flat.shape[0]))
    pop = jnp.concatenate([flat[None], flat + 0.5 * noise])  # B = 4: the batch test's shape
    key = jax.random.key(4)
    ev = evaluate_population(agent, pop, unravel, episodes=EPISODES, key=key)
    t = agent.spec.max_steps
    assert ev.features.shape == (4, EPISODES, 256, 11) and ev.returns.shape == (4, EPISODES)
    # candidate b is agent.evaluate(unravel(pop[b]), E, split(key, B)[b])
    for b, k in enumerate(jax.random.split(key, 4)):
        ref = agent.evaluate(unravel(pop[b]), EPISODES, k)
        np.testing.assert_array_equal(ev.lengths[b], ref.lengths)
        np.testing.assert_allclose(ev.returns[b], ref.returns, rtol=1e-6)
        np.testing.assert_array_equal(ev.features[b, :, :t], ref.features)
        assert not np.asarray(ev.features[b, :, t:]).any()
        assert float(ev.sr[b]) == pytest.approx(ref.sr)
        assert float(ev.fitness[b]) == pytest.approx(ref.mean_return)
    assert ev.env_steps == int(np.asarray(ev.lengths).sum())
    assert len({tuple(np.asarray(x).tolist()) for x in ev.lengths}) > 1  # distinct candidates


def test_evaluate_population_on_the_gymnasium_backend(setup):
    """Host loop over candidates; MiniGrid ids there also get the exact codec."""
    config = CONFIG.model_copy(update={"eval": EvalConfig(episodes=EPISODES)})  # 4 env copies
    gym = Agent(ENV, config, backend="gymnasium")  # PPOTrainer(..., key=0)'s agent, params
    assert trajectory_codec(gym) == trajectory_codec(setup[0]) == minigrid_codec(5, 5, 100)
    flat, unravel = flatten_params(gym.policy.init(jax.random.split(jax.random.key(0), 4)[0]))
    pop = jnp.stack([flat, flat + jax.random.normal(jax.random.key(3), flat.shape)])
    key = jax.random.key(4)
    ev = evaluate_population(gym, pop, unravel, episodes=EPISODES, key=key)
    assert ev.features.shape == (2, EPISODES, 256, 11)
    for b, k in enumerate(jax.random.split(key, 2)):
        ref = gym.evaluate(unravel(pop[b]), EPISODES, k)
        np.testing.assert_array_equal(ev.lengths[b], ref.lengths)
        np.testing.assert_array_equal(ev.features[b, :, :100], ref.features)
        assert float(ev.sr[b]) == pytest.approx(ref.sr)
    assert ev.env_steps == int(np.asarray(ev.lengths).sum())


def test_build_archive(setup, built):
    agent, embedding, base = setup
    archive, log, calls = built
    assert_consistent(archive, log, calls, batch_size=1)
    flat, _ = flatten_params(base)
    # base elite: added first with sigma_0, its parent and lineage, and is the reference
    assert log.base.status == InsertStatus.ADDED and log.base.elite_id == TAG << 24
    assert log.base.parent_id == 7 and log.base.sigma == pytest.approx(0.05)
    ids = np.asarray(archive.elites.elite_id)
    if log.base.elite_id in ids[np.asarray(archive.valid)]:
        slot = int(np.flatnonzero(ids == log.base.elite_id)[0])
        np.testing.assert_array_equal(archive.elites.params[slot], flat)
        np.testing.assert_array_equal(archive.elites.descriptor[slot], archive.ref_descriptor)
        assert int(archive.elites.task[slot]) == VISIT
        assert lineage_visits(archive.elites.lineage[slot]) == [VISIT]
    else:  # replaced by a fitter child during the loop
        assert log.base.elite_id in log.columns()["replaced_id"]
    assert float(archive.ref_sr) == log.base.sr
    assert float(archive.ref_fitness) == pytest.approx(log.base.fitness)
    assert int(archive.tag) == TAG and int(archive.n_proposed) == ITERATIONS + 1
    col = log.columns()
    assert int(archive.n_added) == 1 + (col["status"] == InsertStatus.ADDED).sum()
    assert int(archive.n_replaced) == (col["status"] == InsertStatus.REPLACED).sum()
    assert int(archive.embedding_version) == 0
    assert archive.normalizer_hex == embedding.normalizer_id
    # the run exercised every branch of the insertion rule in this tiny setting
    assert {InsertStatus.ADDED, InsertStatus.REJECTED_GATE} <= set(col["status"].tolist())
    assert int(archive.size) == QD.archive.max_size
    # sequential: each parent existed in the archive right after the previous insertion
    alive = {log.base.elite_id}
    for r in log.rows:
        assert r.parent_id in alive
        alive = (alive | {r.elite_id} if r.elite_id >= 0 else alive) - {r.replaced_id}
    # children carry the visit bit and their adapted sigma within the clip range
    valid = np.asarray(archive.valid)
    assert (np.asarray(archive.elites.task)[valid] == VISIT).all()
    sig = np.asarray(archive.elites.sigma)[valid]
    assert ((sig >= 0.005) & (sig <= 0.5)).all()


def test_stored_episodes_are_the_evaluated_ones(setup, built):
    """Re-evaluating every elite with its documented key reproduces its stored episodes
    bit for bit (MiniGrid codec), its descriptor and its logged env steps."""
    agent, embedding, base = setup
    archive, log, _ = built
    assert archive.traj.codec == trajectory_codec(agent) == minigrid_codec(5, 5, 100)
    _, unravel = flatten_params(base)
    k_base, k_loop = jax.random.split(KEY)
    row_of = {r.elite_id: r for r in [log.base, *log.rows] if r.elite_id >= 0}
    features, lengths = archive.traj.decode()
    for slot in np.flatnonzero(np.asarray(archive.valid)):
        row = row_of[int(archive.elites.elite_id[slot])]
        if row.index < 0:  # the base elite
            key = k_base
        else:
            key = jax.random.split(jax.random.fold_in(k_loop, row.index))[1]
        ev = evaluate_population(
            agent, archive.elites.params[slot][None], unravel, episodes=EPISODES, key=key
        )
        np.testing.assert_array_equal(lengths[slot], ev.lengths[0])
        np.testing.assert_array_equal(features[slot], ev.features[0])
        assert ev.env_steps == row.env_steps
        assert float(ev.sr[0]) == row.sr == float(archive.elites.sr[slot])
        _, desc = describe(embedding, *pad_or_truncate(ev.features, ev.lengths), LATENT)
        np.testing.assert_allclose(desc[0], archive.elites.descriptor[slot], rtol=1e-5, atol=1e-6)
    assert not np.asarray(lengths)[~np.asarray(archive.valid)].any()


def test_deterministic_given_the_key(setup, built):
    archive, log, _ = built
    again, log2, _ = run(setup, parent_id=7)
    for a, b in zip(jax.tree.leaves(host(archive)), jax.tree.leaves(host(again)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert log.rows == log2.rows and log.base == log2.base
    other, log3, _ = run(setup, key=jax.random.key(5), iterations=2)
    assert log3.rows != log.rows[:2]


def test_batched_proposals(setup):
    # 13 = 4 + 4 + 4 + 1: the last batch is partial
    archive, log, calls = run(setup, batch_size=4, iterations=13)
    assert_consistent(archive, log, calls, batch_size=4, iterations=13)
    # parents of a batch come from the archive before the batch, never from its children
    for start in range(0, 13, 4):
        batch = log.rows[start : start + 4]
        born = {r.elite_id for r in batch if r.elite_id >= 0}
        assert not born & {r.parent_id for r in batch}


def test_refresh_archive(setup):
    """RefreshArchive: a revisit inserts the new policy into the existing archive."""
    agent, embedding, base = setup
    # a normalizer with sigma 0.01 spreads the untrained encoder's latents 100x, so the
    # new policy is novel and the small archive (base + 1 child) has room for it
    wide = embedding.replace(
        normalizer=Normalizer(jnp.zeros(LATENT.latent_dim), jnp.full(LATENT.latent_dim, 0.01))
    )
    previous, _, _ = run((agent, wide, base), iterations=1)
    assert int(previous.size) < QD.archive.max_size
    snapshot = host(copy_archive(previous))
    new_base = agent.policy.init(jax.random.key(9))
    calls = []
    archive, log = illuminate(
        agent, new_base, visit=5, tag=TAG, embedding=wide, latent_config=LATENT,
        qd_config=QD, key=jax.random.key(6), iterations=ITERATIONS, initial_archive=previous,
        parent_id=3, lineage=lineage_bit(VISIT, 1), progress=lambda *a: calls.append(a),
    )
    # the initial archive is left intact (the refresh works on a copy)
    for a, b in zip(jax.tree.leaves(snapshot), jax.tree.leaves(host(previous)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert_consistent(archive, log, calls, batch_size=1, size_before=int(previous.size))
    # the new policy enters as a new elite with the next id, lineage VISIT -> 5, and is
    # the new reference
    assert log.base.status == InsertStatus.ADDED and log.base.parent_id == 3
    assert log.base.elite_id == int(previous.next_id)
    assert float(archive.ref_sr) == log.base.sr
    ids = np.asarray(archive.elites.elite_id)
    valid = np.asarray(archive.valid)
    if log.base.elite_id in ids[valid]:
        slot = int(np.flatnonzero(ids == log.base.elite_id)[0])
        np.testing.assert_array_equal(archive.elites.descriptor[slot], archive.ref_descriptor)
        np.testing.assert_array_equal(archive.elites.params[slot], flatten_params(new_base)[0])
        assert lineage_visits(archive.elites.lineage[slot]) == [VISIT, 5]
    assert not np.array_equal(archive.ref_descriptor, snapshot.ref_descriptor)
    # previous elites keep their ids unless the log says which candidate replaced them
    old = set(snapshot.elites.elite_id[snapshot.valid].tolist())
    replaced = {r.replaced_id for r in log.rows if r.replaced_id >= 0}
    assert old - replaced <= set(ids[valid].tolist())
    new_ids = {r.elite_id for r in [log.base, *log.rows] if r.elite_id >= 0}
    assert min(new_ids) >= int(previous.next_id) and int(archive.n_proposed) == 2 + 1 + ITERATIONS


def test_refresh_needs_the_same_tag_and_embedding(setup, built):
    agent, embedding, base = setup
    previous, _, _ = built
    kwargs = dict(
        latent_config=LATENT, qd_config=QD, key=KEY, iterations=0, initial_archive=previous
    )
    with pytest.raises(ValueError, match="tag"):
        illuminate(agent, base, visit=3, tag=TAG + 1, embedding=embedding,
                   **kwargs)
    newer = embedding.replace(version=jnp.int32(1))
    with pytest.raises(ValueError, match="embedding version"):
        illuminate(agent, base, visit=3, tag=TAG, embedding=newer, **kwargs)


def test_zero_iterations_keeps_only_the_base(setup):
    archive, log, calls = run(setup, iterations=0)
    assert log.rows == [] and calls == [] and int(archive.size) == 1
    assert log.env_steps == log.base.env_steps > 0


def test_refresh_is_built_around_the_new_policy(setup, built):
    """RefreshArchive(H, theta_t): theta_t enters the archive even when the insertion rule
    would reject it as redundant, and every refresh candidate descends from it (its
    parents are theta_t and the children accepted on this visit), not from old elites."""
    agent, embedding, base = setup
    previous, _, _ = built
    # theta_t = the policy the archive was built around: a near-duplicate of its base
    archive, log = illuminate(
        agent, base, visit=6, tag=TAG, embedding=embedding,
        latent_config=LATENT, qd_config=QD, key=jax.random.key(11), iterations=ITERATIONS,
        initial_archive=previous, parent_id=4,
    )
    assert log.base.status in (InsertStatus.ADDED, InsertStatus.REPLACED)
    assert log.base.elite_id == int(previous.next_id)
    ids = np.asarray(archive.elites.elite_id)[np.asarray(archive.valid)].tolist()
    replaced = {r.replaced_id for r in log.rows if r.replaced_id >= 0}
    assert log.base.elite_id in ids or log.base.elite_id in replaced
    own = {log.base.elite_id}
    for row in log.rows:
        assert row.parent_id in own, row  # never an elite of the first visit
        if row.elite_id >= 0:
            own.add(row.elite_id)


def _assert_same_illumination(alone, together) -> None:
    (archive, log, calls), (archive2, log2, calls2) = alone, together
    for a, b in zip(jax.tree.leaves(host(archive)), jax.tree.leaves(host(archive2)),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    exact = ("index", "parent_id", "injected", "status", "elite_id", "replaced_id",
             "archive_size", "env_steps")
    for a, b in zip([log.base, *log.rows], [log2.base, *log2.rows], strict=True):
        assert [getattr(a, f) for f in exact] == [getattr(b, f) for f in exact]
        np.testing.assert_allclose([a.sigma, a.sr, a.fitness, a.distance, a.d_min],
                                   [b.sigma, b.sr, b.fitness, b.distance, b.d_min],
                                   rtol=1e-5, atol=1e-6)
    assert log.env_steps == log2.env_steps and log.gate == pytest.approx(log2.gate)
    assert calls == calls2


@pytest.mark.parametrize(("batch_size", "iterations"), [(1, ITERATIONS), (4, 13)])
def test_seeds_in_lockstep_illuminate_as_each_alone(setup, monkeypatch, batch_size,
                                                    iterations):
    """Two seeds (their own base policy, encoder, key and archive; BuildArchive then
    RefreshArchive) illuminated in lockstep: one population evaluation per step for both,
    and each seed's archive, log and progress those of its `illuminate` alone. With
    batches of 4, 13 = 4 + 4 + 4 + 1 ends on a partial batch (alone, the shapes of
    `test_batched_proposals`)."""
    agent, embedding, base = setup
    wide = embedding.replace(  # spreads the latents: refreshes find room (test above)
        normalizer=Normalizer(jnp.zeros(LATENT.latent_dim), jnp.full(LATENT.latent_dim, 0.01)))
    seeds = [dict(base_params=base, embedding=wide, key=KEY, parent_id=7),
             dict(base_params=agent.policy.init(jax.random.key(4)),
                  embedding=EmbeddingState.create(jax.random.key(2), LATENT).replace(
                      normalizer=wide.normalizer), key=jax.random.key(3), parent_id=-1)]

    def kwargs(seed, visit, calls, initial=None):
        return dict(visit=visit, tag=TAG, latent_config=LATENT, qd_config=QD,
                    iterations=iterations, batch_size=batch_size, initial_archive=initial,
                    progress=lambda *a: calls.append(a),
                    **{k: v for k, v in seed.items() if k != "base_params"})

    def alone(seed, visit, initial=None):
        calls = []
        archive, log = illuminate(agent, seed["base_params"],
                                  **kwargs(seed, visit, calls, initial))
        return archive, log, calls

    def together(visit, initials, lockstep=True):
        calls = [[], []]
        runs = [Illumination(agent, seed["base_params"],
                             **kwargs(seed, visit, c, initial))
                for seed, c, initial in zip(seeds, calls, initials, strict=True)]
        return [(a, log, c) for (a, log), c in
                zip(illuminate_seeds(agent, runs, lockstep=lockstep), calls, strict=True)]

    evaluations = []
    real = illumination_module.evaluate_populations

    def counted(agent, flats, *args, **kw):
        evaluations.append([int(f.shape[0]) for f in flats])
        return real(agent, flats, *args, **kw)

    built = [alone(seed, VISIT) for seed in seeds]
    monkeypatch.setattr(illumination_module, "evaluate_populations", counted)
    built2 = together(VISIT, [None, None])
    steps = -(-iterations // batch_size)
    assert evaluations == [[1, 1]] + [[min(batch_size, iterations - i * batch_size)] * 2
                                       for i in range(steps)]
    if batch_size == 1 and jax.default_backend() == "cpu":  # the default: seed after seed
        evaluations.clear()
        apart = together(VISIT, [None, None], lockstep=None)
        assert evaluations == ([[1]] * (steps + 1)) * 2
        for a, b in zip(built, apart, strict=True):
            _assert_same_illumination(a, b)
    monkeypatch.setattr(illumination_module, "evaluate_populations", real)
    for a, b in zip(built, built2, strict=True):
        _assert_same_illumination(a, b)
    assert built[0][1].rows != built[1][1].rows  # two seeds, two illuminations
    # a revisit of both seeds: RefreshArchive of each seed's own archive
    refreshed = [alone(seed, 5, initial=b[0]) for seed, b in zip(seeds, built, strict=True)]
    refreshed2 = together(5, [b[0] for b in built2])
    for a, b in zip(refreshed, refreshed2, strict=True):
        _assert_same_illumination(a, b)
