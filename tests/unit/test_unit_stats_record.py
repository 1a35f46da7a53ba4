"""The executor stats record, its wire form, the worker's keeper (windows, carry-over across a
restart) and the one merge (executor/stats.py), with a fake clock."""

from __future__ import annotations

import logging

import msgpack
import pytest

from cluster_state.records import WorkerHeartbeat
from executor.stats import component_figures, component_totals, input_streams, output_streams
from executor.stats_keeper import StatsKeeper, carried_from_heartbeats, with_carried
from executor.stats_record import ExecutorStats, StatsDecodeError, decode_records, from_wire, to_wire
from executor.stats_windows import ALL_TIME


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Source:
    """An executor as the keeper sees it."""

    def __init__(self, executor, component="count", kind="bolt"):
        self.executor_id = executor
        self.component_id = component
        self.kind = kind
        self.c: dict[str, float] = {}
        self.g = {"queue_population": 3, "queue_capacity": 100, "backpressure": False}

    def counters(self):
        return dict(self.c)

    def gauges(self):
        return dict(self.g)


def test_wire_round_trip_keeps_every_window_and_gauge():
    rec = ExecutorStats("split", "bolt", 12, {
        "600": (600.0, {"executed|spout:default": 10, "execute_ms_sum|spout:default": 2.5}),
        "10800": (700.0, {"executed|spout:default": 12}), "86400": (700.0, {}),
        ALL_TIME: (700.0, {"executed|spout:default": 12, "emitted|default": 40})},
        queue_population=5, queue_capacity=1024, backpressure=True)
    back = from_wire(msgpack.unpackb(msgpack.packb(to_wire(rec))))
    assert back.windows == rec.windows
    assert (back.component, back.kind, back.uptime_secs) == ("split", "bolt", 12)
    assert (back.queue_population, back.queue_capacity, back.backpressure) == (5, 1024, True)


@pytest.mark.parametrize("garbage", [
    None, 7, "x", [], [1] * 11, [2, "c", "bolt", 0, 0, 0, False, 0, True, [], [[0, []]] * 4],
    [1, "c", "nope", 0, 0, 0, False, 0, True, [], [[0, []]] * 4],
    [1, "c", "bolt", -1, 0, 0, False, 0, True, [], [[0, []]] * 4],
    [1, "c", "bolt", 0, 0, 0, False, 0, True, ["k"], [[0, []]] * 4],          # values shorter than keys
    [1, "c", "bolt", 0, 0, 0, False, 0, True, ["k"], [[0, ["x"]]] * 4],       # a value not a number
    [1, "c", "bolt", 0, 0, 0, False, 0, True, [], [[0, []]] * 3],             # a window missing
    [1, "c", "bolt", 0, 0, 0, False, 0, True, [], [[float("nan"), []]] * 4],
])
def test_garbage_records_are_refused_with_a_reason(garbage):
    with pytest.raises(StatsDecodeError):
        from_wire(garbage)


def test_decode_records_skips_garbage_with_a_warning_naming_the_executor(caplog):
    good = to_wire(ExecutorStats("c", "bolt", 1, {ALL_TIME: (1.0, {"emitted|default": 2})}))
    with caplog.at_level(logging.WARNING):
        out = decode_records("topology t-1", {(1, 1): good, (2, 2): ["truncated"], (3, 3): None})
    assert set(out) == {(1, 1)}
    assert "topology t-1" in caplog.text and "(2, 2)" in caplog.text


def test_a_worker_of_200_executors_heartbeats_far_below_zookeepers_node_limit():
    keeper, clock = StatsKeeper(Clock()), None
    sources = []
    for i in range(200):
        s = Source((i, i), component=f"component-with-a-long-name-{i % 10}")
        for stream in ("default", "words-with-a-long-stream-name", "__ack_ack"):
            s.c[f"emitted|{stream}"] = 10 ** 9 + i
            s.c[f"transferred|{stream}"] = 2 * 10 ** 9 + i
        for src in ("spout-number-one", "another-upstream-bolt"):
            for m in ("executed", "acked", "failed", "execute_ms_sum", "execute_count"):
                s.c[f"{m}|{src}:default"] = 123456.789 + i
        sources.append(s)
    records = keeper.records(sources)
    beat = WorkerHeartbeat(storm_id="t-1", executors=tuple((i, i) for i in range(200)), port=6700, time_secs=1,
                           uptime_secs=1, executor_stats={ex: to_wire(r) for ex, r in records.items()})
    size = len(msgpack.packb({"executor_stats": [[list(k), v] for k, v in beat.executor_stats.items()]}))
    assert size < 400_000, size  # ZooKeeper's default node limit is 1 MB
    assert clock is None


def test_windows_count_what_was_added_in_them_and_all_time_everything():
    clock = Clock()
    keeper = StatsKeeper(clock)
    src = Source((1, 1))
    for i in range(71):  # a heartbeat every 10 s for 700 s; one tuple a second
        src.c = {"executed|spout:default": 10 * i}
        rec = keeper.records([src])[(1, 1)]
        clock.t += 10
    assert rec.window(ALL_TIME)[1] == {"executed|spout:default": 700}
    secs, ten_min = rec.window("600")
    # From the newest snapshot at least 600 s old: at most a bucket (30 s) more than the window.
    assert 600 <= secs <= 630 and ten_min["executed|spout:default"] == secs
    assert rec.window("10800")[1]["executed|spout:default"] == 700
    assert rec.queue_population == 3 and rec.queue_capacity == 100


