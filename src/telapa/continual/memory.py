"""The memory a run needs, estimated from the product of its sizes before any work.

Each size of a run is bounded on its own when it is read (`telapa.config`'s ``MAX_*``),
but the arrays a run holds are products of several: ``num_envs`` 65,536 and ``n_steps``
4,096, each within its bound, make a PPO rollout of 2.7e8 steps, 4e11 bytes on
MiniGrid, which failed only after the first evaluation (``RESOURCE_EXHAUSTED``, a
traceback, a run left "running"). `check_memory` refuses such a run before its run
directory exists, with the estimate, the settings that make it and the machine's memory.

The estimate is a lower bound: only arrays the run cannot do without, in their smallest
form, so that a run it refuses cannot fit. With o the bytes of one observation (the sum
of its entries' sizes, largest over the curriculum's tasks), D the sketch dimension,
P the training programs that run at once (the seeds of a jax batch; for TeLAPA, times
the K_pool probes that train as one batch) and 4 bytes a float:

* PPO call: the rollout of N = ``num_envs`` x T = ``n_steps`` steps (`Trajectory`: each
  step's observation and the episode's final observation, the log-probability, value
  and reward) and the epoch's shuffled copy of its observations:
  P x N x T x (3 o + 12);
* evaluation with per-step features (methods that observe them, TeLAPA): each episode's
  features up to the env's time limit t, S x E x t x D x 4 with S the seeds of a jax
  batch and E the larger of ``eval_episodes`` and ``final_eval_episodes``;
* illumination (TeLAPA): a batch of B candidates' parameters and their episodes'
  features, S x B x (n x 4 + m x T_traj x D x 4), with n the network's parameters,
  m the illumination episodes and T_traj ``traj_steps``;
* TeLAPA's archives, kept for the whole run, one per task: S x tasks x capacity x
  (n x 4 + m_stored x T_traj x D x 1) (a stored sketch takes at least a byte a value);
* the network: P x n x 16 (weights, gradients, Adam's two moments), for the whole run.

The run needs at least the kept arrays plus the largest of the others (they are not
live at once). The paper's settings need a few hundred MB at most
(tests/faults/test_sizes.py checks every shipped preset against 24 GiB).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from telapa.config import ConfigError, NetworkConfig
from telapa.continual.curriculum import Curriculum
from telapa.continual.preset import RunConfig

GIB = 2**30


@dataclass(frozen=True)
class Part:
    """One array (or set of arrays) of the estimate: its bytes and the settings that
    make it, as the user would change them."""

    name: str
    bytes: int
    settings: str
    kept: bool = False
    """Held for the whole run (else only while its phase runs)."""


@dataclass(frozen=True)
class TaskShape:
    """What the estimate needs of one task's env: bytes of an observation, the time
    limit, the sketch dimension, and the network's parameter count."""

    env_id: str
    obs_bytes: int
    max_steps: int
    feature_dim: int
    n_params: int


