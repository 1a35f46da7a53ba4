import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

# tests/ holds shared fixture modules; make them importable regardless of the import mode.
sys.path.append(str(Path(__file__).parent))  # appended: tests/ must not shadow real packages

# The suite must never write into the user's word-count table (README's first command writes
# it): every test and every process a test starts writes a table of this run instead.
_RUN_DIR = tempfile.mkdtemp(prefix="storm-py-tests-")
os.environ["STORM_PY_WORD_COUNT_TABLE"] = os.path.join(_RUN_DIR, "word-count")

# The run starts ~500 Python processes (workers, daemons, commands), each importing ~100 of
# storm-py's modules: with PYTHONDONTWRITEBYTECODE (as some images set it) each compiled them from
# source again (~0.15 CPU-s a process). The run caches bytecode under its own directory instead,
# which its processes inherit and which goes with it: the checkout still gets no .pyc files.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(_RUN_DIR, "pycache")
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False

# Every Spark JVM the tests start (a sink's in a worker, the CLI's readers, a standalone master's)
# runs with the client compiler and the serial collector, as the tests' ZooKeeper does
# (cluster_state/zkserver.py): the same Spark, for runs of seconds, at about 60% of the CPU (the
# word count's JVM: 36 s of CPU in a 25 s run, 22 s so). Spark's launcher adds these variables to
# the java command line it builds (spark-class); a user's own setting is kept.
_TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# And with a class-data-sharing archive of Spark's classes (tests/spark_archive.py), built in the
# background by the run's first process (xdist's workers inherit its environment): JVMs started
# before it is ready run without it.
_ARCHIVE_BUILD = None
if "SPARK_SUBMIT_OPTS" not in os.environ and "PYTEST_XDIST_WORKER" not in os.environ:
    import spark_archive

    _archive = spark_archive.archive_path()
    if _archive is not None:
        _ARCHIVE_BUILD = spark_archive.start_build(_archive, _TEST_JVM_OPTS)
        _TEST_JVM_OPTS += f" -XX:SharedArchiveFile={_archive} {spark_archive.QUIET}"
for _var in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
    os.environ.setdefault(_var, _TEST_JVM_OPTS)

from redis_fixture import *  # noqa: E402,F401,F403
from shared_clusters import *  # noqa: E402,F401,F403
from spark_connect_fixture import *  # noqa: E402,F401,F403
from spark_connect_fixture import SHARED_DIR_ENV  # noqa: E402
from zk_fixture import *  # noqa: E402,F401,F403
from zk_fixture import SESSION_PIDS, SESSION_THREADS  # noqa: E402

from daemons.process_start import process_start  # noqa: E402

# What the run's test processes share (the Spark Connect server, tests/spark_connect_fixture.py)
# lives in the run directory of its first process, which xdist's workers (and the pytest a test
# runs) inherit through the environment; that process alone stops it at the end.
_OWNS_SHARED = SHARED_DIR_ENV not in os.environ
os.environ.setdefault(SHARED_DIR_ENV, _RUN_DIR)

# Markers follow cost: heavy fixtures mark their tests, and the fast tier starts no process
# (tests/suite_rules.py).
pytest_plugins = ["suite_rules", "parallel", "warm_cache"]

# How long a test's threads and child processes may take to finish once the test returned
# (a poll: a clean test pays nothing).
_LEAK_GRACE_SECS = 10.0


def _children() -> dict[int, psutil.Process]:
    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out[p.pid] = p
        except psutil.NoSuchProcess:
            pass
    return out


def _under_fixture_process(p: psutil.Process, me: int, before: dict) -> bool:
    """Whether an ancestor below pytest existed before the test or is a session fixture's
    (a Spark JVM's Python workers, a session ZooKeeper): the test did not start it."""
    q = p.parent()
    while q is not None and q.pid != me:
        if q.pid in before or q.pid in SESSION_PIDS:
            return True
        q = q.parent()
    return False


def _describe(p: psutil.Process) -> str:
    try:
        return f"pid {p.pid} ({' '.join(p.cmdline())[:200] or p.name()})"
    except psutil.Error:
        return f"pid {p.pid}"


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail a test that leaves behind a child process or a thread it started.

    Taken after the broader-scoped fixtures set up (autouse, function scope) and checked after
    the test's other function fixtures tore down, so a session's ZooKeeper or a module's Spark
    session counts as already there. Process starts on the boot clock guard against a reused pid
    (psutil's create times move when the system clock is stepped: r22 killed its own Spark JVM)."""
    procs_before = {pid: process_start(pid) for pid in _children()}
    threads_before = set(threading.enumerate())
    yield

    def new_procs() -> list[psutil.Process]:
        out = []
        me = os.getpid()
        for pid, p in _children().items():
            try:
                if pid in SESSION_PIDS or _under_fixture_process(p, me, procs_before):
                    continue  # a fixture's server, or what a fixture's long-lived process started
                if procs_before.get(pid) != process_start(pid):
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    def new_threads() -> list[threading.Thread]:
        # _DummyThread: a thread started outside Python (e.g. the JVM calling back through py4j)
        # that Python only sees once it runs Python code; it never "ends" from Python's view.
        return [t for t in threading.enumerate()
                if t not in threads_before and t not in SESSION_THREADS and t.is_alive()
                and not isinstance(t, threading._DummyThread)]

    deadline = time.monotonic() + _LEAK_GRACE_SECS
    while (new_procs() or new_threads()) and time.monotonic() < deadline:
        time.sleep(0.02)  # poll: things the test stopped may take a moment to end
    procs, threads = new_procs(), new_threads()
    problems = []
    if procs:
        problems.append("child processes still running: " + "; ".join(_describe(p) for p in procs))
        for p in procs:  # do not let one leak fail every following test
            try:
                p.kill()
            except psutil.Error:
                pass
    if threads:
        problems.append("threads still running: " + ", ".join(sorted(t.name for t in threads)))
        SESSION_THREADS.update(threads)  # reported once, here
    if problems:
        pytest.fail(f"test left behind {' and '.join(problems)} (after {_LEAK_GRACE_SECS:g}s)",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the test's fixtures, and a module's whose last test this was, are torn down
    import shared_clusters

    shared_clusters.after_test(item)


def pytest_sessionfinish(session, exitstatus):
    import shutil

    if _ARCHIVE_BUILD is not None:
        import spark_archive

        spark_archive.stop_build(_ARCHIVE_BUILD)
    if _OWNS_SHARED:
        import spark_connect_fixture

        spark_connect_fixture.stop_shared_server()
    shutil.rmtree(_RUN_DIR, ignore_errors=True)
