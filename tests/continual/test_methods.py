"""Method hooks against hand-computed values on a tiny JAX env."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rl.toy_envs import Corridor

from telapa.config import PPOConfig, TrainConfig
from telapa.continual.curriculum import Visit
from telapa.continual.lockstep import run_hooks
from telapa.continual.methods import (
    EWC,
    L2Init,
    Method,
    QuadraticData,
    TaskContext,
    accumulate_quadratic,
    quadratic_penalty,
)
from telapa.continual.preset import parse_run_config
from telapa.continual.registry import (
    BUILTIN_METHODS,
    METHOD_SECTIONS,
    METHODS,
    MethodsConfig,
    check_hooks,
    find_method,
    make_method,
)
from telapa.continual.state import MethodState
from telapa.io import PhaseTimer
from telapa.plugins import PluginError
from telapa.rl import Agent
from telapa.rl.fisher import diagonal_fisher
from telapa.rl.ppo import PPOState

TRAIN = TrainConfig(ppo=PPOConfig(num_envs=4, n_steps=8, batch_size=16, epochs=1))
CONFIG = parse_run_config({
    "train": TRAIN.model_dump(), "steps_per_visit": 64, "eval_every": 32,
    "methods": {"ewc": {"lam": 4.0, "decay": 0.5, "fisher_steps": 12},
                "l2init": {"lam": 0.25},
                "shrink_perturb": {"alpha": 0.9, "noise": 0.01}},
})


@pytest.fixture(scope="module")
def agent():
    return Agent(Corridor(), TRAIN)


def _visit(index: int, task: str, cycle: int) -> Visit:
    return Visit(index, task, task + "'" * cycle, "Corridor", {}, cycle, None)


def _ctx(agent, visit: Visit, seed: int = 7) -> TaskContext:
    return TaskContext(visit, agent, jax.random.key(seed), agent.policy.init)


def _state(agent, seed: int, method=None) -> PPOState:
    params = agent.policy.init(jax.random.key(seed))
    penalty = method.initial_penalty(params) if method else None
    return PPOState(params, agent.optimizer.init(params), penalty)


def _start(method, learner: PPOState, ctx: TaskContext, mstate: MethodState | None = None
           ) -> tuple[PPOState, MethodState]:
    """``method.start_task`` of one seed (from `init` when no ``mstate``)."""
    return method.start_task(method.init(learner.params) if mstate is None else mstate,
                             learner, ctx)


def _leaves_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in
               zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def _trained_opt_state(agent, state: PPOState):
    grads = jax.tree.map(jnp.ones_like, state.params)
    _, opt_state = agent.optimizer.update(grads, state.opt_state, state.params)
    return opt_state


def test_registry_and_unknown_name():
    assert set(METHODS) == set(BUILTIN_METHODS)  # no plug-in left over by another test
    for name, method in BUILTIN_METHODS.items():  # each under its class's own name
        assert issubclass(method, Method) and method.__dict__["name"] == name
        assert find_method(name) is method and type(make_method(name, CONFIG)) is method
    with pytest.raises(ValueError, match="unknown method 'ewc2'.*finetune"):
        make_method("ewc2", CONFIG)
    with pytest.raises(ValueError, match=r"unknown method 'telapa-fersh' \(did you mean "
                                         r"'telapa-fresh'"):
        make_method("telapa-fersh", CONFIG)


def test_finetune_keeps_and_reset_resets_optimizer(agent):
    state = _state(agent, 1)
    state = state.replace(opt_state=_trained_opt_state(agent, state))
    kept, _ = _start(make_method("finetune", CONFIG), state, _ctx(agent, _visit(1, "B", 0)))
    assert kept is state
    reset, _ = _start(make_method("finetune-reset", CONFIG), state,
                      _ctx(agent, _visit(1, "B", 0)))
    assert _leaves_equal(reset.params, state.params)
    assert _leaves_equal(reset.opt_state, agent.optimizer.init(state.params))
    assert not _leaves_equal(reset.opt_state, state.opt_state)


def test_scratch_draws_fresh_parameters_from_the_visit_key(agent):
    state = _state(agent, 1)
    new, _ = _start(make_method("scratch", CONFIG), state, _ctx(agent, _visit(2, "A", 1), 5))
    assert _leaves_equal(new.params, agent.policy.init(jax.random.key(5)))


@pytest.mark.parametrize("keep", ["first", "latest"])
def test_scratch_reuse_bank(agent, keep):
    data = CONFIG.model_dump()
    data["methods"]["scratch_reuse"]["keep"] = keep
    config = parse_run_config(data)
    method = make_method("scratch-reuse", config)
    first, second = _state(agent, 1), _state(agent, 2)
    empty = method.init(first.params)
    mstate = method.end_task(empty, first, _ctx(agent, _visit(0, "A", 0)))
    mstate = method.end_task(mstate, second, _ctx(agent, _visit(2, "A", 1)))
    assert empty.parts == {"bank": {}} and empty.stored_tasks == ()  # values, not mutated
    stored = first if keep == "first" else second
    assert _leaves_equal(method.eval_params(mstate, "A", _state(agent, 3)), stored.params)
    # a revisit starts from the stored policy with a fresh optimizer
    current = _state(agent, 3)
    current = current.replace(opt_state=_trained_opt_state(agent, current))
    start, after = _start(method, current, _ctx(agent, _visit(4, "A", 2)), mstate)
    assert after is mstate
    assert _leaves_equal(start.params, stored.params)
    assert _leaves_equal(start.opt_state, agent.optimizer.init(stored.params))
    # an unseen task starts from scratch, and is evaluated with the current policy
    fresh, _ = _start(method, current, _ctx(agent, _visit(1, "B", 0), 9), mstate)
    assert _leaves_equal(fresh.params, agent.policy.init(jax.random.key(9)))
    assert _leaves_equal(method.eval_params(mstate, "B", current), current.params)
    assert mstate.stored_tasks == ("A",)


def test_quadratic_penalty_and_its_gradient_by_hand():
    # P = c sum_i u_i (theta_i - a_i)^2, grad P = 2 c u (theta - a)
    params = {"w": jnp.array([[1.0, 2.0], [3.0, 4.0]]), "b": jnp.array([0.5])}
    data = QuadraticData(anchor={"w": jnp.array([[0.0, 2.0], [1.0, 1.0]]), "b": jnp.array([1.5])},
                         weight={"w": jnp.array([[1.0, 2.0], [3.0, 0.0]]), "b": jnp.array([4.0])},
                         scale=jnp.float32(0.5))
    # w: 1*1 + 2*0 + 3*4 + 0*9 = 13; b: 4*1 = 4; 0.5 * 17
    assert float(quadratic_penalty(params, data)) == 8.5
    grad = jax.grad(quadratic_penalty)(params, data)
    np.testing.assert_array_equal(grad["w"], [[1.0, 0.0], [6.0, 0.0]])
    np.testing.assert_array_equal(grad["b"], [-4.0])
    # uniform weights: one scalar per leaf; 0.25 * (1 + 0 + 4 + 9 + 1)
    uniform = data.replace(weight={"w": jnp.float32(1.0), "b": jnp.float32(1.0)},
                           scale=jnp.float32(0.25))
    assert float(quadratic_penalty(params, uniform)) == 3.75


def test_accumulate_quadratic_by_hand():
    data = QuadraticData(anchor={"w": jnp.zeros(2)}, weight={"w": jnp.array([1.0, 3.0])},
                         scale=jnp.float32(2.0))
    new = accumulate_quadratic(data, {"w": jnp.array([5.0, 6.0])}, {"w": jnp.array([2.0, 2.0])},
                               decay=0.5)
    np.testing.assert_array_equal(new.weight["w"], [2.5, 3.5])  # 0.5 u + u_new
    np.testing.assert_array_equal(new.anchor["w"], [5.0, 6.0])  # theta
    assert float(new.scale) == 2.0


def test_l2init_and_ewc_share_the_penalty(agent):
    l2, ewc = make_method("l2init", CONFIG), make_method("ewc", CONFIG)
    assert isinstance(l2, L2Init) and l2.penalty is ewc.penalty is quadratic_penalty
    params = agent.policy.init(jax.random.key(1))
    l2_data, ewc_data = l2.initial_penalty(params), ewc.initial_penalty(params)
    assert float(l2_data.scale) == 0.25 and float(ewc_data.scale) == 2.0  # lam, lam / 2
    assert all(np.shape(u) == () and float(u) == 1.0 for u in jax.tree.leaves(l2_data.weight))
    assert all(float(np.abs(u).max()) == 0.0 for u in jax.tree.leaves(ewc_data.weight))


def test_l2init_penalty_by_hand(agent):
    method = make_method("l2init", CONFIG)
    start = _state(agent, 1, method)
    moved = jax.tree.map(lambda p: p + 0.5, start.params)
    n = sum(p.size for p in jax.tree.leaves(start.params))
    # 0.25 * sum over every parameter of 0.5^2
    np.testing.assert_allclose(method.penalty(moved, start.penalty), 0.25 * 0.25 * n, rtol=1e-5)
    assert float(method.penalty(start.params, start.penalty)) == 0.0


def test_ewc_penalty_and_online_fisher(agent, monkeypatch):
    method = make_method("ewc", CONFIG)
    state = _state(agent, 1, method)
    assert float(method.penalty(jax.tree.map(lambda p: p + 1, state.params), state.penalty)) == 0
    fishers = iter([2.0, 3.0])

    def fake_fisher(agent, params, steps, key):
        assert steps == 12
        return jax.tree.map(lambda p: jnp.full_like(p, next_value), params)

    monkeypatch.setattr("telapa.continual.methods.baselines.diagonal_fisher", fake_fisher)
    next_value = next(fishers)
    mstate = method.end_task(method.init(state.params), state, _ctx(agent, _visit(0, "A", 0)))
    later = _state(agent, 2).replace(penalty=state.penalty)
    next_value = next(fishers)
    mstate = method.end_task(mstate, later, _ctx(agent, _visit(1, "B", 0)))
    assert mstate.extra_env_steps == 24
    assert _leaves_equal(mstate.parts["anchor"], later.params)
    # F = 0.5 * 2 + 3 = 4 everywhere, anchor = the last task's parameters
    started, _ = _start(method, later, _ctx(agent, _visit(2, "A", 1)), mstate)
    moved = jax.tree.map(lambda p: p + 0.1, later.params)
    n = sum(p.size for p in jax.tree.leaves(later.params))
    expected = 0.5 * 4.0 * 4.0 * 0.01 * n
    np.testing.assert_allclose(method.penalty(moved, started.penalty), expected, rtol=1e-4)


def test_diagonal_fisher_matches_a_per_sample_loop(agent):
    params = agent.policy.init(jax.random.key(3))
    key = jax.random.key(11)
    fisher = diagonal_fisher(agent, params, 12, key, chunk=5)
    obs_key, action_key = jax.random.split(key)
    obs = agent.sample_observations(params, 12, obs_key)
    keys = jax.random.split(action_key, 12)
    total = jax.tree.map(jnp.zeros_like, params)
    for i in range(12):
        def log_prob(p, i=i):
            dist, _ = agent.policy(p, jax.tree.map(lambda x: x[i : i + 1], obs))
            return dist.log_prob(jax.lax.stop_gradient(dist.sample(keys[i])))[0]
        total = jax.tree.map(lambda t, g: t + g**2, total, jax.grad(log_prob)(params))
    for f, t in zip(jax.tree.leaves(fisher), jax.tree.leaves(total), strict=True):
        np.testing.assert_allclose(f, t / 12, rtol=1e-4, atol=1e-9)
    assert any(float(f.max()) > 0 for f in jax.tree.leaves(fisher))


def test_sample_observations_shape(agent):
    params = agent.policy.init(jax.random.key(0))
    obs = agent.sample_observations(params, 10, jax.random.key(1))
    assert obs["obs"].shape == (10, 8)
    np.testing.assert_allclose(obs["obs"].sum(axis=1), 1.0)


def test_shrink_perturb_by_hand(agent):
    method = make_method("shrink-perturb", CONFIG)
    state = _state(agent, 1)
    assert _start(method, state, _ctx(agent, _visit(0, "A", 0)))[0].params is state.params
    out, _ = _start(method, state, _ctx(agent, _visit(1, "B", 0), seed=4))
    leaves, treedef = jax.tree.flatten(state.params)
    keys = jax.random.split(jax.random.key(4), len(leaves))
    for new, old, k in zip(jax.tree.leaves(out.params), leaves, keys, strict=True):
        expected = 0.9 * old + 0.01 * jax.random.normal(k, old.shape, old.dtype)
        np.testing.assert_allclose(new, expected, rtol=1e-6)
    assert _leaves_equal(out.opt_state, agent.optimizer.init(out.params))


def test_each_settings_section_is_a_methods_own():
    # every MethodsConfig section is read by the methods that declare it, and only by them
    assert {m.section for m in METHODS.values()} - {None} == set(MethodsConfig.model_fields)
    assert METHOD_SECTIONS == {name: m.section for name, m in BUILTIN_METHODS.items()
                               if m.section is not None}
    for name, section in METHOD_SECTIONS.items():  # validated by the class's own model
        model = BUILTIN_METHODS[name].settings_model
        assert MethodsConfig.model_fields[section].annotation is model
        assert make_method(name, CONFIG).settings is getattr(CONFIG.methods, section)
    assert {METHOD_SECTIONS[n] for n in ("telapa", "telapa-static", "telapa-fresh")} == {
        "telapa"}  # the variants share TeLAPA's settings
    assert make_method("ewc", CONFIG).settings.lam == 4.0
    assert make_method("shrink-perturb", CONFIG).settings.alpha == 0.9
    assert make_method("finetune", CONFIG).settings is None


def test_dff_changes_the_activation_only():
    net = make_method("dff", CONFIG).network(TRAIN.network)
    assert net.activation == "dff" and net.hidden == TRAIN.network.hidden


def test_parts_templates_have_the_stored_states_structure(agent):
    for name in METHODS:
        if name.startswith("telapa"):
            continue  # tested with real archives in tests/continual/test_telapa_run.py
        method = make_method(name, CONFIG)
        state = _state(agent, 1, method)
        mstate = method.end_task(method.init(state.params), state,
                                 _ctx(agent, _visit(0, "A", 0)))
        like = method.parts_like(state.params, list(mstate.stored_tasks), lambda task: agent)
        assert jax.tree.structure(like) == jax.tree.structure(dict(mstate.parts)), name
    assert isinstance(make_method("ewc", CONFIG), EWC)


def test_a_method_is_fixed_once_made():
    """A hook that assigns to the method (the former way to keep state) raises, naming
    the class and the attribute; ``__init__``, a subclass's included, may."""
    class Counting(type(make_method("finetune", CONFIG))):
        name = "counting-finetune"

        def __init__(self, settings=None, **kwargs):
            super().__init__(settings, **kwargs)
            self.visits = 0

        def end_task(self, mstate, learner, ctx):
            self.visits += 1
            return mstate

    method = Counting(None)
    assert method.visits == 0
    with pytest.raises(AttributeError, match=r"Counting\.visits: a method is fixed"):
        method.end_task(MethodState(), None, None)
    with pytest.raises(AttributeError, match="fixed once made"):
        make_method("scratch-reuse", CONFIG).bank = {}


