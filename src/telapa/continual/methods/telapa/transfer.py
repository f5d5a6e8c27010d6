"""Transfer-origin selection (paper Sec. 3.2 "Candidate pooling" and "Few-shot origin
selection"; App. Algorithm "FewShotSelectElite").

`select_transfer_origin` runs the whole algorithm:

    line 1     H   <- LoadArchives(P)              the caller passes the loaded archives
    line 2     C   <- GatherCandidates(H, K_pool)  `telapa.qd.selection.pool_candidates`:
                                                   greedy farthest-point selection over
                                                   the union of all archives
    lines 3-6  for each eta_j in C: load theta_eta_j, reset optimizer and rollout,
               (SR0, SRfinal, slope, AUC) <- Probe(M, e_{k+1}, B_probe)      (`probe`,
                                                   `telapa.qd.selection.probe_summary`)
    lines 7-8  SR* = max_j SRfinal_j,  I = { j : SRfinal_j >= SR* - epsilon }
    line 9     j*  = argmax_{j in I} Score(...)   `telapa.qd.selection.few_shot_select`
    line 10    return the ORIGINAL archived weights of eta_j* (never the probed ones)

A fresh start (beyond the paper; the ``telapa-fresh`` method, docs/assumptions.md,
"TeLAPA-Fresh"). With ``fresh`` weights (the freshly initialised network Scratch would
start the visit from), the pool is C_{k+1} + {theta_fresh}: the fresh network is probed
like any elite (the same key, rollout key and budget, after the K elites so that a tie
still goes to an elite) and scored with them, and

    origin = theta_fresh   if j* is the fresh network, or SR^final_j = 0 for every j
                           (the fresh network included: no probe ended with a success)
           = eta_j*        otherwise,

i.e. where nothing in the pool learned within the probe, the visit starts from the
network a first reward is likeliest from (high entropy), not from the fittest elite
that the tie-break would take.

Randomness. Every SR measurement of every probe uses the same evaluation key (the
``key`` argument): the episodes (initial states and action-sampling keys) are then the
same at every point of a curve and for every candidate, so differences in SR come from
the weights, not from the episode draw. Every probe's PPO starts from new episodes drawn
from the same ``rollout_key`` (`Agent.start`), so every candidate is also adapted on the
same training episodes.

Batching. The probes of one selection are independent: on the jax backend they run as
one batch (`probe_batch`): the K candidates' `TrainState`s are stacked, and each probe
moment is one program that trains all of them (``vmap``ped) and evaluates them
(`Agent.train_and_evaluate`). A batched probe's curve equals its sequential `probe` up
to float reassociation in the batched PPO update (docs/assumptions.md, "Batches of seeds
and probes"). On the native backend each probe trains in turn (a host agent trains one
state at a time) and all probes' evaluations at all their moments are one batch of envs
(`_probe_snapshots`); a single `probe` batches its own moments so.

Compute. Each probe costs its PPO env steps (``steps`` rounded up to whole PPO
iterations) plus the steps of its ``points x episodes`` evaluation episodes; both are
method-specific extra env steps in the paper's compute accounting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from telapa.io.clock import running
from telapa.qd.archive import Archive
from telapa.qd.config import TransferConfig
from telapa.qd.lineage import lineage_visits
from telapa.qd.selection import (
    few_shot_select,
    near_best,
    pool_candidates,
    probe_summary,
)
from telapa.rl.agent import Agent, TrainState, stack_states
from telapa.rl.networks import Params, flatten_params

ProgressFn = Callable[[int, int], None]
"""``progress(done, total)``: called with 0 before the probes, then after each candidate
probe."""


def _probe_start(agent: Agent, params: Params, penalty: Any, rollout_key: jax.Array
                 ) -> TrainState:
    """The probe's PPO from ``params``: fresh Adam moments (the probe reflects basin
    recoverability, not inherited momentum) and new episodes from ``rollout_key``."""
    return agent.start(agent.fresh_ppo(params, penalty), rollout_key)


def probe_moments(steps: int, points: int, rollout: int) -> list[int]:
    """The env steps at which a probe of ``steps`` measures its ``points`` SRs: 0 (the
    zero-shot SR), then after each of ``points - 1`` equal segments of whole PPO
    iterations of ``rollout`` (``num_envs * n_steps``) steps, each segment the fewest
    iterations that make the budget:

        s = ceil(steps / ((points - 1) * rollout)),   moment_i = i * s * rollout,

    so the last moment is ``steps`` or up to ``points - 1`` iterations past it. Equal
    segments train with ONE program on the jax backend (`Agent.train_and_evaluate` is
    compiled per iteration count), where moments rounded up one by one alternate between
    two counts (200,000 steps at 2,048 a rollout: 25, 24, 25, 24 iterations): a second
    compile of the batched PPO and evaluation for every task probed (docs/assumptions.md,
    "Probe budgets")."""
    if points < 2:
        raise ValueError(f"a probe needs at least 2 points, got {points}")
    segment = math.ceil(steps / ((points - 1) * rollout))
    return [i * segment * rollout for i in range(points)]


def probe(
    agent: Agent,
    params: Params,
    *,
    steps: int,
    points: int,
    episodes: int,
    key: jax.Array,
    rollout_key: jax.Array,
    penalty: Any = None,
) -> tuple[np.ndarray, int]:
    """Probe(M, e_{k+1}, B_probe) of Algorithm FewShotSelectElite (lines 4-5).

    Starts PPO from ``params`` (a parameter tree of ``agent``'s network) with a fresh
    optimizer, ``penalty`` data and new episodes from ``rollout_key``, then measures the
    success rate at ``points`` moments of a ``steps``-step PPO adaptation
    (`probe_moments`): the first is the zero-shot SR before any update, the others
    follow equal segments of whole PPO iterations (``num_envs * n_steps`` steps), the
    last once the budget is trained, whatever ``iterations_per_call`` is
    (docs/assumptions.md, "Probe budgets"). Each SR comes from
    ``agent.evaluate(params_i, episodes, key)``. On the jax backend each moment's
    training and evaluation are one program (`Agent.train_and_evaluate`). Pure: nothing
    outside is changed.

    Returns ``(sr_curve, env_steps)``: the (points,) float32 success rates and the env
    steps spent (PPO steps trained + steps of all evaluation episodes).
    """
    if agent.backend in ("jax", "native"):
        curves, costs = probe_batch(agent, [params], steps=steps, points=points,
                                    episodes=episodes, key=key, rollout_key=rollout_key,
                                    penalty=penalty)
        return curves[0], costs[0]
    state = _probe_start(agent, params, penalty, rollout_key)
    curve = np.zeros(points, np.float32)
    eval_steps = 0
    for i, target in enumerate(probe_moments(steps, points, agent.config.ppo.rollout_size)):
        trained = int(state.steps)
        if trained < target:
            state, _ = agent.train(state, target - trained)
        result = agent.evaluate(state.ppo.params, episodes, key)
        curve[i] = result.sr
        eval_steps += int(np.sum(result.lengths))
    return curve, int(state.steps) + eval_steps


def probe_batch(
    agent: Agent,
    params: Sequence[Params],
    *,
    steps: int,
    points: int,
    episodes: int,
    key: jax.Array,
    rollout_key: jax.Array,
    penalty: Any = None,
) -> tuple[np.ndarray, list[int]]:
    """`probe` of every parameter tree in ``params``, as one batch (jax and native
    backends). On jax the K states are stacked; the zero-shot point is one population
    evaluation (`Agent.evaluate_batch`), each later point one program that trains the K
    states to the point's moment and evaluates them (`Agent.train_and_evaluate`, every
    probe with the same ``key``). On native `_probe_snapshots`. Returns the (K, points)
    curves and each probe's env steps."""
    if agent.backend != "jax":
        return _probe_snapshots(agent, params, steps=steps, points=points,
                                episodes=episodes, key=key, rollout_key=rollout_key,
                                penalty=penalty)
    states = stack_states([_probe_start(agent, p, penalty, rollout_key) for p in params])
    return _probe_states(agent, states, steps=steps, points=points, episodes=episodes,
                         keys=jnp.stack([key] * len(params)))


