"""Sweeps: curricula x methods x seeds x a grid of setting overrides, one run per cell.

A sweep file (YAML)::

    name: ewc-grid                 # optional; default: the file's stem
    preset: paper                  # run preset (configs/runs/NAME.yaml or a path)
    curricula: [primary]           # names in configs/curricula/ or paths
    methods: [ewc]
    seeds: 20                      # a count (0..19) or a list of seeds
    grid:                          # dotted keys into the run preset -> values to try
      methods.ewc.lam: [10, 25, 50, 100, 200, 500, 1000]
      methods.ewc.decay: [0.8, 0.9, 0.95, 0.99]
    overrides:                     # dotted keys -> one value, for every cell
      eval_episodes: 50
    order: seed                    # optional: run every cell of seed 0 before seed 1, ...

Cells are the product of the four lists, in file order with the seed varying fastest, or
(``order: seed``) seed-major: a study that stops early then holds whole seeds of every
method. A grid or override key under ``methods.X`` only applies to the methods that read
section X (`continual.registry.method_section`): ``methods.ewc.lam`` does not multiply
the Finetune cells of the same sweep. Relative paths in the file are relative to the
file. Grid and override values are read as ``--set`` reads a value (``1e-3`` is a
number). Unknown keys, empty lists, unknown methods or curricula, dotted keys that name no
setting, values a setting rejects, and two grid points that give the same run or the same
cell name are errors that name the file and the key, before any run starts (`load_sweep`).

The sweep directory::

    DIR/sweep.yaml          a copy of the sweep file
    DIR/cells.json          every cell's resolved spec (a re-run must give the same cells)
    DIR/cells/NAME/         one run directory per cell, NAME from the cell
                            (``primary-ewc-lam=10-decay=0.8-s3``)
    DIR/status/NAME.json    state (queued / done / failed), attempts (tries that ended, done
                            or failed), when the latest try started, and every error
    DIR/status/NAME.log     the cell's progress lines (every $TELAPA_LOG_INTERVAL s, 30)
    DIR/.lock               held by the process that runs the sweep

`export_sweep` (``telapa sweep export DIR DEST``) copies the small outputs of the finished
cells (no checkpoints) into a sweep directory of their own, e.g. to commit a study's
results while it still runs.

`run_sweep` runs every cell that is not done, on local worker processes
(`LocalBackend`), a Ray cluster (`RayBackend`) or a Slurm job array (`SlurmBackend`,
asking for the file's ``slurm`` section: partition, time, cpus, mem, gpus, account, qos,
signal_s, parallel); a cell with a run directory resumes
from its checkpoint, a failed one is tried up to ``retries`` more times.

A backend runs jobs: one cell each, or with ``batch_seeds`` (``telapa sweep
--batch-seeds``) the seeds of one cell (same curriculum, method and settings) together,
as one `telapa.continual.batch.SeedBatch` in one worker (their PPO chunks as one
vmapped batch on the jax backend), or in batches of at most so many seeds, per method if
need be (``--seeds-per-batch``). Every cell keeps its own run directory, status and
log; when a batch fails, each of its cells that is not complete is failed with the error.

One module per job: `grammar` (the sweep file and its cells), `layout` (the sweep
directory and status files), `jobs` (what a worker runs), `local`, `ray_backend` and
`slurm_backend` (the backends), `status` (states and time estimates), `export`, and `driver`
(`run_sweep`).
"""

from telapa.continual.sweep.driver import run_sweep
from telapa.continual.sweep.export import (
    EXPORT_FILES,
    ExportSummary,
    export_sweep,
    restore_exported,
)
from telapa.continual.sweep.grammar import (
    Cell,
    SlurmOptions,
    Sweep,
    SweepFile,
    cell_name,
    check_batch_seeds,
    load_sweep,
    seed_jobs,
)
from telapa.continual.sweep.jobs import Outcome, mark_started, run_cell, run_job, thread_env
from telapa.continual.sweep.layout import (
    CELLS_FILE,
    SWEEP_FILE,
    expand_sweep_dirs,
    prepare_sweep_dir,
    read_status,
    stored_cells,
    stored_sweep,
    sweep_cells_dirs,
    write_status,
)
from telapa.continual.sweep.local import LocalBackend
from telapa.continual.sweep.ray_backend import RayBackend
from telapa.continual.sweep.slurm_backend import SlurmBackend
from telapa.continual.sweep.status import (
    EXPORT_STATES,
    STATES,
    CellEstimate,
    CellTime,
    Estimate,
    cell_estimates,
    cell_state,
    cell_time,
    cell_times,
    exported_cell_state,
    time_left,
    tries_ended,
)

__all__ = ["CELLS_FILE", "Cell", "CellEstimate", "CellTime", "EXPORT_FILES", "EXPORT_STATES",
           "Estimate", "ExportSummary", "LocalBackend", "Outcome", "RayBackend", "STATES",
           "SWEEP_FILE", "SlurmBackend", "SlurmOptions", "Sweep", "SweepFile", "cell_estimates",
           "cell_name", "cell_state", "cell_time", "cell_times", "check_batch_seeds",
           "expand_sweep_dirs", "export_sweep", "exported_cell_state", "load_sweep",
           "mark_started", "prepare_sweep_dir", "read_status", "restore_exported", "run_cell",
           "run_job", "run_sweep", "seed_jobs", "stored_cells", "stored_sweep",
           "sweep_cells_dirs", "thread_env", "time_left", "tries_ended", "write_status"]
