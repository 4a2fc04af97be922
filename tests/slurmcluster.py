"""A real single-node Slurm cluster for the tests and the benchmark: munged, slurmctld and slurmd on loopback.

Debian's ``slurm-wlm`` (22.05) and ``munge``, configured in a fresh folder of
their own: a munge key and socket, a ``slurm.conf`` with free ports, state,
spool, logs and pid files there, one node (this machine, under the name
``lmnode``) with all its cores, one partition. Nothing under /etc is read or
written; clients find it through ``SLURM_CONF`` (`LocalSlurm.env`).

    with LocalSlurm() as cluster:                # or LocalSlurm.unavailable() -> why not
        subprocess.run(["sbatch", ...], env=cluster.env)
        cluster.wait_idle()

Jobs run as the user who submits them, which needs root (slurmd starts jobs
as their owner): where this is not root, or the packages are missing,
`unavailable` says so and the tests skip with that reason. ``make test``
installs the packages (tools/ensure-system-deps.sh).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
NODE = "lmnode"


def unavailable() -> str | None:
    """Why a local Slurm cannot start here, or None."""
    if os.geteuid() != 0:
        return "a local Slurm needs root (slurmd starts each job as its owner); run the tests as root"
    missing = [name for name in DAEMONS + CLIENTS if shutil.which(name) is None
               and not Path(f"/usr/sbin/{name}").exists()]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing): `apt-get install slurmctld slurmd "
                f"slurm-client munge` (make test does it where it runs as root)")
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _which(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class LocalSlurm:
    def __init__(self, cpus: int | None = None):
        self.cpus = cpus or os.cpu_count() or 1
        self.folder: Path | None = None
        self.env: dict = {}

    def __enter__(self) -> "LocalSlurm":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 60) -> None:
        why = unavailable()
        if why:
            raise RuntimeError(why)
        # Short, and outside pytest's tmp_path: a Unix socket's path must fit in 108 bytes.
        self.folder = f = Path(tempfile.mkdtemp(prefix="lmslurm-", dir="/tmp"))
        for sub in ("state", "spool", "log"):
            (f / sub).mkdir()
        (f / "munge.key").write_bytes(os.urandom(1024))
        (f / "munge.key").chmod(0o600)
        ctld_port, slurmd_port = _free_ports(2)
        (f / "slurm.conf").write_text("\n".join([
            "ClusterName=lmcourse-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={f / 'munge.sock'}",
            "CredType=cred/munge",
            f"StateSaveLocation={f / 'state'}",
            f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}",
            f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
            # No cgroups in a container: track processes by their parentage, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",  # cores are the resource: several tasks share the node
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=600",  # scontrol remembers finished tasks' states for the tests
            "KillWait=5",
            f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname().split('.')[0]} "
            f"CPUs={self.cpus} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
        self.env = dict(os.environ, SLURM_CONF=str(f / "slurm.conf"))
        subprocess.run([_which("munged"), "--force", f"--socket={f / 'munge.sock'}", f"--key-file={f / 'munge.key'}",
                        f"--pid-file={f / 'munged.pid'}", f"--log-file={f / 'log' / 'munged.log'}",
                        f"--seed-file={f / 'munged.seed'}"], check=True, capture_output=True)
        subprocess.run([_which("slurmctld"), "-f", str(f / "slurm.conf")], check=True, capture_output=True,
                       env=self.env)
        subprocess.run([_which("slurmd"), "-f", str(f / "slurm.conf"), "-N", NODE], check=True, capture_output=True,
                       env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            cp = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env)
            if cp.returncode == 0 and cp.stdout.strip() in ("idle", "mixed", "allocated"):
                return
            time.sleep(0.3)
        logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in sorted((f / "log").glob("*.log")))
        self.stop()
        raise RuntimeError(f"the local Slurm did not come up within {timeout:.0f} s:\n{logs}")

    def run(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, **kw)

    def jobs(self) -> list[str]:
        """Job ids (array tasks one per line) still queued or running."""
        cp = self.run("squeue", "-h", "-r", "-o", "%i")
        return cp.stdout.split()

    def wait_idle(self, timeout: float = 150) -> None:
        deadline = time.time() + timeout
        while self.jobs():
            if time.time() > deadline:
                raise TimeoutError(f"Slurm jobs still queued after {timeout:.0f} s: {self.jobs()}")
            time.sleep(0.5)

    def log(self, name: str) -> str:
        return (self.folder / "log" / f"{name}.log").read_text(errors="replace") if self.folder else ""

    def stop(self) -> None:
        if self.folder is None:
            return
        if self.env:
            self.run("scancel", "--user=root", "--full", timeout=30)
        for name in ("slurmd", "slurmctld", "munged"):
            try:
                pid = int((self.folder / f"{name}.pid").read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
