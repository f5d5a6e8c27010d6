"""`train_batch`: `Agent.train` of S stacked states as one jitted ``vmap`` per call.

The path the continual runner took before a chunk became one program
(`Agent.train_and_evaluate`): ``iterations_per_call`` PPO iterations per jitted call,
vmapped over the states, and one host round trip per call (the NaN check on the host).
The benchmarks measure it: `calibration_cost.py` (the variants' cost per env step) and
`visit_program.py` (the ``old`` path of a chunk). jax backend only (`JaxAgent`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from telapa.rl.agent import (
    MEMBER_AXIS,
    BatchMemberError,
    BatchProgressFn,
    Metrics,
    TrainState,
    shape_key,
)
from telapa.rl.jax_agent import JaxAgent
from telapa.rl.train_state import check_finite, metric_rows


def batch_call(agent: JaxAgent, states: TrainState) -> Callable:
    """The compiled ``call(states) -> (states, metrics)`` of ``iterations_per_call``
    iterations ``vmap``ped over the S states of ``states`` (its seconds to
    ``compile_s``)."""
    return agent.compiled(
        ("train-batch-call", *shape_key(states)),
        lambda: jax.vmap(agent.training(agent.iterations_per_call, (MEMBER_AXIS,)),
                         axis_name=MEMBER_AXIS),
        states)


def train_batch(
    agent: JaxAgent, states: TrainState, steps: int, progress: BatchProgressFn | None = None
) -> tuple[TrainState, list[list[Metrics]]]:
    """`Agent.train` for S states stacked on a leading axis (`stack_states`), as one
    jitted ``vmap`` per call; every state must have trained the same number of steps.
    Returns the stacked states and each member's metrics. Member i's results equal
    ``train`` of member i alone up to float reassociation (XLA may order the reductions of
    a batched matmul differently). A non-finite loss raises `BatchMemberError` naming the
    first such member."""
    if not isinstance(agent, JaxAgent):
        raise ValueError(f"{agent.spec.env_id}: the gymnasium backend steps its envs on the "
                         "host and cannot train a batch of states")
    counts = np.asarray(jax.device_get(states.steps))
    if counts.ndim != 1 or len(set(counts.tolist())) != 1:
        raise ValueError(f"train_batch needs states at the same step, got {counts}")
    call = batch_call(agent, states)
    per_iteration = agent.config.ppo.rollout_size
    done = int(counts[0])
    target = done + steps
    histories: list[list[Metrics]] = [[] for _ in counts]
    while done < target:
        states, metrics = call(states)
        metrics = jax.device_get(metrics)  # one transfer, then member rows on the host
        per_member = []
        for i, history in enumerate(histories):
            rows = metric_rows({k: v[i] for k, v in metrics.items()}, done + per_iteration,
                               per_iteration)
            try:
                check_finite(rows, agent.spec.env_id, agent.config)
            except FloatingPointError as err:
                raise BatchMemberError(i, err) from None
            history.extend(rows)
            per_member.append(rows)
        done = per_member[0][-1]["step"]
        if progress is not None:
            progress(done, per_member)
    return states, histories
