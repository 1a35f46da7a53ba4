"""Nimbus's operations and its scheduling round, on the cluster state and the code store.

No threads and no sockets here: `daemons.nimbus.daemon` runs these from its RPC thread and its
monitor thread, under one lock (Storm's nimbus serialises them the same way). Decisions are
the pure functions of `scheduler`, `transitions` and `liveness`; this module reads ZooKeeper,
calls them, and writes back only what changed.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from cluster_state.config import ConfigError, merge_configs
from cluster_state.errors import ClusterStateError, DecodeError
from cluster_state.protocol import ConnectionState
from cluster_state.records import (
    STATUS_ACTIVE,
    STATUS_INACTIVE,
    STATUS_KILLED,
    SWAP_ENDED,
    WORKER_ERRORS,
    Assignment,
    CheckpointMark,
    ErrorInfo,
    StormBase,
)
from cluster_state.storm import StormClusterState
from daemons.answers.cluster import ClusterInfo
from daemons.answers.details import TopologyDetails
from daemons.answers.info import TopologyInfo, info_from_details
from daemons.nimbus import liveness
from daemons.nimbus.rebalance_notes import rebalance_notes
from daemons.nimbus.scheduler import (
    SupervisorSlots,
    TopologyRequest,
    node_hosts,
    schedule,
    start_times,
)
from daemons.nimbus.seams import TopologyCodeStore
from daemons.nimbus.summaries import (
    DetailFacts,
    HealthSettings,
    TopologyFacts,
    cluster_summary,
    topology_details,
)
from daemons.nimbus.transitions import (
    Activate,
    Deactivate,
    Event,
    Kill,
    Park,
    Rebalance,
    RemoveTopology,
    Reschedule,
    Resume,
    ScheduleTimer,
    Startup,
    Stop,
    TopologyState,
    apply_to_base,
    state_from_base,
    transition,
)
from daemons.rpc.protocol import UnavailableError
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT
from executor.checkpoint.wiring import for_mode
from executor.errors import AlreadyAliveError, InvalidTopologyError, NotAliveError
from executor.layout import TopologyLayout, compute_layout, num_ackers
from executor.package import (
    is_daemon_key,
    storm_py_version,
    verify_package,
    without_daemon_keys,
    without_secrets,
)
from executor.stats_record import StatsDecodeError, from_wire
from executor.structure import TopologyStructure, validate_structure, validate_topology_name
from executor.submit_rules import check_topology

log = logging.getLogger(__name__)


class RebalanceStarted(NamedTuple):
    notes: list[str]        # what will differ from what was asked
    seconds_left: float     # until the topology is rescheduled

@dataclass(frozen=True)
class _Topology:
    """What Nimbus keeps in memory about a stored topology (read once from its code dir)."""

    structure: TopologyStructure
    conf: Mapping[str, Any]


class NimbusCore:
    def __init__(self, conf: Mapping[str, Any], cluster: StormClusterState, store: TopologyCodeStore,
                 clock: Callable[[], float] = time.time):
        self.conf = dict(conf)
        self.cluster = cluster
        self.store = store
        self.clock = clock
        self.lock = threading.RLock()
        self._counter = itertools.count(1)
        self._timers: list[tuple[float, int, str, Event]] = []
        self._timer_seq = itertools.count()
        self._beats: dict[str, dict[tuple[int, int], liveness.Seen]] = {}  # storm id -> executor -> seen
        self._sup_beats: dict[str, liveness.Seen] = {}
        self._sup_slots: dict[str, SupervisorSlots] = {}  # the last round's, kept through an outage's grace
        self._reconnects = cluster.reconnects()
        self._outage_grace_until = float("-inf")
        self._abandoned: set[str] = set()  # submits undone half-way whose removal ZooKeeper refused
        self._meta: dict[str, _Topology] = {}
        # New code a swap installed that no swap record names yet (the record is written once the
        # old topology is stopping): kept by the cleanup all the same.
        self._installed_pending: set[str] = set()
        self.started_at = clock()

    # ------------------------------------------------------------------ recovery
    def recover(self) -> None:
        """On start and on becoming the leader: keep every running assignment and re-arm pending
        kills and rebalances. A topology whose code is not here is kept as it runs (never
        removed for that: another Nimbus may have it; the code sync fetches it)."""
        with self.lock:
            self._timers.clear()  # re-armed below from ZooKeeper, as a restarted Nimbus would
            for storm_id in self.cluster.active_storms():
                base = self._base_or_none(storm_id)
                if base is None:
                    continue
                if not self.store.has(storm_id):
                    log.error("topology %s (%s) has no code on this Nimbus: it keeps running as assigned and "
                              "is not rescheduled until its code is fetched from another Nimbus",
                              base.storm_name, storm_id)
                    continue
                self._apply(storm_id, Startup())
            self.cleanup()

    # ------------------------------------------------------------------ submit
    def submit(self, name: str, package: Path, initial_status: str = STATUS_ACTIVE,
               overrides: Mapping[str, Any] | None = None, deadline: float | None = None,
               before_start: Callable[[str, TopologyStructure, Mapping[str, Any]], Mapping[str, Any]] | None = None
               ) -> str:
        """Validate and install a verified upload, write its storm base and assign it.
        `deadline` (time.monotonic()): when the client stops waiting; a submit that cannot
        finish before it is undone, so that a client's timeout never leaves a topology behind.
        `before_start(storm_id, structure, conf)`: run once the code is installed and before
        anything runs (a start from a savepoint writes its state there); the conf it returns
        is added to the topology's."""
        validate_topology_name(name)
        try:
            # Every file's digest checked now: a damaged package is refused at submit, not at a supervisor.
            manifest = verify_package(package, max_bytes=int(self.conf["storm.package.max.bytes"]))
            return self.submit_code(name, manifest.structure(), manifest.conf, package, initial_status, overrides,
                                    deadline=deadline, before_start=before_start)
        finally:
            package.unlink(missing_ok=True)

    def submit_code(self, name: str, structure: TopologyStructure, submitted_conf: Mapping[str, Any], code: Any,
                    initial_status: str = STATUS_ACTIVE, overrides: Mapping[str, Any] | None = None,
                    deadline: float | None = None,
                    before_start: Callable[[str, TopologyStructure, Mapping[str, Any]], Mapping[str, Any]] | None = None
                    ) -> str:
        """Validate a topology, install its `code` (what the store keeps: a package file, or
        LocalCluster's live objects), write its storm base and assign it."""
        if initial_status not in (STATUS_ACTIVE, STATUS_INACTIVE):
            raise InvalidTopologyError(f"initial status must be active or inactive, got {initial_status!r}")
        self._require_zookeeper(name)
        asked = time.monotonic()
        with self.lock:
            locked = time.monotonic() - asked  # behind Nimbus's scheduling, which holds the lock
            existing = self._id_of(name)
            if existing is not None:
                raise AlreadyAliveError(self._name_taken(name, existing))
            storm_id, structure, conf = self._prepare(name, structure, submitted_conf, overrides or {})
            if before_start is not None:
                extra = before_start(storm_id, structure, conf)
                if extra:
                    conf = {**conf, **extra}
            self.store.install(storm_id, code, conf)
            self._start_installed(name, storm_id, structure, conf, initial_status, deadline, locked)
        return storm_id

    def install_pending(self, name: str, package: Path, overrides: Mapping[str, Any],
                        extra_conf: Callable[[str], Mapping[str, Any]]) -> tuple[str, TopologyStructure, dict]:
        """Validate and install a verified upload as the next code of topology `name` without
        starting it (a swap starts it once the old code stopped): its id, structure and conf,
        with `extra_conf(id)` in it (which savepoint it starts from). Nothing is written to
        ZooKeeper; the code stays until `start_pending` or the cleanup of an ended swap."""
        validate_topology_name(name)
        try:
            manifest = verify_package(package, max_bytes=int(self.conf["storm.package.max.bytes"]))
            with self.lock:
                storm_id, structure, conf = self._prepare(name, manifest.structure(), manifest.conf, overrides)
                conf = {**conf, **extra_conf(storm_id)}
                self.store.install(storm_id, package, conf)
                self._installed_pending.add(storm_id)
            return storm_id, structure, conf
        finally:
            package.unlink(missing_ok=True)

    def start_pending(self, name: str, storm_id: str) -> bool:
        """Start code installed by `install_pending` (idempotent: False if it runs already)."""
        self._require_zookeeper(name)
        with self.lock:
            if self._base_or_none(storm_id) is not None:
                return False
            existing = self._id_of(name)
            if existing is not None:
                raise AlreadyAliveError(self._name_taken(name, existing))
            meta = self._topology(storm_id)
            self._start_installed(name, storm_id, meta.structure, meta.conf, STATUS_ACTIVE, None)
            self._installed_pending.discard(storm_id)
            return True

    def _require_zookeeper(self, name: str) -> None:
        if self.cluster.connection_state is not ConnectionState.CONNECTED:
            raise UnavailableError(f"Nimbus cannot reach ZooKeeper ({self.cluster.connection_state.value}): "
                                   f"topology {name!r} was not submitted; submit it again once ZooKeeper is back")

    def _prepare(self, name: str, structure: TopologyStructure, submitted_conf: Mapping[str, Any],
                 overrides: Mapping[str, Any]) -> tuple[str, TopologyStructure, dict[str, Any]]:
        """A new topology's id, its structure wired for its mode and its checked conf (the lock held)."""
        validate_topology_name(name)
        validate_structure(structure)
        storm_id = f"{name}-{next(self._counter)}-{int(self.clock())}"
        conf = self._topology_conf(name, storm_id, submitted_conf, overrides)
        structure = for_mode(structure, conf)  # workers wire it so from the same conf
        check_topology(structure, conf)
        return storm_id, structure, conf

    def _start_installed(self, name: str, storm_id: str, structure: TopologyStructure, conf: Mapping[str, Any],
                         initial_status: str, deadline: float | None, locked: float = 0.0) -> None:
        """Write the storm base of installed code and assign it (the lock held); undone on failure.
        `locked`: seconds the submit waited for the lock (named when it runs out of time)."""
        num_workers = int(conf["topology.workers"])
        layout = compute_layout(structure, conf, num_workers)
        self._meta[storm_id] = _Topology(structure, conf)
        base = StormBase(storm_name=name, launch_time_secs=int(self.clock()), status=initial_status,
                         num_workers=num_workers,
                         component_executors={c: len(e) for c, e in layout.executors.items()})
        try:
            writing = time.monotonic()
            self.cluster.setup_heartbeats(storm_id)
            self.cluster.activate_storm(storm_id, base)
            if deadline is not None and time.monotonic() > deadline:
                raise UnavailableError(
                    f"submitting topology {name!r} took longer than the client waits ({locked:.1f}s waiting "
                    f"behind Nimbus's scheduling, {time.monotonic() - writing:.1f}s writing to ZooKeeper: "
                    f"Nimbus's host or ZooKeeper is slow): undone, nothing was submitted")
            self.mk_assignments()
        except BaseException:
            self._undo_submit(storm_id)
            raise
        log.info("submitted topology %s as %s (%d workers, %s)", name, storm_id, num_workers, initial_status)

    def _topology_conf(self, name: str, storm_id: str, submitted: Mapping[str, Any],
                       overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Nimbus's conf < the package's conf < the submitter's -c values (Storm's submitter merges
        command-line options over the topology's conf), secrets and daemon keys left out (a
        worker takes those from its supervisor), Storm's own keys set."""
        dropped = sorted(k for k in (*submitted, *overrides) if is_daemon_key(k))
        if dropped:
            log.info("topology %s: daemon keys not taken from its config: %s", name, ", ".join(dropped))
        try:
            conf = merge_configs(without_daemon_keys(self.conf), without_daemon_keys(without_secrets(submitted)),
                                 source=f"topology {name!r} config")
            conf = merge_configs(conf, without_daemon_keys(without_secrets(overrides)), source=f"topology {name!r} -c")
        except ConfigError as exc:
            raise InvalidTopologyError(str(exc)) from None
        conf = without_secrets(conf)
        workers = int(conf["topology.workers"])
        # Fixed at submit so that a rebalance keeps the acker's task ids (and the layout) stable.
        conf["topology.acker.executors"] = num_ackers(conf, workers)
        conf["topology.name"] = name
        conf["storm.id"] = storm_id
        return conf

    # ------------------------------------------------------------------ user events
    def kill(self, name: str, wait_secs: float | None = None) -> float:
        """Kill; returns the seconds until the topology is removed (its message timeout unless
        `wait_secs` is given, sooner when an earlier kill's wait ends first)."""
        return self._seconds_left(self._event(name, Kill(wait_secs)))

    def activate(self, name: str) -> None:
        self._event(name, Activate())

    def deactivate(self, name: str, note: str | None = None) -> None:
        self._event(name, Deactivate(note))

    def stop(self, name: str, wait_secs: float, note: str | None = None) -> None:
        """Stop at a checkpoint within `wait_secs` (a swap): status stopping, its spouts inactive."""
        self._event(name, Stop(wait_secs, note))

    def park(self, storm_id: str) -> None:
        """A stopping topology's checkpoint spout starts no further checkpoint."""
        with self.lock:
            self._apply(storm_id, Park())

    def resume(self, storm_id: str) -> None:
        """A stopping topology goes back to the status it had (its swap gave up)."""
        with self.lock:
            if self._base_or_none(storm_id) is not None:
                self._apply(storm_id, Resume())

    def remove_now(self, storm_id: str) -> None:
        """Kill and remove at once (a swap's stopped topology): its workers then exit."""
        with self.lock:
            if self._base_or_none(storm_id) is not None:
                self._apply(storm_id, Kill(0.0))
        self.fire_timers()

    def checkpoint_marks(self, storm_id: str) -> dict[str, list[CheckpointMark | None]]:
        """Component -> each of its executors' CheckpointMark from their heartbeats (None: not
        reported yet), for the executors of the current layout."""
        with self.lock:
            base = self._base(storm_id)
            executors = {c: [tuple(e) for e in es] for c, es in self.layout(storm_id, base).executors.items()}
        assignment = self._assignment_or_none(storm_id)
        enp = {} if assignment is None else assignment.executor_node_port
        beats = self.cluster.executor_beats(storm_id, enp) if enp else {}
        return {c: [beats[e].mark if e in beats else None for e in es] for c, es in executors.items()}

    def request_savepoint(self, name: str, directory: str | None) -> None:
        """Ask the workers of `name` to write their tasks' committed state to `directory` (a
        directory savepoint, executor/savepoints/files.py); None withdraws the request."""
        with self.lock:
            storm_id = self.resolve(name)
            base = self._base(storm_id)
            request = None if directory is None else {"dir": directory}
            if base.savepoint_request != request:
                self.cluster.activate_storm(storm_id, replace(base, savepoint_request=request))

    def rebalance(self, name: str, wait_secs: float | None = None, num_workers: int | None = None,
                  executors: Mapping[str, int] | None = None) -> RebalanceStarted:
        """Start a rebalance; returns notes on what will differ from what was asked, and the
        seconds until it happens."""
        with self.lock:
            storm_id = self.resolve(name)
            known = self._topology(storm_id).structure.components
            for comp in executors or {}:
                if comp not in known:
                    raise InvalidTopologyError(f"rebalance {name}: topology has no component {comp!r} "
                                               f"(components: {', '.join(sorted(known))})")
            slots = sum(len(info.meta) for info in self.cluster.all_supervisor_info().values())
            state = self._event(name, Rebalance(wait_secs, num_workers, dict(executors) if executors else None))
            return RebalanceStarted(rebalance_notes(known, executors, num_workers, slots), self._seconds_left(state))

    def _seconds_left(self, state: TopologyState | None) -> float:
        deadline = None if state is None else state.deadline_secs
        return 0.0 if deadline is None else max(0.0, deadline - self.clock())

    def _event(self, name: str, event: Event) -> TopologyState | None:
        with self.lock:
            storm_id = self.resolve(name)
            log.info("topology %s: %s", name, event.name)
            return self._apply(storm_id, event)

    def _apply(self, storm_id: str, event: Event) -> TopologyState | None:
        """Run one state-machine step for a topology and carry out its actions (returns its new state)."""
        base = self._base(storm_id)
        state = self._state(storm_id, base)
        new_state, actions = transition(state, event, self.clock())
        if new_state is not None and new_state != state:
            self.cluster.activate_storm(storm_id, apply_to_base(base, new_state))
        for action in actions:
            if isinstance(action, ScheduleTimer):
                heapq.heappush(self._timers, (action.at_secs, next(self._timer_seq), storm_id, action.event))
            elif isinstance(action, RemoveTopology):
                self._remove(storm_id)
            elif isinstance(action, Reschedule):
                self.mk_assignments(scratch={storm_id})
        return new_state

    def fire_timers(self) -> None:
        """Deliver every due kill/rebalance timer (a stale one is ignored by the state machine)."""
        with self.lock:
            now = self.clock()
            while self._timers and self._timers[0][0] <= now:
                _at, _seq, storm_id, event = heapq.heappop(self._timers)
                if self._base_or_none(storm_id) is None:
                    continue  # removed meanwhile
                try:
                    self._apply(storm_id, event)
                except (ClusterStateError, InvalidTopologyError) as exc:
                    log.error("topology %s: %s failed: %s", storm_id, event.name, exc)

    def next_timer_in(self) -> float | None:
        with self.lock:
            return None if not self._timers else max(0.0, self._timers[0][0] - self.clock())

    # ------------------------------------------------------------------ scheduling round
    def mk_assignments(self, scratch: set[str] = frozenset()) -> None:
        """Schedule every topology; write only the assignments whose content changed.

        `scratch`: topologies rescheduled from nothing (a rebalance), as Storm does."""
        with self.lock:
            now = self.clock()
            self._after_outage(now)
            supervisors = self._alive_supervisors(now)
            requests, old = [], {}
            for storm_id in sorted(self.cluster.active_storms()):
                base = None if storm_id in self._abandoned else self._base_or_none(storm_id)
                if base is None:
                    continue
                if not self.store.has(storm_id):
                    held = self._assignment_or_none(storm_id)
                    if held is not None:  # no code here: it keeps its slots, its assignment is not rewritten
                        requests.append(TopologyRequest(storm_id, tuple(held.executor_node_port),
                                                        len(set(held.executor_node_port.values())),
                                                        assignment=held.executor_node_port))
                    continue
                layout = self.layout(storm_id, base)
                executors = tuple(e for _c, e in layout.all_executors())
                try:
                    current = self.cluster.assignment_info(storm_id)
                except DecodeError as exc:
                    log.warning("topology %s: unreadable assignment, rescheduling it: %s", storm_id, exc)
                    current = None
                old[storm_id] = current
                if storm_id in scratch or current is None:
                    requests.append(TopologyRequest(storm_id, executors, base.num_workers))
                    continue
                alive = self._alive_executors(storm_id, current, executors, now)
                requests.append(TopologyRequest(storm_id, executors, base.num_workers,
                                                assignment=current.executor_node_port, alive=alive))
            new = schedule(requests, supervisors)
            for storm_id, enp in new.items():
                if storm_id not in old:
                    continue
                self._write_assignment(storm_id, old.get(storm_id), enp, supervisors, now,
                                       from_scratch=storm_id in scratch)

    def _write_assignment(self, storm_id, current: Assignment | None, enp, supervisors, now,
                          from_scratch: bool) -> None:
        old_enp = {} if current is None or from_scratch else current.executor_node_port
        old_starts = {} if current is None or from_scratch else current.executor_start_time_secs
        assignment = Assignment(
            master_code_dir=str(self.store.topology_dir(storm_id)),
            node_host=node_hosts(enp, supervisors, None if current is None else current.node_host),
            executor_node_port=enp,
            executor_start_time_secs=start_times(old_enp, old_starts, enp, int(now)))
        if assignment == current:
            return  # never rewrite an unchanged assignment: watchers would wake for nothing
        moved = sum(1 for e, s in enp.items() if old_enp.get(e) != s)
        log.info("topology %s: assignment of %d executors on %d slots (%d moved)", storm_id, len(enp),
                 len(set(enp.values())), moved)
        self.cluster.set_assignment(storm_id, assignment)

    def _after_outage(self, now: float) -> None:
        """ZooKeeper came back since the last round: Nimbus saw nothing meanwhile, so every
        heartbeat clock restarts now and, for a supervisor timeout, supervisors whose node is
        missing keep their slots (their sessions may still be coming back)."""
        reconnects = self.cluster.reconnects()
        if reconnects == self._reconnects:
            return
        self._reconnects = reconnects
        self._beats = {sid: liveness.restart_clocks(cache, now) for sid, cache in self._beats.items()}
        self._sup_beats = liveness.restart_clocks(self._sup_beats, now)
        grace = float(self.conf["nimbus.supervisor.timeout.secs"])
        self._outage_grace_until = now + grace
        log.warning("ZooKeeper is back: heartbeats missed during the outage are not held against workers "
                    "(every timeout restarts now; supervisors keep their slots for %gs)", grace)

    def _alive_supervisors(self, now: float) -> list[SupervisorSlots]:
        infos = self.cluster.all_supervisor_info()
        in_grace = now < self._outage_grace_until
        kept = liveness.forget(self._sup_beats, set(infos) | (set(self._sup_slots) if in_grace else set()))
        self._sup_beats = liveness.update_cache(kept, {sid: i.time_secs for sid, i in infos.items()}, now)
        slots = {sid: SupervisorSlots(sid, i.hostname, tuple(i.meta)) for sid, i in infos.items()}
        if in_grace:
            slots = {**{sid: s for sid, s in self._sup_slots.items() if sid in self._sup_beats}, **slots}
        self._sup_slots = slots
        alive = liveness.alive_supervisors(slots, self._sup_beats, now,
                                           float(self.conf["nimbus.supervisor.timeout.secs"]))
        return [slots[sid] for sid in sorted(alive)]

    def _alive_executors(self, storm_id: str, current: Assignment, executors, now: float) -> frozenset:
        beats = self.cluster.executor_beats(storm_id, current.executor_node_port)
        # Only the executors the topology has now: a rebalance's old ones are forgotten.
        mine = liveness.update_cache(liveness.forget(self._beats.get(storm_id, {}), executors),
                                     {e: b.time_secs for e, b in beats.items()}, now)
        self._beats[storm_id] = mine
        alive = liveness.alive_executors(executors, mine, current.executor_start_time_secs, now,
                                         float(self.conf["nimbus.task.timeout.secs"]),
                                         float(self.conf["nimbus.task.launch.secs"]))
        dead = [e for e in executors if e in current.executor_node_port and e not in alive]
        if dead:
            log.info("topology %s: executors %s are not alive, reassigning them", storm_id, sorted(dead))
        return alive

    # ------------------------------------------------------------------ housekeeping
    def cleanup(self) -> None:
        """Heartbeats, errors and code of topologies that are gone (Storm's do-cleanup)."""
        with self.lock:
            for storm_id in sorted(self._abandoned):
                self._undo_submit(storm_id)
            alive = set(self.cluster.active_storms())
            for storm_id in set(self.cluster.heartbeat_storms()) - alive:
                self.cluster.teardown_heartbeats(storm_id)
            for storm_id in set(self.cluster.error_topologies()) - alive:
                self.cluster.teardown_topology_errors(storm_id)
            for storm_id in set(self.cluster.log_config_topologies()) - alive:
                self.cluster.teardown_log_config(storm_id)
            for storm_id in set(self.store.stored_ids()) - alive - self.pending_code():
                log.info("removing the code of topology %s, which is gone", storm_id)
                self.store.remove(storm_id)
                self._meta.pop(storm_id, None)

    def holds_code(self, storm_id: str) -> bool:
        """Whether this Nimbus has the topology's code (a new leader may not yet: code_sync.py)."""
        with self.lock:
            return storm_id in self._meta or self.store.has(storm_id)

    def topology_code(self, storm_id: str) -> tuple[TopologyStructure, Mapping[str, Any]]:
        """A stored topology's structure (wired for its mode) and conf, running or pending."""
        with self.lock:
            meta = self._topology(storm_id)
            return meta.structure, meta.conf

    def status_of(self, storm_id: str) -> str | None:
        """The topology's status, None when it is gone."""
        base = self._base_or_none(storm_id)
        return None if base is None else base.status

    def slots_of(self, storm_id: str) -> set[tuple[str, int]]:
        """The (node, port) slots its assignment gives it."""
        assignment = self._assignment_or_none(storm_id)
        return set() if assignment is None else {tuple(s) for s in assignment.executor_node_port.values()}

    def drop_pending(self, storm_id: str) -> None:
        """Forget new code a swap installed and will not start."""
        with self.lock:
            self._installed_pending.discard(storm_id)
            if self._base_or_none(storm_id) is None:
                self.store.remove(storm_id)
                self._meta.pop(storm_id, None)

    def pending_code(self) -> set[str]:
        """The ids of new code swaps have installed and not started yet (kept, and copied to the
        standby Nimbus daemons, as a running topology's code is)."""
        recorded = {r.new_id for r in self.cluster.swaps().values() if r.phase not in SWAP_ENDED}
        with self.lock:
            self._installed_pending &= set(self.store.stored_ids())
            return recorded | self._installed_pending

    # ------------------------------------------------------------------ information
    def cluster_info(self) -> ClusterInfo:
        """Gathered here (Nimbus's own state under its lock, then ZooKeeper), built by
        daemons/nimbus/summaries.py."""
        with self.lock:
            now = self.clock()
            abandoned = set(self._abandoned)
            components = {sid: tuple(sorted(m.structure.components)) for sid, m in self._meta.items()}
            confs = {sid: m.conf for sid, m in self._meta.items() if CHECKPOINT_COMPONENT in m.structure.components}
            seen = {sid: dict(cache) for sid, cache in self._beats.items()}
        sups = self.cluster.all_supervisor_info()
        facts = []
        for storm_id in sorted(self.cluster.active_storms()):
            base = None if storm_id in abandoned else self._base_or_none(storm_id)
            if base is not None:
                assignment = self._assignment_or_none(storm_id)
                facts.append(TopologyFacts(storm_id, base, assignment,
                                           self._last_errors(storm_id, components.get(storm_id, ())),
                                           seen.get(storm_id, {}), confs.get(storm_id),
                                           self._checkpoint_figures(storm_id, base, assignment)
                                           if storm_id in confs else None))
        return cluster_summary(facts, sups, now, self.started_at, storm_py_version(), self._health_settings())

    def _checkpoint_figures(self, storm_id: str, base: StormBase, assignment: Assignment | None
                            ) -> Mapping[str, Any] | None:
        """The checkpoint spout's last reported figures (a topology with state, its `base` as
        just read), or None: one worker heartbeat read, for `storm-py list`'s stalled-checkpoints
        line."""
        if assignment is None:
            return None
        with self.lock:
            if storm_id not in self._meta:
                return None
            mine = set(map(tuple, self.layout(storm_id, base).executors.get(CHECKPOINT_COMPONENT, ())))
        enp = {e: slot for e, slot in assignment.executor_node_port.items() if tuple(e) in mine}
        for beat in self.cluster.executor_beats(storm_id, enp).values():
            try:
                record = from_wire(beat.stats) if beat.stats is not None else None
            except StatsDecodeError:
                record = None
            if record is not None and record.extra:
                return record.extra
        return None

    def _health_settings(self) -> HealthSettings:
        return HealthSettings(float(self.conf["nimbus.task.timeout.secs"]), str(self.conf["storm.zookeeper.root"]))

    def _last_errors(self, storm_id: str, components) -> dict[str, ErrorInfo]:
        """The newest error of each component, and of the workers as a whole: a worker that
        refuses to start reports under WORKER_ERRORS (it runs no component)."""
        out = {}
        for comp in (*components, WORKER_ERRORS):
            try:
                e = self.cluster.last_error(storm_id, comp)
            except DecodeError:
                e = None
            if e is not None:
                out[comp] = e
        return out

    def topology_info(self, name: str) -> TopologyInfo:
        """Each component's all-time figures, executors and last error (the CLI's and the test
        harnesses' summary), derived from topology_details."""
        return info_from_details(self.topology_details(name, max_errors=1))

    def topology_details(self, name_or_id: str, max_errors: int = 10) -> TopologyDetails:
        """Everything the UI shows about one topology (daemons/answers/details.py): its base,
        conf (no secrets), components with their subscriptions, each executor with its slot,
        liveness and raw stats record, each component's newest errors, and the latest worker
        death per slot its supervisors saw (`worker_deaths`, newest first: the
        supervisor's id and host, port, time, reason, exit code or signal, error line and log
        tail). The UI merges the records itself (executor/stats.py), per window and per stream.
        Gathered here, built by daemons/nimbus/summaries.py."""
        with self.lock:
            storm_id = self.resolve(name_or_id)
            base = self._base(storm_id)
            meta = self._topology(storm_id)
            layout = self.layout(storm_id, base)
            now = self.clock()
        assignment = self._assignment_or_none(storm_id)
        enp = {} if assignment is None else assignment.executor_node_port
        beats = self.cluster.executor_beats(storm_id, enp) if enp else {}
        specs = meta.structure.components
        errors = {comp: self.cluster.errors(storm_id, comp)[:max_errors] for comp in sorted(layout.executors)
                  if comp in specs}
        facts = DetailFacts(storm_id, base, meta.conf, specs, layout, assignment, beats, errors)
        return topology_details(facts, self.cluster.all_supervisor_info(), now)

    def _assignment_or_none(self, storm_id: str) -> Assignment | None:
        try:
            return self.cluster.assignment_info(storm_id)
        except DecodeError as exc:
            log.warning("topology %s: %s", storm_id, exc)
            return None

    # ------------------------------------------------------------------ helpers
    def _base_or_none(self, storm_id: str) -> StormBase | None:
        try:
            return self.cluster.storm_base(storm_id)
        except DecodeError as exc:
            log.warning("skipping topology %s: %s", storm_id, exc)
            return None

    def _base(self, storm_id: str) -> StormBase:
        base = self._base_or_none(storm_id)
        if base is None:
            raise NotAliveError(f"topology {storm_id} is not alive")
        return base

    def _id_of(self, name: str) -> str | None:
        for storm_id in self.cluster.active_storms():
            base = self._base_or_none(storm_id)
            if base is not None and base.storm_name == name:
                return storm_id
        return None

    def _name_taken(self, name: str, storm_id: str) -> str:
        """Why `name` cannot be submitted now (with the lock held): running, or being killed and
        gone in about so many seconds."""
        base = self._base_or_none(storm_id)
        if base is None or base.status != STATUS_KILLED:
            return f"topology {name!r} is already running"
        due = [at for at, _seq, sid, _event in self._timers if sid == storm_id]
        when = f" in about {max(0.0, min(due) - self.clock()):.0f}s" if due else " shortly"
        return (f"topology {name!r} is being killed (removed{when}); submit it again after that, or under "
                f"another name")

    def _require(self, name: str) -> str:
        storm_id = self._id_of(name)
        if storm_id is None:
            raise NotAliveError(f"topology {name!r} is not alive")
        return storm_id

    def resolve(self, name_or_id: str) -> str:
        """The storm id of a live topology given its name or its id (the REST API uses ids,
        the CLI names); NotAliveError naming it when there is none."""
        with self.lock:
            if name_or_id in self.cluster.active_storms() and self._base_or_none(name_or_id) is not None:
                return name_or_id
            return self._require(name_or_id)

    def _topology(self, storm_id: str) -> _Topology:
        meta = self._meta.get(storm_id)
        if meta is None:
            if not self.store.has(storm_id):
                raise UnavailableError(f"the code of topology {storm_id} is not on this Nimbus yet (a new leader "
                                       "copies it from the other Nimbus daemons); try again shortly")
            structure = self.store.read_structure(storm_id, max_bytes=int(self.conf["storm.package.max.bytes"]))
            conf = self.store.read_conf(storm_id)
            meta = self._meta[storm_id] = _Topology(for_mode(structure, conf), conf)
        return meta

    def _state(self, storm_id: str, base: StormBase) -> TopologyState:
        try:
            timeout = float(self._topology(storm_id).conf["topology.message.timeout.secs"])
        except UnavailableError:  # a new leader still copying its code: kill, activate, deactivate go on
            timeout = float(self.conf["topology.message.timeout.secs"])  # with Nimbus's default
        return state_from_base(storm_id, base, timeout)

    def _undo_submit(self, storm_id: str) -> None:
        """Remove a submit that failed half-way; if ZooKeeper refuses now, every cleanup round
        tries again, and no round assigns it meanwhile (a ghost the user was told failed)."""
        self._abandoned.add(storm_id)
        try:
            self.cluster.remove_storm(storm_id)
        except ClusterStateError as exc:
            log.warning("undoing the submit of %s: %s (tried again every monitor round)", storm_id, exc)
            return
        self._remove(storm_id)
        self._abandoned.discard(storm_id)

    def _remove(self, storm_id: str) -> None:
        """Storm base, assignment and heartbeats go first (workers then exit), then errors and code."""
        try:
            self.cluster.remove_storm(storm_id)
        except ClusterStateError as exc:
            log.warning("removing topology %s from ZooKeeper: %s", storm_id, exc)
        self.cluster.teardown_topology_errors(storm_id)
        self.store.remove(storm_id)
        self._meta.pop(storm_id, None)
        self._beats.pop(storm_id, None)
        log.info("removed topology %s", storm_id)

    def layout(self, storm_id: str, base: StormBase) -> TopologyLayout:
        meta = self._topology(storm_id)
        return compute_layout(meta.structure, meta.conf, base.num_workers, base.component_executors)

