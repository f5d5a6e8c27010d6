"""The agents a process's runs share (`telapa.continual.agents`): one per task, kept in
order of use, and past a share of the OS's limit on memory maps the idle ones give their
compiled programs back (`relieve_map_pressure`)."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import pytest

from telapa.continual import agents as agents_module
from telapa.continual.agents import map_usage, relieve_map_pressure, shared_agent
from telapa.continual.curriculum import load_curriculum
from telapa.continual.methods import L2InitConfig
from telapa.continual.preset import load_run_config
from telapa.continual.spec import RunSpec

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"),
                                reason="Linux's map count")

TINY = Path(__file__).with_name("tiny_run.yaml")


def _spec() -> RunSpec:
    return RunSpec(load_curriculum("smoke"), "finetune", 0, load_run_config(TINY), "tiny")


def _get(agents, spec, visit, notes):
    return shared_agent(agents, visit, spec.config.train, spec=spec, penalty=None,
                        note=notes.append)


def _compile(agent) -> None:
    agent.evaluate(agent.init_ppo(jax.random.key(0)).params, 2, jax.random.key(1))


def test_map_usage_reads_the_process_and_its_limit():
    maps, limit = map_usage()
    assert 0 < maps < limit
    assert limit == int(Path("/proc/sys/vm/max_map_count").read_text())


def test_a_change_of_task_past_the_share_releases_every_idle_agent(monkeypatch):
    spec = _spec()
    a, b, a_again = spec.curriculum.visits()[:3]  # A B A' on two envs
    agents, notes = {}, []
    # below the share: all kept (set first: a test worker that ran many tests before
    # may already hold more maps than the default share, and released at once)
    monkeypatch.setattr(agents_module, "MAP_SHARE", 1.0)
    first = _get(agents, spec, a, notes)
    _compile(first)
    assert _get(agents, spec, a, notes) is first  # the same task: nothing to check
    second = _get(agents, spec, b, notes)
    _compile(second)
    assert (first.live_programs, second.live_programs, notes) == (1, 1, [])
    monkeypatch.setattr(agents_module, "MAP_SHARE", 0.0)  # past it
    assert _get(agents, spec, a_again, notes) is first
    assert (first.live_programs, second.live_programs) == (1, 0)
    assert len(notes) == 1 and "released the compiled programs of 1 idle task" in notes[0]
    assert list(agents.values()) == [second, first]  # in order of use


def test_relieving_releases_only_past_the_share():
    agents, notes = {}, []
    spec = _spec()
    agent = _get(agents, spec, spec.curriculum.visits()[0], notes)
    _compile(agent)
    assert relieve_map_pressure(agents, agent, share=1.0) is None
    assert relieve_map_pressure({"idle": agent}, None, share=0.0) is not None
    assert agent.live_programs == 0


def test_a_penalised_methods_agent_is_keyed_by_its_settings():
    """A penalty may read its method's settings as constants its compiled programs fix (a
    plug-in's ``lam`` in a closure), so runs of one method with other settings never
    share an agent; with the same settings, or without a penalty, they do."""
    spec = _spec()
    visit = spec.curriculum.visits()[0]
    agents: dict = {}

    def get(penalty, lam):
        return shared_agent(agents, visit, spec.config.train, spec=spec, penalty=penalty,
                            settings=L2InitConfig(lam=lam))

    def penalty(params, data):
        return 0.0

    weak = get(penalty, 0.1)
    assert get(penalty, 0.1) is weak
    strong = get(penalty, 10.0)
    assert strong is not weak and strong.penalty is penalty
    assert get(None, 0.1) is get(None, 10.0)  # no penalty: the settings change no program
