"""`RayBackend`: a sweep's jobs as Ray tasks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from telapa.config import ConfigError
from telapa.continual.sweep.grammar import Cell
from telapa.continual.sweep.jobs import Outcome, run_job, thread_env

LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Set to ``0``, Ray runs single-node: the node's address is 127.0.0.1 and every socket of
the GCS, raylet, object manager, agents and workers listens there only (without it,
``--node-ip-address 127.0.0.1`` is replaced by the machine's address and the servers
listen on every interface). Read when Ray is imported."""

AUTH_REFUSED = ("InvalidAuthToken", "Unauthenticated")
"""What Ray's GCS client says (in the exceptions `ray.init` raises from) when a cluster
refuses this process's token, or its lack of one."""


def token_source() -> str:
    """Where Ray reads this process's token, in Ray's order (Ray 2.60's token
    authentication): the ``RAY_AUTH_TOKEN`` variable, the file ``RAY_AUTH_TOKEN_PATH``
    names, else ``~/.ray/auth_token`` (the file a local cluster or ``ray start --head``
    writes or finds there, and which outlives it)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "the RAY_AUTH_TOKEN environment variable"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else f"{default} (absent)"


def auth_refused(err: BaseException, address: str) -> ConfigError | None:
    """The one-line `ConfigError` for a connection to ``address`` that failed because the
    cluster refused this process's token (None when ``err``, and every exception it was
    raised from, is about something else). A head started with ``ray start --head`` turns
    token authentication on when it finds a token (a ``~/.ray/auth_token`` an earlier
    cluster left), but a driver given an explicit address sends one only when
    ``RAY_AUTH_MODE=token``: Ray then retries for about 20 s and says only "Failed to
    connect to Ray cluster"."""
    cause: BaseException | None = err
    while cause is not None and not any(s in str(cause) for s in AUTH_REFUSED):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode != "token":
        return ConfigError(
            f"the Ray cluster at {address} requires token authentication and this process "
            f"sent no token (RAY_AUTH_MODE is {mode or 'unset'}); set RAY_AUTH_MODE=token to "
            f"send the token in {token_source()}, or start the head with "
            "RAY_AUTH_MODE=disabled (a head turns it on when it finds a token, e.g. a "
            "~/.ray/auth_token an earlier cluster left)")
    return ConfigError(
        f"the Ray cluster at {address} refused the token in {token_source()}: it is not the "
        "token the head was started with (a stale one, left by an earlier cluster?); point "
        "RAY_AUTH_TOKEN_PATH at the head's token file, or restart the head")


class RayBackend:
    """Each job a Ray task (``num_cpus=threads``) on the cluster at ``address``, or on a
    new local Ray instance without one (on the loopback address only: `LOOPBACK_ONLY`).
    The sweep directory must be on a filesystem every node sees, and every node needs
    telapa installed (``pip install telapa[ray]``)."""

    def __init__(self, address: str | None = None, threads: int = 1):
        self.address = address
        self.threads = threads
        self.describe = f"ray ({address or 'local instance'}), {threads} thread(s) per cell"

    def run(self, sweep_dir: Path, jobs: list[list[Cell]]) -> Iterator[Outcome]:
        if self.address is None:  # a local instance: every socket on the loopback address
            os.environ.setdefault(LOOPBACK_ONLY, "0")
        try:
            import ray
        except ImportError:
            raise ConfigError("--backend ray needs Ray: pip install 'telapa[ray]'") from None
        started = not ray.is_initialized()
        if started:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                try:
                    ray.init(address=self.address, **kwargs)
                except Exception as err:
                    refused = auth_refused(err, self.address)
                    if refused is None:
                        raise
                    raise refused from None
            else:
                ray.init(num_cpus=os.cpu_count(), **kwargs)
        try:
            task = ray.remote(num_cpus=self.threads, max_retries=0)(run_job).options(
                runtime_env={"env_vars": thread_env(self.threads)})
            refs = {task.remote(str(sweep_dir.resolve()), [c.work() for c in job]): job
                    for job in jobs}
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        yield from ray.get(ref)
                    except Exception as err:  # noqa: BLE001 - a task or node died
                        for cell in refs[ref]:
                            yield cell.name, {"ok": False, "error": f"ray task failed: {err}"}
        finally:
            if started:
                ray.shutdown()


__all__ = ["AUTH_REFUSED", "LOOPBACK_ONLY", "RayBackend",
           "auth_refused", "token_source"]
