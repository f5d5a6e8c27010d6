"""Transfer-origin selection (Algorithm FewShotSelectElite) on the toy Corridor: probe
curves and accounting reproduced by hand, batched probes equal to sequential ones, the
trained elite chosen over random ones although it has the lowest source fitness, the
archived (not the probed) weights returned, the farthest-point pool probed, determinism."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rl.toy_envs import Corridor

from telapa.config import EvalConfig, PPOConfig, TrainConfig
from telapa.continual.methods.telapa.transfer import (
    ProbeOutcome,
    _choose,
    _gather,
    probe,
    probe_batch,
    probe_moments,
    select_transfer_origin,
    select_transfer_origins,
)
from telapa.qd import ArchiveSpec, TransferConfig, init_archive, insert, make_elites
from telapa.qd.archive import InsertStatus
from telapa.qd.lineage import lineage_from_visits
from telapa.qd.selection import pool_candidates
from telapa.rl import Agent, flatten_params

CONFIG = TrainConfig(
    ppo=PPOConfig(num_envs=8, n_steps=16, batch_size=64, epochs=4, lr=3e-3),
    eval=EvalConfig(episodes=32),
)
ROLLOUT = CONFIG.ppo.rollout_size
TRANSFER = TransferConfig(
    k_pool=4, probe_steps=4 * ROLLOUT, probe_points=3, probe_eval_episodes=32, epsilon=0.1
)
FRESH_TRANSFER = TRANSFER.model_copy(update={"k_pool": 3})
"""The fresh-network test's pool: K_pool = 3 elites + the fresh network = 4 probes, so its
batches (4 alone, 2 x 4 for two seeds) are the compiled programs of the K_pool = 4 pool
and of two seeds' pools (`selected`, `test_seeds_select_together_as_each_alone`)."""
KEY = jax.random.key(7)
# The probes' training episodes: those this test drew before the agent/state split (a
# PPOTrainer seeded 1 restarting its rollout). Which random policy learns the corridor
# within 4 rollouts depends on them; with these none reaches the window.
ROLLOUT_KEY = jax.random.split(jax.random.split(jax.random.split(jax.random.key(1), 4)[2])[0])[1]
AGENT = Agent(Corridor(), CONFIG)
"""Every agent of this file, the teacher's too: one set of compiled programs. The probe
batches come in sizes 1, 4 and 8 only (one program per size)."""


def _leaves(tree) -> list[np.ndarray]:
    return [
        np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                   else x)
        for x in jax.tree.leaves(tree)
    ]


def _same(a, b) -> bool:
    la, lb = _leaves(a), _leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb, strict=True))


@pytest.fixture(scope="module")
def library():
    """Archive A (tag 0): random r1, r2 (near-duplicate of r1), r3. Archive B (tag 1):
    the Corridor-trained elite T, with the LOWEST source fitness, and random r4.
    Descriptors (2-d): r1 (0, 0), r2 (0.05, 0), r3 (1, 0); T (0, 1.2), r4 (1, 1).
    Farthest-point order by hand: r1 (fittest), r4 (1.41 from r1), T (min 1.02), r3
    (min 1.0); r2 (0.05 from r1) is left out of the K_pool = 4 pool. ``single``: an
    archive (tag 1) holding T alone."""
    # PPOTrainer(Corridor(), CONFIG, key=0).train(40 * ROLLOUT) on AGENT (its keys:
    # init, env, rollout, eval = split(key, 4), episodes from split(rollout)[1]), so the
    # hand run below trains and evaluates with the programs compiled here
    init_key, _, rollout_key, eval_key = jax.random.split(jax.random.key(0), 4)
    teacher = AGENT.start(AGENT.init_ppo(init_key), jax.random.split(rollout_key)[1])
    teacher, _ = AGENT.train(teacher, 40 * ROLLOUT)
    trained = teacher.ppo.params
    assert AGENT.evaluate(trained, None, eval_key).sr >= 0.95
    rand = {n: AGENT.policy.init(jax.random.key(100 + i)) for i, n in enumerate("1234")}
    n_params = flatten_params(trained)[0].shape[0]
    spec = ArchiveSpec(n_params=n_params, desc_dim=2, raw_dim=0, capacity=4, target_size=3)

    def build(tag: int, rows: list) -> tuple:
        archive = init_archive(spec, tag=tag, d_min=0.01, id_offset=tag << 24)
        ids = []
        for params, z, f, task, visits in rows:
            cand = make_elites(
                params=flatten_params(params)[0], fitness=f, sr=0.5,
                descriptor=jnp.asarray(z, jnp.float32), sigma=0.05, task=task,
                lineage=lineage_from_visits(visits, 1),
            )
            archive, info = insert(archive, cand)
            assert int(info.status) == InsertStatus.ADDED
            ids.append(int(info.elite_id))
        return archive, ids

    a, ids_a = build(0, [(rand["1"], (0.0, 0.0), 0.3, 0, (0,)),
                         (rand["2"], (0.05, 0.0), 0.1, 0, (0,)),
                         (rand["3"], (1.0, 0.0), 0.2, 0, (0,))])
    b, ids_b = build(1, [(trained, (0.0, 1.2), 0.0, 1, (0, 1)),
                         (rand["4"], (1.0, 1.0), 0.25, 1, (1,))])
    single, _ = build(1, [(trained, (0.0, 1.2), 0.0, 1, (0, 1))])  # T alone
    return {"archives": [a, b], "trained": trained, "rand": rand, "ids_a": ids_a,
            "ids_b": ids_b, "single": single}


