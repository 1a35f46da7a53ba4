"""The pure decisions of savepoints and swaps (executor/savepoints/plan.py, keyed.py; the mode
checks of executor/savepoints/stores.py): which components' state may move, the refusals, keyed state
redistributed to the task its fields grouping picks, and a savepoint's manifest on the wire."""

from __future__ import annotations

import msgpack
import pytest

from executor.checkpoint.protocol import COMMITTED, COMMITTING, PREPARING, TxState, last_committed_of
from executor.grouping import FieldsGrouper
from executor.savepoints.keyed import redistribute
from executor.savepoints.plan import SavepointRefused, Shape, keyed_by, plan_moves
from executor.savepoints.store import Manifest
from executor.savepoints.stores import check_mode
from executor.state.redis_kv import RedisKeys
from executor.tuple import Fields

pytestmark = pytest.mark.timeout(30)

P = msgpack.packb
OLD = {"sentences": Shape("spout", 1), "split": Shape("bolt", 2), "count": Shape("bolt", 2, ("word",))}


def test_keyed_by_needs_every_input_fields_grouped_on_the_same_fields():
    assert keyed_by([("fields", ("word",))]) == ("word",)
    assert keyed_by([("fields", ("word",)), ("fields", ("word",))]) == ("word",)
    assert keyed_by([("fields", ("word",)), ("shuffle", None)]) is None
    assert keyed_by([("fields", ("word",)), ("fields", ("n",))]) is None
    assert keyed_by([]) is None


def test_the_same_parallelism_moves_task_by_task_and_a_keyed_bolt_may_change_it():
    new = {**OLD, "count": Shape("bolt", 3, ("word",))}
    moves = plan_moves(OLD, {"sentences", "count", "$checkpointspout"}, new)
    assert set(moves) == {"sentences", "count"}
    assert not moves["sentences"].redistributed and moves["count"].redistributed


@pytest.mark.parametrize("new, why", [
    ({"sentences": Shape("spout", 1), "counter": Shape("bolt", 2, ("word",))},
     "component 'count' has state in the savepoint and is not in the new topology"),
    ({"sentences": Shape("spout", 2), "count": Shape("bolt", 2, ("word",))},
     "spout 'sentences': its read positions cannot be split over 2 tasks instead of 1"),
    ({"sentences": Shape("spout", 1), "count": Shape("bolt", 3)},
     "bolt 'count': its state cannot be redistributed from 2 tasks to 3: not all its inputs"),
    ({"sentences": Shape("spout", 1), "count": Shape("spout", 2)}, "was a bolt and is a spout"),
])
def test_what_cannot_keep_its_state_is_refused_in_one_line_naming_it(new, why):
    with pytest.raises(SavepointRefused, match=why) as err:
        plan_moves(OLD, {"sentences", "count"}, new)
    assert "\n" not in str(err.value)


def test_a_dropped_component_is_allowed_only_when_asked():
    new = {"sentences": Shape("spout", 1)}
    assert set(plan_moves(OLD, {"sentences", "count"}, new, allow_dropped_state=True)) == {"sentences"}


def _placed(words, tasks):
    g = FieldsGrouper(range(tasks), Fields(["word"]), Fields(["word"]))
    out = [{} for _ in range(tasks)]
    for i, w in enumerate(words):
        out[g.choose([w])[0]][P(w)] = P(i)
    return out


def test_keyed_state_goes_to_the_task_the_grouping_now_picks_and_nothing_is_lost():
    words = [f"w{i}" for i in range(200)]
    old = _placed(words, 2)
    new = redistribute("count", ("word",), old, 3)
    assert new == _placed(words, 3)
    assert sum(len(t) for t in new) == 200


def test_state_not_keyed_by_the_grouped_field_is_refused():
    old = _placed([f"w{i}" for i in range(50)], 2)
    old[0], old[1] = old[1], old[0]   # each key on the other task: not where the grouping put it
    with pytest.raises(SavepointRefused, match="bolt 'count': its state key '.*' is on task index 0, but"):
        redistribute("count", ("word",), old, 3)


def test_several_fields_key_by_the_list_of_their_values():
    g = FieldsGrouper(range(2), Fields(["a", "b"]), Fields(["a", "b"]))
    old = [{}, {}]
    for k in [("x", 1), ("y", 2), ("z", 3), ("q", 4)]:
        old[g.choose(list(k))[0]][P(list(k))] = P(1)
    new = redistribute("pairs", ("a", "b"), old, 5)
    g5 = FieldsGrouper(range(5), Fields(["a", "b"]), Fields(["a", "b"]))
    for index, values in enumerate(new):
        for raw in values:
            assert g5.choose(msgpack.unpackb(raw))[0] == index


@pytest.mark.parametrize("conf, why", [
    ({"topology.state.provider": "redis"}, "is not in exactly-once mode"),
    ({"topology.state.exactly.once": True}, "keeps its state with the 'memory' provider"),
])
def test_a_topology_whose_state_a_savepoint_cannot_keep_is_refused(conf, why):
    with pytest.raises(SavepointRefused, match=why):
        check_mode("wc", conf, "the running")
    check_mode("wc", {"topology.state.exactly.once": True, "topology.state.provider": "redis"}, "the")


def test_a_manifest_survives_its_json():
    m = Manifest("20261129T120000-tx7", "wc", 1.5, 7, OLD, ("count", "sentences"), "wc-1-2")
    assert Manifest.from_json(m.to_json()) == m


def test_the_last_committed_checkpoint_of_the_spouts_record():
    assert last_committed_of(TxState(7, COMMITTED)) == 7
    assert last_committed_of(TxState(8, PREPARING)) == 7
    assert last_committed_of(TxState(8, COMMITTING)) is None  # tasks may be either side of it
    assert last_committed_of(TxState(-1, COMMITTED)) is None
    assert last_committed_of(None) is None


def test_a_tasks_keys_name_its_index_not_its_id():
    assert RedisKeys.of("P", "wc/count#1").committed == "P:wc/count#1:committed"
    assert RedisKeys.of("P", "wc/count#1", "g1").committed == "P:wc:g1/count#1:committed"
    assert RedisKeys.of("P", "wc/my#count#0", "g1").txid == "P:wc:g1/my#count#0:txid"
    assert RedisKeys.of_task("P", "wc", "count", 2).committed == "P:wc/count#2:committed"