def test_a_restarted_worker_carries_what_the_newest_earlier_heartbeat_reported():
    clock = Clock()
    old = StatsKeeper(clock)
    src = Source((1, 2))
    src.c = {"emitted|default": 500, "acked|default": 400}
    early = {(1, 2): to_wire(old.records([src])[(1, 2)])}
    clock.t += 100
    src.c = {"emitted|default": 900, "acked|default": 800}
    late = {(1, 2): to_wire(old.records([src])[(1, 2)])}
    other = {(3, 3): to_wire(old.records([Source((3, 3))])[(3, 3)])}
    carried = carried_from_heartbeats([(1100, late), (1000, early), (1200, other)], [(1, 2)])
    assert set(carried) == {(1, 2)} and carried[(1, 2)].time_secs == 1100
    assert carried[(1, 2)].windows[ALL_TIME][1] == {"emitted|default": 900, "acked|default": 800}

    clock.t += 20
    new = StatsKeeper(clock)  # the new worker counts from 0 again
    new.carry(carried, wall_now=1120)
    fresh = Source((1, 2))
    fresh.c = {"emitted|default": 10, "acked|default": 5}
    rec = new.records([fresh])[(1, 2)]
    assert rec.window(ALL_TIME)[1] == {"emitted|default": 910, "acked|default": 805}
    # A topology younger than the window: the window holds all of it, over all its seconds.
    secs, ten_min = rec.window("600")
    assert ten_min == rec.window(ALL_TIME)[1] and secs == 120
    # A second restart carries the carried figures on.
    again = carried_from_heartbeats([(1120, {(1, 2): to_wire(rec)})], [(1, 2)])
    assert again[(1, 2)].windows["600"][1]["emitted|default"] == 910


def test_what_an_earlier_worker_counted_leaves_a_window_as_it_ages():
    # It reported 600 tuples over its last 600 s, 100 s ago; its all time was 5000.
    carried = {"600": (600.0, {"emitted|default": 600}), ALL_TIME: (3000.0, {"emitted|default": 5000})}
    own = {"600": (100.0, {"emitted|default": 50}), ALL_TIME: (100.0, {"emitted|default": 50})}
    out = with_carried(own, carried, age=100.0)
    assert out[ALL_TIME][1] == {"emitted|default": 5050}
    # 500 of its 600 seconds are still in the window: 500 of its tuples, the window 600 s long
    assert out["600"] == (600.0, {"emitted|default": 550})
    assert with_carried(own, carried, age=600.0)["600"] == own["600"]  # gone once a window old
    # a reported window of no seconds (a worker killed at once) counts until a window passed
    assert with_carried(own, {"600": (0.0, {"emitted|default": 3})}, age=10.0)["600"][1] == {"emitted|default": 53}


def _rec(kind, counters, window_secs=600.0, **gauges):
    return ExecutorStats("c", kind, 1, {"600": (window_secs, counters), ALL_TIME: (window_secs, counters)}, **gauges)


def test_the_merge_adds_counts_weights_latencies_and_takes_the_busiest_executor_for_capacity():
    a = _rec("bolt", {"executed|spout:default": 10, "execute_ms_sum|spout:default": 10.0,
                      "execute_count|spout:default": 10, "acked|spout:default": 10,
                      "emitted|default": 30, "transferred|default": 30, "executed|__system:__tick": 1})
    b = _rec("bolt", {"executed|spout:default": 30, "execute_ms_sum|spout:default": 300_000.0,
                      "execute_count|spout:default": 30, "acked|spout:default": 29, "failed|spout:default": 1},
             backpressure=True)
    fig = component_figures([a, b], "600", include_sys=False)
    assert (fig["executed"], fig["acked"], fig["failed"], fig["emitted"]) == (40, 39, 1, 30)
    assert fig["execute_latency_ms"] == pytest.approx(300_010 / 40)
    assert fig["capacity"] == pytest.approx(0.5)  # 300 s of 600
    assert fig["backpressure"] is True
    assert component_figures([a, b], "600", include_sys=True)["executed"] == 41
    ins = input_streams([a, b], "600", include_sys=False)
    assert set(ins) == {("spout", "default")} and ins[("spout", "default")]["failed"] == 1
    assert output_streams([a, b], "600", include_sys=False) == {
        "default": {"emitted": 30, "transferred": 30, "acked": 0, "failed": 0, "complete_latency_ms": 0.0}}


def test_spout_figures_split_timeouts_and_say_why_next_tuple_was_skipped():
    s = _rec("spout", {"emitted|default": 100, "acked|default": 90, "failed|default": 10, "timeouts|default": 4,
                       "complete_ms_sum|default": 50.0, "complete_count|default": 5,
                       "skipped_ms|max_pending": 1500.0}, pending=7, active=True)
    fig = component_totals([s])
    assert (fig["acked"], fig["failed"], fig["timeouts"], fig["pending"]) == (90, 10, 4, 7)
    assert fig["complete_latency_ms"] == 10.0
    assert fig["skipped_ms"] == {"inactive": 0.0, "max_pending": 1500.0, "backpressure": 0.0}


def test_gauges_of_a_kind_of_component_ride_along_and_garbage_is_refused():
    rec = ExecutorStats("$checkpointspout", "spout", 5, {}, extra={"last_committed_txid": 7, "commit_latency_ms": None})
    back = from_wire(msgpack.unpackb(msgpack.packb(to_wire(rec))))
    assert back.extra == {"last_committed_txid": 7, "commit_latency_ms": None}
    assert len(to_wire(ExecutorStats("x", "bolt", 5, {}))) == 11  # none: the record stays as it was
    with pytest.raises(StatsDecodeError, match="bad gauges"):
        from_wire([*to_wire(ExecutorStats("x", "bolt", 5, {})), {"a": "text"}])
