"""Digest authentication and ACLs on a real ZooKeeper: anyone reads, only credentials write;
each topology's identity (derived from the daemons' secret) writes its own nodes and no other."""

from __future__ import annotations

import pytest
from kazoo.security import ACL, Id

from cluster_state import (
    ROLE_TOPOLOGY,
    Assignment,
    NotAuthorizedError,
    StormBase,
    WorkerHeartbeat,
)
from cluster_state.auth import PERM_ALL, PERM_READ, digest_id, topology_payload, worker_conf

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]

DAEMON = "nimbus:daemon-secret"
TOPOLOGY = "wc:topology-secret"


def secured(conf):
    return dict(conf, **{
        "storm.zookeeper.auth.scheme": "digest",
        "storm.zookeeper.auth.payload": DAEMON,
    })


def assignment(port: int) -> Assignment:
    return Assignment("/code", {"sup-1": "host-1"}, {(1, 1): ("sup-1", port)}, {(1, 1): 1})




def test_unauthenticated_client_cannot_change_an_assignment(zk_conf, zk_admin, states):
    nimbus = states(secured(zk_conf))
    nimbus.set_assignment("wc-1", assignment(6700))
    nimbus.activate_storm("wc-1", StormBase("wc", 1, "active", 1, {"spout": 1}))

    acls, _ = zk_admin.get_acls(zk_conf["storm.zookeeper.root"] + "/assignments/wc-1")
    assert set(acls) == {
        ACL(PERM_ALL, Id("digest", digest_id(DAEMON))),
        ACL(PERM_READ, Id("world", "anyone")),
    }

    anonymous = states(zk_conf)  # same chroot, no credentials
    wrong = states(dict(secured(zk_conf), **{"storm.zookeeper.auth.payload": "nimbus:guess"}))
    a_topology = states(worker_conf(secured(zk_conf), "wc-1"), role=ROLE_TOPOLOGY)
    for intruder in (anonymous, wrong, a_topology):
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


def test_workers_write_their_own_topologys_nodes_only(zk_conf, zk_admin, states):
    nimbus = states(secured(zk_conf))
    nimbus.setup_heartbeats("wc-1")
    nimbus.setup_heartbeats("other-2")
    given = worker_conf(secured(zk_conf), "wc-1")  # what a supervisor writes for the worker
    assert "storm.zookeeper.auth.payload" not in given  # never the daemons' secret
    assert given["storm.zookeeper.topology.auth.payload"] == topology_payload(DAEMON, "wc-1")
    worker = states(given, role=ROLE_TOPOLOGY)
    hb = WorkerHeartbeat("wc-1", [(1, 1)], 6700, 10, 1)
    worker.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    worker.report_error("wc-1", "spout", "host-1", 6700, "boom")
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6700) == hb
    assert nimbus.last_error("wc-1", "spout").error == "boom"
    acls, _ = zk_admin.get_acls(zk_conf["storm.zookeeper.root"] + "/workerbeats/wc-1/sup-1-6700")
    own = digest_id(topology_payload(DAEMON, "wc-1"))
    assert set(acls) == {ACL(PERM_ALL, Id("digest", digest_id(DAEMON))), ACL(PERM_ALL, Id("digest", own)),
                         ACL(PERM_READ, Id("world", "anyone"))}
    other_hb = WorkerHeartbeat("other-2", [(1, 1)], 6701, 10, 1)
    for intruder in (states(zk_conf), worker):  # no credentials; another topology's identity
        with pytest.raises(NotAuthorizedError):
            intruder.worker_heartbeat("other-2", "sup-1", 6701, other_hb)
        with pytest.raises(NotAuthorizedError):
            intruder.report_error("other-2", "spout", "host-1", 6701, "forged")
        with pytest.raises(NotAuthorizedError):
            intruder.setup_heartbeats("wc-3")  # cannot make a topology's subtree
    with pytest.raises(NotAuthorizedError):
        states(zk_conf).worker_heartbeat("wc-1", "sup-1", 6700, hb)
    assert nimbus.worker_heartbeats("other-2") == [] and nimbus.last_error("other-2", "spout") is None
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6700) == hb
    # nimbus can still clean up what workers created
    nimbus.teardown_heartbeats("wc-1")
    nimbus.teardown_topology_errors("wc-1")
    assert nimbus.heartbeat_storms() == ["other-2"] and nimbus.error_topologies() == ["other-2"]

