"""``--set dotted.key=value`` and presets that build on a ``base`` (`telapa.overrides`)."""

from __future__ import annotations

import pytest

from telapa.config import ConfigError, TrainConfig, load_config, preset_path
from telapa.continual.preset import load_run_config
from telapa.overrides import merge, override, parse_sets, parse_value, read_layered


@pytest.mark.parametrize(("text", "value"), [
    ("1e-3", 0.001), ("-2.5E2", -250.0), ("3", 3), ("0.5", 0.5), ("true", True),
    ("null", None), ("[32, 32]", [32, 32]), ("{a: 1}", {"a": 1}), ("relu", "relu"),
    ("2024-01-01", "2024-01-01"), ("a: b: c", "a: b: c"), ("", None),
])
def test_values_are_read_as_yaml_with_exponents_as_numbers(text, value):
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_parse_sets_keeps_order_and_names_bad_items():
    assert parse_sets(["b.c=1", "a=x=y"]) == {"b.c": 1, "a": "x=y"}
    assert list(parse_sets(["z=1", "a=2"])) == ["z", "a"]
    with pytest.raises(ConfigError, match="--set 'lr': expected KEY=VALUE"):
        parse_sets(["lr"])
    with pytest.raises(ConfigError, match="'a..b' is not a dotted key"):
        parse_sets(["a..b=1"])
    with pytest.raises(ConfigError, match="--set a.b is given twice"):
        parse_sets(["a.b=1", "a.b=2"])


def test_merge_is_key_by_key_for_mappings_and_replaces_the_rest():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    out = merge(base, {"a": {"c": [3]}, "e": {"f": 1}})
    assert out == {"a": {"b": 1, "c": [3]}, "d": 1, "e": {"f": 1}}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}  # unchanged


def test_override_validates_with_the_model_and_names_the_key():
    base = load_config(preset_path("minigrid"))
    new = override(base, parse_sets(["ppo.lr=1e-3", "network.hidden=[32, 16]"]))
    assert new.ppo.lr == 0.001 and new.network.hidden == (32, 16)
    assert new.ppo.model_copy(update={"lr": base.ppo.lr}) == base.ppo  # nothing else moved
    assert override(base, {}) is base
    with pytest.raises(ConfigError, match=r"^unknown key 'ppo\.lrr' in --set \(did you "
                                          r"mean 'ppo\.lr'\?\)$"):
        override(base, {"ppo.lrr": 1.0})
    with pytest.raises(ConfigError, match=r"^unknown key 'ppo\.zzz' in --set$"):
        override(base, {"ppo.zzz": 1.0})  # nothing spelled like it
    with pytest.raises(ConfigError, match=r"^invalid value for 'ppo\.lr' in --set: .*greater"):
        override(base, {"ppo.lr": -1})
    with pytest.raises(ConfigError, match="'ppo.epochs' in --set: a boolean where a number"):
        override(base, {"ppo.epochs": True})
    with pytest.raises(ConfigError, match="'ppo.lr' is a value .*not a section"):
        override(base, {"ppo.lr.x": 1})


def test_a_mapping_value_merges_into_its_section():
    base = load_config(preset_path("minigrid"))
    new = override(base, parse_sets(["ppo={epochs: 2, lr: 1e-3}"]))
    assert (new.ppo.epochs, new.ppo.lr) == (2, 0.001)
    assert new.ppo.model_copy(update={"epochs": base.ppo.epochs, "lr": base.ppo.lr}) == base.ppo


def test_override_leaves_unset_fields_unset():
    # a run preset that does not set the latent D keeps leaving it to the env family
    quick = load_run_config("quick")
    new = override(quick, {"methods.ewc.lam": 50})
    assert new.methods.ewc.lam == 50
    assert "feature_dim" not in new.methods.telapa.latent.model_fields_set
    assert new.train == quick.train and new.steps_per_visit == quick.steps_per_visit


def test_a_preset_builds_on_a_named_base_and_merges_nested_keys(tmp_path):
    quick = load_run_config("quick")
    child = tmp_path / "child.yaml"
    child.write_text("base: quick\neval_episodes: 7\n"
                     "methods: {telapa: {qd: {illumination: {iterations: 5}}}}\n")
    config = load_run_config(child)
    assert config.eval_episodes == 7
    ill = config.methods.telapa.qd.illumination
    assert ill.iterations == 5
    # the base's other illumination keys survive the nested merge
    assert ill.eval_episodes == quick.methods.telapa.qd.illumination.eval_episodes == 20
    assert config.steps_per_visit == quick.steps_per_visit and config.train == quick.train


def test_a_base_path_is_relative_to_the_file_and_chains(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").write_text("base: quick\neval_episodes: 9\ntau_min: 0.3\n")
    (tmp_path / "sub" / "b.yaml").write_text("base: ../a.yaml\ntau_min: 0.4\n")
    config = load_run_config(tmp_path / "sub" / "b.yaml")
    assert (config.eval_episodes, config.tau_min) == (9, 0.4)


def test_a_cycle_of_bases_is_refused_naming_the_chain(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match=r"makes a cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load_run_config(tmp_path / "a.yaml")
    (tmp_path / "self.yaml").write_text("base: self.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_run_config(tmp_path / "self.yaml")


def test_bad_bases_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: nope\n")
    with pytest.raises(ConfigError, match=f"{bad}: unknown run preset 'nope'"):
        load_run_config(bad)
    bad.write_text("base: [quick]\n")
    with pytest.raises(ConfigError, match="invalid value for 'base'"):
        load_run_config(bad)
    (tmp_path / "list.yaml").write_text("- 1\n")
    bad.write_text("base: list.yaml\n")
    with pytest.raises(ConfigError, match="holds a list, not a mapping"):
        read_layered(bad, tmp_path, "run preset")
    # in a base, unknown keys are still errors naming them
    bad.write_text("base: quick\nsteps: 3\n")
    with pytest.raises(ConfigError, match="unknown key 'steps'"):
        load_run_config(bad)


def test_train_config_round_trips_through_override():
    config = TrainConfig()
    assert override(config, {"eval.episodes": 3}).eval.episodes == 3


def test_a_run_preset_with_sets_is_found_once_and_validated_once(monkeypatch):
    """`load_run_config(preset, sets)`: one pass from the file to a validated config
    (the preset resolved once, layered, the keys set in its mapping, validated once),
    with the values the old two steps (load, then `override`) gave; errors name the
    preset and the option."""
    from telapa.continual import preset as preset_module

    sets = {"train.ppo.lr": 1e-3, "methods.ewc.lam": 50, "train.network": {"hidden": [32]}}
    two_steps = override(load_run_config("quick"), sets)
    calls = {"resolve": 0, "validate": 0}
    resolve, validate = preset_module.resolve_named, preset_module.validate

    def count(name, fn):
        def counted(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return counted

    monkeypatch.setattr(preset_module, "resolve_named", count("resolve", resolve))
    monkeypatch.setattr(preset_module, "validate", count("validate", validate))
    one_pass = load_run_config("quick", sets)
    assert calls == {"resolve": 1, "validate": 1}
    assert one_pass == two_steps
    assert "feature_dim" not in one_pass.methods.telapa.latent.model_fields_set
    with pytest.raises(ConfigError, match=r"unknown key 'train\.ppo\.lrr' in .*quick\.yaml with "
                                          r"--set"):
        load_run_config("quick", {"train.ppo.lrr": 1.0})
