"""Loading a hand-written TeLAPA run directory and flattening its transfer log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telapa.analysis.data import (
    candidates_frame,
    elites_with_tags,
    family_order,
    load_telapa_run,
)
from telapa.continual.rundir import RunDirError
from telapa.qd.export import ELITE_COLUMNS

VISITS = """visit,tag,task,env_id,cycle,budget,pre_sr,pre_return,post_sr,post_return,\
train_steps,start_global_step,end_global_step
0,A,A,MiniGrid-Empty-5x5-v0,0,100,0,0,0.5,0.3,100,0,100
1,B,B,MiniGrid-DoorKey-5x5-v0,0,100,0,0,0.25,0.1,100,100,200
2,A',A,MiniGrid-Empty-5x5-v0,1,100,0.5,0.3,1.0,0.9,100,200,300
"""
FINAL = """task,env_id,sr,mean_return
A,MiniGrid-Empty-5x5-v0,1.0,0.9
B,MiniGrid-DoorKey-5x5-v0,0.5,0.2
"""
ELITES = """task,archive_tag,slot,elite_id,parent_id,visit,fitness,sr,sigma,lineage,\
embedding_version,d_min,d_0,d_1
A,0,0,1,-1,0,0.4,0.5,0.05,0,2,0.1,0.0,1.0
A,0,1,7,1,2,0.9,1.0,0.05,0;1;2,2,0.1,1.0,1.0
B,1,0,4,1,1,0.2,0.25,0.05,,2,0.1,5.0,5.0
"""


def candidate(elite_id: int, task: int, fitness: float, y: float, z: list[float],
              lineage: list[int]) -> dict:
    return {"elite_id": elite_id, "source": 0, "tag": 0, "slot": 0, "task": task,
            "fitness": fitness, "descriptor": z, "lineage": lineage, "sr0": 0.0,
            "sr_final": y, "slope": 0.5, "auc": 0.25, "score": None, "in_window": False,
            "env_steps": 10}


LOG = [
    {"event": "illumination", "visit": 0, "visit_tag": "A", "archive_size": 1},
    {"event": "transfer", "visit": 1, "visit_tag": "B", "elite_id": 1, "index": 0,
     "lineage": [0], "candidates": [candidate(1, 0, 0.4, 0.25, [0.0, 1.0], [0])]},
    {"event": "maintenance", "visit": 1, "updated": True},
    {"event": "transfer", "visit": 2, "visit_tag": "A'", "elite_id": 4, "index": 1,
     "lineage": [0, 1], "candidates": [candidate(1, 0, 0.4, 0.5, [0.0, 1.0], [0]),
                                       candidate(4, 1, 0.2, 0.75, [5.0, 5.0], [0, 1])]},
]


def write_run(root: Path, *, status: str = "complete", elites: str | None = ELITES,
              log: object = LOG) -> Path:
    root.mkdir()
    (root / "run.json").write_text(json.dumps({
        "format": "telapa-run", "version": 1, "curriculum": "smoke", "method": "telapa",
        "seed": 3, "status": status}))
    (root / "visits.csv").write_text(VISITS)
    (root / "final.csv").write_text(FINAL)
    if elites is not None:
        (root / "elites.csv").write_text(elites)
    (root / "method_log.json").write_text(json.dumps(log))
    return root


def test_load_telapa_run(tmp_path: Path) -> None:
    run = load_telapa_run(write_run(tmp_path / "run"))
    assert run is not None
    assert (run.curriculum, run.method, run.seed) == ("smoke", "telapa", 3)
    assert run.label == "telapa seed 3"
    assert run.mean_final_sr == pytest.approx(0.75)  # (1.0 + 0.5) / 2
    assert [t["visit"] for t in run.transfers] == [1, 2]
    assert run.elites["lineage"].tolist() == [[0], [0, 1, 2], []]
    assert family_order(run.visits) == ["A", "B"]


def test_candidates_frame(tmp_path: Path) -> None:
    cands = candidates_frame(load_telapa_run(write_run(tmp_path / "run")))
    assert cands["target_visit"].tolist() == [1, 2, 2]
    assert cands["target"].tolist() == ["B", "A'", "A'"]
    assert cands["target_task"].tolist() == ["B", "A", "A"]
    assert cands["target_family"].tolist() == ["B", "A", "A"]
    assert cands["source_visit"].tolist() == [0, 0, 1]
    assert cands["source"].tolist() == ["A", "A", "B"]
    assert cands["source_family"].tolist() == ["A", "A", "B"]
    assert cands["elite_id"].tolist() == [1, 1, 4]
    assert cands["fitness"].tolist() == [0.4, 0.4, 0.2]
    assert cands["y"].tolist() == [0.25, 0.5, 0.75]  # y = sr_final
    assert cands["chosen"].tolist() == [True, False, True]  # event "index"
    assert cands["lineage"].tolist() == [[0], [0], [0, 1]]
    assert cands[["z_0", "z_1"]].to_numpy().tolist() == [[0, 1], [0, 1], [5, 5]]
    assert "z_2" not in cands


def test_elites_with_tags(tmp_path: Path) -> None:
    elites = elites_with_tags(load_telapa_run(write_run(tmp_path / "run")))
    assert elites["visit_tag"].tolist() == ["A", "A'", "B"]
    assert elites["family"].tolist() == ["A", "A", "B"]


def test_runs_without_archives_and_incomplete_runs(tmp_path: Path) -> None:
    scratch = write_run(tmp_path / "scratch", elites=None)
    manifest = json.loads((scratch / "run.json").read_text())
    (scratch / "run.json").write_text(json.dumps(manifest | {"method": "scratch"}))
    assert load_telapa_run(scratch) is None
    with pytest.raises(RunDirError, match="not complete"):
        load_telapa_run(write_run(tmp_path / "running", status="running"))


def test_transfers_with_no_candidates_give_an_empty_frame(tmp_path: Path) -> None:
    run = load_telapa_run(write_run(tmp_path / "run", log=LOG[:1]))
    cands = candidates_frame(run)
    assert cands.empty and {"target", "source", "y", "z_0", "z_1"} <= set(cands.columns)


@pytest.mark.parametrize(("name", "kwargs", "message"), [
    ("nolist", {"log": {"event": "transfer"}}, "method_log.json must hold a JSON list"),
    ("nodesc", {"log": [{**LOG[1], "candidates": [
        {k: v for k, v in LOG[1]["candidates"][0].items() if k != "descriptor"}]}]},
     r"method_log.json: transfer event 0, candidate 0 is missing \['descriptor'\]"),
    ("dim", {"log": [{**LOG[1], "candidates": [
        {**LOG[1]["candidates"][0], "descriptor": [1.0, 2.0, 3.0]}]}]},
     "descriptor has 3 values, elites.csv has 2"),
    ("visit", {"log": [{**LOG[1], "candidates": [{**LOG[1]["candidates"][0], "task": 9}]}]},
     r"visit indices \[9, 0\] not in visits.csv"),
    ("columns", {"elites": ELITES.replace("fitness", "fit")},
     r"elites.csv is missing column\(s\) \['fitness'\]"),
    ("empty", {"elites": ""}, "elites.csv is not a readable CSV table"),
])
def test_malformed_content_names_the_file(
    tmp_path: Path, name: str, kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_telapa_run(write_run(tmp_path / name, **kwargs))


def test_corrupt_json_names_the_file(tmp_path: Path) -> None:
    root = write_run(tmp_path / "run")
    (root / "method_log.json").write_text("[{")
    with pytest.raises(ValueError, match="method_log.json is corrupt"):
        load_telapa_run(root)


def test_synthetic_elites_follow_the_exporter_layout() -> None:
    header = ELITES.splitlines()[0].split(",")
    assert header == [*ELITE_COLUMNS, "d_0", "d_1"]
