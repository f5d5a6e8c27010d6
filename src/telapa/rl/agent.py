"""PPO as a static `Agent` and an explicit `TrainState` (the PureJaxRL / rejax split).

    agent = Agent("MiniGrid-DoorKey-5x5-v0", config)
    state = agent.start(agent.init_ppo(jax.random.key(0)), jax.random.key(1))
    state, history = agent.train(state, 200_000)        # pure in ``state``
    result = agent.evaluate(state.ppo.params, episodes=50, key=jax.random.key(2))

The agent holds what never changes during training: the env, its spec and family, the
policy, the optimizer and the jitted functions built from them. Everything that does
change is the `TrainState` pytree the caller owns: the PPO state (parameters, optimizer,
regulariser data), the rollout in progress (episode tracker, env states, observations,
rollout key) and the env steps trained since `start`. Given a state, `train` is
deterministic, so checkpointing a state and training it later gives exactly what training
it at once gives.

One training iteration collects ``num_envs * n_steps`` env steps with the current policy
and applies one PPO update (`telapa.rl.ppo.make_learn`). On the jax backend
``iterations_per_call`` iterations (rollout ``lax.scan`` + update) run as one jitted
``lax.scan``, and `train_batch` runs S states (seeds, transfer probes) as one ``vmap`` of
that call. `train_and_evaluate` is the continual runner's program: the PPO iterations of
one evaluation chunk (one ``lax.scan``) and the evaluation that ends it, for S stacked
states (``vmap``ped over them), as one jitted call whose results reach the host in one
transfer (`fetch`). On the gymnasium backend the envs live on the host: the rollout is a host loop
over the agent's `GymVectorEnv`, so a state has no env states (``env_state`` is None), it
is valid only for the agent that produced it and only one state trains at a time.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.config import TrainConfig
from telapa.envs import AutoReset, Backend, make
from telapa.envs.base import EnvSpec, JaxEnv, Obs
from telapa.envs.family import Competence
from telapa.envs.gym_backend import GymVectorEnv
from telapa.envs.intrinsic import EpisodicCountBonus, episodic_count_bonus_gym
from telapa.envs.registry import family_of
from telapa.rl.evaluate import (
    EvalResult,
    evaluate_gym,
    make_jax_evaluator,
    make_population_evaluator,
)
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.ppo import (
    EpisodeTracker,
    Penalty,
    PPOState,
    Trajectory,
    make_learn,
    make_optimizer,
)
from telapa.rl.rollout import gym_rollout, make_act, make_jax_rollout

Metrics = dict[str, float]
ProgressFn = Callable[[int, list[Metrics]], None]
BatchProgressFn = Callable[[int, list[list[Metrics]]], None]

MAX_GYM_EVAL_ENVS = 16

MEMBER_AXIS = "members"
"""The name of the ``vmap`` axis over the states of a batch (`train_batch`,
`train_and_evaluate`): `AutoReset` shares its level draws' branches over it."""

LOSS_METRICS = ("loss", "pg_loss", "v_loss", "grad_norm")
"""The metrics whose non-finite value stops training (FloatingPointError)."""

DIVERGENCE_SETTINGS = (("lr", "the learning rate", 1e-2),
                       ("reward_scale", "the reward scale", 1e3),
                       ("max_grad_norm", "the gradient norm clip", 1e3),
                       ("vf_coef", "the value loss weight", 1e3),
                       ("ent_coef", "the entropy weight", 1e3))
"""PPO settings that make losses overflow when they are large, each with the value above
which it is unusual (the presets use lr <= 1e-3, reward_scale 1, max_grad_norm 0.5,
vf_coef 0.5, ent_coef <= 0.01): a non-finite loss names those past it as its likely cause
(`divergence_hint`)."""


def divergence_hint(config: TrainConfig) -> str:
    """What a non-finite loss most likely comes from: the `DIVERGENCE_SETTINGS` of
    ``config`` past their usual range, with their values, or else the learning rate."""
    ppo = config.ppo
    unusual = [f"ppo.{key}={getattr(ppo, key):g} ({what}; usually at most {bound:g})"
               for key, what, bound in DIVERGENCE_SETTINGS if getattr(ppo, key) > bound]
    if unusual:
        return f"likely cause: {', '.join(unusual)}"
    return f"no PPO setting is unusual; try a smaller learning rate (ppo.lr={ppo.lr:g})"


