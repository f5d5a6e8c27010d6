"""The ``native`` MuJoCo backend (issue 53) against the reference, the ``gymnasium``
backend: the same seeds give the same initial states, and the same actions the
IDENTICAL observations, rewards, episode ends, autoresets and sketches at every step,
for every id at frictions 0.5, 1.0 and 1.5; its reset distribution; its errors; and the
batched evaluation of S parameter sets (`NativeAgent.evaluate_batch`) against the
per-set one and the gymnasium backend's."""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from gymnasium.envs.mujoco.mujoco_env import expand_model_path
from scipy import stats

from telapa.config import load_config, preset_path
from telapa.continual.curriculum import parse_curriculum
from telapa.envs import make
from telapa.envs.mujoco import MujocoFamily, reference_return
from telapa.envs.mujoco.native import NativeVectorEnv, load_model, model_warnings
from telapa.envs.mujoco.sketch import SKETCH_DIM, sketch, sketch_batch
from telapa.envs.mujoco.v5 import NATIVE_IDS, defaults
from telapa.rl import Agent, NativeAgent
from telapa.rl.evaluate import evaluate_gym

IDS = list(NATIVE_IDS)
FRICTIONS = (0.5, 1.0, 1.5)
LIMIT = 25
"""A shortened time limit, so that the horizons below see truncations."""


def _pair(env_id: str, friction: float, n: int = 2, seed: int = 11):
    options = {"friction": friction, "max_episode_steps": LIMIT}
    native = make(env_id, "native", num_envs=n, seed=seed, **options)
    gym = make(env_id, "gymnasium", num_envs=n, seed=seed, **options)
    return native, gym


# gymnasium's HalfCheetah loads its XML with mujoco 4's deprecated settotalmass: upstream's
@pytest.mark.filterwarnings("ignore:MuJoCo. compiler attribute 'settotalmass':RuntimeWarning")
@pytest.mark.parametrize("env_id", IDS)
def test_native_steps_bit_identically_to_the_gymnasium_backend(env_id):
    """Same seed -> the same initial qpos/qvel (gymnasium's reset noise, drawn from
    gymnasium's per-env generators); then 60 steps of the same random float32 actions
    (some at the bounds) give identical obs, final_obs, rewards, terminated, truncated
    and features at every step, through episode ends and same-step autoresets."""
    rng = np.random.default_rng(0)
    ends = {"terminated": 0, "truncated": 0}
    for friction in FRICTIONS:
        native, gym = _pair(env_id, friction)
        assert native.spec == gym.spec
        _, obs_n = native.reset(jax.random.key(5))
        _, obs_g = gym.reset(jax.random.key(5))
        for i, single in enumerate(gym.envs.envs):
            data = single.unwrapped.data
            assert np.array_equal(native.datas[i].qpos, data.qpos)
            assert np.array_equal(native.datas[i].qvel, data.qvel)
        np.testing.assert_array_equal(obs_n["obs"], obs_g["obs"])
        for t in range(60):
            a = rng.uniform(-1, 1, (2, native.spec.action_dim)).astype(np.float32)
            if t % 7 == 0:
                a = np.sign(a)  # the bounds themselves
            out_n = native.step(None, a)[1:]
            out_g = gym.step(None, a)[1:]
            for name, x, y in zip(("obs", "reward", "terminated", "truncated"),
                                  out_n[:4], out_g[:4], strict=True):
                x, y = (x["obs"], y["obs"]) if name == "obs" else (x, y)
                assert x.dtype == y.dtype and np.array_equal(x, y), (env_id, friction, t, name)
            info_n, info_g = out_n[4], out_g[4]
            assert np.array_equal(info_n["final_obs"]["obs"], info_g["final_obs"]["obs"])
            assert np.array_equal(info_n["features"], info_g["features"]), (friction, t)
            ends["terminated"] += int(out_n[2].sum())
            ends["truncated"] += int(out_n[3].sum())
    assert ends["truncated"] > 0  # the time limit was reached (and autoreset) ...
    if env_id != "HalfCheetah-v5":  # ... and, where the env can, a fall was
        assert ends["terminated"] > 0


