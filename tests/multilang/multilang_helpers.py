"""Native components and a topology builder shared by the multilang tests."""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

from executor.api import Bolt, Spout

COMPONENTS = Path(__file__).parent / "components"


class Shared:
    """State shared by the test and every copy (and every restarted copy) of its components."""

    def __init__(self, values=()):
        self.lock = threading.Lock()
        self.values = list(values)
        self.acked: set = set()
        self.failed: list = []
        self.seen: list = []

    def __deepcopy__(self, memo):
        return self

    def acked_all(self) -> bool:
        with self.lock:
            return self.acked >= set(self.values)


class ValuesSpout(Spout):
    """Emits each value with itself as the message id until it is acked; a restarted copy
    starts again from every value not acked (what a replayable source does)."""

    def __init__(self, shared: Shared, field: str = "value"):
        self.shared, self.field = shared, field

    def declare_output_fields(self, declarer):
        declarer.declare([self.field])

    def open(self, conf, context, collector):
        self.collector = collector
        with self.shared.lock:
            self.todo = deque(v for v in self.shared.values if v not in self.shared.acked)

    def next_tuple(self):
        if self.todo:
            value = self.todo.popleft()
            self.collector.emit([value], msg_id=value)

    def ack(self, msg_id):
        with self.shared.lock:
            self.shared.acked.add(msg_id)

    def fail(self, msg_id):
        with self.shared.lock:
            self.shared.failed.append(msg_id)
        self.todo.append(msg_id)


class SinkBolt(Bolt):
    """Records every input's values and acks it."""

    def __init__(self, shared: Shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        with self.shared.lock:
            self.shared.seen.append(tuple(tup.values))
        self.collector.ack(tup)
