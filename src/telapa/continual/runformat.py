"""The format of a run directory, as its manifest (``run.json``) records it, and the error
every reader of a run directory raises: the base of `telapa.continual.rundir` and of its
parts (`telapa.continual.runtables`, `telapa.continual.checkpoints`).

Format versions:

- 1: checkpoints that may lack a seal (``files.json``) or a definition
  (``definition.json``), and L2Init's and EWC's penalties as the dicts ``{"anchor"}`` and
  ``{"fisher", "anchor"}`` (EWC's method part ``method-fisher.npz``);
- 2: every checkpoint sealed and holding its definition, L2Init's and EWC's penalties
  one quadratic form (`telapa.continual.methods.QuadraticData`).

Every version in `READ_VERSIONS` is read (tables, metrics, reports, ``telapa inspect``):
the committed results hold no checkpoint. Only runs of `RUN_VERSION` are resumed or
played from their checkpoints (`telapa.continual.checkpoints.CheckpointStore`).
"""

from __future__ import annotations

RUN_FORMAT = "telapa-run"
RUN_VERSION = 2
"""The format version of the runs this code writes, resumes and plays."""
READ_VERSIONS = (1, 2)
"""The format versions whose tables and records this code reads."""
MANIFEST = "run.json"


class RunDirError(ValueError):
    """A run directory is missing, foreign, corrupt, locked or already used."""


class RunImportError(RunDirError):
    """A run directory's recorded ``--import`` modules (``run.json`` ``imports``) cannot
    be imported by this process: the run may well be complete, the reader lacks its
    code, so readers never skip it as incomplete."""