@pytest.mark.parametrize("env_id", ["Hopper-v5", "Ant-v5"])
def test_threads_do_not_change_a_step(env_id):
    """The batch stepped by 3 threads (chunks of 4, 4 and 4 envs; Ant with its
    post-constraint forces) equals it stepped by one, bit for bit, over 40 steps through
    episode ends, with envs of three friction scales and a subset stepped by `advance`;
    a bad thread count is one clear line, and the default follows TELAPA_THREADS."""
    frictions = [0.5, 1.0, 1.5] * 4
    one, three = (NativeVectorEnv(env_id, num_envs=12, seed=4, friction=frictions,
                                  max_episode_steps=LIMIT, threads=t,
                                  reference_return=reference_return(env_id))
                  for t in (1, 3))
    assert (one.threads, three.threads) == (1, 3)
    one.reset(jax.random.key(2))
    three.reset(jax.random.key(2))
    rng = np.random.default_rng(1)
    for t in range(40):
        a = rng.uniform(-1, 1, (12, one.spec.action_dim)).astype(np.float32)
        out_1, out_3 = one.step(None, a)[1:], three.step(None, a)[1:]
        np.testing.assert_array_equal(out_1[0]["obs"], out_3[0]["obs"])
        for x, y in zip(out_1[1:4], out_3[1:4], strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(out_1[4]["features"], out_3[4]["features"])
        if t % 10 == 0:  # a subset of envs, as evaluation steps its running episodes
            idx = np.array([0, 2, 3, 5, 8, 9, 10, 11])  # two threads of 4
            for x, y in zip(one.advance(idx, a[idx]), three.advance(idx, a[idx]),
                            strict=True):
                np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match=rf"{env_id}: threads must be an integer >= 1, "
                                         r"got 0"):
        NativeVectorEnv(env_id, num_envs=4, threads=0, reference_return=1.0)


def test_the_default_thread_count(monkeypatch):
    from telapa.envs.mujoco.native import physics_threads

    monkeypatch.setenv("TELAPA_THREADS", "1")
    assert physics_threads(None, 64) == 1
    monkeypatch.setenv("TELAPA_THREADS", "4")
    assert physics_threads(None, 64) == 4
    assert physics_threads(None, 9) == 2  # at least four envs per thread
    assert physics_threads(None, 7) == 1
    assert physics_threads(None, 1) == 1
    monkeypatch.delenv("TELAPA_THREADS")
    assert physics_threads(None, 64) == len(os.sched_getaffinity(0))


def test_friction_per_env_uses_one_model_per_scale():
    env = NativeVectorEnv("Hopper-v5", num_envs=4, friction=[0.5, 1.5, 0.5, 1.0],
                          reference_return=reference_return("Hopper-v5"))
    assert env.models[0] is env.models[2] and len({id(m) for m in env.models}) == 3
    base = make("Hopper-v5", "native", num_envs=1).models[0].geom_friction
    for model, s in zip(env.models, env.friction, strict=True):
        np.testing.assert_array_equal(model.geom_friction[:, 0], base[:, 0] * s)
        np.testing.assert_array_equal(model.geom_friction[:, 1:], base[:, 1:])


