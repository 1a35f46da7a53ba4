"""The spout's bound on tuple trees in flight when the user sets no `topology.max.spout.pending`
(acked mode): a bound learned from the complete latency, so that at saturation the trees wait in
no queue for long (the latency stays near `topology.spout.pending.latency.ms`) while a topology
whose bolts hold their tuples on purpose (windows, batching sinks, a bolt that acks at a tick)
still gets as many in flight as it needs.

Why not a fixed default: at saturation what a spout keeps in flight only waits in queues (Little's
law: latency = in flight / throughput), so a small bound costs nothing and cuts the latency
(bench/RESULTS.md: 500 per task gave p99 19-26 ms against 73-115 ms at 2000, at the same or a
higher rate); but a tumbling window of 10 s needs 10 s of tuples in flight, and any fixed bound
below that caps its rate at the bound per window. The two look alike in the latency (high) and
differ in how the rate answers a smaller bound: queued trees finish as fast with fewer in flight,
held ones finish fewer (a held tree's latency is the hold, whatever the bound). So a step that
lowers the bound is checked by the next period: undone when the rate fell with it and the
latency did not, and taken for held trees when that happens twice in a row (once can be the
machine: a period in which the worker got less CPU, stolen by the hypervisor or spent on a long
GC pass, looks the same; taken for a hold it kept the bound from falling for 10 s, and the
latency of one-worker runs at 20-50 ms where others held 8-10: bench/RESULTS.md); and a bound
at which no tree finishes at all (a window still filling) doubles.

`decide` is the whole decision, a pure function of one period's observations; the spout executor
(executor/spout.py) measures and applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PERIOD_SECS = 0.25       # one decision per this much wall time while the bound binds
BINDS = 0.5              # the bound binds when this share of a period's emit turns ended at it
INITIAL_PER_TASK = 1000  # Storm's guide's first example sets 1,000
FLOOR_PER_TASK = 32
CEILING_PER_TASK = 1_000_000
LOWER = 2 / 3            # a lowering keeps this share (a held topology's rate falls as much)
HELD_FALL = 0.8          # a lowering after which the rate fell under this share of the rate before ...
HELD_STAYS = 0.9         # ... and the latency stayed above this share: the trees are held
HELD_PERIODS = 40        # after which (10 s) a held topology's latency is tried again


@dataclass(frozen=True)
class Period:
    """What one spout executor saw over one period (typed: the decision reads nothing else)."""
    secs: float            # wall time the period spanned
    turns: int             # the spout's emit turns (steps that could call next_tuple)
    turns_at_bound: int    # of which the bound ended (at once or after some emits)
    completed: int         # tuple trees acked in the period
    latency_secs: float    # their summed complete latency (emit to ack)


@dataclass(frozen=True)
class Bound:
    """The bound and what the last decision needs to check itself."""
    limit: int                  # tuple trees in flight, for the whole executor
    tasks: int
    target_secs: float
    lowered_from: int = 0       # the limit before the last lowering (0: the last step lowered nothing)
    rate_before: float = 0.0    # trees/s of the period that decided the lowering ...
    latency_before: float = 0.0  # ... and their mean complete latency
    held_for: int = 0           # periods left in which the latency is the trees' hold, not queues
    starved: bool = False       # the last period bound and no tree finished
    suspect: bool = False       # the last lowering checked looked held: a second one holds

    @classmethod
    def start(cls, tasks: int, target_secs: float) -> Bound:
        return cls(limit=INITIAL_PER_TASK * tasks, tasks=tasks, target_secs=target_secs)


def decide(b: Bound, p: Period) -> Bound:
    """The next bound after period `p`:
    - the bound did not bind (the spout was mostly below it): unchanged, nothing learned;
    - no tree finished while it bound, two periods in a row: they are held (a window filling, a
      sink's batch): doubled;
    - a lowering the period before cut the rate and not the latency: the limit before the
      lowering again; the second time in a row the trees are held, not queued (queued ones
      finish as fast and sooner), or the latency is at its floor (the queues hold no more than
      the pipeline needs to keep busy): no lowering for HELD_PERIODS either;
    - the mean latency at most the target: raised by an eighth (find the rate; the latency tells
      when the queues start to hold what is added);
    - over the target: lowered by a third (queued trees: fewer cost no rate), unless held, when
      it stays (a rate that merely looked lower for one period then costs nothing but the undo).
    """
    floor, ceiling = FLOOR_PER_TASK * b.tasks, CEILING_PER_TASK * b.tasks
    held_for = max(0, b.held_for - 1)
    binds = p.turns > 0 and p.turns_at_bound >= BINDS * p.turns
    rate = p.completed / p.secs if p.secs > 0 else 0.0
    latency = p.latency_secs / p.completed if p.completed else 0.0
    if (b.lowered_from and binds and rate < HELD_FALL * b.rate_before
            and latency > HELD_STAYS * b.latency_before):
        return replace(b, limit=b.lowered_from, lowered_from=0, rate_before=0.0, latency_before=0.0,
                       held_for=HELD_PERIODS if b.suspect else 0, suspect=not b.suspect)
    # A lowering that held up clears the suspicion; so does a period under the target (below).
    b = replace(b, lowered_from=0, rate_before=0.0, latency_before=0.0, held_for=held_for,
                suspect=b.suspect and not b.lowered_from)
    if not binds:
        return replace(b, starved=False)
    if p.completed == 0:  # twice in a row: one stall of the worker (a long GC pass) is not a hold
        return replace(b, limit=min(ceiling, 2 * b.limit) if b.starved else b.limit, starved=True)
    b = replace(b, starved=False)
    if latency <= b.target_secs:
        return replace(b, limit=min(ceiling, b.limit + max(b.tasks, b.limit // 8)), suspect=False)
    if held_for:
        return b
    lowered = max(floor, int(b.limit * LOWER))
    if lowered == b.limit:
        return b
    return replace(b, limit=lowered, lowered_from=b.limit, rate_before=rate, latency_before=latency)
