"""The GPU study of issue 25 in one device call (`benchmarks/gpu_study.sh` runs it there).

Three stages inside a time budget (``--budget-s``, default 480 s of the call's 9 minutes):

1. ``finetune``: the visit program of Finetune on the study preset (one 73,728-step chunk
   of 36 PPO iterations and its 50-episode evaluation, DoorKey-8x8) at S = 1, 8, 64, 256
   seeds (`benchmarks/visit_program.py --new-only --phases chunk`): aggregate PPO env
   steps/s, time per iteration, compile time, peak device memory;
2. ``mujoco``: the same for HalfCheetah-v5 on MJX (`telapa.envs.mujoco.mjx_env`) with the
   MuJoCo paper preset (`configs/runs/mujoco.yaml`: 8 envs x 2048 steps, 10 epochs; one
   chunk of ``eval_every`` PPO steps and its evaluation) at S = 1, 8, 64 seeds
   (``--mujoco-sizes``), rows of stage ``mujoco``;
3. ``cells``: Table 1 study cells (``telapa run --curriculum primary --preset study
   --seeds 0-4``), one method after the other (Finetune first, TeLAPA's two last) until
   the budget is spent; a cell stopped by the budget resumes from its checkpoints.

Resumable across calls. The state lives in ``--state`` (default ``.gpu_study``, an
ignored folder the call carries): a measured size or a finished cell is skipped. At the end the
state is packed into ``$OUT/gpu_study_state.tar.gz``; unpack it into ``.gpu_study`` here
and carry it in the next call. Finished cells keep only their small outputs (run.json,
metrics, tables, accounting); a stopped cell keeps its whole run directories when the
archive stays under 15 MiB, else it starts again next time (``notes`` says so).

Writes ``$OUT/gpu_study.json`` (rewritten after every measurement): ``rows``, one per
measurement, each with ``stage``, ``seeds``, ``env_steps_per_s`` (PPO env steps per
second, all seeds together) and the card (``device``); earlier calls' rows are kept.

    python benchmarks/gpu_study.py --out-dir "$OUT"
    python benchmarks/gpu_study.py --quick --out-dir /tmp/x   # CPU smoke run, minutes
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELL_ORDER = ["finetune", "finetune-reset", "l2init", "ewc", "shrink-perturb", "dff",
              "scratch", "scratch-reuse", "telapa-static", "telapa"]
"""Table 1's ten methods, the cheapest first (TeLAPA's extra phases last)."""
SMALL_OUTPUTS = ("run.json", "metrics.json", "visits.csv", "curve.csv", "final.csv",
                 "accounting.json", "method_log.json")
STATE_LIMIT = 15 * 2**20


def device_name() -> str:
    probe = subprocess.run([sys.executable, "-c", "import jax; d = jax.devices()[0]; "
                            "print(getattr(d, 'device_kind', d.platform))"],
                           capture_output=True, text=True, check=False)
    return probe.stdout.strip() or "unknown"


class Study:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.state: Path = args.state
        self.state.mkdir(parents=True, exist_ok=True)
        self.report_path = args.out_dir / "gpu_study.json"
        previous = self.state / "gpu_study.json"
        self.report = (json.loads(previous.read_text()) if previous.exists()
                       else {"benchmark": "gpu_study", "rows": [], "notes": [], "calls": 0})
        self.report["calls"] += 1
        self.report["quick"] = args.quick
        self.device = device_name()
        self.deadline = time.monotonic() + args.budget_s

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self) -> None:
        text = json.dumps(self.report, indent=1) + "\n"
        (self.state / "gpu_study.json").write_text(text)
        self.args.out_dir.mkdir(parents=True, exist_ok=True)
        self.report_path.write_text(text)

    def note(self, text: str) -> None:
        print(text, file=sys.stderr)
        self.report["notes"].append(f"call {self.report['calls']}: {text}")
        self.write()

    # --- stage 1 ----------------------------------------------------------------------

    def finetune(self, stage: str = "finetune", sizes: list[int] | None = None,
                 extra: list[str] | None = None) -> None:
        measured = {r["seeds"] for r in self.report["rows"] if r["stage"] == stage}
        sizes = [s for s in (sizes or self.args.sizes) if s not in measured]
        if not sizes:
            return
        out = self.state / f"visit_program-{stage}-call{self.report['calls']}.json"
        cmd = [sys.executable, str(ROOT / "benchmarks" / "visit_program.py"), "--new-only",
               "--phases", "chunk", "--repeats", "1", "--out", str(out),
               "--sizes", *map(str, sizes), *(extra or [])]
        if self.args.quick:
            cmd.append("--quick")
        limit = max(self.left() * self.args.finetune_share, 1)
        try:
            subprocess.run(cmd, cwd=ROOT / "benchmarks", timeout=limit, check=True)
        except subprocess.TimeoutExpired:
            self.note(f"{stage} stage stopped at its {limit:.0f} s limit")
        except subprocess.CalledProcessError as err:
            self.note(f"{stage} stage failed (exit {err.returncode})")
        if not out.exists():
            return
        for r in json.loads(out.read_text())["rows"]:
            self.report["rows"].append({
                "stage": stage, "seeds": r["seeds"], "device": self.device,
                "env_steps_per_s": r["ppo_steps_per_s"],
                "env_steps_per_s_with_eval": r["env_steps_per_s"],
                "chunk_s": r["s"], "iteration_s": r["iteration_s"],
                "compile_s": r["compile_s"], "first_call_s": r["first_s"],
                "peak_memory_bytes": r["peak_memory_bytes"], "gap": r["gap"],
                "call": self.report["calls"]})
        self.write()

    def mujoco(self) -> None:
        """Stage 2: `finetune`'s measurement for HalfCheetah on MJX."""
        self.finetune(stage="mujoco", sizes=self.args.mujoco_sizes,
                      extra=["--env", "HalfCheetah-v5", "--preset", "mujoco"])

    # --- stage 3 ----------------------------------------------------------------------

    def cells(self) -> None:
        seeds = list(range(self.args.seeds))
        for method in self.args.methods:
            if self.left() < 30:
                self.note(f"budget spent before the {method} cell")
                return
            cell = self.state / "cells" / method
            if (cell / "cell.done").exists():
                continue
            dirs = [cell / f"{self.args.curriculum}-{method}-s{s}" for s in seeds]
            before = sum(_ppo_steps(d) for d in dirs)
            if any((d / "run.json").exists() for d in dirs):
                cmd = ["run", "--resume", *map(str, dirs)]
            else:
                cmd = ["run", "--curriculum", self.args.curriculum, "--method", method,
                       "--preset", self.args.preset, "--seeds", f"0-{len(seeds) - 1}",
                       "--out", str(cell)]
            start = time.monotonic()
            try:
                proc = subprocess.run([sys.executable, "-m", "telapa.cli", *cmd],
                                      timeout=self.left(), capture_output=True, text=True)
                finished = proc.returncode == 0
                if not finished:
                    self.note(f"{method} cell failed: {proc.stderr[-2000:]}")
            except subprocess.TimeoutExpired:
                finished = False
            wall = time.monotonic() - start
            trained = sum(_ppo_steps(d) for d in dirs) - before
            row = {"stage": "cell", "method": method, "seeds": len(seeds),
                   "device": self.device, "complete": finished,
                   "env_steps_per_s": trained / wall if wall else 0.0,
                   "ppo_env_steps": trained, "wall_s": wall,
                   "call": self.report["calls"]}
            if finished:
                accounting = [json.loads((d / "accounting.json").read_text()) for d in dirs]
                row["cell_wall_s"] = max(a["wall_s"] for a in accounting) * len(dirs)
                row["cell_ppo_env_steps"] = sum(a["ppo_env_steps"] for a in accounting)
                row["extra_env_steps"] = sum(a["extra_env_steps"] for a in accounting)
                row["compile_s"] = max(a["compile_s"] for a in accounting)
                _keep_small_outputs(dirs)
                (cell / "cell.done").touch()
            self.report["rows"].append(row)
            self.write()
            if not finished:
                self.note(f"{method} cell stopped after {wall:.0f} s ({trained} PPO steps "
                          "this call); it resumes next call")
                return

    # --- state --------------------------------------------------------------------------

    def pack(self) -> None:
        """``$OUT/gpu_study_state.tar.gz`` of the state, stopped cells dropped when the
        archive would pass `STATE_LIMIT`."""
        def archive(skip: set[Path]) -> bytes:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                for path in sorted(self.state.rglob("*")):
                    if path.is_file() and not any(p in skip for p in path.parents):
                        tar.add(path, arcname=str(path.relative_to(self.state)))
            return buffer.getvalue()

        data = archive(set())
        if len(data) > STATE_LIMIT:
            stopped = {c for c in (self.state / "cells").glob("*")
                       if not (c / "cell.done").exists()}
            self.note(f"state of {len(data) / 2**20:.1f} MiB: the stopped cells "
                      f"{sorted(c.name for c in stopped)} start again next call")
            data = archive(stopped)
        (self.args.out_dir / "gpu_study_state.tar.gz").write_bytes(data)


