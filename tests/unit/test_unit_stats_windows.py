"""Unit tests for executor/stats_windows.py (rolling windows over cumulative counters) and the
per-window figures of executor/stats.py."""

from __future__ import annotations

import pytest

from executor import stats
from executor.stats_windows import (
    ALL_TIME,
    BUCKETS,
    WINDOW_NAMES,
    WindowedCounters,
    parse_window,
    window_pretty,
)


def test_window_names_and_how_storm_prints_them():
    assert WINDOW_NAMES == ("600", "10800", "86400", ":all-time")
    assert [window_pretty(w) for w in WINDOW_NAMES] == ["10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"]


@pytest.mark.parametrize("given,expected", [(None, ALL_TIME), ("", ALL_TIME), ("600", "600"),
                                            (":all-time", ALL_TIME), ("86400", "86400")])
def test_parse_window(given, expected):
    assert parse_window(given) == expected


@pytest.mark.parametrize("bad", ["60", "10m", "x", "-600"])
def test_parse_window_names_a_bad_window(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        parse_window(bad)


def test_a_young_executor_s_windows_hold_everything_since_its_start():
    w = WindowedCounters(start=1000.0)
    counters = {"emitted|default": 50}
    w.observe(1100.0, counters)
    got = w.windows(1100.0, counters)
    assert set(got) == set(WINDOW_NAMES)
    for name in WINDOW_NAMES:
        secs, values = got[name]
        assert secs == pytest.approx(100.0)
        assert values == {"emitted|default": 50}


def test_the_ten_minute_window_forgets_what_is_older_than_a_window_and_a_bucket():
    bucket = 600 / BUCKETS
    w = WindowedCounters(start=0.0)
    emitted = 0
    t = 0.0
    # One tuple a second for an hour, observed every second.
    while t < 3600:
        t += 1
        emitted += 1
        w.observe(t, {"emitted|default": emitted})
    got = w.windows(t, {"emitted|default": emitted})
    secs, values = got["600"]
    assert 600 <= secs <= 600 + bucket
    assert values["emitted|default"] == pytest.approx(secs)
    assert got["10800"][1]["emitted|default"] == 3600  # younger than the window: all of it
    assert got[ALL_TIME] == (3600.0, {"emitted|default": 3600})


def test_counters_that_did_not_move_in_a_window_are_left_out():
    w = WindowedCounters(start=0.0)
    w.observe(0.0, {"acked|default": 5})
    for t in range(1, 1300):
        w.observe(float(t), {"acked|default": 5, "emitted|default": t})
    secs, values = w.windows(1300.0, {"acked|default": 5, "emitted|default": 1300})["600"]
    assert "acked|default" not in values and values["emitted|default"] > 0


def test_per_window_figures_latency_capacity_and_system_streams():
    window = {
        "emitted|default": 100, "emitted|__ack_init": 100,
        "executed|spout:default": 40, "executed|split:default": 60,
        "execute_ms_sum|spout:default": 40.0, "execute_count|spout:default": 40,
        "execute_ms_sum|split:default": 240.0, "execute_count|split:default": 60,
    }
    assert stats.by_key(window, stats.EMITTED) == {"default": 100, "__ack_init": 100}
    assert stats.total(window, stats.EMITTED, lambda k: not stats.is_system_stream(k)) == 100
    assert stats.total(window, stats.EXECUTED) == 100
    assert stats.average_ms(window, stats.EXECUTE_MS, stats.EXECUTE_N) == pytest.approx(2.8)
    assert stats.average_ms({}, stats.COMPLETE_MS, stats.COMPLETE_N) == 0.0
    assert stats.capacity(window, 1.0) == pytest.approx(0.28)
    assert stats.capacity(window, 0.0) == 0.0
    assert stats.capacity({"execute_ms_sum|a:b": 5000.0}, 1.0) == 1.0
    merged = stats.add_counters([window, {"emitted|default": 1}])
    assert merged["emitted|default"] == 101 and merged["executed|split:default"] == 60
    assert stats.is_system_stream("__tick") and stats.is_system_stream("__system:__tick")
    assert not stats.is_system_stream("split:default")
