"""Windowed bolts on a LocalCluster and on the dev cluster: the windows a count window and an
event-time window hand out equal a plain-Python computation of the same windows over the
tuples that were not late; late tuples go to the late tuple stream; a window's tuples are acked
as they leave it, and an emit is anchored to them."""

import pytest

pytestmark = pytest.mark.timeout(150)

N, BASE = 200, 1_700_000_000_000  # as topologies/windowed.py


def event_ts(n):
    if n % 7:
        return BASE + 1000 * n
    # out of order: within the lag, or late (maybe, while the first windows fill; past 60 surely)
    return BASE + 1000 * n - (4500 if n <= 60 else 100_000)


def test_count_and_event_time_windows_match_a_plain_computation(cluster):
    run = cluster.submit("windowed.py", "windows")
    r = run.results
    run.wait(lambda: len(r.records("count", "window")) == N // 10, "every count window")
    assert [w["values"] for w in r.records("count", "window")] == [list(range(i, i + 10)) for i in range(1, N, 10)]
    assert all(w["start"] is None and w["new"] == w["values"] for w in r.records("count", "window"))
    # A tuple is acked when it has left both windows: the first 190 leave the count window and,
    # once later watermarks pass, the event-time one.
    run.wait(lambda: set(range(1, 191)) <= set(r.ids("ack")), lambda: f"acks ({len(r.ids('ack'))})")
    assert r.ids("fail") == []

    def event_windows_complete():
        ws = r.records("events", "window")
        return ws and ws[-1]["end"] >= BASE + 1000 * (N - 6)

    run.wait(event_windows_complete, "the event-time windows up to the last numbers")
    late = {rec["values"][0][0] for rec in r.records("late", "got")}
    assert {n for n in range(61, N + 1) if n % 7 == 0} <= late and all(n % 7 == 0 for n in late)
    on_time = {n: event_ts(n) for n in range(1, N + 1) if n not in late}
    for w in r.records("events", "window"):
        want = sorted(n for n, ts in on_time.items() if w["end"] - 3000 < ts <= w["end"])
        assert sorted(w["values"]) == want, w
        assert w["start"] == w["end"] - 3000 and w["end"] % 1000 == 0
    # every emit reached the sink
    assert len(r.records("sums", "got")) >= N // 10
    # the late tuples counted where the topology page and /metrics read them (stats heartbeats)
    from daemons.answers.details import TopologyDetails
    from daemons.reports.views import topology_detail

    def page_windows():
        return topology_detail(TopologyDetails.from_wire(cluster.topology_details("windows")))["windows"]

    def late_counted():
        wins = page_windows() or []
        return {w["componentId"]: w for w in wins}.get("events", {}).get("lateTuples", 0) >= len(late)

    run.wait(late_counted, lambda: f"late tuples in the stats ({page_windows()})")


def test_a_persistent_window_keeps_its_tuples_in_the_state(cluster):
    PN = 300  # as topologies/persistent_window.py
    run = cluster.submit("persistent_window.py", "pwindow")
    r = run.results
    # every number acked: a persistent window acks its tuples once a checkpoint holding them
    # commits, long before they leave the window (max pending 40 is smaller than the window's 20 +
    # what waits for the commit, and the run still ends)
    run.wait(lambda: set(r.ids("ack")) == set(range(1, PN + 1)), lambda: f"acks ({len(set(r.ids('ack')))})")
    assert r.ids("fail") == []
    run.wait(lambda: len(r.records("window", "window")) >= PN // 10, "every window")
    windows = r.records("window", "window")
    assert [w["values"] for w in windows] == [list(range(max(1, i - 19), i + 1)) for i in range(10, PN + 1, 10)]
    assert all(w["new"] == w["values"][-10:] for w in windows)
    assert [w["expired"] for w in windows[:2]] == [[], []]
    assert [w["expired"] for w in windows[2:]] == [list(range(i - 29, i - 19)) for i in range(30, PN + 1, 10)]
