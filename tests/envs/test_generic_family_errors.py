"""Plug-in gymnasium envs of the generic family (`telapa.envs.generic`) that telapa cannot
use are refused in one line naming the env and what is wrong, before any work (probe 5):
an env that needs a task option to be made, or whose observation size is set by one
(fault 1), a Dict observation (fault 2), an action space with infinite bounds (fault 3)
and an observation of another shape than its space's (fault 4). None of these trains."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from telapa.cli import main
from telapa.config import ConfigError
from telapa.envs.generic import GenericFamily, VectorObsFeatures
from telapa.envs.gym_backend import ACTION_SPACES, scalar_bound

FAULT_RUN = Path(__file__).parents[1] / "faults" / "fault_run.yaml"


class Line(gymnasium.Env):
    """A one-hot position over ``size`` cells: the observation's size is the option."""

    def __init__(self, size):
        self.size = size
        self.observation_space = spaces.Box(0, 1, (size,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.p = 0
        return self._obs(), {}

    def _obs(self):
        obs = np.zeros(self.size, np.float32)
        obs[self.p] = 1
        return obs

    def step(self, action):
        self.p = min(self.size - 1, max(0, self.p + (1 if int(action) == 1 else -1)))
        done = self.p == self.size - 1
        return self._obs(), float(done), done, False, {}


class DictObs(Line):
    def __init__(self, size=3):
        super().__init__(size)
        self.observation_space = spaces.Dict({"a": self.observation_space})

    def _obs(self):
        return {"a": super()._obs()}


class BadObs(Line):
    """Says (2,), gives 3 values."""

    def __init__(self):
        super().__init__(3)
        self.observation_space = spaces.Box(0, 1, (2,), np.float32)


class Unbounded(Line):
    def __init__(self):
        super().__init__(2)
        self.action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def step(self, action):
        return super().step(int(np.asarray(action).sum() > 0))


ENVS = {
    "TelapaGenLineReq-v0": (Line, {}),
    "TelapaGenLineDef-v0": (Line, {"size": 3}),
    "TelapaGenDict-v0": (DictObs, {}),
    "TelapaGenBadObs-v0": (BadObs, {}),
    "TelapaGenPInf-v0": (Unbounded, {}),
}
for _id, (_cls, _kwargs) in ENVS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(_id, entry_point=_cls, max_episode_steps=20, kwargs=_kwargs)


def curriculum(tmp_path: Path, tasks: dict[str, str]) -> Path:
    """A gymnasium curriculum ``c`` of ``tasks`` (tag -> flow mapping), visited in order."""
    path = tmp_path / "c.yaml"
    lines = "".join(f"  {tag}: {task}\n" for tag, task in tasks.items())
    path.write_text(f"name: c\nbackend: gymnasium\ntasks:\n{lines}"
                    f"order: [{', '.join(tasks)}]\ncycles: 1\n")
    return path


def run_fails(path: Path, tmp_path: Path, capsys) -> str:
    """``telapa run`` of ``path``, which must end in one ``telapa: error:`` line (exit
    status 2, no traceback) before its run directory is made; returns the line."""
    capsys.readouterr()
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--curriculum", str(path), "--method", "finetune", "--preset",
              str(FAULT_RUN), "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("telapa: error: ")]
    assert len(lines) == 1, err[-3000:]
    assert not out.exists()
    return lines[0]


# --- fault 1: D is the observation's size as the task's options make the env ----------

def test_the_generic_feature_dim_is_the_size_the_task_options_make():
    """Fault 1: D came from the env made without the task's options: an env whose
    constructor needs an option was a TypeError traceback, one whose observation size an
    option sets got its registered size."""
    family = GenericFamily()
    assert family.feature_dim("TelapaGenLineReq-v0", {"size": 4}) == 4
    assert family.feature_dim("TelapaGenLineDef-v0", {"size": 5}) == 5
    assert family.feature_dim("TelapaGenLineDef-v0") == 3
    message = ("TelapaGenLineReq-v0 cannot be made without task options (the generic env "
               "family makes it to size its sketch, D = the observation's size): TypeError:")
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        family.feature_dim("TelapaGenLineReq-v0")
    assert "missing 1 required positional argument: 'size'" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=re.escape(
            "TelapaGenLineReq-v0 cannot be made with options {'size': -1}: ")):
        family.feature_dim("TelapaGenLineReq-v0", {"size": -1})


def test_tasks_whose_options_give_other_sketch_sizes_are_one_line_naming_them(
        tmp_path, capsys):
    """Fault 1(a): a run has one latent space of one D, so tasks whose options make
    observations of different sizes are refused, naming each task and its D."""
    path = curriculum(tmp_path, {"A": "{env_id: TelapaGenLineReq-v0, options: {size: 4}}",
                                 "B": "{env_id: TelapaGenLineReq-v0, options: {size: 6}}"})
    line = run_fails(path, tmp_path, capsys)
    assert line.startswith("telapa: error: curriculum 'c': tasks have sketches of "
                           "different dimensions D: "), line
    assert ("""task 'A' (TelapaGenLineReq-v0 with options {"size": 4}): D = 4, task 'B' """
            """(TelapaGenLineReq-v0 with options {"size": 6}): D = 6""") in line, line


def test_an_option_that_sets_the_observation_size_sets_d(tmp_path):
    """Fault 1(b): a registered default size 3 and tasks of size 4 were refused with
    ``its env family says feature_dim = 3``; the run's D is 4."""
    from telapa.cli.run import build_spec

    path = curriculum(tmp_path, {"A": "{env_id: TelapaGenLineDef-v0, options: {size: 4}}",
                                 "B": "{env_id: TelapaGenLineDef-v0, options: {size: 4}}"})
    spec = build_spec(str(path), "finetune", 0, str(FAULT_RUN), None)
    assert spec.config.methods.telapa.latent.feature_dim == 4


# --- fault 2: an observation that is not a Box ------------------------------------------

def test_a_dict_observation_is_one_line_naming_the_env_and_what_it_needs(tmp_path, capsys):
    """Fault 2: a Dict observation was ``TypeError: int() argument must be ... not
    'NoneType'`` (a traceback)."""
    expected = ("TelapaGenDict-v0: its observation space Dict('a': Box(0.0, 1.0, (3,), "
                "float32)) is not a Box: an env of the generic env family needs a Box "
                "observation (wrap it in gymnasium.wrappers.FlattenObservation")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        GenericFamily().feature_dim("TelapaGenDict-v0")
    with pytest.raises(ValueError, match=re.escape(expected)):
        VectorObsFeatures(gymnasium.make("TelapaGenDict-v0"))
    line = run_fails(curriculum(tmp_path, {"A": "TelapaGenDict-v0"}), tmp_path, capsys)
    assert expected in line, line


# --- fault 3: an action space with infinite bounds --------------------------------------

def test_infinite_action_bounds_are_refused_before_any_work(tmp_path, capsys):
    """Fault 3: a Box action space with infinite bounds was refused at the first step
    with ``action [nan] for env 0 is out of range; valid actions are [-inf, inf]``."""
    with pytest.raises(ValueError, match=re.escape("X-v0: action bound inf is not finite")):
        scalar_bound(np.array([np.inf, np.inf]), "X-v0")
    assert scalar_bound(np.array([2.0, 2.0]), "X-v0") == 2.0
    line = run_fails(curriculum(tmp_path, {"A": "TelapaGenPInf-v0"}), tmp_path, capsys)
    assert ("curriculum 'c' task 'A' (TelapaGenPInf-v0, backend 'gymnasium'): "
            "TelapaGenPInf-v0: action bound -inf is not finite (declare the action space "
            f"with finite bounds): {ACTION_SPACES}") in line, line
    assert "nan" not in line


# --- fault 4: an observation of another shape than its space's --------------------------

# gymnasium's own env checker warns of the bad observation first: the fault under test
@pytest.mark.filterwarnings("ignore:.*not within the observation space:UserWarning")
def test_an_observation_of_another_shape_than_its_space_names_both(tmp_path, capsys):
    """Fault 4: three values from an env whose space says (2,) was ``Output array is the
    wrong shape``."""
    expected = ("TelapaGenBadObs-v0: the env gave an observation of shape (3,), but its "
                "observation space Box(0.0, 1.0, (2,), float32) has shape (2,)")
    env = VectorObsFeatures(gymnasium.make("TelapaGenBadObs-v0"))
    with warnings.catch_warnings(), pytest.raises(ValueError, match=re.escape(expected)):
        warnings.simplefilter("ignore")  # gymnasium's checker: not within the space
        env.reset(seed=0)
    line = run_fails(curriculum(tmp_path, {"A": "TelapaGenBadObs-v0"}), tmp_path, capsys)
    assert ("curriculum 'c' task 'A' (TelapaGenBadObs-v0, backend 'gymnasium'): "
            + expected) in line, line


@pytest.mark.parametrize(("env_id", "says"), [
    ("TelapaGenPInf-v0", "TelapaGenPInf-v0: action bound -inf is not finite"),
    ("TelapaGenLineReq-v0", "TelapaGenLineReq-v0 cannot be made without task options"),
])
def test_train_refuses_an_env_it_cannot_train_on_before_its_run_directory(
        tmp_path, capsys, env_id, says):
    """``telapa train --env`` of such an env is one line naming it, and leaves no run
    directory (it ended in a traceback after writing ``config.yaml`` there)."""
    out = tmp_path / "train"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", env_id, "--backend", "gymnasium", "--steps", "1000",
              "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("telapa: error: ")]
    assert len(lines) == 1 and f"--env {env_id} (backend 'gymnasium'): " in lines[0]
    assert says in lines[0], lines[0]
    assert not out.exists()