def _probe_snapshots(agent: Agent, params: Sequence[Params], *, steps: int, points: int,
                     episodes: int, key: jax.Array, rollout_key: jax.Array, penalty: Any
                     ) -> tuple[np.ndarray, list[int]]:
    """`probe_batch` on a host backend whose `Agent.evaluate_batch` is one batch of envs
    (native): a host agent trains one state at a time, so each probe trains to its
    moments in turn and keeps its parameters at each; then all K x ``points`` parameter
    sets are evaluated as ONE `Agent.evaluate_batch`, every one with ``key``. Training
    never reads an evaluation, so each curve is its sequential `probe`'s (the same
    training, and the same episodes up to the numerics of the batched policy)."""
    snapshots: list[Params] = []
    trained: list[int] = []
    for tree in params:
        state = _probe_start(agent, tree, penalty, rollout_key)
        for target in probe_moments(steps, points, agent.config.ppo.rollout_size):
            if int(state.steps) < target:
                state, _ = agent.train(state, target - int(state.steps))
            snapshots.append(state.ppo.params)
        trained.append(int(state.steps))
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *snapshots)
    evaluations = agent.evaluate_batch(stacked, episodes, jnp.stack([key] * len(snapshots)),
                                       features=False)
    curves = np.array([e.sr for e in evaluations], np.float32).reshape(len(params), points)
    eval_steps = np.array([int(np.sum(e.lengths)) for e in evaluations]).reshape(
        len(params), points).sum(axis=1)
    return curves, [t + int(e) for t, e in zip(trained, eval_steps, strict=True)]