def _select(library, config=TRANSFER, **kwargs):
    calls: list[tuple[int, int]] = []
    choice = select_transfer_origin(
        AGENT, library["archives"], config=config, key=KEY, rollout_key=ROLLOUT_KEY,
        progress=lambda done, total: calls.append((done, total)), **kwargs,
    )
    return choice, calls


@pytest.fixture(scope="module")
def selected(library):
    """The batched selection (the default) and the sequential one."""
    return _select(library), _select(library, batch=False)


def test_probe_curve_and_accounting_match_a_hand_run(library):
    """probe == fresh optimizer and episodes from the rollout key, evaluate at 0, 1/2, 1
    of the budget with the probe key; env steps = trained steps + evaluated lengths."""
    for name, params in [("r1", library["rand"]["1"]), ("T", library["trained"])]:
        curve, env_steps = probe(AGENT, params, steps=4 * ROLLOUT, points=3, episodes=32,
                                 key=KEY, rollout_key=ROLLOUT_KEY)
        assert curve.shape == (3,), name
        assert curve[0] == AGENT.evaluate(params, 32, KEY).sr, name

        state = AGENT.start(AGENT.fresh_ppo(params), ROLLOUT_KEY)
        results = [AGENT.evaluate(state.ppo.params, 32, KEY)]
        for _ in range(2):
            state, _ = AGENT.train(state, 2 * ROLLOUT)
            results.append(AGENT.evaluate(state.ppo.params, 32, KEY))
        np.testing.assert_array_equal(curve, [r.sr for r in results], err_msg=name)
        lengths = sum(int(r.lengths.sum()) for r in results)
        assert lengths > 0
        assert env_steps == 4 * ROLLOUT + lengths, name
        # The probe moves the weights, so "bitwise the archived weights" below means
        # "not the probed ones".
        assert not _same(state.ppo.params, params), name
    assert curve[0] >= 0.95  # T solves the corridor zero-shot


def test_probe_moments_are_equal_segments_of_whole_iterations():
    """By hand: s = ceil(B / ((points - 1) * rollout)) iterations a segment. The paper
    preset's 200,000 steps at 2,048 a rollout: ceil(24.41) = 25, so 0, 51,200, ...,
    204,800 (rounding each moment up alone gave 25, 24, 25, 24 iterations); a budget
    of whole equal segments is kept exactly (MuJoCo's 65,536 at 16,384)."""
    assert probe_moments(200_000, 5, 2048) == [0, 51_200, 102_400, 153_600, 204_800]
    assert probe_moments(30_720, 5, 2048) == [0, 8192, 16_384, 24_576, 32_768]
    assert probe_moments(65_536, 5, 16_384) == [0, 16_384, 32_768, 49_152, 65_536]
    assert probe_moments(512, 2, 256) == [0, 512]
    assert probe_moments(1, 3, 2048) == [0, 2048, 4096]
    with pytest.raises(ValueError, match="at least 2 points, got 1"):
        probe_moments(512, 1, 256)


