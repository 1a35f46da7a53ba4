"""The in-process suites again on the pure-Python twin of the per-tuple core (STORM_PY_PURE=1,
executor/core/__init__.py): the unit tests of the core modules and the LocalCluster suites (acking, groupings,
ticks, back-pressure, timeouts, windows, state and its faults, the Redis stream spout), with
`-m "not zk"` leaving out the scenarios' dev-cluster variants and `-k "not local-dedicated"` their
second thread arrangement.

Why that covers the twin: the twin differs from the compiled core only in the modules listed in
executor/core/__init__.py, and a LocalCluster runs every one of them in this process: routing,
the outbox and collectors, the acker, receive queues, and the worker transfer and receive path
(its workers exchange the serialized batches they would send over ZeroMQ), the stream spout's
ledger and cursor. A worker process or a dev cluster adds processes around the same core code,
not other core code; the rest of the suite runs those on the compiled core. Likewise the thread
arrangement (a shared executor thread, or one per executor) is decided in executor/scheduling.py
and executor/worker_plan.py, outside the core: the scenarios run once, in the default one, and
test_unit_scheduling.py runs the thread-per-executor runner on the twin's receive queue."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def core_unit_tests() -> list[str]:
    """The unit test files that import a core module (the others test the same code on both
    cores), without test_unit_core.py, whose tests choose their core themselves."""
    from executor.core import CORE_MODULES

    patterns = []
    for name in CORE_MODULES:
        package, _, leaf = name.rpartition(".")
        patterns += [re.escape(name), rf"from {re.escape(package)} import [^\n]*\b{leaf}\b"]
    uses = re.compile("|".join(patterns))
    return sorted(str(f.relative_to(REPO)) for f in (REPO / "tests" / "unit").glob("test_*.py")
                  if f.name != "test_unit_core.py" and uses.search(f.read_text()))


# In three parts of about a minute each, each its own xdist group (tests/parallel.py): one
# 200-second test was the longest single step of a parallel run.
PARTS = [
    [*core_unit_tests(),
     "tests/local/test_local_ack_merging.py",
     "tests/local/test_local_acker_placement.py",
     "tests/local/test_local_basic_columns.py",
     "tests/local/test_local_flow_control.py",
     "tests/local/test_local_lifecycle.py",
     "tests/local/test_local_worker_routing.py",
     "tests/scenarios/test_groupings.py"],
    ["tests/scenarios/test_acking.py",
     "tests/scenarios/test_ticks.py",
     "tests/scenarios/test_windows.py"],
    ["tests/scenarios/test_state.py",
     "tests/state/test_state_faults.py",
     "tests/spouts/test_redis_stream_spout.py"],
]


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.zk
@pytest.mark.timeout(600)
@pytest.mark.parametrize("suites", [pytest.param(part, id=f"part{i}", marks=pytest.mark.xdist_group(f"pure-core-{i}"))
                                    for i, part in enumerate(PARTS)])
def test_in_process_suites_pass_on_the_pure_twin(tmp_path, suites):
    # a fresh pytest of its own: not one of this run's xdist workers
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")} | {"STORM_PY_PURE": "1"}
    log = tmp_path / "pure.log"
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "--basetemp", str(tmp_path / "t"), "-m", "not zk", "-k", "not local-dedicated",
                               *suites],
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=570,
                              stdin=subprocess.DEVNULL)
    text = log.read_text(errors="replace")
    summary = text.strip().splitlines()[-1] if text.strip() else "(no output)"
    assert proc.returncode == 0, f"the in-process suites failed on the pure twin: {summary}\n{text[-6000:]}"
    assert "core: pure" in subprocess.run(
        [sys.executable, "-m", "daemons.cli", "version"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60).stdout
