"""Loading run directories for reports and scores: complete runs, or a clear error naming
the missing or incomplete one (optionally skipped)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from telapa.continual.rundir import RunDirError, RunImportError
from telapa.continual.runformat import MANIFEST
from telapa.report.results import RunRecord, load_run

STARTED_FILES = ("config.yaml", "curriculum.yaml")
"""What a run directory holds before its manifest (`telapa.continual.rundir.RunDir.create`
writes them first): a folder with one of them is a run whose start died."""


class RunPluginError(RunImportError):
    """A complete run that names a plug-in this process does not have (its method, a
    ``methods.<section>`` of its ``config.yaml``, an env id of its curriculum): its package
    is not installed here, so the run is not incomplete and ``--skip-incomplete`` is no
    advice for it (`missing_plugins`)."""


class NotARunError(RunDirError):
    """A folder that holds files but neither a run manifest nor any file a starting run
    writes first (e.g. a report's folder): not a run directory at all, so finishing it or
    ``--skip-incomplete`` is no advice for it."""


def _named(path: str | Path, err: Exception) -> str:
    text = str(err)
    return text if str(path) in text else f"{path}: {text}"


def _not_a_run(path: str | Path) -> str | None:
    """Why ``path`` is not a run directory at all (`NotARunError`), or None: it is missing,
    empty, a run (complete or not) or a run whose start died."""
    folder = Path(path)
    try:
        if not folder.is_dir() or (folder / MANIFEST).exists():
            return None
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return None
    if not names or any(name in names for name in STARTED_FILES):
        return None
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{folder} is not a run directory: it holds no {MANIFEST} ({shown}); give run "
            "directories, sweep directories or --seeds folders")


def missing_plugins(path: str | Path) -> str | None:
    """Why the complete run ``path`` cannot be read here for want of a plug-in (one line
    naming each method, settings section and env id of the run that no installed package
    or imported module provides), or None: it is not complete, or everything it names is
    known (what keeps it from loading is something else). A run records no plug-in
    package (entry points are found again from the installed packages: run.json keeps
    only the ``--import`` modules, which its readers import first), so the line names
    the entry point, section or module the run needs."""
    from telapa.config import ConfigError, read_yaml
    from telapa.continual.rundir import RunDir

    run_dir = RunDir(path)
    try:
        manifest = run_dir.manifest()
        if manifest.get("status") != "complete":
            return None
        method = manifest.get("method")
        config = run_dir.config_data()
        curriculum = read_yaml(run_dir.path / "curriculum.yaml", "run")
    except (RunDirError, ConfigError, OSError, AttributeError):
        return None
    needs = _missing_method(method, config) + _missing_env_ids(curriculum)
    if not needs:
        return None
    return (f"{path} is a complete run, but it needs plug-ins this process does not have: "
            f"{'; '.join(needs)}. Install the package that provides "
            f"{'it' if len(needs) == 1 else 'them'} (run.json records no package: entry "
            "points are found from the installed packages), then read the run again")


def _missing_method(method: object, config: dict) -> list[str]:
    """What `missing_plugins` says of the run's method and ``methods.*`` sections."""
    from telapa.continual.preset import MethodsConfig, plugin_section
    from telapa.continual.registry import find_method
    from telapa.plugins import METHODS_GROUP, PluginError

    if isinstance(method, str):
        try:
            find_method(method)
        except PluginError:
            return [f"method {method!r} (a {METHODS_GROUP} entry point named {method!r}, "
                    "or a module that registers it, is not installed here)"]
    sections = config.get("methods")
    if not isinstance(sections, dict):
        return []
    return [f"settings section methods.{name} of config.yaml (no installed method "
            "declares it)" for name in sections
            if isinstance(name, str) and name not in MethodsConfig.model_fields
            and plugin_section(name) is None]


def _missing_env_ids(curriculum: object) -> list[str]:
    """What `missing_plugins` says of the env ids of the run's ``curriculum.yaml`` (a
    mapping) that no installed env family, gymnasium registration or module provides."""
    from telapa.envs import check_env_id
    from telapa.envs.registry import BACKENDS
    from telapa.plugins import FAMILIES_GROUP

    if not isinstance(curriculum, dict) or not isinstance(curriculum.get("tasks"), dict):
        return []
    backend = curriculum.get("backend")
    if backend not in BACKENDS:  # a damaged curriculum.yaml, not a missing plug-in
        return []
    tags: dict[str, list[str]] = {}
    for tag, task in curriculum["tasks"].items():
        if isinstance(task, dict) and isinstance(task.get("env_id"), str):
            tags.setdefault(task["env_id"], []).append(str(tag))
    out = []
    for env_id, named in tags.items():
        try:
            check_env_id(env_id, backend)
        except ValueError as err:  # a PluginError too: a module:Id whose module is gone
            why = str(err).removeprefix(f"env id {env_id!r}: ") if ":" in env_id else (
                f"no installed env family ({FAMILIES_GROUP} entry points)"
                f"{' nor gymnasium registration' if backend == 'gymnasium' else ''} has it "
                f"for backend {backend!r}")
            out.append(f"env id {env_id!r} of task{'s' if len(named) > 1 else ''} "
                       f"{', '.join(map(repr, named))} ({why})")
    return out


def load_records(
    paths: Sequence[str | Path],
    *,
    skip_incomplete: bool = False,
    on_skip: Callable[[str], None] = lambda message: None,
    track: Callable[[Sequence[str | Path]], Iterable[str | Path]] = iter,
) -> list[RunRecord]:
    """Loads every complete run in ``paths``.

    A missing, foreign or incomplete directory raises `RunDirError` naming it (a folder
    that is no run at all, e.g. a report's, `NotARunError`), unless ``skip_incomplete``:
    then ``on_skip`` gets that message and the run is left out. A run whose recorded
    ``--import`` modules this process cannot import raises `RunImportError` either way (it
    is not incomplete), and so does a complete run that needs a plug-in this process does
    not have (`RunPluginError`, `missing_plugins`).
    ``track`` wraps the iteration over ``paths`` (a progress bar). Raises `RunDirError`
    when no complete run is left.
    """
    records = []
    for path in track(paths):
        try:
            records.append(load_run(path))
        except RunImportError:  # complete, maybe: this process lacks the run's modules
            raise
        except (RunDirError, FileNotFoundError, ValueError) as err:
            if (missing := missing_plugins(path)) is not None:  # complete: not to skip
                raise RunPluginError(missing) from None
            if not skip_incomplete:
                if (not_a_run := _not_a_run(path)) is not None:
                    raise NotARunError(not_a_run) from None
                raise RunDirError(_named(path, err)) from None
            on_skip(_named(path, err))
    if not records:
        raise RunDirError(f"no complete runs among {len(paths)} run director"
                          f"{'y' if len(paths) == 1 else 'ies'}")
    return records
