"""Runs a windowed bolt on a bolt executor (Storm's WindowedBoltExecutor.java): tuples go into
the window manager with their time (arrival, or their timestamp field in event time), ticks
drive time triggers and watermarks, each window goes to the bolt's execute with a collector that
anchors emits to the window's tuples, and tuples are acked as they leave the window. Late
tuples (before the last watermark) are emitted on the late tuple stream, or acked and counted."""

from __future__ import annotations

import logging
import time

from executor.adapters import Adapter
from executor.tuple import DEFAULT_STREAM, Tuple, is_system_id
from executor.windowing.manager import Step, WindowManager
from executor.windowing.persistent import LazyTuples, WindowStore
from executor.windowing.spec import WindowSpec, window_spec
from executor.windowing.watermarks import WatermarkGenerator
from executor.windowing.window import TupleWindow

log = logging.getLogger(__name__)


class WindowedCollector:
    """The collector a windowed bolt sees: an emit without anchors is anchored to every tuple of
    the window being executed (Storm's WindowedOutputCollector). A window's tuples are not acked
    before it has executed, so every anchor still takes new edges."""

    __slots__ = ("_delegate", "window")

    def __init__(self, delegate):
        self._delegate = delegate
        self.window: list | None = None

    def emit(self, values, anchors=None, stream: str = DEFAULT_STREAM):
        return self._delegate.emit(values, self.window if anchors is None else anchors, stream)

    def emit_direct(self, task: int, values, anchors=None, stream: str = DEFAULT_STREAM):
        return self._delegate.emit_direct(task, values, self.window if anchors is None else anchors, stream)

    def ack(self, tup) -> None:
        pass  # the window acks its tuples

    def fail(self, tup) -> None:
        self._delegate.fail(tup)

    def report_error(self, exc: BaseException) -> None:
        self._delegate.report_error(exc)


