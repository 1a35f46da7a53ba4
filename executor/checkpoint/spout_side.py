"""A stateful spout's side of exactly-once checkpoints (beyond Storm; Flink's sources on Storm's
checkpoint stream). The checkpoint spout sends each transaction step to every stateful spout
task as a tuple of its tree; the spout acts on its own state and passes the step on, in line
with its data, on its `$checkpoint` stream, so that every bolt can tell the tuples sent before
the checkpoint from those sent after. Its data tuples are outside every tuple tree
(executor/checkpoint/barrier_mode.py)."""

from __future__ import annotations

import logging
import time

from executor.adapters import SpoutAdapter
from executor.checkpoint.barrier_mode import RollbackAsker, coordinator_task, pause_after_secs
from executor.checkpoint.opener import StateOpener
from executor.checkpoint.protocol import (
    CHECKPOINT_STREAM,
    COMMIT,
    INITSTATE,
    PREPARE,
    RESET,
    ROLLBACK,
    StateLostError,
    call_hook,
    check_commit,
    check_restore,
    state_namespace,
)
from executor.checkpoint.sealing import sealed
from executor.components import Spout
from executor.serialization import ACKER_FAIL, CHECKPOINT_WANTED
from executor.tuple import Tuple

log = logging.getLogger(__name__)


class StatefulSpoutAdapter(SpoutAdapter):
    """Runs a BaseStatefulSpout (or a RewindableSpout in exactly-once mode): nothing is emitted
    before its state is initialised."""

    takes_barriers = True

    def __init__(self, user):
        self.user = user
        self.state = None
        self.initialized = False
        self._opener: StateOpener | None = None
        self._where = f"stateful spout {type(user).__name__}"  # named by its task once opened

    def open(self, conf, context, collector) -> None:
        self._where = f"stateful spout {context.this_component_id}:{context.this_task_id}"
        self._opener = StateOpener(conf, state_namespace(conf, context), collector.report_error)
        self.user.open(conf, context, collector)
        self.ack = self.user.ack  # per tuple: the executor calls the spout's own (as opened) directly
        self._open_state()

    def _open_state(self) -> bool:
        self.state = self._opener.open()
        return self.state is not None

    def savepoint_state(self):
        """The state a directory savepoint copies (executor/worker.py write_savepoint), or None."""
        return self.state

    def next_tuple(self) -> None:
        if self.initialized:
            self.user.next_tuple()

    def ack(self, msg_id) -> None:
        self.user.ack(msg_id)

    def fail(self, msg_id) -> None:
        pass  # never called: its tuples are outside every tree (executor/checkpoint/barrier_mode.py)

    def wants_acks(self) -> bool:
        """Whether the spout acts on acks (a Redis stream's XACK): one that keeps the base class's
        no-op is not told, and nothing is kept for it."""
        return type(self.user).ack is not Spout.ack

    def activate(self) -> None:
        self.user.activate()

    def deactivate(self) -> None:
        self.user.deactivate()

    def close(self) -> None:
        self.user.close()

    def handle_checkpoint(self, action: str, txid: int) -> bool:
        """SpoutAdapter.handle_checkpoint: the spout's state for a transaction step; False: not
        now (the step fails)."""
        user, where = self.user, self._where
        if action == PREPARE:
            if not self.initialized:
                return False
            call_hook(where, "pre_prepare", user.pre_prepare, txid)
            self.state.prepare_commit(txid)
        elif action == COMMIT:
            if not self._open_state():
                return False
            check_commit(where, self.state, txid)
            call_hook(where, "pre_commit", user.pre_commit, txid)
            self.state.commit(txid)
        elif action == ROLLBACK:
            if not self._open_state():
                return False
            plan = check_restore(where, self.state, txid - 1)
            if self.initialized:
                call_hook(where, "pre_rollback", user.pre_rollback)
            self.state.rollback()
            if plan == RESET:  # from its beginning, as every task of the topology
                self.state.reset()
            if self.initialized:  # rewind to the committed position
                call_hook(self._where, "init_state", self.user.init_state, self.state)
        elif action == INITSTATE:
            if not self.initialized:
                if not self._open_state():
                    return False
                call_hook(self._where, "init_state", self.user.init_state, self.state)
                self.initialized = True
                self.next_tuple = self.user.next_tuple  # from now on, without this adapter's frame
        return True


