"""`storm-py dev-cluster --supervisors 2` as a user runs it: it starts, the client commands work
against it (effects checked in ZooKeeper and in the processes), and SIGTERM stops everything it
started, workers included, exiting 0."""

from __future__ import annotations

import shutil
import signal

import pytest
import ui_http
from devcluster_helpers import ROOT, DevClusterProcess, alive, processes_under, running_dev_cluster, storm_py
from testutil import wait_until

from cluster_state.factory import mk_storm_cluster_state
from daemons.devcluster import DevCluster, worker_processes

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

FAST = ["-c", "nimbus.monitor.freq.secs=1", "-c", "supervisor.monitor.frequency.secs=1",
        "-c", "supervisor.heartbeat.frequency.secs=1"]
TOPOLOGY = ROOT / "examples" / "exclamation" / "topology.py"


@pytest.fixture
def dev_cluster(tmp_path):
    with running_dev_cluster(tmp_path / "dev", "--supervisors", "2", *FAST) as cluster:
        yield cluster


def workers(cluster) -> dict[int, object]:
    found: dict[int, object] = {}
    for conf in cluster.supervisor_confs():
        found.update(worker_processes(conf))
    return found


def listing(cluster) -> dict[str, list[str]]:
    out = storm_py("list", conf_dir=cluster.conf_dir)
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    return {r[0]: r for r in rows if r[0] != "No"}


def submit(cluster, name: str, *args: str) -> str:
    out = storm_py("jar", "submit", str(TOPOLOGY), "--name", name, *args, conf_dir=cluster.conf_dir)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(f"submitted topology {name} as ")]
    assert len(lines) == 1, out.stdout
    return lines[0].rsplit(" ", 1)[1]


def test_starts_prints_where_everything_is_and_stops_with_nothing_left(tmp_path):
    cluster = DevClusterProcess(tmp_path / "dev", "--supervisors", "2", *FAST)
    try:
        cluster.wait_ready()
        text = cluster.output()
        conf = cluster.conf()
        sups = cluster.supervisor_confs()
        assert f"127.0.0.1:{conf['storm.zookeeper.port']}" in text
        assert f"127.0.0.1:{conf['nimbus.thrift.port']}" in text
        assert str(cluster.conf_dir) in text and str(cluster.base / "logs") in text
        for line in ("jar submit", "list --conf-dir", "kill demo"):
            assert line in text, text
        # Distinct slot ports and local dirs per supervisor.
        ports = [p for s in sups for p in s["supervisor.slots.ports"]]
        assert len(sups) == 2 and len(set(ports)) == len(ports)
        assert len({s["storm.local.dir"] for s in sups}) == 2
        for s in sups:
            assert ",".join(str(p) for p in s["supervisor.slots.ports"]) in text
        pids = cluster.child_pids()
        assert {"zookeeper", "nimbus", "supervisor-1", "supervisor-2", "dev-cluster"} <= set(pids)
        assert all(alive(pid) for pid in pids.values())

        # A running topology when it stops: its workers must go too.
        storm_id = submit(cluster, "left-running")
        wait_until(lambda: len(workers(cluster)) == 2, timeout=90, interval=0.2,
                   message=lambda: f"2 workers of {storm_id}:\n{cluster.output()}")
        worker_pids = list(workers(cluster))
    finally:
        code = cluster.stop()
        leftovers = cluster.kill_leftovers()
    assert code == 0, cluster.output()
    assert "dev cluster stopped" in cluster.output()
    assert not leftovers, f"processes left behind: {leftovers}"
    assert not any(alive(pid) for pid in [*pids.values(), *worker_pids])
    assert list((cluster.base / "pids").iterdir()) == []


def test_a_closed_terminal_sighup_stops_everything_as_sigterm_does(tmp_path):
    cluster = DevClusterProcess(tmp_path / "dev", "--supervisors", "1", *FAST)
    pids, worker_pids = {}, []
    try:
        cluster.wait_ready()
        pids = cluster.child_pids()
        submit(cluster, "hup")
        wait_until(lambda: len(workers(cluster)) == 2, timeout=90, interval=0.2,
                   message=lambda: f"2 workers:\n{cluster.output()}")
        worker_pids = list(workers(cluster))
    finally:
        code = cluster.stop(sig=signal.SIGHUP)
        leftovers = cluster.kill_leftovers()
    assert code == 0, cluster.output()
    assert not leftovers, f"processes left behind after SIGHUP: {leftovers}"
    assert not any(alive(pid) for pid in [*pids.values(), *worker_pids])


