"""Bad input ends in one line that names what is wrong and where, before any work, and
nothing a user has is touched (issue 28, faults 4, 5, 10 and 11). None of these trains."""

from __future__ import annotations

import json
import os
import re

import pytest

from telapa.config import ConfigError, read_yaml
from telapa.continual.curriculum import load_curriculum
from telapa.continual.sweep import export_sweep, load_sweep, prepare_sweep_dir
from telapa.plugins import PluginError, import_modules
from telapa.report.build import ReportError, check_destination, write_report
from telapa.report.document import Document

from .conftest import FAULT_RUN, ONE_TASK, RUN, fails, small_disk


@pytest.mark.parametrize("tag", ["../../x", "a/b", ".hidden", "-x", "A B", "x" * 41, ""])
def test_task_tags_that_are_not_one_plain_path_component_are_refused(tmp_path, capsys, tag):
    """Fault 4: a tag ``../../x`` trained a whole visit, then died writing
    ``train/00-../../x.csv``, on every resume. Tags are checked when the curriculum is
    read."""
    path = tmp_path / "c.yaml"
    path.write_text(f"name: bad\ntasks:\n  {json.dumps(tag)}: MiniGrid-Empty-5x5-v0\n"
                    f"order: [{json.dumps(tag)}]\n")
    with pytest.raises(ConfigError, match=f"invalid value for 'tasks' in {path}: .*task tag"):
        load_curriculum(path)
    out = tmp_path / "out"
    fails(["run", "--curriculum", str(path), "--method", "ewc", "--preset", str(FAULT_RUN),
           "--out", str(out)], capsys, str(path), "task tag")
    assert not out.exists()


@pytest.mark.parametrize("what", ["curriculum", "preset", "config", "sweep"])
@pytest.mark.parametrize("content", [b"name: \xff\xfe broken\n", b"tasks: [unclosed\n",
                                     b"- a\n- list\n", b"\x00\x01\x02"])
def test_unreadable_yaml_is_named(tmp_path, capsys, what, content):
    """Fault 5: non-UTF-8 YAML was a UnicodeDecodeError traceback. Every YAML file the
    project reads (curriculum, run preset, PPO config, sweep file) that is not UTF-8, not
    YAML or not a mapping is one line naming the file."""
    bad = tmp_path / f"{what}.yaml"
    bad.write_bytes(content)
    args = {
        "curriculum": ["run", "--curriculum", str(bad), "--method", "ewc", "--preset",
                       str(FAULT_RUN)],
        "preset": ["run", "--curriculum", str(ONE_TASK), "--method", "ewc", "--preset",
                   str(bad)],
        "config": ["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "256", "--config",
                   str(bad)],
        "sweep": ["sweep", str(bad)],
    }[what]
    out = tmp_path / "out"
    fails([*args, "--out", str(out)], capsys, str(bad))
    assert not out.exists()
    if content.startswith(b"name: \xff"):
        with pytest.raises(ConfigError, match=f"{what if what != 'config' else 'config'} "
                                              f"file {bad} is not UTF-8 text"):
            read_yaml(bad, what)


def test_a_read_only_report_destination_is_refused_before_any_work(tmp_path, capsys):
    """Fault 5: ``report --out`` on a read-only place failed with an OSError traceback,
    and only after building the whole report. It is checked first: the error names the
    destination although the run given does not even exist."""
    with small_disk(tmp_path / "ro", "1m", read_only=True) as ro:
        out = ro / "report"
        with pytest.raises(ReportError, match=f"cannot write report directory {out}"):
            check_destination(out)
        fails(["report", str(tmp_path / "no-such-run"), "--out", str(out)], capsys,
              f"cannot write report directory {out}")


