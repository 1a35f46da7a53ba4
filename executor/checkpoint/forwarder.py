"""What every bolt of a topology with checkpoints does with the `$checkpoint` stream (Storm's
BaseStatefulBoltExecutor.java and CheckpointTupleForwarder.java): wait until every upstream
task has sent its checkpoint tuple for a transaction, act on it (a stateful bolt: its state;
any other bolt: nothing), pass it on anchored and ack it. Data tuples go to the wrapped bolt."""

from __future__ import annotations

import logging
import time
from collections import deque

from executor.adapters import Adapter, user_component
from executor.checkpoint.api import CheckpointedOutput
from executor.checkpoint.barrier_mode import WorkerLosses, barrier_only
from executor.checkpoint.protocol import (
    ALIGNMENT,
    ALIGNMENT_BOUNDS_MS,
    ALIGNMENT_BUCKET,
    ALIGNMENT_COUNT,
    ALIGNMENT_MAX,
    ALIGNMENT_SUM,
    ALIGNMENTS_KEPT,
    CHECKPOINT_STREAM,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
    Barrier,
    StateLostError,
    alignment_buckets,
    checkpoint_input_tasks,
)
from executor.checkpoint.sealing import sealed
from executor.core.collectors import STREAM_OF, TUPLE_OF
from executor.serialization import TupleColumn

log = logging.getLogger(__name__)

# Exactly-once alignment: once it holds this many tuples, the local executors whose barrier came
# are refused at the queue (back-pressure), so that a barrier late on a link between workers no
# longer lets a spout of this worker run free into a held list (hundreds of thousands of tuples,
# executed afterwards while every later barrier waits behind them) ...
HOLD_BEFORE_REFUSING = 4096
# ... for at most this long from the alignment's start: should the barrier awaited never come
# (a worker died), the rollback that follows must not wait behind a refused executor's output.
REFUSE_SECS = 2.0


