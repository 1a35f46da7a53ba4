"""A worker (one per assigned supervisor and port): a process of its own in distributed mode,
threads of LocalCluster's process in local mode (`ProcessRuntime` / daemons.inprocess).

It imports the topology from the package its supervisor extracted (refusing to run, with the
error recorded in ZooKeeper, when the structure it builds differs from the manifest), runs the
executors the assignment gives its slot behind a ZeroMQ transport, and keeps in step with the
cluster:
- a local heartbeat every `worker.heartbeat.frequency.secs` (for its supervisor) and a
  ZooKeeper heartbeat with per-executor stats every `task.heartbeat.frequency.secs` (for Nimbus);
- its assignment and storm base re-read on every change (one-shot callbacks that only wake the
  refresh thread, re-registered by the reads) and every `task.refresh.poll.secs`: routes follow
  moved tasks; spouts are active only while the storm base says active and every peer is
  connected (so activate, deactivate and kill reach the spouts at once);
- the topology's dynamic log levels (`storm-py set_log_level`, executor/log_levels.py) applied
  on every change of its log config and reverted when their timeout passes;
- component errors reported to ZooKeeper; a dying executor makes the process exit non-zero
  (its supervisor restarts it); SIGTERM stops it cleanly (exit 0).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import time
from pathlib import Path
from typing import Any, Mapping

from cluster_state import local_layout
from cluster_state.auth import ROLE_TOPOLOGY
from cluster_state.config import default_config, setting
from cluster_state.errors import ClusterStateError, DecodeError
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.records import STATUS_ACTIVE, WORKER_ERRORS, WorkerHeartbeat
from cluster_state.worker_beats import write_worker_heartbeat
from executor.base import TopologyStatus
from executor.error_throttle import ErrorThrottle
from executor.errors import ClearError, ComponentError, InvalidTopologyError
from executor.gc_policy import apply_gc_thresholds
from executor.layout import compute_layout
from executor.lifecycle import PeriodicThread, Service
from executor.log_levels import KEEPER
from executor.package import MANIFEST_NAME, load_manifest_file, without_daemon_keys
from executor.stats_keeper import carried_from_heartbeats
from executor.topology import for_mode
from executor.topology_file import load_topology_file
from executor.worker import Worker, WorkerEvents, WorkerSpec
from executor.worker_plan import task_addresses
from executor.worker_runtime import WorkerRuntime

log = logging.getLogger(__name__)

TRANSFER_HWM = "topology.transfer.hwm"  # payloads each end of a link holds (ZeroMQ's SNDHWM/RCVHWM)
TRANSFER_SOCKET_BYTES = "topology.transfer.socket.bytes"  # SO_SNDBUF/SO_RCVBUF of a link; null: the OS's

_DRAIN_SECS = 1.0  # how long a stopping worker lets in-flight tuples drain
# The log config is read on every change (a watch) and at least this often, in case a watch is
# lost; reverts are timed to the entries' timeouts (Storm polls every 30 s for those).
LOG_CONFIG_POLL_SECS = 5.0


class WorkerStartError(ClearError):
    """The worker cannot run (no code, a package that differs from its manifest, no slot)."""


def topology_conf(supervisor_conf: Mapping[str, Any], code_dir: Path) -> dict[str, Any]:
    """The supervisor's conf with the topology's effective conf (from Nimbus) over it; daemon
    keys always the supervisor's (a topology stored before Nimbus left them out may hold them)."""
    with open(code_dir / "stormconf.json", encoding="utf-8") as f:
        return {**supervisor_conf, **without_daemon_keys(json.load(f))}


