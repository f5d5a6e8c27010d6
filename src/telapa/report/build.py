"""``telapa report``: every table and figure of the paper from a set of runs.

Runs are grouped by curriculum (one section each) and method. A section holds the main
table, the revisit table, rliable's aggregates of the revisit scores (mean and IQM,
performance profile, probability of improvement: `telapa.report.aggregates`), the compute
table, TeLAPA's runtime breakdown, the paper's Table 1 claims checked on the runs and the
comparisons behind them (`telapa.report.claims`), the learning curves, the performance
profile figure and, for each method with policy archives, the archive analysis of
`telapa.analysis.panels`.
`write_report` lays out

    OUT/index.html     one self-contained page (inline CSS, figures as data URIs)
    OUT/report.md      the same tables as Markdown, figures linked
    OUT/report.json    what the report was made from (marks OUT as a report)
    OUT/tables/ID.md   each table as Markdown (best cells in bold) and ID.csv (numbers)
    OUT/figures/ID.png each figure as PNG and ID.svg

and replaces an earlier report only once the new one is complete.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from telapa.analysis.data import TeLAPARun, load_telapa_run
from telapa.analysis.panels import analysis_panels, analysis_tables
from telapa.continual.rundir import RunDirError
from telapa.io import read_json, write_json_atomic
from telapa.io.atomic import remove_stale
from telapa.io.destination import destination_problem
from telapa.io.lock import LockHeld, exclusive_lock
from telapa.metrics import fixed
from telapa.metrics.stats import Resample
from telapa.report.aggregates import aggregates_table, improvement_table, profile_table
from telapa.report.claims import (
    claims_table,
    comparisons_table,
    pair_seeds_table,
    settings_pairs_table,
)
from telapa.report.compute import compute_table, runtime_table
from telapa.report.curves import learning_curves, profile_figure
from telapa.report.document import Document, Section, to_html, to_markdown
from telapa.report.figures import ReportFigure, render
from telapa.report.injection import injection_table, injection_visits_table
from telapa.report.mujoco import boundary_table, mujoco_results, mujoco_tables
from telapa.report.results import CurriculumResults, RunRecord, competence_name, score
from telapa.report.scores import main_table, revisit_table
from telapa.report.tables import ReportTable, frame_table

REPORT_FORMAT = "telapa-report"
T = TypeVar("T")
Track = Callable[[Sequence[T]], Iterable[T]]

ANALYSIS_TITLES = {
    "local_transfer": "Local transfer within the good-enough set",
    "qd_structure": "Pooled QD structure across runs",
    "lineage": "Stepping-stone lineages across task archives",
    "lineage_utility": "Lineage utility",
    "geometry": "Joint latent geometry of the archives",
}


class ReportError(ValueError):
    """The output directory cannot take a report."""


def slug(text: str) -> str:
    """A lower-case id made of letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def load_archives(records: Sequence[RunRecord], *, track: Track = iter) -> dict[Path, TeLAPARun]:
    """The archive tables of every run that has them (TeLAPA-family methods)."""
    runs = (load_telapa_run(r.path) for r in track(records))
    return {run.path: run for run in runs if run is not None}