def machine_memory() -> int:
    """Bytes of memory this process can have: the machine's physical memory, or its
    control group's limit where one is set and lower (a container, a batch job)."""
    import psutil

    total = int(psutil.virtual_memory().total)
    for limit_file in ("/sys/fs/cgroup/memory.max",
                       "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def _check_features(env) -> None:
    """One step of a host env: ``ValueError`` unless the sketch it gives,
    ``info["features"]``, has its family's dimension D (``spec.feature_dim``, what the
    run's latent space and evaluation buffers are sized by). A family whose
    ``feature_dim`` disagrees with its ``make_single`` env otherwise fails at the first
    evaluation, after its run directory is made."""
    spec = env.spec
    env.reset()
    if spec.discrete:
        action = np.zeros(1, np.int32)
    else:
        action = np.full((1, spec.action_dim), (spec.action_low + spec.action_high) / 2,
                         np.float32)
    features = env.step(None, action)[-1].get("features")
    if features is not None and np.shape(features)[-1:] != (spec.feature_dim,):
        raise ValueError(
            f"{spec.env_id}: its env family says feature_dim = {spec.feature_dim}, but its "
            f"env's info['features'] has shape {np.shape(features)[1:]} per step "
            "(EnvFamily.feature_dim must be the size of the sketch make_single's env gives)")


@functools.lru_cache(maxsize=64)
def _task_shape(env_id: str, backend: str, options: str, network: str) -> TaskShape:
    """`TaskShape` of ``env_id`` with ``options`` (JSON) on ``backend`` under the
    network settings ``network`` (JSON): the env is made (one copy) and the network's
    parameters counted from their shapes (`jax.eval_shape`: nothing is allocated)."""
    import jax

    from telapa.envs.registry import make
    from telapa.rl.policy import Policy

    host = backend != "jax"
    env = make(env_id, backend, **json.loads(options), **({"num_envs": 1} if host else {}))
    try:
        spec = env.spec
        if host:
            _check_features(env)
    finally:
        if host:
            env.close()
    obs = sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize
              for s in spec.observation.values())
    policy = Policy.create(spec, NetworkConfig.model_validate_json(network))
    shapes = jax.eval_shape(policy.init, jax.random.key(0))
    n_params = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(shapes))
    return TaskShape(spec.env_id, int(obs), int(spec.max_steps), int(spec.feature_dim),
                     int(n_params))


def task_shapes(curriculum: Curriculum, config: RunConfig) -> list[TaskShape]:
    """`TaskShape` of each distinct task (env id and options) of ``curriculum``: each env
    made once on the curriculum's backend, before any work. `ConfigError` in one line,
    naming the tasks, when one cannot be made or used (its constructor refuses an
    option, an action space no policy takes, a JAX port that is not its id, a sketch of
    another size than its family's D): whatever the env's own code raises."""
    network = config.train.network.model_dump_json()
    tasks: dict[tuple[str, str], list[str]] = {}
    for tag, t in curriculum.tasks.items():
        tasks.setdefault((t.env_id, json.dumps(t.options, sort_keys=True)), []).append(tag)
    shapes = []
    for (env_id, options), tags in sorted(tasks.items()):
        try:
            shapes.append(_task_shape(env_id, curriculum.backend, options, network))
        except ConfigError:
            raise
        except Exception as err:  # noqa: BLE001 - a plug-in env may raise anything
            what = f"{err}" if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
            given = f" with options {options}" if options != "{}" else ""
            raise ConfigError(
                f"curriculum {curriculum.name!r} task{'s' if len(tags) > 1 else ''} "
                f"{', '.join(map(repr, tags))} ({env_id}{given}, backend "
                f"{curriculum.backend!r}): {what}") from None
    return shapes


