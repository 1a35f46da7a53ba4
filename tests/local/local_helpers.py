"""Components and polling helpers for LocalCluster integration tests."""

from __future__ import annotations

import threading
import time
from collections import deque

from testutil import wait_until as poll  # noqa: F401  (re-exported for the tests)

from executor.api import Bolt, Spout


class Shared:
    """State shared between a test and the per-task copies of a component (not copied)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.held: list = []
        self.seen: list = []
        self.commands: deque = deque()
        self.events: list = []
        self.conf: dict = {}

    def __deepcopy__(self, memo):
        return self

    def run(self, fn) -> None:
        """Have the bolt run fn(collector, held) on its own thread (at its next tick)."""
        self.commands.append(fn)


class HoldBolt(Bolt):
    """Holds every input; the test acks/fails/emits through Shared.run (executed on ticks)."""

    def __init__(self, shared: Shared, fields=("value",), tick_secs: float = 0.05):
        self.shared = shared
        self.fields = list(fields)
        self.tick_secs = tick_secs

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": self.tick_secs}

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.is_tick():
            while self.shared.commands:
                self.shared.commands.popleft()(self.collector, self.shared.held)
            return
        with self.shared.lock:
            self.shared.held.append(tup)
            self.shared.seen.append(list(tup.values))


class AckBolt(Bolt):
    """Acks every input, emitting nothing."""

    def __init__(self, shared: Shared | None = None):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if self.shared is not None:
            self.shared.seen.append(list(tup.values))
        self.collector.ack(tup)


class ReplayingSpout(Spout):
    """Emits queued messages with ids and replays failed ones; records acks, fails, calls."""

    def __init__(self, shared: Shared, fields=("value",)):
        self.shared = shared
        self.fields = list(fields)

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def open(self, conf, context, collector):
        self.collector = collector
        self.shared.conf = dict(conf)
        self.shared.events.append(("open", time.monotonic()))
        self.payloads = {}

    def activate(self):
        self.shared.events.append(("activate", time.monotonic()))

    def deactivate(self):
        self.shared.events.append(("deactivate", time.monotonic()))

    def next_tuple(self):
        self.shared.events.append(("next_tuple", time.monotonic()))
        try:
            msg_id, values = self.shared.commands.popleft()
        except IndexError:
            return
        self.payloads[msg_id] = values
        self.collector.emit(values, msg_id=msg_id)

    def ack(self, msg_id):
        with self.shared.lock:
            self.shared.events.append(("ack", msg_id, time.monotonic()))

    def fail(self, msg_id):
        with self.shared.lock:
            self.shared.events.append(("fail", msg_id, time.monotonic()))
        self.shared.commands.append((msg_id, self.payloads[msg_id]))

    @staticmethod
    def count(shared: Shared, kind: str) -> int:
        return sum(1 for e in list(shared.events) if e[0] == kind)
