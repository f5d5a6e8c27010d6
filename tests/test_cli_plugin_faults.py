"""Faults of the command line around plug-ins and budgets (probe 5): a complete run whose
plug-in package is not installed is named as such by its readers, not as incomplete; a
``--set`` of a section the run's method does not read is refused before any work; a
plug-in section's misspelled key gets the "did you mean" a built-in's gets; ``telapa
train --help`` says how ``--steps`` rounds."""

from __future__ import annotations

import importlib
import shutil
import sys

import pytest
import yaml
from plugin_modules import PLUG_METHOD, WALK_ENV, install_entry_points, write_module

import telapa.continual.preset as preset
import telapa.continual.registry as registry
import telapa.plugins as plugins
from telapa.cli import main
from telapa.cli.common import CLIError
from telapa.cli.run import build_spec
from telapa.continual.methods import Finetune
from telapa.continual.registry import register_method
from telapa.plugins import METHODS_GROUP

TINY = ["steps_per_visit=128", "eval_every=128", "eval_episodes=2", "final_eval_episodes=2",
        "train.ppo={num_envs: 2, n_steps: 64, batch_size: 64, epochs: 1}",
        "train.eval={episodes: 2, num_envs: 2}"]
"""The smallest run of one Walk task (`plugin_modules.WALK_ENV`)."""


