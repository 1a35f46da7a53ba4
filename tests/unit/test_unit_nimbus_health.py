"""What `storm-py list` says about a topology's health (daemons/nimbus/health.py) and how it prints."""

from __future__ import annotations

from dataclasses import replace

from daemons.answers.cluster import TopologyProblem
from daemons.cli_admin import _last_error
from daemons.nimbus import health


def test_a_missing_module_is_named_as_a_missing_install():
    line = "ModuleNotFoundError: No module named 'nltk'"
    assert health.explain(line) == ("module 'nltk' is not installed in the workers' Python on this host "
                                    f"(the topology imports it): {line}")
    assert health.explain("ValueError: boom ") == "ValueError: boom"


def test_newest_problem_takes_the_newest_of_errors_and_deaths():
    errors = {"split": [(100, "Traceback (most recent call last):\n  ...\nValueError: x", "h1", 6700)]}
    deaths = [(90, "", "worker w on port 6701 exited", 6701, "h2", None, None)]
    p = health.newest_problem(errors, deaths)
    assert (p.time_secs, p.text, p.component, p.host, p.port) == (100, "ValueError: x", "split", "h1", 6700)
    p = health.newest_problem(errors, [(120, "", "worker w on port 6701 exited", 6701, "h2", None, None)])
    assert (p.text, p.component, p.host, p.port) == ("worker w on port 6701 exited", None, "h2", 6701)
    assert health.newest_problem({}, []) is None


def test_no_slots_says_why():
    assert health.no_slots_problem(0, 0, "/storm", 5) is None
    assert "none is registered under ZooKeeper root '/storm'" in health.no_slots_problem(3, 0, "/storm", 5).text
    assert health.no_slots_problem(3, 2, "/storm", 5).text.startswith("3 executor(s) have no slot")


def test_the_lists_last_error_column():
    p = TopologyProblem(time_secs=1000, error="ValueError:   boom\nmore", component="split", host="h1", port=6700)
    assert _last_error(p, 1012) == "split@h1:6700 0m12s ago: ValueError: boom more"
    assert _last_error(replace(p, component=None), 1012) == "h1:6700 0m12s ago: ValueError: boom more"
    assert _last_error(p, 1000 + 601) == "-"  # history, not what is wrong now
    assert _last_error(None, 0) == "-"
    long = _last_error(replace(p, error="x" * 5000), 1012)
    assert len(long) == health.MAX_ERROR_CHARS and long.endswith("...")


def test_a_crash_looping_worker_is_not_live_between_its_deaths():
    from daemons.nimbus.liveness import Seen

    slots = {(1, 1): ("s1", 6700), (2, 2): ("s1", 6700), (3, 3): ("s2", 6701)}
    # heartbeats written at 104 (their own clock), seen by Nimbus at 106
    seen = {(1, 1): Seen(104, 106.0), (2, 2): Seen(104, 106.0), (3, 3): Seen(104, 106.0)}
    assert health.live_workers(slots, seen, {}, 110.0, 30) == 2
    # s1:6700's worker died after writing its heartbeat (even if Nimbus saw it later): not live
    assert health.live_workers(slots, seen, {("s1", 6700): 105}, 110.0, 30) == 1
    assert health.live_workers(slots, seen, {("s1", 6700): 104}, 110.0, 30) == 1  # the same second
    assert health.live_workers(slots, seen, {("s1", 6700): 103}, 110.0, 30) == 2  # relaunched since
    assert health.live_workers(slots, seen, {}, 137.0, 30) == 0  # nothing heartbeating


def test_a_death_says_how_the_process_ended_and_a_crash_loop_says_so():
    assert health.death_text("", "worker w on port 6701 exited before its first heartbeat", 3) == (
        "exit code 3: worker w on port 6701 exited before its first heartbeat")
    assert health.death_text("", "worker w timed out", None, "SIGKILL") == "SIGKILL: worker w timed out"
    assert health.death_text("ValueError: x", "exited", 1) == "ValueError: x"  # the error says enough
    p = health.newest_problem({}, [(120, "", "worker w on port 6701 exited", 6701, "h2", 3, None)])
    assert p.text == "exit code 3: worker w on port 6701 exited" and p.bare
    assert health.crash_loop_problem(p, 2, 0) is p  # a restart or two: not yet a loop
    looping = health.crash_loop_problem(p, 5, 0)
    assert looping.text == "workers keep dying (5 restarts in 5m), exit code 3: worker w on port 6701 exited"
    assert (looping.host, looping.port, looping.time_secs) == ("h2", 6701, 120)
    assert health.crash_loop_problem(p, 5, 1).text.startswith("a worker keeps dying (5 restarts")
    assert health.crash_loop_problem(None, 9, 0) is None
    traced = health.newest_problem({}, [(120, "ValueError: x", "worker w exited", 6701, "h2", 1, None)])
    assert health.crash_loop_problem(traced, 5, 0) is traced  # its error says what is wrong


def test_a_sigkilled_worker_says_so_before_what_its_log_ends_with():
    # Before: a worker SIGKILLed while its sink wrote showed its Spark JVM's dying words
    # ("SparkException: ... Block broadcast_15 does not exist") as the topology's last error.
    spark = "org.apache.spark.SparkException: [INTERNAL_ERROR_STORAGE] Block broadcast_15 does not exist."
    text = health.death_text(spark, "worker w on port 6700 exited", None, "SIGKILL")
    assert text == f"SIGKILL: worker w on port 6700 exited (its log's last error: {spark})"
    p = health.newest_problem({}, [(100, spark, "worker w on port 6700 exited", 6700, "h1", None, "SIGKILL")])
    assert p.text.startswith("SIGKILL: worker w on port 6700 exited") and not p.bare
    assert health.death_text("ValueError: x", "exited", None, "SIGSEGV") == "ValueError: x"  # its own crash


def test_a_worker_killed_for_its_memory_says_so_before_what_it_logged():
    # Before: the worker log's last error line was the headline and the limit only in supervisor.log.
    reason = ("worker w1 on port 6700 used 2600 MB of memory, over supervisor.worker.memory.limit.mb (2048 MB): "
              "killed")
    text = health.death_text("ValueError: unrelated", reason, None, "SIGKILL")
    assert text.startswith(reason) and "its log's last error: ValueError: unrelated" in text
    assert health.death_text("", reason, None, "SIGKILL") == reason
    (p,) = [health.newest_problem({}, [(100, "", reason, 6700, "h1", None, "SIGKILL")])]
    assert not p.bare and p.text == reason


def test_a_component_error_says_the_users_error_first_and_whole():
    line = ("executor.errors.ComponentError: component 'bad' task 2 raised in prepare: ConnectionError: "
            "cannot reach the cache at 127.0.0.1:11985 " + "(retried) " * 20)
    p = health.newest_problem({"bad": [(120, "Traceback ...\n  File x\n" + line, "h1", 6700)]}, [])
    assert p.text.startswith("ConnectionError: cannot reach the cache at 127.0.0.1:11985 ")
    assert p.text.endswith("(retried) (task 2, in prepare)") and p.component == "bad"
    assert health.short(p.text) == p.text  # the list's column keeps it whole
    died = health.death_text(line, "worker w exited", 1)
    assert died.startswith("ConnectionError: cannot reach") and "ComponentError" not in died
