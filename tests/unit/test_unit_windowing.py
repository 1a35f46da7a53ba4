"""Storm's windowing semantics, pure (executor/windowing): the window manager for count and
duration windows, sliding and tumbling, processing and event time (the cases of Storm's
WindowManagerTest), the watermarks (WaterMarkEventGeneratorTest), the settings' checks, and a
brute-force comparison over random timestamps."""

import math
import random

import pytest

from executor.errors import InvalidTopologyError
from executor.windowing import spec as S
from executor.windowing.bolt import BaseWindowedBolt
from executor.windowing.manager import WindowManager
from executor.windowing.spec import Count, Duration, check_against_topology, window_spec
from executor.windowing.watermarks import WatermarkGenerator

pytestmark = pytest.mark.timeout(30)


def manager(**conf):
    return WindowManager(window_spec("w", conf))


def windows(steps):
    return [(f.window, f.new, f.expired) for step in steps for f in step.fired]


def test_count_window_sliding():
    m = manager(**{S.LENGTH_COUNT_KEY: 5, S.SLIDING_COUNT_KEY: 2})
    steps = [m.add(i, 1000 + i) for i in range(1, 8)]
    assert windows(steps) == [([1, 2], [1, 2], []), ([1, 2, 3, 4], [3, 4], []), ([2, 3, 4, 5, 6], [5, 6], [1])]
    assert [x for s in steps for x in s.expired] == [1]


def test_count_window_tumbling():
    m = manager(**{S.LENGTH_COUNT_KEY: 3})
    steps = [m.add(i, 1000 + i) for i in range(1, 8)]
    assert windows(steps) == [([1, 2, 3], [1, 2, 3], []), ([4, 5, 6], [4, 5, 6], [1, 2, 3])]


def test_duration_window_sliding_in_processing_time():
    m = manager(**{S.LENGTH_DURATION_KEY: 1000, S.SLIDING_DURATION_KEY: 500})
    for i, ts in enumerate([100, 300, 600, 900, 1200]):
        assert not m.add(f"e{i}", ts).fired
    first = m.on_time(1000)  # 900 ms after the first tuple: the window ending at 500 too
    assert [(f.start, f.end) for f in first.fired] == [(-500, 500), (0, 1000)]
    f = first.fired[-1]
    assert first.fired[0].window == ["e0", "e1"] and f.window == ["e0", "e1", "e2", "e3"]
    second = m.on_time(1500)
    (f,) = second.fired
    assert f.window == ["e2", "e3", "e4"] and f.new == ["e4"] and f.expired == ["e0", "e1"]
    assert second.expired == ["e0", "e1"]
    # A late tick fires the windows it missed (ending at 2000; the one at 2500 is empty)
    late = m.on_time(3000)
    (f,) = late.fired
    assert f.window == ["e4"] and f.new == [] and f.end == 2000 and f.expired == ["e2", "e3"]
    assert late.expired == ["e2", "e3", "e4"] and len(m) == 0  # e4 left at 2500 (an empty window)


def test_a_late_tick_fires_the_tumbling_windows_it_missed_so_no_tuple_leaves_unseen():
    m = manager(**{S.LENGTH_DURATION_KEY: 500})
    assert not m.on_time(1000).fired  # the first tick starts the grid: 1000, 1500, 2000, ...
    for ts in (1100, 1400, 1600, 1900, 2100):
        m.add(ts, ts)
    step = m.on_time(2300)  # the ticks at 1500 and 2000 came late, together
    assert [f.window for f in step.fired] == [[1100, 1400], [1600, 1900]]
    assert step.expired == [1100, 1400]  # what left had been in a window
    assert [f.window for f in m.on_time(2500).fired] == [[2100]]


