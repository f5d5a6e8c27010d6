"""Activation cost: DFF's sine and cosine against tanh, alone and inside PPO training.

Measured in one run on one machine:

- ``elementwise``: one activation on a (4096, 64) float32 array (16 minibatches of 256
  samples through a 64-unit layer), forward, and forward + backward of a weighted sum of
  its outputs, in ns per input element (DFF has two outputs per element); the fastest of
  300 calls.
  ``dff-xla`` is the reference: XLA's own ``jnp.sin`` and ``jnp.cos``, what DFF used
  before `telapa.rl.networks.sincos` (and what the Table 1 study's DFF runs used).
  ``sincos`` is ``dff`` without its concatenation (two arrays out), which shows what
  the concatenation costs. ``relu`` (one max per element) is the floor: what the memory
  system allows for an element-wise op on this machine, so each row's ratio to it says
  how far that activation is from the hardware.
- ``ppo``: PPO training steps/s on MiniGrid-DoorKey-8x8 with the MiniGrid preset (16 envs
  x 128 steps, 4 epochs, minibatch 256, flat 64x64 actor and critic; one PPO iteration
  per jitted call, as the study runs) for ``tanh`` (every other method's units),
  ``dff-xla`` and ``dff``. The machine drifts by 10-40% within minutes, so the three
  run ``--repeats`` times, alternating; the table gives medians.

Writes ``benchmarks/results/activations.json`` (``--quick``: ``activations.quick.json``).

    python benchmarks/activations.py           # about 5 minutes on 2 cores
    python benchmarks/activations.py --quick   # smoke check (--elementwise-only: seconds)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from machine import machine_info, package_versions

from telapa.config import load_config, preset_path
from telapa.rl import networks

ENV_ID = "MiniGrid-DoorKey-8x8-v0"
RESULTS = Path(__file__).resolve().parent / "results" / "activations.json"
SHAPE = (4096, 64)


def dff_xla(z: jax.Array) -> jax.Array:
    """The reference DFF: XLA's sin and cos."""
    return jnp.concatenate([jnp.sin(z), jnp.cos(z)], axis=-1)


ELEMENTWISE: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "dff-xla": dff_xla,
    "dff": networks.dff,
    "sincos": networks.sincos,  # dff without its concatenation: two output arrays
}


def time_call(fn: Callable, x: jax.Array, repeats: int) -> float:
    """Fastest of ``repeats`` calls of the compiled ``fn`` (after a warm-up), in seconds:
    calls of tens of microseconds on a shared machine, whose noise only adds time."""
    jax.block_until_ready(fn(x))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        times.append(time.perf_counter() - start)
    return min(times)


def bench_elementwise(repeats: int) -> list[dict]:
    x = jax.random.normal(jax.random.key(0), SHAPE, jnp.float32)
    rows = []
    for name, act in ELEMENTWISE.items():
        # the backward pass of a weighted sum of every output (DFF's: 2 per element)
        w = jax.tree.map(lambda a: jax.random.normal(jax.random.key(1), a.shape, a.dtype),
                         jax.eval_shape(act, x))

        def weighted(v: jax.Array, act: Callable = act, w: Any = w) -> jax.Array:
            return sum(jax.tree.leaves(jax.tree.map(lambda a, b: (a * b).sum(), act(v), w)))

        forward = jax.jit(act)
        backward = jax.jit(jax.grad(weighted))
        row = {"name": name, "elements": x.size}
        for phase, fn in (("forward", forward), ("forward_backward", backward)):
            row[f"{phase}_ns_per_element"] = time_call(fn, x, repeats) / x.size * 1e9
        rows.append(row)
    floor = rows[0]
    for row in rows:
        for phase in ("forward", "forward_backward"):
            row[f"{phase}_vs_relu"] = (row[f"{phase}_ns_per_element"]
                                       / floor[f"{phase}_ns_per_element"])
    return rows


@contextlib.contextmanager
def dff_as(fn: Callable[[jax.Array], jax.Array]) -> Iterator[None]:
    """Networks built inside trace ``activation="dff"`` as ``fn``."""
    saved = networks.ACTIVATIONS["dff"]
    networks.ACTIVATIONS["dff"] = fn
    try:
        yield
    finally:
        networks.ACTIVATIONS["dff"] = saved


def bench_ppo(name: str, steps: int) -> dict:
    from telapa.rl import PPOTrainer

    base = load_config(preset_path("minigrid"))
    activation = "tanh" if name == "tanh" else "dff"
    config = base.model_copy(update={
        "network": base.network.model_copy(update={"activation": activation})})
    with dff_as(dff_xla if name == "dff-xla" else networks.dff):
        trainer = PPOTrainer(ENV_ID, config, key=0, backend="jax")
        compile_s = trainer.compile()
        start = time.perf_counter()
        trainer.train(steps)
        train_s = time.perf_counter() - start
    return {"name": name, "steps": trainer.steps, "compile_s": compile_s,
            "train_s": train_s, "steps_per_s": trainer.steps / train_s}


VERSIONS = ("jax", "jaxlib", "flax", "optax", "numpy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--repeats", type=int, help="PPO rounds (default 3; --quick: 1)")
    parser.add_argument("--out", type=Path, help=f"default: {RESULTS} (--quick: .quick.json)")
    parser.add_argument("--elementwise-only", action="store_true",
                        help="skip the PPO runs (seconds, not minutes)")
    args = parser.parse_args(argv)
    args.out = args.out or (RESULTS.with_suffix(".quick.json") if args.quick else RESULTS)
    repeats = args.repeats or (1 if args.quick else 3)
    steps = 16_384 if args.quick else 196_608

    elementwise = bench_elementwise(5 if args.quick else 300)
    for row in elementwise:
        print(f"{row['name']:8s} forward {row['forward_ns_per_element']:6.2f} ns/element "
              f"({row['forward_vs_relu']:.1f}x relu), forward+backward "
              f"{row['forward_backward_ns_per_element']:6.2f} "
              f"({row['forward_backward_vs_relu']:.1f}x relu)", file=sys.stderr)
    ppo = []
    for round_ in range(0 if args.elementwise_only else repeats):
        for name in ("tanh", "dff-xla", "dff"):
            ppo.append({**bench_ppo(name, steps), "round": round_})
            print(f"ppo {name:8s} round {round_}: {ppo[-1]['steps_per_s']:8.0f} steps/s "
                  f"(compile {ppo[-1]['compile_s']:.1f} s)", file=sys.stderr)
    medians = {name: statistics.median(r["steps_per_s"] for r in ppo if r["name"] == name)
               for name in dict.fromkeys(r["name"] for r in ppo)}
    summary = {name: {"median_steps_per_s": rate, "vs_tanh": rate / medians["tanh"]}
               for name, rate in medians.items()}  # empty with --elementwise-only
    report = {
        "benchmark": "activations", "env": ENV_ID, "quick": args.quick,
        "machine": machine_info(), "versions": package_versions(VERSIONS),
        "shape": list(SHAPE), "ppo_steps": steps, "repeats": repeats,
        "elementwise": elementwise, "ppo_summary": summary, "ppo": ppo,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, row in summary.items():
        print(f"{name}: {row['median_steps_per_s']:.0f} steps/s, {row['vs_tanh']:.2f}x tanh",
              file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