def build_document(
    records: Sequence[RunRecord],
    archives: Mapping[Path, TeLAPARun],
    *,
    gamma: float = 0.9,
    tau: float = 0.5,
    track: Track = iter,
    resample: Resample = "runs",
    clips: bool = False,
    tau_from: Sequence[RunRecord] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Document:
    """Scores ``records`` and draws every figure (``track`` wraps the drawing jobs);
    ``resample``: what the aggregates' bootstrap draws (`telapa.report.aggregates`);
    ``clips``: also the filmstrips of transfers and archive elites of one run of each
    method with archives (`telapa.report.clips`); ``tau_from``: the runs whose Scratch
    runs give tau_T (`telapa.report.results.score`; default ``records``); ``on_phase``
    is told each phase as it starts, one line of text each (scoring, each curriculum's
    tables, the figures), for progress on a build that takes a minute."""
    phase = on_phase or (lambda text: None)
    sections: list[Section] = []
    jobs: list[Callable[[], None]] = []
    phase(f"scoring {len(records)} runs")
    results = score(records, tau_from=tau_from)
    mujoco = mujoco_results(results)
    if mujoco:
        sections.append(Section("mujoco", "MuJoCo friction shifts",
                                notes=["Paper App. \"Continuous-Control Dynamics-Shift "
                                       "Evaluation in MuJoCo\"; learning curves in return "
                                       "units are in each curriculum's section."],
                                tables=mujoco_tables(mujoco)))
    for result in results.values():
        prefix = slug(result.curriculum)
        if prefix in {s.id for s in sections}:  # names that differ only in punctuation
            prefix = f"{prefix}-{len(sections)}"
        phase(f"tables of curriculum {result.curriculum} ({len(result.runs)} rows, "
              f"{sum(len(rs) for rs in result.runs.values())} runs)")
        section, section_jobs = _curriculum_section(result, archives, prefix=prefix,
                                                    gamma=gamma, tau=tau, resample=resample)
        if clips:
            section_jobs += _clips_jobs(section, result, archives, prefix)
        sections.append(section)
        jobs += section_jobs
        if result.curriculum in mujoco:
            jobs.append(_return_curves_job(section, result, prefix))
    phase(f"drawing the figures and archive analyses ({len(jobs)} jobs)")
    for job in track(jobs):
        job()
    methods = sorted({r.method for r in records})
    notes = [f"{len(records)} runs: {', '.join(methods)}; generated "
             f"{datetime.now().isoformat(timespec='seconds')}."]
    return Document("telapa report", notes, sections)


def code_note(records: Iterable[RunRecord]) -> str:
    """Which code the runs ran with (`telapa.provenance`): each distinct list of commits
    (12 characters each, ``->`` where a run was resumed on another; an installed
    package's ``telapa-VERSION+src.HASH`` whole) and its run count."""
    def short(code: str | None) -> str:
        if code is None:
            return "not recorded"
        if code.startswith("telapa-"):
            return code
        return code[:12] + ("+dirty" if code.endswith("+dirty") else "")

    counts = Counter(" -> ".join(short(c) for c in r.code) for r in records)
    return "Code: " + "; ".join(f"{k} ({n} run{'s' if n > 1 else ''})"
                                for k, n in sorted(counts.items())) + "."


def curriculum_tables(result: CurriculumResults, *, prefix: str,
                      resample: Resample = "runs") -> list[ReportTable]:
    """A curriculum's tables: main, revisit (and on a MuJoCo friction curriculum the fall
    of SR~ at its boundaries), and with revisits the aggregates, profile and
    improvement tables, compute and, with TeLAPA runs, runtime (and with injected parents
    the injection counts), the paper's claims checked,
    their comparisons and the pair claims seed by seed (and TeLAPA-Fresh's, with its
    runs); ids start with ``prefix``
    (the report uses the curriculum's `slug`); ``resample`` as in `build_document`."""
    friction = bool(mujoco_results({result.curriculum: result}))
    tables = [main_table(result, prefix=prefix), revisit_table(result, prefix=prefix),
              boundary_table(result, prefix=prefix) if friction else None,
              aggregates_table(result, prefix=prefix, resample=resample),
              profile_table(result, prefix=prefix, resample=resample),
              improvement_table(result, prefix=prefix, resample=resample),
              compute_table(result, prefix=prefix), runtime_table(result, prefix=prefix),
              injection_table(result, prefix=prefix),
              injection_visits_table(result, prefix=prefix),
              claims_table(result, prefix=prefix), comparisons_table(result, prefix=prefix),
              pair_seeds_table(result, prefix=prefix),
              claims_table(result, prefix=prefix, fresh=True),
              comparisons_table(result, prefix=prefix, fresh=True),
              pair_seeds_table(result, prefix=prefix, fresh=True),
              settings_pairs_table(result, prefix=prefix)]
    return [t for t in tables if t is not None]


def _curriculum_section(
    result: CurriculumResults, archives: Mapping[Path, TeLAPARun], *, prefix: str,
    gamma: float, tau: float, resample: Resample,
) -> tuple[Section, list[Callable[[], None]]]:
    seeds = "; ".join(f"{m}: seeds {', '.join(str(r.seed) for r in rs)}"
                      for m, rs in result.runs.items())
    taus = ", ".join(f"{t} {fixed(v, 3)}" for t, v in result.tau.items())
    own = "; ".join(f"{label} ({len(result.runs[label])} run(s)): " + ", ".join(
        f"{t} {fixed(float(v), 3)}" for t, v in targets.items())
        for label, targets in result.own_tau.items())
    section = Section(prefix, f"Curriculum {result.curriculum}",
                      notes=[seeds + ".", f"Competence targets tau_T: {taus} "
                                          f"(from {result.tau_source})." + (
                                              f" Not used, beside it: the tau_T of this "
                                              f"report's own Scratch runs, {own}."
                                              if own else ""),
                             *filter(None, [result.tau_note()]),
                             code_note(r for rs in result.runs.values() for r in rs)])
    section.tables = curriculum_tables(result, prefix=prefix, resample=resample)

    score = competence_name(result)  # success rate, or a graded SR~

    def curves() -> None:
        fig = learning_curves(result.runs, title=f"{result.curriculum}: {score}",
                              ylabel=score)
        section.figures.append(render(
            fig, figure_id=f"{prefix}-curves", title="Learning curves",
            caption=f"Mean {score} over seeds (shaded: 95% CI) across the whole "
                    "curriculum; dotted lines mark task boundaries, top labels the visits "
                    "(primes: revisits).",
        ))

    def profile() -> None:
        fig = profile_figure(result, title=f"{result.curriculum}: revisit {score}",
                             score=score)
        if fig is not None:
            section.figures.append(render(
                fig, figure_id=f"{prefix}-profile", title="Performance profile",
                caption=f"Fraction of runs whose {score} after a revisit is above tau, "
                        "averaged over the revisits (rliable's performance profile); "
                        "shaded: 95% percentile bootstrap band over runs.",
            ))

    jobs: list[Callable[[], None]] = [curves, profile]
    for method, runs in _archive_runs(result, archives).items():
        if runs:
            child = Section(_analysis_id(prefix, method), f"{method}: archive analysis "
                            f"({len(runs)} run{'s' if len(runs) > 1 else ''}, "
                            f"gamma {gamma}, tau {tau})")
            section.children.append(child)
            jobs.append(_analysis_job(child, runs, gamma=gamma, tau=tau))
    return section, jobs


def _clips_jobs(section: Section, result: CurriculumResults,
                archives: Mapping[Path, TeLAPARun], prefix: str) -> list[Callable[[], None]]:
    """A behaviour section per method with archives: `telapa.report.clips` of its run of
    the lowest seed (a note instead where the run keeps no policies or checkpoints, e.g.
    a sweep export, or is not a MiniGrid run)."""
    from telapa.report.clips import run_clips

    jobs = []
    for method, runs in _archive_runs(result, archives).items():
        if not runs:
            continue
        run = min(runs, key=lambda r: r.seed)
        child = Section(f"{_analysis_id(prefix, method)}-behaviour",
                        f"{method}: behaviour (seed {run.seed})")
        section.children.append(child)

        def job(child: Section = child, path: Path = run.path, method: str = method) -> None:
            try:
                child.figures.extend(run_clips(path, prefix=child.id))
            except (RunDirError, ValueError, OSError, RuntimeError) as err:
                child.notes.append(f"No clips of {path}: {err}")

        jobs.append(job)
    return jobs


def _archive_runs(result: CurriculumResults, archives: Mapping[Path, TeLAPARun]
                  ) -> dict[str, list[TeLAPARun]]:
    """Each method's runs that have archives (none for the single-model methods)."""
    return {method: [archives[r.path] for r in records if r.path in archives]
            for method, records in result.runs.items()}


def _analysis_id(prefix: str, method: str) -> str:
    return f"{prefix}-{slug(method)}"


def _analysis_table(section_id: str, name: str, frame: pd.DataFrame) -> ReportTable:
    return frame_table(f"{section_id}-{slug(name)}", name.replace("_", " "), "", frame)


def analysis_report_tables(
    result: CurriculumResults, archives: Mapping[Path, TeLAPARun], *, prefix: str,
    gamma: float = 0.9, tau: float = 0.5,
) -> list[ReportTable]:
    """The archive-analysis tables of a curriculum's TeLAPA-family methods, as the report
    has them (ids ``PREFIX-METHOD-NAME``), without drawing the figures."""
    return [_analysis_table(_analysis_id(prefix, method), name, frame)
            for method, runs in _archive_runs(result, archives).items() if runs
            for name, frame in analysis_tables(runs, gamma=gamma, tau=tau).items()]


def _return_curves_job(section: Section, result: CurriculumResults, prefix: str
                       ) -> Callable[[], None]:
    def job() -> None:
        fig = learning_curves(result.runs, title=f"{result.curriculum}: evaluation return",
                              returns=True)
        section.figures.append(render(
            fig, figure_id=f"{prefix}-return-curves", title="Learning curves (return)",
            caption="Mean evaluation return over seeds (shaded: 95% CI) across the whole "
                    "curriculum, in the environment's return units; dotted lines mark "
                    "friction-regime boundaries, top labels the visits (primes: revisits).",
        ))
    return job


def _analysis_job(
    section: Section, runs: Sequence[TeLAPARun], *, gamma: float, tau: float
) -> Callable[[], None]:
    def job() -> None:
        tables, figures = analysis_panels(runs, gamma=gamma, tau=tau)
        section.tables = [_analysis_table(section.id, k, v) for k, v in tables.items()]
        section.figures = [render(fig, figure_id=f"{section.id}-{slug(k)}",
                                  title=ANALYSIS_TITLES.get(k, k.replace("_", " ")))
                           for k, fig in figures.items()]
    return job


def check_destination(out: str | Path) -> None:
    """`ReportError` unless a report can be written to ``out``: a new or empty directory,
    or an earlier report that holds only files it wrote (a file a user added there is
    never deleted), in a place that can be written; not a mount point (the report is
    renamed into place, and nothing can be renamed onto a mount point: EBUSY, read-only
    or not). Checked before any work."""
    out = Path(out)
    if problem := destination_problem(out, what="report directory",
                                      choose="choose another --out", renamed_into_place=True,
                                      example=f"--out {out / 'report'}"):
        raise ReportError(problem)
    if out.is_dir():
        _check_replaceable(out)
    place = out.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    try:  # an unnamed temporary file: nothing is left behind, also when it fails
        with tempfile.TemporaryFile(dir=place):
            pass
    except OSError as err:
        raise ReportError(f"cannot write report directory {out}: {err.strerror} "
                          f"({place}); choose another --out") from None


@contextmanager
def report_lock(out: str | Path) -> Iterator[Path]:
    """Holds the lock of the report directory ``out`` (``.NAME.lock`` beside it,
    `telapa.io.lock.exclusive_lock`; removed at the end) for the block: one process
    writes a report to ``out`` at a time. A second one is refused at once, before it
    writes anything, with `ReportError` naming the holder; ``telapa report`` takes it
    before loading any run and holds it through ``--doc``. Re-entrant in a process.
    OSError where the lock file cannot be made (a full disk), as for the report's files."""
    out = Path(out)
    try:
        with exclusive_lock(out, f"report directory {out}") as path:
            yield path
    except LockHeld as err:
        raise ReportError(str(err)) from None


def write_report(doc: Document, out: str | Path, *, sources: Sequence[str | Path] = ()) -> Path:
    """Writes the report into ``out``, replacing an earlier report there only once the
    new one is complete; refuses a non-empty directory that is not a report, and an
    earlier report that holds files it did not write (`check_destination`), and a
    report directory another process is writing (`report_lock`)."""
    out = Path(out)
    with report_lock(out):
        return _write_report(doc, out, sources)


def _write_report(doc: Document, out: Path, sources: Sequence[str | Path]) -> Path:
    check_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(out.parent, f".{out.name}", (".new", ".old"))  # left by a killed writer
    staging = out.parent / f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.new"
    old = staging.with_suffix(".old")
    staging.mkdir()
    try:
        _write_files(doc, staging, sources)
        if out.exists():
            out.rename(old)
        staging.rename(out)
    except BaseException:
        if old.exists() and not out.exists():  # stopped between the two renames
            old.rename(out)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return out


def _check_replaceable(out: Path) -> None:
    """`ReportError` unless the directory ``out`` is empty or an earlier report holding
    only the files it wrote (those its ``report.json`` lists)."""
    try:
        present = sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir())
    except OSError as err:
        raise ReportError(f"cannot read {out}: {err.strerror}; choose another --out") from None
    if not present:
        return
    try:
        manifest: Any = read_json(out / "report.json", "report manifest")
    except (FileNotFoundError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != REPORT_FORMAT:
        raise ReportError(f"{out} exists and is not a telapa report; choose another --out")
    extra = [p for p in present if p not in set(_report_files(manifest))]
    if extra:
        shown = ", ".join(extra[:5]) + (", ..." if len(extra) > 5 else "")
        raise ReportError(f"{out} holds files the report did not write ({shown}); move them "
                          "out or choose another --out (the report replaces its directory)")


def _report_files(manifest: dict[str, Any]) -> list[str]:
    """The files a report wrote, from its manifest (``files``; for a report written before
    that list, the files its tables and figures make)."""
    if isinstance(manifest.get("files"), list):
        return [str(f) for f in manifest["files"]]
    tables = [str(t) for t in manifest.get("tables", [])]
    figures = [str(f) for f in manifest.get("figures", [])]
    return (["index.html", "report.md", "report.json"]
            + [f"tables/{t}.{ext}" for t in tables for ext in ("md", "csv")]
            + [f"figures/{f}.{ext}" for f in figures for ext in ("png", "svg")])


def _write_files(doc: Document, folder: Path, sources: Sequence[str | Path]) -> None:
    (folder / "tables").mkdir()
    (folder / "figures").mkdir()
    tables: list[ReportTable] = doc.tables()
    figures: list[ReportFigure] = doc.figures()
    for table in tables:
        (folder / "tables" / f"{table.id}.md").write_text(table.to_markdown())
        (folder / "tables" / f"{table.id}.csv").write_text(table.to_csv())
    for fig in figures:
        (folder / "figures" / f"{fig.id}.png").write_bytes(fig.png)
        (folder / "figures" / f"{fig.id}.svg").write_bytes(fig.svg)
    (folder / "report.md").write_text(to_markdown(doc))
    (folder / "index.html").write_text(to_html(doc))
    written = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    write_json_atomic(folder / "report.json", {
        "format": REPORT_FORMAT, "version": 1, "runs": [str(s) for s in sources],
        "tables": [t.id for t in tables], "figures": [f.id for f in figures],
        "files": [*written, "report.json"],
    })
