"""The static agents of a process's runs: one per set of parts an agent is made of,
shared by every run that passes the same ``agents`` dict (a seed batch, the demo's
penalty-free methods), so each program compiles once for all of them."""

from __future__ import annotations

from telapa.config import TrainConfig
from telapa.continual.curriculum import Visit
from telapa.continual.spec import RunSpec
from telapa.rl.agent import Agent
from telapa.rl.ppo import Penalty

AgentKey = tuple[str, ...]
"""What an `Agent` and the programs it compiles are made of (`ContinualRun.agent`): the
env id, options and competence, the backend, the train config (the method's network), the
intrinsic bonus and, for a method with a penalty, the method (its penalty data has the
method's own structure, which the compiled programs fix: EWC's and L2Init's differ under
one penalty function). Runs with the same key share the agent when they share an
``agents`` dict (a seed batch, the demo's penalty-free methods)."""


def shared_agent(agents: dict[AgentKey, Agent], visit: Visit, train_config: TrainConfig, *,
                 spec: RunSpec, penalty: Penalty | None) -> Agent:
    """The agent of ``visit``'s env for a run of ``spec`` that trains ``train_config``
    (its method's network) with ``penalty``: taken from ``agents``, or made and kept
    there under its `AgentKey`."""
    key = (visit.env_id, repr(sorted(visit.options.items())), repr(visit.competence),
           spec.curriculum.backend, train_config.model_dump_json(),
           repr(spec.config.intrinsic_beta), "" if penalty is None else spec.method)
    if key not in agents:
        agents[key] = Agent(
            visit.env_id, train_config, backend=spec.curriculum.backend,
            env_options=visit.options, penalty=penalty,
            intrinsic_beta=spec.config.intrinsic_beta, competence=visit.competence)
    return agents[key]


__all__ = ["AgentKey", "shared_agent"]
