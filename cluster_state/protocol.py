"""The ClusterState protocol (Storm's cluster.clj, IStateStorage.java): what StormClusterState needs from a ZooKeeper-like store.

Two implementations share one contract (tests/cluster_state/test_cs_contract.py):
`zk.ZkClusterState` on a real ZooKeeper and `memory.InMemoryClusterState` for local mode.

Semantics both honour:
- Paths are absolute within the client's root (`storm.zookeeper.root`), e.g. `/storms/x`.
- A watched read arms a one-shot watch on that path. `get_data`/`exists`/`get_version` arm a
  data watch, which fires CHANGED on a write, DELETED on a delete and, when the node did not
  exist at read time, CREATED on its creation. `get_children` arms a child watch, which fires
  CHILD when a child is created or deleted and DELETED when the node itself goes (a missing
  node raises NoNodeError and arms nothing). A watch fires once; reading again re-arms it.
  Several watched reads of one path before it fires still fire once.
- Registered callbacks receive `(EventType, path)` for every watch of this client that fires,
  on the client's own event thread, never on the thread that wrote and never on a ZooKeeper
  I/O thread. They must not block for long: hand work to another thread.
- A write whose data would not fit in one ZooKeeper request (`check_node_data`) raises
  NodeTooLargeError naming the path and size before anything is sent.
- Ephemeral nodes belong to the client that set them and vanish when it closes (or its
  ZooKeeper session expires; the ZooKeeper client then re-creates them in its next session).
"""

from __future__ import annotations

import enum
from typing import Callable, Protocol, runtime_checkable

from .errors import NodeTooLargeError

# ZooKeeper's default jute.maxbuffer (0xfffff). The server drops the connection of a client
# whose request packet (header, path, data, ACLs) is longer; kazoo then reconnects and
# retries the same write, so without a check up front it looks like an outage.
MAX_REQUEST_BYTES = 1048575
# Room kept for the request header, length prefixes, version/flags and ACL entries
# (measured: a create with the open ACL needs 47 bytes besides path and data).
REQUEST_OVERHEAD_BYTES = 1024


def max_node_bytes(server_path: str) -> int:
    """Most data one write to `server_path` (the full path the server sees) can carry."""
    return MAX_REQUEST_BYTES - REQUEST_OVERHEAD_BYTES - len(server_path.encode("utf-8"))


def check_node_data(path: str, data: bytes, server_path: str | None = None) -> bytes:
    """`data` as bytes if one write can carry it; NodeTooLargeError naming `path` otherwise.

    Both ClusterState implementations call this before writing, so local mode refuses what
    ZooKeeper would refuse. `server_path` is the path including the client's root (chroot).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data for {path} must be bytes, got {type(data).__name__}")
    data = bytes(data)
    limit = max_node_bytes(server_path or path)
    if len(data) > limit:
        raise NodeTooLargeError(path, len(data), limit)
    return data


class EventType(str, enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"


class ConnectionState(str, enum.Enum):
    CONNECTED = "connected"
    # Connection lost; the session may still be alive. Operations retry, then fail.
    SUSPENDED = "suspended"
    # The session expired; a new one is being established.
    LOST = "lost"
    CLOSED = "closed"


WatchCallback = Callable[[EventType, str], None]


@runtime_checkable
class ClusterState(Protocol):
    def set_ephemeral_node(self, path: str, data: bytes) -> None:
        """Create or overwrite an ephemeral node owned by this client (parents are created)."""

    def create_sequential(self, path: str, data: bytes) -> str:
        """Create persistent node `path` + 10-digit sequence number; returns the full path."""

    def create_ephemeral_sequential(self, path: str, data: bytes) -> str:
        """Create ephemeral node `path` + 10-digit sequence number (parents are created); returns
        its path. Unlike set_ephemeral_node it is not re-created in a new session: its owner
        (a leader latch) joins again itself."""

    def owns_ephemeral(self, path: str) -> bool:
        """Whether `path` is an ephemeral node of this client's current session."""

    def delete_if_version(self, path: str, version: int) -> bool:
        """Delete the (childless) node if its data version is still `version`; False when it is
        gone or was changed meanwhile."""

    def set_data(self, path: str, data: bytes) -> None:
        """Overwrite a node, or create it persistent with its parents."""

    def get_data(self, path: str, watch: bool = False) -> bytes | None:
        """The node's data, or None when it does not exist."""

    def get_data_with_version(self, path: str, watch: bool = False) -> tuple[bytes, int] | None:
        """The node's data and data version, or None when it does not exist."""

    def get_version(self, path: str, watch: bool = False) -> int | None:
        """The node's data version, or None when it does not exist."""

    def get_children(self, path: str, watch: bool = False) -> list[str]:
        """Child names, sorted; NoNodeError when the node does not exist."""

    def exists(self, path: str, watch: bool = False) -> bool: ...

    def delete_node(self, path: str) -> None:
        """Delete a node and everything under it; a missing node is not an error."""

    def mkdirs(self, path: str) -> None:
        """Create the node and its missing parents, persistent and empty."""

    def register(self, callback: WatchCallback) -> str:
        """Add a watch callback; returns an id for unregister."""

    def unregister(self, callback_id: str) -> None: ...

    @property
    def connection_state(self) -> ConnectionState: ...

    def disconnected_for(self) -> float:
        """Seconds since the connection was lost (0.0 while connected)."""

    def reconnects(self) -> int:
        """How many times the connection came back after an outage (0 if it never went)."""

    def close(self) -> None:
        """Idempotent; ephemeral nodes of this client go away."""
