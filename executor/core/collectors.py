"""What components emit through (Storm's BoltOutputCollectorImpl, BasicOutputCollector and
SpoutOutputCollectorImpl) and the per-tuple loop of a BasicBolt: part of the compiled core, as
every tuple a component emits or acks passes here. They call the executor's outbox
(executor/core/outbox.py) and nothing else; the executor keeps what is its own (stats per input,
the spout's pending map, error reports)."""

from __future__ import annotations

import logging
from collections import Counter
from operator import attrgetter, itemgetter

from executor.errors import FailedException
from executor.receive_queue import Calls
from executor.serialization import TupleColumn
from executor.tuple import DEFAULT_STREAM, Tuple

log = logging.getLogger(__name__)

INPUT_OF = attrgetter("source_component", "source_stream")  # a tuple's input, as stats count it
STREAM_OF = attrgetter("source_stream")
TUPLE_OF = itemgetter(1)  # of a (task, tuple) entry of a batch
_ANCHORS_OF = attrgetter("anchors_to_ids")


def count_inputs(counts: dict, tups, sole_source: dict, streams: list | None = None) -> None:
    """Add each tuple of `tups` to `counts` by its input (component, stream). `sole_source`: per
    stream the one input component sending it, where only one does; `streams`: the tuples'
    streams, if read already. At once when they share one stream of a sole source, the common
    case (a pass in C, no key made per tuple), else one by one."""
    if streams is None:
        tups = list(tups)
        streams = list(map(STREAM_OF, tups))
    if streams:
        first = streams[0]
        component = sole_source.get(first)
        if component is not None and streams.count(first) == len(streams):
            key = (component, first)
            counts[key] = counts.get(key, 0) + len(streams)
            return
    for key, n in Counter(map(INPUT_OF, tups)).items():
        counts[key] = counts.get(key, 0) + n


class _TaskCollector:
    """One task's way out: its executor, the executor's outbox and the task's routes."""

    __slots__ = ("_ex", "_ob", "_task", "_routes")

    def __init__(self, executor, task: int):
        self._ex = executor
        self._ob = executor.outbox
        self._task = task
        self._routes = executor.w.routes[task]

    def begin_barriers(self) -> None:
        """Emits from now to end_barriers go in batches of their own (checkpoint tuples:
        executor/checkpoint/sealing.py)."""
        self._ob.begin_barriers()

    def end_barriers(self) -> None:
        self._ob.end_barriers()


class OutputCollector(_TaskCollector):
    """A bolt's collector: anchored emits, ack and fail."""

    __slots__ = ()

    def emit(self, values, anchors=None, stream: str = DEFAULT_STREAM) -> list[int]:
        ob = self._ob
        out = ob.route(self._routes, self._task, stream, values, False)
        return ob.emit_anchored(self._task, out, values, out.targets(values), anchors)

    def emit_many(self, many, anchors=None, stream: str = DEFAULT_STREAM) -> None:
        """One tuple per values list of `many`, each as `emit(values, anchors, stream)` would
        send it (beyond Storm's API: a bolt that emits many tuples per input, a split, saves a
        call per tuple). Returns None, not the task ids."""
        ob = self._ob
        if anchors is None or not ob.has_ackers:
            ob.emit_many(self._task, self._routes, stream, many)
            return
        for values in many:
            self.emit(values, anchors, stream)

    def emit_direct(self, task: int, values, anchors=None, stream: str = DEFAULT_STREAM) -> list[int]:
        ob = self._ob
        out = ob.route(self._routes, self._task, stream, values, True)
        return ob.emit_anchored(self._task, out, values, out.direct_target(task), anchors)

    def ack(self, tup: Tuple) -> None:
        key = (tup.source_component, tup.source_stream)
        acked_in = self._ex.acked_in
        acked_in[key] = acked_in.get(key, 0) + 1
        self._ob.ack(tup)

    def ack_counted(self, tups: list) -> None:
        """Acks of many data tuples at once, counted per input (a stateful bolt's batch in
        exactly-once mode, executor/checkpoint/stateful.py); those in a tuple tree reach the
        acker. Exactly-once, no data tuple is in one (executor/checkpoint/barrier_mode.py) and
        a bolt with one input besides `$checkpoint` counts them all at once."""
        ex = self._ex
        key = ex.acked_input
        if key is not None:
            acked_in = ex.acked_in
            acked_in[key] = acked_in.get(key, 0) + len(tups)
        else:
            count_inputs(ex.acked_in, tups, ex.sole_source)
        if any(map(_ANCHORS_OF, tups)):
            ob = self._ob
            for tup in tups:
                if tup.anchors_to_ids:
                    ob.ack(tup)

    def fail(self, tup: Tuple) -> None:
        key = (tup.source_component, tup.source_stream)
        failed_in = self._ex.failed_in
        failed_in[key] = failed_in.get(key, 0) + 1
        self._ob.fail(tup)

    def report_error(self, exc: BaseException) -> None:
        self._ex.report_error(self._task, exc)

    def call_soon(self, fn) -> None:
        """Run fn() on the executor's thread, soon (executor.multilang: what its reader thread
        read from the subprocess is acted on there); callable from any thread."""
        self._ex.queue.publish_force(Calls([(self._task, fn)]))


