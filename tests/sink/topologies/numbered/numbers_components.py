"""A reliable spout of numbered rows (ids offset..offset+count-1, each replayed until acked)."""

from executor.api import Spout


class NumbersSpout(Spout):
    def __init__(self, offset_key: str = "numbers.offset", count_key: str = "numbers.count"):
        self.offset_key, self.count_key = offset_key, count_key

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "v"])

    def open(self, conf, context, collector):
        self.collector = collector
        offset, count = int(conf.get(self.offset_key, 0)), int(conf.get(self.count_key, 100))
        self.todo = list(range(offset, offset + count))
        self.done = set()

    def next_tuple(self):
        if self.todo:
            n = self.todo.pop(0)
            self.collector.emit([n, f"v{n}"], msg_id=n)

    def ack(self, msg_id):
        self.done.add(msg_id)
        if len(self.done) % 50 == 0:
            print(f"acked {len(self.done)}", flush=True)

    def fail(self, msg_id):
        self.todo.append(msg_id)
