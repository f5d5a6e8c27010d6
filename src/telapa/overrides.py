"""Settings from the command line and presets that build on another.

``--set dotted.key=value`` (``telapa train``, ``run`` and ``sweep``, repeatable) changes
one setting of a preset without copying it::

    telapa run --curriculum smoke --method ewc --set methods.ewc.lam=50 \\
               --set train.ppo.lr=1e-3 --set "train.network.hidden=[32, 32]"

Each value is read as YAML (`parse_value`: ``1e-3`` and ``3`` are numbers, ``true`` a
boolean, ``null`` None, ``[32, 32]`` a list; anything else a string), the dotted key is
set in the preset's mapping and the result is validated again by the same pydantic model
(`override`), so a key that names no setting or a value a setting rejects is an error
naming the key, before any work starts. A mapping value merges into the section it
names (``--set "train.ppo={epochs: 2, lr: 1e-3}"`` keeps the section's other keys).

A run preset may build on another (`read_layered`)::

    base: quick                # a preset name, or a path (relative to this file)
    steps_per_visit: 49152     # everything else: merged over the base
    methods: {ewc: {lam: 50}}  # nested mappings merge key by key

A base may have a base of its own; a cycle is an error that names the chain.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from telapa.config import ConfigError, load_yaml_text, read_yaml, resolve_named, validate

M = TypeVar("M", bound=BaseModel)

BASE_KEY = "base"
"""The key of a preset that names the preset it builds on."""


class _ValueLoader(yaml.SafeLoader):
    """YAML for one command-line value: ``1e-3`` is a number (YAML 1.2; PyYAML's YAML 1.1
    reads it as a string), and dates stay strings (a run manifest holds JSON)."""


_ValueLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
_ValueLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _ValueLoader.yaml_implicit_resolvers.items()
}


def parse_value(text: str, source: str = "a value") -> Any:
    """A command-line value read as YAML (see the module docstring); text that is not
    valid YAML (``a: b: c``) is kept as the string it is; one too large once its aliases
    are expanded is a `ConfigError` naming ``source`` (`load_yaml_text`)."""
    try:
        return load_yaml_text(text, source, loader=_ValueLoader)
    except yaml.YAMLError:
        return text


def parse_sets(items: Iterable[str], option: str = "--set") -> dict[str, Any]:
    """``["train.ppo.lr=1e-3", "eval_every=4096"]`` -> ``{"train.ppo.lr": 0.001,
    "eval_every": 4096}`` in the given order. `ConfigError` for an item without ``=``,
    a key with an empty part (``a..b``, ``.a``) and a key given twice."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq:
            raise ConfigError(f"{option} {item!r}: expected KEY=VALUE, e.g. "
                              f"{option} train.ppo.lr=1e-3")
        if not key or not all(key.split(".")):
            raise ConfigError(f"{option} {item!r}: {key!r} is not a dotted key (a.b.c)")
        if key in out:
            raise ConfigError(f"{option} {key} is given twice")
        out[key] = parse_value(text, f"{option} {key}")
    return out


def set_dotted(data: dict[str, Any], key: str, value: Any, source: str = "--set") -> None:
    """Sets ``data[a][b][c] = value`` for ``key`` ``"a.b.c"`` in place, creating missing
    mappings; a mapping value merges into a mapping already there (`merge`:
    ``train.ppo={epochs: 2}`` changes only ``epochs``). `ConfigError` when a part of the
    way holds something else."""
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(f"invalid key {key!r} in {source}: {where!r} is a value "
                              f"({child!r}), not a section")
        node = child
    last = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        value = merge(node[last], value)
    node[last] = value


def get_dotted(data: Mapping[str, Any], key: str) -> Any:
    """``data[a][b][c]`` for ``"a.b.c"``; KeyError if it is not there."""
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in: mappings merge key by key, any other value
    (lists included) replaces the base's. Neither argument is changed."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def override(config: M, sets: Mapping[str, Any], source: str = "--set") -> M:
    """``config`` with the dotted keys of ``sets`` set, validated again by its own model
    (``type(config)``); `ConfigError` names the key and ``source``. Settings neither the
    preset nor ``sets`` gave stay unset (they keep following the model's defaults and the
    checks that depend on it, e.g. the env family's latent D). No ``sets``: ``config``."""
    if not sets:
        return config
    data = config.model_dump(mode="json", exclude_unset=True)
    for key, value in sets.items():
        set_dotted(data, key, value, source)
    return validate(type(config), data, source)


def differences(old: BaseModel, new: BaseModel, keys: Iterable[str]) -> dict[str, tuple]:
    """Of ``keys``, those whose value differs between ``old`` and ``new`` -> (old, new)
    values (None where a key is missing)."""
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    out = {}
    for key in keys:
        before, after = (_get_or_none(d, key) for d in (a, b))
        if before != after:
            out[key] = (before, after)
    return out


def _get_or_none(data: Mapping[str, Any], key: str) -> Any:
    try:
        return get_dotted(data, key)
    except KeyError:
        return None


def read_layered(path: str | Path, folder: Path, what: str) -> Any:
    """The content of the YAML file ``path``; when it is a mapping with ``base: NAME``,
    merged over that preset (a name in ``folder`` or a path, relative paths first to
    ``path``'s folder), itself read the same way. `ConfigError` for a cycle (naming the
    chain), a base that is not a name or path, or a base that is not a mapping."""
    return _read_layered(Path(path), folder, what, ())


def _read_layered(path: Path, folder: Path, what: str, chain: tuple[Path, ...]) -> Any:
    data = read_yaml(path, what)
    if not isinstance(data, dict) or BASE_KEY not in data:
        return data
    name = data.pop(BASE_KEY)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"invalid value for {BASE_KEY!r} in {path}: expected a {what} name "
                          f"or a path to a YAML file, got {name!r}")
    try:
        base = resolve_named(name, folder, what)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    if not base.is_absolute() and (path.parent / base).is_file():
        base = path.parent / base
    here = (*chain, path.resolve())
    if base.resolve() in here:
        names = " -> ".join(str(p) for p in (*here, base.resolve()))
        raise ConfigError(f"{path}: {BASE_KEY} {name!r} makes a cycle: {names}")
    parent = _read_layered(base, folder, what, here)
    if parent is None:
        parent = {}
    if not isinstance(parent, dict):
        raise ConfigError(f"{path}: its {BASE_KEY} {base} holds a {type(parent).__name__}, "
                          "not a mapping")
    return merge(parent, data)
