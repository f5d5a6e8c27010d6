"""Plug-ins (`telapa.plugins`): env ids as ``module:Id``, the ``telapa.methods`` and
``telapa.families`` entry points (loaded lazily, a built-in's name refused), ``--import``
before anything is validated and recorded with the run, plug-in settings sections, and a
curriculum's success target with its competence maths. The examples, installed as a user
would, are run by tests/test_examples.py."""

from __future__ import annotations

import json
import shutil
import sys

import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from plugin_modules import (
    PLUG_METHOD,
    WALK_ENV,
    import_route_module,
    install_entry_points,
    write_module,
)
from pydantic import Field, NonNegativeFloat, create_model

from telapa.cli import main
from telapa.cli.common import CLIError
from telapa.cli.run import build_spec
from telapa.config import ConfigError, StrictModel, validate
from telapa.continual.curriculum import load_curriculum, parse_curriculum
from telapa.continual.methods import Finetune
from telapa.continual.preset import (
    RunConfig,
    load_run_config,
    methods_config,
    parse_run_config,
)
from telapa.continual.registry import (
    BUILTIN_METHODS,
    MethodsConfig,
    bind_method,
    find_method,
    make_method,
    method_names,
    method_section,
    register_method,
)
from telapa.continual.rundir import RunDir
from telapa.continual.spec import RunSpec
from telapa.continual.sweep import load_sweep
from telapa.envs.family import NormalizedReturn, ReturnAtLeast
from telapa.envs.registry import check_env_id, families, family_of, make, register_family
from telapa.overrides import override
from telapa.plugins import METHODS_GROUP, PluginError

QUICK = load_run_config("quick")


def _gym_curriculum(env_id: str, **task) -> dict:
    return {"name": "plug", "backend": "gymnasium", "tasks": {"A": {"env_id": env_id, **task}},
            "order": ["A"]}


# --- success targets ------------------------------------------------------------------

def test_return_at_least_is_the_share_of_returns_reaching_the_target():
    c = ReturnAtLeast(2.0)
    returns = [1.0, 2.0, 3.0, 1.5]  # two of four reach 2
    assert c(np.array(returns)) == pytest.approx(0.5)
    assert float(c(jnp.array(returns))) == pytest.approx(0.5)
    assert c.episode_score(np.array([1.999, 2.0])).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="finite"):
        ReturnAtLeast(float("inf"))


def test_normalized_return_between_low_and_high():
    c = NormalizedReturn(10.0, low=-10.0)  # (mean - low) / (high - low), clipped
    assert c(np.array([0.0, 10.0])) == pytest.approx((5 + 10) / 20)
    assert c(np.array([-30.0])) == 0.0 and c(np.array([40.0])) == 1.0
    assert float(c(jnp.array([-10.0, 0.0]))) == pytest.approx(0.25)
    assert NormalizedReturn(4.0)(np.array([2.0, 4.0])) == pytest.approx(0.75)  # low = 0
    with pytest.raises(ValueError, match="must be > 5"):
        NormalizedReturn(5.0, low=5.0)


def test_a_task_s_success_target_is_validated_and_becomes_its_visits_competence():
    cur = parse_curriculum({
        "name": "targets", "backend": "gymnasium", "order": ["A", "B", "C", "D"],
        "tasks": {"A": {"env_id": "CartPole-v1", "success": {"return_at_least": 195}},
                  "B": {"env_id": "Pendulum-v1",
                        "success": {"normalized_return": {"low": -1200, "high": -200}}},
                  "C": {"env_id": "CartPole-v1", "success": {"normalized_return": 475}},
                  "D": "CartPole-v1"}})
    assert [v.competence for v in cur.visits()] == [
        ReturnAtLeast(195.0), NormalizedReturn(-200.0, low=-1200.0), NormalizedReturn(475.0),
        None]
    dumped = cur.model_dump(mode="json")["tasks"]
    assert dumped["A"]["success"] == {"return_at_least": 195.0}
    assert "success" not in dumped["D"]  # a task without a target dumps as before
    assert "success" not in json.dumps(load_curriculum("primary").model_dump(mode="json"))
    assert parse_curriculum(cur.model_dump(mode="json")) == cur
    bad = {"both": ({"return_at_least": 1, "normalized_return": 2}, "exactly one"),
           "neither": ({}, "exactly one"),
           "infinite": ({"return_at_least": "inf"}, "return_at_least.*finite"),
           "reversed": ({"normalized_return": {"low": 3, "high": 1}}, "greater than low"),
           "typo": ({"return_at_leest": 3}, "unknown key 'tasks.A.success.return_at_leest'")}
    for data, message in bad.values():
        with pytest.raises(ConfigError, match=message) as err:
            parse_curriculum(_gym_curriculum("CartPole-v1", success=data), "my.yaml")
        assert "my.yaml" in str(err.value) and "\n" not in str(err.value)


