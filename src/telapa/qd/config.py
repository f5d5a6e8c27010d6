"""Hyperparameters of archives, illumination, transfer-origin selection and elite
injection (paper App. "MAP-Elites" table, Sec. 3.2, App. "FewShotSelectElite",
App. "Cross-Archive Elite Injection Ablation").

Paper values: target 256, capacity 1.5 x target = 384, initial d_min 0.10, 1000
(MiniGrid) / 200 (MuJoCo) illumination iterations, sigma_0 0.05 / 0.02, 50 / 5 evaluation
episodes, p_inj = 0 by default. Every other value is a documented choice (the paper is
silent); each field's docstring gives the reason. Frozen and hashable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from telapa.config import (
    MAX_ITERATIONS,
    EnvSteps,
    Episodes,
    Iterations,
    StrictModel,
    UnitInterval,
)
from telapa.qd.archive import ArchiveSpec

_SPEC = {f.name: f.default for f in dataclasses.fields(ArchiveSpec)}
"""`ArchiveSpec`'s defaults: the one source of the archive's sizes and size control."""


class ArchiveConfig(StrictModel):
    """Unstructured archive: size control and spacing (App. "MAP-Elites" table; the rule
    is `telapa.qd.archive.ArchiveSpec`, "Size control")."""

    target_size: Iterations = _SPEC["target_size"]
    """N*: desired number of elites (paper); at most `MAX_ITERATIONS`."""
    capacity: Iterations | None = None
    """Maximum size; None -> ceil(1.5 x target_size) = 384 (paper: "1.5x the target
    archive size unless explicitly overridden")."""
    d_min: PositiveFloat = _SPEC["d_min0"]
    """Initial spacing threshold in the normalized latent space (paper)."""
    d_min_step: Annotated[float, Field(gt=0.0, le=1.0)] = _SPEC["d_min_step"]
    """a: log-step of d_min per competent candidate (choice: 0.05 moves d_min by 100x in
    ~25 rejections of an empty archive or ~90 additions, so the first few dozen
    candidates find the descriptor scale; small enough that single events barely move
    it once settled). The paper adapts d_min "so that the container remains close to its
    intended operating size" without the rule; see docs/assumptions.md, "Archive"."""
    fill_rate: Annotated[float, Field(gt=0.0, lt=1.0)] = _SPEC["fill_rate"]
    """r_0: target add rate of an empty archive (choice: 0.8 fills 242 of 256 in 1000
    candidates, N* (1 - exp(-r_0 t / N*)), and 254 in 2000)."""
    d_min_floor: PositiveFloat = _SPEC["d_min_floor"]
    """Lower clamp of d_min (choice: keeps exact duplicates out)."""
    d_min_ceil: PositiveFloat = _SPEC["d_min_ceil"]
    """Upper clamp of d_min (choice: a few robust standard deviations x sqrt(d))."""

    @property
    def max_size(self) -> int:
        """The capacity in effect."""
        return self.capacity if self.capacity is not None else math.ceil(1.5 * self.target_size)

    @model_validator(mode="after")
    def _sizes(self) -> ArchiveConfig:
        if self.max_size < self.target_size:
            raise ValueError(f"capacity={self.max_size} < target_size={self.target_size}")
        if self.d_min_floor > self.d_min_ceil:
            raise ValueError("d_min_floor > d_min_ceil")
        return self


class IlluminationConfig(StrictModel):
    """MAP-Elites illumination around a base policy (Algorithm "MAP-Elites for
    task-local archive construction")."""

    iterations: Iterations = 1000
    """N_ME: candidates proposed and evaluated (paper: 1000 MiniGrid, 200 MuJoCo); at
    most `MAX_ITERATIONS`."""
    batch_size: Iterations = 1
    """Candidates proposed (from one archive state) and evaluated together; inserted
    one by one in proposal order. 1 = the paper's steady-state loop."""
    eval_episodes: Episodes = 50
    """m: episodes per candidate (paper: 50 MiniGrid, 5 MuJoCo); at most `MAX_EPISODES`."""
    sigma0: PositiveFloat = 0.05
    """Initial mutation scale of the base elite (paper: 0.05 MiniGrid, 0.02 MuJoCo)."""
    tau: NonNegativeFloat = 0.2
    """Log-normal self-adaptation rate, sigma' = sigma exp(tau N(0,1)) (choice: the
    textbook 1/sqrt(2P) is ~0.005 for P ~ 2e4 and would freeze sigma over 1000
    iterations; 0.2 lets a lineage of ~25 generations move sigma by a factor e)."""
    sigma_min_factor: PositiveFloat = 0.1
    """sigma' is clipped to [sigma0 x min_factor, sigma0 x max_factor] (choice: one
    decade either way; keeps a runaway lineage from degenerating)."""
    sigma_max_factor: PositiveFloat = 10.0
    gate_gamma: UnitInterval = 0.8
    """Competence gate g_i = max(gate_floor, gate_gamma x SR_base) (choice: a child must
    keep 80% of the base policy's success rate)."""
    gate_floor: UnitInterval = 0.1
    """Absolute floor of g_i (choice: with a failing base policy, only children that
    succeed at least 10% of the time are stored; the paper's archive for its hardest task
    is sparse, consistent with a gate that does not collapse to 0)."""
    store_trajectories: bool = True
    """Keep each elite's evaluation episodes for re-embedding after boundary updates."""
    traj_steps: Iterations = 256
    """T of the stored episodes: the first T_max = 256 steps (what the embedder reads);
    at most `MAX_ITERATIONS`."""
    traj_episodes: Episodes | None = None
    """Episodes stored per elite; None = all ``eval_episodes`` (choice: the paper
    re-embeds from the evaluation episodes; fewer = a cheaper sketch)."""

    @property
    def sigma_min(self) -> float:
        return self.sigma0 * self.sigma_min_factor

    @property
    def sigma_max(self) -> float:
        return self.sigma0 * self.sigma_max_factor

    @property
    def stored_episodes(self) -> int:
        return self.eval_episodes if self.traj_episodes is None else self.traj_episodes

    @model_validator(mode="after")
    def _bounds(self) -> IlluminationConfig:
        if self.sigma_min_factor > 1.0 or self.sigma_max_factor < 1.0:
            raise ValueError("need sigma_min_factor <= 1 <= sigma_max_factor")
        if self.traj_episodes is not None and self.traj_episodes > self.eval_episodes:
            raise ValueError("traj_episodes > eval_episodes")
        return self


class TransferConfig(StrictModel):
    """Candidate pooling and few-shot origin selection (Algorithm FewShotSelectElite)."""

    k_pool: Iterations = 8
    """K_pool: candidates probed per transfer (choice: 8 farthest-point picks cover the
    distinct regions of a 5-8 archive library at about one per archive)."""
    probe_steps: EnvSteps = 200_000
    """B_probe: PPO env steps per candidate probe (choice: ~100 PPO iterations of 2048;
    8 x 200k = 1.6M steps per transfer, 16% of a 10M-step visit, which with illumination
    stays within the paper's 86M extra steps per seed)."""
    probe_points: Annotated[int, Field(ge=2, le=MAX_ITERATIONS)] = 5
    """SR measurements per probe, at evenly spaced progress 0, 1/4, ..., 1, in equal
    segments of whole PPO iterations (`telapa.continual.methods.telapa.transfer.
    probe_moments`; choice: the minimum for a meaningful least-squares slope and
    trapezoid AUC)."""
    probe_eval_episodes: Episodes = 20
    """Episodes per SR measurement in a probe (choice); at most `MAX_EPISODES`."""
    epsilon: UnitInterval = 0.1
    """Final-success window: keep j with SR^final_j >= SR* - epsilon (choice: about the
    standard error of an SR from 20-50 episodes, so the window holds the candidates
    that are indistinguishable from the best)."""
    w_final: NonNegativeFloat = 0.25
    """Score weights on min-max normalized SR^final, slope, AUC within the window
    (choice: the paper prefers "the strongest short-horizon recoverability" among the
    near-best, so slope carries half; final SR and AUC share the rest)."""
    w_slope: NonNegativeFloat = 0.5
    w_auc: NonNegativeFloat = 0.25

    @model_validator(mode="after")
    def _weights(self) -> TransferConfig:
        if self.w_final + self.w_slope + self.w_auc <= 0:
            raise ValueError("Score weights must not all be zero")
        return self


class InjectionConfig(StrictModel):
    """Cross-archive elite injection (ablation; off by default)."""

    p_inj: UnitInterval = 0.0
    """Probability that a parent is replaced by an injected elite (paper default 0)."""
    lam: NonNegativeFloat = 1.0
    """lambda of score = d_min(z, A_curr) + lambda f~ (choice: one robust standard
    deviation of latent distance is worth the whole fitness range of the subset)."""
    subset: PositiveInt = 32
    """Size of the uniformly sampled subset of the pool that is scored (choice; the
    paper normalizes fitness "within the sampled subset" without giving its size)."""


class QDConfig(StrictModel):
    """All QD and transfer hyperparameters."""

    archive: ArchiveConfig = ArchiveConfig()
    illumination: IlluminationConfig = IlluminationConfig()
    transfer: TransferConfig = TransferConfig()
    injection: InjectionConfig = InjectionConfig()

    @classmethod
    def for_domain(cls, domain: Literal["minigrid", "mujoco"]) -> QDConfig:
        """Paper defaults per domain (MuJoCo: 200 iterations, sigma0 0.02, 5 episodes)."""
        if domain == "minigrid":
            return cls()
        if domain == "mujoco":
            return cls(
                illumination=IlluminationConfig(iterations=200, sigma0=0.02, eval_episodes=5)
            )
        raise ValueError(f"unknown domain {domain!r}")

    def archive_spec(
        self, *, n_params: int, desc_dim: int = 8, raw_dim: int = 24, lineage_words: int = 1
    ) -> ArchiveSpec:
        """The `ArchiveSpec` these settings describe."""
        a = self.archive
        return ArchiveSpec(
            n_params=n_params,
            desc_dim=desc_dim,
            raw_dim=raw_dim,
            capacity=a.max_size,
            target_size=a.target_size,
            lineage_words=lineage_words,
            d_min0=a.d_min,
            d_min_step=a.d_min_step,
            fill_rate=a.fill_rate,
            d_min_floor=a.d_min_floor,
            d_min_ceil=a.d_min_ceil,
        )
