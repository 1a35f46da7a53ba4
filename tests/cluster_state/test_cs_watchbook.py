"""Re-arming watches after a reconnection: which events a changed token produces (pure)."""

from __future__ import annotations

import pytest

from cluster_state import ClusterStateUnavailableError, EventType, NoNodeError, NotAuthorizedError
from cluster_state.watchbook import ABSENT, WatchBook

pytestmark = pytest.mark.timeout(10)


def run(book, data_now, children_now):
    events = []

    def current(table):
        def read(path):
            value = table[path]
            if isinstance(value, Exception):
                raise value
            return value
        return read

    book.rearm(current(data_now), current(children_now), lambda e, p: events.append((e, p)))
    return events


def test_unchanged_watches_are_rearmed_silently_and_kept():
    book = WatchBook()
    book.armed_data("/a", 5)
    book.armed_data("/missing", ABSENT)
    book.armed_children("/p", 7)
    assert run(book, {"/a": 5, "/missing": ABSENT}, {"/p": 7}) == []
    assert book.snapshot() == ({"/a": 5, "/missing": ABSENT}, {"/p": 7})


def test_changes_missed_while_away_are_delivered_once():
    book = WatchBook()
    book.armed_data("/changed", 5)
    book.armed_data("/created", ABSENT)
    book.armed_data("/deleted", 5)
    book.armed_children("/deleted", 6)
    book.armed_children("/kids", 7)
    events = run(book, {"/changed": 9, "/created": 10, "/deleted": ABSENT},
                 {"/deleted": NoNodeError("/deleted"), "/kids": 11})
    assert sorted(events) == sorted([
        (EventType.CHANGED, "/changed"),
        (EventType.CREATED, "/created"),
        (EventType.DELETED, "/deleted"),  # once, though both a data and a child watch were armed
        (EventType.CHILD, "/kids"),
    ])
    assert book.snapshot() == ({}, {})  # fired watches are one-shot: gone until read again


def test_a_failing_path_does_not_stop_the_others():
    book = WatchBook()
    book.armed_data("/secret", 1)
    book.armed_data("/b", 1)
    assert run(book, {"/secret": NotAuthorizedError("/secret", "read"), "/b": 2}, {}) == [
        (EventType.CHANGED, "/b")]
    assert book.snapshot()[0] == {"/secret": 1}


def test_unavailable_aborts_for_a_retry_on_the_next_connection():
    book = WatchBook()
    book.armed_data("/a", 1)
    with pytest.raises(ClusterStateUnavailableError):
        run(book, {"/a": ClusterStateUnavailableError("down")}, {})
    assert book.snapshot()[0] == {"/a": 1}


def test_a_read_racing_with_rearm_keeps_its_newer_token():
    book = WatchBook()
    book.armed_data("/a", 1)

    def watch_data(path):
        book.armed_data(path, 3)  # a caller re-read the node meanwhile
        return 2

    events = []
    book.rearm(watch_data, lambda p: ABSENT, lambda e, p: events.append((e, p)))
    assert events == [(EventType.CHANGED, "/a")]
    assert book.snapshot()[0] == {"/a": 3}
