"""Sizes that are each within bounds but too large together: a run whose arrays cannot
fit in memory, and YAML whose aliases expand past any use. Both are refused in one line,
fast, before any run or sweep directory exists (docs/reliability.md, "Upper bounds")."""

from __future__ import annotations

import pytest

from telapa.config import CONFIG_DIR, ConfigError, read_yaml
from telapa.continual import memory
from telapa.continual.curriculum import load_curriculum
from telapa.continual.memory import GIB, check_memory, estimate, total
from telapa.continual.preset import bind_env_family, load_run_config
from telapa.continual.registry import method_names
from telapa.continual.sweep import check_batch_seeds, load_sweep
from telapa.overrides import override, parse_sets

from .conftest import FAULT_RUN, ONE_TASK, RUN, deadline, fails

MACHINE = 24 * GIB
"""The memory the tests pretend the machine has (a common laptop or small cloud VM)."""
HUGE = ["--set", "train.ppo.num_envs=65536", "--set", "train.ppo.n_steps=4096",
        "--set", "steps_per_visit=268435456", "--set", "eval_every=268435456"]
"""The probe's settings: 65,536 envs x 4,096 steps, each within its bound (2.7e8 steps
a PPO call; the budgets made whole calls of it)."""


@pytest.fixture
def machine(monkeypatch) -> int:
    """This machine has `MACHINE` bytes of memory, whatever it has."""
    monkeypatch.setattr(memory, "machine_memory", lambda: MACHINE)
    return MACHINE


def test_sizes_that_multiply_past_memory_are_refused_before_any_work(tmp_path, capsys,
                                                                      machine):
    """``num_envs`` 65536 x ``n_steps`` 4096 was accepted and died after the first
    evaluation: ``RESOURCE_EXHAUSTED: Out of memory allocating 412898338400 bytes``, a
    traceback and a run left "running". Refused at once, with the estimate, the machine's
    memory and the settings that make it; no run directory."""
    out = tmp_path / "out"
    line = fails([*RUN, *HUGE, "--out", str(out)], capsys, "needs at least",
                 "more than this machine's 24.0 GiB", "the PPO rollout and update",
                 "train.ppo.num_envs=65536 x train.ppo.n_steps=4096", within_s=30)
    assert not out.exists(), line
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                     "overrides: {train.ppo.num_envs: 65536, train.ppo.n_steps: 4096, "
                     "steps_per_visit: 268435456, eval_every: 268435456}\n")
    fails(["sweep", str(sweep), "--out", str(out)], capsys, str(sweep), "one-task-ewc-s0",
          "more than this machine's 24.0 GiB", "train.ppo.num_envs=65536", within_s=30)
    assert not out.exists()


def test_a_batch_of_seeds_is_checked_as_a_whole(tmp_path, capsys, machine):
    """One seed of 4,096 envs x 1,024 steps fits (about 2 GiB); sixteen in one batch (one
    program vmapped over the seeds) do not, for ``run --seeds`` and a sweep's
    ``--batch-seeds``, refused before any run directory is claimed."""
    sets = ["--set", "train.ppo.num_envs=4096", "--set", "train.ppo.n_steps=1024",
            "--set", "steps_per_visit=4194304", "--set", "eval_every=4194304"]
    config = override(load_run_config(FAULT_RUN), parse_sets(sets[1::2]))
    curriculum = load_curriculum(ONE_TASK)
    check_memory(curriculum, "ewc", config, seeds=1)
    out = tmp_path / "seeds"
    fails([*RUN, *sets, "--seeds", "0-15", "--out", str(out)], capsys, "16 seeds at once",
          "more than this machine's 24.0 GiB", "x 16 programs at once", within_s=30)
    assert not out.exists()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                     "seeds: 16\noverrides: {train.ppo.num_envs: 4096, train.ppo.n_steps: "
                     "1024, steps_per_visit: 4194304, eval_every: 4194304}\n")
    fails(["sweep", str(sweep), "--out", str(out), "--batch-seeds"], capsys, str(sweep),
          "16 seeds at once", "24.0 GiB", within_s=60)
    assert not out.exists()


