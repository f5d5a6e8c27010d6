"""Frames of the MuJoCo envs, drawn headless by MuJoCo's own OpenGL renderer.

gymnasium's MuJoCo envs draw ``rgb_array`` frames in an OpenGL context of the backend
that ``MUJOCO_GL`` names. A machine without a display has two: EGL (``libEGL`` with a
vendor driver: a GPU's, or Mesa's software rasteriser) and OSMesa (software). `gl_backend`
takes ``MUJOCO_GL`` when it is set, else the first of `GL_BACKENDS` that can create a
context, and sets ``MUJOCO_GL`` to it for the process (gymnasium would try a windowed
GLFW context first); when none works it raises `GLBackendError`, one line naming each
backend's failure and the Debian packages that provide them (`DEBIAN_PACKAGES`; ``make
gl`` installs EGL's as root). PyOpenGL binds one platform per process, so once a backend
has failed after loading its library, the next one can fail for that reason alone: the
message says so too.

Frames follow the MiniGrid renderer's convention (`telapa.envs.minigrid.render`): an
episode is uint8 ``(T + 1, height, width, 3)``, its start included.
"""

from __future__ import annotations

import ctypes.util
import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from telapa.envs.mujoco import MujocoFamily

GL_BACKENDS = ("egl", "osmesa")
"""Headless backends in the order `gl_backend` tries them."""
DEBIAN_PACKAGES = {
    "egl": ("libegl1", "libegl-mesa0", "libgl1-mesa-dri"),
    "osmesa": ("libosmesa6",),
}
"""Debian packages providing each backend (EGL: the loader, Mesa's EGL, Mesa's drivers)."""
_LIBRARIES = {"egl": "EGL", "osmesa": "OSMesa"}  # ctypes.util.find_library names

FRAME_SIZE = 480
"""Default frame width and height in pixels (gymnasium's MuJoCo default)."""


class GLBackendError(RuntimeError):
    """No OpenGL backend can render MuJoCo frames on this machine."""


def _backend_failure(name: str) -> str | None:
    """Why backend ``name`` cannot create an OpenGL context here; None when it can."""
    library = _LIBRARIES.get(name)
    if library is not None and ctypes.util.find_library(library) is None:
        return f"lib{library} not found"
    try:
        context = importlib.import_module(f"mujoco.{name}").GLContext(1, 1)
        context.make_current()
    # mujoco's contexts fail with ImportError, OSError, AttributeError (PyOpenGL without
    # its platform library), RuntimeError or PyOpenGL's GLError, depending on the stage.
    except Exception as err:  # noqa: BLE001
        lines = str(err).strip().splitlines() or [""]
        return f"{type(err).__name__}: {lines[0]}"
    context.free()
    return None


@functools.cache
def gl_backend() -> str:
    """The OpenGL backend MuJoCo renders with in this process (``MUJOCO_GL``), checked.

    Raises `GLBackendError` (one line) when neither the ``MUJOCO_GL`` backend, or, with
    ``MUJOCO_GL`` unset, any of `GL_BACKENDS` can create a context.
    """
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    failures = []
    for name in (requested,) if requested else GL_BACKENDS:
        failure = _backend_failure(name)
        if failure is None:
            os.environ["MUJOCO_GL"] = name
            return name
        failures.append(f"{name}: {failure}")
    egl, osmesa = (" ".join(DEBIAN_PACKAGES[name]) for name in ("egl", "osmesa"))
    raise GLBackendError(
        f"no OpenGL backend for headless MuJoCo rendering ({'; '.join(failures)}): install "
        f"the Debian packages {egl} for EGL ('make gl' as root) or {osmesa} for OSMesa"
        + (f", or unset MUJOCO_GL (set to {requested!r})" if requested else "")
    )


def make_rendering_env(
    env_id: str,
    options: dict[str, Any] | None = None,
    *,
    width: int = FRAME_SIZE,
    height: int = FRAME_SIZE,
) -> gymnasium.Env:
    """The MuJoCo family's env of ``env_id`` with its task ``options`` (friction regime,
    sketch, as in training), drawing ``(height, width, 3)`` uint8 frames on ``render()``.

    Raises `GLBackendError` before making the env when no backend works (`gl_backend`).
    """
    gl_backend()
    options = {**(options or {}), "render_mode": "rgb_array", "width": width, "height": height}
    return MujocoFamily().make_single(env_id, options)


def render_frames(
    env: gymnasium.Env,
    policy: Callable[[Any], Any],
    *,
    seed: int,
    max_steps: int | None = None,
) -> np.ndarray:
    """One episode's frames: uint8 ``(T + 1, height, width, 3)``.

    ``env`` renders ``rgb_array`` frames (`make_rendering_env`); the episode starts at
    ``env.reset(seed=seed)`` and takes ``policy(observation)``'s actions until it
    terminates, is truncated, or has taken ``max_steps`` steps. Frame 0 is the start,
    frame t the state after step t.
    """
    obs, _ = env.reset(seed=seed)
    frames = [env.render()]
    while max_steps is None or len(frames) <= max_steps:
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        frames.append(env.render())
        if terminated or truncated:
            break
    return np.stack(frames)


__all__ = [
    "DEBIAN_PACKAGES",
    "FRAME_SIZE",
    "GL_BACKENDS",
    "GLBackendError",
    "gl_backend",
    "make_rendering_env",
    "render_frames",
]