def test_a_budget_of_uneven_moments_probes_with_one_program(library):
    """5 rollouts at 3 points: the moments 0, 3 and 6 rollouts (not 0, 3 and 5), so both
    segments train 3 iterations with one train-and-evaluate program (3 and 2 iterations,
    two programs, before); curve and cost as a hand run of 3 + 3 rollouts."""
    def chunks():
        return {k for k in AGENT._programs if isinstance(k, tuple) and k[0] == "chunk"}

    params, before = library["trained"], chunks()
    curve, env_steps = probe(AGENT, params, steps=5 * ROLLOUT, points=3, episodes=32,
                             key=KEY, rollout_key=ROLLOUT_KEY)
    assert [k[1:3] for k in chunks() - before] == [(1, 3)]  # (size, iterations)
    state = AGENT.start(AGENT.fresh_ppo(params), ROLLOUT_KEY)
    results = [AGENT.evaluate(params, 32, KEY)]
    for _ in range(2):
        state, _ = AGENT.train(state, 3 * ROLLOUT)
        results.append(AGENT.evaluate(state.ppo.params, 32, KEY))
    np.testing.assert_array_equal(curve, [r.sr for r in results])
    assert env_steps == 6 * ROLLOUT + sum(int(r.lengths.sum()) for r in results)


def test_batched_probes_match_sequential_probes(library):
    """probe_batch trains the K probes as one vmapped batch: each curve and cost equals
    its sequential probe (SR over 32 episodes: a float difference in the weights would
    have to flip a whole episode to show)."""
    params = [library["rand"]["1"], library["trained"], library["rand"]["3"],
              library["rand"]["4"]]
    settings = {"steps": 4 * ROLLOUT, "points": 3, "episodes": 32, "key": KEY,
                "rollout_key": ROLLOUT_KEY}
    curves, costs = probe_batch(AGENT, params, **settings)
    for j, p in enumerate(params):
        curve, cost = probe(AGENT, p, **settings)
        np.testing.assert_array_equal(curves[j], curve)
        assert costs[j] == cost


def test_selection_picks_trained_elite_and_returns_its_archived_weights(library, selected):
    (choice, _), (sequential, _) = selected
    assert sequential.candidates == choice.candidates
    assert (sequential.index, sequential.env_steps) == (choice.index, choice.env_steps)
    a, b = library["archives"]
    assert choice.elite_id == library["ids_b"][0] == (1 << 24)
    assert (choice.source, choice.tag, choice.slot, choice.lineage) == (1, 1, 0, (0, 1))
    chosen = choice.candidates[choice.index]
    assert chosen.elite_id == choice.elite_id
    # Not a fitness pick: T has the lowest source fitness in the pool.
    assert chosen.fitness == min(c.fitness for c in choice.candidates) == 0.0
    # Bitwise the archived row (and hence the trained tree), not probed weights.
    flat = flatten_params(choice.params)[0]
    np.testing.assert_array_equal(np.asarray(flat), np.asarray(b.elites.params[0]))
    assert _same(choice.params, library["trained"])
    # The window keeps T only; the random policies do not reach SR* - epsilon.
    assert chosen.in_window and chosen.sr_final >= 0.95
    assert [c.in_window for c in choice.candidates].count(True) == 1
    others = [c.score for c in choice.candidates if c is not chosen]
    assert all(s == -np.inf for s in others) and np.isfinite(chosen.score)