def test_the_shipped_presets_and_sweeps_fit_in_24_gib(machine):
    """Every run preset with every curriculum of its env family and every method, and every
    shipped sweep with all of a cell's seeds in one batch, is well within 24 GiB (the
    paper's: 16 envs x 128 steps, 1000 illumination candidates, archives of 384)."""
    worst = 0
    for preset in sorted((CONFIG_DIR / "runs").glob("*.yaml")):
        config = load_run_config(preset)
        for path in sorted((CONFIG_DIR / "curricula").glob("*.yaml")):
            curriculum = load_curriculum(path)
            try:
                bound = bind_env_family(config, list(curriculum.task_ids().values()))
            except ConfigError:  # another family's curriculum
                continue
            for method in method_names():
                worst = max(worst, total(estimate(curriculum, method, bound)))
    assert worst < MACHINE / 8, worst / GIB
    for path in sorted((CONFIG_DIR / "sweeps").glob("*.yaml")):
        check_batch_seeds(load_sweep(path), True)


def _bomb(anchor: str = "a") -> str:
    """A YAML flow sequence that stands for 10^9 scalars (nine levels of ten aliases),
    as the value of the last of its ten keys, at the indentation of a nested mapping."""
    lines = [f"{anchor}0: &{anchor}0 [" + ", ".join(["xxxxxxxxxx"] * 10) + "]"]
    lines += [f"{anchor}{i}: &{anchor}{i} [" + ", ".join([f"*{anchor}{i - 1}"] * 10) + "]"
              for i in range(1, 9)]
    return "\n".join(lines)


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


@pytest.mark.parametrize("where", ["task options", "preset", "sweep overrides", "--set"])
def test_a_yaml_anchor_bomb_anywhere_is_refused_fast(tmp_path, capsys, where):
    """An anchor bomb inside a task's ``options`` passed validation, then a MemoryError
    traceback after 140 s at 3.7 GB (only bombs at the top level or in a grid were
    refused). Every file telapa reads is bounded after alias expansion, at any depth:
    one line naming the file, within seconds, and no output directory."""
    out = tmp_path / "out"
    bomb = tmp_path / "bomb.yaml"
    if where == "task options":
        bomb.write_text("name: bomb\nbackend: gymnasium\ntasks:\n  A:\n    env_id: "
                        f"CartPole-v1\n    options:\n{_indent(_bomb(), 6)}\norder: [A]\n")
        args = ["run", "--curriculum", str(bomb), "--method", "finetune"]
    elif where == "preset":
        bomb.write_text(FAULT_RUN.read_text().replace(
            "  ewc: {fisher_steps: 256}", f"  ewc:\n    fisher_steps: 256\n{_indent(_bomb(), 4)}"))
        args = [*RUN, "--preset", str(bomb)]
    elif where == "sweep overrides":
        bomb.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"
                        f"overrides:\n  methods.ewc.lam: 1.0\n  x:\n{_indent(_bomb(), 4)}\n")
        args = ["sweep", str(bomb)]
    else:
        value = "[" + ", ".join(f"&b{i} [" + ", ".join([f"*b{i - 1}" if i else "x"] * 10)
                                + "]" for i in range(9)) + "]"
        args = [*RUN, "--set", f"methods.ewc.lam={value}"]
    source = "--set methods.ewc.lam" if where == "--set" else str(bomb)
    fails([*args, "--out", str(out)], capsys, source,
          "too large once its aliases are expanded", "at most 10,000,000", within_s=15)
    assert not out.exists()


def test_a_recursive_yaml_alias_is_refused(tmp_path):
    path = tmp_path / "curriculum.yaml"
    path.write_text("name: loop\ntasks: &t {A: MiniGrid-Empty-5x5-v0, B: *t}\norder: [A]\n")
    with deadline(5), pytest.raises(ConfigError, match=f"curriculum file {path}: an alias "
                                                       "refers to a node that contains it"):
        read_yaml(path, "curriculum")
