"""Continual-learning methods as small objects with hooks (paper Sec. 4, App. B): the
base (`base`: `Method`, `TaskContext`), the paper's baselines (`baselines`) and TeLAPA
(`telapa`, imported on its own: ``telapa.continual.methods.telapa``).

The continual loop (`telapa.continual.runner`) carries one `PPOState` (parameters,
optimizer state, regulariser data) across task visits, and the method's state, a
`MethodState` value (policy bank, Fisher, anchors, TeLAPA's archives), beside it. Hooks
are functions of those values that return the next ones; a method object holds only its
settings and key and never changes:

    mstate = method.init(params)                               # the run's start
    learner, mstate = method.start_task(mstate, learner, ctx)  # choose the initialisation
    mstate = method.observe(mstate, visit, kind, result)       # every evaluation
    ... PPO training with ``method.penalty`` added to the loss ...
    mstate = method.end_task(mstate, learner, ctx)             # store, estimate, snapshot

and at the end evaluates ``method.eval_params(mstate, task, learner)`` on every task.
Hooks are written for one seed: a batch of seeds (``telapa run --seeds``) runs every
seed's hook in lockstep (`telapa.continual.lockstep`), and a hook with a step that has a
batched form (TeLAPA's probes, illumination and maintenance) yields that step as a
request, which the lockstep answers for all seeds at once. A checkpoint saves the
`MethodState` as it is (its parts' sizes are the "stored method state" of the paper's
compute table) and reads it back into `parts_like`'s structure. TeLAPA plugs in through
the same hooks.
"""

from telapa.continual.methods.base import Method, TaskContext
from telapa.continual.methods.baselines import (
    DFF,
    EWC,
    EWCConfig,
    Finetune,
    FinetuneReset,
    L2Init,
    L2InitConfig,
    QuadraticData,
    QuadraticPenalty,
    Scratch,
    ScratchReuse,
    ScratchReuseConfig,
    ShrinkPerturb,
    ShrinkPerturbConfig,
    accumulate_quadratic,
    quadratic_penalty,
)

__all__ = ["DFF", "EWC", "EWCConfig", "Finetune", "FinetuneReset", "L2Init", "L2InitConfig",
           "Method", "QuadraticData", "QuadraticPenalty", "Scratch", "ScratchReuse",
           "ScratchReuseConfig", "ShrinkPerturb", "ShrinkPerturbConfig", "TaskContext",
           "accumulate_quadratic", "quadratic_penalty"]