# --- env ids as module:Id -------------------------------------------------------------

def test_a_module_id_env_imports_its_module_when_the_curriculum_is_read(plugin_site):
    write_module(plugin_site, "walkmod_a", WALK_ENV + "\ngymnasium.register('WalkA-v0', "
                                                     "entry_point=Walk)\n")
    assert "walkmod_a" not in sys.modules
    cur = parse_curriculum(_gym_curriculum("walkmod_a:WalkA-v0"))
    assert "walkmod_a" in sys.modules and cur.visits()[0].env_id == "walkmod_a:WalkA-v0"
    assert family_of("walkmod_a:WalkA-v0").name == "generic"
    env = make("walkmod_a:WalkA-v0", "gymnasium", num_envs=2)
    assert env.spec.env_id == "WalkA-v0" and env.spec.n_actions == 2 and env.spec.max_steps == 6
    env.close()


def test_a_module_id_that_cannot_be_made_is_one_line_naming_the_id_and_module(plugin_site):
    write_module(plugin_site, "walkmod_b", WALK_ENV)  # registers nothing
    cases = {"no_such_module_xyz:Walk-v0": "cannot import module 'no_such_module_xyz'",
             "walkmod_b:WalkB-v0": "module 'walkmod_b' was imported but unknown env id "
                                   "'WalkB-v0'",
             "walkmod_b:": "nothing after ':'", "not a module:X-v0": "is not a module name"}
    for env_id, message in cases.items():
        with pytest.raises(ConfigError) as err:
            parse_curriculum(_gym_curriculum(env_id), "mine.yaml")
        text = str(err.value)
        assert f"env id {env_id!r}" in text and message in text and "\n" not in text, text
    write_module(plugin_site, "walkmod_c", "raise RuntimeError('broken on purpose')\n")
    with pytest.raises(ValueError, match="walkmod_c.*RuntimeError: broken on purpose"):
        check_env_id("walkmod_c:X-v0", "gymnasium")


UNFIT_ENVS = WALK_ENV + '''
from telapa.envs.generic import GenericFamily
from telapa.envs.registry import register_family


class PerDim(Walk):
    def __init__(self):
        super().__init__()
        self.action_space = spaces.Box(np.array([-1, -2], np.float32),
                                       np.array([1, 2], np.float32))


class Multi(Walk):
    def __init__(self):
        super().__init__()
        self.action_space = spaces.MultiDiscrete([3, 3])


class WideFamily(GenericFamily):
    name = "wide"
    run_preset = "quick"

    def matches(self, env_id):
        return env_id == "Wide-v0"

    def feature_dim(self, env_id):
        return 3  # the generic sketch of a Walk is its observation: 2


gymnasium.register("PerDim-v0", entry_point=PerDim)
gymnasium.register("Multi-v0", entry_point=Multi)
gymnasium.register("Walk-v0", entry_point=Walk, max_episode_steps=6)
gymnasium.register("Wide-v0", entry_point=Walk)
register_family(WideFamily)
'''