def test_a_first_tick_long_after_the_first_tuples_fires_windows_back_to_them():
    m = manager(**{S.LENGTH_DURATION_KEY: 500})
    for ts in (100, 700, 1300):  # a busy start: the first tick comes 1.2 s after the first tuple
        m.add(ts, ts)
    step = m.on_time(1300)
    assert [(f.start, f.end, f.window) for f in step.fired] == [(-200, 300, [100]), (300, 800, [700]),
                                                                (800, 1300, [1300])]


def test_duration_window_tumbling_and_count_slide_over_duration():
    m = manager(**{S.LENGTH_DURATION_KEY: 1000})
    for ts in (10, 20, 1010):
        m.add(ts, ts)
    assert [f.window for f in m.on_time(1000).fired] == [[10, 20]]
    m2 = manager(**{S.LENGTH_DURATION_KEY: 100, S.SLIDING_COUNT_KEY: 2})
    steps = [m2.add(ts, ts) for ts in (0, 50, 120, 130)]
    assert windows(steps) == [([0, 50], [0, 50], []), ([50, 120, 130], [120, 130], [0])]  # (30, 130]


def test_count_window_with_duration_slide():
    m = manager(**{S.LENGTH_COUNT_KEY: 2, S.SLIDING_DURATION_KEY: 100})
    for ts in (1, 2, 3):
        m.add(ts, ts)
    (f,) = m.on_time(100).fired
    assert f.window == [2, 3] and f.start is None and f.expired == [1]


def event_manager(**conf):
    return manager(**{S.TIMESTAMP_FIELD_KEY: "ts", **conf})


def test_event_time_sliding_windows_end_at_multiples_of_the_slide():
    m = event_manager(**{S.LENGTH_DURATION_KEY: 20, S.SLIDING_DURATION_KEY: 10})
    for ts in (5, 1, 18, 12, 25):  # out of order
        m.add(ts, ts)
    assert [(f.window, f.start, f.end) for f in m.on_watermark(20).fired] == [([1, 5], -10, 10),
                                                                            ([1, 5, 12, 18], 0, 20)]
    step = m.on_watermark(40)
    assert [(f.window, f.expired) for f in step.fired] == [([12, 18, 25], [1, 5]), ([25], [12, 18])]
    # windows hold start < ts <= end (Storm's EventTimeEvictionPolicy)
    m = event_manager(**{S.LENGTH_DURATION_KEY: 10})
    for ts in (10, 20):
        m.add(ts, ts)
    assert [f.window for f in m.on_watermark(20).fired] == [[10], [20]]


def test_event_time_skips_spans_without_tuples():
    m = event_manager(**{S.LENGTH_DURATION_KEY: 10})
    m.add("a", 3)
    m.add("b", 1005)
    assert [(f.window, f.end) for f in m.on_watermark(2000).fired] == [(["a"], 10), (["b"], 1010)]


def test_event_time_count_slide():
    m = event_manager(**{S.LENGTH_COUNT_KEY: 3, S.SLIDING_COUNT_KEY: 2})
    for ts in (30, 10, 50, 20, 40):
        m.add(ts, ts)
    assert [f.window for f in m.on_watermark(35).fired] == [[10, 20]]
    step = m.on_watermark(60)
    assert [(f.window, f.expired) for f in step.fired] == [([20, 30, 40], [10])]


def test_watermark_is_the_oldest_newest_stream_minus_lag_and_late_tuples():
    g = WatermarkGenerator({"a", "b"}, lag_ms=5)
    assert g.track("a", 100) and g.advance() is None  # b has sent nothing yet
    assert g.track("b", 50) and g.advance() == 45
    assert g.advance() is None  # unchanged
    assert not g.track("a", 40)  # before the last watermark: late
    assert g.track("b", 45)
    g.track("b", 300)
    assert g.advance() == 95


