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



class ContextBolt(Bolt):
    """Records what the handshake told it; emits once before its first tuple arrives."""

    def initialize(self, conf, context):
        self.conf = conf
        pid_files = os.listdir(self.pid_dir)
        record(conf, "context", {"context": context, "pid_files": pid_files, "pid": os.getpid(),
                                 "cwd": os.getcwd(), "secrets": [k for k in conf if "secret" in k],
                                 "count": conf.get("test.count")})
        self.emit(["early"])  # before any command: accepted, as Storm accepts it

    def read_handshake(self):
        msg = self.read_message()
        self.pid_dir = msg["pidDir"]
        open(os.path.join(self.pid_dir, str(self.pid)), "w").close()
        self.send_message({"pid": self.pid})
        return msg["conf"], msg["context"]

    def process(self, tup):
        self.emit([tup.values[0]])


class FlakySpout(Spout):
    """Emits numbers; on the 20th `next` of the first run it exits, hangs or breaks the protocol
    as `test.mode` says (a marker file in test.dir: once per test)."""

    def initialize(self, conf, context):
        self.conf = conf
        self.n = 0
        self.marker = os.path.join(conf["test.dir"], "misbehaved")
        self.emit([-1])  # before the first `next`: accepted

    def next_tuple(self):
        self.n += 1
        if self.n == 20 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            mode = self.conf["test.mode"]
            print(f"flaky spout: {mode} on purpose", file=sys.stderr, flush=True)
            if mode == "exit":
                os._exit(4)
            if mode == "hang":
                import time
                time.sleep(3600)
            if mode == "ack-from-spout":
                self.send_message({"command": "ack", "id": 1})
        self.emit([self.n], tup_id=self.n)


if __name__ == "__main__":
    globals()[sys.argv[1]](serializer=sys.argv[2] if len(sys.argv) > 2 else "json").run()
