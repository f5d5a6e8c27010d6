"""Behaviour in the report (``telapa report --clips``): what the policies the tables argue
about actually do, as filmstrips of `telapa play`'s episodes.

For one run of each method with archives (its lowest seed; MiniGrid runs, whose run
directory keeps its visits' policies and its last checkpoint):

* **a transfer** (every visit TeLAPA started from a transferred elite or, for
  TeLAPA-Fresh, a fresh network): two rows of `FRAMES` frames evenly spaced over one
  episode on the target task, the policy the visit started from (the chosen origin) above
  the policy it ended with, each row titled with its return and whether it succeeded;
* **a task's archive**: one row per elite of up to `ELITES` elites chosen as candidate
  pooling chooses (the fittest, then greedy farthest-point in the latent descriptors of
  ``elites.csv``), so the rows show behaviours the latent space separates.

Every episode is the first of `telapa.play.play` with the run's seed, so a row
is what ``telapa play`` shows. Cost: one episode per row on the run's agents after a
resume from its last checkpoint; on 2 cores about a minute per run for the quick preset
(docs/running.md, "Reports and documents").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from telapa.analysis.data import descriptor_columns
from telapa.play import Episode, load_policy, open_finished, play, success
from telapa.report.figures import ReportFigure, render
from telapa.report.inspection import elite_label

FRAMES = 6
"""Frames per row, evenly spaced from an episode's start to its end."""
ELITES = 4
"""Elites shown per archive."""
TILE_PX = 16
"""Pixels per MiniGrid cell in the filmstrips (Farama draws 32)."""


def filmstrip(episode: Episode, frames: int = FRAMES) -> np.ndarray:
    """``frames`` frames of ``episode`` side by side, at steps ``round(i * T / (n - 1))``
    (the first and the last included; fewer for a shorter episode), one pixel apart."""
    steps = sorted({round(i * episode.length / max(frames - 1, 1)) for i in range(frames)})
    chosen = [episode.frames[t] for t in steps]
    gap = np.full((chosen[0].shape[0], 1, 3), 255, np.uint8)
    return np.concatenate([x for f in chosen for x in (f, gap)][:-1], axis=1)


def spread_elites(elites: pd.DataFrame, k: int = ELITES) -> pd.DataFrame:
    """Up to ``k`` rows of ``elites`` (one archive): the fittest first, then each next the
    one farthest (Euclidean, in the ``d_*`` descriptor columns) from those chosen."""
    z = elites[descriptor_columns(elites, "d")].to_numpy(float)
    chosen = [int(np.argmax(elites["fitness"].to_numpy(float)))]
    while len(chosen) < min(k, len(elites)):
        distance = np.min(np.linalg.norm(z[:, None] - z[chosen][None], axis=-1), axis=1)
        distance[chosen] = -1.0
        chosen.append(int(np.argmax(distance)))
    return elites.iloc[chosen]


def _strip_figure(rows: Sequence[tuple[str, np.ndarray]], title: str) -> Figure:
    height = sum(r.shape[0] for _, r in rows) / 100 + 0.45 * len(rows)
    width = max(r.shape[1] for _, r in rows) / 100
    fig = Figure(figsize=(max(width, 4.0), height))
    for i, (label, strip) in enumerate(rows):
        ax = fig.add_subplot(len(rows), 1, i + 1)
        ax.imshow(strip, interpolation="nearest")
        ax.set_title(label, fontsize=8, loc="left")
        ax.set_axis_off()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def _row(label: str, agent, episode: Episode) -> tuple[str, np.ndarray]:
    outcome = "success" if success(agent, episode) else "no success"
    return (f"{label}: return {episode.ret:.2f} in {episode.length} steps, {outcome}",
            filmstrip(episode))


def run_clips(path: str | Path, *, prefix: str) -> list[ReportFigure]:
    """The transfer and archive filmstrips of the run in ``path`` (module docstring);
    figure ids start with ``prefix``."""
    run = open_finished(path)
    seed = run.spec.seed
    figures: list[ReportFigure] = []
    log = run.dir.method_log() if run.dir.method_log_path.is_file() else []
    tags = {v.index: v.tag for v in run.visits}
    archives = _archive_tasks(run)
    for event in (e for e in log if e.get("event") == "transfer"):
        visit = str(event["visit"])
        start = load_policy(run, visit=visit, when="start")
        end = load_policy(run, visit=visit)
        origin = ("a fresh network" if event.get("origin") == "fresh"
                  else f"elite {elite_label(int(event['elite_id']), archives)}")
        rows = [_row(f"start ({origin})", start.agent,
                     play(start, episodes=1, seed=seed, tile_size=TILE_PX)[0]),
                _row("end of the visit", end.agent,
                     play(end, episodes=1, seed=seed, tile_size=TILE_PX)[0])]
        tag = tags[event["visit"]]
        figures.append(render(
            _strip_figure(rows, f"{run.spec.method} seed {seed}: transfer into {tag} "
                                f"({start.agent.spec.env_id})"),
            figure_id=f"{prefix}-transfer-{event['visit']:02d}",
            title=f"Transfer into {tag}",
            caption=f"{FRAMES} frames of one episode (seed {seed}) on {tag}: the policy the "
                    "visit started from above the one it ended with."))
    elites = run.dir.elites() if run.dir.has_elites() else pd.DataFrame()
    for task, group in elites.groupby("task", sort=False):
        rows = []
        for elite in spread_elites(group).itertuples(index=False):
            label = elite_label(int(elite.elite_id), archives)
            policy = load_policy(run, elite=label)
            rows.append(_row(f"elite {label} (fitness {elite.fitness:.2f})", policy.agent,
                             play(policy, episodes=1, seed=seed, tile_size=TILE_PX)[0]))
        figures.append(render(
            _strip_figure(rows, f"{run.spec.method} seed {seed}: elites of {task}"),
            figure_id=f"{prefix}-elites-{task}", title=f"Elites of {task}",
            caption=f"Up to {ELITES} elites of the {task} archive, the fittest and then the "
                    "farthest apart in the latent space, each playing one episode on "
                    f"{task} (seed {seed})."))
    return figures


def _archive_tasks(run) -> dict[int, str]:
    archives_of = getattr(run.method, "archives", None)  # TeLAPA's: its state's archives
    archives = archives_of(run.state.method) if archives_of is not None else {}
    return {int(a.tag): task for task, a in archives.items()}


__all__ = ["ELITES", "FRAMES", "TILE_PX", "filmstrip", "run_clips", "spread_elites"]