def test_settings_checks_name_the_component_and_the_key():
    cases = [
        ({S.LENGTH_COUNT_KEY: 0}, S.LENGTH_COUNT_KEY),
        ({S.LENGTH_DURATION_KEY: -5}, S.LENGTH_DURATION_KEY),
        ({S.LENGTH_DURATION_KEY: math.nan}, S.LENGTH_DURATION_KEY),
        ({S.LENGTH_COUNT_KEY: "3"}, S.LENGTH_COUNT_KEY),
        ({S.LENGTH_COUNT_KEY: True}, S.LENGTH_COUNT_KEY),
        ({S.LENGTH_COUNT_KEY: 3, S.SLIDING_DURATION_KEY: 0}, S.SLIDING_DURATION_KEY),
        ({}, S.LENGTH_COUNT_KEY),
        ({S.LENGTH_DURATION_KEY: 100, S.TIMESTAMP_FIELD_KEY: "ts", S.LAG_KEY: 500}, S.LAG_KEY),
        ({S.LENGTH_DURATION_KEY: 100, S.LATE_STREAM_KEY: "late"}, S.LATE_STREAM_KEY),
    ]
    for conf, key in cases:
        with pytest.raises(InvalidTopologyError) as e:
            window_spec("counter", conf)
        assert "'counter'" in str(e.value) and key in str(e.value), (conf, str(e.value))


def test_window_longer_than_the_timeout_or_max_pending_is_refused():
    spec = window_spec("w", {S.LENGTH_DURATION_KEY: 20000, S.SLIDING_DURATION_KEY: 10000})
    with pytest.raises(InvalidTopologyError, match="'w'.*topology.message.timeout.secs"):
        check_against_topology("w", spec, {"topology.message.timeout.secs": 30})
    check_against_topology("w", spec, {"topology.message.timeout.secs": 31})
    spec = window_spec("w", {S.LENGTH_COUNT_KEY: 600})  # tumbling: length + slide = 1200
    with pytest.raises(InvalidTopologyError, match="topology.max.spout.pending"):
        check_against_topology("w", spec, {"topology.max.spout.pending": 1000})


def test_the_bolts_chain_keeps_storms_keys_and_refuses_bad_values():
    class B(BaseWindowedBolt):
        def execute(self, window):
            pass

    b = B().with_window(Duration(10), Duration(1)).with_timestamp_field("ts").with_lag(Duration(2)) \
        .with_watermark_interval(Duration(0.5)).with_late_tuple_stream("late")
    conf = b.get_component_configuration()
    assert conf[S.LENGTH_DURATION_KEY] == 10000 and conf[S.SLIDING_DURATION_KEY] == 1000
    assert conf[S.LAG_KEY] == 2000 and conf["topology.tick.tuple.freq.secs"] == 0.5
    assert B().with_tumbling_window(Count(5)).get_component_configuration()[S.SLIDING_COUNT_KEY] == 5
    for call in (lambda: B().with_window(5), lambda: B().with_window(Duration(0)), lambda: Count(0),
                 lambda: Duration(math.inf), lambda: B().with_lag(3)):
        with pytest.raises(InvalidTopologyError):
            call()


@pytest.mark.parametrize("seed", range(5))
def test_event_time_windows_match_a_brute_force_computation(seed):
    rng = random.Random(seed)
    length, slide = rng.choice([(100, 100), (100, 25), (60, 20)])
    m = event_manager(**{S.LENGTH_DURATION_KEY: length, S.SLIDING_DURATION_KEY: slide})
    stamps = [rng.randrange(1, 1000) for _ in range(300)]
    got = []
    for i, ts in enumerate(stamps):
        m.add((ts, i), ts)
    for wm in (250, 600, 1100):
        got += [(f.end, sorted(f.window)) for f in m.on_watermark(wm).fired]
    want = []
    for end in range(slide, 1100 + 1, slide):
        inside = sorted((ts, i) for i, ts in enumerate(stamps) if end - length < ts <= end)
        if inside:
            want.append((end, inside))
    assert got == want


