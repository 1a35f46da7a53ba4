"""Checkpoint tuples leave an executor in batches of their own (executor/checkpoint/sealing.py):
the executors they reach take a plain batch as data without reading each tuple's stream."""

from __future__ import annotations

from executor.checkpoint.protocol import CHECKPOINT_STREAM
from executor.checkpoint.sealing import sealed
from executor.core.outbox import Outbox
from executor.receive_queue import BarrierBatch, ReceiveQueue
from executor.routing import StreamOut, _make_grouper
from executor.structure import Grouping
from executor.tuple import Fields


def _outbox(queues, batch_size=100):
    return Outbox("up", queues, {10: 0, 11: 1}, batch_size=batch_size, max_tuple_bytes=1 << 20,
                  acker_tasks=[], local_tasks={10, 11}, first_task=1, listener=None,
                  report_error=lambda task, exc: None)


def _out(stream, fields):
    grouper = _make_grouper(Grouping("all", None), [10, 11], Fields(fields), 1, set(), None, "up", stream, None)
    return StreamOut("up", stream, Fields(fields), False, [grouper], frozenset())


def _taken(q):
    return [(type(b), [(task, tup.source_stream, list(tup.values)) for task, tup in b]) for b in q.consume()]


def _emit(ob, out, values):
    ob.emit(1, out, values, out.targets(values))


def test_a_checkpoint_tuple_goes_alone_in_a_barrier_batch_after_what_was_emitted_before_it():
    queues = [ReceiveQueue(1000, "a"), ReceiveQueue(1000, "b")]
    ob = _outbox(queues)
    data, cp = _out("default", ["word"]), _out(CHECKPOINT_STREAM, ["txid", "action"])
    _emit(ob, data, ["x"])
    _emit(ob, data, ["y"])
    with sealed(ob):
        _emit(ob, cp, [3, "PREPARE"])
    _emit(ob, data, ["z"])
    ob.flush()
    for q, task in zip(queues, (10, 11)):
        assert _taken(q) == [
            (list, [(task, "default", ["x"]), (task, "default", ["y"])]),
            (BarrierBatch, [(task, CHECKPOINT_STREAM, [3, "PREPARE"])]),
            (list, [(task, "default", ["z"])]),
        ]


def test_a_batch_filled_while_sealing_is_a_barrier_batch_too():
    q = ReceiveQueue(1000, "a")
    ob = Outbox("up", [q], {10: 0, 11: 0}, batch_size=1, max_tuple_bytes=1 << 20, acker_tasks=[],
                local_tasks={10, 11}, first_task=1, listener=None, report_error=lambda task, exc: None)
    cp = _out(CHECKPOINT_STREAM, ["txid", "action"])
    with sealed(ob):
        _emit(ob, cp, [4, "COMMIT"])
    assert [kind for kind, _ in _taken(q)] == [BarrierBatch, BarrierBatch]


def test_a_refused_barrier_batch_keeps_its_type_and_place_in_pending_emits():
    q = ReceiveQueue(2, "small")
    ob = _outbox([q, ReceiveQueue(1000, "b")])
    data, cp = _out("default", ["word"]), _out(CHECKPOINT_STREAM, ["txid", "action"])
    _emit(ob, data, ["x"])
    _emit(ob, data, ["y"])
    ob.flush()  # fills "small"
    with sealed(ob):
        _emit(ob, cp, [5, "PREPARE"])
    _emit(ob, data, ["z"])
    ob.flush()
    assert ob.pending_emits
    assert [kind for kind, _ in _taken(q)] == [list]
    assert ob.try_flush_pending()
    assert _taken(q) == [(BarrierBatch, [(10, CHECKPOINT_STREAM, [5, "PREPARE"])]),
                         (list, [(10, "default", ["z"])])]


def test_an_emit_that_raises_inside_ends_the_sealing():
    q = ReceiveQueue(1000, "a")
    ob = _outbox([q, ReceiveQueue(1000, "b")])
    data = _out("default", ["word"])
    try:
        with sealed(ob):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    _emit(ob, data, ["x"])
    ob.flush()
    assert [kind for kind, _ in _taken(q)] == [list]


def test_every_queue_an_outbox_publishes_to_takes_its_producer():
    # the queues of the outbox's seam: a ReceiveQueue, and the worker's sink for tasks that no
    # assignment places yet (a stale route during a rebalance)
    from executor.worker import _Discard

    unplaced = _Discard()
    q = ReceiveQueue(1000, "a")
    ob = Outbox("up", [q, unplaced], {10: 0, 11: 1}, batch_size=1, max_tuple_bytes=1 << 20, acker_tasks=[],
                local_tasks={10}, first_task=1, listener=None, report_error=lambda task, exc: None, tasks=(1,))
    _emit(ob, _out("default", ["word"]), ["x"])
    ob.flush()
    assert unplaced.dropped == 1 and len(q) == 1 and not ob.pending_emits
