"""What `telapa sweep status` shows: each cell's state, how far it got, and the cell
time still to go. Everything here only reads the sweep directory."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from telapa.continual.rundir import RunDirError
from telapa.continual.runtables import is_non_negative_number
from telapa.continual.sweep.layout import cell_dir, read_status

STATES = ("done", "running", "partial", "failed", "left")
EXPORT_STATES = ("done", "missing", "damaged")
"""The states of a cell an export lists (`exported_cell_state`)."""


def cell_state(sweep_dir: Path, name: str) -> tuple[str, dict[str, Any]]:
    """(state, status) of a cell: done, running (its run directory is locked by a live
    process), partial (a run directory, not running), failed, or left. Reads only: a
    read-only sweep directory is read correctly and no lock file is created."""
    status = read_status(sweep_dir, name)
    run_dir = cell_dir(sweep_dir, name)
    failed = status.get("state") == "failed"
    if not run_dir.exists():
        return ("failed" if failed else "left"), status
    if run_dir.is_complete():
        return "done", status
    if run_dir.is_locked():
        return "running", status
    return ("failed" if failed else "partial"), status


def tries_ended(state: str, status: dict[str, Any]) -> int:
    """The tries of a cell that ended (done or failed), as `telapa sweep status` shows
    them: its status file's ``attempts``, plus one for a done cell (``state``, from
    `cell_state`) whose status does not say done. Such a cell's last try ended with its
    run complete but was never recorded: a sweep killed between a run's end and its
    record, or, in exports written before seed batches were exported only once all their
    cells had recorded their end, a batch's partner cells, whose committed status still
    says ``queued`` with 0 attempts. Every earlier try that ended was recorded (a failure
    is, as it happens), so the count is exact. `run_sweep` records such a cell with this
    count when it next sees it."""
    attempts = int(status.get("attempts", 0))
    if state == "done" and status.get("state") != "done":
        return attempts + 1
    return attempts


def exported_cell_state(export_dir: Path, name: str) -> tuple[str, str]:
    """(state, what is wrong) of a cell that the export ``export_dir`` lists: done (its
    run is complete; nothing wrong), missing (it has no run directory) or damaged (its
    run directory is there, but not a complete run). An export holds finished cells
    only (`export_sweep`), so a cell missing or damaged in it is not work left but a
    loss: the export no longer holds a cell it lists."""
    run_dir = cell_dir(export_dir, name)
    if not run_dir.path.exists():
        return "missing", f"{run_dir.path} is not there"
    try:
        status = run_dir.manifest().get("status")
    except RunDirError as err:
        return "damaged", str(err)
    if status == "complete":
        return "done", ""
    return "damaged", f"{run_dir.path / 'run.json'} says the run is {status!r}, not complete"


@dataclass(frozen=True)
class CellTime:
    """How long a cell has run and how far it got (`cell_time`)."""

    wall_s: float
    """Wall clock of the run so far (a seed batch's runs each count their share)."""
    phases_done: int
    phases: int
    phase_s: tuple[tuple[str, float], ...] = ()
    """A finished run's wall clock by phase of its work (`phase_split`); empty for a
    started run, or a finished one whose accounting does not split it."""

    @property
    def progress(self) -> str:
        """``phases done/phases`` for a started cell, ``complete`` for a finished one."""
        if self.phases_done >= self.phases:
            return "complete"
        return f"{self.phases_done}/{self.phases} phases"

    @property
    def left_s(self) -> float:
        """Wall clock still to go at the pace so far: ``wall_s (phases - done) / done``
        (the first visits of an archive method are cheaper than the later ones, so this
        runs low for them)."""
        if self.phases_done >= self.phases:
            return 0.0
        if self.phases_done == 0:
            return math.nan
        return self.wall_s * (self.phases - self.phases_done) / self.phases_done


def cell_time(sweep_dir: Path, name: str) -> CellTime | None:
    """A finished cell's wall clock (its accounting) or a started one's, from its latest
    checkpoint; None before the first checkpoint.

    Raises `RunDirError` naming the file when the cell's files are there but unreadable
    (`cell_times` maps such cells to None for the callers that only estimate)."""
    run_dir = cell_dir(sweep_dir, name)
    if not run_dir.exists():
        return None
    try:
        if run_dir.manifest().get("status") == "complete":
            accounting = run_dir.accounting()
            wall = float(accounting["wall_s"])
            return CellTime(wall, 1, 1, phase_split(accounting, wall))
        state = run_dir.checkpoints.state_json()
        if state is None:
            return None
        return CellTime(float(state.get("wall_s", math.nan)), int(state["next_phase"]),
                        int(state["phases"]))
    except RunDirError as err:
        raise RunDirError(f"cell {name}: cannot read its progress: {err}") from None
    except (ValueError, TypeError) as err:
        raise RunDirError(f"cell {name}: cannot read its progress from {run_dir.path}: "
                          f"{type(err).__name__}: {err}") from None


def phase_split(accounting: dict[str, Any], wall_s: float) -> tuple[tuple[str, float], ...]:
    """A finished run's wall clock ``wall_s`` by phase, from its accounting: ``phase_s``
    (train, eval, checkpoint, ...) with its ``method`` share split into the method's own
    phases (``method_phase_s``: ``method.illumination``, ``method.maintenance``, ...),
    and ``other`` for the rest of the wall clock (start-up, compiles outside a phase),
    so that the parts sum to ``wall_s``. Empty where the accounting has no ``phase_s``
    or a part is not a finite number >= 0 (an estimate then goes by the whole)."""
    phases, parts = accounting.get("phase_s"), accounting.get("method_phase_s") or {}
    if not isinstance(phases, dict) or not isinstance(parts, dict):
        return ()
    split = {k: v for k, v in phases.items() if not (k == "method" and parts)}
    split |= {f"method.{k}": v for k, v in parts.items()}
    if not all(is_non_negative_number(v) for v in split.values()):
        return ()
    split = {k: float(v) for k, v in split.items()}
    split["other"] = max(0.0, wall_s - sum(split.values()))
    return tuple(sorted(split.items()))


def cell_times(sweep_dir: Path, cells: list[dict[str, Any]]
               ) -> tuple[dict[str, CellTime | None], dict[str, str]]:
    """`cell_time` of every cell, and the cells whose files are unreadable (name -> the
    error; their time is None, as for a cell not started)."""
    times: dict[str, CellTime | None] = {}
    unreadable: dict[str, str] = {}
    for cell in cells:
        try:
            times[cell["name"]] = cell_time(sweep_dir, cell["name"])
        except RunDirError as err:
            times[cell["name"]], unreadable[cell["name"]] = None, str(err)
    return times, unreadable


class Estimate(NamedTuple):
    """`time_left`'s answer: the cell time still to go and how each cell not started was
    counted."""

    seconds: float
    """Cell time still to go, one cell after another."""
    other_curricula: list[str]
    """Cells counted at their method's pace per visit on other curricula (scaled by
    their curriculum's cost, `Estimate.scales`)."""
    other_settings: list[str]
    """Cells counted at the mean of their method's cells on their curriculum under other
    settings."""
    other_methods: list[str]
    """Cells counted at the mean of their curriculum's cells under other methods."""
    unknown: list[str]
    """Cells not estimated."""
    scales: dict[str, float]
    """Curriculum name -> the cost factor f_C its `other_curricula` cells were scaled by,
    for those with a measured one."""
    unscaled: tuple[str, ...] = ()
    """Curriculum names whose `other_curricula` cells were counted with f_C = 1, as no
    method has finished there and elsewhere (a Walker2d curriculum before any of its
    cells ends counts HalfCheetah's pace, which its RK4 physics may well triple)."""
    phase_scaled: tuple[str, ...] = ()
    """Curriculum names some of whose `other_curricula` cells were scaled phase by phase
    (`cell_estimates`, rule 2), not by `scales`' one factor."""


def format_duration(seconds: float) -> str:
    """A wall clock as `telapa sweep status` and ``--until`` write it: in seconds under a
    minute, minutes under an hour, hours beyond (a cell 25 s into its run read ``0.00 h``,
    as if it had not started); empty when unknown."""
    if not math.isfinite(seconds):
        return ""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 3570:  # 59.5 min and over read "1.0 h", not "60 min"
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _visits(cell: dict[str, Any]) -> int | None:
    """Visits of a cell's curriculum: ``order`` x ``cycles``, as `Curriculum.visits` counts
    them, read from the stored payload without validating it (which would import every
    task's env module); None where it cannot say."""
    curriculum = cell.get("curriculum")
    if not isinstance(curriculum, dict) or not isinstance(curriculum.get("order"), list):
        return None
    visits = len(curriculum["order"]) * int(curriculum.get("cycles", 1))
    return visits or None


class CellEstimate(NamedTuple):
    """`cell_estimates`' answer for one cell: its wall clock still to go and the rule of
    `cell_estimates` that counted it."""

    seconds: float
    """Wall clock still to go (nan: not estimated; 0 for a finished cell)."""
    rule: str
    """``started`` (its own pace so far), ``same`` (1), ``other_curricula`` (2),
    ``other_settings`` (3), ``other_methods`` (4) or ``unknown`` (5)."""


def cell_estimates(sweep_dir: Path, cells: list[dict[str, Any]], *,
                   times: dict[str, CellTime | None] | None = None
                   ) -> dict[str, CellEstimate]:
    """Each cell's wall clock still to go, and the rule that counted it.

    A started cell counts its own pace (`CellTime.left_s`) and what a cell of its kind
    not started counts less the wall clock it has run, weighted by how far it is
    (`_started_left`). A cell not started counts, the first that exists:

    1. the mean wall clock of the finished cells that differ from it only in their seed;
    2. its method's mean wall clock per visit on other curricula with the same settings,
       times its own visits and its curriculum's cost factor:
       ``mean_j(wall_j / visits_j) * visits * f_C``. Tasks differ in cost per step
       (Hopper's and Walker2d's RK4 physics makes a visit about 3x HalfCheetah's), so f_C
       is measured from the methods B that finished on C and elsewhere (same settings):
       the geometric mean over m in B of p(m, C) / q(m), with p(m, C) m's mean wall clock
       per visit on C and q(m) its mean per visit on the other curricula; f_C = 1 where B
       is empty. Where every one of those cells of its method records its phases
       (`phase_split`), each phase x is scaled by its own factor f_C,x, measured as f_C
       on the methods that spent time in x on C and elsewhere (f_C where none did):
       ``visits * sum_x mean_j(x_j / visits_j) * f_C,x``. Phases scale differently: on
       2026-12-07 Hopper's PPO visits took 1.1-2.2x HalfCheetah's, but its TeLAPA
       illumination 0.5x (a falling Hopper ends its episodes early) and maintenance 0.7x
       (no env steps at all), so one factor put a TeLAPA-Fresh cell there at 2.0 h, which
       TeLAPA's took 0.88;
    3. the mean wall clock of its method's finished cells on its curriculum under other
       settings (an ablation's settings, such as an injection probability, change a
       method's cost far less than another method would);
    4. the mean wall clock of its curriculum's finished cells under any method (methods
       differ in cost, TeLAPA's cells several times a baseline's, so this is the
       roughest);
    5. nothing: the cell is not estimated (nan).

    The estimates are only as good as the finished cells they come from: measured with
    other workers beside them, or another thread count, they carry that pace.
    ``times``: each cell's `cell_time`, when the caller has read them already."""
    if times is None:
        times, _ = cell_times(sweep_dir, cells)
    return _estimates(cells, times)[0]


def _estimates(cells: list[dict[str, Any]], times: dict[str, CellTime | None]
               ) -> tuple[dict[str, CellEstimate], dict[str, float], tuple[str, ...],
                          tuple[str, ...]]:
    """`cell_estimates`, `Estimate.scales` (the cost factor of each curriculum whose cells
    rule 2 counted with a measured one), `Estimate.unscaled` (those counted without) and
    `Estimate.phase_scaled`."""

    def key(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    kinds = {cell["name"]: (key(cell.get("method")), key(cell.get("curriculum")),
                            key(cell.get("config")), _visits(cell)) for cell in cells}
    same_cell: dict[tuple[str, str, str], list[float]] = {}
    per_visit: dict[tuple[str, str], dict[str, list[float]]] = {}
    same_setting: dict[tuple[str, str], list[float]] = {}
    same_method: dict[tuple[str, str], list[float]] = {}
    phase_paces: dict[tuple[str, str], dict[str, list[dict[str, float]]]] = {}
    for cell in cells:
        t = times.get(cell["name"])
        if t is None or t.phases_done < t.phases or not math.isfinite(t.wall_s):
            continue
        method, curriculum, config, visits = kinds[cell["name"]]
        same_cell.setdefault((method, curriculum, config), []).append(t.wall_s)
        same_setting.setdefault((curriculum, config), []).append(t.wall_s)
        same_method.setdefault((method, curriculum), []).append(t.wall_s)
        if visits:
            per_visit.setdefault((method, config), {}).setdefault(curriculum, []).append(
                t.wall_s / visits)
            if t.phase_s:
                phase_paces.setdefault((method, config), {}).setdefault(
                    curriculum, []).append({x: s / visits for x, s in t.phase_s})
    factors = _cost_factors(per_visit)
    phase_factors = _phase_cost_factors(phase_paces)
    estimates: dict[str, CellEstimate] = {}
    scales: dict[str, float] = {}
    unscaled: dict[str, None] = {}
    phase_scaled: dict[str, None] = {}
    for cell in cells:
        t = times.get(cell["name"])
        method, curriculum, config, visits = kinds[cell["name"]]
        if walls := same_cell.get((method, curriculum, config)):
            estimate = CellEstimate(_mean(walls), "same")
        elif visits and (paces := _flat(per_visit.get((method, config), {}))):
            factor = factors.get((curriculum, config), 1.0)
            split = [d for ds in phase_paces.get((method, config), {}).values() for d in ds]
            if split and len(split) == len(paces) and (curriculum, config) in factors:
                seconds = visits * sum(
                    _mean([d.get(x, 0.0) for d in split])
                    * phase_factors.get((curriculum, config, x), factor)
                    for x in sorted(set().union(*split)))
                phase_scaled[_name(cell)] = None
            else:
                seconds = visits * _mean(paces) * factor
            estimate = CellEstimate(seconds, "other_curricula")
        elif walls := same_method.get((method, curriculum)):
            estimate = CellEstimate(_mean(walls), "other_settings")
        elif walls := same_setting.get((curriculum, config)):
            estimate = CellEstimate(_mean(walls), "other_methods")
        else:
            estimate = CellEstimate(math.nan, "unknown")
        if not math.isfinite(estimate.seconds) and estimate.rule != "unknown":
            estimate = CellEstimate(math.nan, "unknown")
        if t is not None and t.phases_done > 0:
            estimate = CellEstimate(_started_left(t, estimate.seconds), "started")
        elif estimate.rule == "other_curricula":
            if (curriculum, config) in factors:
                scales[_name(cell)] = factors[(curriculum, config)]
            else:
                unscaled[_name(cell)] = None
        estimates[cell["name"]] = estimate
    return estimates, scales, tuple(unscaled), tuple(phase_scaled)


def time_left(sweep_dir: Path, cells: list[dict[str, Any]], *,
              times: dict[str, CellTime | None] | None = None) -> Estimate:
    """Cell time still to go for the sweep, one cell after another, and how each cell
    not started was counted: the sum of `cell_estimates` over the cells it could
    estimate (`Estimate` lists the rest, and the cells of rules 2-4).

    ``times``: each cell's `cell_time`, when the caller has read them already."""
    if times is None:
        times, _ = cell_times(sweep_dir, cells)
    estimates, scales, unscaled, phase_scaled = _estimates(cells, times)
    by_rule: dict[str, list[str]] = {}
    for name, estimate in estimates.items():
        by_rule.setdefault(estimate.rule, []).append(name)
    total = sum(e.seconds for e in estimates.values() if math.isfinite(e.seconds))
    return Estimate(total, by_rule.get("other_curricula", []),
                    by_rule.get("other_settings", []), by_rule.get("other_methods", []),
                    by_rule.get("unknown", []), scales, unscaled, phase_scaled)


def _started_left(t: CellTime, whole: float) -> float:
    """A started cell's wall clock still to go: its own pace's (`CellTime.left_s`) and
    its kind's (``whole - t.wall_s``, where ``whole`` is what rules 1-4 of
    `cell_estimates` give a cell of its kind not started) weighted by how far it is,
    f = phases done / phases:

        left = f * own + (1 - f) * (whole - wall)

    Its own pace alone is unreliable early on, either way: an archive method's first
    visits are its cheapest and a visit that reaches its competence threshold ends before
    its budget (on 2026-12-06 a long-curriculum TeLAPA cell 47 s into its first visit was
    put at 32 min by its own pace; it took about 1.9 h), but each run's compiles fall in
    its first phases (the next cell of that kind, 14 of 353 phases in 17 min, was put at
    6.9 h, so ``--until`` started a fresh cell beside it). Its kind's time is what the
    finished cells took; its own pace takes over as the cell goes on. Its own pace alone
    where its kind has no estimate (nan) or the cell has run past its kind's time."""
    own = t.left_s
    if t.phases_done >= t.phases or not math.isfinite(whole) or t.wall_s >= whole:
        return own
    f = t.phases_done / t.phases  # > 0: a cell is started once it has done a phase
    return f * own + (1 - f) * (whole - t.wall_s)


def _flat(paces: dict[str, list[float]]) -> list[float]:
    return [p for values in paces.values() for p in values]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _cost_factors(per_visit: dict[tuple[str, str], dict[str, list[float]]]
                  ) -> dict[tuple[str, str], float]:
    """(curriculum, config) -> f_C of `time_left`'s rule 2, for each curriculum some
    method finished on and elsewhere: the geometric mean over those methods m of
    p(m, C) / q(m)."""
    logs: dict[tuple[str, str], list[float]] = {}
    for (_, config), by_curriculum in per_visit.items():
        for curriculum, paces in by_curriculum.items():
            others = _flat({c: p for c, p in by_curriculum.items() if c != curriculum})
            if others and _mean(others) > 0 and _mean(paces) > 0:
                logs.setdefault((curriculum, config), []).append(
                    math.log(_mean(paces) / _mean(others)))
    return {key: math.exp(_mean(values)) for key, values in logs.items()}


def _phase_cost_factors(phase_paces: dict[tuple[str, str], dict[str, list[dict[str, float]]]]
                        ) -> dict[tuple[str, str, str], float]:
    """(curriculum, config, phase) -> f_C,x of `cell_estimates`' rule 2: `_cost_factors`
    of each phase x's seconds per visit, over the methods that spent time in x on the
    curriculum and elsewhere (a method without x, such as a baseline's illumination,
    has a mean of 0 there and is left out)."""
    phases = {x for by_curriculum in phase_paces.values() for split in by_curriculum.values()
              for d in split for x in d}
    factors: dict[tuple[str, str, str], float] = {}
    for x in sorted(phases):
        per_visit = {key: {c: [d.get(x, 0.0) for d in split] for c, split in by_c.items()}
                     for key, by_c in phase_paces.items()}
        for (curriculum, config), factor in _cost_factors(per_visit).items():
            factors[(curriculum, config, x)] = factor
    return factors


def _name(cell: dict[str, Any]) -> str:
    curriculum = cell.get("curriculum")
    name = curriculum.get("name") if isinstance(curriculum, dict) else None
    return str(name) if name else cell["name"]


__all__ = ["EXPORT_STATES", "STATES", "CellEstimate", "CellTime", "Estimate", "cell_estimates",
           "cell_state", "cell_time", "cell_times", "exported_cell_state", "format_duration",
           "phase_split", "time_left", "tries_ended"]
