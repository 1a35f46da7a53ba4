"""The savepoint store against a real Redis (executor/savepoints/store.py): a consistent read of
a topology's committed state, a savepoint kept, listed, read back and deleted, a start from it
as a new generation that the tasks' states open (by task index), and old generations collected.
Each test has a redis-server of its own (tests/redis_fixture.py)."""

from __future__ import annotations

import msgpack
import pytest

from executor.checkpoint.protocol import COMMITTED, COMMITTING, TxState
from executor.savepoints.plan import SavepointRefused, Shape
from executor.savepoints.store import Manifest, SavepointStore, new_id
from executor.state import open_state
from executor.state.redis_client import RedisSettings

pytestmark = [pytest.mark.timeout(60), pytest.mark.redis]

P = msgpack.packb
TASKS = {"$checkpointspout": 1, "count": 2, "sentences": 1}


@pytest.fixture
def store(redis_server):
    with SavepointStore(RedisSettings.from_config(redis_server.provider_config())) as s:
        yield s


def _commit(conf, namespace: str, values: dict, txid: int):
    state = open_state(conf, namespace)
    for k, v in values.items():
        state.put(k, v)
    state.prepare_commit(txid)
    state.commit(txid)
    return state


def _running(conf, record: TxState, count_txid: int = 5):
    """A topology 'wc' as its tasks leave Redis: the checkpoint spout's record, two count tasks
    and a spout, committed at `count_txid` (the first generation)."""
    states = [_commit(conf, "wc/$checkpointspout#0", {"__state": record.to_wire()}, 99),
              _commit(conf, "wc/count#0", {"cow": 3}, count_txid), _commit(conf, "wc/count#1", {"moon": 1}, count_txid),
              _commit(conf, "wc/sentences#0", {"next": 41}, 5)]
    for s in states:
        s.close()


def test_a_consistent_read_is_every_task_at_the_last_committed_checkpoint(redis_server, store):
    conf = redis_server.conf()
    _running(conf, TxState(5, COMMITTED))
    snap = store.snapshot("wc", TASKS)
    assert snap.txid == 5 and set(snap.states) == {"count", "sentences"}
    assert snap.states["count"] == [{P("cow"): P(3)}, {P("moon"): P(1)}]


def test_a_read_during_a_commit_is_tried_again_then_refused_naming_the_components(redis_server, store):
    conf = redis_server.conf()
    _running(conf, TxState(6, COMMITTING), count_txid=6)  # the counts have committed 6, the spout not yet
    with pytest.raises(SavepointRefused, match="no consistent checkpoint could be read"):
        store.snapshot("wc", TASKS, attempts=3, pause=0.0)


def test_a_read_while_a_checkpoint_commits_rolls_it_forward(redis_server, store):
    # COMMITTING 6: every task prepared 6 and some committed it. A swap's kill can land here (its
    # quiet topology goes on checkpointing); the read is of 6, as the spout's recovery would
    # commit it: a task that had not committed yet counts with its prepared changes applied.
    conf = redis_server.conf()
    _running(conf, TxState(6, COMMITTING), count_txid=6)
    spout = open_state(conf, "wc/sentences#0")
    spout.put("next", 57)
    spout.put("gone", 1)
    spout.prepare_commit(6)
    spout.close()
    snap = store.snapshot("wc", TASKS, attempts=1)
    assert snap.txid == 6
    assert snap.states["sentences"] == [{P("next"): P(57), P("gone"): P(1)}]
    assert snap.states["count"] == [{P("cow"): P(3)}, {P("moon"): P(1)}]


def test_a_savepoint_is_kept_listed_read_back_and_deleted(redis_server, store):
    _running(redis_server.conf(), TxState(5, COMMITTED))
    snap = store.snapshot("wc", TASKS)
    shapes = {"count": Shape("bolt", 2, ("word",)), "sentences": Shape("spout", 1)}
    m = Manifest(new_id(snap.txid, 1_800_000_000), "wc", 1_800_000_000.0, snap.txid, shapes, ("count", "sentences"))
    store.save(m, snap)
    assert [x.id for x in store.manifests("wc")] == [m.id] and m.id.endswith("-tx5")
    assert store.load(store.manifest("wc", m.id)).states == snap.states
    store.delete("wc", m.id)
    assert store.manifests("wc") == []
    with pytest.raises(SavepointRefused, match=f"topology 'wc' has no savepoint '{m.id}' \\(it has none\\)"):
        store.manifest("wc", m.id)


def test_a_start_from_a_savepoint_is_a_generation_the_tasks_open_by_index(redis_server, store):
    conf = redis_server.conf()
    store.restore("wc", "g1", 7, {"count": [{P("cow"): P(3)}, {}, {P("moon"): P(1)}]})
    assert store.generation("wc") == "g1"
    third = open_state(conf, "wc/count#2")  # task ids shifted: the index decides
    assert third.get("moon") == 1 and third.committed_txid() == 7
    empty = open_state(conf, "wc/count#1")
    assert empty.get("cow") is None and empty.committed_txid() == 7
    record = open_state(conf, "wc/$checkpointspout#0")
    assert TxState.from_wire(record.get("__state")) == TxState(7, COMMITTED)
    for s in (third, empty, record):
        s.close()


def test_older_generations_are_collected_and_the_last_two_kept(redis_server, store):
    conf = redis_server.conf()
    _running(conf, TxState(5, COMMITTED))
    client = redis_server.client()
    try:
        def generations():
            keys = [k.decode() for k in client.scan_iter(match="storm-py-test:wc*/*")]
            return sorted({k.split("/")[0].removeprefix("storm-py-test:") for k in keys})

        assert generations() == ["wc"]
        store.restore("wc", "g1", 7, {"count": [{P("cow"): P(3)}, {}]})
        assert generations() == ["wc", "wc:g1"]      # the stopped run's keys stay one more start
        store.restore("wc", "g2", 8, {"count": [{P("cow"): P(3)}, {}]})
        assert generations() == ["wc:g1", "wc:g2"]
        store.restore("wc", "g3", 9, {"count": [{P("cow"): P(4)}, {}]})
        assert generations() == ["wc:g2", "wc:g3"]
    finally:
        client.close()