def test_a_report_never_deletes_files_it_did_not_write(tmp_path, capsys):
    """Fault 11: ``report --out`` over an earlier report deleted a file the user had added
    there. An earlier report is replaced only when it holds nothing but its own files."""
    out = tmp_path / "report"
    doc = Document("t", ["a note"], [])
    write_report(doc, out)
    manifest = json.loads((out / "report.json").read_text())
    assert sorted(manifest["files"]) == sorted(
        str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    write_report(doc, out)  # its own files only: replaced
    (out / "tables" / "notes.md").write_text("mine")
    with pytest.raises(ReportError, match=r"holds files the report did not write "
                                          r"\(tables/notes.md\)"):
        write_report(doc, out)
    fails(["report", str(tmp_path / "no-such-run"), "--out", str(out)], capsys,
          "tables/notes.md")
    assert (out / "tables" / "notes.md").read_text() == "mine"
    old = out.with_name("old")  # a report written before reports listed their files
    write_report(doc, old)
    manifest = json.loads((old / "report.json").read_text())
    del manifest["files"]
    (old / "report.json").write_text(json.dumps(manifest))
    write_report(doc, old)
    (old / "extra.txt").write_text("mine")
    with pytest.raises(ReportError, match=r"\(extra.txt\)"):
        check_destination(old)
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "report.json").write_bytes(b"\xff not json")
    with pytest.raises(ReportError, match="is not a telapa report"):
        check_destination(tmp_path / "garbage")


def test_an_export_inside_its_source_is_refused(tmp_path, capsys):
    """Fault 10: ``sweep export SW SW/cells/x`` created an export inside the sweep."""
    sweep_file = tmp_path / "s.yaml"
    sweep_file.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n")
    sweep_dir = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(sweep_file), sweep_dir)
    before = sorted(p.relative_to(sweep_dir) for p in sweep_dir.rglob("*"))
    for dest in (sweep_dir / "cells" / "x", sweep_dir / "status", sweep_dir / "a" / "b"):
        with pytest.raises(ValueError, match=f"into {dest}, which is inside it"):
            export_sweep(sweep_dir, dest)
        fails(["sweep", "export", str(sweep_dir), str(dest)], capsys, "inside it")
    assert sorted(p.relative_to(sweep_dir) for p in sweep_dir.rglob("*")) == before


def test_bad_option_combinations_name_the_option(tmp_path, capsys):
    fails([*RUN, "--seed", "1", "--seeds", "0-1"], capsys, "give --seed or --seeds")
    fails(["run", "--resume", str(tmp_path / "nothing")], capsys, "does not exist")
    fails(["metrics", str(tmp_path / "nothing")], capsys, "does not exist")
    fails(["sweep", "status", str(tmp_path)], capsys, "is not a sweep directory")
    fails(["inspect", str(tmp_path / "nothing")], capsys, "nothing")




@pytest.mark.parametrize(("module", "code", "shown"), [
    ("exits_zero", "0", "SystemExit(0)"), ("exits_none", "", "SystemExit(None)"),
    ("exits_text", "'bye'", "SystemExit('bye')"), ("exits_three", "3", "SystemExit(3)")])
def test_a_plugin_that_exits_is_an_error_naming_it(tmp_path, capsys, monkeypatch, module,
                                                   code, shown):
    """Issue 38, fault 4: ``--import M`` where M calls ``sys.exit(0)`` ended telapa with
    exit status 0, no output and nothing run. A plug-in's exit while it is imported is one
    line naming the module, exit status 2, before any work (a run's recorded imports,
    read again on resume, go through the same import)."""
    (tmp_path / f"{module}.py").write_text(f"import sys\nsys.exit({code})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    fails([*RUN, "--import", module, "--out", str(out)], capsys,
          f"--import {module}: module {module!r} exited while being imported ({shown})")
    assert not out.exists()
    with pytest.raises(PluginError, match=f"module {module!r} exited"):
        import_modules([module], source="run.json imports")


