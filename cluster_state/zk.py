"""ClusterState on a real ZooKeeper through kazoo.

Threads: kazoo's connection and callback threads only ever enqueue onto this client's event
thread (EventDispatcher); watch callbacks, session recovery and synthetic events run there.

Connection loss. A failed attempt (connection lost, no reply) is retried up to
`storm.zookeeper.retry.times` times with exponential back-off from `.retry.interval` up to
`.retry.intervalceiling.millis`; while there is no connection an operation waits for one,
but never longer than `storm.zookeeper.connection.timeout` in all. Then it raises
ClusterStateUnavailableError, so no caller hangs on a dead server. kazoo drops all its watches whenever the connection
drops (it does not re-send them), and after a session expiry the server has removed our
ephemeral nodes. So on every (re)connection this client, on its event thread:
  1. re-creates the ephemeral nodes it owns that are missing or owned by another session;
  2. re-arms every watch it had armed, delivering the events of changes it missed
     meanwhile (watchbook.py explains how, and why a path may get one extra event).

Server death. When the server is down kazoo stays SUSPENDED and never reports LOST: the
session may still be alive when it comes back (ZooKeeper restores sessions on restart), so we
do not invent an expiry. We expose `connection_state` and `disconnected_for()` so daemons can
apply their own deadline (e.g. nimbus must not judge heartbeats while it cannot read them),
log a warning once the outage outlasts the session timeout, keep reconnecting forever, and
run the recovery above as soon as any connection is back, whichever session it is.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import KazooState, WatchedEvent
from kazoo.retry import InterruptedError as RetryInterrupted
from kazoo.retry import KazooRetry, RetryFailedError
from kazoo.security import ACL, Id

from .auth import ROLE_DAEMON, acl_entries, credentials
from .dispatch import CallbackHub, EventDispatcher
from .errors import (
    ClusterStateError,
    ClusterStateUnavailableError,
    NodeExistsError,
    NoNodeError,
    NotAuthorizedError,
)
from .paths import normalize_path
from .protocol import ConnectionState, EventType, WatchCallback, check_node_data
from .settings import ZkSettings, zk_settings
from .watchbook import ABSENT, WatchBook

log = logging.getLogger(__name__)

_EVENT_TYPES = {
    KzEventType.CREATED: EventType.CREATED,
    KzEventType.DELETED: EventType.DELETED,
    KzEventType.CHANGED: EventType.CHANGED,
    KzEventType.CHILD: EventType.CHILD,
}

# Failures worth another attempt: the connection went away or the reply did not come.
_RETRYABLE = (kz.ConnectionLoss, kz.OperationTimeoutError, kz.SessionExpiredError)


class ZkClusterState:
    """kazoo-backed ClusterState; see the module docstring for connection-loss behaviour."""

    def __init__(self, conf: Mapping[str, Any], *, role: str = ROLE_DAEMON, name: str = "cluster-state") -> None:
        self.settings: ZkSettings = zk_settings(conf)
        self._credentials = credentials(conf, role)
        self._conf = dict(conf)
        self._acl = self._acl_for("/")
        self._lock = threading.Lock()
        # Serialises ephemeral bookkeeping with its ZooKeeper writes (caller vs. recovery).
        self._eph_lock = threading.RLock()
        self._ephemerals: dict[str, bytes] = {}
        self._watches = WatchBook()
        self._connected = threading.Event()
        self._reconnects = 0  # connections that came back after an outage (Nimbus's grace)
        self._connected_once = False
        self._state = ConnectionState.LOST
        self._disconnected_since: float | None = time.monotonic()
        self._outage_warned = False
        self._session_id: int | None = None
        self._last_event: WatchedEvent | None = None
        self._closed = False
        self._client: KazooClient | None = None
        self._dispatcher = EventDispatcher(f"{name}-events")
        self._hub = CallbackHub()

        self._ensure_root()
        chroot = "" if self.settings.root == "/" else self.settings.root
        self._client = self._new_client(self.settings.connect_string + chroot)
        self._client.add_listener(self._on_state)
        self._dispatcher.start()
        try:
            self._client.start(timeout=self.settings.connection_timeout_secs)
        except KazooTimeoutError:
            self._dispatcher.stop()
            raise ClusterStateUnavailableError(
                f"cannot connect to ZooKeeper at {self.settings.connect_string} within "
                f"{self.settings.connection_timeout_secs:g}s (storm.zookeeper.connection.timeout)"
            ) from None
        log.info("connected to ZooKeeper %s root %s (session 0x%x)", self.settings.connect_string,
                 self.settings.root, self._client.client_id[0])

    # -- connection ---------------------------------------------------------------------------

    def _new_client(self, hosts: str) -> KazooClient:
        s = self.settings
        return KazooClient(
            hosts=hosts,
            timeout=s.session_timeout_secs,
            # Reconnect forever: a daemon outlives any ZooKeeper outage.
            connection_retry=KazooRetry(max_tries=-1, delay=max(s.retry_interval_secs, 0.01), backoff=2,
                                        max_delay=max(s.retry_ceiling_secs, 0.01)),
            auth_data=[(self._credentials.scheme, self._credentials.payload)] if self._credentials else None,
            default_acl=self._acl,
        )

    def _acl_for(self, path: str) -> list[ACL] | None:
        """The ACL of a node this client creates at `path` (relative to the cluster's root): a
        topology's own nodes name its identity too (cluster_state/auth.py)."""
        entries = acl_entries(self._conf, path)
        return [ACL(e.perms, Id(e.scheme, e.id)) for e in entries] if entries else None

    def _ensure_root(self) -> None:
        """Create the chroot through a short-lived client without it (kazoo cannot create its own chroot)."""
        if self.settings.root == "/":
            return
        client = self._new_client(self.settings.connect_string)
        try:
            client.start(timeout=self.settings.connection_timeout_secs)
        except KazooTimeoutError:
            raise ClusterStateUnavailableError(
                f"cannot connect to ZooKeeper at {self.settings.connect_string} within "
                f"{self.settings.connection_timeout_secs:g}s (storm.zookeeper.connection.timeout)"
            ) from None
        try:
            with self._translate("create", self.settings.root):
                self._retry(client, lambda: client.ensure_path_async(self.settings.root, self._acl))
        finally:
            client.stop()
            client.close()

    def _on_state(self, state: str) -> None:
        # kazoo connection thread: record and enqueue only, never block.
        if state == KazooState.CONNECTED:
            if self._disconnected_since is not None and self._connected_once:
                self._reconnects += 1
            self._connected_once = True
            self._state = ConnectionState.CONNECTED
            self._disconnected_since = None
            self._outage_warned = False
            self._connected.set()
            self._dispatcher.submit(self._recover)
        else:
            self._connected.clear()
            if self._closed:
                return  # our own close(), not an outage
            if self._disconnected_since is None:
                self._disconnected_since = time.monotonic()
            self._state = ConnectionState.LOST if state == KazooState.LOST else ConnectionState.SUSPENDED
            log.warning("ZooKeeper connection %s (%s)", state.lower(), self.settings.connect_string)

    @property
    def connection_state(self) -> ConnectionState:
        return ConnectionState.CLOSED if self._closed else self._state

    def reconnects(self) -> int:
        return self._reconnects

    def disconnected_for(self) -> float:
        since = self._disconnected_since
        return 0.0 if since is None or self._closed else time.monotonic() - since

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def kazoo_client(self) -> KazooClient:
        """The underlying client, for diagnostics and tests (e.g. forcing a session expiry)."""
        return self._client

    # -- operation plumbing -------------------------------------------------------------------

    def _retry(self, client: KazooClient, start: Callable[[], Any]) -> Any:
        """Run one async kazoo call with a bounded wait, retrying retryable failures."""
        s = self.settings
        timeout = s.connection_timeout_secs
        deadline = time.monotonic() + timeout

        def attempt() -> Any:
            if self._closed:
                raise kz.ConnectionClosedError("cluster state is closed")
            # kazoo would queue the request until a connection comes back, however long that takes.
            if client is self._client and not self._connected.wait(max(0.0, deadline - time.monotonic())):
                raise kz.ConnectionLoss("not connected")
            try:
                return start().get(timeout=timeout)
            except KazooTimeoutError:
                raise kz.OperationTimeoutError("no reply within connection timeout") from None

        # retry.times counts retries, KazooRetry counts attempts. Back-off sleeps end early on close().
        retry = KazooRetry(max_tries=s.retry_times + 1, delay=s.retry_interval_secs, backoff=2,
                           max_delay=s.retry_ceiling_secs, ignore_expire=True, deadline=timeout,
                           interrupt=lambda: self._closed)
        return retry(attempt)

    @contextmanager
    def _translate(self, operation: str, path: str) -> Iterator[None]:
        """kazoo exceptions -> cluster_state.errors, so callers never import kazoo."""
        try:
            yield
        except kz.NoNodeError:
            raise NoNodeError(path) from None
        except kz.NodeExistsError:
            raise NodeExistsError(path) from None
        except kz.NoAuthError:
            raise NotAuthorizedError(path, operation) from None
        except (RetryFailedError, RetryInterrupted, kz.ConnectionClosedError, *_RETRYABLE) as exc:
            self._maybe_warn_outage()
            raise ClusterStateUnavailableError(
                f"{operation} {path}: ZooKeeper {self.settings.connect_string} unavailable ({exc!r})"
            ) from None
        except kz.KazooException as exc:
            raise ClusterStateError(f"{operation} {path}: {exc!r}") from None

    def _maybe_warn_outage(self) -> None:
        down = self.disconnected_for()
        if down > self.settings.session_timeout_secs and not self._outage_warned:
            self._outage_warned = True
            log.warning(
                "ZooKeeper %s unreachable for %.1fs, longer than the session timeout (%.1fs): the "
                "session has probably expired; ephemeral nodes and watches are restored on reconnect",
                self.settings.connect_string, down, self.settings.session_timeout_secs)

    def _op(self, operation: str, path: str, start: Callable[[], Any]) -> Any:
        with self._translate(operation, path):
            return self._retry(self._client, start)

    @staticmethod
    def _path(path: str) -> str:
        return normalize_path(path)

    def _checked(self, path: str, data: bytes) -> bytes:
        """Refuse data ZooKeeper would refuse (it drops the connection, which looks like an outage)."""
        root = self.settings.root
        return check_node_data(path, data, path if root == "/" else root + path)

    # -- watches -------------------------------------------------------------------------------

    def _data_watcher(self, event: WatchedEvent) -> None:
        self._dispatcher.submit(self._on_watch, event)  # kazoo callback thread: enqueue only

    def _child_watcher(self, event: WatchedEvent) -> None:
        self._dispatcher.submit(self._on_watch, event)

    def _on_watch(self, event: WatchedEvent) -> None:
        if self._closed or event.type == KzEventType.NONE or event.path is None:
            return  # NONE: kazoo dropping its watches on disconnect; _recover re-arms them
        if event is self._last_event:
            return  # one DELETED reaches both our data and child watcher: deliver it once
        self._last_event = event
        self._hub.deliver(_EVENT_TYPES[event.type], event.path)

    # -- ClusterState: reads -------------------------------------------------------------------

    def _read(self, path: str, watch: bool) -> tuple[bytes, Any] | None:
        """(data, stat) or None; with watch, arms a data watch even on a missing node."""
        client = self._client
        if not watch:
            try:
                return self._op("get", path, lambda: client.get_async(path))
            except NoNodeError:
                return None
        try:
            found = self._op("get", path, lambda: client.get_async(path, watch=self._data_watcher))
        except NoNodeError:
            # ZooKeeper arms nothing on a failed get: an exists watch catches the creation.
            stat = self._op("exists", path, lambda: client.exists_async(path, watch=self._data_watcher))
            if stat is None:
                self._watches.armed_data(path, ABSENT)
                return None
            try:
                found = self._op("get", path, lambda: client.get_async(path))
            except NoNodeError:
                self._watches.armed_data(path, ABSENT)
                return None
        self._watches.armed_data(path, found[1].mzxid)
        return found

    def get_data(self, path: str, watch: bool = False) -> bytes | None:
        found = self._read(self._path(path), watch)
        return None if found is None else found[0]

    def get_data_with_version(self, path: str, watch: bool = False) -> tuple[bytes, int] | None:
        found = self._read(self._path(path), watch)
        return None if found is None else (found[0], found[1].version)

    def _stat(self, path: str, watch: bool) -> Any:
        watcher = self._data_watcher if watch else None
        stat = self._op("exists", path, lambda: self._client.exists_async(path, watch=watcher))
        if watch:
            self._watches.armed_data(path, ABSENT if stat is None else stat.mzxid)
        return stat

    def get_version(self, path: str, watch: bool = False) -> int | None:
        stat = self._stat(self._path(path), watch)
        return None if stat is None else stat.version

    def exists(self, path: str, watch: bool = False) -> bool:
        return self._stat(self._path(path), watch) is not None

    def get_children(self, path: str, watch: bool = False) -> list[str]:
        path = self._path(path)
        watcher = self._child_watcher if watch else None
        children, stat = self._op(
            "get children of", path,
            lambda: self._client.get_children_async(path, watch=watcher, include_data=True))
        if watch:
            self._watches.armed_children(path, stat.pzxid)
        return sorted(children)

    # -- ClusterState: writes ------------------------------------------------------------------

    def set_data(self, path: str, data: bytes) -> None:
        path = self._path(path)
        data = self._checked(path, data)
        client = self._client
        for _ in range(10):
            try:
                self._op("set", path, lambda: client.set_async(path, data))
                return
            except NoNodeError:
                pass
            try:
                self._op("create", path, lambda: client.create_async(path, data, acl=self._acl_for(path),
                                                                      makepath=True))
                return
            except NodeExistsError:
                continue  # created meanwhile by someone else: overwrite it
        raise ClusterStateError(f"could not set data of {path}: it keeps being deleted and re-created")

    def create_sequential(self, path: str, data: bytes) -> str:
        return self._create_sequential(path, data, ephemeral=False)

    def create_ephemeral_sequential(self, path: str, data: bytes) -> str:
        return self._create_sequential(path, data, ephemeral=True)

    def _create_sequential(self, path: str, data: bytes, ephemeral: bool) -> str:
        path = self._path(path)
        data = self._checked(path, data)
        return self._op("create", path, lambda: self._client.create_async(
            path, data, acl=self._acl_for(path), ephemeral=ephemeral, sequence=True, makepath=True))

    def owns_ephemeral(self, path: str) -> bool:
        stat = self._stat(self._path(path), False)
        return stat is not None and stat.ephemeralOwner != 0 and stat.ephemeralOwner == self._client.client_id[0]

    def delete_if_version(self, path: str, version: int) -> bool:
        path = self._path(path)
        with self._translate("delete", path):
            try:
                self._retry(self._client, lambda: self._client.delete_async(path, version=version))
            except (kz.NoNodeError, kz.BadVersionError):
                return False  # gone, or changed meanwhile: not ours to delete
        return True

    def set_ephemeral_node(self, path: str, data: bytes) -> None:
        path = self._path(path)
        data = self._checked(path, data)  # before it is recorded: recovery would resend it forever
        with self._eph_lock:
            # Recorded first: if ZooKeeper is away now, recovery creates it on reconnect.
            self._ephemerals[path] = bytes(data)
            self._put_ephemeral(path, bytes(data))

    def _put_ephemeral(self, path: str, data: bytes) -> None:
        client = self._client
        for _ in range(10):
            try:
                self._op("create", path, lambda: client.create_async(path, data, acl=self._acl_for(path),
                                                                      ephemeral=True, makepath=True))
                return
            except NodeExistsError:
                pass
            stat = self._op("exists", path, lambda: client.exists_async(path))
            if stat is None:
                continue
            if stat.ephemeralOwner == client.client_id[0]:
                try:
                    self._op("set", path, lambda: client.set_async(path, data))
                    return
                except NoNodeError:
                    continue
            # Persistent, or left by an earlier session (e.g. before a restart, not yet
            # expired): take the node over so it lives exactly as long as this client.
            log.info("taking over ephemeral node %s from session 0x%x", path, stat.ephemeralOwner)
            try:
                self._op("delete", path, lambda v=stat.version: client.delete_async(path, version=v))
            except (NoNodeError, ClusterStateError):
                pass  # gone or changed meanwhile: look again
        raise ClusterStateError(f"could not set ephemeral node {path}: it keeps changing")

    def delete_node(self, path: str) -> None:
        path = self._path(path)
        if path == "/":
            raise ClusterStateError("refusing to delete the root of this cluster state")
        with self._eph_lock:
            prefix = path.rstrip("/") + "/"
            for owned in [p for p in self._ephemerals if p == path or p.startswith(prefix)]:
                del self._ephemerals[owned]
            self._delete_recursive(path)

    def _delete_recursive(self, path: str) -> None:
        client = self._client
        for _ in range(10):
            try:
                children = self._op("get children of", path, lambda: client.get_children_async(path))
            except NoNodeError:
                return
            for child in children:
                self._delete_recursive(f"{path.rstrip('/')}/{child}")
            try:
                self._op("delete", path, lambda: client.delete_async(path))
                return
            except NoNodeError:
                return
            except ClusterStateError as exc:
                if isinstance(exc, (NotAuthorizedError, ClusterStateUnavailableError)):
                    raise
                continue  # NotEmpty: a child appeared meanwhile; go again
        raise ClusterStateError(f"could not delete {path}: children keep appearing")

    def mkdirs(self, path: str) -> None:
        path = self._path(path)
        if path != "/":
            self._op("create", path, lambda: self._client.ensure_path_async(path, self._acl_for(path)))

    # -- callbacks and lifecycle ---------------------------------------------------------------

    def register(self, callback: WatchCallback) -> str:
        return self._hub.register(callback)

    def unregister(self, callback_id: str) -> None:
        self._hub.unregister(callback_id)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._connected.set()  # wake operations waiting for a connection; they see _closed
        try:
            self._client.stop()  # closes the session: our ephemeral nodes go at once
        finally:
            self._client.close()
            self._dispatcher.stop()
        log.info("closed ZooKeeper connection to %s", self.settings.connect_string)

    # -- recovery (event thread) ---------------------------------------------------------------

    def _recover(self) -> None:
        if self._closed or not self._connected.is_set():
            return  # the next CONNECTED runs it again
        session_id = self._client.client_id[0]
        first = self._session_id is None
        if not first:
            log.info("ZooKeeper reconnected (%s session 0x%x): restoring ephemeral nodes and watches",
                     "same" if session_id == self._session_id else "new", session_id)
        self._session_id = session_id
        try:
            self._restore_ephemerals()
            if not first:
                self._rearm_watches()
        except ClusterStateUnavailableError as exc:
            log.warning("ZooKeeper recovery interrupted, retried on the next connection: %s", exc)

    def _restore_ephemerals(self) -> None:
        with self._eph_lock:
            owned = dict(self._ephemerals)
        client = self._client
        for path, data in owned.items():
            with self._eph_lock:
                if self._ephemerals.get(path) is not data:
                    continue  # deleted or rewritten by the caller meanwhile
                stat = self._op("exists", path, lambda p=path: client.exists_async(p))
                if stat is not None and stat.ephemeralOwner == client.client_id[0]:
                    continue
                try:
                    self._put_ephemeral(path, data)
                    log.info("re-created ephemeral node %s", path)
                except (NotAuthorizedError, ClusterStateError) as exc:
                    if isinstance(exc, ClusterStateUnavailableError):
                        raise
                    log.error("could not re-create ephemeral node %s: %s", path, exc)

    def _rearm_watches(self) -> None:
        client = self._client

        def watch_data(path: str) -> Any:
            stat = self._op("exists", path, lambda: client.exists_async(path, watch=self._data_watcher))
            return ABSENT if stat is None else stat.mzxid

        def watch_children(path: str) -> Any:
            _, stat = self._op("get children of", path, lambda: client.get_children_async(
                path, watch=self._child_watcher, include_data=True))
            return stat.pzxid

        self._watches.rearm(watch_data, watch_children, self._hub.deliver)

    def __repr__(self) -> str:
        return f"ZkClusterState({self.settings.connect_string}{self.settings.root}, state={self.connection_state.value})"
