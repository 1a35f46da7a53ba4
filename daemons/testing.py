"""Testing helpers Storm users know: complete_topology and FeederSpout."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections import deque
from typing import Any, Iterable

from daemons.local import LocalCluster
from executor.components import Spout
from executor.topology import StormTopology
from executor.tuple import DEFAULT_STREAM, Fields, as_fields


class _FeedState:
    """Shared between a FeederSpout handle and the per-task copies the cluster runs."""

    def __init__(self):
        self.queue: deque = deque()
        self.acked: list = []
        self.failed: list = []
        self.lock = threading.Lock()


class FeederSpout(Spout):
    """A spout fed from the test: feed(values, msg_id) while a LocalCluster runs it.

    `acked` and `failed` are live lists of the message ids the running spout saw acked and
    failed. Copies made by the cluster share the feed queue and these lists.
    """

    def __init__(self, fields: Iterable[str] | Fields, stream: str = DEFAULT_STREAM):
        self.fields = as_fields(fields)
        self.stream = stream
        self._state = _FeedState()
        self._collector = None

    def __deepcopy__(self, memo):
        clone = copy.copy(self)
        clone._collector = None
        return clone

    def feed(self, values, msg_id: Any = None) -> None:
        self._state.queue.append((list(values), msg_id))

    @property
    def acked(self) -> list:
        return self._state.acked

    @property
    def failed(self) -> list:
        return self._state.failed

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields, stream=self.stream)

    def open(self, conf, context, collector):
        self._collector = collector

    def next_tuple(self):
        try:
            values, msg_id = self._state.queue.popleft()
        except IndexError:
            return
        self._collector.emit(values, stream=self.stream, msg_id=msg_id)

    def ack(self, msg_id):
        with self._state.lock:
            self._state.acked.append(msg_id)

    def fail(self, msg_id):
        with self._state.lock:
            self._state.failed.append(msg_id)


class _MockSpout(FeederSpout):
    """Replaces a spout in complete_topology: emits the given value lists once each, with ids."""

    def __init__(self, fields: Fields, streams: dict, values: list):
        super().__init__(fields)
        self._streams = streams
        for i, v in enumerate(values):
            self.feed(v, msg_id=i)

    def declare_output_fields(self, declarer):
        for stream, spec in self._streams.items():
            declarer.declare(spec.fields, stream=stream, direct=spec.direct)


class CompleteTopologyResult:
    def __init__(self, emitted: dict[tuple[str, str], list], acked: dict[str, list], failed: dict[str, list]):
        self._emitted = emitted
        self.acked = acked
        self.failed = failed

    def tuples(self, component: str, stream: str = DEFAULT_STREAM) -> list[list]:
        """Value lists `component` emitted on `stream`, in emit order per task."""
        return [list(v) for v in self._emitted.get((component, stream), [])]


_names = itertools.count(1)


def _quiet_snapshot(cluster: LocalCluster, name: str, emitted: dict) -> tuple | None:
    """None while anything is queued or in flight; otherwise the counters that change when a
    tuple moves (compared between polls, so that a batch in a thread's hands at one poll shows
    up as a change at the next)."""
    if not cluster.is_prepared(name) or not cluster.is_idle(name):
        return None
    stats = cluster.component_stats(name)
    counters = tuple(sorted((comp, s.get("emitted"), s.get("transferred"), s.get("acked"), s.get("failed"))
                            for comp, s in stats.items()))
    return counters, tuple(sorted((k, len(v)) for k, v in list(emitted.items())))


def complete_topology(topology: StormTopology, mock_sources: dict[str, list] | None = None,
                      conf: dict | None = None, timeout_secs: float = 30,
                      cluster: LocalCluster | None = None) -> CompleteTopologyResult:
    """Run `topology` with the spouts in mock_sources replaced by spouts emitting those value
    lists (each with a message id), wait until every one is acked or failed and the topology
    is idle, and return what every component emitted."""
    mock_sources = dict(mock_sources or {})
    mocks: dict[str, _MockSpout] = {}
    for cid, spec in topology.components.items():
        if cid in mock_sources:
            if spec.kind != "spout":
                raise ValueError(f"mock_sources names {cid!r}, which is a bolt, not a spout")
            default = spec.streams.get(DEFAULT_STREAM)
            fields = default.fields if default else Fields([])
            mocks[cid] = _MockSpout(fields, spec.streams, [list(v) for v in mock_sources.pop(cid)])
    if mock_sources:
        raise ValueError(f"mock_sources names unknown spouts: {sorted(mock_sources)}")
    emitted: dict[tuple[str, str], list] = {}
    lock = threading.Lock()

    def listener(component: str, task: int, stream: str, values: list) -> None:
        with lock:
            emitted.setdefault((component, stream), []).append(list(values))

    total = sum(len(m._state.queue) for m in mocks.values())
    own = cluster is None
    cluster = cluster or LocalCluster()
    name = f"complete-topology-{next(_names)}"
    try:
        cluster.submit_topology(name, conf or {}, topology.with_objs(mocks), emit_listener=listener)
        deadline = time.monotonic() + timeout_secs
        # Done when every mocked message was acked or failed and the topology was seen quiet
        # (executors, transfer and receive backlogs, and the transport between workers empty)
        # with unchanged counters on three consecutive polls.
        quiet: list = []
        while True:
            died = cluster.died(name)
            if died:
                raise died[0]
            done = sum(len(m.acked) + len(m.failed) for m in mocks.values())
            with lock:
                snapshot = _quiet_snapshot(cluster, name, emitted) if done >= total else None
            if snapshot is None or (quiet and snapshot != quiet[-1]):
                quiet.clear()
            if snapshot is not None:
                quiet.append(snapshot)
                if len(quiet) >= 3:
                    break
            if time.monotonic() > deadline:
                state = ("not quiet yet (tuples queued or in flight between workers)"
                         if done >= total else "")
                raise TimeoutError(f"complete_topology: {done} of {total} mocked tuples completed "
                                   f"within {timeout_secs}s {state}".rstrip())
            time.sleep(0.01)
        cluster.kill_topology(name)
    finally:
        if own:
            cluster.shutdown()
        elif name in cluster.topology_names():
            cluster.kill_topology(name)
    with lock:
        snapshot = {k: list(v) for k, v in emitted.items()}
    return CompleteTopologyResult(snapshot, {c: list(m.acked) for c, m in mocks.items()},
                                  {c: list(m.failed) for c, m in mocks.items()})
