"""Components of the scenario topologies. They record what happened as JSON lines in files under
the directory named by the topology config key `scenario.results.dir`, one file per task
(`{component}-{task}.jsonl`), so the test reads the same records whether the tasks ran in this
process (LocalCluster) or in worker processes of a dev cluster. Every record carries
`time.monotonic_ns()`: one clock for every process of the machine, so records of different
processes can be ordered (never timed).

The test steers held tuples through control files: `control/release-{component}` holds how
many of the tuples the component is holding (in arrival order) it may now process."""

from __future__ import annotations

import json
import os
import time

from executor.api import (
    BaseStatefulBolt,
    BaseStatefulSpout,
    BaseStatefulWindowedBolt,
    BaseWindowedBolt,
    BasicBolt,
    Bolt,
    DirectorySpout,
    FailedException,
    RedisStreamSpout,
    Spout,
)

RESULTS_KEY = "scenario.results.dir"


class Recorder:
    """Appends one JSON line per record to this task's file (open, write, close: a record is on
    disk when record() returns, and no descriptor outlives it)."""

    def __init__(self, conf, context):
        self.root = conf[RESULTS_KEY]
        self.base = {"component": context.this_component_id, "task": context.this_task_id}
        self.path = os.path.join(self.root, f"{context.this_component_id}-{context.this_task_id}.jsonl")
        self.record("start", port=context.this_worker_port, pid=os.getpid())

    def record(self, kind, **data):
        line = json.dumps({**self.base, "kind": kind, "t": time.monotonic_ns(), **data}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one write per line: readers never see half a record
        finally:
            os.close(fd)

    def released(self, component):
        """How many held tuples the test allows `component` to process (0 before any release)."""
        try:
            with open(os.path.join(self.root, "control", f"release-{component}")) as f:
                return int(f.read() or 0)
        except FileNotFoundError:
            return 0


class Paced:
    """At most `rate` emits a second (None or 0: as fast as allowed), e.g. so that a fault can
    land while numbers flow."""

    def pace(self, rate):
        self.rate = rate
        self.started = time.monotonic()
        self.emits = 0

    def may_emit(self) -> bool:
        if self.rate and self.emits >= (time.monotonic() - self.started) * self.rate:
            return False
        self.emits += 1
        return True


class IdSpout(Paced, Spout):
    """Emits `messages` ([msg_id, values] pairs) once each, in order, with their ids; a failed
    one is recorded and, with `replay`, emitted again. Records every emit with the number of
    its messages then pending (emitted, neither acked nor failed), every ack and fail."""

    def __init__(self, messages, fields=("value",), replay=False, rate=None):
        self.messages = [(m[0], list(m[1])) for m in messages]
        self.fields = list(fields)
        self.replay = replay
        self.rate = rate  # at most this many emits a second (None: as fast as it is asked)

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.todo = list(self.messages)
        self.payloads = dict(self.messages)
        self.pending = set()
        self.pace(self.rate)

    def next_tuple(self):
        if not self.todo or not self.may_emit():
            return
        msg_id, values = self.todo.pop(0)
        self.pending.add(msg_id)
        self.rec.record("emit", id=msg_id, pending=len(self.pending))
        self.collector.emit(values, msg_id=msg_id)

    def ack(self, msg_id):
        self.pending.discard(msg_id)
        self.rec.record("ack", id=msg_id)

    def fail(self, msg_id):
        self.pending.discard(msg_id)
        self.rec.record("fail", id=msg_id)
        if self.replay:
            self.todo.append((msg_id, self.payloads[msg_id]))


class _RecordingBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)


class Sink(_RecordingBolt):
    """Records every input ("got": values, source, stream) and every tick ("tick"); acks all."""

    def execute(self, tup):
        kind = "tick" if tup.is_tick() else "got"
        self.rec.record(kind, values=list(tup.values), source=tup.source_component,
                        source_task=tup.source_task, stream=tup.source_stream)
        self.collector.ack(tup)


class _TickingBolt(_RecordingBolt):
    """A recording bolt declaring `fields` that gets a tick every `tick_secs`."""

    def __init__(self, fields=("value",), tick_secs=0.1):
        self.fields = list(fields)
        self.tick_secs = tick_secs

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": self.tick_secs}

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)