class WindowedBoltAdapter(Adapter):
    """`stateful` (a BaseStatefulWindowedBolt, under a StatefulBoltAdapter whose collector holds
    acks until the commit): a tumbling window's tuples are acked as soon as their window has
    executed, so that the commit holding the state it updated also releases their acks (acked
    only when they leave, at the next window, a crash in between would count them twice). In
    exactly-once mode the window's contents are also checkpointed with the state (save_to,
    restore_from), so that a rollback brings back the window as of the last commit.

    `persistent` (a stateful one with with_max_events_in_memory or with_persistence, Storm's
    PersistentWindowedBoltExecutor): each tuple goes into the state as it arrives
    (executor/windowing/persistent.py) and is acked then (the ack held until the checkpoint
    holding it commits); the window manager holds ids, the window's order is checkpointed too,
    emits are unanchored (the tuples are acked already), and a tuple leaving the window leaves
    the state."""

    WINDOW_KEY = "$window"  # where the window's contents go in the bolt's state
    ORDER_KEY = "$worder"   # a persistent window's manager (ids, timestamps) and its next id

    def __init__(self, user, stateful: bool = False):
        self.user = user
        self.stateful = stateful
        self._acked: set[int] = set()  # stateful tumbling: ids of tuples acked after their window
        self.persistent = False
        self._store: WindowStore | None = None
        self._next_id = 0
        self.spec: WindowSpec | None = None
        self.late_tuples = 0
        self._collector = None
        self._manager: WindowManager | None = None
        self._watermarks: WatermarkGenerator | None = None
        self._ts_field: str | None = None

    def prepare(self, conf, context, collector) -> None:
        self.spec = spec = window_spec(context.this_component_id, conf)
        self._collector = collector
        self._manager = WindowManager(spec)
        if spec.event_time:
            comp = context.topology.components[context.this_component_id]
            streams = {(s.source, s.stream) for s in comp.inputs if not is_system_id(s.stream)}
            self._watermarks = WatermarkGenerator(streams, spec.lag_ms)
            self._ts_field = spec.timestamp_field
        self._context = context
        self.persistent = self.stateful and spec.max_events_in_memory is not None
        self._ack_after_window = self.stateful and not self.persistent and spec.length_count == spec.sliding_count \
            and spec.length_ms == spec.sliding_ms
        self._windowed = WindowedCollector(collector)
        self.user.prepare(conf, context, self._windowed)

    def cleanup(self) -> None:
        self.user.cleanup()

    def gauges(self) -> dict[str, float]:
        g = {"window_late_tuples": self.late_tuples,
             "window_events": len(self._manager) if self._manager is not None else 0}
        if self._store is not None:
            g["window_events_in_memory"] = len(self._store)
        return g

    def execute(self, tup) -> None:
        manager = self._manager
        if tup.is_tick():
            if self._watermarks is not None:
                wm = self._watermarks.advance()
                if wm is not None:
                    self._run(manager.on_watermark(wm))
            else:
                self._run(manager.on_time(time.time() * 1000.0))
            return
        if self._watermarks is None:
            self._run(manager.add(self._keep(tup), time.time() * 1000.0))
            return
        ts = tup.values[tup.fields.index(self._ts_field)]
        if self._watermarks.track((tup.source_component, tup.source_stream), ts):
            self._run(manager.add(self._keep(tup), ts))
            return
        self.late_tuples += 1
        late = self.spec.late_stream
        if late is not None:
            self._collector.emit([list(tup.values)], anchors=tup, stream=late)
        elif self.late_tuples == 1 or self.late_tuples % 1000 == 0:
            log.info("windowed bolt %s: %d late tuple(s) acked and dropped (with_late_tuple_stream keeps them)",
                     type(self.user).__name__, self.late_tuples)
        self._collector.ack(tup)

    def _keep(self, tup):
        """What the window manager holds for `tup`: the tuple, or, persistent, its id once it is
        in the state (and acked: the commit of that state releases the ack)."""
        if not self.persistent:
            return tup
        ident = self._next_id
        self._next_id = ident + 1
        self._store.add(ident, tup)
        self._collector.ack(tup)
        return ident

    def _run(self, step: Step) -> None:
        if self.persistent:
            self._run_persistent(step)
            return
        windowed = self._windowed
        ack = self._collector.ack
        for f in step.fired:
            windowed.window = f.window
            try:
                self.user.execute(TupleWindow(f.window, f.new, f.expired, _ms(f.start), _ms(f.end)))
            finally:
                windowed.window = None
            if self._ack_after_window:
                acked = self._acked
                for t in f.window:
                    acked.add(id(t))
                    ack(t)
        # After the windows: a tuple that left at the second of two windows fired together was
        # in the first, whose emits anchor to it; its ack must carry those edges.
        acked = self._acked
        for t in step.expired:
            if acked:
                if id(t) in acked:
                    acked.discard(id(t))
                    continue
            ack(t)

    def _run_persistent(self, step: Step) -> None:
        # A tuple leaves the state once a window has handed it out as expired (one that expired
        # while no window fired waits in the manager for the next window's get_expired()).
        store = self._store
        for f in step.fired:
            self.user.execute(TupleWindow(LazyTuples(f.window, store), LazyTuples(f.new, store),
                                          LazyTuples(f.expired, store), _ms(f.start), _ms(f.end)))
            for ident in f.expired:
                store.remove(ident)

    # ---- checkpointed windows (executor/checkpoint/stateful.py: exactly-once, or persistent) ----
    def save_to(self, state) -> None:
        """Put the window's contents in the state, before it prepares."""
        if self.persistent:  # its tuples are in the state already
            state.put(self.ORDER_KEY, [self._manager.snapshot(int), self._next_id])
            return
        state.put(self.WINDOW_KEY, self._manager.snapshot(_encode))

    def restore_from(self, state) -> None:
        """The window as the state holds it (at init, and after a rollback); the tuples it held
        since were rolled back with everything else (the spouts send them again)."""
        if self.persistent:
            self._store = WindowStore(state, self.spec.max_events_in_memory, self._context.topology.stream_fields)
            self._manager = WindowManager(self.spec)
            data = state.get(self.ORDER_KEY)
            if data is not None:
                order, self._next_id = data
                self._manager.restore(order, int)
                self._restamp()
            return
        data = state.get(self.WINDOW_KEY)
        topology = self._context.topology

        def decode(item):
            values, task, stream, comp = item
            return Tuple(values, task, stream, comp, topology.stream_fields(comp, stream), None)

        self._acked.clear()
        self._manager = WindowManager(self.spec)
        if data is not None:
            self._manager.restore(data, decode)
            self._restamp()

    def _restamp(self) -> None:
        if not self.spec.event_time:  # event time: the restored timestamps and next window end hold
            self._manager.restamp(time.time() * 1000.0)


def _encode(tup) -> list:
    return [list(tup.values), tup.source_task, tup.source_stream, tup.source_component]


def _ms(ts: float | None) -> int | None:
    return None if ts is None else int(ts)
