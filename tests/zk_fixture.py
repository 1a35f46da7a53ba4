"""Real ZooKeeper for tests (star-imported by tests/conftest.py).

Fixtures:
- `zk_server` (session): one standalone ZooKeeper on a free 127.0.0.1 port, started from a
  temp dir and stopped by pid at the end (cluster_state.zkserver.ZooKeeperServer).
- `zk_conf` (function): a storm conf dict pointing at `zk_server` with its own chroot
  (`storm.zookeeper.root`), fast retry settings, and the chroot deleted afterwards, so tests
  never see each other's nodes. Pass it to `cluster_state.mk_storm_cluster_state(zk_conf)`.
- `zk_admin` (session): a kazoo client authenticated as ZooKeeper's superuser (bypasses ACLs),
  for inspecting and cleaning up.
- `zk_server_factory` (function): `start(**kwargs) -> ZooKeeperServer` for tests that need a
  server of their own (e.g. to stop and restart it); all are stopped afterwards.

A test that leaves a ZooKeeper node behind fails: `zk_conf` deletes the test's chroot (whatever
the test wrote there, including the structure the cluster-state layer creates: the chroot node
and /assignments, /storms, /supervisors, /workerbeats, /errors) and then fails the test if the
server's root holds a node that was not there before it (a node written outside the chroot, or
the chroot recreated by something the test left running). `zk_admin` fails the run at its end
if anything but /zookeeper is left at the root.

When a test using these fails, the ZooKeeper log lines written during the test are added to
its report. Helpers: `wait_until(predicate, timeout, message)` (poll with a deadline),
`zk_conf_for(server, root)`, `expire_session(zk_cluster_state)`, `zookeeper_at(zk_conf)` (a DevCluster
on the session's server under the test's chroot, instead of a ZooKeeper of its own).

Set STORM_PY_SKIP_ZOOKEEPER=1 to skip (rather than fail) these tests where ZooKeeper is not
installed; CI installs it (deploy/install-test-deps.sh).
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from typing import Any

import pytest

from cluster_state.config import default_config
from cluster_state.zkserver import ZooKeeperServer, ZooKeeperUnavailable

__all__ = [
    "SESSION_THREADS",
    "SESSION_PIDS",
    "SUPER_PASSWORD",
    "expire_session",
    "pytest_runtest_makereport",
    "wait_until",
    "zk_admin",
    "zk_conf",
    "zk_conf_for",
    "zk_server",
    "zk_server_factory",
    "zookeeper_at",
]

from testutil import wait_until  # noqa: E402  (re-exported for the cluster-state tests)

SUPER_PASSWORD = "storm-py-test-super"
# Threads of session-scoped fixtures, which the leak check (tests/conftest.py) must not count.
SESSION_THREADS: set[threading.Thread] = set()
# Processes of session-scoped fixtures: a session server may be started lazily inside the first
# test that asks for it, and the leak check must neither report nor kill it.
SESSION_PIDS: set[int] = set()
# Session timeout of test clients; the servers' tickTime (500 ms) allows up to 10 s.
TEST_SESSION_TIMEOUT_MS = 10000


def _start_server(base_dir: Any, **kwargs: Any) -> ZooKeeperServer:
    server = ZooKeeperServer(base_dir, super_password=SUPER_PASSWORD, **kwargs)
    try:
        server.start()
    except ZooKeeperUnavailable as exc:
        if os.environ.get("STORM_PY_SKIP_ZOOKEEPER") == "1":
            pytest.skip(f"ZooKeeper unavailable: {exc}")
        raise
    return server


def _mark_log(request: pytest.FixtureRequest, server: ZooKeeperServer) -> None:
    """Remember where the server's log stands so a failure report shows this test's part."""
    try:
        offset = server.log_path.stat().st_size
    except FileNotFoundError:
        offset = 0
    marks = getattr(request.node, "zk_log_marks", None)
    if marks is None:
        marks = request.node.zk_log_marks = []
    marks.append((server, offset))


def _log_since(server: ZooKeeperServer, offset: int, max_lines: int = 300) -> str:
    try:
        with open(server.log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(cannot read {server.log_path}: {exc})"
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = [f"... {len(lines) - max_lines} earlier lines in {server.log_path}"] + lines[-max_lines:]
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server, offset in getattr(item, "zk_log_marks", ()):
            report.sections.append(
                (f"ZooKeeper log {server.connect_string} ({report.when})", _log_since(server, offset)))


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory):
    server = _start_server(tmp_path_factory.mktemp("zookeeper"))
    SESSION_PIDS.add(server.pid)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def zk_admin(zk_server: ZooKeeperServer):
    from kazoo.client import KazooClient

    before = set(threading.enumerate())
    client = KazooClient(hosts=zk_server.connect_string, auth_data=[("digest", f"super:{SUPER_PASSWORD}")])
    client.start(timeout=15)
    # Session-scoped: its threads outlive the test that happened to create it.
    SESSION_THREADS.update(set(threading.enumerate()) - before)
    yield client
    leftover = [child for child in client.get_children("/") if child != "zookeeper"]
    client.stop()
    client.close()
    if leftover:
        pytest.fail(f"ZooKeeper nodes left behind by tests at the server's root: {sorted(leftover)}",
                    pytrace=False)


def _admin_connected(client: Any, timeout: float = 15.0) -> None:
    """kazoo's synchronous calls wait forever while disconnected: fail loudly instead."""
    deadline = time.monotonic() + timeout
    while not client.connected:
        if time.monotonic() > deadline:
            pytest.fail(f"the session ZooKeeper admin client has been disconnected for {timeout:g}s "
                        f"(did a test stop or kill the session server?)", pytrace=False)
        time.sleep(0.05)  # poll with the deadline above