class ProcessRuntime:
    """What a worker in a process of its own runs on: ZooKeeper, the package its supervisor
    extracted, ZeroMQ. LocalCluster's in-process workers get a runtime with the same methods
    (in-memory cluster state, live topology objects, the in-process transport)."""

    write_pid = True
    # A restarted worker carries its executors' all-time stats over from their last heartbeat.
    carry_stats = True

    def cluster_state(self, conf: Mapping[str, Any]):
        return mk_storm_cluster_state(conf, role=ROLE_TOPOLOGY)

    def load_topology(self, storm_id: str, code_dir: Path):
        manifest = load_manifest_file(code_dir / MANIFEST_NAME)
        tf = load_topology_file(code_dir / manifest.topology_file)
        built = tf.topology.structure.to_dict()
        if built != manifest.structure_data:
            differs = sorted(c for c in set(built["components"]) | set(manifest.structure_data["components"])
                             if built["components"].get(c) != manifest.structure_data["components"].get(c))
            # The key words first: `storm-py list` shows the first 160 characters.
            raise InvalidTopologyError(
                f"the topology differs from its package manifest in component(s) {', '.join(differs) or 'none'} "
                f"(its code may read the submitting machine's environment or files, which workers do not "
                f"have; built here from {code_dir / manifest.topology_file})")
        return tf.topology

    def tune_process(self, conf: Mapping[str, Any]) -> None:
        """The worker owns this process: apply the topology's process-wide settings."""
        apply_gc_thresholds(conf)

    def transport(self, host: str, conf: Mapping[str, Any]):
        from executor.transport.curve import curve_keys
        from executor.transport.zmq import ZmqTransport

        # null means the OS's buffers, so only an absent key (an older Nimbus merged the conf)
        # takes the packaged default
        buf = conf.get(TRANSFER_SOCKET_BYTES, default_config()[TRANSFER_SOCKET_BYTES])
        return ZmqTransport(bind_host=host, curve=curve_keys(conf), hwm=int(setting(conf, TRANSFER_HWM)),
                            sndbuf=buf, rcvbuf=buf)

    def address(self, host: str, port: int, storm_id: str):
        return (host, port)

    def events(self, storm_id: str, on_error, on_died) -> WorkerEvents:
        return WorkerEvents(on_error, on_died)


