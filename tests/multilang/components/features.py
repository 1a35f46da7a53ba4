"""pystorm components for the multilang feature tests, written against pystorm's public API.
Run as `python3 features.py CLASS [json|msgpack]`; they write what the tests check into files
under the topology's `test.dir`."""

import json
import os
import sys

from pystorm import BatchingBolt, Bolt, Spout, TicklessBatchingBolt


def record(conf, name, line):
    with open(os.path.join(conf["test.dir"], name), "a") as f:
        f.write(json.dumps(line) + "\n")


class NumberSpout(Spout):
    """Reliable: emits `test.count` numbers with ids (ints, or strings with test.string_ids),
    re-emitting failed ones with the same id; records every ack and fail."""

    def initialize(self, conf, context):
        self.conf = conf
        self.todo = list(range(int(conf["test.count"])))
        self.strings = bool(conf.get("test.string_ids"))
        self.values = {}

    def next_tuple(self):
        if self.todo:
            n = self.todo.pop(0)
            tup_id = f"id-{n}" if self.strings else n
            self.values[tup_id] = n
            self.emit([n], tup_id=tup_id)

    def ack(self, tup_id):
        record(self.conf, "spout", ["ack", tup_id])

    def fail(self, tup_id):
        record(self.conf, "spout", ["fail", tup_id])
        self.emit([self.values[tup_id]], tup_id=tup_id)


class FailFirstBolt(Bolt):
    """Fails the first try of every even number, passes everything else on (auto-anchored);
    acks itself (pystorm's auto-ack would ack a failed tuple too)."""

    auto_ack = False

    def initialize(self, conf, context):
        self.failed = set()

    def process(self, tup):
        n = tup.values[0]
        if n % 2 == 0 and n not in self.failed:
            self.failed.add(n)
            self.fail(tup)
            return
        self.emit([n])
        self.ack(tup)


class PassBolt(Bolt):
    """Auto-anchor and auto-ack (pystorm's defaults): passes every number on."""

    def process(self, tup):
        self.emit([tup.values[0]])


class SumBatches(BatchingBolt):
    """Batches of numbers between ticks, by parity: emits [parity, sum, size] per batch."""

    ticks_between_batches = 1

    def group_key(self, tup):
        return tup.values[0] % 2

    def process_batch(self, key, tups):
        self.emit([key, sum(t.values[0] for t in tups), len(tups)])


class SumTickless(TicklessBatchingBolt):
    """The same, batched by a timer thread in the subprocess (no tick tuples)."""

    secs_between_batches = 0.2

    def group_key(self, tup):
        return tup.values[0] % 2

    def process_batch(self, key, tups):
        self.emit([key, sum(t.values[0] for t in tups), len(tups)])


class DirectBolt(Bolt):
    """Sends each number straight to one task of `test.target` (chosen by the number), and
    asks where a second, shuffled emit went (need_task_ids)."""

    def initialize(self, conf, context):
        self.conf = conf
        comp = conf["test.target"]
        self.targets = sorted(int(t) for t, c in context["task->component"].items() if c == comp)

    def process(self, tup):
        n = tup.values[0]
        task = self.targets[n % len(self.targets)]
        self.emit([n, task], stream="direct", direct_task=task)
        went = self.emit([n, -1], stream="shuffled", need_task_ids=True)
        record(self.conf, "direct_ids", [n, went])


class NeedTaskIdsDefault(Bolt):
    """Emits as Storm's own multilang components do: without need_task_ids (absent: true), then
    reads the reply with pystorm's read_task_ids."""

    def initialize(self, conf, context):
        self.conf = conf

    def process(self, tup):
        n = tup.values[0]
        with self._reader_lock, self._writer_lock:
            self.send_message({"command": "emit", "tuple": [n], "anchors": [tup.id]})
            went = self.read_task_ids()
        record(self.conf, "default_ids", [n, went])


if __name__ == "__main__":
    globals()[sys.argv[1]](serializer=sys.argv[2] if len(sys.argv) > 2 else "json").run()
