"""The sink table's log (executor/sinks/_log.py): snapshots replay commits and checkpoints, one
writer per version, a compaction that lost its inputs gives up, retention rules for deletion."""

from __future__ import annotations

import os
import threading

import pytest

from executor.sinks import _log as G

pytestmark = pytest.mark.timeout(60)


def batch(i: int, rows: int = 10) -> G.Entry:
    return G.Entry(f"storm_batch_id=b{i:04d}", "batch", {f"b{i:04d}": rows}, {"part-0.parquet": 100})


def test_an_empty_table_has_version_minus_one(tmp_path):
    assert G.read_snapshot(tmp_path) == G.Snapshot(-1)


def test_commits_add_and_remove(tmp_path):
    assert G.commit(tmp_path, "append", [batch(1)]) == 0
    assert G.commit(tmp_path, "append", [batch(2)]) == 1
    merged = G.Entry("_storm_compacted/storm_compaction=c1", "compacted", {"b0001": 10, "b0002": 10},
                     {"part-0.parquet": 150})
    assert G.commit(tmp_path, "compact", [merged], [batch(1).path, batch(2).path], clock=lambda: 50.0) == 2
    snap = G.read_snapshot(tmp_path)
    assert snap.version == 2 and list(snap.entries) == [merged.path]
    assert snap.batch_rows == {"b0001": 10, "b0002": 10}
    assert snap.tombstones == {batch(1).path: 50.0, batch(2).path: 50.0}


def test_adding_an_entry_twice_is_one_entry(tmp_path):
    G.commit(tmp_path, "import", [batch(1)])
    G.commit(tmp_path, "append", [batch(1)])
    assert list(G.read_snapshot(tmp_path).entries) == [batch(1).path]


def test_checkpoints_bound_the_replay_and_give_the_same_state(tmp_path):
    for i in range(G.CHECKPOINT_EVERY + 5):
        G.commit(tmp_path, "append", [batch(i)])
    names = os.listdir(G.log_dir(tmp_path))
    assert G.checkpoint_name(G.CHECKPOINT_EVERY) in names
    full = G.replay(G.Snapshot(-1), ((v, G._read_json(G.log_dir(tmp_path) / G.commit_name(v)))
                                     for v in range(G.CHECKPOINT_EVERY + 5)))
    assert G.read_snapshot(tmp_path) == full
    # Log cleanup (past the retention) removes what the checkpoint covers; the state is the same.
    assert G.clean_log(tmp_path, now=10**10, retention_secs=60) == G.CHECKPOINT_EVERY
    assert G.read_snapshot(tmp_path) == full
    assert G.latest_version(tmp_path) == G.CHECKPOINT_EVERY + 4
    assert G.clean_log(tmp_path, now=0, retention_secs=60) == 0


def test_a_missing_commit_is_named(tmp_path):
    for i in range(3):
        G.commit(tmp_path, "append", [batch(i)])
    os.unlink(G.log_dir(tmp_path) / G.commit_name(1))
    with pytest.raises(G.LogError, match=r"lacks commit\(s\) \[1\]"):
        G.read_snapshot(tmp_path)


def test_concurrent_writers_each_get_their_own_versions(tmp_path):
    def write(w: int):
        for i in range(25):
            G.commit(tmp_path, "append", [batch(w * 100 + i)])
    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    snap = G.read_snapshot(tmp_path)
    assert snap.version == 99 and len(snap.entries) == 100


def test_a_compaction_whose_inputs_went_gives_up(tmp_path):
    G.commit(tmp_path, "append", [batch(1)])
    G.commit(tmp_path, "append", [batch(2)])
    start = G.read_snapshot(tmp_path)

    def inputs_still_there(snapshot):
        if batch(1).path not in snapshot.entries:
            raise G.Conflict("b0001 was compacted by another")

    # Another compaction removed b0001 after `start` was read.
    G.commit(tmp_path, "compact", [G.Entry("_storm_compacted/storm_compaction=x", "compacted", {"b0001": 10}, {})],
             [batch(1).path])
    assert start.version == 1
    original = G.latest_version
    try:
        G.latest_version = lambda table: start.version  # as if it listed before the other commit
        with pytest.raises(G.Conflict):
            G.commit(tmp_path, "compact", [G.Entry("_storm_compacted/storm_compaction=y", "compacted",
                                                   {"b0001": 10, "b0002": 10}, {})],
                     [batch(1).path, batch(2).path], check=inputs_still_there)
    finally:
        G.latest_version = original
    assert set(G.read_snapshot(tmp_path).entries) == {batch(2).path, "_storm_compacted/storm_compaction=x"}


