"""The supervisor daemon (Storm's supervisor.clj): orchestration only; the decisions are local_assignments.py
(what runs on each port), slot.py (each port's lifecycle) and worker_state.py (is a pid still
our worker).

Threads, one per role:
- `supervisor-heartbeat`: SupervisorInfo to ZooKeeper every supervisor.heartbeat.frequency.secs
  (ephemeral; meta = the slot ports; with the workers' restarts and latest deaths, see
  worker_death.py), whatever the other threads are doing;
- `supervisor-sync` (synchronize-supervisor): on every assignment change (a one-shot callback
  that only wakes this thread; the next read re-registers it) and every 10 s: re-reads the
  assignments whose version changed, computes the local assignment per port, downloads missing
  code (retrying with back-off), removes code no longer needed, and wakes sync-processes;
- `supervisor-processes` (sync-processes): every supervisor.monitor.frequency.secs, or sooner
  when a slot's timer is due, steps every slot and executes its actions. Nothing here sleeps:
  a kill in progress is a slot state, so one slot never delays another;
- `supervisor-memory`: every supervisor.worker.memory.check.secs samples the running workers'
  memory and wakes sync-processes when one is over its limit (which kills it), so that a
  runaway allocation is stopped near the limit, not a monitor period later. It only reads.

Stopping the supervisor (or killing it) leaves the workers running: they live in their own
sessions. On start the slots are rebuilt from the worker records in LocalState and their
workers re-adopted (pid plus process start time). While ZooKeeper is unreachable the slots keep
their last known assignment.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from typing import Any, Callable, Mapping

from cluster_state import local_layout
from cluster_state.errors import ClusterStateError, DecodeError
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.local_state import LS_APPROVED_WORKERS, LS_ID, LocalState
from cluster_state.records import SupervisorInfo, WorkerDeath
from cluster_state.settings import zk_settings
from cluster_state.storm import StormClusterState
from cluster_state.worker_beats import read_worker_heartbeat, worker_dir_ids
from daemons.https_server import served_port
from daemons.rpc.code_transfer import DownloadRetries
from daemons.supervisor import download, launcher, worker_death
from daemons.supervisor.deaths import recent_deaths, remember_death, topology_hold_until
from daemons.supervisor.dir_lock import lock_local_dir
from daemons.supervisor.local_assignments import (
    LocalAssignments,
    assignments_to_read,
    code_to_download,
    code_to_remove,
    local_assignments,
    new_conflicts,
    refresh_snapshot,
    slot_targets,
    snapshot_assignments,
)
from daemons.supervisor.nimbus_presence import nimbus_presence_message
from daemons.supervisor.slot import (
    CleanupWorker,
    DownloadCode,
    ForgetWorker,
    LaunchWorker,
    RecordWorker,
    ReportError,
    SendSigkill,
    SendSigterm,
    SlotConfig,
    SlotInputs,
    SlotPhase,
    SlotState,
    count_restart,
    memory_limit,
    next_wakeup,
    over_memory_limit,
    recover_slots,
    step,
    storm_ids_in_use,
    stray_worker_dirs,
    used_ports,
    worker_restarts,
)
from daemons.supervisor.worker_state import WorkerRecord
from executor.lifecycle import PeriodicThread, Service
from executor.package import storm_py_version

log = logging.getLogger(__name__)

# Phases in which a worker's process found gone is relaunched (after a check of its code).
_RELAUNCHING = (SlotPhase.RUNNING, SlotPhase.WAITING_FOR_WORKER_START, SlotPhase.KILL_AND_RELAUNCH)
_MEMORY_WATCHED = (SlotPhase.RUNNING, SlotPhase.WAITING_FOR_WORKER_START)  # a worker that runs
SYNC_SUPERVISOR_SECS = 10.0  # supervisor.clj: synchronize-supervisor every 10 s besides the callbacks
_MIN_WAKE_SECS = 0.05        # a due timer is served this soon at the earliest (no busy loop)


class Supervisor(Service):
    def __init__(self, conf: Mapping[str, Any], *, worker_command: launcher.CommandFn = launcher.worker_command,
                 worker_launcher: launcher.WorkerLauncher | None = None,
                 code: download.CodeSource | None = None,
                 cluster_factory: Callable[[], StormClusterState] | None = None):
        super().__init__("supervisor")
        self.conf = dict(conf)
        self.ports = tuple(sorted({int(p) for p in conf["supervisor.slots.ports"]}))
        self.hostname = local_layout.hostname(conf)
        self.slot_conf = SlotConfig.from_conf(conf)
        self.supervisor_id: str | None = None
        self.cluster = None
        # Distributed mode: worker processes, code from Nimbus, ZooKeeper; LocalCluster passes
        # in-process workers, its live topologies and its in-memory cluster state.
        self.launcher: launcher.WorkerLauncher = worker_launcher or launcher.ProcessLauncher(self.conf, worker_command)
        self.code: download.CodeSource = code or download.NimbusCode(self.conf)
        # A Nimbus daemon registers under our root when code comes from one (LocalCluster's does not).
        self._expects_nimbus = code is None
        self._cluster_factory = cluster_factory or (lambda: mk_storm_cluster_state(self.conf))
        self._state: LocalState | None = None
        self._started_at = time.monotonic()
        self._lock = threading.Lock()  # guards what the sync and processes threads share (below)
        self._local: LocalAssignments | None = None   # None: not known (not read yet, ZooKeeper down)
        self._wanted_code: set[str] = set()           # DownloadCode requests of the slots
        self._in_use: frozenset[str] = frozenset()    # topologies the slots still run or kill
        self._used_ports: tuple[int, ...] = ()
        # Owned by the sync thread:
        self._snapshot: dict = {}
        self._reported_conflicts: tuple = ()
        self._reported_ignored: set = set()
        self._retries = DownloadRetries()
        self._zk_trouble = False
        self._zk = None  # ZkSettings, read at start
        self._nimbus_seen: bool | None = None  # None: not looked yet; True: a Nimbus shares our root
        # Owned by the processes thread (and _on_start before it runs):
        self._slots: dict[int, SlotState] = {}
        self._strays: list[SlotState] = []
        self._records: dict[str, WorkerRecord] = {}
        self._pending_cleanup: set[str] = set()
        self._heartbeat_thread: PeriodicThread | None = None
        self._sync_thread: PeriodicThread | None = None
        self._processes_thread: PeriodicThread | None = None
        self.launches = 0  # workers launched by this run (for tests and the bench)
        # Restarts per (topology, port) (slot.count_restart: a planned launch is none), owned by
        # the processes thread; the heartbeat thread reads only the immutable tuple published after each launch.
        self._restart_counts: dict[tuple[str, int], int] = {}
        self._restarts: tuple[tuple[str, int, int], ...] = ()
        # Worker deaths (SupervisorInfo.worker_deaths), the same way: kept by the processes
        # thread, published as an immutable tuple. Where each worker's output starts in its log.
        self._deaths: tuple[WorkerDeath, ...] = ()
        self._topology_limits: dict[str, float | None] = {}  # storm id -> its own worker memory limit
        # Death times per topology (deaths.remember_death), the same way: the back-off of the
        # topology's launches here and the heartbeat's recent deaths.
        self._death_times: dict[str, tuple[float, ...]] = {}
        # Code downloads failing now (SupervisorInfo.code_failures), kept by the sync thread.
        self._code_failures: tuple[tuple[str, int, str], ...] = ()
        self._log_starts: dict[str, int] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def _on_start(self) -> None:
        conf = self.conf
        lock = lock_local_dir(local_layout.supervisor_dir(conf), local_layout.local_dir(conf))
        self.on_stop(lambda: os.close(lock), "storm.local.dir lock")
        local_layout.supervisor_stormdist(conf).mkdir(parents=True, exist_ok=True)
        local_layout.worker_root(conf).mkdir(parents=True, exist_ok=True)
        self.code.clean_tmp()
        self._state = LocalState(local_layout.supervisor_localstate(conf))
        self.supervisor_id = self._state.get(LS_ID)
        if not isinstance(self.supervisor_id, str) or not self.supervisor_id:
            self.supervisor_id = str(uuid.uuid4())
            self._state.put(LS_ID, self.supervisor_id)
        self._recover()
        self.cluster = self._cluster_factory()
        self.on_stop(self.cluster.disconnect, "ZooKeeper connection")
        self.code.open()
        self.on_stop(self.code.close, "Nimbus client")
        # Registered before anything else happens (supervisor.clj calls heartbeat-fn first).
        self._heartbeat()
        # Before the threads start: the sync thread names ZooKeeper in its "no Nimbus" warning.
        zk = self._zk = zk_settings(conf)
        hb_secs = float(conf["supervisor.heartbeat.frequency.secs"])
        self._heartbeat_thread = self.start_child(
            PeriodicThread("supervisor-heartbeat", hb_secs, self._heartbeat, run_at_start=False))
        self._processes_thread = PeriodicThread("supervisor-processes", self._processes_interval,
                                                self._sync_processes, fatal=self.fatal)
        self._sync_thread = PeriodicThread("supervisor-sync", self._sync_interval, self._synchronize,
                                           fatal=self.fatal)
        self.start_child(self._processes_thread)
        self.start_child(self._sync_thread)
        self.start_child(PeriodicThread("supervisor-memory", float(conf["supervisor.worker.memory.check.secs"]),
                                        self._check_memory, run_at_start=False))
        log.info("supervisor %s running on %s with slots %s (local dir %s; ZooKeeper %s, root %s)",
                 self.supervisor_id, self.hostname, list(self.ports), local_layout.local_dir(conf),
                 zk.connect_string, zk.root)

    def _recover(self) -> None:
        """Slots from the worker records of the previous run; worker dirs nobody recorded are
        removed without signalling anything (no pid we could trust)."""
        records = []
        for worker_id, data in (self._state.get(LS_APPROVED_WORKERS) or {}).items():
            try:
                record = WorkerRecord.from_dict(data)
            except (TypeError, KeyError, ValueError) as exc:
                log.warning("dropping damaged worker record %s: %s", worker_id, exc)
                continue
            if record.pid is None:
                found = self.launcher.find_launched(record)
                if found is not None:
                    record = record.with_pid(*found)
            records.append(record)
        self._records = {r.worker_id: r for r in records}
        self._persist_records()
        self._slots, strays = recover_slots(self.ports, records)
        self._strays = list(strays)
        for worker_id in sorted(stray_worker_dirs(worker_dir_ids(self.conf), records)):
            log.info("removing worker dir %s: no record of launching it", worker_id)
            launcher.cleanup_worker(self.conf, worker_id)
        if records:
            log.info("recovered %d worker record(s): %s", len(records),
                     ", ".join(f"{r.worker_id} port {r.port} pid {r.pid}" for r in records))

    # -- heartbeat ---------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        logviewer = served_port(self.conf, "logviewer")
        info = SupervisorInfo(time_secs=int(time.time()), hostname=self.hostname, assignment_id=self.supervisor_id,
                              used_ports=self._used_ports, meta=self.ports, scheduler_meta=None,
                              uptime_secs=int(time.monotonic() - self._started_at),
                              version=storm_py_version(), logviewer_port=logviewer[0], logviewer_https=logviewer[1],
                              worker_restarts=self._restarts, worker_deaths=self._deaths,
                              recent_worker_deaths=recent_deaths(self._death_times, time.time()),
                              code_failures=self._code_failures)
        try:
            self.cluster.supervisor_heartbeat(self.supervisor_id, info)
        except ClusterStateError as exc:
            log.warning("supervisor heartbeat not written (ZooKeeper: %s); workers keep running", exc)

    # -- synchronize-supervisor --------------------------------------------------------------

    def _on_assignments_changed(self) -> None:
        # Runs on the cluster state's event thread: only hand the work over.
        thread = self._sync_thread
        if thread is not None:
            thread.wake()

    def _sync_interval(self) -> float:
        due = self._retries.next_due()
        if due is None:
            return SYNC_SUPERVISOR_SECS
        return min(SYNC_SUPERVISOR_SECS, max(_MIN_WAKE_SECS, due - time.time()))

    def _read_assignments(self) -> dict:
        cluster, callback = self.cluster, self._on_assignments_changed
        storm_ids = cluster.assignments(callback)
        versions = {sid: cluster.assignment_version(sid, callback) for sid in storm_ids}
        fetched = {}
        for sid in assignments_to_read(versions, self._snapshot):
            try:
                fetched[sid] = cluster.assignment_info_with_version(sid, callback)
            except DecodeError as exc:  # about that node only: keep what we had
                log.error("cannot decode the assignment of %s (keeping the last one read): %s", sid, exc)
        return refresh_snapshot(self._snapshot, versions, fetched)

    def _synchronize(self) -> None:
        try:
            snapshot = self._read_assignments()
        except ClusterStateError as exc:
            if not self._zk_trouble:
                log.warning("cannot read assignments from ZooKeeper (%s); workers keep their last known "
                            "assignment until it is back", exc)
            self._zk_trouble = True
            self._download_wanted(self._known_local())
            return
        if self._zk_trouble:
            log.info("ZooKeeper is back: assignments read again")
            self._zk_trouble = False
        if self._expects_nimbus and not self._nimbus_seen:
            self._look_for_nimbus()
        self._snapshot = snapshot
        local = local_assignments(snapshot_assignments(snapshot), self.supervisor_id, self.ports)
        for conflict in new_conflicts(local, self._reported_conflicts):
            log.error("assignment conflict: %s", conflict.message())
        self._reported_conflicts = local.conflicts
        for ignored in local.ignored:
            if ignored not in self._reported_ignored:
                log.error("ignoring the assignment of %s to port %s: %s", ignored.storm_id, ignored.port,
                          ignored.reason)
        self._reported_ignored = set(local.ignored)
        with self._lock:
            self._local = local
        self._processes_thread.wake()  # slots react to the new assignment now
        self._download_wanted(local)
        self._remove_unneeded_code(local)

    def _look_for_nimbus(self) -> None:
        """Until a Nimbus is seen under our ZooKeeper root, say that none is: a supervisor given
        another storm.zookeeper.root (or ZooKeeper) than Nimbus's otherwise runs unseen."""
        try:
            registered = self.cluster.nimbus_registrations()
        except ClusterStateError:
            return  # ZooKeeper trouble is reported by the assignment reads
        message = nimbus_presence_message(registered, self._zk, self._nimbus_seen)
        if message is not None:
            level, text = message
            log.log(level, "%s", text)
        self._nimbus_seen = bool(registered)

    def _known_local(self) -> LocalAssignments | None:
        with self._lock:
            return self._local

    def _download_wanted(self, local: LocalAssignments | None) -> None:
        downloaded = set(self.code.stored_ids())
        with self._lock:
            wanted, self._wanted_code = set(self._wanted_code), set()
        needed = set(code_to_download(local, downloaded)) if local is not None else set()
        if local is not None:
            # A slot may still ask for code of a topology just unassigned (stale request): skip it.
            wanted &= local.code_kept
        needed |= wanted - downloaded
        if local is not None:
            self._retries.keep_only(needed)
            self._code_failures = tuple(f for f in self._code_failures if f[0] in needed)
        now = time.time()
        for storm_id in sorted(needed):
            if not self._retries.due(storm_id, now):
                continue
            log.info("downloading code of %s from Nimbus", storm_id)
            try:
                path = self.code.fetch(storm_id)
            except Exception as exc:  # noqa: BLE001 -- RPC, package, disk: all retried the same way
                delay = self._retries.failed(storm_id, time.time())
                log.warning("download of %s failed (attempt %d; retrying in %.0fs): %s", storm_id,
                            self._retries.failures(storm_id), delay, exc)
                attempt = self._retries.failures(storm_id)
                why = (f"{exc} (attempt {attempt})" if isinstance(exc, download.NoSpaceError)
                       else f"cannot fetch the code from Nimbus (attempt {attempt}): {exc}")
                self._code_failures = (*(f for f in self._code_failures if f[0] != storm_id),
                                       (storm_id, int(time.time()), why[:500]))
                continue
            self._retries.succeeded(storm_id)
            self._code_failures = tuple(f for f in self._code_failures if f[0] != storm_id)
            log.info("downloaded code of %s into %s", storm_id, path)
            self._processes_thread.wake()

    def _remove_unneeded_code(self, local: LocalAssignments) -> None:
        with self._lock:
            in_use = self._in_use
        for storm_id in sorted(code_to_remove(local, self.code.stored_ids(), in_use)):
            self.code.remove(storm_id)

    # -- sync-processes ----------------------------------------------------------------------

    def _processes_interval(self) -> float:
        period = float(self.conf["supervisor.monitor.frequency.secs"])
        wakeups = [w for s in (*self._slots.values(), *self._strays)
                   if (w := next_wakeup(s, self.slot_conf)) is not None]
        if not wakeups:
            return period
        return min(period, max(_MIN_WAKE_SECS, min(wakeups) - time.time()))

    def _sync_processes(self) -> None:
        now = time.time()
        for worker_id in sorted(self._pending_cleanup):
            if launcher.cleanup_worker(self.conf, worker_id):
                self._pending_cleanup.discard(worker_id)
        local = self._known_local()
        targets = slot_targets(local, self.ports, {p: s.assignment for p, s in self._slots.items()})
        for port in self.ports:
            self._slots[port] = self._step(self._slots[port], targets[port], now)
        strays = []
        for state in self._strays:
            state = self._step(state, None, now)
            if state.phase is not SlotPhase.EMPTY or state.has_worker:
                strays.append(state)
        self._strays = strays
        states = (*self._slots.values(), *self._strays)
        in_use = storm_ids_in_use(states)
        if any(d.storm_id not in in_use for d in self._deaths):
            self._deaths = worker_death.keep_deaths(self._deaths, None, in_use)
        if any(sid not in in_use for sid in self._death_times):
            self._death_times = {sid: t for sid, t in self._death_times.items() if sid in in_use}
        if any(sid not in in_use for sid in self._topology_limits):
            self._topology_limits = {sid: v for sid, v in self._topology_limits.items() if sid in in_use}
        with self._lock:
            self._in_use = in_use
            self._used_ports = tuple(p for p in used_ports(states) if p in self.ports)

    def _step(self, state: SlotState, target, now: float) -> SlotState:
        worker_id = state.worker_id
        alive = self._alive(worker_id) if worker_id else False
        if worker_id and not alive and state.phase in _RELAUNCHING and state.assignment is not None:
            # Checked before the step decides: a relaunch must not start on damaged code.
            self._refetch_if_damaged(state.assignment.storm_id)
        topo_limit = self._topology_memory_limit(state.assignment.storm_id) \
            if alive and state.assignment is not None else None
        inputs = SlotInputs(
            assignment=target,
            code_present=target is not None and self.code.present(target.storm_id),
            heartbeat=read_worker_heartbeat(self.conf, worker_id) if worker_id else None,
            process_alive=alive,
            memory_bytes=self._memory(worker_id) if alive and (
                self.slot_conf.memory_limit_mb is not None or topo_limit is not None) else None,
            topology_memory_limit_mb=topo_limit,
            new_worker_id=str(uuid.uuid4()),
            topology_hold_until=None if target is None else topology_hold_until(
                self._death_times.get(target.storm_id, ()), now, self.slot_conf.relaunch_backoff_base_secs,
                self.slot_conf.relaunch_backoff_max_secs))
        new_state, actions = step(state, inputs, now, self.slot_conf)
        if new_state.phase is not state.phase:
            log.info("slot %s: %s -> %s%s", state.port, state.phase.value, new_state.phase.value,
                     f" ({new_state.assignment.storm_id})" if new_state.assignment else "")
        for action in actions:
            self._execute(action)
        return new_state

    def _check_memory(self) -> None:
        """supervisor-memory: wake sync-processes when a running worker is over its memory limit
        (the slot's step decides and kills; the limits of topologies are as that thread read them)."""
        for state in list(self._slots.values()):
            if state.phase not in _MEMORY_WATCHED or state.worker_id is None or state.assignment is None:
                continue
            limit, _key = memory_limit(self.slot_conf, self._topology_limits.get(state.assignment.storm_id))
            if over_memory_limit(self._memory(state.worker_id), limit):
                self._processes_thread.wake()
                return

    def _memory(self, worker_id: str) -> int | None:
        record = self._records.get(worker_id)
        return None if record is None else self.launcher.memory_bytes(record)

    def _alive(self, worker_id: str) -> bool:
        record = self._records.get(worker_id)
        if record is None:
            return False
        return self.launcher.alive(record)

    def _execute(self, action) -> None:
        if isinstance(action, RecordWorker):
            self._records[action.record.worker_id] = action.record
            self._persist_records()
        elif isinstance(action, LaunchWorker):
            self._launch(action)
        elif isinstance(action, SendSigterm):
            self._signal(action.worker_id, signal.SIGTERM)
        elif isinstance(action, SendSigkill):
            self._signal(action.worker_id, signal.SIGKILL)
        elif isinstance(action, CleanupWorker):
            self.launcher.forget(action.worker_id)
            if not launcher.cleanup_worker(self.conf, action.worker_id):
                self._pending_cleanup.add(action.worker_id)
        elif isinstance(action, ForgetWorker):
            self._log_starts.pop(action.worker_id, None)
            if self._records.pop(action.worker_id, None) is not None:
                self._persist_records()
        elif isinstance(action, DownloadCode):
            with self._lock:
                self._wanted_code.add(action.storm_id)
            if self._sync_thread is not None:
                self._sync_thread.wake()
        elif isinstance(action, ReportError):
            log.warning("slot %s%s: %s", action.port, f" ({action.storm_id})" if action.storm_id else "",
                        action.message)
            if action.death and action.storm_id is not None:
                times = {**self._death_times, action.storm_id: remember_death(
                    self._death_times.get(action.storm_id, ()), time.time())}
                self._death_times = {k: v for k, v in times.items() if v}
                try:
                    self._record_death(action)
                except Exception:  # noqa: BLE001 -- diagnostics only: never stops the slots
                    log.exception("slot %s: could not record the death of worker %s", action.port, action.worker_id)
        else:
            raise TypeError(f"unknown slot action {action!r}")

    def _launch(self, action: LaunchWorker) -> None:
        log.info("launching worker %s on port %s for %s with executors %s", action.worker_id, action.port,
                 action.assignment.storm_id, list(action.assignment.executors))
        self._count_restart(action)
        try:  # where its output starts in the log it shares with the slot's earlier workers
            self._log_starts[action.worker_id] = launcher.log_size(
                local_layout.worker_log(self.conf, action.assignment.storm_id, action.port))
        except ValueError:  # an id unfit for a path: the launch itself reports it
            pass
        try:
            pid, start = self.launcher.launch(self.supervisor_id, action.worker_id, action.port,
                                              action.assignment)
        except OSError as exc:
            # A launch that produced no process is a dead worker: the slot relaunches with back-off.
            log.error("cannot launch worker %s on port %s: %s", action.worker_id, action.port, exc)
            return
        self.launches += 1
        record = self._records.get(action.worker_id)
        if record is not None:
            self._records[action.worker_id] = record.with_pid(pid, start)
            self._persist_records()

    def _record_death(self, report: ReportError) -> None:
        """What the supervisor can tell about a failed worker now: its exit status (if its
        process is gone and was ours) and the end of what it wrote to its log (read now: a
        relaunched worker appends to the same file); published in the next heartbeat."""
        worker_id = report.worker_id
        returncode = self.launcher.exit_status(worker_id) if worker_id else None
        path = local_layout.worker_log(self.conf, report.storm_id, report.port)
        start = self._log_starts.get(worker_id, 0) if worker_id else 0
        data, mid_line = launcher.read_log_tail(path, worker_death.TAIL_READ_BYTES, start)
        tail = worker_death.tail_lines(data, starts_mid_line=mid_line)
        death = worker_death.death_from(report.storm_id, report.port, int(time.time()), report.message, returncode,
                                        tail)
        if death.exit_code is not None or death.signal or death.error_line:
            how = f"exit code {death.exit_code}" if death.exit_code is not None else \
                f"killed by {death.signal}" if death.signal else "still running"
            log.warning("slot %s (%s): worker %s %s%s", report.port, report.storm_id, worker_id, how,
                        f"; last error: {death.error_line}" if death.error_line else "")
        in_use = storm_ids_in_use((*self._slots.values(), *self._strays))
        self._deaths = worker_death.keep_deaths(self._deaths, death, in_use)
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.wake()  # Nimbus and the UI learn it now, not a heartbeat later

    def _topology_memory_limit(self, storm_id: str) -> float | None:
        """topology.worker.memory.limit.mb of `storm_id`'s conf as installed here (read once)."""
        if storm_id not in self._topology_limits:
            self._topology_limits = {**self._topology_limits,
                                     storm_id: download.topology_memory_limit(self.conf, storm_id)}
        return self._topology_limits[storm_id]

    def _refetch_if_damaged(self, storm_id: str) -> None:
        """A worker's process is gone: if the topology's code here no longer matches its package
        (edited, truncated, a disk error), remove it so that the slot fetches it again rather
        than relaunching on it forever."""
        try:
            problems = self.code.damaged(storm_id) if self.code.present(storm_id) else []
        except OSError as exc:
            problems = [str(exc)]
        if problems:
            log.warning("the code of %s here is damaged (%s%s): fetching it again from Nimbus", storm_id,
                        "; ".join(problems[:3]), f"; {len(problems) - 3} more" if len(problems) > 3 else "")
            self.code.remove(storm_id)

    def _count_restart(self, launch: LaunchWorker) -> None:
        self._restart_counts = count_restart(self._restart_counts, launch, storm_ids_in_use(self._slots.values()))
        self._restarts = worker_restarts(self._restart_counts)

    def _signal(self, worker_id: str, sig: signal.Signals) -> None:
        record = self._records.get(worker_id)
        if record is None:
            log.warning("no record of worker %s: not sending %s", worker_id, sig.name)
            return
        self.launcher.signal(record, sig)

    def _persist_records(self) -> None:
        self._state.put(LS_APPROVED_WORKERS, {wid: r.to_dict() for wid, r in self._records.items()})

    # -- for tests and tools -----------------------------------------------------------------

    def slot_states(self) -> dict[int, SlotState]:
        return dict(self._slots)

    def worker_records(self) -> dict[str, WorkerRecord]:
        return dict(self._records)