class WorkerProcess(Service):
    def __init__(self, supervisor_conf: Mapping[str, Any], storm_id: str, supervisor_id: str, port: int,
                 worker_id: str, runtime: WorkerRuntime | None = None):
        super().__init__(f"worker-{port}")
        self.runtime = runtime or ProcessRuntime()
        self.supervisor_conf = dict(supervisor_conf)
        self.storm_id = storm_id
        self.supervisor_id = supervisor_id
        self.port = int(port)
        self.worker_id = worker_id
        self.started_at = time.time()
        self._last_local_heartbeat: float | None = None
        self.worker: Worker | None = None
        self._errors: queue.SimpleQueue = queue.SimpleQueue()
        self._refresh: PeriodicThread | None = None
        self._log_levels: PeriodicThread | None = None
        self._log_config = None  # the last LogConfig read
        self._next_log_timeout: int | None = None

    # ------------------------------------------------------------------ start
    def _on_start(self) -> None:
        conf = self.supervisor_conf
        if self.runtime.write_pid:
            self._write_pid()
        code_dir = local_layout.supervisor_stormdist(conf, self.storm_id)
        if not (code_dir / "stormconf.json").is_file():
            raise WorkerStartError(f"no code for topology {self.storm_id} in {code_dir}")
        self.conf = topology_conf(conf, code_dir)
        self.runtime.tune_process(self.conf)
        self._throttle = ErrorThrottle(float(self.conf["topology.error.throttle.interval.secs"]),
                                       int(self.conf["topology.max.error.report.per.interval"]))
        self.cluster = self.runtime.cluster_state(self.conf)
        self.on_stop(self._disconnect, "ZooKeeper connection")
        try:
            # wired for its mode as Nimbus wired it (executor/checkpoint/wiring.py, for_mode)
            topology = for_mode(self.runtime.load_topology(self.storm_id, code_dir), self.conf)
        except InvalidTopologyError as exc:
            self._report(WORKER_ERRORS, f"worker {self.host}:{self.port} refused to start: {exc}")
            raise WorkerStartError(str(exc)) from None
        base = self.cluster.storm_base(self.storm_id, callback=self._assignment_changed)
        assignment = self.cluster.assignment_info(self.storm_id, callback=self._assignment_changed)
        if base is None or assignment is None:
            raise WorkerStartError(f"topology {self.storm_id} has no storm base or assignment (killed?)")
        mine = tuple(sorted(e for e, slot in assignment.executor_node_port.items()
                            if slot == (self.supervisor_id, self.port)))
        if not mine:
            raise WorkerStartError(f"the assignment of {self.storm_id} gives {self.supervisor_id}:{self.port} "
                                   f"no executors")
        layout = compute_layout(topology.structure, self.conf, base.num_workers, base.component_executors)
        self.topology_status = TopologyStatus(False)
        spec = WorkerSpec(self.storm_id, self.conf, layout, mine,
                          self.runtime.address(self.host, self.port, self.storm_id),
                          self._task_addresses(assignment), port=self.port)
        transport = self.runtime.transport(self.host, self.conf)
        self.on_stop(transport.close, "transport")
        self.worker = Worker(spec, topology, transport, self.topology_status,
                             self.runtime.events(self.storm_id, self._on_component_error, self._on_executor_died))
        if self.runtime.carry_stats:
            self._carry_stats(mine)
        self.worker.start()
        self.on_stop(self._stop_worker, "executors")
        self.start_child(PeriodicThread(f"worker-{self.port}-heartbeat", float(self.conf["worker.heartbeat.frequency.secs"]),
                                        self._local_heartbeat, fatal=self.fatal))
        self.start_child(PeriodicThread(f"worker-{self.port}-zk-heartbeat",
                                        float(self.conf["task.heartbeat.frequency.secs"]), self._zk_heartbeat))
        self._refresh = self.start_child(PeriodicThread(f"worker-{self.port}-refresh", self._refresh_interval,
                                                        self._refresh_assignment))
        KEEPER.attach(self.storm_id)
        self.on_stop(lambda: KEEPER.detach(self.storm_id), "log levels")
        self._log_levels = self.start_child(PeriodicThread(f"worker-{self.port}-log-levels",
                                                           self._log_levels_interval, self._sync_log_levels))
        log.info("worker %s of %s on %s:%d running executors %s", self.worker_id, self.storm_id, self.host,
                 self.port, list(mine))

    @property
    def host(self) -> str:
        return local_layout.hostname(self.supervisor_conf)

    def _write_pid(self) -> None:
        pids = local_layout.worker_pids(self.supervisor_conf, self.worker_id)
        pids.mkdir(parents=True, exist_ok=True)
        (pids / str(os.getpid())).touch()

    def _task_addresses(self, assignment) -> dict[int, tuple[str, int]]:
        hosts = assignment.node_host
        address = self.runtime.address
        return task_addresses(assignment.executor_node_port,
                              lambda slot: address(hosts.get(slot[0], slot[0]), slot[1], self.storm_id))

    # ------------------------------------------------------------------ running
    def _refresh_interval(self) -> float:
        # While spouts wait for peers to connect, look again soon; otherwise the poll period.
        if not self.topology_status.active and self._wants_active:
            return 0.1
        return float(self.conf["task.refresh.poll.secs"])

    _wants_active = False
    _savepoint_dir: str | None = None   # the last directory savepoint this worker wrote

    def _assignment_changed(self, *_event) -> None:
        # A one-shot watch: only wake the refresh thread (which re-reads and re-registers it).
        if self._refresh is not None:
            self._refresh.wake()

    def _refresh_assignment(self) -> None:
        try:
            assignment = self.cluster.assignment_info(self.storm_id, callback=self._assignment_changed)
            # Watched too: activate/deactivate/kill reach the spouts now, not at the next poll.
            base = self.cluster.storm_base(self.storm_id, callback=self._assignment_changed)
        except ClusterStateError as exc:
            log.warning("worker %s: cannot read the assignment now (%s); keeping the current one", self.port, exc)
            return
        self._flush_errors()
        if assignment is None or base is None:
            self._wants_active = False
            self.topology_status.set_active(False)  # killed and removed: the supervisor stops us
            return
        self.worker.update_routing(self._task_addresses(assignment))
        request = (base.savepoint_request or {}).get("dir")
        if request and request != self._savepoint_dir:
            self._savepoint_dir = request
            self.worker.write_savepoint(request)
        self._wants_active = base.status == STATUS_ACTIVE
        self.topology_status.park = base.parked
        self.topology_status.set_active(self._wants_active and self.worker.peers_connected())

    def _log_config_changed(self, *_event) -> None:
        if self._log_levels is not None:
            self._log_levels.wake()

    def _log_levels_interval(self) -> float:
        # Back at the next timeout (a moment after it, so the entry has expired), else the poll.
        if self._next_log_timeout is None:
            return LOG_CONFIG_POLL_SECS
        return min(LOG_CONFIG_POLL_SECS, max(0.0, self._next_log_timeout - time.time()) + 0.05)

    def _sync_log_levels(self) -> None:
        try:
            self._log_config = self.cluster.topology_log_config(self.storm_id, callback=self._log_config_changed)
        except (ClusterStateError, DecodeError) as exc:
            # Unreadable now: go on with the last one read, so its timeouts still revert on time.
            log.warning("worker %s: cannot read the log config now (%s); keeping the last one", self.port, exc)
        self._next_log_timeout = KEEPER.sync(self.storm_id, self._log_config, time.time())

    def _carry_stats(self, executors) -> None:
        """What these executors last reported in an earlier worker, from the newest heartbeat
        holding them (a restart or a move keeps a component's figures; what a SIGKILLed worker
        counted after its last heartbeat, at most task.heartbeat.frequency.secs, is lost)."""
        try:
            beats = self.cluster.worker_heartbeats(self.storm_id)
        except ClusterStateError as exc:
            log.warning("worker %s: earlier stats unreadable (%s); all-time totals restart at 0", self.port, exc)
            return
        carried = carried_from_heartbeats(((b.time_secs, b.executor_stats) for b in beats), executors)
        if carried:
            self.worker.stats_keeper.carry(carried, time.time())
            log.info("worker %s: stats carried over for executors %s", self.port, sorted(carried))

    def _local_heartbeat(self) -> None:
        started = time.monotonic()
        now = int(time.time())
        write_worker_heartbeat(self.supervisor_conf, self.worker_id, WorkerHeartbeat(
            storm_id=self.storm_id, executors=tuple(self.worker.executor_ids), port=self.port, time_secs=now,
            uptime_secs=int(now - self.started_at)))
        took, gap = time.monotonic() - started, started - (self._last_local_heartbeat or started)
        self._last_local_heartbeat = started
        if took > 1.0 or gap > 3 * float(self.conf["worker.heartbeat.frequency.secs"]):
            # The supervisor kills a worker whose heartbeat is supervisor.worker.timeout.secs old:
            # say so before that happens.
            log.warning("worker %s: local heartbeat late (%.1fs since the last one; writing took %.1fs)",
                        self.port, gap, took)
        if self._wants_active and not self.topology_status.active and self.worker.peers_connected():
            self.topology_status.set_active(True)

    def _zk_heartbeat(self) -> None:
        now = int(time.time())
        stats = self.worker.executor_stats()
        self.cluster.worker_heartbeat(self.storm_id, self.supervisor_id, self.port, WorkerHeartbeat(
            storm_id=self.storm_id, executors=tuple(self.worker.executor_ids), port=self.port, time_secs=now,
            uptime_secs=int(now - self.started_at), executor_stats=stats,
            checkpoint_marks=self.worker.checkpoint_marks(), pid=os.getpid()))
        self._flush_errors()

    # ------------------------------------------------------------------ errors
    def _on_component_error(self, component: str, task: int, exc: BaseException) -> None:
        # Executor threads only enqueue (throttled per task, as Storm's executors do); the
        # heartbeat/refresh threads write to ZooKeeper.
        if self._throttle.allow(task, time.monotonic()):
            self._errors.put((component, f"{type(exc).__name__}: {exc}"))
        elif self._throttle.dropped in (1, 100) or self._throttle.dropped % 10000 == 0:
            log.warning("worker %s: %d error reports dropped (over topology.max.error.report.per.interval)",
                        self.port, self._throttle.dropped)

    def _on_executor_died(self, _worker: Worker, err: ComponentError) -> None:
        self.fatal(f"executor {err.component_id}[{err.task_id}] died: {err}", err)

    def _report(self, component: str, text: str) -> None:
        try:
            self.cluster.report_error(self.storm_id, component, self.host, self.port, text)
        except ClusterStateError as exc:
            log.warning("cannot report an error of %s to ZooKeeper: %s", component, exc)

    def _flush_errors(self) -> None:
        while True:
            try:
                component, text = self._errors.get_nowait()
            except queue.Empty:
                return
            self._report(component, text)

    def _stop_worker(self) -> None:
        # Spouts first, then a moment for in-flight tuples to drain, then every thread and socket.
        self.topology_status.set_active(False)
        deadline = time.monotonic() + _DRAIN_SECS
        while time.monotonic() < deadline and not self.worker.is_idle():
            time.sleep(0.05)
        self.worker.stop(timeout=5)

    def _disconnect(self) -> None:
        self._flush_errors()  # a dying executor's error reaches ZooKeeper before we go
        self.cluster.disconnect()
