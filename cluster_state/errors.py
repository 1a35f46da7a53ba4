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


class NodeTooLargeError(ClusterStateError, ValueError):
    """A write would exceed ZooKeeper's request limit (jute.maxbuffer); nothing was sent.

    `what` names the record when the writer knows it (e.g. "assignment of topology wc-1").
    """

    def __init__(self, path: str, size: int, limit: int, what: str | None = None) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        self.what = what
        subject = f"{what} ({size} bytes encoded)" if what else f"{size} bytes"
        super().__init__(
            f"cannot write {subject} to {path}: ZooKeeper takes at most {limit} bytes for this node "
            f"(its jute.maxbuffer request limit, less the path and request header)")

    def naming(self, what: str) -> NodeTooLargeError:
        """The same error, naming the record that did not fit."""
        return NodeTooLargeError(self.path, self.size, self.limit, what)


class LocalStateError(ClusterStateError, OSError):
    """The LocalState directory itself cannot be used (not a directory, not accessible)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"LocalState {path}: {reason}")

    def __str__(self) -> str:
        # OSError would format itself from errno/strerror, which we do not set.
        return f"LocalState {self.path}: {self.reason}"