def test_an_env_a_run_cannot_use_is_one_line_naming_the_task_before_any_work(
        plugin_site, tmp_path, capsys):
    """Whatever makes a task's env unusable (an action space no policy takes, an option
    its constructor refuses, a family's sketch dimension D that is not its env's) is
    found when the run's envs are first made (`telapa.continual.memory.task_shapes`),
    before the run directory exists: one line naming the curriculum, task and env."""
    write_module(plugin_site, "unfit_envs", UNFIT_ENVS)
    cases = {
        ("PerDim-v0", ()): "per-dimension action bounds [-1. -2.] are not supported: "
                           "telapa's policies take a Discrete action space or a 1-D Box",
        ("Multi-v0", ()): "unsupported action space MultiDiscrete([3 3])",
        ("Walk-v0", (("nn", 6),)): "TypeError: Walk.__init__() got an unexpected keyword "
                                   "argument 'nn'",
        ("Wide-v0", ()): "Wide-v0: its env family says feature_dim = 3, but its env's "
                         "info['features'] has shape (2,) per step",
    }
    for n, ((env_id, options), message) in enumerate(cases.items()):
        path = tmp_path / f"c{n}.yaml"
        path.write_text(yaml.safe_dump({**_gym_curriculum(env_id, options=dict(options)),
                                        "cycles": 1}))
        out = tmp_path / f"run{n}"
        with pytest.raises(SystemExit) as exit_:
            main(["run", "--import", "unfit_envs", "--curriculum", str(path), "--method",
                  "finetune", "--preset", "quick", "--out", str(out)])
        err = capsys.readouterr().err.strip()
        assert exit_.value.code == 2 and not out.exists(), err
        assert err.startswith(f"telapa: error: curriculum 'plug' task 'A' ({env_id}"), err
        assert message in err and "\n" not in err, err


def test_a_misnamed_family_entry_point_and_a_nameless_family_are_named_by_their_code(
        plugin_site):
    write_module(plugin_site, "ringfam_named", FAMILY.format(name="ring"))
    install_entry_points(plugin_site, "ring_named_dist", {"telapa.families": {
        "wrongname": "ringfam_named:RingFamily"}})
    with pytest.raises(PluginError, match=r"entry point 'wrongname' \(ringfam_named:"
                                          r"RingFamily in package ring_named_dist\) gives "
                                          "the family named 'ring'"):
        family_of("Anything-v0")

    class Nameless:
        pass

    with pytest.raises(PluginError, match=r"env family [\w.]*test_plugins\.[\w.<>]*Nameless "
                                          "does not follow"):
        register_family(Nameless())


# --- methods --------------------------------------------------------------------------

def _plug_class(plugin_site, module: str, name: str, section: str):
    write_module(plugin_site, module, PLUG_METHOD.format(name=name, section=section))
    return __import__(module).PlugFinetune


def test_a_registered_method_brings_its_settings_section(plugin_site):
    method = register_method(_plug_class(plugin_site, "plugmeth_a", "plug-a", "plug_a"))
    assert find_method("plug-a") is method and "plug-a" in method_names()
    assert method_section("plug-a") == "plug_a"
    config = parse_run_config({**QUICK.model_dump(), "methods": {"plug_a": {"lam": 2.0}}})
    assert make_method("plug-a", config).settings.lam == 2.0
    assert make_method("plug-a", QUICK).settings.lam == 0.5  # its model's default
    assert override(QUICK, {"methods.plug_a.lam": 3.0}).methods.section("plug_a").lam == 3.0
    bound = bind_method(QUICK, "plug-a")  # written out, so config.yaml records it
    assert bound.methods.model_dump()["plug_a"] == {"lam": 0.5}
    assert bind_method(QUICK, "ewc") is QUICK
    assert parse_run_config(bound.model_dump(mode="json")) == bound
    for data, message in (({"plug_a": {"lam": -1}}, "invalid value for 'methods.plug_a.lam'"),
                          ({"plug_b": {}}, "unknown key 'methods.plug_b'"),
                          ({"plug_a": {"lamb": 1}}, "unknown key 'methods.plug_a.lamb'"),
                          ({"plug_a": {"lam": True}}, "invalid value for 'methods.plug_a.lam' "
                                                      "in p.yaml: a boolean where a number")):
        with pytest.raises(ConfigError, match=message):
            parse_run_config({**QUICK.model_dump(), "methods": data}, "p.yaml")


def test_a_method_cannot_take_a_built_in_s_name_or_section(plugin_site):
    cls = _plug_class(plugin_site, "plugmeth_b", "finetune", "plug_b")
    with pytest.raises(PluginError, match="'finetune'.*name of a built-in method"):
        register_method(cls)
    with pytest.raises(PluginError, match="section 'ewc'.*built-in section"):
        register_method(_plug_class(plugin_site, "plugmeth_c", "plug-c", "ewc"))
    no_model = type("NoModel", (find_method("finetune"),), {"name": "no-model",
                                                             "section": "mine"})
    with pytest.raises(PluginError, match="section 'mine'.*settings_model"):
        register_method(no_model)
    nameless = type("Nameless", (find_method("finetune"),), {})
    with pytest.raises(PluginError, match="no name of its own"):
        register_method(nameless)
    with pytest.raises(PluginError, match="unknown method 'nope'; available: telapa.*"
                                          r"\(a plug-in's method is known once its module "
                                          r"is imported, --import MODULE"):
        find_method("nope")


