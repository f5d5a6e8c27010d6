"""CleanRL-style single-file PPO (JAX: flax + optax) on telapa's JAX MiniGrid port.

The only telapa-specific lines are the import that registers ``telapa/<Id>`` and the id:
the env is made with ``gymnasium.make_vec`` and used as any gymnasium ``VectorEnv``
(Farama's observation dict, ``NEXT_STEP`` autoreset). ``--env-id MiniGrid-DoorKey-8x8-v0``
runs the same script on Farama's envs (a ``SyncVectorEnv``).

    python examples/cleanrl_ppo_minigrid.py --total-timesteps 500000

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
import minigrid  # noqa: F401  (Farama's ids, to compare: --env-id MiniGrid-DoorKey-8x8-v0)
import numpy as np
import optax

import telapa.envs  # noqa: F401  (registers telapa/<Farama id>)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-id", default="telapa/MiniGrid-DoorKey-8x8-v0")
    p.add_argument("--vectorization-mode", default=None)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=500_000)
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    return p.parse_args()


def features(image: jax.Array, direction: jax.Array) -> jax.Array:
    """The image's codes scaled to [0, 1] and the direction one-hot."""
    flat = image.reshape(image.shape[0], -1).astype(jnp.float32) / 10.0
    return jnp.concatenate([flat, jax.nn.one_hot(direction, 4)], axis=-1)


class ActorCritic(nn.Module):
    n_actions: int

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def mlp(h, out, scale):
            for _ in range(2):
                h = nn.tanh(nn.Dense(64, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(h))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(h)

        return mlp(x, self.n_actions, 0.01), mlp(x, 1, 1.0)[..., 0]


def main() -> None:
    args = parse_args()
    batch = args.num_envs * args.num_steps
    minibatch = batch // args.num_minibatches
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs,
                        vectorization_mode=args.vectorization_mode)
    n_actions = int(envs.single_action_space.n)
    model = ActorCritic(n_actions)
    key = jax.random.PRNGKey(args.seed)
    key, init_key = jax.random.split(key)
    obs, _ = envs.reset(seed=args.seed)
    params = model.init(init_key, features(jnp.asarray(obs["image"]),
                                           jnp.asarray(obs["direction"])))
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(args.learning_rate, eps=1e-5))
    opt_state = tx.init(params)

    @jax.jit
    def act(params, image, direction, key):
        logits, value = model.apply(params, features(image, direction))
        action = jax.random.categorical(key, logits)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
        return action, logprob, value

    def loss_fn(params, b):
        logits, value = model.apply(params, features(b["image"], b["direction"]))
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, b["action"][:, None], -1)[:, 0]
        ratio = jnp.exp(logp - b["logprob"])
        adv = b["advantage"]
        w = b["valid"] / jnp.maximum(b["valid"].sum(), 1.0)
        adv = (adv - (adv * w).sum()) / (jnp.sqrt((w * (adv - (adv * w).sum()) ** 2).sum())
                                         + 1e-8)
        pg = jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, 1 - args.clip_coef,
                                                       1 + args.clip_coef))
        v_loss = 0.5 * (value - b["return"]) ** 2
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1)
        return ((pg + args.vf_coef * v_loss - args.ent_coef * entropy) * w).sum()

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
    episode_return = np.zeros(args.num_envs)
    returns: list[float] = []
    start, step = time.time(), 0
    for iteration in range(1, args.total_timesteps // batch + 1):
        buf = {k: [] for k in ("image", "direction", "action", "logprob", "value", "reward",
                               "terminated", "ended", "valid")}
        for _ in range(args.num_steps):
            key, k = jax.random.split(key)
            action, logprob, value = act(params, obs["image"], obs["direction"], k)
            next_obs, reward, terminated, truncated, _ = envs.step(np.asarray(action))
            step += args.num_envs
            for name, x in (("image", obs["image"]), ("direction", obs["direction"]),
                            ("action", action), ("logprob", logprob), ("value", value),
                            ("reward", reward), ("terminated", terminated),
                            ("ended", terminated | truncated), ("valid", ~ended)):
                buf[name].append(np.asarray(x))
            episode_return += np.where(ended, 0.0, reward)
            ended = terminated | truncated
            returns += episode_return[ended].tolist()
            episode_return[ended] = 0.0
            obs = next_obs
        b = {k: np.stack(v) for k, v in buf.items()}
        _, _, last_value = act(params, obs["image"], obs["direction"], key)
        advantage, ret = gae(*(jnp.asarray(b[k], jnp.float32) for k in ("reward", "value")),
                             last_value, *(jnp.asarray(b[k], jnp.float32)
                                           for k in ("terminated", "ended")))
        flat = {k: jnp.asarray(v).reshape(batch, *v.shape[2:]) for k, v in b.items()}
        flat.update(advantage=advantage.reshape(-1), **{"return": ret.reshape(-1)})
        flat["valid"] = flat["valid"].astype(jnp.float32)
        for _ in range(args.update_epochs):
            key, k = jax.random.split(key)
            order = jax.random.permutation(k, batch)
            for i in range(0, batch, minibatch):
                idx = order[i : i + minibatch]
                params, opt_state = update(params, opt_state,
                                           {n: v[idx] for n, v in flat.items()})
        recent = np.mean(returns[-100:]) if returns else float("nan")
        print(f"iteration {iteration} step {step} episodes {len(returns)} "
              f"mean return (last 100) {recent:.3f} SPS {int(step / (time.time() - start))}")
    envs.close()


if __name__ == "__main__":
    main()
