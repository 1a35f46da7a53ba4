"""The semantics suites again on the pure-Python twin of the per-tuple core (STORM_PY_PURE=1,
executor/core/__init__.py): local and worker-process acking, groupings, ticks, back-pressure,
timeouts, faults, multilang, windows/state and the Redis stream spout. The rest of the suite runs
on the compiled core; this subset keeps the twin complete while the whole run stays under 30
minutes on 2 cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITES = [
    "tests/unit",
    "tests/local/test_local_ack_merging.py",
    "tests/local/test_local_acker_placement.py",
    "tests/local/test_local_basic_columns.py",
    "tests/local/test_local_flow_control.py",
    "tests/local/test_local_lifecycle.py",
    "tests/local/test_local_worker_routing.py",
    "tests/scenarios/test_acking.py",
    "tests/scenarios/test_groupings.py",
    "tests/scenarios/test_ticks.py",
    "tests/scenarios/test_windows.py",
    "tests/scenarios/test_state.py",
    "tests/worker/test_worker_acking.py",
    "tests/worker/test_worker_backpressure.py",
    "tests/worker/test_worker_groupings.py",
    "tests/multilang/test_multilang_failures.py",
    "tests/state/test_state_faults.py",
    "tests/spouts/test_redis_stream_spout.py",
]


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.zk
@pytest.mark.timeout(1200)
def test_semantics_suites_pass_on_the_pure_twin(tmp_path):
    env = {**os.environ, "STORM_PY_PURE": "1"}
    log = tmp_path / "pure.log"
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                               "--basetemp", str(tmp_path / "t"), *SUITES],
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=1150,
                              stdin=subprocess.DEVNULL)
    text = log.read_text(errors="replace")
    summary = text.strip().splitlines()[-1] if text.strip() else "(no output)"
    assert proc.returncode == 0, f"the semantics suites failed on the pure twin: {summary}\n{text[-6000:]}"
    assert "core: pure" in subprocess.run(
        [sys.executable, "-m", "daemons.cli", "version"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60).stdout
