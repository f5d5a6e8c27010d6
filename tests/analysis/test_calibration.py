"""The calibration's preset choice follows its written rule (docs/assumptions.md)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from telapa.analysis.calibration import choose, main, verdict


def _curves(final: dict[str, list[float]], early: float = 0.0) -> pd.DataFrame:
    """Two evaluations per task and seed: ``early`` at step 0, then the final SR."""
    rows = []
    for task, values in final.items():
        for seed, sr in enumerate(values):
            rows += [dict(seed=seed, task=task, step=0, sr=early),
                     dict(seed=seed, task=task, step=10, sr=sr)]
    return pd.DataFrame(rows)


PAPER_SHAPE = {"A": [0.5] * 3, "B": [0.5] * 3, "C": [1.0, 0.95, 0.9], "D": [0.0, 0.1, 0.0],
               "E": [0.0, 1.0, 0.0]}


def test_verdict_reads_final_sr_and_auc_by_hand():
    v = verdict(preset="p", grid_codes="raw", curves=_curves(PAPER_SHAPE, early=0.2), cost=1.0)
    assert v.final["C"] == [1.0, 0.95, 0.9] and v.c_solved == 3 and v.e_solved == 1
    assert v.d_mean == pytest.approx(0.1 / 3)
    # 15 early values of 0.2 and 15 finals summing to 1.5 + 1.5 + 2.85 + 0.1 + 1 = 6.95
    assert v.auc == pytest.approx((15 * 0.2 + 6.95) / 30)
    assert v.eligible


def test_each_condition_makes_a_variant_ineligible():
    def with_(task, values):
        return verdict(preset="p", grid_codes="raw", cost=1.0,
                       curves=_curves({**PAPER_SHAPE, task: values}))

    assert not with_("C", [1.0, 1.0, 0.88]).eligible       # (a) one seed short of solving C
    assert not with_("D", [0.3, 0.3, 0.1]).eligible        # (b) mean D 0.233 > 0.2
    assert not with_("E", [0.95, 1.0, 0.0]).eligible       # (c) E solved on two seeds


def test_cheapest_eligible_wins_and_near_ties_go_to_the_faster_learner():
    base = _curves(PAPER_SHAPE)
    slow_learner = verdict(preset="a", grid_codes="raw", curves=base, cost=1.00)
    fast_learner = verdict(preset="b", grid_codes="unit", curves=_curves(PAPER_SHAPE, 0.5),
                           cost=1.10)
    expensive = verdict(preset="c", grid_codes="unit", curves=_curves(PAPER_SHAPE, 0.9),
                        cost=1.20)
    assert choose([slow_learner, fast_learner, expensive]) is fast_learner  # 1.10 <= 1.15
    ineligible_cheap = verdict(preset="d", grid_codes="raw", cost=0.1,
                               curves=_curves({**PAPER_SHAPE, "D": [1.0] * 3}))
    assert choose([ineligible_cheap, expensive]) is expensive


def test_without_eligible_variants_most_seeds_solving_c_wins():
    two_c = verdict(preset="a", grid_codes="raw", cost=5.0,
                    curves=_curves({**PAPER_SHAPE, "C": [1.0, 1.0, 0.0], "D": [1.0] * 3}))
    one_c = verdict(preset="b", grid_codes="raw", cost=1.0,
                    curves=_curves({**PAPER_SHAPE, "C": [1.0, 0.0, 0.0]}))
    assert choose([one_c, two_c]) is two_c


def test_main_reads_exported_cells_and_writes_the_choice(tmp_path, capsys):
    (tmp_path / "cost.json").write_text(json.dumps({"rows": [
        {"preset": "minigrid", "grid_codes": "raw", "us_per_step": 12.0},
        {"preset": "minigrid-sb3", "grid_codes": "unit", "us_per_step": 27.0}]}))
    for preset, codes, shape in (("minigrid", "raw", {**PAPER_SHAPE, "D": [1.0] * 3}),
                                 ("minigrid-sb3", "unit", PAPER_SHAPE)):
        curves = _curves(shape)
        for seed in range(3):
            cell = (tmp_path / "scratch" / "cells"
                    / f"calibration-tasks-scratch-preset={preset}-grid_codes={codes}-s{seed}")
            cell.mkdir(parents=True)
            curves[curves.seed == seed].drop(columns="seed").to_csv(cell / "curve.csv")
            (cell / "run.json").write_text(json.dumps({"format": "telapa-run", "version": 1,
                                                    "status": "complete"}))
    assert main([str(tmp_path)]) == 0
    selection = json.loads((tmp_path / "selection.json").read_text())
    assert selection["chosen"] == {"preset": "minigrid-sb3", "grid_codes": "unit"}
    assert selection["complete"] is False  # two variants of four
    assert "PROVISIONAL" in capsys.readouterr().out


def _cell(folder, name: str, curve: pd.DataFrame) -> None:
    cell = folder / name
    cell.mkdir(parents=True)
    curve.to_csv(cell / "curve.csv", index=False)
    (cell / "run.json").write_text(json.dumps({"format": "telapa-run", "version": 1,
                                               "status": "complete"}))


def test_the_transfer_question_is_read_by_hand_and_never_changes_the_choice(tmp_path, capsys):
    """Finetune A -> B -> C beside Scratch's C: start and final SR on C, and the first
    evaluation step of the C visit at SR >= 0.9 (never: None)."""
    (tmp_path / "cost.json").write_text(json.dumps({"rows": [
        {"preset": "minigrid", "grid_codes": "raw", "us_per_step": 12.0}]}))
    scratch = _curves(PAPER_SHAPE)
    scratch.loc[(scratch.task == "C") & (scratch.step == 0), "sr"] = 0.95  # seed solves at 0
    scratch["visit"] = scratch["task"].map({t: i for i, t in enumerate("ABCDE")})
    name = "calibration-tasks-scratch-preset=minigrid-grid_codes=raw-s{}"
    for seed in range(3):
        _cell(tmp_path / "scratch" / "cells", name.format(seed),
              scratch[scratch.seed == seed].drop(columns="seed"))
    before = main([str(tmp_path)]), (tmp_path / "selection.json").read_text()
    assert not (tmp_path / "transfer.json").exists()
    rows = [(0, "A", 0, 0.1), (0, "A", 5, 0.97), (1, "B", 0, 0.3), (1, "B", 5, 0.88),
            (2, "C", 0, 0.04), (2, "C", 5, 0.5), (2, "C", 10, 0.92), (2, "C", 15, 0.9)]
    learns = pd.DataFrame(rows, columns=["visit", "task", "step", "sr"])
    never = learns.assign(sr=[0.1, 0.9, 0.2, 1.0, 0.0, 0.0, 0.02, 0.0])
    ft = "calibration-transfer-finetune-preset=minigrid-grid_codes=raw-s{}"
    _cell(tmp_path / "finetune" / "cells", ft.format(0), learns)
    _cell(tmp_path / "finetune" / "cells", ft.format(1), never)
    capsys.readouterr()
    assert (main([str(tmp_path)]), (tmp_path / "selection.json").read_text()) == before
    out = capsys.readouterr().out
    assert "| minigrid | raw | 0 | 0.97 | 0.88 | 0.04 | 0.90 | 0.00M | 0.00M |" in out
    assert "| minigrid | raw | 1 | 0.90 | 1.00 | 0.00 | 0.00 | never | 0.00M |" in out
    seeds = json.loads((tmp_path / "transfer.json").read_text())["seeds"]
    assert [(s["seed"], s["c_start"], s["c_final"], s["c_solve_step"],
             s["scratch_c_solve_step"]) for s in seeds] == [
        (0, 0.04, 0.9, 10, 0), (1, 0.0, 0.0, None, 0)]
