"""Run configuration: strict pydantic models loaded from YAML presets.

Presets ship with the package in ``telapa/configs/ppo/*.yaml`` (`CONFIG_DIR`; in a
checkout, ``configs/`` at the repository root links there). Every field is validated;
an unknown key or a bad value raises `ConfigError` naming the key (dotted path) and the
file it came from, before any work starts.
"""

from __future__ import annotations

import difflib
import re
from importlib import machinery, resources, util
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)


def _config_dir() -> Path:
    folder = resources.files("telapa") / "configs"
    if not isinstance(folder, Path):  # pragma: no cover - telapa is never imported from a zip
        raise ImportError(f"telapa's configs must be files on disk, got {folder!r}")
    return folder


CONFIG_DIR = _config_dir()
"""The built-in presets, curricula and sweeps: package data (``telapa/configs/``), found
through `importlib.resources`, so names resolve from any install (editable, wheel) and
any working directory; a path to a YAML file works as well wherever a name does."""

M = TypeVar("M", bound=BaseModel)
UnitInterval = Annotated[float, Field(ge=0.0, le=1.0)]

# --- upper bounds: absurd sizes are refused when a config is read, before any work ------
# (docs/reliability.md, "Upper bounds"). Each is far above what the paper or a study uses, and
# low enough that no loop over it hangs and no list of it exhausts memory.
MAX_ENV_STEPS = 10**10
"""Env steps of one visit, one task, one probe or one `telapa train` run (1000x the
paper's 1e7 per visit)."""
MAX_EPISODES = 100_000
"""Episodes of one evaluation (the paper: 50 MiniGrid, 5 MuJoCo)."""
MAX_ENVS = 65_536
"""Parallel envs of PPO or an evaluation (the paper: 16 MiniGrid, 8 MuJoCo)."""
MAX_WIDTH = 65_536
"""Width of a network layer (the paper: 64)."""
MAX_ITERATIONS = 1_000_000
"""PPO epochs, fused iterations, illumination candidates, latent update steps, rollout
length per env (the paper: at most 2048)."""

EnvSteps = Annotated[int, Field(gt=0, le=MAX_ENV_STEPS)]
"""A positive number of env steps, at most `MAX_ENV_STEPS`."""
Episodes = Annotated[int, Field(gt=0, le=MAX_EPISODES)]
"""A positive number of episodes, at most `MAX_EPISODES`."""
Envs = Annotated[int, Field(gt=0, le=MAX_ENVS)]
"""A positive number of parallel envs, at most `MAX_ENVS`."""
Width = Annotated[int, Field(gt=0, le=MAX_WIDTH)]
"""A positive layer width, at most `MAX_WIDTH`."""
Iterations = Annotated[int, Field(gt=0, le=MAX_ITERATIONS)]
"""A positive count of iterations, at most `MAX_ITERATIONS`."""


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message names the field and file."""


ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
"""An integer as a command line gives it: ASCII digits only."""


def ascii_int(text: str) -> int:
    """``text`` as an integer written in ASCII digits (an optional sign, no spaces or
    underscores); ValueError otherwise. Python's ``int`` also reads other scripts' digits
    (``int("\u0663")`` is 3) and ``1_0``, so an argument a user did not mean as a number
    would be read as one."""
    if not ASCII_INT.fullmatch(text):
        raise ValueError(f"invalid literal for an integer (ASCII digits 0-9): {text!r}")
    return int(text)


class StrictModel(BaseModel):
    """Frozen, and unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NetworkConfig(StrictModel):
    """Actor-critic network.

    ``encoder="flat"`` flattens every observation entry into one float vector (images as
    raw floats, ``direction``/``mission`` one-hot) and feeds separate actor and critic MLP
    towers (SB3's MlpPolicy). ``encoder="cnn"`` replaces the flattened image by a small
    conv stack (rl-starter-files / BabyAI) shared by both towers.
    """

    encoder: Literal["flat", "cnn"] = "flat"
    hidden: tuple[Width, ...] = Field(default=(64, 64), max_length=64)
    """Hidden layer widths (each at most `MAX_WIDTH`, at most 64 layers)."""
    activation: Literal["tanh", "relu", "dff"] = "tanh"
    grid_codes: Literal["raw", "unit", "onehot"] = "raw"
    """How a grid of integer codes (MiniGrid's ``image``) enters the flat encoder: the raw
    codes as floats (rl-starter-files), each code ``c`` of a channel with ``L`` levels as
    ``c / (L - 1)`` in [0, 1] (as SB3 scales uint8 images), or one-hot per channel."""