def test_former_hooks_are_refused_by_name():
    """A plug-in written for the former hooks (mutating the method, ``state()`` /
    ``load_state``) is refused before any run, each hook named with its new form."""
    class Former(type(make_method("finetune", CONFIG))):
        name = "former"

        def start_task(self, state, ctx):
            return state

        def state(self):
            return {}

    with pytest.raises(PluginError, match=r"Former is written for the former hooks.*"
                       r"start_task\(state, ctx\) should be start_task\(self, mstate, "
                       r"learner, ctx\).*state\(\) is replaced by init"):
        check_hooks(Former)
    for method in BUILTIN_METHODS.values():
        check_hooks(method)


def _lockstep(methods, hook: str, states, ctxs, mstates=None):
    """The ``hook`` of every seed through the runner's lockstep (`run_hooks`), each from
    its ``mstates`` entry (`init` of its learner's parameters when None)."""
    if mstates is None:
        mstates = [m.init(s.params) for m, s in zip(methods, states, strict=True)]
    return run_hooks([partial(getattr(m, hook), ms, s, c)
                      for m, ms, s, c in zip(methods, mstates, states, ctxs, strict=True)],
                     [PhaseTimer() for _ in methods])


@pytest.mark.parametrize("name", ["finetune-reset", "scratch", "shrink-perturb", "ewc",
                                  "l2init", "scratch-reuse"])
