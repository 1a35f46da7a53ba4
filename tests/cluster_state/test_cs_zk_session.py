"""Session loss and server restarts on a real ZooKeeper: ephemeral nodes and watches come back."""

from __future__ import annotations

import pytest
from cs_helpers import Recorder, TcpProxy
from kazoo.client import KazooClient
from zk_fixture import expire_session, wait_until, zk_conf_for

from cluster_state import (
    Assignment,
    ClusterStateUnavailableError,
    ConnectionState,
    EventType,
    SupervisorInfo,
)
from cluster_state.zk import ZkClusterState

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]

INFO = SupervisorInfo(1700000000, "host-1", "sup-1", [], [6700, 6701], None, 1)


def assignment(port: int) -> Assignment:
    return Assignment("/code", {"sup-1": "host-1"}, {(1, 1): ("sup-1", port)}, {(1, 1): 1})


class Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1




def owner_of(zk_admin, conf, path):
    stat = zk_admin.exists(conf["storm.zookeeper.root"] + path)
    return None if stat is None else stat.ephemeralOwner


def test_supervisor_node_vanishes_when_its_client_closes(zk_conf, zk_admin, states):
    sup, nimbus = states(zk_conf), states(zk_conf)
    sup.supervisor_heartbeat("sup-1", INFO)
    assert owner_of(zk_admin, zk_conf, "/supervisors/sup-1") == sup.cluster_state.session_id
    calls = Calls()
    assert nimbus.supervisors(calls) == ["sup-1"]
    sup.disconnect()
    wait_until(lambda: calls.count == 1, 10, "the supervisors callback")
    assert nimbus.supervisors() == []


def test_supervisor_node_comes_back_after_session_expiry(zk_conf, zk_admin, states):
    sup, nimbus = states(zk_conf), states(zk_conf)
    sup.supervisor_heartbeat("sup-1", INFO)
    calls = Calls()
    assert nimbus.supervisors(calls) == ["sup-1"]
    old_session = expire_session(sup.cluster_state)
    # The server deleted the node with the old session (nimbus saw /supervisors change) ...
    wait_until(lambda: calls.count == 1, 10, "nimbus to see the supervisor node go")
    # ... and the client re-created it in its new session without being asked.
    new_session = sup.cluster_state.session_id
    assert new_session != old_session
    wait_until(lambda: owner_of(zk_admin, zk_conf, "/supervisors/sup-1") == new_session, 10,
               "the supervisor node to be re-created by the new session")
    assert nimbus.supervisor_info("sup-1") == INFO
    # It is a real ephemeral of the new session: closing the client removes it.
    sup.disconnect()
    wait_until(lambda: owner_of(zk_admin, zk_conf, "/supervisors/sup-1") is None, 10, "the node to go")


def test_watches_fire_after_session_expiry(zk_conf, states):
    watcher, nimbus = states(zk_conf), states(zk_conf)
    children_calls, info_calls = Calls(), Calls()
    nimbus.set_assignment("wc-1", assignment(6700))
    assert watcher.assignments(children_calls) == ["wc-1"]
    assert watcher.assignment_info("wc-1", info_calls) == assignment(6700)
    expire_session(watcher.cluster_state)
    nimbus.set_assignment("wc-1", assignment(6701))
    wait_until(lambda: info_calls.count == 1, 10, "the assignment-info callback armed before the expiry")
    nimbus.set_assignment("wc-2", assignment(6700))
    wait_until(lambda: children_calls.count == 1, 10, "the assignments callback armed before the expiry")


