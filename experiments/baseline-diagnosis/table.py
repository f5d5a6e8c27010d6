"""The baseline diagnosis's table (docs/reproduction.md, "Why the paper's baselines differ
from ours"), from the committed evaluation of its final policies:

    python experiments/baseline-diagnosis/table.py results/baseline-diagnosis-eval.csv \
        --doc docs/reproduction.md

One row per task and mission (shown, as ours; hidden, as SB3's ``ImgObsWrapper``), one
column per way of measuring the final policy: the visit's own last evaluation
(``post_sr``: sampled, 50 episodes, as every table of the study) and the same policy on
``episodes`` fresh episodes, sampled and greedy (argmax). Each cell reads
``mean (seed values)``; the last column is what the paper reports for its Scratch on that
task after a whole visit (its Table "Revisit SR": A' 0.258, B' 0.480).

``--doc`` fills the document's ``diagnosis/evaluation`` block (`telapa.report.docsync`);
``tests/test_reproduction_doc.py`` checks that the committed block is this table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from telapa.io import write_text_atomic
from telapa.report.docsync import fill

BLOCK = "evaluation"
SCOPE = "diagnosis"
"""The document block this table fills: ``diagnosis/evaluation``."""
PAPER_SCRATCH = {"MiniGrid-GoToObject-8x8-N2-v0": ("A", 0.258),
                 "MiniGrid-Fetch-6x6-N2-v0": ("B", 0.480)}
"""Task letter and the paper's Scratch SR after a whole visit (A', B'), per env id."""
COLUMNS = {"post_sr": "last evaluation, sampled (50)", "sampled_sr": "sampled",
           "greedy_sr": "greedy (argmax)"}
REQUIRED = ("task", "mission", "seed", "episodes", *COLUMNS)


def _cell(values: pd.Series) -> str:
    return f"{values.mean():.3f} ({', '.join(f'{v:.2f}' for v in values)})"


def evaluation_table(frame: pd.DataFrame) -> str:
    """The Markdown table of an ``evaluate.py`` CSV (module docstring). Raises ValueError
    naming the missing columns, an unknown task, or mixed episode counts."""
    missing = [c for c in REQUIRED if c not in frame]
    if missing:
        raise ValueError(f"evaluation CSV is missing column(s) {missing}")
    unknown = sorted(set(frame["task"]) - set(PAPER_SCRATCH))
    if unknown:
        raise ValueError(f"evaluation CSV has task(s) {unknown}; expected "
                         f"{sorted(PAPER_SCRATCH)}")
    episodes = sorted(set(frame["episodes"]))
    if len(episodes) != 1:
        raise ValueError(f"evaluation CSV mixes episode counts {episodes}")
    n = episodes[0]
    head = ["task", "mission", "seeds", COLUMNS["post_sr"], f"sampled ({n})",
            f"greedy, argmax ({n})", "the paper's Scratch"]
    lines = ["| " + " | ".join(head) + " |",
             "|:---|:---|---:|---:|---:|---:|---:|"]
    order = {"task": {task: i for i, task in enumerate(PAPER_SCRATCH)},
             "mission": {"shown": 0, "hidden": 1}}
    frame = frame.sort_values(["task", "mission", "seed"],
                              key=lambda c: c.map(order[c.name]) if c.name in order else c)
    for (task, mission), rows in frame.groupby(["task", "mission"], sort=False):
        letter, paper = PAPER_SCRATCH[task]
        cells = [_cell(rows[c]) for c in COLUMNS]
        lines.append(f"| {letter} ({task}) | {mission} | {len(rows)} | "
                     + " | ".join(cells) + f" | {paper:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="evaluate.py's CSV")
    parser.add_argument("--doc", type=Path, help="fill this document's diagnosis/evaluation block")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        parser.error(f"{args.csv} is not a file")
    table = evaluation_table(pd.read_csv(args.csv))
    print(table, end="")
    if args.doc is not None:
        text = args.doc.read_text()
        write_text_atomic(args.doc, fill(text, tables={BLOCK: table}, figures={},
                                         source=str(args.doc), scope=SCOPE))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
