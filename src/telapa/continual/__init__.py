"""The continual loop: curricula, methods, runs."""

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