def test_sketch_batch_rows_are_the_per_env_sketch_and_its_equations():
    """Row i of `sketch_batch` equals `sketch` of env i exactly (the same row sums), and
    both follow the module's equations (checked with numpy's own statistics)."""
    rng = np.random.default_rng(1)
    n, m, batch = 17, 6, 32
    args = dict(obs=rng.normal(size=(batch, n)) * 3, prev_obs=rng.normal(size=(batch, n)),
                action=rng.uniform(-1, 1, (batch, m)), prev_action=rng.uniform(-1, 1, (batch, m)),
                reward=rng.normal(size=batch), episode_return=rng.normal(size=batch) * 50,
                t=rng.integers(0, 1000, batch))
    rows = sketch_batch(**args, time_limit=1000, reference_return=5000.0)
    assert rows.shape == (batch, SKETCH_DIM) and rows.dtype == np.float32
    for i in range(batch):
        one = sketch(**{k: v[i] for k, v in args.items()}, time_limit=1000,
                     reference_return=5000.0)
        assert np.array_equal(one, rows[i])
        o, d_o = args["obs"][i], args["obs"][i] - args["prev_obs"][i]
        a, d_a = args["action"][i], args["action"][i] - args["prev_action"][i]
        expected = [o.mean(), o.std(), o.min(), o.max(), np.abs(o).mean(),
                    np.sqrt((o**2).mean()), *np.quantile(o, [0.25, 0.5, 0.75]),
                    d_o.mean(), d_o.std(), np.abs(d_o).mean(), np.abs(d_o).max(),
                    a.mean(), a.std(), a.min(), a.max(), np.abs(a).mean(),
                    np.sqrt((a**2).mean()), np.abs(d_a).mean(), np.sqrt((d_a**2).mean()),
                    args["reward"][i] * 1000 / 5000, args["episode_return"][i] / 5000,
                    (args["t"][i] + 1) / 1000]
        np.testing.assert_allclose(rows[i], expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("env_id", IDS)
def test_reset_distribution_matches_gymnasiums(env_id):
    """200 native resets (seed 0) against 200 of gymnasium's env (seeds 10_000 + j, so
    no draw is shared): a two-sample KS test per observation coordinate, alpha = 0.01
    over all coordinates (Bonferroni), fixed up front; constant coordinates (Ant's
    contact forces at reset) must be equal."""
    n = 200
    _, native = make(env_id, "native", num_envs=n, seed=0).reset()
    single = MujocoFamily().make_single(env_id, {})
    gym = np.stack([single.reset(seed=10_000 + j)[0]["obs"] for j in range(n)])
    native = native["obs"]
    dims = native.shape[1]
    for k in range(dims):
        if np.ptp(gym[:, k]) == 0:
            assert np.all(native[:, k] == gym[0, k]), k
            continue
        p = stats.ks_2samp(native[:, k], gym[:, k]).pvalue
        assert p > 0.01 / dims, (env_id, k, p)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: make("Swimmer-v5", "native"),
     r"unknown env id 'Swimmer-v5' for backend 'native'; available: Ant-v5, HalfCheetah-v5, "
     r"Hopper-v5, Walker2d-v5 \(any gymnasium id runs with backend 'gymnasium'\)"),
    (lambda: make("CartPole-v1", "native"), r"unknown env id 'CartPole-v1' for backend"),
    (lambda: make("Hopper-v5", "warp"), r"unknown backend 'warp'"),
    (lambda: make("Hopper-v5", "native", friction=0.0),
     r"Hopper-v5: friction scale must be a finite number > 0, got 0.0"),
    (lambda: make("Hopper-v5", "native", friction="high"),
     r"Hopper-v5: friction scale must be a finite number > 0, got 'high'"),
    (lambda: NativeVectorEnv("Hopper-v5", friction=float("nan"), reference_return=1.0),
     r"Hopper-v5: friction scale must be a finite number > 0, got nan"),
    (lambda: NativeVectorEnv("Hopper-v5", num_envs=2, friction=[1.0], reference_return=1.0),
     r"Hopper-v5: 1 friction scales for 2 envs"),
    (lambda: make("Hopper-v5", "native", ctrl_cost_weight=0.1),
     r"option\(s\) ctrl_cost_weight not supported by backend 'native'"),
    (lambda: make("Hopper-v5", "native", max_episode_steps=0),
     r"max_episode_steps must be an integer >= 1, got 0"),
    (lambda: make("Hopper-v5", "native", num_envs=2).step(None, np.zeros((2, 4))),
     r"Hopper-v5: expected actions of shape \(2, 3\), got \(2, 4\)"),
    (lambda: make("Hopper-v5", "native", num_envs=2).step(None, np.full((2, 3), 1.5)),
     r"Hopper-v5: action \[1.5, 1.5, 1.5\] for env 0 is out of range; valid actions are "
     r"\[-1.0, 1.0\]"),
])
def test_bad_input_is_one_clear_line(call, message):
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_a_native_curriculum_names_a_bad_task_option():
    data = {"name": "n", "backend": "native", "order": ["A"],
            "tasks": {"A": {"env_id": "Hopper-v5", "options": {"reset_noise_scale": 0.1}}}}
    with pytest.raises(ValueError, match=r"task 'A': Hopper-v5: option\(s\) "
                                         r"reset_noise_scale not supported"):
        parse_curriculum(data, "inline")
    ok = parse_curriculum({**data, "tasks": {"A": {"env_id": "Walker2d-v5", "options": {
        "friction": 0.75}}}}, "inline")
    assert ok.backend == "native"


@pytest.fixture(scope="module")
def agent():
    config = load_config(preset_path("mujoco"))
    config = config.model_copy(update={"ppo": config.ppo.model_copy(update=dict(
        num_envs=2, n_steps=16, batch_size=32, epochs=1))})
    return Agent("Hopper-v5", config, backend="native",
                 env_options={"friction": 0.5, "max_episode_steps": 40})


def test_the_native_backend_has_its_agent(agent):
    """(PPO on native trains in tests/continual/test_mujoco_run.py.)"""
    assert type(agent) is NativeAgent and agent.backend == "native"
    assert type(Agent(agent.env, agent.config)) is NativeAgent


