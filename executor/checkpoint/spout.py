"""The `$checkpointspout` system spout (Storm's CheckpointSpout.java): one task that drives the
whole topology through PREPARE / COMMIT every `topology.state.checkpoint.interval.ms` (sooner
when a stateful spout at `topology.max.spout.pending` asks: exactly-once mode), and through
ROLLBACK / INITSTATE after a failure or at start. Each action is one tuple tree on the
`$checkpoint` stream (message id: the txid); the next action waits until it is acked."""

from __future__ import annotations

import logging
import time
from collections import deque

from executor.adapters import SpoutAdapter
from executor.checkpoint.opener import StateOpener
from executor.checkpoint.protocol import (
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    COMMITTED,
    COMMITTED_AT_KEY,
    COMMITTING,
    INITIAL,
    PREPARING,
    STATE_LOST,
    TX_RECORD_KEY,
    TxState,
    last_committed_of,
    state_namespace,
)
from executor.checkpoint.sealing import sealed
from executor.components import Spout

log = logging.getLogger(__name__)

_MIN_INTERVAL_MS = 100       # as Storm: a shorter interval is raised to this
# After a step failed (a hook that raises, a provider away), the next waits, doubling up to the
# cap: a step failing every time must not flood the topology with checkpoint tuples.
_RETRY_FIRST_SECS = 0.1
_RETRY_MAX_SECS = 5.0


