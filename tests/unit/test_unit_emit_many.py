"""emit_many (beyond Storm's API: executor/core/collectors.py, executor/core/outbox.py): one
call sends what emit would send for each values list, checked as emit checks it, on both cores
(tests/test_pure_core.py runs this file again on the pure-Python twin)."""

from __future__ import annotations

import re

import pytest

from executor.core.collectors import BasicOutputCollector, OutputCollector
from executor.core.outbox import Outbox
from executor.errors import EmitError
from executor.grouping import FieldsGrouper
from executor.routing import StreamOut
from executor.tuple import DEFAULT_STREAM, Fields, Tuple

pytestmark = pytest.mark.timeout(30)

WORD = Fields(["word"])


class _Queue:
    def __init__(self):
        self.batches = []

    def try_publish(self, batch, nbytes=0, producer=None):
        self.batches.append(list(batch))
        return True


class _Executor:
    def __init__(self, outbox, routes):
        self.outbox = outbox
        self.acked_in, self.failed_in = {}, {}
        self.w = type("W", (), {"routes": routes})()
        self.queue = None
        self.errors = []

    def report_error(self, task, exc):
        self.errors.append(exc)


def _split(ackers=()):
    """A split task 1 sending to count tasks 10 and 11 by word; (its collectors, queues, route)."""
    queues = [_Queue(), _Queue()]
    errors = []
    outbox = Outbox("split", queues, {10: 0, 11: 1, **{a: 0 for a in ackers}}, batch_size=3, max_tuple_bytes=1 << 20,
                    acker_tasks=list(ackers), local_tasks={1, 10}, first_task=1, listener=None,
                    report_error=lambda task, exc: errors.append(exc))
    out = StreamOut("split", DEFAULT_STREAM, WORD, False, [FieldsGrouper([10, 11], WORD, WORD)], frozenset())
    collector = OutputCollector(_Executor(outbox, {1: {DEFAULT_STREAM: out}}), 1)
    return collector, BasicOutputCollector(collector), queues, out, outbox, errors


def _sent(queues):
    return [(t, tup.values, tup.source_task, tup.source_stream) for q in queues for b in q.batches for t, tup in b]


WORDS = ["the", "cow", "jumped", "over", "the", "moon", "and", "the", "cow"]


def test_emit_many_sends_what_emit_sends_word_by_word():
    collector, basic, queues, out, outbox, _ = _split()
    basic.input = Tuple(["x"], 0, DEFAULT_STREAM, "spout", Fields(["sentence"]), None)
    for w in WORDS:
        basic.emit([w])
    outbox.flush()
    one_by_one, counts = _sent(queues), list(out.counts)
    collector2, basic2, queues2, out2, outbox2, _ = _split()
    basic2.input = basic.input
    assert basic2.emit_many([[w] for w in WORDS]) is None
    outbox2.flush()
    assert _sent(queues2) == one_by_one and out2.counts == counts == [len(WORDS), len(WORDS)]
    collector3, _b, queues3, out3, outbox3, _ = _split()
    collector3.emit_many(((w,) for w in WORDS))  # any iterable of lists or tuples
    outbox3.flush()
    assert [(t, list(v), s, st) for t, v, s, st in _sent(queues3)] == one_by_one


def test_anchored_emit_many_anchors_each_tuple_as_emit_does():
    collector, basic, queues, out, outbox, _ = _split(ackers=[5])
    anchor = Tuple(["x"], 0, DEFAULT_STREAM, "spout", Fields(["sentence"]), {77: 1})
    basic.input = anchor
    basic.emit_many([[w] for w in WORDS[:4]])
    outbox.flush()
    data = [tup for q in queues for b in q.batches for t, tup in b if t in (10, 11)]
    assert len(data) == 4 and all(set(tup.anchors_to_ids) == {77} for tup in data)
    edges = 0
    for tup in data:
        edges ^= tup.anchors_to_ids[77]
    assert anchor.ack_val == edges  # every new edge rides with the input's ack, as emit's do


@pytest.mark.parametrize("many, why", [
    (["the", "cow"], "emit_many takes a list of value lists (one per tuple, e.g. [[w] for w in words]), got str"),
    ([["the"], ["cow", 2]], "emitted 2 values ['cow', 2] but stream 'default' declares 1 fields ['word']"),
])
def test_bad_values_are_refused_naming_the_component_and_the_tuples_before_are_counted(many, why):
    collector, basic, queues, out, outbox, errors = _split()
    basic.input = Tuple(["x"], 0, DEFAULT_STREAM, "spout", Fields(["sentence"]), None)
    with pytest.raises(EmitError, match=re.escape(why)):
        basic.emit_many(many)
    assert "component 'split' task 1" in str(errors[0])
    assert out.counts[0] == (1 if len(many[0]) == 1 and type(many[0]) is list else 0)


def test_an_undeclared_stream_is_refused():
    collector, basic, *_ = _split()
    basic.input = Tuple(["x"], 0, DEFAULT_STREAM, "spout", Fields(["sentence"]), None)
    with pytest.raises(EmitError, match="stream 'words' is not declared"):
        basic.emit_many([["a"]], stream="words")