def _probe_states(agent: Agent, states: TrainState, *, steps: int, points: int,
                  episodes: int, keys: jax.Array) -> tuple[np.ndarray, list[int]]:
    """The probe curves of stacked probe ``states`` (probe j evaluated with ``keys[j]``)
    and each probe's env steps."""
    size = len(keys)
    curves = np.zeros((size, points), np.float32)
    eval_steps = np.zeros(size, np.int64)
    trained = 0
    for i, target in enumerate(probe_moments(steps, points, agent.config.ppo.rollout_size)):
        if trained < target:
            states, result = agent.train_and_evaluate(states, target - trained,
                                                      episodes=episodes, keys=keys,
                                                      features=False)
            trained = result.metrics[0][-1]["step"]
            evaluations = result.evaluations
        else:
            evaluations = agent.evaluate_batch(states.ppo.params, episodes, keys,
                                               features=False)
        for j, evaluation in enumerate(evaluations):
            curves[j, i] = evaluation.sr
            eval_steps[j] += int(np.sum(evaluation.lengths))
    return curves, [trained + int(e) for e in eval_steps]


@dataclass(frozen=True)
class ProbeOutcome:
    """What the probe of one network of the pool gave (lines 3-9)."""

    sr0: float
    sr_final: float
    slope: float
    auc: float
    score: float
    """Score_j of line 9; -inf outside the window I."""
    in_window: bool
    """j in I (lines 7-8): SR^final_j >= SR* - epsilon."""
    env_steps: int
    """Extra env steps of this probe."""


@dataclass(frozen=True)
class ProbedCandidate(ProbeOutcome):
    """One candidate eta_j of the pool C_{k+1} and its probe."""

    elite_id: int
    source: int
    """Position of the elite's archive in the list passed to `select_transfer_origin`."""
    tag: int
    """``Archive.tag`` of that archive."""
    slot: int
    """Slot of the elite in that archive."""
    task: int
    """Visit index on which the elite was evaluated (``Elites.task``)."""
    fitness: float
    """Source-task fitness f (mean return) stored in the archive."""
    descriptor: tuple[float, ...]
    """Normalized latent descriptor z~ under the embedding the pool was drawn with."""
    lineage: tuple[int, ...]
    """Visit indices in the elite's lineage bitmask (its recorded ancestry)."""


