"""TeLAPA in the continual loop on the smoke curriculum with tiny budgets: archives,
transfers, lineage and maintenance are recorded, and a crashed run resumes exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_runs import quick_phases

from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config, parse_run_config
from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec

from .crash import Crash, CrashAfter
from .events import tensorboard_scalars

TINY = Path(__file__).with_name("tiny_run.yaml")


def _spec(method: str = "telapa") -> RunSpec:
    return RunSpec(load_curriculum("smoke"), method, 1, load_run_config(TINY), "tiny")


@pytest.fixture(scope="module")
def telapa_run(quick_run):
    """The shared TeLAPA smoke run of seed 1 (tests/conftest.py, `quick_run`: the spec of
    `_spec`) and its metrics."""
    path = quick_run("telapa", 1)
    return path, json.loads((path / "metrics.json").read_text())


def test_telapa_phases_report_progress(telapa_run):
    seen = quick_phases(telapa_run[0])
    names = [name for name, _, _ in seen]
    # illumination after every visit, probes on every visit after the first, maintenance
    assert {"illumination", "probes", "maintenance"} <= set(names)
    illumination = [(d, t) for n, d, t in seen if n == "illumination"]
    assert illumination[-1][0] == illumination[-1][1] == 6  # tiny preset: 6 iterations
    assert names.count("maintenance") == 2 * 4  # start and end of each of the 4 visits


def test_telapa_records_archives_transfers_and_maintenance(telapa_run):
    path, _ = telapa_run
    log = json.loads((path / "method_log.json").read_text())
    events = [(e["event"], e["visit"]) for e in log]
    # visit 0 trains from scratch; every later visit starts from a transferred elite
    assert [v for e, v in events if e == "transfer"] == [1, 2, 3]
    assert [v for e, v in events if e == "illumination"] == [0, 1, 2, 3]
    assert [v for e, v in events if e == "maintenance"] == [0, 1, 2, 3]
    transfers = [e for e in log if e["event"] == "transfer"]
    elites = pd.read_csv(path / "elites.csv")
    assert set(elites["task"]) == {"A", "B"}
    assert (elites["embedding_version"] == 4).all()
    # every archive holds several competent (SR >= the gate of the visit that added them),
    # behaviourally distinct (pairwise distinct descriptors) elites
    gates = {e["visit"]: e["gate"] for e in log if e["event"] == "illumination"}
    competent = elites[elites["sr"] >= elites["visit"].map(gates)]
    for task, group in competent.groupby("task"):
        z = group[[f"d_{j}" for j in range(8)]].to_numpy()
        gaps = np.linalg.norm(z[:, None] - z[None], axis=-1)[np.triu_indices(len(z), 1)]
        assert len(z) >= 2 and gaps.min() > 0, task
    for t in transfers:
        assert len(t["candidates"]) <= 2 and t["elite_id"] >= 0
        assert t["lineage"] and max(t["lineage"]) < t["visit"]
        chosen = t["candidates"][t["index"]]
        assert chosen["elite_id"] == t["elite_id"] and chosen["lineage"] == t["lineage"]
        for c in t["candidates"]:
            assert len(c["descriptor"]) == 8 and c["lineage"] and max(c["lineage"]) < t["visit"]
    # the bank reaches min_bank_sets (4) within the first visit: 9 sets per visit
    maintenance = [e for e in log if e["event"] == "maintenance"]
    assert maintenance[0]["updated"] and maintenance[-1]["version"] == 4
    acc = json.loads((path / "accounting.json").read_text())
    steps = sum(e["env_steps"] for e in log if e["event"] in ("transfer", "illumination"))
    assert acc["extra_env_steps"] == steps > 0
    assert {"few_shot", "illumination", "maintenance"} <= set(acc["method_phase_s"])
    assert acc["method_state_bytes"] > 0


def test_tensorboard_holds_the_curves_losses_timings_and_archive_sizes(telapa_run):
    path, metrics = telapa_run
    tb = tensorboard_scalars(path / "tb")
    curve = pd.read_csv(path / "curve.csv")
    visits = pd.read_csv(path / "visits.csv")
    for tag, rows in curve.groupby("tag", sort=False):  # every visit on the global axis
        logged = tb[f"sr/{tag.replace(chr(39), 'p')}"]
        assert [s for s, _ in logged] == rows["global_step"].tolist()
        np.testing.assert_allclose([v for _, v in logged], rows["sr"], rtol=1e-6)
    train = pd.concat([pd.read_csv(f) for f in sorted((path / "train").iterdir())])
    assert [s for s, _ in tb["train/pg_loss"]] == train["global_step"].tolist()
    np.testing.assert_allclose([v for _, v in tb["train/pg_loss"]], train["pg_loss"],
                               rtol=1e-5)
    log = json.loads((path / "method_log.json").read_text())
    sizes = [(int(visits["end_global_step"][e["visit"]]), e["archive_size"])
             for e in log if e["event"] == "illumination"]
    assert tb["method/illumination/archive_size"] == sizes
    assert "method/transfer/slot" not in tb and "method/transfer/env_steps" in tb
    # after every phase: start, 8 chunks (4096 / 512 steps) and end of each visit, final
    evaluating = [v for _, v in tb["time/eval"]]
    assert len(evaluating) == len(visits) * (2 + 4096 // 512) + 1
    for name in ("time/eval", "time/train", "time/method/illumination"):
        spent = [v for _, v in tb[name]]
        assert spent == sorted(spent) and spent[-1] > 0, name
    final = pd.read_csv(path / "final.csv")
    assert [v for _, v in tb["final/sr/A"]] == pytest.approx([final["sr"][0]])
    assert tb["metrics/mean_sr"][0][1] == pytest.approx(metrics["mean_sr"])


def test_telapa_resumes_exactly_after_a_crash(telapa_run, tmp_path):
    path, metrics = telapa_run
    crashed = tmp_path / "crashed"
    # 8 chunks per visit (one progress report each): crash in the middle of visit 2
    # (after two archives exist)
    with pytest.raises(Crash):
        ContinualRun.start(_spec(), crashed, CrashAfter(20)).run()
    resumed = ContinualRun.resume(crashed).run()
    assert json.dumps(resumed) == json.dumps(metrics)
    for name, table in RunDir(path).tables().items():
        pd.testing.assert_frame_equal(RunDir(crashed).tables()[name], table, obj=name)
    a = json.loads((path / "method_log.json").read_text())
    b = json.loads((crashed / "method_log.json").read_text())
    strip = {"wall_s"}
    assert [{k: v for k, v in e.items() if k not in strip} for e in a] == [
        {k: v for k, v in e.items() if k not in strip} for e in b]


def test_telapa_static_with_cross_archive_injection(telapa_run, tmp_path, monkeypatch):
    """TeLAPA-Static never maintains the latent space; with p_inj > 0 illumination gets
    the other tasks' archives as its injection pool. Its first archive lives in the same
    units as TeLAPA's: both fit N_0 on the first task's evaluations before illuminating."""
    pools = []
    from telapa.continual.methods.telapa import method as telapa_method

    real = telapa_method.Illumination

    def spy(*args, pool=None, **kwargs):
        pools.append(pool)
        return real(*args, pool=pool, **kwargs)

    monkeypatch.setattr(telapa_method, "Illumination", spy)
    data = load_run_config(TINY).model_dump()
    data["methods"]["telapa"]["qd"]["injection"]["p_inj"] = 0.5
    spec = RunSpec(load_curriculum("smoke"), "telapa-static", 1,
                   parse_run_config(data), "tiny")
    ContinualRun.start(spec, tmp_path / "inj").run()
    # visit 0 has no other archive; visit 1 (B) draws from A's; revisits from the other
    assert pools[0] is None and all(p is not None for p in pools[1:])
    assert len(pools) == 4
    log = json.loads((tmp_path / "inj" / "method_log.json").read_text())
    assert not [e for e in log if e["event"] == "maintenance"]
    assert [e["visit"] for e in log if e["event"] == "transfer"] == [1, 2, 3]
    # one normalizer fit, at visit 0, identical to full TeLAPA's (same seed, same E_0, same
    # banked evaluations), and so the same first archive (visit 0 has no injection pool)
    full = json.loads((telapa_run[0] / "method_log.json").read_text())
    fits = [e for e in log if e["event"] == "normalizer"]
    assert len(fits) == 1 and fits[0]["visit"] == 0 and fits[0]["bank_sets"] >= 2
    assert [e for e in full if e["event"] == "normalizer"] == fits

    def first(events):
        (e,) = [e for e in events if e["event"] == "illumination" and e["visit"] == 0]
        return {k: v for k, v in e.items() if k != "wall_s"}

    assert first(log) == first(full)
    # each illumination counts its candidates and those of injected parents: none at
    # visit 0 (no pool), some later (p_inj = 0.5), an accepted one only among proposed
    counts = [(e["candidates"], e["accepted"], e["injected"], e["injected_accepted"])
              for e in log if e["event"] == "illumination"]
    assert len(counts) == 4 and counts[0][2] == 0
    assert sum(c[2] for c in counts[1:]) > 0
    assert all(c[1] <= c[0] and c[3] <= min(c[1], c[2]) for c in counts)
    elites = pd.read_csv(tmp_path / "inj" / "elites.csv")
    assert (elites["embedding_version"] == 0).all()


def test_telapa_encoder_is_drawn_from_the_run_seed(tmp_path):
    """E_0 (TeLAPA-Static's fixed encoder) differs between seeds and repeats within one."""
    import jax

    def encoder(seed, name):
        spec = RunSpec(load_curriculum("smoke"), "telapa-static", seed, load_run_config(TINY),
                       "tiny")
        run = ContinualRun(spec, RunDir(tmp_path / name))
        return jax.tree.leaves(run.state.method.parts["embedding"].encoder)

    one, again, two = encoder(1, "a"), encoder(1, "b"), encoder(2, "c")
    assert all(np.array_equal(x, y) for x, y in zip(one, again, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(one, two, strict=True))


def test_a_seed_batch_probes_its_seeds_together_as_each_alone(telapa_run, tmp_path,
                                                              monkeypatch):
    """Two seeds of a batch reach the first transfer (visit 1's start): their visit-0
    illuminations run in lockstep (`illuminate_seeds`), their maintenance's boundary
    updates as one program (`maintain_seeds`), their K_pool probes as one batch
    (`select_transfer_origins`): the per-seed hooks' lockstep requests, answered
    together; and seed 1's illumination, maintenance and transfer records are the ones
    its separate run made."""
    from telapa.continual.batch import SeedBatch
    from telapa.continual.methods.telapa import illumination, maintenance, transfer

    batched, lockstep, maintained = [], [], []
    real = transfer.select_transfer_origins
    real_illuminate = illumination.illuminate_seeds

    def spy(*args, **kwargs):
        batched.append(len(args[1]))
        return real(*args, **kwargs)

    def spy_illuminate(agent, runs):
        lockstep.append(len(runs))
        return real_illuminate(agent, runs)

    real_maintain = maintenance.maintain_seeds

    def spy_maintain(embeddings, *args, **kwargs):
        maintained.append(len(embeddings))
        return real_maintain(embeddings, *args, **kwargs)

    monkeypatch.setattr(transfer, "select_transfer_origins", spy)
    monkeypatch.setattr(illumination, "illuminate_seeds", spy_illuminate)
    monkeypatch.setattr(maintenance, "maintain_seeds", spy_maintain)
    both = SeedBatch.start(_spec(), [1, 2], [tmp_path / "s1", tmp_path / "s2"])
    try:
        while both.runs[0].state.next_phase <= both.runs[0].phases.index(
                next(p for p in both.runs[0].phases if p.kind == "start" and p.visit == 1)):
            both.step()
    finally:
        for run in both.runs:
            run.dir.unlock()
    # on CPU `illuminate_seeds` then runs the two seeds one after the other (its calls of 1)
    assert batched == [2] and lockstep[0] == 2 and maintained == [2]
    path, _ = telapa_run
    log = json.loads((path / "method_log.json").read_text())
    keys = ("updated", "version", "bank_sets")
    assert [{k: e[k] for k in keys} for e in both.runs[0].state.method.log
            if e["event"] == "maintenance"] == [{k: e[k] for k in keys} for e in log
                                               if e["event"] == "maintenance"
                                               and e["visit"] == 0]
    keys = ("archive_size", "d_min", "gate", "env_steps")
    illuminated = [{k: e[k] for k in keys} for e in both.runs[0].state.method.log
                   if e["event"] == "illumination"]
    assert illuminated == [{k: e[k] for k in keys} for e in log
                           if e["event"] == "illumination" and e["visit"] == 0]
    alone = [e for e in json.loads((path / "method_log.json").read_text())
             if e["event"] == "transfer" and e["visit"] == 1]
    together = [e for e in both.runs[0].state.method.log if e["event"] == "transfer"]
    keys = ("elite_id", "index", "env_steps")
    assert [{k: e[k] for k in keys} for e in together] == [{k: e[k] for k in keys}
                                                          for e in alone]
    assert [(c["elite_id"], c["sr0"], c["sr_final"]) for c in together[0]["candidates"]] == \
        [(c["elite_id"], c["sr0"], c["sr_final"]) for c in alone[0]["candidates"]]
