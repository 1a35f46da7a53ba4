"""The checkpoint protocol as pure data and step functions (Storm's CheckPointState.java and
BaseStatefulBoltExecutor.java): what the checkpoint spout does next, and when a bolt has heard
a checkpoint tuple from every task that sends it one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from executor.errors import ClearError

CHECKPOINT_COMPONENT = "$checkpointspout"
CHECKPOINT_STREAM = "$checkpoint"
CHECKPOINT_FIELDS = ("txid", "action")

PREPARE = "PREPARE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
INITSTATE = "INITSTATE"
ACTIONS = (PREPARE, COMMIT, ROLLBACK, INITSTATE)

# The checkpoint spout's own record of the transaction in progress, kept in its state under this key.
TX_RECORD_KEY = "__state"
COMMITTED = "COMMITTED"
PREPARING = "PREPARING"
COMMITTING = "COMMITTING"
# ... and when its last checkpoint committed (epoch seconds), beside the record
COMMITTED_AT_KEY = "__committed_at"


@dataclass(frozen=True)
class TxState:
    txid: int
    state: str

    def next_state(self, recovering: bool) -> "TxState":
        """The state once the current action's tuple tree is acked."""
        if self.state == PREPARING:
            return TxState(self.txid - 1, COMMITTED) if recovering else TxState(self.txid, COMMITTING)
        if self.state == COMMITTING:
            return TxState(self.txid, COMMITTED)
        return self if recovering else TxState(self.txid + 1, PREPARING)

    def next_action(self, recovering: bool) -> str:
        """The action to send for this state: recovery rolls back a prepare that never committed,
        finishes a commit that was under way, and then (re)initialises every bolt's state."""
        if self.state == PREPARING:
            return ROLLBACK if recovering else PREPARE
        if self.state == COMMITTING:
            return COMMIT
        return INITSTATE if recovering else PREPARE

    def to_wire(self) -> list:
        return [self.txid, self.state]

    @classmethod
    def from_wire(cls, value: Any) -> "TxState":
        if (isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], int)
                and value[1] in (COMMITTED, PREPARING, COMMITTING)):
            return cls(int(value[0]), str(value[1]))
        raise ValueError(f"not a checkpoint transaction state: {value!r}")


INITIAL = TxState(-1, COMMITTED)


def last_committed_of(record: TxState | None) -> int | None:
    """The last checkpoint committed whole by the checkpoint spout's record (None: none yet,
    or one is being committed: COMMITTING)."""
    if record is None:
        return None
    if record.state == COMMITTED:
        return record.txid if record.txid >= 0 else None
    if record.state == PREPARING:
        return record.txid - 1 if record.txid >= 1 else None
    return None

# The task a CHECKPOINT_FAILED control row names when a task's committed state is gone: the
# checkpoint spout then starts every task's state afresh (see restore_plan).
STATE_LOST = -1

# What an exactly-once task does with a ROLLBACK (restore_plan).
RESTORE = "restore"  # back to its last commit: the normal rollback
RESET = "reset"      # the checkpoint spout's record was lost: empty, as the rest of the topology
LOST = "lost"        # its own committed state is gone: every task must start afresh
BEHIND = "behind"    # a durable state ahead of the checkpoint spout's record: refused


def restore_plan(durable: bool, committed: int | None, target: int) -> str:
    """An exactly-once task's ROLLBACK to `target` (the last complete checkpoint's txid, -1 for
    none) given its state's last committed txid. A provider that keeps nothing (`memory`) loses a
    dead worker's part of the last checkpoint, the checkpoint spout's record among it: no
    checkpoint can then be restored whole, so every task starts afresh (spouts from their
    beginning), as if the topology were submitted again, rather than mixing survivors' state
    with the lost part. A durable state never loses a commit; one ahead of the record is refused."""
    if committed == target:
        return RESTORE
    if committed is not None and committed > target:
        return BEHIND if durable else RESET
    # Behind the last complete checkpoint (a restarted task's empty state: committed None).
    return RESTORE if durable or (committed is None and target < 0) else LOST


# A stateful spout executor's gauge: the first checkpoint it passed on while deactivated, or
# None (executor/checkpoint/spout_side.py; read by executor/savepoints/ to stop at a barrier).
QUIET_SINCE = "quiet_since_txid"

# A bolt's barrier alignment (a PREPARE's first copy to its last, ms) in its stats' gauges: the
# last one, and the longest of the last ALIGNMENTS_KEPT (about a minute at the default interval).
ALIGNMENT = "checkpoint_alignment_ms"
ALIGNMENT_MAX = "checkpoint_alignment_max_ms"
ALIGNMENTS_KEPT = 60
# ... and every alignment since the task started, counted cumulatively at or under each bound
# (ms), a Prometheus histogram's buckets: the gauge ALIGNMENT_BUCKET + bound, ALIGNMENT_COUNT and
# ALIGNMENT_SUM. A percentile over any span is read from two samples of them (bench/scaling.py).
ALIGNMENT_BOUNDS_MS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
ALIGNMENT_BUCKET = "checkpoint_alignment_le_"
ALIGNMENT_COUNT = "checkpoint_alignment_count"
ALIGNMENT_SUM = "checkpoint_alignment_sum_ms"


