"""MAP-Elites illumination of a task-local archive (paper App. "MAP-Elites", Algorithm
"MAP-Elites for task-local archive construction"; BuildArchive and RefreshArchive of
Algorithm TeLAPA).

`illuminate` runs the algorithm line by line: evaluate the trained policy theta_t for m
episodes, describe it under the current embedding E_{t-1}, insert it as the base elite
with sigma_0 and store it as the archive reference (lines "Archive initialization"), then
N_ME proposals (lines "Illumination loop"): parent choice (with optional injection),
sigma self-adaptation and mutation (`telapa.qd.mutation.propose`), m-episode evaluation
(`evaluate_population`), descriptor (`describe`), gate g_i (`competence_gate`) and
insertion with d_min adaptation (`telapa.qd.archive.insert_batch`).

Batching is not a change of method: ``batch_size`` candidates are proposed from one
archive state and evaluated together (one ``vmap`` over parameters on the jax backend),
then inserted one after the other in proposal order. ``batch_size=1`` is the paper's
steady-state loop: every candidate sees the archive after the previous insertion.

Keys: ``k_base, k_loop = split(key)``; the base policy is evaluated with ``k_base``; batch
j (0-based) uses ``k_prop, k_eval = split(fold_in(k_loop, j))`` for `propose` and
`evaluate_population`.

Seeds in lockstep. The seeds of a batch illuminate together (`illuminate_seeds`, one
`Illumination` per seed): at every step all seeds' candidates are one population
evaluation (each with the key it has alone: per-episode randomness, so its episodes are
its own), each seed inserts its own into its own archive in proposal order, and the
step's log rows of all seeds reach the host in one transfer. Nothing of a seed depends on
the others: its archive and log are those of `illuminate` alone, up to float
reassociation in the batched policy (tested equal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from telapa.continual.methods.telapa.embedding import EmbeddingState, describe
from telapa.io.clock import running
from telapa.latent import LatentConfig, pad_or_truncate
from telapa.qd.archive import (
    Archive,
    InsertStatus,
    copy_archive,
    elite_id_offset,
    init_archive,
    insert_batch,
    set_reference,
)
from telapa.qd.config import QDConfig
from telapa.qd.lineage import LINEAGE_BITS, lineage_words, with_visit
from telapa.qd.mutation import Offspring, competence_gate, propose
from telapa.qd.selection import ElitePool
from telapa.qd.trajectories import FeatureCodec, Trajectories
from telapa.rl.agent import Agent
from telapa.rl.evaluate import make_population_evaluator
from telapa.rl.networks import Params, flatten_params

Unravel = Callable[[jax.Array], Params]
ProgressFn = Callable[[int, int, int], None]
"""``progress(done, total, archive_size)``, called after every batch."""

T_MAX = 256
"""Steps of each episode kept by `evaluate_population` by default (the embedder's T_max)."""


# --- population evaluation --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PopulationEval:
    """m-episode evaluations of B candidates (the "evaluate ... for m episodes and collect
    trajectories" lines of the algorithm)."""

    returns: jax.Array
    """(B, E) undiscounted episode returns."""
    lengths: jax.Array
    """(B, E) int32 episode lengths (not clipped to T)."""
    features: jax.Array
    """(B, E, T, D) per-step features: the first T steps, zero past each length."""
    sr: jax.Array
    """(B,) competence of each candidate's returns (the env family's: MiniGrid's
    success rate, MuJoCo's normalized return SR~)."""
    fitness: jax.Array
    """(B,) F: mean return."""
    env_steps: int
    """Sum of all episode lengths: the env steps this evaluation cost."""


def _population_evaluator(
    agent: Agent, unravel: Unravel, n_params: int, episodes: int, t_max: int
) -> Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """The agent's jitted population evaluator (features kept for ``t_max`` steps), one of
    the agent's programs (`Agent.program`) keyed on the parameter layout, episodes and T
    (the policy mode and time limit are the agent's; jit caches on B, which sets the
    default lanes per candidate)."""
    layout = jax.eval_shape(unravel, jax.ShapeDtypeStruct((n_params,), jnp.float32))
    leaves, treedef = jax.tree.flatten(layout)
    shapes = tuple((leaf.shape, leaf.dtype) for leaf in leaves)

    def build() -> Callable:
        evaluate = make_population_evaluator(
            agent.env, agent.policy, episodes, agent.spec.max_steps,
            agent.config.eval.deterministic, feature_steps=t_max)

        def run(flat: jax.Array, keys: jax.Array):
            return evaluate(jax.vmap(unravel)(flat), keys)

        return jax.jit(run)

    return agent.program(("population-evaluator", treedef, shapes, episodes, t_max), build)


def evaluate_population(
    agent: Agent,
    flat_params: jax.Array,
    unravel: Unravel,
    *,
    episodes: int,
    key: jax.Array,
    t_max: int = T_MAX,
) -> PopulationEval:
    """Evaluates B flat parameter vectors (B, P) for ``episodes`` episodes each.

    Candidate b is evaluated exactly as ``agent.evaluate(unravel(flat_params[b]),
    episodes, keys[b])`` with ``keys = jax.random.split(key, B)`` (the agent's policy
    mode and time limit). On the jax backend all B run in one jitted loop
    (`make_population_evaluator`); on the host backends through `Agent.evaluate_batch`
    (native: one batch of B x ``episodes`` envs; gymnasium: a host loop). Features keep
    the first ``t_max`` steps (zero-padded)."""
    (evaluation,) = evaluate_populations(agent, [flat_params], unravel, episodes=episodes,
                                         keys=[key], t_max=t_max)
    return evaluation


def evaluate_populations(
    agent: Agent,
    flat_params: Sequence[jax.Array],
    unravel: Unravel,
    *,
    episodes: int,
    keys: Sequence[jax.Array],
    t_max: int = T_MAX,
) -> list[PopulationEval]:
    """`evaluate_population` of several populations ``(flat_params[i], keys[i])`` (the
    seeds of a batch; one parameter layout) as ONE population evaluation on the jax and
    native backends: their candidates concatenated, candidate b of population i evaluated with
    ``split(keys[i], B_i)[b]`` as it would be alone, and the episode lengths read back in
    one transfer."""
    flats = [jnp.asarray(f, jnp.float32) for f in flat_params]
    sizes = [int(f.shape[0]) for f in flats]
    member_keys = [jax.random.split(k, b) for k, b in zip(keys, sizes, strict=True)]
    if agent.backend == "jax":
        flat = flats[0] if len(flats) == 1 else jnp.concatenate(flats)
        run = _population_evaluator(agent, unravel, int(flat.shape[1]), episodes, t_max)
        returns, lengths, features = run(
            flat, member_keys[0] if len(flats) == 1 else jnp.concatenate(member_keys))
    else:  # host backends: Agent.evaluate_batch (native: one batch of envs)
        flat = flats[0] if len(flats) == 1 else jnp.concatenate(flats)
        results = agent.evaluate_batch(jax.vmap(unravel)(flat), episodes,
                                       jnp.concatenate(member_keys), feature_steps=t_max)
        returns = jnp.asarray(np.stack([r.returns for r in results]), jnp.float32)
        lengths = jnp.asarray(np.stack([r.lengths for r in results]), jnp.int32)
        features = jnp.stack(
            [pad_or_truncate(jnp.asarray(r.features), r.lengths, t_max)[0] for r in results]
        )
    sr = jnp.asarray(agent.competence(returns), jnp.float32)
    fitness = jnp.mean(returns, axis=-1)
    steps = np.asarray(lengths, np.int64).sum(axis=-1)
    bounds = np.cumsum([0, *sizes])
    return [
        PopulationEval(returns=returns[a:b], lengths=lengths[a:b], features=features[a:b],
                       sr=sr[a:b], fitness=fitness[a:b], env_steps=int(steps[a:b].sum()))
        if len(sizes) > 1 else
        PopulationEval(returns=returns, lengths=lengths, features=features, sr=sr,
                       fitness=fitness, env_steps=int(steps.sum()))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def trajectory_codec(agent: Agent) -> FeatureCodec:
    """The codec of the agent's env family for its env (`EnvFamily.codec`): exact for
    MiniGrid (grid size and time limit of the env), float16 for MuJoCo."""
    return agent.family.codec(agent.spec)


# --- the log ----------------------------------------------------------------------------


class IlluminationRow(NamedTuple):
    """One candidate of the illumination loop (or the base elite, ``index = -1``)."""

    index: int
    """Candidate number i - 1 in proposal order (-1: the base elite)."""
    parent_id: int
    """Elite id of the parent (injected: of the pool elite)."""
    injected: bool
    sigma: float
    """sigma_i, the self-adapted scale the child was mutated with."""
    sr: float
    fitness: float
    status: int
    """`InsertStatus`."""
    elite_id: int
    """Id given on acceptance, -1 if rejected."""
    replaced_id: int
    """Id of the elite it replaced, -1 otherwise."""
    distance: float
    """Distance to the nearest elite before insertion."""
    archive_size: int
    """Archive size after this insertion."""
    d_min: float
    """Spacing threshold after this insertion."""
    env_steps: int
    """Env steps of its m evaluation episodes."""


@dataclasses.dataclass
class IlluminationLog:
    """Summary statistics of one `illuminate` call ("save ... summary statistics")."""

    base: IlluminationRow
    rows: list[IlluminationRow]
    """One row per proposed candidate, in proposal order."""
    gate: float
    """g_i (constant: it depends only on the reference SR)."""
    env_steps: int
    """Extra env steps: base evaluation plus every candidate's evaluation."""
    wall_s: float

    def counts(self) -> dict[str, int]:
        """How many candidates were proposed (``candidates``) and accepted into the
        archive (``accepted``: added, or replacing an elite), and of those whose parent
        was injected from another archive, how many were proposed (``injected``) and
        accepted (``injected_accepted``): the elite-injection ablation's "how often
        injected parents produced elites" is injected_accepted / injected."""
        accepted = [r.elite_id >= 0 for r in self.rows]
        return {"candidates": len(self.rows), "accepted": sum(accepted),
                "injected": sum(r.injected for r in self.rows),
                "injected_accepted": sum(r.injected and a
                                         for r, a in zip(self.rows, accepted, strict=True))}

    def columns(self) -> dict[str, np.ndarray]:
        """The rows as columns (one array per `IlluminationRow` field)."""
        return {
            name: np.asarray([getattr(r, name) for r in self.rows])
            for name in IlluminationRow._fields
        }


# --- illumination -----------------------------------------------------------------------


@partial(jax.jit, static_argnames=("latent_config", "codec", "traj_shape"))
def _candidates(
    offspring: Offspring,
    features: jax.Array,
    lengths: jax.Array,
    sr: jax.Array,
    fitness: jax.Array,
    embedding: EmbeddingState,
    visit: jax.Array,
    *,
    latent_config: LatentConfig,
    codec: FeatureCodec | None,
    traj_shape: tuple[int, int],
):
    """Raw latent statistics and descriptor under E_{t-1} of evaluated children, as
    insertion candidates with their encoded episodes (first M episodes, T steps)."""
    feats, lens = pad_or_truncate(features, lengths, latent_config.t_max)
    raw, descriptor = describe(embedding, feats, lens, latent_config)
    candidates = offspring.candidates(
        fitness=fitness, sr=sr, descriptor=descriptor, visit=visit, raw_latent=raw
    )
    traj = None
    if codec is not None:
        m, t = traj_shape
        traj = Trajectories.encode(codec, *pad_or_truncate(features[:, :m], lengths[:, :m], t))
    return candidates, traj


def _base_offspring(
    flat: jax.Array, sigma0: float, parent_id: int, lineage: jax.Array, visit: int
) -> Offspring:
    """theta_t as a batch of one "child" with sigma_0 and ``lineage | bit(visit)``."""
    return Offspring(
        params=flat[None],
        sigma=jnp.full((1,), sigma0, jnp.float32),
        parent_index=jnp.full((1,), -1, jnp.int32),
        parent_id=jnp.full((1,), parent_id, jnp.int32),
        lineage=with_visit(lineage, visit)[None],
        injected=jnp.zeros((1,), bool),
    )


def _row_data(offspring: Offspring, evaluation: PopulationEval, info) -> tuple:
    """What the log rows of one inserted batch read (device arrays, fetched by the
    caller together with the other seeds')."""
    return ((offspring.parent_id, offspring.injected, offspring.sigma),
            (evaluation.sr, evaluation.fitness, evaluation.lengths.sum(-1)), info)


def _rows_from(start: int, size_before: int, fetched: tuple) -> list[IlluminationRow]:
    """Host rows of one inserted batch from its fetched `_row_data` (sizes follow the
    sequential insertions)."""
    off, ev, inf = fetched
    sizes = size_before + np.cumsum(inf.status == int(InsertStatus.ADDED))
    return [
        IlluminationRow(
            index=start + k,
            parent_id=int(off[0][k]),
            injected=bool(off[1][k]),
            sigma=float(off[2][k]),
            sr=float(ev[0][k]),
            fitness=float(ev[1][k]),
            status=int(inf.status[k]),
            elite_id=int(inf.elite_id[k]),
            replaced_id=int(inf.replaced_id[k]),
            distance=float(inf.distance[k]),
            archive_size=int(sizes[k]),
            d_min=float(inf.d_min[k]),
            env_steps=int(ev[2][k]),
        )
        for k in range(len(sizes))
    ]


class Illumination:
    """One seed's `illuminate`, as steps that a caller can run in lockstep with other
    seeds' (`illuminate_seeds`): step 0 evaluates theta_t and inserts it as the base elite
    (the lines "Archive initialization"), step j >= 1 proposes, evaluates and inserts the
    loop's batch j - 1. `illuminate` takes the same arguments, and its docstring says
    what each does.

    It is also a task end's lockstep request (`telapa.continual.lockstep`): the
    illuminations of a batch's seeds are answered by one `illuminate_seeds`."""

    phase: ClassVar[str] = "illumination"

    @classmethod
    def answer(cls, runs: Sequence[Illumination]) -> list[tuple[Archive, IlluminationLog]]:
        return illuminate_seeds(runs[0].agent, runs)

    def __init__(
        self,
        agent: Agent,
        base_params: Params,
        *,
        visit: int,
        tag: int,
        embedding: EmbeddingState,
        latent_config: LatentConfig,
        qd_config: QDConfig,
        key: jax.Array,
        iterations: int,
        batch_size: int = 1,
        initial_archive: Archive | None = None,
        parent_id: int = -1,
        lineage: jax.Array | None = None,
        pool: ElitePool | None = None,
        progress: ProgressFn | None = None,
    ):
        if iterations < 0 or batch_size < 1:
            raise ValueError(f"need iterations >= 0, batch_size >= 1; got {iterations}, "
                             f"{batch_size}")
        self.start = running()
        self.agent = agent
        ill = qd_config.illumination
        self.episodes = ill.eval_episodes
        flat_base, self.unravel = flatten_params(base_params)
        codec = trajectory_codec(agent)
        if initial_archive is None:
            words = lineage_words(visit + 1) if lineage is None else int(np.shape(lineage)[-1])
            spec = qd_config.archive_spec(
                n_params=flat_base.shape[0],
                desc_dim=latent_config.latent_dim,
                raw_dim=3 * latent_config.latent_dim,
                lineage_words=words,
            )
            archive = init_archive(
                spec,
                tag=tag,
                id_offset=elite_id_offset(tag),
                codec=codec if ill.store_trajectories else None,
                episodes=ill.stored_episodes,
                steps=ill.traj_steps,
                embedding_version=int(embedding.version),
                normalizer_id=embedding.normalizer_id,
            )
        else:
            _check_refresh(initial_archive, tag, embedding, self.episodes)
            archive = copy_archive(initial_archive)  # the caller's archive survives donation
        traj_shape = (0, 0) if archive.traj is None else tuple(archive.traj.u8.shape[1:3])
        if lineage is None:
            lineage = jnp.zeros((archive.spec.lineage_words,), jnp.uint32)
        if visit >= archive.spec.lineage_words * LINEAGE_BITS:
            raise ValueError(f"visit {visit} does not fit {archive.spec.lineage_words} "
                             "lineage words")
        self.archive = archive
        self.t_eval = max(latent_config.t_max, traj_shape[1])
        self._statics = dict(latent_config=latent_config,
                             codec=None if archive.traj is None else codec,
                             traj_shape=traj_shape)
        self.visit, self.embedding, self.ill = visit, embedding, ill
        self.iterations, self.batch_size = iterations, batch_size
        self.injection, self.pool, self.progress = qd_config.injection, pool, progress
        self.base = _base_offspring(flat_base, ill.sigma0, parent_id, jnp.asarray(lineage),
                                    visit)
        self.k_base, self.k_loop = jax.random.split(key)
        self.size = int(archive.size)
        self.steps = 1 + -(-iterations // batch_size)
        """Steps: the base elite, then one per batch of proposals."""
        self.gate: jax.Array | None = None
        self.base_row: IlluminationRow | None = None
        self.rows: list[IlluminationRow] = []
        self.env_steps = 0

    def _batch(self, j: int) -> tuple[int, int]:
        """``(done, n)`` of step ``j >= 1``: proposals before its batch, and its size."""
        done = (j - 1) * self.batch_size
        return done, min(self.batch_size, self.iterations - done)

    def proposal(self, j: int) -> tuple[Offspring, jax.Array]:
        """The offspring of step ``j`` and the key of their evaluation: theta_t with
        ``k_base``; batch ``i = j - 1`` with ``k_prop, k_eval = split(fold_in(k_loop,
        i))``, parents chosen (optional injection), sigma_i self-adapted, mutated."""
        if j == 0:
            return self.base, self.k_base
        _, n = self._batch(j)
        k_prop, k_eval = jax.random.split(jax.random.fold_in(self.k_loop, j - 1))
        ill, inj = self.ill, self.injection
        offspring = propose(
            k_prop, self.archive, n=n, visit=self.visit, tau=ill.tau,
            sigma_min=ill.sigma_min, sigma_max=ill.sigma_max, pool=self.pool,
            p_inj=inj.p_inj, lam=inj.lam, subset=inj.subset, own_visit=True,
        )
        return offspring, k_eval

    def insert(self, j: int, offspring: Offspring, evaluation: PopulationEval) -> tuple:
        """Describes the evaluated offspring of step ``j`` under E_{t-1} and inserts them
        in proposal order, gated on g_i (d_min adapted after every change; theta_t is
        forced in, becomes the reference, and sets g_i). Device work only: returns what
        the step's log rows read, for `record`."""
        candidates, traj = _candidates(
            offspring, evaluation.features, evaluation.lengths, evaluation.sr,
            evaluation.fitness, self.embedding, jnp.asarray(self.visit, jnp.int32),
            **self._statics,
        )
        base = j == 0
        self.archive, info = insert_batch(
            self.archive, candidates, gate=0.0 if base else self.gate, traj=traj,
            donate=True, force=base,
        )
        if base:
            self.archive = set_reference(
                self.archive, descriptor=candidates.descriptor[0], sr=candidates.sr[0],
                fitness=candidates.fitness[0],
            )
            self.gate = competence_gate(self.archive.ref_sr, gamma=self.ill.gate_gamma,
                                        floor=self.ill.gate_floor)
        self.env_steps += evaluation.env_steps
        return _row_data(offspring, evaluation, info)

    def record(self, j: int, fetched: tuple) -> None:
        """The log rows of step ``j`` from its fetched `insert` result; reports progress
        after every batch."""
        if j == 0:
            (self.base_row,) = _rows_from(-1, self.size, fetched)
            self.size = self.base_row.archive_size
            return
        done, n = self._batch(j)
        rows = _rows_from(done, self.size, fetched)
        self.rows.extend(rows)
        self.size = rows[-1].archive_size
        if self.progress is not None:
            self.progress(done + n, self.iterations, self.size)

    def result(self, wall_s: float | None = None) -> tuple[Archive, IlluminationLog]:
        """The archive H and the `IlluminationLog` (``wall_s``: default the time since
        this illumination was made)."""
        log = IlluminationLog(
            base=self.base_row, rows=self.rows, gate=float(self.gate),
            env_steps=self.env_steps,
            wall_s=running() - self.start if wall_s is None else wall_s,
        )
        return self.archive, log


def illuminate_seeds(agent: Agent, runs: Sequence[Illumination], *,
                     lockstep: bool | None = None) -> list[tuple[Archive, IlluminationLog]]:
    """The illuminations ``runs`` (the seeds of a batch, on one agent) in lockstep: at
    every step, all seeds' offspring are ONE population evaluation
    (`evaluate_populations`: each candidate with the key it has alone), then each seed
    inserts its own in MAP-Elites order into its own archive, and the log rows of all
    seeds reach the host in one transfer. Each seed's archive and log are those of its
    `illuminate` alone (up to float reassociation in the batched policy); its ``wall_s``
    is its share of the elapsed time.

    ``lockstep`` (default: on accelerators) chooses that; without it the seeds are
    illuminated one after the other, each as its `illuminate`. On a 2-core CPU the
    lockstep evaluation of 5 seeds took 31.1 s against 26.8 s seed after seed (the
    study preset's BuildArchive on DoorKey-8x8; BENCHMARKS.md, "Visits as compiled
    programs"): the CPU has no idle width for the batch to fill, and each evaluation
    step waits for the longest episode of all seeds' candidates."""
    if not runs:
        raise ValueError("illuminate_seeds needs at least one illumination")
    if lockstep is None:
        lockstep = jax.default_backend() != "cpu"
    if not lockstep and len(runs) > 1:
        return [illuminate_seeds(agent, [run])[0] for run in runs]
    layouts = {(r.episodes, r.t_eval, r.base.params.shape[1]) for r in runs}
    if len(layouts) > 1:
        raise ValueError(f"illuminations in lockstep need one evaluation layout (episodes, "
                         f"T, parameters); got {sorted(layouts)}")
    start = running()
    for j in range(max(r.steps for r in runs)):
        active = [r for r in runs if j < r.steps]
        proposals = [r.proposal(j) for r in active]
        evaluations = evaluate_populations(
            agent, [off.params for off, _ in proposals], active[0].unravel,
            episodes=active[0].episodes, keys=[key for _, key in proposals],
            t_max=active[0].t_eval)
        pending = [r.insert(j, off, ev) for r, (off, _), ev in
                   zip(active, proposals, evaluations, strict=True)]
        for r, fetched in zip(active, jax.device_get(pending), strict=True):
            r.record(j, fetched)
    share = (running() - start) / len(runs)
    return [r.result(share if len(runs) > 1 else None) for r in runs]


def illuminate(agent: Agent, base_params: Params, **kwargs: Any
               ) -> tuple[Archive, IlluminationLog]:
    """Algorithm "MAP-Elites for task-local archive construction" on ``agent``'s env
    around ``base_params`` (theta_t). Returns the archive H and an `IlluminationLog`.
    The keyword arguments are those of `Illumination`; what each does follows.

    Without ``initial_archive`` this is BuildArchive: a new archive for base tag ``tag``
    (capacity, target and initial d_min from ``qd_config``; ids start at the tag's
    `elite_id_offset`).
    With it, RefreshArchive: the archive (same tag and embedding) is copied (the argument stays
    valid), theta_t always enters it (`insert` with ``force=True``: added if novel and there
    is room, else it replaces its nearest elite: ``log.base.status``), and the reference
    becomes theta_t. Parents are drawn among the elites created on this visit (`propose`
    with ``own_visit=True``): theta_t and its accepted children, so a refresh illuminates
    the neighbourhood of the new policy as BuildArchive does, inside the old archive
    (docs/assumptions.md, "RefreshArchive"). The base elite has ``parent_id`` (the elite
    theta_t was trained from, -1 for scratch), lineage ``lineage | bit(visit)`` and sigma_0;
    it passes the gate by definition (g = 0). Candidates are created on ``visit`` and must
    reach g_i = `competence_gate` (reference SR). ``pool`` (with ``qd_config.injection.p_inj``
    > 0) enables cross-archive elite injection. Episodes are stored for re-embedding
    when ``illumination.store_trajectories`` (a refresh keeps the archive's choice).
    Nothing is trained: theta_t is only read.
    ``iterations`` may be 0 (only the base elite). Deterministic given ``key``. The
    steps are those of `Illumination`; `illuminate_seeds` runs several seeds' in lockstep.
    """
    return illuminate_seeds(agent, [Illumination(agent, base_params, **kwargs)])[0]


def _check_refresh(archive: Archive, tag: int, embedding: EmbeddingState, episodes: int) -> None:
    """RefreshArchive needs the archive of this base tag, expressed under the current
    embedding (its descriptors and the new ones must share one latent space)."""
    if int(archive.tag) != tag:
        raise ValueError(f"initial archive has tag {int(archive.tag)}, expected {tag}")
    if int(archive.embedding_version) != int(embedding.version) or (
        archive.normalizer_hex != embedding.normalizer_id
    ):
        raise ValueError(
            f"initial archive is expressed under embedding version "
            f"{int(archive.embedding_version)} (normalizer {archive.normalizer_hex}), the "
            f"current one is {int(embedding.version)} ({embedding.normalizer_id}): repack it "
            "first"
        )
    if archive.traj is not None and archive.traj.lengths.shape[1] > episodes:
        raise ValueError(
            f"initial archive stores {archive.traj.lengths.shape[1]} episodes per elite, "
            f"more than the {episodes} evaluated"
        )
