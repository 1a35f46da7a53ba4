"""Every running Nimbus registers itself under `/nimbuses/{host:port}` (ephemeral; Storm's
NimbusInfo and ClusterUtils.java NIMBUSES_ROOT): host, port, start time, version and whether
it led when it last wrote. Readers take "who leads" from the leader latch (daemons/nimbus/leader.py),
which is authoritative, as Storm's getClusterInfo does.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from cluster_state.errors import NoNodeError
from cluster_state.paths import NIMBUSES_SUBTREE, nimbus_path

log = logging.getLogger(__name__)

LEADER = "Leader"
NOT_A_LEADER = "Not a Leader"


def nimbus_id(host: str, port: int) -> str:
    return f"{host}:{port}"


def encode_registration(host: str, port: int, start_time_secs: int, version: str, is_leader: bool) -> bytes:
    return json.dumps({"host": host, "port": int(port), "start_time_secs": int(start_time_secs),
                       "version": version, "is_leader": bool(is_leader)}, sort_keys=True).encode()


def decode_registration(data: bytes | None) -> dict[str, Any] | None:
    try:
        value = json.loads(data or b"")
    except ValueError:
        return None
    ok = isinstance(value, dict) and isinstance(value.get("host"), str) and isinstance(value.get("port"), int)
    return value if ok else None


def register(cs: Any, host: str, port: int, start_time_secs: int, version: str, is_leader: bool) -> None:
    """(Re)write this Nimbus's ephemeral node (the cluster state re-creates it after a session expiry)."""
    cs.set_ephemeral_node(nimbus_path(nimbus_id(host, port)),
                          encode_registration(host, port, start_time_secs, version, is_leader))


def unregister(cs: Any, host: str, port: int) -> None:
    cs.delete_node(nimbus_path(nimbus_id(host, port)))


def registered(cs: Any) -> dict[str, dict[str, Any]]:
    """host:port -> registration of every Nimbus registered now (unreadable ones skipped)."""
    try:
        children = cs.get_children(NIMBUSES_SUBTREE)
    except NoNodeError:
        return {}
    out = {}
    for child in children:
        reg = decode_registration(cs.get_data(f"{NIMBUSES_SUBTREE}/{child}"))
        if reg is None:
            log.warning("skipping unreadable Nimbus registration %s", child)
            continue
        out[child] = reg
    return out


def nimbus_rows(regs: Mapping[str, Mapping[str, Any]], leader: str | None, now: float) -> list[dict[str, Any]]:
    """One row per registered Nimbus, by host:port: host, port, is_leader, status ("Leader" /
    "Not a Leader"), uptime_secs, version."""
    rows = []
    for nid, reg in sorted(regs.items()):
        is_leader = leader is not None and nid == leader
        rows.append({"host": reg["host"], "port": reg["port"], "is_leader": is_leader,
                     "status": LEADER if is_leader else NOT_A_LEADER,
                     "uptime_secs": max(0, int(now - int(reg.get("start_time_secs", now)))),
                     "version": str(reg.get("version", ""))})
    return rows


def peers(regs: Mapping[str, Any], leader: str | None, me: str) -> list[str]:
    """Where to fetch code from: the leader first, then the other registered Nimbus daemons."""
    others = sorted(n for n in regs if n != me)
    if leader is not None and leader != me:
        others = [leader] + [n for n in others if n != leader]
    return others
