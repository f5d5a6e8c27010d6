"""``telapa train``: PPO on one environment.

    telapa train --env ID --steps N [--seed S] [--backend jax|gymnasium|native] [--config FILE]
                 [--set KEY=VALUE ...] [--import MODULE ...] [--out DIR] [--json]

Without ``--backend`` the env runs on its fastest backend here
(`telapa.envs.registry.default_backend`): MiniGrid on ``jax``, MuJoCo on ``native`` on a
CPU and on ``jax`` (MJX) on an accelerator, any other gymnasium id on ``gymnasium``.

``--set ppo.lr=1e-3`` (repeatable) changes one setting of the config (`telapa.overrides`).
``--env`` takes any id of the registry, ``module:Id`` included; ``--import MODULE``
(repeatable) imports the user's module first (`telapa.plugins`).
``train`` writes a run directory: ``config.yaml`` (the resolved `TrainConfig`, loadable
with ``--config``), ``run.json`` (arguments, ``--set`` overrides and final results),
``metrics.csv`` (one row per PPO iteration) and TensorBoard events under ``tb/``.
PPO trains whole iterations (``num_envs x n_steps`` env steps; on the jax backend whole
calls of ``ppo.iterations_per_call`` of them), so ``--steps`` is rounded up to the next
whole one: ``train`` says so before training, its progress counts the steps it trains,
and ``steps`` is the number trained (``requested_steps`` the ``--steps`` given). With
``--json`` the last line on stdout is one JSON object with ``steps``, ``wall_s``,
``compile_s``, ``train_s``, ``steps_per_s`` (training steps per second, compilation
excluded), ``eval_sr`` (named by ``eval_sr_name``: ``SR``, or ``SR~`` where competence is
a normalized return), ``eval_return`` and ``run_dir``; the progress bar goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from telapa.cli.common import (
    CLIError,
    add_import_option,
    add_set_option,
    check_env_id,
    env_steps,
    seed_int,
)
from telapa.config import ConfigError, TrainConfig, dump_config, load_config
from telapa.continual.rundir import TB_DIR, RunDirError, claim_new_dir, write_manifest
from telapa.envs.registry import BACKENDS, default_backend, default_config
from telapa.io import write_text_atomic
from telapa.io.clock import running
from telapa.overrides import override, parse_sets

PLAIN_INTERVAL_S = 30.0
"""Seconds between progress lines when stderr is not a terminal."""


def _resolve_config(path: str | None, env_id: str, sets: dict[str, Any] | None = None
                    ) -> TrainConfig:
    try:
        config = load_config(path) if path else default_config(env_id)
        return override(config, sets or {})
    except ConfigError as err:
        raise CLIError(str(err)) from None


def _run_dir(out: str | None, env_id: str, backend: str, seed: int) -> Path:
    if out:
        return Path(out)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = env_id.replace(":", "-")  # module:Id
    return Path("runs") / f"{name}-{backend}-s{seed}-{stamp}"


def rounded_budget(steps: int, num_envs: int, n_steps: int, iterations_per_call: int = 1
                   ) -> tuple[int, str | None]:
    """The env steps PPO trains for a budget of ``steps`` (`Agent.train` trains whole
    calls of ``iterations_per_call`` iterations of ``num_envs x n_steps`` steps, as a
    ``telapa run`` budget is whole PPO calls: 1e6 is 983,040 in the ``mujoco`` preset),
    and a note that says so, None where ``steps`` is already whole. Said once before
    training: else ``--steps 100`` would silently train 2,048."""
    call = num_envs * n_steps * iterations_per_call
    calls = -(-steps // call)
    trained = calls * call
    if trained == steps:
        return trained, None
    rollout = f"{num_envs} envs x {n_steps} steps"
    unit = (f"{calls:,} whole PPO iteration{'s' if calls > 1 else ''} of {rollout}"
            if iterations_per_call == 1 else
            f"{calls:,} whole PPO call{'s' if calls > 1 else ''} of {iterations_per_call} "
            f"iterations (ppo.iterations_per_call) of {rollout}")
    return trained, (f"--steps {steps:,} rounded up to {trained:,} env steps ({unit}): PPO "
                     "updates after whole rollouts only")


def train_run(
    env_id: str,
    steps: int,
    seed: int = 0,
    backend: str | None = None,
    config_path: str | None = None,
    out: str | None = None,
    console: Console | None = None,
    sets: list[str] | None = None,
    imports: list[str] | None = None,
) -> dict[str, Any]:
    """Validates, trains, evaluates and writes a run directory; returns the summary.
    ``sets``: ``--set KEY=VALUE`` items applied over the config (`telapa.overrides`);
    ``imports``: the ``--import`` modules (already imported), recorded in ``run.json``;
    ``backend`` None: the env's fastest here (`telapa.envs.registry.default_backend`)."""
    import pandas as pd
    from tensorboardX import SummaryWriter

    start = running()
    if backend is None:
        try:
            backend = default_backend(env_id)
        except ValueError as err:
            raise CLIError(str(err)) from None
    check_env_id(env_id, backend)
    try:
        overrides = parse_sets(sets or [])
    except ConfigError as err:
        raise CLIError(str(err)) from None
    config = _resolve_config(config_path, env_id, overrides)
    console = console or Console(stderr=True)

    from telapa.rl import PPOTrainer

    run_dir = _run_dir(out, env_id, backend, seed)
    if run_dir.exists():  # before any work: an existing run is never overwritten
        try:
            claim_new_dir(run_dir)
        except RunDirError as err:
            raise CLIError(str(err)) from None
    try:  # the env as the trainer makes it, before a run directory exists
        trainer = PPOTrainer(env_id, config, key=seed, backend=backend, total_steps=steps)
    except (ValueError, ConfigError) as err:  # an env telapa cannot train on, named
        raise CLIError(f"--env {env_id} (backend {backend!r}): {err}") from None
    try:
        claim_new_dir(run_dir)
    except RunDirError as err:
        raise CLIError(str(err)) from None
    write_text_atomic(run_dir / "config.yaml", dump_config(config))
    args = {"env": env_id, "steps": steps, "seed": seed, "backend": backend,
            "overrides": overrides, **({"imports": list(imports)} if imports else {})}

    planned, note = rounded_budget(steps, config.ppo.num_envs, config.ppo.n_steps,
                                   trainer.agent.iterations_per_call)
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    sr_name = trainer.agent.competence.symbol
    plain = not console.is_terminal  # a log file: plain lines every 30 s, no live bar

    def stage(text: str) -> contextlib.AbstractContextManager:
        """``text`` while a stage without steps to count runs (compiling, evaluating): a
        spinner on a terminal, one line in a log (an MJX evaluation on a CPU compiles for
        about a minute, which a log showed as nothing)."""
        if not plain:
            return console.status(text)
        console.file.write(text + "\n")
        console.file.flush()
        return contextlib.nullcontext()

    with stage(f"compiling PPO for {env_id} ({backend})"):
        compile_s = trainer.compile()

    rows: list[dict[str, float]] = []
    writer = SummaryWriter(str(run_dir / TB_DIR))
    columns = (
        TextColumn("[bold]PPO"),
        BarColumn(bar_width=20),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
        TextColumn("{task.fields[rate]:,.0f} steps/s"),
        TextColumn(f"{sr_name} {{task.fields[sr]}}"),
        TimeRemainingColumn(),
    )
    train_start = running()
    last_line = [-math.inf]

    def on_progress(done: int, metrics: list[dict[str, float]]) -> None:
        elapsed = running() - train_start
        if plain and (elapsed - last_line[0] >= PLAIN_INTERVAL_S or done >= planned):
            last_line[0] = elapsed
            rate = done / max(elapsed, 1e-9)
            console.file.write(f"PPO {env_id} train {min(done, planned):,}/{planned:,} steps, "
                               f"{rate:,.0f} steps/s, "
                               f"ETA {max(planned - done, 0) / rate:.0f}s\n")
            console.file.flush()
        for m in metrics:
            rows.append({"time_s": elapsed, **m})
            for name, value in m.items():
                if name != "step" and math.isfinite(value):
                    writer.add_scalar(f"train/{name}", value, int(m["step"]))
        sr = metrics[-1]["success_rate"]
        progress.update(task, completed=min(done, planned), rate=done / elapsed,
                        sr="-" if math.isnan(sr) else f"{sr:.2f}")

    with Progress(*columns, console=console, transient=False, disable=plain) as progress:
        task = progress.add_task(f"PPO {env_id}", total=planned, rate=0.0, sr="-")
        trainer.train(steps, progress=on_progress)
    train_s = running() - train_start

    with stage(f"evaluating {config.eval.episodes} episodes of {env_id}"):
        result = trainer.evaluate()
    writer.add_scalar("eval/sr", result.sr, trainer.steps)
    writer.add_scalar("eval/return", result.mean_return, trainer.steps)
    writer.close()
    pd.DataFrame(rows).to_csv(run_dir / "metrics.csv", index=False)

    summary = {
        **args,
        "steps": trainer.steps,
        "requested_steps": steps,
        "wall_s": running() - start,
        "compile_s": compile_s,
        "train_s": train_s,
        "steps_per_s": trainer.steps / train_s,
        "eval_sr": result.sr,
        "eval_sr_name": sr_name,
        "eval_return": result.mean_return,
        "eval_episodes": len(result.returns),
        "run_dir": str(run_dir),
    }
    write_manifest(run_dir, summary)
    return summary


