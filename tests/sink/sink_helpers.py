"""Components and polling helpers for the Spark sink tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from executor.api import Spout
from executor.sinks import _layout as L
from executor.sinks.spark import SparkSinkBolt


def poll(predicate, timeout: float = 30.0, interval: float = 0.02, message: str = "condition"):
    """Wait until predicate() is truthy; fail with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


class Probe:
    """State shared by the test and every per-task copy of a component (deepcopy returns it)."""

    def __init__(self, fail_writes: int = 0, commit_delay: float = 0.0):
        self.lock = threading.Lock()
        self.fail_writes = fail_writes
        self.commit_delay = commit_delay
        self.commits: list[tuple[str | None, list]] = []   # (batch id, rows) in commit order
        self.committed: dict = {}                           # row key (first value) -> batch id
        self.attempts = 0
        self.acked: list = []
        self.failed: list = []
        self.violations: list[str] = []
        self.queue: list = []                               # (msg id, values) for the spout to emit

    def __deepcopy__(self, memo):
        return self


class ProbedSink(SparkSinkBolt):
    """A sink whose commits are recorded (and can be slowed down or made to fail)."""

    def __init__(self, probe: Probe, path, **options):
        super().__init__(path, **options)
        self.probe = probe

    def _commit(self, table, rows):
        probe = self.probe
        with probe.lock:
            probe.attempts += 1
            fail = probe.fail_writes > 0
            if fail:
                probe.fail_writes -= 1
        if fail:
            raise OSError("injected write failure")
        if probe.commit_delay:
            time.sleep(probe.commit_delay)  # widens the window in which an early ack would show
        batch_id, rejected = super()._commit(table, rows)
        with probe.lock:
            probe.commits.append((batch_id, list(rows)))
            for row in rows:
                probe.committed[row[0]] = batch_id
        return batch_id, rejected


class ReplayingSpout(Spout):
    """Emits fed (msg_id, values) with message ids, replays failed ones; at every ack it checks
    that the message's row is already in a committed batch directory of `table`."""

    def __init__(self, probe: Probe, fields, table: str | None = None):
        self.probe = probe
        self.fields = list(fields)
        self.table = table

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def open(self, conf, context, collector):
        self.collector = collector
        self.payloads = {}

    def next_tuple(self):
        with self.probe.lock:
            if not self.probe.queue:
                return
            msg_id, values = self.probe.queue.pop(0)
        self.payloads[msg_id] = values
        self.collector.emit(values, msg_id=msg_id)

    def ack(self, msg_id):
        probe = self.probe
        with probe.lock:
            if self.table is not None:
                batch = probe.committed.get(self.payloads[msg_id][0])
                if batch is None:
                    probe.violations.append(f"{msg_id} acked before any commit of it")
                elif not os.path.isdir(os.path.join(self.table, L.batch_dir_name(batch))):
                    probe.violations.append(f"{msg_id} acked but batch {batch} is not visible")
            probe.acked.append(msg_id)

    def fail(self, msg_id):
        with self.probe.lock:
            self.probe.failed.append(msg_id)
            self.probe.queue.append((msg_id, self.payloads[msg_id]))


def feed(probe: Probe, items) -> None:
    with probe.lock:
        probe.queue.extend(items)


REPO = Path(__file__).resolve().parents[2]

_HOLD_LOCK = """
import sys, time
from pathlib import Path
from executor.sinks._layout import Staging
s = Staging(Path(sys.argv[1]), sys.argv[2])
s.open()
(s.batch_dir("b1") / "part-0.parquet").parent.mkdir()
(s.batch_dir("b1") / "part-0.parquet").write_bytes(b"PAR1 half written")
print("ready", flush=True)
time.sleep(60)
"""


def writer_process(table: Path, owner: str) -> subprocess.Popen:
    """A process that holds the staging lock of `owner` and has half-written a batch; kill it
    with SIGKILL to leave the leftovers of a writer killed mid-write."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(table), owner], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"writer process did not start: {line!r}")
    return proc


def kill_process(proc: subprocess.Popen) -> None:
    """SIGKILL a helper process (as a crash would), reap it and close its pipe."""
    proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()
