"""Directory savepoints (executor/savepoints/files.py) and the memory provider started from one
(executor/state/memory.py): a savepoint kept from a request's files, a start directory shaped
for the new code, a state that opens with the savepoint's values and goes back to them on a
reset, and the checks of a directory savepoint's mode (executor/savepoints/stores.py)."""

from __future__ import annotations

import msgpack
import pytest

from executor.checkpoint.protocol import COMMITTED, TxState
from executor.savepoints import files
from executor.savepoints.files import DirectoryStore
from executor.savepoints.plan import SavepointRefused, Shape
from executor.savepoints.store import Manifest
from executor.savepoints.stores import check_mode
from executor.state import open_state

pytestmark = pytest.mark.timeout(30)

P = msgpack.packb
SHAPES = {"count": Shape("bolt", 2, ("word",)), "sentences": Shape("spout", 1)}


def _kept(tmp_path) -> tuple[DirectoryStore, Manifest]:
    store = DirectoryStore(tmp_path / "sp")
    request = store.request_dir("wc")
    files.write_task(request, "count", 0, 7, {P("cow"): P(3)})
    files.write_task(request, "count", 1, 7, {P("moon"): P(1)})
    files.write_task(request, "sentences", 0, 7, {P("next"): P(41)})
    files.write_worker_marker(request, "1", {"tasks": [["count", 0], ["count", 1], ["sentences", 0]], "missing": []})
    assert list(files.read_worker_markers(request)) == ["1"]
    m = Manifest("20261129T120000-tx7", "wc", 1.0, 7, SHAPES, ("count", "sentences"))
    store.keep(request, m)
    return store, m


def test_a_request_becomes_a_savepoint_listed_loaded_and_deleted(tmp_path):
    store, m = _kept(tmp_path)
    assert [x.id for x in store.manifests("wc")] == [m.id]
    assert store.load(store.manifest("wc", m.id)).states["count"] == [{P("cow"): P(3)}, {P("moon"): P(1)}]
    store.delete("wc", m.id)
    with pytest.raises(SavepointRefused, match="topology 'wc' has no savepoint '20261129T120000-tx7' in .* "
                                               "\\(it has none\\)"):
        store.manifest("wc", m.id)


def test_the_memory_provider_opens_a_start_directory_and_a_reset_goes_back_to_it(tmp_path):
    store, m = _kept(tmp_path)
    start = store.start(m, {"count": [{P("cow"): P(3)}, {}, {P("moon"): P(1)}]})
    conf = {"topology.state.savepoint.dir": str(start)}
    third = open_state(conf, "wc/count#2")
    assert third.get("moon") == 1 and third.committed_txid() == 7 and third.start_txid == 7
    third.put("moon", 5)
    third.prepare_commit(8)
    third.commit(8)
    third.reset()
    assert third.get("moon") == 1 and third.committed_txid() == 7
    empty = open_state(conf, "wc/count#1")
    assert empty.get("cow") is None and empty.committed_txid() == 7
    record = open_state(conf, "wc/$checkpointspout#0")
    assert TxState.from_wire(record.get("__state")) == TxState(7, COMMITTED)
    plain = open_state({}, "wc/count#2")
    assert plain.committed_txid() is None and plain.start_txid is None


@pytest.mark.parametrize("conf, directory, why", [
    ({"topology.state.provider": "redis"}, "/sp", "keeps its state in Redis, and its savepoints there"),
    ({}, None, "give --dir DIR"),
])
def test_a_directory_savepoint_is_for_the_memory_provider(conf, directory, why):
    with pytest.raises(SavepointRefused, match=why):
        check_mode("wc", {"topology.state.exactly.once": True, **conf}, "the", directory)
    check_mode("wc", {"topology.state.exactly.once": True}, "the", "/sp")
