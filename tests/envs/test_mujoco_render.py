"""MuJoCo frames through a headless OpenGL backend, and the error where there is none."""

from __future__ import annotations

import ctypes.util

import numpy as np
import pytest

from telapa.envs.mujoco.render import (
    DEBIAN_PACKAGES,
    GLBackendError,
    gl_backend,
    make_rendering_env,
    render_frames,
)


def test_an_episode_renders_headless():
    try:
        gl_backend()
    except GLBackendError as err:
        pytest.skip(str(err))
    env = make_rendering_env("HalfCheetah-v5", {"friction": 0.5}, width=64, height=48)
    rng = np.random.default_rng(0)
    frames = render_frames(env, lambda _: rng.uniform(-1, 1, 6), seed=0, max_steps=5)
    env.close()
    assert frames.shape == (6, 48, 64, 3) and frames.dtype == np.uint8
    assert all(frame.min() < frame.max() for frame in frames)


def test_no_backend_is_a_one_line_error_naming_the_packages(monkeypatch):
    """Neither library found: no backend is even loaded, the message says what to install."""
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    gl_backend.cache_clear()
    try:
        with pytest.raises(GLBackendError) as raised:
            make_rendering_env("HalfCheetah-v5")
    finally:
        gl_backend.cache_clear()
    message = str(raised.value)
    assert "\n" not in message
    assert "egl: libEGL not found" in message and "osmesa: libOSMesa not found" in message
    for packages in DEBIAN_PACKAGES.values():
        assert " ".join(packages) in message