def test_evaluate_batch_is_one_batch_equal_to_per_set_and_gymnasium_evaluation(agent):
    """S = 3 parameter sets x E = 4 episodes as one batch of 12 envs: set i equals
    `evaluate` of set i alone with the same key (bit for bit), and that equals the
    gymnasium backend's `evaluate_gym` with E copies and the jitted act (the documented
    key scheme; the native evaluation's mean is numpy's, `HostActions`, so to float32
    rounding: 40 steps keep it within 1e-4); different keys give different episodes."""
    sets = [agent.policy.init(jax.random.key(s)) for s in range(3)]
    stacked = jax.tree.map(lambda *x: np.stack(x), *sets)
    keys = jax.random.split(jax.random.key(7), 3)
    batch = agent.evaluate_batch(stacked, 4, keys)
    gym = make("Hopper-v5", "gymnasium", num_envs=4, **agent.env_options)
    act = agent.gym_act(agent.config.eval.deterministic)
    for params, key, result in zip(sets, keys, batch, strict=True):
        alone = agent.evaluate(params, 4, key)
        np.testing.assert_array_equal(result.returns, alone.returns)
        np.testing.assert_array_equal(result.lengths, alone.lengths)
        np.testing.assert_array_equal(result.features, alone.features)
        reference = evaluate_gym(gym, act, params, 4, key, 40, agent.competence)
        np.testing.assert_array_equal(result.lengths, reference.lengths)
        np.testing.assert_allclose(result.returns, reference.returns, rtol=1e-4)
        np.testing.assert_allclose(result.features, reference.features, rtol=1e-3, atol=1e-4)
        assert result.features.shape == (4, 40, SKETCH_DIM)
    assert not np.array_equal(batch[0].returns, agent.evaluate(sets[0], 4, keys[1]).returns)
    lean = agent.evaluate_batch(stacked, 4, keys, features=False)
    assert lean[2].features.shape[1] == 0
    np.testing.assert_array_equal(lean[2].returns, batch[2].returns)


def test_feature_steps_keep_the_first_steps_and_skip_the_sketch_after_them(agent, monkeypatch):
    """``feature_steps=k`` (illumination's T_max) keeps the first k steps' features of the
    full evaluation bit for bit, with the same returns and lengths, and the env computes
    the sketch for those k steps only (it was 27% of a candidate's evaluation); the env's
    sketch setting is restored afterwards."""
    import telapa.envs.mujoco.native as native

    sets = [agent.policy.init(jax.random.key(s)) for s in range(2)]
    stacked = jax.tree.map(lambda *x: np.stack(x), *sets)
    keys = jax.random.split(jax.random.key(3), 2)
    full = agent.evaluate_batch(stacked, 3, keys)
    rows = []
    real = native.sketch_batch
    monkeypatch.setattr(native, "sketch_batch", lambda **kw: rows.append(len(kw["obs"]))
                        or real(**kw))
    short = agent.evaluate_batch(stacked, 3, keys, feature_steps=12)
    for a, b in zip(full, short, strict=True):
        np.testing.assert_array_equal(a.returns, b.returns)
        np.testing.assert_array_equal(a.lengths, b.lengths)
        assert b.features.shape == (3, 12, SKETCH_DIM)
        np.testing.assert_array_equal(a.features[:, :12], b.features)
    lengths = np.concatenate([r.lengths for r in full])  # 6 envs
    assert len(rows) == 12 and sum(rows) == np.minimum(lengths, 12).sum()
    assert lengths.max() > 12  # the full evaluation sketched more
    assert agent._eval_envs[6].sketch
    longer = agent.evaluate_batch(stacked, 3, keys, feature_steps=500)  # > the time limit
    np.testing.assert_array_equal(longer[1].features, full[1].features)
    with pytest.raises(ValueError, match="feature_steps must be an integer >= 1"):
        agent.evaluate_batch(stacked, 3, keys, feature_steps=0)


