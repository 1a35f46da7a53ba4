"""The Nimbus daemon: orchestration only (the decisions live in core/scheduler/transitions).

Start order, each undone in reverse on stop or on a failed start: the code store (its inbox
emptied), the ZooKeeper connection (refused with one clear error when ZooKeeper cannot be
reached within `storm.zookeeper.connection.timeout`), recovery of every topology from ZooKeeper
and the local dir, the RPC server (refused with one clear error when the port is taken), and
the monitor thread, which every `nimbus.monitor.freq.secs` (sooner when a kill or rebalance
timer is due) fires timers, reassigns dead executors and cleans up.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.protocol import ConnectionState
from cluster_state.storm import StormClusterState
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.handlers import make_handlers
from daemons.nimbus.seams import TopologyCodeStore
from daemons.rpc.server import RpcServer
from executor.lifecycle import PeriodicThread, Service

log = logging.getLogger(__name__)

def nimbus_bind_host(conf: Mapping[str, Any]) -> str:
    """Nimbus listens on this machine's advertised name: storm.local.hostname, else the first
    of nimbus.seeds (the name clients use to reach it)."""
    host = conf.get("storm.local.hostname")
    if host:
        return str(host)
    seeds = conf["nimbus.seeds"]
    return str(seeds[0])


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
        core.recover()
        freq = float(conf["nimbus.monitor.freq.secs"])
        self._monitor = PeriodicThread("nimbus-monitor", lambda: monitor_interval(freq, core.next_timer_in()),
                                       self._monitor_round)
        if self._serve_rpc:
            max_package = int(conf["storm.package.max.bytes"])
            handlers = make_handlers(core, store, max_package, self._monitor.wake)
            self.rpc = self.start_child(RpcServer(
                nimbus_bind_host(conf), int(conf["nimbus.thrift.port"]), handlers,
                secret=conf.get("nimbus.authentication.secret"), name="nimbus-rpc"))
        self.start_child(self._monitor)
        if self.rpc is not None:
            log.info("Nimbus running on %s:%s (local dir %s)", self.rpc.host, self.rpc.port, store.root)

    def _monitor_round(self) -> None:
        core = self.core
        if core.cluster.connection_state is not ConnectionState.CONNECTED:
            # Nothing to decide without ZooKeeper, and a round blocked in its retries would hold
            # the core's lock, so that clients could not even be told it is unreachable.
            log.warning("monitor round skipped: ZooKeeper is %s", core.cluster.connection_state.value)
            return
        core.fire_timers()
        core.mk_assignments()
        core.cleanup()
        if self._serve_rpc:
            core.store.expire_uploads(float(self.conf["nimbus.inbox.jar.expiration.secs"]))