class BasicOutputCollector:
    """What a BasicBolt sees: emits are anchored to the current input."""

    __slots__ = ("_collector", "input", "_ob", "_task", "_routes")

    def __init__(self, collector: OutputCollector):
        self._collector = collector
        self._ob = collector._ob
        self._task = collector._task
        self._routes = collector._routes
        self.input = None

    def emit(self, values, stream: str = DEFAULT_STREAM) -> list[int]:
        ob = self._ob
        out = ob.route(self._routes, self._task, stream, values, False)
        anchor = self.input
        if anchor.anchors_to_ids:
            return ob.emit_anchored(self._task, out, values, out.targets(values), anchor)
        return ob.emit(self._task, out, values, out.targets(values))  # untracked input (the word-count split)

    def emit_many(self, many, stream: str = DEFAULT_STREAM) -> None:
        """One tuple per values list of `many`, each anchored to the current input as emit
        anchors it (beyond Storm's API; see OutputCollector.emit_many). Returns None."""
        anchor = self.input
        if anchor.anchors_to_ids and self._ob.has_ackers:
            for values in many:
                self.emit(values, stream)
            return
        self._ob.emit_many(self._task, self._routes, stream, many)

    def emit_direct(self, task: int, values, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._collector.emit_direct(task, values, self.input, stream)

    def report_error(self, exc: BaseException) -> None:
        self._collector.report_error(exc)


def run_basic_batch(basic: BasicOutputCollector, user, batch) -> None:
    """The per-tuple loop of a BasicBolt: execute, then ack (fail on FailedException). Its acks
    are counted as executed - failed (BoltExecutor.counters), so only failures are counted here."""
    collector = basic._collector
    ob = basic._ob
    user_execute = user.execute
    if type(batch) is TupleColumn:
        # A column received from another worker: each Tuple is made here as it is executed,
        # without the column's (task, Tuple) generator (half the word count's tuples on two workers).
        src, stream, comp, fields = batch.source_task, batch.stream, batch.component, batch.fields
        anchors = batch.anchors
        i = 0
        for v in batch.values:
            a = None if anchors is None else (anchors[i] or None)
            i += 1
            _run_one(basic, collector, ob, user_execute, user, Tuple(v, src, stream, comp, fields, a), a is not None)
        return
    for _task, tup in batch:
        _run_one(basic, collector, ob, user_execute, user, tup, bool(tup.anchors_to_ids))


def _run_one(basic: BasicOutputCollector, collector: OutputCollector, ob, user_execute, user, tup,
             anchored: bool) -> None:
    """`anchored`: the tuple belongs to a tuple tree (its anchors_to_ids is not empty)."""
    basic.input = tup
    try:
        user_execute(tup, basic)
    except FailedException as exc:
        log.debug("BasicBolt %s failed a tuple: %s", type(user).__name__, exc)
        collector.fail(tup)
        return
    if anchored:  # outside every tuple tree there is nothing to tell the acker
        ob.ack(tup)


class SpoutOutputCollector(_TaskCollector):
    """A spout's collector: emits with message ids go through the executor's pending map."""

    __slots__ = ()

    def emit(self, values, stream: str = DEFAULT_STREAM, msg_id=None) -> list[int]:
        out = self._ob.route(self._routes, self._task, stream, values, False)
        return self._ex.send_spout_msg(self._task, out, values, out.targets(values), msg_id)

    def emit_direct(self, task: int, values, stream: str = DEFAULT_STREAM, msg_id=None) -> list[int]:
        out = self._ob.route(self._routes, self._task, stream, values, True)
        return self._ex.send_spout_msg(self._task, out, values, out.direct_target(task), msg_id)

    def report_error(self, exc: BaseException) -> None:
        self._ex.report_error(self._task, exc)

    def get_pending_count(self) -> int:
        return self._ex.in_flight()

    def emit_to_tasks(self, tasks, values, stream: str, msg_id) -> list[int]:
        """One tuple tree to the given tasks, whatever subscribes to `stream`: the checkpoint
        spout's way to the stateful spouts in exactly-once mode (executor/checkpoint/)."""
        out = self._routes[stream]
        return self._ex.send_spout_msg(self._task, out, values, list(tasks), msg_id)
