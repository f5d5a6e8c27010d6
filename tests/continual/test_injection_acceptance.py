"""Cross-archive elite injection can produce elites: when the injection pool's elites are
competent on the task being illuminated, injected children pass the competence gate and
enter the archive (``injected_accepted > 0``), and every injected child is a mutation of
the pool elite that was chosen, not of the archive parent it replaced.

A study at the paper's budget counted 0 accepted children of injected parents; this file
guards against that being a property of the code (e.g. the child keeping the archive
parent's parameters, or injected children being rejected for another reason) rather than
of the pool (elites of other tasks failing the gate on this one). MiniGrid-Empty-5x5 (jax
backend) with tiny nets, as tests/telapa/test_illumination.py; the pool is an archive
illuminated on the same task, so its elites are competent here by construction."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from telapa.config import NetworkConfig, PPOConfig, TrainConfig
from telapa.continual.methods.telapa.embedding import EmbeddingState
from telapa.continual.methods.telapa.illumination import illuminate
from telapa.latent import LatentConfig
from telapa.qd import (
    ArchiveConfig,
    IlluminationConfig,
    InjectionConfig,
    InsertStatus,
    QDConfig,
    elite_id_offset,
    propose,
    union,
)
from telapa.rl import Agent
from telapa.rl.networks import flatten_params

ENV = "MiniGrid-Empty-5x5-v0"
CONFIG = TrainConfig(
    ppo=PPOConfig(num_envs=4, n_steps=8, batch_size=32, epochs=1),
    network=NetworkConfig(hidden=(16,)),
)
LATENT = LatentConfig(step_hidden=(16, 16), gru_hidden=16, proj_hidden=16)
ITERATIONS = 12
QD = QDConfig(
    archive=ArchiveConfig(target_size=4, capacity=6),
    illumination=IlluminationConfig(eval_episodes=8, gate_gamma=0.5),
)
INJECT = QD.model_copy(update={"injection": InjectionConfig(p_inj=1.0)})
POOL_TAG, TAG = 0, 1
POOL_VISIT, VISIT = 0, 1


@pytest.fixture(scope="module")
def illuminated():
    """BuildArchive of tag 0 (visit 0) around one random policy, then BuildArchive of tag 1
    (visit 1) around another on the same env with p_inj = 1 and the first archive as the
    injection pool: every candidate of visit 1 has an injected parent."""
    agent = Agent(ENV, CONFIG)
    embedding = EmbeddingState.create(jax.random.key(1), LATENT)
    k_pool, k_base = jax.random.split(jax.random.key(0))
    pool_base, base = agent.policy.init(k_pool), agent.policy.init(k_base)
    common = dict(embedding=embedding, latent_config=LATENT, iterations=ITERATIONS)
    pool_archive, _ = illuminate(agent, pool_base, visit=POOL_VISIT, tag=POOL_TAG,
                                 qd_config=QD, key=jax.random.key(5), **common)
    pool = union([pool_archive])
    archive, log = illuminate(agent, base, visit=VISIT, tag=TAG, qd_config=INJECT,
                              key=jax.random.key(6), pool=pool, **common)
    # the archive as the visit's first proposal sees it: theta_t alone
    first, _ = illuminate(agent, base, visit=VISIT, tag=TAG, qd_config=INJECT,
                          key=jax.random.key(6), pool=pool, **{**common, "iterations": 0})
    return pool, archive, log, flatten_params(base)[0], first


def pool_params(pool) -> dict[int, np.ndarray]:
    """elite id -> flat parameters of the pool's valid elites."""
    valid = np.asarray(pool.valid)
    ids = np.asarray(pool.elites.elite_id)[valid]
    return dict(zip(ids.tolist(), np.asarray(pool.elites.params)[valid], strict=True))


def test_competent_pool_elites_give_accepted_injected_children(illuminated):
    pool, archive, log, _, _ = illuminated
    # precondition: the pool's elites are competent on this task (same env; their SR was
    # measured with as many episodes as the gate's reference)
    pool_sr = np.asarray(pool.elites.sr)[np.asarray(pool.valid)]
    assert len(pool_sr) >= 2 and (pool_sr >= log.gate).all()
    counts = log.counts()
    # p_inj = 1 with a non-empty pool: every parent is injected
    assert counts["candidates"] == counts["injected"] == ITERATIONS
    assert counts["injected_accepted"] == counts["accepted"] > 0
    col = log.columns()
    assert col["injected"].all()
    # parents are the pool's elites (ids of its tag), not the archive's own
    assert set(col["parent_id"].tolist()) <= set(pool_params(pool))
    assert (col["parent_id"] >> 24 == POOL_TAG).all()
    # injected children are judged by the same rule as any: rejected on the gate iff
    # SR < g_i, and accepted ones are in the archive (unless a later one replaced them)
    assert np.array_equal(col["status"] == InsertStatus.REJECTED_GATE, col["sr"] < log.gate)
    accepted = col["elite_id"] >= 0
    assert (col["sr"][accepted] >= log.gate).all()
    assert np.isin(col["status"][accepted], [InsertStatus.ADDED, InsertStatus.REPLACED]).all()
    valid = np.asarray(archive.valid)
    in_archive = set(np.asarray(archive.elites.elite_id)[valid].tolist())
    kept = set(col["elite_id"][accepted].tolist()) - set(col["replaced_id"].tolist())
    assert kept and kept <= in_archive
    assert (col["elite_id"][accepted] >> 24 == TAG).all()


