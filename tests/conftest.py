"""Test session set-up: one persistent JAX compilation cache for every worker and every
subprocess a test starts (``TELAPA_JAX_CACHE``), so each program compiles once; and the
tiny-preset smoke runs that every test reading a finished run shares (`quick_run`,
`quick_runs`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fresh_venv import build_wheel
from plugin_modules import isolated_registries
from shared_runs import QUICK_METHODS, QUICK_SEEDS, made_once, make_quick_runs
from timeline import add_option as add_timeline_option
from timeline import configure as configure_timeline

from telapa.jaxcache import ENV_VAR, enable_persistent_cache

FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0",
                      "--xla_cpu_use_fusion_emitters=false",
                      "--xla_cpu_parallel_codegen_split_count=1")
"""XLA flags for every program the suite compiles, all about compile time (2 CPU cores,
JAX's cache off, one process):

* backend (LLVM) optimization level 0: a cold tiny Finetune run (tests/shared_runs.py)
  took 30 s against 38 s, and the whole suite 18.3 min against 23.7 (with
  TELAPA_FSYNC=off);
* XLA CPU's older loop emitters instead of its fusion emitters: a cold tiny TeLAPA run
  compiled its 301 programs in 26.5 s against 48.2 (wall 57.5 s against 77.9), a tiny
  Finetune run its 66 in 11.5 s against 20.4;
* each program's LLVM module compiled as one piece, not split for parallel code
  generation: the suite's two workers keep both cores busy already, and the split's
  threads add CPU time. A cold tiny TeLAPA run (`telapa run`, JAX's cache off, the two
  flags above, beside a two-thread study, 2026-12-06) took 43.0-43.9 s of CPU against
  47.6-48.3 s (three runs against two; 27.2 s with every program from the cache, so
  its compiles about 17 s against 21).

They change float rounding (fused multiply-adds, the order of a fusion's operations), so
a result can differ from a default process's by a few ulps and a tiny run's SR by an
episode: tests compare runs of the suite with each other, never with numbers a default
process made."""


SB3_LOGDIR = "SB3_LOGDIR"
"""Where SB3's logger writes (`pytest_configure`), so that the suite leaves nothing in
the machine's temporary folder."""

REQUIRE_ENV = "TELAPA_REQUIRE"
"""Comma-separated optional modules a session must have (``make test`` sets
``TELAPA_REQUIRE=stable_baselines3,torch``): their tests then run instead of skipping, and a
missing one stops the session at its start, naming it."""


def _require_optional_modules() -> None:
    import importlib.util

    wanted = [m.strip() for m in os.environ.get(REQUIRE_ENV, "").split(",") if m.strip()]
    missing = [m for m in wanted if importlib.util.find_spec(m) is None]
    if missing:
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={os.environ[REQUIRE_ENV]} asks for {', '.join(missing)}, which "
            "this environment lacks: `make sb3` installs the bench extra (SB3, torch)")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_timeline_option(parser)  # --timeline PATH: where the workers wait (tests/timeline.py)


def pytest_configure(config: pytest.Config) -> None:
    _require_optional_modules()
    configure_timeline(config)
    # In the environment, so that every worker and every subprocess a test starts has
    # them (before JAX makes its backend, which reads XLA_FLAGS once).
    os.environ.setdefault("TELAPA_FSYNC", "off")  # telapa.io.atomic: durability, untested
    # a checkpoint after every phase, as the crash and resume tests count on (the share
    # that spaces them by their cost is tested on its own: tests/continual/test_runner.py)
    os.environ.setdefault("TELAPA_CHECKPOINT_SHARE", "1")
    # the tests read the MP4s `telapa play` writes with imageio, whose ffmpeg reader would
    # start ffmpeg with ``preexec_fn=os.setpgrp``: Python in the fork of a JAX process
    # (telapa's writer does without one: telapa.play._write_mp4)
    os.environ.setdefault("IMAGEIO_FFMPEG_NO_PREVENT_SIGINT", "1")
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in FAST_COMPILE_FLAGS:  # a flag the caller set wins
        if flag.partition("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags
    cache = getattr(config, "cache", None)  # absent under ``-p no:cacheprovider``
    folder = cache.mkdir("telapa-jax") if cache is not None else None
    if folder is not None:
        os.environ[ENV_VAR] = str(folder)
        enable_persistent_cache(folder)
    # SB3's logger makes a folder tempdir/SB3-<date> at every `learn` unless told where
    # (stable_baselines3.common.logger.configure): one folder of the session's instead.
    os.environ.setdefault(SB3_LOGDIR, str(cache.mkdir("sb3-logs") if cache is not None
                                          else config.rootpath / ".pytest_cache" / "sb3-logs"))


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> Callable[[str, int], Path]:
    """``quick_run(method, seed)``: the run directory of a finished smoke run (curriculum
    ``smoke``, run preset ``tests/continual/tiny_run.yaml`` named ``tiny``), made once per
    session on first use, with the method's other seeds (`make_quick_runs`). Tests read
    it; a test that writes copies it first."""
    def get(method: str, seed: int) -> Path:
        if seed not in QUICK_SEEDS:
            raise ValueError(f"quick runs have seeds {QUICK_SEEDS}, not {seed}")
        folder = made_once(tmp_path_factory, f"quick-{method}", make_quick_runs(method))
        return folder / f"{method}-s{seed}"
    return get


@pytest.fixture(scope="session")
def quick_runs(quick_run) -> dict[tuple[str, int], Path]:
    """(method, seed) -> run directory: Finetune and TeLAPA, seeds 0 and 1 (`quick_run`),
    TeLAPA's last (test_telapa_run.py needs only those: while another worker makes them,
    this one makes Finetune's)."""
    return {(m, s): quick_run(m, s) for m in QUICK_METHODS for s in QUICK_SEEDS}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """telapa's wheel, built once per session from a copy of the sources (the checkout is
    not written) for the tests that install it (tests/test_wheel.py, test_examples.py)."""
    folder = made_once(tmp_path_factory, "wheel", build_wheel)
    (found,) = (folder / "dist").glob("telapa-*.whl")
    return found


@pytest.fixture
def plugin_site(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A folder on ``sys.path`` for the test's own modules and installed packages, and
    every plug-in registry put back as it was afterwards (tests/plugin_modules.py)."""
    yield from isolated_registries(monkeypatch, tmp_path)