def test_hooks_in_lockstep_equal_each_seed_alone_exactly(agent, name):
    """The end and start hooks of three seeds in lockstep (a batch) give bit for bit what
    each seed's own hook gives (a run of that seed alone)."""
    def seeds():
        methods = [make_method(name, CONFIG) for _ in range(3)]
        states = [_state(agent, seed, m) for seed, m in enumerate(methods)]
        states = [s.replace(opt_state=_trained_opt_state(agent, s)) for s in states]
        return methods, states

    visit = _visit(1, "B", 0)
    ctxs = [_ctx(agent, visit, seed=20 + i) for i in range(3)]
    batched, alone = seeds(), seeds()
    ended = _lockstep(batched[0], "end_task", batched[1], ctxs)
    expected_end = [m.end_task(m.init(s.params), s, c)
                    for m, s, c in zip(*alone, ctxs, strict=True)]
    assert _leaves_equal([dict(m.parts) for m in expected_end], [dict(m.parts) for m in ended])
    assert [m.extra_env_steps for m in ended] == [m.extra_env_steps for m in expected_end]
    got = _lockstep(batched[0], "start_task", batched[1], ctxs, ended)
    expected = [m.start_task(ms, s, c)
                for m, ms, s, c in zip(*alone[:1], expected_end, alone[1], ctxs, strict=True)]
    assert _leaves_equal([learner for learner, _ in expected], [learner for learner, _ in got])


