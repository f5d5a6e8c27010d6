"""The static agents of a process's runs: one per set of parts an agent is made of,
shared by every run that passes the same ``agents`` dict, so each program is traced and
compiled once for all of them. By default that dict is the process's (`process_agents`):
on the jax backend every run of a process (the seeds of a batch, the demo's methods, the
cells a sweep worker runs one after another, a run and its resume in one session) takes
the agents of the runs before it that had the same parts; host backends (gymnasium,
native MuJoCo), whose agents hold live envs, give each run its own.

Memory maps. The code of every compiled program stays mapped while the program lives:
XLA's CPU backend maps each kernel of an executable on its own (about three maps per
kernel, some 900 for a PPO chunk program), and Linux caps a process's maps at
``vm.max_map_count`` (65530 by default), past which LLVM fails with "Cannot allocate
memory" however much memory is free. A TeLAPA run at the paper's budget adds 7,000 to
10,000 maps per task (its PPO, evaluation, probe and illumination programs; measured on
the reverse curriculum), so five tasks and the embedder's programs pass the default
limit: such a run died at its last phase. `shared_agent` therefore watches the
process's maps when a run moves to another task's agent and, past `MAP_SHARE` of the
limit, releases every other agent's programs and JAX's caches (`relieve_map_pressure`):
they are built again when next used, from JAX's persistent cache where one is set
(`telapa.jaxcache`), and compile to the same executables, so no result changes.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import jax
from pydantic import BaseModel

from telapa.config import TrainConfig
from telapa.continual.curriculum import Visit
from telapa.continual.spec import RunSpec
from telapa.rl.agent import Agent
from telapa.rl.ppo import Penalty

AgentKey = tuple[str, ...]
"""What an `Agent` and the programs it compiles are made of (`ContinualRun.agent`): the
env id, options and competence, the backend, the train config (the method's network), the
intrinsic bonus and, for a method with a penalty, the method and its settings (its
penalty data has the method's own structure, which the compiled programs fix: EWC's and
L2Init's differ under one penalty function; and a plug-in's penalty may read its settings,
``lam`` say, as constants the programs fix). Runs with the same key share the agent when
they share an ``agents`` dict (a seed batch, the demo's penalty-free methods)."""

MAP_SHARE = 0.5
"""The share of ``vm.max_map_count`` past which `relieve_map_pressure` releases idle
agents' programs: half, so that the task being trained (about 10,000 maps at the paper's
budget) and whatever the caller compiles besides fit under the default limit."""

PROCESS_AGENTS: dict[AgentKey, Agent] = {}
"""The jax backend's agents of this process (`process_agents`)."""

MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
SELF_MAPS = Path("/proc/self/maps")


def map_usage() -> tuple[int, int] | None:
    """(memory maps of this process, the kernel's limit on them); None where the OS does
    not say (not Linux)."""
    try:
        limit = int(MAX_MAP_COUNT.read_text())
        with SELF_MAPS.open("rb") as maps:
            return sum(1 for _ in maps), limit
    except (OSError, ValueError):
        return None


def relieve_map_pressure(agents: dict[AgentKey, Agent], keep: Agent | None, *,
                         share: float | None = None) -> str | None:
    """Past ``share`` (default `MAP_SHARE`) of the process's map limit, releases the
    programs of every agent in ``agents`` but ``keep`` (`Agent.release`) and clears JAX's
    caches of module-level programs (`jax.clear_caches`); returns what it did, in words,
    or None when the maps were below the share (or the OS keeps no count)."""
    usage = map_usage()
    share = MAP_SHARE if share is None else share
    if usage is None or usage[0] <= share * usage[1]:
        return None
    before, limit = usage
    idle = [agent for agent in agents.values() if agent is not keep and agent.live_programs]
    for agent in idle:
        agent.release()
    jax.clear_caches()
    gc.collect()
    after = map_usage()
    now = f", {after[0]} now" if after else ""
    return (f"released the compiled programs of {len(idle)} idle task agent(s) and JAX's "
            f"caches: this process held {before} memory maps of its limit {limit}{now}")


def process_agents(backend: str) -> dict[AgentKey, Agent]:
    """The agents a run on ``backend`` shares when it is given none: the process's
    (`PROCESS_AGENTS`) on the jax backend, whose agents hold only programs (no run
    state: a run's results come from its own state alone); a new dict on a host backend,
    whose agents hold the envs of the rollout in progress."""
    return PROCESS_AGENTS if backend == "jax" else {}


def shared_agent(agents: dict[AgentKey, Agent], visit: Visit, train_config: TrainConfig, *,
                 spec: RunSpec, penalty: Penalty | None, settings: BaseModel | None = None,
                 note: Callable[[str], None] | None = None) -> Agent:
    """The agent of ``visit``'s env for a run of ``spec`` that trains ``train_config``
    (its method's network) with ``penalty`` (its method's, whose settings are
    ``settings``): taken from ``agents``, or made and kept there under its `AgentKey`.
    ``agents`` is kept in order of use; when the agent is not the one used last,
    `relieve_map_pressure` runs (``note(text)`` is told what it released)."""
    key = (visit.env_id, repr(sorted(visit.options.items())), repr(visit.competence),
           spec.curriculum.backend, train_config.model_dump_json(),
           repr(spec.config.intrinsic_beta),
           "" if penalty is None else spec.method,
           "" if penalty is None or settings is None else settings.model_dump_json())
    if key == next(reversed(agents), None):
        return agents[key]
    agent = agents.pop(key, None)
    if agent is None:
        agent = Agent(
            visit.env_id, train_config, backend=spec.curriculum.backend,
            env_options=visit.options, penalty=penalty,
            intrinsic_beta=spec.config.intrinsic_beta, competence=visit.competence)
    agents[key] = agent
    relieved = relieve_map_pressure(agents, agent)
    if relieved and note is not None:
        note(relieved)
    return agent


__all__ = ["MAP_SHARE", "PROCESS_AGENTS", "AgentKey", "map_usage", "process_agents",
           "relieve_map_pressure", "shared_agent"]
