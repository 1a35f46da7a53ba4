"""`storm-py dev-cluster` secures its ZooKeeper by default: the daemons' digest credentials are
made at the first start and kept; a client without them reads but writes nothing; each
topology's workers hold only their topology's own identity, which writes only its nodes."""

from __future__ import annotations

import json
import shutil

import pytest
from devcluster_helpers import ROOT, running_dev_cluster, storm_py
from testutil import wait_until

from cluster_state import NotAuthorizedError, WorkerHeartbeat
from cluster_state.auth import PERM_ALL, PERM_READ, digest_id, topology_payload
from cluster_state.factory import mk_storm_cluster_state
from daemons.devcluster import CREDENTIALS_FILE

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

FAST = ["-c", "nimbus.monitor.freq.secs=1", "-c", "supervisor.monitor.frequency.secs=1",
        "-c", "supervisor.heartbeat.frequency.secs=1"]
TOPOLOGY = ROOT / "examples" / "exclamation" / "topology.py"
AUTH_KEYS = ("storm.zookeeper.auth.scheme", "storm.zookeeper.auth.payload")


def test_zookeeper_is_writable_by_the_daemons_and_each_topology_only(tmp_path):
    with running_dev_cluster(tmp_path / "dev", "--supervisors", "1", *FAST) as cluster:
        conf = cluster.conf()
        payload = conf["storm.zookeeper.auth.payload"]
        assert conf["storm.zookeeper.auth.scheme"] == "digest" and ":" in payload
        assert (cluster.base / CREDENTIALS_FILE).stat().st_mode & 0o077 == 0  # the owner's only
        assert all(s["storm.zookeeper.auth.payload"] == payload for s in cluster.supervisor_confs())

        out = storm_py("jar", "submit", str(TOPOLOGY), "--name", "secured", conf_dir=cluster.conf_dir)
        storm_id = [ln for ln in out.stdout.splitlines() if ln.startswith("submitted topology")][0].rsplit(" ", 1)[1]
        daemon = mk_storm_cluster_state(conf)
        anonymous = mk_storm_cluster_state({k: v for k, v in conf.items() if k not in AUTH_KEYS})
        try:
            wait_until(lambda: daemon.worker_heartbeats(storm_id), timeout=120, interval=0.2,
                       message=lambda: f"a worker heartbeat of {storm_id}:\n{cluster.output()}")
            # What the supervisor gave its worker: the topology's identity, never the daemons'.
            given = [json.loads(p.read_text()) for p in
                     (cluster.base / "supervisor-1").glob("workers/*/supervisor-conf.json")]
            assert given and all("storm.zookeeper.auth.payload" not in g for g in given)
            own = topology_payload(payload, storm_id)
            assert all(g["storm.zookeeper.topology.auth.payload"] == own for g in given)

            node = daemon.cluster_state.get_children(f"/workerbeats/{storm_id}")[0]
            from kazoo.client import KazooClient

            zk = KazooClient(hosts=f"127.0.0.1:{conf['storm.zookeeper.port']}/{conf['storm.zookeeper.root'].strip('/')}")
            zk.start(timeout=15)
            try:
                acls, _ = zk.get_acls(f"/workerbeats/{storm_id}/{node}")
            finally:
                zk.stop()
                zk.close()
            # (ZooKeeper shows a digest's hash to an unauthenticated reader as "x": compare users)
            assert {(a.perms, a.id.scheme, a.id.id.split(":")[0]) for a in acls} == {
                (PERM_ALL, "digest", digest_id(payload).split(":")[0]),
                (PERM_ALL, "digest", storm_id), (PERM_READ, "world", "anyone")}

            # An unauthenticated client reads what is not secret, and changes nothing.
            assignment = anonymous.assignment_info(storm_id)
            assert assignment is not None
            hb = WorkerHeartbeat(storm_id, [(1, 1)], 6700, 10, 1)
            for write in (lambda: anonymous.set_assignment(storm_id, assignment),
                          lambda: anonymous.update_storm(storm_id, status="killed"),
                          lambda: anonymous.worker_heartbeat(storm_id, "intruder", 6799, hb),
                          lambda: anonymous.remove_storm(storm_id)):
                with pytest.raises(NotAuthorizedError):
                    write()
            assert daemon.storm_base(storm_id).status == "active"
            assert daemon.get_worker_heartbeat(storm_id, "intruder", 6799) is None
            listing = storm_py("list", conf_dir=cluster.conf_dir).stdout
            assert "secured" in listing and "ACTIVE" in listing, listing
        finally:
            anonymous.disconnect()
            daemon.disconnect()
