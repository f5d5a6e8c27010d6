"""The benchmark scripts run (``--quick``) and write the JSON fields the reports read."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
TINY = Path(__file__).resolve().parent / "continual" / "tiny_run.yaml"
ONE_TASK = Path(__file__).resolve().parent / "continual" / "one_task_curriculum.yaml"
"""Empty-5x5 and its revisit: the least a run compiles (one env) and trains (two visits)."""


def _quick_report(script: str, out: Path, *args: str, timeout: int = 600) -> dict:
    """Runs ``benchmarks/<script> --quick <args> --out <out>`` (at the suite's XLA
    optimization level 0, tests/conftest.py); returns the JSON it wrote, after checking
    its name and quick flag."""
    subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick", *args,
                    "--out", str(out)], check=True, timeout=timeout)
    report = json.loads(out.read_text())
    assert report["benchmark"] == Path(script).stem and report["quick"] is True
    return report


def test_env_throughput_quick(tmp_path: Path) -> None:
    out = tmp_path / "env_throughput.json"
    env_id = "MiniGrid-Empty-5x5-v0"
    report = _quick_report("env_throughput.py", out, "--ids", env_id)
    machine = report["machine"]
    assert machine["cpu_model"] and machine["logical_cores"] >= 1
    assert {"python", "jax", "minigrid"} <= set(machine["versions"])
    runs = {(r["name"], r["num_envs"]): r for r in report["results"]}
    batches = report["settings"]["batch_sizes"]
    assert set(runs) == {("farama", 1), ("farama-sync8", 8)} | {("port", b) for b in batches}
    for run in runs.values():
        assert run["env_id"] == env_id and run["steps"] > 0 and run["steps_per_s"] > 0
    for batch in batches:
        assert runs["port", batch]["compile_s"] > 0 and runs["port", batch]["reset_compile_s"] > 0


def test_mujoco_throughput_quick(tmp_path: Path) -> None:
    out = tmp_path / "mujoco_throughput.json"
    report = _quick_report("mujoco_throughput.py", out, "--skip-sb3")
    names = {r["name"] for r in report["results"]}
    assert {"telapa", "gymnasium-sync8", "family-sync8", "family-async8", "GymVectorEnv-sync8",
            "candidates", "telapa-native", "native-8", "native-64", "candidates-native",
            "candidates-native-1by1"} <= names
    assert all(r["steps"] > 0 and r["steps_per_s"] > 0 for r in report["results"])
    cost = report["visit_cost"]["HalfCheetah-v5"]
    assert set(cost["seconds"]) == {"ppo", "evaluation", "illumination", "probes"}
    assert cost["env_steps"]["ppo"] == 983_040  # the mujoco preset's visit (paper: 1e6)
    # 200 candidates + the base policy, 5 episodes of 1000 steps each
    assert cost["env_steps"]["illumination"] == 201 * 5 * 1000
    assert cost["total_s"] == sum(cost["seconds"].values())
    native = report["visit_cost_native"]["HalfCheetah-v5"]
    assert native["env_steps"] == cost["env_steps"] and native["total_s"] > 0
    # the engine's knobs: 1 against 2 threads, the sketch of every step against T_max's
    sizes = (8, 16, 40, 64)
    assert {f"threads-{k}-{n}" for k in (1, 2) for n in sizes} \
        | {"candidates-threads-1", "candidates-threads-2", "sketch-all", "sketch-256"} <= names
    runs = {r["name"]: r for r in report["results"]}
    # the same episodes whatever the threads or the sketch's horizon
    assert runs["candidates-threads-1"]["steps"] == runs["candidates-threads-2"]["steps"]
    assert runs["sketch-all"]["steps"] == runs["sketch-256"]["steps"] == 5 * 1000
    assert set(report["engine"]["ratios"]) == (
        {f"threads-2-{n} / threads-1-{n}" for n in sizes}
        | {"candidates-threads-2 / candidates-threads-1", "sketch-256 / sketch-all"})
    # gymnasium's SyncVectorEnv against make_vec("telapa/<Id>"), per env and batch size
    vector = report["vector"]
    assert set(vector) == {"HalfCheetah-v5", "Hopper-v5"}
    assert {"ratio-8", "ratio-64"} <= set(vector["Hopper-v5"])
    assert vector["Hopper-v5"]["ratio-8"] == (vector["Hopper-v5"]["vector-telapa-8"]
                                              / vector["Hopper-v5"]["vector-gymnasium-8"])
    # the physics bound per env id, with the integrator that sets it
    physics = {r["env_id"]: r for r in report["results"] if r["name"] == "physics-1env"}
    assert {i: (r["integrator"], r["frame_skip"]) for i, r in physics.items()} == {
        "HalfCheetah-v5": ("mjINT_EULER", 5), "Hopper-v5": ("mjINT_RK4", 4),
        "Walker2d-v5": ("mjINT_RK4", 4), "Ant-v5": ("mjINT_RK4", 5)}


def test_paper_seed_stops_at_a_checkpoint_and_resumes(tmp_path: Path) -> None:
    """``--hours`` stops the seed at a checkpoint; the next invocation finishes it, and
    the entry adds up the run's own accounting over both segments. The deadline (0.7 s)
    passes before the run's first checkpoint (importing JAX alone takes longer), so the
    stop lands on that checkpoint whatever the machine's speed: with a deadline inside
    the run, a fast machine finished the tiny run before the stop (CI, stop 32). One
    task visited twice (`ONE_TASK`): the smoke curriculum's two tasks and four visits
    took twice as long and check nothing more here."""
    out = tmp_path / "paper_seed.json"
    cmd = [sys.executable, str(BENCHMARKS / "paper_seed.py"), "--method", "scratch",
           "--curriculum", str(ONE_TASK), "--preset", str(TINY), "--runs", str(tmp_path),
           "--json", str(out), "--threads", "1"]
    subprocess.run([*cmd, "--hours", "0.0002"], check=True, timeout=600)
    first = json.loads(out.read_text())["runs"]["scratch-s0"]
    assert not first["complete"] and first["visits_done"] < first["visits"] == 2
    subprocess.run(cmd, check=True, timeout=600)
    report = json.loads(out.read_text())
    entry = report["runs"]["scratch-s0"]
    assert entry["complete"] and entry["visits_done"] == 2 and entry["segments"] == 2
    assert entry["ppo_env_steps"] == 2 * 4096 and entry["extra_env_steps"] == 0
    assert entry["wall_s"] > first["wall_s"] and entry["peak_rss_GB"] > 0
    assert {"train", "eval", "checkpoint"} <= set(entry["phase_s"])
    assert report["paper"]["telapa_wall_h"] == 20.07 and report["machine"]["logical_cores"] >= 1
    assert entry["cpu_threads"] == 1  # --threads: capped as a one-thread sweep worker is


def test_seed_batch_quick(tmp_path: Path) -> None:
    out = tmp_path / "seed_batch.json"
    report = _quick_report("seed_batch.py", out, "--sizes", "1", "--steps-per-visit", "4096",
                           "--iterations-per-call", "2", "--curriculum", str(ONE_TASK),
                           timeout=900)
    assert report["curriculum"] == str(ONE_TASK)
    assert report["preset"]["steps_per_visit"] == 4096
    assert report["preset"]["train"] == {"preset": "minigrid", "ppo": {"iterations_per_call": 2}}
    assert len(report["separate_s"]) == 1 and report["separate_s"][0] > 0
    (row,) = report["results"]
    assert row["seeds"] == 1 and row["batch_s"] > 0 and not row["separate_estimated"]
    assert row["separate_s"] == sum(report["separate_s"])
    assert row["speedup"] == row["separate_s"] / row["batch_s"]


def test_machine_records_versions_and_imports_jax_only_to_measure(monkeypatch) -> None:
    """`benchmarks/machine.py`, which every benchmark (and an accelerator's image) imports:
    no JAX at import, a package's version or "not installed", and a matmul rate."""
    import importlib.metadata

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    code = ("import sys, machine; assert 'jax' not in sys.modules, 'imported jax'; "
            "print(machine.package_versions(('numpy', 'no-such-package-telapa')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == str({"numpy": importlib.metadata.version("numpy"),
                               "no-such-package-telapa": "not installed"})
    from machine import machine_info, matmul_rate

    assert matmul_rate(8, 8, 8, seconds=0.01) > 0
    info = machine_info(("numpy", "no-such-package-telapa"))
    assert info["versions"] == {"python": platform.python_version(),
                                "numpy": importlib.metadata.version("numpy"),
                                "no-such-package-telapa": "not installed"}
    assert info["logical_cores"] >= 1 and info["jax_backend"] == "cpu"


