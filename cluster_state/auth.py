"""ZooKeeper authentication and ACLs from the `storm.zookeeper.*auth*` keys (pure, no kazoo).

When the daemons' credentials are configured (`storm.zookeeper.auth.scheme: digest`,
`storm.zookeeper.auth.payload: user:password`), every node the cluster creates gets an ACL that
lets anyone read it (nothing storm-py keeps in ZooKeeper is secret: secrets live in confs on
disk) and only the daemons' identity change it, except a topology's own nodes (its worker
heartbeats and errors), which its own identity may change too. As Storm gives each topology
a ZooKeeper identity of its own, each topology's identity here is derived from the daemons'
secret and the topology id (`topology_payload`): Nimbus and every supervisor compute it
without storing it, and a worker is given only its own (`worker_conf`), never the daemons'.
A worker's ACLs name the daemons' identity by its digest (`storm.zookeeper.superACL`, Storm's
key), which is not a secret.

Daemon credentials of another scheme than digest keep the earlier rule (every configured
identity may change every node), through ZooKeeper's `auth` pseudo-scheme (whoever created the
node, as authenticated).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Mapping

from .config import ConfigError

PERM_READ = 1
PERM_WRITE = 2
PERM_CREATE = 4
PERM_DELETE = 8
PERM_ADMIN = 16
PERM_ALL = 31

ROLE_DAEMON = "daemon"
ROLE_TOPOLOGY = "topology"
SUPER_ACL_KEY = "storm.zookeeper.superACL"  # "digest:user:hash", the daemons' identity (not a secret)
# The subtrees whose children belong to one topology: /workerbeats/<storm id>, /errors/<storm id>.
TOPOLOGY_SUBTREES = ("workerbeats", "errors")

_KEYS = {
    ROLE_DAEMON: ("storm.zookeeper.auth.scheme", "storm.zookeeper.auth.payload"),
    ROLE_TOPOLOGY: ("storm.zookeeper.topology.auth.scheme", "storm.zookeeper.topology.auth.payload"),
}


@dataclass(frozen=True)
class Credentials:
    scheme: str
    payload: str

    def __repr__(self) -> str:  # never log the secret
        return f"Credentials(scheme={self.scheme!r}, payload=<hidden>)"


@dataclass(frozen=True)
class AclEntry:
    perms: int
    scheme: str
    id: str


def credentials(conf: Mapping[str, Any], role: str = ROLE_DAEMON) -> Credentials | None:
    """The credentials a client in `role` ("daemon" or "topology") authenticates with, if any."""
    if role not in _KEYS:
        raise ValueError(f"role must be {ROLE_DAEMON!r} or {ROLE_TOPOLOGY!r}, got {role!r}")
    scheme_key, payload_key = _KEYS[role]
    scheme, payload = conf.get(scheme_key), conf.get(payload_key)
    if scheme is None and payload is None:
        return None
    if not isinstance(scheme, str) or not scheme:
        raise ConfigError(f"config key {scheme_key!r} must be set when {payload_key!r} is")
    if not isinstance(payload, str) or not payload:
        raise ConfigError(f"config key {payload_key!r} must be set when {scheme_key!r} is")
    if scheme == "digest" and ":" not in payload:
        raise ConfigError(f"config key {payload_key!r} must be 'user:password' for the digest scheme")
    return Credentials(scheme, payload)


def digest_id(payload: str) -> str:
    """ZooKeeper's digest identity for `user:password`: `user:base64(sha1(user:password))`."""
    user = payload.split(":", 1)[0]
    digest = base64.b64encode(hashlib.sha1(payload.encode("utf-8")).digest()).decode("ascii")
    return f"{user}:{digest}"


def topology_payload(daemon_payload: str, storm_id: str) -> str:
    """A topology's own digest credentials, `storm_id:password`, derived from the daemons'
    secret (HMAC: nobody without that secret can compute them, and no topology's gives away
    another's)."""
    mac = hmac.new(daemon_payload.encode("utf-8"), f"storm-py topology {storm_id}".encode("utf-8"), hashlib.sha256)
    return f"{storm_id}:{mac.hexdigest()}"


