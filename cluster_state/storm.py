"""StormClusterState (Storm's cluster.clj, StormClusterStateImpl.java): Storm's records and layout on top of a ClusterState.

Read methods that take a callback arm a one-shot watch and remember the callback per subtree
(assignments, supervisors) or per id (assignment info, storm base), exactly like Storm's
`issue-callback!`/`issue-map-callback!`: when the watch fires the callback is taken out of its
slot and then called with no arguments, so it runs at most once; a caller that wants the next
change reads again with the callback. Callbacks run on the ClusterState's event thread and
must only hand work to the caller's own thread (e.g. put an event on its queue).

Methods that scan many nodes (all supervisors' info, executor beats, errors) log and skip a
node whose data cannot be decoded; methods that read one node raise DecodeError naming it.
Writers refuse a record too large for one ZooKeeper node with NodeTooLargeError naming the
record, its path and size; report_error shortens an oversized error text instead.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from typing import Any, Callable, Mapping

from . import paths
from .codec import decode_record, encode_record
from .errors import ClusterStateError, DecodeError, NodeTooLargeError, NoNodeError
from .protocol import ClusterState, ConnectionState, EventType
from .records import (
    Assignment,
    ErrorInfo,
    Executor,
    ExecutorBeat,
    LogConfig,
    NimbusRegistration,
    Slot,
    StormBase,
    SupervisorInfo,
    SwapRecord,
    VersionedAssignment,
    WorkerHeartbeat,
)

log = logging.getLogger(__name__)

# Storm keeps the newest 10 errors per component.
MAX_ERRORS_PER_COMPONENT = 10

Callback = Callable[[], Any]


class StormClusterState:
    """Storm's view of the cluster; `mk_storm_cluster_state` builds one."""

    def __init__(self, cluster_state: ClusterState, *, owns_cluster_state: bool = False) -> None:
        self._cs = cluster_state
        self._owns = owns_cluster_state
        self._lock = threading.Lock()
        self._assignments_callback: Callback | None = None
        self._supervisors_callback: Callback | None = None
        self._assignment_info_callbacks: dict[str, Callback] = {}
        self._storm_base_callbacks: dict[str, Callback] = {}
        self._log_config_callbacks: dict[str, Callback] = {}
        self._disconnected = False
        self._state_id = cluster_state.register(self._on_event)
        try:
            for subtree in paths.ALL_SUBTREES:
                cluster_state.mkdirs(subtree)
        except BaseException:
            self.disconnect()
            raise

    @property
    def cluster_state(self) -> ClusterState:
        return self._cs

    # -- one-shot callbacks ------------------------------------------------------------------

    def _on_event(self, event_type: EventType, path: str) -> None:
        tokens = paths.tokenize_path(path)
        if not tokens:
            return
        subtree, args = tokens[0], tokens[1:]
        if subtree == paths.ASSIGNMENTS_ROOT:
            if not args:
                self._issue(lambda: self._take_single("_assignments_callback"))
            else:
                self._issue(lambda: self._assignment_info_callbacks.pop(args[0], None))
        elif subtree == paths.SUPERVISORS_ROOT:
            self._issue(lambda: self._take_single("_supervisors_callback"))
        elif subtree == paths.STORMS_ROOT:
            if args:
                self._issue(lambda: self._storm_base_callbacks.pop(args[0], None))
        elif subtree == paths.LOGCONFIGS_ROOT:
            if args:
                self._issue(lambda: self._log_config_callbacks.pop(args[0], None))
        elif subtree == paths.LEADER_LOCK_ROOT:
            pass  # the leader election's own watch (daemons/nimbus/leader.py registers for it)
        else:
            # Storm halts here; we never watch other subtrees, so this is a bug worth a log, not a crash.
            log.error("unexpected ZooKeeper event %s on %s", event_type.value, path)

    def _take_single(self, attr: str) -> Callback | None:
        callback = getattr(self, attr)
        setattr(self, attr, None)
        return callback

    def _issue(self, take: Callable[[], Callback | None]) -> None:
        # Taken out of its slot under the lock, before it runs: a callback fires at most once.
        with self._lock:
            callback = take()
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("cluster-state callback %r failed", callback)

    def _set_callback(self, slot: str, key: str | None, callback: Callback | None) -> bool:
        if callback is None:
            return False
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        with self._lock:
            if key is None:
                setattr(self, slot, callback)
            else:
                getattr(self, slot)[key] = callback
        return True

    # -- helpers -----------------------------------------------------------------------------

    def _read(self, path: str, cls: type, watch: bool = False) -> Any:
        data = self._cs.get_data(path, watch)
        return None if data is None else decode_record(data, path, cls)

    def _write(self, path: str, record: Any, what: str, ephemeral: bool = False) -> None:
        data = _encode(record, what)
        try:
            if ephemeral:
                self._cs.set_ephemeral_node(path, data)
            else:
                self._cs.set_data(path, data)
        except NodeTooLargeError as exc:
            raise exc.naming(what) from None

    def _read_each(self, ids, path_of: Callable[[str], str], cls: type, what: str) -> dict[str, Any]:
        """id -> record for each id whose node still exists; an undecodable one is logged and
        skipped (one bad node must not hide the others)."""
        result = {}
        for node_id in ids:
            try:
                record = self._read(path_of(node_id), cls)
            except DecodeError as exc:
                log.warning("skipping %s %s: %s", what, node_id, exc)
                continue
            if record is not None:
                result[node_id] = record
        return result

    def _children(self, path: str, watch: bool = False) -> list[str]:
        try:
            return self._cs.get_children(path, watch)
        except NoNodeError:
            return []

    # -- assignments -------------------------------------------------------------------------

    def assignments(self, callback: Callback | None = None) -> list[str]:
        """Ids of topologies with an assignment."""
        watch = self._set_callback("_assignments_callback", None, callback)
        return self._cs.get_children(paths.ASSIGNMENTS_SUBTREE, watch)

    def assignment_info(self, storm_id: str, callback: Callback | None = None) -> Assignment | None:
        path = paths.assignment_path(storm_id)
        watch = self._set_callback("_assignment_info_callbacks", storm_id, callback)
        return self._read(path, Assignment, watch)

    def assignment_info_with_version(
        self, storm_id: str, callback: Callback | None = None
    ) -> VersionedAssignment | None:
        path = paths.assignment_path(storm_id)
        watch = self._set_callback("_assignment_info_callbacks", storm_id, callback)
        found = self._cs.get_data_with_version(path, watch)
        if found is None:
            return None
        return VersionedAssignment(decode_record(found[0], path, Assignment), found[1])

    def assignment_version(self, storm_id: str, callback: Callback | None = None) -> int | None:
        """The assignment node's version, to skip re-reading unchanged assignments."""
        watch = self._set_callback("_assignment_info_callbacks", storm_id, callback)
        return self._cs.get_version(paths.assignment_path(storm_id), watch)

    def set_assignment(self, storm_id: str, info: Assignment) -> None:
        _check(info, Assignment)
        self._write(paths.assignment_path(storm_id), info, f"the assignment of topology {storm_id}")

    # -- storms ------------------------------------------------------------------------------

    def active_storms(self) -> list[str]:
        return self._children(paths.STORMS_SUBTREE)

    def storm_base(self, storm_id: str, callback: Callback | None = None) -> StormBase | None:
        path = paths.storm_path(storm_id)
        watch = self._set_callback("_storm_base_callbacks", storm_id, callback)
        return self._read(path, StormBase, watch)

    def activate_storm(self, storm_id: str, storm_base: StormBase) -> None:
        _check(storm_base, StormBase)
        self._write(paths.storm_path(storm_id), storm_base, f"the storm base of topology {storm_id}")

    def update_storm(self, storm_id: str, new_elems: Mapping[str, Any] | None = None, **changes: Any) -> StormBase:
        """Merge fields into the storm base; `component_executors` is merged key by key (as in Storm)."""
        updates = dict(new_elems or {}, **changes)
        fields = {f.name for f in dataclasses.fields(StormBase)}
        unknown = set(updates) - fields
        if unknown:
            raise ValueError(f"update_storm: unknown StormBase fields {sorted(unknown)}")
        path = paths.storm_path(storm_id)
        base = self._read(path, StormBase)
        if base is None:
            raise NoNodeError(path, "update_storm on a topology without a storm base")
        if "component_executors" in updates:
            updates["component_executors"] = {**base.component_executors, **updates["component_executors"]}
        new_base = dataclasses.replace(base, **updates)
        self._write(path, new_base, f"the storm base of topology {storm_id}")
        return new_base

    def remove_storm_base(self, storm_id: str) -> None:
        self._cs.delete_node(paths.storm_path(storm_id))

    def remove_storm(self, storm_id: str) -> None:
        """Assignment, log config, storm base and worker heartbeats of a topology."""
        self._cs.delete_node(paths.assignment_path(storm_id))
        self.teardown_log_config(storm_id)
        self.remove_storm_base(storm_id)
        self.teardown_heartbeats(storm_id)

    # -- log configs -------------------------------------------------------------------------

    def topology_log_config(self, storm_id: str, callback: Callback | None = None) -> LogConfig | None:
        """The topology's dynamic log levels (None: never set); the callback fires once when
        the node is created, changed or deleted."""
        path = paths.log_config_path(storm_id)
        watch = self._set_callback("_log_config_callbacks", storm_id, callback)
        return self._read(path, LogConfig, watch)

    def set_topology_log_config(self, storm_id: str, log_config: LogConfig) -> None:
        _check(log_config, LogConfig)
        self._write(paths.log_config_path(storm_id), log_config, f"the log config of topology {storm_id}")

    def log_config_topologies(self) -> list[str]:
        """Ids of topologies with a log config (Nimbus's cleanup removes those that are gone)."""
        return self._children(paths.LOGCONFIGS_SUBTREE)

    def teardown_log_config(self, storm_id: str) -> None:
        try:
            self._cs.delete_node(paths.log_config_path(storm_id))
        except ClusterStateError as exc:
            log.warning("could not remove the log config of %s: %s", storm_id, exc)

    # -- swaps (daemons/nimbus/swaps/) ------------------------------------------------------

    def set_swap(self, record: SwapRecord) -> None:
        _check(record, SwapRecord)
        self._write(paths.swap_path(record.name), record, f"the swap of topology {record.name}")

    def swap(self, name: str) -> SwapRecord | None:
        return self._read(paths.swap_path(name), SwapRecord)

    def swaps(self) -> dict[str, SwapRecord]:
        """Topology name -> its swap record (an undecodable one is logged and skipped)."""
        return self._read_each(self._children(paths.SWAPS_SUBTREE), paths.swap_path, SwapRecord, "the swap of")

    def remove_swap(self, name: str) -> None:
        self._cs.delete_node(paths.swap_path(name))  # a missing node is not an error

    # -- Nimbus daemons (Nimbus HA) ----------------------------------------------------------

    def register_nimbus(self, registration: NimbusRegistration) -> None:
        """Ephemeral: (re)written by the Nimbus itself; gone with its session."""
        _check(registration, NimbusRegistration)
        self._write(paths.nimbus_path(registration.nimbus_id), registration,
                    f"the registration of Nimbus {registration.nimbus_id}", ephemeral=True)

    def unregister_nimbus(self, nimbus_id: str) -> None:
        self._cs.delete_node(paths.nimbus_path(nimbus_id))  # a missing node is not an error

    def nimbus_registrations(self) -> dict[str, NimbusRegistration]:
        """host:port -> registration of every Nimbus registered now; an undecodable one (a
        Nimbus of another version) is logged and skipped."""
        return self._read_each(self._children(paths.NIMBUSES_SUBTREE), paths.nimbus_path, NimbusRegistration,
                               "the registration of Nimbus")

    # -- supervisors -------------------------------------------------------------------------

    def supervisors(self, callback: Callback | None = None) -> list[str]:
        watch = self._set_callback("_supervisors_callback", None, callback)
        return self._cs.get_children(paths.SUPERVISORS_SUBTREE, watch)

    def supervisor_info(self, supervisor_id: str) -> SupervisorInfo | None:
        return self._read(paths.supervisor_path(supervisor_id), SupervisorInfo)

    def all_supervisor_info(self, callback: Callback | None = None) -> dict[str, SupervisorInfo]:
        """Every live supervisor's info; an undecodable one is logged and skipped."""
        return self._read_each(self.supervisors(callback), paths.supervisor_path, SupervisorInfo, "supervisor")

    def supervisor_heartbeat(self, supervisor_id: str, info: SupervisorInfo) -> None:
        """Ephemeral: the node lives as long as this client's session."""
        _check(info, SupervisorInfo)
        self._write(paths.supervisor_path(supervisor_id), info, f"the info of supervisor {supervisor_id}",
                    ephemeral=True)

    # -- worker heartbeats -------------------------------------------------------------------

    def setup_heartbeats(self, storm_id: str) -> None:
        """The topology's own subtrees, made by Nimbus at submit: with per-topology ZooKeeper
        identities its workers may create nodes under these and nowhere else."""
        self._cs.mkdirs(paths.workerbeat_storm_root(storm_id))
        self._cs.mkdirs(paths.error_storm_root(storm_id))

    def teardown_heartbeats(self, storm_id: str) -> None:
        try:
            self._cs.delete_node(paths.workerbeat_storm_root(storm_id))
        except ClusterStateError as exc:
            log.warning("could not tear down heartbeats of %s: %s", storm_id, exc)

    def heartbeat_storms(self) -> list[str]:
        return self._children(paths.WORKERBEATS_SUBTREE)

    def worker_heartbeat(self, storm_id: str, node: str, port: int, info: WorkerHeartbeat) -> None:
        _check(info, WorkerHeartbeat)
        self._write(paths.workerbeat_path(storm_id, node, port), info,
                    f"the heartbeat of topology {storm_id}'s worker {node}:{port}")

    def get_worker_heartbeat(self, storm_id: str, node: str, port: int) -> WorkerHeartbeat | None:
        return self._read(paths.workerbeat_path(storm_id, node, port), WorkerHeartbeat)

    def worker_heartbeats(self, storm_id: str) -> list[WorkerHeartbeat]:
        """Every worker heartbeat of a topology, dead workers' included (an unreadable one is
        skipped with a warning)."""
        out = []
        root = paths.workerbeat_storm_root(storm_id)
        for name in self._children(root):
            try:
                beat = self._read(f"{root}/{name}", WorkerHeartbeat)
            except DecodeError as exc:
                log.warning("skipping heartbeat %s of %s: %s", name, storm_id, exc)
                continue
            if beat is not None:
                out.append(beat)
        return out

    def remove_worker_heartbeat(self, storm_id: str, node: str, port: int) -> None:
        self._cs.delete_node(paths.workerbeat_path(storm_id, node, port))

    def executor_beats(
        self, storm_id: str, executor_node_port: Mapping[Executor, Slot]
    ) -> dict[Executor, ExecutorBeat]:
        """Beats of the assigned executors, from the heartbeats of the slots they are assigned to.

        Only assigned slots are read and only executors assigned to that slot are taken from
        its heartbeat, so a long-dead worker with a skewed clock cannot vouch for executors
        that now live elsewhere (Storm's reasoning).
        """
        by_slot: dict[Slot, list[Executor]] = {}
        for executor, slot in executor_node_port.items():
            by_slot.setdefault((slot[0], slot[1]), []).append(executor)
        beats: dict[Executor, ExecutorBeat] = {}
        for (node, port), executors in by_slot.items():
            try:
                heartbeat = self.get_worker_heartbeat(storm_id, node, port)
            except DecodeError as exc:
                log.warning("skipping heartbeat of %s on %s:%s: %s", storm_id, node, port, exc)
                continue
            if heartbeat is None:
                continue
            running = set(heartbeat.executors)
            for executor in executors:
                if tuple(executor) in running:
                    beats[tuple(executor)] = ExecutorBeat(
                        heartbeat.time_secs, heartbeat.uptime_secs, heartbeat.executor_stats.get(tuple(executor)),
                        heartbeat.checkpoint_marks.get(tuple(executor)), heartbeat.pid)
        return beats

    # -- errors ------------------------------------------------------------------------------

    def report_error(self, storm_id: str, component_id: str, node: str | None, port: int | None,
                     error: BaseException | str) -> None:
        """Append an error node and keep only the newest MAX_ERRORS_PER_COMPONENT."""
        if isinstance(error, BaseException):
            error = "".join(traceback.format_exception(error))
        # Lone surrogates (from undecodable bytes) cannot be encoded: escape rather than fail.
        text = str(error).encode("utf-8", "backslashreplace").decode("utf-8")
        path = paths.error_path(storm_id, component_id)
        self._cs.mkdirs(path)
        for _ in range(3):
            info = ErrorInfo(text, int(time.time()), node, port)
            try:
                self._cs.create_sequential(f"{path}/{paths.ERROR_NODE_PREFIX}",
                                           _encode(info, f"an error of {storm_id}/{component_id}"))
                break
            except NodeTooLargeError as exc:
                # An error report must not fail: keep the head and the tail (the exception line).
                excess = exc.size - exc.limit + _STR_HEADER_SLACK
                text_bytes = len(text.encode("utf-8"))
                if excess >= text_bytes:
                    raise exc.naming(f"an error of {storm_id}/{component_id}") from None
                log.warning("error of %s/%s is %d bytes, over the ZooKeeper node limit: truncating it",
                            storm_id, component_id, text_bytes)
                text = truncate_text(text, text_bytes - excess)
        else:
            raise ClusterStateError(f"could not shorten an error of {storm_id}/{component_id} to fit {path}")
        numbered = self._error_children(path)
        for _, child in numbered[:-MAX_ERRORS_PER_COMPONENT]:
            self._cs.delete_node(f"{path}/{child}")

    def _error_children(self, path: str) -> list[tuple[int, str]]:
        """(sequence, name) of the error nodes under path, oldest first."""
        numbered = []
        for child in self._children(path):
            seq = paths.error_sequence(child)
            if seq is not None:
                numbered.append((seq, child))
        return sorted(numbered)

    def errors(self, storm_id: str, component_id: str) -> list[ErrorInfo]:
        """The component's kept errors, newest first; undecodable ones are logged and skipped."""
        path = paths.error_path(storm_id, component_id)
        result = []
        for _, child in reversed(self._error_children(path)):
            child_path = f"{path}/{child}"
            try:
                info = self._read(child_path, ErrorInfo)
            except DecodeError as exc:
                log.warning("skipping error node: %s", exc)
                continue
            if info is not None:
                result.append(info)
        return result

    def last_error(self, storm_id: str, component_id: str) -> ErrorInfo | None:
        path = paths.error_path(storm_id, component_id)
        for _, child in reversed(self._error_children(path)):
            try:
                info = self._read(f"{path}/{child}", ErrorInfo)
            except DecodeError as exc:
                log.warning("skipping error node: %s", exc)
                continue
            if info is not None:
                return info
        return None

    def error_topologies(self) -> list[str]:
        return self._children(paths.ERRORS_SUBTREE)

    def teardown_topology_errors(self, storm_id: str) -> None:
        try:
            self._cs.delete_node(paths.error_storm_root(storm_id))
        except ClusterStateError as exc:
            log.warning("could not tear down errors of %s: %s", storm_id, exc)

    # -- connection --------------------------------------------------------------------------

    @property
    def connection_state(self) -> ConnectionState:
        return self._cs.connection_state

    def disconnected_for(self) -> float:
        return self._cs.disconnected_for()

    def reconnects(self) -> int:
        """How many times the connection came back after an outage."""
        return self._cs.reconnects()

    def disconnect(self) -> None:
        """Idempotent. Closes the ClusterState too when mk_storm_cluster_state created it."""
        with self._lock:
            if self._disconnected:
                return
            self._disconnected = True
            self._assignments_callback = self._supervisors_callback = None
            self._assignment_info_callbacks.clear()
            self._storm_base_callbacks.clear()
            self._log_config_callbacks.clear()
        self._cs.unregister(self._state_id)
        if self._owns:
            self._cs.close()

    def __enter__(self) -> StormClusterState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()


# msgpack's string header grows with the length (up to 5 bytes); room for it and the marker.
_STR_HEADER_SLACK = 16


def truncate_text(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes, keeping its head and tail around a marker."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    marker = f"\n... [{len(encoded)} bytes, truncated to fit ZooKeeper] ...\n"
    room = max_bytes - len(marker.encode("utf-8"))
    if room <= 0:
        return encoded[:max(max_bytes, 0)].decode("utf-8", "ignore")
    head, tail = room // 2, room - room // 2
    # errors="ignore" drops a multi-byte character cut in half at either edge.
    return (encoded[:head].decode("utf-8", "ignore") + marker
            + (encoded[-tail:].decode("utf-8", "ignore") if tail else ""))


def _encode(record: Any, what: str) -> bytes:
    try:
        return encode_record(record)
    except (TypeError, ValueError, OverflowError) as exc:
        # e.g. an object in a heartbeat's stats, an int over 64 bits: name the record, not msgpack.
        raise TypeError(f"cannot encode {what}: {exc}") from None


def _check(value: object, cls: type) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(value).__name__}")
