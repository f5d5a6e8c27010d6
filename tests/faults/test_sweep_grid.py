"""Sweep grids that would run one run twice or drop one (faults 4 and 5): grid values are
read as ``--set`` reads values, two grid points that give the same run are refused, and so
are two that would share a cell name; both before any work or directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.config import ConfigError
from telapa.continual.sweep import load_sweep

from .conftest import FAULT_RUN, ONE_TASK, fails

SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\nseeds: [0]\n"
EQUAL = [
    ("train.ppo.epochs: [2, 2.0]", "train.ppo.epochs has values 2 and 2.0"),
    ("train.ppo.lr: [1e-3, 0.001]", "train.ppo.lr has values '1e-3' and 0.001"),
    ("methods.ewc.lam: [10, 25, 10]", "methods.ewc.lam has values 10 and 10"),
]


def _sweep(tmp_path: Path, grid: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"{SWEEP}grid:\n  {grid}\n")
    return path


@pytest.mark.parametrize(("grid", "message"), EQUAL)
def test_grid_values_that_give_the_same_run_are_refused(tmp_path, grid, message):
    path = _sweep(tmp_path, grid)
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert str(err.value).startswith(f"{path}: grid key {message} that give the same run "
                                     "of ewc on one-task"), err.value


@pytest.mark.parametrize(("grid", "message"), EQUAL[:2])
def test_telapa_sweep_refuses_them_before_making_its_directory(tmp_path, capsys, grid,
                                                               message):
    path, out = _sweep(tmp_path, grid), tmp_path / "out"
    fails(["sweep", str(path), "--out", str(out)], capsys, str(path), message)
    assert not out.exists()


def test_equal_values_of_two_keys_are_named_together(tmp_path):
    """A key and then its section's mapping, both in the grid (the mapping merges over the
    key): epochs=1 with the section's epochs=2 is the run of epochs=2 with the section's
    unchanged n_steps, two grid points that differ in both keys."""
    path = _sweep(tmp_path, "train.ppo.epochs: [1, 2]\n"
                            "  train.ppo: [{n_steps: 32}, {epochs: 2}]")
    with pytest.raises(ConfigError, match=r"grid keys train.ppo.epochs, train.ppo have "
                                          r"values \(1, \{'epochs': 2\}\) and "
                                          r"\(2, \{'n_steps': 32\}\) that give the same run"):
        load_sweep(path)


def test_grid_and_override_values_are_read_as_set_reads_them(tmp_path):
    """``1e-3`` is a number (PyYAML alone reads it as a string), in the grid, in the
    overrides and inside a mapping value; a string that is no number stays a string."""
    path = tmp_path / "sweep.yaml"
    path.write_text(f"{SWEEP}grid:\n  train.ppo.lr: [1e-3, 3e-4]\n"
                    "overrides:\n  methods.ewc.lam: 1e1\n  train.eval: {episodes: 8e0}\n"
                    f"  train.preset: {tmp_path / 'a/b'}\n")
    (tmp_path / "a").mkdir()
    (Path(tmp_path / "a/b.yaml")).write_text("ppo: {num_envs: 8}\n")
    cells = load_sweep(path).cells
    assert [c.overrides["train.ppo.lr"] for c in cells] == [0.001, 0.0003]
    assert [c.name for c in cells] == ["one-task-ewc-lr=0.001-s0", "one-task-ewc-lr=0.0003-s0"]
    assert cells[0].overrides["methods.ewc.lam"] == 10.0
    assert cells[0].overrides["train.eval"] == {"episodes": 8.0}
    assert cells[0].overrides["train.preset"] == str(tmp_path / "a/b")


@pytest.fixture
def two_presets(tmp_path) -> tuple[str, str]:
    """Two PPO presets, ``DIR/a/b`` and ``DIR/a_b`` (names that become one cell name),
    that differ in gamma."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.yaml").write_text("ppo: {gamma: 0.99}\n")
    (tmp_path / "a_b.yaml").write_text("ppo: {gamma: 0.98}\n")
    return str(tmp_path / "a" / "b"), str(tmp_path / "a_b")


def test_grid_values_that_share_a_cell_name_are_refused(tmp_path, two_presets):
    first, second = two_presets
    path = _sweep(tmp_path, f"train.preset: [{first}, {second}]")
    name = f"one-task-ewc-preset={first.replace('/', '_')}-s0"
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert str(err.value) == (
        f"{path}: grid key train.preset has values {first!r} and {second!r} that make the "
        f"same cell name {name} (characters outside [A-Za-z0-9._=+-] become _); change one "
        "of them")


def test_telapa_sweep_refuses_a_shared_cell_name_before_making_its_directory(
        tmp_path, capsys, two_presets):
    first, second = two_presets
    path, out = _sweep(tmp_path, f"train.preset: [{first}, {second}]"), tmp_path / "out"
    fails(["sweep", str(path), "--out", str(out)], capsys, str(path), repr(first),
          repr(second), "same cell name")
    assert not out.exists()


def test_distinct_values_still_make_every_cell(tmp_path, two_presets):
    """The two presets under names of their own: two cells."""
    first, _ = two_presets
    other = str(Path(first).with_name("c"))
    Path(f"{other}.yaml").write_text("ppo: {gamma: 0.98}\n")
    path = _sweep(tmp_path, f"train.preset: [{first}, {other}]\n  train.ppo.epochs: [1, 2]")
    assert len(load_sweep(path).cells) == 4
