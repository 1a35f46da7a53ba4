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
from typing import Any, Mapping

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.handlers import make_handlers
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


class Nimbus(Service):
    def __init__(self, conf: Mapping[str, Any]):
        super().__init__("nimbus")
        self.conf = dict(conf)
        self.core: NimbusCore | None = None
        self.rpc: RpcServer | None = None
        self._monitor: PeriodicThread | None = None

    @property
    def port(self) -> int | None:
        return None if self.rpc is None else self.rpc.port

    def _on_start(self) -> None:
        conf = self.conf
        store = CodeStore(local_layout.nimbus_dir(conf))
        store.open()
        cluster = mk_storm_cluster_state(conf)
        self.on_stop(cluster.disconnect, "ZooKeeper connection")
        core = self.core = NimbusCore(conf, cluster, store)
        core.recover()
        freq = float(conf["nimbus.monitor.freq.secs"])
        self._monitor = PeriodicThread("nimbus-monitor", lambda: min(freq, core.next_timer_in() or freq),
                                       self._monitor_round)
        max_package = int(conf["storm.package.max.bytes"])
        handlers = make_handlers(core, store, max_package, self._monitor.wake)
        self.rpc = self.start_child(RpcServer(
            nimbus_bind_host(conf), int(conf["nimbus.thrift.port"]), handlers,
            secret=conf.get("nimbus.authentication.secret"), name="nimbus-rpc"))
        self.start_child(self._monitor)
        log.info("Nimbus running on %s:%s (local dir %s)", self.rpc.host, self.rpc.port, store.root)

    def _monitor_round(self) -> None:
        core = self.core
        core.fire_timers()
        core.mk_assignments()
        core.cleanup()
        core.store.expire_uploads(float(self.conf["nimbus.inbox.jar.expiration.secs"]))
