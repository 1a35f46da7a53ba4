"""Nimbus HA's pure decisions (issue 21): who leads, the not-leader message and its parsing,
the Nimbus rows of `list` and nimbus/summary, where code is fetched from, and the RPC client
sending a write refused by a standby once more, to the leader it names."""

from __future__ import annotations

import pytest

from cluster_state.records import NimbusRegistration
from daemons.answers.cluster import ClusterInfo, NimbusRow
from daemons.cli_admin import nimbus_lines
from daemons.nimbus.code_sync import missing_code
from daemons.nimbus.leader import leader_node
from daemons.nimbus.nimbuses import nimbus_rows, peers
from daemons.reports.views import nimbus_summary
from daemons.rpc.client import RpcClient
from daemons.rpc.protocol import NotLeaderError, leader_in_message, not_leader_message
from daemons.rpc.server import RpcServer

pytestmark = pytest.mark.timeout(60)


def test_the_lowest_latch_sequence_leads_whatever_the_listing_order():
    assert leader_node(["latch-0000000012", "latch-0000000003", "latch-0000000100"]) == "latch-0000000003"
    assert leader_node(["other", "latch-x", "latch-0000000007"]) == "latch-0000000007"
    assert leader_node([]) is None and leader_node(["lock", "latch-"]) is None


def test_the_not_leader_message_names_the_leader_and_the_client_reads_it_back():
    text = not_leader_message("127.0.0.3:6627", "127.0.0.2:6627")
    assert text == "Nimbus 127.0.0.3:6627 is not the leader; the leader is 127.0.0.2:6627"
    assert leader_in_message(text) == "127.0.0.2:6627"
    assert NotLeaderError(text).leader == "127.0.0.2:6627"
    none = not_leader_message("127.0.0.3:6627", None)
    assert "no leader is elected now" in none and leader_in_message(none) is None
    assert leader_in_message("the leader is nowhere") is None


def test_nimbus_rows_take_the_leader_from_the_latch_not_from_the_stored_flag():
    regs = {"127.0.0.3:6627": NimbusRegistration("127.0.0.3", 6627, 100, "1.2", True),
            "127.0.0.2:6627": NimbusRegistration("127.0.0.2", 6627, 50, "1.2", False)}
    rows = nimbus_rows(regs, "127.0.0.2:6627", now=160)
    assert [(r.host, r.status, r.is_leader, r.uptime_secs) for r in rows] == [
        ("127.0.0.2", "Leader", True, 110), ("127.0.0.3", "Not a Leader", False, 60)]
    assert all(r.status == "Not a Leader" for r in nimbus_rows(regs, None, now=160))
    with pytest.raises(TypeError):
        NimbusRegistration(1, 6627, 0)  # type: ignore[arg-type]


def test_list_prints_nimbus_lines_only_with_more_than_one_nimbus():
    one = [NimbusRow(host="127.0.0.2", port=6627, status="Leader", is_leader=True, uptime_secs=5)]
    assert nimbus_lines([]) == [] and nimbus_lines(one) == []
    two = one + [NimbusRow(host="127.0.0.3", port=6627, status="Not a Leader", is_leader=False, uptime_secs=5)]
    assert nimbus_lines(two) == ["nimbus 127.0.0.2:6627 Leader", "nimbus 127.0.0.3:6627 Not a Leader"]


def test_nimbus_summary_lists_every_nimbus_or_the_one_the_ui_talks_to():
    info = {"nimbus_uptime_secs": 5, "nimbus_version": "1.0", "supervisors": [], "topologies": [],
            "nimbuses": [{"host": "a", "port": 1, "status": "Leader", "is_leader": True, "uptime_secs": 9,
                          "version": "1.0"},
                         {"host": "b", "port": 2, "status": "Not a Leader", "is_leader": False, "uptime_secs": 3,
                          "version": "1.0"}]}
    got = nimbus_summary(ClusterInfo.from_wire(info), "h0", 6627, None)["nimbuses"]
    assert [(n["host"], n["status"], n["isLeader"]) for n in got] == [("a", "Leader", True),
                                                                      ("b", "Not a Leader", False)]
    alone = nimbus_summary(ClusterInfo(nimbus_uptime_secs=5, supervisors=(), topologies=()), "h0", 6627,
                           None)["nimbuses"]
    assert [(n["host"], n["port"], n["status"], n["isLeader"]) for n in alone] == [("h0", 6627, "Leader", True)]


def test_code_is_fetched_from_the_leader_first_and_never_from_oneself():
    regs = {"c:1": {}, "a:1": {}, "b:1": {}}
    assert peers(regs, "b:1", "a:1") == ["b:1", "c:1"]
    assert peers(regs, "a:1", "a:1") == ["b:1", "c:1"]  # the leader itself asks the others
    assert peers(regs, None, "c:1") == ["a:1", "b:1"]
    assert missing_code(["t-2", "t-1", "t-3"], ["t-1", "gone-9"]) == ["t-2", "t-3"]


def test_a_write_refused_by_a_standby_is_sent_once_to_the_leader_it_names():
    calls = []
    leader = RpcServer("127.0.0.1", 0, {"kill": lambda a: calls.append(("leader", a["name"])) or "done",
                                        "who": lambda a: "leader"}, name="ha-leader")
    leader.start()
    standby_handlers = {
        "kill": lambda a: (_ for _ in ()).throw(
            NotLeaderError(not_leader_message("127.0.0.1:standby", f"127.0.0.1:{leader.port}"))),
        "who": lambda a: "standby"}
    standby = RpcServer("127.0.0.1", 0, standby_handlers, name="ha-standby")
    standby.start()
    try:
        with RpcClient("127.0.0.1", standby.port, timeout_secs=10) as client:
            assert client.call("who") == "standby"
            assert client.call("kill", name="wc") == "done"
            assert calls == [("leader", "wc")]
            assert client.call("who") == "leader"  # later calls go to the leader
        # a standby naming itself or no leader: the error reaches the caller
        lone = RpcServer("127.0.0.1", 0, {"kill": lambda a: (_ for _ in ()).throw(
            NotLeaderError(not_leader_message("x:1", None)))}, name="ha-lone")
        lone.start()
        try:
            with RpcClient("127.0.0.1", lone.port, timeout_secs=10) as client:
                with pytest.raises(NotLeaderError, match="no leader is elected now"):
                    client.call("kill", name="wc")
        finally:
            lone.stop()
    finally:
        standby.stop()
        leader.stop()


def test_an_election_round_takes_over_steps_down_or_only_says_what_it_found():
    from daemons.nimbus.leader import Leadership, election_step

    me, other = "127.0.0.2:6627", "127.0.0.3:6627"
    take = election_step(me, False, other, Leadership(me, True))
    assert take.take_over and not take.step_down and take.message == f"Nimbus {me} is the leader now (was {other}): recovering"
    assert election_step(me, True, me, Leadership(me, True)) == election_step(me, True, me, Leadership(me, True))
    assert not election_step(me, True, me, Leadership(me, True)).message  # still leading: nothing to say
    down = election_step(me, True, me, Leadership(None, False))
    assert down.step_down and not down.take_over and "leader: none now" in down.message
    stale = election_step(me, False, None, Leadership(me, False))
    assert not stale.take_over and "held by an earlier run" in stale.message
    standby = election_step(me, False, None, Leadership(other, False))
    assert not (standby.take_over or standby.step_down) and standby.message.endswith(f"the leader is {other}")
    assert not election_step(me, False, other, Leadership(other, False)).message  # unchanged