def test_candidates_are_the_farthest_point_pool(library, selected):
    (choice, calls), (_, sequential_calls) = selected
    ids_a, ids_b = library["ids_a"], library["ids_b"]
    got = [(c.source, c.tag, c.slot, c.elite_id) for c in choice.candidates]
    assert got == [(0, 0, 0, ids_a[0]), (1, 1, 1, ids_b[1]), (1, 1, 0, ids_b[0]),
                   (0, 0, 2, ids_a[2])]
    pool, idx = pool_candidates(library["archives"], k_pool=TRANSFER.k_pool)
    assert [c.elite_id for c in choice.candidates] == [
        int(pool.elites.elite_id[i]) for i in np.asarray(idx)
    ]
    assert calls == [(0, 4), (4, 4)]  # the start (for the log), then one batch
    assert sequential_calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    max_eval = TRANSFER.probe_points * TRANSFER.probe_eval_episodes * Corridor().max_steps
    for c in choice.candidates:
        assert TRANSFER.probe_steps < c.env_steps <= TRANSFER.probe_steps + max_eval
        assert c.task == c.source
    assert choice.env_steps == sum(c.env_steps for c in choice.candidates)
    assert choice.wall_s > 0


def test_record_is_json_ready(selected):
    (choice, _), _ = selected
    record = json.loads(json.dumps(choice.record(), allow_nan=False))
    assert record["elite_id"] == choice.elite_id and record["lineage"] == [0, 1]
    assert [c["score"] is None for c in record["candidates"]] == [
        not c.in_window for c in choice.candidates
    ]


def test_selection_is_deterministic_given_key(library, selected):
    (choice, _), _ = selected
    again, _ = _select(library)
    assert again.candidates == choice.candidates
    assert (again.index, again.env_steps) == (choice.index, choice.env_steps)
    assert _same(again.params, choice.params)


def test_rejects_unusable_libraries(library):
    empty = init_archive(ArchiveSpec(n_params=library["archives"][0].spec.n_params,
                                     desc_dim=2, raw_dim=0, capacity=4, target_size=3))
    with pytest.raises(ValueError, match="no valid elite"):
        select_transfer_origin(AGENT, [empty], config=TRANSFER, key=KEY,
                               rollout_key=ROLLOUT_KEY)
    wrong = init_archive(ArchiveSpec(n_params=3, desc_dim=2, raw_dim=0, capacity=4,
                                     target_size=3))
    with pytest.raises(ValueError, match="parameters"):
        select_transfer_origin(AGENT, [wrong], config=TRANSFER, key=KEY,
                               rollout_key=ROLLOUT_KEY)


def test_seeds_select_together_as_each_alone(library):
    """select_transfer_origins: two seeds' probes (libraries of 4 and 1 candidates,
    padded to 2 x K_pool) as one batch give each seed's own selection."""
    libraries = [library["archives"], [library["single"]]]
    keys = [KEY, jax.random.key(8)]
    rollout_keys = [ROLLOUT_KEY, jax.random.key(9)]
    together = select_transfer_origins(AGENT, libraries, config=TRANSFER, keys=keys,
                                       rollout_keys=rollout_keys, penalties=[None, None])
    assert [len(c.candidates) for c in together] == [4, 1]
    for choice, archives, key, rollout_key in zip(together, libraries, keys, rollout_keys,
                                                  strict=True):
        alone = select_transfer_origin(AGENT, archives, config=TRANSFER, key=key,
                                       rollout_key=rollout_key)
        assert choice.candidates == alone.candidates
        assert (choice.index, choice.elite_id, choice.env_steps) == \
            (alone.index, alone.elite_id, alone.env_steps)
        assert _same(choice.params, alone.params)


def _pool_curves(finals: list[list[float]]) -> np.ndarray:
    return np.asarray(finals, np.float32)


