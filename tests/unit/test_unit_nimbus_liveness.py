"""Nimbus's heartbeat cache: liveness decided on Nimbus's clock, with launch grace."""

from __future__ import annotations

from daemons.nimbus.liveness import Seen, alive_executors, alive_supervisors, forget, update_cache

E1, E2, E3 = (1, 1), (2, 3), (4, 4)


def test_a_changed_heartbeat_restarts_its_clock_and_an_unchanged_one_ages():
    cache = update_cache({}, {E1: 100, E2: 100}, now=1000.0)
    cache = update_cache(cache, {E1: 101, E2: 100}, now=1005.0)
    assert cache[E1] == Seen(101, 1005.0)
    assert cache[E2] == Seen(100, 1000.0)


def test_executors_die_only_after_the_timeout_of_no_progress():
    cache = update_cache({}, {E1: 5, E2: 5}, now=0.0)
    starts = {E1: -100, E2: -100}
    assert alive_executors([E1, E2], cache, starts, 29.9, 30, 120) == {E1, E2}
    cache = update_cache(cache, {E1: 6, E2: 5}, now=29.9)
    assert alive_executors([E1, E2], cache, starts, 30.0, 30, 120) == {E1}


def test_launch_grace_keeps_a_new_executor_without_heartbeats():
    starts = {E3: 1000}
    assert alive_executors([E3], {}, starts, 1000 + 119, 30, 120) == {E3}
    assert alive_executors([E3], {}, starts, 1000 + 121, 30, 120) == frozenset()


def test_the_reporters_clock_is_never_compared_with_ours():
    # A worker whose clock is a day behind still counts as alive while its time advances.
    cache = update_cache({}, {E1: 5}, now=10**9)
    assert alive_executors([E1], cache, {}, 10**9 + 1, 30, 120) == {E1}


def test_supervisors_need_a_node_and_a_fresh_heartbeat():
    cache = update_cache({}, {"a": 1, "b": 1}, now=0)
    cache = update_cache(cache, {"a": 2, "b": 1}, now=50)
    assert alive_supervisors(["a", "b"], cache, 61, 60) == {"a"}
    assert alive_supervisors(["b"], cache, 10, 60) == {"b"}
    assert alive_supervisors([], cache, 10, 60) == frozenset()  # node vanished: dead at once


def test_forget_drops_entries_of_the_gone():
    cache = update_cache({}, {"a": 1, "b": 1}, now=0)
    assert set(forget(cache, ["b"])) == {"b"}


def test_restart_clocks_gives_every_heartbeat_a_full_timeout_from_now():
    from daemons.nimbus.liveness import Seen, is_fresh, restart_clocks

    cache = {"a": Seen(5, 100.0), "b": Seen(7, 250.0)}
    after = restart_clocks(cache, 200.0)
    assert after == {"a": Seen(5, 200.0), "b": Seen(7, 250.0)}
    assert not is_fresh(cache["a"], 230.0, 30) and is_fresh(after["a"], 229.0, 30)
