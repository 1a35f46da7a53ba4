"""ZooKeeper authentication and ACLs from the `storm.zookeeper.*auth*` keys (pure, no kazoo).

When credentials are configured, every node the cluster creates gets an ACL that lets anyone
read it but only the configured identities change it: all permissions for the daemons'
identity and the workers' (topology) identity, READ for the world. With the digest scheme both
identities are named explicitly, so nodes nimbus creates stay writable by workers (their
heartbeats and errors) and the other way round. Other schemes fall back to ZooKeeper's `auth`
pseudo-scheme (whoever created the node, as authenticated).
"""

from __future__ import annotations

import base64
import hashlib
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


def acl_entries(conf: Mapping[str, Any]) -> list[AclEntry] | None:
    """The ACL for nodes this cluster creates, or None (ZooKeeper's open ACL) without credentials."""
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
