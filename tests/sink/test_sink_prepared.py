"""The Spark sink's two-phase commit on disk (executor/sinks/_prepared.py), without Spark: batches
prepared under a checkpoint's txid are invisible, published once however often COMMIT comes
(also after a COMMIT cut short between its rename and its log commit), and discarded by a
rollback."""

from __future__ import annotations

import os

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks import _prepared as P
from executor.sinks import _table as T
from executor.sinks._integrity import write_manifest


def _staged(table, batch_id: str, rows: int):
    d = table / L.STAGING_DIR / "owner" / batch_id
    d.mkdir(parents=True)
    (d / "part-00000.parquet").write_bytes(b"x" * rows)
    write_manifest(d, rows)
    return batch_id, d


def _visible(table) -> dict[str, int]:
    return G.read_snapshot(table, tombstones=False).batch_rows


def _claimed(table, storm_id: str, task: int, component: str = "store"):
    tdir = P.task_dir(table, storm_id, task)
    P.claim(tdir, storm_id.split("-")[0], component, storm_id)
    return tdir


def _table(tmp_path):
    table = tmp_path / "t"
    table.mkdir()
    T.ensure_log(table)
    return table


def test_prepared_batches_are_invisible_until_published_once(tmp_path):
    table = _table(tmp_path)
    tdir = _claimed(table, "wc-1-1", 7)
    P.prepare(tdir, 3, [_staged(table, "b1", 5), _staged(table, "b2", 2)])
    P.prepare(tdir, 4, [_staged(table, "b3", 1)])
    assert P.prepared_txids(tdir) == [3, 4]
    assert _visible(table) == {}
    assert P.publish(table, tdir, 3) == 7
    assert _visible(table) == {"b1": 5, "b2": 2} and P.prepared_txids(tdir) == [4]
    assert P.publish(table, tdir, 3) == 0  # COMMIT 3 again: nothing twice
    assert P.publish(table, tdir, 4) == 1
    assert _visible(table) == {"b1": 5, "b2": 2, "b3": 1} and P.prepared_txids(tdir) == []


def test_a_commit_cut_short_is_finished_by_the_next_without_a_row_twice(tmp_path):
    table = _table(tmp_path)
    tdir = _claimed(table, "wc-1-1", 1)
    P.prepare(tdir, 9, [_staged(table, "b1", 3), _staged(table, "b2", 4)])
    # killed after publishing b1 and renaming b2, before b2's log commit
    os.rename(tdir / P.txid_name(9) / "b1", table / L.batch_dir_name("b1"))
    G.commit(table, "append", [T.batch_entry(table, "b1")])
    os.rename(tdir / P.txid_name(9) / "b2", table / L.batch_dir_name("b2"))
    assert P.publish(table, tdir, 9) == 4
    assert _visible(table) == {"b1": 3, "b2": 4}
    versions = G.latest_version(table)
    assert P.publish(table, tdir, 9) == 0 and G.latest_version(table) == versions


def test_a_rollback_discards_the_rolled_back_txid_and_later_and_a_half_prepare_is_none(tmp_path):
    table = tmp_path / "t"
    table.mkdir()
    tdir = P.task_dir(table, "a topology/with odd name", 2)
    P.claim(tdir, "a topology/with odd name", "store", "a topology/with odd name")
    assert tdir.parent == table / P.PREPARED_DIR and "/" not in tdir.name
    for txid in (5, 6, 7):
        P.prepare(tdir, txid, [_staged(table, f"b{txid}", 1)])
    (tdir / P.txid_name(8)).mkdir()  # a PREPARE cut short before its listing: not prepared
    assert P.prepared_txids(tdir) == [5, 6, 7]
    assert P.discard(tdir, 6) == 3
    assert P.prepared_txids(tdir) == [5] and sorted(os.listdir(tdir)) == [P.txid_name(5), P.OWNER]


def test_a_new_instance_publishes_what_an_earlier_one_prepared_up_to_its_start_and_deletes_the_rest(tmp_path):
    """An earlier instance (wc-1) prepared txids 14 (decided, not published when it stopped) and
    15 (never committed); the new instance (wc-2) starts from checkpoint 14: 14 is published, 15
    is gone with wc-1's directory and can never be published by a later commit 15 of wc-2."""
    table = _table(tmp_path)
    old = _claimed(table, "wc-1-1", 9)
    P.prepare(old, 14, [_staged(table, "b14", 3)])
    P.prepare(old, 15, [_staged(table, "b15", 4)])
    other_component = _claimed(table, "wc-1-1", 10, component="audit")
    P.prepare(other_component, 15, [_staged(table, "a15", 1)])
    other_topology = _claimed(table, "wcx-1-1", 9)
    P.prepare(other_topology, 15, [_staged(table, "x15", 1)])
    legacy = P.task_dir(table, "wc", 3)  # an older storm-py's: <topology>-t<task>, no owner
    legacy.mkdir(parents=True)
    P.prepare(legacy, 16, [_staged(table, "l16", 2)])
    new = _claimed(table, "wc-2-2", 10)
    assert P.adopt(table, "wc", "store", "wc-2-2", 14) == 3
    assert _visible(table) == {"b14": 3}
    assert not old.exists() and not legacy.exists() and new.is_dir()
    assert P.prepared_txids(other_component) == [15] and P.prepared_txids(other_topology) == [15]
    P.prepare(new, 15, [_staged(table, "n15", 5)])
    assert P.publish(table, new, 15) == 5 and _visible(table) == {"b14": 3, "n15": 5}


def test_an_adopted_directory_takes_no_prepare_and_a_start_afresh_publishes_nothing_of_the_earlier_run(tmp_path):
    table = _table(tmp_path)
    old = _claimed(table, "wc-1-1", 4)
    P.prepare(old, 2, [_staged(table, "b2", 1)])
    assert P.adopt(table, "wc", "store", "wc-2-2", None) == 0  # no state carried over: nothing of it is committed
    assert _visible(table) == {} and not old.exists()
    import pytest
    with pytest.raises(FileNotFoundError):  # the earlier run's worker, still stopping, cannot prepare again
        P.prepare(old, 3, [_staged(table, "b3", 1)])
