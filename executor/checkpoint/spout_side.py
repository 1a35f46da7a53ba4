"""A stateful spout's side of exactly-once checkpoints (beyond Storm; Flink's sources on Storm's
checkpoint stream). The checkpoint spout sends each transaction step to every stateful spout
task as a tuple of its tree; the spout acts on its own state and passes the step on, in line
with its data, on its `$checkpoint` stream, so that every bolt can tell the tuples sent before
the checkpoint from those sent after. A PREPARE is acked only once every tuple tree the spout
had in flight at that moment completed: a checkpoint then never commits while a tuple sent
before it might still be lost (a failure instead rolls everything back to the last commit)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from executor.adapters import SpoutAdapter
from executor.checkpoint.opener import StateOpener
from executor.checkpoint.protocol import (
    CHECKPOINT_COMPONENT,
    CHECKPOINT_STREAM,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
    state_namespace,
)
from executor.serialization import ACKER_FAIL, CHECKPOINT_FAILED
from executor.tuple import Tuple

log = logging.getLogger(__name__)


class StatefulSpoutAdapter(SpoutAdapter):
    """Runs a BaseStatefulSpout: nothing is emitted before its state is initialised."""

    takes_barriers = True

    def __init__(self, user):
        self.user = user
        self.state = None
        self.initialized = False
        self._opener: StateOpener | None = None

    def open(self, conf, context, collector) -> None:
        self._opener = StateOpener(conf, state_namespace(conf, context), collector.report_error)
        self.user.open(conf, context, collector)
        self._open_state()

    def _open_state(self) -> bool:
        self.state = self._opener.open()
        return self.state is not None

    def next_tuple(self) -> None:
        if self.initialized:
            self.user.next_tuple()

    def ack(self, msg_id) -> None:
        self.user.ack(msg_id)

    def fail(self, msg_id) -> None:
        pass  # the checkpoint spout rolls everything back (SpoutBarriers.failed)

    def activate(self) -> None:
        self.user.activate()

    def deactivate(self) -> None:
        self.user.deactivate()

    def close(self) -> None:
        self.user.close()

    def handle_checkpoint(self, action: str, txid: int) -> bool:
        """SpoutAdapter.handle_checkpoint: the spout's state for a transaction step; False: not
        now (the step fails)."""
        if action == PREPARE:
            if not self.initialized:
                return False
            self.state.prepare_commit(txid)
        elif action == COMMIT:
            if not self._open_state():
                return False
            self.state.commit(txid)
        elif action == ROLLBACK:
            if not self._open_state():
                return False
            self.state.rollback()
            if self.initialized:
                self.user.init_state(self.state)  # rewind to the committed position
        elif action == INITSTATE:
            if not self.initialized:
                if not self._open_state():
                    return False
                self.user.init_state(self.state)
                self.initialized = True
        return True


@dataclass
class _HeldPrepare:
    task: int
    tup: Tuple
    value: int                       # the ack the acker gets once `waiting` is empty
    waiting: set = field(default_factory=set)


class SpoutBarriers:
    """The spout executor's part (executor/spout.py calls it): checkpoint tuples in, the step
    passed on anchored, PREPARE acks held for the trees in flight, failures reported. It asks
    the executor (its adapters, its trees in flight) and the outbox (every emit, counted)."""

    def __init__(self, ex):
        self.ex = ex
        self.held: list[_HeldPrepare] = []
        tasks = ex.w.contexts[ex.task_ids[0]].component_tasks(CHECKPOINT_COMPONENT)
        self._coordinator = tasks[0] if tasks else None

    def on_barrier(self, task: int, tup: Tuple) -> None:
        ex = self.ex
        txid, action = tup.values
        try:
            done = ex.w.objs[task].handle_checkpoint(action, txid)
        except Exception as exc:
            log.error("spout %s task %d: checkpoint %s of txid %d failed: %s", ex.component_id, task, action,
                      txid, exc)
            ex.report_error(task, exc)
            done = False
        if not done:
            self._fail(tup)
            return
        if action == ROLLBACK:
            self._drop_in_flight(task)
        value = self._pass_on(task, tup)
        if action == PREPARE:
            waiting = ex.roots_in_flight(task)
            if waiting:
                self.held.append(_HeldPrepare(task, tup, value, waiting))
                return
        self._ack(tup, value)

    def _pass_on(self, task: int, tup: Tuple) -> int:
        """Emit the step on this task's `$checkpoint` stream anchored to `tup`; the value its ack
        carries (its edge XOR the new edges)."""
        ex = self.ex
        out = ex.w.routes[task][CHECKPOINT_STREAM]
        values = list(tup.values)
        (root, edge), = tup.anchors_to_ids.items()
        return edge ^ ex.outbox.emit_rooted(task, out, values, out.targets(values), root)

    def _ack(self, tup: Tuple, value: int) -> None:
        outbox = self.ex.outbox
        for root in tup.anchors_to_ids:
            outbox.ack_value(root, value)

    def _fail(self, tup: Tuple) -> None:
        outbox = self.ex.outbox
        for root in tup.anchors_to_ids or ():
            outbox.to_acker(root, (ACKER_FAIL, root))

    def _drop_in_flight(self, task: int) -> None:
        """A rollback: this task's trees in flight are of the rolled-back past (their acks and
        fails no longer matter), and so are the PREPAREs still held for them."""
        self.ex.forget_in_flight(task)
        self.held = [h for h in self.held if h.task != task]

    def acked(self, root: int) -> None:
        if not self.held:
            return
        still = []
        for h in self.held:
            h.waiting.discard(root)
            if h.waiting:
                still.append(h)
            else:
                self._ack(h.tup, h.value)
        self.held = still

    def failed(self, task: int, root: int) -> None:
        """A tree of this spout failed or timed out: the held PREPAREs that waited for it fail
        (the checkpoint must not commit), and the checkpoint spout is told to roll back."""
        still = []
        for h in self.held:
            if root in h.waiting:
                self._fail(h.tup)
            else:
                still.append(h)
        self.held = still
        if self._coordinator is not None:
            self.ex.outbox.send(self._coordinator, (CHECKPOINT_FAILED, task))
