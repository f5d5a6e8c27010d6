"""Live curves of a continual run: TensorBoard always, Weights & Biases and MLflow on request.

Every continual run writes TensorBoard events into its run directory (``RUN_DIR/tb``,
`telapa.continual.rundir.TB_DIR`; ``tensorboard --logdir runs/``), all on the run's global
step axis (PPO env steps since the start of the curriculum)::

    sr/TAG, return/TAG       every evaluation of visit TAG (A, B, ..., Ap for A'): the
                             per-visit SR curves of paper Fig. 2 side by side on one axis
    train/NAME               PPO iteration metrics: loss, pg_loss, v_loss, entropy,
                             approx_kl, clip_frac, grad_norm, return and success rate
    time/NAME                seconds spent so far per phase (train, eval, method, ...,
                             and the method's own: illumination, probes, maintenance)
    method/EVENT/FIELD       numeric fields of the method's decisions (`Method.log`):
                             TeLAPA's illumination/archive_size, d_min, gate and env_steps,
                             its transfers' env_steps, maintenance's bank_sets, ...
                             (identities: ``*_id``, index, slot, source, tag, are left out)
    final/sr/TASK            the end-of-sequence evaluation; metrics/NAME the run's
                             metrics (mean SR, BWT, ...) once it completes

``telapa run --track wandb`` (or ``mlflow``, or both) sends the same scalars to a tracked
run (package extra ``telapa[tracking]``): one tracked run per seed, named after the run
directory, grouped by curriculum and method (W&B ``group``; MLflow tags ``group``,
``curriculum``, ``method``, ``seed`` in the experiment ``--track-project``), with the
run's settings as its config/params. The tracked runs' ids are kept in
``RUN_DIR/tracking.json``, so a resumed run goes on logging to the same ones. The usual
environment variables apply (``WANDB_MODE=offline``, ``WANDB_DIR``: W&B's files go there,
else into the run directory; ``MLFLOW_TRACKING_URI``). Without ``MLFLOW_TRACKING_URI``,
MLflow logs to a local file store in the run directory, ``RUN_DIR/mlruns`` (offline;
``mlflow ui --backend-store-uri RUN_DIR/mlruns``): MLflow 3's own default, a SQLite
database in the working directory, needs SQLAlchemy for its model registry and its file
store needs ``MLFLOW_ALLOW_FILE_STORE=true``, which telapa sets for that store only.

After a resume TensorBoard hides the events of the killed segment past the checkpoint
(``purge_step``); W&B drops points of a resumed segment at steps it has already seen;
MLflow, which cannot delete a point, keeps the killed segment's points past the
checkpoint and the resumed segment logs only the points (key, step) the run does not
hold yet (`MLflowSink.logged`), so no step is logged twice.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from telapa.continual.rundir import MLFLOW_DIR, TB_DIR, TRACKING_FILE
from telapa.io import read_json, write_json_atomic

TRACKERS = ("wandb", "mlflow")
"""External trackers ``--track`` accepts (TensorBoard is always on)."""


class TrackingError(RuntimeError):
    """A tracker cannot be used (its package is missing, or it refused the run)."""


@dataclass(frozen=True)
class Tracking:
    """Which external trackers a run logs to (``telapa run --track``)."""

    trackers: tuple[str, ...] = ()
    project: str = "telapa"
    """The W&B project and the MLflow experiment."""

    def __post_init__(self) -> None:
        unknown = [t for t in self.trackers if t not in TRACKERS]
        if unknown:
            raise TrackingError(f"unknown tracker(s) {unknown}; available: "
                                f"{', '.join(TRACKERS)}")

    def check(self) -> None:
        """`TrackingError` unless every requested tracker's package imports (checked
        before any work: ``pip install 'telapa[tracking]'``)."""
        for name in self.trackers:
            _import(name)
        if "mlflow" in self.trackers and (problem := file_store_problem()) is not None:
            raise TrackingError(problem)


def file_store_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why MLflow will refuse the store ``MLFLOW_TRACKING_URI`` names (None: it will
    not): a file store (``file:`` URI or a plain path) without
    ``MLFLOW_ALLOW_FILE_STORE=true``, which MLflow 3 requires of a file store (its own
    message, raised only when the first run is opened, after the run directory was
    made, asks to migrate an ``./mlruns`` the user never named). The run directory's own
    store (no ``MLFLOW_TRACKING_URI``) is telapa's, which sets the variable for it."""
    environ = os.environ if environ is None else environ
    uri = environ.get("MLFLOW_TRACKING_URI", "")
    if not uri or urlsplit(uri).scheme not in ("", "file"):
        return None
    try:
        from mlflow.environment_variables import MLFLOW_ALLOW_FILE_STORE  # noqa: F401
    except ImportError:  # an MLflow without the refusal
        return None
    if environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1"):
        return None  # as MLflow reads it
    from importlib.metadata import PackageNotFoundError, version

    try:
        which = f"MLflow {version('mlflow-skinny')}"
    except PackageNotFoundError:
        which = "this MLflow"
    return (f"--track mlflow: MLFLOW_TRACKING_URI={uri} is an MLflow file store, which "
            f"{which} refuses unless MLFLOW_ALLOW_FILE_STORE=true is set: set it to log "
            "there, or unset MLFLOW_TRACKING_URI to log to each run directory's own store "
            "(RUN_DIR/mlruns), or point it at a tracking server (http://HOST:PORT)")