def alignment_buckets(counts: list[int], ms: float) -> None:
    """Counts an alignment of `ms` in `counts` (one per ALIGNMENT_BOUNDS_MS bound, cumulative)."""
    for i, bound in enumerate(ALIGNMENT_BOUNDS_MS):
        if ms <= bound:
            counts[i] += 1


def percentile_bound(counts: list[int], total: int, q: float) -> float | None:
    """The smallest bound at or under which a fraction `q` of `total` alignments fall, from
    cumulative bucket counts; inf when more than 1 - q took longer than the last bound."""
    if total <= 0:
        return None
    for bound, n in zip(ALIGNMENT_BOUNDS_MS, counts):
        if n >= q * total:
            return float(bound)
    return float("inf")


class Barrier:
    """Counts the checkpoint tuples of one (action, txid) until every input task has sent its
    own (Storm's BaseStatefulBoltExecutor.shouldProcessTransaction): a bolt acts on a checkpoint
    once, after every upstream task has passed it on."""

    __slots__ = ("needed", "_seen")

    def __init__(self, needed: int):
        self.needed = max(1, needed)
        self._seen: dict[tuple[str, int], int] = {}

    def arrive(self, action: str, txid: int) -> bool:
        key = (action, txid)
        n = self._seen.get(key, 0) + 1
        if n >= self.needed:
            self._seen.pop(key, None)
            return True
        self._seen[key] = n
        return False

    def clear(self) -> None:
        """After a rollback every input has passed on what it sent before it (FIFO), so a count
        still open is of a copy that was lost: the txid will be used again."""
        self._seen.clear()

    def forget_before(self, txid: int) -> None:
        """Drop the counts of older transactions (their missing copies were lost with a worker)."""
        for key in [k for k in self._seen if k[1] < txid]:
            del self._seen[key]


def state_namespace(conf, context) -> str:
    """Where a task keeps its state (executor/state/kv.py task_namespace): its topology's name,
    component and index in the component."""
    from executor.state.kv import task_namespace

    name = conf.get("topology.name") or context.storm_id
    return task_namespace(name, context.this_component_id, context.this_task_index)


def checkpoint_input_tasks(context) -> int:
    """How many tasks send this task a checkpoint tuple per transaction: every task of every
    component it takes the `$checkpoint` stream from (all-grouped)."""
    comp = context.topology.components[context.this_component_id]
    return sum(len(context.component_tasks(sub.source)) for sub in comp.inputs
               if sub.stream == CHECKPOINT_STREAM)


class StateLostError(ClearError):
    """An exactly-once task's committed state is gone (restore_plan's LOST): the step fails and
    the checkpoint spout is asked to start every task's state afresh."""


class StateAheadError(ClearError):
    """A durable state committed past the checkpoint spout's record (restore_plan's BEHIND)."""


def check_restore(where: str, state, target: int) -> str:
    """restore_plan for `state`; raises StateLostError / StateAheadError naming `where`."""
    plan = restore_plan(state.durable, state.committed_txid(), target)
    if plan == LOST:
        raise StateLostError(f"{where}: its committed state is gone (the state provider keeps nothing and its "
                             f"worker started again after checkpoint {target}); every task starts afresh")
    if plan == BEHIND:
        raise StateAheadError(f"{where}: its state committed checkpoint {state.committed_txid()}, past the "
                              f"checkpoint spout's record ({target}); was the record deleted?")
    return plan


def check_commit(where: str, state, txid: int) -> None:
    """A COMMIT reaching a state that keeps nothing with nothing prepared and not this txid
    committed: a restarted task's empty state, whose part of the checkpoint is gone."""
    if not state.durable and state.prepared_txid() is None and state.committed_txid() != txid:
        raise StateLostError(f"{where}: its state was not prepared for checkpoint {txid} (the state provider "
                             f"keeps nothing and its worker started again); every task starts afresh")


class CheckpointHookError(ClearError):
    """A user's checkpoint hook raised (init_state, pre_prepare, pre_commit, pre_rollback): the
    message names the component and the hook; the step fails and is retried with a back-off."""


def call_hook(where: str, hook: str, fn: Callable, *args) -> None:
    """fn(*args), an exception turned into one CheckpointHookError naming `where` and `hook`
    (and the txid, when that is its argument)."""
    try:
        fn(*args)
    except Exception as exc:
        txid = f" of txid {args[0]}" if args and type(args[0]) is int else ""
        raise CheckpointHookError(f"{where}: its {hook}{txid} raised {type(exc).__name__}: {exc}; "
                                  f"the checkpoint step is retried") from exc
