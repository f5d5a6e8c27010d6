"""Curricula as data: the shipped YAML files, user curricula, and validation errors."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from telapa.config import ConfigError
from telapa.continual import (
    Curriculum,
    Visit,
    curriculum_names,
    load_curriculum,
    parse_curriculum,
)
from telapa.continual import curriculum as curriculum_module

A = "MiniGrid-GoToObject-8x8-N2-v0"
B = "MiniGrid-Fetch-6x6-N2-v0"
C = "MiniGrid-DoorKey-8x8-v0"
D = "MiniGrid-BlockedUnlockPickup-v0"
E = "MiniGrid-ObstructedMaze-1Dlh-v0"
F = "MiniGrid-RedBlueDoors-8x8-v0"
G = "MiniGrid-KeyCorridorS3R3-v0"
H = "MiniGrid-MultiRoom-N2-S4-v0"

# The paper's sequences, written out (App. MiniGrid curriculum, task-order and long ablations).
PAPER = {
    "primary": [
        ("A", A), ("B", B), ("C", C), ("D", D), ("E", E),
        ("A'", A), ("B'", B), ("C'", C), ("D'", D), ("E'", E),
    ],
    "reverse": [
        ("E", E), ("D", D), ("C", C), ("B", B), ("A", A),
        ("E'", E), ("D'", D), ("C'", C), ("B'", B), ("A'", A),
    ],
    "scrambled": [
        ("C", C), ("A", A), ("E", E), ("B", B), ("D", D),
        ("C'", C), ("A'", A), ("E'", E), ("B'", B), ("D'", D),
    ],
    "long": [
        ("A", A), ("B", B), ("C", C), ("D", D), ("E", E), ("F", F), ("G", G), ("H", H),
        ("A'", A), ("B'", B), ("C'", C), ("D'", D), ("E'", E), ("F'", F), ("G'", G), ("H'", H),
    ],
    "smoke": [
        ("A", "MiniGrid-Empty-5x5-v0"), ("B", "MiniGrid-DoorKey-5x5-v0"),
        ("A'", "MiniGrid-Empty-5x5-v0"), ("B'", "MiniGrid-DoorKey-5x5-v0"),
    ],
}  # fmt: skip


def _write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


MUJOCO = {"halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5", "walker2d": "Walker2d-v5",
          "ant": "Ant-v5"}


CALIBRATION = {  # not the paper's: the PPO calibration's single passes (docs/assumptions.md)
    "calibration-tasks": ["A", "B", "C", "D", "E"],
    "calibration-transfer": ["A", "B", "C"],
}


def test_shipped_curricula_are_the_papers():
    assert curriculum_names() == sorted([*PAPER, *MUJOCO, *CALIBRATION])
    primary = dict(PAPER["primary"])
    for name, tags in CALIBRATION.items():
        visits = load_curriculum(name).visits()
        assert [(v.tag, v.env_id) for v in visits] == [(t, primary[t]) for t in tags], name
    for name, expected in PAPER.items():
        cur = load_curriculum(name)
        assert cur.name == name and cur.backend == "jax"
        visits = cur.visits()
        assert [(v.tag, v.env_id) for v in visits] == expected, name
        assert [v.index for v in visits] == list(range(len(expected)))
        assert [v.cycle for v in visits] == [0] * (len(expected) // 2) + [1] * (len(expected) // 2)
        assert all(v.steps is None and v.options == {} for v in visits)
        assert cur.task_ids() == dict(expected[: len(expected) // 2])


def test_mujoco_friction_curricula_are_the_papers():
    """App. MuJoCo: F0.50 -> F0.75 -> F1.00 -> F1.25 -> F1.50, twice, on the native
    backend (issue 53; gymnasium stays the reference); friction is a task option."""
    scales = [0.5, 0.75, 1.0, 1.25, 1.5]
    for name, env_id in MUJOCO.items():
        cur = load_curriculum(name)
        assert cur.backend == "native"
        visits = cur.visits()
        tags = [f"F{s:.2f}" for s in scales]
        assert [v.tag for v in visits] == tags + [t + "'" for t in tags]
        assert [v.options for v in visits] == [{"friction": s} for s in scales] * 2
        assert {v.env_id for v in visits} == {env_id}


def test_bad_friction_option_is_rejected_naming_the_task(tmp_path):
    text = ("name: f\nbackend: gymnasium\ntasks:\n  A: {env_id: Hopper-v5, options: "
            "{friction: -1}}\norder: [A]\n")
    with pytest.raises(ConfigError, match=r"task 'A'.*friction must be a number > 0"):
        load_curriculum(_write(tmp_path, text))
    mixed = ("name: m\nbackend: gymnasium\ntasks: {A: Hopper-v5, B: MiniGrid-Empty-5x5-v0}"
             "\norder: [A, B]\n")
    from telapa.continual.preset import bind_env_family, load_run_config

    cur = load_curriculum(_write(tmp_path, mixed, "mixed.yaml"))
    with pytest.raises(ConfigError, match="mixes env families"):
        bind_env_family(load_run_config("quick"), list(cur.task_ids().values()))


def test_load_by_path_and_path_object():
    path = curriculum_module.CURRICULUM_DIR / "primary.yaml"
    assert load_curriculum(path) == load_curriculum(str(path)) == load_curriculum("primary")


def test_user_curriculum_with_steps_and_three_cycles(tmp_path):
    path = _write(
        tmp_path,
        """
name: mine
tasks:
  A: MiniGrid-Empty-5x5-v0
  B:
    env_id: MiniGrid-DoorKey-5x5-v0
    options: {observe_mission: false}
    steps: 2000
