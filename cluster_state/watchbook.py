"""Bookkeeping that lets a ZooKeeper client re-arm its watches after a reconnection (pure).

kazoo forgets every watch when its connection drops and does not re-register them, and
after a session expiry the server has forgotten them too. So each watched read records a
token of what the caller saw: the node's mzxid for a data watch, the parent's pzxid for a
child watch, or ABSENT. After reconnecting, `rearm` reads every recorded path again with a
watch; an unchanged token means the watch had not fired and is simply armed again, a changed
token means the change happened while we were away (or its event was already delivered and
the caller did not read again), so the watch's event is delivered now and the record dropped.
Tokens are never removed when an event fires: which of two racing reads a watch event
belongs to cannot be known, and a stale record costs at most one extra event later, while a
missing one would silently lose a watch.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from .errors import ClusterStateUnavailableError, NoNodeError
from .protocol import EventType

log = logging.getLogger(__name__)

ABSENT = "absent"  # token of a node that did not exist when read


class WatchBook:
    """Tokens of the data and child watches a client armed, by path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {}
        self._children: dict[str, Any] = {}

    def armed_data(self, path: str, token: Any) -> None:
        with self._lock:
            self._data[path] = token

    def armed_children(self, path: str, token: Any) -> None:
        with self._lock:
            self._children[path] = token

    def snapshot(self) -> tuple[dict[str, Any], dict[str, Any]]:
        with self._lock:
            return dict(self._data), dict(self._children)

    def _drop(self, table: dict[str, Any], path: str, token: Any) -> None:
        with self._lock:
            if table.get(path) == token:  # unless a caller read it again meanwhile
                del table[path]

    def rearm(
        self,
        watch_data: Callable[[str], Any],
        watch_children: Callable[[str], Any],
        deliver: Callable[[EventType, str], None],
    ) -> None:
        """Re-arm every recorded watch; deliver the events of changes missed meanwhile.

        `watch_data(path)` arms a data watch and returns the current token;
        `watch_children(path)` arms a child watch and returns the current token, ABSENT for a
        missing node. ClusterStateUnavailableError propagates (the caller retries the whole
        re-arm on its next connection); other failures skip that path with an error log.
        """
        data, children = self.snapshot()
        deleted: set[str] = set()
        for path, token in data.items():
            now = self._current(watch_data, path, "data")
            if now is _SKIP or now == token:
                continue
            self._drop(self._data, path, token)
            if now == ABSENT:
                deleted.add(path)
                deliver(EventType.DELETED, path)
            else:
                deliver(EventType.CREATED if token == ABSENT else EventType.CHANGED, path)
        for path, token in children.items():
            now = self._current(watch_children, path, "child")
            if now is _SKIP or now == token:
                continue
            self._drop(self._children, path, token)
            if now != ABSENT:
                deliver(EventType.CHILD, path)
            elif path not in deleted:  # one DELETED per node, as for live events
                deliver(EventType.DELETED, path)

    @staticmethod
    def _current(read: Callable[[str], Any], path: str, kind: str) -> Any:
        try:
            return read(path)
        except NoNodeError:
            return ABSENT
        except ClusterStateUnavailableError:
            raise
        except Exception as exc:  # e.g. NotAuthorizedError: keep re-arming the other paths
            log.error("could not re-arm %s watch on %s: %s", kind, path, exc)
            return _SKIP


_SKIP = object()
