"""Markdown tables for BENCHMARKS.md from the JSON results of the benchmark scripts.

    python benchmarks/tables.py benchmarks/results/env_throughput.json \
        benchmarks/results/ppo_throughput.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _machine(report: dict) -> str:
    m = report["machine"]
    versions = report.get("versions") or m.get("versions", {})
    where = m.get("cpu_model") or m.get("processor", "")
    cores = m.get("logical_cores") or m.get("cpu_count")
    accel = f", JAX on {m['jax_backend']} {m['jax_devices']}" if "jax_backend" in m else ""
    pins = ", ".join(f"{k} {v}" for k, v in versions.items())
    return f"{where}, {cores} cores{accel}; {pins}"


def env_table(report: dict) -> str:
    """Steps/s per id: Farama (1 env, SyncVectorEnv of 8) and the port at each batch."""
    rows: dict[str, dict[tuple[str, int], float]] = {}
    for r in report["results"]:
        rows.setdefault(r["env_id"], {})[(r["name"], r["num_envs"])] = r["steps_per_s"]
    batches = sorted({b for runs in rows.values() for (name, b) in runs if name == "port"})
    head = ["id", "Farama", "Farama x8"] + [f"port @{b}" for b in batches] + ["best / Farama"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for env_id, runs in rows.items():
        farama = runs[("farama", 1)]
        ports = [runs[("port", b)] for b in batches]
        cells = [env_id, f"{farama:,.0f}", f"{runs[('farama-sync8', 8)]:,.0f}"]
        cells += [f"{p:,.0f}" for p in ports] + [f"{max(ports) / farama:,.0f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ppo_table(report: dict) -> str:
    """Steps/s of each PPO run and its ratio to Stable-Baselines3: the median over the
    rounds of a repeated run, with the range of its rounds."""
    head = ["run", "inputs", "envs x steps", "minibatch", "epochs", "compile s", "steps/s",
            "vs SB3"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    runs: dict[str, list[dict]] = {}
    for r in report["results"]:
        runs.setdefault(r["name"], []).append(r)
    sb3 = statistics.median(r["steps_per_s"] for r in runs["sb3"]) if "sb3" in runs else 0
    for name, rounds in runs.items():
        first, rates = rounds[0], sorted(r["steps_per_s"] for r in rounds)
        median = statistics.median(rates)
        rate = f"{median:,.0f}" + (f" ({rates[0]:,.0f}-{rates[-1]:,.0f})" if len(rates) > 1 else "")
        inputs = "image" if name == "sb3" else (
            "image, direction, mission" if first.get("observe_mission", True)
            else "image, direction"
        )
        cells = [
            name, inputs, f"{first['num_envs']} x {first['n_steps']}", str(first["batch_size"]),
            str(first["epochs"]), f"{first['compile_s']:.1f}", rate,
            f"{median / sb3:.1f}x" if sb3 else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def phases_table(report: dict) -> str:
    """TeLAPA's phases (wall, env steps, peak RSS) beside the paper's cost per visit, then
    candidate-evaluation throughput against Farama."""
    head = ["phase", "wall s", "paper s / visit", "paper / ours", "env steps",
            "env steps/s", "archive", "peak RSS GB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in report["phases"].items():
        steps = r.get("env_steps", 0)
        cells = [name, f"{r['wall_s']:,.1f}", f"{r['paper_s']:,.0f}",
                 f"{r['paper_s'] / r['wall_s']:,.0f}x", f"{steps:,}",
                 f"{steps / r['wall_s']:,.0f}" if steps else "",
                 str(r.get("archive_size", "")), f"{r['peak_rss_GB']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    head = ["evaluator", "batch", "steps/s", "candidates/s", "vs Farama evaluating",
            "vs Farama alone"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["evaluation"]:
        ratio = r.get("ratio_vs_farama")
        cells = [r["name"], str(r.get("batch", 1)), f"{r['steps_per_s']:,.0f}",
                 f"{r['candidates_per_s']:,.1f}" if "candidates_per_s" in r else "",
                 f"{ratio:,.0f}x" if ratio else "",
                 f"{r['ratio_vs_farama_raw']:,.0f}x" if ratio else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paper_seed_table(report: dict) -> str:
    """One whole seed per method: wall time per phase (hours), env steps and peak RSS,
    beside the paper's App. G numbers (its phase hours are TeLAPA's)."""
    paper = report["paper"]
    phases = ["train", "eval", "illumination", "few_shot", "maintenance", "checkpoint"]
    head = (["method", "status", "wall h", "paper wall h"] + [f"{p} h" for p in phases]
            + ["PPO steps", "extra steps", "peak RSS GB", "paper peak GB"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["runs"].values():
        status = "complete" if r["complete"] else f"{r['visits_done']}/{r['visits']} visits"
        wall = f"{r['wall_s'] / 3600:.2f}"
        if not r["complete"] and "projected_wall_s" in r:
            wall += f" (projected {r['projected_wall_s'] / 3600:.2f})"
        paper_wall = paper.get(f"{r['method']}_wall_h")
        cells = [r["method"], status, wall, f"{paper_wall:.2f}" if paper_wall else ""]
        for p in phases:
            ours = r["phase_s"].get(p)
            theirs = paper["telapa_phase_h"].get(p) if r["method"] == "telapa" else None
            cells.append((f"{ours / 3600:.2f}" if ours is not None else "")
                         + (f" (paper {theirs:.2f})" if theirs else ""))
        cells += [f"{r['ppo_env_steps']:,}", f"{r['extra_env_steps']:,}",
                  f"{r['peak_rss_GB']:.2f}",
                  f"{paper[peak]:.2f}" if (peak := f"{r['method']}_peak_rss_GB") in paper
                  else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seed_batch_table(report: dict) -> str:
    """Seeds per hour of one ``telapa run --seeds`` batch against separate processes
    (``*``: separate seconds counted from the measured seeds, not all run)."""
    lines = ["| seeds S | batch s | separate s | batch seeds/h | separate seeds/h | speed-up |",
             "|---|---|---|---|---|---|"]
    for r in report["results"]:
        estimated = "*" if r.get("separate_estimated") else ""
        lines.append(f"| {r['seeds']} | {r['batch_s']:.1f} | {r['separate_s']:.1f}{estimated} | "
                     f"{r['batch_seeds_per_hour']:.0f} | {r['separate_seeds_per_hour']:.0f} | "
                     f"{r['speedup']:.2f}x |")
    return "\n".join(lines)


def activations_table(report: dict) -> str:
    """ns per element of each activation (forward; forward + backward) against relu, then
    PPO steps/s per activation (medians) against tanh."""
    lines = ["| activation | forward ns/element | vs relu | forward+backward ns/element | "
             "vs relu | PPO steps/s | vs tanh |", "|---|---|---|---|---|---|---|"]
    ppo = report.get("ppo_summary", {})
    for r in report["elementwise"]:
        run = ppo.get(r["name"])
        rate = (f"{run['median_steps_per_s']:,.0f} | {run['vs_tanh']:.2f}x" if run
                else " | ")
        lines.append(f"| {r['name']} | {r['forward_ns_per_element']:.2f} | "
                     f"{r['forward_vs_relu']:.1f}x | {r['forward_backward_ns_per_element']:.2f} "
                     f"| {r['forward_backward_vs_relu']:.1f}x | {rate} |")
    return "\n".join(lines)


TABLES = {"activations": activations_table, "env_throughput": env_table,
          "ppo_throughput": ppo_table, "telapa_phases": phases_table,
          "paper_seed": paper_seed_table, "seed_batch": seed_batch_table}


def main(paths: list[str]) -> int:
    for path in paths:
        report = json.loads(Path(path).read_text())
        table = TABLES[report["benchmark"]]
        print(f"`{path}` ({_machine(report)})\n\n{table(report)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
