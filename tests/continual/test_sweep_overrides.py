"""``telapa sweep FILE --set KEY=VALUE``: an override for every cell, over the file's own,
validated before any run; a sweep directory refuses a re-run with another ``--set``."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.cli import main
from telapa.config import ConfigError
from telapa.continual.sweep import load_sweep, prepare_sweep_dir

TINY = Path(__file__).with_name("sweep_tiny") / "sweep.yaml"


def test_set_overrides_every_cell_over_the_files_overrides():
    plain = load_sweep(TINY)
    sweep = load_sweep(TINY, {"eval_every": 512, "tau_min": 0.3})
    for before, cell in zip(plain.cells, sweep.cells, strict=True):
        assert cell.name == before.name  # names come from the grid only
        assert (before.config.eval_every, cell.config.eval_every) == (256, 512)
        assert cell.config.tau_min == 0.3 and before.config.tau_min == 0.2
        assert cell.config.steps_per_visit == 512  # the file's other override stays
    # scratch, the sweep's one method, reads no ewc section: the key would change nothing
    with pytest.raises(ConfigError, match=r"no method of the sweep reads methods.ewc"):
        load_sweep(TINY, {"eval_every": 512, "methods.ewc.lam": 3.0})


def test_bad_sets_are_named_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match=r"^unknown key 'eval\.every' in --set"):
        load_sweep(TINY, {"eval.every": 512})
    with pytest.raises(ConfigError, match="invalid value for 'eval_every'"):
        load_sweep(TINY, {"eval_every": -1})
    grid = tmp_path / "grid.yaml"
    grid.write_text(TINY.read_text().replace("preset: ../tiny_run.yaml",
                                             f"preset: {TINY.parent.parent / 'tiny_run.yaml'}")
                    .replace("curricula: [curriculum.yaml]",
                             f"curricula: [{TINY.parent / 'curriculum.yaml'}]")
                    + "grid:\n  tau_min: [0.1, 0.2]\n")
    with pytest.raises(ConfigError, match=f"--set tau_min: {grid} varies it in its grid"):
        load_sweep(grid, {"tau_min": 0.3})


def test_a_sweep_directory_refuses_a_rerun_with_another_set(tmp_path, capsys):
    out = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(TINY, {"tau_min": 0.3}), out)
    with pytest.raises(SystemExit):
        main(["sweep", str(TINY), "--out", str(out), "--set", "tau_min=0.4"])
    assert "holds another sweep" in capsys.readouterr().err
    prepare_sweep_dir(load_sweep(TINY, {"tau_min": 0.3}), out)  # the same: accepted
