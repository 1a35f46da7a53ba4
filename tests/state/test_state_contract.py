"""The KeyValueState contract, the same for every provider: the map (put/get/delete/keys/items),
what msgpack can carry, and Storm's checkpoint side (prepare_commit/commit/rollback)."""

from __future__ import annotations

import time

import pytest

from executor.errors import ClearError
from executor.state import (
    KeyValueState,
    StateTransactionError,
    StateValueError,
    open_state,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def open_ns(request):
    """open_ns(namespace) -> a state of this provider; all closed afterwards."""
    if request.param == "memory":
        conf = {"topology.state.provider": "memory"}
    else:
        conf = request.getfixturevalue("redis_server").conf()
    opened: list[KeyValueState] = []

    def open_(namespace: str = "bolt-1") -> KeyValueState:
        state = open_state(conf, namespace)
        opened.append(state)
        return state

    yield open_
    for state in opened:
        state.close()


def _sorted(keys) -> list:
    return sorted(keys, key=repr)


# ---------------------------------------------------------------- the map


def test_a_new_state_is_empty(open_ns):
    state = open_ns()
    assert isinstance(state, KeyValueState)
    assert state.get("x") is None and state.get("x", 7) == 7
    assert list(state.keys()) == [] and state.items() == []
    assert state.committed_txid() is None and state.prepared_txid() is None


def test_put_get_delete_keys(open_ns):
    state = open_ns()
    entries = {"word": 3, 7: "seven", b"raw": [1, 2.5, None], None: {"nested": {1: b"x"}}, True: False}
    for k, v in entries.items():
        state.put(k, v)
    for k, v in entries.items():
        assert state.get(k) == v
    state.put("word", 4)  # overwrite
    assert state.get("word") == 4
    assert state.delete("word") == 4  # returns the value it had, as Storm's delete
    assert state.delete("word") is None
    assert state.get("word") is None and state.get("word", 0) == 0
    expected = {k: v for k, v in entries.items() if k != "word"}
    assert _sorted(state.keys()) == _sorted(expected)
    assert _sorted(state.items()) == _sorted(expected.items())


def test_a_stored_none_is_a_value_not_a_missing_key(open_ns):
    state = open_ns()
    state.put("k", None)
    assert state.get("k", "default") is None
    assert list(state.keys()) == ["k"]


def test_key_identity_is_the_msgpack_encoding(open_ns):
    state = open_ns()
    state.put(("a", 1), "tuple")
    assert state.get(["a", 1]) == "tuple"  # a tuple and a list encode alike
    assert list(state.keys()) == [["a", 1]]  # and come back as lists
    state.put(1, "int")
    state.put(1.0, "float")
    state.put("b", "str")
    state.put(b"b", "bytes")
    assert (state.get(1), state.get(1.0), state.get("b"), state.get(b"b")) == ("int", "float", "str", "bytes")


def test_values_are_copies(open_ns):
    state = open_ns()
    state.put("list", [1, 2])
    got = state.get("list")
    got.append(3)
    assert state.get("list") == [1, 2]


def test_a_value_changed_after_put_is_not_changed_in_the_state(open_ns):
    state = open_ns()
    value = {"words": ["a"]}
    state.put("doc", value)
    value["words"].append("b")  # the state keeps what was put, as if it were written at once
    state.prepare_commit(1)
    state.commit(1)
    assert state.get("doc") == {"words": ["a"]}


def test_every_value_kind_round_trips_through_a_commit(open_ns):
    state = open_ns()
    kinds = {"s": "é", "i": -(2**63), "u": 2**64 - 1, "f": 1.5, "t": True, "n": None, "b": b"\x00",
             "l": [1, "x"], "d": {"k": [1.0]}, 7: "int key", b"k": "bytes key", ("t", 1): "list key"}
    for k, v in kinds.items():
        state.put(k, v)
    state.prepare_commit(1)
    state.commit(1)
    for k, v in kinds.items():
        got = state.get(k, "missing")
        assert got == v and type(got) is type(v), k


@pytest.mark.parametrize("key, value", [("\ud800", 1), ("k", "\udfff")])
def test_a_str_msgpack_cannot_carry_is_refused_at_put(open_ns, key, value):
    state = open_ns("counter-3")
    with pytest.raises(StateValueError, match="'counter-3'"):
        state.put(key, value)
    assert list(state.keys()) == []


@pytest.mark.parametrize("value", [{1, 2}, object(), 2**70, {"inner": {1, 2}}])
def test_a_value_msgpack_cannot_carry_is_refused_at_put_naming_the_key(open_ns, value):
    state = open_ns("counter-3")
    state.put("total", 1)
    with pytest.raises(StateValueError) as info:
        state.put("total", value)
    text = str(info.value)
    assert "'total'" in text and "'counter-3'" in text and "msgpack" in text and "\n" not in text
    assert isinstance(info.value, ClearError) and isinstance(info.value, TypeError)
    assert state.get("total") == 1  # the state is unchanged


def test_a_key_msgpack_cannot_carry_is_refused_naming_it(open_ns):
    state = open_ns("counter-3")
    with pytest.raises(StateValueError, match=r"state 'counter-3': key frozenset\(\{1\}\)"):
        state.put(frozenset({1}), 1)
    with pytest.raises(StateValueError, match="frozenset"):
        state.get(frozenset({1}))
    assert list(state.keys()) == []


# ---------------------------------------------------------------- checkpoints


def test_prepare_commit_rollback(open_ns):
    state = open_ns()
    state.put("a", 1)
    state.prepare_commit(1)
    assert state.prepared_txid() == 1 and state.committed_txid() is None
    assert state.get("a") == 1  # prepared changes are seen
    state.put("b", 2)  # pending: after the prepare, not part of txid 1
    state.commit(1)
    assert state.committed_txid() == 1 and state.prepared_txid() is None
    assert state.get("b") == 2
    state.rollback()
    assert state.get("a") == 1 and state.get("b") is None
    assert list(state.keys()) == ["a"]


def test_rollback_discards_prepared_and_pending_and_restores_deleted_keys(open_ns):
    state = open_ns()
    state.put("keep", "v1")
    state.put("gone", "v1")
    state.prepare_commit(1)
    state.commit(1)
    state.put("keep", "v2")
    state.delete("gone")
    state.put("new", 1)
    state.prepare_commit(2)
    state.put("later", 1)
    assert state.get("keep") == "v2" and state.get("gone") is None
    state.rollback()
    assert state.prepared_txid() is None and state.committed_txid() == 1
    assert state.get("keep") == "v1" and state.get("gone") == "v1"
    assert state.get("new") is None and state.get("later") is None
    assert sorted(state.keys()) == ["gone", "keep"]
    # the rolled-back txid can be prepared again, with new changes only
    state.put("again", 1)
    state.prepare_commit(2)
    state.commit(2)
    assert sorted(state.items()) == [("again", 1), ("gone", "v1"), ("keep", "v1")]


def test_deletes_are_committed(open_ns):
    state = open_ns()
    state.put("a", 1)
    state.put("b", 2)
    state.prepare_commit(1)
    state.commit(1)
    state.delete("a")
    state.prepare_commit(2)
    state.commit(2)
    state.rollback()
    assert state.get("a") is None and list(state.keys()) == ["b"]


def test_preparing_the_same_txid_again_adds_the_new_changes(open_ns):
    state = open_ns()
    state.put("a", 1)
    state.prepare_commit(3)
    state.put("b", 2)
    state.put("a", 10)
    state.prepare_commit(3)
    state.commit(3)
    state.rollback()
    assert sorted(state.items()) == [("a", 10), ("b", 2)]


def test_another_txid_cannot_be_prepared_before_the_first_is_done(open_ns):
    state = open_ns("sum-2")
    state.put("a", 1)
    state.prepare_commit(4)
    state.put("b", 2)
    with pytest.raises(StateTransactionError, match=r"state 'sum-2': cannot prepare txid 5 while txid 4 is prepared"):
        state.prepare_commit(5)
    assert state.prepared_txid() == 4 and state.get("b") == 2  # nothing changed
    state.commit(4)
    state.prepare_commit(5)
    state.commit(5)
    assert state.committed_txid() == 5


def test_only_the_prepared_txid_can_be_committed(open_ns):
    state = open_ns("sum-2")
    state.put("a", 1)
    state.prepare_commit(4)
    with pytest.raises(StateTransactionError, match="cannot commit txid 3: the prepared txid is 4"):
        state.commit(3)
    assert state.prepared_txid() == 4
    state.commit(4)
    assert state.get("a") == 1


def test_commit_again_is_harmless_and_commit_without_prepare_records_the_txid(open_ns):
    state = open_ns()
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.commit(1)  # a retry
    assert state.committed_txid() == 1 and state.get("a") == 1
    # the COMMIT a recovering topology sends a task whose state started anew
    state.put("pending", 1)
    state.commit(2)
    assert state.committed_txid() == 2
    state.rollback()
    assert state.get("pending") is None and state.get("a") == 1


def test_a_lower_txid_after_a_commit_is_accepted(open_ns):
    # A checkpoint spout whose own record was lost starts again from a low txid.
    state = open_ns()
    state.put("a", 1)
    state.prepare_commit(57)
    state.commit(57)
    state.put("a", 2)
    state.prepare_commit(1)
    state.commit(1)
    assert state.committed_txid() == 1 and state.get("a") == 2


def test_large_txids(open_ns):
    txid = time.time_ns()  # what the checkpoint spout uses for its own record
    state = open_ns()
    state.put("a", 1)
    state.prepare_commit(txid)
    state.commit(txid)
    assert state.committed_txid() == txid


@pytest.mark.parametrize("txid", ["1", 1.0, True, None])
def test_a_txid_must_be_an_int(open_ns, txid):
    state = open_ns()
    with pytest.raises(StateTransactionError, match="txid must be an int"):
        state.prepare_commit(txid)


def test_namespaces_are_independent(open_ns):
    a, b = open_ns("count-1"), open_ns("count-2")
    a.put("k", "a")
    b.put("k", "b")
    a.prepare_commit(1)
    a.commit(1)
    b.rollback()
    assert a.get("k") == "a" and b.get("k") is None
    assert a.committed_txid() == 1 and b.committed_txid() is None
    b.put("other", 1)
    b.prepare_commit(9)
    b.commit(9)
    assert list(a.keys()) == ["k"] and list(b.keys()) == ["other"]
