"""Pytree checkpoints as plain ``.npz`` files (no pickle), written atomically.

Each leaf is stored under its :func:`jax.tree_util.keystr` path (``['params']['w']``,
``.opt_state[0].mu['b']``); the member ``__telapa_manifest__`` is a uint8 array holding UTF-8
JSON: ``{"format": "telapa-pytree", "version": 1, "leaves": [{"path", "kind", "dtype",
"shape", ...}]}``. Loading restores into the structure of a template pytree and checks
that every leaf's path, shape and dtype match.

Leaf handling:

* typed PRNG key arrays (``jax.random.key``) are stored as ``jax.random.key_data`` with
  ``kind="key"`` and the impl name, and re-wrapped with ``jax.random.wrap_key_data``;
* dtypes numpy cannot save natively (``bfloat16`` and other ml_dtypes) are stored as
  unsigned-integer bit patterns (``stored_dtype``) and viewed back on load;
* Python scalars (``int``, ``float``, ``bool``, ``complex``) are stored as 0-d arrays
  (int64/float64/bool/complex128) and restored as 0-d **numpy** arrays of that dtype;
* all other leaves load as ``jax.numpy`` arrays, except dtypes that JAX would narrow under
  the current config (int64/float64/uint64 without ``jax_enable_x64``), which stay numpy
  arrays so that a roundtrip is exact;
* ``None`` and empty containers (``optax.EmptyState()``) hold no leaves and come from the
  template. The template's leaves may be arrays or ``jax.ShapeDtypeStruct`` s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import keystr, tree_flatten_with_path

from .atomic import atomic_open

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "CheckpointError",
    "load_pytree",
    "save_pytree",
]

CHECKPOINT_FORMAT = "telapa-pytree"
CHECKPOINT_VERSION = 1
_MANIFEST_KEY = "__telapa_manifest__"
_PY_SCALARS = (bool, int, float, complex)


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, foreign, or does not match the template."""


def _is_key(leaf: Any) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _dtype_name(dtype: Any) -> str:
    return str(dtype) if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) else np.dtype(dtype).name


def _encode(file: str, name: str, leaf: Any) -> tuple[dict[str, Any], np.ndarray]:
    if _is_key(leaf):
        data = np.asarray(jax.random.key_data(leaf))
        entry = {
            "path": name,
            "kind": "key",
            "dtype": str(leaf.dtype),
            "shape": list(leaf.shape),
            "impl": str(jax.random.key_impl(leaf)),
        }
        return entry, data
    try:
        arr = np.asarray(leaf)
    except Exception as e:
        raise CheckpointError(f"{file}: leaf {name} ({type(leaf).__name__}) is not an array") from e
    dt = arr.dtype
    entry = {"path": name, "kind": "array", "dtype": dt.name, "shape": list(arr.shape)}
    if dt.kind in "biufc" and dt.isbuiltin == 1:
        return entry, arr
    if dt.isbuiltin == 2 and dt.itemsize in (1, 2, 4, 8):  # ml_dtypes: bfloat16, float8, int4...
        bits = np.ascontiguousarray(arr).view(f"u{dt.itemsize}")
        entry["stored_dtype"] = bits.dtype.name
        return entry, bits
    raise CheckpointError(
        f"{file}: leaf {name} has dtype {dt} ({type(leaf).__name__}), which cannot be stored"
    )


def save_pytree(path: str | os.PathLike[str], tree: Any) -> None:
    """Atomically write ``tree``'s leaves and a manifest to the npz file ``path`` (as given:
    no suffix is appended)."""
    file = str(path)
    arrays: dict[str, np.ndarray] = {}
    entries: list[dict[str, Any]] = []
    for key_path, leaf in tree_flatten_with_path(tree)[0]:
        name = keystr(key_path)
        if name in arrays:
            raise CheckpointError(f"{file}: two leaves share the path {name}")
        entry, arr = _encode(file, name, leaf)
        arrays[name] = arr
        entries.append(entry)
    manifest = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "leaves": entries}
    arrays[_MANIFEST_KEY] = np.frombuffer(json.dumps(manifest).encode("utf-8"), dtype=np.uint8)
    with atomic_open(path) as f:
        np.savez(f, allow_pickle=False, **arrays)


def _check_entry(e: dict[str, Any]) -> None:
    ok = (
        isinstance(e["path"], str)
        and e["kind"] in ("array", "key")
        and isinstance(e["dtype"], str)
        and all(isinstance(d, int) for d in e["shape"])
        and (e["kind"] == "array" or isinstance(e["impl"], str))
    )
    if not ok:
        raise ValueError(f"bad manifest entry {e!r}")