def estimate(curriculum: Curriculum, method: str, config: RunConfig, *,
             seeds: int = 1) -> list[Part]:
    """The parts of the memory a run of ``method`` on ``curriculum`` with ``config``
    needs (the module docstring), for ``seeds`` seeds in one process."""
    from telapa.continual.methods.telapa.method import TeLAPA
    from telapa.continual.registry import find_method

    shapes = task_shapes(curriculum, config)
    cls = find_method(method)
    telapa = issubclass(cls, TeLAPA)
    batched = seeds if curriculum.backend == "jax" else 1  # host backends: one after another
    ppo, qd = config.train.ppo, config.methods.telapa.qd
    programs = batched * (qd.transfer.k_pool if telapa else 1)
    widest = max(shapes, key=lambda s: s.obs_bytes)
    longest = max(shapes, key=lambda s: s.max_steps)
    n = max(s.n_params for s in shapes)
    dim = shapes[0].feature_dim
    parts = [
        Part("the PPO rollout and update", programs * ppo.num_envs * ppo.n_steps
             * (3 * widest.obs_bytes + 12),
             f"train.ppo.num_envs={ppo.num_envs} x train.ppo.n_steps={ppo.n_steps} steps x "
             f"{3 * widest.obs_bytes + 12} bytes ({widest.env_id}'s observations)"
             + (f" x {programs} programs at once" if programs > 1 else "")),
        Part("the network", programs * n * 16,
             f"{n:,} parameters (train.network) x 16 bytes"
             + (f" x {programs} programs at once" if programs > 1 else ""), kept=True),
    ]
    if cls.observes_features:
        episodes = max(config.eval_episodes, config.final_eval_episodes)
        parts.append(Part(
            "an evaluation's features", batched * episodes * longest.max_steps * dim * 4,
            f"{episodes} episodes (eval_episodes, final_eval_episodes) x "
            f"{longest.max_steps} steps ({longest.env_id}'s time limit) x {dim} features"
            " x 4 bytes" + (f" x {batched} seeds" if batched > 1 else "")))
    if telapa:
        ill, cap = qd.illumination, qd.archive.max_size
        parts.append(Part(
            "an illumination batch", batched * ill.batch_size * (
                n * 4 + ill.eval_episodes * ill.traj_steps * dim * 4),
            f"methods.telapa.qd.illumination.batch_size={ill.batch_size} candidates x "
            f"({n:,} parameters x 4 bytes + eval_episodes={ill.eval_episodes} x "
            f"traj_steps={ill.traj_steps} x {dim} features x 4 bytes)"
            + (f" x {batched} seeds" if batched > 1 else "")))
        stored = ill.stored_episodes * ill.traj_steps * dim if ill.store_trajectories else 0
        tasks = len(dict.fromkeys(curriculum.order))
        parts.append(Part(
            "TeLAPA's archives", batched * tasks * cap * (n * 4 + stored),
            f"{tasks} task archive(s) x methods.telapa.qd.archive.capacity={cap} x "
            f"({n:,} parameters x 4 bytes + {stored:,} stored sketch values)"
            + (f" x {batched} seeds" if batched > 1 else ""), kept=True))
    return parts


def total(parts: Iterable[Part]) -> int:
    """The bytes the run needs at least: its kept parts plus its largest other part."""
    parts = list(parts)
    return sum(p.bytes for p in parts if p.kept) + max(
        (p.bytes for p in parts if not p.kept), default=0)


def shortfall(parts: Iterable[Part], memory: int | None = None
              ) -> tuple[int, int, Part] | None:
    """``(need, have, largest)`` when ``parts`` need more than ``memory`` bytes (default:
    `machine_memory`): `total` of them, the memory, and the largest part; None when
    they fit."""
    parts = list(parts)
    need = total(parts)
    have = machine_memory() if memory is None else memory
    if need <= have:
        return None
    return need, have, max(parts, key=lambda p: p.bytes)


def check_memory(curriculum: Curriculum, method: str, config: RunConfig, *,
                 seeds: int = 1, source: str = "the run", memory: int | None = None) -> None:
    """`ConfigError` in one line when a run of these settings (``seeds`` seeds in one
    process) needs more memory than ``memory`` (default: `machine_memory`): the
    estimate, the machine's memory, and the largest part with the settings that make
    it. Called before a run directory is created (`RunSpec.check_budgets`, a seed
    batch, a sweep)."""
    short = shortfall(estimate(curriculum, method, config, seeds=seeds), memory)
    if short is None:
        return
    need, have, largest = short
    raise ConfigError(
        f"{source} needs at least {need / GIB:,.1f} GiB of memory ({method} on "
        f"{curriculum.name!r}{f', {seeds} seeds at once' if seeds > 1 else ''}), more than "
        f"this machine's {have / GIB:,.1f} GiB; the largest part is {largest.name}, "
        f"{largest.bytes / GIB:,.1f} GiB ({largest.settings}): lower these settings")


__all__ = ["GIB", "Part", "TaskShape", "check_memory", "estimate", "machine_memory",
           "shortfall", "task_shapes", "total"]