class HoldBolt(_TickingBolt):
    """Holds every input ("held") until the test releases it (control file, checked on ticks),
    then processes it by `action`:
      "ack":       fails it if its first value is in `fail_values`, else acks it;
      "aggregate": emits the sum of the first values of the released batch anchored to all of
                   them, then acks them;
      "twice":     emits [first value + "'"] anchored twice to the same input, then acks it.
    Records "acked", "failed" and "emitted" (before the ack/fail/emit call it describes)."""

    def __init__(self, action="ack", fail_values=(), fields=("value",), tick_secs=0.05):
        super().__init__(fields, tick_secs)
        self.action = action
        self.fail_values = list(fail_values)

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.component = context.this_component_id
        self.held = []
        self.done = 0

    def execute(self, tup):
        if not tup.is_tick():
            self.held.append(tup)
            self.rec.record("held", values=list(tup.values))
            return
        allowed = self.rec.released(self.component)
        if allowed > self.done:
            batch = self.held[self.done:allowed]
            self.done += len(batch)
            self._process(batch)

    def _process(self, batch):
        c = self.collector
        if self.action == "aggregate" and batch:
            total = sum(t.values[0] for t in batch)
            self.rec.record("emitted", values=[total])
            c.emit([total], anchors=batch)
        for t in batch:
            if self.action == "twice":
                out = [f"{t.values[0]}'"]
                self.rec.record("emitted", values=out)
                c.emit(out, anchors=[t, t])
            if t.values[0] in self.fail_values:
                self.rec.record("failed", values=list(t.values))
                c.fail(t)
            else:
                self.rec.record("acked", values=list(t.values))
                c.ack(t)


class DropFirst(_RecordingBolt):
    """Neither acks nor fails the first delivery of each value (so it times out); acks the
    replays. Records every delivery ("got")."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.seen = set()

    def execute(self, tup):
        v = tup.values[0]
        self.rec.record("got", values=list(tup.values))
        if v in self.seen:
            self.collector.ack(tup)
        else:
            self.seen.add(v)


class Router(BasicBolt):
    """Re-emits every (key, n) on its direct stream to `target`'s task n % len(tasks)."""

    def __init__(self, target):
        self.target = target

    def declare_output_fields(self, declarer):
        declarer.declare(["task", "n"], stream="direct", direct=True)

    def prepare(self, conf, context):
        self.targets = context.component_tasks(self.target)

    def execute(self, tup, collector):
        task = self.targets[tup.values[1] % len(self.targets)]
        collector.emit_direct(task, [task, tup.values[1]], stream="direct")


class ModuloGrouping:
    """Custom grouping: the target task at index n % len(targets) (n: the second value)."""

    def prepare(self, context, stream, targets):
        self.targets = sorted(targets)

    def choose_tasks(self, task_id, values):
        return [self.targets[values[1] % len(self.targets)]]


class PassBolt(_TickingBolt):
    """Passes every input on (anchored), then acks it; records inputs ("got") and ticks ("tick")."""

    def __init__(self, fields=("value",), tick_secs=0.1):
        super().__init__(fields, tick_secs)

    def execute(self, tup):
        if tup.is_tick():
            self.rec.record("tick")
            return
        self.rec.record("got", values=list(tup.values))
        self.collector.emit(list(tup.values), anchors=tup)
        self.collector.ack(tup)


class GateBolt(_RecordingBolt):
    """Blocks in execute (its executor thread stalls) until the test releases it, then acks
    everything; records every input ("got") on arrival."""

    MAX_BLOCK_SECS = 120  # bounded: a test that never opens the gate still ends

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.component = context.this_component_id

    def execute(self, tup):
        self.rec.record("got", values=list(tup.values))
        deadline = time.monotonic() + self.MAX_BLOCK_SECS
        while not self.rec.released(self.component) and time.monotonic() < deadline:
            time.sleep(0.01)  # the gate: polled until the test's control file opens it
        self.collector.ack(tup)


class _Numbers(Paced):
    """What both number spouts share: the field `n`, up to `numbers.n` (topology config, else
    n), paced, recording."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.n = int(conf.get("numbers.n", self.n))
        self.pace(conf.get("numbers.rate"))  # topology config


class NumberSpout(_Numbers, Spout):
    """Emits 1..n (`numbers.n` in the topology config, else n) once each with the number as
    message id, replaying failed ones; records acks and fails."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.next = 1
        self.replay = []

    def next_tuple(self):
        if not self.may_emit():
            return
        if self.replay:
            n = self.replay.pop(0)
        elif self.next <= self.n:
            n, self.next = self.next, self.next + 1
        else:
            return
        self.collector.emit([n], msg_id=n)

    def ack(self, msg_id):
        self.rec.record("ack", id=msg_id)

    def fail(self, msg_id):
        self.rec.record("fail", id=msg_id)
        self.replay.append(msg_id)


RELAY_FIELDS = ["n"]


class Relay(BasicBolt):
    """Passes every tuple on (anchored, as a BasicBolt does); the first time it sees the number
    `numbers.fail.once` (topology config), it fails it instead (FailedException), once per task."""

    def declare_output_fields(self, declarer):
        declarer.declare(RELAY_FIELDS)

    def prepare(self, conf, context):
        self.fail_once = conf.get("numbers.fail.once")
        self.rec = Recorder(conf, context)  # its "start": which process each task ran in

    def execute(self, tup, collector):
        if self.fail_once is not None and tup.values[0] == self.fail_once:
            self.fail_once = None
            self.rec.record("failed", values=list(tup.values))
            raise FailedException(f"number {tup.values[0]} failed once, on purpose")
        collector.emit(list(tup.values))


