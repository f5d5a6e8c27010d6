"""Config loading: presets validate; unknown keys and bad values name the key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

from telapa.config import (
    ConfigError,
    PPOConfig,
    TrainConfig,
    dump_config,
    load_config,
    preset_path,
)
from telapa.envs import default_config

PRESETS = sorted((Path(__file__).resolve().parents[1] / "configs" / "ppo").glob("*.yaml"))


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.name)
def test_presets_load(path):
    assert isinstance(load_config(path), TrainConfig)


def test_mujoco_preset_matches_paper():
    ppo = load_config(preset_path("mujoco")).ppo
    assert (ppo.lr, ppo.n_steps, ppo.batch_size, ppo.epochs) == (3e-4, 2048, 256, 10)
    assert (ppo.gamma, ppo.gae_lambda, ppo.clip_coef, ppo.num_envs) == (0.99, 0.95, 0.2, 8)


def test_default_config_by_env_family():
    assert default_config("MiniGrid-DoorKey-5x5-v0").ppo.num_envs == 16
    assert default_config("Hopper-v5").ppo.n_steps == 2048


def test_unknown_key_names_key_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("ppo:\n  lr: 1.0e-3\n  learning_rat: 0.1\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "ppo.learning_rat" in str(err.value) and str(path) in str(err.value)


def test_unknown_top_level_section(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("optimiser: {}\n")
    with pytest.raises(ConfigError, match="unknown key 'optimiser'"):
        load_config(path)


@pytest.mark.parametrize(
    "text, field",
    [
        ("ppo:\n  lr: -0.001\n", "ppo.lr"),
        ("ppo:\n  gamma: 1.5\n", "ppo.gamma"),
        ("ppo:\n  num_envs: 0\n", "ppo.num_envs"),
        ("network:\n  activation: swish\n", "network.activation"),
        ("network:\n  hidden: [64, -1]\n", "network.hidden.1"),
        ("ppo:\n  num_envs: 3\n  n_steps: 10\n  batch_size: 4\n", "ppo"),
    ],
)
def test_bad_value_names_field(tmp_path, text, field):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"'{field}'" in str(err.value) and str(path) in str(err.value)


def test_batch_size_must_divide_rollout():
    with pytest.raises(ValueError, match="batch_size=4 must divide"):
        PPOConfig(num_envs=3, n_steps=10, batch_size=4)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("ppo: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_dump_roundtrip(tmp_path):
    config = load_config(preset_path("minigrid"))
    path = tmp_path / "dumped.yaml"
    path.write_text(dump_config(config))
    assert load_config(path) == config


def test_a_yaml_file_inside_an_installed_package_is_named_package_colon_file(
        tmp_path, monkeypatch):
    """``PACKAGE:FILE.yaml`` finds a plug-in's own preset or curriculum wherever the
    package is installed; a missing package or file is an error naming both."""
    from telapa.config import ConfigError, resolve_named

    package = tmp_path / "site" / "myplug"
    (package / "presets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "presets" / "fast.yaml").write_text("steps_per_visit: 4096\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    found = resolve_named("myplug:presets/fast.yaml", tmp_path, "run preset")
    assert found == package / "presets" / "fast.yaml"
    with pytest.raises(ConfigError, match=r"myplug:slow\.yaml: package 'myplug' holds no "
                                          r"slow\.yaml \(it ships presets/fast\.yaml\)"):
        resolve_named("myplug:slow.yaml", tmp_path, "run preset")
    with pytest.raises(ConfigError, match="no installed package 'nosuchplug'"):
        resolve_named("nosuchplug:a.yaml", tmp_path, "curriculum")
    # an existing file of that spelling is a path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myplug:presets").mkdir()
    (tmp_path / "myplug:presets" / "fast.yaml").write_text("{}")
    assert resolve_named("myplug:presets/fast.yaml", tmp_path, "x") == \
        Path("myplug:presets/fast.yaml")


def test_yaml_is_read_by_libyaml_with_the_pure_python_parsers_results():
    """Every YAML file the repository ships (configs, the results' run records) parses to
    the same value with the libyaml loader telapa reads with (`SAFE_LOADER`) as with
    PyYAML's pure-Python one; a malformed file is named at the same line and column."""
    import yaml

    from telapa.config import SAFE_LOADER, load_yaml_text

    assert yaml.__with_libyaml__ and SAFE_LOADER is yaml.CSafeLoader
    root = Path(__file__).resolve().parents[1]
    files = sorted(root.glob("configs/**/*.yaml")) + sorted(
        root.glob("results/table1-paper/cells/primary-telapa-s0/*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        assert load_yaml_text(text, str(path)) == load_yaml_text(
            text, str(path), loader=yaml.SafeLoader), path
    broken = "a: 1\nb: [2,\nc: {d: 3\n"
    marks = []
    for loader in (SAFE_LOADER, yaml.SafeLoader):
        with pytest.raises(yaml.YAMLError) as err:
            load_yaml_text(broken, "broken", loader=loader)
        marks.append((err.value.problem_mark.line, err.value.problem_mark.column))
    assert marks[0] == marks[1]
