"""Plug-ins: the user's own env families, methods and envs, found without editing telapa.

Three routes, all resolved before any config is validated and any work starts:

* **Entry points** of an installed package (``importlib.metadata``), loaded lazily by the
  registry that needs them, the first time it meets a name it does not know::

      [project.entry-points."telapa.methods"]
      finetune-decay = "my_package.methods:FinetuneDecay"    # a `Method` subclass
      [project.entry-points."telapa.families"]
      pointmass = "my_package.family:PointMassFamily"        # an `EnvFamily` (class or object)

  The entry point's name is the method's (family's) ``name``; a name a built-in has is
  an error naming both.
* ``--import MODULE`` (`import_modules`, repeatable on the commands that build runs): the
  module is imported first, so whatever it registers (a gymnasium id, a method through
  `telapa.continual.registry.register_method`, a family through
  `telapa.envs.registry.register_family`) is there when the curriculum and the presets
  are read. A run records its modules in ``run.json`` (``imports``) and every later
  reader of the run directory (``--resume``, ``telapa metrics``, sweep workers) imports
  them again.
* **Env ids as** ``module:Id`` (`split_env_id`, `import_env_module`): the module is
  imported, then ``Id`` is made, as ``gymnasium.make("module:Id")`` does.

A module or entry point that cannot be imported (whatever it raises, ``sys.exit()``
included, which would otherwise end telapa as if it had succeeded), or an id its module
does not register, is a `PluginError`: one line naming the id, module or entry point and
why.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Iterable
from typing import Any

from telapa.config import ConfigError

FAMILIES_GROUP = "telapa.families"
"""Entry points of env families: name -> an `EnvFamily` class or instance."""
METHODS_GROUP = "telapa.methods"
"""Entry points of continual methods: name -> a `Method` subclass."""

MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
"""A dotted module name (``my_package.envs``)."""


class PluginError(ConfigError):
    """A plug-in (module, entry point, ``module:Id`` env id) cannot be used; the message
    names it and why, on one line."""


def _why(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


_IMPORTED: dict[str, None] = {}


def import_module(name: str, what: str) -> Any:
    """Imports the module ``name`` (``what`` says who asked, for the error); a
    `PluginError` naming both when it is not a module name or its import fails."""
    if not isinstance(name, str) or not MODULE.fullmatch(name):
        raise PluginError(f"{what}: {name!r} is not a module name (a.b.c)")
    try:
        return importlib.import_module(name)
    except SystemExit as err:  # sys.exit() at import would end telapa with its code
        raise PluginError(f"{what}: module {name!r} exited while being imported (SystemExit"
                          f"({err.code!r})); a plug-in module must only define and register "
                          "things, not run a program") from None
    except Exception as err:  # noqa: BLE001 - whatever the user's module raises
        hint = " (is its package installed, or its folder on PYTHONPATH?)" \
            if isinstance(err, ModuleNotFoundError) and err.name \
            and name.startswith(err.name) else ""
        raise PluginError(f"{what}: cannot import module {name!r}: {_why(err)}{hint}"
                          ) from None


def import_modules(names: Iterable[str], source: str = "--import") -> tuple[str, ...]:
    """Imports each module of ``names`` in order (``--import MODULE``); returns them.
    They are remembered (`imported_modules`) for the runs this process starts."""
    names = tuple(dict.fromkeys(names))
    for name in names:
        import_module(name, f"{source} {name}")
        _IMPORTED[name] = None
    return names


def imported_modules() -> tuple[str, ...]:
    """The modules `import_modules` imported in this process, in order."""
    return tuple(_IMPORTED)


def split_env_id(env_id: str) -> tuple[str | None, str]:
    """``"my_pkg.envs:Ring-v0"`` -> ``("my_pkg.envs", "Ring-v0")``; an id without a
    module -> ``(None, env_id)`` (gymnasium's ``module:Id`` form)."""
    module, sep, name = env_id.partition(":")
    return (module, name) if sep else (None, env_id)


def import_env_module(env_id: str) -> str:
    """The bare id of ``env_id`` after importing its module, if it names one (``module:Id``);
    `PluginError` naming the id and the module when the import fails or the id is empty."""
    module, name = split_env_id(env_id)
    if module is None:
        return env_id
    if not name:
        raise PluginError(f"env id {env_id!r}: nothing after ':' (expected module:Id)")
    import_module(module, f"env id {env_id!r}")
    return name


# --- entry points ---------------------------------------------------------------------

_LOADED: dict[tuple[str, str], Any] = {}


def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The entry points of ``group`` by name (read from the installed packages' metadata,
    nothing imported); two packages giving one name is a `PluginError` naming both."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=group):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise PluginError(f"two {group} entry points are named {ep.name!r}: "
                              f"{_origin(other)} and {_origin(ep)}; uninstall one")
        found[ep.name] = ep
    return found


def entry_point_origin(group: str, name: str) -> str:
    """Where entry point ``name`` of ``group`` points, and the package that installs it:
    ``module:Object in package dist-name`` (for messages)."""
    ep = entry_points(group).get(name)
    return _origin(ep) if ep is not None else f"no {group} entry point named {name!r}"


def _origin(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    package = f" in package {dist.name}" if dist is not None else ""
    return f"{ep.value}{package}"


def load_entry_point(group: str, name: str) -> Any:
    """The object of entry point ``name`` of ``group`` (imported once, then cached);
    `PluginError` naming it and its package when there is none or it does not load."""
    key = (group, name)
    if key not in _LOADED:
        ep = entry_points(group).get(name)
        if ep is None:
            raise PluginError(f"no {group} entry point named {name!r}")
        try:
            _LOADED[key] = ep.load()
        except (Exception, SystemExit) as err:  # noqa: BLE001 - whatever the module raises
            raise PluginError(f"{group} entry point {name!r} ({_origin(ep)}) cannot be "
                              f"loaded: {_why(err)}") from None
    return _LOADED[key]


def load_entry_points(group: str) -> dict[str, Any]:
    """Every entry point of ``group``, loaded (`load_entry_point`), by name."""
    return {name: load_entry_point(group, name) for name in entry_points(group)}


__all__ = ["FAMILIES_GROUP", "METHODS_GROUP", "PluginError", "entry_point_origin", "entry_points",
           "import_env_module", "import_module", "import_modules", "imported_modules",
           "load_entry_point", "load_entry_points", "split_env_id"]
