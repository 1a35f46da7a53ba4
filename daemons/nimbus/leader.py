"""Nimbus leader election at `<storm.zookeeper.root>/leader-lock` (Storm's LeaderElectorImp.java,
a Curator LeaderLatch; docs/operations.md, "Nimbus HA"), on the cluster-state protocol.

Every Nimbus creates an ephemeral sequential node `/leader-lock/latch-NNNNNNNNNN` holding its
"host:port"; the owner of the lowest number is the leader. A Nimbus whose connection is
suspended or whose session expired is not the leader until it is connected again (Curator's
default: the daemon's election thread checks every second and on every change of the lock),
and after an expiry it joins again with a new node, behind the others.

`LeaderLatch.check()` runs on one thread (the daemon's election thread); the cluster state's
watch callbacks only call `on_event` (which wakes that thread).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

from cluster_state.paths import LEADER_LOCK_PATH
from cluster_state.protocol import ClusterState, ConnectionState, EventType

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


@dataclass(frozen=True)
class ElectionStep:
    """What a Nimbus does after a check: take over (recover first; it leads only once recovery
    succeeded), step down, or only say what it found."""

    take_over: bool = False
    step_down: bool = False
    level: int = logging.DEBUG
    message: str = ""


def election_step(me: str, leading: bool, was: str | None, found: Leadership) -> ElectionStep:
    """One election round's decision (pure): `leading` is whether this Nimbus leads now, `was`
    the leader the previous round found."""
    if found.is_leader and not leading:
        return ElectionStep(take_over=True, level=logging.INFO,
                            message=f"Nimbus {me} is the leader now{f' (was {was})' if was else ''}: recovering")
    if not found.is_leader and leading:
        return ElectionStep(step_down=True, level=logging.WARNING,
                            message=f"Nimbus {me} is not the leader any more (leader: {found.leader or 'none now'}): "
                                    "it stops scheduling and refuses writes")
    if found.leader == me and not found.is_leader:
        return ElectionStep(level=logging.INFO,
                            message=f"Nimbus {me}: the leader lock is held by an earlier run of this Nimbus")
    if found.leader != was and not found.is_leader:
        return ElectionStep(level=logging.INFO,
                            message=f"Nimbus {me} is a standby; the leader is {found.leader or 'not known'}")
    return ElectionStep()


class AlwaysLeader:
    """One Nimbus that serves no RPC (LocalCluster): always the leader."""

    def __init__(self, me: str):
        self.me = me

    def check(self) -> Leadership:
        return Leadership(self.me, True)

    def close(self) -> None:
        pass


class LeaderLatch:
    """A leader latch on a cluster state (rooted at storm.zookeeper.root)."""

    def __init__(self, cs: ClusterState, me: str, on_event: Callable[[], object]):
        self.me = me
        self._cs = cs
        self._on_event = on_event
        self._node: str | None = None
        self._closed = False
        # Set once this Nimbus listens on its host:port: no other live Nimbus can then claim it.
        self.identity_owned = False
        self._callback_id = cs.register(self._on_watch)

    def check(self) -> Leadership:
        """Make sure our latch node exists in this session, then read who leads (arms a watch)."""
        cs = self._cs
        if self._closed or cs.connection_state is not ConnectionState.CONNECTED:
            return Leadership(None, False)
        if self._node is None or not cs.owns_ephemeral(self._node):
            self._node = cs.create_ephemeral_sequential(f"{LEADER_LOCK_PATH}/{LATCH_PREFIX}", self.me.encode())
            log.info("joined the Nimbus leader election as %s (%s)", self.me, self._node)
        first = leader_node(cs.get_children(LEADER_LOCK_PATH, watch=True))
        if first is None:
            return Leadership(None, False)
        path = f"{LEADER_LOCK_PATH}/{first}"
        if path == self._node:
            return Leadership(self.me, True)
        found = cs.get_data_with_version(path)
        if found is None:  # gone meanwhile: the next check sees the new order
            self._on_event()
            return Leadership(None, False)
        data, version = found
        leader = data.decode("utf-8", "replace") or None
        if leader == self.me and (self.identity_owned or cs.owns_ephemeral(path)):
            # Our own node: of this session (a create whose reply was lost), or of an earlier run
            # of this Nimbus that died with its session still open (we hold its host:port now).
            log.info("removing leader-lock node %s of an earlier run of Nimbus %s", path, self.me)
            cs.delete_if_version(path, version)
            self._on_event()
            return Leadership(None, False)
        return Leadership(leader, False)

    def close(self) -> None:
        """Leave the election (the node goes now, not at session expiry)."""
        self._closed = True
        self._cs.unregister(self._callback_id)
        node, self._node = self._node, None
        if node is not None and self._cs.connection_state is ConnectionState.CONNECTED:
            try:
                self._cs.delete_node(node)
            except Exception as exc:  # the session's end removes it anyway
                log.debug("removing %s: %r", node, exc)

    def _on_watch(self, _event: EventType, path: str) -> None:
        if path == LEADER_LOCK_PATH or path.startswith(LEADER_LOCK_PATH + "/"):
            self._on_event()  # the cluster state's event thread: wake the election thread only
