"""Comparing two methods over seeds: the test the design allows, Holm's correction, and
the seeds a comparison would need.

**Which test.** Methods run with the same seed ids share what the seed fixes (the first
network, the environments' streams; TeLAPA and TeLAPA-Static are the same runs up to the
first maintenance, Scratch and Scratch-Reuse share their first visits), so when both
methods have a value for exactly the same seeds the comparison is **paired** by seed; it
is **unpaired** (Welch) otherwise, e.g. when a metric is undefined on some seeds of one
method.

- *Paired*: d_i = a_i - b_i over the n shared seeds, statistic T(s) = sum_i s_i d_i
  for a sign pattern s in {-1, +1}^n (the observed T is T(1, ..., 1)). The one-sided
  sign-flip permutation test (Fisher 1935) counts the patterns at least as extreme as
  the observed one, **ties included**,

      p = #{s : T(s) >= T(1)} / 2^n        (a better when higher; <= when lower),

  over every one of the 2^n patterns when n <= `EXACT_MAX_PAIRS` (exact), else over
  `MONTE_CARLO_RESAMPLES` random ones, p = (k + 1) / (R + 1). The sums are compared
  **exactly**: each value is taken as the rational it is (a `Fraction`, as
  `telapa.metrics.continual` computes every metric from the counts; a float as the
  shortest decimal that reads back as it, `telapa.metrics.rates.as_exact`), and T is
  summed in integers on one common denominator. In floating point, a pattern whose
  sum ties the observed one can land a rounding error below it and drop out of the count
  (per-seed differences 1/5, -26/125, 0, 1/125, 1/250 give 14/32 in floating point, 16/32
  exactly). The test assumes only that under H0 each d_i is symmetric about 0; its
  smallest p is 2^-n (n = 5: 1/32 = 0.031; n = 8: 1/256).
- *Unpaired*: Welch's one-sided t-test (``scipy.stats.ttest_ind``, ``equal_var=False``).

**Seeds to decide** (`seeds_to_decide`): the smallest number of seeds per method at which
the same test, at one-sided level ``alpha``, would reject with power ``power`` (0.8 by
default) if the observed effect were the true one:

- paired: the paired t-test's power, which the sign-flip test approaches as n grows,

      1 - F_{t(n-1, delta)}(t_{1-alpha, n-1}) >= power,  delta = sqrt(n) mean(d) / sd(d),

  and at least the n whose exact test can reach the level at all (2^-n < alpha);
- Welch: with sample SDs s_a, s_b and n seeds each,

      df = (n - 1) (s_a^2 + s_b^2)^2 / (s_a^4 + s_b^4),
      delta = |mean_a - mean_b| / sqrt((s_a^2 + s_b^2) / n),
      1 - F_{t(df, delta)}(t_{1-alpha, df}) >= power

  (the noncentral-t power of Welch's test with Welch's degrees of freedom; equal SDs give
  the two-sample test's 2n - 2 and G*Power's numbers: d = 0.5 needs 51, d = 1 needs 14).

**Holm's correction** (`holm`, Holm 1979) over the m comparisons of one family: with the
p-values sorted, p_(1) <= ... <= p_(m), the adjusted p_(i) is
max_{j <= i} min(1, (m - j + 1) p_(j)); rejecting where it is below alpha keeps the
chance of any false rejection in the family at most alpha.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from telapa.metrics.rates import as_exact

Better = Literal["higher", "lower"]

EXACT_MAX_PAIRS = 16
"""Up to this many pairs the sign-flip test enumerates all 2^n sign patterns (65,536)."""

MONTE_CARLO_RESAMPLES = 99_999
"""Random sign patterns of the sign-flip test beyond `EXACT_MAX_PAIRS` pairs."""

POWER = 0.8
"""Default power of `seeds_to_decide`."""

MAX_SEEDS = 10_000
"""`seeds_to_decide` gives None beyond this many seeds per method."""


def _array(values: ArrayLike, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or np.isnan(x).any():
        raise ValueError(f"{name} must be a 1-D array without NaN, got {values!r}")
    return x


def _check_better(better: str) -> None:
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")


def _integer_differences(a: Sequence[Any], b: Sequence[Any]) -> list[int]:
    """d_i = a_i - b_i exactly (`as_exact`), as integers on one common denominator."""
    d = [as_exact(u) - as_exact(v) for u, v in zip(a, b, strict=True)]
    common = math.lcm(*(f.denominator for f in d))
    return [int(f * common) for f in d]


def _values(values: Any) -> list[Any]:
    """The values of a 1-D sequence as Python numbers (rationals kept as they are)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def _sign_sums(d: list[int], signs: np.ndarray) -> np.ndarray:
    """T(s) = sum_i s_i d_i for each row s of ``signs``, in exact integer arithmetic
    (int64 where it cannot overflow, Python integers otherwise)."""
    if sum(abs(v) for v in d) < 2**62:
        return signs.astype(np.int64) @ np.asarray(d, dtype=np.int64)
    return signs.astype(object) @ np.asarray(d, dtype=object)


