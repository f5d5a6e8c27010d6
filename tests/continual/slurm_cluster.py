"""A one-node Slurm cluster for the tests (`OneNodeSlurm`): munged, slurmctld and slurmd of
Debian's ``slurm-wlm`` and ``munge``, run as root from a temporary folder with their own
``slurm.conf`` (``SLURM_CONF``), ports and munge socket, so that nothing of the machine's
own configuration is read or changed. No cgroups: ``proctrack/linuxproc`` follows a job's
processes by their parent, ``task/none`` binds nothing, and no accounting daemon runs
(``squeue`` tells a job's state while it is known to slurmctld, ``MinJobAge``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
"""What `OneNodeSlurm` starts (Debian: /usr/sbin/munged, /usr/sbin/slurmctld, slurmd)."""
PARTITION = "tiny"


def missing() -> str | None:
    """Why the cluster cannot start here (None when it can): a program or root missing."""
    for program in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo"):
        if shutil.which(program, path=os.environ.get("PATH", "") + ":/usr/sbin") is None:
            return f"{program} is missing (Debian: apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root"
    return None


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 2048


class OneNodeSlurm:
    """munged, slurmctld and slurmd for this host, from ``root`` (a short temporary folder:
    socket paths are limited to 108 bytes). `start` waits until ``sinfo`` shows the node
    idle; `stop` ends every daemon it started (SIGTERM, then SIGKILL) and the jobs left."""

    def __init__(self, root: Path):
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.socket = root / "munge" / "munge.socket.2"
        self.processes: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def write_conf(self) -> None:
        ctld, slurmd = _free_ports(2)
        cpus = os.cpu_count() or 1
        memory = max(512, _memory_mb() - 1024)
        root = self.root
        for folder in ("state", "spool", "munge", "log"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(f"""\
ClusterName=telapatest
SlurmctldHost={self.host}
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
JobRequeue=1
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={self.host} CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout: float = 60.0) -> None:
        self.write_conf()
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", ["munged", "-F", "--force", f"--key-file={key}",
                               f"--socket={self.socket}",
                               f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                               f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                               f"--log-file={self.root / 'log' / 'munged.log'}"])
        self._wait(lambda: self.socket.exists(), timeout, "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)])
        self._wait(self.idle, timeout, f"node {self.host} idle in sinfo")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "w")  # noqa: SIM115 - the daemon's
        self.processes[name] = subprocess.Popen(
            argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [n for n, p in self.processes.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"waiting for {what}: "
                                   + (f"{', '.join(dead)} exited; " if dead else "timed out; ")
                                   + self.logs())
            time.sleep(0.3)

    def idle(self) -> bool:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                              capture_output=True, text=True, timeout=30)
        return done.returncode == 0 and done.stdout.strip() == "idle"

    def logs(self, tail: int = 2000) -> str:
        texts = []
        for path in sorted((self.root / "log").glob("*")):
            texts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(texts)

    def stop(self) -> None:
        """Cancels the jobs left, then ends slurmd, slurmctld and munged (in that order)."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--full", f"--partition={PARTITION}"], env=self.env,
                           capture_output=True, timeout=30, check=False)
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is None:
                continue
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
