"""Self-adapted Gaussian mutation, parent selection and the competence gate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.qd import (
    adapt_sigma,
    competence_gate,
    mutate,
    schwefel_tau,
    select_parents,
)

KW = {"tau": 0.2, "sigma_min": 1e-4, "sigma_max": 10.0}


def test_sigma_log_normal_statistics():
    n = 20000
    sigma = jnp.full((n,), 0.05)
    new = np.asarray(adapt_sigma(jax.random.key(0), sigma, **KW))
    log_ratio = np.log(new / 0.05)
    # log(sigma'/sigma) ~ N(0, tau^2): mean within 4 standard errors, std within 3%.
    assert abs(log_ratio.mean()) < 4 * 0.2 / np.sqrt(n)
    assert log_ratio.std() == pytest.approx(0.2, rel=0.03)
    # Median unchanged (log-normal is unbiased in log space); mean inflated by exp(tau^2/2).
    assert np.median(new) == pytest.approx(0.05, rel=0.02)
    assert new.mean() == pytest.approx(0.05 * np.exp(0.02), rel=0.01)


def test_sigma_bounds_and_tau_zero():
    sigma = jnp.full((1000,), 0.05)
    clipped = np.asarray(
        adapt_sigma(jax.random.key(1), sigma, tau=2.0, sigma_min=0.04, sigma_max=0.06)
    )
    assert clipped.min() >= 0.04 - 1e-9 and clipped.max() <= 0.06 + 1e-9
    assert (clipped == np.float32(0.04)).any() and (clipped == np.float32(0.06)).any()
    same = adapt_sigma(jax.random.key(1), sigma, tau=0.0, sigma_min=1e-3, sigma_max=1.0)
    np.testing.assert_allclose(same, sigma)
    assert schwefel_tau(20000) == pytest.approx(0.005)


def test_mutation_noise_is_standard_normal_times_new_sigma():
    p = 50000
    parent = jnp.linspace(-1, 1, p)
    children, sigmas = mutate(jax.random.key(2), parent[None], jnp.full((1,), 0.05), **KW)
    child, s = children[0], sigmas[0]  # one parent is a batch of one
    eps = (np.asarray(child) - np.asarray(parent)) / float(s)
    assert abs(eps.mean()) < 4 / np.sqrt(p)
    assert eps.std() == pytest.approx(1.0, rel=0.02)
    assert float(s) != pytest.approx(0.05)  # sigma was adapted before mutating


def test_mutation_deterministic_given_key():
    parents = jax.random.normal(jax.random.key(3), (6, 10))
    sig = jnp.full((6,), 0.05)
    c1, s1 = mutate(jax.random.key(4), parents, sig, **KW)
    c2, s2 = mutate(jax.random.key(4), parents, sig, **KW)
    np.testing.assert_array_equal(c1, c2)
    np.testing.assert_array_equal(s1, s2)
    c3, _ = mutate(jax.random.key(5), parents, sig, **KW)
    assert not np.array_equal(np.asarray(c1), np.asarray(c3))
    # Row i is the per-row rule with k_i = split(key, B)[i]; rows differ from each other.
    keys = jax.random.split(jax.random.key(4), 6)
    for i in range(6):
        k_sigma, k_eps = jax.random.split(keys[i])
        si = adapt_sigma(k_sigma, sig[i], **KW)
        ci = parents[i] + si * jax.random.normal(k_eps, (10,), jnp.float32)
        np.testing.assert_allclose(c1[i], ci, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(s1[i], si, rtol=1e-6)
    assert len({float(x) for x in np.asarray(s1)}) == 6


def test_parent_selection_uniform_over_valid():
    valid = jnp.array([False, True, False, True, True, False, False, True])
    n = 8000
    slots = np.asarray(select_parents(jax.random.key(6), valid, n=n))
    assert set(slots.tolist()) <= {1, 3, 4, 7}
    counts = np.bincount(slots, minlength=8)[[1, 3, 4, 7]]
    # Each of 4 slots ~ Binomial(n, 1/4): within 5 standard deviations.
    sd = np.sqrt(n * 0.25 * 0.75)
    assert np.all(np.abs(counts - n / 4) < 5 * sd)
    again = np.asarray(select_parents(jax.random.key(6), valid, n=n))
    np.testing.assert_array_equal(slots, again)


def test_competence_gate():
    assert float(competence_gate(1.0, gamma=0.8, floor=0.1)) == pytest.approx(0.8)
    assert float(competence_gate(0.05, gamma=0.8, floor=0.1)) == pytest.approx(0.1)
    assert float(competence_gate(0.5, gamma=1.0, floor=0.0)) == pytest.approx(0.5)
    np.testing.assert_allclose(
        competence_gate(jnp.array([0.0, 0.5]), gamma=0.5, floor=0.2), [0.2, 0.25]
    )