def _ppo_steps(run_dir: Path) -> int:
    """PPO env steps a run has trained, from its last checkpoint's accounting."""
    path = run_dir / "accounting.json"
    return int(json.loads(path.read_text())["ppo_env_steps"]) if path.exists() else 0


def _keep_small_outputs(dirs: list[Path]) -> None:
    """Deletes all but the small outputs of finished runs (they travel between calls)."""
    for d in dirs:
        for entry in list(d.iterdir()):
            if entry.name in SMALL_OUTPUTS:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--state", type=Path, default=ROOT / ".gpu_study")
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--finetune-share", type=float, default=0.45,
                        help="fraction of the budget left that stage 1 may use")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--mujoco-sizes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--methods", nargs="+", default=CELL_ORDER)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--curriculum", default="primary")
    parser.add_argument("--preset", default="study")
    parser.add_argument("--stages", nargs="+", default=["finetune", "mujoco", "cells"],
                        choices=["finetune", "mujoco", "cells"])
    parser.add_argument("--quick", action="store_true",
                        help="CPU smoke run: tiny chunk, smoke curriculum, tiny preset")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = [1, 2]
        args.mujoco_sizes = [1]
        args.curriculum = "smoke"
        args.methods = args.methods[:1]
        args.seeds = 2
        args.preset = str(ROOT / "tests" / "continual" / "tiny_run.yaml")
    study = Study(args)
    study.write()
    try:
        if "finetune" in args.stages:
            study.finetune()
        if "mujoco" in args.stages:
            study.mujoco()
        if "cells" in args.stages:
            study.cells()
    finally:
        study.write()
        study.pack()
    print(f"wrote {study.report_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
