"""How long Nimbus's monitor thread sleeps between rounds (pure)."""

from daemons.nimbus.daemon import monitor_interval


def test_the_period_without_timers():
    assert monitor_interval(10.0, None) == 10.0


def test_sooner_when_a_timer_is_due_first():
    assert monitor_interval(10.0, 2.5) == 2.5


def test_a_timer_due_now_runs_a_round_now_not_after_a_whole_period():
    assert monitor_interval(10.0, 0.0) == 0.0


def test_never_later_than_the_period():
    assert monitor_interval(10.0, 60.0) == 10.0
