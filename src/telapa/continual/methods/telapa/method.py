"""TeLAPA as a continual method (paper Algorithm "TeLAPA"), on the loop's hooks:

* ``start_task``: with archives, FewShotSelectElite picks the transfer origin from the
  union of all archives (the archived weights, fresh optimizer); without, PPO starts from
  scratch;
* ``observe``: every evaluation's episode set goes to the replay bank, successful ones to
  the anchor bank (Elite / Final Storage, and the evidence collected while training);
* ``end_task``: before the first archive, the normalizer N_0 is fit on the banked
  evaluations (so every archive lives in standardised units); then BuildArchive (first
  visit of a task) or RefreshArchive (revisit) around the trained policy (with
  ``injection.p_inj > 0``, parents are sometimes injected from the other tasks'
  archives), then BoundaryMaintenance of the latent space.

TeLAPA-Static keeps E_0 and N_0 and skips maintenance (paper Sec. 4 (ix)). TeLAPA-Fresh
(beyond the paper) adds the network Scratch would start the visit from to every few-shot
pool and starts from it when no probe ends with a success (`telapa.continual.methods.telapa.
transfer`, "A fresh start").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import jax
import numpy as np
import pandas as pd
from pydantic import Field

from telapa.config import StrictModel
from telapa.continual.curriculum import Visit
from telapa.continual.methods.base import Method, TaskContext
from telapa.continual.methods.telapa.banks import EpisodeBanks, bank_seq, store
from telapa.continual.methods.telapa.embedding import EmbeddingState
from telapa.continual.methods.telapa.illumination import (
    Illumination,
    IlluminationLog,
    trajectory_codec,
)
from telapa.continual.methods.telapa.maintenance import (
    MaintenanceLog,
    MaintenanceRequest,
    fit_initial_normalizer,
)
from telapa.continual.methods.telapa.transfer import OriginRequest, TransferChoice
from telapa.continual.state import MethodState
from telapa.io import PhaseTimer
from telapa.latent.config import LatentConfig
from telapa.qd.archive import Archive, init_archive
from telapa.qd.config import QDConfig
from telapa.qd.export import archive_frame
from telapa.qd.lineage import lineage_from_visits, lineage_words
from telapa.qd.selection import union
from telapa.qd.trajectories import float16_codec
from telapa.rl.agent import Agent, episodes_key
from telapa.rl.evaluate import EvalResult
from telapa.rl.networks import Params, flatten_params
from telapa.rl.ppo import PPOState

BANK_EPISODES = 16
"""Episodes kept per stored episode set (the first ones of each evaluation): enough for
a policy-level mean, and the banks stay small enough to checkpoint often (45 MB)."""

MAX_VISITS = 64
"""Lineage bitmasks hold this many visits (two words)."""


class TeLAPAConfig(StrictModel):
    """TeLAPA: archives, illumination and transfer (`telapa.qd`), latent space
    (`telapa.latent`); paper App. D-E and DESIGN.md defaults."""

    qd: QDConfig = Field(default_factory=QDConfig)
    latent: LatentConfig = Field(default_factory=LatentConfig)


class TeLAPA(Method):
    """TeLAPA (module docstring). Its state's parts: one archive per stored task
    (``archive-<tag>``, the tag the task's index among ``stored_tasks``, the base tag of
    Algorithm TeLAPA), the latent space ``embedding`` (E_t and N_t), the episode
    ``banks`` and the ``origin`` of the visit's PPO start (the elite's id and lineage
    bitmask)."""

    name = "telapa"
    section = "telapa"
    settings_model = TeLAPAConfig
    maintain_latent = True
    observes_features = True
    fresh_start = False
    """Whether FewShotSelectElite's pool holds a freshly initialised network too."""

    def __init__(self, settings: TeLAPAConfig | None = None, **kwargs: Any):
        super().__init__(settings, **kwargs)
        self.words = lineage_words(MAX_VISITS)

    def init(self, params: Params) -> MethodState:
        """No archive; E_0, a random encoder drawn from the method's key (TeLAPA-Static
        keeps it); empty banks; no origin."""
        latent = self.settings.latent
        banks = EpisodeBanks.create(
            float16_codec(latent.feature_dim), episodes=min(BANK_EPISODES, self.eval_episodes),
            t_max=latent.t_max)
        return MethodState(parts={"embedding": EmbeddingState.create(self.key, latent),
                                  "banks": banks, "origin": self._no_origin()})

    def _no_origin(self) -> dict[str, np.ndarray]:
        return {"id": np.int32(-1), "lineage": lineage_from_visits((), self.words)}

    @staticmethod
    def archives(mstate: MethodState) -> dict[str, Archive]:
        """The archive of each stored task, in the order the tasks were stored."""
        return {task: mstate.parts[f"archive-{tag}"]
                for tag, task in enumerate(mstate.stored_tasks)}

    def start_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext):
        """FewShotSelectElite over the archives (a lockstep `OriginRequest`: a batch's
        seeds probe as one batch), or scratch's ``learner`` before the first archive."""
        self._check_visit(ctx)
        choice = None
        archives = self.archives(mstate)
        if archives:
            choice = yield OriginRequest(
                ctx.agent, list(archives.values()), self.settings.qd.transfer,
                key=ctx.key, rollout_key=self._probe_rollout_key(ctx),
                penalty=learner.penalty, fresh=self._fresh(ctx),
                progress=ctx.report("probes"))
        return self._start_from(mstate, learner, ctx, choice)

    @classmethod
    def _fresh(cls, ctx: TaskContext) -> Params | None:
        """The pool's fresh network: the one Scratch starts this visit from (``ctx.key``),
        when the method has fresh starts."""
        return ctx.init_params(ctx.key) if cls.fresh_start else None

    @staticmethod
    def _probe_rollout_key(ctx: TaskContext) -> jax.Array:
        """The probes' training episodes: `episodes_key` of ``fold_in(ctx.key, 1)``."""
        return episodes_key(jax.random.fold_in(ctx.key, 1))

    def _check_visit(self, ctx: TaskContext) -> None:
        if ctx.visit.index >= MAX_VISITS:
            raise ValueError(f"TeLAPA lineage records hold {MAX_VISITS} visits")

    def _start_from(self, mstate: MethodState, learner: PPOState, ctx: TaskContext,
                    choice: TransferChoice | None) -> tuple[PPOState, MethodState]:
        """The visit's start: the chosen elite's archived weights (scratch's ``learner``
        params without a choice) with a fresh optimizer; the origin and the transfer
        record."""
        params = learner.params
        origin = self._no_origin()
        if choice is not None:
            params = choice.params
            if choice.origin == "elite":
                origin = {"id": np.int32(choice.elite_id),
                          "lineage": lineage_from_visits(choice.lineage, self.words)}
            mstate = mstate.spent(choice.env_steps).logged(
                {"event": "transfer", **choice.record(), "visit": ctx.visit.index,
                 "visit_tag": ctx.visit.tag})
        learner = learner.replace(params=params, opt_state=ctx.fresh_optimizer(params))
        return learner, mstate.with_parts(origin=origin)

    def observe(self, mstate: MethodState, visit: Visit,
                kind: Literal["pre", "train", "post"], result: EvalResult) -> MethodState:
        if not (self.maintain_latent or not mstate.parts["embedding"].has_normalizer):
            return mstate
        return mstate.with_parts(banks=store(
            mstate.parts["banks"], result.features, result.lengths, result.sr, visit.index,
            anchor_threshold=self.settings.latent.anchor_sr_threshold))

    def end_task(self, mstate: MethodState, learner: PPOState, ctx: TaskContext):
        """N_0 before the first archive, BuildArchive or RefreshArchive (a lockstep
        request: a batch's seeds illuminate together, `illuminate_seeds`), then
        BoundaryMaintenance (TeLAPA only; a lockstep `MaintenanceRequest`)."""
        timer = PhaseTimer()
        mstate, illumination, maintenance_key = self._before_illumination(mstate, ctx, timer)
        with timer.phase("illumination"):
            request = Illumination(ctx.agent, learner.params, **illumination)
        archive, log = yield request
        mstate = self._keep_archive(mstate, ctx, archive, log)
        if self.maintain_latent:
            maintained = yield MaintenanceRequest(
                mstate.parts["embedding"], mstate.parts["banks"], self.archives(mstate),
                self.settings.latent, key=maintenance_key, progress=ctx.report("maintenance"))
            mstate = self._maintained(mstate, ctx, *maintained)
        return mstate.timed_all(timer.totals)

    def _before_illumination(self, mstate: MethodState, ctx: TaskContext, timer: PhaseTimer
                             ) -> tuple[MethodState, dict[str, Any], jax.Array]:
        """N_0 before the first archive; the keyword arguments of this task end's
        `Illumination` (BuildArchive or RefreshArchive, with the injection pool) and the
        maintenance key."""
        qd, latent = self.settings.qd, self.settings.latent
        task = ctx.visit.task
        illumination_key, maintenance_key, normalizer_key = jax.random.split(ctx.key, 3)
        embedding, banks = mstate.parts["embedding"], mstate.parts["banks"]
        if not embedding.has_normalizer:
            # the first archive's units: N_0 fit on this task's evaluations (both variants)
            with timer.phase("maintenance"):
                embedding = fit_initial_normalizer(embedding, banks, config=latent,
                                                   key=normalizer_key)
            mstate = mstate.with_parts(embedding=embedding).logged(
                {"event": "normalizer", "visit": ctx.visit.index,
                 "normalizer_id": embedding.normalizer_id, "bank_sets": len(bank_seq(banks))})
        archives = self.archives(mstate)
        others = [a for t, a in archives.items() if t != task]
        pool = union(others) if qd.injection.p_inj > 0 and others else None
        mstate = mstate.storing(task)
        origin = mstate.parts["origin"]
        illumination = dict(
            visit=ctx.visit.index, tag=mstate.stored_tasks.index(task), embedding=embedding,
            latent_config=latent, qd_config=qd, key=illumination_key,
            iterations=qd.illumination.iterations, batch_size=qd.illumination.batch_size,
            initial_archive=archives.get(task), parent_id=int(origin["id"]),
            lineage=origin["lineage"], pool=pool, progress=ctx.report("illumination"),
        )
        return mstate, illumination, maintenance_key

    def _keep_archive(self, mstate: MethodState, ctx: TaskContext, archive: Archive,
                      log: IlluminationLog) -> MethodState:
        """The task's new archive and the illumination's record."""
        tag = mstate.stored_tasks.index(ctx.visit.task)
        return mstate.with_parts(**{f"archive-{tag}": archive}).spent(log.env_steps).logged(
            {"event": "illumination", "visit": ctx.visit.index, "visit_tag": ctx.visit.tag,
             "archive_size": int(archive.size), "d_min": float(archive.d_min),
             "gate": log.gate, "env_steps": log.env_steps, "wall_s": log.wall_s,
             **log.counts()})

    @staticmethod
    def _maintained(mstate: MethodState, ctx: TaskContext, embedding: EmbeddingState,
                    archives: dict[str, Archive], log: MaintenanceLog) -> MethodState:
        """Takes BoundaryMaintenance's E_t and archives, and its record."""
        tags = {task: tag for tag, task in enumerate(mstate.stored_tasks)}
        return mstate.with_parts(
            embedding=embedding, **{f"archive-{tags[t]}": a for t, a in archives.items()}
        ).logged({"event": "maintenance", "visit": ctx.visit.index, "updated": log.updated,
                  "version": log.version, "normalizer_id": log.normalizer_id,
                  "bank_sets": log.bank_sets})

    # --- checkpoints and tables ----------------------------------------------------------

    def tables(self, mstate: MethodState) -> dict[str, pd.DataFrame]:
        frames = [archive_frame(a, task=t) for t, a in self.archives(mstate).items()]
        return {"elites": pd.concat(frames, ignore_index=True)} if frames else {}

    def parts_like(
        self, params: Params, tasks: list[str], agent_for: Callable[[str], Agent]
    ) -> dict[str, Any]:
        archives = {f"archive-{i}": self._archive_like(params, agent_for(task), i)
                    for i, task in enumerate(tasks)}
        return {**archives, **self.init(params).parts}

    def _archive_like(self, params: Params, agent: Agent, tag: int) -> Archive:
        qd, latent = self.settings.qd, self.settings.latent
        ill = qd.illumination
        spec = qd.archive_spec(
            n_params=int(np.shape(flatten_params(params)[0])[0]),
            desc_dim=latent.latent_dim, raw_dim=3 * latent.latent_dim,
            lineage_words=self.words,
        )
        return init_archive(
            spec, tag=tag, codec=trajectory_codec(agent) if ill.store_trajectories else None,
            episodes=ill.stored_episodes, steps=ill.traj_steps,
        )


class TeLAPAStatic(TeLAPA):
    """The same archives and transfer with a fixed latent space: the run-seeded random
    encoder E_0 and the normalizer N_0 fit once before the first illumination (the same
    units as TeLAPA's first archives), never updated: no maintenance."""

    name = "telapa-static"
    maintain_latent = False


class TeLAPAFresh(TeLAPA):
    """TeLAPA whose few-shot pool can start fresh (beyond the paper): every pool holds,
    besides the K_pool elites, the freshly initialised network Scratch would start the
    visit from; it is probed and scored like an elite, and taken when it scores best or
    when no probe ends with a success (where TeLAPA's tie-break takes the fittest
    elite). Its start has no origin elite and an empty lineage. Same settings section
    (and model) as TeLAPA."""

    name = "telapa-fresh"
    fresh_start = True