class CountingSpout(_Numbers, BaseStatefulSpout):
    """Emits next, next+1, ... up to n (`numbers.n` in the topology config, else n) and stops;
    `next` is its state (rewound on a rollback). Records its inits and the ack of n."""

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)
        self.rec.record("init", next=self.next)

    def next_tuple(self):
        if self.next > self.n or not self.may_emit():
            return
        n = self.next
        self.next += 1
        self.state.put("next", self.next)
        self.collector.emit([n], msg_id=n)

    def ack(self, msg_id):
        if msg_id == self.n:
            self.rec.record("ack", id=msg_id)


class NewSums(BaseWindowedBolt):
    """A windowed bolt without state: emits the sum of each window's new numbers (so that every
    number is summed once downstream, whatever the window's length) and records it ("window")."""

    def declare_output_fields(self, declarer):
        declarer.declare(RELAY_FIELDS)

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)

    def execute(self, window):
        new = [t.values[0] for t in window.get_new()]
        self.rec.record("window", new=len(new), held=len(window.get()))
        self.collector.emit([sum(new)])


class SumBolt(BaseStatefulBolt):
    """Sums the numbers it gets in its state; records what each PREPARE captured ("prepared":
    txid, sum, count), each COMMIT ("committed": txid) and each rollback ("rollback"). Its
    pre_rollback raises the first `sum.rollback.raises` times (topology config; default never).
    With `sum.hold.commits` its pre_commit waits until the test releases `sum-commits` (a slow
    commit; at most two minutes)."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.raises = int(conf.get("sum.rollback.raises", 0))
        self.hold_commits = bool(conf.get("sum.hold.commits"))

    def init_state(self, state):
        self.state = state
        self.rec.record("init", sum=state.get("sum", 0), count=state.get("count", 0))

    def execute(self, tup):
        n = tup.values[0]
        self.state.put("sum", self.state.get("sum", 0) + n)
        self.state.put("count", self.state.get("count", 0) + 1)
        self.state.put(f"seen-{n}", True)
        self.collector.ack(tup)

    def pre_prepare(self, txid):
        self.rec.record("prepared", txid=txid, sum=self.state.get("sum", 0), count=self.state.get("count", 0))

    def pre_commit(self, txid):
        deadline = time.monotonic() + 120
        while self.hold_commits and not self.rec.released("sum-commits") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.rec.record("committed", txid=txid)

    def pre_rollback(self):
        self.rec.record("rollback")
        if self.raises > 0:
            self.raises -= 1
            raise RuntimeError("pre_rollback refuses, on purpose")


class RecordStatefulWindows(BaseStatefulWindowedBolt):
    """A stateful windowed bolt recording its init and each window ("window": values, new,
    expired) and emitting the window's sum (unanchored when its window is persistent)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["sum"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)

    def init_state(self, state):
        self.state = state
        self.rec.record("init")

    def execute(self, window):
        values = [t.values[0] for t in window.get()]
        self.rec.record("window", values=values, new=[t.values[0] for t in window.get_new()],
                        expired=[t.values[0] for t in window.get_expired()])
        self.collector.emit([sum(values)])


class RedisNumbers(RedisStreamSpout):
    """RedisStreamSpout on the stream `numbers` (group `summer`) of the Redis at port
    `scenario.redis.port` (topology config): one topology file for any test's server."""

    def __init__(self):
        super().__init__("numbers", "summer")

    def open(self, conf, context, collector):
        self.port = int(conf["scenario.redis.port"])
        super().open(conf, context, collector)


class DirectoryNumbers(DirectorySpout):
    """DirectorySpout on the directory `scenario.source.dir` (topology config); files move to
    its `done/` once every line is done."""

    def __init__(self):
        super().__init__("unset", done="move")

    def open(self, conf, context, collector):
        self.path = conf["scenario.source.dir"]
        super().open(conf, context, collector)


class NumberOf(BasicBolt):
    """A source's tuple as its number (a Redis entry's field `n`, a line's text), on the fields
    RELAY_FIELDS; the first time a task sees the number `numbers.fail.once` (topology config),
    it fails it instead, as Relay does."""

    def declare_output_fields(self, declarer):
        declarer.declare(RELAY_FIELDS)

    def prepare(self, conf, context):
        self.fail_once = conf.get("numbers.fail.once")
        self.rec = Recorder(conf, context)

    def execute(self, tup, collector):
        value = tup.values[-1]
        n = int(value["n"] if isinstance(value, dict) else value)
        if self.fail_once is not None and n == self.fail_once:
            self.fail_once = None
            self.rec.record("failed", values=[n])
            raise FailedException(f"number {n} failed once, on purpose")
        collector.emit([n])


def source_sum_topology(spout):
    """`spout` -> NumberOf (2 tasks) -> SumBolt (2 tasks, fields-grouped), exactly once, two
    workers, a checkpoint every 200 ms: (topology, config) of the sources' scenarios."""
    from executor.api import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("numbers", spout, 1)
    b.set_bolt("relay", NumberOf(), 2).shuffle_grouping("numbers")
    b.set_bolt("sum", SumBolt(), 2).fields_grouping("relay", RELAY_FIELDS)
    return b.create_topology(), {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 200,
                                 "topology.state.exactly.once": True}