class DecaySettings(StrictModel):
    rate: NonNegativeFloat = 0.5


class Decay(Finetune):
    """A method declared as the built-in ones are: its section and the section's model."""

    name = "decay"
    section = "decay"
    settings_model = DecaySettings


def test_a_built_in_method_is_its_class_and_its_registry_entry():
    """`MethodsConfig` is built from the built-in classes' ``section`` and
    ``settings_model``: a method declared like them gets, from its entry alone, a field
    validated, written out and reported as theirs are."""
    model = methods_config([*BUILTIN_METHODS.values(), Decay])
    assert list(model.model_fields) == [*MethodsConfig.model_fields, "decay"]
    assert list(methods_config(BUILTIN_METHODS.values()).model_fields) == list(
        MethodsConfig.model_fields)
    run = create_model("RunConfig", __base__=RunConfig,
                       methods=(model, Field(default_factory=model)))
    config = validate(run, {**QUICK.model_dump(), "methods": {"decay": {"rate": 2.0}}})
    assert Decay(config).settings == DecaySettings(rate=2.0) == config.methods.decay
    written = validate(run, QUICK.model_dump()).methods.model_dump()  # as config.yaml
    assert written == {**QUICK.methods.model_dump(), "decay": {"rate": 0.5}}
    for data, message in (
            ({"decay": {"rat": 1}}, "unknown key 'methods.decay.rat' in p.yaml (did you "
                                    "mean 'methods.decay.rate'?)"),
            ({"decayy": {}}, "unknown key 'methods.decayy' in p.yaml (did you mean "
                             "'methods.decay'?)"),
            ({"decay": {"rate": -1}}, "invalid value for 'methods.decay.rate' in p.yaml: "
                                      "Input should be greater than or equal to 0"),
            ({"decay": {"rate": True}}, "invalid value for 'methods.decay.rate' in p.yaml: "
                                        "a boolean where a number belongs")):
        with pytest.raises(ConfigError) as err:
            validate(run, {**QUICK.model_dump(), "methods": data}, "p.yaml")
        assert str(err.value) == message
    # the same messages as for a built-in section (here EWC's)
    with pytest.raises(ConfigError, match=r"^unknown key 'methods.ewc.lamm' in p.yaml \(did "
                                          r"you mean 'methods.ewc.lam'\?\)$"):
        parse_run_config({**QUICK.model_dump(), "methods": {"ewc": {"lamm": 1}}}, "p.yaml")
    no_model = type("NoModel", (Finetune,), {"name": "no-model", "section": "mine"})
    with pytest.raises(TypeError, match="'no-model' declares the settings section 'mine' "
                                        "but no settings_model"):
        methods_config([no_model])
    other = type("Other", (Decay,), {"name": "other", "settings_model": StrictModel})
    with pytest.raises(TypeError, match="'decay' and 'other' declare the settings section "
                                        "'decay' with different models"):
        methods_config([Decay, other])


def test_a_plug_in_subclass_of_a_built_in_reads_the_built_in_section(plugin_site):
    """It inherits the built-in's ``section`` and ``settings_model``: it reads that
    section, as the built-in does, and registering it adds no plug-in section."""
    ewc = BUILTIN_METHODS["ewc"]
    mine = register_method(type("MyEWC", (ewc,), {"name": "my-ewc"}))
    assert mine.settings_model is ewc.settings_model and method_section("my-ewc") == "ewc"
    config = parse_run_config({**QUICK.model_dump(), "methods": {"ewc": {"lam": 3.0}}})
    assert make_method("my-ewc", config).settings is config.methods.ewc
    assert bind_method(config, "my-ewc") is config


