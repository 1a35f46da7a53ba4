"""Markers follow cost (a pytest plugin, loaded by tests/conftest.py).

The fast tier, `python3 -m pytest -m "not zk and not spark and not cluster and not slow"`, must
start no process and take no test longer than a few seconds. So:

- a test that uses a heavy fixture carries that fixture's markers (FIXTURE_MARKS), and one marked
  `redis` or `browser` is also `cluster` (it starts a server or a browser);
- a test that starts a process (subprocess, fork, posix_spawn) while carrying none of
  PROCESS_MARKS fails, naming the command: mark it (or the fixture that starts it);
- a test of the fast tier (none of PROCESS_MARKS) whose own body used more than SLOW_SECS of
  CPU, or ran longer than WAIT_SECS, fails, asking for the marker. This is a check of the
  markers, not of the code's speed: the limits are far above what any of them takes, and a test
  near them belongs among the slow ones. CPU, not wall time, because a parallel run on a loaded
  machine stretches the wall time (a 3 s test took 16 s in one CI run) but not the CPU.
  A test already outside the fast tier (zk, spark, cluster) is not timed: its time depends on the
  processes it starts and the machine's load (a ZooKeeper restart took 14.6 s in one CI run), and
  the tier it is in does not promise seconds.
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest

# Any of these lets a test start processes (the fast tier deselects all four).
PROCESS_MARKS = ("zk", "spark", "cluster", "slow")
# Fixture -> the markers a test using it carries, even when its module forgot them.
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    "zk_server": ("zk",), "zk_conf": ("zk",), "zk_admin": ("zk",), "zk_server_factory": ("zk",),
    "spark": ("spark",), "spark_remote": ("spark",),
    "redis_server": ("redis",), "redis_server_factory": ("redis",),
    "shared_dev_cluster": ("zk", "cluster"), "secured_dev_cluster": ("zk", "cluster"),
    "shared_dev_clusters": ("zk", "cluster"),
}
# Markers that imply `cluster`: their tests start a server or a browser.
IMPLY_CLUSTER = ("redis", "browser")
SLOW_SECS = 10.0   # CPU seconds of the test's body
WAIT_SECS = 60.0   # wall seconds: a fast-tier test that mostly waits is slow too


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            for mark in FIXTURE_MARKS.get(fixture, ()):
                if not item.get_closest_marker(mark):
                    item.add_marker(mark)
        if any(item.get_closest_marker(m) for m in IMPLY_CLUSTER) and not item.get_closest_marker("cluster"):
            item.add_marker("cluster")


class _ProcessWatch:
    """Records the processes started while an unmarked test runs (setup, call and teardown)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str, describe) -> None:
        original = getattr(owner, name)
        started = self.started

        def watched(*args, **kwargs):
            started.append(describe(*args, **kwargs))
            return original(*args, **kwargs)

        self._saved.append((owner, name, original))
        setattr(owner, name, watched)

    def __enter__(self) -> _ProcessWatch:
        def popen_args(self_, args, *_a, **_k):
            return " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)

        self._wrap(subprocess.Popen, "_execute_child", popen_args)
        self._wrap(os, "fork", lambda: "os.fork()")
        for name in ("posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                self._wrap(os, name, lambda path, argv, *_a, **_k: " ".join(map(str, argv)))
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)


def _marked_for_processes(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in PROCESS_MARKS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if _marked_for_processes(item):
        yield
        return
    with _ProcessWatch() as watch:
        item.stash[_STARTED] = watch.started
        yield


_STARTED = pytest.StashKey[list]()
_CPU = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    t0 = time.process_time()
    yield
    item.stash[_CPU] = time.process_time() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.failed or report.skipped:
        return
    problem = None
    started = item.stash.get(_STARTED, None)
    if started:
        problem = (f"started {len(started)} process(es) ({started[0][:200]}) but is not marked with any of "
                   f"{', '.join(PROCESS_MARKS)}: the fast tier must start none (mark the test, its module, "
                   f"or the fixture in tests/suite_rules.py FIXTURE_MARKS)")
        started.clear()  # reported once
    elif report.when == "call" and not _marked_for_processes(item) and (
            item.stash.get(_CPU, 0.0) > SLOW_SECS or report.duration > WAIT_SECS):
        problem = (f"used {item.stash.get(_CPU, 0.0):.1f} CPU-s in {report.duration:.1f}s but is not marked slow "
                   f"(the fast tier keeps tests under {SLOW_SECS:g} CPU-s and {WAIT_SECS:g}s): "
                   f"mark it @pytest.mark.slow")
    if problem:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} {problem}"
