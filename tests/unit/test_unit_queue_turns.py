"""A full receive queue's room goes to its producers in the order they were refused
(executor/receive_queue.py ReceiveQueue._take_turn), on both cores."""

from __future__ import annotations

import time

from executor import receive_queue
from executor.receive_queue import ReceiveQueue, debloated_bound

A, B = (1,), (2,)


def _full(capacity: int = 10) -> ReceiveQueue:
    q = ReceiveQueue(capacity, "count")
    for _ in range(capacity // 5):
        assert q.try_publish([0] * 5, producer=A)
    return q


def _free(q: ReceiveQueue, n: int) -> None:
    taken = q.consume(n)
    assert sum(len(b) for b in taken) == n


def test_the_room_goes_to_the_producer_refused_first_not_to_the_one_that_asks_first():
    q = _full()
    assert not q.try_publish([1] * 5, producer=B)  # refused: B waits for room
    _free(q, 5)
    assert not q.try_publish([2] * 5, producer=A)  # A asks first, but B was refused first
    assert q.try_publish([1] * 5, producer=B)
    _free(q, 5)
    assert not q.try_publish([3] * 5, producer=B)  # now A was refused first
    assert q.try_publish([2] * 5, producer=A)
    _free(q, 5)
    assert q.try_publish([3] * 5, producer=B)
    assert [x for b in q.consume() for x in b] == [2] * 5 + [3] * 5


def test_a_batch_from_another_worker_takes_its_turn_before_the_local_producers():
    # in a worker's shared thread the local producer steps right after the consumer: without
    # turns, it would take all the room the link's receive is waiting for
    q = _full()
    assert not q.try_publish_remote(["r"] * 5)
    for _ in range(3):
        _free(q, 5)
        assert not q.try_publish(["l"] * 5, producer=A)
        assert q.try_publish_remote(["r"] * 5)
        assert q.try_publish(["l"] * 5, producer=A) is False  # full again: A is first in line now
        _free(q, 5)
        assert q.try_publish(["l"] * 5, producer=A)
        assert not q.try_publish_remote(["r"] * 5)


def test_a_producer_that_stopped_offering_loses_its_turn():
    q = _full()
    assert not q.try_publish([1] * 5, producer=B)  # B is refused, then never offers again
    _free(q, 5)
    assert not q.try_publish([2] * 5, producer=A)
    time.sleep(receive_queue.TURN_SECS * 1.5)  # B's last offer is older than a turn now
    assert q.try_publish([2] * 5, producer=A)


def test_an_empty_queue_takes_any_batch_whoever_waits():
    q = _full()
    assert not q.try_publish([1] * 5, producer=B)
    _free(q, 10)
    assert q.try_publish([0] * 20, producer=A)  # larger than the capacity, into an empty queue
    assert not q.try_publish([1] * 5, producer=B)
    assert len(q) == 20


def test_an_alignments_refusal_does_not_put_the_refused_producer_in_line():
    q = _full()
    _free(q, 5)
    q.refuse({1}, time.monotonic() + 60)
    assert not q.try_publish([1] * 5, producer=A)   # refused by the alignment, not for room
    assert q.try_publish([2] * 5, producer=B)       # no one is in line before B
    q.refuse((), 0.0)
    _free(q, 5)
    assert q.try_publish([1] * 5, producer=A)


def test_the_debloated_bound_is_the_consumers_rate_for_the_target_within_floor_and_capacity():
    assert debloated_bound(280_000.0, 0.05, 1000, 32768) == 14_000   # a count task: 50 ms of words
    assert debloated_bound(28_000.0, 0.05, 1000, 32768) == 1400      # a split: 50 ms of sentences
    assert debloated_bound(100.0, 0.05, 1000, 32768) == 1000         # a slow bolt: the floor
    assert debloated_bound(10_000_000.0, 0.05, 1000, 32768) == 32768  # never over the capacity
    assert debloated_bound(0.0, 0.05, 1000, 500) == 500              # a floor above the capacity


def test_a_queue_with_a_target_bounds_itself_by_what_its_consumer_takes():
    q = ReceiveQueue(32768, "count", target_secs=0.05, floor=100)
    assert q.bound == 32768  # before its consumer's first period
    deadline = time.monotonic() + 30
    while q.bound == 32768:  # one consume a period: a few hundred tuples a second
        assert time.monotonic() < deadline, "the bound never followed the consumer"
        q.try_publish([0] * 5, producer=A)
        q.consume()
        time.sleep(receive_queue.DEBLOAT_PERIOD / 4)
    assert q.bound == 100  # 50 ms of ~200 tuples/s is under the floor
    for _ in range(20):
        assert q.try_publish([0] * 5, producer=A)  # 100 fit ...
    assert not q.try_publish([0] * 5, producer=A)  # ... not more
    assert q.is_full()
    fixed = ReceiveQueue(32768, "count")  # no target: Storm's fixed bound
    for _ in range(5):
        fixed.try_publish([0] * 5, producer=A)
        fixed.consume()
        time.sleep(receive_queue.DEBLOAT_PERIOD / 2)
    assert fixed.bound == 32768
