"""Digest authentication and ACLs on a real ZooKeeper: anyone reads, only credentials write."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, Id

from cluster_state import (
    ROLE_TOPOLOGY,
    Assignment,
    NotAuthorizedError,
    StormBase,
    WorkerHeartbeat,
    mk_storm_cluster_state,
)
from cluster_state.auth import PERM_ALL, PERM_READ, digest_id

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]

DAEMON = "nimbus:daemon-secret"
TOPOLOGY = "wc:topology-secret"


def secured(conf):
    return dict(conf, **{
        "storm.zookeeper.auth.scheme": "digest",
        "storm.zookeeper.auth.payload": DAEMON,
        "storm.zookeeper.topology.auth.scheme": "digest",
        "storm.zookeeper.topology.auth.payload": TOPOLOGY,
    })


def assignment(port: int) -> Assignment:
    return Assignment("/code", {"sup-1": "host-1"}, {(1, 1): ("sup-1", port)}, {(1, 1): 1})


@pytest.fixture
def states():
    made = []

    def make(conf, **kwargs):
        state = mk_storm_cluster_state(conf, **kwargs)
        made.append(state)
        return state

    yield make
    for state in reversed(made):
        state.disconnect()


def test_unauthenticated_client_cannot_change_an_assignment(zk_conf, zk_admin, states):
    nimbus = states(secured(zk_conf))
    nimbus.set_assignment("wc-1", assignment(6700))
    nimbus.activate_storm("wc-1", StormBase("wc", 1, "active", 1, {"spout": 1}))

    acls, _ = zk_admin.get_acls(zk_conf["storm.zookeeper.root"] + "/assignments/wc-1")
    assert set(acls) == {
        ACL(PERM_ALL, Id("digest", digest_id(DAEMON))),
        ACL(PERM_ALL, Id("digest", digest_id(TOPOLOGY))),
        ACL(PERM_READ, Id("world", "anyone")),
    }

    anonymous = states(zk_conf)  # same chroot, no credentials
    wrong = states(dict(secured(zk_conf), **{"storm.zookeeper.auth.payload": "nimbus:guess"}))
    for intruder in (anonymous, wrong):
        assert intruder.assignment_info("wc-1") == assignment(6700)  # readable by anyone
        with pytest.raises(NotAuthorizedError) as info:
            intruder.set_assignment("wc-1", assignment(9999))
        assert "/assignments/wc-1" in str(info.value)
        with pytest.raises(NotAuthorizedError):
            intruder.remove_storm("wc-1")
        with pytest.raises(NotAuthorizedError):
            intruder.set_assignment("wc-2", assignment(9999))  # cannot create under /assignments
        with pytest.raises(NotAuthorizedError):
            intruder.update_storm("wc-1", status="killed")
    assert nimbus.assignment_info("wc-1") == assignment(6700)
    assert nimbus.assignments() == ["wc-1"]
    assert nimbus.storm_base("wc-1").status == "active"


def test_workers_write_heartbeats_and_errors_with_topology_credentials(zk_conf, states):
    nimbus = states(secured(zk_conf))
    nimbus.setup_heartbeats("wc-1")
    worker = states(secured(zk_conf), role=ROLE_TOPOLOGY)
    hb = WorkerHeartbeat("wc-1", [(1, 1)], 6700, 10, 1)
    worker.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    worker.report_error("wc-1", "spout", "host-1", 6700, "boom")
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6700) == hb
    assert nimbus.last_error("wc-1", "spout").error == "boom"
    anonymous = states(zk_conf)
    with pytest.raises(NotAuthorizedError):
        anonymous.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    # nimbus can still clean up what workers created
    nimbus.teardown_heartbeats("wc-1")
    nimbus.teardown_topology_errors("wc-1")
    assert nimbus.heartbeat_storms() == [] and nimbus.error_topologies() == []