def _error(args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2, err
    return err


# --- 1. a complete run whose plug-in is not installed ---------------------------------

def test_metrics_of_a_run_whose_plug_in_is_not_installed_names_it_not_incomplete(
        plugin_site, tmp_path, capsys):
    """A run of an installed plug-in method (an entry point) on a ``module:Id`` env, read
    after the package is gone: ``telapa metrics`` names the method's entry point and
    the env id's module, with or without --skip-incomplete, and never calls the run
    incomplete (it said "unknown key 'methods.plug_gone' ... (or pass --skip-incomplete)",
    then "no complete runs"); an env id no installed family has is named too."""
    write_module(plugin_site, "plug_gone", PLUG_METHOD.format(name="plug-gone",
                                                             section="plug_gone"))
    write_module(plugin_site, "walk_gone", WALK_ENV + "\ngymnasium.register('WalkGone-v0', "
                                                      "entry_point=Walk)\n")
    install_entry_points(plugin_site, "plug_gone_dist", {METHODS_GROUP: {
        "plug-gone": "plug_gone:PlugFinetune"}})
    curriculum = tmp_path / "cur.yaml"
    curriculum.write_text(yaml.safe_dump({
        "name": "gone", "backend": "gymnasium", "order": ["A"],
        "tasks": {"A": {"env_id": "walk_gone:WalkGone-v0"}}}))
    run = tmp_path / "run"
    assert main(["run", "--curriculum", str(curriculum), "--method", "plug-gone",
                 "--preset", "mujoco-quick", *[a for s in TINY for a in ("--set", s)],
                 "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["metrics", str(run)]) == 0  # installed: it reads
    capsys.readouterr()

    # the package is uninstalled: its files, its metadata and all it registered are gone
    shutil.rmtree(plugin_site / "plug_gone_dist-0.1.dist-info")
    for name in ("plug_gone", "walk_gone"):
        (plugin_site / f"{name}.py").unlink()
        del sys.modules[name]
    import gymnasium

    del gymnasium.registry["WalkGone-v0"]
    del registry.METHODS["plug-gone"], preset._PLUGIN_SECTIONS["plug_gone"]
    plugins._LOADED.clear()
    preset._ENTRY_POINTS_READ = False
    importlib.invalidate_caches()

    for extra in ([], ["--skip-incomplete"]):
        err = _error(["metrics", str(run), *extra], capsys)
        assert err.count("\n") == 0, err
        assert f"{run} is a complete run, but it needs plug-ins" in err, err
        assert "method 'plug-gone' (a telapa.methods entry point named 'plug-gone'" in err
        assert "env id 'walk_gone:WalkGone-v0' of task 'A' (cannot import module " \
               "'walk_gone'" in err, err
        assert "--skip-incomplete" not in err and "incomplete" not in err, err
        assert "no complete runs" not in err, err

    # a jax-backend env id that no installed env family has (a plug-in family's run)
    data = yaml.safe_load((run / "curriculum.yaml").read_text())
    data["backend"], data["tasks"]["A"]["env_id"] = "jax", "GoneFamily-v0"
    (run / "curriculum.yaml").write_text(yaml.safe_dump(data))
    err = _error(["metrics", str(run), "--skip-incomplete"], capsys)
    assert "env id 'GoneFamily-v0' of task 'A' (no installed env family (telapa.families " \
           "entry points) has it for backend 'jax')" in err, err
    assert "incomplete" not in err, err


# --- 2. --set of a section the method does not read -----------------------------------

def test_a_set_of_another_method_s_section_is_refused_before_any_work(tmp_path, capsys):
    """``--method finetune --set methods.ewc.lam=77`` was recorded and did nothing;
    now it is refused naming what the method reads, and no run directory is made. The
    method's own section, and a key of no section (the preset's unknown key), pass on."""
    out = tmp_path / "run"
    err = _error(["run", "--curriculum", "smoke", "--method", "finetune", "--set",
                  "methods.ewc.lam=77", *[a for s in TINY for a in ("--set", s)],
                  "--out", str(out)], capsys)
    assert err == ("telapa: error: --set methods.ewc.lam: method 'finetune' does not read "
                   "methods.ewc (it reads: no methods.* section); the setting would be "
                   "recorded with the run but change nothing. Check --method, or leave the "
                   "key out"), err
    assert not out.exists()
    with pytest.raises(CLIError, match="--set methods.ewc: method 'finetune' does not read "
                                       "methods.ewc"):
        build_spec("smoke", "finetune", 0, "quick", sets=["methods={ewc: {lam: 77}}"])
    with pytest.raises(CLIError, match=r"--set methods.telapa.qd.archive.target_size: "
                                       r"method 'ewc' does not read methods.telapa \(it "
                                       r"reads: methods.ewc\)"):
        build_spec("smoke", "ewc", 0, "quick", sets=["methods.telapa.qd.archive.target_size=4"])
    spec = build_spec("smoke", "ewc", 0, "quick", sets=["methods.ewc.lam=77"])
    assert spec.config.methods.ewc.lam == 77
    spec = build_spec("smoke", "telapa-fresh", 0, "quick",  # TeLAPA's variants share it
                      sets=["methods.telapa.qd.archive.target_size=4"])
    assert spec.config.methods.telapa.qd.archive.target_size == 4


def test_a_set_for_a_plug_in_given_the_whole_config_is_only_warned_about(plugin_site, capsys):
    """A plug-in whose ``__init__`` takes the whole run config (the former signature) may
    read any section: telapa cannot tell, so it warns on stderr and goes on."""

    class WholeConfig(Finetune):
        name = "whole-config"

        def __init__(self, config, *, key=None):
            super().__init__(config, key=key)

    register_method(WholeConfig)
    spec = build_spec("smoke", "whole-config", 0, "quick", sets=["methods.ewc.lam=77"])
    assert spec.config.methods.ewc.lam == 77
    err = capsys.readouterr().err.strip()
    assert err.startswith("telapa: warning: --set methods.ewc.lam: method 'whole-config' "
                          "declares no methods.* section, but its __init__ takes the whole "
                          "run config") and "\n" not in err, err


# --- 3. did you mean, for a plug-in section's key -------------------------------------

def test_a_plug_in_section_s_misspelled_key_gets_did_you_mean(plugin_site):
    register_method(__import__(write_module(plugin_site, "plug_dym", PLUG_METHOD.format(
        name="plug-dym", section="plug_dym"))).PlugFinetune)
    with pytest.raises(CLIError, match=r"unknown key 'methods.plug_dym.lamb' in .*quick.yaml "
                                       r"with --set \(did you mean 'methods.plug_dym.lam'\?\)"):
        build_spec("smoke", "plug-dym", 0, "quick", sets=["methods.plug_dym.lamb=1"])
    with pytest.raises(CLIError, match=r"unknown key 'methods.plug_dymm' in .* \(did you "
                                       r"mean 'methods.plug_dym'\?\)"):
        build_spec("smoke", "plug-dym", 0, "quick", sets=["methods.plug_dymm.lam=1"])
    with pytest.raises(CLIError, match=r"\(did you mean 'methods.ewc.lam'\?\)"):  # as before
        build_spec("smoke", "ewc", 0, "quick", sets=["methods.ewc.lamb=1"])


# --- 4. how --steps rounds ------------------------------------------------------------

def test_train_help_says_how_steps_round(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "rounded up to whole PPO iterations of ppo.num_envs x ppo.n_steps steps" in text
    assert "ppo.iterations_per_call" in text and "2048 trains 16,384" in text



def test_run_help_lists_every_shipped_run_preset(capsys):
    """`telapa run --help` names every preset of configs/runs (it left out the three
    calibration presets, from a list written by hand)."""
    from telapa.continual.preset import RUN_PRESET_DIR

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = "".join(capsys.readouterr().out.split())
    names = sorted(path.stem for path in RUN_PRESET_DIR.glob("*.yaml"))
    assert {"calibration-paper", "study-calibration", "quick", "paper"} <= set(names)
    assert f"configs/runs:{','.join(names)})" in text