def test_a_plug_in_with_the_former_init_is_given_the_run_config_with_a_warning(plugin_site):
    """A method gets its own section (`make_method`); one whose ``__init__`` still takes
    the whole run config, ``(config, *, key)``, is made with it and warned about."""

    class OldInit(Finetune):
        name = "old-init"
        section = "ewc"  # a built-in section, read as it is

        def __init__(self, config, *, key=None):
            super().__init__(config, key=key)
            self.seen = config

    register_method(OldInit)
    config = parse_run_config({**QUICK.model_dump(), "eval_episodes": 20,
                               "methods": {"ewc": {"lam": 3.0}}})
    with pytest.warns(FutureWarning, match="takes the whole run config"):
        method = make_method("old-init", config)
    assert method.seen is config and method.settings is config.methods.ewc
    assert method.eval_episodes == 20
    new = make_method("ewc", config)  # the current form: the section, not the config
    assert new.settings is config.methods.ewc and new.eval_episodes == 20
    assert not hasattr(new, "config")


def test_method_entry_points_load_lazily_by_name(plugin_site):
    write_module(plugin_site, "plugmeth_ep", PLUG_METHOD.format(name="plug-ep",
                                                               section="plug_ep"))
    write_module(plugin_site, "plugmeth_bad", "raise ImportError('no such thing')\n")
    install_entry_points(plugin_site, "plug_ep_dist", {METHODS_GROUP: {
        "plug-ep": "plugmeth_ep:PlugFinetune", "plug-bad": "plugmeth_bad:Thing"}})
    assert {"plug-ep", "plug-bad"} <= set(method_names())
    assert "plugmeth_ep" not in sys.modules  # listed from the metadata, not imported
    config = parse_run_config({**QUICK.model_dump(), "methods": {"plug_ep": {"lam": 1.5}}})
    assert "plugmeth_ep" in sys.modules  # a section no method had declared: loaded
    assert make_method("plug-ep", config).settings.lam == 1.5
    with pytest.raises(PluginError, match="telapa.methods entry point 'plug-bad' "
                                          r"\(plugmeth_bad:Thing in package plug_ep_dist\)"
                                          ".*ImportError: no such thing"):
        find_method("plug-bad")
    # a section nobody declares names the plug-in that did not load (it might have)
    with pytest.raises(ConfigError, match="invalid value for 'methods.plug_x' in p.yaml: no "
                                          "method declares this settings section, and "
                                          ".*'plug-bad'.*no such thing"):
        parse_run_config({**QUICK.model_dump(), "methods": {"plug_x": {}}}, "p.yaml")


def test_a_method_entry_point_named_after_a_built_in_is_refused(plugin_site):
    write_module(plugin_site, "plugmeth_clash", PLUG_METHOD.format(name="ewc", section="x"))
    install_entry_points(plugin_site, "clash_dist", {METHODS_GROUP: {
        "ewc2": "plugmeth_clash:PlugFinetune"}})
    with pytest.raises(PluginError, match="'ewc'.*name of a built-in method"):
        find_method("ewc2")


def test_a_sweep_grid_of_a_plug_in_section_multiplies_only_its_method(plugin_site, tmp_path):
    register_method(_plug_class(plugin_site, "plugmeth_grid", "plug-grid", "plug_grid"))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({
        "preset": "quick", "curricula": ["smoke"], "methods": ["plug-grid", "finetune"],
        "grid": {"methods.plug_grid.lam": [0.1, 0.2]}}))
    cells = load_sweep(tmp_path / "s.yaml").cells
    assert [c.name for c in cells] == ["smoke-plug-grid-lam=0.1-s0", "smoke-plug-grid-lam=0.2-s0",
                                       "smoke-finetune-s0"]
    assert [c.config.methods.section("plug_grid").lam for c in cells[:2]] == [0.1, 0.2]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({
        "preset": "quick", "curricula": ["smoke"], "methods": ["finetune"],
        "grid": {"methods.plug_grid.lamb": [1]}}))
    with pytest.raises(ConfigError, match="unknown setting grid.'methods.plug_grid.lamb'"):
        load_sweep(tmp_path / "bad.yaml")


# --- env families ---------------------------------------------------------------------

FAMILY = '''
from telapa.envs.generic import GenericFamily


class RingFamily(GenericFamily):
    name = "{name}"
    run_preset = "quick"

    def matches(self, env_id):
        return env_id.startswith("Ring")
'''


