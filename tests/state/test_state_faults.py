"""A Redis that cannot be reached, refuses the password or goes away mid-run: every operation
that needs it raises StateUnavailableError, one line naming the provider and host:port, and no
state is lost: once Redis is back the same call (or a rollback) goes through."""

from __future__ import annotations

import pytest

from executor.errors import ClearError
from executor.state import StateUnavailableError, open_state

pytestmark = [pytest.mark.timeout(60), pytest.mark.redis]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_one_clear_line(exc: BaseException) -> None:
    assert isinstance(exc, ClearError)
    assert "\n" not in str(exc) and "Traceback" not in str(exc)
    assert exc.__cause__ is None and exc.__suppress_context__  # no redis traceback chained


def test_unreachable_at_open():
    port = _free_port()
    conf = {"topology.state.provider": "redis", "topology.state.provider.config": {"host": "127.0.0.1", "port": port}}
    with pytest.raises(StateUnavailableError) as info:
        open_state(conf, "sum-1")
    assert str(info.value) == (f"redis state provider at 127.0.0.1:{port} is unreachable: Connection refused "
                               f"(state 'sum-1', open)")
    _assert_one_clear_line(info.value)


def test_redis_going_away_mid_run_and_coming_back(redis_server):
    state = open_state(redis_server.conf(), "sum-1")
    try:
        state.put("a", 1)
        state.prepare_commit(1)
        state.commit(1)
        redis_server.stop()
        where = f"redis state provider at 127.0.0.1:{redis_server.port} is unreachable"
        state.put("b", 2)  # pending changes stay in memory
        assert state.get("b") == 2 and state.get("a") == 1
        with pytest.raises(StateUnavailableError) as info:
            state.prepare_commit(2)
        assert str(info.value).startswith(where) and "(state 'sum-1', prepare_commit txid 2)" in str(info.value)
        _assert_one_clear_line(info.value)
        assert state.prepared_txid() is None and state.get("b") == 2  # nothing lost
        with pytest.raises(StateUnavailableError, match="rollback"):
            state.rollback()
        assert state.get("b") == 2  # a failed rollback changed nothing either
        redis_server.start()  # same port, same data: the state reconnects by itself
        state.prepare_commit(2)
        state.commit(2)
    finally:
        state.close()
    again = open_state(redis_server.conf(), "sum-1")
    assert sorted(again.items()) == [("a", 1), ("b", 2)] and again.committed_txid() == 2
    again.close()


def test_redis_stopped_between_prepare_and_commit(redis_server):
    state = open_state(redis_server.conf(), "count-2")
    try:
        state.put("kept", "v1")
        state.prepare_commit(1)
        state.commit(1)
        state.put("kept", "v2")
        state.put("added", 1)
        state.delete("missing")
        state.prepare_commit(2)
        redis_server.stop()
        with pytest.raises(StateUnavailableError) as info:
            state.commit(2)
        assert str(info.value) == (f"redis state provider at 127.0.0.1:{redis_server.port} is unreachable: "
                                   f"Connection refused (state 'count-2', commit txid 2)")
        _assert_one_clear_line(info.value)
        assert state.prepared_txid() == 2 and state.committed_txid() == 1
        redis_server.start()  # with its data: the prepare is still there
        state.commit(2)
        assert state.committed_txid() == 2 and state.prepared_txid() is None
    finally:
        state.close()
    again = open_state(redis_server.conf(), "count-2")
    assert again.committed_txid() == 2 and again.prepared_txid() is None
    assert sorted(again.items()) == [("added", 1), ("kept", "v2")]
    again.close()


def test_redis_stopped_between_prepare_and_commit_then_rolled_back(redis_server):
    state = open_state(redis_server.conf(), "count-2")
    try:
        state.put("a", 1)
        state.prepare_commit(1)
        state.commit(1)
        state.put("a", 2)
        state.prepare_commit(2)
        redis_server.stop()
        with pytest.raises(StateUnavailableError):
            state.commit(2)
        redis_server.start()
        state.rollback()
        assert state.get("a") == 1 and state.prepared_txid() is None
    finally:
        state.close()
    again = open_state(redis_server.conf(), "count-2")
    assert again.get("a") == 1 and again.committed_txid() == 1 and again.prepared_txid() is None
    again.close()


def test_a_new_task_after_redis_was_down_sees_the_prepared_txid(redis_server):
    # The task died while Redis was down after its prepare: the next one can still commit it.
    state = open_state(redis_server.conf(), "count-2")
    state.put("a", 1)
    state.prepare_commit(5)
    redis_server.stop()
    with pytest.raises(StateUnavailableError):
        state.commit(5)
    state.close()
    redis_server.start()
    again = open_state(redis_server.conf(), "count-2")
    assert again.prepared_txid() == 5 and again.committed_txid() is None
    again.commit(5)
    again.close()
    final = open_state(redis_server.conf(), "count-2")
    assert final.get("a") == 1 and final.committed_txid() == 5
    final.close()


def test_wrong_password(redis_server_factory):
    server = redis_server_factory(password="right-one")
    with pytest.raises(StateUnavailableError) as info:
        open_state(server.conf(password="wrong-one"), "sum-1")
    text = str(info.value)
    assert text.startswith(f"redis state provider at 127.0.0.1:{server.port} refused the password: ")
    assert "wrong-one" not in text and "right-one" not in text
    _assert_one_clear_line(info.value)
    config = server.provider_config()
    del config["password"]
    with pytest.raises(StateUnavailableError, match=rf"127\.0\.0\.1:{server.port} requires a password"):
        open_state({"topology.state.provider": "redis", "topology.state.provider.config": config}, "sum-1")
    state = open_state(server.conf(), "sum-1")  # the right one
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.close()


def test_a_password_for_a_server_without_one(redis_server):
    with pytest.raises(StateUnavailableError, match=rf"127\.0\.0\.1:{redis_server.port} refused the password"):
        open_state(redis_server.conf(password="unexpected"), "sum-1")


def test_a_db_the_server_does_not_have(redis_server):
    with pytest.raises(StateUnavailableError, match=rf"127\.0\.0\.1:{redis_server.port} refused db 99999"):
        open_state(redis_server.conf(db=99999), "sum-1")


def test_a_restart_between_calls_is_not_noticed(redis_server):
    # The pooled connection is dead after a restart; the next call reconnects by itself.
    state = open_state(redis_server.conf(), "sum-1")
    try:
        state.put("a", 1)
        state.prepare_commit(1)
        redis_server.stop()
        redis_server.start()
        state.commit(1)
        redis_server.kill()
        redis_server.start()
        again = open_state(redis_server.conf(), "sum-1")
        assert again.get("a") == 1
        again.close()
        assert state.get("never-read") is None
    finally:
        state.close()
