"""The Nimbus leader latch at /leader-lock, on the cluster-state protocol (a real ZooKeeper, and
the in-memory state for what needs no session expiry; issue 21): the first to join leads and the
others name it; the leader leaving or its session expiring hands over; a node left by a crashed
earlier run of the same host:port is removed once that Nimbus holds its port."""

from __future__ import annotations

import threading

import pytest
from testutil import wait_until
from zk_fixture import expire_session

from cluster_state.memory import InMemoryClusterState, InMemoryStore
from cluster_state.zk import ZkClusterState
from daemons.nimbus.leader import LeaderLatch, Leadership

pytestmark = [pytest.mark.timeout(90), pytest.mark.zk]


@pytest.fixture(params=["zookeeper", "memory"])
def clients(request):
    made: list = []
    if request.param == "memory":
        store = InMemoryStore()
        make = lambda: InMemoryClusterState(store, "/storm")  # noqa: E731
    else:
        zk_conf = request.getfixturevalue("zk_conf")
        make = lambda: ZkClusterState(zk_conf)  # noqa: E731

    def new():
        made.append(make())
        return made[-1]

    yield new
    for cs in made:
        cs.close()


def latch(cs, me: str) -> tuple[LeaderLatch, threading.Event]:
    woke = threading.Event()
    return LeaderLatch(cs, me, woke.set), woke


def test_the_first_leads_the_second_names_it_and_takes_over_when_it_leaves(clients):
    a, _ = latch(clients(), "127.0.0.2:6627")
    b, b_woke = latch(clients(), "127.0.0.3:6627")
    assert a.check() == Leadership("127.0.0.2:6627", True)
    assert b.check() == Leadership("127.0.0.2:6627", False)
    assert a.check() == Leadership("127.0.0.2:6627", True)  # checking again changes nothing
    b_woke.clear()
    a.close()
    wait_until(b_woke.is_set, timeout=10, message="the standby's watch to fire")
    assert b.check() == Leadership("127.0.0.3:6627", True)
    b.close()


@pytest.fixture
def zk_clients(zk_conf):  # sessions expire only on ZooKeeper
    made: list[ZkClusterState] = []

    def new() -> ZkClusterState:
        made.append(ZkClusterState(zk_conf))
        return made[-1]

    yield new
    for cs in made:
        cs.close()


def test_a_leader_whose_session_expires_joins_again_behind_the_standby(zk_clients):
    clients = zk_clients
    a_cs = clients()
    a, _ = latch(a_cs, "127.0.0.2:6627")
    b, _ = latch(clients(), "127.0.0.3:6627")
    assert a.check().is_leader and not b.check().is_leader
    expire_session(a_cs)
    wait_until(lambda: b.check().is_leader, timeout=20, message="the standby to lead after the expiry")
    wait_until(lambda: a.check() == Leadership("127.0.0.3:6627", False), timeout=20,
               message="the old leader to rejoin as a standby", tolerate=(Exception,))
    a.close()
    b.close()


def test_a_node_of_a_crashed_earlier_run_is_removed_only_once_the_port_is_held(clients):
    crashed, _ = latch(clients(), "127.0.0.2:6627")
    assert crashed.check().is_leader  # its session stays open: as after a SIGKILL, until it expires
    again, _ = latch(clients(), "127.0.0.2:6627")
    assert again.check() == Leadership("127.0.0.2:6627", False)  # not yet known to be dead
    again.identity_owned = True  # listening on 127.0.0.2:6627: the other run cannot be alive
    wait_until(lambda: again.check().is_leader, timeout=10, message="the restarted Nimbus to lead")
    again.close()
    crashed.close()