def test_telapa_imports_without_mujoco_until_a_native_env_is_made():
    """The GPU image of benchmarks/gpu_study.sh has gymnasium but no mujoco: the family
    lists its native ids without importing mujoco (`telapa.envs.mujoco.v5`)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['mujoco'] = None\n"
            "import telapa.envs, telapa.rl, telapa.continual.runner\n"
            "from telapa.envs import native_env_ids\n"
            "assert 'Hopper-v5' in native_env_ids()\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.filterwarnings(r"ignore:os.fork\(\) was called:RuntimeWarning")
def test_a_forked_child_steps_with_threads_of_its_own():
    """Helper threads do not survive a fork: a child that steps a threaded batch makes
    its own (it would wait forever on the parent's)."""
    import multiprocessing

    env = NativeVectorEnv("HalfCheetah-v5", num_envs=8, threads=2, reference_return=1.0)
    env.reset(jax.random.key(0))
    env.step(None, np.zeros((8, 6), np.float32))  # the parent's helpers exist now

    def child(queue):
        env.step(None, np.zeros((8, 6), np.float32))
        queue.put(float(env._qpos.sum()))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    try:
        proc.join(timeout=30)
        assert proc.exitcode == 0, "the forked child did not finish stepping"
    finally:
        proc.kill()
    assert np.isfinite(queue.get(timeout=5))


@pytest.fixture
def unshown(monkeypatch):
    """A process in which no MuJoCo message has been given as a warning yet."""
    from telapa.envs.mujoco import native

    monkeypatch.setattr(native, "_SHOWN", set())


TOTALMASS_XML = """<mujoco><compiler settotalmass="3"/><worldbody><body><freejoint/>
<geom type="sphere" size="0.1"/></body></worldbody></mujoco>"""
"""A model whose load gives mujoco 4's 'settotalmass is deprecated' warning."""


@pytest.mark.parametrize("env_id", NATIVE_IDS)
def test_native_models_are_gymnasiums_without_a_deprecated_attribute(env_id):
    """`load_model` compiles gymnasium's XML without ``settotalmass`` (half_cheetah.xml's
    14) and sets the total mass after: every array of the model equals gymnasium's
    compile of the file, and the load gives MuJoCo no warning (HalfCheetah's gave
    'settotalmass is deprecated' at every load, and ``MUJOCO_LOG.TXT`` in the working
    directory)."""
    import mujoco

    xml = expand_model_path(defaults(env_id)["xml_file"])
    seen: list[str] = []
    mujoco.set_mju_user_warning(seen.append)
    try:
        want = mujoco.MjModel.from_xml_path(xml)
        from_file = list(seen)
        got = load_model(xml)
    finally:
        mujoco.set_mju_user_warning(None)
    assert seen == from_file, seen  # nothing more than gymnasium's own load
    if env_id == "HalfCheetah-v5":
        assert len(from_file) == 1 and "settotalmass" in from_file[0]
        assert want.body_mass.sum() == pytest.approx(14.0)
    arrays = [name for name in dir(want)
              if not name.startswith("_") and isinstance(getattr(want, name), np.ndarray)]
    assert len(arrays) > 100
    for name in arrays:
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    for field in ("timestep", "gravity", "integrator"):
        assert np.array_equal(getattr(got.opt, field), getattr(want.opt, field)), field


def test_a_native_env_loads_its_models_without_a_warning(capfd, unshown):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        NativeVectorEnv("HalfCheetah-v5", num_envs=2, friction=[0.5, 1.0],
                        reference_return=1.0)
    assert not [w for w in caught if "MuJoCo" in str(w.message)]
    assert "settotalmass" not in capfd.readouterr().err


def test_mujoco_model_warnings_become_python_warnings(capfd, unshown):
    """MuJoCo prints a warning at a model's load on stderr (and appends it to
    ``MUJOCO_LOG.TXT`` in the working directory); `model_warnings` turns it into a Python
    RuntimeWarning instead, and leaves a handler the user installed in charge."""
    import mujoco

    with pytest.warns(RuntimeWarning, match="MuJoCo: compiler attribute 'settotalmass'"):
        with model_warnings():
            mujoco.MjModel.from_xml_string(TOTALMASS_XML)
    assert "settotalmass" not in capfd.readouterr().err
    assert mujoco.get_mju_user_warning() is None  # the handler was only for the load
    seen = []
    mujoco.set_mju_user_warning(seen.append)
    try:
        with model_warnings():
            mujoco.MjModel.from_xml_string(TOTALMASS_XML)
    finally:
        mujoco.set_mju_user_warning(None)
    assert any("settotalmass" in m for m in seen)


def test_a_model_warning_is_given_once_per_process(unshown):
    """Each `warnings.catch_warnings` clears what Python's filter has shown, so a run on
    two frictions showed the 'settotalmass' warning at every visit; it is given once."""
    import warnings

    import mujoco

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            with model_warnings():
                mujoco.MjModel.from_xml_string(TOTALMASS_XML)
            with warnings.catch_warnings():  # as JAX enters them, between the visits
                pass
    assert sum("settotalmass" in str(w.message) for w in caught) == 1


def test_gymnasium_backend_model_warnings_become_python_warnings(capfd, unshown):
    """The gymnasium backend's envs load the same v5 models through gymnasium.make; their
    'settotalmass' line becomes the same Python warning, not a stderr line per env."""
    from telapa.envs import make

    with pytest.warns(RuntimeWarning, match="MuJoCo: compiler attribute 'settotalmass'"):
        make("HalfCheetah-v5", "gymnasium", num_envs=2, seed=0).close()
    assert "settotalmass" not in capfd.readouterr().err