def fetch(tree: Any) -> Any:
    """Device arrays -> host arrays, in one transfer: the one place where
    `train_and_evaluate` reads results back (tests count its calls)."""
    return jax.device_get(tree)


class BatchMemberError(FloatingPointError):
    """A non-finite loss in member ``member`` of `Agent.train_batch` (``error``: the
    FloatingPointError that member alone would have raised)."""

    def __init__(self, member: int, error: FloatingPointError):
        super().__init__(f"batch member {member}: {error}")
        self.member, self.error = member, error


@struct.dataclass
class TrainState:
    """Everything PPO training changes (a pytree; stack S of them for `Agent.train_batch`)."""

    ppo: PPOState
    tracker: EpisodeTracker
    """Return and length of every training env's episode in progress."""
    env_state: Any
    """The training envs' states (None on the gymnasium backend: they live on the host)."""
    obs: Obs
    """The training envs' current observations."""
    key: jax.Array
    """The rollout's key (actions, PPO minibatch permutations)."""
    steps: jax.Array
    """int32: env steps trained since `Agent.start` (all envs together)."""


def stack_states(states: Sequence[Any]) -> Any:
    """S pytrees of the same structure -> one pytree with a leading axis S."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def unstack_states(stacked: Any) -> list[Any]:
    """Inverse of `stack_states`."""
    size = len(jax.tree.leaves(stacked)[0])
    return [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(size)]


def episodes_key(key: jax.Array) -> jax.Array:
    """The key of fresh training episodes drawn from a visit's (or a probe's) key:
    ``split(split(key)[0])[1]``. This is the derivation of the stateful trainer that the
    continual runner used before its state became explicit (reseed, then reset the
    rollout), kept so that runs reproduce the results of earlier versions bit for bit."""
    return jax.random.split(jax.random.split(key)[0])[1]


@dataclasses.dataclass(frozen=True)
class ChunkResult:
    """What `train_and_evaluate` brings back to the host for S states."""

    metrics: list[list[Metrics]]
    """Per state, one metrics dict per PPO iteration (as `train` returns them)."""
    evaluations: list[EvalResult]
    """Per state, the evaluation of its parameters after the training (empty without
    evaluation episodes)."""


def _host_metrics(stacked: dict[str, Any]) -> list[Metrics]:
    """(K,)-stacked metrics -> K host dicts."""
    host = jax.device_get(stacked)
    k = len(next(iter(host.values())))
    return [{name: float(v[i]) for name, v in host.items()} for i in range(k)]


def _shape_key(tree: Any) -> tuple:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple((np.shape(x), str(getattr(x, "dtype", type(x)))) for x in leaves)


class Agent:
    """PPO on one environment, without state; see the module docstring.

    Args:
        env: an env id (created on ``backend``), a `JaxEnv`, or a `GymVectorEnv` (its
            ``num_envs`` must equal ``config.ppo.num_envs``).
        config: the `TrainConfig` (network, PPO, evaluation).
        backend: ``"jax"`` or ``"gymnasium"`` when ``env`` is an id.
        total_steps: the training horizon, needed only for ``ppo.anneal_lr``.
        env_options: options for `telapa.envs.make` when ``env`` is an id.
        penalty: a regulariser added to the PPO loss (`telapa.rl.ppo.make_learn`); its
            data is ``TrainState.ppo.penalty``.
        intrinsic_beta: adds the episodic count bonus (`telapa.envs.intrinsic`) to the
            training rewards (never to evaluation); training-episode returns then
            include the bonus.
        gym_seed: the seed a gymnasium vector env is created with (every training reset
            reseeds it from the state's key, so results do not depend on it).
        competence: the score of a set of returns (a curriculum task's ``success``);
            None: the env family's (`EnvFamily.competence`).
    """

    def __init__(
        self,
        env: str | JaxEnv | GymVectorEnv,
        config: TrainConfig,
        *,
        backend: Backend = "jax",
        total_steps: int | None = None,
        env_options: dict[str, Any] | None = None,
        penalty: Penalty | None = None,
        intrinsic_beta: float | None = None,
        gym_seed: int = 0,
        competence: Competence | None = None,
    ):
        self.config = config
        ppo = config.ppo
        self.env_options = dict(env_options or {})
        train_env = None
        if isinstance(env, str):
            if backend == "gymnasium":
                bonus = intrinsic_beta and partial(episodic_count_bonus_gym, beta=intrinsic_beta)
                env = make(env, "gymnasium", num_envs=ppo.num_envs, seed=gym_seed,
                           wrapper=bonus or None, **self.env_options)
            else:
                env = make(env, backend, **self.env_options)
                if intrinsic_beta:
                    train_env = EpisodicCountBonus(env, intrinsic_beta)
        elif intrinsic_beta:
            raise ValueError("intrinsic_beta needs an env id (the agent wraps the env)")
        self.backend: Backend = "gymnasium" if isinstance(env, GymVectorEnv) else "jax"
        if self.backend == "gymnasium" and env.num_envs != ppo.num_envs:
            raise ValueError(f"env has {env.num_envs} copies but ppo.num_envs={ppo.num_envs}")
        self.env = env
        self.spec: EnvSpec = env.spec
        self.family = family_of(self.spec.env_id)
        """The env family (`telapa.envs.family`): competence, sketch, trajectory codec."""
        self.competence = competence or self.family.competence(self.spec.env_id)
        self.policy = Policy.create(self.spec, config.network)
        total_updates = math.ceil(total_steps / ppo.rollout_size) if total_steps else None
        self.optimizer = make_optimizer(ppo, total_updates)
        self.penalty = penalty
        self._learn = make_learn(self.policy, ppo, self.optimizer, penalty,
                                 competence=self.competence)
        self.iterations_per_call = ppo.iterations_per_call if self.backend == "jax" else 1
        self.steps_per_call = ppo.rollout_size * self.iterations_per_call
        """Env steps of one training call (`train` trains whole calls)."""
        self.compile_s = 0.0
        """Seconds spent compiling training calls (excluded from throughput)."""
        self._compiled: dict[tuple, Callable] = {}
        self._jax_evaluators: dict[tuple[int, bool, int], Callable] = {}
        self._gym_acts: dict[bool, Callable] = {}
        self._gym_eval_env: GymVectorEnv | None = None
        self._samplers: dict[int, Callable] = {}
        self._programs: dict[Any, Callable] = {}
        if self.backend == "jax":
            self._train_env = AutoReset(train_env or env, ppo.num_envs)
            self._reset = jax.jit(self._train_env.reset)

    # --- state ----------------------------------------------------------------------

    def init_ppo(self, key: jax.Array, penalty: Any = None) -> PPOState:
        """Fresh random parameters, fresh optimizer state and the regulariser ``penalty``."""
        return self.fresh_ppo(self.policy.init(key), penalty)

    def fresh_ppo(self, params: Params, penalty: Any = None) -> PPOState:
        """``params`` with fresh Adam moments (and lr schedule) and ``penalty`` data."""
        return PPOState(params, self.optimizer.init(params), penalty)

    def start(self, ppo: PPOState, key: jax.Array, *, steps: int = 0) -> TrainState:
        """A state that trains ``ppo`` from new episodes in every training env: ``key,
        reset_key = split(key)`` on jax (``reset_key, key`` on gymnasium, whose envs are
        reset here, on the host); the tracker starts empty and the step count at
        ``steps``."""
        steps = jnp.asarray(steps, jnp.int32)
        tracker = EpisodeTracker.zeros(self.config.ppo.num_envs)
        if self.backend == "jax":
            key, reset_key = jax.random.split(key)
            env_state, obs = self._reset(reset_key)
            return TrainState(ppo, tracker, env_state, obs, key, steps)
        reset_key, key = jax.random.split(key)
        _, obs = self.env.reset(reset_key)
        return TrainState(ppo, tracker, None, obs, key, steps)

    # --- training -------------------------------------------------------------------

    def _training(self, iterations: int, batch_axes: tuple[str, ...] = ()) -> Callable:
        """``train(state) -> (state, metrics)``: ``iterations`` PPO iterations (a rollout
        of ``n_steps`` steps in every env, then one PPO update) as one ``lax.scan``
        (pure); ``batch_axes``: the ``vmap`` axes it runs under (`AutoReset.step`)."""
        rollout = make_jax_rollout(self._train_env, self.policy, self.config.ppo.n_steps,
                                   batch_axes=batch_axes)

        def iteration(state: TrainState, _) -> tuple[TrainState, dict[str, jax.Array]]:
            env_state, obs, key, traj = rollout(
                state.ppo.params, state.env_state, state.obs, state.key
            )
            key, learn_key = jax.random.split(key)
            ppo, tracker, metrics = self._learn(state.ppo, state.tracker, traj, obs, learn_key)
            steps = state.steps + self.config.ppo.rollout_size
            return TrainState(ppo, tracker, env_state, obs, key, steps), metrics

        return lambda state: jax.lax.scan(iteration, state, None, iterations)

    def _compile(self, key: tuple, fn: Callable, *args: Any) -> Callable:
        """``jit(fn)`` compiled ahead of time for ``args`` once per ``key``; the seconds
        go to `compile_s`."""
        if key not in self._compiled:
            start = time.perf_counter()
            self._compiled[key] = jax.jit(fn).lower(*args).compile()
            self.compile_s += time.perf_counter() - start
        return self._compiled[key]

    def _compiled_call(self, state: TrainState, batched: bool) -> Callable:
        """The jitted (and for a batch, vmapped) training call of ``iterations_per_call``
        iterations for ``state``'s shapes."""
        k = self.iterations_per_call
        if batched:
            fn = jax.vmap(self._training(k, (MEMBER_AXIS,)), axis_name=MEMBER_AXIS)
        else:
            fn = self._training(k)
        return self._compile(("call", batched, *_shape_key(state)), fn, state)

    def compile(self, state: TrainState) -> float:
        """Compiles the training call for ``state`` now (else the first `train` does);
        returns `compile_s`."""
        if self.backend == "jax":
            self._compiled_call(state, batched=False)
        else:
            self._gym_compile(state)
        return self.compile_s

    def train(
        self, state: TrainState, steps: int, progress: ProgressFn | None = None
    ) -> tuple[TrainState, list[Metrics]]:
        """Trains ``state`` for at least ``steps`` env steps (whole calls); returns the new
        state and one metrics dict per iteration (with ``step``, the state's step count
        after the iteration). ``progress(steps, metrics)`` is called after every call.
        Raises FloatingPointError on a non-finite loss or gradient."""
        if self.backend == "gymnasium":
            return self._gym_train(state, steps, progress)
        call = self._compiled_call(state, batched=False)
        done = int(state.steps)
        target = done + steps
        history: list[Metrics] = []
        while done < target:
            state, metrics = call(state)
            metrics = self._finish(_host_metrics(metrics), done)
            done = metrics[-1]["step"]
            history.extend(metrics)
            if progress is not None:
                progress(done, metrics)
        return state, history

    def train_batch(
        self, states: TrainState, steps: int, progress: BatchProgressFn | None = None
    ) -> tuple[TrainState, list[list[Metrics]]]:
        """`train` for S states stacked on a leading axis (`stack_states`), as one jitted
        ``vmap`` per call; every state must have trained the same number of steps. Returns
        the stacked states and each member's metrics. Member i's results equal ``train``
        of member i alone up to float reassociation (XLA may order the reductions of a
        batched matmul differently). jax backend only; a non-finite loss raises
        `BatchMemberError` naming the first such member."""
        if self.backend != "jax":
            raise ValueError(
                f"{self.spec.env_id}: the gymnasium backend steps its envs on the host and "
                "cannot train a batch of states; train them one after the other"
            )
        counts = np.asarray(jax.device_get(states.steps))
        if counts.ndim != 1 or len(set(counts.tolist())) != 1:
            raise ValueError(f"train_batch needs states at the same step, got {counts}")
        call = self._compiled_call(states, batched=True)
        done = int(counts[0])
        target = done + steps
        histories: list[list[Metrics]] = [[] for _ in counts]
        while done < target:
            states, metrics = call(states)
            metrics = jax.device_get(metrics)  # one transfer, then member rows on the host
            per_member = []
            for i, history in enumerate(histories):
                try:
                    rows = self._finish(_host_metrics({k: v[i] for k, v in metrics.items()}),
                                        done)
                except FloatingPointError as err:
                    raise BatchMemberError(i, err) from None
                history.extend(rows)
                per_member.append(rows)
            done = per_member[0][-1]["step"]
            if progress is not None:
                progress(done, per_member)
        return states, histories

    def train_and_evaluate(
        self,
        states: TrainState,
        steps: int,
        *,
        episodes: int,
        keys: jax.Array,
        features: bool = True,
        progress: BatchProgressFn | None = None,
    ) -> tuple[TrainState, ChunkResult]:
        """Trains S stacked states (`stack_states`, all at the same step) for ``steps``
        env steps, then evaluates each one's parameters for ``episodes`` episodes with
        its key ``keys[i]`` (0: no evaluation), as ONE jitted call: a ``lax.scan`` over
        the PPO iterations, ``vmap``ped over the states when S > 1, followed by one
        population evaluation of the S parameter sets (`make_population_evaluator`).
        The check for non-finite losses runs on the device (the training episodes'
        competence is part of the PPO update's metrics); metrics, evaluations and step
        counts come back in one `fetch`, and ``progress(steps, metrics)`` is called once.

        ``steps`` is rounded up to whole PPO iterations (``num_envs * n_steps``; not to
        ``iterations_per_call``, which only sets the length of `train`'s calls: the
        iterations, their keys and their results are those of `train`). Member i equals
        `train` then `evaluate` of member i alone (with S = 1 up to XLA's fusion of the
        longer program; with S > 1 also up to float reassociation in the batched update,
        docs/assumptions.md "Batches of seeds and probes"). With ``features`` False the
        evaluations keep no per-step features (``features`` has 0 steps). jax backend
        only; a non-finite loss raises `BatchMemberError` naming the first such member."""
        if self.backend != "jax":
            raise ValueError(f"{self.spec.env_id}: train_and_evaluate runs on the jax backend")
        size = len(keys)
        if len(jax.tree.leaves(states)[0]) != size:
            raise ValueError(f"train_and_evaluate: {len(jax.tree.leaves(states)[0])} states "
                             f"but {size} evaluation keys")
        iterations = max(1, -(-steps // self.config.ppo.rollout_size))
        program = self._compile(
            ("chunk", size, iterations, episodes, features, *_shape_key(states)),
            self._chunk_program(size, iterations, episodes, features), states, keys,
        )
        states, out = program(states, keys)
        out = fetch(out)
        per_iteration = self.config.ppo.rollout_size
        metrics: list[list[Metrics]] = []
        for i in range(size):
            end = int(out["steps"][i])
            rows = _host_metrics({k: v[i] for k, v in out["metrics"].items()})
            for j, row in enumerate(rows):
                row["step"] = end - (iterations - 1 - j) * per_iteration
            if not out["finite"][i]:
                bad = next(r for r in rows if not all(np.isfinite(r[k]) for k in LOSS_METRICS))
                names = ", ".join(k for k in LOSS_METRICS if not np.isfinite(bad[k]))
                raise BatchMemberError(i, FloatingPointError(
                    f"PPO on {self.spec.env_id}: non-finite {names} at step {bad['step']}; "
                    f"{divergence_hint(self.config)}"))
            metrics.append(rows)
        evaluations = []
        if episodes:
            returns, lengths, feats = out["evaluation"]
            evaluations = [EvalResult(returns[i], lengths[i], feats[i], self.competence)
                           for i in range(size)]
        if progress is not None:
            progress(metrics[0][-1]["step"], metrics)
        return states, ChunkResult(metrics, evaluations)

    def _chunk_program(self, size: int, iterations: int, episodes: int,
                       features: bool) -> Callable:
        """The pure program of `train_and_evaluate` for S = ``size`` states."""
        if size > 1:
            train = jax.vmap(self._training(iterations, (MEMBER_AXIS,)),
                             axis_name=MEMBER_AXIS)
        else:
            one = self._training(iterations)

            def train(states: TrainState):
                state, metrics = one(jax.tree.map(lambda x: x[0], states))
                return jax.tree.map(lambda x: x[None], (state, metrics))

        evaluate = None
        if episodes:
            max_steps = self.spec.max_steps
            if not max_steps:
                raise ValueError(f"{self.spec.env_id} has no time limit to evaluate with")
            evaluate = make_population_evaluator(
                self.env, self.policy, episodes, max_steps, self.config.eval.deterministic,
                feature_steps=None if features else 1,
            )

        def program(states: TrainState, keys: jax.Array):
            states, metrics = train(states)
            finite = jnp.stack([jnp.isfinite(metrics[k]) for k in LOSS_METRICS]).all(axis=(0, 2))
            out = {"metrics": metrics, "finite": finite, "steps": states.steps}
            if evaluate is not None:
                returns, lengths, feats = evaluate(states.ppo.params, keys)
                out["evaluation"] = (returns, lengths, feats if features else feats[:, :, :0])
            return states, out

        return program

    def _finish(self, metrics: list[Metrics], done: int) -> list[Metrics]:
        """Adds ``step`` to one call's metrics; raises FloatingPointError on non-finite
        losses."""
        per_iteration = self.config.ppo.rollout_size
        for m in metrics:
            done += per_iteration
            m["step"] = done
            bad = [k for k in ("loss", "pg_loss", "v_loss", "grad_norm")
                   if not np.isfinite(m[k])]
            if bad:
                raise FloatingPointError(
                    f"PPO on {self.spec.env_id}: non-finite {', '.join(bad)} at step {done}; "
                    f"{divergence_hint(self.config)}")
        return metrics

    # --- gymnasium backend ------------------------------------------------------------

    def _gym_compile(self, state: TrainState) -> None:
        """Compiles ``act`` and ``learn`` for the shapes a rollout produces."""
        if "gym" in self._compiled:
            return
        start = time.perf_counter()
        obs = jax.tree.map(jnp.asarray, state.obs)
        act = jax.jit(make_act(self.policy))
        action, key = jax.eval_shape(act, state.ppo.params, obs, state.key)
        n, n_steps = self.config.ppo.num_envs, self.config.ppo.n_steps
        step = (obs, action.action, action.log_prob, action.value,
                jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), bool),
                jax.ShapeDtypeStruct((n,), bool), obs)
        traj = jax.tree.map(lambda x: jax.ShapeDtypeStruct((n_steps, *x.shape), x.dtype), step)
        learn = jax.jit(self._learn).lower(
            state.ppo, state.tracker, Trajectory(*traj), obs, key).compile()
        self._compiled["gym"] = (act.lower(state.ppo.params, obs, state.key).compile(), learn)
        self.compile_s += time.perf_counter() - start

    def _gym_train(
        self, state: TrainState, steps: int, progress: ProgressFn | None
    ) -> tuple[TrainState, list[Metrics]]:
        self._gym_compile(state)
        act, learn = self._compiled["gym"]
        ppo, tracker, obs, key = state.ppo, state.tracker, state.obs, state.key
        done = int(state.steps)
        target = done + steps
        history: list[Metrics] = []
        while done < target:
            obs, key, traj = gym_rollout(self.env, act, ppo.params, obs, key,
                                         self.config.ppo.n_steps)
            key, learn_key = jax.random.split(key)
            ppo, tracker, metrics = learn(ppo, tracker, traj, obs, learn_key)
            metrics = self._finish(_host_metrics(jax.tree.map(lambda x: x[None], metrics)), done)
            done = metrics[-1]["step"]
            history.extend(metrics)
            if progress is not None:
                progress(done, metrics)
        steps_ = jnp.asarray(done, jnp.int32)
        return TrainState(ppo, tracker, None, obs, key, steps_), history

    # --- evaluation -----------------------------------------------------------------

    def evaluate(
        self,
        params: Params,
        episodes: int | None,
        key: int | jax.Array,
        *,
        deterministic: bool | None = None,
        max_steps: int | None = None,
    ) -> EvalResult:
        """Evaluates ``params`` on fresh episodes drawn from ``key``.

        ``episodes`` (when None) and ``deterministic`` default to ``config.eval``;
        ``max_steps`` defaults to the env's time limit.
        """
        episodes = episodes or self.config.eval.episodes
        key = jax.random.key(key) if isinstance(key, (int, np.integer)) else key
        if deterministic is None:
            deterministic = self.config.eval.deterministic
        max_steps = max_steps or self.spec.max_steps
        if not max_steps:
            raise ValueError(f"{self.spec.env_id} has no time limit; pass max_steps")
        if self.backend == "jax":
            shape = (episodes, deterministic, max_steps)
            if shape not in self._jax_evaluators:
                self._jax_evaluators[shape] = jax.jit(
                    make_jax_evaluator(self.env, self.policy, episodes, max_steps, deterministic)
                )
            returns, lengths, feats = jax.device_get(self._jax_evaluators[shape](params, key))
            return EvalResult(returns, lengths, feats, self.competence)
        if self._gym_eval_env is None:
            n = self.config.eval.num_envs or min(self.config.eval.episodes, MAX_GYM_EVAL_ENVS)
            self._gym_eval_env = make(self.spec.env_id, "gymnasium", num_envs=n,
                                      **self.env_options)
        return evaluate_gym(self._gym_eval_env, self.gym_act(deterministic), params,
                            episodes, key, max_steps, self.competence)

    def evaluate_batch(
        self,
        params: Params,
        episodes: int,
        keys: jax.Array,
        *,
        features: bool = True,
    ) -> list[EvalResult]:
        """`evaluate` of S stacked parameter sets (leading axis S), set i with
        ``keys[i]``, on fresh episodes in the config's policy mode and the env's time
        limit: on jax one population evaluation (`make_population_evaluator`, whose
        results do not depend on S) and one `fetch`; on gymnasium one `evaluate` after
        the other. Without ``features`` the results keep no per-step features."""
        if self.backend != "jax":
            return [self.evaluate(jax.tree.map(lambda x, i=i: x[i], params), episodes, key)
                    for i, key in enumerate(keys)]
        deterministic = self.config.eval.deterministic
        max_steps = self.spec.max_steps
        if not max_steps:
            raise ValueError(f"{self.spec.env_id} has no time limit to evaluate with")

        def build() -> Callable:
            population = make_population_evaluator(
                self.env, self.policy, episodes, max_steps, deterministic,
                feature_steps=None if features else 1)

            def evaluate(params: Params, keys: jax.Array):
                returns, lengths, feats = population(params, keys)
                return returns, lengths, feats if features else feats[:, :, :0]

            return jax.jit(evaluate)

        run = self.program(("evaluate", episodes, deterministic, features), build)
        returns, lengths, feats = fetch(run(params, keys))
        return [EvalResult(returns[i], lengths[i], feats[i], self.competence)
                for i in range(len(returns))]

    def program(self, key: Any, build: Callable[[], Callable]) -> Callable:
        """The agent's cached function ``key``, built by ``build()`` on first use (jitted
        programs that other modules run on this agent's env and policy, e.g. a method's
        hooks vmapped over seeds)."""
        if key not in self._programs:
            self._programs[key] = build()
        return self._programs[key]

    def gym_act(self, deterministic: bool) -> Callable:
        """The jitted ``act(params, obs, key)`` host rollouts use."""
        if deterministic not in self._gym_acts:
            self._gym_acts[deterministic] = jax.jit(make_act(self.policy, deterministic))
        return self._gym_acts[deterministic]

    def sample_observations(self, params: Params, steps: int, key: jax.Array) -> Obs:
        """Observations of ``steps`` env steps taken by ``params`` (sampled actions) in
        fresh episodes, e.g. for a Fisher estimate."""
        n = self.config.ppo.num_envs
        n_steps = math.ceil(steps / n)
        if self.backend == "jax":
            if steps not in self._samplers:
                self._samplers[steps] = jax.jit(self.observation_sampler(steps))
            return self._samplers[steps](params, key)
        else:
            reset_key, key = jax.random.split(key)
            seed = int(jax.random.randint(reset_key, (), 0, 2**31 - 1))
            env = make(self.spec.env_id, "gymnasium", num_envs=n, seed=seed,
                       **self.env_options)
            _, first = env.reset(reset_key)
            obs = gym_rollout(env, self.gym_act(False), params, first, key, n_steps)[2].obs
            env.close()
        return jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:]))[:steps], obs)

    def observation_sampler(self, steps: int, batch_axes: tuple[str, ...] = ()
                            ) -> Callable[[Params, jax.Array], Obs]:
        """The pure ``sample(params, key) -> obs`` of `sample_observations` (jax backend):
        ``ceil(steps / num_envs)`` steps of every env from fresh episodes (``reset_key,
        key = split(key)``), the first ``steps`` observations in (step, env) order;
        ``batch_axes``: the ``vmap`` axes it runs under (`AutoReset.step`)."""
        n = self.config.ppo.num_envs
        env = AutoReset(self.env, n)
        rollout = make_jax_rollout(env, self.policy, math.ceil(steps / n),
                                   batch_axes=batch_axes)

        def sample(params: Params, key: jax.Array) -> Obs:
            reset_key, key = jax.random.split(key)
            env_state, obs = env.reset(reset_key)
            obs = rollout(params, env_state, obs, key)[3].obs
            return jax.tree.map(lambda x: jnp.reshape(x, (-1, *x.shape[2:]))[:steps], obs)

        return sample


__all__ = ["Agent", "BatchMemberError", "ChunkResult", "TrainState", "episodes_key", "fetch",
           "stack_states", "unstack_states"]
