"""``telapa demo``: the primary curriculum on the quick preset, scored in one table.

Runs Finetune, Scratch-Reuse and TeLAPA on ``primary`` with seed 0, then prints the
tables of ``telapa metrics`` (tau_T = tau_min: the demo has no Scratch runs).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from rich.console import Console

from telapa.cli.common import (
    CLIError,
    add_import_option,
    print_table,
    seed_int,
    stdout_console,
)
from telapa.cli.run import build_spec, execute, metrics_tables
from telapa.continual.rundir import RunDirError, claim_new_dir
from telapa.continual.runner import ContinualRun
from telapa.report.results import load_run, score

DEMO_METHODS = ("finetune", "scratch-reuse", "telapa")


def _cmd_demo(ns: argparse.Namespace) -> None:
    out = Path(ns.out or Path("runs") / f"demo-{datetime.now():%Y%m%d-%H%M%S}")
    console = Console(stderr=True)
    specs = {m: build_spec(ns.curriculum, m, ns.seed, ns.preset, imports=ns.imports)
             for m in DEMO_METHODS}
    # every output is checked before any work (existing ones first, so a refusal leaves
    # nothing new behind)
    for method in sorted(DEMO_METHODS, key=lambda m: not (out / m).exists()):
        try:
            claim_new_dir(out / method, resume_hint=f"resume it with `telapa run --resume "
                                                    f"{out / method}`")
        except RunDirError as err:
            raise CLIError(str(err)) from None
    paths = []
    for method, spec in specs.items():
        console.rule(f"{method} on {spec.curriculum.name} ({spec.preset} preset)")
        path = out / method
        run = execute(lambda p, spec=spec, path=path: ContinualRun.start(
            spec, path, p), console, path)
        paths.append(run.dir.path)
    results = score(load_run(p) for p in paths)
    for result in results.values():
        for table in metrics_tables(result):
            print_table(stdout_console(), table)
    stdout_console().print(f"runs: {out}  (score them again with `telapa metrics {out}/*`)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo", help="Finetune, Scratch-Reuse and TeLAPA on the primary curriculum (quick)"
    )
    demo.add_argument("--curriculum", default="primary")
    demo.add_argument("--preset", help="run preset (default: the curriculum's env "
                                           "family's quick preset)")
    demo.add_argument("--seed", type=seed_int, default=0, help="0 <= S < 2^32")
    demo.add_argument("--out", help="folder for the runs (default: runs/demo-<time>)")
    add_import_option(demo)
    demo.set_defaults(func=_cmd_demo)
