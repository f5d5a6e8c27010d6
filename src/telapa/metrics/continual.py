"""Per-run continual-transfer metrics (paper Sec. 4 and App. "Forgetting and Plasticity
Through BWT Metrics"): Mean SR, TTT, BWT, Coverage, nBWT, TR and the revisit SRs.

Inputs are the tables the continual loop writes for one run: ``visits`` (one row per visit),
``curve`` (periodic evaluations within each visit; step 0 is the pre-evaluation) and
``final`` (end-of-sequence evaluation of every distinct task).

Choices where the paper is silent:
- SR_post(T) of BWT and nBWT = post_sr of the last visit of T (``post="first"``: the
  first visit): "immediately after training on T" names no visit when T is revisited.
- Coverage is the paper's "fraction of tasks that reached tau_T during initial training"
  (Sec. 4.1; App. "Coverage (learned-at-train-time)"): post_sr of each task's FIRST visit,
  whatever ``post`` says. ``coverage_last`` is the same fraction on each task's last
  visit, a labelled extra.
- SR_end(T) = final.sr of T; final rows for tasks never visited are ignored.
- T_prev = all distinct tasks except the task of the final visit (the current task).
- Mean SR = mean post_sr over the revisits (cycle >= 1), as the paper's Table 1, whose
  Mean SR equals the mean of its "Revisit Mean SR" table (Finetune: (0.601 + 0.822 + 0.80
  + 0.168 + 0.55) / 5 = 0.588); NaN without revisits. ``mean_sr_all`` is the mean over
  every visit (first visits included), kept for curricula without revisits.
- tau_T = max(factor * mean over Scratch runs of best SR on T, tau_min); best SR is the max
  over every curve.sr and visits.post_sr row of T; every Scratch run must have every task.
- TTT of a revisit (cycle >= 1) = smallest curve step with sr >= tau_T (0 if the
  pre-evaluation already meets it); if none does, the visit budget, counted as censored.
- Run TTT = mean over revisits in env steps; NaN without revisits. ``ttt_censored``
  counts the revisits that never reached tau_T (each counts its whole budget).
- Coverage, TR are fractions over all distinct tasks; BWT, nBWT average over T_prev only.
- ``task_terms[m]`` holds the per-task terms that metric m averages (Mean SR and TTT: one
  per revisit tag; Coverage, coverage_last, TR: 0/1 per task; BWT: one per task of
  T_prev; the boundary drop: one per visit after the first, the revisit jump-start: one
  per revisit, each by its tag), so that
  m == mean(task_terms[m].values()); nBWT has none (its tasks differ from run to run).
  They are the strata of rliable's stratified bootstrap (`telapa.metrics.summary`,
  ``resample="tasks"``).
- nBWT is NaN (never 0) when no task of T_prev has SR_post >= tau_T; eps = 1e-8.
- The boundary drop (ours, for the paper's MuJoCo reading that TeLAPA "produces smoother
  adaptation across friction boundaries" where the baselines "exhibit sharper drops at
  transitions") is the mean over the task boundaries, visits k = 1..K-1, of
  post_sr(k-1) - pre_sr(k): how far the competence curve falls where the task changes,
  from the end of one visit (on its task) to the start of the next (the starting
  parameters on the new task, before training). Lower is smoother; it is negative where
  a method starts the new task higher than it ended the last. Its terms are keyed by
  the tag of visit k; NaN with one visit or without every ``pre_sr`` in visits.
- The revisit jump-start (ours, a candidate reading of the paper's undefined MuJoCo
  "transfer recovery" column, docs/reproduction.md) is the mean over the revisits of
  pre_sr(revisit) - pre_sr(first visit of its task): how much higher a method starts a
  task it has seen than it started it the first time. A method that starts every visit
  from a fresh network has 0 in expectation. Terms keyed by the revisit's tag; NaN
  without revisits or without every ``pre_sr``.
- Every value is computed exactly (`telapa.metrics.rates`): an SR is k / n where the
  table has the counts (``successes``/``episodes``, ``pre_``/``post_`` in visits), else
  the value as written (`as_exact`); tau, Mean SR, TTT, Coverage, TR, BWT and nBWT are
  rationals, and every competence test sr >= tau is exact (45/50 reaches 0.9). The
  fields of `RunMetrics` are their nearest floats; ``exact`` keeps the rationals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import pandas as pd

from telapa.metrics.rates import as_exact, exact_rate

NBWT_EPS = 1e-8
"""eps in nBWT's denominator max(SR_post(T), eps)."""

