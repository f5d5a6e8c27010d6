"""``telapa report`` (every table and figure of the paper from a set of runs) and
``telapa inspect`` (one run's policy archives).

    telapa report RUN_DIR... --out DIR [--skip-incomplete] [--gamma 0.9] [--tau 0.5]
                  [--doc FILE.md [--doc-scope NAME]]
    telapa inspect RUN_DIR|SWEEP_DIR [--task TAG]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from telapa.cli.common import (
    CLIError,
    add_resample_option,
    add_tau_from_option,
    expand_sweeps,
    load_runs,
    log_line,
    print_table,
    reads_results,
    stdout_console,
    tracker,
)
from telapa.continual.rundir import RunDirError
from telapa.report.inspection import (
    Inspection,
    NoArchivesError,
    archive_methods,
    inspect_run,
)


def _unit_interval(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


@reads_results
def _cmd_report(ns: argparse.Namespace) -> None:
    # imported here: matplotlib and the archive analysis are slow to import for other commands
    from telapa.report.build import (
        ReportError,
        check_destination,
        report_lock,
    )
    from telapa.report.docsync import DocSyncError, blocks

    console = Console(stderr=True)
    if ns.doc_scope is not None and ns.doc is None:
        raise CLIError("--doc-scope needs --doc FILE.md")
    if ns.doc is not None:
        try:
            text = ns.doc.read_text()
            if not blocks(text, ns.doc_scope):
                scope = "" if ns.doc_scope is None else f" of scope {ns.doc_scope}"
                raise CLIError(f"--doc {ns.doc} has no telapa:table or telapa:figure "
                               f"blocks{scope}; {_scopes_of(text)}")
        except DocSyncError as err:
            raise CLIError(f"--doc-scope: {err}") from None
        except OSError as err:
            raise CLIError(f"--doc {ns.doc}: {err.strerror}") from None
        except UnicodeDecodeError as err:
            raise CLIError(f"--doc {ns.doc} is not UTF-8 text (byte {err.start})") from None
    try:
        check_destination(ns.out)  # before any work, as `telapa run` checks --out
        with report_lock(ns.out):  # one report at a time to --out, held through --doc
            _make_report(ns, console)
    except ReportError as err:
        raise CLIError(str(err)) from None
    except OSError as err:  # a full disk, a place that cannot be written
        where = f" ({err.filename})" if err.filename else ""
        raise CLIError(f"cannot write report directory {ns.out}: {err.strerror or err}{where}"
                       "; an earlier report there is kept whole") from None


def _make_report(ns: argparse.Namespace, console: Console) -> None:
    """Builds and writes the report, and fills ``--doc``; a progress line on stderr at
    each phase once the runs are loaded (`log_line`; a run that cannot be loaded stays a
    one-line error), the summary on stdout: ``updated C blocks of DOC; U of N
    unchanged``, where only the C blocks that changed were written."""
    from telapa.report.build import ReportError, build_document, load_archives, write_report
    from telapa.report.docsync import DocSyncError, fill, sync

    records = load_runs(ns.runs, skip_incomplete=ns.skip_incomplete, console=console)
    if ns.doc is not None and ns.doc_scope is None:  # before the report is built
        _check_unscoped(ns.doc, ns.doc.read_text(), records)
    bar = (None if ns.tau_from is None else
           load_runs(ns.tau_from, skip_incomplete=ns.skip_incomplete, console=console,
                     option="--tau-from"))
    try:
        log_line(f"loading the archives of {len(records)} runs")
        archives = load_archives(records, track=tracker(console, "loading archives"))
        doc = build_document(records, archives, gamma=ns.gamma, tau=ns.tau,
                             track=tracker(console, "plotting"), resample=ns.resample,
                             clips=ns.clips, tau_from=bar, on_phase=log_line)
        if ns.doc is not None:  # its ids checked against the report before it is written
            fill(ns.doc.read_text(), tables={t.id: "" for t in doc.tables()},
                 figures={f.id: "" for f in doc.figures()}, source=str(ns.doc),
                 scope=ns.doc_scope)
        log_line(f"writing the report to {ns.out}")
        out = write_report(doc, ns.out, sources=[r.path for r in records])
        if ns.doc is not None:
            log_line(f"filling {ns.doc}")
        synced = sync(ns.doc, out, ns.doc_scope) if ns.doc is not None else None
    except (RunDirError, ReportError, DocSyncError, FileNotFoundError, ValueError) as err:
        raise CLIError(str(err)) from None
    if ns.clips:  # a run without policies has a note in the report instead: said here too
        for note in _clip_notes(doc):
            console.print(f"--clips: {note}", style="yellow", markup=False, soft_wrap=True)
    stdout_console().print(
        f"report of {len(records)} runs: {out / 'index.html'} ({len(doc.tables())} tables, "
        f"{len(doc.figures())} figures; Markdown and CSV in {out / 'tables'})", markup=False)
    if synced is not None:
        stdout_console().print(f"updated {len(synced.changed)} blocks of {ns.doc}; "
                               f"{synced.unchanged} of {len(synced.ids)} unchanged",
                               markup=False)


def _scopes_of(text: str) -> str:
    """The scopes of a document's blocks, as ``--doc-scope`` takes them (`docsync`: a
    block ``SCOPE/ID`` is a report's of scope SCOPE, a block ``ID`` the unscoped one's)."""
    from telapa.report.docsync import BLOCK

    ids = [m["id"] for m in BLOCK.finditer(text)]
    scopes = list(dict.fromkeys(i.partition("/")[0] for i in ids if "/" in i))
    unscoped = any("/" not in i for i in ids)
    if not ids:
        return "it has no blocks at all"
    return (f"its scopes: {', '.join(scopes) or 'none'}"
            + ("; its blocks without a scope are filled when --doc-scope is left out"
               if unscoped else ""))


def _check_unscoped(doc: Path, text: str, records: Sequence) -> None:
    """Without ``--doc-scope`` a report fills the document's blocks without a scope: a
    `CLIError` naming the scopes to choose from where those blocks are plainly another
    report's, before the report is built. A block's id begins with its curriculum
    (``primary-main``) and, in a method's archive analysis, the method
    (``primary-telapa-probe-summary``): a curriculum or a method none of the runs has
    cannot be this report's."""
    from telapa.continual.registry import METHODS
    from telapa.report.build import slug
    from telapa.report.docsync import blocks

    curricula = {slug(r.curriculum) for r in records}
    methods = {slug(r.method) for r in records}
    known = sorted((slug(m) for m in METHODS), key=len, reverse=True)
    foreign = []
    for _, id_, _ in blocks(text):
        curriculum = next((c for c in curricula if id_.startswith(f"{c}-")), None)
        if curriculum is None:
            foreign.append(id_)
            continue
        rest = id_[len(curriculum) + 1:]
        method = next((m for m in known if rest.startswith(f"{m}-")), None)
        if method is not None and method not in methods:
            foreign.append(id_)
    if foreign:
        raise CLIError(f"--doc {doc}: its blocks without a scope are another report's (e.g. "
                       f"{foreign[0]}, {len(foreign)} in all, of curricula or methods these "
                       f"runs do not have): choose this report's with --doc-scope; "
                       f"{_scopes_of(text)}")


