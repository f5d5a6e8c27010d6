"""A Ray cluster that refuses this process's token: after an earlier cluster left
``~/.ray/auth_token``, ``ray start --head`` turns token authentication on, a driver
given ``--address`` sends no token, and Ray logs "InvalidAuthToken" once a second for
20 s before "Failed to connect to Ray cluster". telapa names the cause in one line: the
address, the token file, what to set. (Ray's refusal is reproduced by replacing
`ray.init`, raising what Ray 2.60 raises; the suite's one real cluster is in
tests/continual/test_sweep.py, which keeps Ray's home and auth settings its own.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import FAULT_RUN, ONE_TASK, fails

ADDRESS = "127.0.0.1:6379"
GCS_REFUSAL = ("Failed to connect to GCS. Last connection error: Traceback (most recent "
               "call last):\n  ...\nray.exceptions.AuthenticationError: RPC error: "
               "InvalidAuthToken: Authentication token is missing or incorrect. Note: "
               "RAY_AUTH_MODE is currently 'disabled' (not 'token'). ...")
"""The message of the exception `ray.init` raises its ConnectionError from (Ray 2.60)."""


@pytest.fixture
def ray_home(tmp_path, monkeypatch) -> Path:
    """A home whose ``~/.ray/auth_token`` an earlier cluster left, and no RAY_AUTH_*
    setting; returns the token file."""
    token = tmp_path / "home" / ".ray" / "auth_token"
    token.parent.mkdir(parents=True)
    token.write_text("0123456789abcdef")
    monkeypatch.setenv("HOME", str(token.parent.parent))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return token


def _cluster(monkeypatch, cause: str) -> None:
    """`ray.init(address=...)` fails as Ray's does, from an error saying ``cause``."""
    ray = pytest.importorskip("ray")

    def init(address=None, **kwargs):
        try:
            raise RuntimeError(cause)
        except RuntimeError as err:
            raise ConnectionError(f"Failed to connect to Ray cluster at {address}") from err

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)


def test_a_refused_token_is_named_with_the_address_and_the_token_file(tmp_path, capsys,
                                                                      monkeypatch, ray_home):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"preset: {FAULT_RUN}\ncurricula: [{ONE_TASK}]\nmethods: [ewc]\n")
    args = ["sweep", str(sweep), "--out", str(tmp_path / "out"), "--backend", "ray",
            "--address", ADDRESS]
    _cluster(monkeypatch, GCS_REFUSAL)
    fails(args, capsys, f"the Ray cluster at {ADDRESS} requires token authentication",
          "RAY_AUTH_MODE is unset", f"set RAY_AUTH_MODE=token to send the token in {ray_home}")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # sent, but not the head's
    fails(args, capsys, f"the Ray cluster at {ADDRESS} refused the token in {ray_home}",
          "RAY_AUTH_TOKEN_PATH")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "cluster_token"))
    fails(args, capsys, f"refused the token in RAY_AUTH_TOKEN_PATH={tmp_path / 'cluster_token'}")
    _cluster(monkeypatch, "Failed to connect to GCS within 60 seconds")  # not about auth
    fails(args, capsys, f"Failed to connect to Ray cluster at {ADDRESS}")