VISIT_COLUMNS = ("visit", "tag", "task", "cycle", "budget", "post_sr")
CURVE_COLUMNS = ("visit", "step", "sr")
FINAL_COLUMNS = ("task", "sr")


def _require(df: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; it has {list(df.columns)}")


def rates(frame: pd.DataFrame, prefix: str = "") -> list[Fraction]:
    """The exact SR of each row of ``frame`` (`exact_rate`): ``{prefix}successes`` of
    ``{prefix}episodes`` where both are given, else ``{prefix}sr`` as written; ``prefix``
    is ``""`` (curve, final), ``"pre_"`` or ``"post_"`` (visits)."""
    n = len(frame)

    def column(name: str) -> list[Any]:
        return frame[name].tolist() if name in frame.columns else [None] * n

    return [exact_rate(sr, k, e) for sr, k, e in zip(
        frame[f"{prefix}sr"].tolist(), column(f"{prefix}successes"),
        column(f"{prefix}episodes"), strict=True)]


def _mean(values: Sequence[Fraction]) -> Fraction | None:
    return sum(values, Fraction(0)) / len(values) if len(values) else None


def _float(x: Fraction | None) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class RunMetrics:
    """Metrics of one run; TTT in env steps (NaN without revisits), SRs in [0, 1]."""

    mean_sr: float
    ttt: float
    ttt_censored: int
    revisits: int
    bwt: float
    coverage: float
    """Fraction of tasks whose first visit reached tau_T (the paper's Coverage)."""
    nbwt: float
    tr: float
    revisit_sr: dict[str, float] = field(default_factory=dict)
    sr_post: dict[str, float] = field(default_factory=dict)
    sr_end: dict[str, float] = field(default_factory=dict)
    mean_sr_all: float = math.nan
    coverage_last: float = math.nan
    """Fraction of tasks whose last visit reached tau_T."""
    boundary_drop: float = math.nan
    """Mean fall of SR at the task boundaries, post_sr(k-1) - pre_sr(k) (module docstring);
    lower is smoother."""
    revisit_jumpstart: float = math.nan
    """Mean over the revisits of pre_sr(revisit) - pre_sr(the task's first visit) (module
    docstring)."""
    task_terms: dict[str, dict[str, float]] = field(default_factory=dict)
    """Metric -> {task or revisit tag: the term the metric averages} (module docstring)."""
    exact: dict[str, Fraction] = field(default_factory=dict)
    """Metric -> its exact value (the fields are its nearest float): ``mean_sr``,
    ``ttt``, ``bwt``, ``coverage``, ``coverage_last``, ``nbwt``, ``tr``, ``mean_sr_all``,
    ``boundary_drop``, ``revisit_jumpstart`` where defined, and ``revisit:TAG`` for each
    revisit's SR."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of every field (the dict fields are copied)."""
        return {
            "mean_sr": self.mean_sr,
            "ttt": self.ttt,
            "ttt_censored": self.ttt_censored,
            "revisits": self.revisits,
            "bwt": self.bwt,
            "coverage": self.coverage,
            "nbwt": self.nbwt,
            "tr": self.tr,
            "revisit_sr": dict(self.revisit_sr),
            "sr_post": dict(self.sr_post),
            "sr_end": dict(self.sr_end),
            "mean_sr_all": self.mean_sr_all,
            "coverage_last": self.coverage_last,
            "boundary_drop": self.boundary_drop,
            "revisit_jumpstart": self.revisit_jumpstart,
            "task_terms": {m: dict(t) for m, t in self.task_terms.items()},
            "exact": dict(self.exact),
        }


def best_sr(visits: pd.DataFrame, curve: pd.DataFrame) -> dict[str, Fraction]:
    """Best SR per task of one (Scratch) run, exactly: max over its curve and post SRs."""
    _require(visits, ("task", "post_sr"), "visits")
    _require(curve, ("task", "sr"), "curve")
    best: dict[str, Fraction] = {}
    for frame, prefix in ((visits, "post_"), (curve, "")):
        for task, sr in zip(frame["task"].astype(str), rates(frame, prefix), strict=True):
            best[task] = max(best.get(task, sr), sr)
    return best


def competence_targets(
    best_srs: Sequence[Mapping[str, Fraction | float]],
    tau_min: float | Fraction = 0.2,
    factor: float | Fraction = 0.9,
    *,
    tasks: Sequence[str] | None = None,
) -> dict[str, Fraction]:
    """``tau_T = max(factor * mean_r best_srs[r][T], tau_min)``, one mapping per Scratch
    run, exactly (floats read as `as_exact` reads them: 0.9 is 9/10).

    ``tasks`` defaults to every task named by any run; each run must give each task a
    non-NaN best SR, otherwise ValueError names the task.
    """
    if len(best_srs) == 0:
        raise ValueError("competence_targets needs at least one Scratch run")
    if tasks is None:
        tasks = list(dict.fromkeys(t for run in best_srs for t in run))
    factor, tau_min = as_exact(factor), as_exact(tau_min)
    taus: dict[str, Fraction] = {}
    for task in tasks:
        values = [run.get(task) for run in best_srs]
        missing = [i for i, v in enumerate(values) if v is None or pd.isna(v)]
        if missing:
            raise ValueError(f"task {task!r} has no Scratch best SR in run(s) {missing}")
        taus[task] = max(factor * _mean([as_exact(v) for v in values]), tau_min)
    return taus


def time_to_threshold(curve: pd.DataFrame, tau: float | Fraction,
                      budget: int) -> tuple[int, bool]:
    """(TTT, censored) of one visit: min step whose exact SR (`rates`) is >= tau, else
    (budget, True)."""
    _require(curve, ("step", "sr"), "curve")
    tau = as_exact(tau)
    hits = [int(step) for step, sr in zip(curve["step"], rates(curve), strict=True)
            if sr >= tau]
    if not hits:
        return int(budget), True
    return min(hits), False


def run_metrics(
    visits: pd.DataFrame,
    curve: pd.DataFrame,
    final: pd.DataFrame,
    tau: Mapping[str, float | Fraction],
    *,
    post: Literal["first", "last"] = "last",
) -> RunMetrics:
    """All metrics of one run, exactly. With T_prev the non-current tasks and E the
    competent ones:

    BWT = mean_{T_prev} (SR_end - SR_post); Coverage = frac_T [SR_first(T) >= tau_T]
    (SR_first: post_sr of T's first visit; ``coverage_last`` with its last visit);
    nBWT = mean_{E} (SR_end - SR_post) / max(SR_post, eps); TR = frac_T [SR_end >= tau_T];
    TTT = mean over revisits of time_to_threshold; Mean SR = mean post_sr over the
    revisits (cycle >= 1; NaN without any), mean_sr_all = mean post_sr over every visit;
    boundary drop = mean_{k >= 1} (post_sr(k-1) - pre_sr(k)) over consecutive visits;
    revisit jump-start = mean over revisits of pre_sr(revisit) - pre_sr(first visit).
    """
    if post not in ("first", "last"):
        raise ValueError(f"post must be 'first' or 'last', got {post!r}")
    _require(visits, VISIT_COLUMNS, "visits")
    _require(curve, CURVE_COLUMNS, "curve")
    _require(final, FINAL_COLUMNS, "final")
    if visits.empty:
        raise ValueError("visits is empty")
    if visits["visit"].duplicated().any():
        raise ValueError("visits has duplicate 'visit' indices")
    visits = visits.sort_values("visit", kind="stable")
    tasks = [str(t) for t in dict.fromkeys(visits["task"])]
    for task in tasks:
        if task not in tau:
            raise ValueError(f"no competence target tau for task {task!r}")
    tau = {task: as_exact(tau[task]) for task in tasks}
    dup = final["task"][final["task"].duplicated()]
    if not dup.empty:
        raise ValueError(f"final has several rows for task {dup.iloc[0]!r}")
    end_by_task = dict(zip(final["task"].astype(str), rates(final), strict=True))
    for task in tasks:
        if task not in end_by_task:
            raise ValueError(f"final has no row for task {task!r}")

    post_srs = rates(visits, "post_")
    first: dict[str, Fraction] = {}
    last: dict[str, Fraction] = {}
    for task, sr in zip(visits["task"].astype(str), post_srs, strict=True):
        first.setdefault(task, sr)
        last[task] = sr
    sr_post = first if post == "first" else last
    sr_end = {t: end_by_task[t] for t in tasks}

    current = str(visits["task"].iloc[-1])
    prev = [t for t in tasks if t != current]
    learned = [t for t in prev if sr_post[t] >= tau[t]]

    ttts: dict[str, Fraction] = {}
    censored = 0
    revisit_sr: dict[str, Fraction] = {}
    for row, sr in zip(visits.itertuples(index=False), post_srs, strict=True):
        if row.cycle < 1:
            continue
        tag = str(row.tag)
        if tag in revisit_sr:
            raise ValueError(f"visits has several revisits tagged {tag!r}")
        revisit_sr[tag] = sr
        steps, cens = time_to_threshold(
            curve[curve["visit"] == row.visit], tau[str(row.task)], int(row.budget)
        )
        ttts[tag] = Fraction(steps)
        censored += cens

    one, zero = Fraction(1), Fraction(0)
    terms = {
        "mean_sr": revisit_sr,
        "ttt": ttts,
        "bwt": {t: sr_end[t] - sr_post[t] for t in prev},
        "coverage": {t: one if first[t] >= tau[t] else zero for t in tasks},
        "coverage_last": {t: one if last[t] >= tau[t] else zero for t in tasks},
        "tr": {t: one if sr_end[t] >= tau[t] else zero for t in tasks},
    }
    if "pre_sr" in visits.columns and visits["pre_sr"].notna().all():
        pre_srs = rates(visits, "pre_")
        terms["boundary_drop"] = {
            str(tag): before - after for tag, before, after in zip(
                visits["tag"].tolist()[1:], post_srs[:-1], pre_srs[1:], strict=True)}
        first_pre: dict[str, Fraction] = {}
        jumps: dict[str, Fraction] = {}
        for row, pre in zip(visits.itertuples(index=False), pre_srs, strict=True):
            if str(row.task) in first_pre:
                jumps[str(row.tag)] = pre - first_pre[str(row.task)]
            first_pre.setdefault(str(row.task), pre)
        terms["revisit_jumpstart"] = jumps
    eps = as_exact(NBWT_EPS)
    exact = {m: _mean(list(values.values())) for m, values in terms.items()}
    exact["nbwt"] = _mean([(sr_end[t] - sr_post[t]) / max(sr_post[t], eps) for t in learned])
    exact["mean_sr_all"] = _mean(post_srs)
    floats = {m: _float(v) for m, v in exact.items()}
    return RunMetrics(
        mean_sr=floats["mean_sr"],
        ttt=floats["ttt"],
        ttt_censored=censored,
        revisits=len(ttts),
        bwt=floats["bwt"],
        coverage=floats["coverage"],
        nbwt=floats["nbwt"],
        tr=floats["tr"],
        revisit_sr={t: float(v) for t, v in revisit_sr.items()},
        sr_post={t: float(v) for t, v in sr_post.items()},
        sr_end={t: float(v) for t, v in sr_end.items()},
        mean_sr_all=floats["mean_sr_all"],
        coverage_last=floats["coverage_last"],
        boundary_drop=floats.get("boundary_drop", math.nan),
        revisit_jumpstart=floats.get("revisit_jumpstart", math.nan),
        task_terms={m: {t: float(v) for t, v in values.items()} for m, values in terms.items()},
        exact={**{m: v for m, v in exact.items() if v is not None},
               **{f"revisit:{t}": v for t, v in revisit_sr.items()}},
    )
