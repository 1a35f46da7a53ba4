"""A swap's decisions (daemons/nimbus/swaps/steps.py), pure: when the old topology has stopped at a
checkpoint, when it may be taken, and every way a swap is given up (the old code runs on) or
goes on (the old code is gone) whatever happened to its client or its Nimbus."""

from __future__ import annotations

import pytest

from cluster_state.records import CheckpointMark, SwapRecord
from daemons.nimbus.swaps import steps

pytestmark = pytest.mark.timeout(30)

NOW = 1_800_000_000.0


def record(phase="stopping", **kw) -> SwapRecord:
    fields = dict(name="wc", old_id="wc-1-1", new_id="wc-2-2", savepoint="sp", phase=phase, started_secs=NOW - 10,
                  deadline_secs=NOW + 50)
    fields.update(kw)
    return SwapRecord(**fields)


def facts(status="stopping", spouts=(None,), committed=None, parked=False, now=NOW, replicated=True,
          new_running=False, new_code=steps.CODE_HERE) -> steps.Facts:
    marks = {"sentences": list(spouts),
             "$checkpointspout": [CheckpointMark(committed_txid=committed, parked=parked)]}
    return steps.Facts(now=now, old_status=status, marks=marks, stateful_spouts=frozenset({"sentences"}),
                       checkpoint_component="$checkpointspout", replicated=replicated, new_running=new_running,
                       new_code=new_code)


def quiet(txid):
    return CheckpointMark(quiet_since_txid=txid)


def test_stopped_once_every_spout_passed_a_checkpoint_and_the_latest_of_them_committed():
    assert steps.next_step(record(), facts(spouts=(quiet(7), None), committed=9)).kind == steps.WAIT
    assert steps.next_step(record(), facts(spouts=(quiet(7), quiet(8)), committed=7)).kind == steps.WAIT
    step = steps.next_step(record(), facts(spouts=(quiet(7), quiet(8)), committed=8))
    assert (step.kind, step.txid) == (steps.PARK, 8)
    assert steps.next_step(record(), facts(spouts=(), committed=8)).kind == steps.WAIT  # no heartbeat yet


def test_taken_once_parked_and_the_new_code_is_on_every_nimbus():
    r = record("parking")
    assert steps.next_step(r, facts(committed=8, parked=False)).kind == steps.WAIT
    assert steps.next_step(r, facts(committed=8, parked=True, replicated=False)).message == \
        "the new code to reach every Nimbus"
    step = steps.next_step(r, facts(committed=8, parked=True))
    assert (step.kind, step.txid) == (steps.TAKE, 8)


@pytest.mark.parametrize("phase", ["stopping", "parking", "writing"])
def test_before_the_kill_a_deadline_or_an_outside_change_gives_the_swap_up(phase):
    late = steps.next_step(record(phase), facts(now=NOW + 51))
    assert late.kind == steps.FAIL and late.undo and "within 60s" in late.message and "old code" in late.message
    # its own timer already put it back (a Nimbus that was away): nothing to undo
    back = steps.next_step(record(phase), facts(status="active", now=NOW + 51))
    assert back.kind == steps.FAIL and not back.undo
    activated = steps.next_step(record(phase), facts(status="active"))
    assert activated.kind == steps.FAIL and not activated.undo and "activated during the swap" in activated.message
    killed = steps.next_step(record(phase), facts(status=None))
    assert killed.kind == steps.FAIL and "was killed during the swap" in killed.message


def test_after_the_savepoint_the_swap_goes_on_whatever_the_time():
    assert steps.next_step(record("saved"), facts(now=NOW + 999)).kind == steps.KILL
    assert steps.next_step(record("saved"), facts(status=None, now=NOW + 999)).kind == steps.START
    assert steps.next_step(record("killed"), facts(status=None, now=NOW + 999)).kind == steps.START
    assert steps.next_step(record("killed"), facts(status=None, new_running=True)).kind == steps.DONE


def test_an_ended_swap_is_kept_for_an_hour():
    ended = record("done", ended_secs=NOW)
    assert steps.next_step(ended, facts(now=NOW + 60)).kind == steps.WAIT
    assert steps.next_step(ended, facts(now=NOW + steps.ENDED_KEPT_SECS)).kind == steps.FORGET


@pytest.mark.parametrize("phase", ["parking", "writing", "saved", "killed"])
def test_a_new_leader_waits_for_the_new_code_to_be_copied_before_it_takes_or_starts(phase):
    status = None if phase == "killed" else ("stopping" if phase != "saved" else "inactive")
    step = steps.next_step(record(phase, txid=8), facts(status=status, committed=8, parked=True,
                                                        new_code=steps.CODE_ELSEWHERE))
    assert (step.kind, step.message) == (steps.WAIT, "the new code to be copied to this Nimbus")


@pytest.mark.parametrize("phase", ["stopping", "parking", "saved"])
def test_new_code_on_no_nimbus_gives_the_swap_up_while_the_old_topology_is_there(phase):
    step = steps.next_step(record(phase), facts(committed=8, parked=True, new_code=steps.CODE_LOST))
    assert step.kind == steps.FAIL and step.undo
    assert "wc-2-2" in step.message and "is on no Nimbus" in step.message and "runs the old code" in step.message


def test_new_code_on_no_nimbus_after_the_kill_names_the_savepoint_to_start_from():
    step = steps.next_step(record("killed"), facts(status=None, new_code=steps.CODE_LOST))
    assert step.kind == steps.FAIL and not step.undo and "--from-savepoint sp" in step.message
    # started already: the code it runs is beside the point
    done = steps.next_step(record("killed"), facts(status=None, new_running=True, new_code=steps.CODE_LOST))
    assert done.kind == steps.DONE
