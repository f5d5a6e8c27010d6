"""PPOTrainer on tiny JAX envs: learning, resumability, determinism, fresh optimizer
and rollout states, evaluation layout (fast: a few seconds each, mostly compilation)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import EvalConfig, PPOConfig, TrainConfig
from telapa.rl import PPOTrainer, flatten_params, make_jax_evaluator

from .toy_envs import Corridor, Reach

CONFIG = TrainConfig(
    ppo=PPOConfig(num_envs=8, n_steps=16, batch_size=64, epochs=4, lr=3e-3),
    eval=EvalConfig(episodes=32),
)
ROLLOUT = CONFIG.ppo.rollout_size


def _same(a, b) -> bool:
    return all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


@pytest.fixture(scope="module")
def trained():
    trainer = PPOTrainer(Corridor(), CONFIG, key=0)
    before = trainer.evaluate()
    history = trainer.train(40 * ROLLOUT)
    return trainer, before, history


def test_learns_corridor(trained):
    trainer, before, history = trained
    after = trainer.evaluate()
    assert before.sr < 0.6
    assert after.sr >= 0.95
    assert history[-1]["success_rate"] >= 0.9
    assert trainer.steps == 40 * ROLLOUT == history[-1]["step"]
    assert trainer.agent.compile_s > 0


def _reached_goal(res) -> np.ndarray:
    """Per episode: its last step's feature 0 (x / (length - 1)) is 1, the goal cell."""
    return np.array([f[n - 1, 0] == 1.0 for f, n in zip(res.features, res.lengths,
                                                         strict=True)])


def test_evaluate_layout(trained):
    trainer, _, _ = trained
    res = trainer.evaluate(episodes=10, key=3)
    assert res.returns.shape == res.lengths.shape == (10,)
    assert res.features.shape == (10, Corridor().max_steps, 2)
    # SR (the generic family's success rate) is the fraction of episodes that reached
    # the goal, read here from the features; a fresh policy reaches it in some episodes
    fresh = trainer.evaluate(PPOTrainer(Corridor(), CONFIG, key=0).params, 32, key=3)
    assert 0 < fresh.sr < 0.6 and fresh.sr == _reached_goal(fresh).mean()
    assert res.sr == _reached_goal(res).mean() == 1.0
    for f, n in zip(res.features, res.lengths, strict=True):
        # feature 1 is t / max_steps: exactly 1..n over the episode, zero padding after
        np.testing.assert_allclose(f[:n, 1], np.arange(1, n + 1) / 16, atol=1e-6)
        assert not f[n:].any()
    again = trainer.evaluate(episodes=10, key=3)
    np.testing.assert_array_equal(res.returns, again.returns)
    assert not np.array_equal(trainer.evaluate(episodes=10, key=4).features, res.features)


def test_evaluate_other_params(trained):
    trainer, before, _ = trained
    fresh = PPOTrainer(Corridor(), CONFIG, key=0).params
    assert trainer.evaluate(params=fresh).sr == before.sr
    assert trainer.evaluate().sr >= 0.95


def test_jax_evaluator_vmaps_over_a_population(trained):
    trainer, before, _ = trained
    evaluate = make_jax_evaluator(trainer.agent.env, trainer.agent.policy, episodes=16,
                                  max_steps=16)
    fresh = PPOTrainer(Corridor(), CONFIG, key=0).params
    population = jax.tree.map(lambda a, b: jnp.stack([a, b]), fresh, trainer.params)
    returns, lengths, feats = jax.jit(jax.vmap(evaluate, in_axes=(0, None)))(
        population, jax.random.key(5)
    )
    assert returns.shape == lengths.shape == (2, 16) and feats.shape == (2, 16, 16, 2)
    assert (returns[0] > 0).mean() < 0.6 and (returns[1] > 0).mean() >= 0.95


def test_fresh_ppo_keeps_the_params_and_resets_adam(trained):
    trainer, _, _ = trained
    mu = lambda s: flatten_params(s.opt_state[1][0].mu)[0]  # noqa: E731  (adam's first moment)
    assert jnp.abs(mu(trainer.state.ppo)).sum() > 0
    fresh = trainer.agent.fresh_ppo(trainer.params)
    assert _same(fresh.params, trainer.params)
    assert jnp.abs(mu(fresh)).sum() == 0
    assert int(fresh.opt_state[1][0].count) == 0


