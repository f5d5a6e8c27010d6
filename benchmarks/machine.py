"""What every benchmark records of its machine, with no imports beyond the standard
library (an accelerator's image or a sweep's workers may lack the rest)."""

from __future__ import annotations

import platform
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
