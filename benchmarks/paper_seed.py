"""One whole paper-scale seed, timed phase by phase (paper App. G: "Compute and Memory").

Runs ``telapa run`` for one method on the primary curriculum at the ``paper`` run preset
(10 visits x ~10M PPO steps; TeLAPA with the paper's illumination, probe and maintenance
budgets) in a run directory of its own, and writes what App. G reports beside the
paper's numbers: wall time per phase, env steps, archive sizes and peak RSS.

A seed takes hours, so the benchmark is resumable and can be spread over sessions:
``--hours H`` stops it at the first checkpoint after H hours (nothing is lost: the run
resumes from that checkpoint, with exactly the results of an uninterrupted run), and the
next invocation continues it. Wall times are the run's own accounting (`accounting.json`:
summed over its segments, excluding work redone after a kill), so a seed split over
several invocations reports the time one uninterrupted run takes.

    python benchmarks/paper_seed.py --method telapa --hours 1.5        # start or continue
    python benchmarks/paper_seed.py --method finetune
    python benchmarks/paper_seed.py --method telapa --report-only      # JSON from the run dir
    python benchmarks/paper_seed.py --method telapa --curriculum tests/continual/... \\
        --preset tests/continual/tiny_run.yaml --runs /tmp/x --json /tmp/x.json  # smoke

``--threads N`` caps the run's CPU threads as a sweep worker's are (`thread_env`): two
invocations with ``--threads 1`` side by side time seeds as a two-worker study runs
them (the MuJoCo study: ``--workers 2 --threads 1``). Each invocation writes its own
entry of the JSON (read again just before it is replaced, so side-by-side runs keep
each other's).

The JSON (``--json``, default ``benchmarks/results/paper_seed.json``) holds one entry per
method; an entry of an unfinished seed says how far it got (``visits_done``) and
projects its total from the finished visits (``projected_wall_s``, labelled as such).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from machine import machine_info

from telapa.continual.rundir import RunDir
from telapa.continual.sweep.jobs import thread_env
from telapa.io import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]

PAPER = {
    "source": "paper App. G (CPU, one seed of the primary curriculum)",
    "telapa_wall_h": 20.07,
    "finetune_wall_h": 15.43,
    "telapa_peak_rss_GB": 53.33,
    "finetune_peak_rss_GB": 10.02,
    "telapa_phase_h": {"illumination": 2.99, "few_shot": 2.23, "maintenance": 2.57},
}
"""The paper's compute table (wall hours of one seed and TeLAPA's three extra phases)."""

NO_PAPER = {"source": "none: the paper's compute table (App. G) is of its MiniGrid runs",
            "telapa_phase_h": {}}
"""The reference of a seed of another env family (the MuJoCo curricula)."""


def paper_reference(curriculum: str) -> dict:
    """`PAPER` for a MiniGrid curriculum, else `NO_PAPER`."""
    from telapa.continual.curriculum import load_curriculum
    from telapa.envs.registry import family_of

    first = load_curriculum(curriculum).visits()[0]
    return PAPER if family_of(first.env_id).name == "minigrid" else NO_PAPER


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run_dir_of(runs: Path, method: str, seed: int, preset: str) -> Path:
    name = Path(preset).stem if preset.endswith((".yaml", ".yml")) else preset
    return runs / f"{name}-{method}-s{seed}"


def is_complete(run: Path) -> bool:
    return (run / "run.json").exists() and RunDir(run).manifest().get("status") == "complete"


POLL_S = 0.2
"""How often the monitor looks for the checkpoint after the deadline: well under a phase,
so the stop lands at the first checkpoint past the deadline."""


STOPPED_BY_SIGTERM = 128 + signal.SIGTERM
"""``telapa run``'s exit status after SIGTERM (`telapa.cli.run.Terminated`)."""


def run_segment(run: Path, args: argparse.Namespace, hours: float | None) -> int:
    """Starts or resumes ``telapa run`` on ``run``; after ``hours`` stops it as soon as it
    has written its next checkpoint (its accounting is the last file a checkpoint writes).
    Returns the process's exit status (143 when stopped: ``telapa run`` ends a SIGTERM
    as it ends Ctrl-C, at its checkpoint, with status 128 + 15)."""
    if run.exists():
        cmd = ["--resume", str(run)]
    else:
        cmd = ["--curriculum", args.curriculum, "--method", args.method,
               "--seed", str(args.seed), "--preset", args.preset, "--out", str(run)]
    cmd = [sys.executable, "-m", "telapa.cli", "run", *cmd, "--log-interval", "60"]
    log_path = run.with_suffix(".log")
    log(f"{' '.join(cmd[2:])}  (log: {log_path})")
    accounting = run / "accounting.json"
    deadline = time.monotonic() + hours * 3600 if hours else None
    with open(log_path, "a") as stream:
        env = {**os.environ, **(thread_env(args.threads) if args.threads else {})}
        proc = subprocess.Popen(cmd, stdout=stream, stderr=stream, cwd=ROOT, env=env)
        mark = None
        while proc.poll() is None:
            time.sleep(POLL_S)
            if deadline is None or time.monotonic() < deadline:
                continue
            stamp = accounting.stat().st_mtime_ns if accounting.exists() else 0
            if mark is None:
                mark = stamp
                log(f"{hours} h reached: stopping at the next checkpoint")
            elif stamp != mark:
                # accounting.json is the checkpoint's last file, replaced atomically: the
                # checkpoint is whole, and stopping now loses only the phase that follows
                proc.send_signal(signal.SIGTERM)
                proc.wait()
    return proc.returncode


