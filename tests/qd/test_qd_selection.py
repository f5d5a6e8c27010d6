"""Candidate pooling (farthest point), few-shot origin selection and injection scores."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.qd import (
    ArchiveSpec,
    ProbeResults,
    farthest_point_indices,
    few_shot_select,
    init_archive,
    injection_scores,
    insert,
    lineage_from_visits,
    lineage_visits,
    make_elites,
    near_best,
    nearest_distance,
    pool_candidates,
    probe_summary,
    propose,
    repack,
    sample_injection,
    union,
)

SPEC = ArchiveSpec(n_params=2, desc_dim=2, raw_dim=0, capacity=4, target_size=3)


def cand(z, f, *, visits=(0,)):
    return make_elites(
        params=jnp.full((2,), f, jnp.float32),
        fitness=f,
        sr=1.0,
        descriptor=jnp.asarray(z, jnp.float32),
        sigma=0.05,
        task=visits[-1],
        lineage=lineage_from_visits(visits, 1),
    )


def archive_of(points, *, visits=(0,), id_offset=0):
    a = init_archive(SPEC, d_min=0.05, id_offset=id_offset)
    for z, f in points:
        a, _ = insert(a, cand(z, f, visits=visits))
    return a


def test_farthest_point_order_by_hand():
    z = np.array([[0, 0], [1, 0], [3, 0], [0, 2], [1, 0.1], [50, 50]], np.float32)
    f = np.array([1.0, 5.0, 2.0, 0.0, 4.0, 99.0], np.float32)
    valid = np.array([True, True, True, True, True, False])  # the far, fittest row is invalid
    # Start at the fittest valid row (1); then (0, 2) at sqrt(5) from it; then (3, 0)
    # (min distance 2 vs 1 for (0, 0) and 0.1 for (1, 0.1)); then (0, 0); then (1, 0.1).
    idx = farthest_point_indices(z, f, valid, k=7)
    np.testing.assert_array_equal(idx, [1, 3, 2, 0, 4, -1, -1])
    np.testing.assert_array_equal(farthest_point_indices(z, f, valid, k=2), [1, 3])


def test_farthest_point_ties_lowest_index():
    z = np.array([[0, 0], [-1, 0], [1, 0], [0, 0]], np.float32)
    f = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    valid = np.ones(4, bool)
    # Equal fitness: row 0 first; rows 1 and 2 tie at distance 1: row 1; then row 2
    # (distance 1 beats row 3's 0); the duplicate last.
    np.testing.assert_array_equal(farthest_point_indices(z, f, valid, k=4), [0, 1, 2, 3])
    np.testing.assert_array_equal(farthest_point_indices(z, f, np.zeros(4, bool), k=2), [-1, -1])


def test_pool_candidates_over_union_of_archives():
    a = archive_of([([0, 0], 1.0), ([1, 0], 2.0)], visits=(0,), id_offset=0)
    b = archive_of([([5, 0], 0.5), ([1, 0.01], 3.0)], visits=(1,), id_offset=1 << 24)
    u, idx = pool_candidates([a, b], k_pool=3)
    assert u.size == 8
    idx = np.asarray(idx)
    # Fittest is b's slot 1 (row 4 + 1 = 5); farthest from it is b's (5, 0) (row 4);
    # then a's (0, 0) (row 0).
    np.testing.assert_array_equal(idx, [5, 4, 0])
    np.testing.assert_array_equal(np.asarray(u.source)[idx], [1, 1, 0])
    np.testing.assert_array_equal(np.asarray(u.slot)[idx], [1, 0, 0])
    assert int(u.elites.elite_id[5]) == (1 << 24) + 1
    # Archives under different geometries cannot be mixed.
    b2, _ = repack(b, np.asarray(b.elites.descriptor), embedding_version=1, normalizer_id=None)
    with pytest.raises(ValueError, match="geometr"):
        union([a, b2])


def test_probe_summary_by_hand():
    curve = np.array([[0.0, 0.2, 0.4, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0, 1]])
    p = probe_summary(curve)
    np.testing.assert_allclose(p.sr0, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(p.sr_final, [0.8, 0.5, 1.0])
    np.testing.assert_allclose(p.slope, [0.8, 0.0, 0.0], atol=1e-6)
    # Trapezoid over t = 0, .25, .5, .75, 1: [0.4, 0.5, 0.5].
    np.testing.assert_allclose(p.auc, [0.4, 0.5, 0.5], atol=1e-6)
    single = probe_summary(np.array([[0.3]]))
    np.testing.assert_allclose([single.slope[0], single.auc[0]], [0.0, 0.3])


def test_epsilon_window_and_score_by_hand():
    probe = ProbeResults(
        sr0=jnp.array([0.1, 0.0, 0.0, 0.2]),
        sr_final=jnp.array([0.9, 0.85, 0.5, 0.88]),
        slope=jnp.array([0.1, 0.5, 0.9, 0.2]),
        auc=jnp.array([0.6, 0.5, 0.4, 0.7]),
    )
    np.testing.assert_array_equal(near_best(probe.sr_final, epsilon=0.1), [1, 1, 0, 1])
    np.testing.assert_array_equal(near_best(probe.sr_final, epsilon=0.02), [1, 0, 0, 1])
    # An SR exactly epsilon below the best is inside (1/50-grid values).
    np.testing.assert_array_equal(near_best(jnp.array([0.9, 0.8]), epsilon=0.1), [1, 1])
    w = {"w_final": 0.25, "w_slope": 0.5, "w_auc": 0.25}
    best, s = few_shot_select(probe, epsilon=0.1, **w)
    s = np.asarray(s)
    # Within I = {0, 1, 3}: n(final) = [1, 0, .6], n(slope) = [0, 1, .25], n(auc) = [.5, 0, 1]
    np.testing.assert_allclose(s[[0, 1, 3]], [0.375, 0.5, 0.525], atol=1e-6)
    assert s[2] == -np.inf  # highest slope, but outside the window
    assert best == 3
    # A tight window keeps only 0 and 3; with slope weight only, 3 (slope .2 > .1) wins.
    assert few_shot_select(probe, epsilon=0.02, w_final=0.0, w_slope=1.0, w_auc=0.0)[0] == 3
    # With final SR weight only, the best final (0) wins.
    assert few_shot_select(probe, epsilon=0.1, w_final=1.0, w_slope=0.0, w_auc=0.0)[0] == 0
    # Invalid candidates are ignored, including for SR*.
    valid = jnp.array([False, True, True, True])
    assert few_shot_select(probe, epsilon=0.1, valid=valid, **w)[0] == 1
    # Ties go to the lowest index; a lone candidate is selected.
    tie = ProbeResults(*(jnp.array([0.5, 0.5]),) * 4)
    assert few_shot_select(tie, epsilon=0.1, **w)[0] == 0
    with pytest.raises(ValueError):
        few_shot_select(probe, epsilon=0.1, valid=jnp.zeros(4, bool), **w)


def test_injection_score_by_hand():
    a = archive_of([([0, 0], 1.0), ([1, 0], 1.0)])
    desc = np.array([[3, 0], [0.5, 0], [0, 2]], np.float32)
    fit = np.array([1.0, 3.0, 2.0], np.float32)
    np.testing.assert_allclose(nearest_distance(desc, a.elites.descriptor, a.valid), [2, 0.5, 2])
    # f~ = [0, 1, .5]; score = d + lam f~.
    np.testing.assert_allclose(injection_scores(desc, fit, a, lam=1.0), [2.0, 1.5, 2.5])
    np.testing.assert_allclose(injection_scores(desc, fit, a, lam=0.0), [2.0, 0.5, 2.0])
    sub = injection_scores(desc, fit, a, lam=1.0, mask=np.array([True, True, False]))
    np.testing.assert_allclose(sub, [2.0, 1.5, -np.inf])

    pool_arc = archive_of([(z, f) for z, f in zip(desc, fit, strict=True)], visits=(2,))
    pool = union([pool_arc])
    got = {
        int(sample_injection(k, pool, a, lam=1.0, subset=8))
        for k in jax.random.split(jax.random.key(0), 5)
    }
    assert got == {2}  # the whole (valid) pool is scored: row 2 always wins
    # A subset of one row is uniform over valid rows.
    rows = [
        int(sample_injection(k, pool, a, lam=1.0, subset=1))
        for k in jax.random.split(jax.random.key(1), 60)
    ]
    assert set(rows) == {0, 1, 2}


def test_propose_with_injection_uses_pool_parents():
    a = archive_of([([0, 0], 1.0)], visits=(3,), id_offset=3 << 24)
    pool_arc = archive_of([([4, 0], 1.0), ([0.1, 0], 1.0)], visits=(0, 1), id_offset=1 << 24)
    pool = union([pool_arc])
    kw = {"n": 4, "visit": 5, "tau": 0.2, "sigma_min": 0.01, "sigma_max": 1.0}
    off = propose(jax.random.key(0), a, pool=pool, p_inj=1.0, lam=1.0, subset=8, **kw)
    assert np.asarray(off.injected).all()
    np.testing.assert_array_equal(off.parent_index, [0, 0, 0, 0])  # (4, 0) is farthest
    np.testing.assert_array_equal(off.parent_id, [1 << 24] * 4)
    assert lineage_visits(off.lineage[0]) == [0, 1, 5]
    none = propose(jax.random.key(0), a, pool=pool, p_inj=0.0, **kw)
    assert not np.asarray(none.injected).any()
    np.testing.assert_array_equal(none.parent_id, [3 << 24] * 4)
    assert lineage_visits(none.lineage[0]) == [3, 5]
    # p_inj = 0 with a pool is the same computation as no pool.
    plain = propose(jax.random.key(0), a, **kw)
    np.testing.assert_array_equal(plain.params, none.params)
