"""A stateful bolt's side of the checkpoint protocol (Storm's StatefulBoltExecutor.java).

Its state is opened at prepare (the last committed one) and handed to `init_state` on
INITSTATE; tuples that arrive before then wait. Acks are held: PREPARE takes the acks given
since the last PREPARE into the transaction, COMMIT makes the state durable and only then acks
them, ROLLBACK returns the state to the last commit and fails them (their spouts replay them).
A provider that is away (Redis down) fails the checkpoint tuple and reports why; the checkpoint
spout then recovers, retrying until it is back, and no committed update is lost.
"""

from __future__ import annotations

import logging

from executor.checkpoint.api import BaseStatefulBolt
from executor.checkpoint.forwarder import CheckpointHandler
from executor.checkpoint.opener import StateOpener
from executor.checkpoint.protocol import (
    COMMIT,
    INITSTATE,
    PREPARE,
    RESET,
    ROLLBACK,
    call_hook,
    check_commit,
    check_restore,
    state_namespace,
)
from executor.errors import EmitError
from executor.state.errors import StateUnavailableError
from executor.tuple import DEFAULT_STREAM
from executor.windowing.adapter import WindowedBoltAdapter

log = logging.getLogger(__name__)


class AckTrackingCollector:
    """The collector a stateful bolt sees: acks are held for the checkpoint, emits must be anchored
    (an unanchored emit would escape the transaction: Storm refuses it too)."""

    __slots__ = ("_delegate", "acked", "_name", "ack", "allow_unanchored", "_hold")

    def __init__(self, delegate, name: str, hold_acks: bool = True):
        self._delegate = delegate
        self.acked: list = []
        self._name = name
        # Kept as they come; they wait for the commit, or, exactly-once, where acks only end tuple
        # trees (a failure rolls everything back, nothing is replayed per tree), they go with
        # each batch, counted at once (flush_acks).
        self.ack = self.acked.append
        self._hold = hold_acks
        # A persistent window emits unanchored: its tuples are acked once they are in the state
        # (Storm's PersistentWindowedBoltExecutor).
        self.allow_unanchored = False

    def emit(self, values, anchors=None, stream: str = DEFAULT_STREAM):
        if self.allow_unanchored:
            return self._delegate.emit(values, anchors, stream)
        if anchors is None or (type(anchors) in (list, tuple) and not anchors):
            raise EmitError(f"stateful bolt {self._name}: emits must be anchored to input tuples "
                            f"(emit(values, anchors=tup)); stream {stream!r}")
        return self._delegate.emit(values, anchors, stream)

    def emit_direct(self, task: int, values, anchors=None, stream: str = DEFAULT_STREAM):
        if self.allow_unanchored:
            return self._delegate.emit_direct(task, values, anchors, stream)
        if anchors is None or (type(anchors) in (list, tuple) and not anchors):
            raise EmitError(f"stateful bolt {self._name}: emits must be anchored to input tuples; "
                            f"stream {stream!r}")
        return self._delegate.emit_direct(task, values, anchors, stream)

    def fail(self, tup) -> None:
        self._delegate.fail(tup)

    def report_error(self, exc: BaseException) -> None:
        self._delegate.report_error(exc)

    def call_soon(self, fn) -> None:
        self._delegate.call_soon(fn)

    def flush_acks(self) -> None:
        """Exactly-once: pass on the acks so far, counted in one go (a no-op when they are held)."""
        acked = self.acked
        if acked and not self._hold:
            self._delegate.ack_counted(acked)
            acked.clear()  # the same list: `ack` is its bound append

    def take_acked(self) -> list:
        out = self.acked[:]
        self.acked.clear()  # the same list: `ack` is its bound append
        return out


class WindowOnlyHooks(BaseStatefulBolt):
    """The state hooks of a windowed bolt without state of its own in an exactly-once topology:
    its window is all its checkpoints hold (adapting.adapt_bolt); Storm's pre_* hooks stay the
    base class's no-ops."""

    def init_state(self, state) -> None:
        pass