def test_accepted_injected_children_are_mutations_of_their_pool_elite(illuminated):
    """An accepted child of an injected parent stores theta' = theta_pool + sigma' eps
    (eps ~ N(0, I_P)): ||theta' - theta_pool|| = sigma' sqrt(P) up to chi_P's spread
    (about 1 %), far closer than to the archive's own base elite theta_t."""
    pool, archive, log, base_flat, _ = illuminated
    parents = pool_params(pool)
    valid = np.asarray(archive.valid)
    el = jax.tree.map(np.asarray, archive.elites)
    children = np.flatnonzero(valid & np.isin(el.parent_id, list(parents)))
    assert len(children) >= 1
    n_params = el.params.shape[1]
    for slot in children:
        theta, theta_pool = el.params[slot], parents[int(el.parent_id[slot])]
        to_pool = np.linalg.norm(theta - theta_pool)
        assert to_pool / (el.sigma[slot] * np.sqrt(n_params)) == pytest.approx(1.0, abs=0.1)
        to_base = np.linalg.norm(theta - np.asarray(base_flat))
        assert to_pool < 0.5 * to_base
        assert el.task[slot] == VISIT
    # the visit's other elites: at most theta_t (a fitter child may have replaced it)
    made_here = np.flatnonzero(valid & (el.task == VISIT))
    others = set(made_here.tolist()) - set(children.tolist())
    assert others <= set(np.flatnonzero(valid & (el.elite_id == log.base.elite_id)).tolist())


def test_propose_mutates_the_chosen_pool_elite(illuminated):
    """`propose` as illumination calls it (own_visit=True): each injected child's
    ``parent_index`` row of the pool is its parent, with that row's id and parameters."""
    pool, archive, _, _, first = illuminated
    ill, inj = INJECT.illumination, INJECT.injection
    off = propose(jax.random.key(9), archive, n=16, visit=VISIT, tau=ill.tau,
                  sigma_min=ill.sigma_min, sigma_max=ill.sigma_max, pool=pool, p_inj=1.0,
                  lam=inj.lam, subset=inj.subset, own_visit=True)
    off = jax.tree.map(np.asarray, off)
    assert off.injected.all()
    assert np.asarray(pool.valid)[off.parent_index].all()
    np.testing.assert_array_equal(off.parent_id,
                                  np.asarray(pool.elites.elite_id)[off.parent_index])
    theta_pool = np.asarray(pool.elites.params)[off.parent_index]
    ratio = np.linalg.norm(off.params - theta_pool, axis=1) / (
        off.sigma * np.sqrt(off.params.shape[1]))
    np.testing.assert_allclose(ratio, 1.0, atol=0.1)
    # far from the archive parent it replaces: from the archive as the visit's first
    # proposal sees it (theta_t alone), every child is a mutation of a pool elite, not
    # of theta_t
    start = jax.tree.map(np.asarray, propose(
        jax.random.key(9), first, n=16, visit=VISIT, tau=ill.tau,
        sigma_min=ill.sigma_min, sigma_max=ill.sigma_max, pool=pool, p_inj=1.0,
        lam=inj.lam, subset=inj.subset, own_visit=True))
    assert start.injected.all()
    theta_t = np.asarray(first.elites.params)[np.asarray(first.valid)]
    assert theta_t.shape[0] == 1
    theta_pool = np.asarray(pool.elites.params)[start.parent_index]
    to_pool = np.linalg.norm(start.params - theta_pool, axis=1)
    np.testing.assert_allclose(
        to_pool / (start.sigma * np.sqrt(start.params.shape[1])), 1.0, atol=0.1)
    assert (to_pool < 0.5 * np.linalg.norm(start.params - theta_t[0], axis=1)).all()
    # the same key without injection mutates the archive's own elites instead
    plain = jax.tree.map(np.asarray, propose(
        jax.random.key(9), archive, n=16, visit=VISIT, tau=ill.tau, sigma_min=ill.sigma_min,
        sigma_max=ill.sigma_max, pool=pool, p_inj=0.0, own_visit=True))
    assert not plain.injected.any()
    assert not np.isin(plain.parent_id, list(pool_params(pool))).any()
    assert elite_id_offset(TAG) <= plain.parent_id.min()