def test_fresh_start_rule_by_hand(library):
    """The fresh network is probed after the K elites and taken when it scores best or
    when no probe ends with a success; otherwise Algorithm FewShotSelectElite's pick."""
    gathered = _gather(AGENT, library["archives"], TRANSFER)
    fresh = library["rand"]["2"]
    costs = [10, 20, 30, 40, 50]
    choose = functools.partial(_choose, gathered, library["archives"], config=TRANSFER,
                               start=0.0)
    zero = [0.0, 0.0, 0.0]
    # (a) every probe ends at SR 0; elite 1 succeeded midway (AUC 0.25, slope 0), so
    # TeLAPA's Score picks it: w_auc * 1 = 0.25 against 0 for the others
    curves = _pool_curves([zero, [0.0, 0.5, 0.0], zero, zero, zero])
    assert choose(curves[:4], costs[:4]).index == 1
    started = choose(curves, costs, fresh=fresh)
    assert (started.origin, started.index, started.elite_id, started.lineage) == \
        ("fresh", -1, -1, ())
    assert started.params is fresh and started.env_steps == 150
    assert started.fresh == ProbeOutcome(sr0=0.0, sr_final=0.0, slope=0.0, auc=0.0, score=0.0,
                                       in_window=True, env_steps=50)
    record = json.loads(json.dumps(started.record(), allow_nan=False))
    assert (record["origin"], record["index"], record["tag"], record["elite_id"]) == \
        ("fresh", None, None, -1)
    assert len(record["candidates"]) == 4 and record["fresh"]["env_steps"] == 50
    # (b) elite 2 ends at 0.5, the fresh network at 0.1 (outside the window 0.5 - 0.1)
    curves = _pool_curves([zero, zero, [0.0, 0.5, 0.5], zero, [0.0, 0.0, 0.1]])
    kept = choose(curves, costs, fresh=fresh)
    assert (kept.origin, kept.index) == ("elite", 2)
    assert kept.elite_id == kept.candidates[2].elite_id
    assert not kept.fresh.in_window and kept.fresh.score == -np.inf
    assert kept.record()["origin"] == "elite" and kept.record()["fresh"]["score"] is None
    # (c) the fresh network ends at 0.6, elite 2 at 0.5 (both in the window; the other
    # elites at 0 are not). Over t = 0, 1/2, 1: slopes 0.6 and 0.5, AUCs 0.3 and 0.375,
    # so normalised within the window the fresh network scores 0.25 + 0.5 + 0 = 0.75 and
    # elite 2 0 + 0 + 0.25 = 0.25
    curves = _pool_curves([zero, zero, [0.0, 0.5, 0.5], zero, [0.0, 0.3, 0.6]])
    best = choose(curves, costs, fresh=fresh)
    assert best.origin == "fresh" and best.fresh.score == pytest.approx(0.75)
    assert best.candidates[2].score == pytest.approx(0.25)


def test_a_fresh_network_is_probed_like_an_elite(library, selected):
    """With a fresh network, the pool's elites and their probes are unchanged and the
    fresh network's probe is `probe` of it with the same keys; the seeds' batch gives
    each seed's own choice. (K_pool = 3: the pool is the first 3 of the K_pool = 4
    pool's farthest-point order, `FRESH_TRANSFER`.)"""
    (plain, _), _ = selected
    fresh = AGENT.policy.init(jax.random.key(200))
    choice, calls = _select(library, config=FRESH_TRANSFER, fresh=fresh)
    assert calls == [(0, 4), (4, 4)]
    pooled = plain.candidates[:FRESH_TRANSFER.k_pool]
    assert [c.elite_id for c in choice.candidates] == [c.elite_id for c in pooled]
    assert [(c.sr0, c.sr_final, c.env_steps) for c in choice.candidates] == \
        [(c.sr0, c.sr_final, c.env_steps) for c in pooled]
    curve, cost = probe(AGENT, fresh, steps=TRANSFER.probe_steps, points=3, episodes=32,
                        key=KEY, rollout_key=ROLLOUT_KEY)
    assert (choice.fresh.sr0, choice.fresh.sr_final, choice.fresh.env_steps) == \
        (float(curve[0]), float(curve[-1]), cost)
    assert choice.env_steps == sum(c.env_steps for c in pooled) + cost
    # T still solves the corridor: the elite is kept
    assert (choice.origin, choice.elite_id) == ("elite", plain.elite_id)
    together = select_transfer_origins(
        AGENT, [library["archives"], library["archives"][1:]], config=FRESH_TRANSFER,
        keys=[KEY, jax.random.key(8)], rollout_keys=[ROLLOUT_KEY, jax.random.key(9)],
        penalties=[None, None], fresh=[fresh, fresh])
    assert together[0].candidates == choice.candidates
    assert together[0].fresh == choice.fresh and together[0].index == choice.index
    assert together[1].fresh is not None and len(together[1].candidates) == 2
