"""The redis provider against a real server: durability, its key layout, recovery of a prepared
txid after a restart of the task (or of Redis), the read cache, and a commit whose answer was
lost. Each test has a redis-server of its own (tests/redis_fixture.py)."""

from __future__ import annotations

import msgpack
import pytest

from executor.state import StateTransactionError, StateUnavailableError, open_state
from executor.state.memory import InMemoryKeyValueState
from executor.state.redis_kv import RedisKeyValueState

pytestmark = [pytest.mark.timeout(60), pytest.mark.redis]


@pytest.fixture
def states(redis_server):
    """states(namespace, **provider_overrides) -> an open redis state; all closed afterwards."""
    opened = []

    def open_(namespace: str = "sum-1", **overrides):
        state = open_state(redis_server.conf(**overrides), namespace)
        opened.append(state)
        return state

    yield open_
    for state in opened:
        state.close()


def _pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def test_committed_values_survive_a_new_open_and_uncommitted_ones_do_not(states):
    first = states()
    assert isinstance(first, RedisKeyValueState)
    first.put("a", 1)
    first.put((2, 3), {"x": b"y"})
    first.prepare_commit(1)
    first.commit(1)
    first.put("pending", 1)
    first.close()
    again = states()
    assert again.committed_txid() == 1 and again.prepared_txid() is None
    assert again.get("a") == 1 and again.get([2, 3]) == {"x": b"y"} and again.get("pending") is None
    assert sorted(again.keys(), key=repr) == sorted(["a", [2, 3]], key=repr)


def test_every_value_kind_survives_a_new_open(states):
    kinds = {"s": "é", "i": -(2**63), "f": 1.5, "t": False, "n": None, "b": b"\x00", "l": [1, "x"],
             7: "int key", b"k": "bytes key", ("t", 1): {"nested": [None]}}
    first = states()
    for k, v in kinds.items():
        first.put(k, v)
    first.prepare_commit(1)
    first.delete("s")  # prepared again below: a deletion reaches Redis too
    first.prepare_commit(1)
    first.commit(1)
    first.close()
    again = states()
    del kinds["s"]
    assert again.get("s", "gone") == "gone"
    for k, v in kinds.items():
        got = again.get(k, "missing")
        assert got == v and type(got) is type(v), k
    assert len(again.items()) == len(kinds)


def test_the_memory_provider_is_not_durable():
    conf = {"topology.state.provider": "memory"}
    first = open_state(conf, "sum-1")
    first.put("a", 1)
    first.prepare_commit(1)
    first.commit(1)
    again = open_state(conf, "sum-1")
    assert isinstance(again, InMemoryKeyValueState)
    assert again.get("a") is None and again.committed_txid() is None


def test_key_layout(states, redis_server):
    state = states("count-4")
    state.put("a", 1)
    state.put("b", 2)
    state.prepare_commit(1)
    state.commit(1)
    state.delete("a")
    state.put("c", [3])
    state.prepare_commit(2)
    keys = state.redis_keys
    assert (keys.committed, keys.prepared, keys.txid) == (
        "storm-py-test:count-4:committed", "storm-py-test:count-4:prepared", "storm-py-test:count-4:txid")
    with redis_server.client() as client:
        assert client.hgetall(keys.committed) == {_pack("a"): _pack(1), _pack("b"): _pack(2)}
        assert client.hgetall(keys.prepared) == {_pack("a"): b"", _pack("c"): _pack([3])}  # b"": deleted
        assert client.hgetall(keys.txid) == {b"commit": b"1", b"prepare": b"2"}
        state.commit(2)
        assert client.hgetall(keys.committed) == {_pack("b"): _pack(2), _pack("c"): _pack([3])}
        assert client.exists(keys.prepared) == 0
        assert client.hgetall(keys.txid) == {b"commit": b"2"}
        state.put("d", 4)
        state.prepare_commit(3)
        state.rollback()
        assert client.exists(keys.prepared) == 0 and client.hgetall(keys.txid) == {b"commit": b"2"}


def test_key_prefix_separates_topologies(states):
    one = states("sum-1", key_prefix="topo-a")
    one.put("k", "a")
    one.prepare_commit(1)
    one.commit(1)
    other = states("sum-1", key_prefix="topo-b")
    assert other.get("k") is None and other.committed_txid() is None
    assert states("sum-1", key_prefix="topo-a").get("k") == "a"


@pytest.mark.parametrize("decision", ["commit", "rollback"])
def test_a_prepared_txid_survives_the_task_and_is_committed_or_rolled_back(states, decision):
    state = states()
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 2)
    state.delete("gone")
    state.put("b", 3)
    state.prepare_commit(2)
    state.put("never", 1)  # pending, lost with the task
    state.close()  # the task dies here

    restarted = states()
    assert restarted.committed_txid() == 1 and restarted.prepared_txid() == 2
    assert restarted.get("a") == 2 and restarted.get("b") == 3  # the prepared changes, as Storm's
    assert restarted.get("never") is None
    if decision == "commit":
        restarted.commit(2)
        expected, txid = [("a", 2), ("b", 3)], 2
    else:
        restarted.rollback()
        expected, txid = [("a", 1)], 1
    assert sorted(restarted.items()) == expected
    final = states()
    assert final.committed_txid() == txid and final.prepared_txid() is None
    assert sorted(final.items()) == expected


