"""The bound a spout learns when topology.max.spout.pending is not set (executor/pending_bound.py):
each rule of `decide` on one period's observations, and the bound's course over simulated
topologies (queued trees, held trees, a window that needs more than the start)."""

from __future__ import annotations

from executor.pending_bound import (
    CEILING_PER_TASK,
    FLOOR_PER_TASK,
    HELD_PERIODS,
    INITIAL_PER_TASK,
    Bound,
    Period,
    decide,
)

TARGET = 0.010


def period(latency_ms: float, done: int = 1000, binds: bool = True, secs: float = 0.25) -> Period:
    return Period(secs=secs, turns=100, turns_at_bound=90 if binds else 10, completed=done,
                  latency_secs=done * latency_ms / 1000.0)


def test_it_starts_at_storms_first_example_per_task():
    b = Bound.start(2, TARGET)
    assert b.limit == 2 * INITIAL_PER_TASK and b.tasks == 2


def test_a_bound_that_does_not_bind_stays():
    b = Bound.start(1, TARGET)
    assert decide(b, period(500.0, binds=False)).limit == b.limit
    assert decide(b, period(1.0, binds=False)).limit == b.limit


def test_under_the_target_it_rises_by_an_eighth():
    b = Bound.start(1, TARGET)
    assert decide(b, period(5.0)).limit == b.limit + b.limit // 8


def test_over_the_target_it_falls_by_a_third_and_keeps_what_to_check():
    b = Bound.start(1, TARGET)
    after = decide(b, period(40.0, done=4000))
    assert after.limit == int(b.limit * 2 / 3)
    assert after.lowered_from == b.limit and after.rate_before == 16000.0
    assert after.latency_before == 0.040


def test_queued_trees_finish_as_fast_after_a_lowering_so_it_goes_on_lowering():
    b = decide(Bound.start(1, TARGET), period(40.0, done=4000))
    b2 = decide(b, period(27.0, done=4000))  # the same rate, the latency down with the bound
    assert b2.limit == int(b.limit * 2 / 3) and b2.held_for == 0


def test_held_trees_finish_fewer_after_a_lowering_twice_so_it_is_undone_and_held():
    start = Bound.start(1, TARGET)
    b = decide(start, period(200.0, done=1000))  # lowered
    b2 = decide(b, period(200.0, done=660))      # the rate down with the bound, the latency not
    assert b2.limit == start.limit and b2.held_for == 0 and b2.suspect  # undone, once
    b3 = decide(b2, period(200.0, done=1000))    # lowered again
    assert b3.limit < start.limit
    b4 = decide(b3, period(200.0, done=660))     # the same again: held
    assert b4.limit == start.limit and b4.held_for == HELD_PERIODS and not b4.suspect
    b5 = decide(b4, period(200.0, done=1000))    # held: over the target, it stays
    assert b5.limit == start.limit and b5.held_for == HELD_PERIODS - 1


def test_one_slow_period_after_a_lowering_is_not_taken_for_held_trees():
    """The worker got less CPU for a period (stolen by the hypervisor, a long GC pass): the rate
    fell and the latency with it less than the bound. Undone once, and the lowering after it,
    which holds up, clears the suspicion: the bound goes on falling to the target."""
    b = decide(Bound.start(1, TARGET), period(40.0, done=4000))
    slow = decide(b, period(40.0, done=2000))    # looks held
    assert slow.limit == Bound.start(1, TARGET).limit and slow.held_for == 0 and slow.suspect
    again = decide(slow, period(40.0, done=4000))  # lowered again
    fine = decide(again, period(27.0, done=4000))  # the rate held: queued trees
    assert fine.limit < again.limit and not fine.suspect and fine.held_for == 0


def test_a_noisy_rate_alone_is_not_taken_for_held_trees():
    b = decide(Bound.start(1, TARGET), period(40.0, done=4000))
    b2 = decide(b, period(25.0, done=2000))      # rate halved, but the latency fell too
    assert b2.held_for == 0 and b2.limit < b.limit


def test_no_tree_finishing_at_the_bound_twice_in_a_row_doubles_it_up_to_the_ceiling():
    b = Bound.start(1, TARGET)
    once = decide(b, period(0.0, done=0))
    assert once.limit == b.limit and once.starved  # one stall (a long GC pass) is not a hold
    assert decide(once, period(0.0, done=0)).limit == 2 * b.limit
    assert decide(decide(once, period(5.0)), period(0.0, done=0)).starved  # not in a row: not yet
    top = Bound(limit=CEILING_PER_TASK, tasks=1, target_secs=TARGET, starved=True)
    assert decide(top, period(0.0, done=0)).limit == CEILING_PER_TASK


def test_it_never_falls_under_the_floor():
    b = Bound(limit=FLOOR_PER_TASK * 3, tasks=3, target_secs=TARGET)
    assert decide(b, period(500.0)).limit == FLOOR_PER_TASK * 3


def simulate(knee: int, periods: int = 200) -> list[int]:
    """Queued trees: the pipeline runs at 20,000 trees/s from `knee` in flight on, proportionally
    less under it; the latency is what the bound holds over the rate (Little's law), 2 ms at least."""
    b = Bound.start(1, TARGET)
    seen = []
    for _ in range(periods):
        rate = 20_000.0 * min(1.0, b.limit / knee)
        latency_ms = max(2.0, 1000.0 * b.limit / rate)
        b = decide(b, period(latency_ms, done=int(rate * 0.25)))
        seen.append(b.limit)
    return seen[-50:]


def test_a_saturated_pipeline_settles_near_the_target():
    tail = simulate(knee=100)  # 5 ms of trees keep it busy: the target's 200 is reachable
    assert 130 <= min(tail) and max(tail) <= 300, tail


def test_a_pipeline_whose_latency_floor_is_over_the_target_settles_at_its_knee():
    tail = simulate(knee=400)  # 20 ms of trees keep it busy: fewer only cost rate
    assert 400 * 2 / 3 <= min(tail) and max(tail) <= 400 * 1.5, tail


def test_a_window_that_needs_more_than_the_start_gets_it():
    """A count window of 5,000: nothing finishes until 5,000 are in flight, then all at once."""
    b = Bound.start(1, TARGET)
    for _ in range(20):
        if b.limit >= 5000:
            break
        b = decide(b, period(0.0, done=0))
    assert b.limit >= 5000


def test_trees_held_by_a_sink_keep_what_they_need():
    """A sink acks its batch a second after its first row: the latency is the hold whatever the
    bound, the rate the bound over the hold."""
    b = Bound.start(1, TARGET)
    for _ in range(2 * HELD_PERIODS):
        b = decide(b, period(1000.0, done=max(1, int(b.limit * 0.25))))
    assert b.limit >= int(INITIAL_PER_TASK * 2 / 3), b  # at most one lowering in force
