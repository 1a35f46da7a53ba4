"""The `cluster` fixture: every scenario runs once on a LocalCluster and once on a dev cluster
(ZooKeeper + Nimbus + 2 supervisors x 2 slots as real processes, one for the whole session,
started by the first dev scenario and stopped at the end with nothing left running).

`-m "not zk and not cluster"` keeps only the local variants."""

from __future__ import annotations

import shutil
import threading

import psutil
import pytest
from scenario_harness import DevHarness, LocalHarness
from zk_fixture import SESSION_PIDS, SESSION_THREADS

DEV_MARKS = [pytest.mark.cluster, pytest.mark.zk]  # ~1 s each: not slow
# Daemon periods of a second instead of ten: a submitted topology gets its workers at once.
DEV_CONF = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
            "supervisor.heartbeat.frequency.secs": 1}


def _processes_naming(base) -> list[psutil.Process]:
    """Live processes whose command line names a path under `base` (daemons, workers, ZooKeeper)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(base) in a for a in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="session")
def dev_cluster(tmp_path_factory):
    if shutil.which("java") is None:
        pytest.skip("the dev cluster needs Java and the Debian zookeeper package")
    from daemons.devcluster import DevCluster

    base = tmp_path_factory.mktemp("scenarios-dev")
    threads_before = set(threading.enumerate())
    dev = DevCluster(base, supervisors=2, slots=2, user_conf=DEV_CONF)
    try:
        dev.start()
    finally:
        # Started inside the first dev test (lazily): the leak check must count its daemons (and
        # the workers they start) and its watch thread as the session's, not that test's.
        SESSION_PIDS.update(p for p in [dev.zookeeper.pid if dev.zookeeper else None,
                                        *(c.pid for c in dev.children())] if p)
        SESSION_THREADS.update(set(threading.enumerate()) - threads_before)
    yield dev
    dev.stop()
    left = _processes_naming(base)
    for proc in left:  # do not let them outlive the run; the failure below says which they were
        proc.kill()
    assert not left, f"processes left behind by the scenario dev cluster: {[p.pid for p in left]}"


@pytest.fixture(params=["local", "local-dedicated", pytest.param("dev", marks=DEV_MARKS),
                        pytest.param("dev-dedicated", marks=DEV_MARKS)])
def cluster(request, tmp_path):
    """A harness (scenario_harness.Harness): submit(file, name, conf) -> Run. Every scenario runs
    on both executor arrangements (executor/scheduling.py): the workers' shared executor thread
    (the default) and a thread per executor (`-dedicated`)."""
    if request.param.startswith("local"):
        harness = LocalHarness(tmp_path)
    else:
        harness = DevHarness(tmp_path, request.getfixturevalue("dev_cluster"))
    if request.param.endswith("-dedicated"):
        harness.thread_mode = "dedicated"
    try:
        yield harness
    finally:
        harness.close()
