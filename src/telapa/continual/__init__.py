"""The continual loop: curricula, methods, runs.

Importing it builds nothing: `telapa.continual.preset.RunConfig` is complete when its
module is defined (its ``methods`` are the sections the built-in method classes declare,
`telapa.continual.builtin`); plug-in sections join when their method is registered.
"""

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
