"""Run the numbered word count on a DevCluster and hit it with faults; shared by the fault test
(tests/devcluster/test_faults.py) and bench/chaos.py. Not part of the topology.

Faults (one kind each; `inject` returns once the fault is done, restarts included):
  worker      SIGKILL the worker process hosting the sink (else the spout); its supervisor
              relaunches it
  supervisor  SIGKILL a supervisor, start it again (same dir and ports: it re-adopts its workers)
  nimbus      stop Nimbus and start it again
  zookeeper   stop ZooKeeper and start it again (same port, same data dir)
  redis       SIGKILL the cluster's Redis (the state provider of an exactly-once run) and start
              it again (same port, same data: its append-only file is synced at every write)

Progress is read from outside, from the spout tasks' committed offsets (numbered_offsets.py).
A fault's recovery time runs from the fault until every message emitted before it is committed
(acked, so in the table): lost tuples replayed, restarted components caught up.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numbered_offsets as O

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TOPOLOGY = HERE / "topology.py"
FAULT_KINDS = ("worker", "supervisor", "nimbus", "zookeeper")
EXACTLY_ONCE_FAULTS = (*FAULT_KINDS, "redis")  # with the cluster's Redis as the state provider
POLL_SECS = 0.1


@dataclass
class Fault:
    kind: str
    started: float                       # time.monotonic() when it was injected
    marks: dict[int, int]                # spout task index -> emitted at the fault
    committed_at_fault: int
    detail: str = ""
    done_secs: float | None = None       # how long the injection itself took (restarts)
    recovered_secs: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "committed_at_fault": self.committed_at_fault,
                "inject_secs": _round(self.done_secs), "recovery_secs": _round(self.recovered_secs)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def recovered(marks: dict[int, int], offsets: list[O.Offset]) -> bool:
    """Whether every spout task committed all it had emitted at the fault (pure)."""
    committed = {o.index: o.committed for o in offsets}
    return all(committed.get(index, 0) >= mark for index, mark in marks.items())


@dataclass
class NumberedRun:
    """The numbered word count submitted as `name` to `cluster` (a started DevCluster)."""

    cluster: Any
    work_dir: Path
    messages: int
    name: str = "numbered"
    conf: dict[str, Any] = field(default_factory=dict)   # more -c keys (message timeout, rate, ...)
    faults: list[Fault] = field(default_factory=list)
    storm_id: str | None = None
    _turns: dict[str, int] = field(default_factory=dict)

    @property
    def table(self) -> Path:
        return self.work_dir / "table"

    @property
    def offset_dir(self) -> Path:
        return self.work_dir / "offsets"

    def _cli(self, *args: str, timeout: float = 120) -> str:
        """`storm-py ARGS`; a Nimbus that answers it has lost ZooKeeper for now (an outage this
        harness causes, or its session still suspended after one: "nothing was done; try again")
        is asked again, within `timeout`."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        deadline = time.monotonic() + timeout
        while True:
            left = max(1.0, deadline - time.monotonic())
            out = subprocess.run([sys.executable, "-m", "daemons.cli", *args, "--conf-dir", str(self.cluster.conf_dir)],
                                 cwd=ROOT, capture_output=True, text=True, timeout=left, env=env)
            if out.returncode == 0:
                return out.stdout
            if "try again once ZooKeeper is back" not in out.stderr or time.monotonic() + 1.0 >= deadline:
                raise RuntimeError(f"storm-py {' '.join(args)} exited {out.returncode}: "
                                   f"{out.stderr.strip() or out.stdout}")
            time.sleep(1.0)

    def submit(self) -> str:
        conf = {"numbered.messages": self.messages, "numbered.offset.dir": str(self.offset_dir),
                "numbered.table": str(self.table), **self.conf}
        overrides = [a for k, v in conf.items() for a in ("-c", f"{k}={v}")]
        out = self._cli("jar", "submit", str(TOPOLOGY), "--name", self.name, *overrides)
        line = next(ln for ln in out.splitlines() if ln.startswith(f"submitted topology {self.name} as "))
        self.storm_id = line.rsplit(" ", 1)[1]
        return self.storm_id

    def kill_topology(self) -> None:
        self._cli("kill", self.name, "-w", "0")

    # -- progress ---------------------------------------------------------------------------

    def offsets(self) -> list[O.Offset]:
        return O.read_all(self.offset_dir) if self.offset_dir.is_dir() else []

    def committed(self) -> int:
        return O.committed_total(self.offsets())

    def done(self) -> bool:
        return O.all_committed(self.offsets(), self.messages)

    def poll(self) -> list[O.Offset]:
        """Read the offsets once and time the faults that recovered since the last poll."""
        offsets = self.offsets()
        now = time.monotonic()
        for fault in self.faults:
            if fault.recovered_secs is None and fault.done_secs is not None and recovered(fault.marks, offsets):
                fault.recovered_secs = now - fault.started
        return offsets

    def wait(self, predicate, timeout: float, what: str) -> None:
        """Poll (timing recoveries meanwhile) until `predicate()`; raise naming `what` and the
        progress after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not within {timeout:g}s: {self.describe()}")
            time.sleep(POLL_SECS)  # poll interval, bounded by the deadline

    def describe(self) -> str:
        offsets = self.offsets()
        per_task = ", ".join(f"task {o.index}: {o.committed}/{o.count} (emitted {o.emitted})" for o in offsets)
        return (f"{O.committed_total(offsets)} of {self.messages} messages committed ({per_task or 'no offsets yet'}); "
                f"faults: {[f.as_dict() for f in self.faults]}; logs: {self.cluster.log_dir}")

    # -- faults ---------------------------------------------------------------------------

    def ports_of(self) -> dict[str, set[int]]:
        """Component -> the slot ports of its executors (Nimbus's topology_info)."""
        from daemons.rpc.client import client_from_conf

        client = client_from_conf(self.cluster.conf)
        try:
            info = client.call("topology_info", name=self.name)
        finally:
            client.close()
        return {c["id"]: {e["port"] for e in c["executors"] if e["port"] is not None} for c in info["components"]}

    def _supervisor_of(self, port: int) -> int:
        for i, child in enumerate(self.cluster.supervisors, start=1):
            if port in child.extra["ports"]:
                return i
        raise ValueError(f"no supervisor has slot {port}")

    def inject(self, kind: str, *, target: int | None = None) -> Fault:
        """Inject one fault now. `target`: the worker's port (worker) or the supervisor's index
        (supervisor); by default the sink's worker / the sink's supervisor, alternating with the
        other one on every second call."""
        offsets = self.offsets()
        fault = Fault(kind, time.monotonic(), {o.index: o.emitted for o in offsets}, O.committed_total(offsets))
        self.faults.append(fault)
        cluster = self.cluster
        if kind == "worker":
            port = target if target is not None else self._pick_port(kind)
            fault.detail = f"port {port} pid {cluster.kill_worker(port)}"
        elif kind == "supervisor":
            index = target if target is not None else self._supervisor_of(self._pick_port(kind))
            cluster.kill_supervisor(index)
            fault.detail = f"supervisor-{index}"
            cluster.start_supervisor(index)
        elif kind == "nimbus":
            cluster.restart_nimbus()
        elif kind == "zookeeper":
            cluster.restart_zookeeper()
        elif kind == "redis":
            cluster.restart_redis(kill=True)
        else:
            raise ValueError(f"unknown fault {kind!r}; one of {EXACTLY_ONCE_FAULTS}")
        fault.done_secs = time.monotonic() - fault.started
        log.info("fault %s (%s) injected in %.1fs at %d committed", kind, fault.detail, fault.done_secs,
                 fault.committed_at_fault)
        return fault

    def _pick_port(self, kind: str) -> int:
        """The sink's worker, then the other one, in turn per fault kind (whichever exists now)."""
        live = sorted(self.cluster.worker_pids())
        if not live:
            raise RuntimeError(f"no worker running: {self.describe()}")
        try:
            sink = sorted(self.ports_of().get("store", ()))
        except Exception as exc:  # noqa: BLE001 -- Nimbus may be restarting: any worker will do
            log.info("cannot ask Nimbus where the sink runs (%s)", exc)
            sink = []
        first = [p for p in live if p in sink] + [p for p in live if p not in sink]
        turn = self._turns[kind] = self._turns.get(kind, 0) + 1
        return first[(turn - 1) % len(first)]

    def wait_recovered(self, fault: Fault, timeout: float) -> float:
        self.wait(lambda: fault.recovered_secs is not None, timeout, f"recovery from the {fault.kind} fault")
        return fault.recovered_secs

    def check_table(self, timeout: float = 600) -> dict[str, Any]:
        """check_table.py's verdict on the table (in a subprocess: a Spark of its own, or the run's
        spark.remote server)."""
        import json

        remote = ["--spark-remote", self.conf["spark.remote"]] if self.conf.get("spark.remote") else []
        out = subprocess.run([sys.executable, str(HERE / "check_table.py"), str(self.table), "--messages",
                              str(self.messages), *remote], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"check_table.py exited {out.returncode}: {out.stderr.strip()[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
