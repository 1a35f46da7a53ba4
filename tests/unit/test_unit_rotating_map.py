"""Unit tests for executor/rotating_map.py."""

from __future__ import annotations

import pytest

from executor.rotating_map import RotatingMap


class Recorder:
    def __init__(self):
        self.expired: list[tuple] = []

    def __call__(self, key, value):
        self.expired.append((key, value))


@pytest.mark.parametrize("buckets", [2, 3, 5])
def test_entry_expires_after_between_n_minus_1_and_n_rotations(buckets):
    rec = Recorder()
    m = RotatingMap(buckets, rec)
    m.put("a", 1)
    for _ in range(buckets - 1):
        m.rotate()
        assert "a" in m and m.get("a") == 1  # still alive after N-1 rotations
    assert rec.expired == []
    dead = m.rotate()  # the N-th rotation expires it
    assert dead == {"a": 1}
    assert rec.expired == [("a", 1)]
    assert "a" not in m and m.get("a") is None and len(m) == 0


def test_time_based_lifetime_is_between_n_minus_1_and_n_periods():
    # rotation every period; an entry put at any phase lives between (N-1) and N periods
    n, period = 3, 10
    for put_at in range(0, period):
        m = RotatingMap(n)
        expired_at = None
        m.put("k", "v")
        t = put_at
        while expired_at is None:
            t += 1
            if t % period == 0 and "k" in m.rotate():
                expired_at = t
        lifetime = expired_at - put_at
        assert (n - 1) * period <= lifetime <= n * period


def test_callback_called_once_per_expired_entry():
    rec = Recorder()
    m = RotatingMap(2, rec)
    for i in range(5):
        m.put(i, i * 10)
    m.rotate()
    for i in range(5, 8):
        m.put(i, i * 10)
    assert rec.expired == []
    m.rotate()
    assert sorted(rec.expired) == [(i, i * 10) for i in range(5)]
    rec.expired.clear()
    m.rotate()
    assert sorted(rec.expired) == [(i, i * 10) for i in range(5, 8)]
    rec.expired.clear()
    m.rotate()
    assert rec.expired == [] and len(m) == 0


def test_removed_entries_do_not_expire():
    rec = Recorder()
    m = RotatingMap(2, rec)
    m.put("a", 1)
    m.put("b", 2)
    assert m.remove("a") == 1
    m.rotate()
    m.rotate()
    assert rec.expired == [("b", 2)]


def test_get_remove_size_across_buckets():
    m = RotatingMap(3)
    m.put("old", 1)
    m.rotate()
    m.put("mid", 2)
    m.rotate()
    m.put("new", 3)
    assert m.size() == len(m) == 3
    assert (m.get("old"), m.get("mid"), m.get("new")) == (1, 2, 3)
    assert m.contains("old") and "mid" in m and "missing" not in m
    assert m.get("missing") is None and m.get("missing", "dflt") == "dflt"
    assert m.remove("mid") == 2
    assert m.remove("mid") is None and m.remove("mid", "gone") == "gone"
    assert len(m) == 2
    assert m.remove("old") == 1 and m.remove("new") == 3
    assert len(m) == 0


def test_put_moves_key_to_newest_bucket():
    rec = Recorder()
    m = RotatingMap(2, rec)
    m.put("k", "first")
    m.rotate()  # "k" now in the oldest bucket
    m.put("k", "second")  # refreshed: moved to the newest bucket, not duplicated
    assert len(m) == 1 and m.get("k") == "second"
    m.rotate()
    assert rec.expired == []  # the stale copy did not expire
    assert m.get("k") == "second"
    m.rotate()
    assert rec.expired == [("k", "second")]


def test_put_new_and_overwrite_in_same_bucket():
    m = RotatingMap(2)
    m.put_new(1, "a")
    m.put_new(2, "b")
    m.put(1, "c")
    assert len(m) == 2 and m.get(1) == "c"


def test_rotate_without_callback_returns_dead_entries():
    m = RotatingMap(2)
    m.put("x", 1)
    assert m.rotate() == {}
    assert m.rotate() == {"x": 1}


def test_needs_at_least_two_buckets():
    with pytest.raises(ValueError):
        RotatingMap(1)