def zk_conf_for(server: ZooKeeperServer, root: str, **overrides: Any) -> dict[str, Any]:
    """A storm conf for clients of `server` under chroot `root`, with test-friendly timings."""
    conf = default_config()
    conf.update({
        "storm.zookeeper.servers": [server.host],
        "storm.zookeeper.port": server.port,
        "storm.zookeeper.root": root,
        "storm.zookeeper.session.timeout": min(TEST_SESSION_TIMEOUT_MS, server.max_session_timeout_ms),
        "storm.zookeeper.connection.timeout": 5000,
        "storm.zookeeper.retry.times": 5,
        "storm.zookeeper.retry.interval": 50,
        "storm.zookeeper.retry.intervalceiling.millis": 500,
    })
    conf.update(overrides)
    return conf


def _root_for(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:60]
    return f"/test-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_conf(request: pytest.FixtureRequest, zk_server: ZooKeeperServer, zk_admin: Any):
    _mark_log(request, zk_server)
    root = _root_for(request)
    _admin_connected(zk_admin)
    before = set(zk_admin.get_children("/"))
    yield zk_conf_for(zk_server, root)
    # The superuser deletes the chroot even when the test locked it down with ACLs.
    _admin_connected(zk_admin)
    zk_admin.delete(root, recursive=True)
    left = sorted(set(zk_admin.get_children("/")) - before - {"zookeeper"})
    if left:
        for node in left:  # reported once, here: the next test starts clean
            zk_admin.delete("/" + node, recursive=True)
        pytest.fail(f"ZooKeeper nodes left behind outside the test's chroot {root}: "
                    + ", ".join("/" + n for n in left), pytrace=False)


@pytest.fixture
def zk_server_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    servers: list[ZooKeeperServer] = []

    def start(**kwargs: Any) -> ZooKeeperServer:
        server = _start_server(tmp_path_factory.mktemp("zookeeper-own"), **kwargs)
        servers.append(server)
        _mark_log(request, server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


def zookeeper_at(conf: dict[str, Any]):
    """Where a DevCluster finds ZooKeeper when it runs on this test's (`zk_conf`): the session's
    server, under the test's chroot, which zk_conf deletes at the end."""
    from daemons.devcluster import ZooKeeperAt

    return ZooKeeperAt(conf["storm.zookeeper.servers"][0], conf["storm.zookeeper.port"], conf["storm.zookeeper.root"])


def expire_session(cluster_state: Any, timeout: float = 15.0) -> int:
    """Force a ZkClusterState's session to expire, the way kazoo's own tests do it: a second
    client joins the session with its id and password and closes it. Returns the old session
    id once the client runs on a new session."""
    from kazoo.client import KazooClient

    client = cluster_state.kazoo_client
    old_id, password = client.client_id
    settings = cluster_state.settings
    chroot = "" if settings.root == "/" else settings.root
    intruder = KazooClient(hosts=settings.connect_string + chroot, client_id=(old_id, password))
    intruder.start(timeout=timeout)
    intruder.stop()
    intruder.close()
    wait_until(lambda: cluster_state.session_id not in (None, old_id)
               and cluster_state.connection_state.value == "connected",
               timeout, "the client to establish a new session")
    return old_id