class SpoutBarriers:
    """The spout executor's part (executor/spout.py calls it): checkpoint tuples in, the step
    passed on anchored, and the spout's own acks. Its tuples are outside every tuple tree
    (executor/checkpoint/barrier_mode.py): a PREPARE is acked as soon as the spout's state is
    prepared and the step passed on behind the tuples sent before it, and the spout's `ack(msg_id)`
    comes for each tuple once the checkpoint after it commits (a Redis stream's XACK, a file
    marked done), never before; a rollback drops them (the spout rewinds to its committed
    position and sends them again). It asks the executor (its adapters, its routes) and the
    outbox (every emit, counted)."""

    def __init__(self, ex):
        self.ex = ex
        # Per task, what it emitted with message ids since its last PREPARE: (msg_id, stream)
        # pairs for a spout that wants its acks, a count per stream for one that keeps the base
        # class's no-op (its UI and status still count tuples committed as acked, as a Storm
        # user reads "acked": done). And per task, [(txid, those)] prepared and not committed.
        self._wants = frozenset(t for t in ex.task_ids if ex.w.objs[t].wants_acks())
        self._since: dict[int, list | dict] = {t: self._empty(t) for t in ex.task_ids}
        self._prepared: dict[int, list] = {}
        # Tuples emitted and not yet in a committed checkpoint (a stateful bolt acks its inputs at
        # a commit), and of those the ones no PREPARE has followed yet: what
        # topology.max.spout.pending bounds in this mode (executor/spout.py). A spout at the bound
        # asks for the next checkpoint at once (want_checkpoint): it runs N tuples ahead of the
        # checkpoint under way, not N per interval, and a rollback re-sends at most 2N (one
        # checkpoint is under way at a time).
        self.uncommitted = 0
        self.ahead = 0
        self._asked = False      # asked for a checkpoint since the last step it passed on
        # Exactly-once: when the checkpoint this executor passed a PREPARE of was first passed on
        # (monotonic secs; None once it commits or rolls back). Past `_pause_after` the spout
        # emits nothing (behind()): what aligning bolts hold and what waits in the queues ahead of
        # a barrier stay bounded, as Flink's per-channel credits bound them (the links here carry
        # many tasks' tuples, so a bolt cannot refuse one input alone).
        self._pause_after = pause_after_secs(ex.conf)
        self._preparing: tuple[int, float] | None = None
        # The first PREPARE this executor passed on while deactivated (None while active): every
        # tuple it sent is ahead of that barrier, so once that checkpoint commits the topology's
        # state holds all of it and later checkpoints hold nothing new. `storm-py swap` waits for
        # this (executor/savepoints/): the spouts stopped at a barrier, Flink's stop-with-savepoint.
        self.quiet_since: int | None = None

    def _empty(self, task: int) -> list | dict:
        return [] if task in self._wants else {}

    def emitted(self, task: int, msg_id, stream: str) -> None:
        """A tuple with a message id left `task` (outside every tuple tree)."""
        self.uncommitted += 1
        self.ahead += 1
        since = self._since.get(task)
        if type(since) is list:
            since.append((msg_id, stream))
        elif since is not None:
            since[stream] = since.get(stream, 0) + 1

    def on_barrier(self, task: int, tup: Tuple) -> None:
        ex = self.ex
        txid, action = tup.values
        try:
            done = ex.w.objs[task].handle_checkpoint(action, txid)
        except StateLostError as exc:
            log.warning("spout %s task %d: checkpoint %s of txid %d failed: %s", ex.component_id, task, action,
                        txid, exc)
            self._ask_reset(task)
            done = False
        except Exception as exc:
            log.error("spout %s task %d: checkpoint %s of txid %d failed: %s", ex.component_id, task, action,
                      txid, exc)
            ex.report_error(task, exc)
            done = False
        if not done:
            self._fail(tup)
            return
        if action == PREPARE:
            if not self.ex.spout_active:
                if self.quiet_since is None:
                    self.quiet_since = txid
            else:
                self.quiet_since = None
            self._asked = False
            since = self._since.get(task)
            if since:
                self.ahead -= _size(since)
                self._prepared.setdefault(task, []).append((txid, since))
                self._since[task] = self._empty(task)
            if self._preparing is None:
                self._preparing = (txid, time.monotonic())
        elif action == COMMIT:
            self._ack_committed(task, txid)
            if self._preparing is not None and txid >= self._preparing[0]:
                self._preparing = None
        else:
            self._preparing = None  # a ROLLBACK or INITSTATE: the spout starts again from there
            self._asked = False
        if action == ROLLBACK:
            # what was emitted since the last commit belongs to the rolled-back past
            if task in self._since:
                size = _size(self._since[task])
                self.uncommitted -= size
                self.ahead -= size
                self._since[task] = self._empty(task)
            self.uncommitted -= sum(_size(done) for _txid, done in self._prepared.pop(task, ()))
        self._ack(tup, self._pass_on(task, tup))

    def behind(self) -> bool:
        """Whether the spout holds back its tuples: the checkpoint it passed on is under way for
        longer than topology.state.checkpoint.pause.after.ms (exactly-once mode)."""
        preparing = self._preparing
        return (preparing is not None and self._pause_after is not None
                and time.monotonic() - preparing[1] > self._pause_after)

    def want_checkpoint(self) -> None:
        """The spout is at topology.max.spout.pending: ask the checkpoint spout for the next
        checkpoint now rather than at its interval (once until the next step passes)."""
        if self._asked:
            return
        self._asked = True
        ex = self.ex
        coordinator = coordinator_task(ex.w.contexts[ex.task_ids[0]])
        if coordinator is not None:
            ex.outbox.send(coordinator, (CHECKPOINT_WANTED, ex.task_ids[0]))

    def _ask_reset(self, task: int) -> None:
        """Tell the checkpoint spout that this task's committed state is gone (rare: asked for
        when it happens, through the bolts' own messenger)."""
        coordinator = coordinator_task(self.ex.w.contexts[task])
        if coordinator is not None:
            RollbackAsker(self.ex.outbox.send, coordinator, self.ex.name).state_lost()

    def _ack_committed(self, task: int, txid: int) -> None:
        prepared = self._prepared.get(task)
        if not prepared:
            return
        ex = self.ex
        while prepared and prepared[0][0] <= txid:
            done = prepared.pop(0)[1]
            self.uncommitted -= _size(done)
            if type(done) is list:
                for msg_id, stream in done:
                    ex.ack_committed(task, msg_id, stream)
            else:
                for stream, n in done.items():
                    ex.count_committed(stream, n)

    def _pass_on(self, task: int, tup: Tuple) -> int:
        """Emit the step on this task's `$checkpoint` stream anchored to `tup`; the value its ack
        carries (its edge XOR the new edges)."""
        ex = self.ex
        out = ex.w.routes[task][CHECKPOINT_STREAM]
        values = list(tup.values)
        (root, edge), = tup.anchors_to_ids.items()
        with sealed(ex.outbox):
            return edge ^ ex.outbox.emit_rooted(task, out, values, out.targets(values), root)

    def _ack(self, tup: Tuple, value: int) -> None:
        outbox = self.ex.outbox
        for root in tup.anchors_to_ids:
            outbox.ack_value(root, value)

    def _fail(self, tup: Tuple) -> None:
        outbox = self.ex.outbox
        for root in tup.anchors_to_ids or ():
            outbox.to_acker(root, (ACKER_FAIL, root))


def _size(emitted: list | dict) -> int:
    """How many tuples a task's record of emits holds: (msg_id, stream) pairs or counts per stream."""
    return len(emitted) if type(emitted) is list else sum(emitted.values())
