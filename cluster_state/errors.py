"""Exceptions of the cluster-state layer.

Both ClusterState implementations raise these (never kazoo's own exceptions), so callers
handle ZooKeeper and local mode alike and never import kazoo.
"""

from __future__ import annotations


class ClusterStateError(Exception):
    """Base class of every cluster-state failure."""


class NoNodeError(ClusterStateError):
    """The node (or a node an operation needs) does not exist."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        super().__init__(f"no node at {path}" + (f": {detail}" if detail else ""))


class NodeExistsError(ClusterStateError):
    """A node that must not exist yet already exists."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"node already exists at {path}")


class NotAuthorizedError(ClusterStateError):
    """The node's ACL does not let this client do that (missing or wrong credentials)."""

    def __init__(self, path: str, operation: str) -> None:
        self.path = path
        self.operation = operation
        super().__init__(f"not authorized to {operation} {path} (check storm.zookeeper.*auth* settings)")


class ClusterStateUnavailableError(ClusterStateError):
    """The store cannot be reached (retries exhausted, or the client is closed)."""


class DecodeError(ClusterStateError, ValueError):
    """Data read from the store or from disk cannot be decoded (corrupt or unknown schema)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot decode data at {path}: {reason}")