def summarise(run: Path, method: str) -> dict:
    """The benchmark entry of one run directory (finished or not)."""
    run_dir = RunDir(run)
    accounting = run_dir.accounting()
    visits = pd.read_csv(run / "visits.csv")
    n_visits = len(run_dir.curriculum().visits())
    done = int(visits["post_sr"].notna().sum()) if "post_sr" in visits else 0
    complete = is_complete(run)
    phases = {**accounting.get("phase_s", {}), **accounting.get("method_phase_s", {})}
    entry = {
        "method": method,
        "run_dir": str(run),
        "complete": complete,
        "visits_done": done,
        "visits": n_visits,
        "wall_s": accounting["wall_s"],
        "segments": accounting["segments"],
        "phase_s": phases,
        "compile_s": accounting.get("compile_s", 0.0),
        "ppo_env_steps": accounting["ppo_env_steps"],
        "extra_env_steps": accounting["extra_env_steps"],
        "peak_rss_GB": accounting["peak_rss_bytes"] / 1e9,
        "method_state_GB": accounting.get("method_state_bytes", 0) / 1e9,
        "post_sr": dict(zip(visits["tag"], visits["post_sr"].round(3), strict=False)),
    }
    if not complete and done:
        entry["projected_wall_s"] = accounting["wall_s"] * entry["visits"] / done
    if run_dir.has_elites():
        sizes = run_dir.elites().groupby("task").size()
        entry["archive_sizes"] = {str(k): int(v) for k, v in sizes.items()}
    events = run_dir.method_log() if (run / "method_log.json").exists() else []
    phase_of = {"illumination": "illumination", "transfer": "few_shot"}
    steps: dict[str, int] = {}
    for e in events:
        if e.get("event") in phase_of and "env_steps" in e:
            name = phase_of[e["event"]]
            steps[name] = steps.get(name, 0) + int(e["env_steps"])
    entry["phase_env_steps"] = {"train": accounting["ppo_env_steps"], **steps}
    entry["archive_after_visit"] = {e["visit_tag"]: e["archive_size"] for e in events
                                    if e.get("event") == "illumination"}
    if (run / "metrics.json").exists():
        metrics = run_dir.metrics()
        entry["metrics"] = {k: metrics[k] for k in ("mean_sr", "ttt", "coverage", "tr", "nbwt")
                            if k in metrics}
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", required=True, help="e.g. telapa, finetune")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--curriculum", default="primary")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--runs", type=Path, default=ROOT / "benchmarks" / "runs",
                        help="folder of the benchmark's run directories (git-ignored)")
    parser.add_argument("--hours", type=float, default=None,
                        help="stop at the first checkpoint after this many hours")
    parser.add_argument("--report-only", action="store_true",
                        help="write the JSON from the run directory without running")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" /
                        "paper_seed.json")
    parser.add_argument("--threads", type=int, default=None,
                        help="cap the run's CPU threads as a sweep worker's (default: all)")
    args = parser.parse_args(argv)
    if args.hours is not None and args.hours <= 0:
        parser.error(f"--hours must be positive, got {args.hours}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")

    run = run_dir_of(args.runs, args.method, args.seed, args.preset)
    if not args.report_only and not is_complete(run):
        args.runs.mkdir(parents=True, exist_ok=True)
        code = run_segment(run, args, args.hours)
        if code not in (0, STOPPED_BY_SIGTERM):
            log(f"telapa run failed (exit {code}); see {run.with_suffix('.log')}")
            return 1
    if not (run / "accounting.json").exists():
        log(f"{run} has no accounting yet (no checkpoint written)")
        return 1
    entry = summarise(run, args.method)
    report = (json.loads(args.json.read_text()) if args.json.exists()
              else {"benchmark": "paper_seed", "runs": {}})
    report["paper"] = paper_reference(args.curriculum)
    report["machine"] = machine_info()
    report["runs"][f"{args.method}-s{args.seed}"] = {
        **entry, "preset": args.preset, "curriculum": args.curriculum, "seed": args.seed,
        "cpu_threads": args.threads or os.cpu_count()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.json, report)
    state = "complete" if entry["complete"] else f"{entry['visits_done']}/{entry['visits']} visits"
    log(f"{args.method}: {state}, {entry['wall_s'] / 3600:.2f} h, peak "
        f"{entry['peak_rss_GB']:.2f} GB -> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
