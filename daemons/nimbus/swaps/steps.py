"""What a swap does next (pure): from its record and what the cluster says now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from cluster_state.records import (
    STATUS_STOPPING,
    SWAP_ENDED,
    SWAP_KILLED,
    SWAP_PARKING,
    SWAP_SAVED,
    SWAP_STOPPING,
    SWAP_UNDOABLE,
    SWAP_WRITING,
    CheckpointMark,
    SwapRecord,
)

# How long an ended swap's record is kept for `storm-py swap --resume` and `list`.
ENDED_KEPT_SECS = 3600.0

# Where the new code is, for the leader driving the swap: on this Nimbus, on another registered
# one only (the code sync copies it here), or on none (the Nimbus that took the swap went before
# another had copied it).
CODE_HERE, CODE_ELSEWHERE, CODE_LOST = "here", "elsewhere", "lost"


@dataclass(frozen=True)
class Facts:
    now: float
    old_status: str | None                                   # None: the old topology is gone
    marks: Mapping[str, Sequence[CheckpointMark | None]]     # component -> its executors' marks
    stateful_spouts: frozenset[str]
    checkpoint_component: str
    replicated: bool                                         # the new code is on every registered Nimbus
    new_running: bool                                        # the new code runs (started already)
    new_code: str = CODE_HERE                                # where the new code is (CODE_*)


@dataclass(frozen=True)
class Step:
    kind: str                  # WAIT, PARK, TAKE, COLLECT, KILL, START, DONE, FAIL, FORGET
    txid: int | None = None
    message: str = ""
    undo: bool = False         # FAIL: the old topology goes back to the status it had


WAIT, PARK, TAKE, COLLECT, KILL, START, DONE, FAIL, FORGET = (
    "wait", "park", "take", "collect", "kill", "start", "done", "fail", "forget")


def stopped_at(facts: Facts) -> int | None:
    """The checkpoint behind every stateful spout's last tuple, once it has committed."""
    return stopped_at_checkpoint(facts.marks, facts.stateful_spouts, facts.checkpoint_component)


def stopped_at_checkpoint(marks: Mapping[str, Sequence[CheckpointMark | None]], stateful_spouts: frozenset[str],
                          checkpoint_component: str) -> int | None:
    """The checkpoint behind every stateful spout's last tuple of an inactive topology, once it
    has committed: every executor of every stateful spout says it passed a checkpoint while not
    active, and the checkpoint spout's last commit is at or after the latest of those."""
    since = []
    for comp in stateful_spouts:
        found = marks.get(comp) or ()
        if not found or any(m is None or m.quiet_since_txid is None for m in found):
            return None
        since += [m.quiet_since_txid for m in found]
    committed = (marks.get(checkpoint_component) or (None,))[0]
    if committed is None or committed.committed_txid is None:
        return None
    return committed.committed_txid if committed.committed_txid >= max(since, default=0) else None


def _checkpoint_mark(facts: Facts) -> CheckpointMark | None:
    marks = facts.marks.get(facts.checkpoint_component) or ()
    return marks[0] if marks else None


def next_step(record: SwapRecord, facts: Facts) -> Step:
    phase, name = record.phase, record.name
    if phase in SWAP_ENDED:
        ended = record.ended_secs or record.started_secs
        return Step(FORGET) if facts.now - ended >= ENDED_KEPT_SECS else Step(WAIT)
    if facts.new_code == CODE_LOST and not facts.new_running and (
            facts.old_status is not None or phase not in SWAP_UNDOABLE):
        return _lost(record, facts)
    if phase in SWAP_UNDOABLE:
        wait = record.deadline_secs - record.started_secs
        if facts.old_status is None:
            return Step(FAIL, message=f"topology {name!r} was killed during the swap; the new code was not started "
                                      f"(submit it as usual)")
        if facts.old_status != STATUS_STOPPING:
            if facts.now >= record.deadline_secs:
                return Step(FAIL, message=_timed_out(name, wait, phase))
            return Step(FAIL, message=f"topology {name!r} was activated during the swap, which is given up: it runs "
                                      f"the old code")
        if facts.now >= record.deadline_secs:
            return Step(FAIL, message=_timed_out(name, wait, phase), undo=True)
    if phase == SWAP_STOPPING:
        txid = stopped_at(facts)
        if txid is None:
            return Step(WAIT, message="its spouts to stop at a committed checkpoint")
        return Step(PARK, txid=txid)
    if phase == SWAP_PARKING:
        mark = _checkpoint_mark(facts)
        if mark is None or not mark.parked or mark.committed_txid is None:
            return Step(WAIT, message="its checkpoint spout to park")
        if not facts.replicated:
            return Step(WAIT, message="the new code to reach every Nimbus")
    if phase == SWAP_KILLED and facts.new_running:
        return Step(DONE)
    if facts.new_code != CODE_HERE:  # a new leader: its code sync copies it from the Nimbus that has it
        return Step(WAIT, message="the new code to be copied to this Nimbus")
    if phase == SWAP_PARKING:
        return Step(TAKE, txid=_checkpoint_mark(facts).committed_txid)
    if phase == SWAP_WRITING:
        return Step(COLLECT, txid=record.txid)
    if phase == SWAP_SAVED:
        return Step(KILL) if facts.old_status is not None else Step(START)
    if phase == SWAP_KILLED:
        return Step(START)
    raise ValueError(f"swap of {name!r}: unknown phase {phase!r}")


def _lost(record: SwapRecord, facts: Facts) -> Step:
    """No Nimbus holds the new code: the old topology goes on while it is there, else the
    savepoint is where the user starts the new code again."""
    gone = (f"the new code of topology {record.name!r} ({record.new_id}) is on no Nimbus (the one that took the "
            f"swap went before another had copied it)")
    if facts.old_status is not None:
        return Step(FAIL, undo=True, message=f"{gone}; the swap is given up and the topology runs the old code as "
                                             f"before: run storm-py swap again")
    return Step(FAIL, message=f"{gone}, and the old code was removed: submit the new code with "
                              f"storm-py jar submit ... --from-savepoint {record.savepoint}")


def _timed_out(name: str, wait: float, phase: str) -> str:
    what = {SWAP_STOPPING: "its spouts did not stop at a committed checkpoint",
            SWAP_PARKING: "its checkpoint spout did not park, or the new code did not reach every Nimbus",
            SWAP_WRITING: "its workers did not write their state"}.get(phase, "it did not stop")
    return (f"topology {name!r}: {what} within {wait:g}s (is a checkpoint failing? see its checkpoints in the UI); "
            f"the swap is given up and it runs the old code as before")


__all__ = ["CODE_ELSEWHERE", "CODE_HERE", "CODE_LOST", "COLLECT", "DONE", "ENDED_KEPT_SECS", "FAIL", "FORGET", "Facts", "KILL", "PARK", "START", "Step", "TAKE",
           "WAIT", "next_step", "stopped_at", "stopped_at_checkpoint"]
