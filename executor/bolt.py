"""Bolt executor (Storm's BoltExecutor.java), its collectors, and the acker."""

from __future__ import annotations

import logging
import time

from executor.acker import ACK, AckerLedger
from executor.adapters import Adapter
from executor.base import ExecutorBase
from executor.checkpoint.barrier_mode import RollbackAsker, barrier_only, coordinator_task
from executor.checkpoint.protocol import CHECKPOINT_STREAM
from executor.core.collectors import (
    STREAM_OF,
    TUPLE_OF,
    BasicOutputCollector,
    OutputCollector,
    count_inputs,
    run_basic_batch,
)
from executor.receive_queue import Calls
from executor.scheduling import BLOCKED, BUSY, IDLE
from executor.serialization import (
    ACKER_ACK,
    ACKER_FAIL,
    ACKER_INIT,
    SPOUT_ACK,
    SPOUT_FAIL,
    TupleColumn,
)
from executor.stats import ACKED, EXECUTE_MS, EXECUTE_N, EXECUTED, FAILED
from executor.wait import BOLT_WAIT, make_wait_strategy

log = logging.getLogger(__name__)


_ACKER_INPUT = ("__system", "__ack")  # the acker's input, all its streams as one

_CONSUME_MAX = 1000  # entries taken per loop iteration: bounds pendingEmits after fan-out
# ... and about this many tuples sent per step: a bolt that emits k tuples per input takes
# _SENT_PER_STEP / k inputs a step (at least _CONSUME_MIN), so one step's output fits in queues
# bounded in time (topology.executor.receive.buffer.target.ms) instead of waiting in pendingEmits.
_SENT_PER_STEP = 1000
_CONSUME_MIN = 50
_FANOUT_SMOOTHING = 0.2


def step_input_bound(fanout: float) -> int:
    """Inputs a step takes given the bolt's (smoothed) tuples sent per input."""
    if fanout <= _SENT_PER_STEP / _CONSUME_MAX:
        return _CONSUME_MAX
    return max(_CONSUME_MIN, int(_SENT_PER_STEP / fanout))


class BasicBoltAdapter(Adapter):
    """Runs a BasicBolt as a bolt: ack after execute returns, fail on FailedException."""

    acks_every_input = True

    def __init__(self, user):
        self.user = user
        self._collector: OutputCollector | None = None
        self._basic: BasicOutputCollector | None = None

    def prepare(self, conf, context, collector):
        self._collector = collector
        self._basic = BasicOutputCollector(collector)
        self.user.prepare(conf, context)

    def execute(self, tup):
        self.execute_batch(((None, tup),))

    def execute_batch(self, batch) -> None:
        run_basic_batch(self._basic, self.user, batch)

    def cleanup(self):
        self.user.cleanup()


