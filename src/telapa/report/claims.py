"""The paper's claims, checked on a set of runs: its Table 1 claims (paper Sec. 4.1 and
the caption of Table "TeLAPA against single-model baselines"; Table "Revisit Mean SR" for
D' and E') and those about its MuJoCo friction table.

A claim compares one method with others on one value, seed by seed where the design
allows it (`telapa.metrics.comparisons`): methods that have a value for exactly the same
seeds are compared **paired** (exact sign-flip permutation test of the mean per-seed
difference; 2^n sign patterns for n <= 16 seeds), others with **Welch's** t-test; every
test one-sided, at level ``alpha`` = 0.05.

- *best* ("TeLAPA has the highest Coverage") compares the method with each of the m other
  methods that have values:
  - **holds** when it is better than every one of them: the claim is the intersection
    of m one-sided alternatives, so by the intersection-union principle (Berger 1982) it
    is shown at level alpha when each test rejects at alpha, i.e. when
    ``p holds`` = max_j p_j < alpha (no multiplicity correction is needed, or valid to
    add: the claim fails if any single comparison fails);
  - **does not hold** when some other method is better: that conclusion is the union of
    m one-sided alternatives, so it takes **Holm's** correction over the m reverse tests,
    ``p fails`` = min_j Holm(p'_1..p'_m)_j < alpha (the chance that a "does not hold" is
    wrong stays below alpha however many methods are compared);
  - otherwise **inconclusive**.
- *pair* ("TeLAPA beats TeLAPA-Static on D'") is the same with m = 1.

With five paired seeds the exact test's smallest p is 2^-5 = 1/32, so a *best* claim
against nine methods cannot reach "does not hold" (Holm needs some p < 0.05 / 9 = 0.0056).

An inconclusive claim gets *seeds to decide*: the seeds per method at which the test the
verdict waits on would reach power 0.8 if the observed differences and spreads were the
true ones (`telapa.metrics.comparisons`, the power of the test actually used: paired
t for the sign-flip test, at least the n whose exact test can reach the level; Welch's
noncentral t otherwise). When the method leads on the means, "holds" needs every
comparison, so it is the largest of their numbers at ``alpha``; otherwise "does not hold"
needs one method ahead to reach Holm's first step, so it is the smallest of those
methods' numbers at ``alpha / m``. No difference at all gives "never".

**TeLAPA-Fresh** (beyond the paper) is not one of the paper's methods: the paper's claims
leave its runs out, and with its runs present the report adds its own claims
(`FRESH_CLAIMS`, judged by the same rule; docs/reproduction.md fixes them before its
first run).

The long curriculum and the MuJoCo friction curricula (``halfcheetah``, ``hopper``,
``walker2d``) are checked against the paper's claims about their own tables instead
(`LONG_CLAIMS`, `MUJOCO_CLAIMS`, `MUJOCO_FRESH_CLAIMS`; `paper_claims` picks a
curriculum's set by name).

A claim whose method, or every other, has fewer than two runs with a value is "not
measurable". Runs without a value (a NaN nBWT: no task learned) are left out, which can
turn a paired comparison into a Welch one.

The claims tables judge the paper's claims, not the methods that happen to be given: a
*best* claim there is judged only when every method it compares (`Claim.needs`: the
methods of its table that each of our studies of it runs) has runs in the set; with one
missing, its verdict reads "not judged: METHODS not given" (`evaluate` with
``complete``), since "better than every other" among a subset says nothing of the rest.
`evaluate` and `check` alone apply the rule above to whatever methods are given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import pandas as pd

from telapa.metrics.comparisons import POWER, Comparison, compare, holm
from telapa.metrics.summary import METRIC_LABELS, TTT_UNIT, fixed
from telapa.report.mujoco import PAPER_METHODS
from telapa.report.results import CurriculumResults, exact_mean
from telapa.report.tables import ReportTable, frame_table


@dataclass(frozen=True)
class Claim:
    """One claim of the paper about its Table 1 or its revisit table."""

    text: str
    kind: Literal["best", "pair"]
    method: str
    value: str
    """A `RunMetrics` field (``mean_sr``, ``ttt``, ...) or ``revisit:TAG``."""
    better: Literal["higher", "lower"] = "higher"
    other: str | None = None
    """The method a *pair* claim compares against."""
    exclude: tuple[str, ...] = ()
    """Methods a *best* claim does not compare against."""
    needs: tuple[str, ...] = ()
    """The methods a *best* claim compares (its own method among them): the claims tables
    judge it only when each has runs in the set (`evaluate` with ``complete``)."""


FRESH = "telapa-fresh"
"""The fresh-start variant (beyond the paper): left out of the paper's claims."""