def sign_flip_p(a: ArrayLike, b: ArrayLike, *, better: Better = "higher",
                exact_max: int = EXACT_MAX_PAIRS, n_resamples: int = MONTE_CARLO_RESAMPLES,
                seed: int = 0) -> float:
    """One-sided p that ``a`` is better than ``b``, pairs (a_i, b_i) sharing a seed: the
    sign-flip permutation test of sum(a - b) (module docstring), with sums compared
    exactly and ties counted as at least as extreme; exact over all 2^n sign patterns
    when n <= ``exact_max``, else ``n_resamples`` random patterns seeded by ``seed``. All
    differences 0 give p = 1."""
    _check_better(better)
    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size or x.size == 0:
        raise ValueError(f"a and b must be pairs: got {x.size} and {y.size} values")
    if not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise ValueError(f"a and b must be finite: got {a!r} and {b!r}")
    d = _integer_differences(_values(a), _values(b))
    if not any(d):
        return 1.0
    n = len(d)
    if n <= exact_max:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        signs = 1 - 2 * bits  # every pattern, the all-positive one first
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice(np.array([-1, 1], dtype=np.int8), size=(n_resamples, n))
    sums = _sign_sums(d, signs)
    observed = sum(d)
    extreme = sums >= observed if better == "higher" else sums <= observed
    count = int(np.count_nonzero(extreme))
    if n <= exact_max:
        return count / 2**n
    return (count + 1) / (n_resamples + 1)


def welch_p(a: ArrayLike, b: ArrayLike, *, better: Better = "higher") -> float:
    """One-sided p that ``a`` is better than ``b`` (Welch's t-test). Two constant samples
    give 0 or 1 by their means (1 when equal). One constant sample is an ordinary case
    (its variance 0: se^2 = s^2 / n and df = n - 1 of the other), where scipy's warning
    that its moments lost precision is not about the p, so it is not shown."""
    import warnings

    from scipy import stats  # here, not at the top: see telapa.metrics
    _check_better(better)
    x, y = _array(a, "a"), _array(b, "b")
    if x.size < 2 or y.size < 2:
        raise ValueError(f"Welch's test needs two values a side: got {x.size} and {y.size}")
    x_constant, y_constant = np.ptp(x) == 0, np.ptp(y) == 0
    if x_constant and y_constant:
        wins = x[0] > y[0] if better == "higher" else x[0] < y[0]
        return 0.0 if wins else 1.0
    alternative = "greater" if better == "higher" else "less"
    with warnings.catch_warnings():
        if x_constant or y_constant:
            warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation",
                                    RuntimeWarning)
        return float(stats.ttest_ind(x, y, equal_var=False, alternative=alternative).pvalue)


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm-adjusted p-values, in the given order: with p sorted ascending,
    adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))."""
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError(f"pvalues must be a 1-D array of numbers in [0, 1], got {pvalues!r}")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty_like(p)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def _first_n(power_at: np.ndarray, ns: np.ndarray, target: float) -> int | None:
    hits = np.flatnonzero(power_at >= target)
    return int(ns[hits[0]]) if hits.size else None


def paired_seeds_to_decide(differences: ArrayLike, *, alpha: float = 0.05,
                           power: float = POWER) -> int | None:
    """Seeds at which the paired test at one-sided level ``alpha`` detects the mean of
    ``differences`` with ``power`` (module docstring); None when the mean is 0 or more
    than `MAX_SEEDS` would be needed; the exact test's floor when the SD is 0."""
    from scipy import stats  # here, not at the top: see telapa.metrics
    d = _array(differences, "differences")
    mean = abs(float(d.mean()))
    if mean == 0:
        return None
    floor = max(2, math.floor(-math.log2(alpha)) + 1)  # smallest n with 2^-n < alpha
    if np.ptp(d) == 0:
        return floor
    sd = float(d.std(ddof=1))
    ns = np.arange(2, MAX_SEEDS + 1)
    df = ns - 1
    achieved = stats.nct.sf(stats.t.ppf(1 - alpha, df), df, mean / sd * np.sqrt(ns))
    n = _first_n(achieved, ns, power)
    return None if n is None else max(n, floor)