def _clip_notes(doc) -> list[str]:
    """The report's notes of the runs whose clips ``--clips`` could not make (a run that
    keeps no policies, such as an exported result, or a run that is not MiniGrid's)."""
    return [note for top in doc.sections for section in top.walk() for note in section.notes
            if note.startswith("No clips of ")]


@reads_results
def _cmd_inspect(ns: argparse.Namespace) -> None:
    """Every run of ``ns.run`` read before anything is shown, so that an error (a run not
    finished, an unknown --task) comes alone. Of a sweep or a --seeds folder, the runs of
    methods without archives (Finetune beside TeLAPA) are left out with one note, an error
    only when no run has archives; a run directory given itself keeps its error."""
    runs = expand_sweeps([ns.run])  # a sweep or a --seeds folder: each of its runs
    given = [Path(r) for r in runs] == [Path(ns.run)]
    inspections, without = [], []
    for run in runs:
        try:
            inspection = inspect_run(run)
            if ns.task is not None:
                inspection = inspection.only(ns.task)
        except NoArchivesError as err:
            if given:
                raise CLIError(str(err)) from None
            without.append(run)
            continue
        except (RunDirError, FileNotFoundError, ValueError) as err:
            raise CLIError(str(err)) from None
        inspections.append(inspection)
    keepers = f"only {', '.join(archive_methods())} runs keep them"
    if not inspections:
        raise CLIError(f"no run of {ns.run} keeps policy archives ({len(without)} run(s): "
                       f"{', '.join(without)}; {keepers})")
    if without:
        Console(stderr=True).print(
            f"skipping {len(without)} run(s) without policy archives: {', '.join(without)} "
            f"({keepers})", style="yellow", markup=False, soft_wrap=True)
    console = stdout_console()
    for inspection in inspections:
        for table in inspect_tables(inspection):
            print_table(console, table)