def test_removable_waits_for_the_retention():
    snap = G.Snapshot(3, {}, {"a": 100.0, "b": 190.0})
    assert G.removable(snap, now=200.0, retention_secs=50) == ["a"]
    assert G.removable(snap, now=300.0, retention_secs=50) == ["a", "b"]


def test_a_log_cleaned_down_to_its_checkpoint_keeps_its_version(tmp_path):
    for i in range(G.CHECKPOINT_EVERY + 1):
        G.commit(tmp_path, "append", [batch(i)])
    state = G.read_snapshot(tmp_path)
    for name in os.listdir(G.log_dir(tmp_path)):  # only the checkpoint left, as a cleanup could
        if name != G.checkpoint_name(G.CHECKPOINT_EVERY):
            os.unlink(G.log_dir(tmp_path) / name)
    assert G.latest_version(tmp_path) == G.CHECKPOINT_EVERY
    assert G.read_snapshot(tmp_path) == state
    assert G.commit(tmp_path, "append", [batch(999)]) == G.CHECKPOINT_EVERY + 1
    assert len(G.read_snapshot(tmp_path).entries) == G.CHECKPOINT_EVERY + 2


def _no_listing(monkeypatch):
    def refuse(path):
        raise AssertionError(f"listed {path}")
    monkeypatch.setattr(G.os, "listdir", refuse)


def test_readers_and_writers_find_the_newest_commit_without_listing_the_log(tmp_path, monkeypatch):
    for i in range(G.CHECKPOINT_EVERY + 3):
        G.commit(tmp_path, "append", [batch(i)])
    assert G.read_hint(tmp_path) == G.CHECKPOINT_EVERY
    listed = G._read_listed(tmp_path, 5, True)
    _no_listing(monkeypatch)
    assert G.read_snapshot(tmp_path) == listed
    assert G.latest_version(tmp_path) == G.CHECKPOINT_EVERY + 2
    assert G.commit(tmp_path, "append", [batch(999)]) == G.CHECKPOINT_EVERY + 3


def test_a_reader_skips_the_checkpoints_tombstones(tmp_path):
    for i in range(4):
        G.commit(tmp_path, "append", [batch(i)])
    merged = G.Entry("_storm_compacted/storm_compaction=c", "compacted", {f"b{i:04d}": 10 for i in range(4)}, {})
    G.commit(tmp_path, "compact", [merged], [batch(i).path for i in range(4)], clock=lambda: 7.0)
    for i in range(4):
        (tmp_path / batch(i).path).mkdir()  # not vacuumed yet: the checkpoint keeps their tombstones
    G.write_checkpoint(tmp_path, G.read_snapshot(tmp_path))
    G.commit(tmp_path, "append", [batch(9)])
    full, lite = G.read_snapshot(tmp_path), G.read_snapshot(tmp_path, tombstones=False)
    assert full.entries == lite.entries and full.version == lite.version == 5
    assert full.tombstones == {batch(i).path: 7.0 for i in range(4)} and lite.tombstones == {}


def test_a_checkpoint_of_one_line_is_still_read(tmp_path):
    for i in range(3):
        G.commit(tmp_path, "append", [batch(i)])
    state = G.read_snapshot(tmp_path)
    doc = {"log": 1, "version": 2, "entries": [e.to_json() for e in state.entries.values()], "tombstones": {"x": 1.0}}
    (G.log_dir(tmp_path) / G.checkpoint_name(2)).write_text(__import__("json").dumps(doc))
    assert G.read_snapshot(tmp_path).entries == state.entries
    assert G.read_snapshot(tmp_path).tombstones == {"x": 1.0}


def test_the_hint_never_goes_back_and_cleanup_keeps_what_follows_it(tmp_path):
    for i in range(2 * G.CHECKPOINT_EVERY + 1):
        G.commit(tmp_path, "append", [batch(i)])
    assert G.read_hint(tmp_path) == 2 * G.CHECKPOINT_EVERY
    G._write_hint(tmp_path, G.CHECKPOINT_EVERY)  # a slow writer of an older checkpoint
    assert G.read_hint(tmp_path) == 2 * G.CHECKPOINT_EVERY
    # A checkpoint file newer than the hint (its writer not yet at the hint): cleanup keeps
    # the commits after the hint, which readers going by the hint replay.
    os.replace(G.log_dir(tmp_path) / G.HINT, G.log_dir(tmp_path) / "saved")
    G._write_hint(tmp_path, G.CHECKPOINT_EVERY)
    G.clean_log(tmp_path, now=10**10, retention_secs=60)
    names = set(os.listdir(G.log_dir(tmp_path)))
    assert G.commit_name(G.CHECKPOINT_EVERY + 1) in names and G.commit_name(G.CHECKPOINT_EVERY - 1) not in names
    assert len(G.read_snapshot(tmp_path).entries) == 2 * G.CHECKPOINT_EVERY + 1