class PPOConfig(StrictModel):
    """PPO hyperparameters (CleanRL names; ``batch_size`` is the minibatch size, as SB3)."""

    num_envs: Envs = 16
    """Parallel envs (at most `MAX_ENVS`)."""
    n_steps: Iterations = 128
    """Rollout length per env (at most `MAX_ITERATIONS`)."""
    batch_size: PositiveInt = 512
    epochs: Iterations = 4
    """Update epochs per rollout (at most `MAX_ITERATIONS`)."""
    lr: PositiveFloat = 5e-4
    anneal_lr: bool = False
    adam_eps: PositiveFloat = 1e-5
    gamma: UnitInterval = 0.99
    gae_lambda: UnitInterval = 0.95
    clip_coef: PositiveFloat = 0.2
    clip_vloss: bool = False
    vf_coef: NonNegativeFloat = 0.5
    ent_coef: NonNegativeFloat = 0.01
    max_grad_norm: PositiveFloat = 0.5
    norm_adv: bool = True
    reward_scale: PositiveFloat = 1.0
    iterations_per_call: Iterations = 1
    """jax backend: rollout+update iterations fused in one ``lax.scan`` per host call of
    `Agent.train` (at most `MAX_ITERATIONS`). The continual runner's chunks and TeLAPA's
    probes are one program each whatever it is (`Agent.train_and_evaluate`); run budgets
    stay whole calls of it (`RunConfig.check_budgets`)."""

    @property
    def rollout_size(self) -> int:
        return self.num_envs * self.n_steps

    @model_validator(mode="after")
    def _minibatches_divide_rollout(self) -> PPOConfig:
        if self.rollout_size % self.batch_size:
            raise ValueError(
                f"batch_size={self.batch_size} must divide num_envs*n_steps="
                f"{self.rollout_size}"
            )
        return self


class EvalConfig(StrictModel):
    episodes: Episodes = 50
    """Episodes of one evaluation (at most `MAX_EPISODES`)."""
    deterministic: bool = False
    """False: sample actions from the policy (default); True: argmax / Gaussian mean."""
    num_envs: Envs | None = None
    """gymnasium backend: env copies the episodes are split over (None: min(episodes,
    16)); the paper's MuJoCo setting evaluates 5 episodes on 4 envs."""


class TrainConfig(StrictModel):
    """Everything `telapa.rl.Agent` needs besides the env."""

    ppo: PPOConfig = PPOConfig()
    network: NetworkConfig = NetworkConfig()
    eval: EvalConfig = EvalConfig()


def close_matches(word: str, choices: Any, *, prefix: str = "") -> str:
    """`` (did you mean 'a' or 'b'?)`` for the choices spelled like ``word`` (difflib's
    ratio >= 0.6, at most two), each shown after ``prefix``; else an empty string."""
    found = difflib.get_close_matches(word, [str(c) for c in choices], n=2, cutoff=0.6)
    shown = " or ".join(repr(prefix + f) for f in found)
    return f" (did you mean {shown}?)" if found else ""


def _field_names(model: type[BaseModel] | None, path: tuple[Any, ...]) -> list[str]:
    """The field names of the (sub)model of ``model`` reached through ``path``; [] where
    the way leaves nested models (a dict, a list, a union of several models). A model
    that takes keys besides its fields (``methods``: the plug-in methods' sections) names
    them and their models in a classmethod ``extra_fields()`` (name -> model), so that
    a misspelt plug-in key gets its "did you mean" as a built-in one does."""
    for part in path:
        if model is None:
            return []
        extra = _extra_fields(model)
        info = model.model_fields.get(str(part))
        if info is None:
            model = extra.get(str(part))
            if model is None:
                return []
            continue
        models = [t for t in _leaf_types(info.annotation)
                  if isinstance(t, type) and issubclass(t, BaseModel)]
        model = models[0] if len(models) == 1 else None
    return [*model.model_fields, *_extra_fields(model)] if model is not None else []


