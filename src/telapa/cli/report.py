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
            if not blocks(ns.doc.read_text(), ns.doc_scope):
                scope = "" if ns.doc_scope is None else f" of scope {ns.doc_scope}"
                raise CLIError(f"--doc {ns.doc} has no telapa:table or telapa:figure "
                               f"blocks{scope} (see telapa/report/docsync.py)")
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
    from telapa.report.build import ReportError, build_document, load_archives, write_report
    from telapa.report.docsync import DocSyncError, fill, sync_document

    records = load_runs(ns.runs, skip_incomplete=ns.skip_incomplete, console=console)
    bar = (None if ns.tau_from is None else
           load_runs(ns.tau_from, skip_incomplete=ns.skip_incomplete, console=console))
    try:
        archives = load_archives(records, track=tracker(console, "loading archives"))
        doc = build_document(records, archives, gamma=ns.gamma, tau=ns.tau,
                             track=tracker(console, "plotting"), resample=ns.resample,
                             clips=ns.clips, tau_from=bar)
        if ns.doc is not None:  # its ids checked against the report before it is written
            fill(ns.doc.read_text(), tables={t.id: "" for t in doc.tables()},
                 figures={f.id: "" for f in doc.figures()}, source=str(ns.doc),
                 scope=ns.doc_scope)
        out = write_report(doc, ns.out, sources=[r.path for r in records])
        filled = sync_document(ns.doc, out, ns.doc_scope) if ns.doc is not None else []
    except (RunDirError, ReportError, DocSyncError, FileNotFoundError, ValueError) as err:
        raise CLIError(str(err)) from None
    stdout_console().print(
        f"report of {len(records)} runs: {out / 'index.html'} ({len(doc.tables())} tables, "
        f"{len(doc.figures())} figures; Markdown and CSV in {out / 'tables'})", markup=False)
    if ns.doc is not None:
        stdout_console().print(f"updated {len(filled)} blocks of {ns.doc}", markup=False)


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
            console.print(table)


def _range(values: Sequence[float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def inspect_tables(inspection: Inspection) -> list[Table]:
    """Rich tables: one row per archive (foreign lineage: elites descended from other
    tasks' visits), then one row per transfer (its source and lineage)."""
    latent = inspection.latent
    archives = Table(title=f"{inspection.path}: {inspection.method} seed {inspection.seed} "
                           f"({inspection.status}); embedding version {latent['version']} "
                           f"({latent['updates']} updates, normalizer {latent['normalizer_id']})")
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
