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
from collections.abc import Callable, Mapping
from typing import Any

import jax
import pandas as pd

from telapa.config import NetworkConfig, close_matches
from telapa.continual.builtin import BUILTIN_METHODS
from telapa.continual.lockstep import HookError
from telapa.continual.methods import Method
from telapa.continual.preset import (
    MethodsConfig,
    RunConfig,
    builtin_section,
    register_section,
)
from telapa.continual.state import MethodState
from telapa.plugins import (
    METHODS_GROUP,
    PluginError,
    entry_point_origin,
    entry_points,
    load_entry_point,
)
from telapa.rl.ppo import PPOState

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

CALLED = {
    **HOOKS,
    "init": "init(self, params) -> MethodState",
    "initial_penalty": "initial_penalty(self, params) -> penalty data",
    "parts_like": "parts_like(self, params, tasks, agent_for) -> dict of parts",
    "network": "network(self, network) -> NetworkConfig",
}
"""Every member of a method that telapa calls, with its signature: the `HOOKS` and the
run's start (`init`, `initial_penalty`, `network`) and resume (`parts_like`). Telapa
passes their arguments by position, so one with a further parameter without a default
is refused at registration (`check_hooks`)."""

RETURNS = {
    "init": "a MethodState, the run's first state",
    "start_task": "the tuple (learner, mstate): a PPOState and a MethodState",
    "observe": "a MethodState, the next state",
    "end_task": "a MethodState, the next state",
    "eval_params": "the policy's parameters (a pytree like learner.params)",
    "tables": "a dict of table name -> pandas DataFrame",
    "parts_like": "a dict of part name -> pytree",
    "network": "a NetworkConfig",
}
"""What each hook whose value telapa checks (`checked`) must return."""

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
    `HOOKS` signature, or a former state method (`FORMER_STATE`); then every member
    telapa calls (`CALLED`) that is not a function or that has a parameter telapa does
    not pass (beyond its signature's, without a default): the call would fail only once
    the run reached it, after whatever work came before."""
    problems = []
    for hook, signature in HOOKS.items():
        function = getattr(method, hook)
        if not callable(function) or _signature(function) is None:
            continue  # `_call_problem` names it
        params = _positional(function)
        if len(params) < _passed(method, hook) and not _takes_args(function):
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
    for hook, signature in CALLED.items():
        problem = _call_problem(method, hook)
        if problem is not None:
            problems.append(f"{problem}; it must be {signature}")
    if problems:
        raise PluginError(f"{_who(method)}: " + "; ".join(problems)
                          + " (docs/extending.md, 'Your own method')")


def _signature(function: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):  # not introspectable (a builtin): not checked
        return None


def _passed(method: type[Method], hook: str) -> int:
    """How many positional arguments ``method``'s ``hook``, as found on the class, is
    given by telapa's call: its signature's (`Method`'s), with ``self``, or without it
    for a classmethod (bound to the class) or a staticmethod."""
    passed = len(_positional(getattr(Method, hook)))
    if inspect.ismethod(getattr(method, hook)) or isinstance(
            inspect.getattr_static(method, hook), staticmethod):
        passed -= 1
    return passed


def _takes_args(function: Callable) -> bool:
    """Whether ``function`` takes ``*args``."""
    return any(p.kind is p.VAR_POSITIONAL
               for p in inspect.signature(function).parameters.values())


def _call_problem(method: type[Method], hook: str) -> str | None:
    """What makes telapa's call of ``method``'s ``hook`` fail before it runs (it is not
    a function, or it has parameters beyond those telapa passes, without defaults);
    None if nothing does."""
    function = getattr(method, hook)
    if not callable(function):
        return f"{hook} is {type(function).__name__}, not a method"
    signature = _signature(function)
    if signature is None:
        return None
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unpassed = [p.name for p in positional[_passed(method, hook):] if p.default is p.empty]
    unpassed += [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if unpassed:
        shown = signature.replace(parameters=[p.replace(annotation=p.empty) for p in params],
                                  return_annotation=signature.empty)
        return (f"{hook}{shown} has parameter{'s' if len(unpassed) > 1 else ''} "
                f"{', '.join(unpassed)} without a default, which telapa does not pass")
    return None


def _who(method: Method | type[Method]) -> str:
    """``method 'NAME' (module.Class)``: how an error names a method."""
    cls = method if isinstance(method, type) else type(method)
    return f"method {getattr(cls, 'name', '?')!r} ({_qualname(cls)})"


def hook_name(method: Method | type[Method], hook: str) -> str:
    """``method 'NAME' (module.Class): HOOK``: how an error names a method's hook
    (`telapa.continual.lockstep.run_hooks` names the hooks it runs so)."""
    return f"{_who(method)}: {hook}"


def _shown(value: Any) -> str:
    """What a hook returned, in a few words."""
    if value is None:
        return "None"
    if isinstance(value, tuple):
        types = ", ".join(type(v).__name__ for v in value[:4])
        return f"a tuple of {len(value)} ({types}{', ...' if len(value) > 4 else ''})"
    return f"a {type(value).__name__}"


def checked(method: Method, hook: str, value: Any, *, learner: PPOState | None = None
            ) -> Any:
    """``value``, what ``method``'s ``hook`` returned, if it has the type the hook's
    signature documents (`RETURNS`); a `HookError` naming the method, the hook, what
    it returned and what it must return otherwise. The checks are cheap (types, a
    tuple's length, the number of ``eval_params``'s leaves against ``learner.params``'s),
    made once where telapa receives each value."""
    ok = True
    if hook in ("init", "observe", "end_task"):
        ok = isinstance(value, MethodState)
    elif hook == "start_task":
        ok = (isinstance(value, tuple) and len(value) == 2
              and isinstance(value[0], PPOState) and isinstance(value[1], MethodState))
    elif hook == "eval_params":
        leaves = jax.tree.leaves(value)
        ok = (value is not None and not isinstance(value, PPOState | MethodState)
              and bool(leaves) and all(hasattr(leaf, "shape") for leaf in leaves)
              and (learner is None or len(leaves) == len(jax.tree.leaves(learner.params))))
    elif hook == "tables":
        ok = isinstance(value, Mapping) and all(
            isinstance(k, str) and isinstance(v, pd.DataFrame) for k, v in value.items())
    elif hook == "parts_like":
        ok = isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    elif hook == "network":
        ok = isinstance(value, NetworkConfig)
    if not ok:
        raise HookError(f"{hook_name(method, hook)} returned {_shown(value)}; it must "
                        f"return {RETURNS[hook]} ({CALLED[hook]}; "
                        "docs/extending.md, 'Your own method')")
    return value


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
    if reads_whole_config(cls):
        warnings.warn(f"method {name!r}: __init__(config, *, key) takes the whole run config; "
                      "take (settings, **kwargs) and pass them to Method.__init__ (it gets "
                      "its own section, key and eval_episodes)", FutureWarning,
                      stacklevel=2)
        return cls(config, key=key)
    settings = None if cls.section is None else config.methods.section(cls.section)
    return cls(settings, key=key, eval_episodes=config.eval_episodes)


def reads_whole_config(cls: type[Method]) -> bool:
    """Whether ``cls.__init__`` has the former signature, a first parameter ``config``:
    such a plug-in is given the whole run config (`make_method`), so it may read any
    ``methods.*`` section, not only the one it declares."""
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


__all__ = ["BUILTIN_METHODS", "CALLED", "HOOKS", "METHODS", "METHOD_SECTIONS", "RETURNS",
           "HookError", "MethodsConfig", "bind_method", "check_hooks", "checked",
           "find_method", "hook_name", "make_method", "method_names", "method_section",
           "reads_whole_config", "register_method"]