class CheckpointSpout(SpoutAdapter, Spout):
    # Checkpoints go on while the topology is inactive (executor/spout.py), unlike Storm's
    # CheckpointSpout: the stateful bolts' inputs in flight at a deactivate, a kill or a
    # rebalance are acked at the next commit, and the wait is for them to finish.
    runs_while_inactive = True

    def __init__(self):
        self._collector = None
        self._namespace = ""
        self._state = None
        self._tx: TxState = INITIAL
        self._interval = 1.0
        self._last_checkpoint = 0.0
        self._recovering = True
        self._in_progress = False
        self._opener: StateOpener | None = None
        self._save_seq = 0
        # exactly-once: the stateful spouts' tasks carry each step to the bolts; any failure
        # rolls the whole topology back (always first thing in a recovery)
        self._exactly_once = False
        self._spout_tasks: list[int] = []
        self._rolled_back = False
        self._rollback_requested = False
        self._checkpoint_wanted = False                # a stateful spout at max spout pending asked
        self._reset_requested = False                  # a task's committed state is gone (STATE_LOST)
        self._retry_secs = 0.0                         # the back-off after failed steps (0: none)
        self._retry_at = 0.0
        # What "every task afresh" goes back to: nothing, or the savepoint the topology started
        # from (the memory provider's start directory: executor/state/memory.py)
        self._start_tx: TxState = INITIAL
        self._status = None                            # the worker's TopologyStatus (bind_status): park
        # what the UI and metrics show (executor/checkpoint/stats.py reads them)
        self.last_committed_txid: int | None = None
        self.last_committed_at: float | None = None   # time.time()
        self.commits = 0                               # checkpoints committed by this spout
        self.commit_secs = 0.0                         # their summed latency (PREPARE sent -> COMMIT acked)
        self.commit_secs_max = 0.0
        self.recent_commit_secs: deque[float] = deque(maxlen=1000)  # for percentiles (bench/state.py)
        self.rollbacks = 0

    def declare_output_fields(self, declarer) -> None:
        declarer.declare_stream(CHECKPOINT_STREAM, list(CHECKPOINT_FIELDS))

    def open(self, conf, context, collector) -> None:
        self._collector = collector
        self._namespace = state_namespace(conf, context)
        self._opener = StateOpener(conf, self._namespace, self._report)
        self._interval = max(_MIN_INTERVAL_MS, int(conf.get("topology.state.checkpoint.interval.ms") or 1000)) / 1000
        self._recovering = True
        self._in_progress = False
        self._exactly_once = bool(conf.get("topology.state.exactly.once"))
        structure = context.topology.structure
        self._spout_tasks = sorted(t for cid, comp in structure.spouts.items()
                                   if comp.conf.get("topology.spouts.stateful")
                                   for t in context.component_tasks(cid))
        self._try_open()

    def _try_open(self) -> bool:
        """Open the spout's own state (its transaction record); an unreachable provider is
        reported and tried again later instead of failing the spout."""
        if self._state is not None:
            return True
        state = self._opener.open()
        if state is None:
            return False
        try:
            if state.prepared_txid() is not None:
                state.rollback()  # a save cut short: its record was never the spout's
            raw = state.get(TX_RECORD_KEY)
            tx = INITIAL if raw is None else TxState.from_wire(raw)
        except Exception as exc:
            self._report(exc)
            self._opener.state = None  # opened again, a second later
            return False
        self._state, self._tx = state, tx
        start = getattr(state, "start_txid", None)
        self._start_tx = INITIAL if start is None else TxState(start, COMMITTED)
        if raw is None:
            self._save(INITIAL)
        committed = last_committed_of(tx)
        if committed is not None:
            self.last_committed_txid = committed
            at = state.get(COMMITTED_AT_KEY)
            self.last_committed_at = float(at) if isinstance(at, (int, float)) else None
        log.info("checkpoint spout %s: starting from %s", self._namespace, tx)
        return True

    def savepoint_state(self):
        """Its record, for a directory savepoint (executor/worker.py write_savepoint), or None."""
        return self._state

    def bind_status(self, status) -> None:
        self._status = status

    @property
    def parked(self) -> bool:
        """Asked to park (a stopping topology) with nothing in progress: no checkpoint starts."""
        status = self._status
        return (status is not None and status.park and not self._in_progress and not self._recovering
                and self._tx.state == COMMITTED)

    def checkpoint_mark(self) -> dict:
        """SpoutAdapter.checkpoint_mark: the last commit (as its state records it) and whether it
        is parked."""
        return {"committed_txid": self.last_committed_txid, "committed_secs": self.last_committed_at,
                "parked": self.parked}

    def next_tuple(self) -> None:
        if self._in_progress or (self._retry_secs and time.monotonic() < self._retry_at) or not self._try_open():
            return
        if self._recovering:
            if self._reset_requested:
                # Start every task's state afresh: the ROLLBACK to "nothing committed" that
                # follows resets each (protocol.restore_plan), spouts from their beginning.
                if not self._save(self._start_tx):
                    return
                log.warning("checkpoint spout %s: a task's committed state is gone (the state provider keeps "
                            "nothing); every task of the topology starts its state afresh", self._namespace)
                self._reset_requested = False
                self._rolled_back = False
                self.last_committed_txid = None if self._start_tx is INITIAL else self._start_tx.txid
            if self._exactly_once and not self._rolled_back and self._tx.state == COMMITTED:
                # Roll back whatever was done since the last commit, not only a prepare.
                if not self._save(TxState(self._tx.txid + 1, PREPARING)):
                    return
            self._emit(self._tx.txid, self._tx.next_action(True))
        elif (self._tx.state != COMMITTED or self._checkpoint_wanted
              or time.monotonic() - self._last_checkpoint >= self._interval):
            if self._tx.state == COMMITTED:
                if self._status is not None and self._status.park:
                    return  # a stop: the checkpoint behind the spouts' last tuples committed
                if not self._save(self._tx.next_state(False)):
                    return
                self._last_checkpoint = time.monotonic()
                self._checkpoint_wanted = False
            self._emit(self._tx.txid, self._tx.next_action(False))

    def _emit(self, txid: int, action: str) -> None:
        log.debug("checkpoint spout: %s, emitting txid %d %s", self._tx, txid, action)
        self._in_progress = True
        with sealed(self._collector):
            if self._exactly_once:
                self._collector.emit_to_tasks(self._spout_tasks, [txid, action], CHECKPOINT_STREAM, txid)
            else:
                self._collector.emit([txid, action], stream=CHECKPOINT_STREAM, msg_id=txid)

    def gauges(self) -> dict:
        """SpoutAdapter.gauges: what the UI and /metrics show of the checkpoints (read on the
        heartbeat thread: plain reads of numbers)."""
        commits = self.commits
        return {"last_committed_txid": self.last_committed_txid, "last_committed_at": self.last_committed_at,
                "commits": commits, "commit_latency_ms": (self.commit_secs / commits * 1000.0) if commits else None,
                "commit_latency_max_ms": self.commit_secs_max * 1000.0, "rollbacks": self.rollbacks,
                "recovering": 1 if self._recovering else 0}

    def request_rollback(self, spout_task: int) -> None:
        """SpoutAdapter.request_rollback (exactly-once): a tuple tree of a stateful spout failed;
        roll everything back once the step under way (if any) is over. STATE_LOST: a task's
        committed state is gone, and the rollback goes to nothing committed."""
        if spout_task == STATE_LOST:
            self._reset_requested = True
        elif not self._rollback_requested:
            log.info("checkpoint spout %s: a tuple of task %d failed; rolling the topology back to txid %d",
                     self._namespace, spout_task, self._tx.txid if self._tx.state == COMMITTED else self._tx.txid - 1)
        self._rollback_requested = True
        if not self._in_progress:
            self._start_recovery()

    def request_checkpoint(self, spout_task: int) -> None:
        """SpoutAdapter.request_checkpoint (exactly-once): a stateful spout task is at
        topology.max.spout.pending; the next checkpoint starts as soon as none is under way,
        without waiting for the interval."""
        self._checkpoint_wanted = True

    def _start_recovery(self) -> None:
        self._rollback_requested = False
        self._recovering = True
        self._rolled_back = False  # exactly-once: every recovery rolls back again

    def _failed_step(self) -> None:
        self._retry_secs = min(_RETRY_MAX_SECS, self._retry_secs * 2 if self._retry_secs else _RETRY_FIRST_SECS)
        self._retry_at = time.monotonic() + self._retry_secs

    def ack(self, msg_id) -> None:
        self._in_progress = False
        self._retry_secs = 0.0
        if msg_id != self._tx.txid:
            log.warning("checkpoint spout: ack of txid %r while at %s", msg_id, self._tx)
            return
        nxt = self._tx.next_state(self._recovering)
        if self._recovering and nxt == self._tx:
            log.info("checkpoint spout %s: recovery complete at %s", self._namespace, self._tx)
            self._recovering = False
            if self._rollback_requested:
                self._start_recovery()
            return
        before = self._tx
        if self._recovering and before.state == PREPARING:  # a ROLLBACK went through
            self._rolled_back = True
            self.rollbacks += 1
        committing = before.state == COMMITTING
        now = time.time()
        if self._save(nxt, committed_at=now if committing else None) and committing:
            self.last_committed_txid = before.txid
            self.last_committed_at = now
            if not self._recovering and self._last_checkpoint:
                secs = time.monotonic() - self._last_checkpoint
                self.commits += 1
                self.commit_secs += secs
                self.commit_secs_max = max(self.commit_secs_max, secs)
                self.recent_commit_secs.append(secs)
        if self._rollback_requested and not self._recovering:
            self._start_recovery()

    def fail(self, msg_id) -> None:
        self._in_progress = False
        self._failed_step()
        if not self._recovering:
            log.info("checkpoint spout %s: txid %r failed at %s; recovering", self._namespace, msg_id, self._tx)
        else:  # with the back-off, at most one line per retry (the stall diagnosis points here)
            log.info("checkpoint spout %s: recovery step of txid %r failed at %s; tried again in %.1f s",
                     self._namespace, msg_id, self._tx, self._retry_secs)
        self._start_recovery()

    def _save(self, tx: TxState, committed_at: float | None = None) -> bool:
        """Record the transaction state durably before acting on it (with the time of a commit
        it completes: a restarted spout reports the topology's last commit, not its own start);
        if the provider is away the spout recovers (and so retries) once it is back."""
        try:
            self._state.put(TX_RECORD_KEY, tx.to_wire())
            if committed_at is not None:
                self._state.put(COMMITTED_AT_KEY, committed_at)
            # its own sequence for the provider's txid: rises across restarts, unlike the txid
            self._save_seq = max(self._save_seq + 1, time.time_ns())
            self._state.prepare_commit(self._save_seq)
            self._state.commit(self._save_seq)
        except Exception as exc:
            self._report(exc)
            try:
                self._state.rollback()
            except Exception:
                pass
            self._recovering = True
            self._failed_step()
            return False
        self._tx = tx
        return True

    def _report(self, exc: BaseException) -> None:
        log.warning("checkpoint spout %s: %s", self._namespace, exc)
        if self._collector is not None:
            self._collector.report_error(exc)
