"""Spout executor (Storm's SpoutExecutor.java) and its output collector."""

from __future__ import annotations

import logging
import random
import time

from cluster_state.records import CheckpointMark
from executor.base import ExecutorBase
from executor.checkpoint.protocol import CHECKPOINT_STREAM, QUIET_SINCE
from executor.checkpoint.spout_side import SpoutBarriers
from executor.core.collectors import SpoutOutputCollector
from executor.pending_bound import PERIOD_SECS, Bound, Period, decide
from executor.receive_queue import Calls
from executor.rotating_map import RotatingMap
from executor.scheduling import BLOCKED, BUSY, IDLE, INACTIVE
from executor.serialization import (
    CHECKPOINT_FAILED,
    CHECKPOINT_WANTED,
    SPOUT_ACK,
    SPOUT_FAIL,
)
from executor.stats import (
    ACKED,
    COMPLETE_MS,
    COMPLETE_N,
    FAILED,
    PENDING_BOUND,
    SKIP_BACKPRESSURE,
    SKIP_INACTIVE,
    SKIP_MAX_PENDING,
    SKIP_REASONS,
    SKIPPED_MS,
    TIMEOUTS,
)
from executor.wait import SPOUT_WAIT, make_wait_strategy

log = logging.getLogger(__name__)

_FLUSH_INTERVAL = 0.001  # seconds a partly filled batch may wait while the spout keeps emitting


