"""In-memory ClusterState for local mode, with ZooKeeper's semantics.

An InMemoryStore plays the server: one tree, shared by any number of InMemoryClusterState
clients in the process. Watches are one-shot and per client, ephemeral nodes belong to the
client that created them and vanish when it closes, sequential names use the parent's child
version like ZooKeeper. Each client delivers its events on its own event thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass, field

from .dispatch import CallbackHub, EventDispatcher
from .errors import ClusterStateError, ClusterStateUnavailableError, NodeExistsError, NoNodeError
from .paths import normalize_path, parent_path
from .protocol import ConnectionState, EventType, WatchCallback, check_node_data

log = logging.getLogger(__name__)

_client_ids = itertools.count(1)


@dataclass
class _Node:
    data: bytes
    owner: int | None = None  # client id for ephemeral nodes
    version: int = 0
    cversion: int = 0
    children: set[str] = field(default_factory=set)


class InMemoryStore:
    """The shared tree. Thread-safe; clients call it, never user code."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {"/": _Node(b"")}
        # path -> clients with a data (get/exists) or child watch armed on it
        self._data_watches: dict[str, set[InMemoryClusterState]] = {}
        self._child_watches: dict[str, set[InMemoryClusterState]] = {}

    # -- reads -------------------------------------------------------------------------------

    def get(self, path: str, watcher: InMemoryClusterState | None) -> tuple[bytes, int] | None:
        with self._lock:
            if watcher is not None:
                self._data_watches.setdefault(path, set()).add(watcher)
            node = self._nodes.get(path)
            return None if node is None else (node.data, node.version)

    def children(self, path: str, watcher: InMemoryClusterState | None) -> list[str]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watcher is not None:
                self._child_watches.setdefault(path, set()).add(watcher)
            return sorted(node.children)

    def node_names(self) -> list[str]:
        """Every path in the store (for tests and debugging)."""
        with self._lock:
            return sorted(self._nodes)

    # -- writes ------------------------------------------------------------------------------

    def create(self, path: str, data: bytes, owner: int | None = None, sequential: bool = False) -> str:
        with self._lock:
            parent_name = parent_path(path)
            parent = self._nodes.get(parent_name)
            if parent is None:
                raise NoNodeError(parent_name, f"parent of {path}")
            if parent.owner is not None:
                raise ClusterStateError(f"cannot create {path}: ephemeral nodes have no children")
            if sequential:
                path = f"{path}{parent.cversion:010d}"
            if path in self._nodes:
                raise NodeExistsError(path)
            self._nodes[path] = _Node(bytes(data), owner=owner)
            parent.children.add(path.rsplit("/", 1)[1])
            parent.cversion += 1
            self._fire(self._data_watches, path, EventType.CREATED)
            self._fire(self._child_watches, parent_name, EventType.CHILD)
            return path

    def set(self, path: str, data: bytes) -> None:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            node.data = bytes(data)
            node.version += 1
            self._fire(self._data_watches, path, EventType.CHANGED)

    def delete(self, path: str) -> None:
        """Delete one childless node."""
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if node.children:
                raise ClusterStateError(f"cannot delete {path}: it has children")
            if path == "/":
                raise ClusterStateError("cannot delete /")
            del self._nodes[path]
            parent_name = parent_path(path)
            parent = self._nodes[parent_name]
            parent.children.discard(path.rsplit("/", 1)[1])
            parent.cversion += 1
            # A client watching both data and children of the node still gets one DELETED.
            watchers = self._data_watches.pop(path, set()) | self._child_watches.pop(path, set())
            for client in watchers:
                client._watch_fired(EventType.DELETED, path)
            self._fire(self._child_watches, parent_name, EventType.CHILD)

    def delete_if_version(self, path: str, version: int) -> bool:
        with self._lock:
            node = self._nodes.get(path)
            if node is None or node.version != version:
                return False
            self.delete(path)
            return True

    def owner_of(self, path: str) -> int | None:
        with self._lock:
            node = self._nodes.get(path)
            return None if node is None else node.owner

    def drop_client(self, client: InMemoryClusterState) -> None:
        """The client closed: its ephemeral nodes go (firing others' watches), its watches too."""
        with self._lock:
            for table in (self._data_watches, self._child_watches):
                for path in [p for p, clients in table.items() if client in clients]:
                    table[path].discard(client)
                    if not table[path]:
                        del table[path]
            owned = [p for p, n in self._nodes.items() if n.owner == client.client_id]
            for path in sorted(owned, key=len, reverse=True):
                self.delete(path)

    def _fire(self, table: dict[str, set[InMemoryClusterState]], path: str, event: EventType) -> None:
        # One-shot: the watch is consumed as it fires. Clients only enqueue (never block).
        for client in table.pop(path, set()):
            client._watch_fired(event, path)