class CheckpointHandler(Adapter):
    """Splits a batch into data runs (to the wrapped bolt) and checkpoint tuples (to
    handle_checkpoint once per transaction), in arrival order."""

    def __init__(self, inner, losses: WorkerLosses | None = None):
        self.user = inner
        self._inner = inner
        self.paced = bool(getattr(inner, "paced", False))
        self.acks_every_input = bool(getattr(inner, "acks_every_input", False))
        self._inner_batch = inner.execute_batch if isinstance(inner, Adapter) else None
        self._collector = None
        self._context = None
        self._barrier = Barrier(1)
        self._last_txid: int | None = None
        self.exactly_once = False
        self._blocked: set[int] = set()       # input tasks whose checkpoint tuple came (aligning)
        self._aligning_on: tuple[str, int] | None = None
        self._held: list = []                 # what those tasks sent since, in order
        # Input taken from the queue and not yet executed, in order: what an alignment held, and
        # what followed its last barrier copy in the same batch. The executor drains it a batch
        # at a time (drain()) before it takes more, so that a long alignment's release goes
        # through back-pressure like any input instead of running for seconds in one step.
        self._backlog: deque = deque()
        # Exactly-once: a task that started afresh (its worker died) may have lost tuples in
        # flight, so it fails every PREPARE until a ROLLBACK has reached it; so does one whose
        # worker lost something since: a payload on a link, a failed tuple
        # (executor/checkpoint/barrier_mode.py). Not an INITSTATE: it rewinds no spout, and what
        # was sent to the task's previous run after the recovery's ROLLBACK died with it.
        self._restored = False
        self._losses = losses
        self._losses_at_restore = 0
        # Alignment: from a PREPARE's first copy to its last (0 with one input), in ms, for the
        # last ALIGNMENTS_KEPT checkpoints (the UI's checkpoints table, /metrics).
        self._align_from: float | None = None
        self._alignments: deque = deque(maxlen=ALIGNMENTS_KEPT)
        self._aligned_le = [0] * len(ALIGNMENT_BOUNDS_MS)  # every one since the start, cumulative
        self._aligned_sum = 0.0
        self._aligned_count = 0
        self._ask_reset = None  # exactly-once: tells the checkpoint spout this task's state is gone
        self._refuse = None     # its executor's queue's refuse (refuse_with), or None
        self._refusing = False
        self._aligning_since = 0.0

    # ---- what the wrapped bolt needs from the executor ----
    def input_room(self) -> int:
        return self._inner.input_room()

    def on_state_lost(self, ask) -> None:
        self._ask_reset = ask

    def refuse_with(self, refuse) -> None:
        """`refuse(tasks, until)`: its executor's queue's (receive_queue.ReceiveQueue.refuse),
        given when the task is its executor's only one."""
        self._refuse = refuse

    def release_on_death(self) -> None:
        if isinstance(self._inner, Adapter):
            self._inner.release_on_death()

    def gauges(self) -> dict[str, float]:
        g = self._inner.gauges() if isinstance(self._inner, Adapter) else {}
        if self._alignments:
            g[ALIGNMENT] = self._alignments[-1]
            g[ALIGNMENT_MAX] = max(self._alignments)
            g[ALIGNMENT_COUNT] = self._aligned_count
            g[ALIGNMENT_SUM] = round(self._aligned_sum, 3)
            for bound, n in zip(ALIGNMENT_BOUNDS_MS, self._aligned_le):
                g[f"{ALIGNMENT_BUCKET}{bound}"] = n
        return g

    # ---- lifecycle ----
    def prepare(self, conf, context, collector) -> None:
        self._collector = collector
        self._context = context
        self._barrier = Barrier(checkpoint_input_tasks(context))
        self.exactly_once = barrier_only(conf)
        self.drains = self.exactly_once  # only an exactly-once alignment keeps input for later
        self.prepare_inner(conf, context, collector)

    def prepare_inner(self, conf, context, collector) -> None:
        self._inner.prepare(conf, context, collector)

    def cleanup(self) -> None:
        self._inner.cleanup()

    # ---- input ----
    def execute(self, tup) -> None:
        self.execute_batch(((None, tup),))

    def execute_batch(self, batch) -> None:
        self.execute_scanned(batch, None)

    def execute_scanned(self, batch, streams: list | None) -> None:
        """execute_batch, given the streams of a list batch's tuples when the executor read them
        already (it counts its inputs with them: executor/bolt.py)."""
        if self._backlog:  # after what waits there (the executor drains it before it takes more)
            self._backlog.extend(batch)
            return
        self._scan(batch, streams)

    def execute_plain(self, batch) -> None:
        """execute_batch of a batch that holds no checkpoint tuple: a plain list from the
        executor's queue (checkpoint tuples come in receive_queue.BarrierBatch ones)."""
        if self._backlog:
            self._backlog.extend(batch)
        elif self._blocked:
            self._aligning(batch)
        else:
            self.handle_data(batch)

    def _scan(self, batch, streams: list | None) -> None:
        """Data runs to the wrapped bolt, checkpoint tuples to _on_checkpoint, in order."""
        if self._blocked:
            self._aligning(batch)
            return
        if type(batch) is TupleColumn:
            if batch.stream != CHECKPOINT_STREAM:
                self.handle_data(batch)
                return
            batch = list(batch)
            streams = None
        cp = CHECKPOINT_STREAM
        if streams is None:
            streams = list(map(STREAM_OF, map(TUPLE_OF, batch)))  # per tuple, in C: every batch is scanned
        if cp not in streams:
            self.handle_data(batch)
            return
        marks = [i for i, stream in enumerate(streams) if stream == cp]
        start = 0
        for i in marks:
            if i > start:
                self.handle_data(batch[start:i])
            self._on_checkpoint(batch[i][1])
            start = i + 1
            if self._blocked:  # exactly-once: the rest waits for the barrier's other copies
                self._aligning(batch[start:])
                return
        if start < len(batch):
            self.handle_data(batch[start:])

    def _aligning(self, entries) -> None:
        """Exactly-once barrier alignment (Flink's, on the checkpoint stream): what comes from a
        task whose checkpoint tuple already arrived waits until every input's has, so that the
        state acted on holds exactly the tuples sent before the checkpoint. Once aligned, what
        waited and the rest of `entries` (any batch: read once, into a deque) go to the backlog,
        executed from the next step on."""
        queue = deque(entries)
        held = self._held
        run: list = []  # consecutive data entries from inputs still before their barrier
        while queue:
            entry = queue.popleft()
            tup = entry[1]
            if tup.source_task in self._blocked:
                held.append(entry)
                continue
            if tup.source_stream != CHECKPOINT_STREAM:
                run.append(entry)
                continue
            if run:
                self.handle_data(run)
                run = []
            if (tup.values[1], tup.values[0]) != self._aligning_on:
                # Another transaction from an input that never sent this one's (a failed one
                # being rolled back): give up aligning; what waited goes first.
                queue.appendleft(entry)
                break
            self._on_checkpoint(tup)
            if not self._blocked:
                break
        if run:
            self.handle_data(run)
        if not self._blocked or queue:
            self._release(queue)
        elif len(held) >= HOLD_BEFORE_REFUSING and self._refuse is not None:
            self._refuse(self._blocked, self._aligning_since + REFUSE_SECS)
            self._refusing = True

    def _release(self, rest: deque) -> None:
        """The alignment is over: what it held, then `rest`, go before the backlog."""
        held, self._held = self._held, []
        self._blocked = set()
        if self._refusing:
            self._refuse((), 0.0)
            self._refusing = False
        backlog = self._backlog
        backlog.extendleft(reversed(rest))
        backlog.extendleft(reversed(held))

    def drain(self, most: int) -> int:
        backlog = self._backlog
        if not backlog:
            return 0
        n = min(most, len(backlog))
        # what a barrier in the chunk leaves over goes back before the rest (_release)
        self._scan([backlog.popleft() for _ in range(n)], None)
        return n

    def _intact(self) -> bool:
        """Whether everything sent to this task since the last rollback reached it."""
        return self._restored and (self._losses is None or self._losses.count == self._losses_at_restore)

    def handle_data(self, batch) -> None:
        if self._inner_batch is not None:
            self._inner_batch(batch)
        else:
            execute = self._inner.execute
            for _task, tup in batch:
                execute(tup)

    def _on_checkpoint(self, tup) -> None:
        collector = self._collector
        txid, action = tup.values
        if not self._barrier.arrive(action, txid):
            if self.exactly_once and action != COMMIT:
                # A COMMIT makes durable what its PREPARE prepared, whatever came since (Flink's
                # notifyCheckpointComplete is not aligned either); holding input for it only
                # stalled the topology while its copies crossed the workers' links.
                if not self._blocked:
                    self._aligning_since = time.monotonic()
                self._blocked.add(tup.source_task)
                self._aligning_on = (action, txid)
            if action == PREPARE and self._align_from is None:
                self._align_from = time.monotonic()
            collector.ack(tup)
            return
        self._blocked = set()
        if action == PREPARE:
            since, self._align_from = self._align_from, None
            ms = 0.0 if since is None else round((time.monotonic() - since) * 1000, 3)
            self._alignments.append(ms)
            self._aligned_count += 1
            self._aligned_sum += ms
            alignment_buckets(self._aligned_le, ms)
        if self._last_txid is not None and txid < self._last_txid and not (self.exactly_once and action == ROLLBACK):
            # An older transaction's straggler: nothing to do (Storm's rule). Exactly-once, a
            # ROLLBACK from every input is never one: the checkpoint spout went back (its record
            # was lost with its worker), and every task follows it (protocol.restore_plan).
            collector.ack(tup)
            return
        if self.exactly_once and action == PREPARE and not self._intact():
            log.info("bolt %s: PREPARE of txid %d failed: %s, so the topology rolls back what may be lost",
                     self._name(), txid, "no rollback reached it since it started" if not self._restored
                     else "its worker lost a payload or failed a tuple since the last rollback")
            collector.fail(tup)
            return
        try:
            done = self.handle_checkpoint(tup, action, txid)
        except StateLostError as exc:
            log.warning("bolt %s: checkpoint %s of txid %d failed: %s", self._name(), action, txid, exc)
            if self._ask_reset is not None:
                self._ask_reset()
            collector.fail(tup)
            return
        except Exception as exc:
            log.error("bolt %s: checkpoint %s of txid %d failed: %s", self._name(), action, txid, exc)
            collector.fail(tup)
            collector.report_error(exc)
            return
        if not done:
            collector.fail(tup)
            return
        if action == ROLLBACK or (action == INITSTATE and not self.exactly_once):
            self._restored = True
            self._losses_at_restore = self._losses.count if self._losses is not None else 0
        if action == ROLLBACK:
            self._align_from = None  # a PREPARE still aligning was given up
            self._last_txid = txid - 1
            self._barrier.clear()
        else:
            self._last_txid = txid
            self._barrier.forget_before(txid)
        with sealed(collector):
            collector.emit([txid, action], anchors=tup, stream=CHECKPOINT_STREAM)
        collector.ack(tup)

    def handle_checkpoint(self, tup, action: str, txid: int) -> bool:
        """Act on a transaction step; False: not possible now (the checkpoint tuple is failed,
        which makes the checkpoint spout recover)."""
        return True

    def _name(self) -> str:
        ctx = self._context
        return f"{ctx.this_component_id}:{ctx.this_task_id}" if ctx is not None else "?"


class CheckpointForwarder(CheckpointHandler):
    """A bolt without state in a topology with checkpoints: it passes them on. In exactly-once
    mode, one whose output leaves the topology (CheckpointedOutput: the Spark sink) prepares,
    commits or discards it with each step, so that a checkpoint never completes with tuples sent
    before it still only in memory, and its output shows each of them once."""

    _output = None

    def prepare_inner(self, conf, context, collector) -> None:
        super().prepare_inner(conf, context, collector)
        user = user_component(self._inner)
        if self.exactly_once and isinstance(user, CheckpointedOutput):
            self._output = user

    def handle_checkpoint(self, tup, action: str, txid: int) -> bool:
        out = self._output
        if out is None:
            return True
        if action == PREPARE:
            return bool(out.prepare_output(txid))
        if action == COMMIT:
            return bool(out.commit_output(txid))
        if action == ROLLBACK:
            out.rollback_output(txid)
        return True
