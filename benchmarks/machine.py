"""What every benchmark records of its machine, with no imports beyond the standard
library at import time (an accelerator's image or a sweep's workers may lack the rest):
the CPU's model, the installed versions of packages, the machine as a report records it
and the machine's sustained matmul rate (these two import JAX when called)."""

from __future__ import annotations

import os
import platform
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else `platform.processor`."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        if names:
            return names[0]
    return platform.processor()


def package_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Installed version of each package ("not installed" when absent)."""
    out = {}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


MACHINE_PACKAGES = ("jax", "jaxlib", "minigrid", "gymnasium", "numpy")
"""The versions `machine_info` records: those that matter for every benchmark's numbers."""


def machine_info(packages: tuple[str, ...] = MACHINE_PACKAGES) -> dict:
    """CPU, cores, load, JAX's backend and devices, and the versions of Python and of
    ``packages`` ("not installed" for one an accelerator's image lacks): the ``machine``
    field of every benchmark's report (`benchmarks/tables.py` reads it)."""
    import jax
    import psutil

    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "load_average_1m": os.getloadavg()[0],
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(device) for device in jax.devices()],
        "versions": {"python": platform.python_version(), **package_versions(packages)},
    }


def matmul_rate(m: int, k: int, n: int, *, seconds: float = 2.0) -> float:
    """Sustained f32 GFLOP/s of a jitted ``(m, k) @ (k, n)`` product on JAX's default
    device, 16 products per call so that dispatch is amortised: R_flop of the hardware
    bounds (`benchmarks/hardware.py`, `benchmarks/visit_program.py`)."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (16, m, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
    f = jax.jit(lambda a, b: jnp.einsum("bmk,kn->bmn", a, b))
    f(a, b).block_until_ready()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        f(a, b).block_until_ready()
        calls += 1
    return 2 * 16 * m * k * n * calls / (time.perf_counter() - start) / 1e9
