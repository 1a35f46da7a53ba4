"""Dev clusters shared by the tests that only need *a* running cluster (star-imported by
tests/conftest.py).

Fixtures:
- `shared_dev_cluster` (function): a started DevCluster (Nimbus, 2 supervisors with 4 slots each,
  their logviewers, the UI, as processes) on the session's ZooKeeper under a root of its own,
  started by the first test that asks and kept for the run. Checked before each test (every
  daemon alive, Nimbus answering with both supervisors registered) and started afresh if it is
  not healthy, so that one test that broke it cannot fail the ones after it. At the test's end
  every topology on it is killed and its workers waited for.
- `secured_dev_cluster` (function): the same with `nimbus.authentication.secret` SECRET and
  `ui.readonly.secret` READONLY_SECRET (the UI's REST and page tests).
- `shared_dev_clusters` (session): the registry behind both, for module fixtures that keep a
  topology running across their tests: `acquire(kind)` -> a healthy DevCluster, `release(kind)`
  -> every topology killed.

The clusters stop after the last test of this process that uses them (`after_test`, called by
tests/conftest.py once a test's fixtures tore down), not at the end of the run: an idle cluster's
six daemons cost ~7% of a core, and a worker process of a parallel run is done with its shared
group long before the run ends (up to 1,000 s of five idle clusters in one measured run).

Each test names its topologies itself; tests run one at a time, so whatever runs on a shared
cluster when a test ends is that test's. Tests that need a cluster of their own (security, roots,
Nimbus HA, faults that restart ZooKeeper, several hosts, the `storm-py dev-cluster` command
itself) keep starting theirs.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
from testutil import wait_until
from zk_fixture import SESSION_PIDS, SESSION_THREADS

__all__ = ["READONLY_SECRET", "SECRET", "SharedDevClusters", "secured_dev_cluster", "shared_dev_cluster",
           "shared_dev_clusters"]
USERS = ("shared_dev_cluster", "secured_dev_cluster", "shared_dev_clusters")

log = logging.getLogger(__name__)

SECRET, READONLY_SECRET = "shared-ui-test-secret", "shared-ui-test-reader"
# Daemon periods of a second instead of Storm's defaults: a submitted topology gets its workers at
# once, a killed one is gone within seconds.
FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1, "task.heartbeat.frequency.secs": 1}
KINDS: dict[str, dict[str, Any]] = {
    "plain": FAST,
    "secured": {**FAST, "nimbus.thrift.timeout": 3, "nimbus.authentication.secret": SECRET,
                "ui.readonly.secret": READONLY_SECRET},
}
SUPERVISORS, SLOTS = 2, 4
CLEAN_TIMEOUT = 60.0


def processes_naming(base: Path) -> list[psutil.Process]:
    """Live processes whose command line names a path under `base` (daemons and workers)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(base) in a for a in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