def _extra_fields(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """``model.extra_fields()`` where the model has one (`_field_names`), else {}."""
    extra = getattr(model, "extra_fields", None)
    return dict(extra()) if callable(extra) else {}


def format_validation_errors(err: ValidationError, source: str,
                             model: type[BaseModel] | None = None) -> str:
    """Every pydantic error on one line (``; `` between them): the dotted key and
    ``source`` (a file name); an unknown key of ``model`` with the keys spelled like it."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        if e["type"] == "extra_forbidden":
            prefix = "".join(f"{p}." for p in e["loc"][:-1])
            hint = close_matches(str(e["loc"][-1]), _field_names(model, e["loc"][:-1]),
                                 prefix=prefix)
            lines.append(f"unknown key {loc!r} in {source}{hint}")
        else:
            lines.append(f"invalid value for {loc!r} in {source}: {_message(e)}")
    return "; ".join(lines)


def _message(error: Any) -> str:
    """A pydantic error's message; a validator's own ``ValueError`` as it wrote it
    (pydantic prefixes ``"Value error, "``, which reads as noise in one line)."""
    if error["type"] == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return str(error["msg"])


def _leaf_types(annotation: Any) -> list[Any]:
    """The types an annotation admits (through Optional, unions and Annotated)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _leaf_types(get_args(annotation)[0])
    if origin is Union or origin is UnionType:
        return [t for arg in get_args(annotation) for t in _leaf_types(arg)]
    return [annotation]


def bool_errors(model: type[BaseModel], data: Any, prefix: str = "") -> list[str]:
    """Dotted keys of ``data`` that hold a boolean where ``model`` expects a number
    (pydantic's lax mode would read ``true`` as 1), searched through nested models and
    tuples/lists of numbers."""

    def numeric_only(types: list[Any]) -> bool:
        return bool({int, float} & set(types)) and bool not in types and Any not in types

    out: list[str] = []
    if not isinstance(data, dict):
        return out
    for key, value in data.items():
        info = model.model_fields.get(key)
        if info is None:
            continue
        loc = f"{prefix}{key}"
        types = _leaf_types(info.annotation)
        if isinstance(value, bool) and numeric_only(types):
            out.append(loc)
        for t in types:
            if isinstance(t, type) and issubclass(t, BaseModel) and isinstance(value, dict):
                out.extend(bool_errors(t, value, f"{loc}."))
            elif get_origin(t) is dict and isinstance(value, dict) and len(get_args(t)) == 2:
                for name, item in value.items():
                    for u in _leaf_types(get_args(t)[1]):
                        if isinstance(u, type) and issubclass(u, BaseModel):
                            out.extend(bool_errors(u, item, f"{loc}.{name}."))
            elif get_origin(t) in (tuple, list) and isinstance(value, list):
                inner = [u for arg in get_args(t) if arg is not Ellipsis
                         for u in _leaf_types(arg)]
                out.extend(f"{loc}.{i}" for i, v in enumerate(value)
                           if isinstance(v, bool) and numeric_only(inner))
    return out


def validate(model: type[M], data: Any, source: str = "<dict>") -> M:
    """Validates a nested dict (as read from YAML) into ``model``; errors name the key
    and ``source``.

    A boolean where a number belongs (``steps: true``) is an error, not read as 1
    (`bool_errors`)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(f"{source}: expected a mapping at the top level, got {kind}")
    wrong = bool_errors(model, data)
    if wrong:
        raise ConfigError("; ".join(f"invalid value for {loc!r} in {source}: a boolean where "
                                     "a number belongs" for loc in wrong))
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_errors(err, source, model)) from None


MAX_YAML_SIZE = 10_000_000
"""Size of one YAML document once its aliases are expanded (`yaml_size`): about 10 MB of
YAML; the largest shipped file is under 2,000."""


def yaml_size(node: yaml.Node, source: str) -> int:
    """The size of the document rooted at ``node`` with every alias expanded: its nodes
    plus the characters of its scalars, size(n) = 1 + len(scalar) for a scalar, else
    1 + the sum over its items (keys and values). An alias is the node it names, shared,
    so ``size`` is computed once per node (linear in the file) although it can be
    exponential in the file's length (an "anchor bomb": ten lines of ``&aK [*aJ, *aJ,
    ...]`` stand for 10^9 nodes, which validation, JSON or a hash would build); a node
    that contains an alias of itself (infinite) is a `ConfigError` naming ``source``."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_:
            raise ConfigError(f"{source}: an alias refers to a node that contains it (line "
                              f"{n.start_mark.line + 1}); YAML here must not be recursive")
        open_.add(key)
        if isinstance(n, yaml.ScalarNode):
            total = 1 + len(n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(item) for item in n.value)
        else:
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        open_.discard(key)
        sizes[key] = total
        return total

    return size(node)


SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader on libyaml where PyYAML was built with it (its wheels are): the
same documents, errors with the same marks, about 7x faster (a run's 2 kB config.yaml
in 1.1 ms against 7.4; `telapa report` reads five YAML files per run, so the pure-Python
parser made 70% of loading a run). libyaml refuses nesting deeper than 1,000 levels as
a YAML error, where the pure-Python parser ran out of recursion."""


def load_yaml_text(text: str, source: str, *, loader: type = SAFE_LOADER) -> Any:
    """``yaml.load(text, loader)``, refused (`ConfigError` naming ``source``) before any
    object is built when the document is larger than `MAX_YAML_SIZE` once its aliases are
    expanded (`yaml_size`), anywhere in it; PyYAML's own errors are raised as they are."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        size = yaml_size(node, source)
        if size > MAX_YAML_SIZE:
            raise ConfigError(f"{source} is too large once its aliases are expanded: "
                              f"{size:,} nodes and characters, at most {MAX_YAML_SIZE:,} "
                              "(an anchor used many times over, e.g. a YAML 'bomb')")
        return parser.construct_document(node)
    finally:
        parser.dispose()