def test_a_restored_tumbling_window_hands_out_only_what_it_had_not():
    # The items of the window last handed out stay in the manager until the next one expires
    # them; restored (an exactly-once rollback, a restart) they must not come round again.
    m = manager(**{S.LENGTH_DURATION_KEY: 500})  # tumbling 0.5 s
    m.on_time(1000.0)  # the grid: ends 1000, 1500, 2000, ...
    for i in range(3):
        m.add(i, 1100.0 + i)
    assert [w[0] for w in windows([m.on_time(1500.0)])] == [[0, 1, 2]]
    m.add(3, 1600.0)
    m.add(4, 1700.0)
    data = m.snapshot(lambda x: x)
    again = WindowManager(m.spec)
    again.restore(data, lambda x: x)
    again.restamp(60_000.0)  # the newest item arrived now; the grid end 2000 moves to 60,300
    assert windows([again.on_time(60_200.0)]) == []
    assert [w[0] for w in windows([again.on_time(60_300.0)])] == [[3, 4]]


def test_items_arriving_after_a_restore_never_fall_into_a_window_already_handed_out():
    # The snapshot holds only the window last handed out (ends 1000, 1500, ...: items of
    # (1000, 1500] fired at 1500, the next end 2000). Restored at 60,000 with the newest item
    # moved to now, that window's end moved to 60,200, ahead of now: what arrived before it lay
    # in a window already handed out and left unseen at the next one (a dev cluster's word count
    # lost ~100 sentences at the task that stayed alive through a worker kill).
    m = manager(**{S.LENGTH_DURATION_KEY: 500})  # tumbling 0.5 s
    m.on_time(1000.0)
    for i in range(3):
        m.add(i, 1100.0 + i * 100)  # the newest at 1300
    assert [w[0] for w in windows([m.on_time(1500.0)])] == [[0, 1, 2]]
    again = WindowManager(m.spec)
    again.restore(m.snapshot(lambda x: x), lambda x: x)
    again.restamp(60_000.0)
    again.add(3, 60_050.0)
    again.add(4, 60_150.0)
    step = again.on_time(60_600.0)
    assert [w[0] for w in windows([step])] == [[3, 4]]
    assert step.expired == [0, 1, 2]


def test_restored_items_in_processing_time_are_handed_out_by_the_next_window():
    m = manager(**{S.LENGTH_DURATION_KEY: 500})  # tumbling 0.5 s
    for i in range(3):
        m.add(i, 1000.0 + i)
    data = m.snapshot(lambda x: x)
    again = WindowManager(m.spec)
    again.restore(data, lambda x: x)
    # a worker's downtime later, with their old arrival times: a window of their own time
    assert [w[0] for w in windows([again.on_time(60_000.0)])] == [[0], [1, 2]]  # grid ends 1000, 1500
    again = WindowManager(m.spec)
    again.restore(data, lambda x: x)
    again.restamp(60_000.0)
    assert [w[0] for w in windows([again.on_time(60_100.0)])] == [[0, 1, 2]]


def test_a_processing_time_window_fires_within_its_slide_and_a_count_or_event_time_one_never_by_time():
    from executor.windowing.spec import (
        LENGTH_COUNT_KEY,
        LENGTH_DURATION_KEY,
        SLIDING_DURATION_KEY,
        TIMESTAMP_FIELD_KEY,
        fires_within_secs,
    )

    assert fires_within_secs({LENGTH_DURATION_KEY: 500}) == 0.5  # tumbling: its length
    assert fires_within_secs({LENGTH_DURATION_KEY: 10_000, SLIDING_DURATION_KEY: 2_000}) == 2.0
    assert fires_within_secs({LENGTH_COUNT_KEY: 100}) == 0.0
    assert fires_within_secs({LENGTH_DURATION_KEY: 500, TIMESTAMP_FIELD_KEY: "ts"}) == 0.0
    assert fires_within_secs({}) == 0.0
