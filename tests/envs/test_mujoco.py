"""The MuJoCo env family: friction regimes, the 24-dim sketch, competence SR~, and the
family interface (ids, D, codec, presets)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from telapa.config import ConfigError, load_config, preset_path
from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import bind_env_family, load_run_config
from telapa.envs import default_config, family_of, make
from telapa.envs.family import NormalizedReturn, SuccessRate
from telapa.envs.mujoco import REFERENCE_RETURNS, SKETCH_DIM, reference_return, sketch
from telapa.rl.evaluate import EvalResult


def _actions(env_id: str, n: int, seed: int = 0) -> np.ndarray:
    space = gymnasium.make(env_id).action_space
    rng = np.random.default_rng(seed)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(np.float32)


def _rollout(env: gymnasium.Env, actions: np.ndarray, seed: int = 3) -> np.ndarray:
    """The simulator state (qpos, qvel, float64) after reset and after every action."""
    data = env.unwrapped.data

    def state() -> np.ndarray:
        return np.concatenate([data.qpos, data.qvel]).copy()

    env.reset(seed=seed)
    out = [state()]
    for a in actions:
        env.step(a)
        out.append(state())
    return np.stack(out)


# gymnasium's unmodified HalfCheetah loads its XML's settotalmass, which mujoco 4
# deprecates (telapa.envs.mujoco.UPSTREAM_WARNINGS; our envs load it without)
@pytest.mark.filterwarnings("ignore:MuJoCo. compiler attribute 'settotalmass':RuntimeWarning")
def test_friction_one_is_bit_identical_to_the_unmodified_env():
    family = family_of("HalfCheetah-v5")
    actions = _actions("HalfCheetah-v5", 60)
    plain = gymnasium.make("HalfCheetah-v5")
    ours = family.make_single("HalfCheetah-v5", {"friction": 1.0})
    assert np.array_equal(ours.unwrapped.model.geom_friction, plain.unwrapped.model.geom_friction)
    assert np.array_equal(_rollout(ours, actions), _rollout(plain, actions))


def test_other_frictions_change_the_trajectory_and_scale_only_sliding_friction():
    family = family_of("HalfCheetah-v5")
    actions = _actions("HalfCheetah-v5", 60)
    default = gymnasium.make("HalfCheetah-v5").unwrapped.model.geom_friction.copy()
    base = _rollout(family.make_single("HalfCheetah-v5", {}), actions)
    for scale in (0.5, 1.5):
        env = family.make_single("HalfCheetah-v5", {"friction": scale})
        friction = env.unwrapped.model.geom_friction
        np.testing.assert_array_equal(friction[:, 0], default[:, 0] * scale)
        np.testing.assert_array_equal(friction[:, 1:], default[:, 1:])
        traj = _rollout(env, actions)
        assert np.array_equal(traj[0], base[0])  # same reset
        assert np.abs(traj[-1] - base[-1]).max() > 1e-3, scale


def test_friction_never_leaks_between_instances_or_tasks():
    default = gymnasium.make("Hopper-v5").unwrapped.model.geom_friction.copy()
    low = make("Hopper-v5", "gymnasium", num_envs=2, seed=0, friction=0.5)
    high = make("Hopper-v5", "gymnasium", num_envs=2, seed=0, friction=1.5)
    plain = make("Hopper-v5", "gymnasium", num_envs=1, seed=0)
    for vec, scale in ((low, 0.5), (high, 1.5), (plain, 1.0)):
        for env in vec.envs.envs:
            np.testing.assert_array_equal(env.unwrapped.model.geom_friction[:, 0],
                                          default[:, 0] * scale)
    # an env made after the scaled ones behaves exactly as gymnasium's own
    actions = _actions("Hopper-v5", 40)
    fresh = family_of("Hopper-v5").make_single("Hopper-v5", {})
    assert np.array_equal(_rollout(fresh, actions), _rollout(gymnasium.make("Hopper-v5"), actions))
    assert not np.shares_memory(low.envs.envs[0].unwrapped.model.geom_friction,
                                low.envs.envs[1].unwrapped.model.geom_friction)


def test_sketch_by_hand():
    x = sketch(
        obs=np.array([1.0, -2.0, 3.0, 0.0]), prev_obs=np.array([0.0, 0.0, 1.0, 2.0]),
        action=np.array([0.5, -1.0]), prev_action=np.zeros(2),
        reward=2.0, episode_return=5.0, t=1, time_limit=10, reference_return=20.0,
    )
    # o = [1, -2, 3, 0]: sorted [-2, 0, 1, 3]; dO = [1, -2, 2, -2]; a~ = dA = [0.5, -1]
    expected = [
        0.5, np.sqrt(13 / 4), -2.0, 3.0, 1.5, np.sqrt(14 / 4),
        -0.5, 0.5, 1.5,                                     # q25 = -2 + 0.75 * 2 ...
        -0.25, np.sqrt(12.75 / 4), 1.75, 2.0,
        -0.25, 0.75, -1.0, 0.5, 0.75, np.sqrt(1.25 / 2),
        0.75, np.sqrt(1.25 / 2),
        2.0 * 10 / 20, 5.0 / 20, 2 / 10,
    ]  # fmt: skip
    assert x.shape == (SKETCH_DIM,) == (24,) and x.dtype == np.float32
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_sketch_wrapper_tracks_return_time_and_scaled_actions():
    """InvertedPendulum's actions lie in [-3, 3]: a~ = a / 3; G_t and t accumulate."""
    env_id = "InvertedPendulum-v5"
    env = family_of(env_id).make_single(env_id, {})
    r_star, limit = reference_return(env_id), 1000
    env.reset(seed=0)
    rewards = []
    for a in ([3.0], [-1.5], [6.0]):  # the last is clipped to 3 by the sketch
        _, reward, *_, info = env.step(np.array(a, np.float32))
        rewards.append(reward)
        x = info["features"]
        assert x[15] == x[16] == np.float32(min(a[0], 3.0) / 3)
        np.testing.assert_allclose(x[22], sum(rewards) / r_star, rtol=1e-6)
        np.testing.assert_allclose(x[23], len(rewards) / limit, rtol=1e-6)
    # |dA| of the last step: a~ went from -0.5 to 1
    np.testing.assert_allclose(x[19], 1.5, rtol=1e-6)