def _cmd_train(ns: argparse.Namespace) -> None:
    summary = train_run(ns.env, ns.steps, ns.seed, ns.backend, ns.config, ns.out,
                        sets=ns.sets, imports=ns.imports)
    if ns.json:
        print(json.dumps(summary), flush=True)
    else:
        Console().print(
            f"{summary['env']}: {summary['steps']:,} steps in {summary['train_s']:.1f}s "
            f"({summary['steps_per_s']:,.0f} steps/s, compile {summary['compile_s']:.1f}s); "
            f"eval {summary['eval_sr_name']} {summary['eval_sr']:.2f}, "
            f"return {summary['eval_return']:.3f} "
            f"over {summary['eval_episodes']} episodes -> {summary['run_dir']}"
        )


def add_parser(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="train PPO on one environment")
    train.add_argument("--env", required=True, help="env id, e.g. MiniGrid-DoorKey-8x8-v0 "
                                                    "(or module:Id)")
    train.add_argument("--steps", required=True, type=env_steps,
                       help="env steps (at most 1e10), rounded up to whole PPO iterations "
                            "of ppo.num_envs x ppo.n_steps steps (on the jax backend, whole "
                            "calls of ppo.iterations_per_call iterations): e.g. 2048 trains "
                            "16,384 with 8 envs x 2048 steps; a rounded budget is said on "
                            "stderr before training")
    train.add_argument("--seed", type=seed_int, default=0, help="0 <= S < 2^32")
    train.add_argument("--backend", choices=list(BACKENDS), default=None,
                       help="jax (compiled envs), gymnasium (host, any gymnasium id) or "
                            "native (host MuJoCo batch); default: the env's fastest here "
                            "(MiniGrid jax; MuJoCo native on a CPU, jax (MJX) on an "
                            "accelerator; other ids gymnasium)")
    train.add_argument("--config", help="YAML config (default: configs/ppo preset)")
    add_set_option(train, example="ppo.lr=1e-3")
    add_import_option(train, brings="gymnasium ids or env families",
                      recorded="recorded in run.json")
    train.add_argument("--out", help="run directory (default: runs/<env>-<backend>-s<seed>-<time>)")
    train.add_argument("--json", action="store_true", help="print a JSON summary line")
    train.set_defaults(func=_cmd_train)