@dataclass(frozen=True)
class TransferChoice:
    """Result of `select_transfer_origin`: theta^(0)_{k+1} and the selection record."""

    params: Params
    """The chosen elite's ORIGINAL archived weights, as ``agent``'s parameter tree (the
    fresh network's when ``origin`` is "fresh")."""
    index: int
    """j*: position of the chosen elite in ``candidates``; -1 for a fresh start, whose
    ``elite_id``, ``source``, ``tag`` and ``slot`` are -1 too."""
    elite_id: int
    source: int
    tag: int
    slot: int
    lineage: tuple[int, ...]
    """Visit indices set in the chosen elite's lineage bitmask (its ancestry path)."""
    candidates: tuple[ProbedCandidate, ...]
    """The pool C_{k+1} in farthest-point order, with probe outcomes."""
    env_steps: int
    """Extra env steps of all probes together."""
    wall_s: float
    """Wall-clock seconds of the whole selection (pooling, probes, scoring)."""
    fresh: ProbeOutcome | None = None
    """The fresh network's probe, when the pool had one."""

    @property
    def origin(self) -> str:
        """"fresh" when the visit starts from the fresh network, else "elite"."""
        return "fresh" if self.index < 0 else "elite"

    def record(self) -> dict[str, Any]:
        """The selection record as JSON-ready values (no weights; a score outside the
        window is None). With a fresh network in the pool, ``origin`` and ``fresh`` (its
        probe) too; a fresh start has ``index``, ``source``, ``tag`` and ``slot`` None."""
        cands = []
        for c in self.candidates:
            row = asdict(c)
            row["score"] = _finite(c.score)
            row["descriptor"], row["lineage"] = list(c.descriptor), list(c.lineage)
            cands.append(row)
        fresh = self.origin == "fresh"
        record = {
            "elite_id": self.elite_id,
            "index": None if fresh else self.index,
            "source": None if fresh else self.source,
            "tag": None if fresh else self.tag,
            "slot": None if fresh else self.slot,
            "lineage": list(self.lineage),
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "candidates": cands,
        }
        if self.fresh is not None:
            record["origin"] = self.origin
            record["fresh"] = {**asdict(self.fresh), "score": _finite(self.fresh.score)}
        return record


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def select_transfer_origin(
    agent: Agent,
    archives: Sequence[Archive],
    *,
    config: TransferConfig,
    key: jax.Array,
    rollout_key: jax.Array,
    penalty: Any = None,
    fresh: Params | None = None,
    batch: bool = True,
    progress: ProgressFn | None = None,
) -> TransferChoice:
    """Algorithm FewShotSelectElite on the incoming task (``agent``'s env).

    ``archives`` is the loaded library {A_T_m}_{m <= k} (line 1), all under the current
    embedding version and normalizer. Line 2: C_{k+1} = `pool_candidates` (greedy
    farthest-point selection of ``config.k_pool`` elites over the union, starting from
    the highest source fitness; fewer when the library holds fewer valid elites).
    Lines 3-6: one `probe` per candidate with ``config.probe_steps``,
    ``config.probe_points``, ``config.probe_eval_episodes``, the same ``key``,
    ``rollout_key`` and ``penalty``; with ``batch`` on the jax or native backend all of
    them as one `probe_batch`. ``progress(done, total)`` with 0 before the probes and after
each probe (after the batch).
    Lines 7-9: `probe_summary` (evenly spaced probe times), the epsilon window and
    Score with ``config.w_*`` (`few_shot_select`, ties by the lowest pool position).
    Line 10: the chosen elite's archived row, unflattened into ``agent``'s parameter
    tree (bitwise the stored weights). With ``fresh`` weights, these are probed too,
    after the elites, and chosen by the fresh-start rule (module docstring).

    Raises ValueError when the archives hold no valid elite or their parameter vectors
    do not fit the network.
    """
    start = running()
    pool = _gather(agent, archives, config)
    settings = {"steps": config.probe_steps, "points": config.probe_points,
                "episodes": config.probe_eval_episodes, "key": key,
                "rollout_key": rollout_key, "penalty": penalty}
    probed = [*pool.params, *([] if fresh is None else [fresh])]
    rows = len(probed)
    if progress is not None:  # the phase's start, in the log: a batch of probes is long
        progress(0, rows)
    if batch and agent.backend in ("jax", "native"):
        curves, costs = probe_batch(agent, probed, **settings)
        if progress is not None:
            progress(rows, rows)
    else:
        curves, costs = [], []
        for done, params in enumerate(probed, start=1):
            curve, cost = probe(agent, params, **settings)
            curves.append(curve)
            costs.append(cost)
            if progress is not None:
                progress(done, rows)
    return _choose(pool, archives, np.stack(curves), costs, config=config, start=start,
                   fresh=fresh)


