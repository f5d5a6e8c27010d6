"""A plug-in method whose hook returns the wrong thing, or takes a parameter telapa does
not pass, fails in one line naming the method, the hook and what it returned: at
registration for a signature, where telapa receives the value for a return (not after
a visit of training, deep inside the loop); the run directory then reads as after any
other failure of a run (status "running", lock released)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax.numpy as jnp
import pandas as pd
import pytest
from plugin_modules import write_module

from telapa.cli import main
from telapa.continual.curriculum import load_curriculum
from telapa.continual.lockstep import HookError, run_hooks
from telapa.continual.methods import Finetune, Method
from telapa.continual.preset import load_run_config
from telapa.continual.registry import (
    BUILTIN_METHODS,
    check_hooks,
    checked,
    register_method,
)
from telapa.continual.rundir import RunDir
from telapa.continual.runner import ContinualRun
from telapa.continual.spec import RunSpec
from telapa.continual.state import MethodState
from telapa.io import PhaseTimer
from telapa.plugins import PluginError

TINY = Path(__file__).with_name("tiny_run.yaml")
ONE_TASK = Path(__file__).with_name("one_task_curriculum.yaml")  # one env to compile


def _class(name: str, **hooks) -> type[Method]:
    return type("Bad", (Finetune,), {"name": name, "__module__": "plug.bad", **hooks})


def _spec(method: str) -> RunSpec:
    return RunSpec(load_curriculum(ONE_TASK), method, 0, load_run_config(TINY), "tiny")


def _phase(run: ContinualRun, kind: str) -> int:
    return next(i for i, p in enumerate(run.phases) if p.kind == kind)


# --- signatures: refused at registration ------------------------------------------------

def test_a_hook_with_a_parameter_telapa_does_not_pass_is_refused_at_registration(
        plugin_site):
    def end_task(self, mstate, learner, ctx, extra):
        return mstate

    with pytest.raises(PluginError, match=re.escape(
            "method 'bad-extra' (plug.bad.Bad): end_task(self, mstate, learner, ctx, extra) "
            "has parameter extra without a default, which telapa does not pass; it must be "
            "end_task(self, mstate, learner, ctx) -> mstate")):
        register_method(_class("bad-extra", end_task=end_task))

    def tables(self, mstate, *, style):
        return {}

    def init(self, params, more, *rest):
        return MethodState()

    with pytest.raises(PluginError, match=r"'bad-more'.*tables\(self, mstate, \*, style\) "
                       r"has parameter style.*; init\(self, params, more, \*rest\) has "
                       r"parameter more"):
        register_method(_class("bad-more", tables=tables, init=init))
    with pytest.raises(PluginError, match=r"'bad-attr'.*observe is NoneType, not a method"):
        register_method(_class("bad-attr", observe=None))
    with pytest.raises(PluginError, match="unknown method 'bad-extra'"):
        ContinualRun.start(_spec("bad-extra"), plugin_site / "never")
    assert not (plugin_site / "never").exists()


def test_signatures_telapa_can_call_are_accepted(plugin_site):
    def end_task(self, mstate, learner, ctx, extra=None, *rest, flag=False, **more):
        return mstate

    @classmethod
    def network(cls, network):
        return network

    @staticmethod
    def eval_params(mstate, task, learner):
        return learner.params

    register_method(_class("fine-sigs", end_task=end_task, network=network,
                           eval_params=eval_params))
    for method in BUILTIN_METHODS.values():
        check_hooks(method)


# --- return values: checked where telapa receives them ---------------------------------

def test_each_return_value_is_checked_against_its_documented_type():
    method = Finetune()
    state = MethodState()
    params = {"w": jnp.zeros(2), "b": jnp.zeros(1)}

    class Learner:  # what eval_params' check reads of the learner
        pass

    learner = Learner()
    learner.params = params
    assert checked(method, "end_task", state) is state
    tables = {"t": pd.DataFrame()}
    assert checked(method, "tables", tables) is tables
    assert checked(method, "eval_params", params, learner=learner) is params
    assert checked(method, "parts_like", {"bank": {}}) == {"bank": {}}
    cases = [
        ("end_task", None, "returned None; it must return a MethodState, the next state "
                           "(end_task(self, mstate, learner, ctx) -> mstate"),
        ("observe", (state,), "returned a tuple of 1 (MethodState); it must return a "
                              "MethodState"),
        ("init", {}, "returned a dict; it must return a MethodState, the run's first state"),
        ("start_task", (params, state), "returned a tuple of 2 (dict, MethodState); it must "
                                        "return the tuple (learner, mstate)"),
        ("start_task", state, "returned a MethodState; it must return the tuple"),
        ("eval_params", None, "returned None; it must return the policy's parameters"),
        ("eval_params", {"w": jnp.zeros(2)}, "returned a dict; it must return the policy's"),
        ("eval_params", state, "returned a MethodState; it must return the policy's"),
        ("tables", None, "returned None; it must return a dict of table name -> pandas "
                         "DataFrame"),
        ("tables", {"t": [1, 2]}, "returned a dict; it must return a dict of table name"),
        ("parts_like", [1], "returned a list; it must return a dict of part name"),
        ("network", None, "returned None; it must return a NetworkConfig"),
    ]
    for hook, value, message in cases:
        with pytest.raises(HookError, match=re.escape(
                f"method 'finetune' (telapa.continual.methods.baselines.Finetune): {hook} "
                f"{message}")):
            checked(method, hook, value, learner=learner)
    with pytest.raises(PluginError):  # one line on the command line
        checked(method, "end_task", None)
    with pytest.raises(TypeError):  # what a hook gave has the wrong type
        checked(method, "end_task", None)


def test_a_hook_that_yields_something_else_is_named():
    def hook():
        yield 42

    with pytest.raises(HookError, match=r"^method 'x' \(m\.X\): end_task yielded int, not "
                                        "a lockstep Request"):
        run_hooks([hook], [PhaseTimer()], ["method 'x' (m.X): end_task"])


BAD_START = '''
from telapa.continual.methods import Finetune
from telapa.continual.registry import register_method


@register_method
class BadStart(Finetune):
    name = "bad-start"

    def start_task(self, mstate, learner, ctx):
        return learner  # not (learner, mstate)
'''


def test_start_task_returning_only_the_learner_is_one_line_before_any_training(
        plugin_site, tmp_path, capsys):
    write_module(plugin_site, "bad_start_mod", BAD_START)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--import", "bad_start_mod", "--curriculum", str(ONE_TASK), "--method",
              "bad-start", "--preset", str(TINY), "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("telapa: error: method 'bad-start' (bad_start_mod.BadStart): start_task "
                   "returned a PPOState; it must return the tuple (learner, mstate): a "
                   "PPOState and a MethodState (start_task(self, mstate, learner, ctx) -> "
                   "(learner, mstate); docs/extending.md, 'Your own method')")
    # as after any other failure of a run: "running" (it may be resumed), unlocked
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    assert not RunDir(out).is_locked()


def test_end_observe_eval_and_tables_hooks_returning_none_are_named(plugin_site, tmp_path):
    """Each run from its start at the phase that calls the hook (no training: the check
    is where the value is received, before anything uses it)."""
    none = lambda self, *args: None  # noqa: E731
    register_method(_class("bad-end", end_task=none))
    run = ContinualRun.start(_spec("bad-end"), tmp_path / "end")
    run.state = run.state.replace(next_phase=_phase(run, "end"))
    with pytest.raises(HookError, match=re.escape(
            "method 'bad-end' (plug.bad.Bad): end_task returned None; it must return a "
            "MethodState")):
        run.run()
    assert json.loads((tmp_path / "end" / "run.json").read_text())["status"] == "running"
    assert not RunDir(tmp_path / "end").is_locked()

    register_method(_class("bad-eval", eval_params=none))
    run = ContinualRun.start(_spec("bad-eval"), tmp_path / "eval")
    run.state = run.state.replace(next_phase=_phase(run, "final"))
    with pytest.raises(HookError, match=r"'bad-eval' \(plug\.bad\.Bad\): eval_params "
                                        "returned None"):
        run.run()

    register_method(_class("bad-observe", observe=none))
    run = ContinualRun.start(_spec("bad-observe"), tmp_path / "observe")
    with pytest.raises(HookError, match=r"'bad-observe' \(plug\.bad\.Bad\): observe "
                                        "returned None"):
        run.record_start(run.state, run.visits[0], None)
    run.dir.unlock()

    register_method(_class("bad-tables", tables=none))
    run = ContinualRun.start(_spec("bad-tables"), tmp_path / "tables")
    with pytest.raises(HookError, match=r"'bad-tables' \(plug\.bad\.Bad\): tables "
                                        "returned None"):
        run.finish()
    run.dir.unlock()


def test_init_and_network_are_checked_before_the_run_directory_is_made(plugin_site,
                                                                        tmp_path):
    none = lambda self, *args: None  # noqa: E731
    for hook in ("init", "network"):
        register_method(_class(f"bad-{hook}", **{hook: none}))
        with pytest.raises(HookError, match=rf"'bad-{hook}' \(plug\.bad\.Bad\): {hook} "
                                            "returned None"):
            ContinualRun.start(_spec(f"bad-{hook}"), tmp_path / hook)
        assert not (tmp_path / hook).exists()
