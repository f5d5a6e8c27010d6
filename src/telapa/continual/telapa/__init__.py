"""Deprecated: TeLAPA moved to `telapa.continual.methods.telapa` (beside the other
methods). Importing this package, or any of its former modules
(``telapa.continual.telapa.method`` and the rest), gives the new modules with a
DeprecationWarning."""

from __future__ import annotations

import importlib
import sys
import warnings

MOVED_TO = "telapa.continual.methods.telapa"
MODULES = ("banks", "embedding", "illumination", "maintenance", "method", "transfer")

warnings.warn(f"telapa.continual.telapa moved to {MOVED_TO}; import it from there",
              DeprecationWarning, stacklevel=2)
for _name in MODULES:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"{MOVED_TO}.{_name}")
    globals()[_name] = sys.modules[f"{__name__}.{_name}"]
