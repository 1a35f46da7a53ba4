"""The supervisor's memory sample of a worker (daemons/supervisor/launcher.py, tree_rss): the
worker's process and every process under it (a Spark JVM, a multilang subprocess), found through
/proc's children lists, as psutil finds them by scanning every process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import psutil
import pytest
from testutil import wait_until

from cluster_state.records import LocalAssignment
from daemons.supervisor.launcher import descendants, tree_rss
from daemons.supervisor.worker_state import WorkerRecord

pytestmark = [pytest.mark.timeout(60), pytest.mark.cluster]  # real processes

# A parent whose grandchild holds ~120 MB, each level waiting until stdin closes.
TREE = textwrap.dedent("""
    import subprocess, sys
    depth = int(sys.argv[1])
    if depth:
        child = subprocess.Popen([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]],
                                 stdin=subprocess.PIPE)
        sys.stdin.read()
        child.stdin.close()
        child.wait()
    else:
        held = bytearray(120 * 1024 * 1024)
        for i in range(0, len(held), 4096):
            held[i] = 1
        sys.stdin.read()
""")


def test_a_workers_tree_and_its_memory_are_found_through_proc_as_psutil_finds_them():
    top = subprocess.Popen([sys.executable, "-c", TREE, "2", TREE], stdin=subprocess.PIPE)
    try:
        def grandchild_holds_memory():
            kids = psutil.Process(top.pid).children(recursive=True)
            return len(kids) == 2 and all(k.memory_info().rss > 100 * 1024 * 1024 for k in kids[-1:])
        wait_until(grandchild_holds_memory, 30, "the grandchild to hold its 120 MB")
        assert sorted(descendants(top.pid)) == sorted(p.pid for p in psutil.Process(top.pid).children(recursive=True))
        record = WorkerRecord("w", 6700, LocalAssignment("t-1", ()), 0.0, top.pid, None)
        assert tree_rss(record) > 120 * 1024 * 1024 > psutil.Process(top.pid).memory_info().rss
        assert tree_rss(WorkerRecord("w", 6700, LocalAssignment("t-1", ()), 0.0, None)) is None
    finally:
        top.stdin.close()
        top.wait(30)
    assert descendants(top.pid) == []