class StatefulBoltAdapter(CheckpointHandler):
    """`hooks`: what init_state and Storm's pre_* hooks are called on (default: the user's bolt)."""

    def __init__(self, user, inner=None, hooks=None, losses=None):
        super().__init__(user if inner is None else inner, losses)
        self.user = user
        self._hooks = user if hooks is None else hooks
        self.state = None
        self._opener: StateOpener | None = None
        self._initialized = False
        self._waiting: list = []        # tuples that came before INITSTATE
        self._prepared: list = []       # held acks of the transaction being prepared
        self._tracking: AckTrackingCollector | None = None
        # a stateful windowed bolt: in exactly-once mode its window is checkpointed with the state
        self._window = inner if isinstance(inner, WindowedBoltAdapter) else None

    def _window_checkpointed(self) -> bool:
        """Whether a stateful windowed bolt's window goes into its checkpoints: in exactly-once
        mode (a rollback restores it with the state) or when it is persistent."""
        return self._window is not None and (self.exactly_once or self._window.persistent)

    def _where(self) -> str:
        return f"stateful bolt {self._name()}"

    def prepare_inner(self, conf, context, collector) -> None:
        self._opener = StateOpener(conf, state_namespace(conf, context), collector.report_error)
        self._tracking = AckTrackingCollector(collector, f"{context.this_component_id!r} task {context.this_task_id}",
                                              hold_acks=not self.exactly_once)
        self._inner.prepare(conf, context, self._tracking)
        self._tracking.allow_unanchored = self._window is not None and self._window.persistent
        self._open_state()

    def savepoint_state(self):
        """The state a directory savepoint copies (executor/worker.py write_savepoint), or None."""
        return self.state

    def _open_state(self) -> bool:
        """The last committed state; an unreachable provider is reported and tried again at the
        next checkpoint action (the spout keeps recovering until every bolt has its state)."""
        self.state = self._opener.open()
        return self.state is not None

    # ---- data ----
    def handle_data(self, batch) -> None:
        if not self._initialized:
            self._waiting.extend(batch)
            return
        execute = self._inner.execute
        for _task, tup in batch:
            try:
                execute(tup)
            except StateUnavailableError as exc:
                # A read the state had to make while its provider is away (Redis down): the tuple
                # fails and comes back (or, exactly-once, the topology rolls back); the executor
                # lives on, and the error says which provider.
                self._collector.fail(tup)
                self._collector.report_error(exc)
        self._tracking.flush_acks()

    # ---- checkpoints ----
    def handle_checkpoint(self, tup, action: str, txid: int) -> bool:
        self._tracking.flush_acks()  # exactly-once: what was acked before the barrier (INITSTATE's waiting)
        user = self._hooks
        if action == PREPARE:
            if not self._initialized:
                return False  # a restarted task before its INITSTATE: make the spout recover
            call_hook(self._where(), "pre_prepare", user.pre_prepare, txid)
            if self._window_checkpointed():
                self._window.save_to(self.state)
            self.state.prepare_commit(txid)
            self._prepared.extend(self._tracking.take_acked())
        elif action == COMMIT:
            if not self._open_state():
                return False
            if self.exactly_once:
                check_commit(self._where(), self.state, txid)
            call_hook(self._where(), "pre_commit", user.pre_commit, txid)
            self.state.commit(txid)
            ack = self._collector.ack
            for t in self._prepared:
                ack(t)
            self._prepared = []
        elif action == ROLLBACK:
            if not self._open_state():
                return False
            plan = check_restore(self._where(), self.state, txid - 1) if self.exactly_once else None
            call_hook(self._where(), "pre_rollback", user.pre_rollback)
            self.state.rollback()
            if plan == RESET:
                self.state.reset()
            if self._window_checkpointed():
                self._window.restore_from(self.state)
            if self.exactly_once:
                # What came before the rollback (it waited for INITSTATE) is rolled back with it:
                # the spouts rewind and send it again.
                self._waiting = []
            else:
                fail = self._collector.fail
                for t in self._prepared + self._tracking.take_acked():
                    fail(t)
            self._prepared = []
        elif action == INITSTATE:
            if not self._initialized:
                if not self._open_state():
                    return False
                if self._window_checkpointed():
                    self._window.restore_from(self.state)
                call_hook(self._where(), "init_state", user.init_state, self.state)
                self._initialized = True
                waiting, self._waiting = self._waiting, []
                if waiting:
                    super().handle_data(waiting)
        return True