def welch_seeds_to_decide(a: ArrayLike, b: ArrayLike, *, alpha: float = 0.05,
                          power: float = POWER) -> int | None:
    """Seeds per method at which Welch's one-sided test at ``alpha`` detects the
    difference of the means of ``a`` and ``b`` with ``power`` (module docstring); None
    when the means are equal or more than `MAX_SEEDS` would be needed; 2 when neither
    sample varies."""
    from scipy import stats  # here, not at the top: see telapa.metrics
    x, y = _array(a, "a"), _array(b, "b")
    diff = abs(float(x.mean() - y.mean()))
    if diff == 0:
        return None
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return 2
    va, vb = (float(v.var(ddof=1)) if v.size > 1 else 0.0 for v in (x, y))
    ns = np.arange(2, MAX_SEEDS + 1)
    df = (ns - 1) * (va + vb) ** 2 / (va**2 + vb**2)
    achieved = stats.nct.sf(stats.t.ppf(1 - alpha, df), df, diff / np.sqrt((va + vb) / ns))
    return _first_n(achieved, ns, power)


@dataclass(frozen=True)
class Comparison:
    """Method A against method B on one value, over seeds (`compare`)."""

    paired: bool
    """True: the same seeds on both sides, sign-flip test; False: Welch."""
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    p: float
    """One-sided p that A is better than B."""
    p_reverse: float
    """One-sided p that B is better than A."""
    a: tuple[float, ...]
    b: tuple[float, ...]
    """The values compared (paired: in seed order)."""

    @property
    def test(self) -> str:
        """The test's name, e.g. "paired sign-flip, n=5 (exact)" or "Welch, n=5/3"."""
        if not self.paired:
            return f"Welch, n={self.n_a}/{self.n_b}"
        kind = "exact" if self.n_a <= EXACT_MAX_PAIRS else "Monte Carlo"
        return f"paired sign-flip, n={self.n_a} ({kind})"

    def seeds_to_decide(self, *, alpha: float = 0.05, power: float = POWER) -> int | None:
        """Seeds per method at which this comparison's test, at ``alpha``, would detect
        the observed difference (in its direction) with ``power``."""
        if self.paired:
            return paired_seeds_to_decide(np.subtract(self.a, self.b), alpha=alpha,
                                          power=power)
        return welch_seeds_to_decide(self.a, self.b, alpha=alpha, power=power)


def compare(a: Mapping[int, Any], b: Mapping[int, Any], *, better: Better = "higher",
            seed: int = 0) -> Comparison:
    """A (seed -> value) against B: paired by seed (`sign_flip_p`) when both have values
    for exactly the same seeds, else Welch (`welch_p`). NaN values are dropped first.
    ValueError when a side has fewer than two values."""
    _check_better(better)
    xa = {s: v for s, v in a.items() if not math.isnan(v)}
    xb = {s: v for s, v in b.items() if not math.isnan(v)}
    if len(xa) < 2 or len(xb) < 2:
        raise ValueError(f"compare needs two values a side: got {len(xa)} and {len(xb)}")
    paired = set(xa) == set(xb)
    seeds: Sequence[int] = sorted(xa)
    exact_a = [xa[s] for s in seeds]
    exact_b = [xb[s] for s in (seeds if paired else sorted(xb))]
    va, vb = (np.array([float(v) for v in e]) for e in (exact_a, exact_b))
    reverse: Better = "lower" if better == "higher" else "higher"
    if paired:  # on the exact values (rationals where the caller has them)
        p = sign_flip_p(exact_a, exact_b, better=better, seed=seed)
        p_reverse = sign_flip_p(exact_a, exact_b, better=reverse, seed=seed)
    else:
        p, p_reverse = welch_p(va, vb, better=better), welch_p(vb, va, better=better)
    return Comparison(paired, va.size, vb.size, float(va.mean()), float(vb.mean()), p,
                      p_reverse, tuple(va.tolist()), tuple(vb.tolist()))
