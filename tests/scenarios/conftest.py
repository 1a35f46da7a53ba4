"""The `cluster` fixture: every scenario runs once on a LocalCluster and once on a dev cluster
(Nimbus + 2 supervisors as real processes: the run's shared one, tests/shared_clusters.py).

`-m "not zk and not cluster"` keeps only the local variants."""

from __future__ import annotations

import pytest
from scenario_harness import DevHarness, LocalHarness

# ~1 s each: not slow; the shared cluster's group of xdist workers (tests/parallel.py)
DEV_MARKS = [pytest.mark.cluster, pytest.mark.zk, pytest.mark.xdist_group("shared-clusters")]


@pytest.fixture(params=["local", "local-dedicated", pytest.param("dev", marks=DEV_MARKS),
                        pytest.param("dev-dedicated", marks=DEV_MARKS)])
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
