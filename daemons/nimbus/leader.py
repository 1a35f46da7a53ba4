"""Nimbus leader election at `<storm.zookeeper.root>/leader-lock` (Storm's LeaderElectorImp.java,
a Curator LeaderLatch; docs/operations.md, "Nimbus HA").

Every Nimbus creates an ephemeral sequential node `/leader-lock/latch-NNNNNNNNNN` holding its
"host:port"; the owner of the lowest number is the leader. A Nimbus whose connection is
suspended or whose session expired is not the leader until it is connected again (Curator's
default), and after an expiry it joins again with a new node, behind the others.

`LeaderLatch.check()` runs on one thread (the daemon's election thread); kazoo's watch and
state callbacks only call `on_event` (which wakes that thread).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kazoo.protocol.states import KazooState

from cluster_state.paths import LEADER_LOCK_PATH

log = logging.getLogger(__name__)

LATCH_PREFIX = "latch-"


@dataclass(frozen=True)
class Leadership:
    """What one check found: the leader's "host:port" (None: none known) and whether it is us."""

    leader: str | None
    is_leader: bool


def leader_node(children: Sequence[str]) -> str | None:
    """The latch node with the lowest sequence number (the leader's), or None."""
    latches = [c for c in children if c.startswith(LATCH_PREFIX) and c[len(LATCH_PREFIX):].isdigit()]
    return min(latches, key=lambda c: int(c[len(LATCH_PREFIX):])) if latches else None


class AlwaysLeader:
    """One Nimbus on in-memory cluster state (LocalCluster): always the leader."""

    def __init__(self, me: str):
        self.me = me

    def check(self) -> Leadership:
        return Leadership(self.me, True)

    def close(self) -> None:
        pass


class LeaderLatch:
    """A leader latch on a kazoo client (chrooted at storm.zookeeper.root)."""

    def __init__(self, client: Any, me: str, timeout_secs: float, on_event: Callable[[], Any]):
        self.me = me
        self._client = client
        self._timeout = timeout_secs
        self._on_event = on_event
        self._node: str | None = None
        self._closed = False
        # Set once this Nimbus listens on its host:port: no other live Nimbus can then claim it.
        self.identity_owned = False
        client.add_listener(self._on_state)

    def check(self) -> Leadership:
        """Make sure our latch node exists in this session, then read who leads (arms a watch)."""
        client = self._client
        if self._closed or client.state != KazooState.CONNECTED:
            return Leadership(None, False)
        if self._node is None or not self._owned(self._node):
            client.ensure_path_async(LEADER_LOCK_PATH).get(timeout=self._timeout)
            self._node = client.create_async(f"{LEADER_LOCK_PATH}/{LATCH_PREFIX}", self.me.encode(),
                                             ephemeral=True, sequence=True).get(timeout=self._timeout)
            log.info("joined the Nimbus leader election as %s (%s)", self.me, self._node)
        children = client.get_children_async(LEADER_LOCK_PATH, watch=self._on_watch).get(timeout=self._timeout)
        first = leader_node(children)
        if first is None:
            return Leadership(None, False)
        if f"{LEADER_LOCK_PATH}/{first}" == self._node:
            return Leadership(self.me, True)
        path = f"{LEADER_LOCK_PATH}/{first}"
        try:
            data, stat = client.get_async(path).get(timeout=self._timeout)
        except Exception as exc:  # gone meanwhile: the next check sees the new order
            log.debug("reading leader node %s: %r", first, exc)
            self._on_event()
            return Leadership(None, False)
        leader = data.decode("utf-8", "replace") or None
        if leader == self.me and (self.identity_owned or stat.ephemeralOwner == client.client_id[0]):
            # Our own node: of this session (a create whose reply was lost), or of an earlier run
            # of this Nimbus that died with its session still open (we hold its host:port now).
            log.info("removing leader-lock node %s of an earlier run of Nimbus %s (session 0x%x)",
                     path, self.me, stat.ephemeralOwner)
            try:
                client.delete_async(path, version=stat.version).get(timeout=self._timeout)
            except Exception as exc:
                log.debug("removing %s: %r", path, exc)
            self._on_event()
            return Leadership(None, False)
        return Leadership(leader, False)

    def _owned(self, node: str) -> bool:
        stat = self._client.exists_async(node).get(timeout=self._timeout)
        return stat is not None and stat.ephemeralOwner == self._client.client_id[0]

    def close(self) -> None:
        """Leave the election (the node goes now, not at session expiry)."""
        self._closed = True
        self._client.remove_listener(self._on_state)
        node, self._node = self._node, None
        if node is not None and self._client.state == KazooState.CONNECTED:
            try:
                self._client.delete_async(node).get(timeout=self._timeout)
            except Exception as exc:
                log.debug("removing %s: %r", node, exc)

    def _on_state(self, _state: str) -> None:
        self._on_event()  # kazoo's connection thread: wake the election thread only

    def _on_watch(self, _event: Any) -> None:
        self._on_event()