order: [A, B]
cycles: 3
steps_per_visit: 500
""",
    )
    visits = load_curriculum(path).visits()
    assert [v.tag for v in visits] == ["A", "B", "A'", "B'", "A''", "B''"]
    assert [v.task for v in visits] == ["A", "B"] * 3
    assert [v.cycle for v in visits] == [0, 0, 1, 1, 2, 2]
    assert [v.steps for v in visits] == [500, 2000] * 3
    assert visits[1] == Visit(
        1, "B", "B", "MiniGrid-DoorKey-5x5-v0", {"observe_mission": False}, 0, 2000
    )


def test_repeated_tags_in_order():
    cur = parse_curriculum(
        {
            "name": "rep",
            "tasks": {"A": "MiniGrid-Empty-5x5-v0", "B": "MiniGrid-DoorKey-5x5-v0"},
            "order": ["A", "B", "A"],
        }
    )
    assert [v.tag for v in cur.visits()] == ["A", "B", "A'"]
    assert list(cur.task_ids()) == ["A", "B"]


def test_docstring_example_parses():
    text = curriculum_module.__doc__
    block = re.search(r"::\n\n((?:    .*\n)+)", text).group(1)
    cur = parse_curriculum(yaml.safe_load(textwrap.dedent(block)))
    assert [v.tag for v in cur.visits()] == ["A", "B", "A'", "B'", "A''", "B''"]
    assert [v.steps for v in cur.visits()][:2] == [100000, 200000]


def _error(tmp_path: Path, text: str) -> str:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_curriculum(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_unknown_key_names_key_and_file(tmp_path):
    msg = _error(
        tmp_path,
        "name: x\ntasks:\n  A: {env_id: MiniGrid-Empty-5x5-v0, step: 3}\norder: [A]\n",
    )
    assert "unknown key 'tasks.A.step'" in msg


def test_undefined_tag_in_order(tmp_path):
    msg = _error(tmp_path, "name: x\ntasks: {A: MiniGrid-Empty-5x5-v0}\norder: [A, Z]\n")
    assert "'order'" in msg and "'Z'" in msg


def test_unknown_env_id_names_tag_id_and_file(tmp_path):
    msg = _error(tmp_path, "name: x\ntasks: {A: MiniGrid-Nope-v0}\norder: [A]\n")
    assert "task 'A'" in msg and "'MiniGrid-Nope-v0'" in msg
    # the validator's message as written, without pydantic's "Value error, " before it
    assert "mine.yaml: task 'A': unknown env id 'MiniGrid-Nope-v0'" in msg, msg


def test_empty_order(tmp_path):
    msg = _error(tmp_path, "name: x\ntasks: {A: MiniGrid-Empty-5x5-v0}\norder: []\n")
    assert "order is empty" in msg


def test_bad_tag(tmp_path):
    msg = _error(tmp_path, "name: x\ntasks: {A': MiniGrid-Empty-5x5-v0}\norder: [A]\n")
    assert 'task tag "A\'"' in msg


def test_unknown_name_lists_available():
    with pytest.raises(ConfigError, match="unknown curriculum 'nope'.*primary.*smoke"):
        load_curriculum("nope")


def test_a_curriculum_without_backend_takes_its_tasks_backend_the_same_everywhere():
    """MuJoCo tasks ran on the jax backend, MJX, by default once the MJX ports existed
    (some 25x slower than the native batch on a CPU): the default is the tasks'."""
    def backend(*ids: str, **extra) -> str:
        tasks = {f"T{i}": env_id for i, env_id in enumerate(ids)}
        return parse_curriculum({"name": "d", "tasks": tasks, "order": list(tasks),
                                 **extra}).backend

    assert backend("HalfCheetah-v5", "Hopper-v5") == "native"
    assert backend("Ant-v5") == "native"
    assert backend("MiniGrid-Empty-5x5-v0", "MiniGrid-DoorKey-5x5-v0") == "jax"
    assert backend("CartPole-v1") == "gymnasium"
    assert backend("Hopper-v5", backend="jax") == "jax"  # MJX when asked for
    with pytest.raises(ConfigError, match="task 'T0'.*did you mean CartPole-v1"):
        backend("CartPol-v1")


def test_the_score_is_named_sr_only_where_it_counts_successes():
    assert load_curriculum("primary").score_symbol() == "SR"
    assert load_curriculum("hopper").score_symbol() == "SR~"
    # a task's own success target decides: a return threshold counts, a range grades
    data = {"name": "s", "tasks": {"A": {"env_id": "CartPole-v1",
                                         "success": {"return_at_least": 195}}},
            "order": ["A"]}
    assert parse_curriculum(data).score_symbol() == "SR"
    graded = {"env_id": "CartPole-v1",
              "success": {"normalized_return": {"low": 0, "high": 500}}}
    assert parse_curriculum({**data, "tasks": {"A": graded}}).score_symbol() == "SR~"


def test_gymnasium_backend():
    data = {"name": "g", "backend": "gymnasium", "tasks": {"A": "CartPole-v1"}, "order": ["A"]}
    cur = parse_curriculum(data)
    assert isinstance(cur, Curriculum) and cur.task_ids() == {"A": "CartPole-v1"}
    with pytest.raises(ConfigError, match="<dict>.*task 'A'.*'CartPol-v1'"):
        parse_curriculum({**data, "tasks": {"A": "CartPol-v1"}})
    # A MiniGrid-only id on the jax backend is not a gymnasium id here, and vice versa.
    with pytest.raises(ConfigError, match="'CartPole-v1' for backend 'jax'"):
        parse_curriculum({**data, "backend": "jax"})
