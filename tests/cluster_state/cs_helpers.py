"""Helpers shared by the cluster-state tests (imported by basename; pytest puts this dir on sys.path)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from zk_fixture import wait_until

from cluster_state import EventType, InMemoryClusterState, InMemoryStore

_sentinels = itertools.count()


class Recorder:
    """A watch callback that records (event type, path) and the thread it ran on."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []
        self.threads: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, event_type: EventType, path: str) -> None:
        with self._lock:
            self.events.append((event_type, path))
            self.threads.append(threading.current_thread().name)

    def for_path(self, path: str) -> list[EventType]:
        with self._lock:
            return [e for e, p in self.events if p == path]

    def wait_for(self, event_type: EventType, path: str, count: int = 1, timeout: float = 10.0) -> None:
        wait_until(lambda: self.for_path(path).count(event_type) >= count, timeout,
                   lambda: f"{count} x {event_type.value} on {path}; got {self.events}")


def flush_events(watcher: Any, writer: Any, base: str = "", timeout: float = 10.0) -> None:
    """Return once every event caused by earlier writes has been delivered on `watcher`.

    A client gets its events in the order of the writes that caused them, and runs callbacks
    in order on one thread, so once a watch on a fresh sentinel node (fired by a later write)
    has been delivered, so has everything before it. Lets tests assert that something did
    *not* happen without sleeping.
    """
    recorder = Recorder()
    callback_id = watcher.register(recorder)
    path = f"{base}/sentinel-{next(_sentinels)}"
    try:
        assert watcher.get_data(path, watch=True) is None
        writer.set_data(path, b"s")
        recorder.wait_for(EventType.CREATED, path, timeout=timeout)
    finally:
        watcher.unregister(callback_id)
        writer.delete_node(path)


def make_backend(request: pytest.FixtureRequest, kind: str):
    """(factory, close_all): ClusterState clients sharing one store/server and root."""
    clients: list[Any] = []
    if kind == "memory":
        store = InMemoryStore()

        def make() -> Any:
            return InMemoryClusterState(store, "/storm")
    else:
        from cluster_state.zk import ZkClusterState

        conf = request.getfixturevalue("zk_conf")

        def make() -> Any:
            return ZkClusterState(conf)

    def factory() -> Any:
        client = make()
        clients.append(client)
        return client

    def close_all() -> None:
        for client in clients:
            client.close()

    return factory, close_all


class TcpProxy:
    """A loopback TCP proxy in front of a server, to cut one client off (a network partition)
    while the server and its other clients carry on. `cut()` closes every proxied connection
    and refuses new ones; `resume()` accepts again on the same port. One named thread."""

    def __init__(self, target_host: str, target_port: int) -> None:
        import socket

        self.target = (target_host, target_port)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        import socket

        if self._thread is not None:
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(listener,), name="test-tcp-proxy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive(), "proxy thread did not stop"
        self._thread = None

    cut = stop
    resume = start

    def _run(self, listener: Any) -> None:
        import selectors
        import socket

        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ, None)
        peers: dict[Any, Any] = {}

        def close(sock: Any) -> None:
            other = peers.pop(sock, None)
            for s in (sock, other):
                if s is not None:
                    peers.pop(s, None)
                    sel.unregister(s)
                    s.close()

        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.05):
                    sock = key.fileobj
                    if sock is listener:
                        client, _ = listener.accept()
                        try:
                            upstream = socket.create_connection(self.target, timeout=5)
                        except OSError:
                            client.close()
                            continue
                        peers[client], peers[upstream] = upstream, client
                        sel.register(client, selectors.EVENT_READ, None)
                        sel.register(upstream, selectors.EVENT_READ, None)
                        continue
                    if sock not in peers:
                        continue
                    try:
                        data = sock.recv(65536)
                        if data:
                            peers[sock].sendall(data)
                            continue
                    except OSError:
                        pass
                    close(sock)
        finally:
            for sock in list(peers):
                if sock in peers:
                    close(sock)
            sel.unregister(listener)
            listener.close()
            sel.close()
