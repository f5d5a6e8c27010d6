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
                ray.init(address=self.address, **kwargs)
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


__all__ = ["LOOPBACK_ONLY", "RayBackend"]
