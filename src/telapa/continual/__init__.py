"""The continual loop: curricula, methods, runs.

The method registry is imported with the package: it builds the run presets'
`telapa.continual.preset.MethodsConfig` from the built-in method classes (which read
`RunConfig`, so the preset module cannot import them), and so completes `RunConfig` before
any module of the package can read a preset.
"""

from telapa.continual import registry as _registry  # noqa: F401  (builds MethodsConfig)
from telapa.continual.curriculum import (
    Curriculum,
    TaskSpec,
    Visit,
    curriculum_names,
    load_curriculum,
    parse_curriculum,
)

__all__ = [
    "Curriculum",
    "TaskSpec",
    "Visit",
    "curriculum_names",
    "load_curriculum",
    "parse_curriculum",
]
