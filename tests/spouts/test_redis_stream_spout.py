"""RedisStreamSpout on a real Redis and a LocalCluster: every entry processed and XACKed, failed
and timed-out tuples replayed, a restarted task's and a dead consumer's pending entries taken
up, reads bounded by what may be in flight, and bad input (no Redis, a group or stream deleted,
an entry that is not text) handled without a crash."""

from __future__ import annotations

import threading

import pytest
from testutil import wait_until

from daemons.local import LocalCluster
from executor.api import Bolt, InvalidTopologyError, RedisStreamSpout, TopologyBuilder

pytestmark = [pytest.mark.timeout(120), pytest.mark.redis]


class Seen:
    """What the bolt tasks saw, shared with the test (not copied with the component)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rows: list[tuple[str, dict]] = []
        self.failed_once: set[str] = set()
        self.hold = False

    def __deepcopy__(self, memo):
        return self

    def ids(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.rows]


class Recorder(Bolt):
    """Acks every tuple; with fail_first, fails each entry the first time it sees it; with
    seen.hold, neither acks nor fails (tuples stay in flight)."""

    def __init__(self, seen: Seen, fail_first: bool = False):
        self.seen = seen
        self.fail_first = fail_first

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        entry_id, fields = tup.values
        who = (entry_id, fields["n"])  # two streams may hold the same entry id
        with self.seen.lock:
            self.seen.rows.append((entry_id, fields))
            first = who not in self.seen.failed_once
            if self.fail_first and first:
                self.seen.failed_once.add(who)
        if self.seen.hold:
            return
        if self.fail_first and first:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def _topology(spout, seen, parallelism=1, fail_first=False):
    builder = TopologyBuilder()
    builder.set_spout("events", spout, parallelism)
    builder.set_bolt("record", Recorder(seen, fail_first), 1).shuffle_grouping("events")
    return builder.create_topology()


def _fill(client, stream, n, first=0):
    pipe = client.pipeline(transaction=False)
    for i in range(first, first + n):
        pipe.xadd(stream, {"n": str(i)})
    return [x.decode() for x in pipe.execute()]


def _pending(client, stream, group) -> int:
    return client.xpending(stream, group)["pending"]


def _numbers(seen: Seen) -> set[int]:
    with seen.lock:
        return {int(f["n"]) for _, f in seen.rows}


CONF = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 500}


def test_every_entry_is_emitted_with_its_id_and_fields_and_acked(redis_server):
    client = redis_server.client()
    ids = _fill(client, "events", 300)
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=redis_server.port)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen))
        wait_until(lambda: len(seen.rows) >= 300, 60, "300 entries processed")
        wait_until(lambda: _pending(client, "events", "g") == 0, 30, "every entry XACKed")
        assert sorted(seen.ids()) == sorted(ids)
        assert all(f == {"n": str(i)} for (_, f), i in zip(sorted(seen.rows, key=lambda r: int(r[1]["n"])), range(300)))
        more = _fill(client, "events", 20, first=300)  # new entries keep flowing
        wait_until(lambda: set(more) <= set(seen.ids()), 30, "entries added later")
        consumers = client.xinfo_consumers("events", "g")
        assert [c["name"].decode() for c in consumers] == ["rs-events-0"]
    client.close()


def test_start_dollar_reads_only_new_entries(redis_server):
    client = redis_server.client()
    _fill(client, "events", 50)
    seen = Seen()
    spout = RedisStreamSpout("events", "late", port=redis_server.port, start="$")
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen))
        wait_until(lambda: any(g["name"] == b"late" for g in client.xinfo_groups("events")), 30, "group created")
        new = _fill(client, "events", 10, first=50)
        wait_until(lambda: len(seen.rows) >= 10, 30, "new entries")
        wait_until(lambda: _pending(client, "events", "late") == 0, 30, "acked")
        assert sorted(seen.ids()) == sorted(new)
    client.close()


def test_failed_tuples_are_replayed_until_acked_over_two_consumers(redis_server):
    client = redis_server.client()
    ids = _fill(client, "events", 200)
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=redis_server.port, max_in_flight=50)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen, parallelism=2, fail_first=True))
        wait_until(lambda: len(seen.rows) >= 400, 60, "every entry seen twice (failed, then replayed)")
        wait_until(lambda: _pending(client, "events", "g") == 0, 30, "every entry XACKed")
        counts: dict[str, int] = {}
        for entry_id in seen.ids():
            counts[entry_id] = counts.get(entry_id, 0) + 1
        assert set(counts) == set(ids) and set(counts.values()) == {2}
        names = sorted(c["name"].decode() for c in client.xinfo_consumers("events", "g"))
        assert names == ["rs-events-0", "rs-events-1"]
    client.close()


def test_reads_are_bounded_by_what_may_be_in_flight(redis_server):
    client = redis_server.client()
    _fill(client, "events", 2000)
    seen = Seen()
    seen.hold = True  # nothing is acked: the spout must stop reading at its limit
    spout = RedisStreamSpout("events", "g", port=redis_server.port, max_in_flight=120, batch=50)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", {**CONF, "topology.message.timeout.secs": 60}, _topology(spout, seen))
        wait_until(lambda: len(seen.rows) >= 120, 30, "the first 120 entries")
        # a while more of next_tuple calls: still no more delivered by the group than may be in flight
        wait_until(lambda: cluster.component_stats("rs").get("events", {}).get("emitted", 0) >= 120, 30, "stats")
        for _ in range(20):
            assert _pending(client, "events", "g") <= 120
            threading.Event().wait(0.05)
        assert len(seen.rows) == 120
    client.close()


def test_restarted_task_emits_its_pending_entries_again(redis_server):
    client = redis_server.client()
    ids = _fill(client, "events", 100)
    seen = Seen()
    seen.hold = True
    spout = RedisStreamSpout("events", "g", port=redis_server.port)
    conf = {**CONF, "topology.message.timeout.secs": 60}
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", conf, _topology(spout, seen))
        wait_until(lambda: len(seen.rows) >= 100, 30, "every entry delivered, none acked")
    assert _pending(client, "events", "g") == 100  # the worker is gone with them in flight
    again = Seen()
    with LocalCluster() as cluster:  # same topology name: the same consumer name
        cluster.submit_topology("rs", conf, _topology(spout, again))
        wait_until(lambda: _pending(client, "events", "g") == 0, 60, "the old run's pending entries processed")
        assert sorted(again.ids()) == sorted(ids)
    client.close()


def test_dead_consumers_entries_are_taken_over(redis_server):
    client = redis_server.client()
    ids = _fill(client, "events", 30)
    client.xgroup_create("events", "g", id="0")
    client.xreadgroup("g", "ghost", {"events": ">"}, count=30)  # a consumer that then died
    assert _pending(client, "events", "g") == 30
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=redis_server.port)
    with LocalCluster() as cluster:
        # message timeout 1 s: entries idle for over 2 s are taken over
        cluster.submit_topology("rs", {**CONF, "topology.message.timeout.secs": 1}, _topology(spout, seen))
        wait_until(lambda: _pending(client, "events", "g") == 0, 60, "the ghost's entries processed")
        assert sorted(set(seen.ids())) == sorted(ids)
    client.close()


def test_unreachable_redis_is_one_clear_error_then_retried(redis_server_factory, tmp_path):
    from redis_fixture import RedisServer

    port = _free_port()
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=port)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen))
        errors = wait_until(lambda: cluster.errors("rs"), 30, "an error reported")
        assert len(errors) == 1 and errors[0].component_id == "events", errors
        text = errors[0].error
        assert f"127.0.0.1:{port}" in text and "unreachable" in text and "Traceback" not in text, text
        server = RedisServer(tmp_path / "late", port=port).start()
        try:
            client = server.client()
            ids = _fill(client, "events", 10)
            wait_until(lambda: sorted(seen.ids()) == sorted(ids), 30, "entries once Redis is up")
            assert not cluster.died("rs")
            assert len(cluster.errors("rs")) == 1  # one per outage, not one per retry
            client.close()
        finally:
            server.stop()


def test_group_and_stream_deleted_mid_run(redis_server):
    client = redis_server.client()
    first = _fill(client, "events", 10)
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=redis_server.port)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen))
        wait_until(lambda: sorted(seen.ids()) == sorted(first), 30, "first entries")
        client.xgroup_destroy("events", "g")
        second = _fill(client, "events", 10, first=10)
        wait_until(lambda: set(second) <= set(seen.ids()), 30, "entries after the group was deleted")
        errors = [e.error for e in cluster.errors("rs")]
        assert any("consumer group 'g' of stream 'events'" in e and "created again" in e for e in errors), errors
        client.delete("events")
        third = _fill(client, "events", 10, first=20)
        wait_until(lambda: set(third) <= set(seen.ids()), 30, "entries after the stream was deleted")
        assert not cluster.died("rs")
        assert len(seen.ids()) == len(set(seen.ids())) == 30
    client.close()


def test_unmappable_entry_goes_to_the_dead_letter_stream(redis_server):
    client = redis_server.client()
    good1 = _fill(client, "events", 5)
    bad = client.xadd("events", {"n": b"\xff\xfe"}).decode()
    good2 = _fill(client, "events", 5, first=5)
    seen = Seen()
    spout = RedisStreamSpout("events", "g", port=redis_server.port)
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen))
        wait_until(lambda: len(seen.rows) >= 10, 30, "the good entries")
        wait_until(lambda: _pending(client, "events", "g") == 0, 30, "all acked, the bad one too")
        assert sorted(seen.ids()) == sorted(good1 + good2)
        dead = client.xrange("events:dead-letter")
        assert len(dead) == 1
        record = dead[0][1]
        assert record[b"storm-py.source.id"].decode() == bad and record[b"n"] == b"\xff\xfe"
        assert b"not UTF-8" in record[b"storm-py.reason"]
        errors = [e.error for e in cluster.errors("rs")]
        assert len(errors) == 1 and bad in errors[0] and "events:dead-letter" in errors[0], errors
        assert not cluster.died("rs")
    client.close()


def test_multiple_streams_and_max_deliveries(redis_server):
    client = redis_server.client()
    a = _fill(client, "a", 10)
    b = _fill(client, "b", 10, first=100)
    seen = Seen()
    # every entry fails once; with max_deliveries=1 each goes to the dead-letter stream instead
    spout = RedisStreamSpout(["a", "b"], "g", port=redis_server.port, max_deliveries=1, dead_letter_stream="dlq")
    with LocalCluster() as cluster:
        cluster.submit_topology("rs", CONF, _topology(spout, seen, fail_first=True))
        wait_until(lambda: client.xlen("dlq") == 20 if client.exists("dlq") else False, 30, "all dead-lettered")
        wait_until(lambda: _pending(client, "a", "g") + _pending(client, "b", "g") == 0, 30, "all acked")
        assert sorted(seen.ids()) == sorted(a + b)
        sources = sorted((r[b"storm-py.source.stream"].decode(), r[b"storm-py.source.id"].decode())
                         for _, r in client.xrange("dlq"))
        assert sources == sorted([("a", i) for i in a] + [("b", i) for i in b])
    client.close()


@pytest.mark.parametrize("kwargs, needle", [
    ({"stream": ""}, "stream must be"),
    ({"stream": ["a", "a"]}, "twice"),
    ({"group": ""}, "group must be"),
    ({"start": "latest"}, "start must be '$'"),
    ({"max_in_flight": 0}, "max_in_flight must be a positive integer"),
    ({"port": 70000}, "port must be"),
])
def test_bad_arguments_are_refused_naming_them(kwargs, needle):
    args = {"stream": "s", "group": "g", **kwargs}
    with pytest.raises(InvalidTopologyError) as info:
        RedisStreamSpout(**args)
    assert needle in str(info.value) and "RedisStreamSpout" in str(info.value)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
