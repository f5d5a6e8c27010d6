"""Run presets: everything a continual run needs besides the curriculum, method and seed.

Presets live in ``configs/runs/<name>.yaml`` (``quick``: the primary curriculum in
minutes; ``paper``: the paper's numbers and our documented choices where it is silent,
see docs/assumptions.md). ``train`` is a PPO preset name from ``configs/ppo/`` or an
inline `TrainConfig` mapping. A preset may build on another with ``base: NAME`` (or a
path) and change part of it (`telapa.overrides.read_layered`).

``methods.<section>`` holds a method's settings. Every method with settings declares on
its class its ``section`` and the pydantic model that validates it (``settings_model``).
The built-in methods' sections are the fields of `MethodsConfig`, built here from the
built-in classes (`telapa.continual.builtin`) when this module is defined, so `RunConfig`
is complete wherever it is imported, with no other import first; a plug-in method
(`telapa.plugins`) adds its section when it is registered (`register_section`, called by
`telapa.continual.registry.register_method`), so ``methods.<its section>.KEY`` works in
presets, ``--set`` and sweep grids like a built-in key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PositiveFloat,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from telapa.config import (
    CONFIG_DIR,
    EnvSteps,
    Episodes,
    StrictModel,
    TrainConfig,
    UnitInterval,
    bool_errors,
    format_validation_errors,
    load_config,
    preset_path,
    resolve_named,
    validate,
)
from telapa.continual.builtin import BUILTIN_METHODS
from telapa.overrides import merge, read_layered, set_dotted
from telapa.plugins import (
    METHODS_GROUP,
    PluginError,
    entry_points,
    load_entry_point,
)

RUN_PRESET_DIR = CONFIG_DIR / "runs"


_PLUGIN_SECTIONS: dict[str, tuple[type[BaseModel], str]] = {}
"""Plug-in section name -> (its settings model, the method that declared it)."""
_ENTRY_POINTS_READ = False
_UNLOADABLE: list[str] = []
"""Why the ``telapa.methods`` entry points that failed to load did (`plugin_section`)."""


def register_section(name: str, model: type[BaseModel], owner: str) -> None:
    """Adds ``methods.<name>``, validated by ``model`` (a pydantic model whose fields all
    have defaults), declared by the method ``owner``. A built-in section's name, or a
    section another method declared with another model, is a `PluginError`."""
    if name in MethodsConfig.model_fields:
        raise PluginError(f"method {owner!r} declares the settings section {name!r} with "
                          "its own model, but that is a built-in section; leave "
                          "settings_model out to read the built-in one, or rename it")
    why = _settings_model_error(model, owner, name)
    if why is not None:
        raise PluginError(why)
    known = _PLUGIN_SECTIONS.get(name)
    if known is not None and known[0] is not model:
        raise PluginError(f"methods {known[1]!r} and {owner!r} both declare the settings "
                          f"section {name!r} with different models")
    _PLUGIN_SECTIONS.setdefault(name, (model, owner))


def plugin_section(name: str) -> type[BaseModel] | None:
    """The model of the plug-in section ``name``; on the first section it does not know,
    the ``telapa.methods`` entry points are loaded and their sections registered (one
    that fails to load is skipped and named when a section stays unknown:
    `unknown_section_error`). None: no method declares it."""
    global _ENTRY_POINTS_READ
    if name not in _PLUGIN_SECTIONS and not _ENTRY_POINTS_READ:
        _ENTRY_POINTS_READ = True
        for ep_name in entry_points(METHODS_GROUP):
            try:
                method = load_entry_point(METHODS_GROUP, ep_name)
            except PluginError as err:
                _UNLOADABLE.append(str(err))
                continue
            section, model = getattr(method, "section", None), getattr(
                method, "settings_model", None)
            if isinstance(section, str) and model is not None \
                    and model is not builtin_section(section):
                register_section(section, model, getattr(method, "name", ep_name))
    known = _PLUGIN_SECTIONS.get(name)
    return None if known is None else known[0]


def unknown_section_error(name: str, value: Any) -> InitErrorDetails:
    """The error of ``methods.<name>`` that no method declares: an unknown key, or, when
    some method plug-ins failed to load, a message that names them (one of them may have
    declared it)."""
    if not _UNLOADABLE:
        return InitErrorDetails(type="extra_forbidden", loc=(name,), input=value)
    why = "; ".join(_UNLOADABLE)
    return InitErrorDetails(type=PydanticCustomError(
        "unknown_section", "no method declares this settings section, and {why}",
        {"why": why}), loc=(name,), input=value)


def section_names() -> list[str]:
    """The built-in sections and the plug-in sections registered so far."""
    return [*MethodsConfig.model_fields, *_PLUGIN_SECTIONS]


def builtin_section(name: str) -> type[BaseModel] | None:
    """The settings model of the built-in section ``name`` (a field of `MethodsConfig`);
    None: it is not one."""
    info = MethodsConfig.model_fields.get(name)
    return None if info is None else info.annotation


def _settings_model_error(model: Any, owner: str, section: str) -> str | None:
    """Why ``model`` cannot be the settings model of section ``section`` of the method
    ``owner`` (a pydantic model class whose every field has a default); None: it can."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return (f"method {owner!r}: settings_model of section {section!r} must be a "
                f"pydantic model class, got {model!r}")
    try:
        model()
    except ValidationError as err:
        return (f"method {owner!r}: every setting of section {section!r} needs a default "
                f"({format_validation_errors(err, model.__name__)})")
    return None