def select_transfer_origins(
    agent: Agent,
    libraries: Sequence[Sequence[Archive]],
    *,
    config: TransferConfig,
    keys: Sequence[jax.Array],
    rollout_keys: Sequence[jax.Array],
    penalties: Sequence[Any],
    fresh: Sequence[Params] | None = None,
) -> list[TransferChoice]:
    """`select_transfer_origin` of S seeds at once (jax backend): seed i's library
    ``libraries[i]``, probe key ``keys[i]``, rollout key and penalty. Every seed's pool
    is gathered as in `select_transfer_origin`; then all seeds' probes (padded to S x
    ``config.k_pool`` with copies, results discarded) are one batch: one population
    evaluation at the zero-shot point and one train-and-evaluate program per later
    moment. Each seed's choice equals its own `select_transfer_origin` up to float
    reassociation in the batched PPO update. ``wall_s`` of each choice is its share of
    the batch's time. ``fresh[i]``: seed i's fresh network (a pool with a fresh start)."""
    start = running()
    pools = [_gather(agent, archives, config) for archives in libraries]
    extra = [[] if fresh is None else [fresh[i]] for i in range(len(pools))]
    members = [(i, params) for i, pool in enumerate(pools)
               for params in [*pool.params, *extra[i]]]
    width = config.k_pool + (fresh is not None)
    members += [members[0]] * (len(pools) * width - len(members))
    states = stack_states([
        _probe_start(agent, params, penalties[i], rollout_keys[i]) for i, params in members])
    curves, costs = _probe_states(
        agent, states, steps=config.probe_steps, points=config.probe_points,
        episodes=config.probe_eval_episodes, keys=jnp.stack([keys[i] for i, _ in members]))
    choices, first = [], 0
    share = (running() - start) / len(pools)
    for i, (pool, archives) in enumerate(zip(pools, libraries, strict=True)):
        size = len(pool.params) + len(extra[i])
        choice = _choose(pool, archives, curves[first:first + size], costs[first:first + size],
                         config=config, start=running() - share,
                         fresh=extra[i][0] if extra[i] else None)
        choices.append(choice)
        first += size
    return choices


@dataclass(frozen=True)
class OriginRequest:
    """One seed's FewShotSelectElite at a visit's start, as a lockstep request
    (`telapa.continual.lockstep`): the arguments of `select_transfer_origin`. One
    request is answered by `select_transfer_origin`; several on the jax backend by one
    `select_transfer_origins` batch (each seed's ``progress`` told when it is done),
    otherwise seed after seed."""

    phase: ClassVar[str] = "few_shot"
    agent: Agent
    archives: Sequence[Archive]
    config: TransferConfig
    key: jax.Array
    rollout_key: jax.Array
    penalty: Any = None
    fresh: Params | None = None
    progress: ProgressFn | None = None

    @classmethod
    def answer(cls, requests: Sequence[OriginRequest]) -> list[TransferChoice]:
        agent = requests[0].agent
        if len(requests) < 2 or agent.backend != "jax":
            return [select_transfer_origin(
                r.agent, r.archives, config=r.config, key=r.key, rollout_key=r.rollout_key,
                penalty=r.penalty, fresh=r.fresh, progress=r.progress) for r in requests]
        fresh = [r.fresh for r in requests]
        choices = select_transfer_origins(
            agent, [r.archives for r in requests], config=requests[0].config,
            keys=[r.key for r in requests], rollout_keys=[r.rollout_key for r in requests],
            penalties=[r.penalty for r in requests],
            fresh=None if fresh[0] is None else fresh)
        for request, choice in zip(requests, choices, strict=True):
            if request.progress is not None:
                request.progress(len(choice.candidates), len(choice.candidates))
        return choices


@dataclass(frozen=True)
class _Pool:
    """C_{k+1} of one library: the pooled elites, their valid rows and parameter trees."""

    pool: Any
    rows: list[int]
    params: list[Params]
    unravel: Any


