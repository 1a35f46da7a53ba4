"""How the supervisor's signals reach a worker and what it started (real processes).

SIGTERM asks the worker to stop and goes to it alone, so that it stops its children in order
(the Spark sink's JVM is stopped by the worker after its last write; sent to the whole group,
the JVM stopped itself under a write and worker.log had a Py4J traceback at every clean stop).
SIGKILL, the forced stop, takes the whole process group."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest
from testutil import wait_until

from cluster_state.records import LocalAssignment
from daemons.process_start import process_start
from daemons.supervisor.launcher import signal_worker
from daemons.supervisor.worker_state import WorkerRecord

pytestmark = [pytest.mark.timeout(60), pytest.mark.cluster]  # real processes

# A "worker" that starts a child in its group; each notes a SIGTERM in a file and goes on.
WORKER = """
import signal, subprocess, sys, time
out = sys.argv[1]
def noted(who):
    def handler(sig, frame):
        with open(out, "a") as f:
            f.write(who + "\\n")
    return handler
signal.signal(signal.SIGTERM, noted("worker"))
child = subprocess.Popen([sys.executable, "-c", CHILD, out])
print(child.pid, flush=True)
while True:
    time.sleep(0.05)
"""
CHILD = """
import signal, sys, time
out = sys.argv[1]
def handler(sig, frame):
    with open(out, "a") as f:
        f.write("child\\n")
signal.signal(signal.SIGTERM, handler)
open(out + ".child-ready", "w").close()
while True:
    time.sleep(0.05)
"""


def test_sigterm_reaches_the_worker_alone_and_sigkill_its_whole_group(tmp_path):
    out = tmp_path / "signals"
    out.touch()
    code = f"CHILD = {CHILD!r}\n" + WORKER
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    child_pid = None
    try:
        child_pid = int(proc.stdout.readline())  # the worker's handler is installed before
        wait_until((tmp_path / "signals.child-ready").exists, 10, "the child's SIGTERM handler installed")
        record = WorkerRecord("w1", 6700, LocalAssignment("t-1-1", ((1, 1),)), launch_time_secs=time.time() - 1,
                              pid=proc.pid, pid_start=process_start(proc.pid))

        assert signal_worker(record, signal.SIGTERM)
        wait_until(lambda: "worker" in out.read_text(), 10, "the worker to note its SIGTERM")
        time.sleep(0.3)  # a signal to the group reaches the child at the same time: give it time to show
        assert out.read_text().split() == ["worker"], "SIGTERM reached the worker's child too"

        assert signal_worker(record, signal.SIGKILL)
        wait_until(lambda: proc.poll() is not None, 10, "the worker killed")
        wait_until(lambda: not psutil.pid_exists(child_pid) or
                   psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE, 10, "its child killed with it")
    finally:
        for pid in (proc.pid, child_pid):
            if pid is not None:
                try:
                    psutil.Process(pid).kill()
                except psutil.NoSuchProcess:
                    pass
        proc.wait(10)