class MethodsConfigBase(StrictModel):
    """What every `MethodsConfig` is besides its fields (the built-in sections,
    `methods_config`): ``methods.<section>`` of each plug-in method (`register_section`),
    and `section` to read any of them."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _plugin_sections(cls, data: Any,
                         handler: ModelWrapValidatorHandler) -> MethodsConfigBase:
        """Validates each key that is not a built-in section by its plug-in model; a key
        no method declares is an unknown key, as in every other model."""
        if not isinstance(data, dict):
            return handler(data)
        errors: list[InitErrorDetails] = []
        checked = dict(data)
        for key, value in data.items():
            if key in cls.model_fields:
                continue
            model = plugin_section(key)
            if model is None:
                errors.append(unknown_section_error(key, value))
            elif not isinstance(value, model):
                wrong = bool_errors(model, value)  # as `validate` does for the built-ins
                errors.extend(InitErrorDetails(
                    type=PydanticCustomError("bool_number", "a boolean where a number belongs"),
                    loc=(key, *loc.split(".")), input=True) for loc in wrong)
                if wrong:
                    continue
                try:
                    checked[key] = model.model_validate(value)
                except ValidationError as err:
                    errors.extend(InitErrorDetails(type=e["type"], loc=(key, *e["loc"]),
                                                   input=e["input"], ctx=e.get("ctx", {}))
                                  for e in err.errors())
        try:
            result = handler(checked)
        except ValidationError as err:
            if not errors:
                raise
            errors = [*err.errors(), *errors]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return result

    @classmethod
    def extra_fields(cls) -> dict[str, type[BaseModel]]:
        """The plug-in sections registered so far and their models: the keys this model
        takes besides its fields, for the "did you mean" of a misspelt key
        (`telapa.config.format_validation_errors`)."""
        return {name: model for name, (model, _) in _PLUGIN_SECTIONS.items()}

    def section(self, name: str) -> BaseModel:
        """The settings of section ``name``: a built-in field, or a plug-in section (its
        model's defaults when the preset leaves it out); `PluginError` for a section no
        method declares."""
        if name in type(self).model_fields:
            return getattr(self, name)
        extra = self.__pydantic_extra__ or {}
        if name in extra:
            return extra[name]
        model = plugin_section(name)
        if model is None:
            raise PluginError(f"no method declares the settings section {name!r}; known: "
                              f"{', '.join(section_names())}")
        return model()

    def with_section(self, name: str) -> MethodsConfigBase:
        """This config with plug-in section ``name`` written out (its defaults when it was
        left out), so that ``config.yaml`` records every setting its method reads; a
        built-in section: unchanged."""
        if name in type(self).model_fields or name in (self.__pydantic_extra__ or {}):
            return self
        data = self.model_dump(exclude_unset=True)
        return type(self).model_validate({**data, name: self.section(name).model_dump()})


def methods_config(methods: Iterable[Any]) -> type[MethodsConfigBase]:
    """The model of ``methods.*`` whose fields are the settings sections the method
    classes ``methods`` declare (`Method.section`), each validated by the class's
    `Method.settings_model` and defaulting to that model's defaults, in the order the
    methods first declare them; methods may share a section (TeLAPA's variants). A
    section without a settings model, one whose model lacks a default, or one declared
    with two models is a TypeError naming the methods."""
    fields: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for method in methods:
        section, model = method.section, method.settings_model
        if section is None:
            continue
        if model is None:
            raise TypeError(f"method {method.name!r} declares the settings section "
                            f"{section!r} but no settings_model (the pydantic model of "
                            "its settings)")
        known = owners.get(section)
        if known is not None:
            if fields[section][0] is not model:
                raise TypeError(f"methods {known!r} and {method.name!r} declare the "
                                f"settings section {section!r} with different models")
            continue
        why = _settings_model_error(model, method.name, section)
        if why is not None:
            raise TypeError(why)
        owners[section] = method.name
        fields[section] = (model, Field(default_factory=model))
    return create_model(
        "MethodsConfig", __base__=MethodsConfigBase, __module__=__name__,
        __doc__="The methods' settings sections: the built-in methods' (`methods_config`) "
                "and the plug-in ones (`register_section`), read with `section`.",
        **fields)


MethodsConfig: type[MethodsConfigBase] = methods_config(BUILTIN_METHODS.values())
"""``methods.*`` of a run preset: a field per section the built-in methods declare (each
validated by its class's ``settings_model``, `telapa.continual.builtin`), and the
plug-in sections (`register_section`)."""


class RunConfig(StrictModel):
    """Budgets, evaluation and method hyperparameters of a continual run."""

    train: TrainConfig
    steps_per_visit: EnvSteps
    """PPO env steps per task visit (a curriculum may override it per task); at most
    `MAX_ENV_STEPS`."""
    eval_every: EnvSteps
    """Env steps between evaluations during a visit (the TTT resolution); a visit holds
    at most `MAX_EVALUATIONS_PER_VISIT` evaluations."""
    eval_episodes: Episodes = 50
    """Episodes of every pre/periodic/post evaluation, on fresh seeds each time; at most
    `MAX_EPISODES`."""
    final_eval_episodes: Episodes = 50
    """Episodes of the end-of-sequence evaluation of each task; at most `MAX_EPISODES`."""
    tau_min: UnitInterval = 0.2
    """Floor of the competence target tau_T (paper App. C)."""
    intrinsic_beta: PositiveFloat | None = None
    """Episodic count bonus beta_int for training (paper eq. intrinsic_reward); None: off."""
    methods: MethodsConfig = Field(default_factory=lambda: MethodsConfig())
    """The methods' settings sections (`MethodsConfig`)."""

    @field_validator("train", mode="before")
    @classmethod
    def _named_train_preset(cls, value: Any) -> Any:
        """``train: NAME`` is the PPO preset ``configs/ppo/NAME.yaml``; ``train: {preset:
        NAME, ...}`` is that preset with the other keys merged over it (nested mappings
        key by key), e.g. ``{preset: minigrid, network: {activation: relu}}``."""
        if isinstance(value, str):
            return load_config(preset_path(value))
        if isinstance(value, dict) and "preset" in value:
            overrides = {k: v for k, v in value.items() if k != "preset"}
            return merge(load_config(preset_path(value["preset"])).model_dump(), overrides)
        return value

    @property
    def call_steps(self) -> int:
        """Env steps of one PPO call (``num_envs * n_steps * iterations_per_call``): PPO
        trains whole calls, so every budget is a multiple of it."""
        return self.train.ppo.rollout_size * self.train.ppo.iterations_per_call

    @model_validator(mode="after")
    def _chunks_hold_an_iteration(self) -> RunConfig:
        iteration = self.call_steps
        if self.eval_every < iteration:
            raise ValueError(
                f"eval_every={self.eval_every} is shorter than one PPO call "
                f"(num_envs * n_steps * iterations_per_call = {iteration} env steps)"
            )
        return self

    @model_validator(mode="after")
    def _evaluations_bounded(self) -> RunConfig:
        evaluations_per_visit(self.steps_per_visit, self.eval_every, "steps_per_visit")
        return self

    def check_budgets(self) -> None:
        """ValueError unless ``steps_per_visit`` and ``eval_every`` are whole PPO calls.
        Checked for every new run (`RunSpec.check_budgets`), not when an existing run
        directory is read: runs made before the rule keep loading."""
        for name in ("steps_per_visit", "eval_every"):
            check_whole_calls(name, getattr(self, name), self.call_steps)


MAX_EVALUATIONS_PER_VISIT = 1_000
"""Evaluations of one visit, ``ceil(budget / eval_every)`` (the paper: 20)."""
MAX_EVALUATIONS_PER_RUN = 100_000
"""Evaluations of a whole run, over every visit (the paper: 20 x 15 visits)."""


def evaluations_per_visit(steps: int, eval_every: int, name: str) -> int:
    """``ceil(steps / eval_every)``; ValueError naming ``name`` above
    `MAX_EVALUATIONS_PER_VISIT` (each evaluation is a phase of the run)."""
    count = -(-steps // eval_every)
    if count > MAX_EVALUATIONS_PER_VISIT:
        raise ValueError(f"{name}={steps} with eval_every={eval_every} makes {count:,} "
                         f"evaluations per visit; at most {MAX_EVALUATIONS_PER_VISIT:,} "
                         "(raise eval_every)")
    return count


def check_whole_calls(name: str, steps: int, call: int) -> None:
    """ValueError unless ``steps`` is a whole number of PPO calls of ``call`` env steps
    (a budget is honoured exactly, never rounded up silently)."""
    if steps % call:
        low = steps // call * call
        nearest = " or ".join(str(n) for n in sorted({low or call, low + call}))
        raise ValueError(
            f"{name}={steps} is not a multiple of one PPO call (num_envs * n_steps * "
            f"iterations_per_call = {call} env steps); use {nearest}"
        )


def parse_run_config(data: dict[str, Any], source: str = "<dict>") -> RunConfig:
    """Validates a dict (as read from YAML) into a `RunConfig`."""
    return validate(RunConfig, data, source)


def read_run_preset(name_or_path: str | Path) -> Any:
    """The mapping of ``configs/runs/<name>.yaml`` or of a YAML file given by path, merged
    over its ``base`` preset if it names one (not validated yet)."""
    path = resolve_named(name_or_path, RUN_PRESET_DIR, "run preset")
    return read_layered(path, RUN_PRESET_DIR, "run preset")


def with_sets(data: Mapping[str, Any], sets: Mapping[str, Any],
              option: str = "--set") -> dict[str, Any]:
    """A copy of the run preset mapping ``data`` with the dotted keys of ``sets`` set
    (`set_dotted`: a mapping value merges into the section there). ``train: NAME`` first
    becomes ``{preset: NAME}``, so that ``train.*`` keys merge over the PPO preset."""
    out = copy.deepcopy(dict(data))
    if isinstance(out.get("train"), str):
        out["train"] = {"preset": out["train"]}
    for key, value in sets.items():
        set_dotted(out, key, value, option)
    return out


def load_run_config(name_or_path: str | Path, sets: Mapping[str, Any] | None = None, *,
                    option: str = "--set") -> RunConfig:
    """The run preset ``configs/runs/<name>.yaml`` (or a YAML file given by path) with
    ``sets`` (``--set`` keys, named ``option`` in errors), validated, in one pass: the
    file found once (`resolve_named`), read and layered over its ``base`` (`read_layered`),
    the keys set in that mapping (`with_sets`), then validated once."""
    path = resolve_named(name_or_path, RUN_PRESET_DIR, "run preset")
    data = read_layered(path, RUN_PRESET_DIR, "run preset")
    if not sets:
        return parse_run_config(data, source=str(path))
    return parse_run_config(with_sets(data, sets, option), source=f"{path} with {option}")


def bind_env_family(config: RunConfig,
                    env_ids: list[str] | Mapping[str, tuple[str, Mapping[str, Any]]],
                    source: str = "run") -> RunConfig:
    """``config`` with the latent feature dimension D of the env family of ``env_ids``
    (`telapa.envs.family`): D is a property of the envs, not a setting. ``env_ids``: env
    ids, or a curriculum's tasks, tag -> (env id, task options), whose D is that of the
    env as the options make it (`telapa.envs.registry.feature_dim`). A preset that
    sets ``methods.telapa.latent.feature_dim`` to another value is a `ConfigError`
    naming both values; the curriculum must use one family and one D (a run has one
    latent space: tasks of other D are refused, naming each task and its D), and
    ``intrinsic_beta`` needs a family with the count bonus."""
    from telapa.config import ConfigError
    from telapa.envs.registry import common_family, feature_dim

    tasks = (dict(env_ids) if isinstance(env_ids, Mapping)
             else {env_id: (env_id, {}) for env_id in env_ids})
    try:
        family = common_family([env_id for env_id, _ in tasks.values()])
    except ValueError as err:
        raise ConfigError(f"{source}: {err}") from None
    groups: dict[tuple[str, str], list[str]] = {}  # (env id, options) -> their task tags
    for tag, (env_id, options) in tasks.items():
        groups.setdefault((env_id, json.dumps(options, sort_keys=True)), []).append(tag)

    def named(env_id: str, options: str, tags: list[str]) -> str:
        given = f" with options {options}" if options != "{}" else ""
        if not isinstance(env_ids, Mapping):
            return f"{env_id}{given}"
        return (f"task{'s' if len(tags) > 1 else ''} {', '.join(map(repr, tags))} "
                f"({env_id}{given})")

    dims: dict[tuple[str, str], int] = {}
    for (env_id, options), tags in groups.items():
        try:
            dims[env_id, options] = feature_dim(env_id, json.loads(options))
        except ConfigError as err:
            where = f" {named(env_id, options, tags)}" if isinstance(env_ids, Mapping) else ""
            raise ConfigError(f"{source}{where}: {err}") from None
    if len(set(dims.values())) != 1:
        detail = ", ".join(f"{named(*key, groups[key])}: D = {dim}" for key, dim in dims.items())
        raise ConfigError(f"{source}: tasks have sketches of different dimensions D: "
                          f"{detail}; a run has one latent space, of one D (give every "
                          "task an observation of one size)")
    dim = next(iter(dims.values()))
    if config.intrinsic_beta and not family.count_bonus:
        raise ConfigError(
            f"{source}: intrinsic_beta is set, but the episodic count bonus hashes MiniGrid "
            f"states (x, y, direction); the {family.name} env family has no such hash"
        )
    telapa = config.methods.telapa
    latent = telapa.latent
    if "feature_dim" in latent.model_fields_set and latent.feature_dim != dim:
        raise ConfigError(
            f"{source}: methods.telapa.latent.feature_dim={latent.feature_dim}, but the "
            f"{family.name} env family's sketch has D={dim}; remove the key (D comes from "
            "the env family)"
        )
    latent = latent.model_copy(update={"feature_dim": dim})
    methods = config.methods.model_copy(
        update={"telapa": telapa.model_copy(update={"latent": latent})}
    )
    return config.model_copy(update={"methods": methods})