@pytest.mark.parametrize("expire", [False, True], ids=["same-session", "session-expired-meanwhile"])
def test_changes_while_cut_off_are_delivered_on_reconnect(zk_conf, states, expire):
    """kazoo forgets its watches when the connection drops; re-arming must find what changed."""
    server_host, server_port = zk_conf["storm.zookeeper.servers"][0], zk_conf["storm.zookeeper.port"]
    proxy = TcpProxy(server_host, server_port)
    proxy.start()
    watcher = None
    try:
        watcher = ZkClusterState(dict(zk_conf, **{"storm.zookeeper.port": proxy.port}))
        writer = states(zk_conf)
        rec = Recorder()
        watcher.register(rec)
        writer.set_assignment("wc-1", assignment(6700))
        writer.set_assignment("gone", assignment(6700))
        assert watcher.get_data("/assignments/wc-1", watch=True) is not None
        assert watcher.get_data("/assignments/gone", watch=True) is not None
        assert watcher.get_data("/assignments/wc-2", watch=True) is None
        assert watcher.get_children("/assignments", watch=True) == ["gone", "wc-1"]
        assert watcher.get_data("/assignments/same", watch=True) is None

        old_session, password = watcher.kazoo_client.client_id
        proxy.cut()
        wait_until(lambda: watcher.connection_state != ConnectionState.CONNECTED, 10, "the watcher to notice")
        if expire:
            # Join the cut-off client's session directly and close it: the server expires it.
            intruder = KazooClient(hosts=f"{server_host}:{server_port}{watcher.settings.root}",
                                   client_id=(old_session, password))
            intruder.start(timeout=10)
            intruder.stop()
            intruder.close()
        writer.set_assignment("wc-1", assignment(6701))
        writer.set_assignment("wc-2", assignment(6700))
        writer.remove_storm("gone")
        assert watcher.connection_state != ConnectionState.CONNECTED  # the changes happened while cut off
        proxy.resume()

        rec.wait_for(EventType.CHANGED, "/assignments/wc-1")
        rec.wait_for(EventType.CREATED, "/assignments/wc-2")
        rec.wait_for(EventType.DELETED, "/assignments/gone")
        rec.wait_for(EventType.CHILD, "/assignments")
        assert (watcher.session_id != old_session) == expire
        # The unchanged path got no event but is watched again: a later write fires it.
        writer.set_assignment("same", assignment(6700))
        rec.wait_for(EventType.CREATED, "/assignments/same")
        assert rec.for_path("/assignments/same") == [EventType.CREATED]
    finally:
        if watcher is not None:
            watcher.close()
        proxy.stop()


def test_zookeeper_restart_clients_reconnect_and_watches_keep_firing(zk_server_factory, states):
    server = zk_server_factory()
    conf = zk_conf_for(server, "/storm")
    sup, nimbus, watcher = states(conf), states(conf), states(conf)
    impatient = states(zk_conf_for(server, "/storm", **{
        "storm.zookeeper.connection.timeout": 300, "storm.zookeeper.retry.times": 1}))
    sup.supervisor_heartbeat("sup-1", INFO)
    nimbus.set_assignment("wc-1", assignment(6700))
    calls, sup_calls = Calls(), Calls()
    watcher.assignment_info("wc-1", calls)
    watcher.supervisors(sup_calls)

    assert nimbus.reconnects() == 0  # the first connection is not a reconnection
    server.stop()
    wait_until(lambda: impatient.connection_state == ConnectionState.SUSPENDED, 10, "the client to notice")
    with pytest.raises(ClusterStateUnavailableError):
        impatient.assignment_info("wc-1")  # fails after its retries instead of hanging
    assert impatient.disconnected_for() > 0
    server.restart()

    for state in (sup, nimbus, watcher, impatient):
        wait_until(lambda s=state: s.connection_state == ConnectionState.CONNECTED, 20, "reconnection")
    assert impatient.disconnected_for() == 0.0
    assert impatient.reconnects() >= 1  # what tells Nimbus that it was blind meanwhile
    nimbus.set_assignment("wc-1", assignment(6701))
    wait_until(lambda: calls.count == 1, 20, "the assignment callback after the restart")
    assert watcher.assignment_info("wc-1", calls) == assignment(6701)
    nimbus.set_assignment("wc-1", assignment(6702))
    wait_until(lambda: calls.count == 2, 10, "the re-registered callback")
    # The supervisor's session survived the restart (ZooKeeper restores sessions), or was
    # re-created; either way its node is there.
    wait_until(lambda: nimbus.supervisors() == ["sup-1"], 20, "the supervisor node")
    sup.disconnect()
    wait_until(lambda: sup_calls.count >= 1, 10, "the supervisors watch armed before the restart")