class SpoutExecutor(ExecutorBase):
    kind = "spout"

    def __init__(self, w):
        super().__init__(w)
        conf = self.conf
        self.pending = RotatingMap(2, self._expire)
        msp = conf.get("topology.max.spout.pending")
        self.max_pending = int(msp) * len(self.task_ids) if msp else 0
        self._skips = max(1, int(conf["topology.spout.recvq.skips"]))
        self.idle_wait = make_wait_strategy(conf, SPOUT_WAIT, self.queue.wait)
        self._skip = self._skips
        self._last_active = False
        self._last_flush = time.monotonic()
        self._sample_rate = float(conf["topology.stats.sample.rate"])
        # per stream: acked, failed explicitly, timed out; [sampled count, summed seconds]
        self.acked_by: dict[str, int] = {}
        self.failed_by: dict[str, int] = {}
        self.timeouts_by: dict[str, int] = {}
        self.complete_by: dict[str, list] = {}
        # seconds next_tuple was not called, by reason (Storm's spout skip counters, as time)
        self.skipped = dict.fromkeys(SKIP_REASONS, 0.0)
        self._skip_reason: str | None = None
        self._skip_since = 0.0
        # Each task's SpoutAdapter (executor/adapters.py, chosen by executor/adapting.py) answers
        # what the executor asks beyond Storm's spout API; that API is called on its `spout`: a
        # plain spout's own object, so that nothing stands between the executor and next_tuple,
        # ack and fail.
        self._adapters = {t: w.objs[t] for t in self.task_ids}
        self._spouts = {t: a.spout for t, a in self._adapters.items()}
        self._objs = list(self._spouts.values())
        self._debug = bool(conf.get("topology.debug"))
        # Exactly-once checkpoints: stateful spout tasks take checkpoint tuples (executor/checkpoint/).
        # Their tuples are outside every tuple tree (executor/checkpoint/barrier_mode.py).
        self._by_barriers = frozenset(t for t, a in self._adapters.items() if a.takes_barriers)
        self._barriers = SpoutBarriers(self) if self._by_barriers else None
        # The checkpoint spout goes on while the topology is inactive (deactivated, killed or
        # rebalancing with a wait): a stateful bolt acks its inputs only at a commit, so without
        # checkpoints the tuples in flight could never finish during the wait.
        self._runs_inactive = all(a.runs_while_inactive for a in self._adapters.values())
        for adapter in self._adapters.values():
            adapter.bind_status(self.status)
        # No topology.max.spout.pending in acked mode: a bound learned from the complete latency
        # (executor/pending_bound.py); the key, when set, is the bound as in Storm.
        target_ms = conf.get("topology.spout.pending.latency.ms")
        self._bound: Bound | None = None
        if not msp and target_ms and self.outbox.has_ackers and not self._by_barriers:
            self._bound = Bound.start(len(self.task_ids), float(target_ms) / 1000.0)
            self.max_pending = self._bound.limit
        self._period_start = time.monotonic()
        self._period_turns = 0           # emit turns in the period, and those the bound ended
        self._period_at_bound = 0
        self._period_done = 0            # trees acked in the period, and their summed latency
        self._period_latency = 0.0

    # ---- emit path (hot) ----
    def send_spout_msg(self, task, out, values, targets, msg_id) -> list[int]:
        """Storm's SpoutExecutor.sendSpoutMsg: a tracked tree when there is a message id, ackers and
        a subscriber, else untracked (acked at once when it has a message id)."""
        self.emitted += 1
        ob = self.outbox
        if msg_id is not None and task in self._by_barriers:
            ob.emit(task, out, values, targets)  # the checkpoint after it acks it (SpoutBarriers)
            self._barriers.emitted(task, msg_id, out.stream)
        elif msg_id is not None and ob.has_ackers and targets:
            root = ob.emit_tracked(task, out, values, targets)
            self.pending.put_new(root, (task, msg_id, out.stream, values, time.monotonic()))
        else:
            ob.emit(task, out, values, targets)
            if msg_id is not None:  # no ackers, or nobody subscribed: done at emit
                self._ack_msg(task, msg_id, None, out.stream)
        return targets

    def in_flight(self) -> int:
        """Storm's pending tuples, what topology.max.spout.pending bounds: trees not yet acked, and
        an exactly-once spout's tuples no checkpoint barrier has followed yet (SpoutBarriers.ahead)."""
        barriers = self._barriers
        return self.pending.size() + (barriers.ahead if barriers else 0)

    # ---- ack/fail ----
    def _ack_msg(self, task, msg_id, started, stream):
        self.acked += 1
        by = self.acked_by
        by[stream] = by.get(stream, 0) + 1
        if started is not None and self._sample_rate and random.random() < self._sample_rate:
            secs = time.monotonic() - started
            lat = self.complete_by.get(stream)
            if lat is None:
                lat = self.complete_by[stream] = [0, 0.0]
            lat[0] += 1
            lat[1] += secs
        if self._debug:
            log.info("spout %s task %d: acked %r", self.component_id, task, msg_id)
        self._where = "ack"
        self._cur_task = task
        self._spouts[task].ack(msg_id)

    def _fail_msg(self, task, msg_id, stream, timeout=False):
        self.failed += 1
        by = self.timeouts_by if timeout else self.failed_by
        by[stream] = by.get(stream, 0) + 1
        if self._debug:
            log.info("spout %s task %d: failed %r", self.component_id, task, msg_id)
        self._where = "fail"
        self._cur_task = task
        self._spouts[task].fail(msg_id)

    def _expire(self, root, info):
        self._fail_msg(info[0], info[1], info[2], timeout=True)

    def _process(self, batches) -> int:
        n = 0
        pending = self.pending
        timed = self._bound is not None  # the acks' complete latency, for the learned bound
        now = time.monotonic() if timed else 0.0
        for batch in batches:
            n += len(batch)
            if type(batch) is Calls:  # a worker's request run on this thread (a directory savepoint)
                for task, fn in batch:
                    self._cur_task = task
                    fn()
                continue
            for task, p in batch:
                if type(p) is tuple:
                    info = pending.remove(p[1])
                    if info is None:
                        if p[0] == CHECKPOINT_FAILED:  # to the checkpoint spout: roll back
                            self._adapters[task].request_rollback(p[1])
                        elif p[0] == CHECKPOINT_WANTED:  # ... a spout at max spout pending
                            self._adapters[task].request_checkpoint(p[1])
                        continue  # else already timed out (and failed) or unknown
                    if p[0] == SPOUT_ACK:
                        if timed:
                            self._period_done += 1
                            self._period_latency += now - info[4]
                        self._ack_msg(info[0], info[1], info[4], info[2])
                    elif p[0] == SPOUT_FAIL:
                        self._fail_msg(info[0], info[1], info[2])
                elif p.is_tick():
                    pending.rotate()  # system tick every message timeout: expires after T..2T
                elif self._barriers is not None and p.source_stream == CHECKPOINT_STREAM:
                    self._where = "checkpoint"
                    self._cur_task = task
                    self._barriers.on_barrier(task, p)
        return n

    # ---- what the checkpoint steps ask (executor/checkpoint/spout_side.py) ----
    def ack_committed(self, task: int, msg_id, stream: str) -> None:
        """The checkpoint after `msg_id` committed: the spout's ack (no complete latency: the
        tuple was in no tree)."""
        self._ack_msg(task, msg_id, None, stream)

    def count_committed(self, stream: str, n: int) -> None:
        """`n` tuples on `stream` of a spout that keeps no acks are in a committed checkpoint:
        counted as acked (the figures Storm users read), with no call to the spout."""
        self.acked += n
        self.acked_by[stream] = self.acked_by.get(stream, 0) + n

    # ---- lifecycle ----
    def _prepare(self) -> None:
        self._where = "open"
        for task in self.task_ids:
            self._cur_task = task
            log.info("Opening spout %s:%d", self.component_id, task)
            self._spouts[task].open(self.conf, self.w.contexts[task], SpoutOutputCollector(self, task))

    def _set_active(self, active: bool) -> None:
        self._where = "activate" if active else "deactivate"
        for task, obj in zip(self.task_ids, self._objs):
            self._cur_task = task
            (obj.activate if active else obj.deactivate)()
        log.info("%s spout %s", "Activated" if active else "Deactivated", self.name)

    def step(self) -> int:
        """One turn of the spout loop (Storm's SpoutExecutor.java call()): acks and fails from the
        receive queue every `topology.spout.recvq.skips` turns, activation changes, then up to
        `burst` next_tuple calls while they emit, pendingEmits is empty and max pending allows."""
        self.outbox.apply_routes()
        if self._skip_reason is not None:
            self.skipped[self._skip_reason] += time.monotonic() - self._skip_since
            self._skip_reason = None
        received = 0
        if self._skip >= self._skips:
            self._skip = 0
            batches = self.queue.consume()
            if batches:
                received = self._process(batches)
        self._skip += 1
        if not self.status.active and not self._runs_inactive:
            if self._last_active:
                self._last_active = False
                self._set_active(False)
            self._flush()
            self._skip = self._skips
            self._skipping(SKIP_INACTIVE)
            return INACTIVE
        if not self._last_active:
            self._last_active = True
            self._set_active(True)
        pe = self.outbox.pending_emits
        no_emits = True
        if not pe or self.outbox.try_flush_pending():
            max_pending = self.max_pending
            pending = self.pending
            barriers = self._barriers
            objs = self._objs
            self._where = "next_tuple"
            paused = barriers is not None and barriers.behind()  # the checkpoint under way first
            if paused:
                self._skipping(SKIP_BACKPRESSURE)
            else:
                self._period_turns += 1
            for _ in range(0 if paused else self.burst):
                # in_flight(), inline: once per next_tuple while the key is set
                if max_pending and pending.size() + (barriers.ahead if barriers else 0) >= max_pending:
                    if barriers is not None:
                        barriers.want_checkpoint()
                    if no_emits:
                        self._skipping(SKIP_MAX_PENDING)
                    if self._bound is not None:
                        self._at_bound()
                    break
                before = self.emitted
                if len(objs) == 1:
                    objs[0].next_tuple()
                else:
                    for task, obj in zip(self.task_ids, objs):
                        self._cur_task = task
                        obj.next_tuple()
                if before == self.emitted:
                    break
                no_emits = False
                if pe:
                    break
        if received > 1:
            return BUSY
        if pe:
            self._flush()
            self._skip = self._skips
            if no_emits:
                self._skipping(SKIP_BACKPRESSURE)
            return BLOCKED
        now = time.monotonic()
        if no_emits:
            self._flush()
            self._last_flush = now
            self._skip = self._skips
            return IDLE
        if now - self._last_flush >= _FLUSH_INTERVAL:
            self._flush()
            self._last_flush = now
        return BUSY

    def _skipping(self, reason: str) -> None:
        """next_tuple is not called now for this reason: its time counts until the next step."""
        self._skip_reason = reason
        self._skip_since = time.monotonic()

    def _at_bound(self) -> None:
        """An emit turn ended at the learned bound; a period over (looked at every 8th time: the
        clock costs more than the count) is decided and applied."""
        self._period_at_bound += 1
        if self._period_at_bound & 7:
            return
        now = time.monotonic()
        if now - self._period_start < PERIOD_SECS:
            return
        period = Period(secs=now - self._period_start, turns=self._period_turns,
                        turns_at_bound=self._period_at_bound, completed=self._period_done,
                        latency_secs=self._period_latency)
        before = self._bound.limit
        self._bound = decide(self._bound, period)
        self.max_pending = self._bound.limit
        if self._bound.limit != before:
            log.debug("spout %s: %d tuple trees in flight at most (was %d; %s)", self.component_id,
                      self.max_pending, before, period)
        self._period_start = now
        self._period_turns = self._period_at_bound = self._period_done = 0
        self._period_latency = 0.0

    def _shutdown_components(self) -> None:
        for task in self.task_ids:
            try:
                self._spouts[task].close()
            except Exception:
                log.exception("spout %s task %d: close() raised", self.component_id, task)

    def counters(self) -> dict[str, float]:
        out = super().counters()
        for metric, by in ((ACKED, self.acked_by), (FAILED, self.failed_by), (TIMEOUTS, self.timeouts_by)):
            for stream, n in list(by.items()):
                out[f"{metric}|{stream}"] = n
        for stream, n in list(self.timeouts_by.items()):  # a timeout is a fail too, as in Storm
            out[f"{FAILED}|{stream}"] = out.get(f"{FAILED}|{stream}", 0) + n
        for stream, (n, secs) in list(self.complete_by.items()):
            out[f"{COMPLETE_N}|{stream}"] = n
            out[f"{COMPLETE_MS}|{stream}"] = secs * 1000.0
        skipped = dict(self.skipped)
        if self._skip_reason is not None:
            skipped[self._skip_reason] += time.monotonic() - self._skip_since
        for reason, secs in skipped.items():
            if secs:
                out[f"{SKIPPED_MS}|{reason}"] = secs * 1000.0
        return out

    def checkpoint_mark(self) -> CheckpointMark | None:
        """A stateful spout's quiet mark and the checkpoint spout's commits (read on the heartbeat
        thread: plain reads)."""
        fields: dict = {}
        for adapter in self._adapters.values():
            fields.update(adapter.checkpoint_mark() or {})
        if self._barriers is not None:
            fields["quiet_since_txid"] = self._barriers.quiet_since
        return CheckpointMark(**fields) if fields or self._barriers is not None else None

    @property
    def spout_active(self) -> bool:
        """Whether next_tuple is being called (the topology active, as this executor last saw it)."""
        return self._last_active

    def gauges(self) -> dict:
        g = super().gauges()
        g["pending"] = self.in_flight()
        g["active"] = self._last_active
        extra: dict = {}
        for adapter in self._adapters.values():  # the checkpoint spout's commits (one task: no sums)
            extra.update(adapter.gauges())
        if self._barriers is not None:
            extra[QUIET_SINCE] = self._barriers.quiet_since
        if self._bound is not None:
            extra[PENDING_BOUND] = self.max_pending
        if extra:
            g["extra"] = extra
        return g
