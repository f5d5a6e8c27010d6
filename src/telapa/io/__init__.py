"""I/O for resumable runs: atomic files, pytree checkpoints, compute accounting."""

from .accounting import MemoryMonitor, PhaseTimer, dir_size_bytes, tree_nbytes
from .atomic import (
    atomic_open,
    read_json,
    write_bytes_atomic,
    write_json_atomic,
    write_table_atomic,
    write_text_atomic,
)
from .checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CheckpointError,
    load_pytree,
    save_pytree,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "CheckpointError",
    "MemoryMonitor",
    "PhaseTimer",
    "atomic_open",
    "dir_size_bytes",
    "load_pytree",
    "read_json",
    "save_pytree",
    "tree_nbytes",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_table_atomic",
    "write_text_atomic",
]