def test_family_entry_points_are_asked_before_the_generic_family(plugin_site):
    write_module(plugin_site, "ringfam", FAMILY.format(name="ring"))
    install_entry_points(plugin_site, "ring_dist", {"telapa.families": {
        "ring": "ringfam:RingFamily"}})
    assert "ringfam" not in sys.modules
    assert family_of("MiniGrid-Empty-5x5-v0").name == "minigrid"  # built-ins first
    assert family_of("RingWorld-v0").name == "ring" and "ringfam" in sys.modules
    assert family_of("CartPole-v1").name == "generic"
    assert families() == ["minigrid", "mujoco", "ring", "generic"]


def test_a_family_named_after_a_built_in_is_refused(plugin_site):
    write_module(plugin_site, "ringfam_clash", FAMILY.format(name="generic"))
    install_entry_points(plugin_site, "clash_fam", {"telapa.families": {
        "generic": "ringfam_clash:RingFamily"}})
    with pytest.raises(PluginError, match="'generic'.*name of a built-in family"):
        family_of("Anything-v0")
    module = __import__("ringfam_clash")
    with pytest.raises(PluginError, match="name of a built-in family"):
        register_family(module.RingFamily)


def test_a_family_whose_presets_telapa_lacks_is_named_when_it_loads(plugin_site, tmp_path):
    """A family names presets of telapa's configs/ (a run preset may be a path): one that
    is not there fails when the family loads, naming it, not when a run reads it."""
    write_module(plugin_site, "ringfam_presets", FAMILY.format(name="ring") + """
    train_preset = "ring"
""")
    install_entry_points(plugin_site, "ring_presets", {"telapa.families": {
        "ring": "ringfam_presets:RingFamily"}})
    with pytest.raises(PluginError) as err:
        family_of("RingWorld-v0")
    assert str(err.value).startswith(
        "env family 'ring' (ringfam_presets.RingFamily): train_preset 'ring' is not a "
        "preset of telapa's configs/ppo/ (available: minigrid, minigrid-sb3, mujoco")
    module = __import__("ringfam_presets")
    module.RingFamily.train_preset = "mujoco"
    module.RingFamily.run_preset = "ring-quick"
    with pytest.raises(PluginError, match=r"run_preset 'ring-quick' is not a preset of "
                                          r"telapa's configs/runs/ \(available: "):
        register_family(module.RingFamily)
    module.RingFamily.run_preset = str(tmp_path / "ring-quick.yaml")  # a path: must exist
    with pytest.raises(PluginError, match="run_preset '.*ring-quick.yaml' is not a preset"):
        register_family(module.RingFamily)
    (tmp_path / "ring-quick.yaml").write_text("base: mujoco-quick\n")
    assert register_family(module.RingFamily).run_preset.endswith("ring-quick.yaml")


PORT_FAMILY = FAMILY + """
    def jax_ids(self):
        return ("RingWorld-v0",)

    def feature_dim(self, env_id):
        return 3

    def make_jax(self, env_id, options):
        import dataclasses

        from telapa.envs.registry import make

        port = make("MiniGrid-Empty-5x5-v0", "jax")  # D = 11
        port.spec = dataclasses.replace(port.spec, env_id=env_id)
        return port
"""


def test_a_jax_port_that_does_not_match_its_family_is_named_when_made(plugin_site):
    """``make`` checks the port a family gives: its spec's id and sketch dimension D must
    be the family's (the run's latent space reads D), before any work."""
    write_module(plugin_site, "ringfam_port", PORT_FAMILY.format(name="ring"))
    register_family(__import__("ringfam_port").RingFamily)
    with pytest.raises(ValueError) as err:
        make("RingWorld-v0", "jax")
    assert str(err.value) == (
        "env family 'ring' (ringfam_port.RingFamily): make_jax('RingWorld-v0') gave spec "
        "env_id='RingWorld-v0', feature_dim=11; expected 'RingWorld-v0' and "
        "feature_dim('RingWorld-v0') = 3")


# --- --import -------------------------------------------------------------------------

def test_import_fails_in_one_line_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--import", "no_such_module_xyz", "--curriculum", "smoke", "--method",
              "finetune", "--out", str(out)])
    assert exit_.value.code == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert err.startswith("telapa: error: --import no_such_module_xyz: cannot import module "
                          "'no_such_module_xyz': ModuleNotFoundError") and "\n" not in err


