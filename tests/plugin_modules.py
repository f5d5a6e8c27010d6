"""The user's own modules and packages, written by tests that plug them into telapa
(tests/test_plugins.py, tests/continual/test_tracking.py): a module that registers an
env id and a method when imported (the ``--import`` route), an installed package's
entry points (a ``*.dist-info`` folder on ``sys.path``: what ``pip install`` leaves, read
by `importlib.metadata` for real), and registries put back as they were after each test.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import pytest

import telapa.continual.preset as preset
import telapa.continual.registry as registry
import telapa.envs.registry as env_registry
import telapa.plugins as plugins

WALK_ENV = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Walk(gymnasium.Env):
    """Cells 0 .. 3: reach 3 (reward 2) within 6 steps, else reward 1 on the last step."""

    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.max_steps = 6
        self.position = self.steps = 0

    def _obs(self):
        return np.array([self.position / 3, self.steps / 6], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.steps = 0
        return self._obs(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        reached, timeout = self.position >= 3, self.steps >= 6 and self.position < 3
        return self._obs(), 2.0 if reached else 1.0 if timeout else 0.0, reached, timeout, {}
'''

PLUG_METHOD = '''
from pydantic import NonNegativeFloat

from telapa.config import StrictModel
from telapa.continual.methods import Finetune


class PlugSettings(StrictModel):
    lam: NonNegativeFloat = 0.5


class PlugFinetune(Finetune):
    name = "{name}"
    section = "{section}"
    settings_model = PlugSettings
'''


def write_module(folder: Path, name: str, source: str) -> str:
    """Writes module ``name`` into ``folder`` (which must be on ``sys.path``)."""
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return name


def import_route_module(folder: Path, name: str, *, env_id: str, method: str,
                        section: str) -> str:
    """A module for ``--import``: importing it registers the gymnasium id ``env_id`` (a
    `WALK_ENV`) and the method ``method`` with its own settings section ``section``."""
    return write_module(folder, name, WALK_ENV + PLUG_METHOD.format(name=method,
                                                                     section=section) + f'''
from telapa.continual.registry import register_method

gymnasium.register({env_id!r}, entry_point=Walk)
register_method(PlugFinetune)
''')


def install_entry_points(folder: Path, distribution: str,
                         groups: dict[str, dict[str, str]]) -> None:
    """A ``DIST-0.1.dist-info`` in ``folder`` (on ``sys.path``) with ``groups``' entry
    points, as ``pip install`` writes them."""
    info = folder / f"{distribution}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items())
        for group, eps in groups.items()))


def isolated_registries(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The body of the ``plugin_site`` fixture (tests/conftest.py): every plug-in registry
    as it was, after the test (methods, sections, families, entry points loaded, modules
    imported, gymnasium ids and the modules written); yields a folder on ``sys.path``
    for the test's modules and packages."""
    monkeypatch.setattr(registry, "METHODS", dict(registry.METHODS))
    monkeypatch.setattr(preset, "_PLUGIN_SECTIONS", dict(preset._PLUGIN_SECTIONS))
    monkeypatch.setattr(preset, "_ENTRY_POINTS_READ", False)
    monkeypatch.setattr(preset, "_UNLOADABLE", [])
    monkeypatch.setattr(env_registry, "_PLUGINS", dict(env_registry._PLUGINS))
    monkeypatch.setattr(env_registry, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    ids, modules = set(gymnasium.registry), set(sys.modules)
    yield folder
    for env_id in set(gymnasium.registry) - ids:
        del gymnasium.registry[env_id]
    for name in set(sys.modules) - modules:
        if getattr(sys.modules[name], "__file__", None) and \
                Path(sys.modules[name].__file__).is_relative_to(folder):
            del sys.modules[name]
