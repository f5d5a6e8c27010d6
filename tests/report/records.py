"""Synthetic `RunRecord`s for unit tests of the report tables and curves."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from telapa.report.results import RunRecord

TAGS = (("A", "A", 0), ("B", "B", 0), ("A'", "A", 1))
BUDGET = 1_000_000


def record(method: str, seed: int, srs: list[list[float]], *, wall_s: float = 100.0,
           method_phase_s: dict[str, float] | None = None, env_id: str | None = None,
           graded: bool = False) -> RunRecord:
    """A run of three visits (A B A') of `BUDGET` steps; ``srs[v]`` are the SRs evaluated at
    steps 0, BUDGET/2 and BUDGET of visit v (the last one is the visit's post SR). Tasks
    run ``env-<task>``, or all ``env_id``; ``graded``: its SRs are SR~ (`RunRecord.graded`)."""
    visits, curve = [], []
    for v, ((tag, task, cycle), values) in enumerate(zip(TAGS, srs, strict=True)):
        start = v * BUDGET
        visits.append({"visit": v, "tag": tag, "task": task, "env_id": env_id or f"env-{task}",
                       "cycle": cycle, "budget": BUDGET, "pre_sr": values[0],
                       "post_sr": values[-1], "train_steps": BUDGET, "start_global_step": start,
                       "end_global_step": start + BUDGET})
        for step, sr in zip((0, BUDGET // 2, BUDGET), values, strict=True):
            curve.append({"visit": v, "tag": tag, "task": task, "step": step,
                          "global_step": start + step, "sr": sr, "mean_return": sr})
    final = pd.DataFrame({"task": ["A", "B"], "sr": [srs[2][-1], srs[1][-1]]})
    accounting = {"wall_s": wall_s, "extra_env_steps": 0, "peak_rss_bytes": 1e9,
                  "method_state_bytes": 0, "run_dir_bytes": 1e6,
                  "method_phase_s": method_phase_s or {}}
    return RunRecord(Path(f"/runs/{method}-{seed}"), "toy", method, seed, 0.2,
                     {"visits": pd.DataFrame(visits), "curve": pd.DataFrame(curve),
                      "final": final}, accounting, graded=graded)
