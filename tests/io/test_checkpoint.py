"""save_pytree/load_pytree: exact roundtrips of realistic training state, strict template
checks with errors naming the file and the leaf, rejection of foreign files."""

from __future__ import annotations

import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training.train_state import TrainState

from telapa.io import CheckpointError, load_pytree, save_pytree


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.tanh(nn.Dense(16, name="dense_0")(x))
        return nn.Dense(3, name="dense_1")(x)


def _state(seed: int) -> dict:
    """Params + adam state after one update + keys + assorted leaves."""
    key = jax.random.key(seed)
    params = MLP().init(key, jnp.zeros((1, 5)))
    tx = optax.adam(1e-3)
    opt_state = tx.init(params)
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5 + seed), params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return {
        "params": optax.apply_updates(params, updates),
        "opt_state": opt_state,
        "key": jax.random.split(jax.random.fold_in(key, 1), 4),
        "scalar_key": jax.random.fold_in(key, 2),
        "raw_key": jax.random.PRNGKey(seed + 10),
        "done": jnp.array([True, False, seed % 2 == 0]),
        "steps": jnp.arange(4, dtype=jnp.int32) * (seed + 1),
        "counts": np.arange(3, dtype=np.int64) + 2**40 + seed,
        "obs": np.full((2, 2), seed, dtype=np.uint8),
        "lr": jnp.float32(3e-4 * (seed + 1)),
        "episode": 7 + seed,
        "ratio": 0.25 + seed,
        "flag": bool(seed),
        "nothing": None,
        "empty": {},
    }


def _assert_identical(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key):
            assert y.dtype == x.dtype and y.shape == x.shape
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_roundtrip_realistic_state_is_exact(tmp_path):
    saved, template = _state(0), _state(1)
    path = tmp_path / "state.npz"
    save_pytree(path, saved)
    loaded = load_pytree(path, template)
    _assert_identical(loaded, saved)
    assert os.listdir(tmp_path) == ["state.npz"]

    # Leaf types: jax arrays, wrapped typed keys, numpy for Python scalars / int64.
    assert isinstance(loaded["params"]["params"]["dense_0"]["kernel"], jax.Array)
    assert isinstance(loaded["opt_state"][0].count, jax.Array)
    assert isinstance(loaded["opt_state"][1], optax.EmptyState)
    assert loaded["key"].dtype == jax.random.key(0).dtype
    np.testing.assert_array_equal(
        jax.random.key_data(jax.random.split(loaded["scalar_key"])),
        jax.random.key_data(jax.random.split(saved["scalar_key"])),
    )
    assert loaded["raw_key"].dtype == jnp.uint32
    for name in ("episode", "ratio", "flag"):
        assert isinstance(loaded[name], np.ndarray) and loaded[name].shape == ()
    assert loaded["episode"] == 7 and loaded["ratio"] == 0.25 and loaded["flag"] == np.False_
    assert isinstance(loaded["counts"], np.ndarray) and loaded["counts"].dtype == np.int64
    assert loaded["nothing"] is None and loaded["empty"] == {}


def test_roundtrip_flax_train_state(tmp_path):
    model = MLP()
    params = model.init(jax.random.key(0), jnp.zeros((1, 5)))
    tx = optax.adam(1e-3)  # static field: the template must carry the same object
    state = TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    state = state.apply_gradients(grads=jax.tree.map(jnp.ones_like, state.params))
    path = tmp_path / "train_state.npz"
    save_pytree(path, {"state": state, "key": jax.random.key(5)})
    fresh = TrainState.create(
        apply_fn=model.apply,
        params=model.init(jax.random.key(1), jnp.zeros((1, 5))),
        tx=tx,
    )
    loaded = load_pytree(path, {"state": fresh, "key": jax.random.key(0)})
    assert loaded["state"].apply_fn == model.apply
    assert isinstance(loaded["state"].step, np.ndarray) and loaded["state"].step == 1
    _assert_identical(loaded, {"state": state, "key": jax.random.key(5)})


def test_abstract_template(tmp_path):
    tree = {"params": MLP().init(jax.random.key(0), jnp.zeros((1, 5))), "key": jax.random.key(5)}
    path = tmp_path / "state.npz"
    save_pytree(path, tree)
    _assert_identical(load_pytree(path, jax.eval_shape(lambda: tree)), tree)


def test_overwrite_replaces_checkpoint(tmp_path):
    path = tmp_path / "s.npz"
    save_pytree(path, {"w": jnp.zeros(3)})
    save_pytree(path, {"w": jnp.ones(3)})
    np.testing.assert_array_equal(load_pytree(path, {"w": jnp.zeros(3)})["w"], np.ones(3))
    assert os.listdir(tmp_path) == ["s.npz"]


def _params(shape=(3, 4), dtype=jnp.float32) -> dict:
    return {"params": {"dense_0": {"kernel": jnp.zeros(shape, dtype), "bias": jnp.zeros(4)}}}


def test_shape_mismatch_names_file_and_leaf(tmp_path):
    path = tmp_path / "run" / "ckpt" / "state.npz"
    path.parent.mkdir(parents=True)
    save_pytree(path, _params((3, 4)))
    with pytest.raises(CheckpointError) as info:
        load_pytree(path, _params((3, 5)))
    assert str(info.value) == (
        f"{path}: leaf ['params']['dense_0']['kernel'] has shape (3, 4), expected (3, 5)"
    )