def topology_of(path: str) -> str | None:
    """The topology a node belongs to (`/workerbeats/<id>/...`, `/errors/<id>/...`), or None."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] in TOPOLOGY_SUBTREES:
        return parts[1]
    return None


def super_acl(conf: Mapping[str, Any]) -> AclEntry | None:
    """The daemons' identity as an ACL entry: from their credentials, or given to a worker by
    `storm.zookeeper.superACL` ("digest:user:hash")."""
    daemon = credentials(conf, ROLE_DAEMON)
    if daemon is not None and daemon.scheme == "digest":
        return AclEntry(PERM_ALL, "digest", digest_id(daemon.payload))
    value = conf.get(SUPER_ACL_KEY)
    if value is None:
        return None
    scheme, _, ident = str(value).partition(":")
    if scheme != "digest" or ":" not in ident:
        raise ConfigError(f"config key {SUPER_ACL_KEY!r} must be 'digest:user:hash', got {value!r}")
    return AclEntry(PERM_ALL, "digest", ident)


def per_topology(conf: Mapping[str, Any]) -> bool:
    """True when topologies get identities of their own (the daemons authenticate by digest)."""
    return super_acl(conf) is not None


def worker_conf(conf: Mapping[str, Any], storm_id: str) -> dict[str, Any]:
    """What a supervisor gives a worker of `storm_id`: its conf with the daemons' credentials
    replaced by the topology's own (and the daemons' identity by its digest, for the ACLs the
    worker sets on the nodes it creates). Unchanged without per-topology identities."""
    daemon = credentials(conf, ROLE_DAEMON)
    if daemon is None or daemon.scheme != "digest":
        return dict(conf)
    out = {k: v for k, v in conf.items() if k not in _KEYS[ROLE_DAEMON]}
    out[SUPER_ACL_KEY] = f"digest:{digest_id(daemon.payload)}"
    out["storm.zookeeper.topology.auth.scheme"] = "digest"
    out["storm.zookeeper.topology.auth.payload"] = topology_payload(daemon.payload, storm_id)
    return out


def topology_identity(conf: Mapping[str, Any], storm_id: str) -> AclEntry | None:
    """The ACL entry of `storm_id`'s own identity, as this client knows it: derived (a daemon),
    or its own credentials (a worker of that topology)."""
    daemon = credentials(conf, ROLE_DAEMON)
    if daemon is not None and daemon.scheme == "digest":
        return AclEntry(PERM_ALL, "digest", digest_id(topology_payload(daemon.payload, storm_id)))
    mine = credentials(conf, ROLE_TOPOLOGY)
    if mine is not None and mine.scheme == "digest":
        return AclEntry(PERM_ALL, "digest", digest_id(mine.payload))
    return None


def acl_entries(conf: Mapping[str, Any], path: str | None = None) -> list[AclEntry] | None:
    """The ACL for a node this cluster creates at `path`, or None (ZooKeeper's open ACL) without
    credentials. With per-topology identities: the daemons ALL, the topology's own identity ALL
    on its own nodes, everyone READ."""
    daemons = super_acl(conf)
    if daemons is not None:
        entries = [daemons]
        storm_id = topology_of(path) if path else None
        own = topology_identity(conf, storm_id) if storm_id else None
        if own is not None and own not in entries:
            entries.append(own)
        entries.append(AclEntry(PERM_READ, "world", "anyone"))
        return entries
    creds = [c for c in (credentials(conf, ROLE_DAEMON), credentials(conf, ROLE_TOPOLOGY)) if c is not None]
    if not creds:
        return None
    entries: list[AclEntry] = []
    for cred in creds:
        if cred.scheme == "digest":
            entry = AclEntry(PERM_ALL, "digest", digest_id(cred.payload))
        else:
            entry = AclEntry(PERM_ALL, "auth", "")
        if entry not in entries:
            entries.append(entry)
    entries.append(AclEntry(PERM_READ, "world", "anyone"))
    return entries
