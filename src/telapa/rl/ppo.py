"""PPO (Schulman et al. 2017) update, shared by both env backends.

A rollout of T steps from N envs is a `Trajectory` of (T, N, ...) arrays. `make_learn`
builds the one jitted function that turns it into new parameters:

1. truncation bootstrap: where an episode was truncated (not terminated), the reward
   becomes ``r_t + gamma * V(final_obs_t)`` (as SB3), so GAE can treat every episode end
   as terminal;
2. GAE (Schulman et al. 2016): ``delta_t = r_t + gamma (1 - d_t) V(s_{t+1}) - V(s_t)``,
   ``A_t = delta_t + gamma lambda (1 - d_t) A_{t+1}``, returns ``R_t = A_t + V(s_t)``;
3. ``epochs`` passes over shuffled minibatches minimising
   ``L = L_clip - c_ent H[pi] + c_vf L_V`` with
   ``L_clip = E[max(-A r, -A clip(r, 1-eps, 1+eps))]``, ``r = pi(a|s) / pi_old(a|s)``,
   ``L_V = 0.5 E[(V - R)^2]`` (or, with value clipping,
   ``0.5 E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]``), advantages
   normalised per minibatch, gradients clipped to a global norm, Adam.

Continual-learning regularisers (EWC, L2Init) add ``penalty(params, state.penalty)`` to
``L``; the function is fixed when the update is built and its data (Fisher, anchors)
lives in `PPOState.penalty`, so it can change between tasks without recompiling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from telapa.config import PPOConfig
from telapa.envs.base import Obs
from telapa.envs.family import Competence
from telapa.rl.networks import Params
from telapa.rl.policy import Policy


@struct.dataclass
class Trajectory:
    """One rollout; every leaf is (T, N, ...)."""

    obs: Obs
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: Obs
    """The last observation of an episode that ended at this step (else any filler)."""
    bonus: jax.Array | None = None
    """The part of ``reward`` that is a training bonus (the episodic count bonus,
    `telapa.envs.intrinsic`), or None: none. PPO learns from ``reward``; the episode
    statistics score ``reward - bonus``, the env's own reward (`episode_stats`)."""


Penalty = Callable[[Params, Any], jax.Array]
"""``penalty(params, data) -> scalar`` added to the PPO loss (see `make_learn`)."""


@struct.dataclass
class PPOState:
    params: Params
    opt_state: optax.OptState
    penalty: Any = None
    """Data of the regulariser (a pytree), or None."""


@struct.dataclass
class EpisodeTracker:
    """Running return and length of each env's current episode, (N,) each."""

    ret: jax.Array
    length: jax.Array

    @classmethod
    def zeros(cls, num_envs: int) -> EpisodeTracker:
        return cls(jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, jnp.int32))


def gae(
    rewards: jax.Array,
    values: jax.Array,
    dones: jax.Array,
    last_value: jax.Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimates and returns for (T, N) arrays.

    ``dones[t]`` means the episode ended at step t, so ``values[t + 1]`` (or
    ``last_value`` after the last step) belongs to a new episode and is not bootstrapped.
    """
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    not_done = 1.0 - dones.astype(jnp.float32)
    deltas = rewards + gamma * not_done * next_values - values

    def backward(adv_next, xs):
        delta, nd = xs
        adv = delta + gamma * gae_lambda * nd * adv_next
        return adv, adv

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(last_value), (deltas, not_done), reverse=True
    )
    return advantages, advantages + values


def advantages(
    policy: Policy, params: Params, traj: Trajectory, last_obs: Obs, config: PPOConfig
) -> tuple[jax.Array, jax.Array]:
    """GAE advantages and returns of a rollout, rewards scaled by ``reward_scale`` and
    truncated episodes bootstrapped with ``gamma * V(final_obs)``."""
    reward = traj.reward.astype(jnp.float32) * config.reward_scale
    truncated_only = (traj.truncated & ~traj.terminated).astype(jnp.float32)
    reward = reward + config.gamma * truncated_only * policy.value(params, traj.final_obs)
    done = traj.terminated | traj.truncated
    last_value = policy.value(params, last_obs)
    return gae(reward, traj.value, done, last_value, config.gamma, config.gae_lambda)


def ppo_loss(
    policy: Policy,
    params: Params,
    batch: dict[str, Any],
    config: PPOConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The clipped PPO objective on one minibatch (see module docstring)."""
    dist, value = policy(params, batch["obs"])
    log_prob = dist.log_prob(batch["action"])
    log_ratio = log_prob - batch["log_prob"]
    ratio = jnp.exp(log_ratio)

    adv = batch["advantage"]
    if config.norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    eps = config.clip_coef
    pg_loss = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1.0 - eps, 1.0 + eps)).mean()

    v_err = (value - batch["return"]) ** 2
    if config.clip_vloss:
        v_clipped = batch["value"] + jnp.clip(value - batch["value"], -eps, eps)
        v_err = jnp.maximum(v_err, (v_clipped - batch["return"]) ** 2)
    v_loss = 0.5 * v_err.mean()

    entropy = dist.entropy().mean()
    loss = pg_loss - config.ent_coef * entropy + config.vf_coef * v_loss
    aux = {
        "loss": loss,
        "pg_loss": pg_loss,
        "v_loss": v_loss,
        "entropy": entropy,
        # k3 estimator of KL(pi_old || pi) (Schulman's "approximating KL divergence").
        "approx_kl": ((ratio - 1.0) - log_ratio).mean(),
        "clipfrac": (jnp.abs(ratio - 1.0) > eps).mean(),
    }
    return loss, aux