TABLE1_METHODS = ("scratch", "scratch-reuse", "finetune", "telapa")
"""The methods of the paper's Table 1 that every one of our studies of its claims runs
(the alternative curricula run these four; the paper-budget study adds TeLAPA-Static,
the study budget five more baselines): a *best* claim of `CLAIMS`, `LONG_CLAIMS` or
`FRESH_CLAIMS` is judged only with all of them given (`Claim.needs`)."""

_FORWARD: tuple[Claim, ...] = (
    Claim("TeLAPA has the best Mean SR", "best", "telapa", "mean_sr", exclude=(FRESH,),
          needs=TABLE1_METHODS),
    Claim("TeLAPA has the lowest TTT", "best", "telapa", "ttt", "lower", exclude=(FRESH,),
          needs=TABLE1_METHODS),
    Claim("TeLAPA has the highest Coverage", "best", "telapa", "coverage", exclude=(FRESH,),
          needs=TABLE1_METHODS),
)
"""The paper's claims of TeLAPA's forward performance, made of Table 1 and of its long
curriculum alike."""

CLAIMS: tuple[Claim, ...] = (
    *_FORWARD,
    Claim("TeLAPA has the highest TR", "best", "telapa", "tr", exclude=(FRESH,),
          needs=TABLE1_METHODS),
    Claim("Scratch-Reuse has the best nBWT", "best", "scratch-reuse", "nbwt",
          exclude=(FRESH,), needs=TABLE1_METHODS),
    Claim("TeLAPA beats TeLAPA-Static on D'", "pair", "telapa", "revisit:D'",
          other="telapa-static"),
    Claim("TeLAPA beats TeLAPA-Static on E'", "pair", "telapa", "revisit:E'",
          other="telapa-static"),
)
"""Paper Sec. 4.1: "the highest mean success rate, the lowest standardized
time-to-threshold, the highest coverage, and the highest threshold retention"; Table 1
marks Scratch-Reuse's nBWT best; revisit discussion: "the full online-maintained variant
is substantially better on D' and E'"."""

FRESH_CLAIMS: tuple[Claim, ...] = (
    Claim("TeLAPA-Fresh beats TeLAPA on Mean SR", "pair", FRESH, "mean_sr", other="telapa"),
    Claim("TeLAPA-Fresh beats TeLAPA on Coverage", "pair", FRESH, "coverage", other="telapa"),
    Claim("TeLAPA-Fresh beats TeLAPA on TTT", "pair", FRESH, "ttt", "lower", other="telapa"),
    Claim("TeLAPA-Fresh beats TeLAPA on TR", "pair", FRESH, "tr", other="telapa"),
    Claim("TeLAPA-Fresh has the best Mean SR", "best", FRESH, "mean_sr",
          needs=(*TABLE1_METHODS, FRESH)),
    Claim("TeLAPA-Fresh has the lowest TTT", "best", FRESH, "ttt", "lower",
          needs=(*TABLE1_METHODS, FRESH)),
)
"""The fresh-start variant's hypothesis (docs/reproduction.md, fixed before its first
run): the first claim is the primary one; the others are secondary, each judged alone."""

LONG_CLAIMS: tuple[Claim, ...] = (
    *_FORWARD,
    Claim("Scratch-Reuse has the best BWT", "best", "scratch-reuse", "bwt", exclude=(FRESH,),
          needs=TABLE1_METHODS),
    Claim("Scratch-Reuse has the best nBWT", "best", "scratch-reuse", "nbwt",
          exclude=(FRESH,), needs=TABLE1_METHODS),
    Claim("Scratch-Reuse has the best TR", "best", "scratch-reuse", "tr", exclude=(FRESH,),
          needs=TABLE1_METHODS),
)
"""The paper's claims about its long curriculum A..H (App. "Longer MiniGrid Curriculum
Ablation"): "TeLAPA achieves the best Mean SR, the fastest TTT, and the highest
Coverage"; "Scratch-Reuse remains strongest on BWT, nBWT, and TR". (Its "TeLAPA
outperforms TeLAPA-Static" needs TeLAPA-Static's runs, which the long study does not
have.)"""