def test_client_commands_against_the_dev_cluster(dev_cluster):
    c = dev_cluster
    state = mk_storm_cluster_state(c.conf())
    try:
        # A daemon key at submit is named and not shipped: the workers, taking ZooKeeper's port
        # from their supervisor, still connect (they used to get port 1 and never did).
        storm_id = submit(c, "demo", "-c", "storm.zookeeper.port=1", "-c", "exclamation.rate=200")
        rows = listing(c)
        assert rows["demo"][1] == storm_id and rows["demo"][2] == "ACTIVE"
        assert state.storm_base(storm_id).status == "active"
        assignment = state.assignment_info(storm_id)
        assert len(set(assignment.executor_node_port.values())) == 2
        # Worker processes appear: one per assigned slot, on both supervisors' ports.
        wait_until(lambda: len(workers(c)) == 2, timeout=90, interval=0.2, message="2 worker processes")
        first_workers = set(workers(c))
        enp = assignment.executor_node_port
        wait_until(lambda: len(state.executor_beats(storm_id, enp)) == len(enp), timeout=90, interval=0.2,
                   message="every executor heartbeating in ZooKeeper")

        storm_py("deactivate", "demo", conf_dir=c.conf_dir)
        assert listing(c)["demo"][2] == "INACTIVE" and state.storm_base(storm_id).status == "inactive"
        storm_py("activate", "demo", conf_dir=c.conf_dir)
        assert listing(c)["demo"][2] == "ACTIVE" and state.storm_base(storm_id).status == "active"

        storm_py("rebalance", "demo", "-w", "0", "-n", "1", conf_dir=c.conf_dir)
        wait_until(lambda: state.storm_base(storm_id).status == "active"
                   and len(set(state.assignment_info(storm_id).executor_node_port.values())) == 1,
                   timeout=60, interval=0.2, message="the rebalance to 1 worker")
        assert state.storm_base(storm_id).num_workers == 1
        wait_until(lambda: len(workers(c)) == 1, timeout=90, interval=0.2, message="1 worker process")
        last_workers = set(workers(c))

        storm_py("kill", "demo", "-w", "0", conf_dir=c.conf_dir)
        wait_until(lambda: state.storm_base(storm_id) is None and state.assignment_info(storm_id) is None,
                   timeout=60, interval=0.2, message="/storms and /assignments of the killed topology removed")
        wait_until(lambda: "demo" not in listing(c), timeout=30, interval=0.2, message="demo gone from list")
        wait_until(lambda: not workers(c) and not any(alive(p) for p in first_workers | last_workers),
                   timeout=60, interval=0.2, message="the killed topology's workers to exit")
    finally:
        state.disconnect()
    assert not [p for p in processes_under(c.base) if "executor.worker_main" in " ".join(p.cmdline())]


def test_nimbus_log_link_is_served_by_a_logviewer_or_blank(tmp_path):
    # Storm links Nimbus's log to the logviewer on its host (logviewer.port): the UI must not
    # point at a port nothing listens on (it pointed at 8000).
    base = tmp_path / "dev"
    dev = DevCluster(base, supervisors=1, slots=1, user_conf={"supervisor.heartbeat.frequency.secs": 1})
    try:
        dev.start()
        nimbuses = ui_http.get(dev.ui_url, "/api/v1/nimbus/summary")["nimbuses"]
        assert nimbuses
        for n in nimbuses:
            link = n["nimbusLogLink"]
            if link:  # served: the link opens Nimbus's log (a refused connection fails the test)
                status, page, _ = ui_http.request(link, "GET", "")
                assert status == 200 and "nimbus" in page, (link, status)
        # The supervisors' logviewers still serve their workers' logs (their own conf's port).
        ports = {v.extra["port"] for v in dev.logviewers}
        assert ports and all(p != 0 for p in ports)
    finally:
        dev.stop()
    left = processes_under(base)
    assert not left, f"processes left behind: {[p.pid for p in left]}"
