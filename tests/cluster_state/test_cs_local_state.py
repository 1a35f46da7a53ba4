"""LocalState: atomic versioned writes, pruning, crash leftovers and corrupt versions."""

from __future__ import annotations

import logging
import os
import shutil
import threading

import pytest

from cluster_state import LS_APPROVED_WORKERS, LS_ID, LS_LOCAL_ASSIGNMENTS, LocalAssignment, LocalState

pytestmark = pytest.mark.timeout(30)


def version_files(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(".state"))


def test_put_get_remove_and_persistence(tmp_path):
    state = LocalState(tmp_path / "ls")
    assert state.get(LS_ID) is None and state.get(LS_ID, "dflt") == "dflt" and state.snapshot() == {}
    state.put(LS_ID, "sup-1")
    state.put(LS_LOCAL_ASSIGNMENTS, {6700: LocalAssignment("wc-1", [(1, 1), (2, 3)])})
    state.update({LS_APPROVED_WORKERS: {"worker-a": 6700}, "n": 1})
    state.remove("n")
    state.remove("never-there")  # no new version for a no-op
    reopened = LocalState(tmp_path / "ls")
    assert reopened.snapshot() == {
        LS_ID: "sup-1",
        LS_LOCAL_ASSIGNMENTS: {6700: LocalAssignment("wc-1", [(1, 1), (2, 3)])},
        LS_APPROVED_WORKERS: {"worker-a": 6700},
    }
    assert reopened.versions() == [1, 2, 3, 4]


def test_a_store_that_is_not_durable_never_waits_on_fsync(tmp_path, monkeypatch):
    """Worker heartbeats are written this way: no wait on the disk."""
    durable = LocalState(tmp_path / "durable")
    calls = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd))
    durable.put("k", 1)
    assert len(calls) == 2  # the file, then the directory
    calls.clear()
    quick = LocalState(tmp_path / "quick", durable=False)
    for i in range(6):
        quick.put("k", i)
    assert calls == []
    assert LocalState(tmp_path / "quick").get("k") == 5 and quick.versions() == [3, 4, 5, 6]


def test_old_versions_are_pruned(tmp_path):
    state = LocalState(tmp_path, keep_versions=3)
    for i in range(10):
        state.put("i", i)
    assert state.versions() == [8, 9, 10]
    assert state.get("i") == 9
    with pytest.raises(ValueError):
        LocalState(tmp_path, keep_versions=1)


def test_crash_between_write_and_rename_leaves_old_state(tmp_path):
    state = LocalState(tmp_path)
    state.put(LS_ID, "sup-1")
    # A writer died after writing (part of) its temp file and before renaming it.
    (tmp_path / ".tmp-2-deadbeef").write_bytes(b"SPLS\x01half-written")
    assert LocalState(tmp_path).get(LS_ID) == "sup-1"
    assert state.versions() == [1]
    state.put("k", "v")  # the next writer removes the leftover
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]
    assert state.snapshot() == {LS_ID: "sup-1", "k": "v"}


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_corrupt_newest_version_falls_back_with_warning(tmp_path, caplog, damage):
    state = LocalState(tmp_path)
    state.put(LS_ID, "sup-1")
    state.put(LS_ID, "sup-2")
    newest = tmp_path / version_files(tmp_path)[-1]
    blob = newest.read_bytes()
    newest.write_bytes({
        "truncate": blob[: len(blob) - 3],
        "flip": blob[:-1] + bytes([blob[-1] ^ 0xFF]),
        "empty": b"",
        "garbage": b"not a local state file at all",
    }[damage])
    with caplog.at_level(logging.WARNING, logger="cluster_state.local_state"):
        assert state.get(LS_ID) == "sup-1"
        assert state.get(LS_ID) == "sup-1"
    warnings = [r for r in caplog.records if "falling back" in r.getMessage()]
    assert len(warnings) == 1 and newest.name in warnings[0].getMessage()  # warned once, naming the file
    state.put("after", True)  # builds on the good version, supersedes the bad one
    assert state.snapshot() == {LS_ID: "sup-1", "after": True}


def test_no_readable_version_starts_empty(tmp_path, caplog):
    state = LocalState(tmp_path)
    state.put(LS_ID, "sup-1")
    for name in version_files(tmp_path):
        (tmp_path / name).write_bytes(b"")
    with caplog.at_level(logging.ERROR, logger="cluster_state.local_state"):
        assert state.snapshot() == {}
    assert any("no readable version" in r.getMessage() for r in caplog.records)


def test_a_reader_never_brings_back_a_removed_directory(tmp_path, caplog):
    # A supervisor removes a dead worker's directory while another thread or process reads its
    # heartbeat: a reader that made the directory kept it on disk for good.
    owned = tmp_path / "workers" / "w1" / "heartbeats"
    LocalState(owned).put("beat", 1)
    reader = LocalState(owned, create=False)
    assert reader.get("beat") == 1
    shutil.rmtree(tmp_path / "workers" / "w1")
    with caplog.at_level(logging.WARNING, logger="cluster_state.local_state"):
        assert reader.get("beat") is None
        assert LocalState(owned, create=False).get("beat") is None
    assert not (tmp_path / "workers" / "w1").exists()
    assert caplog.records == []


def test_unrelated_files_are_ignored(tmp_path):
    (tmp_path / "README").write_text("x")
    (tmp_path / "abc.state").write_text("x")
    state = LocalState(tmp_path)
    state.put("a", 1)
    assert state.versions() == [1] and state.get("a") == 1


def test_unencodable_value_writes_nothing(tmp_path):
    state = LocalState(tmp_path)
    state.put("a", 1)
    with pytest.raises(TypeError):
        state.put("b", object())
    assert state.versions() == [1] and os.listdir(tmp_path).count(".lock") == 1
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_concurrent_writers_lose_no_update(tmp_path):
    # Separate instances (separate lock file descriptors), as separate processes would have.
    errors = []

    def writer(n):
        try:
            state = LocalState(tmp_path)
            for i in range(20):
                state.put(f"w{n}-{i}", i)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,), name=f"ls-writer-{n}") for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(LocalState(tmp_path).snapshot()) == 80
