"""The on-disk layout under storm.local.dir (docs/architecture.md, "Local disk layout")."""

from __future__ import annotations

import pytest

from cluster_state import local_layout as L


def test_paths_follow_storms_layout(tmp_path):
    conf = {"storm.local.dir": str(tmp_path), "storm.log.dir": None}
    assert L.nimbus_dir(conf) == tmp_path / "nimbus"
    assert L.supervisor_localstate(conf) == tmp_path / "supervisor" / "localstate"
    assert L.supervisor_stormdist(conf, "wc-1-17") == tmp_path / "supervisor" / "stormdist" / "wc-1-17"
    assert L.supervisor_tmp(conf) == tmp_path / "supervisor" / "tmp"
    assert L.worker_heartbeats(conf, "abc") == tmp_path / "workers" / "abc" / "heartbeats"
    assert L.worker_pids(conf, "abc") == tmp_path / "workers" / "abc" / "pids"
    assert L.daemon_log(conf, "nimbus") == tmp_path / "logs" / "nimbus.log"
    assert L.worker_log(conf, "wc-1-17", 6700) == tmp_path / "logs" / "workers-artifacts" / "wc-1-17" / "6700" / "worker.log"


def test_log_dir_key_wins(tmp_path):
    conf = {"storm.local.dir": str(tmp_path / "a"), "storm.log.dir": str(tmp_path / "logs")}
    assert L.daemon_log(conf, "supervisor") == tmp_path / "logs" / "supervisor.log"


def test_names_with_spaces_and_accents_are_fine(tmp_path):
    assert L.supervisor_stormdist({"storm.local.dir": str(tmp_path)}, "Exclamation t\u00e9st-1-2").name == \
        "Exclamation t\u00e9st-1-2"


@pytest.mark.parametrize("bad", ["../x", "a/b", "a\\b", "..", ".", "", "a\x00b"])
def test_ids_cannot_escape(tmp_path, bad):
    with pytest.raises(ValueError, match="cannot be used in a path"):
        L.worker_root({"storm.local.dir": str(tmp_path)}, bad)
