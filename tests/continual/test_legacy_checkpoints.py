"""Checkpoints of L2Init and EWC written before their penalties became one quadratic
form (``PPOState.penalty`` a dict ``{"anchor"}`` / ``{"fisher", "anchor"}``, EWC's
method part ``fisher``) resume exactly as today's, and a checkpoint in neither layout
is named."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import pytest

from telapa.continual.curriculum import load_curriculum
from telapa.continual.preset import load_run_config
from telapa.continual.rundir import RunDir, RunDirError
from telapa.continual.runner import ContinualRun, RunSpec

from .crash import Crash, CrashAfter

TINY = Path(__file__).with_name("tiny_run.yaml")
MANIFEST = "__telapa_manifest__"
CRASH_AFTER = {"l2init": 1, "ewc": 9}
"""Chunks before the crash: L2Init inside visit 0; EWC inside visit 1, after its first
Fisher estimate (so the stored Fisher is not zero)."""


def _rewrite(path: Path, rename: Callable[[str], str | None]) -> None:
    """The checkpoint file ``path`` with every leaf path ``p`` stored as ``rename(p)``
    (None: dropped)."""
    with np.load(path) as npz:
        manifest = json.loads(npz[MANIFEST].tobytes().decode())
        arrays, leaves = {}, []
        for entry in manifest["leaves"]:
            new = rename(entry["path"])
            if new is not None:
                arrays[new] = npz[entry["path"]]
                leaves.append({**entry, "path": new})
    manifest["leaves"] = leaves
    arrays[MANIFEST] = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
    with path.open("wb") as f:
        np.savez(f, **arrays)


def _old_penalty(method: str) -> Callable[[str], str | None]:
    """Today's penalty leaf paths -> those of the earlier layout."""
    weight = "['fisher']" if method == "ewc" else None

    def rename(name: str) -> str | None:
        found = re.match(r"(.*\.penalty)\.(anchor|weight|scale)(.*)", name)
        if found is None:
            return name
        head, field, tail = found.groups()
        if field == "anchor":
            return f"{head}['anchor']{tail}"
        return None if field == "scale" or weight is None else f"{head}{weight}{tail}"
    return rename


def _seal(folder: Path) -> None:
    (folder / "files.json").write_text(json.dumps({
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())
        if f.is_file() and f.name != "files.json"}))


def write_old_layout(path: Path, method: str) -> None:
    """Rewrites every checkpoint of the run ``path`` as the earlier version wrote it."""
    for folder in RunDir(path).checkpoints():
        for name in ("learner.npz", "train_state.npz"):
            if (folder / name).exists():
                _rewrite(folder / name, _old_penalty(method))
        weight = folder / "method-weight.npz"
        if method == "ewc":
            weight.rename(folder / "method-fisher.npz")
        else:
            weight.unlink()
        _seal(folder)


def _spec(method: str) -> RunSpec:
    return RunSpec(load_curriculum("smoke"), method, 5, load_run_config(TINY), "tiny")


@pytest.fixture(scope="module", params=sorted(CRASH_AFTER))
def crashed(request, tmp_path_factory):
    method = request.param
    path = tmp_path_factory.mktemp("legacy") / method
    with pytest.raises(Crash):
        ContinualRun.start(_spec(method), path, CrashAfter(CRASH_AFTER[method])).run()
    return method, path


def _equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_an_old_checkpoint_resumes_exactly_as_todays(crashed, tmp_path):
    method, path = crashed
    today, old = tmp_path / "today", tmp_path / "old"
    shutil.copytree(path, today)
    shutil.copytree(path, old)
    write_old_layout(old, method)
    assert not list(old.glob("ckpt-*/method-weight.npz"))
    runs = {}
    for name, folder in (("today", today), ("old", old)):
        runs[name] = ContinualRun.resume(folder, CrashAfter(2))
    a, b = runs["today"], runs["old"]
    assert a.train_state is not None  # resumed inside a visit: train_state.npz was read
    _equal(a.learner, b.learner)
    _equal(a.train_state, b.train_state)
    _equal(a.method.state(), b.method.state())
    if method == "ewc":
        assert any(float(np.abs(x).max()) > 0 for x in jax.tree.leaves(a.method.state()["weight"]))
    for run in (a, b):  # two more chunks, then each writes today's layout
        with pytest.raises(Crash):
            run.run()
    _equal(a.learner, b.learner)
    assert a.records == b.records
    assert (RunDir(old).latest_checkpoint() / "method-weight.npz").exists()


def test_a_checkpoint_in_neither_layout_is_named(crashed, tmp_path):
    method, path = crashed
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    write_old_layout(broken, method)
    for folder in RunDir(broken).checkpoints():
        _rewrite(folder / "learner.npz",
                 lambda name: name.replace("['anchor']", "['theta0']"))
        _seal(folder)
    with pytest.raises(RunDirError) as err:
        ContinualRun.resume(broken)
    message = str(err.value)
    assert "learner.npz" in message and "neither in this version's layout" in message
    assert f"earlier versions of {method} wrote" in message