def test_resume_is_exact_and_seeded():
    one_call = PPOTrainer(Corridor(), CONFIG, key=7)
    one_call.train(3 * ROLLOUT)
    resumed = PPOTrainer(Corridor(), CONFIG, key=7)
    resumed.train(ROLLOUT)
    resumed.train(2 * ROLLOUT - 5)  # rounded up to whole iterations
    assert resumed.steps == one_call.steps == 3 * ROLLOUT
    assert _same(one_call.params, resumed.params)
    other_seed = PPOTrainer(Corridor(), CONFIG, key=8)
    assert not _same(other_seed.params, PPOTrainer(Corridor(), CONFIG, key=7).params)

    # Agent.start draws fresh episodes: training diverges from the uninterrupted run
    resumed.state = resumed.agent.start(resumed.state.ppo, jax.random.key(3),
                                        steps=resumed.steps)
    resumed.train(ROLLOUT)
    one_call.train(ROLLOUT)
    assert resumed.steps == one_call.steps
    assert not _same(one_call.params, resumed.params)

    # two iterations fused per jitted call: the same 4 iterations, in 2 calls
    fused_config = CONFIG.model_copy(
        update={"ppo": CONFIG.ppo.model_copy(update={"iterations_per_call": 2})}
    )
    fused = PPOTrainer(Corridor(), fused_config, key=7)
    history = fused.train(3 * ROLLOUT)
    assert [m["step"] for m in history] == [ROLLOUT * i for i in (1, 2, 3, 4)]
    for a, b in zip(jax.tree.leaves(fused.params), jax.tree.leaves(one_call.params),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    # non-finite parameters stop training with the env and the step
    nan = jax.tree.map(lambda x: x * jnp.nan, resumed.params)
    resumed.state = resumed.state.replace(ppo=resumed.state.ppo.replace(params=nan))
    with pytest.raises(FloatingPointError, match=r"Corridor: non-finite .* at step"):
        resumed.train(ROLLOUT)


def test_continuous_jax_env_improves():
    config = TrainConfig(
        ppo=PPOConfig(num_envs=8, n_steps=20, batch_size=80, epochs=4, lr=3e-3, ent_coef=0.0,
                      gamma=0.9),
        eval=EvalConfig(episodes=32),
    )
    trainer = PPOTrainer(Reach(), config, key=0)
    before = trainer.evaluate(deterministic=True).mean_return
    trainer.train(30 * config.ppo.rollout_size)
    after = trainer.evaluate(deterministic=True).mean_return
    # random start |x| ~ U(0, 1): staying put scores about -5; reaching 0 scores about -1.5
    assert after > before + 1.5 and after > -2.5


def test_a_state_continues_exactly_in_another_trainer():
    a = PPOTrainer(Corridor(), CONFIG, key=4)
    a.train(3 * ROLLOUT)
    saved = a.state  # a pytree: what a checkpoint holds
    a.train(2 * ROLLOUT)
    b = PPOTrainer(Corridor(), CONFIG, key=99)
    b.state = saved
    b.train(2 * ROLLOUT)
    assert b.steps == a.steps == 5 * ROLLOUT
    assert _same(a.state.ppo, b.state.ppo) and _same(a.state.tracker, b.state.tracker)
    assert _same(jax.random.key_data(a.state.key), jax.random.key_data(b.state.key))


@pytest.mark.parametrize("backend", ["jax", "gymnasium"])
def test_intrinsic_bonus_is_learned_from_but_not_scored(backend):
    # The first update's rollout is the same with and without the bonus (same params and
    # keys; the bonus does not change actions), so the episode statistics, which score
    # the env's own reward, must be identical; the bonus shows only in bonus_share.
    # Before the fix, training episodes were scored on reward + bonus: every ended
    # episode had a positive return, so success_rate read 1.0 under the bonus.
    config = TrainConfig(ppo=PPOConfig(num_envs=8, n_steps=128, batch_size=256, epochs=1))
    plain = PPOTrainer("MiniGrid-Empty-5x5-v0", config, key=0, backend=backend)
    bonus = PPOTrainer("MiniGrid-Empty-5x5-v0", config, key=0, backend=backend,
                       intrinsic_beta=0.05)
    m_plain = plain.train(config.ppo.rollout_size)[-1]
    m_bonus = bonus.train(config.ppo.rollout_size)[-1]
    for name in ("episodes", "episode_return", "episode_length", "success_rate"):
        np.testing.assert_array_equal(m_bonus[name], m_plain[name], err_msg=name)
    assert float(m_plain["success_rate"]) < 1.0 and int(m_plain["episodes"]) > 0
    assert float(m_plain["bonus_share"]) == 0.0
    # a step pays at least 0.05 / sqrt(100) = 0.005; the env pays < 1 per episode, and
    # most 1,024 steps of a random walk earn nothing extrinsic
    assert 0.5 < float(m_bonus["bonus_share"]) < 1.0
    # evaluation never sees the bonus: same params and key give the same episodes
    params = plain.params
    a, b = plain.evaluate(params, 16, key=1), bonus.evaluate(params, 16, key=1)
    np.testing.assert_array_equal(a.returns, b.returns)
    assert (a.returns <= 1).all()