def test_a_subclass_overriding_start_task_does_the_same_in_a_batch(agent):
    """A plug-in that overrides only the per-seed `start_task` of a built-in method gets
    its hook called for every seed of a batch (a batched twin once skipped it), with
    each seed's own result."""
    class Halved(type(make_method("finetune-reset", CONFIG))):
        calls = 0

        def start_task(self, mstate, learner, ctx):
            type(self).calls += 1
            learner, mstate = super().start_task(mstate, learner, ctx)
            return learner.replace(params=jax.tree.map(lambda p: p / 2, learner.params)), mstate

    methods = [Halved(None) for _ in range(3)]
    states = [_state(agent, seed) for seed in range(3)]
    ctxs = [_ctx(agent, _visit(1, "B", 0), seed=s) for s in range(3)]
    got = [learner for learner, _ in _lockstep(methods, "start_task", states, ctxs)]
    assert Halved.calls == 3
    for state, started in zip(states, got, strict=True):
        assert _leaves_equal(jax.tree.map(lambda p: p / 2, state.params), started.params)
        assert _leaves_equal(agent.optimizer.init(state.params), started.opt_state)


def test_scratch_reuse_batch_starts_as_each_seed_alone(agent):
    """Two seeds through a first visit of A, of B and a revisit of A, in lockstep and
    alone: the same starts; the revisit starts from the bank's first-visit policy."""
    visits = [_visit(0, "A", 0), _visit(1, "B", 0), _visit(2, "A", 1)]

    def run(batched: bool) -> list[list[PPOState]]:
        methods = [make_method("scratch-reuse", CONFIG) for _ in range(2)]
        states = [_state(agent, seed) for seed in range(2)]
        mstates = [m.init(s.params) for m, s in zip(methods, states, strict=True)]
        starts = []
        for visit in visits:
            ctxs = [_ctx(agent, visit, seed=10 * visit.index + s) for s in range(2)]
            if batched:
                started = _lockstep(methods, "start_task", states, ctxs, mstates)
            else:
                started = [m.start_task(ms, s, c) for m, ms, s, c in
                           zip(methods, mstates, states, ctxs, strict=True)]
            states, mstates = [s for s, _ in started], [ms for _, ms in started]
            # "training": every seed moves its parameters before the visit ends
            states = [s.replace(params=jax.tree.map(lambda p, i=i: p + 0.1 * (i + 1),
                                                    s.params))
                      for i, s in enumerate(states)]
            mstates = [m.end_task(ms, s, c) for m, ms, s, c
                       in zip(methods, mstates, states, ctxs, strict=True)]
            starts.append(states)
        return starts

    alone = run(batched=False)
    assert _leaves_equal(alone, run(batched=True))
    first = alone[0]
    revisit = alone[2]
    for seed in range(2):
        moved = jax.tree.map(lambda p, seed=seed: p - 0.1 * (seed + 1), revisit[seed].params)
        for x, y in zip(jax.tree.leaves(moved), jax.tree.leaves(first[seed].params),
                        strict=True):
            np.testing.assert_allclose(x, y, atol=1e-6)