def read_yaml(path: str | Path, what: str = "config") -> Any:
    """The parsed content of a YAML file; a missing, malformed, too deeply nested or too
    large file (`load_yaml_text`) is a `ConfigError`."""
    path = Path(path)
    try:
        return load_yaml_text(path.read_bytes().decode("utf-8"), f"{what} file {path}")
    except OSError as err:
        raise ConfigError(f"cannot read {what} file {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} file {path} is not UTF-8 text (byte {err.start}: "
                          f"{err.reason})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(f"{what} file {path} is nested too deeply") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's several-line message as one line: what and where (line, column)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(err, "context", None)
    return f"{where}{problem}" + (f" ({context})" if context else "")


PACKAGED = re.compile(r"^(?P<package>[A-Za-z_][\w.]*):(?P<file>[\w./-]+\.ya?ml)$")
"""``PACKAGE:FILE.yaml``: a YAML file shipped inside an installed package."""


def resolve_named(name_or_path: str | Path, folder: Path, what: str) -> Path:
    """``folder/<name>.yaml`` for a bare name; the file ``FILE.yaml`` inside the installed
    package ``PACKAGE`` for ``PACKAGE:FILE.yaml`` (a plug-in's own presets and curricula,
    wherever it is installed; an existing path of that spelling wins); else the path
    itself (a `Path`, or a string with a ``/`` or a ``.yaml``/``.yml`` suffix)."""
    text = str(name_or_path)
    packaged = PACKAGED.match(text) if isinstance(name_or_path, str) else None
    if packaged is not None and not Path(text).exists():
        return _packaged_file(packaged["package"], packaged["file"], what)
    if isinstance(name_or_path, Path) or "/" in text or text.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    path = folder / f"{text}.yaml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        raise ConfigError(
            f"unknown {what} {text!r}; available: {names} (or pass a path to a YAML file)"
        )
    return path


def package_folder(package: str) -> Path | None:
    """The folder of the installed package ``package`` (dotted: ``a.b``), found without
    importing it or its parents (`importlib.util.find_spec` of the top-level name runs
    no code; its subpackages are found by `importlib.machinery.PathFinder` in its
    folders); None when no such package is
    installed, or ``package`` names a module that is not a package (``this``,
    ``telapa.cli.__main__``)."""
    parts = package.split(".")
    if not all(part.isidentifier() for part in parts) or parts[0] == "__main__":
        return None
    try:  # a top-level name is found by every finder (editable installs too), unrun
        spec = util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    for part in parts[1:]:  # a subpackage by the path finder, its parent unimported
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = machinery.PathFinder.find_spec(part, list(spec.submodule_search_locations))
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _packaged_file(package: str, name: str, what: str) -> Path:
    """``name`` inside the installed ``package`` (`ConfigError` naming both when there is
    no such package, the name leaves the package's folder, or it holds no such file).
    The package is found, not imported (`package_folder`): resolving a file name runs no
    code."""
    root = package_folder(package)
    if root is None:
        raise ConfigError(f"{what} {package}:{name}: no installed package {package!r} "
                          "(a module that is not a package holds no files); install it, "
                          "or pass a path to a YAML file")
    path = (root / name).resolve()
    if Path(name).is_absolute() or not path.is_relative_to(root.resolve()):
        raise ConfigError(f"{what} {package}:{name}: {name!r} leaves the package "
                          f"{package!r}; name a file inside it")
    if not path.is_file():
        shipped = sorted(str(p.relative_to(root)) for p in root.rglob("*.y*ml"))
        raise ConfigError(f"{what} {package}:{name}: package {package!r} holds no {name} "
                          f"(it ships {', '.join(shipped) or 'no YAML files'})")
    return path


def parse_config(data: dict[str, Any] | None, source: str = "<dict>") -> TrainConfig:
    """Validates a nested dict (as read from YAML) into a `TrainConfig`."""
    return validate(TrainConfig, data, source)


def load_config(path: str | Path) -> TrainConfig:
    """Loads a YAML file into a `TrainConfig`; errors name the key and the file."""
    return parse_config(read_yaml(path), source=str(path))


def preset_path(name: str) -> Path:
    """Path of the PPO preset ``configs/ppo/<name>.yaml``."""
    return CONFIG_DIR / "ppo" / f"{name}.yaml"


def dump_config(config: TrainConfig) -> str:
    """YAML text of a config, loadable again with `load_config`."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
