"""CleanRL-style single-file PPO (JAX: flax + optax) with continuous actions on telapa's
native MuJoCo batch.

The only telapa-specific lines are the import that registers ``telapa/<Id>`` and the id:
``gymnasium.make_vec("telapa/HalfCheetah-v5")`` is gymnasium's own ``SyncVectorEnv`` of
the v5 env step for step (docs/gym-vector.md), stepped in C on the process's cores, and
gymnasium's vector wrappers (action clipping, observation and reward normalization,
episode statistics) apply as to any ``VectorEnv``. ``--env-id HalfCheetah-v5`` runs the
same script on gymnasium's envs; ``--friction 0.5`` on a slippery floor.

    python examples/cleanrl_ppo_mujoco.py --total-timesteps 1000000

``NEXT_STEP`` autoreset: after a step that ends an episode, the next step resets that
env (its action is ignored, reward 0); that transition belongs to no episode and is
masked out of the loss (``valid``). A truncated episode is bootstrapped from the value of
its last observation, which that mode returns at the ending step.
"""

from __future__ import annotations

import argparse
import time

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax

import telapa.envs  # noqa: F401  (registers telapa/<Id>)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-id", default="telapa/HalfCheetah-v5")
    p.add_argument("--friction", type=float, default=None,
                   help="scale of every geom's sliding friction (telapa/<Id> only)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=256)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=32)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    return p.parse_args()


def make_envs(args: argparse.Namespace) -> gym.vector.VectorEnv:
    """The env with CleanRL's continuous-control wrappers, as vector wrappers."""
    extra = {} if args.friction is None else {"friction": args.friction}
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, **extra)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = gym.wrappers.vector.ClipAction(envs)
    envs = gym.wrappers.vector.NormalizeObservation(envs)
    envs = gym.wrappers.vector.TransformObservation(envs, lambda o: np.clip(o, -10, 10))
    envs = gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma)
    return gym.wrappers.vector.TransformReward(envs, lambda r: np.clip(r, -10, 10))


class ActorCritic(nn.Module):
    """The Gaussian policy's mean and the value, two 64x64 tanh MLPs; a state-independent
    log standard deviation."""

    action_dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        def mlp(h, out, scale):
            for _ in range(2):
                h = nn.tanh(nn.Dense(64, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(h))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(h)

        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        return mlp(x, self.action_dim, 0.01), log_std, mlp(x, 1, 1.0)[..., 0]


def log_prob(mean: jax.Array, log_std: jax.Array, action: jax.Array) -> jax.Array:
    """log N(action; mean, exp(log_std)^2), summed over the action's dimensions."""
    z = (action - mean) / jnp.exp(log_std)
    return (-0.5 * z**2 - log_std - 0.5 * jnp.log(2 * jnp.pi)).sum(-1)


def main() -> None:
    args = parse_args()
    batch = args.num_envs * args.num_steps
    minibatch = batch // args.num_minibatches
    envs = make_envs(args)
    action_dim = int(np.prod(envs.single_action_space.shape))
    model = ActorCritic(action_dim)
    key = jax.random.PRNGKey(args.seed)
    key, init_key = jax.random.split(key)
    obs, _ = envs.reset(seed=args.seed)
    params = model.init(init_key, jnp.asarray(obs, jnp.float32))
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(args.learning_rate, eps=1e-5))
    opt_state = tx.init(params)

    @jax.jit
    def act(params, obs, key):
        mean, log_std, value = model.apply(params, obs)
        action = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return action, log_prob(mean, log_std, action), value

    def loss_fn(params, b):
        mean, log_std, value = model.apply(params, b["obs"])
        ratio = jnp.exp(log_prob(mean, log_std, b["action"]) - b["logprob"])
        adv = b["advantage"]
        w = b["valid"] / jnp.maximum(b["valid"].sum(), 1.0)
        adv = (adv - (adv * w).sum()) / (jnp.sqrt((w * (adv - (adv * w).sum()) ** 2).sum())
                                         + 1e-8)
        pg = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - args.clip_coef,
                                                       1 + args.clip_coef))
        v_loss = 0.5 * (value - b["return"]) ** 2
        entropy = (log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e)).sum()
        return ((pg + args.vf_coef * v_loss) * w).sum() - args.ent_coef * entropy

    @jax.jit
    def update(params, opt_state, b):
        grads = jax.grad(loss_fn)(params, b)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    @jax.jit
    def gae(rewards, values, last_value, terminated, ended):
        next_values = jnp.concatenate([values[1:], last_value[None]])

        def back(adv, t):
            r, v, nv, term, end = t
            delta = r + args.gamma * nv * (1.0 - term) - v
            adv = delta + args.gamma * args.gae_lambda * (1.0 - end) * adv
            return adv, adv

        _, adv = jax.lax.scan(back, jnp.zeros_like(last_value),
                              (rewards, values, next_values, terminated, ended), reverse=True)
        return adv, adv + values

    ended = np.zeros(args.num_envs, bool)  # the previous step ended the episode
    returns: list[float] = []
    start, step = time.time(), 0
    for iteration in range(1, args.total_timesteps // batch + 1):
        buf = {k: [] for k in ("obs", "action", "logprob", "value", "reward", "terminated",
                               "ended", "valid")}
        for _ in range(args.num_steps):
            key, k = jax.random.split(key)
            action, logprob, value = act(params, jnp.asarray(obs, jnp.float32), k)
            next_obs, reward, terminated, truncated, info = envs.step(np.asarray(action))
            step += args.num_envs
            for name, x in (("obs", obs), ("action", action), ("logprob", logprob),
                            ("value", value), ("reward", reward), ("terminated", terminated),
                            ("ended", terminated | truncated), ("valid", ~ended)):
                buf[name].append(np.asarray(x))
            ended = terminated | truncated
            if "episode" in info:  # the unnormalized returns of the episodes that ended
                returns += info["episode"]["r"][info["_episode"]].tolist()
            obs = next_obs
        b = {k: np.stack(v) for k, v in buf.items()}
        _, _, last_value = act(params, jnp.asarray(obs, jnp.float32), key)
        advantage, ret = gae(*(jnp.asarray(b[k], jnp.float32) for k in ("reward", "value")),
                             last_value, *(jnp.asarray(b[k], jnp.float32)
                                           for k in ("terminated", "ended")))
        flat = {k: jnp.asarray(v, jnp.float32).reshape(batch, *v.shape[2:])
                for k, v in b.items()}
        flat.update(advantage=advantage.reshape(-1), **{"return": ret.reshape(-1)})
        for _ in range(args.update_epochs):
            key, k = jax.random.split(key)
            order = jax.random.permutation(k, batch)
            for i in range(0, batch, minibatch):
                idx = order[i : i + minibatch]
                params, opt_state = update(params, opt_state,
                                           {n: v[idx] for n, v in flat.items()})
        recent = np.mean(returns[-20:]) if returns else float("nan")
        print(f"iteration {iteration} step {step} episodes {len(returns)} "
              f"mean return (last 20) {recent:.1f} SPS {int(step / (time.time() - start))}")
    envs.close()


if __name__ == "__main__":
    main()
