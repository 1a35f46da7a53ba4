"""Upgrading a cluster that ran without ZooKeeper credentials, and rotating them, as an operator
does it (docs/operations.md, "Security"): credentials into storm.yaml, then
`storm-py secure zookeeper` once; on a real ZooKeeper, through the real command."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from kazoo.security import ACL, Id

from cluster_state import (
    ROLE_TOPOLOGY,
    Assignment,
    NotAuthorizedError,
    StormBase,
    WorkerHeartbeat,
)
from cluster_state.auth import PERM_ALL, digest_id, topology_payload, worker_conf

pytestmark = [pytest.mark.timeout(120), pytest.mark.zk]

OLD = "storm-py:before-rotation"
NEW = "storm-py:after-rotation"


def assignment(port: int) -> Assignment:
    return Assignment("/code", {"sup-1": "host-1"}, {(1, 1): ("sup-1", port)}, {(1, 1): 1})


def with_payload(conf, payload):
    return dict(conf, **{"storm.zookeeper.auth.scheme": "digest", "storm.zookeeper.auth.payload": payload})




def secure(tmp_path, conf, *extra) -> str:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "daemons.cli", "secure", "zookeeper", "--conf-dir", str(conf_dir),
                           *extra], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_open_cluster_is_secured_then_its_credentials_rotated(zk_conf, zk_admin, tmp_path, states):
    # A cluster that ran without credentials: its nodes are open to anyone.
    open_nimbus = states(zk_conf)
    open_nimbus.set_assignment("wc-1", assignment(6700))
    open_nimbus.activate_storm("wc-1", StormBase("wc", 1, "active", 1, {"spout": 1}))
    open_nimbus.setup_heartbeats("wc-1")
    hb = WorkerHeartbeat("wc-1", [(1, 1)], 6700, 10, 1)
    open_nimbus.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    states(zk_conf).set_assignment("wc-1", assignment(6700))  # anyone could change it

    out = secure(tmp_path, with_payload(zk_conf, OLD))
    assert "ACL(s) set" in out and " 0 ACL(s) set" not in out, out
    anonymous = states(zk_conf)
    with pytest.raises(NotAuthorizedError):
        anonymous.set_assignment("wc-1", assignment(9999))
    with pytest.raises(NotAuthorizedError):
        anonymous.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    with pytest.raises(NotAuthorizedError):
        anonymous.set_assignment("wc-2", assignment(9999))
    assert anonymous.assignment_info("wc-1") == assignment(6700)  # still readable
    # the daemons and the topology's own workers go on writing
    nimbus = states(with_payload(zk_conf, OLD))
    nimbus.update_storm("wc-1", status="inactive")
    worker = states(worker_conf(with_payload(zk_conf, OLD), "wc-1"), role=ROLE_TOPOLOGY)
    worker.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    acls, _ = zk_admin.get_acls(zk_conf["storm.zookeeper.root"] + "/workerbeats/wc-1/sup-1-6700")
    assert ACL(PERM_ALL, Id("digest", digest_id(topology_payload(OLD, "wc-1")))) in acls
    assert " 0 ACL(s) set" in secure(tmp_path, with_payload(zk_conf, OLD))  # nothing left to do

    # Rotation: the new credentials, authenticated with the old ones once more.
    secure(tmp_path, with_payload(zk_conf, NEW), "--previous-payload", OLD)
    with pytest.raises(NotAuthorizedError):
        states(with_payload(zk_conf, OLD)).set_assignment("wc-1", assignment(9999))
    with pytest.raises(NotAuthorizedError):  # the old topology identity too
        states(worker_conf(with_payload(zk_conf, OLD), "wc-1"), role=ROLE_TOPOLOGY).worker_heartbeat(
            "wc-1", "sup-1", 6700, hb)
    renewed = states(with_payload(zk_conf, NEW))
    renewed.set_assignment("wc-1", assignment(6701))
    states(worker_conf(with_payload(zk_conf, NEW), "wc-1"), role=ROLE_TOPOLOGY).worker_heartbeat(
        "wc-1", "sup-1", 6700, hb)
    assert renewed.assignment_info("wc-1") == assignment(6701)


def test_the_command_names_what_is_missing(tmp_path, zk_conf):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump(zk_conf), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "daemons.cli", "secure", "zookeeper", "--conf-dir", str(conf_dir)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "storm.zookeeper.auth.scheme" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
