"""The ClusterState protocol (seed 004): what StormClusterState needs from a ZooKeeper-like store.

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
- Ephemeral nodes belong to the client that set them and vanish when it closes (or its
  ZooKeeper session expires; the ZooKeeper client then re-creates them in its next session).
"""

from __future__ import annotations

import enum
from typing import Callable, Protocol, runtime_checkable


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

    def close(self) -> None:
        """Idempotent; ephemeral nodes of this client go away."""