def test_a_prepared_txid_survives_a_redis_crash(states, redis_server):
    state = states()
    state.put("a", 1)
    state.prepare_commit(7)
    state.close()
    redis_server.kill()  # SIGKILL: the append-only file already holds the prepare
    redis_server.start()
    restarted = states()
    assert restarted.prepared_txid() == 7
    restarted.commit(7)
    assert states().get("a") == 1


def test_reads_are_cached_and_a_new_namespace_needs_no_read(states, redis_server):
    seed = states("warm")
    seed.put("seen", 1)
    seed.put("unseen", 2)
    seed.prepare_commit(1)
    seed.commit(1)
    warm, fresh = states("warm"), states("fresh")
    assert warm.get("seen") == 1 and warm.get("absent") is None
    redis_server.stop()
    # answered from memory: keys read before, the pending changes, a namespace empty at open
    assert warm.get("seen") == 1 and warm.get("absent") is None
    warm.put("new", 3)
    assert warm.get("new") == 3
    assert fresh.get("anything") is None and fresh.keys() == []
    with pytest.raises(StateUnavailableError, match=r"127\.0\.0\.1:\d+ is unreachable"):
        warm.get("unseen")  # never read: needs Redis
    redis_server.start()
    assert warm.get("unseen") == 2
    # after one scan every key is known here
    assert sorted(warm.keys()) == ["new", "seen", "unseen"]
    redis_server.stop()
    assert sorted(warm.items()) == [("new", 3), ("seen", 1), ("unseen", 2)] and warm.get("other") is None


def test_a_commit_whose_answer_was_lost_is_retried(states):
    import redis.exceptions

    state = states()
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 2)
    state.put("b", 3)
    state.prepare_commit(2)
    real = state._commit_script

    def applied_then_lost(*args, **kwargs):
        real(*args, **kwargs)  # Redis applies the commit...
        raise redis.exceptions.ConnectionError("Connection reset by peer")  # ...the answer is lost

    state._commit_script = applied_then_lost
    with pytest.raises(StateUnavailableError, match="Connection reset by peer"):
        state.commit(2)
    assert state.prepared_txid() == 2  # unchanged here: the caller retries
    state._commit_script = real
    state.commit(2)
    assert state.committed_txid() == 2 and sorted(state.items()) == [("a", 2), ("b", 3)]
    assert sorted(states().items()) == [("a", 2), ("b", 3)]


def test_a_prepared_txid_the_server_lost_is_reported(states, redis_server):
    state = states("sum-9")
    state.put("a", 1)
    state.prepare_commit(3)
    with redis_server.client() as client:
        client.flushall()  # as a server restarted without its data
    with pytest.raises(StateTransactionError, match=r"state 'sum-9': prepared txid 3 is no longer in Redis") as info:
        state.commit(3)
    assert "roll back" in str(info.value)
    state.rollback()
    assert state.prepared_txid() is None and state.get("a") is None


def test_a_large_state_in_chunks(states):
    state = states()
    for i in range(5000):
        state.put(i, {"n": i, "pad": "x" * 20})
    state.prepare_commit(1)
    state.commit(1)
    for i in range(0, 5000, 2):
        state.delete(i)
    state.prepare_commit(2)
    state.commit(2)
    again = states()
    keys = again.keys()
    assert len(keys) == 2500 and set(keys) == set(range(1, 5000, 2))
    assert again.get(4999) == {"n": 4999, "pad": "x" * 20} and again.get(4998) is None


def test_a_forgotten_value_is_read_back_from_redis_and_discard_reads_nothing(states, redis_server):
    state = states()
    state.put("kept", 1)
    state.put("let-go", 2)
    state.forget("let-go")  # not committed yet: let go of once it commits
    state.prepare_commit(1)
    state.commit(1)
    import redis as redis_py

    from executor.state.codec import encode_key, encode_value

    client = redis_py.Redis(host=redis_server.host, port=redis_server.port)
    try:  # another writer (a test's): only a value read back from Redis shows it
        committed = state.redis_keys.committed
        client.hset(committed, encode_key("t", "let-go"), encode_value("t", "let-go", 20))
        client.hset(committed, encode_key("t", "kept"), encode_value("t", "kept", 10))
    finally:
        client.close()
    assert state.get("let-go") == 20 and state.get("kept") == 1
    state.discard("kept")
    state.prepare_commit(2)
    state.commit(2)
    assert states().get("kept") is None and states().get("let-go") == 20


def test_the_memory_provider_forgets_nothing():
    from executor.state.memory import InMemoryKeyValueState

    state = InMemoryKeyValueState("t/c-1")
    state.put("k", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.forget("k")
    assert state.get("k") == 1
