"""Credentials for a cluster, and the ACLs of the nodes it already has set to what
cluster_state/auth.py gives new ones (`storm-py secure`; docs/operations.md, "Security").

A cluster that ran without ZooKeeper credentials created its nodes with ZooKeeper's open ACL
(anyone may change them). Adding credentials to storm.yaml only protects nodes created from
then on, so an upgrade walks the cluster's tree once and sets every node's ACL; the same walk,
authenticated with the previous credentials too, moves a cluster to new ones (rotation).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any, Mapping

from .auth import ROLE_DAEMON, acl_entries, credentials
from .config import ConfigError
from .settings import zk_settings

log = logging.getLogger(__name__)

DAEMON_USER = "storm-py"


def new_credentials() -> dict[str, str]:
    """Fresh daemon credentials for ZooKeeper (digest) and a secret for Nimbus, the UI and the
    logviewer (`storm-py secure credentials` adds the CurveZMQ key pair)."""
    return {
        "storm.zookeeper.auth.scheme": "digest",
        "storm.zookeeper.auth.payload": f"{DAEMON_USER}:{secrets.token_urlsafe(24)}",
        "nimbus.authentication.secret": secrets.token_urlsafe(32),
    }


@dataclass
class AclReport:
    nodes: int = 0      # nodes walked
    changed: int = 0    # nodes whose ACL was set


def secure_tree(conf: Mapping[str, Any], previous_payload: str | None = None, timeout: float = 15.0) -> AclReport:
    """Set the ACL of every node under the cluster's root (and of the root) to the one this
    conf's credentials give (per-topology identities on topologies' nodes). Authenticates with
    the conf's daemon credentials, and with `previous_payload` too when rotating from them."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
    from kazoo.security import ACL, Id

    daemon = credentials(conf, ROLE_DAEMON)
    if daemon is None or daemon.scheme != "digest":
        raise ConfigError("storm.zookeeper.auth.scheme must be 'digest' with storm.zookeeper.auth.payload set "
                          "(`storm-py secure credentials` makes them)")
    auth = [("digest", daemon.payload)]
    if previous_payload:
        if ":" not in previous_payload:
            raise ConfigError("the previous payload must be 'user:password'")
        auth.append(("digest", previous_payload))
    settings = zk_settings(conf)
    root = settings.root.rstrip("/") or "/"
    client = KazooClient(hosts=settings.connect_string, auth_data=auth, timeout=timeout)
    client.start(timeout=timeout)
    report = AclReport()
    try:
        def walk(zk_path: str, rel: str) -> None:
            try:
                current, _ = client.get_acls(zk_path)
                children = client.get_children(zk_path)
            except NoNodeError:
                return
            wanted = [ACL(e.perms, Id(e.scheme, e.id)) for e in acl_entries(conf, rel)]
            report.nodes += 1
            if set(current) != set(wanted):
                client.set_acls(zk_path, wanted)
                report.changed += 1
            for child in children:
                if rel == "/" and root == "/" and child == "zookeeper":
                    continue  # ZooKeeper's own node, not the cluster's
                walk(f"{zk_path.rstrip('/')}/{child}", f"{rel.rstrip('/')}/{child}")

        walk(root, "/")
    finally:
        client.stop()
        client.close()
    log.info("ZooKeeper ACLs under %s: %d node(s), %d set", root, report.nodes, report.changed)
    return report
