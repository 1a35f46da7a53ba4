"""The `cluster` fixture: every scenario runs once on a LocalCluster and once on a dev cluster
(Nimbus + 2 supervisors as real processes: the run's shared one, tests/shared_clusters.py).

`-m "not zk and not cluster"` keeps only the local variants."""

from __future__ import annotations

import pytest
from scenario_harness import DevHarness, LocalHarness

# ~1 s each: not slow; the shared cluster's group of xdist workers (tests/parallel.py)
DEV_MARKS = [pytest.mark.cluster, pytest.mark.zk, pytest.mark.xdist_group("shared-clusters")]


def pytest_generate_tests(metafunc):
    """Each scenario on both executor arrangements in-process, and on real processes in the
    default one. The arrangement is decided inside WorkerProcess, which LocalCluster runs
    itself, with tuples crossing its workers as the same serialized batches: the dev cluster
    adds processes and ZeroMQ, which the default arrangement shows. A module whose claims are
    about timing across processes (acking: timeouts, replays) also runs the thread-per-executor
    arrangement there (`DEDICATED_ON_A_CLUSTER = True`); every dev variant costs two worker
    starts."""
    if "cluster" not in metafunc.fixturenames:
        return
    modes = ["local", "local-dedicated", pytest.param("dev", marks=DEV_MARKS)]
    if getattr(metafunc.module, "DEDICATED_ON_A_CLUSTER", False):
        modes.append(pytest.param("dev-dedicated", marks=DEV_MARKS))
    metafunc.parametrize("cluster", modes, indirect=True)


@pytest.fixture
def cluster(request, tmp_path):
    """A harness (scenario_harness.Harness): submit(file, name, conf) -> Run. Every scenario runs
    on both executor arrangements (executor/scheduling.py): the workers' shared executor thread
    (the default) and a thread per executor (`-dedicated`)."""
    if request.param.startswith("local"):
        harness = LocalHarness(tmp_path)
    else:
        harness = DevHarness(tmp_path, request.getfixturevalue("shared_dev_cluster"))
    if request.param.endswith("-dedicated"):
        harness.thread_mode = "dedicated"
    try:
        yield harness
    finally:
        harness.close()
