"""The Nimbus daemon: orchestration only (the decisions live in core/scheduler/transitions).

Start order, each undone in reverse on stop or on a failed start: the code store (its inbox
emptied), the ZooKeeper connection (refused with one clear error when ZooKeeper cannot be
reached within `storm.zookeeper.connection.timeout`), recovery of every topology from ZooKeeper
and the local dir, the RPC server (refused with one clear error when the port is taken), and
the monitor thread, which every `nimbus.monitor.freq.secs` (sooner when a kill or rebalance
timer is due) fires timers, reassigns dead executors and cleans up.

Nimbus HA (docs/operations.md, "Nimbus HA"; Storm's Nimbus.java): on ZooKeeper, before it
recovers, a Nimbus joins the leader election (daemons/nimbus/leader.py) and registers itself
(daemons/nimbus/nimbuses.py). Only the leader recovers, runs the monitor's writes and accepts
writes; a standby refuses them naming the leader, writes nothing to ZooKeeper, and copies the
code of every active topology (daemons/nimbus/code_sync.py). The election thread checks the
latch on every ZooKeeper event and every second; when this Nimbus becomes the leader it
recovers as a restarted Nimbus would, then accepts writes; when it stops being the leader it
stops at once.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from cluster_state import local_layout
from cluster_state.errors import ClusterStateError
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.protocol import ConnectionState
from cluster_state.records import NimbusRegistration, nimbus_id
from cluster_state.storm import StormClusterState
from daemons.answers.cluster import NimbusRow
from daemons.nimbus import nimbuses
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.code_sync import CodeSync
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.handlers import make_handlers
from daemons.nimbus.leader import AlwaysLeader, LeaderLatch, Leadership, election_step
from daemons.nimbus.seams import TopologyCodeStore
from daemons.nimbus.swaps.driver import SwapDriver
from daemons.rpc.protocol import NotLeaderError, UnavailableError, not_leader_message
from daemons.rpc.server import RpcServer
from executor.lifecycle import PeriodicThread, Service
from executor.package import storm_py_version
from executor.transport.curve import curve_keys

log = logging.getLogger(__name__)

def nimbus_bind_host(conf: Mapping[str, Any]) -> str:
    """Nimbus listens on this machine's advertised name: storm.local.hostname, else the first
    of nimbus.seeds (the name clients use to reach it)."""
    host = conf.get("storm.local.hostname")
    if host:
        return str(host)
    seeds = conf["nimbus.seeds"]
    return str(seeds[0])


ELECTION_POLL_SECS = 1.0
# A swap's steps: every half second while one is under way (each waits on heartbeats), else a look
# every few seconds (a Nimbus that took over finds the swaps its predecessor left).
SWAP_STEP_SECS = 0.5
SWAP_IDLE_SECS = 5.0


def monitor_interval(freq_secs: float, next_timer_in: float | None) -> float:
    """Until the next monitor round: the period, or sooner when a timer is due (0: due now)."""
    return freq_secs if next_timer_in is None else min(freq_secs, next_timer_in)


class Nimbus(Service):
    """Nimbus with its RPC server (`storm-py nimbus`), or without one inside LocalCluster, which
    passes its in-memory cluster state and a code store of live topologies."""

    def __init__(self, conf: Mapping[str, Any], *, cluster_factory: Callable[[], StormClusterState] | None = None,
                 store: TopologyCodeStore | None = None, serve_rpc: bool = True):
        super().__init__("nimbus")
        self.conf = dict(conf)
        self.core: NimbusCore | None = None
        self.rpc: RpcServer | None = None
        self._monitor: PeriodicThread | None = None
        self._cluster_factory = cluster_factory or (lambda: mk_storm_cluster_state(self.conf))
        self._store = store
        self._serve_rpc = serve_rpc
        self._latch: LeaderLatch | AlwaysLeader | None = None
        self._election: PeriodicThread | None = None
        self._leader: str | None = None  # host:port of the leader, as the latch last said
        self._leading = False  # the leader and recovered: runs the monitor's writes, accepts writes
        self._register: Callable[[], None] | None = None
        self._sync: CodeSync | None = None
        self.swaps: SwapDriver | None = None
        self.me = ""

    @property
    def is_leader(self) -> bool:
        return self._leading

    def require_leader(self) -> None:
        """Raise NotLeaderError naming the leader unless this Nimbus leads (handlers' writes);
        without ZooKeeper (no Nimbus can lead then) say that instead."""
        if not self._leading:
            state = self.core.cluster.connection_state
            if state is not ConnectionState.CONNECTED:
                raise UnavailableError(f"Nimbus {self.me} cannot reach ZooKeeper ({state.value}): nothing was done; "
                                       "try again once ZooKeeper is back")
            raise NotLeaderError(not_leader_message(self.me, self._leader))

    def nimbus_rows(self) -> list[NimbusRow]:
        """Every registered Nimbus with its status (cluster_info's "nimbuses")."""
        regs = self.core.cluster.nimbus_registrations() if self._serve_rpc else {}
        return nimbuses.nimbus_rows(regs, self._leader, self.core.clock())

    @property
    def port(self) -> int | None:
        return None if self.rpc is None else self.rpc.port

    def wake(self) -> None:
        """Run a monitor round now (a timer just armed, an assignment to write)."""
        if self._monitor is not None:
            self._monitor.wake()

    def _on_start(self) -> None:
        conf = self.conf
        store = self._store
        if store is None:
            store = CodeStore(local_layout.nimbus_dir(conf))
            store.open()
        cluster = self._cluster_factory()
        self.on_stop(cluster.disconnect, "ZooKeeper connection")
        core = self.core = NimbusCore(conf, cluster, store)
        host, port = nimbus_bind_host(conf), int(conf["nimbus.thrift.port"])
        self.me = nimbus_id(host, port)
        if not self._serve_rpc:
            self._latch = AlwaysLeader(self.me)  # LocalCluster: the only Nimbus, reached in process
        else:
            self._latch = LeaderLatch(cluster.cluster_state, self.me, self._wake_election)
            self.on_stop(self._latch.close, "leader election")
        self._election_round()  # the leader recovers here, before serving
        if self._serve_rpc:
            started = int(core.started_at)
            self._register = lambda: cluster.register_nimbus(
                NimbusRegistration(host, port, started, storm_py_version(), self._leading))
            self._register()
            self.on_stop(lambda: cluster.unregister_nimbus(self.me), "Nimbus registration")
        freq = float(conf["nimbus.monitor.freq.secs"])
        self._monitor = PeriodicThread("nimbus-monitor", lambda: monitor_interval(freq, core.next_timer_in()),
                                       self._monitor_round)
        self.swaps = SwapDriver(core, self)
        self._swap_thread = PeriodicThread("nimbus-swaps", lambda: SWAP_STEP_SECS if self.swaps.busy else SWAP_IDLE_SECS,
                                           self._swap_round)
        if self._serve_rpc:
            max_package = int(conf["storm.package.max.bytes"])
            handlers = make_handlers(core, store, max_package, self._after_change,
                                     require_leader=self.require_leader, nimbus_rows=self.nimbus_rows,
                                     swaps=self.swaps)
            self.rpc = self.start_child(RpcServer(
                host, port, handlers,
                secret=conf.get("nimbus.authentication.secret"), name="nimbus-rpc", curve=curve_keys(conf)))
        self.start_child(self._monitor)
        self.start_child(self._swap_thread)
        if isinstance(self._latch, LeaderLatch):
            self._latch.identity_owned = self.rpc is not None
            if self.rpc is not None and not self._leading and self._leader == self.me:
                # An earlier run of this Nimbus that crashed still leads: remove its node, then lead.
                self._election_round()
                self._election_round()
            self._election = self.start_child(PeriodicThread("nimbus-election", ELECTION_POLL_SECS,
                                                             self._election_round, run_at_start=False))
            sync = self._sync = CodeSync(
                conf, store, core.lock, active=lambda: [*cluster.active_storms(), *core.pending_code()],
                leading=lambda: self._leading,
                peers=lambda: nimbuses.peers(cluster.nimbus_registrations(), self._leader, self.me))
            self.on_stop(sync.close, "code sync clients")
            self.start_child(PeriodicThread("nimbus-code-sync", float(conf["nimbus.code.sync.freq.secs"]),
                                            sync.run_round))
        if self.rpc is not None:
            log.info("Nimbus running on %s:%s (local dir %s), %s", self.rpc.host, self.rpc.port, store.root,
                     "the leader" if self._leading else f"a standby (the leader is {self._leader or 'not known'})")

    def _after_change(self) -> None:
        """After an event that may arm a timer or start a swap: the monitor and the swaps now."""
        self._monitor.wake()
        self._swap_thread.wake()

    def _swap_round(self) -> None:
        if self._leading:  # a standby writes nothing; the leader that takes over goes on
            self.swaps.round()

    def _peers_holding(self, storm_id: str) -> list[bool | None]:
        """Each other registered Nimbus: whether it holds this code (None: it did not answer)."""
        if self._sync is None:
            return []
        peers = nimbuses.peers(self.core.cluster.nimbus_registrations(), self._leader, self.me)
        return [self._sync.peer_holds(peer, storm_id) for peer in peers]

    def everywhere(self, storm_id: str) -> bool:
        """CodeCopies: every other registered Nimbus holds this code (LocalCluster: no other)."""
        return all(held is True for held in self._peers_holding(storm_id))

    def elsewhere(self, storm_id: str) -> bool:
        """CodeCopies: another Nimbus holds this code, or may (one that did not answer)."""
        return any(held is not False for held in self._peers_holding(storm_id))

    def _wake_election(self) -> None:
        if self._election is not None:
            self._election.wake()

    def _election_round(self) -> None:
        """Ask the latch who leads; take over (recover first) or step down when that changed."""
        try:
            found = self._latch.check()
        except Exception as exc:  # ZooKeeper away or slow: not the leader until a check succeeds
            log.warning("Nimbus leader election: %r", exc)
            found = Leadership(None, False)
        decision = election_step(self.me, self._leading, self._leader, found)
        self._leader = found.leader
        if decision.message:
            log.log(decision.level, "%s", decision.message)
        if decision.take_over:
            try:
                self.core.recover()
            except ClusterStateError as exc:
                if self._election is None:
                    raise  # at start: refused as before HA
                log.warning("Nimbus %s: recovery as the leader failed, retried: %s", self.me, exc)
                return
            self._leading = True
            self._reregister()
            if self._monitor is not None:
                self._monitor.wake()
        elif decision.step_down:
            self._leading = False
            self._reregister()

    def _reregister(self) -> None:
        """Rewrite this Nimbus's registration with its new leader flag."""
        if self._register is None:
            return
        try:
            self._register()
        except ClusterStateError as exc:
            log.warning("updating the Nimbus registration: %s", exc)

    def _monitor_round(self) -> None:
        core = self.core
        # A standby writes nothing to ZooKeeper. Without ZooKeeper no Nimbus leads (the latch
        # says so on the connection's first event), so no round blocks in retries holding the
        # core's lock while clients wait to be told ZooKeeper is away.
        if not self._leading:
            if self._serve_rpc:
                core.store.expire_uploads(float(self.conf["nimbus.inbox.jar.expiration.secs"]))
            return
        core.fire_timers()
        core.mk_assignments()
        core.cleanup()
        if self._serve_rpc:
            core.store.expire_uploads(float(self.conf["nimbus.inbox.jar.expiration.secs"]))
