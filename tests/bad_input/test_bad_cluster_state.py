"""Bad input to the cluster-state layer: damaged LocalState dirs, oversized and corrupt nodes.

Every case asserts the exact outcome: the value read back, the warning naming the path, or the
error type and that its message names the path (and size).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil

import msgpack
import pytest

from cluster_state import (
    SCHEMA_VERSION,
    Assignment,
    ClusterStateError,
    ConnectionState,
    DecodeError,
    ErrorInfo,
    InMemoryClusterState,
    InMemoryStore,
    LocalState,
    StormBase,
    StormClusterState,
    SupervisorInfo,
    WorkerHeartbeat,
)
from cluster_state import local_state as local_state_module
from cluster_state.codec import RECORD_EXT, encode_record
from cluster_state.errors import LocalStateError, NodeTooLargeError
from cluster_state.local_state import classify, next_version, parse_version, version_name
from cluster_state.protocol import MAX_REQUEST_BYTES, max_node_bytes

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]

LS_LOGGER = "cluster_state.local_state"


def warnings_naming(caplog, text):
    return [r for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def good_state(directory, value="good"):
    state = LocalState(directory)
    state.put("k", value)
    return state


# -- LocalState: pure decisions -------------------------------------------------------------


def test_only_our_spelling_of_a_version_is_a_version():
    assert parse_version(version_name(7)) == 7
    assert parse_version(version_name(10**25)) == 10**25  # past 20 digits: still ours
    for name in ("7.state", "0000000000000000000007.state", "00000000000000000000.state", "-3.state",
                 "abc.state", "０００００００００００００００００００７.state", version_name(7) + ".bak"):
        assert parse_version(name) is None, name


def test_classify_numbers_past_foreign_entries_and_never_owns_them():
    listing = classify([(version_name(3), "file"), (version_name(9), "directory"), ("7.state", "file"),
                        (".lock", "file"), (".tmp-4-ab12", "file"), (".tmp-5-cd", "directory")])
    assert listing.versions == [3]
    assert listing.temps == [".tmp-4-ab12"]
    assert next_version(listing) == 10  # past the directory named like version 9
    assert sorted(name for name, _ in listing.foreign) == sorted([version_name(9), ".tmp-5-cd", "7.state"])


# -- LocalState: stray entries ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["7.state", "abc.state", "-3.state", "0000000000000000000099.state",
                                  "00000000000000000000.state", "notes.txt"])
def test_stray_file_is_ignored_with_one_warning_and_kept(tmp_path, caplog, name):
    state = good_state(tmp_path)
    stray = tmp_path / name
    stray.write_bytes(b"\x00garbage that is not a version file")
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "good"
        for i in range(6):  # more writes than keep_versions: pruning runs
            state.put("i", i)
        assert LocalState(tmp_path).snapshot() == {"k": "good", "i": 5}
    assert len(warnings_naming(caplog, str(stray))) == 1  # once, however often the dir is opened
    assert stray.read_bytes() == b"\x00garbage that is not a version file"  # never pruned


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_non_file_named_like_the_next_version_is_ignored(tmp_path, caplog, kind):
    state = good_state(tmp_path)  # version 1
    entry = tmp_path / version_name(2)
    if kind == "directory":
        entry.mkdir()
        (entry / "inside").write_text("keep me")
    elif kind == "symlink":
        elsewhere = tmp_path.parent / f"{tmp_path.name}-target.state"
        shutil.copy(tmp_path / version_name(1), elsewhere)  # a valid version, but not ours to follow
        entry.symlink_to(elsewhere)
    else:
        os.mkfifo(entry)
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "good"
        for i in range(6):
            state.put("i", i)
        assert state.snapshot() == {"k": "good", "i": 5}
    assert len(warnings_naming(caplog, str(entry))) == 1
    assert os.path.lexists(entry)  # never deleted
    assert state.versions() == [5, 6, 7, 8]  # numbered past the entry's name (2)
    if kind == "directory":
        assert (entry / "inside").read_text() == "keep me"


def test_huge_version_number_with_garbage_falls_back_and_writes_go_on(tmp_path, caplog):
    state = good_state(tmp_path)
    huge = tmp_path / version_name(10**20 - 1)  # the largest 20-digit version
    huge.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "good"
        state.put("k", "after")
        assert LocalState(tmp_path).get("k") == "after"
    assert len(warnings_naming(caplog, huge.name)) == 1
    assert state.versions() == [1, 10**20 - 1, 10**20]


def test_huge_version_number_with_valid_content_is_read_and_superseded(tmp_path):
    state = good_state(tmp_path)
    os.replace(tmp_path / version_name(1), tmp_path / version_name(10**30))
    assert state.get("k") == "good"
    state.put("k", "next")
    assert state.versions() == [10**30, 10**30 + 1]
    assert LocalState(tmp_path).get("k") == "next"


# -- LocalState: damaged version files --------------------------------------------------------


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "padded", "payload-not-a-map",
                                    "bad-record"])
def test_damaged_newest_version_falls_back_with_warning(tmp_path, caplog, damage):
    state = good_state(tmp_path, "v1")
    state.put("k", "v2")
    newest = tmp_path / version_name(2)
    blob = newest.read_bytes()
    bad_record = msgpack.packb({"k": msgpack.ExtType(RECORD_EXT, msgpack.packb(
        {"schema": SCHEMA_VERSION, "type": "LocalAssignment", "fields": {"storm_id": "x"}}))})
    newest.write_bytes({
        "empty": b"",
        "truncated": blob[:-3],
        "garbage": os.urandom(64),
        "padded": blob + b"\x00" * 10,
        "payload-not-a-map": local_state_module._encode_file(msgpack.packb([1, 2])),
        "bad-record": local_state_module._encode_file(bad_record),
    }[damage])
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "v1"
        state.put("other", 1)
    assert len(warnings_naming(caplog, newest.name)) == 1
    assert LocalState(tmp_path).snapshot() == {"k": "v1", "other": 1}


def test_permission_denied_version_is_treated_as_corrupt(tmp_path, caplog, monkeypatch):
    state = good_state(tmp_path, "v1")
    state.put("k", "v2")
    newest = tmp_path / version_name(2)
    newest.chmod(0)
    if os.geteuid() == 0:  # root reads anything: make the open fail as it would for a daemon user
        real_open = os.open

        def open_denied(path, flags, *args, **kwargs):
            if os.fspath(path) == str(newest):
                raise PermissionError(errno.EACCES, "Permission denied", str(newest))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(local_state_module.os, "open", open_denied)
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "v1"
        state.put("k", "v3")
        assert state.get("k") == "v3"
    [warning] = warnings_naming(caplog, newest.name)
    assert "Permission denied" in warning.getMessage()


def test_every_version_damaged_starts_empty_and_writes_recover(tmp_path, caplog):
    state = good_state(tmp_path)
    (tmp_path / version_name(1)).write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.snapshot() == {}
        state.put("k", "fresh")
    assert LocalState(tmp_path).snapshot() == {"k": "fresh"}
    assert any("no readable version" in r.getMessage() and str(tmp_path) in r.getMessage()
               for r in caplog.records)


# -- LocalState: the directory itself ---------------------------------------------------------


def test_directory_that_is_a_regular_file_is_one_clear_error(tmp_path):
    path = tmp_path / "localstate"
    path.write_text("oops")
    with pytest.raises(LocalStateError, match="is not a directory") as info:
        LocalState(path)
    assert str(path) in str(info.value) and isinstance(info.value, ClusterStateError)
    with pytest.raises(LocalStateError, match="cannot create the directory") as info:
        LocalState(path / "below")
    assert str(path / "below") in str(info.value)


def test_directory_replaced_by_a_file_after_start_is_one_clear_error(tmp_path):
    path = tmp_path / "localstate"
    state = good_state(path)
    shutil.rmtree(path)
    path.write_text("oops")
    for call in (lambda: state.get("k"), lambda: state.put("k", "v")):
        with pytest.raises(LocalStateError, match="is not a directory") as info:
            call()
        assert str(path) in str(info.value)


def test_directory_removed_after_start_reads_empty_and_is_recreated_on_write(tmp_path, caplog):
    path = tmp_path / "localstate"
    state = good_state(path)
    shutil.rmtree(path)
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") is None
        state.put("k", "again")
    assert warnings_naming(caplog, str(path))
    assert LocalState(path).get("k") == "again"


def test_lock_that_is_a_directory_fails_writes_clearly_and_reads_still_work(tmp_path, caplog):
    state = good_state(tmp_path)
    (tmp_path / ".lock").unlink()
    (tmp_path / ".lock").mkdir()
    with caplog.at_level(logging.WARNING, logger=LS_LOGGER):
        assert state.get("k") == "good"
    assert warnings_naming(caplog, str(tmp_path / ".lock"))
    with pytest.raises(LocalStateError, match="writer lock") as info:
        state.put("k", "v")
    assert str(tmp_path / ".lock") in str(info.value)


def test_value_that_cannot_be_stored_names_the_key_and_writes_nothing(tmp_path):
    state = good_state(tmp_path)
    with pytest.raises(TypeError, match="'bad-key'") as info:
        state.update({"fine": 1, "bad-key": object()})
    assert str(tmp_path) in str(info.value)
    assert state.versions() == [1] and state.snapshot() == {"k": "good"}


# -- ZooKeeper: backends ------------------------------------------------------------------------


@pytest.fixture(params=["memory", "zookeeper"])
def storm_state(request):
    """A StormClusterState on the in-memory store or on the real ZooKeeper (own chroot)."""
    if request.param == "memory":
        cs = InMemoryClusterState(InMemoryStore(), "/storm")
    else:
        from cluster_state.zk import ZkClusterState

        cs = ZkClusterState(request.getfixturevalue("zk_conf"))
    state = StormClusterState(cs, owns_cluster_state=True)
    yield state
    state.disconnect()


def server_path(cs, path):
    root = getattr(cs, "settings", None)
    root = root.root if root is not None else "/storm"
    return path if root == "/" else root + path


# -- ZooKeeper: node size -------------------------------------------------------------------------


def test_write_over_the_node_limit_is_refused_naming_path_and_size(storm_state):
    cs = storm_state.cluster_state
    session = getattr(cs, "session_id", None)
    limit = max_node_bytes(server_path(cs, "/big/node"))
    assert MAX_REQUEST_BYTES - 2048 < limit < MAX_REQUEST_BYTES
    cs.set_data("/big/node", b"x" * limit)  # exactly the limit goes through
    assert cs.get_data("/big/node") == b"x" * limit
    writes = {
        "set_data": lambda data: cs.set_data("/big/node", data),
        "create_sequential": lambda data: cs.create_sequential("/big/seq-", data),
        "set_ephemeral_node": lambda data: cs.set_ephemeral_node("/big/eph", data),
    }
    for name, write in writes.items():
        size = max_node_bytes(server_path(cs, "/big/seq-" if name == "create_sequential" else "/big/x")) + 100
        with pytest.raises(NodeTooLargeError) as info:
            write(b"y" * size)
        message = str(info.value)
        assert "/big/" in message and str(size) in message and "jute.maxbuffer" in message, name
        assert isinstance(info.value, ClusterStateError)
    assert cs.get_data("/big/node") == b"x" * limit  # unchanged
    assert cs.get_children("/big") == ["node"]
    assert cs.connection_state == ConnectionState.CONNECTED
    assert getattr(cs, "session_id", None) == session  # no dropped connection, no new session


def _big_assignment():
    return Assignment("/code/" + "d" * MAX_REQUEST_BYTES, {"node-1": "host-1"}, {(1, 1): ("node-1", 6700)})


def _big_base():
    return StormBase("wc", 1, "active", 1, {f"bolt-{i}-{'b' * 100}": 1 for i in range(12000)})


@pytest.mark.parametrize("writer, record", [
    ("set_assignment", "the assignment of topology wc-1"),
    ("activate_storm", "the storm base of topology wc-1"),
    ("update_storm", "the storm base of topology wc-1"),
    ("worker_heartbeat", "the heartbeat of topology wc-1's worker node-1:6700"),
    ("supervisor_heartbeat", "the info of supervisor sup-1"),
])
def test_oversized_record_is_refused_naming_record_path_and_size(storm_state, writer, record):
    calls = {
        "set_assignment": lambda s: s.set_assignment("wc-1", _big_assignment()),
        "activate_storm": lambda s: s.activate_storm("wc-1", _big_base()),
        "update_storm": lambda s: s.update_storm("wc-1", component_executors=_big_base().component_executors),
        "worker_heartbeat": lambda s: s.worker_heartbeat("wc-1", "node-1", 6700, WorkerHeartbeat(
            "wc-1", [(1, 1)], 6700, 1, 1, {(1, 1): {"blob": "s" * MAX_REQUEST_BYTES}})),
        "supervisor_heartbeat": lambda s: s.supervisor_heartbeat("sup-1", SupervisorInfo(
            1, "host-1", "sup-1", [], list(range(6700, 6700 + 400_000)), None, 1)),
    }
    storm_state.activate_storm("wc-1", StormBase("wc", 1, "active", 1, {"spout": 1}))
    with pytest.raises(NodeTooLargeError) as info:
        calls[writer](storm_state)
    message = str(info.value)
    assert record in message and str(info.value.size) in message and info.value.path in message
    assert info.value.size > info.value.limit
    assert storm_state.storm_base("wc-1").component_executors == {"spout": 1}  # nothing half-written


def test_report_error_truncates_an_oversized_error(storm_state, caplog):
    text = "Traceback head\n" + "é" * MAX_REQUEST_BYTES + "\nValueError: the real cause"
    with caplog.at_level(logging.WARNING, logger="cluster_state.storm"):
        storm_state.report_error("wc-1", "split", "host-1", 6700, text)
    [stored] = storm_state.errors("wc-1", "split")
    assert stored.error.startswith("Traceback head") and stored.error.endswith("ValueError: the real cause")
    assert "truncated" in stored.error
    assert len(stored.error.encode("utf-8")) < MAX_REQUEST_BYTES
    assert warnings_naming(caplog, "wc-1/split")


# -- ZooKeeper: corrupt nodes ---------------------------------------------------------------------


def _record_bytes(type_name, fields, schema=SCHEMA_VERSION):
    envelope = msgpack.packb({"schema": schema, "type": type_name, "fields": fields})
    return msgpack.packb(msgpack.ExtType(RECORD_EXT, envelope))


_SUPERVISOR_FIELDS = {"time_secs": 1, "hostname": "h", "assignment_id": "s", "used_ports": [],
                      "meta": [6700], "scheduler_meta": None, "uptime_secs": 1}

CORRUPTIONS = {
    "garbage": lambda type_name, fields: b"\xc1\xff not msgpack",
    "empty": lambda type_name, fields: b"",
    "newer-schema": lambda type_name, fields: _record_bytes(type_name, fields, SCHEMA_VERSION + 1),
    "missing-fields": lambda type_name, fields: _record_bytes(type_name, {}),
    "wrong-record": lambda type_name, fields: encode_record(ErrorInfo("e", 1)) if type_name != "ErrorInfo"
    else _record_bytes("SupervisorInfo", _SUPERVISOR_FIELDS),
}
REASONS = {"garbage": "not valid msgpack", "empty": "empty data", "newer-schema": "schema",
           "missing-fields": "missing", "wrong-record": "expected a"}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_nodes_raise_decode_error_on_read_and_are_skipped_in_scans(storm_state, caplog, corruption):
    s, cs = storm_state, storm_state.cluster_state
    make = CORRUPTIONS[corruption]
    cs.set_data("/assignments/wc-1", make("Assignment", {}))
    cs.set_data("/storms/wc-1", make("StormBase", {}))
    cs.set_data("/supervisors/sup-bad", make("SupervisorInfo", _SUPERVISOR_FIELDS))
    cs.set_data("/workerbeats/wc-1/node-1-6700", make("WorkerHeartbeat", {}))
    cs.set_data("/errors/wc-1/split/e0000000000", make("ErrorInfo", {}))
    # Good neighbours, which the scans must still return.
    s.supervisor_heartbeat("sup-good", SupervisorInfo(1, "h", "sup-good", [], [6700], None, 1))
    s.report_error("wc-1", "split", "h", 6700, "a real error")

    reads = {
        "/assignments/wc-1": [lambda: s.assignment_info("wc-1"),
                              lambda: s.assignment_info_with_version("wc-1")],
        "/storms/wc-1": [lambda: s.storm_base("wc-1"), lambda: s.update_storm("wc-1", status="inactive")],
        "/supervisors/sup-bad": [lambda: s.supervisor_info("sup-bad")],
        "/workerbeats/wc-1/node-1-6700": [lambda: s.get_worker_heartbeat("wc-1", "node-1", 6700)],
    }
    for path, calls in reads.items():
        for call in calls:
            with pytest.raises(DecodeError) as info:
                call()
            assert info.value.path == path and path in str(info.value)
            assert REASONS[corruption] in str(info.value), str(info.value)

    # Listings still name every node; scans skip the corrupt one with a warning naming it.
    assert s.assignments() == ["wc-1"] and s.active_storms() == ["wc-1"]
    assert sorted(s.supervisors()) == ["sup-bad", "sup-good"] and s.heartbeat_storms() == ["wc-1"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cluster_state.storm"):
        assert list(s.all_supervisor_info()) == ["sup-good"]
        assert s.executor_beats("wc-1", {(1, 1): ("node-1", 6700)}) == {}
        assert [e.error for e in s.errors("wc-1", "split")] == ["a real error"]
        assert s.last_error("wc-1", "split").error == "a real error"
    for path in ("/supervisors/sup-bad", "/workerbeats/wc-1/node-1-6700", "/errors/wc-1/split/e0000000000"):
        assert warnings_naming(caplog, path), path


def test_record_that_cannot_be_encoded_names_the_record(storm_state):
    beat = WorkerHeartbeat("wc-1", [(1, 1)], 6700, 1, 1, {(1, 1): {"stats": object()}})
    with pytest.raises(TypeError, match="the heartbeat of topology wc-1's worker node-1:6700"):
        storm_state.worker_heartbeat("wc-1", "node-1", 6700, beat)
    assert storm_state.get_worker_heartbeat("wc-1", "node-1", 6700) is None


def test_report_error_escapes_text_that_is_not_valid_unicode(storm_state):
    storm_state.report_error("wc-1", "split", None, None, "bad bytes: " + b"\xff\xfe".decode("utf-8", "surrogateescape"))
    assert storm_state.last_error("wc-1", "split").error == "bad bytes: \\udcff\\udcfe"