def _gather(agent: Agent, archives: Sequence[Archive], config: TransferConfig) -> _Pool:
    """Lines 1-2 of FewShotSelectElite: the pool of ``config.k_pool`` elites and their
    parameter trees (ValueError for an empty library or parameters of another size)."""
    flat, unravel = flatten_params(agent.policy.init(jax.random.key(0)))
    pool, idx = pool_candidates(archives, k_pool=config.k_pool)
    if pool.elites.params.shape[-1] != flat.shape[0]:
        raise ValueError(
            f"archived elites have {pool.elites.params.shape[-1]} parameters, "
            f"the agent's network {flat.shape[0]}"
        )
    rows = [int(r) for r in np.asarray(idx) if r >= 0]
    if not rows:
        raise ValueError("the archive library holds no valid elite")
    return _Pool(pool, rows, [unravel(pool.elites.params[row]) for row in rows], unravel)


def _choose(gathered: _Pool, archives: Sequence[Archive], curves: np.ndarray,
            costs: Sequence[int], *, config: TransferConfig, start: float,
            fresh: Params | None = None) -> TransferChoice:
    """Lines 7-10 of FewShotSelectElite from the probe curves of a pool (the elites',
    then the ``fresh`` network's last when given: the fresh-start rule)."""
    pool, rows, unravel = gathered.pool, gathered.rows, gathered.unravel
    results = probe_summary(np.asarray(curves))
    weights = {"w_final": config.w_final, "w_slope": config.w_slope, "w_auc": config.w_auc}
    best, scores = few_shot_select(results, epsilon=config.epsilon, **weights)
    scores = np.asarray(scores)
    window = np.asarray(near_best(results.sr_final, epsilon=config.epsilon))
    candidates = _candidates(gathered, archives, results, scores, window, costs)
    common = {"candidates": candidates, "env_steps": int(sum(costs))}
    if fresh is not None:
        k = len(rows)
        common["fresh"] = ProbeOutcome(
            sr0=float(results.sr0[k]), sr_final=float(results.sr_final[k]),
            slope=float(results.slope[k]), auc=float(results.auc[k]), score=float(scores[k]),
            in_window=bool(window[k]), env_steps=int(costs[k]))
        if best == k or not np.any(np.asarray(results.sr_final) > 0):
            return TransferChoice(params=fresh, index=-1, elite_id=-1, source=-1, tag=-1,
                                  slot=-1, lineage=(), wall_s=running() - start,
                                  **common)
    chosen = candidates[best]
    return TransferChoice(
        params=unravel(pool.elites.params[rows[best]]), index=best, elite_id=chosen.elite_id,
        source=chosen.source, tag=chosen.tag, slot=chosen.slot, lineage=chosen.lineage,
        wall_s=running() - start, **common)


def _candidates(gathered: _Pool, archives: Sequence[Archive], results: Any, scores: np.ndarray,
                window: np.ndarray, costs: Sequence[int]) -> tuple[ProbedCandidate, ...]:
    """The pooled elites with their probe outcomes, in pool order."""
    pool, rows = gathered.pool, gathered.rows
    el = pool.elites
    host = jax.device_get(
        {"id": el.elite_id, "task": el.task, "fitness": el.fitness, "lineage": el.lineage,
         "descriptor": el.descriptor}
    )
    source, slot = np.asarray(pool.source), np.asarray(pool.slot)
    tags = [int(a.tag) for a in archives]
    sr0, sr_final, slope, auc = (np.asarray(x) for x in results)
    return tuple(
        ProbedCandidate(
            elite_id=int(host["id"][row]),
            source=int(source[row]),
            tag=tags[int(source[row])],
            slot=int(slot[row]),
            task=int(host["task"][row]),
            fitness=float(host["fitness"][row]),
            descriptor=tuple(float(x) for x in host["descriptor"][row]),
            lineage=tuple(lineage_visits(host["lineage"][row])),
            sr0=float(sr0[j]),
            sr_final=float(sr_final[j]),
            slope=float(slope[j]),
            auc=float(auc[j]),
            score=float(scores[j]),
            in_window=bool(window[j]),
            env_steps=costs[j],
        )
        for j, row in enumerate(rows)
    )
