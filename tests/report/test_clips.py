"""The report's filmstrips (`telapa.report.clips`): frames chosen by hand, elites spread
as candidate pooling spreads them, and a run that keeps no policies named in a note."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd

from telapa.play import Episode
from telapa.report.build import build_document, load_archives
from telapa.report.clips import filmstrip, spread_elites
from telapa.report.load import load_records


def test_a_filmstrip_takes_evenly_spaced_frames_with_the_first_and_the_last():
    frames = np.stack([np.full((2, 3, 3), t, np.uint8) for t in range(11)])  # T = 10
    strip = filmstrip(Episode(frames, np.zeros(10, np.float32)), frames=6)
    # steps round(i * 10 / 5) = 0, 2, 4, 6, 8, 10, each 3 px wide, 1 px white between
    assert strip.shape == (2, 6 * 3 + 5, 3)
    assert [int(strip[0, 4 * i, 0]) for i in range(6)] == [0, 2, 4, 6, 8, 10]
    assert (strip[:, 3] == 255).all()
    short = filmstrip(Episode(frames[:3], np.zeros(2, np.float32)), frames=6)
    assert short.shape[1] == 3 * 3 + 2  # steps 0, 1, 2 only


def test_elites_are_spread_from_the_fittest_by_farthest_points():
    elites = pd.DataFrame({"fitness": [0.1, 0.9, 0.5, 0.2],
                           "d_0": [0.0, 0.0, 1.0, 3.0], "d_1": [0.1, 0.0, 0.0, 0.0]})
    # the fittest (row 1 at 0), then the farthest from it (row 3 at 3), then from both:
    # row 2 (min distance 1.0) over row 0 (0.1)
    assert spread_elites(elites, k=3).index.tolist() == [1, 3, 2]
    assert spread_elites(elites.iloc[:2], k=4).index.tolist() == [1, 0]


def test_a_run_without_kept_policies_gets_a_note_not_an_error(tmp_path, quick_runs):
    """E.g. a sweep export, or a run made before runs kept their visits' policies."""
    run = tmp_path / "run"
    shutil.copytree(quick_runs["telapa", 0], run)
    shutil.rmtree(run / "policies")
    records = load_records([run])
    doc = build_document(records, load_archives(records), clips=True)
    behaviour = next(s for s in doc.sections[0].walk() if s.id.endswith("behaviour"))
    assert not behaviour.figures
    assert "No clips of" in behaviour.notes[0] and "kept no policy" in behaviour.notes[0]