@pytest.mark.parametrize("name", ["telapa", "telapa-fresh"])
def test_telapa_fresh_offers_scratchs_network_and_starts_from_it(agent, monkeypatch, name):
    """TeLAPA-Fresh passes FewShotSelectElite the network Scratch starts the visit from
    (TeLAPA passes none), one seed or a batch of two; a fresh choice starts the visit
    from it with a fresh optimizer, no origin elite and the transfer record's origin."""
    from telapa.continual.methods.telapa import transfer
    from telapa.continual.methods.telapa.transfer import ProbeOutcome, TransferChoice

    offered = []

    def choice(fresh):
        offered.append(fresh)
        if fresh is None:
            return None
        probe = ProbeOutcome(0.0, 0.0, 0.0, 0.0, 0.0, True, 5)
        return TransferChoice(params=fresh, index=-1, elite_id=-1, source=-1, tag=-1, slot=-1,
                              lineage=(), candidates=(), env_steps=5, wall_s=0.0, fresh=probe)

    monkeypatch.setattr(transfer, "select_transfer_origin",
                        lambda *a, fresh=None, **k: choice(fresh))
    monkeypatch.setattr(transfer, "select_transfer_origins",
                        lambda *a, fresh=None, **k: [choice(f) for f in (fresh or [None, None])])
    visit = _visit(1, "B", 0)
    methods = [make_method(name, CONFIG, key=jax.random.key(s)) for s in (0, 1)]
    ctxs = [_ctx(agent, visit, seed=7), _ctx(agent, visit, seed=8)]
    states = [_state(agent, 3, methods[0]), _state(agent, 4, methods[1])]
    # an archive of A (selection is replaced: any library will do)
    mstates = [m.init(s.params).storing("A").with_parts(**{"archive-0": object()})
               for m, s in zip(methods, states, strict=True)]
    (alone,) = _lockstep(methods[:1], "start_task", states[:1], ctxs[:1], mstates[:1])
    together = _lockstep(methods, "start_task", states, ctxs, mstates)
    scratch = [_start(make_method("scratch", CONFIG), s, c)[0].params
               for s, c in zip(states, ctxs, strict=True)]
    if name == "telapa":
        assert offered == [None, None, None]
        return
    assert len(offered) == 3
    for fresh, expected in zip(offered, [scratch[0], *scratch], strict=True):
        assert _leaves_equal(fresh, expected)
    for (started, mstate), expected in [(alone, scratch[0]), (together[1], scratch[1])]:
        assert _leaves_equal(started.params, expected)
        assert _leaves_equal(started.opt_state, agent.optimizer.init(expected))
        origin = mstate.parts["origin"]
        assert int(origin["id"]) == -1 and not np.any(origin["lineage"])
        assert mstate.extra_env_steps == 5
        transfer = [e for e in mstate.log if e["event"] == "transfer"][-1]
        assert (transfer["origin"], transfer["index"], transfer["elite_id"]) == \
            ("fresh", None, -1)


def test_method_and_run_states_add_phase_times_the_same_way():
    """``timed(phase, s)`` and ``timed_all({phase: s})`` on both state values add seconds
    phase by phase and leave the original unchanged (states are values)."""
    from telapa.continual.state import RunState

    first = MethodState(timer={"illumination": 1.5})
    later = first.timed("illumination", 0.25).timed_all({"maintenance": 2.0,
                                                         "illumination": 1.0})
    assert later.timer == {"illumination": 2.75, "maintenance": 2.0}
    assert first.timer == {"illumination": 1.5}
    run = RunState(learner=None, timer={"train": 3.0})
    assert run.timed("train", 1.0).timed_all({"eval": 0.5}).timer == {"train": 4.0,
                                                                        "eval": 0.5}
    assert run.timer == {"train": 3.0}
