"""Nimbus's reports as pure views over one snapshot (daemons/nimbus/summaries.py)."""

from __future__ import annotations

from cluster_state.records import (
    STATUS_ACTIVE,
    WORKER_ERRORS,
    Assignment,
    ErrorInfo,
    StormBase,
    SupervisorInfo,
    WorkerDeath,
)
from daemons.nimbus.liveness import Seen
from daemons.nimbus.summaries import HealthSettings, TopologyFacts, cluster_summary, topology_health

NOW = 1_700_000_100
SETTINGS = HealthSettings(task_timeout_secs=30, zk_root="/storm")
BASE = StormBase("wc", NOW - 100, STATUS_ACTIVE, 2, {"spout": 1, "split": 1})


def supervisor(deaths=(), recent=(), failures=()) -> SupervisorInfo:
    return SupervisorInfo(NOW, "127.0.0.1", "sup-1", (6700,), (6700, 6701), None, 50,
                          worker_deaths=tuple(deaths), recent_worker_deaths=tuple(recent), code_failures=tuple(failures))


def assigned(*slots) -> Assignment:
    enp = {(i + 1, i + 1): slot for i, slot in enumerate(slots)}
    return Assignment("/code", {"sup-1": "127.0.0.1"}, enp, {e: NOW - 90 for e in enp})


def test_a_live_topology_with_no_problem():
    a = assigned(("sup-1", 6700), ("sup-1", 6700))
    seen = {e: Seen(NOW - 2, NOW - 2) for e in a.executor_node_port}
    t = TopologyFacts("wc-1", BASE, a, {}, seen)
    got = cluster_summary([t], {"sup-1": supervisor()}, NOW, NOW - 500, "1.0", SETTINGS).to_wire()
    (row,) = got["topologies"]
    assert row["num_executors"] == 2 and row["num_workers"] == 1 and row["slots"] == [["sup-1", 6700]]
    assert row["live_workers"] == 1 and row["recent_restarts"] == 0 and row["last_error"] is None
    assert got["supervisors"][0]["used"] == 1 and got["nimbus_uptime_secs"] == 500


def test_health_is_decided_once_from_errors_deaths_and_slots():
    refusal = ErrorInfo("worker 127.0.0.1:6700 refused to start: the topology differs from its package manifest",
                        NOW - 3, "127.0.0.1", 6700)
    t = TopologyFacts("wc-1", BASE, assigned(("sup-1", 6700), ("sup-1", 6700)), {WORKER_ERRORS: refusal})
    sups = {"sup-1": supervisor(deaths=[WorkerDeath("wc-1", 6700, NOW - 10, "exited", exit_code=1)],
                                recent=[("wc-1", 4)])}
    h = topology_health(t, sups, NOW, SETTINGS)
    assert h.live_workers == 0 and h.recent_restarts == 4
    assert h.last_error.component == WORKER_ERRORS and "differs from its package manifest" in h.last_error.error
    # nothing assigned and no supervisor registered: Nimbus names its root
    lonely = topology_health(TopologyFacts("wc-1", BASE, None), {}, NOW, SETTINGS)
    assert lonely.last_error.error.startswith("no supervisor offers slots: none is registered under "
                                                    "ZooKeeper root '/storm'")


def test_a_topology_whose_checkpoints_stopped_says_why_in_its_row():
    # what `storm-py list` prints under its table (executor/checkpoint/stall.py decides)
    a = assigned(("sup-1", 6700))
    stuck = {"last_committed_txid": 12, "last_committed_at": NOW - 45, "rollbacks": 4, "recovering": 1}
    t = TopologyFacts("wc-1", BASE, a, {}, {}, {"topology.state.exactly.once": True}, stuck)
    (row,) = cluster_summary([t], {"sup-1": supervisor()}, NOW, NOW - 500, "1.0", SETTINGS).to_wire()["topologies"]
    assert row["checkpoint_stall"].startswith("checkpoints of topology wc have not committed for 45 s "
                                              "(the last was txid 12; 4 rollback(s)): it keeps rolling back")
    fresh = {**stuck, "last_committed_at": NOW - 2}
    (row,) = cluster_summary([TopologyFacts("wc-1", BASE, a, {}, {}, {}, fresh)], {"sup-1": supervisor()}, NOW,
                             NOW - 500, "1.0", SETTINGS).to_wire()["topologies"]
    assert "checkpoint_stall" not in row
    # no checkpoint figures (no state, or nothing reported yet): nothing to say
    (row,) = cluster_summary([TopologyFacts("wc-1", BASE, a)], {"sup-1": supervisor()}, NOW, NOW - 500, "1.0",
                             SETTINGS).to_wire()["topologies"]
    assert "checkpoint_stall" not in row


def test_a_crash_loops_cause_stays_the_headline_between_its_reports():
    # The cause (the worker's refusal) was reported 20 s ago; the newest death since left no
    # error line. Before: the headline alternated with "exit code 1: exited" as deaths came.
    refusal = ErrorInfo("worker 127.0.0.1:6700 refused to start: the topology differs from its package manifest",
                        NOW - 20, "127.0.0.1", 6700)
    t = TopologyFacts("wc-1", BASE, assigned(("sup-1", 6700), ("sup-1", 6700)), {WORKER_ERRORS: refusal})
    sups = {"sup-1": supervisor(deaths=[WorkerDeath("wc-1", 6700, NOW - 1, "exited", exit_code=1)],
                                recent=[("wc-1", 4)])}
    h = topology_health(t, sups, NOW, SETTINGS)
    assert h.last_error.error.startswith("workers keep dying (4 restarts in 5m): worker 127.0.0.1:6700 refused to "
                                         "start: the topology differs from its package manifest"), h.last_error
    # a cause older than the loop's window is not it
    old = ErrorInfo(refusal.error, NOW - 400, "127.0.0.1", 6700)
    h = topology_health(TopologyFacts("wc-1", BASE, t.assignment, {WORKER_ERRORS: old}), sups, NOW, SETTINGS)
    assert "differs from its package manifest" not in h.last_error.error and "exit code 1" in h.last_error.error


def test_a_swap_in_progress_and_the_savepoint_a_topology_started_from_are_in_its_row():
    # what `storm-py list` prints under its table (daemons/swap.py deactivates with the note)
    from dataclasses import replace

    from cluster_state.records import STATUS_INACTIVE

    a = assigned(("sup-1", 6700))
    stopping = replace(BASE, status=STATUS_INACTIVE, topology_action_options={"note": "swap in progress"})
    (row,) = cluster_summary([TopologyFacts("wc-1", stopping, a)], {"sup-1": supervisor()}, NOW, NOW - 500, "1.0",
                             SETTINGS).to_wire()["topologies"]
    assert row["note"] == "swap in progress" and "savepoint" not in row
    conf = {"topology.state.exactly.once": True, "topology.state.savepoint": "20261129T120000-tx7"}
    (row,) = cluster_summary([TopologyFacts("wc-2", BASE, a, {}, {}, conf)], {"sup-1": supervisor()}, NOW,
                             NOW - 500, "1.0", SETTINGS).to_wire()["topologies"]
    assert row["savepoint"] == "20261129T120000-tx7" and "note" not in row