def test_competence_is_clipped_normalized_mean_return():
    c = NormalizedReturn(5000.0)
    np.testing.assert_allclose(c(np.array([2500.0, 7500.0, -100.0])), 3300 / 5000, rtol=1e-6)
    assert c(np.array([-5.0, -1.0])) == 0.0 and c(np.array([9000.0])) == 1.0
    np.testing.assert_allclose(c(np.array([[1000.0, 3000.0], [6000.0, 6000.0]])), [0.4, 1.0])
    # c = g(mean f(R)): the form PPO's tracker scores its ended episodes with
    assert c.of_mean_score(np.float32(2500.0)) == 0.5 and c.of_mean_score(np.float32(-1)) == 0
    np.testing.assert_array_equal(c.episode_score(np.array([1.5, -2.0])), [1.5, -2.0])
    sr = SuccessRate()
    np.testing.assert_array_equal(sr.episode_score(np.array([0.3, 0.0, -1.0])), [1, 0, 0])
    assert sr(np.array([0.3, 0.0, -1.0, 2.0])) == 0.5 and sr.of_mean_score(0.25) == 0.25
    result = EvalResult(np.array([1500.0, 4500.0]), np.array([1000, 1000]), np.zeros((2, 1, 24)),
                        NormalizedReturn(reference_return("Hopper-v5")))
    assert result.sr == 1.0 and result.mean_return == 3000.0
    assert EvalResult(np.array([0.0, 1.0]), np.ones(2), np.zeros((2, 1, 11)), sr).sr == 0.5
    with pytest.raises(ValueError, match="must be > 0"):
        NormalizedReturn(0.0)