def test_dtype_mismatch_names_file_and_leaf(tmp_path):
    path = tmp_path / "state.npz"
    save_pytree(path, _params(dtype=jnp.float32))
    with pytest.raises(CheckpointError, match=r"kernel'\] has dtype float32, expected int32"):
        load_pytree(path, _params(dtype=jnp.int32))


def test_typed_key_vs_raw_key_mismatch(tmp_path):
    path = tmp_path / "k.npz"
    save_pytree(path, {"rng": jax.random.key(0)})
    with pytest.raises(CheckpointError, match=r"leaf \['rng'\] has shape \(\), expected \(2,\)"):
        load_pytree(path, {"rng": jax.random.PRNGKey(0)})
    with pytest.raises(CheckpointError, match=r"has dtype key<fry>, expected uint32"):
        load_pytree(path, {"rng": jnp.zeros((), jnp.uint32)})


def test_python_scalar_template_dtype_is_checked(tmp_path):
    path = tmp_path / "s.npz"
    save_pytree(path, {"step": jnp.int32(3)})
    with pytest.raises(CheckpointError, match=r"has dtype int32, expected int64"):
        load_pytree(path, {"step": 0})


def test_structure_mismatch_names_leaves(tmp_path):
    path = tmp_path / "state.npz"
    save_pytree(path, {"a": jnp.zeros(2), "b": {"c": jnp.zeros(1)}})
    with pytest.raises(
        CheckpointError,
        match=rf"^{path}: leaf \['b'\]\['d'\] of the template is "
        "missing from the checkpoint$",
    ):
        load_pytree(path, {"a": jnp.zeros(2), "b": {"c": jnp.zeros(1), "d": jnp.zeros(1)}})
    with pytest.raises(
        CheckpointError, match=r"checkpoint leaf \['b'\]\['c'\] is not in the template"
    ):
        load_pytree(path, {"a": jnp.zeros(2)})
    # A list where a dict was saved has different key paths.
    with pytest.raises(CheckpointError, match="missing from the checkpoint"):
        load_pytree(path, [jnp.zeros(2), {"c": jnp.zeros(1)}])


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_pytree(tmp_path / "nope.npz", {})


@pytest.mark.parametrize("kind", ["text", "npy", "foreign_npz", "truncated", "bad_manifest"])
def test_foreign_files_are_rejected(tmp_path, kind):
    path = tmp_path / "state.npz"
    if kind == "text":
        path.write_text("hello, not a checkpoint\n")
    elif kind == "npy":
        with open(path, "wb") as f:
            np.save(f, np.arange(3))
    elif kind == "foreign_npz":
        np.savez(path, w=np.zeros(3))
    elif kind == "truncated":
        save_pytree(path, _params())
        path.write_bytes(path.read_bytes()[:100])
    else:
        np.savez(path, __telapa_manifest__=np.frombuffer(b'{"format": "x"}', np.uint8))
    with pytest.raises(CheckpointError, match=rf"^{path}: not a telapa checkpoint"):
        load_pytree(path, _params())


def test_unsupported_version(tmp_path):
    path = tmp_path / "state.npz"
    manifest = {"format": "telapa-pytree", "version": 2, "leaves": []}
    np.savez(path, __telapa_manifest__=np.frombuffer(json.dumps(manifest).encode(), np.uint8))
    with pytest.raises(CheckpointError, match="unsupported telapa checkpoint version 2"):
        load_pytree(path, {})


def test_manifest_contents(tmp_path):
    path = tmp_path / "state.npz"
    save_pytree(path, {"k": jax.random.key(0), "x": jnp.zeros((2, 3), jnp.bfloat16), "n": 1})
    with np.load(path, allow_pickle=False) as z:
        manifest = json.loads(z["__telapa_manifest__"].tobytes())
        assert set(z.files) == {"__telapa_manifest__", "['k']", "['n']", "['x']"}
        assert z["['x']"].dtype == np.uint16
    assert manifest["format"] == "telapa-pytree" and manifest["version"] == 1
    by_path = {e["path"]: e for e in manifest["leaves"]}
    assert by_path["['k']"] == {
        "path": "['k']",
        "kind": "key",
        "dtype": "key<fry>",
        "shape": [],
        "impl": "threefry2x32",
    }
    assert by_path["['x']"]["dtype"] == "bfloat16" and by_path["['x']"]["shape"] == [2, 3]
    assert by_path["['n']"]["dtype"] == "int64" and by_path["['n']"]["shape"] == []
    loaded = load_pytree(
        path, {"k": jax.random.key(1), "x": jnp.ones((2, 3), jnp.bfloat16), "n": 0}
    )
    assert loaded["x"].dtype == jnp.bfloat16 and not loaded["x"].any()


def test_unstorable_leaf_is_rejected(tmp_path):
    with pytest.raises(CheckpointError, match=r"leaf \['s'\] has dtype"):
        save_pytree(tmp_path / "s.npz", {"s": np.array(["text"], dtype=object)})
    assert not (tmp_path / "s.npz").exists()