class InMemoryClusterState:
    """A client of an InMemoryStore, rooted at `root` (the store-side equivalent of a chroot)."""

    def __init__(self, store: InMemoryStore, root: str = "/", name: str | None = None) -> None:
        self.store = store
        self.client_id = next(_client_ids)
        self._root = normalize_path(root)
        self._closed = False
        self._close_lock = threading.Lock()
        self._dispatcher = EventDispatcher(name or f"cluster-state-mem-{self.client_id}")
        self._hub = CallbackHub()
        self._dispatcher.start()
        self._mkdirs_abs(self._root)

    # -- path mapping ------------------------------------------------------------------------

    def _abs(self, path: str) -> str:
        if self._closed:
            raise ClusterStateUnavailableError("in-memory cluster state is closed")
        path = normalize_path(path)
        return self._root if path == "/" else normalize_path(self._root + path)

    def _rel(self, path: str) -> str:
        if self._root == "/":
            return path
        return path[len(self._root):] or "/"

    def _watch_fired(self, event: EventType, abs_path: str) -> None:
        # Called by the store under its lock: only enqueue.
        if abs_path == self._root or abs_path.startswith(self._root.rstrip("/") + "/"):
            self._dispatcher.submit(self._deliver, event, self._rel(abs_path))

    def _deliver(self, event: EventType, path: str) -> None:
        if not self._closed:  # like a closed ZooKeeper client: nothing after close()
            self._hub.deliver(event, path)

    # -- ClusterState ------------------------------------------------------------------------

    def set_ephemeral_node(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        data = check_node_data(path, data, full)
        self._mkdirs_abs(parent_path(full))
        for _ in range(10):
            owner = self.store.owner_of(full)
            try:
                if owner == self.client_id:
                    self.store.set(full, data)
                    return
                if self.store.get(full, None) is not None:
                    # Persistent, or another client's (e.g. a previous incarnation): take it over.
                    self.store.delete(full)
                self.store.create(full, data, owner=self.client_id)
                return
            except (NoNodeError, NodeExistsError):
                continue  # raced with another writer; look again
        raise ClusterStateError(f"could not set ephemeral node {path}: it keeps changing")

    def create_sequential(self, path: str, data: bytes) -> str:
        return self._create_sequential(path, data, None)

    def create_ephemeral_sequential(self, path: str, data: bytes) -> str:
        return self._create_sequential(path, data, self.client_id)

    def _create_sequential(self, path: str, data: bytes, owner: int | None) -> str:
        full = self._abs(path)
        data = check_node_data(path, data, full)
        self._mkdirs_abs(parent_path(full))
        return self._rel(self.store.create(full, data, owner=owner, sequential=True))

    def owns_ephemeral(self, path: str) -> bool:
        return self.store.owner_of(self._abs(path)) == self.client_id

    def delete_if_version(self, path: str, version: int) -> bool:
        return self.store.delete_if_version(self._abs(path), version)

    def set_data(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        data = check_node_data(path, data, full)
        for _ in range(10):
            try:
                self.store.set(full, data)
                return
            except NoNodeError:
                pass
            self._mkdirs_abs(parent_path(full))
            try:
                self.store.create(full, data)
                return
            except (NodeExistsError, NoNodeError):
                continue
        raise ClusterStateError(f"could not set data of {path}: it keeps changing")

    def get_data(self, path: str, watch: bool = False) -> bytes | None:
        found = self.get_data_with_version(path, watch)
        return None if found is None else found[0]

    def get_data_with_version(self, path: str, watch: bool = False) -> tuple[bytes, int] | None:
        return self.store.get(self._abs(path), self if watch else None)

    def get_version(self, path: str, watch: bool = False) -> int | None:
        found = self.get_data_with_version(path, watch)
        return None if found is None else found[1]

    def get_children(self, path: str, watch: bool = False) -> list[str]:
        full = self._abs(path)
        try:
            return self.store.children(full, self if watch else None)
        except NoNodeError:
            raise NoNodeError(normalize_path(path)) from None

    def exists(self, path: str, watch: bool = False) -> bool:
        return self.get_data_with_version(path, watch) is not None

    def delete_node(self, path: str) -> None:
        full = self._abs(path)
        if full == self._root:
            raise ClusterStateError("refusing to delete the root of this cluster state")
        self._delete_recursive(full)

    def _delete_recursive(self, full: str) -> None:
        for _ in range(10):
            try:
                children = self.store.children(full, None)
            except NoNodeError:
                return
            for child in children:
                self._delete_recursive(f"{full}/{child}")
            try:
                self.store.delete(full)
                return
            except NoNodeError:
                return
            except ClusterStateError:
                continue  # a child appeared meanwhile; go again
        raise ClusterStateError(f"could not delete {full}: children keep appearing")

    def mkdirs(self, path: str) -> None:
        self._mkdirs_abs(self._abs(path))

    def _mkdirs_abs(self, full: str) -> None:
        current = ""
        for part in [p for p in full.split("/") if p]:
            current += "/" + part
            if self.store.get(current, None) is None:
                try:
                    self.store.create(current, b"")
                except NodeExistsError:
                    pass

    def register(self, callback: WatchCallback) -> str:
        return self._hub.register(callback)

    def unregister(self, callback_id: str) -> None:
        self._hub.unregister(callback_id)

    @property
    def connection_state(self) -> ConnectionState:
        return ConnectionState.CLOSED if self._closed else ConnectionState.CONNECTED

    def disconnected_for(self) -> float:
        return 0.0

    def reconnects(self) -> int:
        return 0

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.store.drop_client(self)
        self._dispatcher.stop()

    def __repr__(self) -> str:
        return f"InMemoryClusterState(client_id={self.client_id}, root={self._root!r})"