def test_reference_returns_are_the_papers_and_ant_is_gymnasiums_threshold():
    assert REFERENCE_RETURNS == {"HalfCheetah": 5000.0, "Hopper": 3000.0, "Walker2d": 4000.0,
                                 "Ant": 6000.0}
    assert reference_return("Ant-v5") == gymnasium.spec("Ant-v5").reward_threshold
    assert reference_return("InvertedPendulum-v5") == 950.0  # gymnasium's threshold
    with pytest.raises(ValueError, match="Reacher-v5: no reference return"):
        reference_return("Reacher-v5")  # its threshold is negative


def test_family_interface():
    mujoco, minigrid = family_of("Walker2d-v5"), family_of("MiniGrid-DoorKey-5x5-v0")
    assert (mujoco.name, minigrid.name, family_of("CartPole-v1").name) == (
        "mujoco", "minigrid", "generic")
    assert mujoco.feature_dim("Walker2d-v5") == 24 and minigrid.feature_dim("x") == 11
    assert default_config("Ant-v5") == load_config(preset_path("mujoco"))
    assert default_config("MiniGrid-DoorKey-5x5-v0") == load_config(preset_path("minigrid"))
    env = make("Ant-v5", "gymnasium", num_envs=1, seed=0)
    assert env.spec.feature_dim == 24 and env.spec.action_dim == 8
    # the latent D of a run comes from the family; a preset that contradicts it is an error
    hopper = list(load_curriculum("hopper").task_ids().values())
    config = bind_env_family(load_run_config("mujoco"), hopper)
    assert config.methods.telapa.latent.feature_dim == 24
    assert bind_env_family(load_run_config("quick"), ["MiniGrid-DoorKey-5x5-v0"]) \
        .methods.telapa.latent.feature_dim == 11
    wrong = load_run_config("mujoco").model_copy(deep=True)
    latent = wrong.methods.telapa.latent.model_validate({"feature_dim": 11})
    wrong = wrong.model_copy(update={"methods": wrong.methods.model_copy(update={
        "telapa": wrong.methods.telapa.model_copy(update={"latent": latent})})})
    with pytest.raises(ConfigError, match="feature_dim=11, but the mujoco env family's sketch "
                                          "has D=24"):
        bind_env_family(wrong, hopper)
    beta = load_run_config("mujoco").model_copy(update={"intrinsic_beta": 0.005})
    with pytest.raises(ConfigError, match="count bonus hashes MiniGrid states"):
        bind_env_family(beta, hopper)
    with pytest.raises(ValueError, match="friction must be a number > 0"):
        mujoco.check_options("Hopper-v5", {"friction": "high"})
    with pytest.raises(ValueError, match="Hopper-v5: bad option.*frction"):
        mujoco.check_options("Hopper-v5", {"frction": 0.5})
    mujoco.check_options("Hopper-v5", {"friction": 0.5, "max_episode_steps": 64})


def test_paper_preset_is_the_appendix_table():
    config = load_run_config("mujoco")
    ppo = config.train.ppo
    assert (ppo.lr, ppo.n_steps, ppo.batch_size, ppo.epochs, ppo.gamma, ppo.gae_lambda,
            ppo.clip_coef, ppo.num_envs) == (3e-4, 2048, 256, 10, 0.99, 0.95, 0.2, 8)
    # the paper's 1e6 / 5e4 in whole PPO iterations of 8 x 2048: 60 and 3 (20 chunks)
    assert (config.steps_per_visit, config.eval_every, config.eval_episodes) == (
        983_040, 49_152, 5)
    assert config.train.eval.num_envs == 4
    ill = config.methods.telapa.qd.illumination
    assert (ill.iterations, ill.eval_episodes, ill.sigma0) == (200, 5, 0.02)
    assert config.methods.telapa.latent.latent_dim == 8