def _import(name: str):
    module = {"wandb": "wandb", "mlflow": "mlflow"}[name]
    try:
        return __import__(module)
    except ImportError as err:
        raise TrackingError(f"--track {name} needs the {module} package ({err}); install "
                            "it with pip install 'telapa[tracking]'") from None


class Sink(Protocol):
    """Where scalars go: ``log`` many at one step, ``close`` at the end."""

    def log(self, values: Mapping[str, float], step: int) -> None: ...
    def close(self, status: str) -> None: ...


class TensorBoardSink:
    """TensorBoard event files under ``folder`` (tensorboardX, as ``telapa train``)."""

    def __init__(self, folder: Path, purge_step: int | None = None):
        from tensorboardX import SummaryWriter

        # a suffix that grows with time: two segments started within one second (a quick
        # resume) neither share a file nor load in the wrong order (TensorBoard sorts names)
        self.writer = SummaryWriter(str(folder), purge_step=purge_step, flush_secs=30,
                                    filename_suffix=f".{time.time_ns()}")

    def log(self, values: Mapping[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self, status: str) -> None:
        self.writer.close()


class WandbSink:
    """One W&B run (resumed by id when ``run_id`` is given)."""

    def __init__(self, *, project: str, group: str, name: str, job_type: str,
                 config: dict[str, Any], folder: Path, run_id: str | None = None):
        wandb = _import("wandb")
        self.run = wandb.init(
            project=project, group=group, name=name, job_type=job_type, config=config,
            dir=os.environ.get("WANDB_DIR") or str(folder), id=run_id,
            resume="allow" if run_id else None, reinit="create_new",
            settings=wandb.Settings(console="off", quiet=True),
        )
        self.id = self.run.id

    def log(self, values: Mapping[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "complete" else 1)


_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")
IDENTITY_FIELDS = frozenset({"index", "slot", "source", "tag", "version"})
"""Fields of method log events that say which elite/archive was meant, not how much."""


def tracker_key(key: str) -> str:
    """A scalar name every tracker accepts (MLflow's set is the narrowest): a visit tag's
    prime as ``p``, as in the run directory's file names (``sr/A'`` -> ``sr/Ap``), any
    other character outside ``[A-Za-z0-9_-. /]`` as ``_``."""
    return _KEY.sub("_", key.replace("'", "p"))


class MLflowSink:
    """One MLflow run, through `mlflow.tracking.MlflowClient` (so that several runs of
    one process, a batch of seeds, log side by side)."""

    def __init__(self, *, experiment: str, name: str, tags: dict[str, str],
                 params: dict[str, str], tracking_uri: str | None = None,
                 run_id: str | None = None, folder: Path | None = None,
                 resume_step: int | None = None, resume_ms: int | None = None):
        _import("mlflow")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        if tracking_uri is None and not os.environ.get("MLFLOW_TRACKING_URI") and folder:
            tracking_uri = local_mlflow_uri(folder)
        check_reachable(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", ""))
        registry = tracking_uri if tracking_uri and tracking_uri.startswith("file:") else None
        if registry is not None:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=registry)
        self.tracking_uri = self.client.tracking_uri
        if run_id is None:
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = (found.experiment_id if found is not None
                             else self.client.create_experiment(experiment))
            run = self.client.create_run(experiment_id, run_name=name, tags=tags)
            run_id = run.info.run_id
            self.client.log_batch(run_id, params=[Param(k, v[:6000])
                                                  for k, v in params.items()])
        else:
            self.client.update_run(run_id, status="RUNNING")
        self.id = run_id
        self.floor_ms = 0
        """The least timestamp of the next point (`mark`)."""
        self.logged: Counter[tuple[str, int]] = (
            Counter() if run_id is None or resume_step is None
            else self._logged_after(resume_step, resume_ms))
        """Points (key, step) the run holds from after the checkpoint a resume starts
        from, each as often as it holds it: a killed segment logged them, and the resumed
        segment, which logs the same again, does not log them twice (`log`)."""

    def _logged_after(self, step: int, ms: int | None) -> Counter[tuple[str, int]]:
        """How many points of each (key, step) the MLflow run holds from after the
        checkpoint at global step ``step``, marked at ``ms`` (`mark`; None: a checkpoint
        without a mark): past ``step``, or at ``step`` with a later timestamp."""
        counts: Counter[tuple[str, int]] = Counter()
        for key in self.client.get_run(self.id).data.metrics:
            for point in self.client.get_metric_history(self.id, key):
                if point.step > step or (point.step == step and ms is not None
                                         and point.timestamp > ms):
                    counts[(key, point.step)] += 1
        return counts

    def mark(self, ms: int) -> None:
        """Points logged from now on get timestamps after ``ms`` (a checkpoint's mark)."""
        self.floor_ms = max(self.floor_ms, ms + 1)

    def log(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = max(int(time.time() * 1000), self.floor_ms)
        metrics = []
        for k, v in values.items():
            if self.logged[(k, step)] > 0:  # the killed segment logged it (a resume)
                self.logged[(k, step)] -= 1
                continue
            metrics.append(Metric(k, float(v), now, step))
        for i in range(0, len(metrics), 1000):  # MLflow's batch limit
            self.client.log_batch(self.id, metrics=metrics[i:i + 1000])

    def close(self, status: str) -> None:
        self.client.set_terminated(self.id, status="FINISHED" if status == "complete"
                                   else "KILLED")


def local_mlflow_uri(folder: Path) -> str:
    """The ``file:`` URI of ``folder``'s local MLflow store (`MLFLOW_DIR`)."""
    return (Path(folder).resolve() / MLFLOW_DIR).as_uri()


REACH_TIMEOUT_S = 5.0
"""How long `check_reachable` waits for an MLflow server to accept a connection."""


def check_reachable(uri: str, *, timeout: float = REACH_TIMEOUT_S) -> None:
    """`TrackingError` unless the MLflow server of an ``http(s)://`` ``uri`` accepts a
    TCP connection within ``timeout`` seconds (MLflow itself retries for minutes, in
    silence, before it fails); other URIs (a file store) pass."""
    parsed = urlsplit(uri)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
    except OSError as err:
        raise TrackingError(f"--track mlflow: the MLflow server at {uri} is not reachable "
                            f"({err.strerror or err}); start it, or set "
                            "MLFLOW_TRACKING_URI to one that is") from None


def _reopened_uri(known: dict[str, Any], folder: Path) -> str | None:
    """The tracking URI a resumed run's MLflow sink reopens: its own run directory's
    store where ``tracking.json`` says it logged there (``"store": "run directory"``,
    wherever the run has moved since), else the URI it names. A record written before
    the store was recorded by place names its absolute ``file:`` URI; one that no longer
    exists, of a store named `MLFLOW_DIR`, is read as the moved run's own."""
    if known.get("store") == "run directory":
        return local_mlflow_uri(folder)
    uri = known.get("tracking_uri")
    if isinstance(uri, str) and uri.startswith("file:"):
        old = Path(urlsplit(uri).path)
        if old.name == MLFLOW_DIR and not old.is_dir() and (folder / MLFLOW_DIR).is_dir():
            return local_mlflow_uri(folder)
    return uri


def _finite(values: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def _flat(data: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(data, dict):
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): json.dumps(data)}


@dataclass
class RunTracker:
    """The sinks of one continual run; the runner reports to it (see the module
    docstring for what is logged). Open with `RunTracker.open`."""

    sinks: list[Any] = field(default_factory=list)
    closed: bool = False
    floor_ms: int = 0
    """The least time of the next `mark` (the points logged since the last one may carry
    its time plus one)."""

    @classmethod
    def open(cls, folder: Path, *, spec: dict[str, Any], config: dict[str, Any],
             tracking: Tracking | None, resume_step: int | None = None,
             resume_ms: int | None = None) -> RunTracker:
        """TensorBoard in ``folder/tb``, plus the trackers of ``tracking`` and those
        ``folder/tracking.json`` names (a resumed run goes on in the same tracked runs).
        ``spec``: curriculum, method, seed, preset, overrides; ``resume_step``: the
        global step of the checkpoint a resumed run starts from, ``resume_ms`` its
        `mark`."""
        tracking = tracking or Tracking()
        record_path = folder / TRACKING_FILE
        record = read_json(record_path, "tracking record") if record_path.exists() else {}
        wanted = list(dict.fromkeys([*record, *tracking.trackers]))
        sinks: list[Any] = [TensorBoardSink(
            folder / TB_DIR, None if resume_step is None else resume_step + 1)]
        try:
            for name in wanted:
                known = record.get(name, {})
                try:
                    sink, record[name] = cls._open_sink(name, known, tracking, folder, spec,
                                                        config, resume_step, resume_ms)
                except (ImportError, TrackingError):
                    raise
                except Exception as err:  # noqa: BLE001 - a tracker's own errors vary
                    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                    raise TrackingError(f"--track {name}: cannot open a tracked run for "
                                        f"{folder}: {type(err).__name__}: {first}") from err
                sinks.append(sink)
        except BaseException:
            for sink in sinks:
                sink.close("failed")
            raise
        if wanted:
            write_json_atomic(record_path, record)
        return cls(sinks)

    @staticmethod
    def _open_sink(name: str, known: dict[str, Any], tracking: Tracking, folder: Path,
                   spec: dict[str, Any], config: dict[str, Any], resume_step: int | None,
                   resume_ms: int | None = None) -> tuple[Any, dict]:
        """The sink ``name`` (resumed from ``known``, its tracking.json entry, at
        ``resume_step``) and the entry that reopens it."""
        group = f"{spec['curriculum']}-{spec['method']}"
        project = known.get("project", tracking.project)
        if name == "wandb":
            sink = WandbSink(project=project, group=group, name=folder.name,
                             job_type=str(spec["method"]), config={**spec, "settings": config},
                             folder=folder, run_id=known.get("id"))
            return sink, {"id": sink.id, "project": project}
        sink = MLflowSink(
            experiment=project, name=folder.name,
            tags={"group": group, **{k: str(spec[k]) for k in ("curriculum", "method", "seed")}},
            params={**{k: json.dumps(v) for k, v in spec.items()}, **_flat(config, "settings.")},
            tracking_uri=_reopened_uri(known, folder), run_id=known.get("id"), folder=folder,
            resume_step=resume_step, resume_ms=resume_ms)
        if sink.tracking_uri == local_mlflow_uri(folder):  # by place: the run may move
            return sink, {"id": sink.id, "project": project, "store": "run directory"}
        return sink, {"id": sink.id, "project": project, "tracking_uri": sink.tracking_uri}

    def log(self, values: Mapping[str, Any], step: int) -> None:
        """Logs the finite numbers of ``values`` at ``step`` to every sink."""
        if self.closed:
            return
        clean = {tracker_key(k): v for k, v in _finite(values).items()}
        if clean:
            for sink in self.sinks:
                sink.log(clean, int(step))

    def evaluation(self, tag: str, sr: float, mean_return: float, step: int) -> None:
        self.log({f"sr/{tag}": sr, f"return/{tag}": mean_return}, step)

    def training(self, rows: Sequence[Mapping[str, Any]], steps: Sequence[int]) -> None:
        """PPO iteration metrics ``rows``, row i at global step ``steps[i]``."""
        for row, step in zip(rows, steps, strict=True):
            self.log({f"train/{k}": v for k, v in row.items() if k != "step"}, step)

    def phase(self, timers: Mapping[str, float], events: Sequence[Mapping[str, Any]],
              step: int) -> None:
        """After a phase: cumulative seconds per phase and the method's new events."""
        values = {f"time/{k}": v for k, v in timers.items()}
        for event in events:
            name = event.get("event", "event")
            values.update({f"method/{name}/{k}": v for k, v in event.items()
                           if k not in ("event", "visit") and k not in IDENTITY_FIELDS
                           and not k.endswith("_id")})
        self.log(values, step)

    def flush(self) -> None:
        for sink in self.sinks:
            if hasattr(sink, "flush"):
                sink.flush()

    def mark(self) -> int:
        """The time (ms since the epoch) a checkpoint is about to be written, everything
        logged so far being older: what is logged from now on gets later timestamps
        (MLflow's points), so a resume from that checkpoint tells the points a killed
        segment logged after it (`MLflowSink.logged`) from those at the same step
        before it."""
        ms = max(int(time.time() * 1000), self.floor_ms)  # after every earlier point
        self.floor_ms = ms + 1
        for sink in self.sinks:
            if hasattr(sink, "mark"):
                sink.mark(ms)
        return ms

    def close(self, status: str) -> None:
        """Closes every sink once (``status``: ``complete``, or how the run stopped). A
        sink that cannot close (TensorBoard flushing its buffer onto a full disk) does not
        keep the others open; its error is raised after them when the run completed, and
        dropped when it stopped: then the stop's own cause (an error naming its file, an
        interrupt) is what the user must see, not the tracker's echo of it."""
        if self.closed:
            return
        self.closed = True
        failed: Exception | None = None
        for sink in self.sinks:
            try:
                sink.close(status)
            except Exception as err:  # noqa: BLE001 - a tracker's own errors vary
                failed = failed or err
        if failed is not None and status == "complete":
            raise failed


__all__ = ["TRACKERS", "MLflowSink", "RunTracker", "TensorBoardSink", "Tracking",
           "TrackingError", "WandbSink", "file_store_problem", "local_mlflow_uri",
           "tracker_key"]
