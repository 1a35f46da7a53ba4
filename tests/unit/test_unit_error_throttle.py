"""The error-report throttle (Storm's topology.max.error.report.per.interval)."""

from executor.error_throttle import ErrorThrottle


def test_at_most_the_limit_per_interval_per_task_then_a_new_window():
    t = ErrorThrottle(interval_secs=10, max_per_interval=2)
    assert [t.allow(1, 0.0), t.allow(1, 1.0), t.allow(1, 2.0)] == [True, True, False]
    assert t.allow(2, 2.0)  # another task has its own budget
    assert not t.allow(1, 9.9)
    assert t.allow(1, 10.0)  # the interval passed: a fresh window
    assert t.dropped == 2


def test_a_task_reporting_on_every_tuple_is_held_to_the_limit():
    t = ErrorThrottle(interval_secs=10, max_per_interval=5)
    allowed = sum(t.allow("sink", i * 0.0001) for i in range(100_000))  # 100k errors within 10 s
    assert allowed == 5 and t.dropped == 99_995
