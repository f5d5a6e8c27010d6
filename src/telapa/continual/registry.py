"""Every continual method by name (`telapa run --method NAME`), and what follows from
each method's declared settings section (`Method.section`, validated by its
`Method.settings_model`).

The built-in methods are `telapa.continual.builtin.BUILTIN_METHODS` (their sections are
the fields of `telapa.continual.preset.MethodsConfig`), so a new built-in method is its
class, its settings model beside it and its entry there. A plug-in method
(`telapa.plugins`) is a `Method` subclass that an installed package names under the
``telapa.methods`` entry point (loaded the first time its name is asked for, or when
every name is listed), or that a module given to ``--import`` passes to
`register_method`. Its own settings section is registered with the run presets
(`telapa.continual.preset.register_section`); a name of a built-in, or a built-in
section with another model, is an error naming both.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable

import jax

from telapa.config import close_matches
from telapa.continual.builtin import BUILTIN_METHODS
from telapa.continual.methods import Method
from telapa.continual.preset import (
    MethodsConfig,
    RunConfig,
    builtin_section,
    register_section,
)
from telapa.plugins import (
    METHODS_GROUP,
    PluginError,
    entry_point_origin,
    entry_points,
    load_entry_point,
)

METHODS: dict[str, type[Method]] = dict(BUILTIN_METHODS)
"""Every method known so far: the built-ins and the plug-ins registered (an entry point
is added the first time it is asked for: use `find_method`, `method_names`)."""

METHOD_SECTIONS: dict[str, str] = {name: m.section for name, m in METHODS.items()
                                   if m.section is not None}
"""Built-in method -> the ``methods.*`` section of `RunConfig` it reads (the others
ignore it), as the methods declare it; `method_section` answers for plug-ins too."""


METHOD_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
"""What a method's name may be: it names run directories (``--seeds``) and sweep cells,
so no ``/``, ``..``, spaces or markup (``x/../../ESCAPED`` once wrote outside ``--out``)."""


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def register_method(method: type[Method]) -> type[Method]:
    """Adds the plug-in ``method`` (a `Method` subclass) under its ``name``; returns it, so
    it can decorate the class. Its ``section``, when it is not a built-in one, needs a
    ``settings_model`` and is registered with the run presets; a built-in section is read
    as it is (``settings_model`` left out, or the built-in one, as a subclass of a
    built-in method inherits it). A built-in's name, another class under the same name,
    or a section it cannot have is a `PluginError`; registering the same class again is
    a no-op."""
    if not (isinstance(method, type) and issubclass(method, Method)):
        raise PluginError(f"{method!r} is not a telapa.continual.methods.Method subclass")
    name = method.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise PluginError(f"method class {_qualname(method)} has no name of its own (set "
                          "the class attribute name)")
    if not METHOD_NAME.fullmatch(name):
        raise PluginError(f"method class {_qualname(method)} is named {name!r}; a method's "
                          "name names run and cell directories, so it is lower-case ASCII "
                          "letters, digits, '-' and '_', starting with a letter (at most "
                          "64 characters)")
    if name in BUILTIN_METHODS and BUILTIN_METHODS[name] is not method:
        raise PluginError(f"method {name!r} ({_qualname(method)}) has the name of a built-in "
                          f"method ({_qualname(BUILTIN_METHODS[name])}); give it another name")
    known = METHODS.get(name)
    if known is not None and known is not method:
        raise PluginError(f"two methods are named {name!r}: {_qualname(known)} and "
                          f"{_qualname(method)}")
    check_hooks(method)
    section, model = method.section, method.settings_model
    if section is not None:
        builtin = builtin_section(section)
        if model is not None and model is not builtin:
            register_section(section, model, name)
        elif builtin is None:
            raise PluginError(f"method {name!r} declares the settings section {section!r}, "
                              "which is not a built-in one; give the class a settings_model "
                              "(a pydantic model of its settings)")
    METHODS[name] = method
    return method


HOOKS = {
    "start_task": "start_task(self, mstate, learner, ctx) -> (learner, mstate)",
    "observe": "observe(self, mstate, visit, kind, result) -> mstate",
    "end_task": "end_task(self, mstate, learner, ctx) -> mstate",
    "eval_params": "eval_params(self, mstate, task, learner) -> params",
    "tables": "tables(self, mstate) -> dict of DataFrames",
}
"""Each hook a method may override, with its signature (`Method`)."""

FORMER_STATE = {"state": "init(self, params) -> MethodState",
                "load_state": "nothing: the checkpoint saves the MethodState itself",
                "state_like": "parts_like(self, params, tasks, agent_for) -> parts",
                "stored_tasks": "MethodState.storing(task)"}
"""The former persistent-state methods, each with what replaces it."""


def _positional(function: Callable) -> list[inspect.Parameter]:
    """The positional parameters of ``function`` (``self`` first)."""
    return [p for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def check_hooks(method: type[Method]) -> None:
    """`PluginError` naming every hook of ``method`` written for the former API (hooks
    that changed the method object): one taking fewer positional arguments than its
    `HOOKS` signature, or a former state method (`FORMER_STATE`)."""
    problems = []
    for hook, signature in HOOKS.items():
        params = _positional(getattr(method, hook))
        expected = len(_positional(getattr(Method, hook)))
        if len(params) < expected:
            problems.append(f"{hook}({', '.join(p.name for p in params[1:])}) should be "
                            f"{signature}")
    for old, replacement in FORMER_STATE.items():
        if any(old in vars(cls) for cls in method.__mro__ if cls is not object):
            problems.append(f"{old}() is replaced by {replacement}")
    if problems:
        raise PluginError(
            f"method class {_qualname(method)} is written for the former hooks: a method's "
            "hooks now take its state (a MethodState) and return the next one, and the "
            "method object never changes (docs/extending.md, 'Your own method'): "
            + "; ".join(problems))


def find_method(name: str) -> type[Method]:
    """The method class registered as ``name``, loading the ``telapa.methods`` entry point
    of that name on first use; `PluginError` naming the available methods otherwise."""
    method = METHODS.get(name)
    if method is not None:
        return method
    if name in entry_points(METHODS_GROUP):
        loaded = load_entry_point(METHODS_GROUP, name)
        registered = register_method(loaded)
        if registered.name != name:
            raise PluginError(f"{METHODS_GROUP} entry point {name!r} ("
                              f"{entry_point_origin(METHODS_GROUP, name)}) gives the method "
                              f"named {registered.name!r}; name the entry point after it")
        return registered
    names = method_names()
    raise PluginError(f"unknown method {name!r}{close_matches(name, names)}; available: "
                      f"{', '.join(names)} (a plug-in's method is known once its module is "
                      "imported, --import MODULE, or its package installed)")


def method_names() -> list[str]:
    """The names of every method: registered ones, then installed entry points not yet
    loaded (nothing is imported)."""
    return list(dict.fromkeys([*METHODS, *entry_points(METHODS_GROUP)]))


def method_section(name: str) -> str | None:
    """The settings section the method ``name`` reads; None for a method without one,
    or one not (or no longer) registered."""
    try:
        return find_method(name).section
    except PluginError:
        return None


def make_method(name: str, config: RunConfig, *, key: jax.Array | None = None) -> Method:
    """The method registered as ``name`` (see `find_method`) for a run of ``config``: made
    with its own settings section only (``config.methods.<section>``), its randomness
    ``key`` (the runner derives it from the run seed) and the run's ``eval_episodes``. A
    plug-in whose ``__init__`` still takes the whole run config (``(config, *, key)``,
    the former signature) is given it, with a `FutureWarning` (shown by default: a
    DeprecationWarning raised here is hidden from whoever runs ``telapa run``, since
    Python shows those only for code in ``__main__``)."""
    cls = find_method(name)
    if _takes_run_config(cls):
        warnings.warn(f"method {name!r}: __init__(config, *, key) takes the whole run config; "
                      "take (settings, **kwargs) and pass them to Method.__init__ (it gets "
                      "its own section, key and eval_episodes)", FutureWarning,
                      stacklevel=2)
        return cls(config, key=key)
    settings = None if cls.section is None else config.methods.section(cls.section)
    return cls(settings, key=key, eval_episodes=config.eval_episodes)


def _takes_run_config(cls: type[Method]) -> bool:
    """Whether ``cls.__init__`` has the former signature: a first parameter ``config``."""
    params = list(inspect.signature(cls.__init__).parameters)
    return len(params) > 1 and params[1] == "config"


def bind_method(config: RunConfig, name: str) -> RunConfig:
    """``config`` with the plug-in settings section of method ``name`` written out (its
    defaults when the preset left it out): ``config.yaml`` then records what the method
    reads, and runs group by it as by a built-in section (`MethodsConfig.with_section`)."""
    section = method_section(name)
    if section is None or section in MethodsConfig.model_fields:
        return config
    return config.model_copy(update={"methods": config.methods.with_section(section)})


__all__ = ["BUILTIN_METHODS", "HOOKS", "METHODS", "METHOD_SECTIONS", "MethodsConfig",
           "bind_method", "check_hooks", "find_method", "make_method", "method_names",
           "method_section", "register_method"]