_MUJOCO_OTHERS = (FRESH,)
"""The MuJoCo claims compare the paper's five methods of its friction table (Scratch,
Scratch-Reuse, Finetune, Finetune-Reset, TeLAPA: `PAPER_METHODS`, each claim's
`Claim.needs`): TeLAPA-Fresh is left out, as above."""

MUJOCO_CLAIMS: dict[str, tuple[Claim, ...]] = {
    "halfcheetah": (
        Claim("TeLAPA has the best BWT on HalfCheetah", "best", "telapa", "bwt",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("Finetune has the best Mean SR~ on HalfCheetah", "best", "finetune",
              "mean_sr", exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("Finetune has the best TR on HalfCheetah", "best", "finetune", "tr",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the smallest drop at the friction boundaries on HalfCheetah", "best",
              "telapa", "boundary_drop", "lower", exclude=_MUJOCO_OTHERS,
              needs=PAPER_METHODS),
    ),
    "hopper": (
        Claim("TeLAPA has the best BWT on Hopper", "best", "telapa", "bwt",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the best TR on Hopper", "best", "telapa", "tr",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the best Mean SR~ on Hopper", "best", "telapa", "mean_sr",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the smallest drop at the friction boundaries on Hopper", "best",
              "telapa", "boundary_drop", "lower", exclude=_MUJOCO_OTHERS,
              needs=PAPER_METHODS),
    ),
    "walker2d": (
        Claim("TeLAPA has the best BWT on Walker2d", "best", "telapa", "bwt",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the best TR on Walker2d", "best", "telapa", "tr",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("Finetune has the best Mean SR~ on Walker2d", "best", "finetune", "mean_sr",
              exclude=_MUJOCO_OTHERS, needs=PAPER_METHODS),
        Claim("TeLAPA has the smallest drop at the friction boundaries on Walker2d", "best",
              "telapa", "boundary_drop", "lower", exclude=_MUJOCO_OTHERS,
              needs=PAPER_METHODS),
    ),
}
"""The paper's claims about its friction-shift table (App. "Continuous-Control
Dynamics-Shift Evaluation in MuJoCo", Table "Continuous-control friction-shift results"),
by curriculum (``configs/curricula/<name>.yaml``): its text says TeLAPA has the best BWT
on all three environments and the best TR on Hopper and Walker2d, the best Mean SR~ on
Hopper, and that Finetune attains the highest mean competence on HalfCheetah and reaches
higher peak competence on Walker2d; its table also marks Finetune's TR on HalfCheetah
best. docs/reproduction.md fixes them before the study's first cell.

The fourth claim of each environment is the paper's reading of its learning curves:
TeLAPA "produces smoother adaptation across friction boundaries", where Scratch and
Scratch-Reuse "repeatedly collapse after each regime change" and the finetuning methods
"exhibit sharper drops at transitions". We test it as the smallest boundary drop
(`RunMetrics.boundary_drop`: the mean fall of SR~ from the end of one visit to the start
of the next), fixed on 2026-12-08, before Walker2d's first cell and after HalfCheetah's
and Hopper's curves had been plotted (docs/reproduction.md says so)."""

MUJOCO_FRESH_CLAIMS: tuple[Claim, ...] = (
    Claim("TeLAPA-Fresh beats TeLAPA on Mean SR~", "pair", FRESH, "mean_sr", other="telapa"),
    Claim("TeLAPA-Fresh beats TeLAPA on BWT", "pair", FRESH, "bwt", other="telapa"),
    Claim("TeLAPA-Fresh beats TeLAPA on TR", "pair", FRESH, "tr", other="telapa"),
)
"""The fresh-start variant on the friction curricula (beyond the paper; exploratory,
fixed in docs/reproduction.md before the study's first cell): the values of the paper's
friction table."""


def paper_claims(curriculum: str, *, fresh: bool = False) -> tuple[Claim, ...]:
    """The claims a curriculum's runs are checked against, by its name (``hopper``, or
    ``hopper@HASH`` for a curriculum told apart from another of its name by content):
    `MUJOCO_CLAIMS` (or `MUJOCO_FRESH_CLAIMS`) for the friction curricula, `LONG_CLAIMS`
    (or `FRESH_CLAIMS`) for ``long``, `CLAIMS` (or `FRESH_CLAIMS`) for every other."""
    name = curriculum.split("@", 1)[0]
    if name in MUJOCO_CLAIMS:
        return MUJOCO_FRESH_CLAIMS if fresh else MUJOCO_CLAIMS[name]
    return FRESH_CLAIMS if fresh else LONG_CLAIMS if name == "long" else CLAIMS


def seeded_values(result: CurriculumResults, method: str,
                  value: str) -> dict[int, Fraction | float]:
    """Seed -> ``value`` of each run of ``method`` (NaN left out), exact (`RunMetrics.exact`)
    where the metrics have it; TTT in millions of env steps. ``value`` is a `RunMetrics`
    field or ``revisit:TAG``."""
    records, metrics = result.runs.get(method, []), result.metrics.get(method, [])
    if len(records) != len(metrics):
        raise ValueError(f"{method}: {len(records)} runs but {len(metrics)} metrics")
    scale = Fraction(int(TTT_UNIT)) if value == "ttt" else Fraction(1)
    out: dict[int, Fraction | float] = {}
    for record, m in zip(records, metrics, strict=True):
        exact = m.exact.get(value)
        if exact is not None:
            out[record.seed] = exact / scale
            continue
        if value.startswith("revisit:"):
            v = m.revisit_sr.get(value.split(":", 1)[1], math.nan)
        else:
            v = getattr(m, value) / float(scale)
        if not math.isnan(v):
            out[record.seed] = float(v)
    return out


Verdict = Literal["holds", "does not hold", "inconclusive", "not measurable", "not judged"]


def method_rows(result: CurriculumResults) -> dict[str, str]:
    """Row name -> the method of its runs (``scratch [lr=0.001]`` -> ``scratch``)."""
    return {name: records[0].method for name, records in result.runs.items() if records}


def missing_methods(claim: Claim, result: CurriculumResults) -> tuple[str, ...]:
    """The methods of ``claim.needs`` with no runs in ``result``, in their order."""
    given = set(method_rows(result).values())
    return tuple(m for m in claim.needs if m not in given)


@dataclass(frozen=True)
class ClaimCheck:
    """A claim checked on one curriculum's runs (module docstring)."""

    claim: Claim
    verdict: Verdict
    comparisons: Mapping[str, Comparison]
    """Other method -> the claimed method against it."""
    holm_reverse: Mapping[str, float]
    """Other method -> Holm-adjusted p that it is better than the claimed method."""
    alpha: float
    mine: Mapping[int, float]
    """Seed -> value of the claimed method."""
    missing: tuple[str, ...] = ()
    """A "not judged" claim's methods (`Claim.needs`) that have no runs."""

    @property
    def shown_verdict(self) -> str:
        """The verdict as the claims table reads it: a "not judged" one names what is
        missing ("not judged: scratch, scratch-reuse not given")."""
        if self.verdict == "not judged":
            return f"not judged: {', '.join(self.missing)} not given"
        return self.verdict

    @property
    def p_holds(self) -> float:
        """max_j p_j: the intersection-union p of "better than every other"."""
        return max((c.p for c in self.comparisons.values()), default=math.nan)

    @property
    def p_fails(self) -> float:
        """min_j of the Holm-adjusted reverse p: "some other method is better"."""
        return min(self.holm_reverse.values(), default=math.nan)

    def seeds_to_decide(self) -> int | None:
        """Seeds per method that would decide an open claim (module docstring); None:
        never (no difference to detect, or more than 10,000)."""
        sign = 1.0 if self.claim.better == "higher" else -1.0
        comps = self.comparisons.values()
        if all(sign * (c.mean_a - c.mean_b) > 0 for c in comps):
            needs = [c.seeds_to_decide(alpha=self.alpha) for c in comps]
            known = [n for n in needs if n is not None]
            return max(known) if len(known) == len(needs) else None
        level = self.alpha / len(self.comparisons)
        ahead = [c.seeds_to_decide(alpha=level) for c in comps
                 if sign * (c.mean_b - c.mean_a) > 0]
        known = [n for n in ahead if n is not None]
        return min(known) if known else None


def evaluate(claim: Claim, result: CurriculumResults, *, alpha: float = 0.05,
             complete: bool = False) -> ClaimCheck:
    """``claim`` checked on ``result``: each comparison, Holm over the reverse ones, and
    the verdict (module docstring). With ``complete`` (the claims tables: the paper's
    claim), a *best* claim whose method has values but some method of `Claim.needs` no
    runs is "not judged" (`ClaimCheck.missing` names them), its comparisons among the
    methods given kept; without it, the claim is judged among the methods given."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    mine = seeded_values(result, claim.method, claim.value)
    names = [claim.other or ""] if claim.kind == "pair" else [
        m for m in result.metrics if m != claim.method and m not in claim.exclude]
    others = {m: v for m in names if len(v := seeded_values(result, m, claim.value)) >= 2}
    missing = missing_methods(claim, result) if complete and claim.kind == "best" else ()
    if len(mine) < 2 or not (others or missing):
        return ClaimCheck(claim, "not measurable", {}, {}, alpha, mine)
    comparisons = {m: compare(mine, v, better=claim.better) for m, v in others.items()}
    adjusted = dict(zip(comparisons, holm([c.p_reverse for c in comparisons.values()]).tolist(),
                        strict=True))
    if missing:
        return ClaimCheck(claim, "not judged", comparisons, adjusted, alpha, mine, missing)
    verdict: Verdict = ("holds" if max(c.p for c in comparisons.values()) < alpha else
                        "does not hold" if min(adjusted.values()) < alpha else "inconclusive")
    return ClaimCheck(claim, verdict, comparisons, adjusted, alpha, mine)


def _fmt(values: Mapping[int, Fraction | float]) -> str:
    """Mean (n=runs) of a claim's values: the exact mean rounded once (`exact_mean`), as
    the main table shows it (`fixed`: the decimal rounded half to even; ``f"{x:.3f}"``
    rounded the binary float, so TeLAPA's 633/1200 = 0.5275 read 0.527 here and 0.528 in
    the main table of the long curriculum)."""
    return f"{fixed(float(exact_mean(values.values())), 3)} (n={len(values)})"


def check(claim: Claim, result: CurriculumResults, *, alpha: float = 0.05,
          complete: bool = False) -> dict[str, object]:
    """The row of ``claim`` in the claims table: what it compares, our numbers, the tests,
    both p-values, the verdict and, when open, the seeds that would decide it;
    ``complete`` as in `evaluate` (a "not judged" row shows our numbers among the
    methods given, no p-values)."""
    done = evaluate(claim, result, alpha=alpha, complete=complete)
    judged = done.verdict != "not judged"
    row: dict[str, object] = {"claim": claim.text, "ours": "", "test": "",
                              "p holds (IUT)": done.p_holds if judged else math.nan,
                              "p fails (Holm)": done.p_fails if judged else math.nan,
                              "verdict": done.shown_verdict, "seeds to decide": ""}
    if done.verdict == "not measurable":
        return row
    if not done.comparisons:  # not judged, and no other method given has values
        row["ours"] = f"{claim.method} {_fmt(done.mine)}"
        return row
    sign = 1.0 if claim.better == "higher" else -1.0
    values = {m: seeded_values(result, m, claim.value) for m in done.comparisons}
    rival = max(values, key=lambda m: sign * np.mean(list(values[m].values())))
    link = " vs " if claim.kind == "pair" else "; best other: "
    row["ours"] = f"{claim.method} {_fmt(done.mine)}{link}{rival} {_fmt(values[rival])}"
    row["test"] = "; ".join(dict.fromkeys(c.test for c in done.comparisons.values()))
    if done.verdict == "inconclusive":
        n = done.seeds_to_decide()
        row["seeds to decide"] = "never" if n is None else str(n)
    return row


def _claim_set(result: CurriculumResults, fresh: bool) -> tuple[Claim, ...] | None:
    """`paper_claims` of ``result``'s curriculum, when ``result`` holds TeLAPA's (and its
    fresh variant's) runs; None otherwise."""
    if "telapa" not in result.metrics or (fresh and FRESH not in result.metrics):
        return None
    return paper_claims(result.curriculum, fresh=fresh)


def claims_table(result: CurriculumResults, *, prefix: str, alpha: float = 0.05,
                 fresh: bool = False) -> ReportTable | None:
    """The claims of `paper_claims` checked on ``result`` (None without TeLAPA runs); with
    ``fresh``, its fresh variant's (None without TeLAPA-Fresh's runs)."""
    claims = _claim_set(result, fresh)
    if claims is None:
        return None
    frame = pd.DataFrame([check(c, result, alpha=alpha, complete=True) for c in claims])
    return frame_table(
        f"{prefix}-{'fresh-' if fresh else ''}claims",
        "TeLAPA-Fresh's claims (beyond the paper)" if fresh else
        "The paper's friction-table claims" if claims in MUJOCO_CLAIMS.values() else
        "The paper's long-curriculum claims" if claims == LONG_CLAIMS else
        "The paper's Table 1 claims",
        f"One-sided tests over seeds at alpha = {alpha} (telapa.report.claims): paired by "
        "seed (exact sign-flip permutation test) where both methods have values for the "
        "same seeds, Welch's t-test otherwise. holds = better than every other method, "
        "each test p < alpha (intersection-union: p holds = the largest p); does not hold "
        "= some other method better with Holm-adjusted p < alpha over the comparisons "
        "the claim makes (p fails = the smallest adjusted p); inconclusive = neither; "
        "not judged = a best claim one of whose methods (the paper's methods that each of "
        "our studies of it runs) has no runs here, so that better than the methods given "
        "says nothing of the claim. "
        "Values: mean over runs (n runs); TTT in millions of env steps. Seeds to decide: "
        f"seeds per method at which the test the verdict waits on would reach power {POWER} "
        "if the observed differences and spreads held (paired or Welch noncentral t)."
        + (f" {note}" if (note := result.tau_note()) else ""),
        frame)


def comparisons_table(result: CurriculumResults, *, prefix: str, alpha: float = 0.05,
                      fresh: bool = False) -> ReportTable | None:
    """Every comparison behind `claims_table`: one row per claim and other method, with
    its test, both means, both one-sided p-values and the Holm-adjusted reverse one; None
    when no claim could be tested (no TeLAPA runs, or no comparison measurable)."""
    claims = _claim_set(result, fresh)
    if claims is None:
        return None
    rows = []
    for claim in claims:
        done = evaluate(claim, result, alpha=alpha)
        for other, c in done.comparisons.items():
            rows.append({"claim": claim.text, "against": other, "test": c.test,
                         "claimed method": c.mean_a, "other": c.mean_b,
                         "p claimed better": c.p, "p other better": c.p_reverse,
                         "p other better (Holm)": done.holm_reverse[other]})
    if not rows:  # every claim not measurable: `claims_table` says so, nothing to show
        return None
    return frame_table(
        f"{prefix}-{'fresh-' if fresh else ''}claim-tests", "The comparisons behind the claims",
        "One row per claim and method compared: the test used, the means over the seeds "
        "compared (TTT in millions of env steps), the one-sided p that the claimed "
        "method is better and that the other is, and the latter Holm-adjusted over the "
        "claim's comparisons.", pd.DataFrame(rows))


def _label(value: str) -> str:
    """How `pair_seeds_table` names a claim's value: the main table's label
    (`METRIC_LABELS`) without its arrow; ``revisit:TAG`` reads TAG."""
    if value.startswith("revisit:"):
        return value.split(":", 1)[1]
    return METRIC_LABELS.get(value, value).removesuffix(" ↑").removesuffix(" ↓")


def pair_seeds_table(result: CurriculumResults, *, prefix: str,
                     fresh: bool = False) -> ReportTable | None:
    """The *pair* claims of `CLAIMS` (or, with ``fresh``, `FRESH_CLAIMS`) seed by seed: per
    seed, each claim's value for the claimed method, for the method it is compared with,
    and their difference d_s = claimed - other (the paired test's data: its statistic is
    mean_s d_s). A seed one of the two lacks reads n/a. Only the claims whose two methods
    both ran (a study without TeLAPA-Static, such as the reverse and scrambled curricula,
    lists none of the paper's); None when no claim is left."""
    claims = _claim_set(result, fresh)
    if claims is None:
        return None
    columns: dict[str, dict[int, float]] = {}
    for claim in (c for c in claims if c.kind == "pair"):
        assert claim.other is not None
        if claim.method not in result.metrics or claim.other not in result.metrics:
            continue
        mine = seeded_values(result, claim.method, claim.value)
        theirs = seeded_values(result, claim.other, claim.value)
        label = _label(claim.value)
        columns[f"{label}: {claim.method}"] = mine
        columns[f"{label}: {claim.other}"] = theirs
        columns[f"{label}: difference"] = {s: mine[s] - theirs[s] for s in mine if s in theirs}
    if not columns:
        return None
    frame = pd.DataFrame(columns, dtype=float).sort_index()
    frame.index.name = "seed"
    return frame_table(
        f"{prefix}-{'fresh-' if fresh else ''}pair-seeds",
        "The paired claims seed by seed",
        "Per seed, each pair claim's value for the claimed method and the method it is "
        "compared with, and their difference (claimed - other; TTT in millions of env "
        "steps, lower better): the data of the claims' paired sign-flip tests.", frame)


PAIR_VALUES: tuple[tuple[str, Literal["higher", "lower"]], ...] = (
    ("mean_sr", "higher"), ("ttt", "lower"), ("coverage", "higher"), ("tr", "higher"),
    ("bwt", "higher"), ("nbwt", "higher"))
"""The values `settings_pairs_table` compares, each with its better direction."""


def settings_pairs_table(result: CurriculumResults, *, prefix: str,
                         alpha: float = 0.05) -> ReportTable | None:
    """Each method whose runs make two or more rows that differ in a setting (an
    ablation beside its baseline: ``scratch [intrinsic_beta=0.005]`` and ``scratch
    [intrinsic_beta=none]``; ``telapa [p_inj=0.0]`` beside ``[p_inj=0.1]`` and
    ``[p_inj=0.2]``), the first row in label order against each of the others on each
    of `PAIR_VALUES`, paired by seed over the seeds both have (`compare`): the
    one-sided p each way and the verdict by the rule of `evaluate` with m = 1 (*holds*:
    the first is better at p < ``alpha``; *does not hold*: the second is; else
    *inconclusive*, with the seeds that would decide it). None without such a method."""
    by_method: dict[str, list[str]] = {}
    for label, records in result.runs.items():
        if records:
            by_method.setdefault(records[0].method, []).append(label)
    rows = []
    pairs = [(first, second) for _, labels in sorted(by_method.items())
             for first, *others in [sorted(labels)] for second in others]
    for first, second in pairs:
        for value, better in PAIR_VALUES:
            a, b = (seeded_values(result, name, value) for name in (first, second))
            shared = sorted(set(a) & set(b))
            if len(shared) < 2:
                continue
            c = compare({s: a[s] for s in shared}, {s: b[s] for s in shared}, better=better)
            verdict = ("holds" if c.p < alpha else "does not hold" if c.p_reverse < alpha
                       else "inconclusive")
            needs = c.seeds_to_decide(alpha=alpha) if verdict == "inconclusive" else None
            rows.append({"first": first, "second": second, "value": _label(value),
                         "test": c.test, "first mean": c.mean_a, "second mean": c.mean_b,
                         "p first better": c.p, "p second better": c.p_reverse,
                         "verdict": verdict,
                         "seeds to decide": "" if verdict != "inconclusive" else
                         (str(needs) if needs is not None else "never")})
    if not rows:
        return None
    return frame_table(
        f"{prefix}-settings-pairs", "One method with and without a setting",
        f"Each method with two or more rows of settings: the first (in label order) "
        f"against each other, paired by seed over the seeds both have (exact sign-flip "
        f"test, one-sided each way, alpha = {alpha}); TTT in millions of env steps, lower "
        "better.", pd.DataFrame(rows))


__all__ = ["CLAIMS", "FRESH", "FRESH_CLAIMS", "LONG_CLAIMS", "MUJOCO_CLAIMS", "MUJOCO_FRESH_CLAIMS",
           "PAIR_VALUES", "TABLE1_METHODS", "Claim", "ClaimCheck", "check",
           "paper_claims",
           "claims_table", "comparisons_table", "evaluate", "method_rows", "missing_methods",
           "pair_seeds_table", "seeded_values", "settings_pairs_table"]