SWEEP = f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n"


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_a_destination_that_is_a_broken_symlink_is_named(tmp_path, capsys, kind):
    """Issue 38: a dangling or looping symbolic link as ``--out`` was refused with "File
    exists". Every destination (``run``, ``train``, ``sweep``, ``sweep export``,
    ``report``) names the link and where it points, before any work; the link is left as
    it is and nothing is created where it points."""
    link = tmp_path / "out"
    if kind == "dangling":
        link.symlink_to(tmp_path / "nowhere")
        where = f"{link} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist"
    else:
        link.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(link)
        where = f"{link} is a symbolic link to {tmp_path / 'other'}, which loops back"
    (tmp_path / "s.yaml").write_text(SWEEP)
    sweep_dir = tmp_path / "sweep"
    prepare_sweep_dir(load_sweep(tmp_path / "s.yaml"), sweep_dir)
    for args in ([*RUN, "--out", str(link)],
                 ["train", "--env", "MiniGrid-Empty-5x5-v0", "--steps", "256", "--out",
                  str(link)],
                 ["sweep", str(tmp_path / "s.yaml"), "--out", str(link)],
                 ["sweep", "export", str(sweep_dir), str(link)],
                 ["report", str(tmp_path / "no-such-run"), "--out", str(link)],
                 [*RUN, "--out", str(link / "run")]):
        fails(args, capsys, where, "remove the link or choose another")
    assert os.readlink(link) == str(tmp_path / ("nowhere" if kind == "dangling" else "other"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out", "s.yaml", "sweep", *(["other"] if kind == "loop" else [])])


def test_a_cell_name_too_long_for_a_file_is_refused_before_the_sweep_exists(tmp_path, capsys):
    """Issue 38: a cell whose name is longer than a file name may be (255 bytes) failed
    only once the sweep directory existed. It is refused when the sweep file is read,
    naming the cell."""
    curriculum = tmp_path / "c.yaml"
    long = "c" * 100  # the longest curriculum name
    curriculum.write_text(ONE_TASK.read_text().replace("name: one-task", f"name: {long}"))
    grid = "".join(f"  train.ppo.{key}: [0.1234567890123456]\n"
                   for key in ("gamma", "gae_lambda", "ent_coef", "vf_coef", "clip_coef"))
    (tmp_path / "s.yaml").write_text(SWEEP.replace(str(ONE_TASK), str(curriculum))
                                     + f"grid:\n{grid}")
    out = tmp_path / "out"
    fails(["sweep", str(tmp_path / "s.yaml"), "--out", str(out)], capsys,
          str(tmp_path / "s.yaml"), f"cell {long}-ewc-gamma=0.1234567890123456-",
          "-s0 has a name of 246 bytes; at most 228 (it names the cell's files)")
    assert not out.exists()


def test_a_gymnasium_env_without_a_time_limit_is_refused_when_read(tmp_path, capsys):
    """Issue 38: a gymnasium env without a time limit was accepted, then failed every cell
    and every retry at its first evaluation. A curriculum on the gymnasium backend is
    refused when it is read, naming the env id and what it needs; the same env with a
    ``max_episode_steps`` task option (a ``TimeLimit``) is accepted."""
    import gymnasium

    env_id = "TelapaFaultsNoTimeLimit-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id,
                           entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    path = tmp_path / "c.yaml"
    path.write_text(f"name: endless\nbackend: gymnasium\ntasks:\n  A: {env_id}\norder: [A]\n")
    message = (f"task 'A': {env_id} has no time limit: its episodes must end for telapa to "
               "evaluate it; register it with max_episode_steps=N (gymnasium.register) or "
               "wrap it in gymnasium.wrappers.TimeLimit")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_curriculum(path)
    (tmp_path / "s.yaml").write_text(SWEEP.replace(str(ONE_TASK), str(path)))
    for args in (["run", "--curriculum", str(path), "--method", "finetune", "--preset",
                  str(FAULT_RUN), "--out", str(tmp_path / "out")],
                 ["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out")]):
        fails(args, capsys, str(path), message)
        assert not (tmp_path / "out").exists()
    path.write_text(path.read_text().replace(
        f"A: {env_id}", f"A: {{env_id: {env_id}, options: {{max_episode_steps: 50}}}}"))
    assert load_curriculum(path).task_ids() == {"A": env_id}
