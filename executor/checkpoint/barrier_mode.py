"""Exactly-once without per-tuple tracking (Flink's asynchronous barrier snapshots on Storm's
`$checkpoint` stream; docs/topology-guide.md, "State and checkpoints"). With
`topology.state.exactly.once: true` the stateful spouts emit their tuples outside every tuple
tree: nothing goes to the acker, a data tuple has no timeout, and `ack`, `fail` and anchors
cost next to nothing. Only the checkpoint steps are tuple trees (a few per second): a
checkpoint is complete when every task has aligned its barrier from all its inputs and stored
its state, which over in-order links means every tuple sent before the barrier was processed.

A tuple lost in flight is never silent; each way one can be lost rolls the whole topology back
to the last complete checkpoint:
- a worker dies: its tasks start afresh and fail the next PREPARE until a ROLLBACK reached
  them (an INITSTATE alone rewinds no spout; executor/checkpoint/forwarder.py, stateful.py,
  spout_side.py), and the step under way, if it crossed the dead worker, times out;
- a link loses a payload between two live workers: the receiving worker's links are numbered
  (executor/transport/sequenced.py), a gap counts in its `WorkerLosses`, and each of its bolt
  tasks fails the next PREPARE;
- a bolt fails a tuple (`collector.fail`, a failed write): it counts in its worker's
  `WorkerLosses` too (so no checkpoint whose barrier passes after it completes), and the
  checkpoint spout is asked to roll back at once (`RollbackAsker`, through the outbox's
  untracked-fail hook);
- a checkpoint step does not complete within `topology.message.timeout.secs`: its tree fails."""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, STATE_LOST
from executor.serialization import CHECKPOINT_FAILED

log = logging.getLogger(__name__)

_ASK_EVERY_SECS = 1.0  # a bolt failing every tuple asks once a second, not once per tuple


def barrier_only(conf: Mapping[str, Any]) -> bool:
    """Whether checkpoints alone decide what is processed (no per-tuple tracking)."""
    return bool(conf.get("topology.state.exactly.once"))


def pause_after_secs(conf: Mapping[str, Any]) -> float | None:
    """How long a stateful spout goes on emitting while a checkpoint it passed on is under way,
    in that mode (executor/checkpoint/spout_side.py); None: no pause."""
    ms = conf.get("topology.state.checkpoint.pause.after.ms")
    return ms / 1000.0 if barrier_only(conf) and ms is not None else None


def coordinator_task(context) -> int | None:
    """The checkpoint spout's task, or None in a topology without checkpoints."""
    tasks = context.component_tasks(CHECKPOINT_COMPONENT)
    return tasks[0] if tasks else None


class RollbackAsker:
    """What a failed tuple outside every tree does in that mode: it counts as the worker's loss
    (its bolts fail the next PREPARE) and the checkpoint spout is told to roll the topology back
    now (the tuple's input is replayed from the last commit)."""

    __slots__ = ("_send", "_coordinator", "_name", "_losses", "_last")

    def __init__(self, send, coordinator: int, name: str, losses: WorkerLosses | None = None):
        self._send = send                  # the outbox's send(task, payload)
        self._coordinator = coordinator
        self._name = name
        self._losses = losses
        self._last = float("-inf")

    def __call__(self, tup) -> None:
        if self._losses is not None:
            self._losses.failed()
        now = time.monotonic()
        if now - self._last < _ASK_EVERY_SECS:
            return
        self._last = now
        log.info("bolt %s failed a tuple from task %s: asking for a rollback to the last checkpoint",
                 self._name, tup.source_task)
        self._send(self._coordinator, (CHECKPOINT_FAILED, tup.source_task))

    def state_lost(self) -> None:
        """A task of this executor found its committed state gone (protocol.restore_plan): the
        checkpoint spout starts every task's state afresh."""
        self._send(self._coordinator, (CHECKPOINT_FAILED, STATE_LOST))


class WorkerLosses:
    """What a worker may have lost since it started: payloads missing on its numbered links
    (counted on its receive thread) and tuples its bolts failed (on their executor threads).
    Its bolts' checkpoint handlers fail the next PREPARE when the count moved since their last
    rollback, so no checkpoint completes past a loss, whatever the rollback request's timing."""

    __slots__ = ("worker", "count")

    def __init__(self, worker: str):
        self.worker = worker
        self.count = 0  # a plain int, read whole

    def gap(self, gap: Exception) -> None:
        self.count += 1
        log.warning("worker %s: a link lost payloads (%s); the next checkpoint fails and the topology "
                    "rolls back to the last one", self.worker, gap)

    def failed(self) -> None:
        self.count += 1
