"""The Redis stream spout's bookkeeping and decisions (executor/spouts/stream_ledger.py), no Redis."""

from __future__ import annotations

import pytest

from executor.errors import InvalidTopologyError
from executor.spouts.stream_ledger import (
    StreamLedger,
    UnmappableEntry,
    check_start,
    check_streams,
    claim_idle_ms,
    id_order,
    later_id,
    map_fields,
    original_bytes,
    retry_delay,
    split_at,
)

pytestmark = pytest.mark.timeout(10)


def test_budget_counts_everything_in_flight_until_acked_or_given_up():
    ledger = StreamLedger(limit=3)
    assert ledger.budget() == 3 and ledger.budget(held=1) == 2
    assert ledger.take(("s", "1-0")) and ledger.take(("s", "1-1")) and ledger.take(("s", "2-0"))
    assert ledger.budget() == 0
    assert ledger.failed(("s", "1-0"))            # to be replayed: still in flight
    assert ledger.budget() == 0
    assert ledger.acked(("s", "1-1"))
    ledger.forget(("s", "2-0"))
    assert ledger.budget() == 2


def test_an_entry_taken_twice_is_emitted_once():
    ledger = StreamLedger(limit=10)
    assert ledger.take(("s", "5-0"))
    assert not ledger.take(("s", "5-0"))  # claimed back while already in flight here


def test_max_deliveries_gives_up_after_that_many_failures():
    ledger = StreamLedger(limit=10, max_deliveries=2)
    ledger.take(("s", "1-0"))
    assert ledger.failed(("s", "1-0")) is True
    assert ledger.failed(("s", "1-0")) is False
    assert ledger.failed(("s", "9-9")) is None  # unknown: nothing to replay
    assert StreamLedger(limit=1).take(("s", "1-0"))


def test_acks_of_unknown_entries_are_ignored():
    ledger = StreamLedger(limit=10)
    assert not ledger.acked(("s", "1-0"))
    ledger.take(("s", "1-0"))
    ledger.failed(("s", "1-0"))
    assert ledger.acked(("s", "1-0")) and ledger.fails == {}


def test_ids_order_as_redis_orders_them():
    assert id_order("10-2") > id_order("9-99") and id_order("5") == (5, 0)
    assert later_id(None, "1-0") == "1-0" and later_id("2-0", "1-5") == "2-0"


def test_fields_map_to_text_or_say_which_field_is_not():
    def decoded(*raw: bytes) -> list[str]:  # as the spout's connection decodes them
        return [b.decode("utf-8", "surrogateescape") for b in raw]

    assert map_fields(decoded(b"a", b"1", b"b", b"x")) == {"a": "1", "b": "x"}
    assert map_fields(decoded(b"s", b"the cow")) == {"s": "the cow"}  # one field: the short path
    assert map_fields(decoded(b"caf\xc3\xa9", b"\xe2\x82\xac")) == {"café": "€"}
    with pytest.raises(UnmappableEntry, match="the value of field 'a' is not UTF-8"):
        map_fields(decoded(b"a", b"\xff"))
    with pytest.raises(UnmappableEntry, match=r"field name b'\\xff' is not UTF-8"):
        map_fields(decoded(b"\xff", b"1"))
    with pytest.raises(UnmappableEntry, match="no fields"):
        map_fields([])
    assert original_bytes(decoded(b"x\xff")[0]) == b"x\xff"


def test_validation_of_streams_and_start():
    assert check_streams("s") == ("s",) and check_streams(["a", "b"]) == ("a", "b")
    for bad in ("", [], ["a", ""], 3, None):
        with pytest.raises(InvalidTopologyError):
            check_streams(bad)
    assert check_start("$") == "$" and check_start("0") == "0" and check_start("17-3") == "17-3"
    assert check_start(0) == "0"
    for bad in ("latest", "1-", "-1", None, 1.5):
        with pytest.raises(InvalidTopologyError):
            check_start(bad)


def test_claim_idle_is_twice_the_message_timeout_and_retries_back_off():
    assert claim_idle_ms(30) == 60_000 and claim_idle_ms(0.1) == 1000
    assert [retry_delay(n) for n in (1, 2, 3, 4, 5, 50)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_split_at_the_committed_position_separates_entries_to_xack_from_entries_to_emit():
    entries = [["1-0", ["n", "1"]], ["1-1", ["n", "2"]], ["2-0", ["n", "3"]]]
    assert split_at(entries, "1-1") == ([["2-0", ["n", "3"]]], ["1-0", "1-1"])
    assert split_at(entries, "0-9") == (entries, [])
    assert split_at(entries, "9-0") == ([], ["1-0", "1-1", "2-0"])


class _Fetcher:
    """What StreamCursor reads of its fetcher: the ready batches, acks, problems, counters."""

    def __init__(self):
        from collections import deque

        self.ready, self.acks, self.problems, self.dead = deque(), deque(), deque(), deque()
        self.offered = 0

    def wake(self):
        pass

    def put(self, kind, stream, entries):
        from executor.spouts.stream_fetcher import Fetched

        self.offered += len(entries)
        self.ready.append(Fetched(kind, stream, entries))


def test_a_rewound_cursor_drops_what_was_read_before_it_and_keeps_positions_per_batch():
    from executor.spouts.stream_cursor import StreamCursor
    from executor.spouts.stream_fetcher import NEW, REWOUND

    fetcher, emitted = _Fetcher(), []
    cursor = StreamCursor(StreamLedger(100), fetcher, lambda values, stream, msg_id: emitted.append(msg_id),
                          ("s",), wake_at=1, on_problems=lambda: None)
    fetcher.put(NEW, "s", [["1-0", ["n", "1"]], ["1-1", ["n", "2"]]])
    fetcher.put(NEW, "s", [["2-0", ["n", "3"]]])
    assert cursor.next_tuple() and cursor.positions() == {"s": "1-0"}
    assert cursor.next_tuple() and cursor.next_tuple() and cursor.positions() == {"s": "2-0"}
    fetcher.put(NEW, "s", [["3-0", ["n", "4"]]])      # read ahead before the rewind
    number = cursor.rewind()
    assert cursor.positions() == {} and cursor.ledger.in_flight == set()
    fetcher.put(NEW, "s", [["3-1", ["n", "5"]]])      # still before the fetcher saw the rewind
    fetcher.put(REWOUND, number, [])
    fetcher.put(NEW, "s", [["2-0", ["n", "3"]], ["3-0", ["n", "4"]]])  # the pending list again
    assert cursor.next_tuple() and emitted[-1] == "2-0"   # the stale batches dropped on the way
    assert cursor.next_tuple() and not cursor.next_tuple()
    assert emitted == ["1-0", "1-1", "2-0", "2-0", "3-0"]
    assert cursor.positions() == {"s": "3-0"}
    assert cursor.budget() == 100 - 2  # the dropped entries count as taken: nothing held
