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


def _table(tmp_path):
    table = tmp_path / "t"
    table.mkdir()
    T.ensure_log(table)
    return table


def test_prepared_batches_are_invisible_until_published_once(tmp_path):
    table = _table(tmp_path)
    tdir = P.task_dir(table, "wc", 7)
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
    tdir = P.task_dir(table, "wc", 1)
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
    assert tdir.parent == table / P.PREPARED_DIR and "/" not in tdir.name
    for txid in (5, 6, 7):
        P.prepare(tdir, txid, [_staged(table, f"b{txid}", 1)])
    (tdir / P.txid_name(8)).mkdir()  # a PREPARE cut short before its listing: not prepared
    assert P.prepared_txids(tdir) == [5, 6, 7]
    assert P.discard(tdir, 6) == 3
    assert P.prepared_txids(tdir) == [5] and sorted(os.listdir(tdir)) == [P.txid_name(5)]
