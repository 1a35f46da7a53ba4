"""Driving `storm-py dev-cluster` / `dev-zookeeper` as real processes, as a user would."""

from __future__ import annotations

import contextlib
import functools
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import testutil
import yaml
from testutil import ROOT, stop_process, wait_until

from cluster_state.config import default_config

ENV = testutil.CLI_ENV
READY_LINE = "Ctrl-C stops everything"
# The CLI as a process; here the exit code is checked (0) unless the caller says otherwise.
storm_py = functools.partial(testutil.storm_py, check=0)


class DevClusterProcess:
    """`storm-py dev-cluster` in the background; its output goes to a file we poll."""

    def __init__(self, base: Path, *args: str):
        self.base = base
        self.out_path = base.parent / f"{base.name}.out"
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "dev-cluster", "--dir", str(base), *args],
                                     cwd=ROOT, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, env=ENV)

    def output(self) -> str:
        return self.out_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout: float = 90) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"dev-cluster exited {self.proc.returncode}:\n{self.output()}")
            return READY_LINE in self.output()
        wait_until(ready, timeout=timeout, message=lambda: f"the dev cluster to be ready:\n{self.output()}",
                   interval=0.2)

    @property
    def conf_dir(self) -> Path:
        return self.base / "conf"

    def conf(self) -> dict[str, Any]:
        """The generated client conf over the packaged defaults (what a client command sees)."""
        return {**default_config(), **yaml.safe_load((self.conf_dir / "storm.yaml").read_text())}

    def supervisor_confs(self) -> list[dict[str, Any]]:
        return [yaml.safe_load(p.read_text()) for p in sorted(self.conf_dir.glob("supervisor-*/storm.yaml"))]

    def child_pids(self) -> dict[str, int]:
        """name -> pid from D/pids (zookeeper, nimbus, supervisor-N, dev-cluster)."""
        return {p.stem: int(p.read_text()) for p in (self.base / "pids").glob("*.pid")}

    def stop(self, timeout: float = 60, sig: int = signal.SIGTERM) -> int:
        try:
            return stop_process(self.proc, timeout, lambda: f"dev-cluster (output:\n{self.output()}\n)", sig)
        finally:
            self._out.close()

    def kill_leftovers(self) -> list[int]:
        """Last resort for a failed test: SIGKILL every process that names this cluster's dir."""
        left = processes_under(self.base)
        for proc in left:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(left, timeout=10)
        return [p.pid for p in left]


@contextlib.contextmanager
def running_dev_cluster(base: Path, *args: str):
    """`storm-py dev-cluster ARGS` until the block ends; then it must exit 0 leaving nothing behind."""
    cluster = DevClusterProcess(base, *args)
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        code = cluster.stop()
        leftovers = cluster.kill_leftovers()
        assert not leftovers, f"processes left behind by dev-cluster: {leftovers}"
        assert code == 0, cluster.output()


def processes_under(base: Path) -> list[psutil.Process]:
    """Live processes whose command line names a path under `base` (daemons, workers, ZooKeeper)."""
    prefix = str(base)
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(prefix in arg for arg in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def submit(conf_dir: Path, file: Path, name: str, *conf: str, timeout: float = 120) -> str:
    """`storm-py jar submit FILE --name NAME [-c KEY=VALUE ...]`; returns the topology id."""
    args = [a for kv in conf for a in ("-c", kv)]
    out = storm_py("jar", "submit", str(file), "--name", name, *args, conf_dir=conf_dir, timeout=timeout)
    prefix = f"submitted topology {name} as "
    return next(ln for ln in out.stdout.splitlines() if ln.startswith(prefix)).rsplit(" ", 1)[1]


def status_in_list(conf_dir: Path, name: str) -> str | None:
    """The STATUS column of `storm-py list` for the topology NAME (None when not listed)."""
    out = storm_py("list", conf_dir=conf_dir)
    rows = [ln.split() for ln in out.stdout.splitlines()[1:]]
    return next((r[2] for r in rows if r and r[0] == name), None)
