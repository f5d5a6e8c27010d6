"""The LineWalk env family of ``examples/linewalk`` (telapa_linewalk.family), in process:
its JAX port steps exactly as the gymnasium env it ports, on every action sequence of a
few walks; its codec stores the sketch exactly; and telapa's registry treats it as a
family (ids, options, competence). tests/test_examples.py runs it from the installed
package."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from telapa.config import ConfigError
from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import bind_env_family, load_run_config
from telapa.envs.family import ReturnAtLeast
from telapa.envs.registry import family_of, jax_env_ids, make, register_family

SOURCE = Path(__file__).resolve().parents[2] / "examples" / "linewalk" / "src"
WALKS = [(1, 1), (3, 8), (7, 7), (4, 9)]
"""(length, limit): one step to the goal; the example's task A; a goal reached on the last
step (terminated, not truncated); a longer walk (2^9 action sequences)."""


@pytest.fixture
def linewalk(plugin_site, monkeypatch):
    """The example package, imported from its source folder (registering LineWalk-v0);
    the registries and modules are put back afterwards."""
    monkeypatch.syspath_prepend(str(SOURCE))
    from telapa_linewalk import family

    yield family
    for name in [n for n in sys.modules if n.split(".")[0] == "telapa_linewalk"]:
        del sys.modules[name]


def _jax_episodes(env, actions: np.ndarray) -> tuple[np.ndarray, ...]:
    """The port's reset observation and every step's (obs, reward, terminated, truncated,
    features) for each row of ``actions`` (N, T), in one compiled scan."""
    def episode(row):
        state, obs = env.reset(jax.random.key(0))

        def step(state, action):
            state, obs, reward, terminated, truncated, info = env.step(state, action)
            return state, (obs["obs"], reward, terminated, truncated, info["features"])

        return obs["obs"], jax.lax.scan(step, state, row)[1]

    first, steps = jax.jit(jax.vmap(episode))(jnp.asarray(actions, jnp.int32))
    return (np.asarray(first), *map(np.asarray, steps))


@pytest.mark.parametrize(("length", "limit"), WALKS)
def test_the_jax_port_steps_as_the_gymnasium_env_on_every_action_sequence(
        linewalk, length, limit):
    family = linewalk.LineWalkFamily()
    options = {"length": length, "limit": limit}
    actions = np.array(list(itertools.product((0, 1), repeat=limit)))
    first, obs, rewards, terminated, truncated, features = _jax_episodes(
        family.make_jax("LineWalk-v0", options), actions)
    env = family.make_single("LineWalk-v0", options)  # the gymnasium backend's env
    returns = []
    for i, row in enumerate(actions):
        gym_obs, _ = env.reset(seed=0)
        np.testing.assert_array_equal(gym_obs["obs"], first[i])
        for t, action in enumerate(row):
            gym_obs, reward, ended, timeout, info = env.step(int(action))
            where = f"sequence {row.tolist()}, step {t}"
            np.testing.assert_array_equal(gym_obs["obs"], obs[i, t], err_msg=where)
            np.testing.assert_array_equal(info["features"], features[i, t], err_msg=where)
            assert (np.float32(reward), ended, timeout) == (
                rewards[i, t], terminated[i, t], truncated[i, t]), where
            if ended or timeout:
                returns.append(rewards[i, : t + 1].sum())
                break
        else:
            pytest.fail(f"sequence {row.tolist()}: no episode end in {limit} steps")
    assert set(returns) == {1.0, 2.0}  # all right reaches the goal, all left times out


def test_the_port_by_hand(linewalk):
    """Length 3, limit 8: right, left at the wall... by hand: obs = [pos / 3, left / 8],
    the sketch pos / 8; the goal at the third right step gives 2 and terminates."""
    from telapa_linewalk.jax_port import JaxLineWalk

    env = JaxLineWalk(length=3, limit=8)
    state, obs = env.reset(jax.random.key(0))
    np.testing.assert_allclose(obs["obs"], [0.0, 1.0])
    expected = [  # action -> position, reward, terminated
        (1, 1, 0.0, False), (0, 0, 0.0, False), (0, 0, 0.0, False),
        (1, 1, 0.0, False), (1, 2, 0.0, False), (1, 3, 2.0, True)]
    for steps, (action, position, reward, ended) in enumerate(expected, start=1):
        state, obs, r, terminated, truncated, info = env.step(state, jnp.int32(action))
        np.testing.assert_allclose(obs["obs"], [position / 3, (8 - steps) / 8], rtol=1e-6)
        np.testing.assert_allclose(info["features"], [position / 8], rtol=1e-6)
        assert (float(r), bool(terminated), bool(truncated)) == (reward, ended, False)


def test_the_codec_stores_the_sketch_exactly(linewalk):
    family = linewalk.LineWalkFamily()
    env = family.make_jax("LineWalk-v0", {"length": 4, "limit": 9})
    actions = np.array(list(itertools.product((0, 1), repeat=9)))
    features = _jax_episodes(env, actions)[-1]
    codec = family.codec(env.spec)
    assert codec.denominators == (9,) and codec.exact
    assert codec.roundtrip_exact(features)
    u8, _, _ = codec.encode(features)  # the stored integer is the position:
    assert np.asarray(u8)[-1, :4, 0].tolist() == [1, 2, 3, 4]  # always right: the goal at 4


def test_the_family_through_telapa_s_registry(linewalk, tmp_path):
    register_family(linewalk.LineWalkFamily)
    assert family_of("LineWalk-v0").name == "linewalk"
    assert family_of("telapa_linewalk:LineWalk-v0").name == "linewalk"
    assert family_of("CartPole-v1").name == "generic"
    assert "LineWalk-v0" in jax_env_ids()
    env = make("LineWalk-v0", "jax", length=5, limit=10)
    assert (env.spec.feature_dim, env.spec.max_steps, env.spec.n_actions) == (1, 10, 2)
    competence = family_of("LineWalk-v0").competence("LineWalk-v0")
    assert competence == ReturnAtLeast(2.0)
    assert float(competence(np.array([1.0, 2.0, 2.0, 1.0]))) == 0.5
    # the curriculum next to the package: jax backend, no success line, D = 1
    curriculum = load_curriculum(SOURCE / "telapa_linewalk" / "linewalk-family.yaml")
    assert curriculum.backend == "jax"
    assert all(task.success is None for task in curriculum.tasks.values())
    config = bind_env_family(load_run_config(family_of("LineWalk-v0").run_preset),
                             list(curriculum.task_ids().values()))
    assert config.methods.telapa.latent.feature_dim == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"width": 3}, "task 'A': LineWalk-v0: unknown LineWalk task option(s) width; valid: "
                   "length, limit"),
    ({"length": 2.5}, "task 'A': LineWalk-v0: option length must be an integer, got 2.5"),
    ({"length": 9}, "task 'A': LineWalk-v0: LineWalk needs 1 <= length <= limit, got "
                    "length=9, limit=8"),
    ({"limit": 70_000}, "task 'A': LineWalk-v0: option limit must be at most 65535"),
])
def test_bad_task_options_are_refused_when_the_curriculum_is_read(linewalk, tmp_path,
                                                                   options, message):
    register_family(linewalk.LineWalkFamily)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "backend": "jax", "order": ["A"],
                                    "tasks": {"A": {"env_id": "LineWalk-v0",
                                                    "options": options}}}))
    with pytest.raises(ConfigError) as err:
        load_curriculum(path)
    assert message in str(err.value) and "\n" not in str(err.value)