def test_import_registers_before_validation_and_the_run_records_it(plugin_site, tmp_path):
    """``--import`` registers a method and an env id that the curriculum and preset then
    name; ``run.json`` records the module; a later reader of the run directory imports
    it again (here after the process forgot it)."""
    import_route_module(plugin_site, "plugmod_run", env_id="PlugRun-v0", method="plug-run",
                        section="plug_run")
    (tmp_path / "cur.yaml").write_text(yaml.safe_dump(_gym_curriculum("PlugRun-v0")))
    out = tmp_path / "run"
    with pytest.raises(CLIError, match="unknown method 'plug-run'"):  # not imported yet
        build_spec(str(tmp_path / "cur.yaml"), "plug-run", 0, "mujoco-quick")
    assert main(["run", "--import", "plugmod_run", "--curriculum", str(tmp_path / "cur.yaml"),
                 "--method", "plug-run", "--set", "methods.plug_run.lam=0.25",
                 "--set", "steps_per_visit=1024", "--set", "eval_every=1024",
                 "--out", str(out)]) == 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["imports"] == ["plugmod_run"] and manifest["status"] == "complete"
    assert yaml.safe_load((out / "config.yaml").read_text())["methods"]["plug_run"] == {
        "lam": 0.25}
    # a new process would know neither the module nor what it registers
    import gymnasium

    import telapa.continual.preset as preset
    import telapa.continual.registry as registry

    del sys.modules["plugmod_run"], gymnasium.registry["PlugRun-v0"]
    del registry.METHODS["plug-run"], preset._PLUGIN_SECTIONS["plug_run"]
    spec = RunSpec.stored(out)
    assert "plugmod_run" in sys.modules and spec.imports == ("plugmod_run",)
    assert spec.config.methods.section("plug_run").lam == 0.25
    assert main(["run", "--resume", str(out)]) == 0  # complete: nothing rewritten
    assert RunDir(out).is_complete()


def test_a_run_s_missing_import_is_named_by_its_readers(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"format": "telapa-run", "version": 1,
                                              "imports": ["gone_module_xyz"]}))
    with pytest.raises(Exception, match=f"{out}.*cannot import module 'gone_module_xyz'"):
        RunDir(out).config()


def test_metrics_of_a_run_whose_import_is_missing_names_the_module_not_skip_incomplete(
        quick_run, tmp_path, capsys):
    """A complete run whose recorded module this process cannot import is not
    incomplete: ``telapa metrics`` names the module and does not suggest
    --skip-incomplete, and with --skip-incomplete still says so (it did: "no complete
    runs")."""
    run = tmp_path / "run"
    shutil.copytree(quick_run("finetune", 0), run)
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "imports": ["gone_module_xyz"]}))
    for extra in ([], ["--skip-incomplete"]):
        with pytest.raises(SystemExit) as exit_:
            main(["metrics", str(run), *extra])
        err = capsys.readouterr().err.strip()
        assert exit_.value.code == 2, err
        assert "cannot import module 'gone_module_xyz'" in err, err
        assert "--skip-incomplete" not in err and "no complete runs" not in err, err


def test_run_presets_keep_refusing_unknown_sections():
    with pytest.raises(ConfigError, match="unknown key 'methods.ewcc' in x.yaml"):
        parse_run_config({**QUICK.model_dump(), "methods": {"ewcc": {"lam": 1}}}, "x.yaml")


def test_train_takes_a_module_id_env(plugin_site, tmp_path, capsys):
    write_module(plugin_site, "walkmod_t", WALK_ENV + "\ngymnasium.register('WalkT-v0', "
                                                      "entry_point=Walk)\n")
    out = tmp_path / "train"
    assert main(["train", "--env", "walkmod_t:WalkT-v0", "--backend", "gymnasium",
                 "--steps", "256", "--set", "ppo={num_envs: 2, n_steps: 64, batch_size: 64}",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env"] == "walkmod_t:WalkT-v0" and summary["steps"] == 256
    assert 1.0 <= summary["eval_return"] <= 2.0  # every Walk return is 1 or 2
    assert json.loads((out / "run.json").read_text())["env"] == "walkmod_t:WalkT-v0"