class SharedDevClusters:
    """One DevCluster per kind, started on first use, checked at every use, restarted if broken."""

    def __init__(self, base: Path, zk_server: Any, zk_admin: Any):
        self.base = base
        self.zk_server = zk_server
        self.zk_admin = zk_admin
        self.clusters: dict[str, Any] = {}
        self.problems: list[str] = []  # of stops between tests, reported at the session's end

    # -- use ------------------------------------------------------------------------------------

    def acquire(self, kind: str) -> Any:
        """A healthy cluster of `kind` (started or started afresh here)."""
        dev = self.clusters.get(kind)
        if dev is not None:
            problem = self.problem(dev)
            if problem is None:
                return dev
            log.warning("the shared %s dev cluster is broken (%s): starting a new one", kind, problem)
            self._stop(kind)
        return self._start(kind)

    def release(self, kind: str) -> None:
        """Kill every topology on the cluster and wait until Nimbus forgot them and their
        workers exited (the next test gets every slot)."""
        dev = self.clusters.get(kind)
        if dev is None:
            return
        client = self._client(dev)
        try:
            names = [t["name"] for t in client.call("cluster_info")["topologies"]]
            for name in names:
                client.call("kill", name=name, wait_secs=0)
            wait_until(lambda: not client.call("cluster_info")["topologies"] and not dev.worker_pids(),
                       timeout=CLEAN_TIMEOUT, interval=0.2,
                       message=lambda: f"the topologies {names} gone from the shared {kind} dev cluster "
                                       f"and their workers {dev.worker_pids()} exited")
        except Exception:
            # Whatever the test did to it, the next one must not inherit it.
            log.exception("cleaning the shared %s dev cluster failed: it is stopped", kind)
            self._stop(kind)
            raise
        finally:
            client.close()

    def problem(self, dev: Any) -> str | None:
        """Why `dev` cannot serve the next test (None: it can)."""
        dead = [c.name for c in dev.children() if c.exit_code() is not None]
        if dead:
            return f"not running: {', '.join(dead)}"
        client = self._client(dev)
        try:
            info = client.call("cluster_info")
        except Exception as exc:  # noqa: BLE001 - any failure to answer is the problem to report
            return f"Nimbus does not answer: {type(exc).__name__}: {exc}"
        finally:
            client.close()
        if len(info["supervisors"]) != dev.n_supervisors:
            return f"{len(info['supervisors'])} of {dev.n_supervisors} supervisors registered"
        return None

    def stop_all(self) -> list[str]:
        problems = []
        for kind in list(self.clusters):
            problems += self._stop(kind)
        return problems

    # -- inside -----------------------------------------------------------------------------------

    def _client(self, dev: Any):
        from cluster_state.config import default_config
        from daemons.rpc.client import client_from_conf

        return client_from_conf({**default_config(), **dev.conf, "nimbus.thrift.timeout": 5})

    def _start(self, kind: str) -> Any:
        from daemons.devcluster import DevCluster, ZooKeeperAt

        base = self.base / f"{kind}-{uuid.uuid4().hex[:6]}"
        root = f"/shared-{kind}-{uuid.uuid4().hex[:8]}"
        zk = self.zk_server
        threads_before = set(threading.enumerate())
        dev = DevCluster(base, supervisors=SUPERVISORS, slots=SLOTS, user_conf=KINDS[kind],
                         zookeeper_at=ZooKeeperAt(zk.host, zk.port, root))
        dev.shared_root = root
        self.clusters[kind] = dev
        try:
            dev.start()
        finally:
            # Started inside whichever test asked first: the leak check (tests/conftest.py) must
            # count its daemons (and the workers they start) and its threads as the session's.
            SESSION_PIDS.update(c.pid for c in dev.children() if c.pid)
            SESSION_THREADS.update(set(threading.enumerate()) - threads_before)
        return dev

    def _stop(self, kind: str) -> list[str]:
        dev = self.clusters.pop(kind)
        problems = []
        try:
            dev.stop()
        except Exception as exc:  # noqa: BLE001 - the rest below must still run
            problems.append(f"stopping the shared {kind} dev cluster: {exc}")
        left = processes_naming(dev.base_dir)
        for proc in left:  # do not let them outlive the run; the failure says which they were
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        if left:
            problems.append(f"processes left behind by the shared {kind} dev cluster: {[p.pid for p in left]}")
        deadline = time.monotonic() + 15
        while not self.zk_admin.connected and time.monotonic() < deadline:
            time.sleep(0.05)  # poll: the admin client reconnecting after a test's ZooKeeper fault
        self.zk_admin.delete(dev.shared_root, recursive=True)  # the superuser: the cluster's ACLs
        shutil.rmtree(dev.base_dir, ignore_errors=True)
        return problems


def last_users(items: list[Any], group_of: Any) -> set[str]:
    """The node ids of the tests after which no later test of the same group uses a shared
    cluster (pure). Groups run whole and in order on one process (xdist's loadgroup)."""
    last = {}
    for item in items:
        if any(f in USERS for f in getattr(item, "fixturenames", ())):
            last[group_of(item)] = item.nodeid
    return set(last.values())


def _group_of(item: Any) -> str:
    # xdist's worker names each test after its group ("path::test@group"); one process runs
    # everything as one group
    return item.nodeid.rsplit("@", 1)[1] if "@" in item.nodeid else ""


_REGISTRY: list[SharedDevClusters] = []  # the session fixture's, while it is set up
_LAST = pytest.StashKey[set]()


def after_test(item: Any) -> None:
    """Stop the shared clusters when `item` was the last test of its group to use them (a later
    test that asks after all starts them again: slower, never wrong)."""
    if not _REGISTRY or not _REGISTRY[0].clusters:
        return
    session = item.session
    if _LAST not in session.stash:
        session.stash[_LAST] = last_users(session.items, _group_of)
    if item.nodeid in session.stash[_LAST]:
        log.info("the last test of this process that uses the shared dev clusters is done: stopping them")
        _REGISTRY[0].problems += _REGISTRY[0].stop_all()


@pytest.fixture(scope="session")
def shared_dev_clusters(tmp_path_factory, zk_server, zk_admin):
    if shutil.which("java") is None:
        pytest.skip("the dev cluster needs Java and the Debian zookeeper package")
    registry = SharedDevClusters(tmp_path_factory.mktemp("shared-dev"), zk_server, zk_admin)
    _REGISTRY.append(registry)
    try:
        yield registry
    finally:
        _REGISTRY.remove(registry)
    problems = registry.problems + registry.stop_all()
    assert not problems, "; ".join(problems)


def _use(registry: SharedDevClusters, kind: str):
    dev = registry.acquire(kind)
    try:
        yield dev
    finally:
        registry.release(kind)
        # A daemon the test restarted (Nimbus, a supervisor) is the cluster's, not a leak.
        SESSION_PIDS.update(c.pid for c in dev.children() if c.pid)


@pytest.fixture
def shared_dev_cluster(shared_dev_clusters):
    yield from _use(shared_dev_clusters, "plain")


@pytest.fixture
def secured_dev_cluster(shared_dev_clusters):
    yield from _use(shared_dev_clusters, "secured")