def test_separate_seconds_counts_unmeasured_seeds_at_the_warm_mean(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from seed_batch import separate_seconds

    measured = [40.0, 28.0, 30.0]  # seed 0 compiled with a cold cache
    assert separate_seconds(measured, 2) == 68.0
    assert separate_seconds(measured, 3) == 98.0
    assert separate_seconds(measured, 8) == 98.0 + 5 * (28.0 + 30.0) / 2
    assert separate_seconds([40.0], 3) == 120.0  # nothing warm: seed 0 stands for all


def test_activations_quick(tmp_path: Path) -> None:
    out = tmp_path / "activations.json"
    report = _quick_report("activations.py", out, "--elementwise-only")
    assert report["ppo"] == []
    rows = {r["name"]: r for r in report["elementwise"]}
    assert set(rows) == {"relu", "tanh", "dff-xla", "dff", "sincos"}
    assert rows["relu"]["forward_vs_relu"] == 1.0
    for row in rows.values():
        assert row["elements"] == 4096 * 64
        assert row["forward_ns_per_element"] > 0 and row["forward_backward_ns_per_element"] > 0


def test_visit_program_quick(tmp_path: Path) -> None:
    """Old and new paths side by side, with their gap to the hardware."""
    out = tmp_path / "visit_program.json"
    # the tiny preset on the smoke curriculum's task A: the programs the suite's runs
    # compiled, from its persistent compilation cache (the script's --quick)
    report = _quick_report("visit_program.py", out, "--sizes", "1", "--env",
                           "MiniGrid-Empty-5x5-v0", "--preset", str(TINY), "--phases",
                           "chunk", "fisher", "illumination", "maintenance", "--repeats",
                           "0", timeout=900)
    rows = {(r["phase"], r["path"]): r for r in report["rows"]}
    assert set(rows) == {(p, path) for p in ("chunk", "fisher", "illumination", "maintenance")
                         for path in ("new", "old")}
    # the seeds in lockstep evaluate the episodes each seed evaluates alone
    assert rows["illumination", "new"]["eval_steps"] == rows["illumination", "old"]["eval_steps"]
    for row in rows.values():
        assert row["seeds"] == 1 and row["s"] > 0
        assert row["env_steps_per_s"] > 0 or row["phase"] == "maintenance"
        assert row["t_min_s"] > 0 and row["gap"] == row["s"] / row["t_min_s"]
    assert rows["chunk", "new"]["ppo_steps"] == report["chunk_steps"] == 2 * 8 * 32
    assert rows["chunk", "new"]["eval_steps"] == rows["chunk", "old"]["eval_steps"] > 0


def test_sweep_load_quick(tmp_path: Path) -> None:
    """The sweep load test on 6 cells with 2 SIGKILLs of its workers passes its own checks
    (every cell done once, results the quiet sweep's, nothing left running)."""
    report = _quick_report("sweep_load.py", tmp_path / "sweep_load.json")
    assert report["outcome"] == "pass", report["failures"]
    assert report["settings"]["cells"] == 6 and len(report["chaos"]["kills"]) == 2
    assert report["quiet"]["kills"] == [] and report["quiet"]["processes_seen"] >= 2
    assert report["chaos"]["counts"]["done"] == 6 and not report["chaos"]["leaked"]


def test_checkpoint_cost_quick(tmp_path: Path) -> None:
    report = _quick_report("checkpoint_cost.py", tmp_path / "checkpoint_cost.json")
    assert set(report["checkpoint_s"]) == {"0", "2", "4", "8"}
    assert all(len(c["copying_s"]) == 1 for c in report["checkpoint_s"].values())
    assert report["run"]["phases"] == 221  # 10 visits x (start, 20 chunks, end) + final
    every, spaced = report["policies"]
    assert (every["share"], every["checkpoints"]) == (1.0, 221)
    assert spaced["share"] == 0.02 and spaced["checkpoints"] <= 221
    assert spaced["checkpoint_share"] <= every["checkpoint_share"]


def test_checkpoint_cost_follows_the_runners_rule_by_hand() -> None:
    """Ten phases of 10 s, checkpoints of 1 s, s = 0.05: due once 19 s have run since the
    last, so after phases 1 (the first), 3, 5, 7, 9 and 10 (the last): 6 s of 106 s."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from checkpoint_cost import checkpoint_share
    finally:
        sys.path.remove(str(BENCHMARKS))
    result = checkpoint_share([(10.0, 0)] * 10, {0: 1.0}, 0.05)
    assert result == {"share": 0.05, "checkpoints": 6, "checkpoint_s": 6.0, "wall_s": 106.0,
                      "checkpoint_share": 6.0 / 106.0}
    assert checkpoint_share([(10.0, 0)] * 10, {0: 1.0}, 1.0)["checkpoints"] == 10