def make_optimizer(
    config: PPOConfig, total_updates: int | None = None
) -> optax.GradientTransformation:
    """Global-norm clipping then Adam; lr linearly annealed to 0 over ``total_updates``."""
    lr: float | optax.Schedule = config.lr
    if config.anneal_lr:
        if not total_updates:
            raise ValueError("anneal_lr needs the total number of training steps")
        n_grad_steps = total_updates * config.epochs * (config.rollout_size // config.batch_size)
        lr = optax.linear_schedule(config.lr, 0.0, n_grad_steps)
    # One flat vector for the whole update: Adam and the norm run as a few fused ops
    # instead of several per parameter array (about 5% of a small-minibatch PPO update
    # on CPU, where each kernel launch costs about as much as its arithmetic).
    return optax.flatten(
        optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm),
            optax.adam(lr, eps=config.adam_eps),
        )
    )


def episode_stats(
    tracker: EpisodeTracker, reward: jax.Array, done: jax.Array, competence: Competence
) -> tuple[EpisodeTracker, dict[str, jax.Array]]:
    """Count, mean return, mean length and the env family's ``competence`` of the
    episodes that ended in a (T, N) rollout (NaN means when none ended).

    ``success_rate`` is ``g(mean_e f(R_e))`` over the ended episodes (`Competence`): the
    score an evaluation of exactly those episodes would give."""

    def step(tr: EpisodeTracker, xs):
        r, d = xs
        ret, length = tr.ret + r, tr.length + 1
        ended = {
            "episodes": d.sum(),
            "return_sum": jnp.where(d, ret, 0.0).sum(),
            "length_sum": jnp.where(d, length, 0).sum(),
            "score_sum": jnp.where(d, competence.episode_score(ret), 0.0).sum(),
        }
        return EpisodeTracker(jnp.where(d, 0.0, ret), jnp.where(d, 0, length)), ended

    tracker, per_step = jax.lax.scan(step, tracker, (reward.astype(jnp.float32), done))
    n, ret, length, score = (
        jnp.sum(per_step[k]) for k in ("episodes", "return_sum", "length_sum", "score_sum")
    )

    def mean(x):
        return jnp.where(n > 0, x / jnp.maximum(n, 1), jnp.nan)

    return tracker, {
        "episodes": n,
        "episode_return": mean(ret),
        "episode_length": mean(length),
        "success_rate": competence.of_mean_score(mean(score)),
    }


def bonus_share(reward: jax.Array, bonus: jax.Array) -> jax.Array:
    """The training bonus's share of a rollout's reward, ``sum_t,i b_t,i / sum_t,i r_t,i``
    (``r`` the reward PPO learns from, ``b`` the bonus part of it); 0 where the rollout
    earned no reward (and always 0 without a bonus)."""
    total, part = jnp.sum(reward), jnp.sum(bonus)
    return jnp.where(total != 0, part / jnp.where(total != 0, total, 1.0), 0.0)


def make_learn(
    policy: Policy,
    config: PPOConfig,
    optimizer: optax.GradientTransformation,
    penalty: Penalty | None = None,
    *,
    competence: Competence,
) -> Callable[..., tuple[PPOState, EpisodeTracker, dict[str, jax.Array]]]:
    """``learn(state, tracker, traj, last_obs, key) -> (state, tracker, metrics)``.

    The single PPO update used by both backends (pure; jit it or call it in a scan).
    With ``penalty``, each minibatch minimises ``L + penalty(params, state.penalty)``.
    The metrics score the training episodes that ended with the env family's
    ``competence`` (`episode_stats`), on the env's own reward: a training bonus in the
    reward (``traj.bonus``) is left out of their returns and success rate, and reported
    as ``bonus_share`` (`bonus_share`).
    """
    n_minibatches = config.rollout_size // config.batch_size

    def loss_fn(params: Params, penalty_data: Any, batch: dict[str, Any]):
        loss, aux = ppo_loss(policy, params, batch, config)
        if penalty is not None:
            aux["penalty"] = penalty(params, penalty_data)
            loss = loss + aux["penalty"]
        return loss, aux

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def sgd_step(state: PPOState, batch):
        (_, aux), grads = grad_fn(state.params, state.penalty, batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        aux["grad_norm"] = optax.tree_utils.tree_norm(grads)
        params = optax.apply_updates(state.params, updates)
        return state.replace(params=params, opt_state=opt_state), aux

    def epoch(state: PPOState, key, data):
        perm = jax.random.permutation(key, config.rollout_size)
        minibatches = jax.tree.map(
            lambda x: x[perm].reshape((n_minibatches, config.batch_size) + x.shape[1:]), data
        )
        return jax.lax.scan(sgd_step, state, minibatches)

    def learn(state: PPOState, tracker: EpisodeTracker, traj: Trajectory, last_obs: Obs, key):
        done = traj.terminated | traj.truncated
        reward = traj.reward.astype(jnp.float32)
        bonus = jnp.zeros_like(reward) if traj.bonus is None else traj.bonus.astype(jnp.float32)
        tracker, ep = episode_stats(tracker, reward - bonus, done, competence)
        ep["bonus_share"] = bonus_share(reward, bonus)

        advantage, returns = advantages(policy, state.params, traj, last_obs, config)

        data = {
            "obs": traj.obs,
            "action": traj.action,
            "log_prob": traj.log_prob,
            "value": traj.value,
            "advantage": advantage,
            "return": returns,
        }
        data = jax.tree.map(lambda x: x.reshape((config.rollout_size,) + x.shape[2:]), data)
        state, aux = jax.lax.scan(
            lambda s, k: epoch(s, k, data), state, jax.random.split(key, config.epochs)
        )
        metrics = {k: v.mean() for k, v in aux.items()}
        metrics.update(ep)
        metrics["explained_var"] = 1.0 - jnp.var(returns - traj.value) / (jnp.var(returns) + 1e-8)
        return state, tracker, metrics

    return learn
