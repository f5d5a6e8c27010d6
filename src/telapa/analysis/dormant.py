"""Dormant units of a policy network (Sokar et al. 2023, "The Dormant Neuron Phenomenon
in Deep Reinforcement Learning"), the measurement behind the presets' tanh units
(docs/assumptions.md, "PPO and networks", "Activation").

On a set of observations X, hidden unit i of a layer with H units and outputs h (after
the activation) has the normalised activity

    s_i = E_x |h_i(x)| / ( (1/H) sum_j E_x |h_j(x)| )

and is tau-dormant when s_i <= tau. tau = 0 (the default) counts the units that output
exactly zero on every observation: ReLU units that never fire, which pass no gradient.
A layer whose units are all zero is wholly dormant. The observations come from
random-action episodes of a task (`random_observations`), so they do not depend on the
policy being measured.

    python -m telapa.analysis.dormant RUN_DIR... [--env ENV_ID] [--tau 0.0]

prints, for the final policy of each run (its latest checkpoint), the dormant fraction of
every hidden layer of the actor and critic towers (and the CNN encoder, if any).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import keystr, tree_flatten_with_path, tree_unflatten

from telapa.envs import make
from telapa.envs.base import AutoReset, Obs
from telapa.pytrees import concatenate
from telapa.rl.networks import ACTIVATIONS, ActorCritic, Params, make_network


def random_observations(env_id: str, *, envs: int = 64, steps: int = 300, every: int = 10,
                        seed: int = 1) -> Obs:
    """Observations of ``envs`` parallel random-action episodes of ``env_id`` (jax port),
    every ``every``-th of ``steps`` steps: ``envs * steps / every`` in all."""
    env = AutoReset(make(env_id), envs)
    state, obs = env.reset(jax.random.key(seed))
    step = jax.jit(env.step)
    key = jax.random.key(seed + 1)
    kept = []
    for t in range(steps):
        key, draw = jax.random.split(key)
        state, obs, *_ = step(state, jax.random.randint(draw, (envs,), 0, env.spec.n_actions))
        if t % every == 0:
            kept.append(obs)
    return concatenate(kept)


def hidden_outputs(network: ActorCritic, params: Params, obs: Obs) -> dict[str, jax.Array]:
    """Module path -> output (after the activation) of every hidden dense layer: those
    inside the actor, critic and encoder; the policy and value heads are not hidden."""
    _, state = network.apply(params, obs, capture_intermediates=lambda m, _: isinstance(
        m, nn.Dense))
    act = ACTIVATIONS[network.activation]
    out = {}
    for path, z in tree_flatten_with_path(state["intermediates"])[0]:
        names = [p.key for p in path if hasattr(p, "key")]
        if len(names) >= 3 and names[0] in ("actor", "critic", "encoder"):
            out[".".join(names[:-1])] = act(z)
    return out


def dormant_fractions(network: ActorCritic, params: Params, obs: Obs, *, tau: float = 0.0
                      ) -> dict[str, float]:
    """Layer -> fraction of its units that are ``tau``-dormant on ``obs`` (module doc)."""
    fractions = {}
    for name, h in hidden_outputs(network, params, obs).items():
        activity = jnp.abs(h).reshape(-1, h.shape[-1]).mean(axis=0)
        mean = activity.mean()
        score = jnp.where(mean > 0, activity / jnp.where(mean > 0, mean, 1.0), 0.0)
        fractions[name] = float((score <= tau).mean())
    return fractions


def checkpoint_params(learner: str | Path, like: Params) -> Params:
    """The policy parameters stored in a run checkpoint's ``learner.npz``, in the structure
    of ``like``; a missing or misshapen leaf is a ValueError naming the file."""
    stored = np.load(learner)
    leaves, treedef = tree_flatten_with_path(like)
    values = []
    for path, leaf in leaves:
        name = ".params" + keystr(path)
        if name not in stored.files or stored[name].shape != leaf.shape:
            raise ValueError(f"{learner}: no policy parameter {name} of shape {leaf.shape}")
        values.append(jnp.asarray(stored[name]))
    return tree_unflatten(treedef, values)


def run_fractions(run: str | Path, env_id: str, obs: Obs, *, tau: float = 0.0
                  ) -> dict[str, float]:
    """`dormant_fractions` of the final policy of the run directory ``run``."""
    from telapa.continual.rundir import RunDir

    run_dir = RunDir(run)
    learner = run_dir.checkpoints.learner_file()
    network = make_network(make(env_id).spec, run_dir.config().train.network)
    like = network.init(jax.random.key(0), jax.tree.map(lambda x: x[:1], obs))
    return dormant_fractions(network, checkpoint_params(learner, like), obs, tau=tau)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR")
    parser.add_argument("--env", default="MiniGrid-DoorKey-8x8-v0",
                        help="task whose random-action observations are used")
    parser.add_argument("--tau", type=float, default=0.0)
    args = parser.parse_args(argv)
    obs = random_observations(args.env)
    print(f"{args.env}: {jax.tree.leaves(obs)[0].shape[0]} observations of random-action "
          f"episodes; fraction of hidden units with s <= {args.tau}")
    for run in args.runs:
        try:
            fractions = run_fractions(run, args.env, obs, tau=args.tau)
        except (ValueError, OSError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"{run}: " + "  ".join(f"{k} {v:.2f}" for k, v in fractions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