class BoltExecutor(ExecutorBase):
    kind = "bolt"

    def __init__(self, w):
        super().__init__(w)
        self.idle_wait = make_wait_strategy(self.conf, BOLT_WAIT, self.queue.wait)
        # On a stream cycle, blocking input while the output is full can deadlock the cycle; with
        # acking and max spout pending the tuple trees in flight are bounded, so pendingEmits is
        # too, and the executor keeps consuming instead (beyond Storm, which deadlocks here).
        self._consume_when_blocked = bool(
            w.on_cycle and self.outbox.has_ackers and self.conf.get("topology.max.spout.pending"))
        # per input (component, stream): [executed, execute secs], acks, fails (counters())
        self.executed_in: dict[tuple[str, str], list] = {}
        self.acked_in: dict[tuple[str, str], int] = {}
        self.failed_in: dict[tuple[str, str], int] = {}
        self._step_inputs: dict[tuple[str, str], int] = {}  # tuples per input in this step
        # Set at prepare from its components' adapters (executor/adapters.py): input_room of the
        # paced ones (a ShellBolt: its executor asks before taking a batch instead of the bolt
        # blocking the thread, which on a shared runner is every executor's of the worker), and
        # the batch loop of a lone task's adapter.
        self._paced: list = []
        self._drains: list = []  # (task, its adapter's drain): input kept, executed before the next batch
        self._execute_batch = None
        self._sent_counts: list = []  # its streams' [emitted, sent] (routing.StreamOut.counts)
        self._fanout = 0.0            # tuples sent per input, smoothed
        self._most = _CONSUME_MAX     # step_input_bound(_fanout)
        inputs = set(w.inputs)
        self._single_input = next(iter(inputs)) if len(inputs) == 1 else None
        # The one input of a plain batch (no checkpoint tuple in it: receive_queue.BarrierBatch)
        # when the bolt has one besides `$checkpoint`, else None.
        data_inputs = {i for i in inputs if i[1] != CHECKPOINT_STREAM}
        self._single_data_input = next(iter(data_inputs)) if len(data_inputs) == 1 else None
        # ... and the input of every tuple its bolt acks when it takes no ticks either (acks
        # counted by the batch: OutputCollector.ack_counted)
        self.acked_input = None if self.conf.get("topology.tick.tuple.freq.secs") else self._single_data_input
        senders: dict[str, set[str]] = {}
        for component, stream in inputs:
            senders.setdefault(stream, set()).add(component)
        # per stream, the one input component sending it, where only one does (count_inputs)
        self.sole_source = {stream: next(iter(c)) for stream, c in senders.items() if len(c) == 1}
        self._execute_scanned = None
        self._execute_plain = None
        if barrier_only(self.conf):
            coordinator = coordinator_task(w.contexts[self.task_ids[0]])
            if coordinator is not None:
                asker = RollbackAsker(self.outbox.send, coordinator, self.name, w.losses)
                self.outbox.on_untracked_fail(asker)
                for task in self.task_ids:
                    obj = w.objs.get(task)
                    if isinstance(obj, Adapter):
                        obj.on_state_lost(asker.state_lost)

    def gauges(self) -> dict:
        g = super().gauges()
        extra: dict[str, float] = {}
        for task in self.task_ids:
            obj = self.w.objs.get(task)
            if isinstance(obj, Adapter):
                for k, v in obj.gauges().items():
                    # times (a checkpoint's alignment) are the executor's longest, counts add up
                    extra[k] = max(extra.get(k, 0), v) if k.endswith("_ms") else extra.get(k, 0) + v
        if extra:
            g["extra"] = extra
        return g

    # ---- lifecycle ----
    def _prepare(self) -> None:
        self._where = "prepare"
        for task in self.task_ids:
            self._cur_task = task
            log.info("Preparing bolt %s:%d", self.component_id, task)
            self.w.objs[task].prepare(self.conf, self.w.contexts[task], OutputCollector(self, task))
        self._sent_counts = [so.counts for task in self.task_ids for so in self.w.routes.get(task, {}).values()]
        adapters = [obj for task in self.task_ids if isinstance(obj := self.w.objs[task], Adapter)]
        self._paced = [a.input_room for a in adapters if a.paced]
        self._drains = [(task, obj.drain) for task in self.task_ids
                        if isinstance(obj := self.w.objs[task], Adapter) and obj.drains]
        if len(self.task_ids) == 1 and adapters:
            self._execute_batch = adapters[0].execute_batch
            self._execute_scanned = getattr(adapters[0], "execute_scanned", None)
            self._execute_plain = getattr(adapters[0], "execute_plain", None)
            # the queue is this task's alone: refusing an input there holds up no other task's
            # alignment (executor/checkpoint/forwarder.py, HOLD_BEFORE_REFUSING)
            refuse_with = getattr(adapters[0], "refuse_with", None)
            if refuse_with is not None:
                refuse_with(self.queue.refuse)

    def _process(self, batch) -> None:
        self._where = "execute"
        if type(batch) is Calls:
            for task, fn in batch:
                self._cur_task = task
                fn()
            return
        objs = self.w.objs
        streams = None
        kind = type(batch)
        if self._execute_plain is not None and kind is list:
            # a plain batch holds no checkpoint tuple (receive_queue.BarrierBatch): no scan
            self._execute_plain(batch)
        elif self._execute_scanned is not None and kind is not TupleColumn:
            # the streams read once, for the checkpoint handler's scan and the count below
            streams = list(map(STREAM_OF, map(TUPLE_OF, batch)))
            self._execute_scanned(batch, streams)
        elif self._execute_batch is not None:
            self._execute_batch(batch)
        elif len(self.task_ids) == 1:
            execute = objs[self.task_ids[0]].execute
            for _task, tup in batch:
                execute(tup)
        else:
            for task, tup in batch:
                self._cur_task = task
                objs[task].execute(tup)
        n = len(batch)
        self.executed += n
        # Executed per input (component, stream): per batch when it is one input's (a received
        # column, or a bolt with one subscription), per tuple otherwise; timed per step (_timed).
        counts = self._step_inputs
        if kind is TupleColumn:
            key = (batch.component, batch.stream)
        else:
            first = batch[0][1]
            key = (first.source_component, first.source_stream)
            if key != (self._single_data_input if kind is list else self._single_input):
                count_inputs(counts, map(TUPLE_OF, batch), self.sole_source, streams)
                return
        counts[key] = counts.get(key, 0) + n

    def _timed(self, secs: float) -> None:
        """A step's execute time, shared among its inputs by their tuple counts."""
        counts, self._step_inputs = self._step_inputs, {}
        total = sum(counts.values())
        executed_in = self.executed_in
        for key, n in counts.items():
            entry = executed_in.get(key)
            if entry is None:
                entry = executed_in[key] = [0, 0.0]
            entry[0] += n
            entry[1] += secs * n / total

    def step(self) -> int:
        """One turn of the bolt loop: flush pendingEmits, consume a batch, execute it, flush."""
        ob = self.outbox
        ob.apply_routes()
        if ob.pending_emits and not ob.try_flush_pending():
            # Back-pressured: still take system tuples (ticks), so that timeouts, flushes and
            # rotations keep happening while the data path is full.
            self._process_system()
            if not self._consume_when_blocked:
                return BLOCKED
        most = self._most
        if self._paced:
            most = min(most, *(room() for room in self._paced))
            if most <= 0:  # its subprocess is behind: only system batches (its own replies among them)
                return BUSY if self._process_system() else BLOCKED
        if self._drains and self._drain(most):
            return BUSY
        batches = self.queue.consume(most)
        if not batches:
            return IDLE
        process = self._process
        counts = self._sent_counts
        sent = sum([c[1] for c in counts]) if counts else 0
        executed = self.executed
        started = time.monotonic()  # timed per consume, not per tuple or batch
        for batch in batches:
            process(batch)
        self._timed(time.monotonic() - started)
        if counts and self.executed > executed:
            fanout = (sum([c[1] for c in counts]) - sent) / (self.executed - executed)
            self._fanout += _FANOUT_SMOOTHING * (fanout - self._fanout)
            self._most = step_input_bound(self._fanout)
        self._flush()
        return BUSY

    def _drain(self, most: int) -> int:
        """Execute up to `most` of what the adapters kept (an exactly-once alignment's held input),
        one task's at a time; how many."""
        started = time.monotonic()
        for task, drain in self._drains:
            self._cur_task = task
            done = drain(most)
            if done:
                self._timed(time.monotonic() - started)
                self._flush()
                return done
        return 0

    def _process_system(self) -> bool:
        """Process the system batches queued now (ticks, calls); whether there were any."""
        process = self._process
        batches = self.queue.consume_system()
        for batch in batches:
            started = time.monotonic()
            process(batch)
            self._timed(time.monotonic() - started)
            self._flush()
        return bool(batches)

    def _acks_every_input(self) -> bool:
        """BasicBolts ack whatever they do not fail (their acks are counted that way)."""
        return all(getattr(self.w.objs.get(t), "acks_every_input", False) for t in self.task_ids)

    def counters(self) -> dict[str, float]:
        out = super().counters()
        basic = self._acks_every_input()
        failed_in = dict(self.failed_in)
        acked_in = dict(self.acked_in)
        for (comp, stream), (n, secs) in list(self.executed_in.items()):
            key = f"{comp}:{stream}"
            ms = secs * 1000.0
            out[f"{EXECUTED}|{key}"] = n
            out[f"{EXECUTE_MS}|{key}"] = ms
            out[f"{EXECUTE_N}|{key}"] = n
            if basic:  # a BasicBolt acks whatever it does not fail
                acked_in[(comp, stream)] = n - failed_in.get((comp, stream), 0)
        for (comp, stream), n in acked_in.items():
            if n:
                out[f"{ACKED}|{comp}:{stream}"] = n
        for (comp, stream), n in failed_in.items():
            out[f"{FAILED}|{comp}:{stream}"] = n
        return out

    def _shutdown_components(self) -> None:
        for task in self.task_ids:
            try:
                self.w.objs[task].cleanup()
            except Exception:
                log.exception("bolt %s task %d: cleanup() raised", self.component_id, task)