def _range(values: Sequence[float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def _embedding(inspection: Inspection) -> str:
    """What became of the run's embedding: its latest maintenance, or, where it was never
    maintained, the random encoder E_0 it started with (all TeLAPA-Static ever has)."""
    latent = inspection.latent
    if latent["version"] is None:
        if inspection.method == "telapa-static":
            return "fixed random embedding (E_0; TeLAPA-Static never updates it)"
        return "random embedding E_0 (not maintained yet: no updates)"
    return (f"embedding version {latent['version']} ({latent['updates']} updates, "
            f"normalizer {latent['normalizer_id']})")


def inspect_tables(inspection: Inspection) -> list[Table]:
    """Rich tables: one row per archive (foreign lineage: elites descended from other
    tasks' visits), then one row per transfer (its source and lineage)."""
    archives = Table(title=f"{inspection.path}: {inspection.method} seed {inspection.seed} "
                           f"({inspection.status}); {_embedding(inspection)}")
    for name in ("task", "env", "size", "d_min", "fitness\nmin/med/max",
                 "SR\nmin/med/max", "emb.\nversion", "foreign\nlineage", "elites\nof visits"):
        archives.add_column(name, justify="left" if name in ("task", "env") else "right",
                            no_wrap=True)
    for a in inspection.archives.itertuples(index=False):
        archives.add_row(
            a.task, a.env_id, str(a.size), f"{a.d_min:.4f}",
            _range((a.fitness_min, a.fitness_median, a.fitness_max)),
            _range((a.sr_min, a.sr_median, a.sr_max)), str(a.embedding_version),
            str(a.from_other_tasks), a.visits,
        )
    transfers = inspection.transfers
    crossing = int((transfers["lineage_tasks"] > 1).sum())
    lineage = Table(title=f"Transfers: {len(transfers)}, of which {crossing} started from an "
                          "elite whose lineage spans several tasks")
    for name in ("target", "source archive", "elite", "evaluated on", "lineage",
                 "probed (in window)", "SR0 -> SR final", "env steps"):
        lineage.add_column(name, justify="right" if name in ("elite", "env steps") else "left")
    for t in transfers.itertuples(index=False):
        lineage.add_row(f"{t.target} ←", t.source, t.elite, t.evaluated_on, t.lineage,
                        f"{t.candidates} ({t.in_window})", f"{t.sr0:.2f} -> {t.sr_final:.2f}",
                        f"{t.env_steps:,}")
    if len(inspection.tasks) > 1 and len(inspection.archives) != 1:
        return [archives, lineage]
    elites = Table(title=f"Elites of {', '.join(inspection.archives['task'])} (telapa play "
                         "--elite TASK:N plays one)")
    for name in ("elite", "evaluated on", "fitness", "SR"):
        elites.add_column(name, justify="left" if name != "fitness" and name != "SR"
                          else "right")
    for e in inspection.elites.itertuples(index=False):
        elites.add_row(e.elite, e.evaluated_on, f"{e.fitness:.3f}", f"{e.sr:.2f}")
    return [archives, lineage, elites]


def add_parsers(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="every table and figure of the paper from runs "
                                           "(HTML, Markdown, CSV, PNG, SVG)")
    report.add_argument("runs", nargs="+", metavar="RUN_DIR|SWEEP_DIR")
    report.add_argument("--out", required=True, help="report directory (replaced atomically)")
    report.add_argument("--skip-incomplete", action="store_true",
                        help="leave out missing or incomplete run dirs (with a warning)")
    report.add_argument("--gamma", type=_unit_interval, default=0.9,
                        help="source-competence threshold of the archive analysis")
    report.add_argument("--tau", type=_unit_interval, default=0.5,
                        help="target competence threshold of the archive analysis")
    report.add_argument("--doc", type=Path, metavar="FILE.md",
                        help="also fill this Markdown document's telapa:table and "
                             "telapa:figure blocks from the report")
    report.add_argument("--doc-scope", metavar="NAME",
                        help="fill only --doc's blocks whose ids read NAME/ID (another "
                             "report's blocks in the same document are kept)")
    add_tau_from_option(report)
    add_resample_option(report)
    report.add_argument("--clips", action="store_true",
                        help="also filmstrips of each transfer (the origin at the visit's "
                             "start above the policy at its end) and of a few elites per "
                             "archive, for one run of each method with archives (MiniGrid; "
                             "about a minute per run on 2 cores)")
    report.set_defaults(func=_cmd_report)

    inspect = sub.add_parser("inspect", help="a run's policy archives and transfer lineages")
    inspect.add_argument("run", metavar="RUN_DIR|SWEEP_DIR",
                         help="a run, or a sweep or --seeds folder (each of its runs)")
    inspect.add_argument("--task", metavar="TAG", help="only this task's archive and "
                         "transfers, and its elites (what telapa play --elite takes)")
    inspect.set_defaults(func=_cmd_inspect)