def _read(file: str) -> tuple[dict[str, dict[str, Any]], dict[str, np.ndarray]]:
    """Return (manifest entries by path, stored arrays by path) of a checkpoint file."""
    if not Path(file).exists():
        raise FileNotFoundError(f"checkpoint file {file} does not exist")
    try:
        npz = np.load(file, allow_pickle=False)
    except Exception as e:
        raise CheckpointError(f"{file}: not a telapa checkpoint (not an npz file: {e})") from e
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise CheckpointError(f"{file}: not a telapa checkpoint (a single .npy array)")
    with npz:
        if _MANIFEST_KEY not in npz.files:
            raise CheckpointError(f"{file}: not a telapa checkpoint (npz without a manifest)")
        try:
            manifest = json.loads(npz[_MANIFEST_KEY].tobytes().decode("utf-8"))
        except Exception as e:
            raise CheckpointError(f"{file}: not a telapa checkpoint (bad manifest: {e})") from e
        if not isinstance(manifest, dict) or manifest.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{file}: not a telapa checkpoint (foreign manifest)")
        version = manifest.get("version")
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"{file}: unsupported telapa checkpoint version {version!r} "
                f"(this code reads version {CHECKPOINT_VERSION})"
            )
        try:
            entries = {e["path"]: e for e in manifest["leaves"]}
            for e in entries.values():
                _check_entry(e)
            arrays = {name: npz[name] for name in entries}
        except Exception as e:
            raise CheckpointError(f"{file}: corrupt checkpoint ({type(e).__name__}: {e})") from e
    return entries, arrays


def _expected(leaf: Any) -> tuple[tuple[int, ...], str]:
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), _dtype_name(leaf.dtype)
    arr = np.asarray(leaf)
    return arr.shape, arr.dtype.name


def _decode(file: str, name: str, entry: dict[str, Any], stored: np.ndarray, leaf: Any) -> Any:
    shape, dtype = tuple(entry["shape"]), entry["dtype"]
    want_shape, want_dtype = _expected(leaf)
    if shape != want_shape:
        raise CheckpointError(f"{file}: leaf {name} has shape {shape}, expected {want_shape}")
    if dtype != want_dtype:
        raise CheckpointError(f"{file}: leaf {name} has dtype {dtype}, expected {want_dtype}")
    if entry["kind"] == "key":
        if stored.shape[: len(shape)] != shape:
            raise CheckpointError(
                f"{file}: corrupt checkpoint: key data of leaf {name} has shape {stored.shape}"
            )
        return jax.random.wrap_key_data(jnp.asarray(stored), impl=entry["impl"])
    stored_dtype = entry.get("stored_dtype", dtype)
    if stored.shape != shape or stored.dtype.name != stored_dtype:
        raise CheckpointError(
            f"{file}: corrupt checkpoint: leaf {name} is stored as {stored.dtype}{stored.shape},"
            f" the manifest says {stored_dtype}{shape}"
        )
    target = np.dtype(leaf.dtype) if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
    arr = stored.view(target) if "stored_dtype" in entry else stored
    if isinstance(leaf, _PY_SCALARS) or jax.dtypes.canonicalize_dtype(target) != target:
        return arr
    return jnp.asarray(arr)


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:5])
    return shown + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")


def load_pytree(path: str | os.PathLike[str], like: Any) -> Any:
    """Load the checkpoint ``path`` into the structure of the template pytree ``like``.

    Every template leaf must be in the file with the same shape and dtype and the file may
    hold no other leaf; otherwise CheckpointError names the file and the leaf path.
    """
    file = str(path)
    entries, arrays = _read(file)
    flat, treedef = tree_flatten_with_path(like)
    names = [keystr(kp) for kp, _ in flat]
    missing = [n for n in names if n not in entries]
    if missing:
        raise CheckpointError(
            f"{file}: leaf {_listing(missing)} of the template is missing from the checkpoint"
        )
    wanted = set(names)
    extra = [n for n in entries if n not in wanted]
    if extra:
        raise CheckpointError(f"{file}: checkpoint leaf {_listing(extra)} is not in the template")
    leaves = [
        _decode(file, name, entries[name], arrays[name], leaf)
        for name, (_, leaf) in zip(names, flat, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, leaves)