class AckerExecutor(BoltExecutor):
    """The __acker system bolt: one XOR ledger per executor, results sent straight to spout tasks."""

    kind = "acker"

    def __init__(self, w):
        super().__init__(w)
        self.ledger = AckerLedger()

    def _prepare(self) -> None:
        pass

    def _acks_every_input(self) -> bool:
        return True  # as Storm's acker bolt acks each message it takes

    def _process(self, batch) -> None:
        self._where = "acker"
        self._process_acker(batch)
        counts = self._step_inputs
        counts[_ACKER_INPUT] = counts.get(_ACKER_INPUT, 0) + len(batch)

    def _process_acker(self, batch) -> None:
        ledger = self.ledger
        send = self.outbox.send
        for _task, p in batch:
            if type(p) is tuple:
                kind = p[0]
                if kind == ACKER_ACK:
                    res = ledger.ack(p[1], p[2])
                elif kind == ACKER_INIT:
                    res = ledger.init(p[1], p[2], p[3])
                elif kind == ACKER_FAIL:
                    res = ledger.fail(p[1])
                else:
                    log.warning("acker %s: unknown message %r", self.name, p)
                    continue
                if res is not None:
                    outcome, spout_task, root = res
                    if outcome == ACK:
                        self.acked += 1
                        send(spout_task, (SPOUT_ACK, root))
                    else:
                        self.failed += 1
                        send(spout_task, (SPOUT_FAIL, root))
            elif p.is_tick():
                ledger.rotate()
        self.executed += len(batch)

    def _shutdown_components(self) -> None:
        pass

