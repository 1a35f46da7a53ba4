"""Storm's ZooKeeper layout under `storm.zookeeper.root` (docs/architecture.md, "ZooKeeper layout"; Storm's ClusterUtils.java), as pure functions.

All paths here are relative to the root (the clients apply the chroot), e.g.
`/assignments/wordcount-1-1700000000`.
"""

from __future__ import annotations

ASSIGNMENTS_ROOT = "assignments"
STORMS_ROOT = "storms"
SUPERVISORS_ROOT = "supervisors"
WORKERBEATS_ROOT = "workerbeats"
ERRORS_ROOT = "errors"
LOGCONFIGS_ROOT = "logconfigs"
# Nimbus HA (Storm's ClusterUtils.java NIMBUSES_ROOT, LeaderElectorImp's leader latch).
NIMBUSES_ROOT = "nimbuses"
LEADER_LOCK_ROOT = "leader-lock"
# Swaps Nimbus runs, by topology name (daemons/nimbus/swaps/; beyond Storm).
SWAPS_ROOT = "swaps"

ASSIGNMENTS_SUBTREE = "/" + ASSIGNMENTS_ROOT
STORMS_SUBTREE = "/" + STORMS_ROOT
SUPERVISORS_SUBTREE = "/" + SUPERVISORS_ROOT
WORKERBEATS_SUBTREE = "/" + WORKERBEATS_ROOT
ERRORS_SUBTREE = "/" + ERRORS_ROOT
LOGCONFIGS_SUBTREE = "/" + LOGCONFIGS_ROOT
NIMBUSES_SUBTREE = "/" + NIMBUSES_ROOT
SWAPS_SUBTREE = "/" + SWAPS_ROOT
LEADER_LOCK_PATH = "/" + LEADER_LOCK_ROOT

ALL_SUBTREES = (ASSIGNMENTS_SUBTREE, STORMS_SUBTREE, SUPERVISORS_SUBTREE, WORKERBEATS_SUBTREE, ERRORS_SUBTREE,
                LOGCONFIGS_SUBTREE)

# Prefix of the sequential error nodes; ZooKeeper appends a 10-digit sequence number.
ERROR_NODE_PREFIX = "e"

_FORBIDDEN_SEGMENTS = {"", ".", ".."}


def check_segment(value: object, what: str) -> str:
    """A single path segment (topology id, supervisor id, component id, node id)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__} {value!r}")
    if value in _FORBIDDEN_SEGMENTS or "/" in value or "\x00" in value:
        raise ValueError(f"{what} {value!r} cannot be used as a ZooKeeper node name")
    return value


def normalize_path(path: str) -> str:
    """`a//b/` -> `/a/b`; the root is `/`. Raises ValueError on `.`/`..` segments."""
    parts = [p for p in path.split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise ValueError(f"relative segment in path {path!r}")
    return "/" + "/".join(parts)


def parent_path(path: str) -> str:
    parts = tokenize_path(path)
    return "/" + "/".join(parts[:-1])


def tokenize_path(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


def assignment_path(storm_id: str) -> str:
    return f"{ASSIGNMENTS_SUBTREE}/{check_segment(storm_id, 'topology id')}"


def storm_path(storm_id: str) -> str:
    return f"{STORMS_SUBTREE}/{check_segment(storm_id, 'topology id')}"


def supervisor_path(supervisor_id: str) -> str:
    return f"{SUPERVISORS_SUBTREE}/{check_segment(supervisor_id, 'supervisor id')}"


def nimbus_path(nimbus_id: str) -> str:
    """`/nimbuses/{host:port}`: one running Nimbus's registration (ephemeral)."""
    return f"{NIMBUSES_SUBTREE}/{check_segment(nimbus_id, 'nimbus id')}"


def workerbeat_storm_root(storm_id: str) -> str:
    return f"{WORKERBEATS_SUBTREE}/{check_segment(storm_id, 'topology id')}"


def node_port_name(node: str, port: int) -> str:
    """`{node}-{port}`, the name of a worker heartbeat node."""
    check_segment(node, "node id")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an int in 0..65535, got {port!r}")
    return f"{node}-{port}"


def parse_node_port(name: str) -> tuple[str, int]:
    """Inverse of node_port_name; the node id may itself contain dashes."""
    node, sep, port = name.rpartition("-")
    if not sep or not node or not port.isdigit():
        raise ValueError(f"{name!r} is not a {{node}}-{{port}} heartbeat node name")
    return node, int(port)


def workerbeat_path(storm_id: str, node: str, port: int) -> str:
    return f"{workerbeat_storm_root(storm_id)}/{node_port_name(node, port)}"


def error_storm_root(storm_id: str) -> str:
    return f"{ERRORS_SUBTREE}/{check_segment(storm_id, 'topology id')}"


def error_path(storm_id: str, component_id: str) -> str:
    return f"{error_storm_root(storm_id)}/{check_segment(component_id, 'component id')}"


def swap_path(name: str) -> str:
    return f"{SWAPS_SUBTREE}/{check_segment(name, 'topology name')}"


def log_config_path(storm_id: str) -> str:
    """`/logconfigs/{storm-id}`: the topology's dynamic log levels (Storm's logConfigPath)."""
    return f"{LOGCONFIGS_SUBTREE}/{check_segment(storm_id, 'topology id')}"


def error_sequence(child: str) -> int | None:
    """The sequence number of an error node name `e0000000042`, or None for other names."""
    if not child.startswith(ERROR_NODE_PREFIX):
        return None
    digits = child[len(ERROR_NODE_PREFIX):]
    return int(digits) if digits.isdigit() else None
